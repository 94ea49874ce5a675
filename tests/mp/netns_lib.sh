# SPDX-License-Identifier: Apache-2.0
# Shared helpers of the tests/mp/test_*.sh drivers that build hosts cabled
# directly to each other out of network namespaces (sourced after mp_lib.sh,
# not a test):
#   - ns_require: skip without root or the commands a driver needs (fail
#     under CI=true, as skip_or_fail does);
#   - ns_init / ns_cleanup: names, the management subnet, and removal of every
#     namespace (and every process in it) at exit;
#   - ns_make_hosts N "EDGES" [4|6]: N host namespaces ${TAG}h1..hN on a
#     management bridge in ${TAG}sw (mcm0, $MGMT.<i>/24, only the bootstrap
#     uses it), IP forwarding off, and one veth pair per cable I-J with a
#     subnet of its own: mcl<J> in host I and mcl<I> in host J (the NIC is
#     named after the host at its other end), at 10.X.IJ.I/24 and
#     10.X.IJ.J/24, or with 6 only fd00:X:IJ::I/64 and fd00:X:IJ::J/64
#     (nodad: usable at once; the management bridge stays IPv4), so that no
#     address of a host reaches every peer;
#   - ns_start / ns_wait / ns_job: ranks in the hosts, several per host if
#     asked, through the launcher's environment (RANK, LOCAL_RANK ...,
#     NCCL_HOSTID=host<i>, NCCL_COMM_ID on rank 0's management address);
#   - ns_check_links: from the ranks' NCCL_DEBUG=INFO logs, the mesh NICs are
#     the cable veths and every direct connection left from the local NIC on
#     the subnet it shares with the peer.
# Hosts are numbered 1..9 (one digit each in the subnets and NIC names).
# Only addresses inside the namespaces made here are used; all are removed.
# shellcheck shell=bash

# ns_require REASON [COMMAND...]: root, ip and each COMMAND, or skip_or_fail REASON.
ns_require() {
  local reason=$1 c
  shift
  if [ "$(id -u)" != 0 ]; then
    skip_or_fail "$reason"
  fi
  for c in ip "$@"; do
    command -v "$c" >/dev/null || skip_or_fail "$reason"
  done
}

# ns_init PREFIX X_BASE MGMT_OCTET: TAG (prefix + pid: unique names), X (the
# second octet of every address, X_BASE .. X_BASE + 49), MGMT (the management
# /24, 10.X.MGMT_OCTET), and cleanup at exit.
ns_init() {
  TAG="$1$$"
  X=$(($$ % 50 + $2))
  MGMT="10.$X.$3"
  NS=()
  SW="${TAG}sw"
  NS_N_HOSTS=0
  NS_EDGES=()
  NS_FAMILY=4
  trap 'ns_cleanup; mp_cleanup' EXIT
}

# ns_cleanup: kills every process in the namespaces made here and removes them.
# shellcheck disable=SC2317 # called by the trap and by drivers between shapes
ns_cleanup() {
  local n
  for n in "${NS[@]}" "$SW"; do
    ip netns pids "$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
    ip netns del "$n" 2>/dev/null
  done
  NS=()
}

# ns_exec H CMD...: CMD in host H.
ns_exec() {
  local h=$1
  shift
  ip netns exec "${TAG}h$h" "$@"
}

# ns_cable_id I J: the cable's two host numbers, smaller first ("12" for 2 1).
ns_cable_id() {
  if [ "$1" -lt "$2" ]; then echo "$1$2"; else echo "$2$1"; fi
}

# ns_addr H P: host H's address on its cable to host P (no prefix length).
ns_addr() {
  local c
  c=$(ns_cable_id "$1" "$2")
  if [ "$NS_FAMILY" = 6 ]; then echo "fd00:$X:$c::$1"; else echo "10.$X.$c.$1"; fi
}

# ns_subnet H P: the subnet of the cable between hosts H and P, as the Mesh
# net prints it.
ns_subnet() {
  local c
  c=$(ns_cable_id "$1" "$2")
  if [ "$NS_FAMILY" = 6 ]; then echo "fd00:$X:$c::/64"; else echo "10.$X.$c.0/24"; fi
}

# ns_cable I J: a veth pair between hosts I and J, each end named after the
# host at the other end, addressed on the cable's own subnet, up.
ns_cable() {
  local i=$1 j=$2 len=24 opt=()
  [ "$NS_FAMILY" = 6 ] && len=64 && opt=(nodad)
  ip link add "${TAG}l$i$j" type veth peer name "${TAG}l$j$i" || return 1
  ip link set "${TAG}l$i$j" netns "${TAG}h$i" name "mcl$j" || return 1
  ip link set "${TAG}l$j$i" netns "${TAG}h$j" name "mcl$i" || return 1
  ip -n "${TAG}h$i" addr add "$(ns_addr "$i" "$j")/$len" dev "mcl$j" "${opt[@]}" || return 1
  ip -n "${TAG}h$j" addr add "$(ns_addr "$j" "$i")/$len" dev "mcl$i" "${opt[@]}" || return 1
  ip -n "${TAG}h$i" link set "mcl$j" up || return 1
  ip -n "${TAG}h$j" link set "mcl$i" up || return 1
}

