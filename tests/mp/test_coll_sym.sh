#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The symmetric collectives (src/coll/coll_sym.c: all-reduce, all-gather,
# reduce-scatter): buffers from ncclMemAlloc registered as
# NCCL_WIN_COLL_SYMMETRIC windows (mp_coll --symmetric 1, as nccl-tests -R 2).
# Every type and op in place and out of place at 2, 3 and 5 processes and 4
# threads, integers exact; 34 processes (more peers' allocations than 64); the other collectives on window buffers; the
# messages over SHM, NET and CMA connections; the choice in the
# TUNING log and what turns it off; a rank whose buffers are not in windows
# (the others are) is a clear mismatch on every rank, not a hang; meshccl-perf
# -R 2 checks its results; what peers' mappings hold stays within
# MESHCCL_SYM_MAP_BYTES and a freed allocation's mapping is dropped. Nothing
# may be left in /dev/shm.
# shellcheck shell=bash source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll

shm_snapshot
# Each case allocates new buffers and frees them: a peer drops its mapping of
# a freed allocation at the next operation with its owner.
run_case "symmetric, 2 processes (SHM), every type and op, in and out of place" 120 \
  "$RUN" -n 2 "$T/mp_coll" --symmetric 1 --colls allreduce,allgather,reducescatter \
  --sizes 1,7,4099,16385,262147
# The all-reduce goes in chunks of the L2 over n + 2 (256 KiB on 2 ranks of a 1 MiB L2): 16 MiB
# of int32 at 2 ranks is 32 chunks a slice, more than a connection's 8 slots hold unreleased.
run_case "symmetric, 2 processes (SHM), many chunks a slice, in and out of place" 120 \
  "$RUN" -n 2 "$T/mp_coll" --symmetric 1 --colls allreduce --types int32,float --ops sum,max \
  --sizes 4194311
run_case "symmetric, 3 processes (SHM), every op" 120 "$RUN" -n 3 "$T/mp_coll" --symmetric 1 \
  --colls allreduce,allgather,reducescatter --types int8,uint32,int64,half,float,bfloat16,double \
  --sizes 1,7,4099,262147
# bfloat16 avg at 5 ranks is left out: its partial sums lose more than the
# check's tolerance with any algorithm.
run_case "symmetric, 5 processes (SHM): slices of unequal lengths" 120 "$RUN" -n 5 \
  "$T/mp_coll" --symmetric 1 --colls allreduce,allgather,reducescatter \
  --types int32,uint8,float,double --ops sum,prod,max,min,avg --sizes 1,4,7,4099,262147
# 34 processes: an out-of-place operation maps an input and an output of each
# of 33 peers, 66 allocations (the cache once held 64 in all and failed it).
run_case "symmetric, 34 processes: 66 peers' allocations in one operation" 120 "$RUN" -n 34 \
  "$T/mp_coll" --symmetric 1 --colls allreduce,allgather,reducescatter --types int32 --ops sum \
  --sizes 4099
run_case "symmetric, 4 threads of one process, every collective on window buffers" 120 \
  "$T/mp_coll" --threads 4 --symmetric 1 --types int32,float --sizes 1,7,4099,262147
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 run_case \
  "symmetric, 3 processes, the messages over NET connections" 120 "$RUN" -n 3 "$T/mp_coll" \
  --symmetric 1 --colls allreduce,allgather,reducescatter --types int32,float --ops sum,max \
  --sizes 7,262147,1048583
MESHCCL_P2P_CMA=1 run_case "symmetric, 3 processes, the messages over P2P (CMA) connections" \
  120 "$RUN" -n 3 "$T/mp_coll" --symmetric 1 --colls allreduce --types int32,half \
  --ops sum,avg --sizes 7,262147

# The choice, logged as NCCL's TUNING lines, and what turns it off.
# The one-shot, which small single-host all-reduces try first, is held to 16 KiB
# (on 2 ranks it would otherwise take every size its slots hold).
tuning() { # OUT [VAR=value ...]: 2 processes, all-reduce, all-gather, reduce-scatter of 4099 int32
  local out=$1
  shift
  env MESHCCL_ALLREDUCE_ONESHOT_BYTES=16384 "$@" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING,REG timeout 60 "$RUN" -n 2 "$T/mp_coll" \
    --symmetric 1 --colls allreduce,allgather,reducescatter --types int32 --ops sum \
    --sizes 4099 >"$out" 2>&1
}
tuning "$TMP/on.out"
expect_grep "TUNING: the all-reduce on symmetric windows is Symmetric (Algo 9)" "$TMP/on.out" \
  'AllReduce: 16396 Bytes -> Algo 9 proto 2 .*\(Symmetric: both buffers in symmetric windows, one host\)'
expect_grep "TUNING: the all-gather too" "$TMP/on.out" \
  'AllGather: 32792 Bytes -> Algo 9 proto 2 .*\(Symmetric: both buffers in symmetric windows, one host\)'
