#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Init failures through the public API, with exact result codes and messages:
# invalid arguments and group misuse (mp_errors args); ranks started by hand
# (RANK, WORLD_SIZE, NCCL_COMM_ID) for a rank that never arrives, a rank
# given twice, mismatched nranks, a rank or the root's host SIGKILLed during
# init, and random kill points. No scenario may hang: each process has a
# deadline and a process still running past it is a failure.
# shellcheck source=mp_lib.sh disable=SC2154 # bg and wait_bg set PID_*, RC_*, MS_*
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_errors
P="$T/mp_errors"

# rank NAME RANK WORLD_SIZE [VAR=value...] [-- ARGS]: starts one rank of the
# job whose root is 127.0.0.1:$PORT (mp_errors init, or ARGS).
rank() {
  local name=$1 r=$2 n=$3 vars=() args=(init)
  shift 3
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    vars+=("$1")
    shift
  done
  [ $# -gt 0 ] && shift && args=("$@")
  bg "$name" env RANK="$r" WORLD_SIZE="$n" NCCL_COMM_ID="127.0.0.1:$PORT" "${vars[@]}" "$P" \
    "${args[@]}"
}
# expect_exit LABEL NAME WANT_RC MAX_MS ERE: rank NAME (waited for) exited with
# WANT_RC within MAX_MS of T0_MS and its output matches ERE.
expect_exit() {
  local rcv="RC_$2" msv="MS_$2"
  expect_eq "$1: exit $3" "${!rcv}" "$3"
  expect_le "$1: done within $4 ms" "${!msv}" "$4"
  expect_grep "$1: message" "$TMP/$2.out" "$5"
}
new_job() {
  PORT=$(free_port)
  T0_MS=$(now_ms)
}

# --- arguments ---------------------------------------------------------------
timeout 20 "$P" args >"$TMP/args.out" 2>&1
rc=$?
expect_success "invalid arguments and groups (mp_errors args): exit 0" "$rc" "$TMP/args.out"

export MESHCCL_INIT_TIMEOUT=3

# --- a rank never arrives ----------------------------------------------------
new_job
rank a0 0 3
rank a1 1 3
wait_bg a0 15
wait_bg a1 15
for r in 0 1; do
  expect_exit "3 ranks, rank 2 never starts: rank $r" "a$r" 8 8000 \
    "rank $r: init failed: 8 timeout: .*rank 2 of 3 never joined the bootstrap root"
done

# --- a rank given twice ------------------------------------------------------
# RANK=0 twice with NCCL_COMM_ID: the first process to bind the port hosts
# the root; the second finds the port held by another process and fails at
# once naming it (it does not register with whatever listens there); the
# first then misses rank 1.
new_job
rank b0 0 2
rank b1 0 2
wait_bg b0 15
wait_bg b1 15
if grep -q "already in use" "$TMP/b0.out"; then second=b0 first=b1; else second=b1 first=b0; fi
expect_exit "RANK=0 twice (NCCL_COMM_ID), the second process" "$second" 5 5000 \
  "init failed: 5 .*port $PORT is already in use by another process"
expect_exit "RANK=0 twice (NCCL_COMM_ID), the first process" "$first" 8 8000 \
  "init failed: 8 .*rank 1 of 2 never joined"

# RANK=1 twice in a 3-rank job (rank 2 absent: the root still listens).
new_job
rank c0 0 3
rank c1 1 3
rank c2 1 3
for r in 0 1 2; do wait_bg "c$r" 15; done
for r in 0 1 2; do
  expect_exit "RANK=1 twice of 3, process $r" "c$r" 5 8000 "init failed: 5 .*rank 1 joined twice"
done

# NCCL's flow (no NCCL_COMM_ID): the process that created the unique id and
# another one both claim rank 0 of 2.
new_job
bg d0 env RANK=0 WORLD_SIZE=2 "$P" init --id-file "$TMP/dup.id" --create
bg d1 env RANK=0 WORLD_SIZE=2 "$P" init --id-file "$TMP/dup.id"
wait_bg d0 15
wait_bg d1 15
for r in 0 1; do
  expect_exit "unique id: rank 0 twice, process $r" "d$r" 5 8000 \
    "init failed: 5 .*rank 0 joined twice"
done

# --- mismatched nranks -------------------------------------------------------
new_job
rank e0 0 2
rank e1 1 3
wait_bg e0 15
wait_bg e1 15
for r in 0 1; do
  expect_exit "rank 0 of 2 and rank 1 of 3: rank $r" "e$r" 5 3000 \
    "rank $r: init failed: 5 .*rank [01] .* nranks [23], but rank [01] .* nranks [23]: every rank must pass the same nranks"
done

# --- a rank killed during init -----------------------------------------------
# Ranks 0-2 wait for rank 3 (started 2 s later); rank 1 is SIGKILLed at 0.5 s.
export MESHCCL_INIT_TIMEOUT=30
new_job
for r in 0 1 2; do rank "f$r" "$r" 4; done
sleep 0.5
kill -KILL "$PID_f1"
wait_bg f1 5
sleep 1.5
# Rank 0's failed init stops the root, so rank 3 may find nobody: 3 quick retries.
rank f3 3 4 NCCL_SOCKET_RETRY_CNT=3
for r in 0 2 3; do wait_bg "f$r" 40; done
expect_eq "rank 1 SIGKILLed: its status is 137" "$RC_f1" 137
for r in 0 2; do
  expect_exit "rank 1 SIGKILLed during init: rank $r" "f$r" 6 3000 \
    "rank $r: init failed: 6 .*rank 1 \(host [^ ]+ pid $PID_f1\) left before its init completed"
done
expect_exit "rank 1 SIGKILLed during init: rank 3, started 2 s later" f3 6 5000 \
  "rank 3: init failed: 6 .*(rank 1 \(host [^ ]+ pid $PID_f1\) left|cannot reach the bootstrap root)"

# Rank 0, which hosts the root (NCCL_COMM_ID), is SIGKILLed at 0.5 s.
new_job
for r in 0 1 2; do rank "g$r" "$r" 4; done
sleep 0.5
kill -KILL "$PID_g0"
for r in 0 1 2; do wait_bg "g$r" 40; done
expect_eq "rank 0 SIGKILLed: its status is 137" "$RC_g0" 137
for r in 1 2; do
  expect_exit "rank 0 (root host) SIGKILLed during init: rank $r" "g$r" 6 3000 \
    "rank $r: init failed: 6 .*bootstrap root at 127\.0\.0\.1<$PORT>"
done
# A rank that comes after the root died cannot reach it (3 quick retries).
T0_MS=$(now_ms)
rank g3 3 4 NCCL_SOCKET_RETRY_CNT=3
wait_bg g3 40
expect_exit "rank 3 started after the root died" g3 6 3000 \
  "rank 3: init failed: [0-9]+ .*cannot reach the bootstrap root at 127\.0\.0\.1<$PORT>"

# --- random kill points ------------------------------------------------------
# 8 ranks; a random victim SIGKILLs itself 0-20 ms into a non-blocking init.
# Every other rank succeeds (the victim died after init) or names the victim
# within 10 s. A victim that dies before registering can only be reported at
# the join deadline (MESHCCL_INIT_TIMEOUT=2: "never joined"); a rank 0 that
# dies before its root listens leaves the others unable to reach the root
# (they give up at the init deadline, MESHCCL_INIT_TIMEOUT + 3 s).
export MESHCCL_INIT_TIMEOUT=2
for it in $(seq "${MP_KILL_ITERATIONS:-10}"); do
  victim=$((RANDOM % 8))
  new_job
  for r in $(seq 0 7); do
    if [ "$r" = "$victim" ]; then
      rank "h$r" "$r" 8 -- suicide 20
    else
      rank "h$r" "$r" 8
    fi
  done
  for r in $(seq 0 7); do wait_bg "h$r" 20; done
  bad=""
  n_ok=0
  # Rank 0 hosts the root: its death is reported as the root's. And when the
  # victim is another rank, rank 0 fails too and its process exits, taking the
  # root with it: a rank that had not registered by then cannot learn the
  # cause and reports the root as unreachable.
  root_gone="(cannot reach|no answer from|lost its connection to) the bootstrap root|the bootstrap root .* closed the connection"
  who="rank $victim([^0-9]|$)|$root_gone"
  [ "$victim" = 0 ] && who="rank 0([^0-9]|$)|$root_gone"
  for r in $(seq 0 7); do
    [ "$r" = "$victim" ] && continue
    rcv="RC_h$r"
    msv="MS_h$r"
    if [ "${!rcv}" = 0 ]; then
      n_ok=$((n_ok + 1))
    elif [ "${!rcv}" = hang ] || [ "${!msv}" -gt 10000 ] ||
      ! grep -Eq "rank $r: init failed: [0-9]+ .*($who)" "$TMP/h$r.out"; then
      bad="$bad $r"
    fi
  done
  rcv="RC_h$victim"
  if [ -z "$bad" ] && [ "${!rcv}" = 137 ]; then
    ok "random kill $it: victim rank $victim; $n_ok ranks succeeded, the others named it"
  else
    not_ok "random kill $it: victim rank $victim (status ${!rcv}); bad ranks:$bad"
    for r in $bad; do
      rcv="RC_h$r"
      msv="MS_h$r"
      echo "#   rank $r: status ${!rcv} after ${!msv} ms"
      show "$TMP/h$r.out"
    done
  fi
done

mp_finish
