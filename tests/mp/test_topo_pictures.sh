#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# meshccl-topo's pictures (--dot): exact text for one small golden system
# (synthetic-1s-amd-2gpu-nvlink4-1nic: picture.dot, and picture-2nodes.dot for
# the --nodes 2 overview), then, for every golden system's topo.xml, the
# structure: each GPU and each NIC of the ncclTopoPrint lines is drawn exactly
# once, in the box of the CPU whose tree holds it there; every vertex of a box
# but its CPU hangs from exactly one tree edge (the PCI tree drawn as a tree);
# the other links never constrain the layout; the --nodes 3 overview has every
# host with every NET once. Without --xml the tool describes this host and
# draws its compute devices as such. MESHCCL_UPDATE_GOLDEN=1 rewrites the two
# expected pictures. Needs MC_BUILD and MC_SRC (set by CTest).
# shellcheck source=mp_lib.sh
source "$(dirname "$0")/mp_lib.sh"

MC_SRC="${MC_SRC:?MC_SRC must name the source directory}"
TOPO="$MC_BUILD/bin/meshccl-topo"
GOLD="$MC_SRC/tests/data/topo/golden"
SMALL="$GOLD/synthetic-1s-amd-2gpu-nvlink4-1nic"
unset NCCL_P2P_LEVEL NCCL_P2P_DISABLE NCCL_SHM_DISABLE NCCL_NVB_DISABLE NCCL_PXN_DISABLE \
  NCCL_NET_GDR_LEVEL NCCL_CONF_FILE NCCL_TOPO_FILE
export HOME="$TMP"
[ -x "$TOPO" ] || {
  not_ok "built: $TOPO"
  exit 1
}

# same NAME GOT WANT: identical files; MESHCCL_UPDATE_GOLDEN=1 copies GOT to WANT.
same() {
  if [ "${MESHCCL_UPDATE_GOLDEN:-0}" = 1 ]; then
    cp "$2" "$3"
    ok "$1 (rewritten: $3)"
  elif diff -u "$3" "$2" >"$TMP/diff.txt" 2>&1; then
    ok "$1"
  else
    not_ok "$1"
    head -n 30 "$TMP/diff.txt" | sed 's/^/#   /'
  fi
}

# ------------------------------------------------------------ exact text
"$TOPO" --xml "$SMALL/topo.xml" --dot "$TMP/small.dot" >/dev/null 2>"$TMP/small.err"
expect_success "small system: --dot exits 0" "$?" "$TMP/small.err"
same "small system: the picture is the expected text" "$TMP/small.dot" "$SMALL/picture.dot"
"$TOPO" --xml "$SMALL/topo.xml" --nodes 2 --dot "$TMP/small2.dot" >/dev/null 2>"$TMP/small2.err"
expect_success "small system, --nodes 2: --dot exits 0" "$?" "$TMP/small2.err"
same "small system, --nodes 2: the overview is the expected text" "$TMP/small2.dot" \
  "$SMALL/picture-2nodes.dot"

