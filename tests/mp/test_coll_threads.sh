#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Correctness of every collective (mp_coll.c, as in test_coll.sh) with a
# rank's channels on several threads (MESHCCL_NTHREADS=2 and 3 forced: on a
# 2-core machine they share its cores, which is fine for results): every
# type and op, in and out of place, sizes 0 .. 4 MiB, 4 channels
# (NCCL_MIN_NCHANNELS=4, so that every thread has channels), 2 and 4
# processes, ranks as threads of one process (a pool per communicator), SHM,
# and NET only (which stays on the calling thread: the batch must still be
# right). Then the workers' names: "meshccl-coll 1" and "meshccl-coll 2"
# in each rank's process with NCCL_SET_THREAD_NAME=1 (test_leaks counts the
# threads and fds left after destroy and abort). Nothing may be left in
# /dev/shm.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll mp_leaks

ALL_TYPES=int8,uint8,int32,uint32,int64,uint64,half,float,double,bfloat16
SMALL=0,1,7,1000,4099
LARGE=262147,1048579
shm_snapshot
export NCCL_MIN_NCHANNELS=4
for k in 2 3; do
  MESHCCL_NTHREADS=$k run_case "$k threads, P2P across 2 processes, all types" 300 "$RUN" -n 2 \
    "$T/mp_coll" --types $ALL_TYPES --sizes $SMALL
  MESHCCL_NTHREADS=$k run_case "$k threads, large, 2 processes" 300 "$RUN" -n 2 "$T/mp_coll" \
    --types float,int8,bfloat16 --ops sum,max,avg --sizes $LARGE
done
MESHCCL_NTHREADS=2 NCCL_P2P_DISABLE=1 run_case "2 threads, SHM, 4 processes, all types" 300 \
  "$RUN" -n 4 "$T/mp_coll" --types $ALL_TYPES --sizes $SMALL
MESHCCL_NTHREADS=3 run_case "3 threads, 4 processes, large" 300 "$RUN" -n 4 "$T/mp_coll" \
  --types float,int32 --ops sum,min --sizes $LARGE
MESHCCL_NTHREADS=2 MESHCCL_P2P_CMA=1 run_case "2 threads, P2P cross-memory attach, 2 processes" \
  300 "$RUN" -n 2 "$T/mp_coll" --types float,double --ops sum,prod --sizes 0,1,4099,$LARGE
MESHCCL_NTHREADS=2 run_case "2 threads, ranks as 3 threads of one process" 300 "$T/mp_coll" \
  --threads 3 --types float,int32,half --sizes 0,1,4099,262147
MESHCCL_NTHREADS=3 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 run_case "3 threads, NET only, 2 processes" \
  300 "$RUN" -n 2 "$T/mp_coll" --types int8,float,double --sizes 0,1,4099,262147
MESHCCL_NTHREADS=2 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 run_case "2 threads, NET only, 4 processes" \
  300 "$RUN" -n 4 "$T/mp_coll" --types float --ops sum,max --sizes 0,1,4099,262147
MESHCCL_NTHREADS=2 run_case "2 threads, 4 ranks on 2 NCCL_HOSTID hosts" 300 "$RUN" -n 4 \
  bash -c 'NCCL_HOSTID=h$((RANK / 2)) exec "$0" "$@"' "$T/mp_coll" --types float,int32 \
  --ops sum --sizes 0,1,4099,262147

# Names: a long meshccl-perf job; each rank's threads are read from /proc
# until both workers show up (or 60 s pass), then the job is stopped.
MESHCCL_NTHREADS=3 NCCL_SET_THREAD_NAME=1 "$RUN" -n 2 "$MC_BUILD/bin/meshccl-perf" all_reduce \
  -b 16M -e 16M -n 100000 -w 0 >"$TMP/names.out" 2>&1 &
job=$!
named=0
for _ in $(seq 600); do
  named=0
  for p in $(pgrep -P "$job" meshccl-perf); do
    if [ "$(cat /proc/"$p"/task/*/comm 2>/dev/null | grep -c '^meshccl-coll [12]$')" = 2 ]; then
      named=$((named + 1))
    fi
  done
  [ "$named" = 2 ] && break
  sleep 0.1
done
kill "$job" 2>/dev/null
wait "$job" 2>/dev/null
expect_eq "3 threads per rank: each of the 2 ranks runs 'meshccl-coll 1' and 'meshccl-coll 2'" \
  "$named" 2

expect_eq "nothing left in /dev/shm" "$(shm_orphans | wc -l)" 0
mp_finish
