#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The bootstrap root survives hostile connections: rank 0 creates the unique
# id (ncclGetUniqueId, no NCCL_COMM_ID) and writes it to a file; mp_hostile
# attack connects to the root with random bytes, a wrong magic, a wrong
# socket type, a 0xFFFFFFFF length prefix, an early close, a short message,
# and a silent connection kept open; then ranks 0-2 init and must succeed.
# Rank 0's INFO log (it hosts the root) shows the dropped connections.
# Then, with NCCL_COMM_ID: a stranger that knows the root's address but not
# the job's MESHCCL_SECRET can neither register as rank 1 nor fail the job
# (mp_hostile stranger); a stranger that reads a rank's listening ports
# cannot deliver bytes over the socket net (mp_hostile net-stranger); and a
# port squatted by another process makes rank 0 fail at once, naming the port.
# shellcheck source=mp_lib.sh disable=SC2154 # bg and wait_bg set PID_*, RC_*, MS_*
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_hostile mp_errors

T0_MS=$(now_ms)
bg attack "$T/mp_hostile" attack "$TMP"
for r in 0 1 2; do
  if [ "$r" = 0 ]; then
    bg "r$r" env RANK=0 WORLD_SIZE=3 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,NET \
      "$T/mp_hostile" rank "$TMP"
  else
    bg "r$r" env RANK="$r" WORLD_SIZE=3 "$T/mp_hostile" rank "$TMP"
  fi
done
for r in 0 1 2; do wait_bg "r$r" 30; done
touch "$TMP/done"
wait_bg attack 10
for r in 0 1 2; do
  rcv="RC_r$r"
  expect_success "rank $r inits despite the hostile connections: exit 0" "${!rcv}" "$TMP/r$r.out"
done
expect_success "the attacker ran to the end: exit 0" "$RC_attack" "$TMP/attack.out"
expect_le "all done within 10 s" "$MS_r0" 10000

log="$TMP/r0.out"
expect_grep "root log: dropped connection (random bytes / wrong magic)" "$log" \
  'dropped connection from .*socket magic mismatch'
expect_grep "root log: dropped connection (wrong socket type)" "$log" \
  'dropped connection from .*wrong socket type 1'
expect_grep "root log: dropped connection (length prefix 0xFFFFFFFF)" "$log" \
  'dropped connection from .*version field 4294967295'
n=$(grep -c 'dropped connection' "$log")
expect_le "root log: at least 5 dropped connections (got $n)" 5 "$n"
expect_grep "root log: all 3 ranks joined" "$log" 'all 3 ranks joined'

# --- NCCL_COMM_ID: a stranger without the secret -----------------------------
# The launcher gives every rank the same MESHCCL_SECRET; the stranger knows
# the address and NCCL's fixed magic. Ranks 1 and 2 start once it is done, so
# its registration as rank 1 would come first.
PORT=$(free_port)
T0_MS=$(now_ms)
export MESHCCL_SECRET=job-secret-$RANDOM$RANDOM
bg s0 env RANK=0 WORLD_SIZE=3 NCCL_COMM_ID="127.0.0.1:$PORT" NCCL_DEBUG=INFO \
  NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP "$T/mp_errors" init
bg stranger env -u MESHCCL_SECRET "$T/mp_hostile" stranger "127.0.0.1:$PORT"
wait_bg stranger 30
for r in 1 2; do
  bg "s$r" env RANK="$r" WORLD_SIZE=3 NCCL_COMM_ID="127.0.0.1:$PORT" "$T/mp_errors" init
done
for r in 0 1 2; do wait_bg "s$r" 30; done
unset MESHCCL_SECRET
expect_success "stranger: refused (old framing and guessed proof)" "$RC_stranger" "$TMP/stranger.out"
for r in 0 1 2; do
  rcv="RC_s$r"
  expect_success "NCCL_COMM_ID job with a stranger: rank $r inits: exit 0" "${!rcv}" "$TMP/s$r.out"
done
if grep -q ATTACKER "$TMP"/s[012].out; then
  not_ok "no rank repeats the stranger's failure text"
