#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Communicator init at several job sizes through the public API: meshccl-run
# jobs of 1 to 64 ranks using meshcclCommInitFromEnv (count, rank, device,
# one node), a 4-rank job spread over 2 "hosts" by NCCL_HOSTID, and NCCL's
# classic flow (ncclGetUniqueId on rank 0, the id shared through a file,
# ncclCommInitRank) without NCCL_COMM_ID.
# shellcheck disable=SC2016 # the rank scripts expand $RANK themselves
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_init

for n in 1 2 3 8 16 64; do
  t0=$(now_ms)
  timeout 60 "$RUN" -n "$n" "$T/mp_init" env --launcher meshccl-run >"$TMP/out" 2>&1
  rc=$?
  expect_success "meshcclCommInitFromEnv with $n ranks: exit 0 ($(($(now_ms) - t0)) ms)" \
    "$rc" "$TMP/out"
  expect_eq "$n ranks: every rank reports ok" "$(grep -c ': ok (meshccl-run)$' "$TMP/out")" "$n"
done

# 4 ranks on 2 hosts: rank r has host id h(r%2), so node = r%2, local rank = r/2.
timeout 60 "$RUN" -n 4 bash -c 'NCCL_HOSTID=h$((RANK % 2)) exec "$0" env --nodes 2' \
  "$T/mp_init" >"$TMP/out" 2>&1
rc=$?
expect_success "4 ranks, 2 NCCL_HOSTIDs: nNodes 2, localRank r/2, device r/2" "$rc" "$TMP/out"

# 6 ranks on 3 hosts (uneven first ranks: node of rank r is r%3).
timeout 60 "$RUN" -n 6 bash -c 'NCCL_HOSTID=host$((RANK % 3)) exec "$0" env --nodes 3' \
  "$T/mp_init" >"$TMP/out" 2>&1
rc=$?
expect_success "6 ranks, 3 NCCL_HOSTIDs: nNodes 3, localRank r/3" "$rc" "$TMP/out"

# NCCL's flow: the unique id travels through a file; no NCCL_COMM_ID.
for n in 1 4; do
  mkdir -p "$TMP/uid$n"
  timeout 60 "$RUN" -n "$n" env -u NCCL_COMM_ID "$T/mp_init" uid "$TMP/uid$n" >"$TMP/out" 2>&1
  rc=$?
  expect_success "ncclGetUniqueId + file + ncclCommInitRank, $n ranks: exit 0" "$rc" "$TMP/out"
  expect_eq "unique id flow, $n ranks: every rank ok" "$(grep -c ': ok (unique id)$' "$TMP/out")" "$n"
done

mp_finish
