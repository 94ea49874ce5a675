#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The meshccl Python module on numpy arrays (tests/py/numpy_api.py): every
# collective checked exactly, with a communicator from meshccl-run's
# environment (3 ranks) and from a unique id passed to 2 spawned ranks.
. "$(dirname "$0")/py_lib.sh"
py_need numpy

py_job "from_env, meshccl-run -n 3" "$TMP/env.log" "$RUN" -n 3 "$PY" "$PYDIR/numpy_api.py" --from-env
expect_eq "from_env: every rank passed its checks" "$(grep -c 'checks passed (from_env' "$TMP/env.log")" 3
py_job "unique id, 2 spawned ranks" "$TMP/uid.log" "$PY" "$PYDIR/numpy_api.py" --spawn 2
expect_eq "unique id: every rank passed its checks" "$(grep -c 'checks passed (unique id' "$TMP/uid.log")" 2
mp_finish
