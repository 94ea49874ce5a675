#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Symmetric windows against the default path on this host: meshccl-perf with
# -R 0 (buffers from posix_memalign, the FIFO path or one-shot) and -R 2
# (ncclMemAlloc buffers in NCCL_WIN_COLL_SYMMETRIC windows: every rank reads
# its peers' buffers, src/coll/coll_sym.c), run interleaved RUNS times per
# rank count, over one sweep of sizes (the buffers rotate through the largest
# size, as nccl-tests' do). Per size: the median busbw out of place and in
# place of each, and -R 2 over -R 0. The figure to read is the ratio: below
# 1 the windows slow the collective down, which they should not at any size.
# Usage: bench/sym_compare.sh [build-dir] [collective] [min-bytes] [max-bytes]
#   collective: all_reduce (default), all_gather or reduce_scatter
#   RUNS=8 RANKS="2 4" PERF_FLAGS="-w 5 -n 20" (both modes)
#   MC_ENV="VAR=value ..." (environment of both modes)
set -euo pipefail
build=${1:-build}
coll=${2:-all_reduce}
min=${3:-64K}
max=${4:-256M}
runs=${RUNS:-8}
ranks=${RANKS:-2 4}
flags=${PERF_FLAGS:--w 5 -n 20}
perf=$build/bin/meshccl-perf
run=$build/bin/meshccl-run
py=$(cat "$build/python/PYTHON" 2> /dev/null || command -v python3)

case "$coll" in all_reduce | all_gather | reduce_scatter) ;;
*) echo "sym_compare: collective must be all_reduce, all_gather or reduce_scatter" >&2; exit 2 ;;
esac
[ -x "$perf" ] || { echo "sym_compare: $perf missing (make build)" >&2; exit 1; }

# "mode size oop_busbw ip_busbw" rows of an nccl-tests table (columns 8 and 12).
rows() { awk -v m="$1" '!/^#/ && NF >= 13 && $1 ~ /^[0-9]+$/ {print m, $1, $8, $12}'; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in $ranks; do
  : > "$tmp/rows.$n"
  for ((i = 1; i <= runs; i++)); do
    for mode in 0 2; do
      # shellcheck disable=SC2086 # flags and MC_ENV are meant to split
      env ${MC_ENV:-} "$run" -n "$n" "$perf" "$coll" -b "$min" -e "$max" -f 4 $flags -R "$mode" \
        > "$tmp/out" 2> "$tmp/err" || {
        echo "sym_compare: meshccl-perf -n $n -R $mode failed:" >&2
        cat "$tmp/err" >&2
        exit 1
      }
      rows "$mode" < "$tmp/out" >> "$tmp/rows.$n"
    done
  done
  echo "# $coll, float sum, $n ranks on $(hostname), $runs runs of each mode, interleaved: median busbw (GB/s)"
  "$py" - "$tmp/rows.$n" << 'EOF'
import sys
def median(v):
    v = sorted(v)
    k = len(v) // 2
    return v[k] if len(v) % 2 else (v[k - 1] + v[k]) / 2
d = {}
for line in open(sys.argv[1]):
    mode, size, oop, ip = line.split()
    d.setdefault((int(size), mode), []).append((float(oop), float(ip)))
print("%12s  %8s %8s %8s  %8s %8s %8s" % ("size", "R0_oop", "R2_oop", "R2/R0", "R0_ip", "R2_ip",
                                         "R2/R0"))
for size in sorted({s for s, _ in d}):
    a, b = d.get((size, "0"), []), d.get((size, "2"), [])
    if not a or not b:
        continue
    ao, bo = median([x for x, _ in a]), median([x for x, _ in b])
    ai, bi = median([y for _, y in a]), median([y for _, y in b])
    print("%12d  %8.2f %8.2f %8.2f  %8.2f %8.2f %8.2f" % (size, ao, bo, bo / ao if ao > 0 else 0,
                                                         ai, bi, bi / ai if ai > 0 else 0))
EOF
done
