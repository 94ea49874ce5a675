#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# meshccl-perf's first lines and its -J report as nccl-tests writes them (src/common.cu main()
# and run(), src/util.cu writeDeviceReport and the json* writers): "# Writing JSON output to"
# first, then "# nccl-tests version ... nccl-headers=N nccl-library=N" with meshccl's version,
# "# Collective test starting", the parameter line; the report parses (python3 -m json.tool),
# has exactly nccl-tests' keys in nccl-tests' order at every level and nccl-tests' value forms
# (booleans and root as strings, doubles with 6 decimals, nwrong null without a check), one
# results row per size and per -N cycle, per-rank devices, cpu_time with -C, the
# NCCL_TESTS_MIN_BW verdict, an existing file kept (.0), secrets redacted from "env", and a
# name not ending in .json ignored with a note on stderr.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs
PERF="$MC_BUILD/bin/meshccl-perf"
unset MESHCCL_RUN_TAG_OUTPUT
command -v python3 >/dev/null 2>&1 || skip_or_fail "python3 is needed to parse the JSON report"

# check_report NAME FILE RANKS ROWS ITERS CHECKED TIMEKEY OKAY [ARGS...]: the report's structure,
# keys and value forms; ARGS are the program's arguments after its path.
check_report() {
  local name=$1 file=$2
  shift 2
  if python3 -m json.tool "$file" >/dev/null 2>"$TMP/jsontool.err"; then
    ok "$name: python3 -m json.tool parses it"
  else
    not_ok "$name: python3 -m json.tool parses it"
    show "$TMP/jsontool.err"
  fi
  if python3 - "$file" "$@" >"$TMP/check.out" 2>&1 <<'EOF'; then
import json, re, sys
path, ranks, rows, iters, checked, timekey, okay = sys.argv[1:8]
args = sys.argv[8:]
raw = open(path).read()
doc = json.loads(raw)
def keys(obj, want, where):
    got = list(obj.keys())
    assert got == want, f"{where}: keys {got}, want {want}"
TS = r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$"
keys(doc, ["version", "start_time", "args", "env", "nccl_version", "config", "results",
           "out_of_bounds", "average_bus_bandwidth", "errors", "end_time"], "top")
assert doc["version"] == 2, doc["version"]
assert re.match(TS, doc["start_time"]) and re.match(TS, doc["end_time"]), "times"
assert doc["args"][0].endswith("meshccl-perf") and doc["args"][1:] == args, doc["args"]
assert all(isinstance(e, str) and "=" in e for e in doc["env"]), "env entries"
assert "MESHCCL_SECRET=<redacted>" in doc["env"], "MESHCCL_SECRET redacted"
assert not any("s3cr3t" in e for e in doc["env"]), "secret value leaked"
assert isinstance(doc["nccl_version"], int) and doc["nccl_version"] >= 22000, "nccl_version"
c = doc["config"]
step = "step_factor" if "step_factor" in c else "step_bytes"
keys(c, ["nthreads", "ngpus", "minimum_bytes", "maximum_bytes", step, "warmup_iters",
         "iterations", "aggregated_iterations", "validation", "graph", "blocking_collectives",
         "per_iter_timing", "parallel_init", "devices"], "config")
for k in ("blocking_collectives", "per_iter_timing", "parallel_init"):
    assert c[k] in ("true", "false"), f"config.{k} is the string true/false: {c[k]!r}"
assert c["iterations"] == int(iters), c["iterations"]
assert len(c["devices"]) == int(ranks), f"{len(c['devices'])} devices, want {ranks}"
for r, d in enumerate(c["devices"]):
    keys(d, ["rank", "group", "pid", "hostname", "device", "device_hex", "device_info"],
         f"devices[{r}]")
    assert d["rank"] == r and d["device_hex"] == "host", d
    assert d["device_info"] == "meshccl host memory", d
assert len(doc["results"]) == int(rows), f"{len(doc['results'])} rows, want {rows}"
for i, row in enumerate(doc["results"]):
    keys(row, ["size", "count", "type", "redop", "root", "out_of_place", "in_place",
               "actual_iterations", "experiment_name"], f"results[{i}]")
    assert isinstance(row["size"], int) and isinstance(row["count"], int), row
    assert re.match(r"^ *-?\d+$", row["root"]) and len(row["root"]) == 6, row["root"]
    assert row["actual_iterations"] == int(iters) and row["experiment_name"] == "", row
    for place in ("out_of_place", "in_place"):
        keys(row[place], [timekey, "alg_bw", "bus_bw", "nwrong"], f"results[{i}].{place}")
        if checked == "1":
            assert row[place]["nwrong"] == 0, row[place]
        else:
            assert row[place]["nwrong"] is None, row[place]
keys(doc["out_of_bounds"], ["count", "okay"], "out_of_bounds")
assert doc["out_of_bounds"] == {"count": 0, "okay": "true"}, doc["out_of_bounds"]
keys(doc["average_bus_bandwidth"], ["bandwidth", "okay"], "average_bus_bandwidth")
assert doc["average_bus_bandwidth"]["okay"] == okay, doc["average_bus_bandwidth"]
assert doc["errors"] == [""], doc["errors"]
# The raw forms: every double with six decimals (printf %f), as nccl-tests' jsonDouble.
for k, v in re.findall(r'"(time|cpu_time|alg_bw|bus_bw|nwrong|bandwidth)":([^,}]*)', raw):
    assert re.match(r"^-?\d+\.\d{6}$", v) or v == "null", f"{k}: {v}"
assert not raw.endswith("\n") and raw.endswith('"}'), "ends as nccl-tests' file ends"
print("report ok")
EOF
    ok "$name: nccl-tests' keys, order and value forms"
  else
    not_ok "$name: nccl-tests' keys, order and value forms"
    show "$TMP/check.out"
  fi
}

