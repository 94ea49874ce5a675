#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A Mesh link that goes down under a running collective (NCCL_NET=Mesh):
# four hosts A..D (ranks 0..3) cabled as a ring (A-B B-C C-D D-A, one /24
# per cable, IP forwarding off), a management bridge for the bootstrap only,
# every cable shaped to 200 Mbit/s (tc tbf) so that a 64 MiB all-reduce
# takes seconds. Scenarios:
#   cut    a loop of 64 MiB int32 sum all-reduces, every element checked
#          (mp_failover); a second into it the A-B cable goes down on A's
#          side: every rank completes every all-reduce exact, the logs show
#          the interface going down, connections breaking and moving to
#          routes relayed through C and D, and none lost;
#   silent the A-B cable up again, the same loop; a second into it the B-C
#          cable drops every packet (nftables at both ends, carrier up): TCP's
#          user timeout and discovery's silence find it, every rank completes
#          every all-reduce exact, connections move around it;
#   isolate the A-B cable down again, the same loop; a second into it the
#          D-A cable goes down too, leaving A without a cable: no rank hangs,
#          every rank ends within a bound with ncclRemoteError, and the
#          message names the cable (both hosts, interfaces, subnet), or the
#          host whose rank failed first and closed its connections.
# Needs root, iproute2, tc and nft: skipped otherwise, failed under CI. Only
# addresses inside the namespaces made here are used; all are removed.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
# shellcheck source=netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
need_progs mp_failover
ns_require "the mesh failover netns test needs root, ip, tc and nft" tc nft
ns_init mf 150 200

N_HOSTS=4
RATE=200mbit
MIB=64
ROUTE_MS=8000 # MESHCCL_MESH_ROUTE_TIMEOUT_MS: how long a broken connection may look for a route
JOB_LIMIT=150 # s: a rank still running then hangs

