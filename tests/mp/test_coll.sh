#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Correctness of every collective (mp_coll.c: allreduce, broadcast, reduce,
# allgather, reducescatter, sendrecv ring, alltoall with self) × every NCCL
# type × every op × in/out of place × sizes 0, 1, 7, 1000, 4099, 262147,
# over each transport: P2P in one process (ncclCommInitAll, a thread per
# rank, and one thread driving all ranks in a group), P2P across processes
# (cross-memory attach), SHM (NCCL_P2P_DISABLE=1), NET (NCCL_P2P_DISABLE=1
# NCCL_SHM_DISABLE=1), and ranks spread over NCCL_HOSTID "hosts" (NET
# between them, P2P inside). Nothing may be left in /dev/shm.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll

ALL_TYPES=int8,uint8,int32,uint32,int64,uint64,half,float,double,bfloat16
shm_before=$(ls /dev/shm | grep -c '^meshccl-' || true)

run_case() { # NAME TIMEOUT CMD...
  local name=$1 limit=$2
  shift 2
  local t0 rc
  t0=$(now_ms)
  timeout "$limit" "$@" >"$TMP/case.out" 2>&1
  rc=$?
  expect_success "$name ($(($(now_ms) - t0)) ms)" "$rc" "$TMP/case.out"
}

for n in 1 2 3 4; do
  run_case "P2P, one process, $n threads, all types" 300 "$T/mp_coll" --threads $n --types $ALL_TYPES
done
run_case "P2P, one process, 8 threads, float/int32" 300 "$T/mp_coll" --threads 8 --types float,int32 \
  --sizes 0,1,4099,262147
run_case "P2P, one thread drives 4 ranks in groups" 300 "$T/mp_coll" --group 4 --types $ALL_TYPES
run_case "P2P across 3 processes (CMA), all types" 300 "$RUN" -n 3 "$T/mp_coll" --types $ALL_TYPES
NCCL_P2P_DISABLE=1 run_case "SHM, 4 processes, all types" 300 "$RUN" -n 4 "$T/mp_coll" --types $ALL_TYPES
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 run_case "NET, 3 processes" 300 "$RUN" -n 3 "$T/mp_coll" \
  --types int8,float,double,bfloat16
run_case "4 ranks on 2 NCCL_HOSTID hosts (NET between, P2P inside)" 300 "$RUN" -n 4 \
  bash -c 'NCCL_HOSTID=h$((RANK / 2)) exec "$0" "$@"' "$T/mp_coll" --types int32,float,half
run_case "6 ranks on 3 interleaved hosts" 300 "$RUN" -n 6 \
  bash -c 'NCCL_HOSTID=h$((RANK % 3)) exec "$0" "$@"' "$T/mp_coll" --types uint8,float \
  --sizes 0,1,4099,262147
NCCL_BUFFSIZE=65536 run_case "NCCL_BUFFSIZE=64K (many steps per op), SHM and P2P" 300 "$RUN" -n 3 \
  "$T/mp_coll" --types float,int64 --sizes 1,262147,1048579
NCCL_MIN_NCHANNELS=3 run_case "3 channels" 300 "$RUN" -n 3 "$T/mp_coll" --types float,int8 \
  --sizes 0,1,2,7,4099,262147

shm_after=$(ls /dev/shm | grep -c '^meshccl-' || true)
expect_eq "nothing left in /dev/shm" "$shm_after" "$shm_before"
mp_finish
