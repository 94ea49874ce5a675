#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# meshccl-run speaks its users' launchers: unprefixed output by default (so
# scripts parsing nccl-tests output work), mpirun's --tag-output and srun's
# --label / -l prefixes in their own formats, mpirun's -np, -x VAR=value, --oversubscribe and
# --allow-run-as-root, torchrun's --nproc_per_node and --nnodes 1; an MPI
# program (an ELF linking libmpi.so) gets a warning that its ranks would be
# MPI singletons.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
# shellcheck disable=SC2119 # no test program: only meshccl-run is needed
need_progs
unset MESHCCL_RUN_TAG_OUTPUT
ranks='echo "r=$RANK/$WORLD_SIZE"'

"$RUN" -n 2 bash -c "$ranks" >"$TMP/plain" 2>&1
expect_eq "default: output unprefixed" "$(sort "$TMP/plain" | tr '\n' ' ')" "r=0/2 r=1/2 "
"$RUN" -n 2 --tag-output bash -c "$ranks; echo e=\$RANK >&2" >"$TMP/tag" 2>"$TMP/tagerr"
expect_eq "--tag-output: Open MPI's \"[1,rank]<stdout>:\" prefixes" \
  "$(sort "$TMP/tag" | tr '\n' ' ')" "[1,0]<stdout>:r=0/2 [1,1]<stdout>:r=1/2 "
expect_eq "--tag-output: \"[1,rank]<stderr>:\" on stderr" \
  "$(grep -v '^meshccl-run' "$TMP/tagerr" | sort | tr '\n' ' ')" "[1,0]<stderr>:e=0 [1,1]<stderr>:e=1 "
for flag in --label -l; do
  "$RUN" -n 2 "$flag" bash -c "$ranks" >"$TMP/tag" 2>&1
  expect_eq "$flag: srun's \"rank: \" prefixes" "$(sort "$TMP/tag" | tr '\n' ' ')" "0: r=0/2 1: r=1/2 "
done
MESHCCL_RUN_TAG_OUTPUT=1 "$RUN" -n 2 bash -c "$ranks" >"$TMP/envtag" 2>&1
expect_eq "MESHCCL_RUN_TAG_OUTPUT=1: prefixes" "$(sort "$TMP/envtag" | tr '\n' ' ')" \
  "[0] r=0/2 [1] r=1/2 "
MESHCCL_RUN_TAG_OUTPUT=1 "$RUN" --no-tag -n 1 bash -c "$ranks" >"$TMP/notag" 2>&1
expect_eq "--no-tag wins over MESHCCL_RUN_TAG_OUTPUT" "$(cat "$TMP/notag")" "r=0/1"

"$RUN" --allow-run-as-root --oversubscribe -np 3 -x MC_A=one -x MC_B=two=2 -x HOME \
  bash -c 'echo "$RANK $MC_A $MC_B"' >"$TMP/mpirun" 2>&1
expect_eq "mpirun spellings: -np 3, -x VAR=value (value may hold '=')" \
  "$(sort "$TMP/mpirun" | tr '\n' '|')" "0 one two=2|1 one two=2|2 one two=2|"
"$RUN" --standalone --nnodes 1 --nproc_per_node 2 bash -c "$ranks" >"$TMP/torchrun" 2>&1
expect_eq "torchrun spellings: --nproc_per_node 2, --nnodes 1" \
  "$(sort "$TMP/torchrun" | tr '\n' ' ')" "r=0/2 r=1/2 "
"$RUN" --nproc-per-node=2 bash -c "$ranks" >"$TMP/torchrun2" 2>&1
expect_eq "--nproc-per-node=2" "$(sort "$TMP/torchrun2" | tr '\n' ' ')" "r=0/2 r=1/2 "

"$RUN" --nnodes 2 -n 2 true >"$TMP/nnodes" 2>&1
expect_eq "--nnodes 2: usage error (exit 2)" "$?" 2
expect_grep "--nnodes 2: says to use another launcher across hosts" "$TMP/nnodes" \
  "^meshccl-run: starts ranks on this host only \(use mpirun, srun or torchrun across hosts\); got --nnodes '2'$"
"$RUN" -x 1BAD=x -n 1 true >"$TMP/badx" 2>&1
expect_eq "-x 1BAD=x: usage error (exit 2)" "$?" 2
expect_grep "-x 1BAD=x: names the bad export" "$TMP/badx" "^meshccl-run: -x needs VAR or VAR=value, got '1BAD=x'$"

# An MPI program: the warning names the library, the job still runs.
if command -v mpicc >/dev/null 2>&1; then
  printf '#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n' \
    >"$TMP/mpi_app.c"
  if mpicc -o "$TMP/mpi_app" "$TMP/mpi_app.c" 2>"$TMP/mpicc.err"; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$RUN" -n 2 "$TMP/mpi_app" \
      >"$TMP/mpi.out" 2>&1
    expect_grep "MPI program: warned that its ranks are MPI singletons" "$TMP/mpi.out" \
      "^meshccl-run: warning: $TMP/mpi_app links libmpi\.so[.0-9]* \(an MPI program\): started by meshccl-run each of the 2 ranks is an MPI singleton"
  else
    not_ok "mpicc builds a test program: $(head -c 300 "$TMP/mpicc.err")"
  fi
elif [ "${CI:-}" = true ]; then
  not_ok "mpicc present (Debian: openmpi-bin libopenmpi-dev; make deps installs it)"
else
  echo "# skip: mpicc not found (Debian: apt-get install libopenmpi-dev): MPI warning not tested"
fi
"$RUN" -n 2 /bin/true >"$TMP/nompi" 2>&1
expect_eq "a program without MPI: no warning" "$(grep -c 'MPI program' "$TMP/nompi")" 0

mp_finish
