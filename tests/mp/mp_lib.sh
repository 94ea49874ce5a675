# SPDX-License-Identifier: Apache-2.0
# Shared helpers of the tests/mp/test_*.sh drivers (sourced, not a test):
# TAP-like ok / not ok reporting, temp dir, free ports, background ranks with
# a hang guard, and cleanup of every process a driver started.
# Every driver uses loopback only: NCCL_SOCKET_IFNAME=lo, roots on 127.0.0.1.
# shellcheck shell=bash
set -u

MC_BUILD="${MC_BUILD:?MC_BUILD must name the build directory}"
RUN="$MC_BUILD/bin/meshccl-run"
T="$MC_BUILD/tests"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mc_mp.XXXXXX")
FAILED=0
BG_PIDS=()

# A clean environment: nothing of an outer launcher leaks into the ranks.
unset NCCL_COMM_ID MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE \
  NODE_RANK MESHCCL_RUN NCCL_DEBUG NCCL_DEBUG_FILE NCCL_HOSTID NCCL_COMM_BLOCKING \
  MESHCCL_INIT_TIMEOUT MESHCCL_DEVICE OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE SLURM_PROCID \
  SLURM_NTASKS
export NCCL_SOCKET_IFNAME=lo
# meshccl-run's output is unprefixed by default; the tests read "[rank] " prefixes.
export MESHCCL_RUN_TAG_OUTPUT=1

# shellcheck disable=SC2317 # called by the trap
mp_cleanup() {
  local p
  for p in "${BG_PIDS[@]}"; do
    kill -KILL "$p" 2>/dev/null
  done
  wait 2>/dev/null
  rm -rf "$TMP"
}
trap mp_cleanup EXIT

ok() { echo "ok - $1"; }
not_ok() {
  echo "not ok - $1"
  FAILED=1
}
# check NAME: passes if the previous command succeeded.
check() {
  if [ "$?" -eq 0 ]; then ok "$1"; else not_ok "$1"; fi
}
# expect_eq NAME GOT WANT
expect_eq() {
  if [ "$2" = "$3" ]; then
    ok "$1"
  else
    not_ok "$1"
    printf '#   got:  %s\n#   want: %s\n' "$2" "$3"
  fi
}
# expect_success NAME RC FILE: RC (an exit status) is 0 (shows FILE otherwise).
expect_success() {
  expect_eq "$1" "$2" 0
  [ "$2" = 0 ] || show "$3"
}
# expect_grep NAME FILE ERE: FILE has a line matching ERE (shows FILE otherwise).
expect_grep() {
  if grep -Eq -- "$3" "$2"; then
    ok "$1"
  else
    not_ok "$1"
    echo "#   no line matches: $3"
    show "$2"
  fi
}
# expect_le NAME GOT MAX (integers)
expect_le() {
  if [ "$2" -le "$3" ]; then
    ok "$1"
  else
    not_ok "$1"
    printf '#   got: %s, at most %s wanted\n' "$2" "$3"
  fi
}
# show FILE: the file's last lines, commented.
show() { tail -n 15 "$1" 2>/dev/null | sed 's/^/#   | /'; }

# now_ms: wall clock in milliseconds.
now_ms() {
  local t=${EPOCHREALTIME/./}
  echo $((t / 1000))
}

# A free port below the ephemeral range (32768+), where no rank's own
# listening socket can take it before rank 0's root binds it.
free_port() {
  python3 -c '
import random, socket
for _ in range(200):
    p = random.randrange(12000, 28000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
        print(p)
        break
    except OSError:
        pass
    finally:
        s.close()
'
}

# bg NAME CMD...: starts CMD in the background, stdout+stderr to $TMP/NAME.out;
# PID_NAME is its pid (CMD itself when it is a plain program or env ... prog).
bg() {
  local name=$1
  shift
  "$@" >"$TMP/$name.out" 2>&1 &
  BG_PIDS+=($!)
  printf -v "PID_$name" '%s' "$!"
}

# wait_bg NAME LIMIT_S: waits for NAME at most LIMIT_S seconds (it is then
# SIGKILLed: a hang). Sets RC_NAME (exit status; "hang" when killed) and
# MS_NAME (ms from T0_MS, which the caller sets when the scenario starts).
# A watchdog does the kill, so that only `wait` reaps ranks (and bash prints
# no "Killed" notice for the ranks a test kills on purpose). Before the kill,
# the stacks of every thread of a hung process are appended to its output
# (gdb, when installed), so that a hang seen once in CI can be diagnosed.
wait_bg() {
  local name=$1 limit=$2 pidvar="PID_$1" rc wd
  local pid=${!pidvar}
  (
    if ! timeout "$limit" tail --pid="$pid" -s 0.05 -f /dev/null; then
      touch "$TMP/$name.hang"
      if command -v gdb >/dev/null; then
        echo "# $name (pid $pid) still running after $limit s: its threads' stacks"
        timeout 30 gdb -p "$pid" -batch -nx -ex 'thread apply all bt' 2>&1 |
          grep -E '^(Thread|#[0-9])'
      fi >"$TMP/$name.stacks"
      kill -KILL "$pid"
      tail --pid="$pid" -s 0.05 -f /dev/null
      cat "$TMP/$name.stacks" >>"$TMP/$name.out"
    fi
  ) >/dev/null 2>&1 &
  wd=$!
  wait "$pid" 2>/dev/null
  rc=$?
  printf -v "MS_$name" '%s' "$(($(now_ms) - T0_MS))"
  wait "$wd" 2>/dev/null
  [ -e "$TMP/$name.hang" ] && rc=hang
  printf -v "RC_$name" '%s' "$rc"
}

# run_case NAME TIMEOUT CMD...: CMD succeeds within TIMEOUT seconds (its
# output shown when not); the check's name carries the time it took.
run_case() {
  local name=$1 limit=$2
  shift 2
  local t0 rc
  t0=$(now_ms)
  timeout "$limit" "$@" >"$TMP/case.out" 2>&1
  rc=$?
  expect_success "$name ($(($(now_ms) - t0)) ms)" "$rc" "$TMP/case.out"
}

# shm_snapshot, then shm_orphans: the meshccl segments made since the
# snapshot whose creator (the pid ending the name) is gone. Segments of live
# creators are not counted: other tests may hold one for the milliseconds of
# a connect. A name is an orphan only if it still exists once its creator is
# known to be gone: a creator that unlinks its segment and exits between the
# listing and the check (another test's job) left nothing.
shm_snapshot() {
  ls /dev/shm | grep '^meshccl-' | sort >"$TMP/shm.before"
}
shm_orphans() {
  ls /dev/shm | grep '^meshccl-' | sort | comm -13 "$TMP/shm.before" - |
    while read -r f; do
      kill -0 "${f##*-}" 2>/dev/null || { [ -e "/dev/shm/$f" ] && echo "$f"; }
    done
}

# skip_or_fail REASON: exit 77 (skip), or fail under CI=true.
skip_or_fail() {
  if [ "${CI:-}" = true ]; then
    not_ok "$1 (CI=true: a skip is a failure)"
    exit 1
  fi
  echo "ok - # SKIP $1"
  exit 77
}

mp_finish() {
  if [ "$FAILED" -ne 0 ]; then
    echo "# some checks failed"
    exit 1
  fi
  echo "# all checks passed"
  exit 0
}

# need_progs NAME...: meshccl-run and $T/NAME... exist, or the driver fails.
need_progs() {
  local p
  for p in "$RUN" "${@/#/$T/}"; do
    if [ ! -x "$p" ]; then
      not_ok "built: $p"
      exit 1
    fi
  done
}
