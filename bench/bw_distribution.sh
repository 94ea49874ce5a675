#!/bin/bash
# The spread of one host's bandwidth: meshccl-perf and Open MPI (bench/mpi_perf,
# the same table and formulas) run interleaved, RUNS times each, for 2 and 4
# ranks; per size the 10th percentile, median and 90th percentile of the
# out-of-place busbw of both, the ratio of meshccl's p10 to MPI's median, and
# each tool's spread (p90/p10). One run is noise; a distribution says whether a
# user's job is fast by chance. Before each meshccl run, build/bench/core_pair
# (when built: make bench-mpi) measures what two processes on two cores do
# with no meshccl code (cache-line round trip, FIFO copy bandwidth); a table of
# the runs then puts it beside both tools' busbw at one size (4 MiB, or the
# largest below it), with the correlation of each tool's busbw with the
# probe's figures, and when the probe's round trip falls into two modes (2x
# apart or more) each size's figures per mode: a run-level mode that the
# probe shares is the machine's, not the library's.
# Usage: bench/bw_distribution.sh [build-dir] [collective] [min-bytes] [max-bytes]
#   RUNS=20 RANKS="2 4" PERF_FLAGS="-w 5 -n 20" (extra flags for both tools)
#   MC_ENV="VAR=value ..." (environment for meshccl's runs only, e.g. to compare settings)
#   MC_FLAGS="..." (meshccl-perf flags for meshccl's runs only, e.g. "-R 2": buffers in
#   symmetric windows, the symmetric all-reduce)
set -euo pipefail
build=${1:-build}
coll=${2:-all_reduce}
min=${3:-64K}
max=${4:-128M}
runs=${RUNS:-20}
ranks=${RANKS:-2 4}
flags=${PERF_FLAGS:--w 5 -n 20}
src=$(cd "$(dirname "$0")/.." && pwd)
mpi_perf=$build/bench/mpi_perf
probe=$build/bench/core_pair
perf=$build/bin/meshccl-perf
run=$build/bin/meshccl-run
# Python for the statistics: the interpreter make python found, else python3.
py=$(cat "$build/python/PYTHON" 2> /dev/null || command -v python3)

if [ ! -x "$mpi_perf" ] || [ ! -x "$probe" ]; then
  make -s -C "$src" bench-mpi BUILD="$(cd "$build" && pwd)" >&2
fi
[ -x "$mpi_perf" ] || { echo "bw_distribution: $mpi_perf missing (no mpicc?)" >&2; exit 77; }
[ -x "$perf" ] || { echo "bw_distribution: $perf missing (make build)" >&2; exit 1; }

