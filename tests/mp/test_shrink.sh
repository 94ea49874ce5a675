#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ncclCommShrink and ncclCommRevoke in meshccl-run jobs (mp_shrink.c):
# rank 1 excluded from a healthy parent (NCCL_SHRINK_DEFAULT), and rank 1
# dead before the shrink (NCCL_SHRINK_ABORT); the child all-reduces, is
# revoked, refuses a collective, and is destroyed.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_shrink

for n in 3 5; do
  timeout 60 "$RUN" -n "$n" "$T/mp_shrink" default >"$TMP/out" 2>&1
  expect_success "ncclCommShrink, healthy parent, $n ranks: exit 0" "$?" "$TMP/out"
  expect_eq "ncclCommShrink, healthy parent, $n ranks: every rank ok" \
    "$(grep -c 'rank [0-9]*: ok$' "$TMP/out")" "$n"
done
timeout 60 "$RUN" -n 4 "$T/mp_shrink" abort >"$TMP/out" 2>&1
rc=$?
expect_eq "NCCL_SHRINK_ABORT, rank 1 dead, 4 ranks: the 3 survivors ok" \
  "$(grep -c 'rank [0-9]*: ok$' "$TMP/out")" 3
[ "$(grep -c 'rank [0-9]*: ok$' "$TMP/out")" = 3 ] || { echo "# exit $rc"; show "$TMP/out"; }

mp_finish
