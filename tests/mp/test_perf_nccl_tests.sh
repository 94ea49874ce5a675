#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# meshccl-perf as a user of nccl-tests' scripts expects it (src/common.cu,
# src/util.cu): the table's header lines and the summary lines exactly; one
# rank without a launcher (as nccl-tests on one GPU without MPI); -S's
# timestamp column; NCCL_TESTS_MIN_BW failing with exit 1 and nccl-tests'
# FAILED verdict; NCCL_TESTS_SPLIT / NCCL_TESTS_SPLIT_MASK giving groups made
# with ncclCommSplit; -M's memory line; GPU-only flags (-x, -D, -V) accepted
# with a note and no change in the results; -u; the shared library linked.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs
PERF="$MC_BUILD/bin/meshccl-perf"
# Users see meshccl-run's output untagged.
unset MESHCCL_RUN_TAG_OUTPUT

# expect_line NAME FILE LINE: LINE is one whole line of FILE, byte for byte.
expect_line() {
  if grep -Fxq -- "$3" "$2"; then
    ok "$1"
  else
    not_ok "$1"
    echo "#   no line is: '$3'"
    show "$2"
  fi
}
TS='[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}'

# --- one rank, no launcher: nccl-tests' layout line by line -------------------------------
env -u RANK -u WORLD_SIZE -u NCCL_COMM_ID timeout 30 "$PERF" all_reduce -b 8 -e 1K -f 4 -n 2 \
  >"$TMP/one.out" 2>&1
expect_success "one rank without a launcher: exit 0" "$?" "$TMP/one.out"
expect_line "one rank: starting line" "$TMP/one.out" "# Collective test starting: all_reduce_perf"
expect_line "one rank: parameter line" "$TMP/one.out" \
  "# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 4(factor) warmup iters: 1 iters: 2 agg iters: 1 validation: 1 graph: 0 unalign: 0"
expect_grep "one rank: one device line, group 0" "$TMP/one.out" \
  "^#  Rank  0 Group  0 Pid +[0-9]+ on +[^ ]+ device  0 \[host\] meshccl host memory$"
expect_eq "one rank: no other rank" "$(grep -c '^#  Rank' "$TMP/one.out")" 1
expect_line "header row 0" "$TMP/one.out" \
  "#                                                              out-of-place                       in-place          "
expect_line "header row 1" "$TMP/one.out" \
  "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong "
expect_line "header row 2" "$TMP/one.out" \
  "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         "
expect_eq "one rank: sizes 8, 32, 128, 512" \
  "$(grep -E '^ +[0-9]+ ' "$TMP/one.out" | awk '{print $1}' | tr '\n' ' ')" "8 32 128 512 "
expect_line "summary: out of bounds" "$TMP/one.out" "# Out of bounds values : 0 OK"
expect_grep "summary: average bus bandwidth, no verdict without NCCL_TESTS_MIN_BW" "$TMP/one.out" \
  "^# Avg bus bandwidth    : [0-9.e+-]+ $"
expect_eq "summary: the last five lines" "$(tail -n 5 "$TMP/one.out" | tr '\n' '|')" \
  "# Avg bus bandwidth    : $(sed -n 's/^# Avg bus bandwidth    : \([^ ]*\) $/\1/p' "$TMP/one.out") |#|# Collective test concluded: all_reduce_perf|#||"

# --- -S: a timestamp after the in-place results --------------------------------------------
env -u RANK -u WORLD_SIZE timeout 30 "$PERF" sendrecv -b 8 -e 64 -f 8 -n 1 -S 1 >"$TMP/ts.out" 2>&1
expect_success "-S 1: exit 0" "$?" "$TMP/ts.out"
expect_line "-S 1: header row 1 ends with timestamp" "$TMP/ts.out" \
  "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong           timestamp"
expect_line "-S 1: header row 2 shows the format" "$TMP/ts.out" \
  "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)           %Y-%m-%d %H:%M:%S"
expect_eq "-S 1: both rows end with a timestamp" \
  "$(grep -cE "^ +[0-9]+ .* (0|N/A)  $TS$" "$TMP/ts.out")" 2

