#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Init with many local ranks (the scaling of docs/design/topology.md, "Init with
# many local ranks"): a 128-rank job on this host completes; the paths and
# the search made once per host (MESHCCL_PATHS_SHARE=2: from 2 local ranks on,
# MESHCCL_SEARCH_SHARE=1)
# give every rank the graph, ring, tree, system (its paths printed) and
# transport lines that computing and searching on every rank (=0, NCCL's way)
# gives (the shared system and paths are a memfd: nothing in /dev/shm), the
# 23 other ranks take local rank 0's system and a rank that dumps the fused
# XML (NCCL_TOPO_DUMP_FILE_RANK) writes the same file either way; a rank with
# other path options takes the system and computes its own paths; a rank whose own sharing settings differ follows
# the host's first rank; and a host with more devices than NCCL's
# NCCL_TOPO_MAX_NODES is refused naming the limit. Results only: no timing
# is checked.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
HELLO="$MC_BUILD/bin/meshccl-hello"
need_progs
[ -x "$HELLO" ] || {
  not_ok "built: $HELLO"
  exit 1
}

# 128 local ranks (with 256 the devices are fffe:00:100.0 on: run by
# bench/init.sh, too heavy for a test on a small host).
timeout 300 "$RUN" -n 128 "$HELLO" -q >"$TMP/out128" 2>&1
rc=$?
expect_success "128 local ranks: init completes" "$rc" "$TMP/out128"
expect_grep "128 local ranks: rank 0 reports 128 ranks" "$TMP/out128" '^\[0\] init nranks 128 '

# The INFO lines every rank logs about its system, graphs, channels and
# transports, without the host:pid:tid prefix, sorted.
graph_lines() {
  grep -E 'Pattern [0-9]|^\[[0-9]+\] [^ ]+ \[[0-9]+\] NCCL INFO +[0-9]+ : |Channel [0-9]|Trees|Ring [0-9]|coll channels|GPU/|NET/|CPU/|Transport: ' "$1" |
    sed -E 's/^\[[0-9]+\] [^ ]+ \[[0-9]+\] //' | sort
}
shm_paths() { find /dev/shm -maxdepth 1 -name 'meshccl-paths-*' 2>/dev/null | wc -l; }
shm_before=$(shm_paths)
for share in 1 0; do
  MESHCCL_PATHS_SHARE=$((2 * share)) MESHCCL_SEARCH_SHARE=$share NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=INIT,GRAPH NCCL_TOPO_DUMP_FILE="$TMP/dump$share.xml" \
    NCCL_TOPO_DUMP_FILE_RANK=5 timeout 120 "$RUN" -n 24 "$HELLO" -q >"$TMP/share$share" 2>&1
  rc=$?
  expect_success "24 ranks, MESHCCL_PATHS_SHARE=$((2 * share)) MESHCCL_SEARCH_SHARE=$share: init completes" \
    "$rc" "$TMP/share$share"
  graph_lines "$TMP/share$share" >"$TMP/lines$share"
done
expect_eq "24 ranks: graph, ring, tree, system, path and transport lines the same with and without the shared paths and search" \
  "$(cmp -s "$TMP/lines1" "$TMP/lines0" && echo same || diff "$TMP/lines1" "$TMP/lines0" | head -5)" same
expect_eq "24 ranks, shared system: the 23 other ranks take local rank 0's system" \
  "$(grep -c 'Topo: rank [0-9]* takes the system of rank 0 ([0-9]* bytes)' "$TMP/share1")" 23
# (the host hash holds the communicator's hash: another per job)
no_hash() { sed -E 's/ host_hash="[^"]*"//' "$1"; }
expect_eq "24 ranks: rank 5 dumps the same fused XML with and without the shared system" \
  "$(cmp -s <(no_hash "$TMP/dump1.xml") <(no_hash "$TMP/dump0.xml") && echo same || echo differ)" same
expect_grep "24 ranks: the dump holds 24 GPUs" "$TMP/dump1.xml" '<gpu dev="23"'
expect_eq "24 ranks, shared paths: the 23 other ranks map local rank 0's paths" \
  "$(grep -c 'Topo: rank [0-9]* maps the paths of rank 0 (same system, [0-9]* bytes)' "$TMP/share1")" 23
expect_eq "24 ranks, shared search: the 23 other ranks take local rank 0's graphs" \
  "$(grep -c 'takes the ring and tree graphs of rank 0 (same system)' "$TMP/share1")" 23
expect_eq "shared paths: nothing left in /dev/shm" "$(shm_paths)" "$shm_before"

