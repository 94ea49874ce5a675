#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Mismatched calls (mp_mismatch.c) fail on every rank with ncclInvalidUsage
# and one exact message naming the rank's own call and the other one, the
# communicator in error (ncclCommGetAsyncError), never a hang: counts (ring
# against one-shot), types, collectives (all-reduce against broadcast),
# reductions, broadcast roots, over P2P (shared FIFO and cross-memory
# attach), SHM and NET (NCCL_P2P_DISABLE / NCCL_SHM_DISABLE), 2 and 3 ranks,
# on fresh communicators and on ones whose one-shot connections exist
# (--warm), with a rank's channels on 2 threads (MESHCCL_NTHREADS=2). Send/recv: a receive smaller than its send fails naming both; a
# larger one takes the send.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_mismatch

IU="invalid usage (run with NCCL_DEBUG=WARN for details) (5), async 5"
calls() { # CASE: sets A (every rank but 1) and B (rank 1)
  case $1 in
  count) A="AllReduce(count 1048576, float, sum)" B="AllReduce(count 10, float, sum)" ;;
  type) A="AllReduce(count 1000, float, sum)" B="AllReduce(count 1000, double, sum)" ;;
  bigtype) A="AllReduce(count 262144, float, sum)" B="AllReduce(count 262144, int32, sum)" ;;
  kind) A="AllReduce(count 1000, float, sum)" B="Broadcast(count 1000, float, root 0)" ;;
  op) A="AllReduce(count 1000, float, sum)" B="AllReduce(count 1000, float, max)" ;;
  root) A="Broadcast(count 1000, float, root 0)" B="Broadcast(count 1000, float, root 1)" ;;
  esac
}

