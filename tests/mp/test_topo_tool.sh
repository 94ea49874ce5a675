#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# meshccl-topo --xml: exact output against NCCL 2.30's golden
# fixtures (tests/data/topo/golden/<name>/a.txt, b1-b3.txt, c.txt), JSON
# validity and values, options, exit codes, and every tests/data/topo/*.xml
# running without a crash. Needs MC_BUILD and MC_SRC (set by CTest).
# shellcheck shell=bash
# shellcheck disable=SC2154 # RC_<name> are set by run() through printf -v
# shellcheck source=tests/mp/mp_lib.sh
source "$(dirname "$0")/mp_lib.sh"

MC_SRC="${MC_SRC:?MC_SRC must name the source directory}"
TOPO="$MC_BUILD/bin/meshccl-topo"
DATA="$MC_SRC/tests/data/topo"
GOLD="$DATA/golden"
# No NCCL_* variable of the caller changes the decisions (the golden fixtures
# were made with none set: tests/data/topo/golden/README.md).
unset NCCL_P2P_LEVEL NCCL_P2P_DISABLE NCCL_SHM_DISABLE NCCL_NVB_DISABLE NCCL_PXN_DISABLE \
  NCCL_PXN_C2C NCCL_NET_GDR_LEVEL NCCL_NET_GDR_READ NCCL_NET_GDR_C2C NCCL_NET_DISABLE_INTRA \
  NCCL_CONF_FILE
export HOME="$TMP"

if [ ! -x "$TOPO" ]; then
  not_ok "built: $TOPO"
  exit 1
fi

# run NAME ARGS...: runs the tool, stdout to $TMP/NAME.out, stderr to $TMP/NAME.err, RC_NAME.
run() {
  local name=$1
  shift
  "$TOPO" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
  printf -v "RC_$name" '%s' "$?"
}

# expect_same NAME GOT_FILE WANT_FILE: identical files (shows the diff otherwise).
expect_same() {
  if diff -u "$3" "$2" >"$TMP/diff.txt" 2>&1; then
    ok "$1"
  else
    not_ok "$1"
    head -n 20 "$TMP/diff.txt" | sed 's/^/#   /'
  fi
}

# Sections of the text output: [a] the ncclTopoPrint lines (after the "#"
# header lines, up to the blank line), the matrix cells, the transports.
section_a() { awk '/^#/ && !s {next} /^$/ {exit} {s=1; print}' "$1"; }
# matrix FILE FROM TO: cells of rows FROM (GPU|NET) and columns TO (GPU|NET).
matrix() {
  awk -v from="$2" -v to="$3" '
    /^Paths / {inp=1; next}
    inp && /^$/ {exit}
    inp && !hdr {hdr=1; ng=0; for (i = 1; i <= NF; i++) if ($i ~ /^GPU/) ng++; next}
    inp && index($1, from) == 1 {
      lo = (to == "GPU") ? 2 : ng + 2; hi = (to == "GPU") ? ng + 1 : NF
      line = ""
      for (i = lo; i <= hi; i++) line = line (i > lo ? " " : "") $i
      print line
    }' "$1"
}
transports() { awk '/^Transports/ {t=1; next} t && /^  [0-9]+->/ {split($2, a, ":"); print $1, a[1]}' "$1"; }

