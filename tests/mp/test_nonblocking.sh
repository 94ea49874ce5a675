#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Non-blocking init: config.blocking = 0 and NCCL_COMM_BLOCKING=0 return
# ncclInProgress, the communicator is unusable (ncclInvalidArgument) until
# ncclCommGetAsyncError reports ncclSuccess; ncclCommAbort from another
# thread ends an init that waits for a rank that never comes, within 1 s and
# without leaving threads or fds. See mp_nonblocking.c.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_nonblocking

for n in 2 4; do
  for mode in config env; do
    d="$TMP/$mode$n"
    mkdir -p "$d"
    envs=()
    [ "$mode" = env ] && envs=(NCCL_COMM_BLOCKING=0)
    t0=$(now_ms)
    env "${envs[@]}" timeout 60 "$RUN" -n "$n" "$T/mp_nonblocking" "$mode" "$d" >"$TMP/out" 2>&1
    rc=$?
    expect_success "non-blocking init ($mode), $n ranks: exit 0 ($(($(now_ms) - t0)) ms)" \
      "$rc" "$TMP/out"
    expect_eq "non-blocking init ($mode), $n ranks: every rank ok" \
      "$(grep -c '] rank [0-9]*: ok$' "$TMP/out")" "$n"
  done
done

# Abort from another thread; rank 1 of the 2-rank job never starts.
port=$(free_port)
RANK=0 WORLD_SIZE=2 NCCL_COMM_ID=127.0.0.1:$port timeout 20 "$T/mp_nonblocking" abort \
  >"$TMP/out" 2>&1
rc=$?
expect_success "ncclCommAbort during init (NCCL_COMM_ID root): exit 0" "$rc" "$TMP/out"
grep '^ncclCommAbort took' "$TMP/out" | sed 's/^/# /'

RANK=0 WORLD_SIZE=2 timeout 20 "$T/mp_nonblocking" abort >"$TMP/out" 2>&1
rc=$?
expect_success "ncclCommAbort during init (root of ncclGetUniqueId): exit 0" "$rc" "$TMP/out"
grep '^ncclCommAbort took' "$TMP/out" | sed 's/^/# /'

mp_finish
