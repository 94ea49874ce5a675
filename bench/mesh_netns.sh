#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# The Mesh net (NCCL_NET=Mesh) against the links it runs on, in network
# namespaces: one namespace per host, one veth pair and one /24 per cable,
# IP forwarding off, a management bridge for the bootstrap only
# (NCCL_SOCKET_IFNAME=mcm0, MESHCCL_MESH_IFNAME=mcl), one rank per host.
# Shaped links carry `tc ... tbf rate $RATE` on both ends (each direction
# limited once, by its sender). Four figures, each ratio from the same run:
#   1 triangle, shaped: all_reduce busbw against the sum of a host's two link
#     rates (2 x 1 Gbit/s = 0.25 GB/s): only rings over both directions of
#     every cable reach it; target >= 0.9;
#   2 ring of 4 cables A-B-C-D-A, shaped: send/recv between A and C (no
#     cable: relayed by B or D) against A and B (a cable), one pair at a time
#     in one 4-rank job (bench/mesh_pair_bench.c); target >= 0.8;
#   3 switched: the hosts on one bridge, one subnet, both ends of every port
#     shaped: all_reduce busbw of NCCL_NET=Mesh against NCCL_NET=Socket,
#     taken in turns; target >= 1.0;
#   4 triangle, unshaped: all_reduce busbw against iperf3 on one of its
#     cables (1 stream and -P 4);
#   5 every cable, shaped at $RATE5: all_reduce busbw against one link's rate
#     on a ring of 4 cables (2 rings: target >= 1.8), a full mesh of 5 (K5:
#     two cable-disjoint cycles both ways, 4 rings over a host's 4 cables:
#     target >= 3.4) and a 4x4 torus (16 hosts, 4 cables each: target
#     >= 1.8); the channels' rings and h1's bytes per cable are printed, to
#     show every cable in use. 16 ranks on a small VM are CPU bound: the
#     CPU use per rank says so.
# Values are medians of REPS runs (default 3); each rank's CPU use
# ((user + sys) / wall, from bash's time) says which side is CPU bound.
# On a shared 2-core VM other jobs' load adds noise: the load average is
# printed before and after. About 6 minutes with the defaults.
# Needs root, iproute2, tc (tbf) and iperf3: exit 77 otherwise.
# Only addresses inside the namespaces made here are used; all are removed.
# Usage: bench/mesh_netns.sh [build-dir]
#   env: REPS (3), RATE (1gbit), TBF ("burst 512kb latency 20ms"),
#        RATE5 (200mbit), SHAPES5 ("ring4 full5 torus44"),
#        HOSTS3 (switched hosts, 3), SECTIONS ("1 2 3 4 5": the figures to
#        measure), MESH_ENV (more variables for the Mesh runs, e.g.
#        "NCCL_NSOCKS_PERTHREAD=4"), KEEP_TMP=1 keeps the logs.
set -euo pipefail
build=${1:-build}
perf=$build/bin/meshccl-perf
pair=$build/bin/mesh_pair_bench
[ -x "$perf" ] && [ -x "$pair" ] || { echo "build first: make build" >&2; exit 2; }
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null ||
  ! command -v iperf3 >/dev/null; then
  echo "mesh_netns: needs root, iproute2 (ip, tc) and iperf3 (apt-get install iperf3); skipped" >&2
  exit 77
fi
reps=${REPS:-3}
rate=${RATE:-1gbit}
tbf=${TBF:-burst 512kb latency 20ms}
hosts3=${HOSTS3:-3}
tag="mcm$$"
X=$(($$ % 40 + 210))
mgmt="10.$X.100"
sw="${tag}sw"
tmp=$(mktemp -d)
made=()
t_start=$(date +%s)

teardown() {
  local n
  for n in "${made[@]}" "$sw"; do
    ip netns pids "$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$n" 2>/dev/null || true
  done
  made=()
}
cleanup() {
  teardown
  [ -n "${KEEP_TMP:-}" ] && echo "kept $tmp" >&2 || rm -rf "$tmp"
}
trap cleanup EXIT

