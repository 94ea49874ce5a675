#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# libnccl-net-mesh.so exports exactly ncclNetPlugin_v8 .. _v12 (nothing of
# meshccl's internals, no nccl* function that could meet NCCL's own) and
# depends on no meshccl library: it is loaded by NCCL alone.
# Usage: test_mesh_plugin_symbols.sh BUILD_DIR
set -u
build=${1:?build directory}
lib="$build/lib/libnccl-net-mesh.so"
[ -f "$lib" ] || { echo "not ok - $lib not built"; exit 1; }
command -v nm >/dev/null || { echo "ok - SKIP: no nm"; exit 77; }
fail=0

want="ncclNetPlugin_v10 ncclNetPlugin_v11 ncclNetPlugin_v12 ncclNetPlugin_v8 ncclNetPlugin_v9"
have=$(nm -D --defined-only "$lib" | awk 'NF == 3 {print $3}' | sed 's/@.*//' | sort -u | tr '\n' ' ')
if [ "${have% }" = "$want" ]; then
  echo "ok - exported: $want"
else
  echo "not ok - exported symbols differ"
  echo "#   have: $have"
  echo "#   want: $want"
  fail=1
fi
# The tables are data objects (NCCL takes them with dlsym), not functions.
n_obj=$(nm -D --defined-only "$lib" | awk '$3 ~ /^ncclNetPlugin_v/ && $2 ~ /^[DdRr]$/' | wc -l)
if [ "$n_obj" = 5 ]; then
  echo "ok - the five tables are data symbols"
else
  echo "not ok - $n_obj of the five tables are data symbols"
  fail=1
fi
needed=$(readelf -d "$lib" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
if [ -z "$needed" ]; then
  echo "not ok - readelf shows no NEEDED entry"
  fail=1
elif [[ "$needed" == *meshccl* ]] || [[ "$needed" == *libnccl* ]]; then
  echo "not ok - depends on $needed"
  fail=1
else
  echo "ok - needs only $needed"
fi
exit $fail
