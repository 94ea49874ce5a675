#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What the Mesh net says when a failure leaves no route, and when (NCCL_NET=Mesh,
# mp_net_timeout's all-reduce loop, one rank per host, NCCL_ALGO=Ring):
#   line  4 hosts cabled as a line (h1-h2-h3-h4), MESHCCL_MESH_ROUTE_TIMEOUT_MS=3000:
#         the h2-h3 cable goes down (on h3's side). Every rank fails with
#         ncclRemoteError, and every error that names a cable names that one
#         (both hosts, their interfaces, its subnet), never the healthy first
#         hop of a relayed route; every rank fails within the documented
#         bound (docs/ENV.md: the route timeout + 0.2 s after the cut; checked
#         with 0.5 s of margin for a loaded machine, from the moment `ip`
#         returned: the cable is down by then); the figures are printed;
#         every NET/Mesh line names a host "host K (name, rank R)", never by
#         its hash alone;
#   early 2 hosts (h1-h2) whose discovery never hears the other (nft drops its
#         UDP port), MESHCCL_MESH_ROUTE_TIMEOUT_MS=1000: the cable goes down.
#         Both ranks name it from the connection's own ends: the sender both
#         hosts, interfaces and the subnet, the receiver (which cannot tell a
#         direct connection from a relayed one without discovery) its own end,
#         the far address and the subnet; neither names a "link";
#   star  5 hosts, h1 the hub (h1-h2 .. h1-h5), MESHCCL_MESH_ROUTE_TIMEOUT_MS=8000:
#         rank 4 (host h5) is killed. The ranks behind it fail within 1 s
#         (+ 0.2 s) of the rank in front of them (docs/ENV.md), well before the
#         route timeout: a ring neighbour of the killed rank first, the others
#         from the ranks in front of them (2 deep: seen 1.01-1.05 s and
#         2.02-2.05 s), so in the order they failed each within 1.2 s of the
#         one before, and every rank within 3 s of the kill (two such steps and
#         margin: the rank's notice wait and the Mesh net's 1 s judgement of a
#         relayed close must not add up, nor a receive the rank posted restart
#         the former); rank 0 (the hub, cabled to h5) names rank 4's host as
#         the one that closed the connection, not a cable.
#   topo  on the line, meshccl-topo --mesh alone in h1 names this host and, having
#         heard no neighbour, says to run it on the other hosts (reachable on the
#         cables); run in every host, it names h1's neighbour on each cable and
#         marks this host in the mesh.
# Needs root and iproute2: skipped otherwise, failed under CI. Only addresses
# inside the namespaces made here are used; all are removed.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
# shellcheck source=netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
need_progs mp_net_timeout
ns_require "the mesh errors netns test needs root and ip"
ns_init me 100 201

LIMIT=40 # s: a rank still running then hangs
COUNT=65536