# "size busbw" rows of an nccl-tests table: the out-of-place busbw (column 8).
rows() { awk '!/^#/ && NF >= 13 && $1 ~ /^[0-9]+$/ {print $1, $8}'; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for n in $ranks; do
  : > "$tmp/mc.$n"
  : > "$tmp/mpi.$n"
  : > "$tmp/probe.$n"
  for ((i = 1; i <= runs; i++)); do
    if [ -x "$probe" ]; then
      "$probe" 1 | sed -nE 's/^run [0-9]+: round trip ([0-9.]+) ns .*FIFO ([0-9.]+) GB.s$/\1 \2/p' \
        >> "$tmp/probe.$n"
    fi
    # shellcheck disable=SC2086 # flags and MC_ENV are meant to split
    env ${MC_ENV:-} "$run" -n "$n" "$perf" "$coll" -b "$min" -e "$max" -f 4 $flags ${MC_FLAGS:-} \
      > "$tmp/out" 2> "$tmp/err" || { echo "bw_distribution: meshccl-perf -n $n failed:" >&2; cat "$tmp/err" >&2; exit 1; }
    rows < "$tmp/out" >> "$tmp/mc.$n"
    # shellcheck disable=SC2086
    mpirun --allow-run-as-root --oversubscribe -np "$n" "$mpi_perf" -C "$coll" -b "$min" -e "$max" \
      -f 4 $flags > "$tmp/out" 2> "$tmp/err" || { echo "bw_distribution: mpi_perf -np $n failed:" >&2; cat "$tmp/err" >&2; exit 1; }
    rows < "$tmp/out" >> "$tmp/mpi.$n"
  done
  echo "# $coll, float sum, $n ranks on $(hostname), $runs runs each, interleaved: out-of-place busbw (GB/s)"
  "$py" - "$tmp/mc.$n" "$tmp/mpi.$n" "$tmp/probe.$n" << 'EOF'
import sys
def load(path):
    d = {}
    for line in open(path):
        size, bw = line.split()
        d.setdefault(int(size), []).append(float(bw))
    return d
def pct(v, p):  # nearest rank on the sorted values
    v = sorted(v)
    return v[min(len(v) - 1, max(0, int(round(p / 100.0 * (len(v) - 1)))))]
mc, mpi = load(sys.argv[1]), load(sys.argv[2])
print("%12s  %6s %6s %6s  %6s %6s %6s  %13s  %9s %9s" % ("size", "mc_p10", "mc_p50", "mc_p90",
      "mpi10", "mpi50", "mpi90", "mc_p10/mpi50", "mc_spread", "mpi_spread"))
for size in sorted(mc):
    a, b = mc[size], mpi.get(size, [0.0])
    a10, a50, a90 = pct(a, 10), pct(a, 50), pct(a, 90)
    b10, b50, b90 = pct(b, 10), pct(b, 50), pct(b, 90)
    r = a10 / b50 if b50 > 0 else float("nan")
    sa = a90 / a10 if a10 > 0 else float("nan")
    sb = b90 / b10 if b10 > 0 else float("nan")
    print("%12d  %6.2f %6.2f %6.2f  %6.2f %6.2f %6.2f  %13.2f  %9.2f %9.2f" % (size, a10, a50, a90,
          b10, b50, b90, r, sa, sb))
probe = [tuple(map(float, l.split())) for l in open(sys.argv[3]) if l.strip()]
sizes = [s for s in sorted(mc) if s <= 4 << 20] or sorted(mc)
at = sizes[-1]
if probe and len(probe) == len(mc[at]) == len(mpi.get(at, [])):
    def corr(x, y):
        n = len(x)
        mx, my = sum(x) / n, sum(y) / n
        sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
        sxx = sum((a - mx) ** 2 for a in x)
        syy = sum((b - my) ** 2 for b in y)
        return sxy / (sxx * syy) ** 0.5 if sxx > 0 and syy > 0 else float("nan")
    print("# per run: bench/core_pair just before (no meshccl code), then busbw at %d bytes" % at)
    print("%4s  %12s  %13s  %9s  %9s" % ("run", "probe_rtt_ns", "probe_fifo_GB", "mc_busbw",
          "mpi_busbw"))
    for i, (rtt, fifo) in enumerate(probe):
        print("%4d  %12.0f  %13.2f  %9.2f  %9.2f" % (i + 1, rtt, fifo, mc[at][i], mpi[at][i]))
    fifo = [f for _, f in probe]
    rtt = [r for r, _ in probe]
    print("# correlation with the probe's FIFO GB/s: meshccl %.2f, MPI %.2f; with its round trip: "
          "meshccl %.2f, MPI %.2f" % (corr(fifo, mc[at]), corr(fifo, mpi[at]), corr(rtt, mc[at]),
                                     corr(rtt, mpi[at])))
    # The machine's modes: runs whose probe round trip is below the geometric
    # middle of the fastest and slowest (when they are 2x apart or more).
    lo, hi = min(rtt), max(rtt)
    if hi >= 2 * lo and all(len(mc[s]) == len(rtt) == len(mpi.get(s, [])) for s in mc):
        mid = (lo * hi) ** 0.5
        print("# by the machine's mode (probe round trip below / above %.0f ns): busbw per size" % mid)
        print("%12s  %5s  %6s %6s %6s  %13s" % ("size", "mode", "runs", "mc_p10", "mc_p50",
              "mc_p10/mpi50") + "  %6s" % "mpi50")
        for size in sorted(mc):
            for name, keep in (("fast", lambda r: r < mid), ("slow", lambda r: r >= mid)):
                a = [v for v, r in zip(mc[size], rtt) if keep(r)]
                b = [v for v, r in zip(mpi[size], rtt) if keep(r)]
                if not a or not b:
                    continue
                b50 = pct(b, 50)
                print("%12d  %5s  %6d %6.2f %6.2f  %13.2f  %6.2f" % (size, name, len(a), pct(a, 10),
                      pct(a, 50), pct(a, 10) / b50 if b50 > 0 else float("nan"), b50))
EOF
done
