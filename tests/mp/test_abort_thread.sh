#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ncclCommAbort while other threads use the communicator (mp_abort_thread.c):
# a grouped all-reduce over both communicators of ncclCommInitAll, and one
# thread per communicator, each 20 times with the abort of comm0 from another
# thread: no crash, no hang, errors from the calls, no fd or thread left,
# no read of a buffer after the call that published it failed.
# Also with each rank's channels on 2 threads (MESHCCL_NTHREADS=2). Then a
# rank that aborts and stays alive over SHM: its peer's next
# all-reduce fails naming the abort.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_abort_thread

for mode in group peer; do
  t0=$(now_ms)
  timeout 120 "$T/mp_abort_thread" "$mode" >"$TMP/$mode.out" 2>&1
  rc=$?
  expect_success "abort from another thread, $mode: exit 0 ($(($(now_ms) - t0)) ms)" "$rc" \
    "$TMP/$mode.out"
done

# 1 MiB all-reduces run the ring, whose receiver reads its same-process
# sender's buffers in place: each driver frees its buffer as soon as its
# call failed, so a read after that is a use-after-free (the ASan stage).
t0=$(now_ms)
timeout 120 "$T/mp_abort_thread" peer 262144 >"$TMP/peer.1m.out" 2>&1
rc=$?
expect_success "abort from another thread, peer, 1 MiB (buffers read in place): exit 0 ($(($(now_ms) - t0)) ms)" \
  "$rc" "$TMP/peer.1m.out"

# The same with each rank's channels on 2 threads (MESHCCL_NTHREADS=2, 4
# channels, 1 MiB all-reduces): the workers stop with the caller, and are
# joined by the abort or the destroy.
for mode in group peer; do
  t0=$(now_ms)
  MESHCCL_NTHREADS=2 NCCL_MIN_NCHANNELS=4 timeout 120 "$T/mp_abort_thread" "$mode" 262144 \
    >"$TMP/$mode.thr.out" 2>&1
  rc=$?
  expect_success "abort from another thread, $mode, 2 threads per rank: exit 0 ($(($(now_ms) - t0)) ms)" \
    "$rc" "$TMP/$mode.thr.out"
done

# Over SHM (no P2P between the processes): rank 1 aborts, then sleeps alive.
t0=$(now_ms)
NCCL_P2P_DISABLE=1 timeout 60 "$RUN" -n 2 "$T/mp_abort_thread" shm >"$TMP/shm.out" 2>&1
rc=$?
expect_eq "abort of an idle rank over SHM: both ranks ok ($(($(now_ms) - t0)) ms)" \
  "$(grep -c 'rank [0-9]*: ok$' "$TMP/shm.out")" 2
[ "$(grep -c 'rank [0-9]*: ok$' "$TMP/shm.out")" = 2 ] || { echo "# exit $rc"; show "$TMP/shm.out"; }

mp_finish
