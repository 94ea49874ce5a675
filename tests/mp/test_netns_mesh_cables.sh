#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every cable carries a ring: five hosts A..E cabled as a full mesh (K5, four
# cables per host, one /24 each, IP forwarding off), a management bridge for
# the bootstrap only, one rank per host, NCCL_NET=Mesh, NCCL_ALGO=Ring.
# K5 has two Hamiltonian cycles that share no cable; each runs both ways, so
# the graph stage must give 4 rings and 4 channels (not 2 channels, nor
# copies of 2 rings), and a 16 MiB all-reduce must send bytes on every one
# of host A's four cables:
#   - rank 0's log: "Mesh ring 3 (cycle, 0 relayed hops)" and 4 channels
#     ("Channel 03/04") whose rank orders are the rings';
#   - int32 sum all-reduces of 4 Mi elements (16 MiB), in and out of place,
#     every element exact on every rank;
#   - /sys/class/net/mcl<J>/statistics/tx_bytes of host A grew by at least
#     1 MiB on each of mcl2..mcl5 during the job (discovery alone sends a few
#     kB).
# Needs root and iproute2: skipped otherwise, failed under CI.
# Only addresses inside the namespaces made here are used; all are removed.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
# shellcheck source=netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
need_progs mp_coll
ns_require "the mesh cables netns test needs root and ip"
ns_init mk 200 100

if ! ns_make_hosts 5 "1-2 1-3 1-4 1-5 2-3 2-4 2-5 3-4 3-5 4-5"; then
  not_ok "creating 5 namespaces cabled as a full mesh, and a management bridge"
  mp_finish
fi
ok "full mesh of 5 hosts (10 cables, 10.$X.IJ.0/24), management $MGMT.0/24, ip_forward off"

# tx J: bytes host A (1) sent on its cable to host J.
tx() { ns_exec 1 cat "/sys/class/net/mcl$1/statistics/tx_bytes"; }

declare -A before
for j in 2 3 4 5; do before[$j]=$(tx "$j"); done
if ns_job k5 240 "1 2 3 4 5" NCCL_NET=Mesh NCCL_SOCKET_IFNAME=mcm0 MESHCCL_MESH_IFNAME=mcl \
  NCCL_ALGO=Ring NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH "$T/mp_coll" \
  --colls allreduce --types int32 --ops sum --sizes 4194304; then
  ok "K5, NCCL_ALGO=Ring: 16 MiB int32 sum all-reduces exact on every rank"
else
  not_ok "16 MiB all-reduces on K5 (exit codes ${JOB_RCS[*]})"
  ns_show_job k5
fi
f0="$TMP/k5.0.out"
expect_grep "rank 0 logs 4 rings over the cables (two disjoint cycles, both ways)" "$f0" \
  'Mesh ring 3 \(cycle, 0 relayed hops\)'
expect_grep "4 channels run (one per ring)" "$f0" 'Channel 03/04 : '
# The channels' rank orders are 4 different rings.
n_orders=$(grep -oE 'Channel 0[0-3]/04 : [0-9 ]+$' "$f0" | sed -E 's/.* : //' | sort -u | wc -l)
expect_eq "the 4 channels cross the hosts in 4 different orders" "$n_orders" 4
bad=0
for j in 2 3 4 5; do
  d=$(($(tx "$j") - ${before[$j]}))
  echo "#   host A mcl$j: $d bytes sent"
  [ "$d" -ge $((1 << 20)) ] || bad=1
done
[ $bad = 0 ]
check "each of host A's 4 cables sent at least 1 MiB during the all-reduces"
mp_finish