else
  ok "no rank repeats the stranger's failure text"
fi
expect_grep "root log: the guessed proof is a WARN with the stranger's address" "$TMP/s0.out" \
  "NCCL WARN Bootstrap: bootstrap root 127\\.0\\.0\\.1<$PORT>: dropped connection from 127\\.0\\.0\\.1<[0-9]+>: wrong proof of the job's secret"
expect_grep "root log: the unauthenticated registration is dropped" "$TMP/s0.out" \
  "dropped connection from 127\\.0\\.0\\.1<[0-9]+>: not an authentication hello"
n=$(grep -c 'MESHCCL_SECRET is unset' "$TMP/s0.out")
expect_eq "MESHCCL_SECRET set: no notice that the secret comes from the address" "$n" 0

# --- NET: a stranger who reads a rank's listening ports ------------------------
# Any user can read which TCP ports a process listens on (/proc/PID/fd,
# /proc/net/tcp). While rank 1 waits in ncclRecv over NET, the stranger sends
# each of its ports NCCL's socket handshake, hellos and a forged message, and
# a guessed answer to the socket net's challenge; rank 1 must receive rank
# 0's bytes, sent after the attack, and nothing of the stranger's.
# (Before the socket net authenticated its sockets, rank 1 received the
# stranger's message.) The NET listeners are on lo: traffic stays on loopback.
PORT=$(free_port)
mkdir -p "$TMP/net"
export MESHCCL_SECRET=job-secret-$RANDOM$RANDOM
for r in 0 1; do
  bg "n$r" env RANK="$r" WORLD_SIZE=2 NCCL_COMM_ID="127.0.0.1:$PORT" NCCL_SOCKET_IFNAME=lo \
    NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET \
    "$T/mp_hostile" p2p "$TMP/net"
done
bg nstranger env -u MESHCCL_SECRET "$T/mp_hostile" net-stranger "$PID_n1" "$TMP/net"
for j in nstranger n0 n1; do wait_bg "$j" 60; done
unset MESHCCL_SECRET
expect_success "NET stranger: it ran to the end" "$RC_nstranger" "$TMP/nstranger.out"
expect_grep "NET stranger: it found rank 1's listening ports" "$TMP/nstranger.out" \
  'listens on [1-9][0-9]* TCP ports'
for r in 0 1; do
  rcv="RC_n$r"
  expect_success "NET stranger: rank $r exits 0 (rank 1 received rank 0's bytes)" "${!rcv}" \
    "$TMP/n$r.out"
done
expect_grep "NET stranger: rank 1 dropped the hellos that answer no challenge" "$TMP/n1.out" \
  'NET/Socket: dropped connection from 127\.0\.0\.1<[0-9]+> to .*: not a socket-net response'

# --- NCCL_COMM_ID: the port is held by another process -------------------------
PORT=$(free_port)
T0_MS=$(now_ms)
bg squat python3 -c '
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(4)
print("listening", flush=True)
time.sleep(60)
' "$PORT"
for _ in $(seq 100); do grep -q listening "$TMP/squat.out" 2>/dev/null && break; sleep 0.05; done
bg q0 env RANK=0 WORLD_SIZE=2 NCCL_COMM_ID="127.0.0.1:$PORT" NCCL_DEBUG=INFO \
  NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP "$T/mp_errors" init
wait_bg q0 30
kill "$PID_squat" 2>/dev/null
expect_eq "squatted NCCL_COMM_ID port: rank 0 exits 5 (ncclInvalidUsage)" "$RC_q0" 5
expect_le "squatted NCCL_COMM_ID port: rank 0 fails at once (within 5 s)" "$MS_q0" 5000
expect_grep "squatted NCCL_COMM_ID port: the error names the port and the other process" \
  "$TMP/q0.out" "init failed: 5 .*port $PORT is already in use by another process"
expect_grep "no MESHCCL_SECRET: said once that the secret comes from the address" "$TMP/q0.out" \
  "MESHCCL_SECRET is unset: the bootstrap secret of root 127\\.0\\.0\\.1<$PORT> is derived from its address"

mp_finish
