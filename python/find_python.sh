# SPDX-License-Identifier: Apache-2.0
# Sourced: finds the Python 3 to build and test with. $PYTHON wins when set;
# else python3 on PATH, then /usr/bin/python3 (Debian's python3-torch lives
# in its dist-packages, which another python3 first on PATH, e.g. pyenv's,
# does not see). Sets:
#   MC_PYTHON          one that imports torch and numpy, or ""
#   MC_TORCH_VERSION   its torch.__version__
#   MC_PYTHON_NUMPY    one that imports numpy (MC_PYTHON when set), or ""
MC_PYTHON=""
MC_TORCH_VERSION=""
MC_PYTHON_NUMPY=""
for mc_py in ${PYTHON:-} python3 /usr/bin/python3; do
  command -v "$mc_py" > /dev/null 2>&1 || continue
  if MC_TORCH_VERSION=$("$mc_py" -c 'import numpy, torch; print(torch.__version__)' 2> /dev/null); then
    MC_PYTHON=$(command -v "$mc_py")
    MC_PYTHON_NUMPY=$MC_PYTHON
    break
  fi
  if [ -z "$MC_PYTHON_NUMPY" ] && "$mc_py" -c 'import numpy' 2> /dev/null; then
    MC_PYTHON_NUMPY=$(command -v "$mc_py")
  fi
done
unset mc_py
