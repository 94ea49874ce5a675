#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Communicator init time against the number of local ranks (meshccl-run -n N
# meshccl-hello, N = 2, 4, ... max), then 8 namespace hosts x 8 ranks.
#
# Per N, the median of RUNS runs (default 3; 1 from 128 ranks on) of:
#   wall      the whole job, process start-up included (s)
#   cpu       user + system time of every rank (s): on a host with fewer
#             cores than ranks this, not the wall time, is what a change saves
#   total boot topo graphs conn
#             rank 0's "Init timings" (s, wall: a stage's time includes
#             waiting for the other ranks)
#   detect exchange paths search share
#             CPU time of these steps summed over the ranks (ms), from the
#             INFO PROFILE step lines of init_steps.c: detection, the XML
#             exchange and fusion, the path computation, the ring and tree
#             searches, the shared search's digest and broadcast
#   rss       largest resident set of a rank (MiB)
# The load average is printed before and after: other jobs on the host change
# every figure.
#
# The namespace case (needs root and iproute2; skipped otherwise): 8 network
# namespaces on one bridge, 8 ranks in each (NCCL_HOSTID per namespace),
# rank 0's init total, the wall time and the CPU time of the 64 ranks.
# Usage: bench/init.sh [build-dir] [max-ranks] [runs]
set -euo pipefail
build=${1:-build}
max=${2:-256}
runs=${3:-3}
run=$build/bin/meshccl-run
hello=$build/bin/meshccl-hello
[ -x "$run" ] && [ -x "$hello" ] || { echo "build first: make build" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "init.sh: needs /usr/bin/time (Debian: time)" >&2; exit 2; }
tmp=$(mktemp -d)
made=()
cleanup() {
  for n in "${made[@]}"; do
    ip netns pids "$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$n" 2>/dev/null || true
  done
  [ -n "${KEEP_TMP:-}" ] && echo "# kept $tmp" >&2 || rm -rf "$tmp"
}
trap cleanup EXIT

median() { sort -g | awk '{a[NR]=$1} END {print (NR ? a[int((NR+1)/2)] : "-")}'; }

# summarize LOG TIMEFILE: one line of the figures of one run.
summarize() {
  awk -v timefile="$2" '
    BEGIN {
      getline t < timefile
      while (t !~ /^TIME /) { if ((getline t < timefile) <= 0) break }
      split(t, f, " "); wall = f[2]; cpu = f[3] + f[4]; rss = f[5] / 1024
    }
    /(Topo|Graphs) timings - rank/ {
      stage = ($0 ~ /Graphs timings/) ? "g." : ""
      for (i = 1; i <= NF; i++) if ($i ~ /^[0-9.]+\/[0-9.]+,?$/) {
        split($i, a, "/"); sub(",", "", a[2]); s[stage $(i - 1)] += a[2]
      }
    }
    /NCCL INFO Init timings .* rank 0 nranks/ {
      line = $0; sub(/.*total /, "", line); gsub(/[(),]/, " ", line); n = split(line, w, " ")
      tot = w[1]; for (i = 2; i < n; i++) r0[w[i]] = w[i + 1]
    }
    END {
      printf "%s %s %s %s %s %s %s %.0f %.0f %.0f %.0f %.0f %.1f\n", wall, cpu, tot,
        r0["bootstrap"], r0["topo"], r0["graphs"], r0["connections"], s["detect"],
        s["exchange"] + s["allgather"] + s["fuse"], s["paths"] + s["paths2"],
        s["g.ring"] + s["g.tree"], s["g.share"], rss
    }' "$1"
}

echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
echo "# one host; wall/cpu/total/boot/topo/graphs/conn in s; step CPU sums in ms; rss MiB"
printf '%-6s %7s %7s %7s %6s %6s %6s %6s %7s %8s %7s %7s %6s %6s\n' nranks wall cpu total \
  boot topo graphs conn detect exchange paths search share rss
