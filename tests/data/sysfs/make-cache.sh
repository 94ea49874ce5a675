#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Writes the trees tests/data/sysfs/cache-epyc-vm and cache-xeon16
# (committed output): the cache files (/sys/devices/system/cpu/cpuN/cache/
# indexM/{level,type,size,shared_cpu_list}) from which init sizes a
# single-host connection's FIFO (src/transport/tp_decide.c
# mc_tp_cache_read, mc_tp_decide_fifo), and nothing else:
#   cache-epyc-vm  the 2-core development VM (AMD EPYC), as its sysfs reads:
#                  per CPU L1d 48K, L1i 32K, L2 1024K; L3 32768K shared by 0-1
#   cache-xeon16   a 16-core Intel Xeon VM (one NUMA node), its caches those
#                  of a Sapphire Rapids core (Intel's 4th-generation Xeon
#                  Scalable: 2 MiB of L2 per core, 1.875 MiB of L3 per
#                  core; here L3 30 MiB shared by CPUs 0-15); older
#                  generations have 1-1.25 MiB of L2 (Skylake-SP to Ice
#                  Lake-SP) and 1.375-1.5 MiB of L3 per core
# Usage: make-cache.sh [DIR]   (DIR: where the trees go, default this folder)
set -euo pipefail
dir=${1:-$(dirname "$0")}

# cache OUT CPU INDEX LEVEL TYPE SIZE SHARED
cache() {
  local d="$1/sys/devices/system/cpu/cpu$2/cache/index$3"
  mkdir -p "$d"
  echo "$4" >"$d/level"
  echo "$5" >"$d/type"
  echo "$6" >"$d/size"
  echo "$7" >"$d/shared_cpu_list"
}

out=$dir/cache-epyc-vm
rm -rf "$out"
for c in 0 1; do
  cache "$out" $c 0 1 Data 48K $c
  cache "$out" $c 1 1 Instruction 32K $c
  cache "$out" $c 2 2 Unified 1024K $c
  cache "$out" $c 3 3 Unified 32768K 0-1
done

out=$dir/cache-xeon16
rm -rf "$out"
for c in $(seq 0 15); do
  cache "$out" "$c" 0 1 Data 48K "$c"
  cache "$out" "$c" 1 1 Instruction 32K "$c"
  cache "$out" "$c" 2 2 Unified 2048K "$c"
  cache "$out" "$c" 3 3 Unified 30720K 0-15
done
