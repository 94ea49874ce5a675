#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Rings that follow the cables: four hosts cabled as a ring A-B-C-D-A (one
# /24 per cable, IP forwarding off, a management bridge for the bootstrap),
# with the ranks numbered against the cables: rank 0 on A, rank 1 on C,
# rank 2 on B, rank 3 on D. NCCL's rank-order ring (0 1 2 3) would join A-C
# and B-D, which have no cable. With NCCL_NET=Mesh the graph stage must give
# rings over the cables (0 2 1 3 and its reverse) with no relayed hop, so
# every ring collective runs over direct links only:
#   - rank 0's log has the mesh (shape ring) and "Mesh ring 0 (cycle, 0
#     relayed hops)", and the channels are "0 2 1 3" and "0 3 1 2";
#   - every collective with NCCL_ALGO=Ring is bit-exact (mp_coll, no
#     send/recv: pairs without a cable need the relay);
#   - every connection made is between hosts that share a cable;
#   - without NCCL_NET, the hosts' addresses show a direct-connect mesh (no
#     subnet reaches all four once the bootstrap's interface is left out)
#     and init chooses the Mesh net by itself (MESHCCL_MESH_AUTO).
# Needs root and iproute2: skipped otherwise, failed under CI.
# Only addresses inside the namespaces made here are used; all are removed.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
# shellcheck source=netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
need_progs mp_coll
ns_require "the mesh rings netns test needs root and ip"
ns_init mr 100 100

# Rank r runs on host HOST_OF[r]: 0 on A, 1 on C, 2 on B, 3 on D.
HOST_OF="1 3 2 4"

# job NAME ARGS...: mp_coll ARGS with NCCL_ALGO=Ring on every host; NCCL_NET
# is NET_CHOICE (Mesh when unset, none when empty), NCCL_SOCKET_IFNAME mcm0
# unless NO_SOCKET_IFNAME is set.
job() {
  local name=$1
  shift
  local net_env=(NCCL_NET="${NET_CHOICE-Mesh}")
  [ -n "${NET_CHOICE-Mesh}" ] || net_env=()
  local sock_env=(NCCL_SOCKET_IFNAME=mcm0)
  [ -z "${NO_SOCKET_IFNAME:-}" ] || sock_env=()
  ns_job "$name" 240 "$HOST_OF" "${net_env[@]}" "${sock_env[@]}" NCCL_ALGO=Ring NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH "$T/mp_coll" "$@"
}

if ! ns_make_hosts 4 "1-2 2-3 3-4 1-4"; then # the cable ring A-B-C-D-A
  not_ok "creating 4 namespaces cabled as a ring, and a management bridge"
  mp_finish
fi
ok "cable ring A-B-C-D-A (10.$X.{12,23,34,14}.0/24), management $MGMT.0/24, ip_forward off"

if job rings --colls allreduce,broadcast,reduce,allgather,reducescatter \
  --types int32,uint8 --ops sum,max --sizes 1,4099,1048579; then
  ok "NCCL_NET=Mesh, NCCL_ALGO=Ring, ranks against the cables: every ring collective exact"
else
  not_ok "ring collectives over the mesh (exit codes ${JOB_RCS[*]})"
  ns_show_job rings
fi
f0="$TMP/rings.0.out"
expect_grep "rank 0 logs the mesh as a ring of cables" "$f0" 'Mesh: .*shape ring'
expect_grep "the rings are cycles over the cables, nothing relayed" "$f0" \
  'Mesh ring 0 \(cycle, 0 relayed hops\)'
expect_grep "channel 0 crosses the hosts in cable order" "$f0" 'Channel 00/0[0-9] : 0 2 1 3$'
expect_grep "channel 1 is its reverse" "$f0" 'Channel 01/0[0-9] : 0 3 1 2$'
# cables NAME: every connection of job NAME joins hosts that share a cable
# ("connection ... to host ... via mclJ": the local NIC is named after the
# peer host it is cabled to; the management NIC is mcm0).
cables() {
  local bad=0 r line n
  for r in 0 1 2 3; do
    while IFS= read -r line; do
      if ! [[ "$line" =~ via\ mcl([1-4])\  ]]; then
        echo "#   rank $r: $line"
        bad=1
      fi
    done < <(grep -E 'NET/Mesh: connection [0-9a-f]+ to host [^ ]+( \([^)]*\))? via ' "$TMP/$1.$r.out")
    n=$(grep -cE 'NET/Mesh: connection [0-9a-f]+ to host [^ ]+( \([^)]*\))? via ' "$TMP/$1.$r.out")
    [ "$n" -ge 2 ] || {
      echo "#   rank $r made $n connections"
      bad=1
    }
  done
  return $bad
}
cables rings
check "every ring connection leaves on a cable's NIC"

# meshccl-topo --mesh in every host at once: each lists its two cable NICs and
# learns the ring of four through discovery.
for h in 1 2 3 4; do
  ns_exec "$h" env -u NCCL_SOCKET_IFNAME NCCL_HOSTID="host$h" MESHCCL_MESH_IFNAME=mcl \
    timeout 30 "$MC_BUILD/bin/meshccl-topo" --mesh --mesh-wait 3000 >"$TMP/topo.$h.out" 2>&1 &
done
wait
expect_grep "meshccl-topo --mesh lists host A's cable NICs" "$TMP/topo.1.out" '^  mcl2 .*subnet 10\.'"$X"'\.12\.0/24'
expect_grep "and its other cable" "$TMP/topo.1.out" '^  mcl4 .*subnet 10\.'"$X"'\.14\.0/24'
expect_grep "and learns the ring of four hosts" "$TMP/topo.1.out" '^mesh: 4 hosts, 4 links \(4 up\), shape ring'

# Automatic choice: NCCL_NET unset, and no NCCL_SOCKET_IFNAME either: the
# bootstrap's interface (the one reaching NCCL_COMM_ID) is the management lane.
if NET_CHOICE= NO_SOCKET_IFNAME=1 job auto --colls allreduce,allgather --types int32 --ops sum --sizes 1,65537; then
  ok "NCCL_NET unset on the cable ring: ring collectives exact"
else
  not_ok "NCCL_NET unset on the cable ring (exit codes ${JOB_RCS[*]})"
  ns_show_job auto
fi
expect_grep "init chose the Mesh net by itself" "$TMP/auto.0.out" \
  'NET: 4 hosts cabled as a ring mesh, 4 links, no common subnet: using network Mesh'
cables auto
check "the bootstrap's interface carries no collective data (every connection on a cable)"
mp_finish
