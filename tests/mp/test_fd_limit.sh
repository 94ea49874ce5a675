#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Out of file descriptors during init: the first EMFILE is the error every
# rank reports, at once (far below the 300 s init timeout), naming "Too many
# open files", the RLIMIT_NOFILE limits and `ulimit -n`:
#  - `ulimit -n 32; meshccl-run -n 16`: the launcher itself runs out first
#    (two pipes per rank) and says so;
#  - 16 ranks each under `ulimit -n 32` (the launcher unlimited): rank 0 runs
#    out (its listeners, its ring connection) and every rank fails naming it;
#  - under `ulimit -n 16` the root (in rank 0's process) runs out as well:
#    the job fails at once naming the root.
# shellcheck source=mp_lib.sh disable=SC2154 # bg and wait_bg set PID_*, RC_*, MS_*
. "$(dirname "$0")/mp_lib.sh"
need_progs
HELLO="$MC_BUILD/bin/meshccl-hello"
N=16

# fd_job NAME LIMIT: meshccl-run -n N, every rank under `ulimit -n LIMIT`.
fd_job() {
  local name=$1 limit=$2
  T0_MS=$(now_ms)
  bg "$name" timeout -k 5 60 env MESHCCL_RUN_TAG_OUTPUT=1 "$RUN" -n $N sh -c "ulimit -n $limit; exec \"\$0\"" "$HELLO"
  wait_bg "$name" 90
}

# --- the launcher under the limit ------------------------------------------------
T0_MS=$(now_ms)
bg launcher bash -c "ulimit -n 32; exec timeout -k 5 60 \"\$0\" -n $N \"\$1\"" "$RUN" "$HELLO"
wait_bg launcher 90
check_rc() {
  local name=$1 rcv="RC_$1" msv="MS_$1"
  if [ "${!rcv}" != 0 ] && [ "${!rcv}" != hang ] && [ "${!rcv}" != 124 ]; then
    ok "$name: fails (status ${!rcv}) in ${!msv} ms"
  else
    not_ok "$name: fails, not times out (status ${!rcv}, ${!msv} ms)"
    show "$TMP/$name.out"
  fi
  expect_le "$name: within 30 s (the init timeout is 300 s)" "${!msv}" 30000
}
check_rc launcher
expect_grep "launcher: names the call and the limit" "$TMP/launcher.out" \
  "meshccl-run: cannot start rank [0-9]+: Too many open files"
expect_grep "launcher: names RLIMIT_NOFILE and the fix" "$TMP/launcher.out" \
  "RLIMIT_NOFILE 32, hard 32; it holds two pipes per rank\): raise \`ulimit -n\`"

# --- every rank under ulimit -n 32 -----------------------------------------------
fd_job ranks32 32
check_rc ranks32
n=0
for ((r = 0; r < N; r++)); do
  grep -qE "^\[$r\] meshccl-hello: init failed: .*Too many open files.*RLIMIT_NOFILE 32, hard 32\): raise \`ulimit -n\`" \
    "$TMP/ranks32.out" && n=$((n + 1))
done
expect_eq "ulimit -n 32: every rank's error names Too many open files, RLIMIT_NOFILE and ulimit -n" "$n" $N
expect_grep "ulimit -n 32: the others name the rank where it happened" "$TMP/ranks32.out" \
  "^\[1\] meshccl-hello: init failed: .*Bootstrap: rank 1: rank 0 \(host .* pid [0-9]+\) failed: .*Too many open files"
expect_grep "ulimit -n 32: that rank fails with ncclSystemError" "$TMP/ranks32.out" \
  "^\[0\] meshccl-hello: init failed: unhandled system error"

# --- the root under ulimit -n 16 -------------------------------------------------
fd_job ranks16 16
check_rc ranks16
expect_grep "ulimit -n 16: rank 0 names the cause and the limit" "$TMP/ranks16.out" \
  "^\[0\] meshccl-hello: init failed: .*Too many open files.*RLIMIT_NOFILE 16, hard 16\): raise \`ulimit -n\`"
if grep -q "Too many open files" "$TMP/ranks16.out" && ! grep -qE "timed out|within [0-9]+ s" "$TMP/ranks16.out"; then
  ok "ulimit -n 16: no rank reports a timeout"
else
  not_ok "ulimit -n 16: no rank reports a timeout"
  show "$TMP/ranks16.out"
fi
mp_finish
