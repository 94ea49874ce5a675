#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Tests the local launcher meshccl-run ($MC_BUILD/bin/meshccl-run): rank
# environment, NCCL_COMM_ID, MESHCCL_SECRET, output prefixing, failure
# propagation and exit codes, signal forwarding, the SIGKILL after the grace
# period, and fds.
# Prints "ok - ..." / "not ok - ..." per check; exits 1 if any check failed.
# The rank scripts are single-quoted on purpose: the ranks expand $RANK.
# shellcheck disable=SC2016
set -u

# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
# shellcheck disable=SC2119 # no test program: only meshccl-run is needed
need_progs
# Every long-running child sleeps for this unique duration, so pgrep -f finds
# the ranks (their bash -c text contains it) and their sleeps.
SLP="30.$$$RANDOM"

# shellcheck disable=SC2317 # called by the trap
launcher_cleanup() {
  pkill -KILL -f "$SLP" 2>/dev/null
  mp_cleanup
}
trap launcher_cleanup EXIT

# no_leftovers NAME: no process with $SLP in its command line remains (waits up to 3 s).
no_leftovers() {
  for _ in $(seq 30); do
    if ! pgrep -f "$SLP" >/dev/null; then
      ok "$1"
      return
    fi
    sleep 0.1
  done
  not_ok "$1"
  pgrep -af "$SLP" | sed 's/^/#   left: /'
}

# --- usage -------------------------------------------------------------------
"$RUN" --help >"$TMP/out" 2>&1
expect_eq "--help exits 0" "$?" 0
grep -q '^usage:' "$TMP/out"
check "--help prints usage"
"$RUN" >/dev/null 2>"$TMP/err"
expect_eq "no program: exit 2" "$?" 2
grep -q 'no program given' "$TMP/err"
check "no program: message"
"$RUN" -n 1025 true 2>/dev/null
expect_eq "-n 1025: exit 2" "$?" 2
"$RUN" -n x true 2>/dev/null
expect_eq "-n x: exit 2" "$?" 2
"$RUN" --grace -1 true 2>/dev/null
expect_eq "--grace -1: exit 2" "$?" 2
"$RUN" --frobnicate true 2>"$TMP/err"
expect_eq "unknown option: exit 2" "$?" 2
grep -q "unknown option '--frobnicate'" "$TMP/err"
check "unknown option: message names it"

# --- rank environment --------------------------------------------------------
"$RUN" -n 3 bash -c 'echo $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE' >"$TMP/out" 2>"$TMP/err"
expect_eq "-n 3: exit 0" "$?" 0
expect_eq "-n 3: rank variables" "$(sort "$TMP/out" | tr '\n' '|')" \
  "[0] 0 3 0 3|[1] 1 3 1 3|[2] 2 3 2 3|"
expect_eq "-n 3: nothing on stderr" "$(cat "$TMP/err")" ""

"$RUN" bash -c 'echo $RANK $WORLD_SIZE $NODE_RANK $MESHCCL_RUN' >"$TMP/out"
expect_eq "default -n 1, NODE_RANK and MESHCCL_RUN" "$(cat "$TMP/out")" "[0] 0 1 0 1"

"$RUN" --np=2 --no-tag -- bash -c 'echo $RANK' >"$TMP/out"
expect_eq "--np=2 --no-tag: lines unprefixed" "$(sort "$TMP/out" | tr '\n' ' ')" "0 1 "

