#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every wait on the wire is bounded (docs/design/datapath.md, "Waits on the
# wire"), between hosts that are network namespaces on a bridge, Socket net:
#   - a link cut (the switch port of host 2 down) in the middle of
#     back-to-back all-reduces, 2 hosts x 2 ranks: every rank fails with
#     ncclRemoteError within MESHCCL_NET_TIMEOUT (+ slack), the ranks next to
#     the cut naming the peer rank and the link's addresses, the others the
#     same-host connection the failure came through; ncclCommGetAsyncError
#     agrees (without the watchdog they spin until killed);
#   - no false alarm: a peer that calls the collective later than others but
#     within the timeout, and a link shaped so slow that one step takes
#     longer than the timeout (bytes keep moving);
#   - the chosen semantics: a peer later than the timeout is named;
#   - a rank whose transport set-up fails at init (the NET address its peer
#     listens on is unreachable from it) makes its peer fail at once, naming
#     it, through the bootstrap root's notice (before, the peer waited
#     forever in the connect loop); a set-up that never finishes fails at the
#     init deadline (MESHCCL_INIT_TIMEOUT) on both ranks;
#   - nothing is left: no namespace, no /dev/shm segment.
# Needs root and iproute2 (ip netns, tc): skipped otherwise, failed under CI.
# Only addresses inside the namespaces made here are used; all are removed.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_net_timeout

if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
  if [ "${CI:-}" = true ]; then
    echo "not ok - netns test needs root, ip and tc (CI=true: not skipping)"
    exit 1
  fi
  echo "# skip: needs root, ip and tc"
  exit 77
fi

TAG="mt$$"
NET3=$(($$ % 200 + 20))
SUB="10.203.$NET3"   # the hosts' bridge
FAR="10.204.$NET3"   # a subnet only host 2 has (unreachable from host 1)
SW="${TAG}sw"
NS=()

ns_cleanup() {
  local n
  for n in "${NS[@]}" "$SW"; do
    ip netns pids "$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
    ip netns del "$n" 2>/dev/null
  done
  NS=()
}
trap 'ns_cleanup; mp_cleanup' EXIT
shm_snapshot

# make_hosts N: namespaces ${TAG}h1..hN at $SUB.1..N behind a bridge.
make_hosts() {
  ip netns add "$SW" || return 1
  ip -n "$SW" link add br0 type bridge || return 1
  ip -n "$SW" link set br0 up || return 1
  for i in $(seq 1 "$1"); do
    local h="${TAG}h$i"
    NS+=("$h")
    ip netns add "$h" || return 1
    ip link add "${TAG}a$i" type veth peer name "${TAG}b$i" || return 1
    ip link set "${TAG}a$i" netns "$h" name mcv0 || return 1
    ip link set "${TAG}b$i" netns "$SW" || return 1
    ip -n "$SW" link set "${TAG}b$i" master br0 up || return 1
    ip -n "$h" addr add "$SUB.$i/24" dev mcv0 || return 1
    ip -n "$h" link set mcv0 up || return 1
    ip -n "$h" link set lo up || return 1
  done
  # Host 2's second interface, on a subnet host 1 has no route to (a veth
  # whose other end lies unconnected in the switch namespace).
  ip link add "${TAG}x2" type veth peer name "${TAG}y2" || return 1
  ip link set "${TAG}x2" netns "${TAG}h2" name mcx0 || return 1
  ip link set "${TAG}y2" netns "$SW" || return 1
  ip -n "$SW" link set "${TAG}y2" up || return 1
  ip -n "${TAG}h2" addr add "$FAR.1/24" dev mcx0 || return 1
  ip -n "${TAG}h2" link set mcx0 up || return 1
}

# start NAME HOSTS RANKS_PER_HOST ENV... -- PROG ARGS...: starts the ranks in
# the background (outputs $TMP/NAME.R.out, wait_bg names NAME_R). ENV
# entries "R:VAR=value" apply to rank R only, "VAR=value" to every rank.
start() {
  local name=$1 hosts=$2 rph=$3 port r=0 e
  shift 3
  local envs=()
  while [ "$1" != -- ]; do
    envs+=("$1")
    shift
  done
  shift
  port=$(free_port)
  for i in $(seq 1 "$hosts"); do
    for j in $(seq 0 $((rph - 1))); do
      local mine=()
      for e in "${envs[@]}"; do
        case "$e" in
        [0-9]*:*) [ "${e%%:*}" = "$r" ] && mine+=("${e#*:}") ;;
        *) mine+=("$e") ;;
        esac
      done
      bg "${name}_$r" ip netns exec "${TAG}h$i" env RANK=$r WORLD_SIZE=$((hosts * rph)) \
        LOCAL_RANK=$j LOCAL_WORLD_SIZE=$rph NCCL_HOSTID="host$i" NCCL_COMM_ID="$SUB.1:$port" \
        NCCL_SOCKET_IFNAME=mcv0 NCCL_NET=Socket "${mine[@]}" "$@"
      r=$((r + 1))
    done
  done
  N_RANKS=$r
}

