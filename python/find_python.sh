# SPDX-License-Identifier: Apache-2.0
# Sourced: finds the Pythons 3 to build and test with. $PYTHON wins when set;
# else python3 on PATH, then /usr/bin/python3 (Debian's python3-torch lives
# in its dist-packages, which another python3 first on PATH, e.g. pyenv's,
# does not see). Sets:
#   MC_PYTHON          the first that imports torch and numpy, or ""
#   MC_TORCH_VERSION   its torch.__version__
#   MC_PYTHON_NUMPY    the first that imports numpy (MC_PYTHON when set), or ""
#   MC_TORCH_PYTHONS   every other one that imports torch and numpy, as
#                      "path=torch version" words (another interpreter, not
#                      a second name of one already found)
MC_PYTHON=""
MC_TORCH_VERSION=""
MC_PYTHON_NUMPY=""
MC_TORCH_PYTHONS=""
mc_seen=" "
for mc_py in ${PYTHON:-} python3 /usr/bin/python3; do
  command -v "$mc_py" > /dev/null 2>&1 || continue
  # The interpreter itself (pyenv's python3 is a shim script that picks one).
  mc_path=$("$mc_py" -c 'import sys; print(sys.executable)' 2> /dev/null) || continue
  mc_real=$(realpath "$mc_path")
  case "$mc_seen" in *" $mc_real "*) continue ;; esac
  mc_seen="$mc_seen$mc_real "
  if mc_version=$("$mc_path" -c 'import numpy, torch; print(torch.__version__)' 2> /dev/null); then
    if [ -z "$MC_PYTHON" ]; then
      MC_PYTHON=$mc_path
      MC_TORCH_VERSION=$mc_version
      MC_PYTHON_NUMPY=$mc_path
    else
      MC_TORCH_PYTHONS="$MC_TORCH_PYTHONS $mc_path=$mc_version"
    fi
    continue
  fi
  if [ -z "$MC_PYTHON_NUMPY$MC_PYTHON" ] && "$mc_path" -c 'import numpy' 2> /dev/null; then
    MC_PYTHON_NUMPY=$mc_path
  fi
done
MC_TORCH_PYTHONS=${MC_TORCH_PYTHONS# }
unset mc_py mc_path mc_real mc_seen mc_version
