#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Socket-net throughput between two network namespaces joined by a veth pair
# (10.77.0.1/24 <-> 10.77.0.2/24), next to iperf3 -P 1 and -P 4 on the same
# pair when iperf3 is installed. Creates the namespaces and the pair, and
# removes them on exit. Needs root.
# Usage: bench/net_socket_netns.sh [build-dir] [bench options, e.g. --configs 0x1,2x1]
set -euo pipefail
build=${1:-build}
shift || true
bench=$build/bin/net_socket_bench
[ -x "$bench" ] || { echo "build first: make build" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "needs root (ip netns)" >&2; exit 77; }

ns_a=mcnet_a.$$
ns_b=mcnet_b.$$
dir=$(mktemp -d /tmp/mc_netsock.XXXXXX)
cleanup() {
  ip netns pids "$ns_a" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns pids "$ns_b" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns del "$ns_a" 2>/dev/null || true
  ip netns del "$ns_b" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

ip netns add "$ns_a"
ip netns add "$ns_b"
# veth names are per namespace once moved, but must be unique while created
ip link add "mcva$$" type veth peer name "mcvb$$"
ip link set "mcva$$" netns "$ns_a" name veth0
ip link set "mcvb$$" netns "$ns_b" name veth0
ip -n "$ns_a" addr add 10.77.0.1/24 dev veth0
ip -n "$ns_b" addr add 10.77.0.2/24 dev veth0
for ns in "$ns_a" "$ns_b"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" link set veth0 up
done

echo "# veth pair between two namespaces, $(nproc) CPUs, kernel $(uname -r)"
if command -v iperf3 > /dev/null; then
  for p in 1 4; do
    ip netns exec "$ns_b" iperf3 -s -1 -p 5299 > /dev/null 2>&1 &
    srv=$!
    sleep 0.5
    rate=$(ip netns exec "$ns_a" iperf3 -c 10.77.0.2 -p 5299 -t 5 -P "$p" -f g |
      awk '/receiver/ {r=$(NF-2)} END {print r}')
    wait "$srv" || true
    echo "# iperf3 -P $p: $rate Gbit/s"
  done
else
  echo "# iperf3 not installed (apt-get install -y iperf3): no reference figures"
fi

ip netns exec "$ns_b" "$bench" --recv "$dir" --ifname =veth0 "$@" &
recv=$!
ip netns exec "$ns_a" "$bench" --send "$dir" --ifname =veth0 "$@"
wait "$recv"