# start NAME "H0 H1 ..." VAR=VALUE...: rank r on host H<r>, looping all-reduces
# until one fails; $TMP/NAME<r>.out its output, $TMP/NAME<r>.end the time
# (ms) its last line ("rank R: ... after N all-reduces ...") was printed.
start() {
  local name=$1 r
  local -a hosts
  read -r -a hosts <<<"$2"
  shift 2
  NS_PORT=$(free_port)
  T0_MS=$(now_ms)
  for ((r = 0; r < ${#hosts[@]}; r++)); do
    rm -f "$TMP/$name$r.end"
    ns_rank_argv hosts "$r" ""
    bg "$name$r" bash -c 'set -o pipefail; "$@" 2>&1 | while IFS= read -r l; do
        printf "%s\n" "$l"
        case $l in "rank "*": "*" after "*) date +%s%3N >"'"$TMP/$name$r.end"'" ;; esac
      done' _ "${NS_ARGV[@]}" NCCL_SOCKET_IFNAME=mcm0 NCCL_NET=Mesh MESHCCL_MESH_IFNAME=mcl \
      NCCL_ALGO=Ring NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=NET "$@" "$T/mp_net_timeout" 0 $COUNT
  done
}

# wait_running NAME N: every rank of NAME printed "running" (at most 60 s).
wait_running() {
  local k
  for ((k = 0; k < 600; k++)); do
    [ "$(cat "$TMP/$1"[0-9].out 2>/dev/null | grep -c ': running$')" = "$2" ] && return 0
    sleep 0.1
  done
  return 1
}

# finish NAME N: waits for the N ranks; RCS their statuses, END_<r> the ms
# from CUT_MS to the rank's failure line.
finish() {
  local r e
  RCS=""
  for ((r = 0; r < $2; r++)); do
    wait_bg "$1$r" $LIMIT
    e="RC_$1$r" && RCS+="${!e} "
    e=$(cat "$TMP/$1$r.end" 2>/dev/null || echo 0)
    printf -v "END_$r" '%s' $((e - CUT_MS))
  done
}

# ---------- line: the h2-h3 cable goes down ----------
ROUTE_MS=3000
if ! ns_make_hosts 4 "1-2 2-3 3-4"; then
  not_ok "building 4 namespaces cabled as a line"
  mp_finish
fi
# meshccl-topo --mesh names this host; alone it says what to do, and with the
# other hosts running it too it names the neighbour on each cable.
topo() {
  ns_exec "$1" env -u NCCL_SOCKET_IFNAME NCCL_HOSTID="host$1" MESHCCL_MESH_IFNAME=mcl \
    timeout 30 "$MC_BUILD/bin/meshccl-topo" --mesh --mesh-wait "$2" >"$TMP/topo.$1.$3" 2>&1
}
topo 1 1000 alone
expect_grep "meshccl-topo --mesh alone: names this host" "$TMP/topo.1.alone" '^this host: host host1 \([0-9a-f]{16}\)$'
expect_grep "meshccl-topo --mesh alone: no neighbour on its cable NIC" "$TMP/topo.1.alone" \
  "^  mcl2 .*subnet 10\\.$X\\.12\\.0/24 .*no neighbour heard$"
expect_grep "meshccl-topo --mesh alone: says to run it on the other hosts, reachable on the cables" \
  "$TMP/topo.1.alone" "^no neighbour heard on any mesh NIC in 1000 ms: .*Run meshccl-topo --mesh \\(or the job\\) on the other hosts too.*UDP port [0-9]+ \\(MESHCCL_MESH_PORT\\)"
for h in 1 2 3 4; do topo $h 3000 all & done
wait
expect_grep "meshccl-topo --mesh on every host: host 1 names its neighbour on mcl2" "$TMP/topo.1.all" \
  "^  mcl2 .*subnet 10\\.$X\\.12\\.0/24 .*neighbour host host2 \\([0-9a-f]{16}\\)$"
expect_grep "meshccl-topo --mesh on every host: the mesh marks this host" "$TMP/topo.1.all" \
  '^mesh host [0-9]+ is host host1 \([0-9a-f]{16}\) <- this host: mcl2 '
if grep -q "no neighbour heard on any" "$TMP/topo.1.all"; then
  not_ok "meshccl-topo --mesh on every host: no advice to run it elsewhere"
else
  ok "meshccl-topo --mesh on every host: no advice to run it elsewhere"
fi
grep -E "^mesh:|this host" "$TMP/topo.1.all" | sed 's/^/# topo: /'

start line "1 2 3 4" MESHCCL_MESH_ROUTE_TIMEOUT_MS=$ROUTE_MS
if wait_running line 4; then
  # A report names the cable once discovery knows the mesh (before, it names
  # the local link): cut once every rank's discovery logged "mesh stable".
  for ((k = 0; k < 100; k++)); do
    [ "$(grep -l 'NET/Mesh: mesh stable' "$TMP"/line[0-9].out 2>/dev/null | wc -l)" -ge 4 ] && break
    sleep 0.1
  done
  sleep 0.5
  # ip may wait for the kernel's lock behind other namespaces' work (seconds
  # on a busy CI machine); the cable goes down just before it returns.
  IP_MS=$(now_ms)
  ip -n "${TAG}h3" link set mcl2 down
  CUT_MS=$(now_ms)
  IP_MS=$((CUT_MS - IP_MS))
  finish line 4
  expect_eq "line: every rank ends with ncclRemoteError (status 3)" "$RCS" "3 3 3 3 "
  # Hosts are named "host K (NCCL_HOSTID, rank R)" (node K runs rank K here).
  H2="host 1 \\(host2, rank 1\\)" H3="host 2 \\(host3, rank 2\\)"
  C23="$H2 mcl3 10\\.$X\\.23\\.2 - $H3 mcl2 10\\.$X\\.23\\.3 \\(subnet 10\\.$X\\.23\\.0/24\\)"
  C32="$H3 mcl2 10\\.$X\\.23\\.3 - $H2 mcl3 10\\.$X\\.23\\.2 \\(subnet 10\\.$X\\.23\\.0/24\\)"
  n_cable=0
  for r in 0 1 2 3; do
    line=$(grep -E "^rank $r: .* after [0-9]+ all-reduces" "$TMP/line$r.out")
    # Each error names the h2-h3 cable, or a host whose rank failed first and
    # closed its connections (ranks behind a failure fail at once); none names
    # another cable, or a link "of host ..." (the first hop it used).
    want="NET/Mesh: (cable ($C23|$C32) went down|host [0-3] \(host[1-4], rank [0-3]\) closed connection [0-9a-f]+ .* while every cable of the route was up: its process ended or closed the communicator)"
    grep -qE "NET/Mesh: cable ($C23|$C32) went down" <<<"$line" && n_cable=$((n_cable + 1))
    if grep -qE "$want" <<<"$line" && ! grep -oE "cable host [0-9]+ \([^)]*\) mcl[0-9] [^ ]+ - host [0-9]+ \([^)]*\) mcl[0-9] [^ ]+ \(subnet [^)]*\)" <<<"$line" | grep -qvE "$C23|$C32" &&
      ! grep -qE "NET/Mesh: link .* went down" <<<"$line"; then
      ok "line: rank $r's error names the failed cable h2-h3 (hosts, interfaces, subnet) or a host that failed"
    else
      not_ok "line: rank $r's error names the failed cable h2-h3 (hosts, interfaces, subnet) or a host that failed"
      echo "#   | $line" | cut -c1-900
    fi
    e="END_$r"
    expect_le "line: rank $r fails within the route timeout ($ROUTE_MS ms) + 0.2 s of the cut (+ 0.3 s margin)" \
      "${!e}" $((ROUTE_MS + 500))
  done
  expect_le "line: at least one rank names the h2-h3 cable (by hosts, interfaces and subnet)" \
    1 "$n_cable"
  # One host identity in every Mesh line (relays, connections, links down,
  # failures): "host K (name, rank R)", never a bare host hash.
  bare=$(cat "$TMP"/line[0-3].out | grep -E "NET/Mesh" | grep -E "host [0-9a-f]{16}")
  if [ -z "$bare" ]; then
    ok "line: every NET/Mesh line names hosts as 'host K (name, rank R)'"
  else
    not_ok "line: every NET/Mesh line names hosts as 'host K (name, rank R)'"
    head -3 <<<"$bare" | cut -c1-300 | sed 's/^/#   | /'
  fi
  echo "# line: ranks failed $END_0 $END_1 $END_2 $END_3 ms after the cut (route timeout $ROUTE_MS ms; ip took $IP_MS ms; load $(cut -d' ' -f1 /proc/loadavg))"
  for r in 0 1 2 3; do grep -hE "^rank $r: .* after" "$TMP/line$r.out" | cut -c1-700 | sed 's/^/# line: /'; done
else
  not_ok "line: the ranks did not start"
  for r in 0 1 2 3; do show "$TMP/line$r.out"; done
fi
ns_cleanup

# ---------- early: the cable goes down before discovery knows the mesh ----------
if ! command -v nft >/dev/null; then
  if [ "${CI:-}" = true ]; then not_ok "early: needs nft"; else echo "# early: skipped (no nft)"; fi
elif ! ns_make_hosts 2 "1-2"; then
  not_ok "building 2 namespaces cabled together"
else
  for h in 1 2; do
    ns_exec $h nft add table inet mcdisc &&
      ns_exec $h nft add chain inet mcdisc in '{ type filter hook input priority 0; }' &&
      ns_exec $h nft add rule inet mcdisc in udp dport 29517 drop
  done
  start early "1 2" MESHCCL_MESH_ROUTE_TIMEOUT_MS=1000 MESHCCL_MESH_PORT=29517
  if wait_running early 2; then
    sleep 0.5
    ip -n "${TAG}h2" link set mcl1 down
    CUT_MS=$(now_ms)
    finish early 2
    expect_eq "early: both ranks end with ncclRemoteError (status 3)" "$RCS" "3 3 "
    expect_grep "early: discovery heard no other host" "$TMP/early0.out" \
      "the mesh known on host 0 \(host1, rank 0\): 1 hosts "
    # Each rank sends to the other and receives from it; either connection
    # may fail first. Its end is this host's NIC; the far end is the peer's
    # host (a sender knows it is direct) or the address on the cable.
    SUB="\\(subnet 10\\.$X\\.12\\.0/24\\)"
    for r in 0 1; do
      line=$(grep -E "^rank $r: .* after [0-9]+ all-reduces" "$TMP/early$r.out")
      own="host $r \\(host$((r + 1)), rank $r\\) mcl[12] 10\\.$X\\.12\\.$((r + 1))"
      far="(host $((1 - r)) \\([0-9a-f]{16}, rank $((1 - r))\\)|the host at) 10\\.$X\\.12\\.$((2 - r))"
      if grep -qE "NET/Mesh: cable $own - $far $SUB went down" <<<"$line" &&
        ! grep -qE "NET/Mesh: link .* went down" <<<"$line"; then
        ok "early: rank $r's error names the cable from the connection's own ends"
      else
        not_ok "early: rank $r's error names the cable from the connection's own ends"
        echo "#   | $line" | cut -c1-900
      fi
    done
    for r in 0 1; do grep -hE "^rank $r: .* after" "$TMP/early$r.out" | cut -c1-500 | sed 's/^/# early: /'; done
  else
    not_ok "early: the ranks did not start"
    for r in 0 1; do show "$TMP/early$r.out"; done
  fi
  ns_cleanup
fi

# ---------- star: rank 4 is killed ----------
ROUTE_MS=8000
if ! ns_make_hosts 5 "1-2 1-3 1-4 1-5"; then
  not_ok "building 5 namespaces cabled as a star"
  mp_finish
fi
start star "1 2 3 4 5" MESHCCL_MESH_ROUTE_TIMEOUT_MS=$ROUTE_MS
if wait_running star 5; then
  sleep 0.5
  CUT_MS=$(now_ms)
  ip netns pids "${TAG}h5" | xargs -r kill -KILL
  finish star 4
  wait_bg star4 $LIMIT
  expect_eq "star: ranks 0-3 end with ncclRemoteError (status 3)" "$RCS" "3 3 3 3 "
  # Documented: the killed rank's peers within 1 s (+0.2 s), each rank
  # behind a failure within 1 s (+0.2 s) of the rank in front of it. In
  # the order the ranks failed: the first within 1.2 s of the kill, each
  # next within 1.2 s of the one before (its front rank failed no later).
  prev=0
  for t in $(printf '%s\n' "$END_0" "$END_1" "$END_2" "$END_3" | sort -n); do
    expect_le "star: a rank fails within 1.2 s of the failure in front of it ($prev ms; route timeout $ROUTE_MS ms)" \
      "$((t - prev))" 1200
    prev=$t
  done
  expect_le "star: the last rank fails within 3 s of the kill (route timeout $ROUTE_MS ms)" "$prev" 3000
  expect_grep "star: rank 0 (the hub) names rank 4's host as gone, not a cable" "$TMP/star0.out" \
    "^rank 0: .*rank 4 .*NET/Mesh: host 4 \(host5, rank 4\) closed connection [0-9a-f]+ .* while every cable of the route was up: its process ended or closed the communicator"
  if grep -E "^rank 0: " "$TMP/star0.out" | grep -qE "NET/Mesh: (cable|link) .* went down"; then
    not_ok "star: rank 0 blames no cable"
  else
    ok "star: rank 0 blames no cable"
  fi
  echo "# star: ranks failed $END_0 $END_1 $END_2 $END_3 ms after the kill (route timeout $ROUTE_MS ms; load $(cut -d' ' -f1 /proc/loadavg))"
  for r in 0 1 2 3; do grep -hE "^rank $r: .* after" "$TMP/star$r.out" | cut -c1-700 | sed 's/^/# star: /'; done
else
  not_ok "star: the ranks did not start"
  for r in 0 1 2 3 4; do show "$TMP/star$r.out"; done
fi
mp_finish
