#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# README.md's commands work. Every line of README.md's ```sh blocks (comment
# cut) must be a key of RUNNERS below, and every key must be in README.md, so
# the two cannot drift; then each command runs, in README order, from a
# scratch directory laid out as the source tree (include/, and build/ whose
# entries are the build directory's), so that the README's relative paths
# hold:
# * run literally: cc app.c ... (app.c: a meshcclCommInitFromEnv all-reduce,
#   as "Using it" shows), meshccl-run -n 4 ./app, mpirun --allow-run-as-root
#   --oversubscribe -np 4 ./app (skipped when mpirun is missing, unless
#   CI=true);
# * make targets run in the source tree with BUILD= this build and, for
#   install, DESTDIR= a staging directory (README: "DESTDIR stages the tree");
# * the torchrun-style line with MASTER_ADDR=127.0.0.1, a free port, and a
#   second process with RANK=1;
# * make test (this test is part of it), make python (minutes of C++) and
#   make deb (tests/mp/test_deb.sh runs it and checks the packages) are not
#   run; the train.py line runs when `make python` has built the packages
#   (fails under CI=true otherwise, as tests/py do).
# The release build only (label nosan): the README builds an uninstrumented
# program against the library.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
MC_SRC=$(cd "${MC_SRC:?MC_SRC must name the source directory}" && pwd)
MC_BUILD=$(cd "$MC_BUILD" && pwd)
README="$MC_SRC/README.md"
need_progs
# As a user runs them: meshccl-run's output untagged.
unset MESHCCL_RUN_TAG_OUTPUT

# The commands of the ```sh blocks, one per line.
readme_cmds() {
  awk '/^```sh$/ {b = 1; next} /^```/ {b = 0} b' "$README" |
    sed -E 's/[[:space:]]+#.*$//; s/[[:space:]]+$//' | grep -v '^$'
}

# shellcheck disable=SC2016 # the keys are README's text, $PWD included
declare -A RUNNERS=(
  ['make run']=make_run
  ['make test']=skip_make_test
  ['make install PREFIX=/usr/local']=install_plain
  ['make uninstall PREFIX=/usr/local']=uninstall_plain
  ['make install PREFIX=/opt/meshccl NCCL_COMPAT=1']=install_compat
  ['make deb']=skip_make_deb
  ['cc app.c -o app -Iinclude -Lbuild/lib -lmeshccl -Wl,-rpath,$PWD/build/lib']=literal_cc
  ['build/bin/meshccl-run -n 4 ./app']=literal_app
  ['mpirun --allow-run-as-root --oversubscribe -np 4 ./app']=mpirun_app
  ['RANK=0 WORLD_SIZE=2 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 ./app']=torchrun_style
  ['make python']=skip_make_python
  ['PYTHONPATH=build/python build/bin/meshccl-run -n 4 python3 train.py']=train_py
)

readme_cmds >"$TMP/cmds.txt"
n_cmds=$(wc -l <"$TMP/cmds.txt")
missing=""
while IFS= read -r c; do
  [ -n "${RUNNERS[$c]+set}" ] || missing="$missing [$c]"
done <"$TMP/cmds.txt"
expect_eq "every README command has a runner here ($n_cmds commands)" "$missing" ""
stale=""
for c in "${!RUNNERS[@]}"; do
  grep -qxF -- "$c" "$TMP/cmds.txt" || stale="$stale [$c]"
done
expect_eq "every runner here is a README command" "$stale" ""