# finish_all NAME LIMIT_S: waits for every rank of NAME (wait_bg).
finish_all() {
  for r in $(seq 0 $((N_RANKS - 1))); do wait_bg "${1}_$r" "$2"; done
}

# wait_running NAME LIMIT_S: every rank printed "running".
wait_running() {
  local t=0
  while [ "$t" -lt $(($2 * 10)) ]; do
    [ "$(cat "$TMP/$1"_*.out 2>/dev/null | grep -c ': running$')" = "$N_RANKS" ] && return 0
    sleep 0.1
    t=$((t + 1))
  done
  return 1
}

show_all() { for f in "$TMP/$1"_*.out; do show "$f"; done; }

# expect_rank NAME R RC ERE: rank R of NAME exited with RC and printed ERE.
expect_rank() {
  local rcvar="RC_$1_$2" msvar="MS_$1_$2"
  if [ "${!rcvar}" = "$3" ] && grep -Eq -- "$4" "$TMP/$1_$2.out"; then
    ok "$5 (rank $2 after ${!msvar} ms)"
  else
    not_ok "$5 (rank $2: exit ${!rcvar}, wanted $3)"
    echo "#   no line matches: $4"
    show "$TMP/$1_$2.out"
  fi
}

if ! make_hosts 2; then
  not_ok "creating namespaces, veth pairs and a bridge"
  mp_finish
fi
ok "2 hosts: namespaces with veth pairs to a bridge ($SUB.0/24)"

