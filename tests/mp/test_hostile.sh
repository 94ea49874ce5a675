#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The bootstrap root survives hostile connections: rank 0 creates the unique
# id (ncclGetUniqueId, no NCCL_COMM_ID) and writes it to a file; mp_hostile
# attack connects to the root with random bytes, a wrong magic, a wrong
# socket type, a 0xFFFFFFFF length prefix, an early close, a short message,
# and a silent connection kept open; then ranks 0-2 init and must succeed.
# Rank 0's INFO log (it hosts the root) shows the dropped connections.
# shellcheck source=mp_lib.sh disable=SC2154 # bg and wait_bg set PID_*, RC_*, MS_*
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_hostile

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
  'dropped connection from .*4294967295 bytes'
n=$(grep -c 'dropped connection' "$log")
expect_le "root log: at least 5 dropped connections (got $n)" 5 "$n"
expect_grep "root log: all 3 ranks joined" "$log" 'all 3 ranks joined'

mp_finish