# ------------------------------------------------------------ structure
# busid HEXID: NCCL's node id as the picture prints the bus id.
busid() {
  local v=$((16#$1))
  printf '%04x:%02x:%02x.%x' $((v >> 20)) $(((v >> 12) & 0xff)) $(((v >> 4) & 0xff)) $((v & 0xf))
}

# print_owners OUT: "TYPE busid numa" for every GPU and NIC of the
# ncclTopoPrint lines in OUT (the first time each appears, under its CPU).
print_owners() {
  local line numa="" typ id
  while IFS= read -r line; do
    case "$line" in
    "=== System"*) continue ;;
    "=========="*) break ;;
    CPU/*) numa=${line#CPU/*-} numa=${numa%% *} ;;
    esac
    if [[ "$line" =~ -\ (GPU|NIC)/[0-9]+-([0-9a-f]+) ]]; then
      typ=${BASH_REMATCH[1]} id=${BASH_REMATCH[2]}
      echo "$typ $(busid "$id") $numa"
    fi
  done <"$1" | awk '!seen[$1 " " $2]++'
}

# picture_owners DOT: "TYPE busid numa" for every GPU and NIC vertex, numa
# from the cluster it is drawn in ("-" outside every cluster).
picture_owners() {
  awk '
    /^  subgraph "cluster_CPU/ {inside = 1; next}
    inside && /^    label="CPU/ {numa = $0; sub(/.*NUMA node /, "", numa); sub(/\).*/, "", numa); next}
    /^  }$/ {inside = 0; numa = ""; next}
    /^ +"(GPU|NIC)[0-9]+" \[/ {
      name = $1; gsub(/"/, "", name); typ = substr(name, 1, 3)
      n = split($0, parts, "\\\\n"); bus = parts[n]; sub(/".*/, "", bus)
      print typ, bus, (inside ? numa : "-")
    }' "$1"
}

# tree_in DOT: "vertex count" of tree edges into each vertex drawn in a CPU box
# (its CPU excepted), 0 when none.
tree_in() {
  awk '
    /^  subgraph "cluster_CPU/ {inside = 1; next}
    /^  }$/ {inside = 0; next}
    inside && /^    "[A-Za-z]+[0-9]+" \[/ {v = $1; gsub(/"/, "", v); if (v !~ /^CPU/) boxed[v] = 1}
    /^  "[^"]+" -> "[^"]+" \[/ && !/constraint=false/ && !/style=invis/ && !/NICFN/ {h = $3; gsub(/"/, "", h); into[h]++}
    END {for (v in boxed) print v, (v in into) ? into[v] : 0}' "$1" | sort
}

n_sys=0
for xml in "$GOLD"/*/topo.xml; do
  name=$(basename "$(dirname "$xml")")
  "$TOPO" --xml "$xml" --dot "$TMP/$name.dot" >"$TMP/$name.out" 2>"$TMP/$name.err"
  rc=$?
  if grep -q 'version="2"' "$xml"; then
    expect_eq "$name: a file NCCL refuses draws nothing (exit 2)" "$rc" 2
    continue
  fi
  n_sys=$((n_sys + 1))
  expect_success "$name: --dot exits 0" "$rc" "$TMP/$name.err"
  print_owners "$TMP/$name.out" | sort >"$TMP/$name.want"
  picture_owners "$TMP/$name.dot" | sort >"$TMP/$name.got"
  if [ ! -s "$TMP/$name.want" ]; then
    not_ok "$name: the ncclTopoPrint lines name GPUs or NICs"
  else
    same "$name: every GPU and NIC drawn once, in its CPU's box ($(grep -c '^GPU' \
      "$TMP/$name.want") GPUs, $(grep -c '^NIC' "$TMP/$name.want") NICs)" "$TMP/$name.got" \
      "$TMP/$name.want"
  fi
  expect_eq "$name: every boxed vertex hangs from one tree edge" \
    "$(tree_in "$TMP/$name.dot" | awk '$2 != 1' | tr '\n' ';')" ""
  expect_eq "$name: NVLink and CPU-to-CPU links do not move the tree" \
    "$(grep -E '\[label="(NVL|SYS) ' "$TMP/$name.dot" | grep -vc 'constraint=false')" 0
  if command -v dot >/dev/null 2>&1; then
    dot -Tsvg -o "$TMP/$name.svg" "$TMP/$name.dot" 2>"$TMP/$name.doterr"
    expect_success "$name: Graphviz renders it" "$?" "$TMP/$name.doterr"
  fi
  # The overview: 3 hosts, each with every NET of the system once, joined to the network.
  "$TOPO" --xml "$xml" --nodes 3 --dot "$TMP/$name.hosts.dot" >/dev/null 2>"$TMP/$name.hosts.err"
  expect_success "$name --nodes 3: --dot exits 0" "$?" "$TMP/$name.hosts.err"
  n_net=$(sed -n 's/^# .*: [0-9]* local rank(s), \([0-9]*\) NET(s).*/\1/p' "$TMP/$name.out")
  for h in 0 1 2; do
    expect_eq "$name --nodes 3: host $h has its $n_net NET(s), each joined to the network" \
      "$(grep -cE "^  \"h${h}_NET[0-9]+\" -> \"network\"" "$TMP/$name.hosts.dot")/$(grep -cE \
        "^    \"h${h}_NET[0-9]+\" \[" "$TMP/$name.hosts.dot")" "$n_net/$n_net"
  done
  expect_grep "$name --nodes 3: host 2 holds ranks from 2 x local ranks" "$TMP/$name.hosts.dot" \
    '^    label="host 2: ranks [0-9]+-[0-9]+";$'
done
expect_le "golden systems drawn" 8 "$n_sys"

# ------------------------------------------------------------ wide hosts
# 15 socket NICs under one NIC node: its NETs wrap into a grid of 4 columns
# (each NET below the one 4 before it: 11 invisible edges), and link labels
# carry their unit.
SOCK="$MC_SRC/tests/data/topo/sugarlxn-4xrtx4090-rome-nps4-socketnics.xml"
"$TOPO" --xml "$SOCK" --dot "$TMP/sock.dot" >/dev/null 2>"$TMP/sock.err"
expect_success "15 NETs on one NIC: --dot exits 0" "$?" "$TMP/sock.err"
expect_eq "... they wrap into rows of 4 (11 NETs below another)" \
  "$(grep -cE '^  "NET[0-9]+" -> "NET[0-9]+" \[style=invis\];$' "$TMP/sock.dot")" 11
expect_eq "... NIC0's NETs 0-14 in rows: each k >= 4 below k - 4" \
  "$(sed -nE 's/^  "NET([0-9]+)" -> "NET([0-9]+)" \[style=invis\];$/\1>\2/p' "$TMP/sock.dot" |
    tr '\n' ' ')" "0>4 1>5 2>6 3>7 4>8 5>9 6>10 7>11 8>12 9>13 10>14 "
expect_eq "... every link label has its unit" \
  "$(grep -E '\[label="[A-Z2]+ [0-9.]+' "$TMP/sock.dot" | grep -vc 'GB/s')" 0
"$TOPO" --xml "$SOCK" --nodes 2 --dot "$TMP/sock2.dot" >/dev/null 2>"$TMP/sock2.err"
expect_success "15 NETs, --nodes 2: --dot exits 0" "$?" "$TMP/sock2.err"
expect_eq "... each host joins CPU -> NIC -> its NETs (2 NICs, 16 NETs per host)" \
  "$(grep -cE '^  "h0_CPU[0-9]+" -> "h0_NIC[0-9]+";$' "$TMP/sock2.dot")/$(grep -cE \
    '^  "h0_NIC[0-9]+" -> "h0_NET[0-9]+";$' "$TMP/sock2.dot")" "2/16"
expect_eq "... and grids them in the host box too" \
  "$(grep -cE '^  "h1_NET[0-9]+" -> "h1_NET[0-9]+" \[style=invis\];$' "$TMP/sock2.dot")" 11
# NIC PCI functions without a network device (azure-ndv4: 8 InfiniBand
# functions with no <nic>): drawn as NICs, dashed, saying so, under their switch.
NDV4="$MC_SRC/tests/data/topo/azure-ndv4-a100.xml"
"$TOPO" --xml "$NDV4" --dot "$TMP/ndv4.dot" >/dev/null 2>"$TMP/ndv4.err"
expect_success "NIC functions without <nic>: --dot exits 0" "$?" "$TMP/ndv4.err"
expect_eq "... each of the 8 drawn once as an unused NIC" \
  "$(grep -cE '^    "NICFN[0-7]" \[shape=component, style=dashed, label="NIC 01[0-9a-f]{2}:00:00\.0\\nno network device: not used"\];$' "$TMP/ndv4.dot")" 8
expect_eq "... each hanging from a PCI switch" \
  "$(grep -cE '^  "PCI[0-9]+" -> "NICFN[0-7]" \[style=dashed\];$' "$TMP/ndv4.dot")" 8

# ------------------------------------------------------------ this host
"$TOPO" --ranks 2 --dot "$TMP/host.dot" >"$TMP/host.out" 2>"$TMP/host.err"
expect_success "this host (no --xml), 2 ranks: exit 0" "$?" "$TMP/host.err"
expect_grep "this host: the text names it" "$TMP/host.out" '^# this host: 2 local rank\(s\)'
if grep -q 'fillcolor=palegreen' "$TMP/host.dot"; then
  ok "this host: NVML reports GPUs, drawn as GPUs"
else
  expect_eq "this host: both ranks are compute devices, each drawn once in a CPU box" \
    "$(picture_owners "$TMP/host.dot" | grep -c '^GPU .* [0-9]*$')/$(grep -c \
      'label="compute device [01]\\nrank [01]\\n' "$TMP/host.dot")" "2/2"
fi
"$TOPO" >"$TMP/noargs.out" 2>"$TMP/noargs.err"
expect_success "no arguments: this host, exit 0" "$?" "$TMP/noargs.err"
expect_grep "no arguments: one local rank of this host" "$TMP/noargs.out" \
  '^# this host: 1 local rank\(s\)'
mp_finish
