#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Correctness of every collective (mp_coll.c: allreduce, broadcast, reduce,
# allgather, reducescatter, and grouped send/recv: ring, alltoall with self,
# gather, scatter; and ncclAlltoAll, ncclGather, ncclScatter) × every NCCL
# type × every op × in/out of place × sizes 0, 1, 7, 1000, 4099 (and
# 262147 and 1048579 elements for a few types),
# over each transport: P2P in one process (ncclCommInitAll, a thread per
# rank, and one thread driving all ranks in a group), P2P across processes
# (cross-memory attach with MESHCCL_P2P_CMA=1, else the shared FIFO) and SHM
# (NCCL_P2P_DISABLE=1). NET, NCCL_HOSTID "hosts", large sizes and other
# buffer and channel settings are in test_coll_net.sh; ncclAlltoAll/Gather/
# Scatter and the forced algorithms (NCCL_ALGO=Ring, =Tree) in
# test_coll_forced.sh: CTest runs the three at once. Nothing may be left in
# /dev/shm.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll

ALL_TYPES=int8,uint8,int32,uint32,int64,uint64,half,float,double,bfloat16
shm_snapshot

SMALL=0,1,7,1000,4099
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
expect_eq "nothing left in /dev/shm" "$(shm_orphans | wc -l)" 0
mp_finish
