#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The Mesh net (NCCL_NET=Mesh) on meshes where some hosts have no cable
# between them, so that their connections are relayed by the hosts on the
# route, and where each host learns the mesh by discovery over the cables
# (no bootstrap involved). One network namespace per host, one veth pair and
# one /24 per cable, IP forwarding off, plus a management bridge that only
# the bootstrap uses (NCCL_SOCKET_IFNAME=mcm0; MESHCCL_MESH_IFNAME=mcl, the
# cables). Shapes:
#   ring4  a ring of 4 cables, ranks 0,2,1,3 around it, so that the rank
#          ring (NCCL_ALGO=Ring) crosses non-adjacent hosts;
#   line4  a chain of 4 hosts (up to 3 hops);
#   star5  a hub and 4 leaves (every leaf-to-leaf connection relayed by it);
#   chord5 a ring of 5 with a chord;
#   ladder6 a partial mesh of 6: two rows of three (1-2-3, 4-5-6) and three
#          rungs (1-4, 2-5, 3-6), ranks shuffled against the cables.
# For each: every collective and all-pairs send/recv exact on integers
# (mp_coll, sizes up to 4 MiB), and from the NCCL_DEBUG=INFO logs: every
# rank logged the mesh with the right hosts, links and shape; a relayed
# connection exists where the rank ring needs one, each follows cables and
# a shortest route; relay hosts logged what they relayed; direct
# connections only between cabled hosts.
# Needs root and iproute2: skipped otherwise, failed under CI.
# Only addresses inside the namespaces made here are used; all are removed.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
# shellcheck source=netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
need_progs mp_coll
ns_require "the mesh relay netns test needs root and ip"
ns_init mr 100 200