# rank1_names_other: rank 1's exact line names its own call and the call of
# any other rank (every other rank called A: which of them rank 1 hears from
# first depends on timing, e.g. a one-shot peer before its ring neighbour).
rank1_names_other() {
  local prefix="[1] rank 1: $IU: Mismatched collectives: rank 1 called $B where rank " line rest n
  while IFS= read -r line; do
    rest=${line#"$prefix"}
    n=${rest%% *}
    [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" != 1 ] && [ "$rest" = "$n called $A" ] && return 0
  done < <(grep -F -- "$prefix" "$TMP/m.out")
  return 1
}

# mismatch LABEL NRANKS CASE [--warm]: every rank's exact line.
mismatch() {
  local label=$1 n=$2 what=$3 warm=${4:-} r want bad=""
  calls "$what"
  timeout 60 "$RUN" -n "$n" "$T/mp_mismatch" "$what" $warm >"$TMP/m.out" 2>&1
  for r in $(seq 0 $((n - 1))); do
    if [ "$r" = 1 ]; then
      rank1_names_other || bad="$bad 1"
      continue
    fi
    want="[$r] rank $r: $IU: Mismatched collectives: rank $r called $A where rank 1 called $B"
    grep -Fxq -- "$want" "$TMP/m.out" || bad="$bad $r"
  done
  if [ -z "$bad" ]; then
    ok "$label, $n ranks: $what ${warm:+(warm) }fails on every rank naming both calls"
  else
    not_ok "$label, $n ranks: $what ${warm:+(warm) }: ranks$bad"
    show "$TMP/m.out"
  fi
}

# expect_lines LABEL LINE...: the last run printed each LINE exactly.
expect_lines() {
  local label=$1 line bad=0
  shift
  for line in "$@"; do
    grep -Fxq -- "$line" "$TMP/m.out" || bad=1
  done
  if [ "$bad" = 0 ]; then ok "$label"; else
    not_ok "$label"
    printf '#   want: %s\n' "$@"
    show "$TMP/m.out"
  fi
}

ALL="count type kind op root bigtype"
for what in $ALL; do mismatch "P2P" 2 "$what"; done
for what in $ALL; do mismatch "P2P" 3 "$what"; done
for what in count kind; do mismatch "P2P" 3 "$what" --warm; done
for what in count type root; do MESHCCL_P2P_CMA=1 mismatch "P2P/CMA" 2 "$what"; done
for what in $ALL; do NCCL_P2P_DISABLE=1 mismatch "SHM" 3 "$what"; done
NCCL_P2P_DISABLE=1 mismatch "SHM" 3 kind --warm
for what in $ALL; do NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 mismatch "NET" 2 "$what"; done
for what in $ALL; do NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 mismatch "NET" 3 "$what"; done
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 mismatch "NET" 3 count --warm

for what in count type; do NCCL_ALGO=Tree mismatch "NCCL_ALGO=Tree" 3 "$what"; done
# Each rank's channels on 2 threads (MESHCCL_NTHREADS=2, 4 channels): several
# threads may find the mismatch at once; one pair is told.
for what in count bigtype kind; do
  MESHCCL_NTHREADS=2 NCCL_MIN_NCHANNELS=4 mismatch "P2P, 2 threads per rank" 3 "$what"
done
MESHCCL_NTHREADS=2 NCCL_MIN_NCHANNELS=4 NCCL_P2P_DISABLE=1 mismatch "SHM, 2 threads per rank" 3 \
  bigtype

# The same call run with another algorithm (NCCL_ALGO differs on rank 1).
NCCL_MIN_NCHANNELS=2 NCCL_MAX_NCHANNELS=2 timeout 60 "$RUN" -n 3 bash -c \
  'if [ "$RANK" = 1 ]; then export NCCL_ALGO=Tree; else export NCCL_ALGO=Ring; fi; exec "$0" "$@"' \
  "$T/mp_mismatch" same >"$TMP/m.out" 2>&1
HINT="NCCL_ALGO, NCCL_PROTO, NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS or MESHCCL_ALLREDUCE_ONESHOT_BYTES differ between the ranks"
CALL="AllReduce(count 1048576, float, sum)"
expect_lines "NCCL_ALGO=Tree on rank 1 only: every rank names both algorithms" \
  "[0] rank 0: $IU: Mismatched collectives: rank 0 runs $CALL with Ring on 2 channels where rank 1 runs it with Tree on 2 channels: $HINT" \
  "[1] rank 1: $IU: Mismatched collectives: rank 1 runs $CALL with Tree on 2 channels where rank 0 runs it with Ring on 2 channels: $HINT" \
  "[2] rank 2: $IU: Mismatched collectives: rank 2 runs $CALL with Ring on 2 channels where rank 1 runs it with Tree on 2 channels: $HINT"

timeout 60 "$RUN" -n 3 "$T/mp_mismatch" same >"$TMP/m.out" 2>&1
expect_lines "the same calls on 3 ranks succeed" "[0] rank 0: no error (0), async 0: -" \
  "[1] rank 1: no error (0), async 0: -" "[2] rank 2: no error (0), async 0: -"

# Send/recv: rank 0 sends 10 floats, rank 1 receives 3. A sender whose data
# fit in the FIFO returns before its receiver checked it (as in NCCL) and
# learns of the mismatch at its next call; with cross-memory attach it waits
# for the receiver to read, and fails at once.
R1_VIEW="Mismatched send/recv: rank 1 called Recv(count 3, float, from rank 0) where rank 0 called Send(count 10, float, to rank 1): the receive (12 bytes) is smaller than the send (40 bytes)"
R0_VIEW="Mismatched send/recv: rank 0 called Send(count 10, float, to rank 1) where rank 1 called Recv(count 3, float, from rank 0): the receive (12 bytes) is smaller than the send (40 bytes)"
for env in "" NCCL_P2P_DISABLE=1 "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1"; do
  env $env timeout 60 "$RUN" -n 2 "$T/mp_mismatch" recvsmall >"$TMP/m.out" 2>&1
  expect_lines "send/recv [${env:-P2P}]: a receive smaller than the send fails naming both; the sender's next call fails" \
    "[0] rank 0: no error (0), async 0: -" "[1] rank 1: $IU: $R1_VIEW" \
    "[0] rank 0 then: $IU: $R1_VIEW"
done
MESHCCL_P2P_CMA=1 timeout 60 "$RUN" -n 2 "$T/mp_mismatch" recvsmall >"$TMP/m.out" 2>&1
expect_lines "send/recv [P2P/CMA]: both sides fail naming both" "[1] rank 1: $IU: $R1_VIEW" \
  "[0] rank 0: $IU: $R0_VIEW" "[0] rank 0 then: $IU: $R0_VIEW"
for env in "" "NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1"; do
  env $env timeout 60 "$RUN" -n 2 "$T/mp_mismatch" recvlarge >"$TMP/m.out" 2>&1
  expect_lines "send/recv [${env:-P2P}]: a receive larger than the send takes it (3 of 10 elements)" \
    "[0] rank 0: no error (0), async 0: -" "[1] rank 1: no error (0), async 0: -"
done
mp_finish
