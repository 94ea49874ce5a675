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
need_progs mp_coll

if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  skip_or_fail "the mesh relay netns test needs root and ip"
fi

TAG="mr$$"
X=$(($$ % 50 + 100))
MGMT="10.$X.200"
NS=()
SW="${TAG}sw"
EDGES=()
N_HOSTS=0

ns_cleanup() {
  local n
  for n in "${NS[@]}" "$SW"; do
    ip netns pids "$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
    ip netns del "$n" 2>/dev/null
  done
  NS=()
}
trap 'ns_cleanup; mp_cleanup' EXIT

# cable I J: a veth pair between hosts I < J, mcl<J> in host I at
# 10.X.IJ.I/24 and mcl<I> in host J at 10.X.IJ.J/24.
cable() {
  local i=$1 j=$2
  ip link add "${TAG}l$i$j" type veth peer name "${TAG}l$j$i" || return 1
  ip link set "${TAG}l$i$j" netns "${TAG}h$i" name "mcl$j" || return 1
  ip link set "${TAG}l$j$i" netns "${TAG}h$j" name "mcl$i" || return 1
  ip -n "${TAG}h$i" addr add "10.$X.$i$j.$i/24" dev "mcl$j" || return 1
  ip -n "${TAG}h$j" addr add "10.$X.$i$j.$j/24" dev "mcl$i" || return 1
  ip -n "${TAG}h$i" link set "mcl$j" up || return 1
  ip -n "${TAG}h$j" link set "mcl$i" up || return 1
}

# build N "I-J I-J ...": N host namespaces on a management bridge, cabled.
build() {
  local n=$1 e
  N_HOSTS=$n
  read -r -a EDGES <<<"$2"
  ip netns add "$SW" || return 1
  ip -n "$SW" link add br0 type bridge || return 1
  ip -n "$SW" link set br0 up || return 1
  for ((i = 1; i <= n; i++)); do
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
  for e in "${EDGES[@]}"; do
    cable "${e%-*}" "${e#*-}" || return 1
  done
}

is_edge() {
  local a=$1 b=$2 e
  for e in "${EDGES[@]}"; do
    [ "$e" = "$a-$b" ] || [ "$e" = "$b-$a" ] && return 0
  done
  return 1
}

