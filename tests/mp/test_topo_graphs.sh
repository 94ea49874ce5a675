#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# meshccl-topo --graphs: the ring/tree search and the connection of 1, 2 and 4
# identical nodes, line for line against NCCL 2.30's own output for every
# golden server (tests/data/topo/golden/<name>/graphs-<n>node(s).txt), and
# NCCL_GRAPH_DUMP_FILE byte for byte against NCCL's graph XML
# (graph-<n>node(s).xml). NCCL_GRAPH_FILE reads a dump back to the same
# graphs; a malformed graph file is refused naming the file and line; NCCL's
# refused files (RCCL's version 2) fail naming the file.
# When a directory of further golden folders is given in MC_GRAPH_GOLDEN
# (same layout as NCCL's offline runs: <name>/{1node,2nodes,4nodes}.txt and
# the topology in topo-dump.xml), they are checked the same way.
# Needs MC_BUILD and MC_SRC (set by CTest).
# shellcheck shell=bash
# shellcheck source=tests/mp/mp_lib.sh
source "$(dirname "$0")/mp_lib.sh"

MC_SRC="${MC_SRC:?MC_SRC must name the source directory}"
TOPO="$MC_BUILD/bin/meshccl-topo"
GOLD="$MC_SRC/tests/data/topo/golden"
# No NCCL_* variable of the caller changes the search.
unset NCCL_P2P_LEVEL NCCL_P2P_DISABLE NCCL_SHM_DISABLE NCCL_NVB_DISABLE NCCL_PXN_DISABLE \
  NCCL_PXN_C2C NCCL_NET_GDR_LEVEL NCCL_NET_GDR_READ NCCL_NET_GDR_C2C NCCL_NET_DISABLE_INTRA \
  NCCL_CONF_FILE NCCL_CROSS_NIC NCCL_GRAPH_FILE NCCL_GRAPH_DUMP_FILE NCCL_MIN_NCHANNELS \
  NCCL_MAX_NCHANNELS NCCL_MIN_NRINGS NCCL_MAX_NRINGS
export HOME="$TMP"

if [ ! -x "$TOPO" ]; then
  not_ok "built: $TOPO"
  exit 1
fi

# expect_same NAME GOT WANT: identical files (shows the start of the diff otherwise).
expect_same() {
  if diff -u "$3" "$2" >"$TMP/diff.txt" 2>&1; then
    ok "$1"
  else
    not_ok "$1"
    head -n 20 "$TMP/diff.txt" | sed 's/^/#   /'
  fi
}

# The lines of sections [d] and [e] of one of NCCL's offline result files.
golden_sections() {
  awk '
    /^\[d\] GRAPHS/ {s = 1; next}
    /^\[e\] CONNECTION/ {s = 1; next}
    /^\[[a-z]\] / {s = 0; next}
    /^####/ || /^    / {next}
    s {print}' "$1" | sed -e '/./,$!d' | sed -e ':a' -e '/^\n*$/{$d;N;ba' -e '}'
}

# check NAME XML N WANT_TXT WANT_XML: --graphs output and the graph dump.
check() {
  local name=$1 xml=$2 n=$3 want=$4 want_xml=$5
  NCCL_GRAPH_DUMP_FILE="$TMP/graph.xml" "$TOPO" --xml "$xml" --nodes "$n" --graphs \
    >"$TMP/got.txt" 2>"$TMP/err.txt"
  local rc=$?
  if [ "$rc" != 0 ]; then
    not_ok "$name x$n: exit $rc"
    show "$TMP/err.txt"
    return
  fi
  # NCCL's "NCCL INFO " prefix is part of the [d] lines; compare without it too.
  expect_same "$name x$n: graphs and connection = NCCL 2.30" "$TMP/got.txt" "$want"
  if [ -n "$want_xml" ]; then
    if cmp -s "$TMP/graph.xml" "$want_xml"; then
      ok "$name x$n: NCCL_GRAPH_DUMP_FILE = NCCL's graph XML"
    else
      not_ok "$name x$n: NCCL_GRAPH_DUMP_FILE = NCCL's graph XML"
      diff -u "$want_xml" "$TMP/graph.xml" | head -n 20 | sed 's/^/#   /'
    fi
  fi
}