# hosts N: namespaces h1..hN with mcm0 on the bridge of namespace $sw.
hosts() {
  ip netns add "$sw"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for i in $(seq 1 "$1"); do
    local h="${tag}h$i"
    made+=("$h")
    ip netns add "$h"
    ip netns exec "$h" sysctl -qw net.ipv4.ip_forward=0
    ip link add "${tag}m$i" type veth peer name "${tag}s$i"
    ip link set "${tag}m$i" netns "$h" name mcm0
    ip link set "${tag}s$i" netns "$sw"
    ip -n "$sw" link set "${tag}s$i" master br0 up
    ip -n "$h" addr add "$mgmt.$i/24" dev mcm0
    ip -n "$h" link set mcm0 up
    ip -n "$h" link set lo up
  done
}

# cable I J [K] (I < J): mcl<J> in host I at 10.X.K.I/24, mcl<I> in host J at
# 10.X.K.J/24; K is IJ unless given (hosts past 9 need it).
cable() {
  local i=$1 j=$2 k=${3:-$1$2}
  ip link add "${tag}a$k" type veth peer name "${tag}b$k"
  ip link set "${tag}a$k" netns "${tag}h$i" name "mcl$j"
  ip link set "${tag}b$k" netns "${tag}h$j" name "mcl$i"
  ip -n "${tag}h$i" addr add "10.$X.$k.$i/24" dev "mcl$j"
  ip -n "${tag}h$j" addr add "10.$X.$k.$j/24" dev "mcl$i"
  ip -n "${tag}h$i" link set "mcl$j" up
  ip -n "${tag}h$j" link set "mcl$i" up
}

# shape NS DEV: tbf at $rate on DEV's egress.
shape() {
  # shellcheck disable=SC2086 # $tbf is a list of tc arguments
  if ! ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$rate" $tbf; then
    echo "mesh_netns: tc tbf unavailable (kernel module sch_tbf); skipped" >&2
    exit 77
  fi
}
shape_cable() {
  shape "${tag}h$1" "mcl$2"
  shape "${tag}h$2" "mcl$1"
}

# job NAME N ENV... -- PROG ARGS...: rank r on host r+1, bootstrap on the
# management bridge; rank r's output in $tmp/NAME.r, its CPU use (user sys
# wall, seconds) in $tmp/NAME.r.cpu.
job() {
  local name=$1 n=$2 envs=() pids=() port=$((21000 + RANDOM % 4000)) r p rc=0
  shift 2
  while [ "$1" != -- ]; do
    envs+=("$1")
    shift
  done
  shift
  for r in $(seq 0 $((n - 1))); do
    ip netns exec "${tag}h$((r + 1))" env RANK="$r" WORLD_SIZE="$n" LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
      NCCL_HOSTID="h$((r + 1))" NCCL_COMM_ID="$mgmt.1:$port" NCCL_SOCKET_IFNAME=mcm0 \
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH NCCL_DEBUG_FILE="$tmp/$name.$r.log" "${envs[@]}" \
      bash -c 'TIMEFORMAT="%U %S %R"; out=$1; shift; time timeout 600 "$@" >"$out" 2>&1' _ \
      "$tmp/$name.$r" "$@" 2>"$tmp/$name.$r.cpu" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  if [ $rc != 0 ]; then
    echo "mesh_netns: job $name failed; rank 0 said:" >&2
    tail -5 "$tmp/$name.0" >&2
    return 1
  fi
}

# busbw FILE N: "size busbw" (out-of-place) of a meshccl-perf all_reduce on N
# ranks, from the time (the busbw column has two decimals only)
busbw() {
  awk -v n="$2" '!/^#/ && NF >= 13 && $1 ~ /^[0-9]+$/ {print $1, $1 / $6 / 1e3 * 2 * (n - 1) / n}' "$1"
}

# median FILES...: per first column, the median of the second over the files
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

# cpu NAME N: per rank, (user + sys) / wall of the last run of job NAME, in %
cpu() {
  local r out=""
  for r in $(seq 0 $(($2 - 1))); do
    out+=$(awk -v r="$r" 'NF == 3 && $3 > 0 {printf " r%d %.0f%%", r, ($1 + $2) / $3 * 100}' "$tmp/$1.$r.cpu")
  done
  echo "${out# }"
}

