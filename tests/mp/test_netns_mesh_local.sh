#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Mesh net (NCCL_NET=Mesh) with two ranks per host: network namespaces
# cabled directly to each other (one /24 per cable, IP forwarding off, a
# management bridge for the bootstrap), two processes in each with the same
# NCCL_HOSTID, so that a host's ranks talk through SHM or P2P and the hosts
# through the Mesh, and every process of a host runs its own Mesh context
# (NICs, handshake thread, discovery) under the one host identity.
#   - a triangle, 3 hosts x 2 ranks (ranks 0,1 on A, 2,3 on B, 4,5 on C):
#     every collective and all-pairs send/recv bit-exact (mp_coll) with
#     NCCL_ALGO=Ring and Tree; every channel connection between ranks of one
#     host is SHM or P2P and every one between hosts NET over the Mesh; each
#     Mesh connection left from the cable NIC on the subnet shared with the
#     peer; each host's two meshccl-topo --mesh at once learn 3 hosts (not
#     6: one host per host hash, whatever its number of contexts);
#   - a line A-B-C, 3 hosts x 2 ranks, ranks 0,1 on A, 2,3 on C, 4,5 on B,
#     so that the hosts' ring needs A-C (no cable): collectives exact, the
#     connections between A and C relayed by B, whose contexts relay for
#     the others.
# Needs root and iproute2: skipped otherwise, failed under CI.
# Only addresses inside the namespaces made here are used; all are removed.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
# shellcheck source=netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
need_progs mp_coll
ns_require "the mesh two-ranks-per-host netns test needs root and ip"
ns_init ml 100 100

# job NAME "H0 H1 ..." ENV... PROG ARGS...: rank r on host H<r>, NCCL_NET=Mesh.
job() {
  local name=$1 hosts=$2
  shift 2
  ns_job "$name" 240 "$hosts" NCCL_SOCKET_IFNAME=mcm0 NCCL_NET=Mesh NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=INIT,NET "$@"
}

