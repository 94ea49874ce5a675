#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ncclCommSplit in meshccl-run jobs of 8 and 5 ranks: children by color
# rank%3 ordered by key -rank (sizes 3,3,2 for 8 ranks), ties ordered by
# parent rank, NCCL_SPLIT_NOCOLOR giving NULL, a split of a split, children
# destroyed before the parent. See mp_split.c for the checks of each rank.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_split

for n in 8 5; do
  t0=$(now_ms)
  timeout 60 "$RUN" -n "$n" "$T/mp_split" >"$TMP/out" 2>&1
  rc=$?
  expect_success "ncclCommSplit, $n ranks: exit 0 ($(($(now_ms) - t0)) ms)" "$rc" "$TMP/out"
  expect_eq "ncclCommSplit, $n ranks: every rank ok" "$(grep -c '] rank [0-9]*: ok$' "$TMP/out")" "$n"
done

mp_finish