# ns_is_cable A B: hosts A and B share a cable.
ns_is_cable() {
  local e
  for e in "${NS_EDGES[@]}"; do
    if [ "$e" = "$1-$2" ] || [ "$e" = "$2-$1" ]; then return 0; fi
  done
  return 1
}

# ns_cables_of H: how many cables host H has.
ns_cables_of() {
  local e n=0
  for e in "${NS_EDGES[@]}"; do
    if [ "${e%-*}" = "$1" ] || [ "${e#*-}" = "$1" ]; then n=$((n + 1)); fi
  done
  echo $n
}

# ns_make_hosts N "I-J I-J ..." [4|6]: the management bridge, N hosts on it
# (IP forwarding off), then the cables in the order given.
ns_make_hosts() {
  local n=$1 e i
  NS_N_HOSTS=$n
  NS_FAMILY=${3:-4}
  read -r -a NS_EDGES <<<"$2"
  ip netns add "$SW" || return 1
  ip -n "$SW" link add br0 type bridge || return 1
  ip -n "$SW" link set br0 up || return 1
  for ((i = 1; i <= n; i++)); do
    local h="${TAG}h$i"
    NS+=("$h")
    ip netns add "$h" || return 1
    ip netns exec "$h" sysctl -qw net.ipv4.ip_forward=0 || return 1
    if [ "$NS_FAMILY" = 6 ]; then
      ip netns exec "$h" sysctl -qw net.ipv6.conf.all.forwarding=0 || return 1
    fi
    ip link add "${TAG}m$i" type veth peer name "${TAG}s$i" || return 1
    ip link set "${TAG}m$i" netns "$h" name mcm0 || return 1
    ip link set "${TAG}s$i" netns "$SW" || return 1
    ip -n "$SW" link set "${TAG}s$i" master br0 up || return 1
    ip -n "$h" addr add "$MGMT.$i/24" dev mcm0 || return 1
    ip -n "$h" link set mcm0 up || return 1
    ip -n "$h" link set lo up || return 1
  done
  for e in "${NS_EDGES[@]}"; do
    ns_cable "${e%-*}" "${e#*-}" || return 1
  done
}

