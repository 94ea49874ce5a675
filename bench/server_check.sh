#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# One script for a server (no GPU needed; Debian/Ubuntu with cmake and gcc,
# optionally Open MPI and PyTorch): builds the release tree without tests,
# then prints, as Markdown to paste into a report:
#   1. the host (CPU, cores of the affinity mask, memory, kernel, load)
#   2. bench/limit: the host's copy/reduce/FIFO figures and the model of the
#      best busbw per collective (docs/TOOLS.md "bench/limit")
#   3. all_reduce 64 KiB - 256 MiB, out-of-place busbw, for 2, 4, 8, 16 ranks
#      (never more than the mask's CPUs; the CPU count added when below 16):
#      meshccl, Open MPI (mpirun, when installed) and the model
#      (bench/vs_limit.sh), then symmetric windows (-R 2) against the
#      default path at 2 and 4 ranks (bench/sym_compare.sh), then
#      torch.distributed meshccl against gloo (bench/torch_allreduce.sh,
#      when torch imports)
#   4. communicator init at 64, 128, 256, 512 ranks (meshccl-run -n N
#      meshccl-hello; may oversubscribe): wall and CPU (user + system) time
# Every phase runs under `timeout`, within a total budget (TOTAL seconds,
# default 420): a phase that would pass it is cut and says so.
# Ranks run as meshccl-run and mpirun start them (meshccl-run pins nothing);
# PIN=1 puts rank i of every tool on the i-th CPU of the mask (bench/pin_rank.sh).
# Usage: bench/server_check.sh [build-dir]     (default build-server)
#   RANKS="2 4 8 16" INIT_RANKS="64 128 256 512" PERF_FLAGS="-w 3 -n 10"
#   TOTAL=420 TORCH=auto|0 PIN=0|1 SYM_RUNS=2 JOBS=<nproc>; the output also goes to <build-dir>/server_check.md
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build-server}
total=${TOTAL:-420}
cpus=$(nproc)
jobs=${JOBS:-$cpus}
flags=${PERF_FLAGS:--w 3 -n 10}
t_start=$(date +%s)
mkdir -p "$build"
build=$(cd "$build" && pwd)
report=$build/server_check.md
exec > >(tee "$report") 2>&1

elapsed() { echo $(($(date +%s) - t_start)); }
# cap SECONDS [RESERVE]: the timeout for the next phase: SECONDS at most, and what
# the total budget leaves once RESERVE seconds are kept for the phases after it.
cap() {
  local left=$((total - $(elapsed) - ${2:-0}))
  [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}
# phase NAME CAP RESERVE CMD...: runs CMD under timeout; says when it was cut or failed.
phase() {
  local name=$1 limit rc t0
  limit=$(cap "$2" "$3")
  shift 3
  if [ "$limit" -lt 5 ]; then
    echo "($name: skipped, the ${total} s budget is spent)"
    return 124
  fi
  t0=$(date +%s)
  # bash -c: the phase may be one of this script's functions (exported below).
  timeout -k 5 "$limit" bash -c '"$@"' _ "$@"
  rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "($name: cut after ${limit} s)"
  elif [ "$rc" = 77 ]; then
    echo "($name: skipped)"
  elif [ "$rc" != 0 ]; then
    echo "($name: failed, exit $rc)"
  fi
  echo "($name: $(($(date +%s) - t0)) s)"
  return "$rc"
}

# Rank counts of the perf tables: RANKS within the CPUs, plus the CPU count below 16.
perf_ranks=""
for n in ${RANKS:-2 4 8 16}; do
  [ "$n" -le "$cpus" ] && perf_ranks="$perf_ranks $n"
done
if [ -z "${RANKS:-}" ] && [ "$cpus" -lt 16 ] && [ "$cpus" -ge 2 ]; then
  case " $perf_ranks " in *" $cpus "*) ;; *) perf_ranks="$perf_ranks $cpus" ;; esac