expect_grep "TUNING: the reduce-scatter too" "$TMP/on.out" \
  'ReduceScatter: 32792 Bytes -> Algo 9 proto 2 .*\(Symmetric: both buffers in symmetric windows, one host\)'
expect_grep "REG: a rank maps its peer's window memory" "$TMP/on.out" \
  "rank 0 mapped rank 1's ncclMemAlloc memory /proc/[0-9]+/fd/[0-9]+ \([0-9]+ bytes\)"
tuning "$TMP/off.out" MESHCCL_SYMMETRIC=0
expect_grep "MESHCCL_SYMMETRIC=0: the usual choice (Ring)" "$TMP/off.out" \
  'AllReduce: 16396 Bytes -> Algo 1 proto 2 .*Ring'
tuning "$TMP/noalgo.out" NCCL_ALGO=^Symmetric
expect_grep "NCCL_ALGO=^Symmetric: the usual choice (Ring)" "$TMP/noalgo.out" \
  'AllReduce: 16396 Bytes -> Algo 1 proto 2 .*Ring'

# Rank 0's buffers in windows, the others' not: every rank reports the
# mismatch by name, nobody waits forever.
timeout 60 "$RUN" -n 3 "$T/mp_coll" --symmetric 2 --colls allreduce --types float --ops sum \
  --sizes 262147 >"$TMP/mixed.out" 2>&1
expect_eq "windows on rank 0 only: the job fails (not a hang)" "$?" 1
expect_grep "windows on rank 0 only: the mismatch names Symmetric against Ring" \
  "$TMP/mixed.out" 'rank 0 runs AllReduce\(count 262147, float, sum\) with Symmetric where rank [12] runs it with Ring: both buffers must be in NCCL_WIN_COLL_SYMMETRIC windows on every rank or on none'

timeout 120 "$RUN" -n 2 "$MC_BUILD/bin/meshccl-perf" all_reduce -b 4 -e 4M -f 4 -R 2 -c 1 \
  >"$TMP/perf.out" 2>&1
expect_success "meshccl-perf -R 2: all-reduce 4 B-4 MiB, results checked" "$?" "$TMP/perf.out"
for c in all_gather reduce_scatter; do
  timeout 120 "$RUN" -n 3 "$MC_BUILD/bin/meshccl-perf" $c -b 12 -e 3M -f 8 -R 2 -c 1 \
    >"$TMP/perf_$c.out" 2>&1
  expect_success "meshccl-perf -R 2: $c on 3 ranks, results checked" "$?" "$TMP/perf_$c.out"
  expect_grep "meshccl-perf -R 2: $c, no wrong element" "$TMP/perf_$c.out" \
    '^\[0\] # Out of bounds values : 0 OK'
done
expect_grep "meshccl-perf -R 2: no wrong element" "$TMP/perf.out" '^\[0\] # Out of bounds values : 0 OK'
expect_grep "meshccl-perf -R 2: says what -R 2 does" "$TMP/perf.out" \
  '^\[0\] # -R/--local_register 2: buffers from ncclMemAlloc in NCCL_WIN_COLL_SYMMETRIC windows'

# What peers' mappings hold is bounded (MESHCCL_SYM_MAP_BYTES, 4 MiB here):
# each case allocates and frees its buffers (up to 1 MiB each, 2 MiB for an
# all-gather's output); every REG line says what the mappings hold, never
# more than the bound; the owner's ncclMemFree makes its peer drop its
# mapping at the next operation.
MESHCCL_SYM_MAP_BYTES=4194304 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=REG timeout 120 "$RUN" -n 2 \
  "$T/mp_coll" --symmetric 1 --colls allreduce,allgather,reducescatter --types float,int8 \
  --ops sum --sizes 7,65536,262147 >"$TMP/bound.out" 2>&1
expect_success "MESHCCL_SYM_MAP_BYTES=4194304: 2 processes, windows allocated and freed" "$?" \
  "$TMP/bound.out"
held_max=$(grep -oE 'mappings of peers. memory hold [0-9]+ bytes' "$TMP/bound.out" |
  awk '{ if ($6 > m) m = $6 } END { print m + 0 }')
expect_le "MESHCCL_SYM_MAP_BYTES=4194304: the mappings never hold more ($held_max bytes)" \
  "$held_max" 4194304
expect_grep "MESHCCL_SYM_MAP_BYTES=4194304: it held something (REG lines)" "$TMP/bound.out" \
  'rank [01] mapped rank [01].s ncclMemAlloc memory .* \([0-9]+ bytes\): [0-9]+ mappings of peers. memory hold [0-9]+ bytes \(MESHCCL_SYM_MAP_BYTES 4194304\)'
expect_grep "a freed allocation's mapping is dropped at the next operation" "$TMP/bound.out" \
  "rank [01] unmapped rank [01]'s ncclMemAlloc allocation [0-9]+ \([0-9]+ bytes, freed\)"

expect_eq "nothing left in /dev/shm" "$(shm_orphans | wc -l)" 0
mp_finish
