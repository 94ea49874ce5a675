#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The meshccl torch.distributed backend: every collective on integer tensors,
# checked exactly (tests/py/torch_collectives.py), under meshccl-run (3 ranks,
# NCCL_COMM_ID set; the last rank then leaves and the others must fail naming
# it) and under torchrun (2 ranks, env:// with MASTER_ADDR/MASTER_PORT only:
# the unique id goes through the store).
. "$(dirname "$0")/py_lib.sh"
py_need torch

py_job "meshccl-run -n 3" "$TMP/run3.log" "$RUN" -n 3 "$PY" "$PYDIR/torch_collectives.py" --peer-death
expect_eq "meshccl-run -n 3: every rank passed its checks" \
  "$(grep -c 'checks passed in' "$TMP/run3.log")" 3
expect_eq "meshccl-run -n 3: store and meshccl root on two ports, both usable at once" \
  "$(grep -c "ports ok: TCPStore at MASTER_PORT" "$TMP/run3.log")" 3
expect_grep "meshccl-run -n 3: a timed-out operation is revoked and says so" "$TMP/run3.log" \
  "timeout ok after .*did not finish within the process group's timeout"
expect_eq "meshccl-run -n 3: when rank 2 leaves, ranks 0 and 1 fail instead of hanging" \
  "$(grep -c 'peer death seen: meshccl: rank [01] of 3: all_reduce .*failed' "$TMP/run3.log")" 2
expect_grep "meshccl-run -n 3: the error names the rank that left" "$TMP/run3.log" \
  "peer death seen: .*rank 2"

# torchrun itself (its agent, its rendezvous store, env:// in the workers).
# --redirects 2 --tee 2: Debian's torchrun 1.13 under Python 3.11 fails in
# its own default for these before it starts a worker (docs/PYTORCH.md).
py_job "torchrun, 2 ranks" "$TMP/env2.log" "$PY" -m torch.distributed.run --standalone \
  --nproc_per_node 2 --redirects 2 --tee 2 "$PYDIR/torch_collectives.py"
expect_eq "torchrun, 2 ranks: every rank passed its checks" \
  "$(grep -c 'checks passed in' "$TMP/env2.log")" 2
grep -h 'checks passed' "$TMP/run3.log" "$TMP/env2.log" | sed 's/^/# /'
mp_finish
