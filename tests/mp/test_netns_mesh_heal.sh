#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A Mesh cable that comes back is used again by the running communicator:
# four hosts A..D (ranks 0..3) cabled as a ring (A-B B-C C-D D-A, one /24
# per cable, IP forwarding off), a management bridge for the bootstrap only,
# every cable shaped to 200 Mbit/s (tc tbf), NCCL_NET=Mesh, NCCL_ALGO=Ring.
# A loop of 16 MiB int32 sum all-reduces, every element checked
# (mp_failover); a second into it the A-B cable goes down on A's side, and
# once the connections over it moved to routes relayed through C and D, it
# comes back up. Then:
#   - every rank completes every all-reduce exact, no connection is lost;
#   - the logs show the relayed connections moving back onto the cable
#     ("a cable to it is up again, moving back" and "moved from ... relayed
#     ... to mcl2 10.X.12.1 ...");
#   - the cable carries the rings again: from the moment it came back to the
#     end of the loop, host A's mcl2 and host B's mcl1 each sent at least
#     4 MiB (/sys/class/net/<if>/statistics/tx_bytes; discovery alone sends
#     a few kB).
# The all-reduce times before the cut, while it is down and after it came
# back are printed (not asserted: timings belong to benchmarks).
# Needs root, iproute2 and tc: skipped otherwise, failed under CI. Only
# addresses inside the namespaces made here are used; all are removed.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
# shellcheck source=netns_lib.sh
. "$(dirname "$0")/netns_lib.sh"
need_progs mp_failover
ns_require "the mesh heal netns test needs root, ip and tc" tc
ns_init mh 150 200

N_HOSTS=4
RATE=200mbit
MIB=16
ITERS=24
JOB_LIMIT=200 # s: a rank still running then hangs

build() {
  local e i j
  ns_make_hosts $N_HOSTS "1-2 2-3 3-4 1-4" || return 1
  for e in "${NS_EDGES[@]}"; do
    i=${e%-*} j=${e#*-}
    tc -n "${TAG}h$i" qdisc add dev "mcl$j" root tbf rate $RATE burst 256kb latency 100ms || return 1
    tc -n "${TAG}h$j" qdisc add dev "mcl$i" root tbf rate $RATE burst 256kb latency 100ms || return 1
  done
}

# tx H IF: bytes host H sent on IF.
tx() { ns_exec "$1" cat "/sys/class/net/$2/statistics/tx_bytes"; }

if ! build; then
  not_ok "building 4 namespaces cabled as a ring"
  mp_finish
fi

NS_PORT=$(free_port)
T0_MS=$(now_ms)
hosts=(1 2 3 4)
for ((i = 1; i <= N_HOSTS; i++)); do
  ns_rank_argv hosts $((i - 1)) ""
  bg "heal$i" "${NS_ARGV[@]}" NCCL_SOCKET_IFNAME=mcm0 NCCL_NET=Mesh MESHCCL_MESH_IFNAME=mcl \
    NCCL_ALGO=Ring NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET "$T/mp_failover" --mib $MIB \
    --iters $ITERS --ready "$TMP/heal.ready$i"
done
ready=0
for ((k = 0; k < 600; k++)); do
  n=0
  for ((i = 1; i <= N_HOSTS; i++)); do [ -e "$TMP/heal.ready$i" ] && n=$((n + 1)); done
  [ "$n" = $N_HOSTS ] && ready=1 && break
  sleep 0.1
done
if [ $ready = 0 ]; then
  not_ok "the ranks did not start their first all-reduce"
  for ((i = 1; i <= N_HOSTS; i++)); do show "$TMP/heal$i.out"; done
  mp_finish
fi
sleep 1
ip -n "${TAG}h1" link set mcl2 down
CUT_MS=$(now_ms)
# Both ends of the cable's connections moved around it (at most 30 s).
for ((k = 0; k < 300; k++)); do
  n=$(cat "$TMP"/heal?.out | grep -cE "NET/Mesh: connection [0-9a-f]+ to host .* moved from .*10\.$X\.12\..* to .*relayed")
  [ "$n" -ge 2 ] && break
  sleep 0.1
done
expect_le "the A-B cable's connections (A to B, B to A) moved to relayed routes" 2 "$n"
ip -n "${TAG}h1" link set mcl2 up
HEAL_MS=$(now_ms)
tx_a=$(tx 1 mcl2)
tx_b=$(tx 2 mcl1)
for ((i = 1; i <= N_HOSTS; i++)); do wait_bg "heal$i" $JOB_LIMIT; done
d_a=$(($(tx 1 mcl2) - tx_a))
d_b=$(($(tx 2 mcl1) - tx_b))
rcs=""
for ((i = 1; i <= N_HOSTS; i++)); do v="RC_heal$i" && rcs+="${!v} "; done
expect_eq "every rank ends with status 0 (A-B down $((CUT_MS - T0_MS)) ms in, up at $((HEAL_MS - T0_MS)) ms)" \
  "$rcs" "0 0 0 0 "
bad=0
for ((i = 1; i <= N_HOSTS; i++)); do
  n=$(grep -cE "^rank $((i - 1)): iteration [0-9]+ exact" "$TMP/heal$i.out")
  [ "$n" = $ITERS ] || {
    echo "#   host $i: $n of $ITERS iterations exact"
    show "$TMP/heal$i.out"
    bad=1
  }
done
[ $bad = 0 ]
check "every rank checked every element of $ITERS x $MIB MiB all-reduces exact"
cat "$TMP"/heal?.out >"$TMP/heal.all"
expect_grep "host A's relayed connection to B saw the cable up again" "$TMP/heal1.out" \
  "NET/Mesh: connection [0-9a-f]+ to host [0-9]+ \(host2, rank [0-9]+\): a cable to it is up again, moving back from .*relayed"
expect_grep "and moved back onto it (mcl2, subnet 10.$X.12.0/24)" "$TMP/heal1.out" \
  "NET/Mesh: connection [0-9a-f]+ to host [0-9]+ \(host2, rank [0-9]+\) moved from .*relayed.* to mcl2 10\.$X\.12\.1[^ ]* -> 10\.$X\.12\.2"
expect_grep "host B's connection to A moved back too (mcl1)" "$TMP/heal2.out" \
  "NET/Mesh: connection [0-9a-f]+ to host [0-9]+ \(host1, rank [0-9]+\) moved from .*relayed.* to mcl1 10\.$X\.12\.2[^ ]* -> 10\.$X\.12\.1"
ns_expect_no_loss "no connection lost, no WARN" "$TMP/heal.all"
echo "#   after the cable came back: host A sent $d_a bytes on mcl2, host B $d_b bytes on mcl1"
[ "$d_a" -ge $((4 << 20)) ] && [ "$d_b" -ge $((4 << 20)) ]
check "the healed cable carries the rings again (at least 4 MiB each way)"
grep -hE "a cable to it is up again|moved from .*relayed" "$TMP/heal.all" | cut -c1-300 | head -6 |
  sed 's/^/# /'
grep -hE "^rank 0: iteration" "$TMP/heal1.out" | sed 's/^/# /'
mp_finish