fi
perf_ranks=${perf_ranks# }
export src build total cpus jobs flags t_start perf_ranks
export -f elapsed cap

echo "# meshccl server check: $(hostname), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo
echo "## Host"
echo '```'
echo "commit     $(git -C "$src" rev-parse --short HEAD 2> /dev/null || echo '?')"
echo "cpu        $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
echo "cpus       $cpus in the affinity mask ($(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status)), $(grep -c ^processor /proc/cpuinfo) online"
lscpu 2> /dev/null | grep -E '^(Socket|Core|Thread|NUMA node\(s\)|L2|L3)' | sed 's/^/           /'
echo "memory     $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)"
echo "kernel     $(uname -r)"
echo "load       $(cut -d' ' -f1-3 /proc/loadavg) (other jobs lower every figure)"
echo "mpirun     $(command -v mpirun > /dev/null && mpirun --version 2> /dev/null | head -1 || echo 'not installed')"
echo "perf ranks ${perf_ranks:-none}; init ranks ${INIT_RANKS:-64 128 256 512}; budget ${total} s"
echo '```'
echo

echo "## Build (release, no tests)"
echo '```'
cfg() {
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMESHCCL_TESTS=OFF > "$build/cmake.log" 2>&1 &&
    cmake --build "$build" -j "$jobs" >> "$build/cmake.log" 2>&1 || { tail -20 "$build/cmake.log"; return 1; }
  echo "cmake: built in $build (log: $build/cmake.log)"
  if command -v mpicc > /dev/null; then
    make -s -C "$src" bench-mpi BUILD="$build" > /dev/null 2>&1 && echo "mpi_perf: built" ||
      echo "mpi_perf: build failed (make bench-mpi)"
  else
    echo "mpi_perf: no mpicc (apt-get install openmpi-bin libopenmpi-dev): Open MPI columns empty"
  fi
}
export -f cfg
phase build 300 150 cfg || { echo '```'; echo "build failed: nothing to measure"; exit 1; }
echo '```'
echo

echo "## bench/limit: this host's figures and the model"
echo '```'
limit_ranks=$(echo "2 4 8 16 $perf_ranks" | tr ' ' '\n' | sort -nu | tr '\n' , | sed 's/,$//')
phase limit 60 90 "$build/bench/limit" -n "$limit_ranks" -J > "$build/limit.txt"
grep -v '^{' "$build/limit.txt" | sed '/^$/N;/^\n$/D'
echo '```'
figures=$(sed -n 's/^# figures: //p' "$build/limit.txt")
echo

echo "## all_reduce busbw: meshccl, Open MPI and the model (GB/s, out of place)"
echo '```'
if [ -n "$perf_ranks" ] && [ -n "$figures" ]; then
  # Each tool's run per rank count gets its share of the phase (a cut run keeps the other's column).
  tables=$(cap 240 60)
  n_counts=$(echo "$perf_ranks" | wc -w)
  per_tool=$((tables / (2 * n_counts) - 2))
  [ "$per_tool" -lt 5 ] && per_tool=5
  RANKS="$perf_ranks" PERF_FLAGS="$flags" LIMIT_FIGURES="$figures" TOOL_TIMEOUT=$per_tool \
    phase tables "$tables" 0 "$src/bench/vs_limit.sh" "$build" all_reduce 64K 256M
else
  echo "no table: ${perf_ranks:+no figures from bench/limit}${perf_ranks:-fewer than 2 CPUs}"
fi
echo '```'
echo

echo "## Symmetric windows (-R 2) against the default path (GB/s, medians)"
echo '```'
sym_ranks=$(for n in 2 4; do [ "$n" -le "$cpus" ] && echo "$n"; done | tr '\n' ' ')
if [ -n "$sym_ranks" ]; then
  RUNS=${SYM_RUNS:-2} RANKS="$sym_ranks" PERF_FLAGS="$flags" \
    phase symmetric 90 60 "$src/bench/sym_compare.sh" "$build" all_reduce 64K 256M
else
  echo "no table: fewer than 2 CPUs"
fi
echo '```'
echo

echo "## torch.distributed all_reduce: meshccl against gloo"
echo '```'
torch_ok=0
if [ "${TORCH:-auto}" != 0 ] && python3 -c 'import torch' 2> /dev/null; then
  phase python 200 60 env MESHCCL_NO_PIP=1 "$src/python/build.sh" "$build" "$jobs" > "$build/python.log" 2>&1
  # python/build.sh writes TORCH_VERSION once meshccl_torch is built for its first Python.
  if [ -s "$build/python/TORCH_VERSION" ]; then
    torch_ok=1
    echo "meshccl_torch: built"
  else
    echo "meshccl_torch: not built ($build/python.log): no gloo comparison"
  fi
else
  echo "torch: not importable by python3 (or TORCH=0): no gloo comparison"
fi
if [ "$torch_ok" = 1 ] && [ -n "$perf_ranks" ]; then
  tr_run() {
    local n
    for n in $perf_ranks; do
      RANKS=$n MIN_BYTES=65536 "$src/bench/torch_allreduce.sh" "$build" 268435456
    done
  }
  export -f tr_run
  phase torch 120 40 tr_run
fi
echo '```'
echo

echo "## Communicator init (meshccl-run -n N meshccl-hello)"
echo '```'
init_rows() {
  local n out
  printf '%6s %9s %9s %9s\n' ranks wall_s user_s sys_s
  for n in ${INIT_RANKS:-64 128 256 512}; do
    local lim
    lim=$(cap 120)
    if [ "$lim" -lt 5 ]; then
      printf '%6s  skipped: budget spent\n' "$n"
      continue
    fi
    TIMEFORMAT='%R %U %S'
    if out=$( { time timeout -k 5 "$lim" "$build/bin/meshccl-run" -n "$n" "$build/bin/meshccl-hello" > /dev/null 2> "$build/init.$n.err"; } 2>&1); then
      printf '%6s %9s %9s %9s\n' "$n" $out
    else
      printf '%6s  failed or cut at %s s: %s\n' "$n" "$lim" "$(grep -m1 -i 'error\|warn' "$build/init.$n.err" || tail -1 "$build/init.$n.err")"
    fi
  done
}
export -f init_rows
phase init 400 0 init_rows
echo '```'
echo
echo "Total: $(elapsed) s (budget ${total} s). Report: $report"