# check_transports NAME "H0 H1 ...": every "Channel .. : a[a] -> b[b] [send] via T"
# line: T is SHM or P2P when ranks a and b share a host, NET/Mesh otherwise;
# at least one of each.
check_transports() {
  local name=$1 r bad=0 n_local=0 n_net=0 line
  local -a hosts
  read -r -a hosts <<<"$2"
  for ((r = 0; r < ${#hosts[@]}; r++)); do
    while IFS= read -r line; do
      if ! [[ "$line" =~ :\ ([0-9]+)\[[0-9]+\]\ -\>\ ([0-9]+)\[[0-9]+\]\ (\[send\]\ |\[receive\]\ )?via\ ([A-Za-z0-9/]+) ]]; then
        echo "#   rank $r: unexpected channel line: $line"
        bad=1
        continue
      fi
      local a=${BASH_REMATCH[1]} b=${BASH_REMATCH[2]} via=${BASH_REMATCH[4]}
      if [ "${hosts[$a]}" = "${hosts[$b]}" ]; then
        n_local=$((n_local + 1))
        [[ "$via" == SHM* ]] || [[ "$via" == P2P* ]] || {
          echo "#   rank $r: $a -> $b on one host via $via"
          bad=1
        }
      else
        n_net=$((n_net + 1))
        [[ "$via" == NET/Mesh* ]] || {
          echo "#   rank $r: $a -> $b across hosts via $via"
          bad=1
        }
      fi
    done < <(grep -E 'NCCL INFO Channel [0-9]+/[0-9]+ : [0-9]+\[' "$TMP/$name.$r.out")
  done
  if [ "$n_local" = 0 ] || [ "$n_net" = 0 ]; then
    echo "#   $n_local connections inside hosts, $n_net between hosts (want some of each)"
    bad=1
  fi
  return $bad
}

COLL_ARGS=(--types int32 --ops sum,max --sizes 0,1,4099,262147)

# ---------- a triangle, two ranks per host ----------
if ! ns_make_hosts 3 "1-2 1-3 2-3"; then
  not_ok "creating the triangle: 3 namespaces, 3 cables, a management bridge"
  mp_finish
fi
TRI="1 1 2 2 3 3"
for algo in Ring Tree; do
  if NCCL_ALGO=$algo job "tri$algo" "$TRI" "$T/mp_coll" "${COLL_ARGS[@]}"; then
    ok "triangle x 2 ranks, NCCL_ALGO=$algo: every collective and all-pairs send/recv exact ($JOB_MS ms)"
    check_transports "tri$algo" "$TRI"
    check "NCCL_ALGO=$algo: SHM or P2P inside a host, NET/Mesh between hosts"
    if ns_check_links "tri$algo" "$TRI" 6; then
      ok "NCCL_ALGO=$algo: $LINKS_SEEN Mesh connections, each on the cable NIC of the shared subnet"
    else
      not_ok "NCCL_ALGO=$algo: Mesh connections on the cable NICs"
    fi
  else
    not_ok "triangle x 2 ranks, NCCL_ALGO=$algo (exit codes ${JOB_RCS[*]})"
    ns_show_job "tri$algo"
  fi
done
# Two discovery contexts per host at once: one host each, by its NCCL_HOSTID.
for h in 1 2 3; do
  for k in a b; do
    ns_exec "$h" env -u NCCL_SOCKET_IFNAME NCCL_HOSTID="host$h" MESHCCL_MESH_IFNAME=mcl \
      timeout 30 "$MC_BUILD/bin/meshccl-topo" --mesh --mesh-wait 3000 >"$TMP/topo.$h$k.out" 2>&1 &
  done
done
wait
bad=0
for h in 1 2 3; do
  for k in a b; do
    grep -qE '^mesh: 3 hosts, 3 links \(3 up\), shape full' "$TMP/topo.$h$k.out" || {
      echo "#   host $h ($k):"
      show "$TMP/topo.$h$k.out"
      bad=1
    }
  done
done
[ $bad = 0 ]
check "two meshccl-topo --mesh per host at once: each learns the triangle of 3 hosts"

# ---------- a line, two ranks per host, the hosts' ring relayed by B ----------
ns_cleanup
if ! ns_make_hosts 3 "1-2 2-3"; then
  not_ok "creating a line of 3 namespaces"
  mp_finish
fi
LINE="1 1 3 3 2 2"
if job line "$LINE" MESHCCL_MESH_IFNAME=mcl NCCL_ALGO=Ring "$T/mp_coll" \
  --types int32 --ops sum --sizes 1,65537; then
  ok "line A-B-C x 2 ranks (ranks 0,1 on A, 2,3 on C, 4,5 on B): every collective exact ($JOB_MS ms)"
else
  not_ok "line A-B-C x 2 ranks (exit codes ${JOB_RCS[*]})"
  ns_show_job line
fi
check_transports line "$LINE"
check "line: SHM or P2P inside a host, NET/Mesh between hosts"
cat "$TMP"/line.[01].out >"$TMP/line.A"
cat "$TMP"/line.[45].out >"$TMP/line.B"
expect_grep "line: host A's connection to host C is relayed by B" "$TMP/line.A" \
  'NET/Mesh: relayed connection [0-9a-f]+ to host [0-9] \(host3, [^)]*\) over 2 hops \(host [0-9] \(host1, [^)]*\) > host [0-9] \(host2, [^)]*\) > host [0-9] \(host3, [^)]*\);'
n_relaying=$(grep -cE 'NET/Mesh: relaying connection' "$TMP/line.B")
if [ "$n_relaying" -ge 2 ]; then
  ok "line: host B's processes relayed $n_relaying connections"
else
  not_ok "line: host B relayed $n_relaying connections (want 2 or more)"
fi
mp_finish
