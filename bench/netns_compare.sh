#!/bin/bash
# Two "hosts" (network namespaces joined by one veth pair): iperf3's
# throughput on that veth (1 and 4 streams) against meshccl-perf all_reduce
# (one rank per namespace, NET between them), and the ratio of meshccl's
# busbw to iperf3's multi-stream throughput. For 2 ranks the all-reduce moves
# N bytes each way in N / busbw seconds, so the ratio compares like with like.
# Needs root, iproute2 and iperf3. Only the namespaces made here are used.
# Usage: bench/netns_compare.sh [build-dir] [max-bytes]
set -euo pipefail
build=${1:-build}
max=${2:-256M}
perf=$build/bin/meshccl-perf
[ -x "$perf" ] || { echo "build first: make build" >&2; exit 2; }
if [ "$(id -u)" != 0 ] || ! command -v iperf3 >/dev/null; then
  echo "netns_compare: needs root and iperf3 (apt-get install iperf3); skipped" >&2
  exit 77
fi
tag="mcb$$"
a="${tag}a"
b="${tag}b"
sub="10.202.$(($$ % 200 + 20))"
tmp=$(mktemp -d)
cleanup() {
  for n in "$a" "$b"; do
    ip netns pids "$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$n" 2>/dev/null || true
  done
  rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$a"
ip netns add "$b"
ip link add "${tag}x" type veth peer name "${tag}y"
ip link set "${tag}x" netns "$a" name mcv0
ip link set "${tag}y" netns "$b" name mcv0
ip -n "$a" addr add "$sub.1/24" dev mcv0
ip -n "$b" addr add "$sub.2/24" dev mcv0
for n in "$a" "$b"; do ip -n "$n" link set mcv0 up; ip -n "$n" link set lo up; done

iperf() { # streams -> GB/s
  ip netns exec "$b" iperf3 -s -1 -p 5201 -D --logfile "$tmp/iperf-s.log"
  sleep 0.3
  # shellcheck disable=SC2086 # "4 --bidir" splits on purpose
  ip netns exec "$a" iperf3 -c "$sub.2" -p 5201 -P $1 -t 4 -J >"$tmp/iperf.json"
  python3 -c 'import json,sys; print("%.2f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8e9))' "$tmp/iperf.json"
}
i1=$(iperf 1)
i4=$(iperf 4)
ib=$(iperf "4 --bidir")
echo "# iperf3 over the veth: $i1 GB/s with 1 stream, $i4 GB/s with 4 streams (one way);"
echo "# with 4 streams each way at once (--bidir, what an all-reduce does): $ib GB/s each way"

port=$((20000 + $$ % 5000))
for r in 0 1; do
  ns=$a
  [ $r = 1 ] && ns=$b
  ip netns exec "$ns" env RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 NCCL_HOSTID="h$r" \
    NCCL_COMM_ID="$sub.1:$port" NCCL_SOCKET_IFNAME=mcv0 \
    "$perf" all_reduce -b 1M -e "$max" -f 4 -w 3 -n 10 -c 0 >"$tmp/perf.$r.txt" 2>&1 &
done
wait
echo "# meshccl-perf all_reduce, 2 ranks, one per namespace (NET/Socket)"
echo "#      size   time(us)  busbw(GB/s)  busbw/iperf3-P4  busbw/iperf3-bidir"
awk -v i4="$i4" -v ib="$ib" '!/^#/ && NF >= 13 && $1 ~ /^[0-9]+$/ {
  printf "%11s %10s %12s %16.2f %19.2f\n", $1, $6, $8, $8 / i4, $8 / ib }' "$tmp/perf.0.txt"