# dist A B: hops between hosts A and B over the cables (breadth-first).
dist() {
  local a=$1 b=$2 d=0 frontier=("$1") seen=" $1 " next h k
  while [ ${#frontier[@]} -gt 0 ]; do
    for h in "${frontier[@]}"; do [ "$h" = "$b" ] && echo $d && return; done
    next=()
    for h in "${frontier[@]}"; do
      for ((k = 1; k <= NS_N_HOSTS; k++)); do
        if [[ "$seen" != *" $k "* ]] && ns_is_cable "$h" "$k"; then
          seen+="$k "
          next+=("$k")
        fi
      done
    done
    frontier=("${next[@]}")
    d=$((d + 1))
  done
  echo -1
}

# job NAME "RANK_OF_HOST_1 ..." PROG ARGS...: one rank per host; rank r's
# log is $TMP/NAME.<r>.out.
job() {
  local name=$1 ranks hosts=() i
  read -r -a ranks <<<"$2"
  shift 2
  for ((i = 1; i <= NS_N_HOSTS; i++)); do hosts[${ranks[$((i - 1))]}]=$i; done
  ns_job "$name" 120 "${hosts[*]}" NCCL_SOCKET_IFNAME=mcm0 NCCL_NET=Mesh MESHCCL_MESH_IFNAME=mcl \
    NCCL_ALGO=Ring NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "$@"
}

# check_logs NAME SHAPE N_LINKS "RANKS": the mesh every host logged, the
# relayed and direct connections.
check_logs() {
  local name=$1 shape=$2 n_links=$3 ranks i line bad=0 n_relayed=0 n_relaying=0 need_relay=0
  read -r -a ranks <<<"$4"
  for ((i = 1; i <= NS_N_HOSTS; i++)); do
    local f="$TMP/$name.${ranks[$((i - 1))]}.out"
    # "mesh stable:", or "mesh at close:" where the job ended within 1.5 s of the last change
    line=$(grep -E 'NET/Mesh: mesh (stable|at close):' "$f" | tail -1)
    if ! [[ "$line" =~ mesh\ (stable|at\ close):\ $NS_N_HOSTS\ hosts\ .*\),\ $n_links\ links,\ shape\ $shape ]]; then
      echo "#   host $i: mesh log: ${line:-none} (want $NS_N_HOSTS hosts, $n_links links, $shape)"
      bad=1
    fi
    [ "$(grep -cE 'NET/Mesh: mesh: link [0-9]+:' "$f")" -ge "$n_links" ] || {
      echo "#   host $i: fewer than $n_links link lines in the mesh log"
      bad=1
    }
    # "relayed connection C to host K (hostD, rank R) over N hops (host 0 (hostA, rank 0) > ...; "
    while IFS= read -r line; do
      n_relayed=$((n_relayed + 1))
      local hops path prev="" hn
      hops=$(sed -E 's/.* over ([0-9]+) hops.*/\1/' <<<"$line")
      path=$(sed -E 's/.* hops \(([^;]*);.*/\1/' <<<"$line" | grep -oE '\(host[0-9]+,' | sed 's/[(,]//g; s/host//')
      read -r -a hn <<<"$(tr '\n' ' ' <<<"$path")"
      if [ "${hn[0]}" != "$i" ] || [ $((${#hn[@]} - 1)) != "$hops" ] ||
        [ "$(dist "${hn[0]}" "${hn[-1]}")" != "$hops" ] || [ "$hops" -lt 2 ]; then
        echo "#   host $i: not a shortest relayed route: $line"
        bad=1
      fi
      for h in "${hn[@]}"; do
        if [ -n "$prev" ] && ! ns_is_cable "$prev" "$h"; then
          echo "#   host $i: route crosses $prev-$h, not a cable: $line"
          bad=1
        fi
        prev=$h
      done
    done < <(grep -E 'NET/Mesh: relayed connection' "$f")
    n_relaying=$((n_relaying + $(grep -cE 'NET/Mesh: relaying connection' "$f")))
    # direct connections: "connection C to host H via mclJ": J must be cabled to i
    # ("connection C to host H/name moved from ...", a resume, is not a new one).
    while IFS= read -r line; do
      local j
      j=$(sed -E 's/.* via mcl([0-9]+) .*/\1/' <<<"$line")
      ns_is_cable "$i" "$j" || {
        echo "#   host $i: direct connection over a missing cable: $line"
        bad=1
      }
    done < <(grep -E 'NET/Mesh: connection [0-9a-f]+ to host [^ ]+( \([^)]*\))? via ' "$f")
    # The rank ring's next host: relayed when it is not a neighbour.
    local r=${ranks[$((i - 1))]} nr k
    nr=$(((r + 1) % NS_N_HOSTS))
    for ((k = 1; k <= NS_N_HOSTS; k++)); do
      [ "${ranks[$((k - 1))]}" = "$nr" ] && ! ns_is_cable "$i" "$k" && need_relay=$((need_relay + 1))
    done
  done
  if [ "$need_relay" -gt 0 ] && { [ "$n_relayed" -lt "$need_relay" ] || [ "$n_relaying" -lt 1 ]; }; then
    echo "#   $n_relayed relayed connections, $n_relaying relayed by hosts (the rank ring needs $need_relay)"
    bad=1
  fi
  RELAYED=$n_relayed
  RELAYING=$n_relaying
  return $bad
}

COLL_ARGS=(--types int32,uint8 --ops sum --sizes 1,65537,1048579)

# shape NAME N "EDGES" "RANKS" SHAPE N_LINKS
shape() {
  local name=$1 n=$2 edges=$3 rank_list=$4 want=$5 n_links=$6
  if ! ns_make_hosts "$n" "$edges"; then
    not_ok "$name: building $n namespaces cabled $edges"
    ns_cleanup
    return
  fi
  if job "$name" "$rank_list" "$T/mp_coll" "${COLL_ARGS[@]}"; then
    ok "$name ($edges; ranks $rank_list): every collective and all-pairs send/recv exact ($JOB_MS ms)"
    if check_logs "$name" "$want" "$n_links" "$rank_list"; then
      ok "$name: mesh logged as $want ($n_links links) by every host; $RELAYED relayed connections on shortest routes over cables, $RELAYING relayed by hosts on the route"
    else
      not_ok "$name: the logs"
      ns_show_job "$name"
    fi
  else
    not_ok "$name (exit codes ${JOB_RCS[*]})"
    ns_show_job "$name"
  fi
  ns_cleanup
}

shape ring4 4 "1-2 2-3 3-4 1-4" "0 2 1 3" ring 4
shape line4 4 "1-2 2-3 3-4" "0 1 2 3" line 3
shape star5 5 "1-2 1-3 1-4 1-5" "0 1 2 3 4" star 4
shape chord5 5 "1-2 2-3 3-4 4-5 1-5 2-4" "0 3 1 4 2" partial 6
shape ladder6 6 "1-2 2-3 4-5 5-6 1-4 2-5 3-6" "0 4 2 5 1 3" partial 7
mp_finish