# --- NCCL_COMM_ID and MASTER_* -----------------------------------------------
(
  unset NCCL_COMM_ID MASTER_ADDR MASTER_PORT
  "$RUN" -n 4 bash -c 'echo $NCCL_COMM_ID $MASTER_ADDR:$MASTER_PORT' >"$TMP/out"
)
ids=$(sed 's/^\[[0-9]*\] //' "$TMP/out" | sort -u)
expect_eq "NCCL_COMM_ID: 4 ranks print it" "$(wc -l <"$TMP/out")" 4
expect_eq "NCCL_COMM_ID: identical for all ranks" "$(echo "$ids" | wc -l)" 1
echo "$ids" | grep -Eq '^127\.0\.0\.1:[0-9]+ 127\.0\.0\.1:[0-9]+$'
check "NCCL_COMM_ID is 127.0.0.1:<port>, MASTER_ADDR:MASTER_PORT too (got '$ids')"
port=${ids%% *}
port=${port#127.0.0.1:}
mport=${ids##*:}
[ "$port" -gt 0 ] && [ "$port" -lt 65536 ] && [ "$mport" -gt 0 ] && [ "$mport" -lt 65536 ] &&
  [ "$port" != "$mport" ]
check "NCCL_COMM_ID and MASTER_PORT name two different valid ports (bootstrap root, torch store)"

NCCL_COMM_ID=10.1.2.3:4567 MASTER_PORT=999 "$RUN" -n 2 bash -c 'echo $NCCL_COMM_ID $MASTER_PORT' \
  >"$TMP/out"
expect_eq "preset NCCL_COMM_ID and MASTER_PORT pass through" \
  "$(sort "$TMP/out" | tr '\n' '|')" "[0] 10.1.2.3:4567 999|[1] 10.1.2.3:4567 999|"

# --- MESHCCL_SECRET ------------------------------------------------------------
(
  unset MESHCCL_SECRET
  "$RUN" -n 3 --no-tag bash -c 'echo $MESHCCL_SECRET' >"$TMP/out"
  "$RUN" -n 1 --no-tag bash -c 'echo $MESHCCL_SECRET' >"$TMP/out2"
)
secrets=$(sort -u "$TMP/out")
expect_eq "MESHCCL_SECRET: 3 ranks print it" "$(wc -l <"$TMP/out")" 3
expect_eq "MESHCCL_SECRET: the same for the 3 ranks" "$(echo "$secrets" | wc -l)" 1
echo "$secrets" | grep -Eq '^[0-9a-f]{64}$'
check "MESHCCL_SECRET: 64 random hex digits (got '$secrets')"
[ "$secrets" != "$(cat "$TMP/out2")" ]
check "MESHCCL_SECRET: another job, another secret"
MESHCCL_SECRET=preset "$RUN" -n 2 --no-tag bash -c 'echo $MESHCCL_SECRET' >"$TMP/out"
expect_eq "preset MESHCCL_SECRET passes through" "$(tr '\n' '|' <"$TMP/out")" "preset|preset|"

# --- output ------------------------------------------------------------------
"$RUN" -n 2 bash -c 'echo to-err >&2' >"$TMP/out" 2>"$TMP/err"
expect_eq "stderr: nothing on stdout" "$(cat "$TMP/out")" ""
expect_eq "stderr: lines prefixed, on stderr" "$(sort "$TMP/err" | tr '\n' '|')" \
  "[0] to-err|[1] to-err|"

"$RUN" -n 1 printf 'no newline' >"$TMP/out"
expect_eq "partial last line: printed with prefix and newline" "$(od -c <"$TMP/out")" \
  "$(printf '[0] no newline\n' | od -c)"

"$RUN" -n 4 bash -c 'head -c 100000 /dev/zero | tr "\0" x; echo; for i in $(seq 200); do echo "r$RANK line $i"; done' \
  >"$TMP/out"
expect_eq "long lines: 4 x (2 pieces + 200 lines)" "$(wc -l <"$TMP/out")" 808
bad=$(grep -cvE '^\[[0-3]\] (x+|r[0-3] line [0-9]+)$' "$TMP/out")
expect_eq "long lines: every line whole and prefixed" "$bad" 0

echo hello | "$RUN" -n 2 cat >"$TMP/out"
expect_eq "stdin goes to rank 0 only" "$(cat "$TMP/out")" "[0] hello"

# --- fds ---------------------------------------------------------------------
# fd 7 is open in the launcher without O_CLOEXEC: the ranks must not get it.
"$RUN" -n 2 bash -c 'ls /proc/self/fd | tr "\n" " "' >"$TMP/out" 7</dev/null
expect_eq "no fd leak: ranks see only fds 0 1 2 (3 is ls's own)" \
  "$(sort "$TMP/out" | tr '\n' '|')" "[0] 0 1 2 3 |[1] 0 1 2 3 |"

# --- failures ----------------------------------------------------------------
t0=$(date +%s)
"$RUN" -n 3 bash -c 'if [ $RANK = 1 ]; then echo failing >&2; exit 3; fi; sleep '"$SLP"'; :' \
  >"$TMP/out" 2>"$TMP/err"
rc=$?
t1=$(date +%s)
expect_eq "rank 1 exits 3: launcher exits 3" "$rc" 3
[ $((t1 - t0)) -lt 15 ]
check "rank 1 exits 3: launcher done in $((t1 - t0)) s (< 15)"
grep -q 'meshccl-run: rank 1 (pid [0-9]*) exited with status 3; stopping the other ranks' "$TMP/err"
check "rank 1 exits 3: failure reported"
expect_eq "rank 1 exits 3: last stderr line" "$(tail -n 1 "$TMP/err")" \
  "meshccl-run: job failed: rank 1 exited with status 3"
grep -q '^\[1\] failing$' "$TMP/err"
check "rank 1 exits 3: its own stderr forwarded"
no_leftovers "rank 1 exits 3: no rank or sleep left"

# A peer told of a failure often exits before the rank where it began has
# said why: that rank still gets to print its last line and its own status.
"$RUN" -n 2 bash -c 'if [ $RANK = 1 ]; then exit 4; fi; sleep 0.3; echo "the cause" >&2; exit 5' \
  >"$TMP/out" 2>"$TMP/err"
expect_eq "rank 1 exits first: launcher exits with its status" "$?" 4
grep -q '^\[0\] the cause$' "$TMP/err"
check "rank 1 exits first: rank 0 still prints why it failed"

"$RUN" -n 3 bash -c 'if [ $RANK = 2 ]; then kill -9 $$; fi; sleep '"$SLP"'; :' \
  >"$TMP/out" 2>"$TMP/err"
expect_eq "rank 2 SIGKILLed: launcher exits 137" "$?" 137
tail -n 1 "$TMP/err" | grep -q '^meshccl-run: job failed: rank 2 was killed by signal 9'
check "rank 2 SIGKILLed: last stderr line names rank 2 and signal 9"
no_leftovers "rank 2 SIGKILLed: no rank or sleep left"

"$RUN" -n 2 "/nonexistent/prog_$SLP" >"$TMP/out" 2>"$TMP/err"
expect_eq "missing program: exit 127" "$?" 127
grep -q "cannot run '/nonexistent/prog_$SLP': No such file or directory" "$TMP/err"
check "missing program: message names it"

# Ranks 0 and 2 ignore SIGTERM; rank 1 fails once they are ready.
t0=$(date +%s)
"$RUN" -n 3 --grace 1 bash -c '
  if [ $RANK = 1 ]; then
    for i in $(seq 100); do [ -e "$0/ready.0" ] && [ -e "$0/ready.2" ] && break; sleep 0.05; done
    exit 5
  fi
  trap "" TERM; touch "$0/ready.$RANK"; sleep '"$SLP"'; :' "$TMP" >"$TMP/out" 2>"$TMP/err"
rc=$?
t1=$(date +%s)
expect_eq "ranks ignoring SIGTERM: launcher exits 5" "$rc" 5
[ $((t1 - t0)) -lt 15 ]
check "ranks ignoring SIGTERM: done in $((t1 - t0)) s (< 15)"
grep -q 'sending SIGKILL' "$TMP/err"
check "ranks ignoring SIGTERM: SIGKILLed after --grace 1"
expect_eq "ranks ignoring SIGTERM: last stderr line" "$(tail -n 1 "$TMP/err")" \
  "meshccl-run: job failed: rank 1 exited with status 5"
no_leftovers "ranks ignoring SIGTERM: no rank or sleep left"

# --- signals to the launcher -------------------------------------------------
# The outer bash defers its trap while it waits for the inner one: the inner
# bash sees SIGTERM only if the launcher signals each rank's process group.
"$RUN" -n 2 --grace 2 bash -c 'trap : TERM
  bash -c "trap \"echo got TERM; exit 0\" TERM; echo ready; sleep '"$SLP"' & wait"
  echo outer done' >"$TMP/out" 2>"$TMP/err" &
lpid=$!
for _ in $(seq 100); do
  [ "$(grep -c ready "$TMP/out")" = 2 ] && break
  sleep 0.05
done
kill -TERM "$lpid"
wait "$lpid"
expect_eq "SIGTERM to launcher: exit 143" "$?" 143
expect_eq "SIGTERM to launcher: forwarded to every rank" \
  "$(grep 'got TERM' "$TMP/out" | sort | tr '\n' '|')" "[0] got TERM|[1] got TERM|"
expect_eq "SIGTERM to launcher: ranks finished their trap" \
  "$(grep 'outer done' "$TMP/out" | sort | tr '\n' '|')" "[0] outer done|[1] outer done|"
no_leftovers "SIGTERM to launcher: no rank or sleep left"

mp_finish