n_files=0
for dir in "$GOLD"/*/; do
  name=$(basename "$dir")
  [ -f "$dir/graphs-1node.txt" ] || continue
  n_files=$((n_files + 1))
  for n in 1 2 4; do
    sfx=nodes
    [ "$n" = 1 ] && sfx=node
    check "$name" "$dir/topo.xml" "$n" "$dir/graphs-$n$sfx.txt" "$dir/graph-$n$sfx.xml"
  done
done
if [ "$n_files" -ge 10 ]; then
  ok "golden servers checked: $n_files"
else
  not_ok "golden servers checked: $n_files (expected at least 10)"
fi

# Further golden folders (NCCL's raw result files), when given.
if [ -n "${MC_GRAPH_GOLDEN:-}" ] && [ -d "$MC_GRAPH_GOLDEN" ]; then
  for dir in "$MC_GRAPH_GOLDEN"/*/; do
    name=$(basename "$dir")
    [ -f "$dir/topo-dump.xml" ] || continue
    for n in 1 2 4; do
      sfx=nodes
      [ "$n" = 1 ] && sfx=node
      [ -f "$dir/$n$sfx.txt" ] || continue
      golden_sections "$dir/$n$sfx.txt" >"$TMP/want.txt"
      want_xml=""
      [ -f "$dir/graph-$n$sfx.xml" ] && want_xml="$dir/graph-$n$sfx.xml"
      check "extra $name" "$dir/topo-dump.xml" "$n" "$TMP/want.txt" "$want_xml"
    done
  done
fi

# --graphs --json: the same facts for scripts.
"$TOPO" --xml "$GOLD/aws-p4d.24xlarge/topo.xml" --nodes 2 --graphs --json >"$TMP/g.json" \
  2>"$TMP/err.txt"
if python3 - "$TMP/g.json" <<'PY'; then
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ranks"] == 16 and len(d["per_rank"]) == 16
ring = d["graphs"]["ring"]
assert ring["nChannels"] == 4 and ring["channels"][0]["ranks"] == [0, 7, 6, 5, 4, 3, 2, 1]
r0 = d["per_rank"][0]
assert r0["nChannels"] == 8 and r0["rings"][0]["prev"] == 9 and r0["trees"][0]["down"] == [1, 8, -1]
assert r0["rings"][0]["order"][:9] == [0, 7, 6, 5, 4, 3, 2, 1, 8]
PY
  ok "--graphs --json: valid, with NCCL's values"
else
  not_ok "--graphs --json: valid, with NCCL's values"
  show "$TMP/err.txt"
fi

# NCCL_GRAPH_FILE: a dump read back gives the same graphs and connection.
p4d="$GOLD/aws-p4d.24xlarge"
NCCL_GRAPH_FILE="$p4d/graph-2nodes.xml" "$TOPO" --xml "$p4d/topo.xml" --nodes 2 --graphs \
  >"$TMP/loaded.txt" 2>"$TMP/err.txt"
expect_same "NCCL_GRAPH_FILE: graphs read back = searched" "$TMP/loaded.txt" \
  "$p4d/graphs-2nodes.txt"

# A malformed graph file names the file and the line.
printf '<graphs version="1">\n  <graph id="0" pattern="4">\n    <gpu dev="0"/>\n' >"$TMP/bad.xml"
NCCL_GRAPH_FILE="$TMP/bad.xml" "$TOPO" --xml "$p4d/topo.xml" --graphs >/dev/null 2>"$TMP/err.txt"
rc=$?
if [ "$rc" = 2 ] && grep -q "bad.xml:2" "$TMP/err.txt"; then
  ok "malformed NCCL_GRAPH_FILE: exit 2 naming file and line"
else
  not_ok "malformed NCCL_GRAPH_FILE: exit 2 naming file and line (got $rc)"
  show "$TMP/err.txt"
fi

# NCCL refuses RCCL's version 2 files; so do we, naming the file.
"$TOPO" --xml "$GOLD/rccl-8p_pcie/topo.xml" --nodes 2 --graphs >/dev/null 2>"$TMP/err.txt"
rc=$?
if [ "$rc" = 2 ] && grep -q "topo.xml" "$TMP/err.txt"; then
  ok "RCCL version 2 file refused naming the file"
else
  not_ok "RCCL version 2 file refused naming the file (exit $rc)"
  show "$TMP/err.txt"
fi

mp_finish