# verdict RATIO TARGET
verdict() { awk -v x="$1" -v t="$2" 'BEGIN {print (x >= t) ? ">= " t " ok" : "MISSED (< " t ")"}'; }

# rings LOG: the channels' rank orders of a rank's log
rings() { grep -oE 'Channel [0-9]+/[0-9]+ : [0-9 ]+$' "$1" | sed -E 's/Channel ([0-9]+)\/[0-9]+ : /\1: /' | paste -sd ';' -; }

echo "# mesh_netns: load average before: $(cut -d' ' -f1-3 /proc/loadavg) (2 cores shared with other jobs: noise)"
echo "# links shaped with tc tbf rate $rate $tbf on both ends; medians of $reps runs"
perf_args=(all_reduce -b 1M -e 256M -f 4 -w 1 -n 5 -c 0)
# shellcheck disable=SC2206 # MESH_ENV is a list of variables
mesh_env=(NCCL_NET=Mesh MESHCCL_MESH_IFNAME=mcl ${MESH_ENV:-})

# want N: figure N is in SECTIONS
want() { [[ " ${SECTIONS:-1 2 3 4 5} " == *" $1 "* ]]; }

# --- triangle: 4 (unshaped) then 1 (shaped) ---------------------------------
if want 1 || want 4; then
hosts 3
cable 1 2
cable 1 3
cable 2 3
iperf() { # STREAMS -> GB/s from h1 to h2 over their cable
  ip netns exec "${tag}h2" iperf3 -s -1 -B "10.$X.12.2" -p 5201 -D --logfile "$tmp/iperf-s.log"
  sleep 0.3
  ip netns exec "${tag}h1" iperf3 -c "10.$X.12.2" -B "10.$X.12.1" -p 5201 -P "$1" -t 4 -J >"$tmp/iperf.json"
  python3 -c 'import json,sys; print("%.3f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8e9))' "$tmp/iperf.json"
}
if want 4; then
i1=$(iperf 1)
i4=$(iperf 4)
for i in $(seq 1 "$reps"); do
  job tri_free 3 "${mesh_env[@]}" -- "$perf" "${perf_args[@]}"
  busbw "$tmp/tri_free.0" 3 >"$tmp/tf.$i"
done
median "$tmp"/tf.* >"$tmp/tf"
echo
echo "# 4 triangle, unshaped veths: mesh all_reduce busbw vs iperf3 on cable A-B (1 stream $i1 GB/s, -P 4 $i4 GB/s)"
echo "#   rings: $(rings "$tmp/tri_free.0.log")"
echo "#   CPU (last run): $(cpu tri_free 3)"
echo "#        size  busbw(GB/s)  /iperf3-P1  /iperf3-P4"
awk -v i1="$i1" -v i4="$i4" '{printf "%13d %12.3f %11.2f %11.2f\n", $1, $2, $2 / i1, $2 / i4}' "$tmp/tf"
fi

if want 1; then
for c in "1 2" "1 3" "2 3"; do
  # shellcheck disable=SC2086 # two host numbers
  shape_cable $c
done
for i in $(seq 1 "$reps"); do
  job tri 3 "${mesh_env[@]}" -- "$perf" "${perf_args[@]}"
  busbw "$tmp/tri.0" 3 >"$tmp/t.$i"
done
median "$tmp"/t.* >"$tmp/t"
echo
echo "# 1 triangle, links at $rate: mesh all_reduce busbw / sum of a host's two link rates (0.25 GB/s at 1gbit)"
echo "#   rings: $(rings "$tmp/tri.0.log")"
echo "#   CPU (last run): $(cpu tri 3)"
echo "#        size  busbw(GB/s)  ratio"
link_gbs=$(awk -v r="$rate" 'BEGIN {v = r + 0; u = tolower(r); m = (u ~ /gbit/) ? 1e9 : (u ~ /mbit/) ? 1e6 : 1; print v * m / 8e9}')
awk -v l="$link_gbs" '{printf "%13d %12.3f %6.2f\n", $1, $2, $2 / (2 * l)}' "$tmp/t"
best=$(awk -v l="$link_gbs" 'BEGIN {b = 0} {if ($2 > b) b = $2} END {printf "%.2f", b / (2 * l)}' "$tmp/t")
echo "#   best ratio $best  $(verdict "$best" 0.9)"
fi
teardown
fi