# --- NCCL_TESTS_MIN_BW ------------------------------------------------------------------------
NCCL_TESTS_MIN_BW=1e9 timeout 30 "$RUN" -n 2 "$PERF" all_gather -b 64 -e 1K -f 4 -n 2 \
  >"$TMP/minbw.out" 2>"$TMP/minbw.err"
expect_eq "NCCL_TESTS_MIN_BW=1e9: exit 1" "$?" 1
expect_grep "NCCL_TESTS_MIN_BW=1e9: nccl-tests' FAILED verdict" "$TMP/minbw.out" \
  "^# Avg bus bandwidth    : [0-9.e+-]+ FAILED$"
expect_line "NCCL_TESTS_MIN_BW=1e9: the data itself was right" "$TMP/minbw.out" \
  "# Out of bounds values : 0 OK"
expect_grep "NCCL_TESTS_MIN_BW=1e9: says why on stderr" "$TMP/minbw.err" \
  "^meshccl-perf: average bus bandwidth [0-9.e+-]+ GB/s is below 90% of NCCL_TESTS_MIN_BW=1e\+09$"
NCCL_TESTS_MIN_BW=0 timeout 30 "$RUN" -n 2 "$PERF" all_gather -b 64 -e 1K -f 4 -n 2 \
  >"$TMP/minbw0.out" 2>&1
expect_success "NCCL_TESTS_MIN_BW=0: exit 0" "$?" "$TMP/minbw0.out"
expect_grep "NCCL_TESTS_MIN_BW=0: OK verdict" "$TMP/minbw0.out" \
  "^# Avg bus bandwidth    : [0-9.e+-]+ OK$"

# --- NCCL_TESTS_SPLIT: sub-communicators by colour ------------------------------------------
NCCL_TESTS_SPLIT="MOD 2" timeout 30 "$RUN" -n 4 "$PERF" all_gather -b 1K -e 1K -n 2 \
  >"$TMP/split.out" 2>&1
expect_success "NCCL_TESTS_SPLIT=MOD 2, 4 ranks: exit 0" "$?" "$TMP/split.out"
expect_eq "MOD 2: ranks 0..3 in groups 0 1 0 1" \
  "$(sed -n 's/^#  Rank  \([0-9]\) Group  \([0-9]\) .*/\1:\2/p' "$TMP/split.out" | tr '\n' ' ')" \
  "0:0 1:1 2:0 3:1 "
expect_eq "MOD 2: 2 groups" \
  "$(sed -n 's/^#  Rank .* Group  *\([0-9]*\) .*/\1/p' "$TMP/split.out" | sort -u | wc -l)" 2
# all_gather of 1 KiB of float in a 2-rank group: 128 elements per rank (64 with 4 ranks).
expect_grep "MOD 2: the collective ran on 2-rank communicators" "$TMP/split.out" \
  "^ +1024 +128 +float +none +-1 .* 0 +[0-9.e+-]+ +[0-9.e+-]+ +[0-9.e+-]+ +0$"
expect_line "MOD 2: no wrong element" "$TMP/split.out" "# Out of bounds values : 0 OK"
NCCL_TESTS_SPLIT_MASK=0x2 timeout 30 "$RUN" -n 4 "$PERF" all_reduce -b 1K -e 1K -n 2 \
  >"$TMP/mask.out" 2>&1
expect_success "NCCL_TESTS_SPLIT_MASK=0x2, 4 ranks: exit 0" "$?" "$TMP/mask.out"
expect_eq "MASK 0x2: ranks 0..3 in groups 0 0 2 2" \
  "$(sed -n 's/^#  Rank  \([0-9]\) Group  \([0-9]\) .*/\1:\2/p' "$TMP/mask.out" | tr '\n' ' ')" \
  "0:0 1:0 2:2 3:2 "
expect_line "MASK 0x2: no wrong element" "$TMP/mask.out" "# Out of bounds values : 0 OK"

