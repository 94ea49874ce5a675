#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Mesh net (NCCL_NET=Mesh) on a triangle of hosts cabled directly to each
# other: three network namespaces, one veth pair per link, one /24 per link
# (A-B .12, A-C .13, B-C .23), IP forwarding off, so that no address of a
# host reaches both others; plus a management bridge (its own subnet) that
# only the bootstrap uses (NCCL_COMM_ID, NCCL_SOCKET_IFNAME=mcm0). One rank
# per host (NCCL_HOSTID):
#   - every collective and all-pairs send/recv bit-exact on integers
#     (mp_coll), with NCCL_ALGO=Ring and NCCL_ALGO=Tree, the mesh NICs chosen
#     by the default rule (every interface but the management one) and by
#     MESHCCL_MESH_IFNAME=mcl;
#   - from NCCL_DEBUG=INFO: each host's mesh NICs are its two link veths,
#     never the management one, and every connection went out of the local
#     link NIC on the subnet it shares with the peer.
# Needs root and iproute2: skipped otherwise, failed under CI.
# Only addresses inside the namespaces made here are used; all are removed.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll

if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  skip_or_fail "the mesh netns test needs root and ip"
fi

TAG="mm$$"
X=$(($$ % 50 + 150))
MGMT="10.$X.100"
NS=()
SW="${TAG}sw"

ns_cleanup() {
  local n
  for n in "${NS[@]}" "$SW"; do
    ip netns pids "$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
    ip netns del "$n" 2>/dev/null
  done
}
trap 'ns_cleanup; mp_cleanup' EXIT

# link I J: a veth pair between hosts I and J (I < J), mcl<J> in host I at
# 10.X.IJ.I/24 and mcl<I> in host J at 10.X.IJ.J/24.
link() {
  local i=$1 j=$2
  ip link add "${TAG}l$i$j" type veth peer name "${TAG}l$j$i" || return 1
  ip link set "${TAG}l$i$j" netns "${TAG}h$i" name "mcl$j" || return 1
  ip link set "${TAG}l$j$i" netns "${TAG}h$j" name "mcl$i" || return 1
  ip -n "${TAG}h$i" addr add "10.$X.$i$j.$i/24" dev "mcl$j" || return 1
  ip -n "${TAG}h$j" addr add "10.$X.$i$j.$j/24" dev "mcl$i" || return 1
  ip -n "${TAG}h$i" link set "mcl$j" up || return 1
  ip -n "${TAG}h$j" link set "mcl$i" up || return 1
}

make_triangle() {
  ip netns add "$SW" || return 1
  ip -n "$SW" link add br0 type bridge || return 1
  ip -n "$SW" link set br0 up || return 1
  for i in 1 2 3; do
    local h="${TAG}h$i"
    NS+=("$h")
    ip netns add "$h" || return 1
    ip netns exec "$h" sysctl -qw net.ipv4.ip_forward=0 || return 1
    ip link add "${TAG}m$i" type veth peer name "${TAG}s$i" || return 1
    ip link set "${TAG}m$i" netns "$h" name mcm0 || return 1
    ip link set "${TAG}s$i" netns "$SW" || return 1
    ip -n "$SW" link set "${TAG}s$i" master br0 up || return 1
    ip -n "$h" addr add "$MGMT.$i/24" dev mcm0 || return 1
    ip -n "$h" link set mcm0 up || return 1
    ip -n "$h" link set lo up || return 1
  done
  link 1 2 && link 1 3 && link 2 3
}

# job NAME PROG ARGS...: one rank per host, NCCL_NET=Mesh.
job() {
  local name=$1 prog=$2
  shift 2
  local port pids=() rc=0 t0
  port=$(free_port)
  t0=$(now_ms)
  for i in 1 2 3; do
    ip netns exec "${TAG}h$i" env RANK=$((i - 1)) WORLD_SIZE=3 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
      NCCL_HOSTID="host$i" NCCL_COMM_ID="$MGMT.1:$port" NCCL_SOCKET_IFNAME=mcm0 NCCL_NET=Mesh \
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
      timeout 240 "$prog" "$@" >"$TMP/$name.$((i - 1)).out" 2>&1 &
    pids+=($!)
  done
  JOB_RCS=()
  for p in "${pids[@]}"; do
    wait "$p"
    JOB_RCS+=($?)
  done
  JOB_MS=$(($(now_ms) - t0))
  for x in "${JOB_RCS[@]}"; do [ "$x" = 0 ] || rc=1; done
  return $rc
}

show_job() { for f in "$TMP/$1".*.out; do show "$f"; done; }