# dist A B: hops between hosts A and B over the cables (breadth-first).
dist() {
  local a=$1 b=$2 d=0 frontier=("$1") seen=" $1 " next h k
  while [ ${#frontier[@]} -gt 0 ]; do
    for h in "${frontier[@]}"; do [ "$h" = "$b" ] && echo $d && return; done
    next=()
    for h in "${frontier[@]}"; do
      for ((k = 1; k <= N_HOSTS; k++)); do
        if [[ "$seen" != *" $k "* ]] && is_edge "$h" "$k"; then
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

# job NAME "RANK_OF_HOST_1 ..." PROG ARGS...: one rank per host.
job() {
  local name=$1 ranks
  read -r -a ranks <<<"$2"
  shift 2
  local port pids=() rc=0 t0 i
  port=$(free_port)
  t0=$(now_ms)
  for ((i = 1; i <= N_HOSTS; i++)); do
    local r=${ranks[$((i - 1))]} root="" k
    # the root runs where rank 0 runs
    for ((k = 1; k <= N_HOSTS; k++)); do [ "${ranks[$((k - 1))]}" = 0 ] && root="$MGMT.$k"; done
    ip netns exec "${TAG}h$i" env RANK="$r" WORLD_SIZE="$N_HOSTS" LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 \
      NCCL_HOSTID="host$i" NCCL_COMM_ID="$root:$port" NCCL_SOCKET_IFNAME=mcm0 NCCL_NET=Mesh \
      MESHCCL_MESH_IFNAME=mcl NCCL_ALGO=Ring NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
      timeout 120 "$@" >"$TMP/$name.h$i.out" 2>&1 &
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

show_job() { for f in "$TMP/$1".h*.out; do show "$f"; done; }

# check_logs NAME SHAPE N_LINKS "RANKS": the mesh every host logged, the
# relayed and direct connections.
check_logs() {
  local name=$1 shape=$2 n_links=$3 ranks i line bad=0 n_relayed=0 n_relaying=0 need_relay=0
  read -r -a ranks <<<"$4"
  for ((i = 1; i <= N_HOSTS; i++)); do
    local f="$TMP/$name.h$i.out"
    line=$(grep -E 'NET/Mesh: mesh stable:' "$f" | tail -1)
    if ! [[ "$line" =~ mesh\ stable:\ $N_HOSTS\ hosts\ .*\),\ $n_links\ links,\ shape\ $shape ]]; then
      echo "#   host $i: mesh log: ${line:-none} (want $N_HOSTS hosts, $n_links links, $shape)"
      bad=1
    fi
    [ "$(grep -cE 'NET/Mesh: mesh: link [0-9]+:' "$f")" -ge "$n_links" ] || {
      echo "#   host $i: fewer than $n_links link lines in the mesh log"
      bad=1
    }
    # "relayed connection C to host H over N hops (H/hostA > H/hostB > ...; "
    while IFS= read -r line; do
      n_relayed=$((n_relayed + 1))
      local hops path prev="" hn
      hops=$(sed -E 's/.* over ([0-9]+) hops.*/\1/' <<<"$line")
      path=$(sed -E 's/.* hops \(([^;]*);.*/\1/' <<<"$line" | grep -oE '/host[0-9]+' | sed 's|/host||')
      read -r -a hn <<<"$(tr '\n' ' ' <<<"$path")"
      if [ "${hn[0]}" != "$i" ] || [ $((${#hn[@]} - 1)) != "$hops" ] ||
        [ "$(dist "${hn[0]}" "${hn[-1]}")" != "$hops" ] || [ "$hops" -lt 2 ]; then
        echo "#   host $i: not a shortest relayed route: $line"
        bad=1
      fi
      for h in "${hn[@]}"; do
        if [ -n "$prev" ] && ! is_edge "$prev" "$h"; then
          echo "#   host $i: route crosses $prev-$h, not a cable: $line"
          bad=1
        fi
        prev=$h
      done
    done < <(grep -E 'NET/Mesh: relayed connection' "$f")
    n_relaying=$((n_relaying + $(grep -cE 'NET/Mesh: relaying connection' "$f")))
    # direct connections: "connection C to host H via mclJ": J must be cabled to i.
    while IFS= read -r line; do
      local j
      j=$(sed -E 's/.* via mcl([0-9]+) .*/\1/' <<<"$line")
      is_edge "$i" "$j" || {
        echo "#   host $i: direct connection over a missing cable: $line"
        bad=1
      }
    done < <(grep -E 'NET/Mesh: connection [0-9a-f]+ to host' "$f")
    # The rank ring's next host: relayed when it is not a neighbour.
    local r=${ranks[$((i - 1))]} nr k
    nr=$(((r + 1) % N_HOSTS))
    for ((k = 1; k <= N_HOSTS; k++)); do
      [ "${ranks[$((k - 1))]}" = "$nr" ] && ! is_edge "$i" "$k" && need_relay=$((need_relay + 1))
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
  if ! build "$n" "$edges"; then
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
      show_job "$name"
    fi
  else
    not_ok "$name (exit codes ${JOB_RCS[*]})"
    show_job "$name"
  fi
  ns_cleanup
}

shape ring4 4 "1-2 2-3 3-4 1-4" "0 2 1 3" ring 4
shape line4 4 "1-2 2-3 3-4" "0 1 2 3" line 3
shape star5 5 "1-2 1-3 1-4 1-5" "0 1 2 3 4" star 4
shape chord5 5 "1-2 2-3 3-4 4-5 1-5 2-4" "0 3 1 4 2" partial 6
shape ladder6 6 "1-2 2-3 4-5 5-6 1-4 2-5 3-6" "0 4 2 5 1 3" partial 7
mp_finish
