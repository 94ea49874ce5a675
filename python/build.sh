#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# `make python`: builds meshccl's Python packages: meshccl (ctypes over
# libmeshccl.so, numpy) when a Python with numpy is found, and meshccl_torch
# (the torch.distributed backend, a C++ extension built with
# torch.utils.cpp_extension) for every Python that also has torch:
#   <build>/python               the first one (python/find_python.sh), which
#                                tests and benches use
#   <build>/python-torch<major>  another Python whose torch has another major
#                                version (Debian's python3-torch 1.13 in
#                                /usr/bin/python3 next to a torch 2.x python3)
# Each gets a PYTHON file (the interpreter) and a TORCH_VERSION file.
# When `python3` imports no torch (and $PYTHON is not set), it first installs
# $MESHCCL_TORCH_PIP (torch==2.13.0) into it with pip, looking in /opt/wheels
# too, when run as root; otherwise it prints the command. MESHCCL_NO_PIP=1
# skips that. Usage: python/build.sh <build dir> [jobs]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:?build dir}" && pwd)
jobs=${2:-2}
out=$build/python
debs="python3-torch libtorch-dev pybind11-dev python3-numpy python3-dev"
torch_pip=${MESHCCL_TORCH_PIP:-torch==2.13.0}
wheels=/opt/wheels

# torch into python3 (pip), when it has none.
install_torch() {
  local py args
  [ -z "${PYTHON:-}" ] && [ "${MESHCCL_NO_PIP:-0}" != 1 ] || return 0
  py=$(command -v python3 2> /dev/null) || return 0
  "$py" -c 'import torch' 2> /dev/null && return 0
  if ! "$py" -m pip --version > /dev/null 2>&1; then
    echo "python: $py has no torch, and no pip to install it with"
    return 0
  fi
  args=(install -q --disable-pip-version-check "$torch_pip")
  "$py" -c 'import numpy' 2> /dev/null || args+=(numpy)
  [ -d "$wheels" ] && args+=(--find-links "$wheels")
  if [ "$(id -u)" != 0 ]; then
    echo "python: $py has no torch: install it with '$py -m pip ${args[*]}' (as root, make python does)"
    return 0
  fi
  echo "python: $py has no torch: $py -m pip ${args[*]}"
  # (pip's lines about index locations missing on this host are left out)
  if ! "$py" -m pip "${args[@]}" 2>&1 | { grep -v "^WARNING: Location .* is ignored" || true; } | tail -5; then
    echo "python: installing $torch_pip into $py failed (above); building for the Pythons that have torch"
  fi
}

install_torch
. "$src/python/find_python.sh"

mkdir -p "$out"
rm -f "$out/PYTHON" "$out/TORCH_VERSION" "$build"/python-torch*/PYTHON
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

# build_one PYTHON TORCH_VERSION DIR: both packages into DIR.
build_one() {
  local py=$1 version=$2 dir=$3 tmp=$3-tmp
  echo "python: meshccl and meshccl_torch (torch $version, $py) -> $dir"
  # build_ext skips the extension while its .so is newer than its sources and
  # headers: one built for another Python or torch is removed first.
  if [ "$(cat "$dir/.built-for" 2> /dev/null)" != "$py $version" ]; then
    rm -rf "$dir/meshccl_torch" "$tmp"
  fi
  mkdir -p "$dir"
  "$py" setup.py -q build_py --build-lib "$dir" build_ext -j "$jobs" \
    --build-lib "$dir" --build-temp "$tmp" 2>&1 | quiet
  test "${PIPESTATUS[0]}" = 0
  rm -rf "$src/python/meshccl.egg-info" "$src/python/build"
  ls "$dir"/meshccl_torch/_C*.so > /dev/null
  echo "$py $version" > "$dir/.built-for"
  echo "$version" > "$dir/TORCH_VERSION"
  echo "$py" > "$dir/PYTHON"
}

build_one "$MC_PYTHON" "$MC_TORCH_VERSION" "$out"
for entry in $MC_TORCH_PYTHONS; do
  py=${entry%%=*}
  version=${entry#*=}
  if [ "${version%%.*}" = "${MC_TORCH_VERSION%%.*}" ]; then
    echo "python: $py (torch $version) skipped: $out is for torch $MC_TORCH_VERSION ($MC_PYTHON)"
    continue
  fi
  build_one "$py" "$version" "$build/python-torch${version%%.*}"
done