# Rank 3 alone with NCCL_NVB_DISABLE=1 (a path option): its digest differs,
# it takes the system and computes its own paths, the others map rank 0's,
# and init completes.
MESHCCL_PATHS_SHARE=2 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH timeout 60 "$RUN" -n 6 \
  bash -c '[ "$RANK" = 3 ] && export NCCL_NVB_DISABLE=1; exec "$0" -q' "$HELLO" \
  >"$TMP/nvb" 2>&1
rc=$?
expect_success "6 ranks, rank 3 with NCCL_NVB_DISABLE=1: init completes" "$rc" "$TMP/nvb"
expect_grep "rank 3 computes its own paths" "$TMP/nvb" \
  "Topo: rank 3's path options differ from rank 0's \(other parameters\): computing its paths"
expect_grep "rank 3 takes the system all the same" "$TMP/nvb" \
  "Topo: rank 3 takes the system of rank 0 \([0-9]+ bytes\)"
expect_eq "the 4 others map rank 0's paths" \
  "$(grep -c 'maps the paths of rank 0 (same system' "$TMP/nvb")" 4
expect_eq "then too, nothing left in /dev/shm" "$(shm_paths)" "$shm_before"

# Rank 2 alone with MESHCCL_PATHS_SHARE=0 and MESHCCL_SEARCH_SHARE=0: the
# host follows its first local rank, so rank 2 too maps the paths and takes
# the graphs (instead of leaving the host's broadcasts waiting on it).
MESHCCL_PATHS_SHARE=2 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH timeout 60 "$RUN" -n 6 \
  bash -c '[ "$RANK" = 2 ] && export MESHCCL_PATHS_SHARE=0 MESHCCL_SEARCH_SHARE=0; exec "$0" -q' \
  "$HELLO" >"$TMP/mixed" 2>&1
rc=$?
expect_success "6 ranks, rank 2 alone with both shares 0: init completes" "$rc" "$TMP/mixed"
expect_eq "rank 2 follows rank 0: the 5 others map the paths" \
  "$(grep -c 'maps the paths of rank 0 (same system' "$TMP/mixed")" 5
expect_grep "rank 2 follows rank 0: it takes the graphs" "$TMP/mixed" \
  "Graphs: rank 2 takes the ring and tree graphs of rank 0"
expect_eq "24 ranks: as many lines each way (and some)" \
  "$(($(wc -l <"$TMP/lines1") > 24 * 24))" 1

# Rank 3 in a pid namespace of its own: local rank 0's pid means nothing
# there (/proc/<pid>/fd would name another process's file), so the host's
# ranks do not share the system and paths at all; each builds its own from
# the fused XML, and rank 3 logs the same system as rank 2.
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null; then
  skip_or_fail "a rank in a pid namespace of its own needs root and unshare"
fi
MESHCCL_PATHS_SHARE=2 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH timeout 60 "$RUN" -n 4 \
  bash -c '[ "$RANK" = 3 ] && exec unshare --pid --fork --mount-proc "$0" -q; exec "$0" -q' \
  "$HELLO" >"$TMP/pidns" 2>&1
rc=$?
expect_success "4 ranks, rank 3 in its own pid namespace: init completes" "$rc" "$TMP/pidns"
expect_grep "rank 3 says rank 0's pid means nothing to it" "$TMP/pidns" \
  "^\[3\] .*rank 0 \(pid [0-9]+\) is in another PID namespace than rank 3 \(pid 1\): no CMA"
expect_eq "no rank takes rank 0's system" "$(grep -c 'takes the system of rank 0' "$TMP/pidns")" 0
rank_system() { grep -E "^\[$1\] .*NCCL INFO +(CPU|GPU|NET|NIC|PCI)/" "$TMP/pidns" | sed -E 's/^[^]]*\] [^ ]+ \[[0-9]+\] //'; }
expect_eq "rank 3's system is rank 2's" \
  "$(cmp -s <(rank_system 3) <(rank_system 2) && echo same || echo differ)" same
expect_eq "rank 3's system is printed" "$(($(rank_system 3 | wc -l) > 2))" 1

# A 641st device on one host: NCCL's NCCL_TOPO_MAX_NODES (640) refuses it, so do we.
MESHCCL_DEVICE=640 timeout 60 "$RUN" -n 1 "$HELLO" -q >"$TMP/dev640" 2>&1
rc=$?
expect_eq "device 640: init fails" "$((rc != 0))" 1
expect_grep "device 640: the error names NCCL's limit" "$TMP/dev640" \
  'device index 640 out of range 0\.\.639 .*NCCL_TOPO_MAX_NODES'

mp_finish