n=2
while [ "$n" -le "$max" ]; do
  r=$runs
  [ "$n" -ge 128 ] && r=1
  : >"$tmp/rows"
  for _ in $(seq "$r"); do
    if /usr/bin/time -f "TIME %e %U %S %M" -o "$tmp/time" env NCCL_DEBUG=INFO \
      NCCL_DEBUG_SUBSYS=PROFILE "$run" -n "$n" --no-tag "$hello" -q >"$tmp/log" 2>&1; then
      summarize "$tmp/log" "$tmp/time" >>"$tmp/rows"
    else
      echo "# $n ranks: init failed:" && grep -m 3 WARN "$tmp/log" | sed 's/^/#   /'
    fi
  done
  if [ -s "$tmp/rows" ]; then
    row=""
    for c in $(seq 1 13); do row="$row $(awk -v c="$c" '{print $c}' "$tmp/rows" | median)"; done
    # shellcheck disable=SC2086 # row is a list of numbers
    printf '%-6d %7.2f %7.2f %7.2f %6.2f %6.2f %6.2f %6.2f %7.0f %8.0f %7.0f %7.0f %6.0f %6.1f\n' \
      "$n" $row
  fi
  n=$((n * 2))
done
echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---------------------------------------------------------------- 8 x 8 hosts
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  echo "# 8 namespace hosts x 8 ranks: needs root and iproute2; skipped"
  exit 0
fi
hosts=8
per=8
tag="mci$$"
sub="10.204.$(($$ % 200 + 20))"
sw="${tag}sw"
made+=("$sw")
ip netns add "$sw"
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 up
for i in $(seq 1 "$hosts"); do
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
# A script for /usr/bin/time: one launcher per namespace host (as a real
# host has one) starting its ranks; every rank waited for.
cat >"$tmp/host.sh" <<EOF
#!/bin/bash
h=\$1
port=\$2
pids=()
for l in \$(seq 0 $((per - 1))); do
  r=\$((h * $per + l))
  RANK=\$r WORLD_SIZE=$((hosts * per)) LOCAL_RANK=\$l LOCAL_WORLD_SIZE=$per NODE_RANK=\$h \\
    NCCL_HOSTID="host\$h" NCCL_COMM_ID="$sub.1:\$port" NCCL_SOCKET_IFNAME=mcv0 NCCL_DEBUG=INFO \\
    NCCL_DEBUG_SUBSYS=PROFILE "$hello" -q >"$tmp/ns.\$r" 2>&1 &
  pids+=(\$!)
done
rc=0
for p in "\${pids[@]}"; do wait "\$p" || rc=1; done
exit \$rc
EOF
cat >"$tmp/job.sh" <<EOF
#!/bin/bash
port=\$((22000 + RANDOM % 4000))
pids=()
for h in \$(seq 0 $((hosts - 1))); do
  ip netns exec "${tag}h\$((h + 1))" bash "$tmp/host.sh" \$h \$port &
  pids+=(\$!)
done
rc=0
for p in "\${pids[@]}"; do wait "\$p" || rc=1; done
exit \$rc
EOF
echo "# $hosts namespace hosts x $per ranks (NET between hosts over a bridge)"
printf '%-6s %7s %7s %7s %6s %6s %6s %6s\n' run wall cpu total boot topo graphs conn
for i in $(seq "$runs"); do
  if /usr/bin/time -f "TIME %e %U %S %M" -o "$tmp/time" bash "$tmp/job.sh"; then
    cat "$tmp"/ns.* >"$tmp/log"
    summarize "$tmp/log" "$tmp/time" |
      awk -v i="$i" '{printf "%-6d %7.2f %7.2f %7.2f %6.2f %6.2f %6.2f %6.2f\n", i, $1, $2, $3, $4, $5, $6, $7}'
  else
    echo "# run $i failed:" && cat "$tmp"/ns.* | grep -m 3 WARN | sed 's/^/#   /'
  fi
done
echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg)"