export MESHCCL_SECRET=s3cr3t

# --- one rank: the first lines, then the report ----------------------------------------------
cd "$TMP" || exit 1
env -u RANK -u WORLD_SIZE timeout 30 "$PERF" all_reduce -b 8 -e 1K -f 4 -n 2 -J one.json \
  >"$TMP/one.out" 2>&1
expect_success "one rank -J one.json: exit 0" "$?" "$TMP/one.out"
VER=$(awk '/^#define NCCL_(MAJOR|MINOR|PATCH) /{v[$2]=$3} END{print v["NCCL_MAJOR"]*10000+v["NCCL_MINOR"]*100+v["NCCL_PATCH"]}' \
  "$(dirname "$0")/../../include/nccl.h")
expect_eq "the first four lines are nccl-tests'" "$(head -n 4 "$TMP/one.out")" \
  "# Writing JSON output to one.json
# nccl-tests version 2.19.1 nccl-headers=$VER nccl-library=$VER
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 4(factor) warmup iters: 1 iters: 2 agg iters: 1 validation: 1 graph: 0 unalign: 0"
expect_eq "then '#' and '# Using devices'" "$(sed -n '5,6p' "$TMP/one.out")" "#
# Using devices"
check_report "one rank" "$TMP/one.json" 1 4 2 1 time unchecked \
  all_reduce -b 8 -e 1K -f 4 -n 2 -J one.json

# --- an existing file is kept: one.json.0 --------------------------------------------------
env -u RANK -u WORLD_SIZE timeout 30 "$PERF" all_reduce -b 8 -e 8 -n 1 -J one.json \
  >"$TMP/again.out" 2>&1
expect_success "-J one.json again: exit 0" "$?" "$TMP/again.out"
expect_eq "the first line names one.json.0" "$(head -n 1 "$TMP/again.out")" \
  "# Writing JSON output to one.json.0"
expect_eq "one.json.0 written, one.json kept" \
  "$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["results"]), len(json.load(open(sys.argv[2]))["results"]))' \
    "$TMP/one.json.0" "$TMP/one.json")" "1 4"

# --- two ranks, no check, two cycles, cpu time, NCCL_TESTS_MIN_BW ---------------------------
NCCL_TESTS_MIN_BW=0 timeout 60 "$RUN" -n 2 "$PERF" all_gather -b 64 -e 256 -f 2 -n 3 -c 0 -N 2 \
  -C 1 -J "$TMP/two.json" >"$TMP/two.out" 2>&1
expect_success "two ranks -c 0 -N 2 -C 1: exit 0" "$?" "$TMP/two.out"
check_report "two ranks" "$TMP/two.json" 2 6 3 0 cpu_time true \
  all_gather -b 64 -e 256 -f 2 -n 3 -c 0 -N 2 -C 1 -J "$TMP/two.json"
expect_eq "two ranks: the table has the report's six rows" \
  "$(grep -cE '^ +[0-9]+ ' "$TMP/two.out")" 6

# --- a name that does not end in .json: nothing written, said on stderr ---------------------
env -u RANK -u WORLD_SIZE timeout 30 "$PERF" broadcast -b 8 -e 8 -n 1 -J "$TMP/out.txt" \
  >"$TMP/txt.out" 2>"$TMP/txt.err"
expect_success "-J out.txt: exit 0" "$?" "$TMP/txt.err"
expect_grep "-J out.txt: stdout starts with nccl-tests' version line" <(head -n 1 "$TMP/txt.out") \
  "^# nccl-tests version "
expect_grep "-J out.txt: the note is on stderr" "$TMP/txt.err" \
  "^meshccl-perf: -J/--output_file .*/out.txt ignored: only a name ending in .json is written"
expect_eq "-J out.txt: no file" "$(find "$TMP" -name "out.txt*" | wc -l)" 0
mp_finish