# ---------------------------------------------------------------- golden
for dir in "$GOLD"/*/; do
  name=$(basename "$dir")
  [ "$name" = rccl-8p_pcie ] && continue # refused: checked below
  run gold --xml "$dir/topo.xml"
  expect_success "golden $name: exit 0" "$RC_gold" "$TMP/gold.err"
  matrix "$TMP/gold.out" GPU GPU >"$TMP/b1.txt"
  expect_same "golden $name: GPU x GPU matrix = b1.txt" "$TMP/b1.txt" "$dir/b1.txt"
  transports "$TMP/gold.out" >"$TMP/c.got"
  awk '{print $1, $NF}' "$dir/c.txt" >"$TMP/c.want"
  expect_same "golden $name: transports = c.txt" "$TMP/c.got" "$TMP/c.want"
  section_a "$TMP/gold.out" >"$TMP/a.txt"
  expect_same "golden $name: ncclTopoPrint lines = a.txt" "$TMP/a.txt" "$dir/a.txt"
  if [ -s "$dir/b2.txt" ]; then
    matrix "$TMP/gold.out" GPU NET >"$TMP/b2.txt"
    expect_same "golden $name: GPU x NET matrix = b2.txt" "$TMP/b2.txt" "$dir/b2.txt"
    matrix "$TMP/gold.out" NET GPU >"$TMP/b3.txt"
    expect_same "golden $name: NET x GPU matrix = b3.txt" "$TMP/b3.txt" "$dir/b3.txt"
  fi
  # The JSON holds the same cells.
  run goldj --xml "$dir/topo.xml" --json
  if python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
got = "".join(" ".join("%s/%g" % (c["type"], c["bw"]) for c in row) + "\n" for row in d["paths"]["gpu_gpu"])
sys.exit(0 if got == open(sys.argv[2]).read() else 1)' "$TMP/goldj.out" "$dir/b1.txt"; then
    ok "golden $name: JSON gpu_gpu = b1.txt"
  else
    not_ok "golden $name: JSON gpu_gpu = b1.txt"
  fi
done

# ------------------------------------------------------------------ JSON
P4D="$GOLD/aws-p4d.24xlarge/topo.xml"
run json --xml "$P4D" --json
expect_success "json: exit 0" "$RC_json" "$TMP/json.err"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert [g["rank"] for g in d["gpus"]] == list(range(8)), d["gpus"]
assert d["gpus"][0] == {"dev": 0, "rank": 0, "busid": "0000:10:1c.0", "sm": 80}, d["gpus"][0]
assert [n["dev"] for n in d["nets"]] == [0, 1, 2, 3]
assert d["nets"][0]["name"] == "rdmap16s27", d["nets"][0]
assert d["paths"]["gpu_gpu"][0][1] == {"type": "NVL", "bw": 240.0}
assert d["paths"]["gpu_gpu"][0][0] == {"type": "LOC", "bw": 5000.0}
assert d["paths"]["gpu_net"][0][0] == {"type": "PIX", "bw": 12.0}
assert d["paths"]["gpu_net"][0][1] == {"type": "PXN", "bw": 12.0}
assert d["p2p"][0][1] == {"p2p": 1, "read": 1, "intermediate_rank": -1}
assert len(d["transport"]) == 8 and all(len(r) == 8 for r in d["transport"])
assert d["transport"][0][0] is None and d["transport"][3][3] is None
assert d["transport"][0][1] == "P2P"
assert d["p2p_level"] == "PXB" and d["nodes"] == 1 and d["ranks"] == 8
' "$TMP/json.out" 2>"$TMP/py.err"
check "json: aws-p4d keys and values"
[ -s "$TMP/py.err" ] && show "$TMP/py.err"

# JSON escaping: a file name with a quote and a backslash.
cp "$P4D" "$TMP/we\"ird\\name.xml"
run jesc --xml "$TMP/we\"ird\\name.xml" --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["file"].endswith("we\"ird\\name.xml")' \
  "$TMP/jesc.out" 2>/dev/null
check "json: strings escaped"

# --------------------------------------------------------------- options
run ranks --xml "$P4D" --ranks 4 --json
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert len(d["gpus"]) == 4 and len(d["transport"]) == 4 and len(d["p2p"]) == 4
assert [g["rank"] for g in d["gpus"]] == [0, 1, 2, 3]
' "$TMP/ranks.out" 2>/dev/null
check "--ranks 4: four GPUs and a 4x4 transport matrix"
run ranks9 --xml "$P4D" --ranks 9
expect_eq "--ranks 9 on 8 GPUs: exit 2" "$RC_ranks9" 2
expect_grep "--ranks 9: says why" "$TMP/ranks9.err" "only 8 GPU"

run nodes --xml "$P4D" --nodes 2
expect_success "--nodes 2: exit 0" "$RC_nodes" "$TMP/nodes.err"
expect_grep "--nodes 2: hosts x ranks line" "$TMP/nodes.out" "^# 2 hosts x 8 ranks = 16 ranks"
matrix "$TMP/nodes.out" GPU GPU >"$TMP/nodes_b1.txt"
expect_same "--nodes 2: same per-host matrix" "$TMP/nodes_b1.txt" "$GOLD/aws-p4d.24xlarge/b1.txt"

run dump --xml "$P4D" --dump "$TMP/dump.xml"
run dump2 --xml "$TMP/dump.xml"
sed 1d "$TMP/dump.out" >"$TMP/dump.body"
sed 1d "$TMP/dump2.out" >"$TMP/dump2.body"
expect_same "--dump: the dumped XML gives the same output" "$TMP/dump2.body" "$TMP/dump.body"

run dot --xml "$P4D" --dot "$TMP/p4d.dot"
expect_success "--dot: exit 0" "$RC_dot" "$TMP/dot.err"
expect_grep "--dot: a graph" "$TMP/p4d.dot" "^digraph meshccl_topo \{"
expect_grep "--dot: NVLink edges labelled" "$TMP/p4d.dot" '"(GPU0" -> "NVS0|NVS0" -> "GPU0)" \[label="NVL 240 GB/s"'
expect_grep "--dot: NET node named" "$TMP/p4d.dot" '"NET0" .*rdmap16s27'
if command -v dot >/dev/null 2>&1; then
  run svg --xml "$P4D" --svg "$TMP/p4d.svg"
  expect_success "--svg: exit 0" "$RC_svg" "$TMP/svg.err"
  expect_grep "--svg: an SVG" "$TMP/p4d.svg" "<svg"
elif [ "${CI:-}" = true ]; then
  not_ok "svg: dot not installed (CI=true: graphviz is in the Makefile's DEB_PKGS)"
else
  ok "svg skipped: dot not installed"
  run nosvg --xml "$P4D" --svg "$TMP/p4d.svg"
  expect_eq "--svg without dot: exit 3" "$RC_nosvg" 3
  expect_grep "--svg without dot: says so" "$TMP/nosvg.err" "graphviz"
fi

run env --env
expect_success "--env: exit 0" "$RC_env" "$TMP/env.err"
expect_grep "--env: lists NCCL_P2P_LEVEL" "$TMP/env.out" "NCCL_P2P_LEVEL"
run envmd --xml "$P4D" --env --markdown
expect_grep "--env --markdown: ENV.md table" "$TMP/envmd.out" '^\| `?NCCL_P2P_LEVEL'

# Parameters change the decisions (P2P, else SHM, else NET, as NCCL's
# selectTransport).
SYN="$GOLD/synthetic-1s-amd-2gpu-nvlink4-1nic/topo.xml"
run syn --xml "$SYN"
expect_grep "defaults: NVLink pair uses P2P" "$TMP/syn.out" "^  0->1  P2P: path NVL within NCCL_P2P_LEVEL SYS"
NCCL_P2P_LEVEL=LOC run loc --xml "$SYN"
expect_grep "NCCL_P2P_LEVEL=LOC: SHM with the reason" "$TMP/loc.out" \
  "^  0->1  SHM: path PHB beyond P2P level LOC"
NCCL_P2P_LEVEL=LOC NCCL_SHM_DISABLE=1 run noshm --xml "$SYN"
expect_grep "NCCL_SHM_DISABLE=1: NET" "$TMP/noshm.out" "^  0->1  NET: .*NCCL_SHM_DISABLE=1"

# ------------------------------------------------------- this host (detection)
MESHCCL_SYSFS_ROOT="$MC_SRC/tests/data/sysfs/vm-1numa-virtio" run host --ranks 2 --nics sysfs
expect_eq "no --xml (recorded VM): exit 0" "$RC_host" 0
expect_grep "no --xml: two compute devices under one switch: P2P" "$TMP/host.out" \
  "^  0->1  P2P: path PIX within NCCL_P2P_LEVEL PXB"
expect_grep "no --xml: the VM's NIC is a net device" "$TMP/host.out" "^NET0 "
run realhost
expect_eq "no --xml (this machine): exit 0" "$RC_realhost" 0
expect_eq "no --xml: the header names this host" "$(head -n 1 "$TMP/realhost.out" | cut -d: -f1)" \
  "# this host"
run realjson --json
expect_eq "no --xml --json: exit 0" "$RC_realjson" 0
expect_eq "no --xml --json: valid, \"file\": null" \
  "$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["file"])' "$TMP/realjson.out")" None
# Without --nics sysfs the NICs are the devices of the net init would use
# (here the fake plugin's two, at PCI paths of the recorded 2-socket tree).
SW=/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0
MESHCCL_SYSFS_ROOT="$MC_SRC/tests/data/sysfs/2socket-switch" FAKE_NET_NDEVS=2 \
  FAKE_NET_PCI="$SW/0000:02:01.0/0000:03:00.0,$SW/0000:02:02.0/0000:04:00.0" \
  NCCL_NET_PLUGIN="$MC_BUILD/tests/plugins/libnccl-net-fake12.so" run netnics --dump "$TMP/netnics.xml"
expect_eq "no --xml, a net plugin: exit 0" "$RC_netnics" 0
expect_eq "no --xml: the NICs are the plugin's devices, none from sysfs" \
  "$(grep -o '<net name="[^"]*" dev="[0-9]*"' "$TMP/netnics.xml" | tr '\n' ' ')" \
  '<net name="fake0" dev="0" <net name="fake1" dev="1" '
run badnics --nics bogus
expect_eq "--nics bogus: exit 2" "$RC_badnics" 2

# ----------------------------------------------------------------- errors
run badarg --frobnicate
expect_eq "unknown argument: exit 2" "$RC_badarg" 2
expect_grep "unknown argument: usage" "$TMP/badarg.err" "^usage:"
run badranks --xml "$P4D" --ranks x
expect_eq "--ranks x: exit 2" "$RC_badranks" 2
printf '<system version="1">\n  <cpu numaid="0" host_hash="0x1" affinity="ff">\n    <pci busid=\n' \
  >"$TMP/bad.xml"
run bad --xml "$TMP/bad.xml"
expect_eq "malformed file: exit 2" "$RC_bad" 2
expect_grep "malformed file: file:line in stderr" "$TMP/bad.err" "$TMP/bad.xml:[0-9]+:"
run missing --xml "$TMP/nonexistent.xml"
expect_eq "missing file: exit 2" "$RC_missing" 2
expect_grep "missing file: named" "$TMP/missing.err" "nonexistent.xml"
run rccl --xml "$GOLD/rccl-8p_pcie/topo.xml"
expect_eq "RCCL version 2 file: refused, exit 2" "$RC_rccl" 2
expect_grep "RCCL version 2 file: NCCL's message" "$TMP/rccl.err" "wrong version 2, 1 needed"

# ----------------------------------------- a partial file, completed by detection
run partial --xml "$DATA/aws-p5.48xlarge-2023-partial.xml" --ranks 2 --json
expect_eq "p5 partial file (no GPU): loads, exit 0" "$RC_partial" 0
expect_grep "p5 partial file: says it was completed" "$TMP/partial.err" \
  "has no GPU: completed with 2 device\(s\) detected on this host"
expect_eq "p5 partial file: the 2 detected devices are its GPUs" \
  "$(python3 -c 'import json,sys; print([g["busid"] for g in json.load(open(sys.argv[1]))["gpus"]])' \
    "$TMP/partial.out")" "['fffe:00:01.0', 'fffe:00:02.0']"

run p4dstatic --xml "$DATA/aws-p4d.24xlarge.xml" --ranks 8 --json
expect_eq "p4d static file (GPUs as bare PCI leaves): loads, exit 0" "$RC_p4dstatic" 0
expect_grep "p4d static file: its 8 GPU PCI devices completed" "$TMP/p4dstatic.err" \
  "8 GPU PCI device\(s\) without <gpu> completed in bus-id order"
expect_eq "p4d static file: GPU0-GPU1 PIX, GPU0-GPU2 PHB, GPU0-GPU4 SYS (its PCI tree)" \
  "$(python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["paths"]["gpu_gpu"][0]; print(p[1]["type"], p[2]["type"], p[4]["type"])' \
    "$TMP/p4dstatic.out")" "PIX PHB SYS"

# ------------------------------------------------- every file of the corpus
n_ok=0
n_refused=0
for f in "$DATA"/*.xml; do
  run corpus --xml "$f" --json
  if [ "$RC_corpus" = 0 ] && python3 -c 'import json,sys; json.load(open(sys.argv[1]))' \
    "$TMP/corpus.out" 2>/dev/null; then
    n_ok=$((n_ok + 1))
  elif [ "$RC_corpus" = 2 ] && grep -q "$(basename "$f")" "$TMP/corpus.err" &&
    { grep -q '<system version="2"' "$f" || grep -q '<graphs' "$f"; }; then
    # Only what NCCL refuses too: RCCL's version 2 files, and a graph file.
    n_refused=$((n_refused + 1))
  else
    not_ok "corpus $(basename "$f"): exit $RC_corpus (0 with valid JSON, or 2 naming the file)"
    show "$TMP/corpus.err"
  fi
done
ok "corpus: $n_ok files loaded, $n_refused refused with a message"

mp_finish
