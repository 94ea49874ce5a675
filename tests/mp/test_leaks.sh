#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Repeated init/teardown must not leak: 20 cycles of meshcclCommInitFromEnv +
# ncclCommDestroy and of init + ncclCommAbort in every rank of a 4-rank
# meshccl-run job (one NCCL_COMM_ID reused by every communicator), and 20
# cycles of ncclCommInitAll(4) + destroy in one process. After each cycle
# fds and threads are back to their count before the first init (checked in
# mp_leaks.c); /dev/shm holds no new entry after any of the jobs.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_leaks

shm_list() { find /dev/shm -mindepth 1 -maxdepth 1 -printf "%f\n" 2>/dev/null | sort; }
shm0=$(shm_list)

for mode in env abort; do
  t0=$(now_ms)
  timeout 60 "$RUN" -n 4 "$T/mp_leaks" "$mode" 20 >"$TMP/out" 2>&1
  rc=$?
  expect_success "4 ranks x 20 cycles of init + $mode: exit 0 ($(($(now_ms) - t0)) ms)" \
    "$rc" "$TMP/out"
  expect_eq "4 ranks x 20 cycles of init + $mode: every rank ok" \
    "$(grep -c "] rank [0-3]: $mode x 20: ok" "$TMP/out")" 4
  expect_eq "4 ranks x 20 cycles of init + $mode: /dev/shm unchanged" "$(shm_list)" "$shm0"
done

t0=$(now_ms)
timeout 60 "$T/mp_leaks" all 20 >"$TMP/out" 2>&1
rc=$?
expect_success "20 cycles of ncclCommInitAll(4) + destroy: exit 0 ($(($(now_ms) - t0)) ms)" \
  "$rc" "$TMP/out"
expect_eq "ncclCommInitAll cycles: /dev/shm unchanged" "$(shm_list)" "$shm0"

mp_finish