# ns_rank_argv HOSTS R LIMIT_S: NS_ARGV, the command that starts rank R of a
# job whose rank r runs on host HOSTS[r] (an array name), up to the program:
# in its host, under `timeout LIMIT_S` (none when LIMIT_S is empty), with the
# launcher's variables (LOCAL_RANK: its place among the ranks of its host),
# NCCL_HOSTID=host<h> and NCCL_COMM_ID=<rank 0's management address>:NS_PORT.
# NCCL_NET and NCCL_SOCKET_IFNAME are unset (mp_lib.sh exports lo): the
# caller's VAR=VALUE words that follow set them.
ns_rank_argv() {
  local -n hosts_=$1
  local r=$2 limit=$3 n=${#hosts_[@]} lr=0 ln=0 k h
  h=${hosts_[$r]}
  for ((k = 0; k < n; k++)); do
    [ "${hosts_[$k]}" = "$h" ] || continue
    [ "$k" -lt "$r" ] && lr=$((lr + 1))
    ln=$((ln + 1))
  done
  NS_ARGV=(ip netns exec "${TAG}h$h")
  [ -n "$limit" ] && NS_ARGV+=(timeout "$limit")
  NS_ARGV+=(env -u NCCL_NET -u NCCL_SOCKET_IFNAME RANK="$r" WORLD_SIZE="$n" LOCAL_RANK="$lr"
    LOCAL_WORLD_SIZE="$ln" NCCL_HOSTID="host$h" NCCL_COMM_ID="$MGMT.${hosts_[0]}:$NS_PORT")
}

# ns_start NAME LIMIT_S "H0 H1 ..." [VAR=VALUE...] PROG [ARGS...]: rank r on
# host H<r> (a host may appear several times), in the background, its output
# in $TMP/NAME.<r>.out; NS_PIDS their pids.
ns_start() {
  local name=$1 limit=$2 r
  local -a hosts
  read -r -a hosts <<<"$3"
  shift 3
  NS_PORT=$(free_port)
  NS_PIDS=()
  NS_T0=$(now_ms)
  for ((r = 0; r < ${#hosts[@]}; r++)); do
    ns_rank_argv hosts "$r" "$limit"
    "${NS_ARGV[@]}" "$@" >"$TMP/$name.$r.out" 2>&1 &
    NS_PIDS+=($!)
  done
}

# ns_wait: waits for the ranks of ns_start; JOB_RCS their exit statuses,
# JOB_MS the job's time; fails unless every rank exited 0.
ns_wait() {
  local p x rc=0
  JOB_RCS=()
  for p in "${NS_PIDS[@]}"; do
    wait "$p"
    JOB_RCS+=($?)
  done
  JOB_MS=$(($(now_ms) - NS_T0))
  for x in "${JOB_RCS[@]}"; do [ "$x" = 0 ] || rc=1; done
  return $rc
}

# ns_job NAME LIMIT_S "H0 H1 ..." [VAR=VALUE...] PROG [ARGS...]: ns_start, then ns_wait.
ns_job() {
  ns_start "$@"
  ns_wait
}

# ns_show_job NAME: the last lines of every rank's log.
ns_show_job() {
  local f
  for f in "$TMP/$1".*.out; do show "$f"; done
}

# ns_check_links NAME "H0 H1 ..." MIN [PREFIX_ERE]: in every rank's log
# ($TMP/NAME.<r>.out, rank r on host H<r>), the mesh NICs (the first
# "NET/Mesh : Using" line) are exactly the host's cable veths, each with its
# address on that cable (never the management NIC mcm0); every direct
# connection ("NET/Mesh: connection C to host ... via mclJ A<0> -> B<port>
# (subnet S") left from the NIC cabled to the peer, from this host's address
# on that cable to the peer's, on the cable's subnet (a connection that broke
# and resumed logs "connection C to host H/name moved from ...": not a new
# connection, and a starved receiver can cause one); as many accepted on
# cable NICs; at least MIN connections in all (-MIN: exactly MIN). Lines
# count only after PREFIX_ERE (a logger's prefix) when given. Sets
# LINKS_SEEN; fails with a line per fault.
ns_check_links() {
  local name=$1 min=$3 prefix=${4:-} r k bad=0 n_conn=0 n_acc=0 line want got
  local -a hosts
  read -r -a hosts <<<"$2"
  for ((r = 0; r < ${#hosts[@]}; r++)); do
    local f="$TMP/$name.$r.out" h=${hosts[$r]}
    line=$(grep -E 'NET/Mesh : Using' "$f" | head -1)
    # "[0]mcl2:10.X.12.1<0>(...) [1]mcl3:..." -> "]mcl2:10.X.12.1< ]mcl3:...< "
    got=$(grep -oE '\]mcl[0-9]:[^<]+<' <<<"$line" | sort | tr '\n' ' ')
    want=$(for ((k = 1; k <= NS_N_HOSTS; k++)); do
      ns_is_cable "$h" "$k" && echo "]mcl$k:$(ns_addr "$h" "$k")<"
    done | sort | tr '\n' ' ')
    if [ -z "$line" ] || [[ "$line" == *mcm0* ]] || [ "$got" != "$want" ]; then
      echo "#   rank $r (host $h) mesh NICs: ${line:-none}"
      echo "#     want the cables: $want"
      bad=1
    fi
    while IFS= read -r line; do
      n_conn=$((n_conn + 1))
      if ! [[ "$line" =~ via\ mcl([1-9])\ ([^ ]+)\<0\>\ -\>\ ([^ ]+)\<[0-9]+\>\ \(subnet\ ([^ ,]+), ]]; then
        echo "#   rank $r: unexpected link: $line"
        bad=1
        continue
      fi
      local peer=${BASH_REMATCH[1]} from=${BASH_REMATCH[2]} to=${BASH_REMATCH[3]} sub=${BASH_REMATCH[4]}
      if ! ns_is_cable "$h" "$peer" || [ "$from" != "$(ns_addr "$h" "$peer")" ] ||
        [ "$to" != "$(ns_addr "$peer" "$h")" ] || [ "$sub" != "$(ns_subnet "$h" "$peer")" ]; then
        echo "#   rank $r (host $h): wrong link: $line"
        bad=1
      fi
    done < <(grep -E "${prefix}NET/Mesh: connection [0-9a-f]+ to host [^ ]+( \([^)]*\))? via " "$f")
    n_acc=$((n_acc + $(grep -cE "${prefix}NET/Mesh: accepted connection .* on mcl[1-9] ($(ns_addr_ere))" "$f")))
  done
  if { [ "$min" -lt 0 ] && [ "$n_conn" != $((-min)) ]; } || [ "$n_conn" -lt "${min#-}" ] ||
    [ "$n_acc" != "$n_conn" ]; then
    echo "#   $n_conn connections made, $n_acc accepted on link NICs (want ${min#-}$([ "$min" -lt 0 ] || echo ' or more'), as many accepted)"
    bad=1
  fi
  LINKS_SEEN=$n_conn
  return $bad
}

# ns_addr_ere: an ERE that matches the start of any cable address made here.
ns_addr_ere() {
  if [ "$NS_FAMILY" = 6 ]; then echo "fd00:$X:"; else echo "10\\.$X\\."; fi
}

# ns_expect_no_loss LABEL FILE: no Mesh connection in FILE (the ranks' logs)
# was lost and nothing WARNed, but the once-per-process WARN of NCCL_COMM_ID
# without MESHCCL_SECRET; names the first offending lines otherwise.
ns_expect_no_loss() {
  if grep -E "lost: the link|WARN" "$2" | grep -qv "MESHCCL_SECRET is unset"; then
    not_ok "$1"
    grep -E "lost: the link|WARN" "$2" | grep -v "MESHCCL_SECRET is unset" | head -5 | sed 's/^/#   | /'
  else
    ok "$1"
  fi
}
