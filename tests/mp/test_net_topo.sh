#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The topology's NICs are the net's devices (stage "net" before stage
# "topo", as NCCL's ncclNetInit before ncclTopoGetSystem): 2 ranks, each its
# own NCCL_HOSTID "host" on the recorded 2-socket sysfs tree, with the fake
# plugin (tests/plugins/fake_net.c) giving 2 devices at PCI paths of that
# tree. Asserts: the XML dumped at init has exactly the plugin's NICs (names,
# speeds, dev = the plugin's index) under those PCI functions, or under the
# CPU for a device without a PCI path; the NET device of every ring
# connection ("via NET/Fake/<dev>") is the one the ring search chose for its
# channel (NCCL_GRAPH_DUMP_FILE); with NCCL_NET_MERGE_LEVEL=PXB the two NICs
# are fused by the plugin's makeVDevice (v10, v12) into its device 2, which
# every connection uses, and the communicators of one process share it
# (made once); a plugin without makeVDevice (v11) keeps both.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll mp_init_all
PLUGINS="$MC_BUILD/tests/plugins"
SYSFS="$MC_SRC/tests/data/sysfs/2socket-switch"
SW=/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0
P0="$SW/0000:02:01.0/0000:03:00.0" # 0000:03:00.0 and 0000:04:00.0: one switch, PXB apart
P1="$SW/0000:02:02.0/0000:04:00.0"
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH MESHCCL_SYSFS_ROOT="$SYSFS" FAKE_NET_NDEVS=2
unset NCCL_NET NCCL_NET_MERGE_LEVEL NCCL_NET_FORCE_MERGE NCCL_TOPO_FILE

two_hosts() { # LOG PLUGIN-VERSION ENV... -- all-reduce on 2 "hosts"
  local log=$1 v=$2
  shift 2
  env NCCL_NET_PLUGIN="$PLUGINS/libnccl-net-fake$v.so" "$@" timeout 120 "$RUN" -n 2 \
    bash -c 'NCCL_HOSTID=h$RANK exec "$0" "$@"' "$T/mp_coll" --colls allreduce,allgather \
    --types int32 --sizes 1,4099,262147 >"$log" 2>&1
}