# check_links NAME: in every rank's log, the mesh NICs are the two link
# veths, and each connection left from the local NIC on the peer's subnet.
check_links() {
  local name=$1 r bad=0 n_conn=0 n_acc=0 line
  for r in 0 1 2; do
    local f="$TMP/$name.$r.out" h=$((r + 1))
    line=$(grep -E 'NET/Mesh : Using' "$f" | head -1)
    if [ -z "$line" ] || [[ "$line" == *mcm0* ]] || [ "$(grep -o '\]mcl[0-9]:' <<<"$line" | wc -l)" != 2 ]; then
      echo "#   rank $r mesh NICs: ${line:-none}"
      bad=1
    fi
    grep -q 'Using network Mesh' "$f" || {
      echo "#   rank $r did not use the Mesh net"
      bad=1
    }
    # "via mclJ 10.X.HJ.H<0> -> 10.X.HJ.J<port> (subnet 10.X.HJ.0/24"
    while IFS= read -r line; do
      n_conn=$((n_conn + 1))
      if ! [[ "$line" =~ via\ mcl([1-3])\ 10\.$X\.([1-3][1-3])\.([1-3])\<0\>\ -\>\ 10\.$X\.([1-3][1-3])\.([1-3])\<[0-9]+\>\ \(subnet\ 10\.$X\.([1-3][1-3])\.0/24 ]]; then
        echo "#   rank $r: unexpected link: $line"
        bad=1
        continue
      fi
      local peer=${BASH_REMATCH[1]} sub=${BASH_REMATCH[2]} me=${BASH_REMATCH[3]}
      local psub=${BASH_REMATCH[4]} paddr=${BASH_REMATCH[5]} lsub=${BASH_REMATCH[6]}
      local want=$((h < peer ? h * 10 + peer : peer * 10 + h))
      if [ "$me" != "$h" ] || [ "$paddr" != "$peer" ] || [ "$sub" != "$want" ] ||
        [ "$psub" != "$want" ] || [ "$lsub" != "$want" ]; then
        echo "#   rank $r (host $h): wrong link: $line"
        bad=1
      fi
    done < <(grep -E 'NET/Mesh: connection [0-9a-f]+ to host' "$f")
    n_acc=$((n_acc + $(grep -cE 'NET/Mesh: accepted connection .* on mcl[1-3] 10\.'"$X"'\.' "$f")))
  done
  if [ "$n_conn" -lt 6 ] || [ "$n_acc" != "$n_conn" ]; then
    echo "#   $n_conn connections made, $n_acc accepted on link NICs (want at least 6, equal)"
    bad=1
  fi
  LINKS_SEEN=$n_conn
  return $bad
}

if ! make_triangle; then
  not_ok "creating the triangle: 3 namespaces, 3 link veth pairs, a management bridge"
  mp_finish
fi
ok "triangle: 10.$X.{12,13,23}.0/24 links, management $MGMT.0/24, ip_forward off"
# No host reaches the far end of the other links: there is no route.
if ip netns exec "${TAG}h1" ping -c1 -W1 "10.$X.23.2" >/dev/null 2>&1; then
  not_ok "host 1 must not reach 10.$X.23.2 (B-C link)"
else
  ok "host 1 cannot reach the B-C link: no single address reaches every peer"
fi

COLL_ARGS=(--types int32,int64,uint8 --ops sum,max --sizes 0,1,4099,262147)
for algo in Ring Tree; do
  if NCCL_ALGO=$algo job "mesh$algo" "$T/mp_coll" "${COLL_ARGS[@]}"; then
    ok "NCCL_NET=Mesh, NCCL_ALGO=$algo: every collective and all-pairs send/recv ($JOB_MS ms)"
    if check_links "mesh$algo"; then
      ok "NCCL_ALGO=$algo: $LINKS_SEEN connections, each on the link NIC of the shared subnet"
    else
      not_ok "NCCL_ALGO=$algo: connections on the link NICs"
    fi
  else
    not_ok "NCCL_NET=Mesh, NCCL_ALGO=$algo (exit codes ${JOB_RCS[*]})"
    show_job "mesh$algo"
  fi
done
# A root tbf qdisc on one link NIC of host 1 is the speed its Mesh NIC reports.
if ! ip netns exec "${TAG}h1" tc qdisc add dev mcl2 root tbf rate 3gbit burst 512kb latency 20ms; then
  not_ok "tc qdisc add dev mcl2 root tbf (host 1)"
fi
if MESHCCL_MESH_IFNAME=mcl job meshIfname "$T/mp_coll" --types int32 --ops sum --sizes 1,65537; then
  ok "MESHCCL_MESH_IFNAME=mcl: collectives ($JOB_MS ms)"
  check_links meshIfname
  check "MESHCCL_MESH_IFNAME=mcl: connections on the link NICs"
  line=$(grep -E 'NET/Mesh : Using' "$TMP/meshIfname.0.out" | head -1)
  if [[ "$line" == *"]mcl2:10.$X.12.1<0>(mgmt,3000Mb/s tbf,"* ]] &&
    [[ "$line" == *"]mcl3:10.$X.13.1<0>(mgmt,10000Mb/s,"* ]]; then
    ok "host 1: mcl2 shaped by tbf reports 3000 Mb/s, mcl3 its link speed"
  else
    not_ok "host 1: tbf rate as the NIC's speed: ${line:-no Using line}"
  fi
else
  not_ok "MESHCCL_MESH_IFNAME=mcl (exit codes ${JOB_RCS[*]})"
  show_job meshIfname
fi
# What the logs look like (rank 0 of the Ring run).
grep -hE 'ok [0-9]+ checks|NET/Mesh : Using|NET/Mesh: connection' "$TMP/meshRing.0.out" | head -3 |
  sed 's/^/#   /'
mp_finish
