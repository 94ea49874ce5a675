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
# shellcheck source=netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
need_progs mp_coll
ns_require "the mesh netns test needs root and ip"
ns_init mm 150 100
HOSTS="1 2 3" # rank r on host r + 1

# job NAME PROG ARGS...: one rank per host, NCCL_NET=Mesh.
job() {
  local name=$1
  shift
  ns_job "$name" 240 "$HOSTS" NCCL_SOCKET_IFNAME=mcm0 NCCL_NET=Mesh NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=INIT,NET "$@"
}

# check_links NAME: in every rank's log, the mesh NICs are the two link
# veths, and each connection left from the local NIC on the peer's subnet.
check_links() { ns_check_links "$1" "$HOSTS" 6; }

if ! ns_make_hosts 3 "1-2 1-3 2-3"; then
  not_ok "creating the triangle: 3 namespaces, 3 link veth pairs, a management bridge"
  mp_finish
fi
ok "triangle: 10.$X.{12,13,23}.0/24 links, management $MGMT.0/24, ip_forward off"
# No host reaches the far end of the other links: there is no route.
if ns_exec 1 ping -c1 -W1 "10.$X.23.2" >/dev/null 2>&1; then
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
    ns_show_job "mesh$algo"
  fi
done
# A root tbf qdisc on one link NIC of host 1 is the speed its Mesh NIC reports.
if ! ns_exec 1 tc qdisc add dev mcl2 root tbf rate 3gbit burst 512kb latency 20ms; then
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
  ns_show_job meshIfname
fi
# What the logs look like (rank 0 of the Ring run).
grep -hE 'ok [0-9]+ checks|NET/Mesh : Using|NET/Mesh: connection' "$TMP/meshRing.0.out" | head -3 |
  sed 's/^/#   /'
mp_finish
