#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ncclCommSplit in meshccl-run jobs of 8 and 5 ranks: children by color
# rank%3 ordered by key -rank (sizes 3,3,2 for 8 ranks), ties ordered by
# parent rank, NCCL_SPLIT_NOCOLOR giving NULL, a split of a split, children
# destroyed before the parent. See mp_split.c for the checks of each rank.
# Then rank 2 of 4 killed (kill -9) while the others are in ncclCommSplit:
# each of the 3 survivors' split fails naming rank 2, and ncclCommShrink
# excluding rank 2 then succeeds on all 3 (mp_split_kill.c).
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_split mp_split_kill

for n in 8 5; do
  t0=$(now_ms)
  timeout 60 "$RUN" -n "$n" "$T/mp_split" >"$TMP/out" 2>&1
  rc=$?
  expect_success "ncclCommSplit, $n ranks: exit 0 ($(($(now_ms) - t0)) ms)" "$rc" "$TMP/out"
  expect_eq "ncclCommSplit, $n ranks: every rank ok" "$(grep -c '] rank [0-9]*: ok$' "$TMP/out")" "$n"
done

# Rank 2 killed during the split: no launcher, so that nothing stops the survivors.
port=$(free_port)
mkdir -p "$TMP/ready"
T0_MS=$(now_ms)
for r in 0 1 2 3; do
  bg "k$r" env NCCL_COMM_ID="127.0.0.1:$port" RANK=$r WORLD_SIZE=4 "$T/mp_split_kill" "$TMP/ready"
done
for _ in $(seq 300); do
  [ "$(ls "$TMP/ready" | wc -l)" = 4 ] && break
  sleep 0.1
done
sleep 0.3 # the survivors are in the split's allgather now
kill -KILL "$PID_k2"
wait "$PID_k2" 2>/dev/null
for r in 0 1 3; do
  wait_bg "k$r" 60
  rc_var="RC_k$r"
  ms_var="MS_k$r"
  expect_success "rank 2 killed during ncclCommSplit: rank $r exits 0 (${!ms_var} ms)" \
    "${!rc_var}" "$TMP/k$r.out"
  expect_grep "rank $r: its split failed naming rank 2" "$TMP/k$r.out" \
    "^rank $r: split failed in [0-9.]* s: .*rank 2 \\(host"
  expect_grep "rank $r: ncclCommShrink without rank 2, then an all-reduce" "$TMP/k$r.out" \
    "^rank $r: ok$"
done
mp_finish
