#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Ring against tree all-reduce across 2, 4 and 8 "hosts" (network namespaces
# on one bridge, one rank each, NET between all of them), from 8 B to 64 MiB,
# and the tuner's choice at each size: the algorithm the model picks (as
# mc_coll_algo_choose picks it with every algorithm allowed) is timed in the
# same run as the other, and its time is compared with the faster of the two.
# Both algorithms run in one communicator, in turns (bench/algo_pair.c):
# each time is the median of the rounds, MIN_ROUNDS (default 9) and more,
# up to MAX_ROUNDS (101), until the median of the rounds' tree/ring ratios
# is known within +-3% (95% interval) or the size has had 20 s. Run as
# separate processes, on a 2-core VM, the two differed by 1.5x from one run
# to the next at small sizes. The choice is judged by that median ratio (the
# two halves of a round meet the same state of the host): choice/fastest is
# the ratio, or its inverse, or 1; the interval's end nearest 1 says whether
# a miss (> 1.10) is one the run can tell from noise ("> 1.10 sure") or not.
# Then, per host count, what the model's host constants are read from: the
# 8 B time per NET hop of each algorithm (2(n-1) hops for the ring, 2 log2(n)
# for the tree) and the bandwidths at the largest size. The comment of
# mc_tune_consts_default (src/topo/topo_tuning.c) carries the values; a
# straight-line fit across host counts means nothing here, where hosts share
# the cores and a hop costs more the more hosts there are.
# Needs root and iproute2; only the namespaces made here are used.
# Usage: bench/tree_ring_netns.sh [build-dir] [hosts...]   (default: 2 4 8)
# MIN_BYTES and MAX_BYTES (default 8 and 64M) bound the sizes.
set -euo pipefail
build=${1:-build}
shift || true
hosts_list=${*:-2 4 8}
pair=$build/bin/algo_pair
min_rounds=${MIN_ROUNDS:-9}
max_rounds=${MAX_ROUNDS:-101}
[ -x "$pair" ] || { echo "build first: make build" >&2; exit 2; }
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

# run HOSTS OUT: bench/algo_pair.c on HOSTS namespaces, rank r on core
# r mod the cores (unpinned, two ranks of a 2-core VM shared a core in some
# runs and every time doubled), rank 0's output in OUT.
cores=$(nproc)
run() {
  local n=$1 out=$2 port=$((21000 + RANDOM % 4000)) pids=()
  for r in $(seq 0 $((n - 1))); do
    ip netns exec "${tag}h$((r + 1))" env RANK=$r WORLD_SIZE="$n" LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
      NCCL_HOSTID="h$r" NCCL_COMM_ID="$sub.1:$port" NCCL_SOCKET_IFNAME=mcv0 \
      $([ "${PIN:-1}" = 1 ] && echo taskset -c $((r % cores))) "$pair" "${MIN_BYTES:-8}" "${MAX_BYTES:-64M}" "$min_rounds" "$max_rounds" >"$out.$r" 2>&1 &
    pids+=($!)
  done
  local failed=0
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
  if [ "$failed" != 0 ]; then
    echo "tree_ring_netns: $n hosts: algo_pair failed; rank 0 said:" >&2
    cat "$out.0" >&2
    exit 1
  fi
  cp "$out.0" "$out"
}

echo "# all_reduce float sum, 1 rank per namespace host, time per call in us: Ring and Tree"
echo "# interleaved in one communicator (bench/algo_pair.c), $min_rounds-$max_rounds rounds until the"
echo "# median tree/ring ratio is known within +-3%; choice/fastest follows from it, and from the"
echo "# end of its 95% interval nearest 1 (\"sure\": a miss even there)"
echo "# hosts      size      ring      tree tree/ring  [interval]    rounds  model's  choice/fastest"
rows_in="$tmp/rows.txt"
: >"$rows_in"
for n in $hosts_list; do
  run "$n" "$tmp/pair.$n"
  awk -v n="$n" -v rows="$rows_in" '
    $1 ~ /^[0-9]+$/ && NF == 8 {
      s = $1; r = $2; t = $3; q = $4; lo = $7; hi = $8
      if ($5 == "Tree") { cost = (q > 1) ? q : 1; sure = (lo > 1) ? lo : 1 }
      else { cost = (q < 1) ? 1 / q : 1; sure = (hi < 1) ? 1 / hi : 1 }
      mark = (cost <= 1.10) ? "" : (sure > 1.10) ? "  > 1.10 sure" : "  > 1.10"
      printf "%7d %9d %9.1f %9.1f %9.3f [%5.3f,%5.3f] %5d %8s %15.2f%s\n", n, s, r, t, q, lo, hi,
        $6, $5, cost, mark
      print n, s, r, t >> rows
      sizes++; ok += (cost <= 1.10); nsure += (sure > 1.10)
      if (cost > worst) { worst = cost; at = s }
    }
    END {
      if (sizes > 0)
        printf "# %d hosts: the choice within 10%% of the faster at %d of %d sizes (worst %.2fx at %d B; %d beyond 10%% at the interval end too)\n",
          n, ok, sizes, worst, at, nsure
    }' "$tmp/pair.$n"
done

# What the model's NET constants are read from, per host count.
python3 - "$rows_in" <<'PY'
import math, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
big = max(r[1] for r in rows)
for r in rows:
    n = r[0]
    if r[1] == 8:
        print("# %d hosts, 8 B: ring %.1f us per NET hop, tree %.1f" %
              (n, r[2] / (2 * (n - 1)), r[3] / (2 * math.log2(n))))
    if r[1] == big:
        ring_bus = big / r[2] / 1e3 * 2 * (n - 1) / n
        tree_alg = big / r[3] / 1e3
        print("# %d hosts, %d B: ring busbw %.2f GB/s, tree algbw %.2f GB/s" % (n, big, ring_bus, tree_alg))
PY
