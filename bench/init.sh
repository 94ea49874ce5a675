#!/bin/bash
# Communicator init time against nranks on this host (processes started by
# meshccl-run), median of 5 runs, with rank 0's per-stage breakdown (seconds)
# and the wall time of the whole job (process start-up included).
# Usage: bench/init.sh [build-dir] [max-ranks]
set -euo pipefail
build=${1:-build}
max=${2:-128}
runs=5
run=$build/bin/meshccl-run
hello=$build/bin/meshccl-hello
[ -x "$run" ] && [ -x "$hello" ] || { echo "build first: make build" >&2; exit 2; }

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

printf '%-7s %10s %10s %10s %10s %10s %10s %10s %10s %10s\n' nranks total alloc bootstrap allgathers topo graphs connect rest wall
n=2
while [ "$n" -le "$max" ]; do
  tmp=$(mktemp)
  for _ in $(seq $runs); do
    t0=$(date +%s.%N)
    line=$("$run" -n "$n" --no-tag "$hello" -q)
    t1=$(date +%s.%N)
    echo "$line $(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')" >> "$tmp"
  done
  # line: init nranks N total T alloc A bootstrap B allgathers G topo P rest R connections C
  # graphs S WALL
  tot=$(awk '{print $5}' "$tmp" | median)
  alloc=$(awk '{print $7}' "$tmp" | median)
  boot=$(awk '{print $9}' "$tmp" | median)
  ag=$(awk '{print $11}' "$tmp" | median)
  topo=$(awk '{print $13}' "$tmp" | median)
  rest=$(awk '{print $15}' "$tmp" | median)
  conn=$(awk '{print $17}' "$tmp" | median)
  graphs=$(awk '{print $19}' "$tmp" | median)
  wall=$(awk '{print $20}' "$tmp" | median)
  printf '%-7d %10.4f %10.4f %10.4f %10.4f %10.4f %10.4f %10.4f %10.4f %10.3f\n' "$n" "$tot" "$alloc" "$boot" "$ag" "$topo" "$graphs" "$conn" "$rest" "$wall"
  rm -f "$tmp"
  n=$((n * 2))
done
