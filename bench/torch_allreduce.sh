#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# torch.distributed all_reduce, meshccl against gloo in the same job, for 2
# and 4 processes on this host (bench/torch_allreduce.py prints the table:
# size, time, busbw, ratio). Exits 77 when meshccl_torch is not built (no
# torch: see docs/PYTORCH.md), so that `make bench` goes on.
# Usage: bench/torch_allreduce.sh [build-dir] [max-bytes]   (RANKS="2 4", MIN_BYTES=1024)
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
max=${2:-268435456}
min=${MIN_BYTES:-1024}
ranks=${RANKS:-2 4}
src=$(cd "$(dirname "$0")/.." && pwd)
py=$(cat "$build/python/PYTHON" 2> /dev/null || echo python3)
export PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" OMP_NUM_THREADS=1
unset NCCL_COMM_ID MASTER_ADDR MASTER_PORT
if ! "$py" -c 'import meshccl_torch' 2> /dev/null; then
  echo "torch_allreduce: skipped: meshccl_torch is not built (make python; Debian: python3-torch libtorch-dev)"
  exit 77
fi
for n in $ranks; do
  "$build/bin/meshccl-run" -n "$n" --no-tag "$py" "$src/bench/torch_allreduce.py" --min-bytes "$min" --max-bytes "$max" |
    grep -v '^$'
done
