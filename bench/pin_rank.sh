#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Runs one rank pinned to one CPU: the LOCAL_RANK-th (meshccl-run; Open MPI:
# OMPI_COMM_WORLD_LOCAL_RANK) of PIN_CPUS ("0,1,2", default: this process's
# affinity mask in order), wrapping around. This is the placement bench/limit
# models (rank i on the i-th CPU of the mask). meshccl-run itself pins
# nothing; a rank pinned this way sees one CPU in its mask, so meshccl's
# waiting ranks yield instead of spinning (src/init/init_connect.c,
# spin_passes) whenever the host has two ranks or more.
# Usage: meshccl-run -n N bench/pin_rank.sh prog [args...]
set -euo pipefail
rank=${LOCAL_RANK:-${OMPI_COMM_WORLD_LOCAL_RANK:-0}}
if [ -n "${PIN_CPUS:-}" ]; then
  IFS=, read -r -a cpus <<< "$PIN_CPUS"
else
  cpus=()
  list=$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status)
  IFS=, read -r -a ranges <<< "$list"
  for r in "${ranges[@]}"; do
    if [[ $r == *-* ]]; then
      for ((c = ${r%-*}; c <= ${r#*-}; c++)); do cpus+=("$c"); done
    else
      cpus+=("$r")
    fi
  done
fi
exec taskset -c "${cpus[rank % ${#cpus[@]}]}" "$@"
