#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Correctness of the collectives, second half (test_coll.sh has the
# transport matrix; split so that CTest runs both at once): ncclAlltoAll,
# ncclGather, ncclScatter over P2P, SHM and NET, and NCCL_ALGO=Ring and
# NCCL_ALGO=Tree forced for every collective x type x op at 1-8 ranks, trees
# over SHM, NET and CMA with several channels, and the TUNING log of the
# forced choice (Tree applies to all-reduce only; the other collectives fall
# back to Ring, which the log must say). Integers exact (mp_coll.c). Nothing
# may be left in /dev/shm.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll

ALL_TYPES=int8,uint8,int32,uint32,int64,uint64,half,float,double,bfloat16
shm_snapshot

# ncclAlltoAll, ncclGather, ncclScatter (lowered to grouped send/recv), a
# few sizes over each transport, in place where NCCL defines it.
API_COLLS=ncclalltoall,ncclgather,ncclscatter
for n in 1 2 3 5; do
  run_case "AlltoAll/Gather/Scatter API, P2P, $n threads" 120 "$T/mp_coll" --threads $n \
    --colls $API_COLLS --types int8,int32,uint64,float --sizes 0,1,7,4099
done
run_case "AlltoAll/Gather/Scatter API, one thread drives 3 ranks in groups" 120 "$T/mp_coll" \
  --group 3 --colls $API_COLLS --types int32,bfloat16 --sizes 0,1,4099
NCCL_P2P_DISABLE=1 run_case "AlltoAll/Gather/Scatter API, SHM, 4 processes" 120 "$RUN" -n 4 \
  "$T/mp_coll" --colls $API_COLLS --types int32,uint8 --sizes 0,1,4099,262147
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 run_case "AlltoAll/Gather/Scatter API, NET, 3 processes" \
  120 "$RUN" -n 3 "$T/mp_coll" --colls $API_COLLS --types int64,int8 --sizes 0,1,4099

# Forced algorithms: every collective x type x op, 1-8 ranks, integers exact.
for algo in Ring Tree; do
  for n in 1 2 3 4 5 6 7 8; do
    NCCL_ALGO=$algo run_case "NCCL_ALGO=$algo, $n threads, every collective, type and op" 120 \
      "$T/mp_coll" --threads $n --types int8,uint8,int32,uint64,float --sizes 1,7,4099
  done
done
NCCL_ALGO=Tree NCCL_MIN_NCHANNELS=2 NCCL_P2P_DISABLE=1 run_case \
  "NCCL_ALGO=Tree, both trees (2 channels), SHM, 5 processes" 120 "$RUN" -n 5 "$T/mp_coll" \
  --colls allreduce --types int32,int64,float --sizes 1,7,4099,262147
# Streamed slot writes (MESHCCL_SHM_STREAM=1; auto picks them on far cores):
# plain copies, reductions into the slot through an L1 block (3 ranks and
# more), premulsum's first multiply, a tree node sending to two children.
MESHCCL_SHM_STREAM=1 NCCL_P2P_DISABLE=1 run_case \
  "MESHCCL_SHM_STREAM=1, SHM, 2 processes, every collective" 120 "$RUN" -n 2 "$T/mp_coll" \
  --types int8,float --sizes 7,1048583
MESHCCL_SHM_STREAM=1 NCCL_P2P_DISABLE=1 run_case \
  "MESHCCL_SHM_STREAM=1, SHM, 3 processes, the reductions" 120 "$RUN" -n 3 "$T/mp_coll" \
  --colls allreduce,reduce,reducescatter --types half,float --ops sum,avg,max --sizes 7,262147,1048583
MESHCCL_SHM_STREAM=1 NCCL_ALGO=Tree NCCL_MIN_NCHANNELS=2 NCCL_P2P_DISABLE=1 run_case \
  "MESHCCL_SHM_STREAM=1, NCCL_ALGO=Tree, SHM, 5 processes" 120 "$RUN" -n 5 "$T/mp_coll" \
  --colls allreduce,broadcast --types int32,float --sizes 7,262147
NCCL_ALGO=Tree NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 run_case "NCCL_ALGO=Tree, NET, 4 processes" \
  120 "$RUN" -n 4 "$T/mp_coll" --colls allreduce --types uint8,int32 --sizes 1,4099,262147
MESHCCL_P2P_CMA=1 NCCL_ALGO=Tree NCCL_MIN_NCHANNELS=3 run_case \
  "NCCL_ALGO=Tree, P2P across 6 processes (CMA), 3 channels" 120 "$RUN" -n 6 "$T/mp_coll" \
  --colls allreduce --types int32,half --sizes 1,4099,262147
NCCL_ALGO=Tree NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING timeout 60 "$T/mp_coll" --threads 3 \
  --colls allreduce,broadcast,reduce --types int32 --ops sum --sizes 4099 >"$TMP/tuning.out" 2>&1
expect_grep "NCCL_ALGO=Tree: all-reduce runs on the tree (TUNING log)" "$TMP/tuning.out" \
  'AllReduce: 16396 Bytes -> Algo 0 proto 2 .*Tree: NCCL_ALGO'
expect_grep "NCCL_ALGO=Tree: broadcast falls back to Ring (TUNING log)" "$TMP/tuning.out" \
  'Broadcast: 16396 Bytes -> Algo 1 proto 2 .*Ring: fallback'
expect_grep "NCCL_ALGO=Tree: reduce falls back to Ring (TUNING log)" "$TMP/tuning.out" \
  'Reduce: 16396 Bytes -> Algo 1 proto 2 .*Ring: fallback'

expect_eq "nothing left in /dev/shm" "$(shm_orphans | wc -l)" 0
mp_finish
