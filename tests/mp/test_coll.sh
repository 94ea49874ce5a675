#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Correctness of every collective (mp_coll.c: allreduce, broadcast, reduce,
# allgather, reducescatter, and grouped send/recv: ring, alltoall with self,
# gather, scatter; and ncclAlltoAll, ncclGather, ncclScatter) × every NCCL
# type × every op × in/out of place × sizes 0, 1, 7, 1000, 4099 (and
# 262147 and 1048579 elements for a few types),
# over each transport: P2P in one process (ncclCommInitAll, a thread per
# rank, and one thread driving all ranks in a group), P2P across processes
# (cross-memory attach with MESHCCL_P2P_CMA=1, else the shared FIFO), SHM (NCCL_P2P_DISABLE=1), NET (NCCL_P2P_DISABLE=1
# NCCL_SHM_DISABLE=1), and ranks spread over NCCL_HOSTID "hosts" (NET
# between them, P2P inside). ncclAlltoAll/Gather/Scatter and the forced
# algorithms (NCCL_ALGO=Ring, =Tree) are in test_coll_forced.sh, so that
# CTest runs the two halves at once. Nothing may be left in /dev/shm.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll

ALL_TYPES=int8,uint8,int32,uint32,int64,uint64,half,float,double,bfloat16
ls /dev/shm | grep '^meshccl-' | sort >"$TMP/shm.before"

run_case() { # NAME TIMEOUT CMD...
  local name=$1 limit=$2
  shift 2
  local t0 rc
  t0=$(now_ms)
  timeout "$limit" "$@" >"$TMP/case.out" 2>&1
  rc=$?
  expect_success "$name ($(($(now_ms) - t0)) ms)" "$rc" "$TMP/case.out"
}

SMALL=0,1,7,1000,4099
LARGE=262147,1048579
for n in 1 2 3 4; do
  run_case "P2P, one process, $n threads, all types" 300 "$T/mp_coll" --threads $n \
    --types $ALL_TYPES --sizes $SMALL
done
run_case "P2P, one process, 8 threads" 300 "$T/mp_coll" --threads 8 --types float,int32 \
  --sizes 0,1,4099
# One-shot all-reduce with 64 and 65 ranks: its "all peers done" state must
# not be a 64-bit mask.
for n in 64 65; do
  run_case "P2P, one process, $n threads, one-shot all-reduce" 120 "$T/mp_coll" --threads $n \
    --colls allreduce --types float,int32 --ops sum --sizes 8
done
run_case "P2P, one thread drives 4 ranks in groups" 300 "$T/mp_coll" --group 4 \
  --types $ALL_TYPES --sizes $SMALL
MESHCCL_P2P_CMA=1 run_case "P2P across 3 processes (cross-memory attach), all types" 300 \
  "$RUN" -n 3 "$T/mp_coll" --types $ALL_TYPES --sizes $SMALL
run_case "P2P across 3 processes (shared FIFO, the default)" 300 "$RUN" -n 3 "$T/mp_coll" \
  --types int32,float,bfloat16 --sizes $SMALL
NCCL_P2P_DISABLE=1 run_case "SHM, 4 processes, all types" 300 "$RUN" -n 4 "$T/mp_coll" \
  --types $ALL_TYPES --sizes $SMALL
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 run_case "NET, 3 processes" 300 "$RUN" -n 3 "$T/mp_coll" \
  --types int8,float,double,bfloat16 --sizes $SMALL
NCCL_P2P_DISABLE=1 run_case "SHM, 8 processes" 300 "$RUN" -n 8 "$T/mp_coll" \
  --types int32,float,bfloat16 --ops sum,max --sizes 0,1,7,4099
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 run_case "NET, 5 processes" 300 "$RUN" -n 5 "$T/mp_coll" \
  --types uint8,float --ops sum,min --sizes 0,1,7,4099
run_case "large: P2P, 2 threads" 300 "$T/mp_coll" --threads 2 --types float,int8 \
  --ops sum,avg --sizes $LARGE
MESHCCL_P2P_CMA=1 run_case "large: P2P across 2 processes (CMA)" 300 "$RUN" -n 2 "$T/mp_coll" --types float,half \
  --ops sum,max --sizes $LARGE
NCCL_P2P_DISABLE=1 run_case "large: SHM, 3 processes" 300 "$RUN" -n 3 "$T/mp_coll" \
  --types float,int64 --ops sum,prod --sizes $LARGE
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 run_case "large: NET, 3 processes" 300 "$RUN" -n 3 \
  "$T/mp_coll" --types float --ops sum --sizes $LARGE
run_case "4 ranks on 2 NCCL_HOSTID hosts (NET between, P2P inside)" 300 "$RUN" -n 4 \
  bash -c 'NCCL_HOSTID=h$((RANK / 2)) exec "$0" "$@"' "$T/mp_coll" --types int32,float,half \
  --sizes 0,1,4099,262147
run_case "6 ranks on 3 interleaved hosts" 300 "$RUN" -n 6 \
  bash -c 'NCCL_HOSTID=h$((RANK % 3)) exec "$0" "$@"' "$T/mp_coll" --types uint8,float \
  --ops sum,min --sizes 0,1,4099,262147
NCCL_BUFFSIZE=65536 run_case "NCCL_BUFFSIZE=64K (many steps per op)" 300 "$RUN" -n 3 \
  "$T/mp_coll" --types float,int64 --ops sum --sizes 1,262147
NCCL_MIN_NCHANNELS=3 run_case "3 channels" 300 "$RUN" -n 3 "$T/mp_coll" --types float,int8 \
  --ops sum,max --sizes 0,1,2,7,4099,262147

# New segments whose creator is gone (other tests may hold one for the
# milliseconds of a connect, their creators alive).
orphans() {
  ls /dev/shm | grep '^meshccl-' | sort | comm -13 "$TMP/shm.before" - |
    while read -r f; do kill -0 "${f##*-}" 2>/dev/null || echo "$f"; done
}
expect_eq "nothing left in /dev/shm" "$(orphans | wc -l)" 0
mp_finish
