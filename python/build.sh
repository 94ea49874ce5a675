#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# `make python`: builds meshccl's Python packages into <build>/python:
# meshccl (ctypes over libmeshccl.so, numpy) when a Python with numpy is
# found, and meshccl_torch (the torch.distributed backend, a C++ extension
# built with torch.utils.cpp_extension) when that Python also has torch.
# The Python used is written to <build>/python/PYTHON for tests and benches.
# Nothing is downloaded. Usage: python/build.sh <build dir> [jobs]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?build dir}" && pwd)
jobs=${2:-2}
out=$build/python
debs="python3-torch libtorch-dev pybind11-dev python3-numpy python3-dev"
. "$src/python/find_python.sh"

mkdir -p "$out"
rm -f "$out/PYTHON"
if [ -z "$MC_PYTHON_NUMPY" ]; then
  echo "python: skipped: no python3 with numpy (and torch) found (Debian: apt-get install $debs)"
  exit 0
fi
cd "$src/python"
quiet() { grep -v -e "^running " -e ninja -e "byte-compiling is disabled" -e "No CUDA runtime" -e "^$" || true; }
if [ -z "$MC_PYTHON" ]; then
  echo "python: meshccl_torch skipped: $MC_PYTHON_NUMPY has no torch (Debian: apt-get install $debs); building meshccl"
  MESHCCL_NO_TORCH=1 "$MC_PYTHON_NUMPY" setup.py -q build_py --build-lib "$out" 2>&1 | quiet
  test "${PIPESTATUS[0]}" = 0
  rm -rf "$src/python/meshccl.egg-info" "$src/python/build"
  echo "$MC_PYTHON_NUMPY" > "$out/PYTHON"
  exit 0
fi
echo "python: meshccl and meshccl_torch (torch $MC_TORCH_VERSION, $MC_PYTHON) -> $out"
# build_ext skips the extension while its .so is newer than its sources and headers.
"$MC_PYTHON" setup.py -q build_py --build-lib "$out" build_ext -j "$jobs" \
  --build-lib "$out" --build-temp "$build/python-tmp" 2>&1 | quiet
test "${PIPESTATUS[0]}" = 0
rm -rf "$src/python/meshccl.egg-info" "$src/python/build"
ls "$out"/meshccl_torch/_C*.so > /dev/null
echo "$MC_PYTHON" > "$out/PYTHON"