# The scratch tree: include/ and build/ as README's paths expect.
ROOT="$TMP/root"
mkdir -p "$ROOT/build"
ln -s "$MC_SRC/include" "$ROOT/include"
for e in "$MC_BUILD"/*; do
  ln -s "$e" "$ROOT/build/$(basename "$e")"
done
cat >"$ROOT/app.c" <<'EOF'
#include <meshccl.h>
#include <stdio.h>

int main(void)
{
  ncclComm_t comm;
  float x[4];
  int rank = -1;
  int n = 0;

  if (meshcclCommInitFromEnv(&comm, NULL) != ncclSuccess) {
    fprintf(stderr, "app: init failed: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  ncclCommUserRank(comm, &rank);
  ncclCommCount(comm, &n);
  for (int i = 0; i < 4; i++)
    x[i] = (float)(rank + 1);
  if (ncclAllReduce(x, x, 4, ncclFloat, ncclSum, comm, NULL) != ncclSuccess) {
    fprintf(stderr, "app: all-reduce failed: %s\n", ncclGetLastError(comm));
    return 1;
  }
  for (int i = 0; i < 4; i++) {
    if (x[i] != (float)(n * (n + 1) / 2)) {
      fprintf(stderr, "app: rank %d: element %d is %g\n", rank, i, (double)x[i]);
      return 1;
    }
  }
  printf("app: rank %d of %d: all-reduce ok\n", rank, n);
  return (ncclCommDestroy(comm) == ncclSuccess) ? 0 : 1;
}
EOF

# in_root CMD: CMD as typed in the scratch tree (bash -c: cd, &&, $PWD).
in_root() { (cd "$ROOT" && timeout 300 bash -c "$1") >"$TMP/cmd.out" 2>&1; }
# n_ok N: N processes of ./app reported success.
n_ok() { grep -c 'app: rank [0-9]* of [0-9]*: all-reduce ok' "$TMP/cmd.out"; }

make_run() {
  timeout 600 make -s -C "$MC_SRC" BUILD="$MC_BUILD" run >"$TMP/cmd.out" 2>&1
  expect_success "$1: exits 0" "$?" "$TMP/cmd.out"
  expect_grep "$1: meshccl-hello's table" "$TMP/cmd.out" '4 ranks on 1 host'
  expect_grep "$1: meshccl-perf's footer" "$TMP/cmd.out" '^# Avg bus bandwidth'
}
install_into() { # NAME STAGE ARGS...
  local name=$1 stage=$2
  shift 2
  timeout 600 make -s -C "$MC_SRC" BUILD="$MC_BUILD" DESTDIR="$stage" "$@" >"$TMP/cmd.out" 2>&1
  expect_success "$name (DESTDIR=$stage): exits 0" "$?" "$TMP/cmd.out"
}
install_plain() {
  install_into "$1" "$TMP/stage1" install PREFIX=/usr/local
  local f missing=""
  for f in lib/libmeshccl.so include/meshccl/nccl.h include/meshccl/meshccl.h bin/meshccl-run \
    lib/pkgconfig/meshccl.pc; do
    [ -e "$TMP/stage1/usr/local/$f" ] || missing="$missing $f"
  done
  expect_eq "$1: headers, library, tools and meshccl.pc installed" "$missing" ""
}
uninstall_plain() {
  install_into "$1" "$TMP/stage1" uninstall PREFIX=/usr/local
  expect_eq "$1: no file is left under the prefix" "$(find "$TMP/stage1/usr/local" ! -type d | wc -l)" 0
}
install_compat() {
  install_into "$1" "$TMP/stage2" install PREFIX=/opt/meshccl NCCL_COMPAT=1
  expect_eq "$1: NCCL's names installed" \
    "$(ls "$TMP/stage2/opt/meshccl/lib/libnccl.so.2" "$TMP/stage2/opt/meshccl/lib/pkgconfig/nccl.pc" 2>&1 | wc -l)/$(ls "$TMP/stage2/opt/meshccl/lib/" 2>/dev/null | grep -c '^libnccl.so.2$')" "2/1"
}
literal_cc() {
  in_root "$1"
  expect_success "$1: compiles and links app.c" "$?" "$TMP/cmd.out"
}
literal_app() {
  in_root "$1"
  expect_success "$1: exits 0" "$?" "$TMP/cmd.out"
  expect_eq "$1: 4 ranks all-reduce" "$(n_ok)" 4
}
mpirun_app() {
  if ! command -v mpirun >/dev/null 2>&1; then
    if [ "${CI:-}" = true ]; then
      not_ok "$1: mpirun is missing (CI=true: openmpi-bin is in the Makefile's DEB_PKGS)"
    else
      ok "$1 # SKIP mpirun is not installed (apt-get install openmpi-bin)"
    fi
    return
  fi
  in_root "$1"
  expect_success "$1: exits 0" "$?" "$TMP/cmd.out"
  expect_eq "$1: 4 ranks all-reduce" "$(n_ok)" 4
}
torchrun_style() {
  local port cmd0 cmd1 rc0 rc1
  port=$(free_port)
  cmd0=$(sed -E "s/MASTER_ADDR=[^ ]+/MASTER_ADDR=127.0.0.1/; s/MASTER_PORT=[^ ]+/MASTER_PORT=$port/" \
    <<<"$1")
  cmd1=${cmd0/RANK=0/RANK=1}
  (cd "$ROOT" && timeout 120 bash -c "$cmd1") >"$TMP/rank1.out" 2>&1 &
  BG_PIDS+=($!)
  local pid1=$!
  in_root "$cmd0"
  rc0=$?
  wait "$pid1"
  rc1=$?
  cat "$TMP/rank1.out" >>"$TMP/cmd.out"
  expect_eq "$1 (MASTER_ADDR=127.0.0.1, port $port, and RANK=1 beside it): both exit 0" \
    "$rc0/$rc1" "0/0"
  expect_eq "$1: 2 ranks all-reduce" "$(n_ok)" 2
}
skip_make_test() { ok "$1 # SKIP runs the whole suite, this test included"; }
skip_make_python() { ok "$1 # SKIP builds the torch extension (minutes); tests/py cover it"; }
skip_make_deb() { ok "$1 # SKIP tests/mp/test_deb.sh runs it and checks the packages"; }
train_py() {
  if ! ls "$MC_BUILD"/python/meshccl_torch* >/dev/null 2>&1; then
    if [ "${CI:-}" = true ]; then
      not_ok "$1: build/python has no meshccl_torch (run make python)"
    else
      ok "$1 # SKIP build/python has no meshccl_torch (make python builds it)"
    fi
    return
  fi
  awk '/^```python$/ {b = 1; next} /^```/ {b = 0} b' "$README" >"$ROOT/train.py"
  cat >>"$ROOT/train.py" <<'EOF'
import torch
t = torch.ones(4) * (dist.get_rank() + 1)
dist.all_reduce(t)
n = dist.get_world_size()
assert t.tolist() == [n * (n + 1) / 2] * 4, t
print("app: rank %d of %d: all-reduce ok" % (dist.get_rank(), n))
dist.destroy_process_group()
EOF
  # python3 is the interpreter make python built for (build/python/PYTHON):
  # another one first in PATH (pyenv) has no torch.
  mkdir -p "$TMP/pybin"
  ln -sf "$(cat "$MC_BUILD/python/PYTHON")" "$TMP/pybin/python3"
  PATH="$TMP/pybin:$PATH" in_root "$1"
  expect_success "$1: exits 0" "$?" "$TMP/cmd.out"
  expect_eq "$1: 4 ranks all-reduce" "$(n_ok)" 4
}

if grep -q '^MESHCCL_SANITIZE:BOOL=ON' "$MC_BUILD/CMakeCache.txt" 2>/dev/null; then
  echo "# SKIP: a sanitizer build; README's program is built without the sanitizer"
  exit 77
fi
while IFS= read -r c; do
  [ -n "${RUNNERS[$c]+set}" ] || continue
  echo "# \$ $c"
  f0=$FAILED
  "${RUNNERS[$c]}" "$c" </dev/null # mpirun and meshccl-run forward stdin to rank 0
  [ "$FAILED" = "$f0" ] || show "$TMP/cmd.out"
done <"$TMP/cmds.txt"
mp_finish
