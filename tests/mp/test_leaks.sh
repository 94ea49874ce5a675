#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Repeated init, collectives and teardown must not leak: cycles of
# meshcclCommInitFromEnv + collectives + ncclCommDestroy (or ncclCommAbort) in
# every rank of a 4-rank meshccl-run job (one NCCL_COMM_ID reused), over
# P2P/SHM, SHM only and NET only (proxy thread, sockets), and cycles of
# ncclCommInitAll(4) driven by one thread in a group + destroy, of
# ncclCommInitRankScalable over 2 roots, of ncclCommGrow 2 -> 4, and with a
# rank's channels on 2 threads (MESHCCL_NTHREADS=2). After each
# cycle fds and threads are back to their count before the first init
# (mp_leaks.c); no job leaves a segment in /dev/shm.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_leaks

# meshccl segments made since here whose creator is gone (mp_lib.sh; other
# tests running at the same time may hold one for the milliseconds of a
# connect).
shm_snapshot
# no_orphans NAME: the check, naming every segment left behind.
no_orphans() {
  shm_orphans >"$TMP/orphans"
  expect_eq "$1: nothing left in /dev/shm" "$(wc -l <"$TMP/orphans")" 0
  [ -s "$TMP/orphans" ] && show "$TMP/orphans"
  return 0
}

leak_job() { # NAME MODE CYCLES (transport settings from the environment)
  local name=$1 mode=$2 cycles=$3 t0 rc
  t0=$(now_ms)
  timeout 120 "$RUN" -n 4 "$T/mp_leaks" "$mode" "$cycles" >"$TMP/out" 2>&1
  rc=$?
  expect_success "$name: 4 ranks x $cycles cycles of init, collectives, $mode: exit 0 ($(($(now_ms) - t0)) ms)" \
    "$rc" "$TMP/out"
  expect_eq "$name: every rank ok" "$(grep -c "] rank [0-3]: $mode x $cycles: ok" "$TMP/out")" 4
  no_orphans "$name"
}
leak_job "P2P/SHM" env 20
leak_job "P2P/SHM" abort 20
NCCL_P2P_DISABLE=1 leak_job "SHM" env 10
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 leak_job "NET (proxy thread, sockets)" env 10
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 leak_job "NET" abort 10
# A rank's channels on 2 threads (the communicator's worker pool, started at
# its first collective): joined at destroy and at abort.
MESHCCL_NTHREADS=2 NCCL_MIN_NCHANNELS=4 leak_job "2 threads per rank" env 10
MESHCCL_NTHREADS=2 NCCL_MIN_NCHANNELS=4 leak_job "2 threads per rank" abort 10
leak_job "2 bootstrap roots (ncclCommInitRankScalable)" scalable 10
leak_job "ncclCommGrow 2 -> 4" grow 10

t0=$(now_ms)
timeout 60 "$T/mp_leaks" all 20 >"$TMP/out" 2>&1
rc=$?
expect_success "20 cycles of ncclCommInitAll(4) + destroy: exit 0 ($(($(now_ms) - t0)) ms)" \
  "$rc" "$TMP/out"
no_orphans "ncclCommInitAll cycles"

mp_finish