ESC_SUB=${SUB//./\\.}
LINK="\\(link $ESC_SUB\\.[12]<[0-9]+> -> $ESC_SUB\\.[12]<[0-9]+>\\)"
REMOTE="remote process exited or there was a network error"

# 1. The link of host 2 is cut mid-all-reduce (its switch port goes down:
# packets vanish, nothing tells either end). 2 hosts x 2 ranks, 1 MiB.
start cut 2 2 MESHCCL_NET_TIMEOUT=3 -- "$T/mp_net_timeout" 0 262144
if wait_running cut 60; then
  ip -n "$SW" link set "${TAG}b2" down
  T0_MS=$(now_ms)
  finish_all cut 30
  for r in 0 1 2 3; do
    # The rank that waits on the cut link names it; a rank that waits on a
    # same-host peer names that peer (whose own wait failed first).
    expect_rank cut $r 3 "^rank $r: $REMOTE after [0-9]+ all-reduces .* \(async 6, again 6\): AllReduce: rank $r: the (NET connection (to|from) rank [0-3] \([^)]*\) failed: NET/Socket: nothing moved (to|from) rank [0-3] $LINK for [0-9.]+ s while a collective waited on it \(MESHCCL_NET_TIMEOUT=3 s\)|SHM connection (to|from) rank [0-3] \([^)]*\) failed)" \
      "link cut, MESHCCL_NET_TIMEOUT=3: ncclRemoteError naming the peer"
    ms="MS_cut_$r"
    expect_le "link cut: rank $r fails within 3 s + 9 s of slack" "${!ms}" 12000
  done
  expect_eq "link cut: the ranks next to the cut name the link" \
    "$(cat "$TMP"/cut_*.out | grep -Ec "nothing moved (to|from) rank [0-3] $LINK")" \
    "$(cat "$TMP"/cut_*.out | grep -c "the NET connection")"
  ip -n "$SW" link set "${TAG}b2" up
  # Host 2's end has its carrier back a moment later; until then the next
  # case's rank finds no usable interface but mcx0.
  for _ in $(seq 50); do
    ip -n "${TAG}h2" link show mcv0 | grep -q LOWER_UP && break
    sleep 0.1
  done
else
  not_ok "link cut: the ranks never ran"
  show_all cut
fi

# 2. A peer late by less than the timeout is no failure.
start late 2 1 MESHCCL_NET_TIMEOUT=3 -- "$T/mp_net_timeout" 2 1024 1 1500
T0_MS=$(now_ms)
finish_all late 60
expect_rank late 0 0 "^rank 0: ok, 2 all-reduces" "a peer 1.5 s late, MESHCCL_NET_TIMEOUT=3: no failure"
expect_rank late 1 0 "^rank 1: ok, 2 all-reduces" "a peer 1.5 s late, MESHCCL_NET_TIMEOUT=3: no failure"

# 3. A peer later than the timeout is named by the rank waiting for it.
# Ring, so that the late rank needs data the failed rank never sends: with
# RecDouble (the model's choice for 4 KiB between 2 hosts) rank 0 sends its
# whole input before it waits, and rank 1, arriving late, finds all it needs
# in its socket and completes that all-reduce exactly (it finds rank 0 gone
# at its next call).
start later 2 1 MESHCCL_NET_TIMEOUT=2 NCCL_ALGO=Ring -- "$T/mp_net_timeout" 2 1024 1 4000
T0_MS=$(now_ms)
finish_all later 60
expect_rank later 0 3 "^rank 0: $REMOTE after 1 all-reduces .*: AllReduce: rank 0: the NET connection from rank 1 \([^)]*\) failed: NET/Socket: nothing moved from rank 1 $LINK for [0-9.]+ s while a collective waited on it \(MESHCCL_NET_TIMEOUT=2 s\): the link or the host of rank 1 is down, or rank 1 stopped \(it crashed, hangs, or has not called the collective\)" \
  "a peer 4 s late, MESHCCL_NET_TIMEOUT=2: the waiting rank names it"
expect_rank later 1 3 "^rank 1: $REMOTE after 1 all-reduces .*rank 0" \
  "a peer 4 s late: it finds its peer gone"

# 4. A link so slow that one step (64 KiB) takes longer than the timeout:
# bytes keep moving, so nothing fails (192 kbit/s each way, shallow queues).
shaped=1
for i in 1 2; do
  ip netns exec "${TAG}h$i" tc qdisc add dev mcv0 root tbf rate 192kbit burst 4kb latency 200ms ||
    shaped=0
done
expect_eq "tbf shaper on both hosts" "$shaped" 1
start slow 2 1 MESHCCL_NET_TIMEOUT=2 NCCL_MAX_NCHANNELS=1 -- "$T/mp_net_timeout" 1 32768
T0_MS=$(now_ms)
finish_all slow 60
expect_rank slow 0 0 "^rank 0: ok, 1 all-reduces \(([3-9]|[1-9][0-9])\.[0-9]+ s\)" \
  "64 KiB steps at 192 kbit/s (> 2 s each), MESHCCL_NET_TIMEOUT=2: slow but moving, no failure"
expect_rank slow 1 0 "^rank 1: ok, 1 all-reduces" "slow link: no failure"
for i in 1 2; do ip netns exec "${TAG}h$i" tc qdisc del dev mcv0 root 2>/dev/null; done

# 5. Rank 0's transport set-up fails at init: rank 1's NET listener is on
# host 2's second subnet, which host 1 cannot reach (NCCL_SOCKET_IFNAME of
# rank 1; its bootstrap goes by the route to NCCL_COMM_ID). Rank 1, waiting
# for that connection, learns it from the root at once.
start setup 2 1 MESHCCL_INIT_TIMEOUT=60 0:NCCL_SOCKET_RETRY_CNT=2 1:NCCL_SOCKET_IFNAME==mcx0 -- \
  "$T/mp_net_timeout" 1 1024
T0_MS=$(now_ms)
finish_all setup 60
ESC_FAR=${FAR//./\\.}
expect_rank setup 0 4 "^rank 0: init failed: $REMOTE: NET/Socket: cannot connect to $ESC_FAR\.1<[0-9]+> from mcv0: connect to $ESC_FAR\.1<[0-9]+> failed 3 times \(last: Network is unreachable\)" \
  "NET address unreachable at init: the connecting rank fails naming it"
expect_rank setup 1 4 "^rank 1: init failed: $REMOTE: Bootstrap: rank 1: rank 0 \(host [^ ]+ pid [0-9]+\) failed: NET/Socket: cannot connect to $ESC_FAR\.1" \
  "a peer's transport set-up failed at init: the waiting rank names it"
expect_le "a peer's transport set-up failed: both fail within 15 s (MESHCCL_INIT_TIMEOUT=60)" \
  "$((MS_setup_0 > MS_setup_1 ? MS_setup_0 : MS_setup_1))" 15000

# 6. The same, but rank 0 keeps retrying: both give up at the init deadline.
start stuck 2 1 MESHCCL_INIT_TIMEOUT=5 0:NCCL_SOCKET_RETRY_CNT=100000 \
  1:NCCL_SOCKET_IFNAME==mcx0 -- "$T/mp_net_timeout" 1 1024
T0_MS=$(now_ms)
finish_all stuck 60
# Whichever rank reaches the deadline first tells the root, which tells the
# other: each names the connection between them.
PENDING="\\(channel [0-9]+\\) was not established within 5000 ms \\([0-9]+ connections? pending; MESHCCL_INIT_TIMEOUT\\)"
expect_rank stuck 0 4 "^rank 0: init failed: (timeout: transport: rank 0: the NET connection to rank 1 $PENDING|$REMOTE: Bootstrap: rank 0: rank 1 \(host [^ ]+ pid [0-9]+\) failed: transport: rank 1: the NET connection from rank 0 $PENDING)" \
  "a set-up that never finishes fails at MESHCCL_INIT_TIMEOUT=5 naming the connection"
expect_rank stuck 1 4 "^rank 1: init failed: (timeout: transport: rank 1: the NET connection from rank 0 $PENDING|$REMOTE: Bootstrap: rank 1: rank 0 \(host [^ ]+ pid [0-9]+\) failed: transport: rank 0: the NET connection to rank 1 $PENDING)" \
  "a set-up that never finishes: the peer fails at the deadline too, naming it"
expect_le "init deadline: both fail within 5 s + 10 s of slack" \
  "$((MS_stuck_0 > MS_stuck_1 ? MS_stuck_0 : MS_stuck_1))" 15000

# Nothing left behind.
ns_cleanup
expect_eq "no namespace left" "$(ip netns list | grep -c "^$TAG")" 0
expect_eq "nothing left in /dev/shm" "$(shm_orphans | wc -l)" 0
mp_finish
