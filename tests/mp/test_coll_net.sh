#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Correctness of every collective (mp_coll.c, as in test_coll.sh) over NET
# (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1), over ranks spread on NCCL_HOSTID
# "hosts" (NET between them, P2P inside), at large sizes over each transport,
# with a small NCCL_BUFFSIZE (many steps per operation) and with 3 channels.
# Nothing may be left in /dev/shm.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll

SMALL=0,1,7,1000,4099
LARGE=262147,1048579
shm_snapshot
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

expect_eq "nothing left in /dev/shm" "$(shm_orphans | wc -l)" 0
mp_finish
