#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ncclCommInitAll: 8 communicators in one process with devlist NULL and a
# reversed devlist (count, rank, device of each), and its argument errors
# (NULL comms, ndev 0 -> ncclInvalidArgument; a duplicate device ->
# ncclInvalidUsage). See mp_init_all.c.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_init_all

for mode in null reverse errors; do
  t0=$(now_ms)
  timeout 30 "$T/mp_init_all" "$mode" >"$TMP/$mode.out" 2>&1
  rc=$?
  expect_success "ncclCommInitAll $mode: exit 0 ($(($(now_ms) - t0)) ms)" "$rc" "$TMP/$mode.out"
done
expect_grep "NULL comms: ncclInvalidArgument" "$TMP/errors.out" \
  '^ncclCommInitAll\(NULL, 8, NULL\) -> invalid argument'
expect_grep "ndev 0: ncclInvalidArgument naming ndev" "$TMP/errors.out" \
  '^ncclCommInitAll\(comms, 0, NULL\) -> invalid argument.*ndev 0'
expect_grep "duplicate device: ncclInvalidUsage" "$TMP/errors.out" \
  '^ncclCommInitAll\(comms, 4, \{0,1,2,1\}\) -> invalid usage.*NCCL_MULTI_RANK_GPU_ENABLE'

# NCCL_MULTI_RANK_GPU_ENABLE=1 allows a device listed twice.
NCCL_MULTI_RANK_GPU_ENABLE=1 timeout 30 "$T/mp_init_all" dup >"$TMP/out" 2>&1
rc=$?
expect_success "devlist {0,1,2,1} with NCCL_MULTI_RANK_GPU_ENABLE=1: exit 0" "$rc" "$TMP/out"

mp_finish
