#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Init with many local ranks (the scaling of docs/ARCHITECTURE.md, "Init with
# many local ranks"): a 128-rank job on this host completes; the search made
# once per host (MESHCCL_SEARCH_SHARE=1) gives every rank the graph, ring,
# tree, system and transport lines the search on every rank (=0, NCCL's way)
# gives; and a host with more devices than NCCL's NCCL_TOPO_MAX_NODES is
# refused naming the limit. Results only: no timing is checked.
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
for share in 1 0; do
  MESHCCL_SEARCH_SHARE=$share NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH \
    timeout 120 "$RUN" -n 24 "$HELLO" -q >"$TMP/share$share" 2>&1
  rc=$?
  expect_success "24 ranks, MESHCCL_SEARCH_SHARE=$share: init completes" "$rc" "$TMP/share$share"
  graph_lines "$TMP/share$share" >"$TMP/lines$share"
done
expect_eq "24 ranks: graph, ring, tree, system and transport lines the same with and without the shared search" \
  "$(cmp -s "$TMP/lines1" "$TMP/lines0" && echo same || diff "$TMP/lines1" "$TMP/lines0" | head -5)" same
expect_eq "24 ranks, shared search: the 23 other ranks take local rank 0's graphs" \
  "$(grep -c 'takes the ring and tree graphs of rank 0 (same system)' "$TMP/share1")" 23
expect_eq "24 ranks: as many lines each way (and some)" \
  "$(($(wc -l <"$TMP/lines1") > 24 * 24))" 1

# A 641st device on one host: NCCL's NCCL_TOPO_MAX_NODES (640) refuses it, so do we.
MESHCCL_DEVICE=640 timeout 60 "$RUN" -n 1 "$HELLO" -q >"$TMP/dev640" 2>&1
rc=$?
expect_eq "device 640: init fails" "$((rc != 0))" 1
expect_grep "device 640: the error names NCCL's limit" "$TMP/dev640" \
  'device index 640 out of range 0\.\.639 .*NCCL_TOPO_MAX_NODES'

mp_finish
