#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# DistributedDataParallel over meshccl ends with gloo's parameters (floats
# within tests/py/torch_ddp.py's stated tolerance, integer buffers exactly,
# every rank bit-identical), on 2 ranks under meshccl-run and on 4 ranks
# under a torchrun-style environment.
. "$(dirname "$0")/py_lib.sh"
py_need torch

py_job "DDP, 2 ranks, meshccl-run" "$TMP/ddp2.log" "$RUN" -n 2 "$PY" "$PYDIR/torch_ddp.py"
expect_eq "DDP, 2 ranks: meshccl == gloo on every rank" "$(grep -c 'meshccl == gloo' "$TMP/ddp2.log")" 2
py_job "DDP, 4 ranks, torchrun-style env" "$TMP/ddp4.log" \
  "$PY" "$PYDIR/launch_env.py" -n 4 --timeout 120 -- "$PY" "$PYDIR/torch_ddp.py"
expect_eq "DDP, 4 ranks: meshccl == gloo on every rank" "$(grep -c 'meshccl == gloo' "$TMP/ddp4.log")" 4
grep -h 'meshccl == gloo' "$TMP/ddp2.log" "$TMP/ddp4.log" | grep '^\[0\]' | sed 's/^/# /'
mp_finish