# Rank 0's NET device per ring channel: "<channel> <dev>" from its log.
conn_devs() { sed -n 's/^\[0\] .*Channel \([0-9]*\)\/0 : 0\[0\] -> 1\[1\] \[send\] via NET\/Fake\/\([0-9]*\)$/\1 \2/p' "$1" | sort -n; }
# The ring graph's (id 0) NET device per channel, as decimal, one per line.
graph_devs() {
  local v
  awk '/<graph id="0"/ {g=1; next} /<\/graph>/ {g=0} g && /<channel>/ {c=1; next}
       g && c && /<net dev=/ {match($0, /dev="[^"]*"/); print substr($0, RSTART+5, RLENGTH-6); c=0}' "$1" |
    while read -r v; do echo $((v)); done
}
# Every connection's device is the ring graph's for its channel (channels repeat the graph's).
expect_conns_follow_graph() { # NAME LOG GRAPH
  local n bad
  mapfile -t g < <(graph_devs "$3")
  n=${#g[@]}
  if [ "$n" -eq 0 ]; then
    not_ok "$1: the ring graph has channels"
    return
  fi
  bad=$(conn_devs "$2" | awk -v list="${g[*]}" -v n="$n" 'BEGIN {split(list, d, " ")}
        {if ($2 != d[($1 % n) + 1]) print "channel " $1 " uses " $2 ", graph says " d[($1 % n) + 1]}')
  if [ -z "$bad" ] && [ -n "$(conn_devs "$2")" ]; then
    ok "$1"
  else
    not_ok "$1"
    echo "$bad" | sed 's/^/#   /'
  fi
}

# (a) two NICs, no fusion (physical devices only while dumping, as NCCL).
two_hosts "$TMP/a.out" 12 FAKE_NET_PCI="$P0,$P1" NCCL_TOPO_DUMP_FILE="$TMP/a.xml" \
  NCCL_GRAPH_DUMP_FILE="$TMP/a.graph.xml"
expect_success "2 plugin NICs: all-reduce and all-gather exact on 2 hosts" "$?" "$TMP/a.out"
expect_eq "dump: exactly the plugin's two NICs" "$(grep -c '<net ' "$TMP/a.xml")" 2
expect_grep "dump: fake0, its speed and index, under 0000:03:00.0" "$TMP/a.xml" \
  '<net name="fake0" dev="0" latency="1" speed="12345" port="1" .*guid="0xfa4e0000"'
expect_grep "dump: fake1, its speed and index" "$TMP/a.xml" \
  '<net name="fake1" dev="1" latency="1" speed="13345" port="1" .*guid="0xfa4e0001"'
expect_eq "dump: each NIC under the PCI function of its path" \
  "$(awk '/<pci busid="0000:03:00.0"/ {p=1} p && /name="fake0"/ {print "ok"; exit}' "$TMP/a.xml")$(awk '/<pci busid="0000:04:00.0"/ {p=1} p && /name="fake1"/ {print "ok"; exit}' "$TMP/a.xml")" okok
expect_eq "dump: no interface of the recorded sysfs" "$(grep -c 'name="eth\|name="br0' "$TMP/a.xml")" 0
expect_eq "each rank logs its net once" "$(grep -c 'Using network Fake (net plugin v12' "$TMP/a.out")" 2
expect_conns_follow_graph "every ring connection uses the NIC the search chose for its channel" \
  "$TMP/a.out" "$TMP/a.graph.xml"
expect_eq "both NICs carry channels" "$(conn_devs "$TMP/a.out" | awk '{print $2}' | sort -u | tr '\n' ' ')" "0 1 "

# A device without a PCI path sits under the CPU (NUMA node 0), as virtual NICs.
two_hosts "$TMP/nopath.out" 12 FAKE_NET_PCI="$P0," NCCL_TOPO_DUMP_FILE="$TMP/nopath.xml"
expect_success "a NIC without PCI path: exit 0" "$?" "$TMP/nopath.out"
expect_eq "dump: fake1 right under the CPU's nic" \
  "$(awk '/<cpu numaid="0"/ {c=1} c && /^    <nic>/ {n=1} n && /name="fake1" dev="1"/ {print "ok"; exit}' "$TMP/nopath.xml")" ok

# (b) NCCL_NET_MERGE_LEVEL=PXB fuses them through the plugin's makeVDevice.
for v in 12 10; do
  two_hosts "$TMP/b$v.out" "$v" FAKE_NET_PCI="$P0,$P1" NCCL_NET_MERGE_LEVEL=PXB \
    NCCL_GRAPH_DUMP_FILE="$TMP/b$v.graph.xml"
  expect_success "v$v, NCCL_NET_MERGE_LEVEL=PXB: exit 0" "$?" "$TMP/b$v.out"
  expect_grep "v$v: the plugin made the fused device" "$TMP/b$v.out" \
    '^\[0\] .*FAKE/Plugin: made virtual device 2 fake0\+fake1 of 2 devices'
  expect_grep "v$v: the topology's vNic is the plugin's index" "$TMP/b$v.out" \
    '^\[0\] .*TOPO/NET : Made vNic 2$'
  expect_eq "v$v: the ring graph uses only the fused NIC" \
    "$(graph_devs "$TMP/b$v.graph.xml" | sort -u | tr '\n' ' ')" "2 "
  expect_eq "v$v: every connection uses the fused device" \
    "$(conn_devs "$TMP/b$v.out" | awk '{print $2}' | sort -u | tr '\n' ' ')" "2 "
done

# 8 communicators of one process (ncclCommInitAll): the plugin's devices are
# process-wide, so the first fuses and the others find the fused device.
NCCL_NET_PLUGIN="$PLUGINS/libnccl-net-fake12.so" FAKE_NET_PCI="$P0,$P1" NCCL_NET_MERGE_LEVEL=PXB \
  timeout 60 "$T/mp_init_all" null >"$TMP/all.out" 2>&1
expect_success "ncclCommInitAll over the plugin, fused NICs: exit 0" "$?" "$TMP/all.out"
expect_eq "ncclCommInitAll: makeVDevice called once" "$(grep -c 'made virtual device' "$TMP/all.out")" 1
expect_eq "ncclCommInitAll: every rank's system has the fused NIC only" \
  "$(grep -c -- '- NET/0-2 ' "$TMP/all.out") $(grep -c -- '- NET/0-[01] ' "$TMP/all.out")" "8 0"

# A plugin without makeVDevice (v11): no fusion, both NICs stay.
two_hosts "$TMP/c.out" 11 FAKE_NET_PCI="$P0,$P1" NCCL_NET_MERGE_LEVEL=PXB \
  NCCL_GRAPH_DUMP_FILE="$TMP/c.graph.xml"
expect_success "v11 (no makeVDevice), NCCL_NET_MERGE_LEVEL=PXB: exit 0" "$?" "$TMP/c.out"
expect_conns_follow_graph "v11: connections follow the graph over the two NICs" "$TMP/c.out" \
  "$TMP/c.graph.xml"
expect_eq "v11: no virtual device" "$(grep -c 'made virtual device' "$TMP/c.out")" 0
mp_finish