# --- 2: ring of 4 cables, relayed pair vs direct pair -----------------------
if want 2; then
hosts 4
cable 1 2
cable 2 3
cable 3 4
cable 1 4
for c in "1 2" "2 3" "3 4" "1 4"; do
  # shellcheck disable=SC2086 # two host numbers
  shape_cable $c
done
for i in $(seq 1 "$reps"); do
  job pair 4 "${mesh_env[@]}" -- "$pair" --pairs 0:1,0:2 -b 1M -e 256M -f 4 -w 1 -n 3
  awk '!/^#/ && $2 == "0:1" {print $1, $4}' "$tmp/pair.0" >"$tmp/pd.$i"
  awk '!/^#/ && $2 == "0:2" {print $1, $4}' "$tmp/pair.0" >"$tmp/pr.$i"
done
median "$tmp"/pd.* >"$tmp/pd"
median "$tmp"/pr.* >"$tmp/pr"
echo
echo "# 2 ring of 4 cables A-B-C-D-A at $rate: send/recv both ways, A-C (relayed, 2 hops) vs A-B (cable)"
echo "#   relayed connections of A: $(grep -cE 'NET/Mesh: relayed connection' "$tmp/pair.0.log" || true)" \
  "($(grep -oE 'over [0-9]+ hops \([^;]*' "$tmp/pair.0.log" | sed -E 's/over [0-9]+ hops \(//' | sort | uniq -c |
    awk '{c = $1; $1 = ""; printf "%s%s x%d", s, $0, c; s = ","}'))"
echo "#   CPU (last run): $(cpu pair 4)"
echo "#        size  direct(GB/s)  relayed(GB/s)  relayed/direct"
join <(sort -k1,1 "$tmp/pd") <(sort -k1,1 "$tmp/pr") | sort -n |
  awk '{printf "%13d %13.3f %14.3f %15.2f\n", $1, $2, $3, $3 / $2}'
worst=$(join <(sort -k1,1 "$tmp/pd") <(sort -k1,1 "$tmp/pr") | sort -n | tail -1 | awk '{printf "%.2f", $3 / $2}')
echo "#   at the largest size: $worst  $(verdict "$worst" 0.8)"
teardown
fi

# --- 3: switched, Mesh vs Socket --------------------------------------------
if want 3; then
hosts "$hosts3"
for i in $(seq 1 "$hosts3"); do
  shape "${tag}h$i" mcm0
  shape "$sw" "${tag}s$i"
done
sw_args=(all_reduce -b 1M -e 64M -f 4 -w 1 -n 5 -c 0)
for i in $(seq 1 "$reps"); do
  job sw_mesh "$hosts3" NCCL_NET=Mesh -- "$perf" "${sw_args[@]}"
  busbw "$tmp/sw_mesh.0" "$hosts3" >"$tmp/sm.$i"
  job sw_sock "$hosts3" NCCL_NET=Socket -- "$perf" "${sw_args[@]}"
  busbw "$tmp/sw_sock.0" "$hosts3" >"$tmp/ss.$i"
done
median "$tmp"/sm.* >"$tmp/sm"
median "$tmp"/ss.* >"$tmp/ss"
echo
echo "# 3 switched: $hosts3 hosts on one bridge, ports at $rate: all_reduce busbw, Mesh vs Socket"
echo "#   CPU (last runs): Mesh $(cpu sw_mesh "$hosts3"); Socket $(cpu sw_sock "$hosts3")"
echo "#        size   Mesh(GB/s)  Socket(GB/s)  Mesh/Socket"
join <(sort -k1,1 "$tmp/sm") <(sort -k1,1 "$tmp/ss") | sort -n |
  awk '{printf "%13d %12.3f %13.3f %12.2f\n", $1, $2, $3, $2 / $3}'
