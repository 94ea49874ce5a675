#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# meshccl and Open MPI against what this host allows: runs bench/limit once
# (the model of the best busbw, docs/TOOLS.md "bench/limit"), then for each
# rank count meshccl-perf and bench/mpi_perf (when built), and prints per size
# the out-of-place busbw of meshccl and of Open MPI, the model's busbw for the
# path meshccl takes (the FIFO ring; single copy when MC_FLAGS has -R 2, when
# MESHCCL_P2P_CMA=1, or when it is unset or -1 and bench/limit's run of the
# library's P2P/CMA probe decided single copy on this host) and
# for the other, meshccl/model and meshccl/OMPI.
# Usage: bench/vs_limit.sh [build-dir] [collective] [min-bytes] [max-bytes]
#   RANKS="2 4" (counts above the affinity mask's CPUs are left out)
#   PERF_FLAGS="-w 5 -n 20" (both tools), MC_FLAGS="-R 2" (meshccl only)
#   LIMIT_FLAGS="-t 0.1" (bench/limit), LIMIT_FIGURES="copy1M=...,pair=..." (model
#   those figures instead of measuring), PIN=1 (each rank of both tools on the
#   LOCAL_RANK-th CPU of the mask: bench/pin_rank.sh; default: as launched),
#   TOOL_TIMEOUT=SECONDS (each tool's run, per rank count; a run cut keeps the other's column)
set -euo pipefail
build=${1:-build}
coll=${2:-all_reduce}
min=${3:-64K}
max=${4:-256M}
ranks=${RANKS:-2 4}
flags=${PERF_FLAGS:--w 5 -n 20}
mc_flags=${MC_FLAGS:-}
src=$(cd "$(dirname "$0")/.." && pwd)
limit=$build/bench/limit
mpi_perf=$build/bench/mpi_perf
perf=$build/bin/meshccl-perf
run=$build/bin/meshccl-run
pin=()
tmo=()
[ -n "${TOOL_TIMEOUT:-}" ] && tmo=(timeout -k 5 "$TOOL_TIMEOUT")
[ "${PIN:-0}" = 1 ] && pin=("$src/bench/pin_rank.sh")

case "$coll" in all_reduce | all_gather | reduce_scatter | broadcast) ;;
*) echo "vs_limit: collective must be all_reduce, all_gather, reduce_scatter or broadcast" >&2; exit 2 ;;
esac
[ -x "$limit" ] || { echo "vs_limit: $limit missing (make build)" >&2; exit 1; }
[ -x "$perf" ] || { echo "vs_limit: $perf missing (make build)" >&2; exit 1; }
if [ ! -x "$mpi_perf" ] && command -v mpicc > /dev/null; then
  make -s -C "$src" bench-mpi BUILD="$(cd "$build" && pwd)" >&2
fi
cpus=$(nproc)
algo=fifo
case " $mc_flags " in *" -R 2 "* | *" -R2 "*) algo=single ;; esac
other=$([ "$algo" = fifo ] && echo single || echo fifo)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
lim_args=(-J -c "$coll" -n "$(echo "$ranks" | tr ' ' ,)" -b "$min" -e "$max" -f 2)
[ -n "${LIMIT_FIGURES:-}" ] && lim_args+=(--from-figures "$LIMIT_FIGURES")
# shellcheck disable=SC2086 # LIMIT_FLAGS are meant to split
"$limit" "${lim_args[@]}" ${LIMIT_FLAGS:-} > "$tmp/limit.txt"
grep '^# ' "$tmp/limit.txt" | sed -n '/^# all_\|^# reduce_\|^# broadcast/q;p'
case "${MESHCCL_P2P_CMA:--1}" in
1) algo=single ;;
-1) grep -q '^# P2P/CMA decision.*single copy' "$tmp/limit.txt" && algo=single ;;
esac
other=$([ "$algo" = fifo ] && echo single || echo fifo)
# "bytes fifo single" of the model's k = 1 rows for n ranks.
model() {
  awk -v c="$coll" -v n="$1" -F'[:,]' '/^\{/ {
      delete v; for (i = 1; i < NF; i += 2) { k = $i; gsub(/[{}"]/, "", k); x = $(i + 1); gsub(/[{}"]/, "", x); v[k] = x }
      if (v["coll"] == c && v["n"] == n && v["k"] == 1) print v["bytes"], v["fifo_busbw"], v["single_busbw"] }' "$tmp/limit.txt"
}
rows() { awk '!/^#/ && NF >= 13 && $1 ~ /^[0-9]+$/ {print $1, $8}'; }

for n in $ranks; do
  if [ "$n" -gt "$cpus" ]; then
    echo "# $n ranks: left out (the affinity mask has $cpus CPUs)"
    continue
  fi
  model "$n" | sort -k1,1 > "$tmp/model.$n"
  : > "$tmp/mpi.$n"
  if [ -x "$mpi_perf" ]; then
    # shellcheck disable=SC2086
    if ! "${tmo[@]}" mpirun --allow-run-as-root --oversubscribe ${pin:+--bind-to none} -np "$n" "${pin[@]}" \
      "$mpi_perf" -C "$coll" -b "$min" -e "$max" -f 2 $flags > "$tmp/mpi.$n.txt" 2> "$tmp/mpi.$n.err"; then
      echo "# mpi_perf -np $n failed or was cut (TOOL_TIMEOUT): the rows it printed are kept. $(tail -1 "$tmp/mpi.$n.err")"
    fi
    rows < "$tmp/mpi.$n.txt" | sort -k1,1 > "$tmp/mpi.$n"
  fi
  : > "$tmp/mc.$n"
  # shellcheck disable=SC2086
  if "${tmo[@]}" "$run" -n "$n" --no-tag "${pin[@]}" "$perf" "$coll" -b "$min" -e "$max" -f 2 $flags $mc_flags \
    > "$tmp/mc.$n.txt" 2> "$tmp/mc.$n.err"; then
    :
  else
    echo "# meshccl-perf -n $n failed or was cut (TOOL_TIMEOUT): the rows it printed are kept." \
      "$(grep -m1 "meshccl-perf:" "$tmp/mc.$n.err" || tail -1 "$tmp/mc.$n.err")"
  fi
  rows < "$tmp/mc.$n.txt" | sort -k1,1 > "$tmp/mc.$n"
  echo "# $coll, $n ranks on $(hostname)${pin:+, pinned}: out-of-place busbw (GB/s); model: bench/limit, 1 thread a rank, $algo path (meshccl's${mc_flags:+ with $mc_flags})"
  printf '%12s  %8s %8s  %8s %8s  %8s %8s\n' size meshccl ompi model "$other" mc/model mc/ompi
  join -a 1 -e - -o 0,1.2,1.3,2.2 "$tmp/model.$n" "$tmp/mc.$n" | sort -k1,1 |
    join -a 1 -e - -o 0,1.2,1.3,1.4,2.2 - "$tmp/mpi.$n" | sort -n |
    awk -v algo="$algo" '{
      m = (algo == "fifo") ? $2 : $3; o = (algo == "fifo") ? $3 : $2;
      rm = ($4 != "-" && m > 0) ? sprintf("%.2f", $4 / m) : "-";
      ro = ($4 != "-" && $5 != "-" && $5 > 0) ? sprintf("%.2f", $4 / $5) : "-";
      printf "%12s  %8s %8s  %8.2f %8.2f  %8s %8s\n", $1, $4, $5, m, o, rm, ro }'
  echo
done
