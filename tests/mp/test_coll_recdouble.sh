#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The recursive-doubling all-reduce (NCCL_ALGO=RecDouble, coll_recdouble.c):
# every type x op (premulsum included) in and out of place at 1-6 and 8 ranks
# (powers of two, and the pairing step of the others), counts 0, 1, odd and
# several MiB, each result within NCCL's tolerance and the same bits on every
# rank (mp_coll.c --same-bits); over P2P, SHM, NET, ranks on NCCL_HOSTID
# hosts, one thread driving 3 ranks in groups, small FIFOs (many chunks);
# the TUNING log names it when forced, and the model's choice on 2 hosts
# without NCCL_ALGO is the one unit/test_coll_algos computes. Nothing may be
# left in /dev/shm.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll

export NCCL_ALGO=RecDouble
# The types mp_coll checks (as test_coll_forced.sh; the fp8 kernels are unit/test_coll_reduce's).
ALL_TYPES=int8,uint8,int32,uint32,int64,uint64,half,float,double,bfloat16
shm_snapshot
for n in 1 2 3 4 5 6 8; do
  run_case "RecDouble, $n threads, every type and op" 300 "$T/mp_coll" --threads $n \
    --colls allreduce --types $ALL_TYPES --sizes 0,1,7,4099 --same-bits 1
done
for n in 2 3 5; do
  run_case "RecDouble, $n threads, several MiB" 300 "$T/mp_coll" --threads $n --colls allreduce \
    --types int8,float --ops sum,avg,premulsum --sizes 1048583,3000001 --same-bits 1
done
run_case "RecDouble, 8 threads, several MiB" 300 "$T/mp_coll" --threads 8 --colls allreduce \
  --types float --ops sum --sizes 1048583 --same-bits 1
run_case "RecDouble, one thread drives 3 ranks in groups" 120 "$T/mp_coll" --group 3 \
  --colls allreduce --types int32,half --sizes 0,1,4099 --same-bits 1
NCCL_P2P_DISABLE=1 run_case "RecDouble, SHM, 3 processes" 120 "$RUN" -n 3 "$T/mp_coll" \
  --colls allreduce --types int32,float,bfloat16 --ops sum,max,avg --sizes 0,1,7,262147 \
  --same-bits 1
MESHCCL_P2P_CMA=1 run_case "RecDouble, P2P across 4 processes (CMA)" 120 "$RUN" -n 4 \
  "$T/mp_coll" --colls allreduce --types float,int64 --ops sum,prod --sizes 1,4099,262147 \
  --same-bits 1
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 run_case "RecDouble, NET, 4 processes" 300 "$RUN" -n 4 \
  "$T/mp_coll" --colls allreduce --types uint8,float,double --ops sum,min,avg \
  --sizes 0,1,7,4099,262147 --same-bits 1
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 run_case "RecDouble, NET, 5 processes" 300 "$RUN" -n 5 \
  "$T/mp_coll" --colls allreduce --types int32,half --ops sum,premulsum --sizes 1,4099,1048583 \
  --same-bits 1
run_case "RecDouble, 6 ranks on 3 interleaved NCCL_HOSTID hosts" 300 "$RUN" -n 6 \
  bash -c 'NCCL_HOSTID=h$((RANK % 3)) exec "$0" "$@"' "$T/mp_coll" --colls allreduce \
  --types uint8,float --ops sum,min --sizes 0,1,4099,262147 --same-bits 1
NCCL_BUFFSIZE=65536 run_case "RecDouble, NCCL_BUFFSIZE=64K (many chunks per op)" 120 "$RUN" -n 3 \
  "$T/mp_coll" --colls allreduce --types float,int64 --ops sum --sizes 1,262147 --same-bits 1

NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING timeout 60 "$T/mp_coll" --threads 3 \
  --colls allreduce,broadcast --types int32 --ops sum --sizes 4099 >"$TMP/tuning.out" 2>&1
expect_grep "NCCL_ALGO=RecDouble: all-reduce runs it (TUNING log)" "$TMP/tuning.out" \
  'AllReduce: 16396 Bytes -> Algo 10 proto 2 .*RecDouble: NCCL_ALGO'
expect_grep "NCCL_ALGO=RecDouble: broadcast falls back to Ring (TUNING log)" "$TMP/tuning.out" \
  'Broadcast: 16396 Bytes -> Algo 1 proto 2 .*Ring: fallback'
# Without NCCL_ALGO, 2 ranks on 2 NCCL_HOSTID hosts: the model's choice
# (unit/test_coll_algos checks the same decision from the same figures).
env -u NCCL_ALGO NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING timeout 60 "$RUN" -n 2 \
  bash -c 'NCCL_HOSTID=h$RANK exec "$0" "$@"' "$T/mp_coll" --colls allreduce --types int8 \
  --ops sum --sizes 8,1048576 >"$TMP/model.out" 2>&1
expect_grep "2 hosts, 8 bytes: the model picks RecDouble" "$TMP/model.out" \
  'AllReduce: 8 Bytes -> Algo 10 proto 2 .*RecDouble: fastest in the model'
expect_grep "2 hosts, 1 MiB: the model picks another" "$TMP/model.out" \
  'AllReduce: 1048576 Bytes -> Algo [01] proto 2 .*fastest in the model'

expect_eq "nothing left in /dev/shm" "$(shm_orphans | wc -l)" 0
mp_finish
