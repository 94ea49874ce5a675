#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Mesh net (NCCL_NET=Mesh) on cables that carry IPv6 only: a triangle of
# network namespaces, one veth pair per cable, each cable its own /64
# (fd00:X:12::/64, fd00:X:13::/64, fd00:X:23::/64; nodad), no IPv4 address
# on any cable, forwarding off; the bootstrap keeps an IPv4 management bridge
# (NCCL_SOCKET_IFNAME=mcm0). One rank per host (NCCL_HOSTID):
#   - every collective and all-pairs send/recv bit-exact on integers
#     (mp_coll), with NCCL_ALGO=Ring and NCCL_ALGO=Tree;
#   - from NCCL_DEBUG=INFO: each host's mesh NICs are its two cable veths
#     with their fd00 addresses (not the link-local ones), and every
#     connection went out of the local cable NIC, from its fd00 address to
#     the peer's on the cable's /64;
#   - discovery over the cables (UDP to ff02::1 on each interface):
#     meshccl-topo --mesh in every host learns the triangle;
#   - a line of three (1-2-3), the same IPv6 addressing, ranks 0 2 1 so that
#     the rank ring needs host 1 -> host 3 (no cable): collectives exact, and
#     that connection relayed by host 2 over IPv6.
# Needs root and iproute2: skipped otherwise, failed under CI.
# Only addresses inside the namespaces made here are used; all are removed.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
# shellcheck source=netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
need_progs mp_coll
ns_require "the mesh IPv6 netns test needs root and ip"
ns_init m6 150 100
if [ ! -e /proc/net/if_inet6 ]; then
  skip_or_fail "the mesh IPv6 netns test needs a kernel with IPv6"
fi

# job NAME "H0 H1 ..." PROG ARGS...: rank r on host H<r>, NCCL_NET=Mesh.
job() {
  local name=$1 hosts=$2
  shift 2
  ns_job "$name" 240 "$hosts" NCCL_SOCKET_IFNAME=mcm0 NCCL_NET=Mesh NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=INIT,NET "$@"
}

if ! ns_make_hosts 3 "1-2 1-3 2-3" 6; then
  not_ok "creating the triangle: 3 namespaces, 3 IPv6-only cables, a management bridge"
  mp_finish
fi
ok "triangle: fd00:$X:{12,13,23}::/64 cables (IPv6 only), management $MGMT.0/24, forwarding off"
v4=$(for h in 1 2 3; do ns_exec "$h" ip -4 -o addr show | grep -E ' mcl[0-9] '; done)
expect_eq "no cable has an IPv4 address" "$v4" ""
if ns_exec 1 ping -6 -c1 -W1 "fd00:$X:23::2" >/dev/null 2>&1; then
  not_ok "host 1 must not reach fd00:$X:23::2 (B-C cable)"
else
  ok "host 1 cannot reach the B-C cable: no single address reaches every peer"
fi

COLL_ARGS=(--types int32,uint8 --ops sum,max --sizes 0,1,4099,262147)
for algo in Ring Tree; do
  if NCCL_ALGO=$algo job "v6$algo" "1 2 3" "$T/mp_coll" "${COLL_ARGS[@]}"; then
    ok "IPv6 cables, NCCL_ALGO=$algo: every collective and all-pairs send/recv exact ($JOB_MS ms)"
    if ns_check_links "v6$algo" "1 2 3" 6; then
      ok "NCCL_ALGO=$algo: $LINKS_SEEN connections, each from the cable NIC's fd00 address on the shared /64"
    else
      not_ok "NCCL_ALGO=$algo: connections on the cable NICs"
    fi
  else
    not_ok "IPv6 cables, NCCL_ALGO=$algo (exit codes ${JOB_RCS[*]})"
    ns_show_job "v6$algo"
  fi
done

# Discovery alone, in every host at once.
for h in 1 2 3; do
  ns_exec "$h" env -u NCCL_SOCKET_IFNAME NCCL_HOSTID="host$h" MESHCCL_MESH_IFNAME=mcl \
    timeout 30 "$MC_BUILD/bin/meshccl-topo" --mesh --mesh-wait 3000 >"$TMP/topo.$h.out" 2>&1 &
done
wait
expect_grep "meshccl-topo --mesh lists host A's cable NICs with their IPv6 subnets" "$TMP/topo.1.out" \
  "^  mcl2 .*subnet fd00:$X:12::/64"
expect_grep "and its other cable" "$TMP/topo.1.out" "^  mcl3 .*subnet fd00:$X:13::/64"
expect_grep "and learns the triangle over IPv6" "$TMP/topo.1.out" \
  '^mesh: 3 hosts, 3 links \(3 up\), shape full'

# A relayed connection over IPv6: a line 1-2-3, host 1 to host 3 through 2.
ns_cleanup
if ! ns_make_hosts 3 "1-2 2-3" 6; then
  not_ok "creating a line of 3 namespaces with IPv6-only cables"
  mp_finish
fi
if job v6line "1 3 2" MESHCCL_MESH_IFNAME=mcl NCCL_ALGO=Ring "$T/mp_coll" \
  --colls allreduce,allgather,sendrecv --types int32 --ops sum --sizes 1,65537; then
  ok "IPv6 line 1-2-3, ranks 0 2 1: collectives and send/recv exact ($JOB_MS ms)"
else
  not_ok "IPv6 line 1-2-3 (exit codes ${JOB_RCS[*]})"
  ns_show_job v6line
fi
expect_grep "host 1 relays its connection to host 3 through host 2" "$TMP/v6line.0.out" \
  'NET/Mesh: relayed connection [0-9a-f]+ to host [0-9] \(host3, [^)]*\) over 2 hops \(host [0-9] \(host1, [^)]*\) > host [0-9] \(host2, [^)]*\) > host [0-9] \(host3, [^)]*\);'
expect_grep "host 2 relays it between its IPv6 cables" "$TMP/v6line.2.out" \
  "NET/Mesh: relaying connection [0-9a-f]+ from host [0-9] \\(host[13], [^)]*\\) \\(fd00:$X:(12|23)::[13]<[0-9]+>\\) to host [0-9] \\(host[13], [^)]*\\) via fd00:$X:(12|23)::[13]<"
mp_finish
