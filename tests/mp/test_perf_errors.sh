#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# meshccl-perf names the rank that failed to initialise: two ranks started by
# hand (RANK, WORLD_SIZE, NCCL_COMM_ID) on one device, so that both fail
# init; each prints its own rank (from the launcher's environment, since the
# communicator does not exist) and exits 1 (a rank may learn of the other's
# failure first: the cause is the same). Without a launcher environment
# no rank is named.
# shellcheck source=mp_lib.sh disable=SC2154 # bg and wait_bg set RC_*
. "$(dirname "$0")/mp_lib.sh"
need_progs
PERF="$MC_BUILD/bin/meshccl-perf"

PORT=$(free_port)
T0_MS=$(now_ms)
for r in 0 1; do
  bg "p$r" env RANK=$r WORLD_SIZE=2 NCCL_COMM_ID="127.0.0.1:$PORT" MESHCCL_DEVICE=0 \
    MESHCCL_INIT_TIMEOUT=10 "$PERF" all_reduce -b 8 -e 8
done
for r in 0 1; do wait_bg "p$r" 30; done
for r in 0 1; do
  rcv="RC_p$r"
  expect_eq "init fails on rank $r: exit 1" "${!rcv}" 1
  expect_grep "rank $r names itself" "$TMP/p$r.out" \
    "^meshccl-perf: rank $r: meshcclCommInitFromEnv failed: (invalid usage \(run with NCCL_DEBUG=WARN for details\)|remote process exited or there was a network error): .*Multiple ranks are using the same device: rank 0 \(pid [0-9]+\) and rank 1 \(pid [0-9]+\) on host .* both use device 0"
  expect_eq "rank $r names no other rank" "$(grep -c "^meshccl-perf: rank $((1 - r)):" "$TMP/p$r.out")" 0
done

timeout 20 "$PERF" all_reduce -b 8 -e 8 >"$TMP/none.out" 2>&1
expect_eq "no launcher: exit 1" "$?" 1
expect_grep "no launcher: no rank named" "$TMP/none.out" \
  "^meshccl-perf: meshcclCommInitFromEnv failed: invalid usage .*: meshcclCommInitFromEnv: no launcher environment found"
mp_finish
