#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Ring against tree all-reduce across 2, 4 and 8 "hosts" (network namespaces
# on one bridge, one rank each, NET between all of them), from 8 B to 64 MiB,
# and the tuner's choice at each size: the algorithm the model picks (read
# from its NCCL_DEBUG_SUBSYS=TUNING line) is timed in the same run as the
# other, and its time is compared with the faster of the two.
# Times are the median of REPS runs (default 5) of each algorithm, taken in
# turns: on a 2-core VM single runs differ by 3x at small sizes.
# Then the host constants of the model are fitted from the same runs
# (latency per NET hop from the 8 B times, bandwidth per channel from the
# largest size): the values src/topo/topo_tuning.c carries.
# Needs root and iproute2; only the namespaces made here are used.
# Usage: bench/tree_ring_netns.sh [build-dir] [hosts...]   (default: 2 4 8)
set -euo pipefail
build=${1:-build}
shift || true
hosts_list=${*:-2 4 8}
perf=$build/bin/meshccl-perf
[ -x "$perf" ] || { echo "build first: make build" >&2; exit 2; }
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  echo "tree_ring_netns: needs root and iproute2; skipped" >&2
  exit 77
fi
tag="mct$$"
sub="10.203.$(($$ % 200 + 20))"
sw="${tag}sw"
tmp=$(mktemp -d)
made=()
cleanup() {
  for n in "${made[@]}" "$sw"; do
    ip netns pids "$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$n" 2>/dev/null || true
  done
  [ -n "${KEEP_TMP:-}" ] && echo "kept $tmp" >&2 || rm -rf "$tmp"
}
trap cleanup EXIT
max_hosts=0
for h in $hosts_list; do [ "$h" -gt "$max_hosts" ] && max_hosts=$h; done
ip netns add "$sw"
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 up
for i in $(seq 1 "$max_hosts"); do
  h="${tag}h$i"
  made+=("$h")
  ip netns add "$h"
  ip link add "${tag}a$i" type veth peer name "${tag}b$i"
  ip link set "${tag}a$i" netns "$h" name mcv0
  ip link set "${tag}b$i" netns "$sw"
  ip -n "$sw" link set "${tag}b$i" master br0 up
  ip -n "$h" addr add "$sub.$i/24" dev mcv0
  ip -n "$h" link set mcv0 up
  ip -n "$h" link set lo up
done

# run HOSTS ALGO OUT: meshccl-perf all_reduce on HOSTS namespaces, rank 0's output in OUT.
run() {
  local n=$1 algo=$2 out=$3 port=$((21000 + RANDOM % 4000)) pids=()
  for r in $(seq 0 $((n - 1))); do
    local env_algo=()
    [ "$algo" != auto ] && env_algo=(NCCL_ALGO="$algo")
    ip netns exec "${tag}h$((r + 1))" env RANK=$r WORLD_SIZE="$n" LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
      NCCL_HOSTID="h$r" NCCL_COMM_ID="$sub.1:$port" NCCL_SOCKET_IFNAME=mcv0 "${env_algo[@]}" \
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING NCCL_DEBUG_FILE="$out.log.$r" \
      "$perf" all_reduce -b 8 -e 64M -f 2 -w 2 -n 6 -c 0 >"$out.$r" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  cp "$out.0" "$out"
}

# out-of-place time (us) per size of a meshccl-perf output
times() { awk '!/^#/ && NF >= 13 && $1 ~ /^[0-9]+$/ {print $1, $6}' "$1"; }

echo "# all_reduce float sum, 1 rank per namespace host, out-of-place time in us (median of ${REPS:-5})"
echo "# hosts      size      ring      tree  model's  choice/fastest"
fit_in="$tmp/fit.txt"
: >"$fit_in"
reps=${REPS:-5}
# median TIMES...: per size, the median time over the files
median() {
  awk '{v[$1] = v[$1] " " $2; if (!($1 in seen)) {seen[$1] = 1; order[++k] = $1}}
    END {
      for (i = 1; i <= k; i++) {
        n = split(substr(v[order[i]], 2), a, " ")
        for (x = 1; x <= n; x++) for (y = x + 1; y <= n; y++) if (a[y] + 0 < a[x] + 0) {t = a[x]; a[x] = a[y]; a[y] = t}
        print order[i], (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
      }
    }' "$@"
}
for n in $hosts_list; do
  for i in $(seq 1 "$reps"); do
    run "$n" Ring "$tmp/ring.$n.$i"
    times "$tmp/ring.$n.$i" >"$tmp/r.$i"
    run "$n" Tree "$tmp/tree.$n.$i"
    times "$tmp/tree.$n.$i" >"$tmp/t.$i"
  done
  run "$n" auto "$tmp/auto.$n"
  median $(for i in $(seq 1 "$reps"); do echo "$tmp/r.$i"; done) >"$tmp/r"
  median $(for i in $(seq 1 "$reps"); do echo "$tmp/t.$i"; done) >"$tmp/t"
  # the model's choice per size: "AllReduce: <bytes> Bytes -> Algo <a>"
  grep -o 'AllReduce: [0-9]* Bytes -> Algo [0-9]' "$tmp/auto.$n.log.0" | awk '{print $2, $6}' >"$tmp/c"
  awk -v n="$n" -v fit="$fit_in" '
    FILENAME == ARGV[1] {ring[$1] = $2; order[++k] = $1; next}
    FILENAME == ARGV[2] {tree[$1] = $2; next}
    {choice[$1] = $2}
    END {
      for (i = 1; i <= k; i++) {
        s = order[i]
        if (!(s in tree) || !(s in choice)) continue
        r = ring[s]; t = tree[s]; pick = (choice[s] == 0) ? t : r; best = (r < t) ? r : t
        printf "%7d %9d %9.1f %9.1f %8s %15.2f%s\n", n, s, r, t, (choice[s] == 0) ? "Tree" : "Ring",
          pick / best, (pick / best > 1.10) ? "  > 1.10" : ""
        print n, s, r, t >> fit
      }
    }' "$tmp/r" "$tmp/t" "$tmp/c"
done

# The model's NET constants: ring 8 B = base + 2(n-1) L, tree 8 B = base + 2 log2(n) L;
# per-channel bandwidth from the largest size (2 channels between hosts).
python3 - "$fit_in" <<'PY'
import math, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
small = [r for r in rows if r[1] == 8]
def fit(xs, ys):
    n = len(xs); mx = sum(xs) / n; my = sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    return my - b * mx, b
if len(small) >= 2:
    a, b = fit([2 * (r[0] - 1) for r in small], [r[2] for r in small])
    print("# fit ring 8 B: base %.1f us + %.1f us per NET hop" % (a, b))
    a, b = fit([2 * math.log2(r[0]) for r in small], [r[3] for r in small])
    print("# fit tree 8 B: base %.1f us + %.1f us per NET hop" % (a, b))
big = max(r[1] for r in rows)
for r in rows:
    if r[1] == big:
        n = r[0]
        ring_bus = big / r[2] / 1e3 * 2 * (n - 1) / n
        tree_alg = big / r[3] / 1e3
        print("# %d hosts, %d B: ring busbw %.2f GB/s, tree algbw %.2f GB/s" % (n, big, ring_bus, tree_alg))
PY
