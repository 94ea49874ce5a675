#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# 15% packet loss between two hosts (network namespaces on a bridge, two
# ranks each: NET between the hosts over the Socket net, P2P/SHM inside; the
# kernel may lack netem, so nftables drops 15% of what each host sends:
# numgen random mod 100 < 15, as test_netns.sh does for 1%): for 20 s the
# ranks cycle through all-reduce, broadcast, all-gather and reduce-scatter
# (mp_loss.c), and every call either completes bit-exact or fails naming the
# connection and the cause; never an unbounded stall (every rank ends within
# init's 30 s + the loop's 20 s + the timeout + slack, or it is killed and
# reported as a hang), and no rank blames a peer that completed every call
# and left. A call fails once nothing moved on a connection for
# MESHCCL_NET_TIMEOUT (8 s): its connections made at first use and then its
# data each get that long, so a failing call ends within twice the timeout +
# 5 s of slack. A rank whose init fails must blame a peer that failed first
# (that peer then ran its first call and timed out while this rank was still
# setting up over the lossy link); an init that times out by itself is a
# failure of the test: 30 s is far more than TCP needs at 15% loss. The drop
# rules must have dropped packets. Nothing is left behind (namespaces,
# /dev/shm).
# Needs root, iproute2 and nft: skipped otherwise, failed under CI.
# Only addresses inside the namespaces made here are used; all are removed.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
# shellcheck source=netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
need_progs mp_loss

if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! command -v nft >/dev/null; then
  skip_or_fail "needs root, ip and nft"
fi

TAG="mcfl$$"
SUB="10.206.$(($$ % 200 + 20))"
SW="${TAG}sw"
NS=()
LOOP_S=20
NET_TIMEOUT_S=8
SLACK_S=5

trap 'ns_cleanup; mp_cleanup' EXIT # ns_cleanup: netns_lib.sh
shm_snapshot

make_hosts() {
  ip netns add "$SW" || return 1
  ip -n "$SW" link add br0 type bridge || return 1
  ip -n "$SW" link set br0 up || return 1
  for i in 1 2; do
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
    # 15% of what the host sends on its link is dropped (both directions in all).
    ip netns exec "$h" nft add table inet mcfloss || return 1
    ip netns exec "$h" nft add chain inet mcfloss out '{ type filter hook output priority 0 ; }' ||
      return 1
    ip netns exec "$h" nft add rule inet mcfloss out oifname mcv0 numgen random mod 100 '<' 15 \
      counter drop || return 1
  done
}

if ! make_hosts; then
  not_ok "creating 2 namespaces on a bridge with 15% loss (nftables)"
  mp_finish
fi
ok "2 hosts ($SUB.0/24), nftables drops 15% of each host's packets on its link"

port=$(free_port)
T0_MS=$(now_ms)
for r in 0 1 2 3; do
  h=$((r / 2 + 1))
  bg "loss_$r" ip netns exec "${TAG}h$h" env RANK=$r WORLD_SIZE=4 LOCAL_RANK=$((r % 2)) \
    LOCAL_WORLD_SIZE=2 NCCL_HOSTID="host$h" NCCL_COMM_ID="$SUB.1:$port" NCCL_SOCKET_IFNAME=mcv0 \
    NCCL_NET=Socket MESHCCL_MESH_AUTO=0 MESHCCL_NET_TIMEOUT=$NET_TIMEOUT_S MESHCCL_INIT_TIMEOUT=30 \
    "$T/mp_loss" $LOOP_S
done
# init (SYNs lost too) + the loop + one failing call's bound
LIMIT_S=$((30 + LOOP_S + 2 * NET_TIMEOUT_S + SLACK_S))
n_ok=0
n_failed=0
for r in 0 1 2 3; do
  wait_bg "loss_$r" "$LIMIT_S"
  rc="RC_loss_$r"
  f="$TMP/loss_$r.out"
  sed 's/^/# /' "$f" | grep -v 'NCCL INFO' | tail -3
  case "${!rc}" in
  0)
    n_ok=$((n_ok + 1))
    expect_grep "rank $r: every collective exact" "$f" "^rank $r: ok, [1-9][0-9]* collectives, slowest [0-9.]+ s$"
    ;;
  3)
    n_failed=$((n_failed + 1))
    # The failing call's time, and the cause: the watchdog's or the failure of a peer.
    took=$(sed -nE "s/^rank $r: .* the failing call took ([0-9]+)\.[0-9]+ s .*/\1/p" "$f")
    expect_le "rank $r: the failing call ended within 2 x MESHCCL_NET_TIMEOUT + ${SLACK_S} s" \
      "${took:-999}" $((2 * NET_TIMEOUT_S + SLACK_S))
    expect_grep "rank $r: the failure names the connection and why" "$f" \
      "^rank $r: remote process exited or there was a network error after [0-9]+ collectives, .*: [A-Za-z]+: rank $r: (the (NET|SHM|P2P) connection (to|from) rank [0-3] \([^)]*\) failed|peer rank [0-3] )"
    ;;
  4)
    n_failed=$((n_failed + 1))
    expect_grep "rank $r: init failed because a peer failed first (not a timeout of its own)" "$f" \
      "^rank $r: init failed: remote process exited or there was a network error: [A-Za-z]+: rank $r: (rank [0-3] \([^)]*\) failed|the bootstrap root at [^ ]+ was stopped before every rank finished init|peer rank [0-3] |rank [0-3] \([^)]*\) closed the connection while receiving a bootstrap message)"
    ;;
  *)
    not_ok "rank $r: ended with ${!rc} (0: all exact, 3: a call failed, 4: init failed; hang: still running after $LIMIT_S s)"
    show "$f"
    ;;
  esac
done
expect_eq "every rank either completed every call exactly or failed" \
  "$((n_ok + n_failed))" 4
# A rank that completed every call and exited is no failure: a rank still
# in the last call (a broadcast root waiting for the chain's check over the
# lossy link) must not blame it for leaving.
blamed=""
for r in 0 1 2 3; do
  rc="RC_loss_$r"
  [ "${!rc}" = 0 ] || continue
  grep -El "peer rank $r \([^)]*\) exited" "$TMP"/loss_[0-3].out >/dev/null && blamed="$blamed $r"
done
expect_eq "no rank blames a peer that completed every call and exited" "$blamed" ""
echo "# $n_ok ranks completed every call, $n_failed failed naming the cause in time"
dropped=0
for i in 1 2; do
  d=$(ip netns exec "${TAG}h$i" nft list chain inet mcfloss out 2>/dev/null |
    sed -nE 's/.*counter packets ([0-9]+) .*/\1/p')
  dropped=$((dropped + ${d:-0}))
done
echo "# nftables dropped $dropped packets"
expect_eq "nftables dropped packets on the links" "$([ "$dropped" -gt 0 ] && echo yes)" yes

ns_cleanup
expect_eq "no namespace left" "$(ip netns list | grep -c "^$TAG")" 0
expect_eq "nothing left in /dev/shm" "$(shm_orphans | wc -l)" 0
mp_finish
