#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The meshccl torch.distributed backend and torch's TCPStore, which admits
# anyone who knows MASTER_ADDR:MASTER_PORT (tests/py/torch_stranger.py):
#  - under meshccl-run (MESHCCL_SECRET set) the store holds only the published
#    id (meshcclGetPublicUniqueId): a stranger who reads it cannot join the
#    process group, as read or with a forged secret, and the two honest ranks'
#    broadcast and all_reduce are right;
#  - a job with NCCL_COMM_ID and no MESHCCL_SECRET says so at WARN, once per
#    process, however many process groups it makes.
. "$(dirname "$0")/py_lib.sh"
py_need torch

# --- a stranger reads the store ------------------------------------------------
MPORT=$(free_port)
T0_MS=$(now_ms)
bg stranger env -u MESHCCL_SECRET -u NCCL_COMM_ID MASTER_ADDR=127.0.0.1 MASTER_PORT="$MPORT" \
  NCCL_DEBUG=WARN "$PY" "$PYDIR/torch_stranger.py" stranger --done "$TMP/stranger.done"
bg job env MASTER_ADDR=127.0.0.1 MASTER_PORT="$MPORT" NCCL_DEBUG=WARN \
  timeout -k 5 150 "$RUN" -n 2 "$PY" "$PYDIR/torch_stranger.py" honest \
  --wait-for "$TMP/stranger.done"
wait_bg stranger 120
wait_bg job 150
show "$TMP/stranger.out"
expect_success "stranger: exit 0 (every attempt to join was refused)" "$RC_stranger" \
  "$TMP/stranger.out"
expect_grep "stranger: read the backend's key from the store" "$TMP/stranger.out" \
  "stranger: read 128 bytes at default_pg/(1|0//1//cpu/)/meshccl/unique_id"
expect_grep "stranger: the store holds no secret" "$TMP/stranger.out" \
  "stranger: secret in the store: none"
expect_grep "stranger: the id as read is refused: it is the published form" "$TMP/stranger.out" \
  "as read: refused .*published form of meshcclGetPublicUniqueId"
expect_grep "stranger: a forged secret is refused by the root" "$TMP/stranger.out" \
  "forged secret: refused .*rejected this process's proof of the job's secret"
expect_success "honest ranks: exit 0" "$RC_job" "$TMP/job.out"
expect_eq "honest ranks: broadcast and all_reduce right on both groups" \
  "$(grep -c 'honest checks passed' "$TMP/job.out")" 2
expect_grep "the root dropped the stranger (its WARN)" "$TMP/job.out" \
  "dropped connection from 127\\.0\\.0\\.1<[0-9]+>: wrong proof of the job's secret"

# --- NCCL_COMM_ID without MESHCCL_SECRET: one WARN per process ------------------
MPORT=$(free_port)
CPORT=$(free_port)
T0_MS=$(now_ms)
for r in 0 1; do
  bg "w$r" env -u MESHCCL_SECRET RANK="$r" WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT="$MPORT" NCCL_COMM_ID="127.0.0.1:$CPORT" NCCL_DEBUG=WARN \
    "$PY" "$PYDIR/torch_stranger.py" warn
done
for r in 0 1; do wait_bg "w$r" 120; done
for r in 0 1; do
  rcv="RC_w$r"
  out="$TMP/w$r.out"
  expect_success "NCCL_COMM_ID, no MESHCCL_SECRET: rank $r: two groups checked, exit 0" \
    "${!rcv}" "$out"
  expect_eq "NCCL_COMM_ID, no MESHCCL_SECRET: rank $r says it at WARN exactly once" \
    "$(grep -c 'NCCL WARN Bootstrap: MESHCCL_SECRET is unset' "$out")" 1
done
expect_grep "the WARN names the root and what to set" "$TMP/w1.out" \
  "MESHCCL_SECRET is unset: the bootstrap secret of root 127\\.0\\.0\\.1<$CPORT> is derived from its address, so any process that can reach that address can join .*set MESHCCL_SECRET to the same random value on every rank"
mp_finish