# build: hosts A..D (1..4) cabled as a ring, both ends of every cable shaped.
build() {
  local e i j
  ns_make_hosts $N_HOSTS "1-2 2-3 3-4 1-4" || return 1
  for e in "${NS_EDGES[@]}"; do
    i=${e%-*} j=${e#*-}
    tc -n "${TAG}h$i" qdisc add dev "mcl$j" root tbf rate $RATE burst 256kb latency 100ms || return 1
    tc -n "${TAG}h$j" qdisc add dev "mcl$i" root tbf rate $RATE burst 256kb latency 100ms || return 1
  done
}

# drop_in I IF: host I drops every packet that arrives on IF (nftables), its
# carrier up: a cable gone silent.
drop_in() {
  ns_exec "$1" nft add table inet "$TAG" &&
    ns_exec "$1" nft add chain inet "$TAG" in '{ type filter hook input priority 0; }' &&
    ns_exec "$1" nft add rule inet "$TAG" in iifname "$2" drop
}

# start NAME ITERS: rank i-1 on host i, in the background (wait_bg: PID_NAME<i>).
start() {
  local name=$1 iters=$2 i
  local -a hosts=(1 2 3 4)
  NS_PORT=$(free_port)
  T0_MS=$(now_ms)
  for ((i = 1; i <= N_HOSTS; i++)); do
    rm -f "$TMP/$name.ready$i"
    ns_rank_argv hosts $((i - 1)) ""
    bg "$name$i" "${NS_ARGV[@]}" NCCL_SOCKET_IFNAME=mcm0 NCCL_NET=Mesh MESHCCL_MESH_IFNAME=mcl \
      NCCL_ALGO=Ring MESHCCL_MESH_ROUTE_TIMEOUT_MS=$ROUTE_MS NCCL_DEBUG=INFO \
      NCCL_DEBUG_SUBSYS=INIT,NET "$T/mp_failover" --mib $MIB --iters "$iters" \
      --ready "$TMP/$name.ready$i"
  done
}

# wait_ready NAME: every rank started its first all-reduce (at most 60 s).
wait_ready() {
  local k i n
  for ((k = 0; k < 600; k++)); do
    n=0
    for ((i = 1; i <= N_HOSTS; i++)); do [ -e "$TMP/$1.ready$i" ] && n=$((n + 1)); done
    [ "$n" = $N_HOSTS ] && return 0
    sleep 0.1
  done
  return 1
}

if ! build; then
  not_ok "building 4 namespaces cabled as a ring"
  mp_finish
fi

# ---------- cut: one cable down, every all-reduce exact ----------
start cut 4
if wait_ready cut; then
  sleep 1
  CUT_MS=$(now_ms)
  ip -n "${TAG}h1" link set mcl2 down
  for ((i = 1; i <= N_HOSTS; i++)); do wait_bg "cut$i" $JOB_LIMIT; done
  rcs=""
  for ((i = 1; i <= N_HOSTS; i++)); do v="RC_cut$i" && rcs+="${!v} "; done
  expect_eq "cut: every rank ends with status 0 (A-B down on A's side $((CUT_MS - T0_MS)) ms in)" \
    "$rcs" "0 0 0 0 "
  bad=0
  for ((i = 1; i <= N_HOSTS; i++)); do
    n=$(grep -cE "^rank $((i - 1)): iteration [0-9]+ exact" "$TMP/cut$i.out")
    [ "$n" = 4 ] || {
      echo "#   host $i: $n of 4 iterations exact"
      show "$TMP/cut$i.out"
      bad=1
    }
  done
  [ $bad = 0 ]
  check "cut: every rank checked every element of 4 x $MIB MiB all-reduces exact"
  expect_grep "cut: host A saw its interface mcl2 go down" "$TMP/cut1.out" \
    "NET/Mesh: link down on host [0-9] \(host[1-4], rank [0-3]\): interface mcl2 lost its carrier or was set down \(subnet 10\.$X\.12\.0/24\)"
  expect_grep "cut: host B saw the carrier of mcl1 go" "$TMP/cut2.out" \
    "NET/Mesh: link down on host [0-9] \(host[1-4], rank [0-3]\): interface mcl1 .*subnet 10\.$X\.12\.0/24"
  cat "$TMP"/cut?.out >"$TMP/cut.all"
  expect_grep "cut: a connection over the A-B cable broke" "$TMP/cut.all" \
    "NET/Mesh: link down under connection [0-9a-f]+ (to|from) host .*subnet 10\.$X\.12\.0/24"
  expect_grep "cut: it moved to a route relayed around the cut (through C and D)" "$TMP/cut.all" \
    "NET/Mesh: connection [0-9a-f]+ to host .* moved from .*10\.$X\.12\..* to .*relayed .*\(host(1|2), rank [0-3]\) > .*\(host(4|3), rank [0-3]\) > .*\(host(3|4), rank [0-3]\) > .*\(host(2|1), rank [0-3]\)"
  expect_grep "cut: hosts C and D relay it" "$TMP/cut.all" "NET/Mesh: relaying connection"
  ns_expect_no_loss "cut: no connection lost, no WARN" "$TMP/cut.all"
  down=$(grep -cE "link down under connection" "$TMP/cut.all")
  moved=$(grep -cE "NET/Mesh: connection [0-9a-f]+ (to|from) host .* moved from" "$TMP/cut.all")
  after=$(grep -hoE "resumed at message [0-9]+ \([0-9]+ to (send|receive) again\) after [0-9]+ ms" \
    "$TMP/cut.all" | sed -E 's/.* after ([0-9]+) ms/\1/' | sort -n | tail -1)
  echo "# cut: $down connection ends broke, $moved resumed; longest break ${after:-?} ms"
  grep -hE "^rank 0: iteration" "$TMP/cut1.out" | sed 's/^/# cut: /'
else
  not_ok "cut: the ranks did not start their first all-reduce"
  for ((i = 1; i <= N_HOSTS; i++)); do show "$TMP/cut$i.out"; done
fi

# ---------- silent: a cable that drops everything, carrier up ----------
ip -n "${TAG}h1" link set mcl2 up
ip -n "${TAG}h2" link set mcl1 up
sleep 3 # the A-B cable announced again
start sil 4
if wait_ready sil; then
  sleep 1
  drop_in 2 mcl3
  drop_in 3 mcl2
  for ((i = 1; i <= N_HOSTS; i++)); do wait_bg "sil$i" $JOB_LIMIT; done
  rcs=""
  for ((i = 1; i <= N_HOSTS; i++)); do v="RC_sil$i" && rcs+="${!v} "; done
  expect_eq "silent: every rank ends with status 0 (B-C drops everything)" "$rcs" "0 0 0 0 "
  bad=0
  for ((i = 1; i <= N_HOSTS; i++)); do
    n=$(grep -cE "^rank $((i - 1)): iteration [0-9]+ exact" "$TMP/sil$i.out")
    [ "$n" = 4 ] || {
      echo "#   host $i: $n of 4 iterations exact"
      show "$TMP/sil$i.out"
      bad=1
    }
  done
  [ $bad = 0 ]
  check "silent: every rank checked every element of 4 x $MIB MiB all-reduces exact"
  cat "$TMP"/sil?.out >"$TMP/sil.all"
  expect_grep "silent: B or C found the cable silent (its carrier up)" "$TMP/sil.all" \
    "NET/Mesh: link down on host [0-9] \(host[1-4], rank [0-3]\): interface mcl[23] hears its neighbour no more.*subnet 10\.$X\.23\.0/24"
  expect_grep "silent: a connection over it broke and moved" "$TMP/sil.all" \
    "NET/Mesh: connection [0-9a-f]+ (to|from) host .* moved from .*10\.$X\.23\."
  ns_expect_no_loss "silent: no connection lost, no WARN" "$TMP/sil.all"
  grep -hE "link down under connection|moved from" "$TMP/sil.all" | head -4 | cut -c1-300 |
    sed 's/^/# silent: /'
  grep -hE "^rank 0: iteration" "$TMP/sil1.out" | sed 's/^/# silent: /'
else
  not_ok "silent: the ranks did not start their first all-reduce"
  for ((i = 1; i <= N_HOSTS; i++)); do show "$TMP/sil$i.out"; done
fi
ns_exec 2 nft delete table inet "$TAG" 2>/dev/null
ns_exec 3 nft delete table inet "$TAG" 2>/dev/null
ip -n "${TAG}h1" link set mcl2 down

# ---------- isolate: A loses its last cable, every rank fails, none hangs ----------
sleep 3 # B-C heard again, A-B withdrawn
start iso 40
if wait_ready iso; then
  sleep 1
  ip -n "${TAG}h1" link set mcl4 down
  CUT_MS=$(now_ms)
  for ((i = 1; i <= N_HOSTS; i++)); do wait_bg "iso$i" $JOB_LIMIT; done
  rcs=""
  worst=0
  for ((i = 1; i <= N_HOSTS; i++)); do
    v="RC_iso$i" && rcs+="${!v} "
    v="MS_iso$i" && [ "${!v}" -gt "$worst" ] && worst=${!v}
  done
  expect_eq "isolate: every rank ends with ncclRemoteError (status 2), none hangs" "$rcs" "2 2 2 2 "
  # Host A's collective fails within the route timeout and a margin after the cut.
  expect_le "isolate: the last rank ended within $((4 * ROUTE_MS / 1000 + 20)) s of the cut" \
    $((worst - (CUT_MS - T0_MS))) $((4 * ROUTE_MS + 20000))
  # The cable that failed last, D-A, by both hosts, interfaces and subnet.
  HA="host 0 \(host1, rank 0\)" HD="host 3 \(host4, rank 3\)"
  C14="($HA mcl4 10\.$X\.14\.1 - $HD mcl1 10\.$X\.14\.4|$HD mcl1 10\.$X\.14\.4 - $HA mcl4 10\.$X\.14\.1) \(subnet 10\.$X\.14\.0/24\)"
  expect_grep "isolate: host A's error names the cable D-A (hosts, interfaces, subnet) and the peer" \
    "$TMP/iso1.out" \
    "^rank 0: .*returned 6 .*NET/Mesh: cable $C14 went down .*connection [0-9a-f]+ (to|from) host [1-3] \(host[2-4], rank [1-3]\) \(route "
  for ((i = 2; i <= N_HOSTS; i++)); do
    expect_grep "isolate: rank $((i - 1)) returns ncclRemoteError naming cable D-A or a host that failed first" \
      "$TMP/iso$i.out" \
      "^rank $((i - 1)): .*returned 6 .*NET/Mesh: (cable $C14 went down|host [0-3] \(host[1-4], rank [0-3]\) closed connection [0-9a-f]+ .*its process ended or closed the communicator)"
  done
  echo "# isolate: statuses $rcs, last rank ended $((worst - (CUT_MS - T0_MS))) ms after the cut"
  grep -hE "^rank [0-9]: iteration" "$TMP"/iso?.out | cut -c1-600 | sed 's/^/# isolate: /'
else
  not_ok "isolate: the ranks did not start their first all-reduce"
  for ((i = 1; i <= N_HOSTS; i++)); do show "$TMP/iso$i.out"; done
fi
mp_finish