# Groups of different sizes must not run different numbers of tests (the timing reductions
# span the job): -r -1 and hypercube refuse, naming the sizes; -r must be in every group.
NCCL_TESTS_SPLIT="MOD 2" timeout 30 "$RUN" -n 3 "$PERF" gather -r -1 -b 8 -e 64 >"$TMP/uneq.out" 2>&1
expect_eq "MOD 2 at 3 ranks with -r -1: exit 2" "$?" 2
expect_grep "MOD 2 at 3 ranks with -r -1: says why" "$TMP/uneq.out" \
  "^meshccl-perf: NCCL_TESTS_SPLIT made groups of 1 to 2 ranks: -r -1 would run a different number of tests in each; give groups of one size$"
NCCL_TESTS_SPLIT="MOD 2" timeout 30 "$RUN" -n 3 "$PERF" scatter -r 1 -b 8 -e 64 >"$TMP/uneq.out" 2>&1
expect_eq "MOD 2 at 3 ranks with -r 1: exit 2" "$?" 2
expect_grep "MOD 2 at 3 ranks with -r 1: says why" "$TMP/uneq.out" \
  "^meshccl-perf: -r/--root 1 is not a rank of the smallest NCCL_TESTS_SPLIT group's 1-rank communicator"
NCCL_TESTS_SPLIT="MOD 2" timeout 30 "$RUN" -n 3 "$PERF" scatter -r 0 -b 64 -e 256 -f 2 -n 1 \
  >"$TMP/uneq.out" 2>&1
expect_success "MOD 2 at 3 ranks with -r 0: runs" "$?" "$TMP/uneq.out"
expect_line "MOD 2 at 3 ranks with -r 0: no wrong element" "$TMP/uneq.out" \
  "# Out of bounds values : 0 OK"

# --- -M, GPU-only flags, -u ------------------------------------------------------------------
timeout 30 "$RUN" -n 2 "$PERF" reduce_scatter -b 1K -e 4K -f 2 -n 2 -M 1 -x 1 -D 1 -R 2 -V 32 \
  -u 3 >"$TMP/flags.out" 2>&1
expect_success "-M 1 -x 1 -D 1 -R 2 -V 32 -u 3: exit 0" "$?" "$TMP/flags.out"
expect_line "no wrong element with them" "$TMP/flags.out" "# Out of bounds values : 0 OK"
expect_grep "-M 1: the memory line" "$TMP/flags.out" \
  "^# Host memory usage    : Initialization [0-9.]+ [KMG]?B \| User-Allocated [0-9.]+ [KMG]?B \| Collective -?[0-9.]+ [KMG]?B \| Total  [0-9.]+ [KMG]?B$"
expect_line "-x is a no-op, said" "$TMP/flags.out" \
  "# -x/--cta_policy 1 ignored: host-memory collectives run no CTAs"
expect_line "-D is a no-op, said" "$TMP/flags.out" \
  "# -D/--device_implementation 1 ignored: no device kernels on host memory; NCCL's implementation runs (as -D 0)"
expect_line "-V is a no-op, said" "$TMP/flags.out" \
  "# -V/--device_cta_count 32 ignored: host-memory collectives run no CTAs"
expect_grep "-u 3 in the parameter line" "$TMP/flags.out" "graph: 0 unalign: 3$"
"$PERF" -h >"$TMP/help.out" 2>&1
expect_grep "help: -x is a no-op on host" "$TMP/help.out" "-x,--cta_policy .*no-op: no CTAs on host"
expect_grep "help: -D is a no-op on host" "$TMP/help.out" "-D,--device_implementation .*no-op"
expect_grep "help: the new collectives" "$TMP/help.out" "gather scatter alltoallv hypercube"

# --- the shared library -------------------------------------------------------------------
expect_eq "meshccl-perf needs libmeshccl.so.2" \
  "$(readelf -d "$PERF" | grep -c 'NEEDED.*\[libmeshccl.so.2\]')" 1
expect_eq "and no static copy of the library (no internal symbol)" \
  "$(nm "$PERF" 2>/dev/null | grep -c ' [Tt] mc_boot_')" 0
expect_grep "ldd resolves it in the build tree" <(ldd "$PERF") \
  "libmeshccl.so.2 => $MC_BUILD/lib/libmeshccl.so.2"
mp_finish
