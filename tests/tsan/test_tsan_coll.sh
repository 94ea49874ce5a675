#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The collectives under ThreadSanitizer (the build-tsan stage of make test;
# this folder is only in MESHCCL_TSAN builds): a few types and sizes over
# every transport, so that each thread that touches a connection runs at
# least once: P2P inside one process (ncclCommInitAll, a thread per rank, and
# one thread driving every rank in groups), P2P across processes (shared FIFO
# and cross-memory attach), SHM, NET over loopback (the proxy thread, a
# socket-net helper thread), the symmetric all-reduce's reads of other
# threads' windows, ranks on two NCCL_HOSTID "hosts", and a rank's channels
# on several threads (MESHCCL_NTHREADS). Every
# process runs with TSAN_OPTIONS halt_on_error=1 (set by make test): a race
# fails its case with exit 66 and the report.
# shellcheck source=../mp/mp_lib.sh
. "$(dirname "$0")/../mp/mp_lib.sh"
need_progs mp_coll

# tsan_case NAME TIMEOUT CMD...: mp_lib.sh's run_case, then no ThreadSanitizer
# report in the case's output.
tsan_case() {
  local name=$1
  run_case "$@"
  if grep -q 'WARNING: ThreadSanitizer' "$TMP/case.out"; then
    not_ok "$name: ThreadSanitizer reported"
    grep -A 30 'WARNING: ThreadSanitizer' "$TMP/case.out" | head -60 | sed 's/^/#   /'
  fi
}

SIZES=0,1,4099,262147
tsan_case "P2P, one process, 3 threads" 240 "$T/mp_coll" --threads 3 --types float,int32 \
  --ops sum,max --sizes $SIZES
tsan_case "P2P, one thread drives 3 ranks in groups" 240 "$T/mp_coll" --group 3 --types float \
  --ops sum --sizes $SIZES
tsan_case "P2P across 2 processes (shared FIFO)" 240 "$RUN" -n 2 "$T/mp_coll" --types float \
  --ops sum --sizes $SIZES
MESHCCL_P2P_CMA=1 tsan_case "P2P across 2 processes (cross-memory attach)" 240 "$RUN" -n 2 \
  "$T/mp_coll" --types float --ops sum --sizes $SIZES
NCCL_P2P_DISABLE=1 tsan_case "SHM, 3 processes" 240 "$RUN" -n 3 "$T/mp_coll" --types int32 \
  --ops sum --sizes $SIZES
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 tsan_case "NET over loopback, 3 processes" 240 "$RUN" -n 3 \
  "$T/mp_coll" --types float --ops sum --sizes $SIZES
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_NTHREADS=2 NCCL_NSOCKS_PERTHREAD=1 \
  tsan_case "NET over loopback, socket-net helper threads" 240 "$RUN" -n 2 "$T/mp_coll" \
  --types float --ops sum --sizes 1,262147
tsan_case "symmetric all-reduce, one process, 3 threads (each reads the others' windows)" 240 \
  "$T/mp_coll" --threads 3 --symmetric 1 --colls allreduce --types float --ops sum,max \
  --sizes 1,4099,262147
tsan_case "4 ranks on 2 NCCL_HOSTID hosts (NET between, P2P inside)" 240 "$RUN" -n 4 \
  bash -c 'NCCL_HOSTID=h$((RANK / 2)) exec "$0" "$@"' "$T/mp_coll" --types float \
  --ops sum --sizes 1,4099,262147
# A rank's channels on 2 and 3 threads (the communicator's workers: 4
# channels, so that every thread has some), across processes and with ranks
# as threads of one process.
MESHCCL_NTHREADS=2 NCCL_MIN_NCHANNELS=4 tsan_case "2 threads per rank, P2P across 2 processes" \
  240 "$RUN" -n 2 "$T/mp_coll" --types float,int32 --ops sum,max --sizes 0,1,4099,262147
MESHCCL_NTHREADS=3 NCCL_MIN_NCHANNELS=4 NCCL_P2P_DISABLE=1 tsan_case \
  "3 threads per rank, SHM, 3 processes" 240 "$RUN" -n 3 "$T/mp_coll" --types float \
  --ops sum --sizes 1,262147
MESHCCL_NTHREADS=2 NCCL_MIN_NCHANNELS=4 tsan_case "2 threads per rank, ranks as 2 threads" 240 \
  "$T/mp_coll" --threads 2 --types float --ops sum --sizes 1,4099,262147
mp_finish
