#!/bin/bash
# meshccl-perf against Open MPI on this host, side by side: for 2 and 4 ranks,
# the out-of-place time and busbw of each size from both tools (the same
# nccl-tests table and formulas), the ratio meshccl busbw / MPI busbw, and the
# ratio of the 8 B times (latency). Both tools use the same byte counts and bus factors, so the
# busbw ratio is the inverse time ratio, computed from the times (the printed busbw are rounded).
# Builds bench/mpi_perf when missing.
# Usage: bench/allreduce_compare.sh [build-dir] [collective] [max-bytes]
#   collective: all_reduce (default), all_gather, reduce_scatter or broadcast
#   Extra flags for both tools: PERF_FLAGS="-n 50 -w 5"; ranks: RANKS="2 4"
set -euo pipefail
build=${1:-build}
coll=${2:-all_reduce}
max=${3:-256M}
ranks=${RANKS:-2 4}
flags=${PERF_FLAGS:-}
src=$(cd "$(dirname "$0")/.." && pwd)
mpi_perf=$build/bench/mpi_perf
perf=$build/bin/meshccl-perf
run=$build/bin/meshccl-run

case "$coll" in all_reduce | all_gather | reduce_scatter | broadcast) ;;
*) echo "allreduce_compare: collective must be all_reduce, all_gather, reduce_scatter or broadcast" >&2; exit 2 ;;
esac
if [ ! -x "$mpi_perf" ]; then
  make -s -C "$src" bench-mpi BUILD="$(cd "$build" && pwd)" >&2
fi
[ -x "$mpi_perf" ] || { echo "allreduce_compare: $mpi_perf missing (no mpicc?)" >&2; exit 77; }

# Table rows "size time busbw best-time" of an nccl-tests table: the out-of-place time and busbw
# (columns 6 and 8), and the smaller of the out-of-place and in-place times (for the 8 B ratio).
rows() { awk '!/^#/ && NF >= 13 && $1 ~ /^[0-9]+$/ {print $1, $6, $8, ($10 < $6) ? $10 : $6}'; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in $ranks; do
  # shellcheck disable=SC2086 # flags are meant to split
  mpirun --allow-run-as-root --oversubscribe -np "$n" "$mpi_perf" -C "$coll" -b 8 -e "$max" -f 2 \
    $flags > "$tmp/mpi.$n.txt" 2> "$tmp/mpi.$n.err" || {
    echo "allreduce_compare: mpi_perf -np $n failed:" >&2; cat "$tmp/mpi.$n.err" >&2; exit 1
  }
  rows < "$tmp/mpi.$n.txt" > "$tmp/mpi.$n"
  # shellcheck disable=SC2086
  if [ -x "$perf" ] && "$run" -n "$n" --no-tag "$perf" "$coll" -b 8 -e "$max" -f 2 $flags \
    > "$tmp/mc.$n.txt" 2> "$tmp/mc.$n.err"; then
    rows < "$tmp/mc.$n.txt" > "$tmp/mc.$n"
  else
    why=$(grep -m1 "meshccl-perf:" "$tmp/mc.$n.err" 2> /dev/null || tail -1 "$tmp/mc.$n.err" 2> /dev/null ||
      echo "$perf missing")
    echo "# meshccl-perf -n $n did not run: $why"
    : > "$tmp/mc.$n"
  fi

  echo "# $coll, float sum, $n ranks on $(hostname): out-of-place time (us) and busbw (GB/s)"
  printf '%12s  %10s %8s  %10s %8s  %8s %8s\n' size mpi_us mpi_bus meshccl_us mc_bus bus_ratio t_ratio
  join -a 1 -e - -o 0,1.2,1.3,2.2,2.3 <(sort -k1,1 "$tmp/mpi.$n") <(sort -k1,1 "$tmp/mc.$n") |
    sort -n | awk '{
      br = ($4 != "-" && $4 > 0) ? sprintf("%.2f", $2 / $4) : "-";
      tr = ($4 != "-" && $2 > 0) ? sprintf("%.2f", $4 / $2) : "-";
      printf "%12s  %10s %8s  %10s %8s  %8s %8s\n", $1, $2, $3, $4, $5, br, tr }'
  awk -v n="$n" 'NR == FNR { if ($1 == 8) m = $4; next } $1 == 8 { c = $4 }
    END { if (m > 0 && c > 0) printf "# 8 B time ratio meshccl/MPI (%d ranks, best of out-of-place and in-place): %.2f (%s us / %s us)\n", n, c / m, c, m;
          else printf "# 8 B time ratio (%d ranks): n/a\n", n }' "$tmp/mpi.$n" "$tmp/mc.$n"
  grep -h "Avg bus bandwidth" "$tmp/mpi.$n.txt" | sed "s/^#/# MPI    /"
  grep -h "Avg bus bandwidth" "$tmp/mc.$n.txt" 2> /dev/null | sed "s/^#/# meshccl/" || true
  echo
done