big=$(join <(sort -k1,1 "$tmp/sm") <(sort -k1,1 "$tmp/ss") | sort -n | tail -1 | awk '{printf "%.2f", $2 / $3}')
echo "#   at the largest size: $big  $(verdict "$big" 1.0)"
teardown
fi

# --- 5: every cable in use: ring of 4, K5, 4x4 torus -------------------------
# shape_edges NAME: the cables of a shape, "I-J ..." (hosts from 1).
shape_edges() {
  local r c e=""
  case $1 in
  ring4) echo "1-2 2-3 3-4 1-4" ;;
  full5) echo "1-2 1-3 1-4 1-5 2-3 2-4 2-5 3-4 3-5 4-5" ;;
  torus44)
    for r in 0 1 2 3; do
      for c in 0 1 2 3; do
        e+=" $((r * 4 + c + 1))-$((r * 4 + (c + 1) % 4 + 1)) $((r * 4 + c + 1))-$((((r + 1) % 4) * 4 + c + 1))"
      done
    done
    echo "$e"
    ;;
  esac
}
if want 5; then
  rate5=${RATE5:-200mbit}
  rate=$rate5 # shape() below: the last section, so the others keep $RATE
  link5=$(awk -v r="$rate5" 'BEGIN {v = r + 0; u = tolower(r); m = (u ~ /gbit/) ? 1e9 : (u ~ /mbit/) ? 1e6 : 1; print v * m / 8e9}')
  args5=(all_reduce -b 16M -e 64M -f 4 -w 1 -n 3 -c 0)
  for shp in ${SHAPES5:-ring4 full5 torus44}; do
    case $shp in ring4) n5=4 t5=1.8 ;; full5) n5=5 t5=3.4 ;; torus44) n5=16 t5=1.8 ;; *) continue ;; esac
    hosts "$n5"
    k=1
    for e in $(shape_edges "$shp"); do
      a=${e%-*} b=${e#*-}
      [ "$a" -lt "$b" ] || { t=$a; a=$b; b=$t; }
      cable "$a" "$b" "$k"
      shape "${tag}h$a" "mcl$b"
      shape "${tag}h$b" "mcl$a"
      k=$((k + 1))
    done
    declare -A tx0=()
    for d in $(ip netns exec "${tag}h1" ls /sys/class/net | grep '^mcl'); do
      tx0[$d]=$(ip netns exec "${tag}h1" cat "/sys/class/net/$d/statistics/tx_bytes")
    done
    for i in $(seq 1 "$reps"); do
      job "c_$shp" "$n5" "${mesh_env[@]}" NCCL_ALGO=Ring -- "$perf" "${args5[@]}"
      busbw "$tmp/c_$shp.0" "$n5" >"$tmp/bw_$shp.$i"
    done
    median "$tmp/bw_$shp".* >"$tmp/bw_$shp"
    per=""
    for d in "${!tx0[@]}"; do
      now=$(ip netns exec "${tag}h1" cat "/sys/class/net/$d/statistics/tx_bytes")
      per+=" $d $(((now - ${tx0[$d]}) >> 20))MiB"
    done
    unset tx0
    echo
    echo "# 5 $shp ($n5 hosts, cables at $rate5 = $link5 GB/s): all_reduce busbw / one link's rate (NCCL_ALGO=Ring)"
    echo "#   rings: $(rings "$tmp/c_$shp.0.log")"
    echo "#   h1 sent per cable (all runs):$per"
    echo "#   CPU (last run): $(cpu "c_$shp" "$n5")"
    echo "#        size  busbw(GB/s)  x one link"
    awk -v l="$link5" '{printf "%13d %12.3f %11.2f\n", $1, $2, $2 / l}' "$tmp/bw_$shp"
    best=$(awk -v l="$link5" 'BEGIN {b = 0} {if ($2 > b) b = $2} END {printf "%.2f", b / l}' "$tmp/bw_$shp")
    echo "#   best: $best x one link  $(verdict "$best" "$t5")"
    teardown
  done
fi

echo
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg); run time $(($(date +%s) - t_start)) s"
