# SPDX-License-Identifier: Apache-2.0
# Shared set-up of the tests/py/test_*.sh drivers (sourced, not a test): the
# helpers of tests/mp/mp_lib.sh (ok / not ok, temp dir, cleanup, a clean
# environment, skip_or_fail), plus the Python that `make python` built the
# packages for ($MC_BUILD/$MC_PY_DIR/PYTHON) and PYTHONPATH to them.
# MC_PY_DIR is python (the default), or python-torch1 where tests/CMakeLists.txt
# registers the torch tests again for a second Python (Debian's torch 1.13).
#   py_need torch    meshccl_torch built and importable, else skip (CI: fail);
#                    python-torch1 without a Python with torch 1.x: skip
#   py_need numpy    the meshccl module and numpy importable, else skip (CI: fail)
# shellcheck shell=bash
MC_SRC="${MC_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
# shellcheck source=../mp/mp_lib.sh
. "$MC_SRC/tests/mp/mp_lib.sh"
PYDIR="$MC_SRC/tests/py"
MC_PY_DIR="${MC_PY_DIR:-python}"
export PYTHONPATH="$MC_BUILD/$MC_PY_DIR${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1
# One thread per rank for torch's own kernels: ranks share the host's cores.
export OMP_NUM_THREADS=1

py_need() {
  local what=$1 mod entry major
  if [ -s "$MC_BUILD/$MC_PY_DIR/PYTHON" ]; then
    PY=$(cat "$MC_BUILD/$MC_PY_DIR/PYTHON")
  elif [ "$MC_PY_DIR" != python ]; then
    . "$MC_SRC/python/find_python.sh"
    major=${MC_PY_DIR#python-torch}
    for entry in $MC_TORCH_PYTHONS; do
      if [ "${entry#*=}" != "${entry#*=$major.}" ]; then
        skip_or_fail "$MC_BUILD/$MC_PY_DIR not built, though ${entry%%=*} has torch ${entry#*=}: run 'make python'"
      fi
    done
    echo "ok - # SKIP no second Python with torch $major.x (${MC_PYTHON:-none} has torch ${MC_TORCH_VERSION:-none}): nothing to test in $MC_PY_DIR"
    exit 77
  else
    . "$MC_SRC/python/find_python.sh"
    PY=${MC_PYTHON:-python3}
  fi
  case "$what" in
  torch) mod="meshccl_torch" ;;
  *) mod="meshccl" ;;
  esac
  echo "# $PY, torch $(cat "$MC_BUILD/$MC_PY_DIR/TORCH_VERSION" 2> /dev/null || echo '?'), $MC_BUILD/$MC_PY_DIR"
  if ! "$PY" -c "import $mod" > "$TMP/import.err" 2>&1; then
    echo "# $PY -c 'import $mod' (PYTHONPATH=$PYTHONPATH):"
    show "$TMP/import.err"
    skip_or_fail "$mod not importable: run 'make python' (Debian: apt-get install python3-torch libtorch-dev pybind11-dev python3-numpy python3-dev)"
  fi
}

# py_job NAME LOG LAUNCHER... : runs a job, checks it exited 0 and printed
# "checks passed" or "meshccl == gloo" on every rank (counted by the caller).
py_job() {
  local name=$1 log=$2 rc t0
  shift 2
  t0=$(now_ms)
  timeout -k 5 150 "$@" > "$log" 2>&1
  rc=$?
  echo "# $name: $(($(now_ms) - t0)) ms"
  expect_success "$name: exit 0" "$rc" "$log"
}
