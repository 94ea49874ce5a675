#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A device check, not part of `make test`: real NCCL (PyTorch's) all-reducing CUDA tensors
# between two "hosts" -- two network namespaces joined by one veth pair, the "cable" --
# once over NCCL's own Socket net and once over meshccl's libnccl-net-mesh.so (the Mesh net
# as an NCCL net plugin, docs/TOOLS.md "Using libnccl-net-mesh.so with NCCL").
#
#   tests/device/torch_nccl_mesh.sh [--dry-run] [--build-dir DIR] [--no-build] [--keep]
#
# Steps, each under `timeout`, the whole well under 5 minutes:
#   1. build meshccl (the release build of `make build`, RelWithDebInfo; MESHCCL_TESTS=OFF:
#      libmeshccl, libnccl-net-mesh.so, meshccl-perf) into DIR (default build-device/);
#   2. find the plugin by its file name in DIR (whatever source folder it comes from);
#   3. make two namespaces, one veth pair (mcdev0 in both, 10.X.0.1/24 and 10.X.0.2/24),
#      check the cable with ping; removed on exit (trap), with every process in them;
#   4. meshccl-perf all_reduce (8 B, 1 MiB, 64 MiB) over the same cable with meshccl's own
#      Socket and Mesh nets (host memory: the cable and the Mesh settings work without a GPU);
#   5. (not with --dry-run) a 2-rank torch.distributed NCCL all-reduce of CUDA tensors of
#      8 B, 1 MiB and 64 MiB, one rank per namespace, both on cuda:0 (NCCL_HOSTID differs per
#      namespace, so NCCL sees two hosts and allows one GPU for both), checked exactly, timed,
#      with NCCL_NET=Socket and then NCCL_NET_PLUGIN=<plugin> NCCL_NET=Mesh; prints each
#      run's busbw per size and NCCL's INFO lines saying which net it used;
#   6. a summary table, and what was skipped and why.
# Needs root and iproute2 (namespaces), cmake and a C compiler; step 5 also an NVIDIA GPU,
# CUDA and python3 with PyTorch 2.x built with NCCL. Exit 0: everything that ran passed;
# 1: something failed; 77: the torch step could not run here (said why), the rest passed.
# Only addresses inside the namespaces made here are used. See tests/device/README.md.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD="$ROOT/build-device"
DRY_RUN=0
DO_BUILD=1
KEEP=0
TOTAL_LIMIT=${MC_DEV_TOTAL_LIMIT:-285} # seconds for everything: each step gets at most what is left
BUILD_LIMIT=${MC_DEV_BUILD_LIMIT:-120} # seconds for the build (configure included)
RUN_LIMIT=${MC_DEV_RUN_LIMIT:-45}      # seconds for one torch run (both ranks)
PERF_LIMIT=${MC_DEV_PERF_LIMIT:-15}    # seconds for one meshccl-perf run (one size)
PYTHON=${PYTHON:-python3}
BUILD_TYPE=${MC_DEV_BUILD_TYPE:-RelWithDebInfo} # make build's release configuration
BACKEND=${MC_DEV_BACKEND:-nccl} # gloo: run the torch step on CPU, to check this script itself
TORCH_NAME="torch NCCL"
[ "$BACKEND" = nccl ] || TORCH_NAME="torch $BACKEND"

usage() {
  sed -n '3,/^set -u/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

while [ $# -gt 0 ]; do
  case $1 in
  --dry-run) DRY_RUN=1 ;;
  --no-build) DO_BUILD=0 ;;
  --keep) KEEP=1 ;;
  --build-dir)
    [ $# -ge 2 ] || {
      echo "torch_nccl_mesh.sh: --build-dir needs a directory" >&2
      exit 2
    }
    BUILD=$2
    shift
    ;;
  -h | --help)
    usage
    exit 0
    ;;
  *)
    echo "torch_nccl_mesh.sh: unknown argument '$1' (try --help)" >&2
    exit 2
    ;;
  esac
  shift
done
case $BUILD in /*) ;; *) BUILD="$PWD/$BUILD" ;; esac

WORK=$(mktemp -d "${TMPDIR:-/tmp}/mc_torch_nccl.XXXXXX")
TAG="mcd$$"
NS_A="${TAG}a"
NS_B="${TAG}b"
IF=mcdev0
X=$((200 + $$ % 50)) # second octet: 10.200-249.0.0/24, away from tests/mp's ranges
ADDR_A="10.$X.0.1"
ADDR_B="10.$X.0.2"
SECRET="mcdev-$$-$RANDOM$RANDOM"
NS_MADE=0
FAILED=0
TORCH_SKIPPED=0
SUMMARY=() # "step|status|detail"
SKIPS=()   # "what: why"
BW=()      # "label|bw8|bw1M|bw64M|check"

say() { printf '== %s\n' "$*"; }
record() { SUMMARY+=("$1|$2|$3"); }
skip() {
  SKIPS+=("$1: $2")
  record "$1" skipped "$2"
  say "SKIP $1: $2"
}
fail() {
  FAILED=1
  record "$1" FAILED "$2"
  say "FAILED $1: $2"
}

# shellcheck disable=SC2317,SC2329 # called by the trap
cleanup() {
  local n
  if [ "$NS_MADE" = 1 ]; then
    for n in "$NS_A" "$NS_B"; do
      ip netns pids "$n" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
      timeout 10 ip netns del "$n" 2>/dev/null
    done
    # A veth end still in this namespace (the setup stopped before moving it).
    timeout 10 ip link del "${TAG}va" 2>/dev/null
  fi
  if [ "$KEEP" = 1 ] || [ "$FAILED" = 1 ]; then
    echo "== logs kept in $WORK"
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
trap 'echo "== interrupted"; KEEP=1; exit 130' INT TERM

# limit N: N seconds, or what is left of TOTAL_LIMIT when that is less (at least 1).
limit() {
  local left=$((TOTAL_LIMIT - SECONDS))
  if [ "$left" -lt 1 ]; then left=1; fi
  if [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}

# log_tail FILE: the last lines of FILE, indented.
log_tail() { tail -n "${2:-15}" "$1" 2>/dev/null | sed 's/^/   | /'; }

# ---------------------------------------------------------------------------------------------
# 1. build
# ---------------------------------------------------------------------------------------------
build() {
  local t0 jobs
  if [ "$DO_BUILD" = 0 ]; then
    skip build "--no-build: using $BUILD as it is"
    return
  fi
  for c in cmake cc; do
    command -v "$c" >/dev/null || {
      fail build "$c not found"
      return
    }
  done
  jobs=$(nproc 2>/dev/null || echo 2)
  t0=$SECONDS
  say "build: $BUILD_TYPE, MESHCCL_TESTS=OFF, in $BUILD (limit $(limit "$BUILD_LIMIT") s)"
  if ! timeout "$(limit "$BUILD_LIMIT")" cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" \
    -DMESHCCL_TESTS=OFF >"$WORK/configure.log" 2>&1; then
    log_tail "$WORK/configure.log"
    fail build "cmake configure failed (log above)"
    return
  fi
  if ! timeout "$(limit $((BUILD_LIMIT - (SECONDS - t0))))" cmake --build "$BUILD" -j "$jobs" \
    --target meshccl nccl-net-mesh meshccl-perf >"$WORK/build.log" 2>&1; then
    log_tail "$WORK/build.log"
    fail build "cmake --build failed or passed ${BUILD_LIMIT} s (log above)"
    return
  fi
  record build ok "$((SECONDS - t0)) s, $BUILD_TYPE, $BUILD"
}

# ---------------------------------------------------------------------------------------------
# 2. the plugin and meshccl-perf, by their built file names
# ---------------------------------------------------------------------------------------------
PLUGIN=""
PERF=""
find_outputs() {
  PLUGIN=$(find "$BUILD" -name libnccl-net-mesh.so \( -type f -o -type l \) -print 2>/dev/null |
    head -n 1)
  PERF=$(find "$BUILD" -name meshccl-perf -type f -perm -u+x -print 2>/dev/null | head -n 1)
  if [ -n "$PLUGIN" ]; then
    PLUGIN=$(readlink -f "$PLUGIN")
    record plugin ok "$PLUGIN"
  else
    fail plugin "no libnccl-net-mesh.so under $BUILD"
  fi
  [ -n "$PERF" ] || say "note: no meshccl-perf under $BUILD"
}

# ---------------------------------------------------------------------------------------------
# 3. two namespaces, one veth pair
# ---------------------------------------------------------------------------------------------
make_netns() {
  if [ "$(id -u)" != 0 ]; then
    fail netns "needs root (ip netns)"
    return 1
  fi
  command -v ip >/dev/null || {
    fail netns "ip (iproute2) not found"
    return 1
  }
  NS_MADE=1
  # The veth ends are made in the root namespace under unique names, moved, then both named
  # $IF, so NCCL_SOCKET_IFNAME and MESHCCL_MESH_IFNAME are the same in both "hosts".
  if ! {
    timeout 10 ip netns add "$NS_A" && timeout 10 ip netns add "$NS_B" &&
      timeout 10 ip link add "${TAG}va" type veth peer name "${TAG}vb" &&
      timeout 10 ip link set "${TAG}va" netns "$NS_A" &&
      timeout 10 ip link set "${TAG}vb" netns "$NS_B" &&
      timeout 10 ip -n "$NS_A" link set "${TAG}va" name "$IF" &&
      timeout 10 ip -n "$NS_B" link set "${TAG}vb" name "$IF" &&
      timeout 10 ip -n "$NS_A" addr add "$ADDR_A/24" brd + dev "$IF" &&
      timeout 10 ip -n "$NS_B" addr add "$ADDR_B/24" brd + dev "$IF" &&
      timeout 10 ip -n "$NS_A" link set lo up && timeout 10 ip -n "$NS_B" link set lo up &&
      timeout 10 ip -n "$NS_A" link set "$IF" up && timeout 10 ip -n "$NS_B" link set "$IF" up
  } >"$WORK/netns.log" 2>&1; then
    log_tail "$WORK/netns.log"
    fail netns "could not make the namespaces and the veth pair (log above)"
    return 1
  fi
  if command -v ping >/dev/null; then
    if ! timeout 10 ip netns exec "$NS_A" ping -c 1 -W 3 "$ADDR_B" >"$WORK/ping.log" 2>&1; then
      log_tail "$WORK/ping.log"
      fail netns "$ADDR_A cannot ping $ADDR_B over $IF"
      return 1
    fi
  else
    say "note: no ping here, the cable is checked by the runs only"
  fi
  record netns ok "$NS_A $ADDR_A <-> $NS_B $ADDR_B on $IF"
  return 0
}

# ---------------------------------------------------------------------------------------------
# shared: start both ranks, wait for both (bounded), per-rank logs $WORK/LABEL.<rank>.log
# ---------------------------------------------------------------------------------------------
# run_pair LABEL LIMIT VAR=VALUE... -- CMD...: rank 0 in $NS_A, rank 1 in $NS_B, each under
# `timeout LIMIT`; PAIR_RC is 0 when both exited 0.
run_pair() {
  local label=$1 limit=$2 r ns pids=() rcs=() rc
  shift 2
  local -a vars=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    vars+=("$1")
    shift
  done
  shift
  for r in 0 1; do
    if [ $r = 0 ]; then ns=$NS_A; else ns=$NS_B; fi
    ip netns exec "$ns" timeout -k 5 "$limit" env RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 \
      LOCAL_WORLD_SIZE=1 NCCL_HOSTID="mcdev-host$r" "${vars[@]}" "$@" \
      >"$WORK/$label.$r.log" 2>&1 &
    pids+=($!)
  done
  PAIR_RC=0
  for r in 0 1; do
    wait "${pids[$r]}"
    rc=$?
    rcs+=("$rc")
    [ "$rc" = 0 ] || PAIR_RC=1
  done
  PAIR_RCS="${rcs[*]}"
}

# ---------------------------------------------------------------------------------------------
# 4. meshccl-perf over the cable (host memory, meshccl's own nets)
# ---------------------------------------------------------------------------------------------
perf_run() {
  local net=$1 label size log port row usec busbw oob ok_rows=0
  local -a bw=()
  local -a netvars=(NCCL_NET="$net" NCCL_SOCKET_IFNAME="=$IF")
  [ "$net" = Mesh ] && netvars+=(MESHCCL_MESH_IFNAME="=$IF" MESHCCL_SECRET="$SECRET")
  if [ -z "$PERF" ]; then
    skip "meshccl-perf $net (host)" "meshccl-perf was not built"
    return
  fi
  say "meshccl-perf all_reduce over $IF, meshccl's $net net (host memory; limit ${PERF_LIMIT} s a size)"
  for size in 8 1048576 67108864; do
    label="meshccl-$net-$size"
    log="$WORK/$label.0.log"
    port=$((20000 + ($$ + size % 997 + ${#net}) % 10000))
    run_pair "$label" "$(limit "$PERF_LIMIT")" "${netvars[@]}" NCCL_COMM_ID="$ADDR_A:$port" \
      NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET -- "$PERF" all_reduce -b "$size" -e "$size" \
      -n 5 -w 1 -J "$WORK/$label.json"
    [ "$size" = 8 ] && grep -E 'NET/(Socket|Mesh) ?: Using|via NET' "$log" | head -n 3 |
      sed 's/^/   | /'
    if [ "$PAIR_RC" != 0 ]; then
      log_tail "$log"
      log_tail "$WORK/$label.1.log" 5
      fail "meshccl-perf $net (host)" "$size B: exit statuses $PAIR_RCS (logs above)"
      return
    fi
    # The -J report (nccl-tests' JSON): INFO lines of other threads may cut into the table.
    row=$(timeout 20 "$PYTHON" -c 'import json, sys
d = json.load(open(sys.argv[1]))
r, o = d["results"][0], d["results"][0]["out_of_place"]
print(r["size"], "%.1f" % o["time"], "%.2f" % o["bus_bw"], d["out_of_bounds"]["count"])' \
      "$WORK/$label.json" 2>&1) || row="? ? ? ?"
    read -r _ usec busbw oob <<<"$row"
    printf '   %-7s %9s B  %10s us  busbw %8s GB/s  out of bounds %s\n' "$net" "$size" "$usec" \
      "$busbw" "$oob"
    bw+=("$busbw")
    [ "$oob" = 0 ] && ok_rows=$((ok_rows + 1))
  done
  if [ "$ok_rows" != 3 ]; then
    fail "meshccl-perf $net (host)" "wrong elements (logs in $WORK)"
    return
  fi
  BW+=("meshccl $net net (host memory)|${bw[0]:-?}|${bw[1]:-?}|${bw[2]:-?}|exact")
  record "meshccl-perf $net (host)" ok "all_reduce 8 B, 1 MiB, 64 MiB, 0 wrong"
}

# ---------------------------------------------------------------------------------------------
# 5. torch.distributed NCCL on the GPU
# ---------------------------------------------------------------------------------------------
write_torch_script() {
  cat >"$WORK/allreduce.py" <<'EOF'
# One rank of the device check: all-reduce CUDA tensors of 8 B, 1 MiB and 64 MiB with
# torch.distributed's NCCL backend, check the result exactly, time it, print RESULT lines.
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
label = os.environ["MC_DEV_LABEL"]
backend = os.environ.get("MC_DEV_BACKEND", "nccl")  # gloo: the script's own check, on CPU
gpu = backend == "nccl"
if gpu:
    torch.cuda.set_device(0)
dev = torch.device("cuda", 0) if gpu else torch.device("cpu")
sync = torch.cuda.synchronize if gpu else (lambda: None)
dist.init_process_group(
    backend, init_method="tcp://%s:%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]),
    rank=rank, world_size=world, timeout=datetime.timedelta(seconds=45))
print("INFO rank %d torch %s backend %s %s" % (rank, torch.__version__, backend,
      ("nccl %s gpu %s" % (".".join(str(v) for v in torch.cuda.nccl.version()),
                           torch.cuda.get_device_name(0))) if gpu else "cpu"), flush=True)
status = 0
for nbytes in (8, 1 << 20, 64 << 20):
    n = nbytes // 4
    # Small integers in float32: every sum is exact, so the check is equality.
    base = (torch.arange(n, device=dev, dtype=torch.int32) % 1000).to(torch.float32)
    x = base * (rank + 1) + rank
    want = base * (world * (world + 1) // 2) + (world * (world - 1) // 2)
    y = x.clone()
    dist.all_reduce(y)
    sync()
    wrong = int((y != want).sum().item())
    if wrong != 0:
        status = 1
    iters = 20 if nbytes <= (1 << 20) else 5
    z = x.clone()
    for _ in range(2):
        dist.all_reduce(z)
    sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(z)
    sync()
    sec = (time.perf_counter() - t0) / iters
    algbw = nbytes / sec / 1e9
    busbw = algbw * 2 * (world - 1) / world
    print("RESULT %s rank %d bytes %d time_us %.1f algbw %.4f busbw %.4f wrong %d"
          % (label, rank, nbytes, sec * 1e6, algbw, busbw, wrong), flush=True)
dist.destroy_process_group()
sys.exit(status)
EOF
}

# torch_ready: whether this machine can run step 5; says why not.
torch_ready() {
  local out
  if [ "$DRY_RUN" = 1 ]; then
    skip "torch NCCL runs" "--dry-run"
    return 1
  fi
  if [ "$BACKEND" = gloo ]; then
    say "MC_DEV_BACKEND=gloo: torch runs on CPU with gloo, a check of this script, not of NCCL"
    timeout 60 "$PYTHON" -c 'import torch' >/dev/null 2>&1 && return 0
    skip "torch runs" "$PYTHON cannot import torch"
    return 1
  fi
  if ! command -v nvidia-smi >/dev/null; then
    skip "torch NCCL runs" "no nvidia-smi: no NVIDIA driver here"
    return 1
  fi
  if ! out=$(timeout 20 nvidia-smi --query-gpu=name,compute_mode --format=csv,noheader 2>&1) ||
    [ -z "$out" ]; then
    skip "torch NCCL runs" "nvidia-smi sees no GPU: $out"
    return 1
  fi
  say "GPU: $(head -n 1 <<<"$out")"
  if grep -q 'Exclusive' <<<"$(head -n 1 <<<"$out")"; then
    say "note: the GPU is in an exclusive compute mode: the second rank's CUDA context may be refused"
  fi
  if ! out=$(timeout 60 "$PYTHON" -c 'import torch, torch.distributed as d
assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
assert d.is_nccl_available(), "this torch has no NCCL backend"
print(torch.__version__, "nccl", ".".join(str(v) for v in torch.cuda.nccl.version()))' 2>&1); then
    skip "torch NCCL runs" "$PYTHON cannot use torch with CUDA and NCCL: $(tail -n 1 <<<"$out")"
    return 1
  fi
  say "torch $out"
  case $out in
  1.*) say "note: torch $out is not 2.x; trying anyway" ;;
  esac
  return 0
}

torch_run() {
  local net=$1 label="torch-$1" port=$((30000 + ($$ + ${#1}) % 10000)) r
  local -a netvars=(NCCL_SOCKET_IFNAME="=$IF" NCCL_IB_DISABLE=1 GLOO_SOCKET_IFNAME="$IF")
  local bw8="" bw1m="" bw64m="" wrong=0 n_results=0 bytes usec busbw nwrong
  if [ "$net" = Socket ]; then
    netvars+=(NCCL_NET=Socket)
  else
    if [ -z "$PLUGIN" ]; then
      skip "$TORCH_NAME $net" "no plugin built"
      return
    fi
    # A full path for NCCL_NET_PLUGIN; the directory on LD_LIBRARY_PATH too, for NCCL
    # versions that only try libnccl-net-<name>.so (set MC_DEV_NET_PLUGIN=mesh for those).
    netvars+=(NCCL_NET_PLUGIN="${MC_DEV_NET_PLUGIN:-$PLUGIN}" NCCL_NET=Mesh
      LD_LIBRARY_PATH="$(dirname "$PLUGIN")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      MESHCCL_MESH_IFNAME="=$IF" MESHCCL_SECRET="$SECRET")
  fi
  say "torch.distributed $BACKEND all_reduce over $IF, NCCL_NET=$net (limit $(limit "$RUN_LIMIT") s)"
  run_pair "$label" "$(limit "$RUN_LIMIT")" "${netvars[@]}" MASTER_ADDR="$ADDR_A" MASTER_PORT="$port" \
    MC_DEV_LABEL="$net" MC_DEV_BACKEND="$BACKEND" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET CUDA_VISIBLE_DEVICES=0 -- \
    "$PYTHON" "$WORK/allreduce.py"
  echo "   NCCL's lines on the net used (rank 0):"
  grep -E 'NET/Plugin|[Uu]sing network|NET/Socket : Using|NET/Mesh|via NET/|Duplicate GPU|NCCL WARN' \
    "$WORK/$label.0.log" | head -n 12 | sed 's/^/   | /'
  for r in 0 1; do
    # RESULT <net> rank R bytes B time_us T algbw A busbw W wrong N
    while read -r _ _ _ _ _ bytes _ usec _ _ _ busbw _ nwrong; do
      n_results=$((n_results + 1))
      [[ $nwrong =~ ^[0-9]+$ ]] || nwrong=1
      wrong=$((wrong + nwrong))
      [ "$r" = 0 ] || continue
      printf '   %-7s %9s B  %10s us  busbw %8s GB/s  wrong %s\n' "$net" "$bytes" "$usec" \
        "$busbw" "$nwrong"
      case $bytes in
      8) bw8=$busbw ;;
      1048576) bw1m=$busbw ;;
      67108864) bw64m=$busbw ;;
      esac
    done < <(grep '^RESULT ' "$WORK/$label.$r.log")
  done
  if grep -q 'Duplicate GPU' "$WORK/$label.0.log" "$WORK/$label.1.log"; then
    fail "$TORCH_NAME $net" "NCCL refused two ranks on one GPU despite NCCL_HOSTID (line above)"
    return
  fi
  if [ "$PAIR_RC" != 0 ] || [ "$n_results" != 6 ]; then
    log_tail "$WORK/$label.0.log"
    log_tail "$WORK/$label.1.log" 8
    fail "$TORCH_NAME $net" "exit statuses $PAIR_RCS, $n_results of 6 results (logs above)"
    return
  fi
  if [ "$wrong" != 0 ]; then
    fail "$TORCH_NAME $net" "$wrong wrong elements"
    return
  fi
  if [ "$BACKEND" = nccl ] && [ "$net" = Mesh ] && ! grep -qE 'NET/Mesh|[Uu]sing network Mesh' "$WORK/$label.0.log"; then
    fail "$TORCH_NAME $net" "NCCL's log does not show the Mesh net in use"
    return
  fi
  if [ "$BACKEND" = nccl ]; then
    BW+=("torch NCCL $net net (GPU)|$bw8|$bw1m|$bw64m|exact")
  else
    BW+=("torch gloo, $net env (CPU)|$bw8|$bw1m|$bw64m|exact")
  fi
  record "$TORCH_NAME $net" ok "8 B, 1 MiB, 64 MiB exact on both ranks"
}

# ---------------------------------------------------------------------------------------------
summary() {
  local s b
  local -a f
  echo
  echo "== summary"
  printf '%-28s %-8s %s\n' step status detail
  for s in "${SUMMARY[@]}"; do
    IFS='|' read -r -a f <<<"$s"
    printf '%-28s %-8s %s\n' "${f[0]}" "${f[1]}" "${f[2]}"
  done
  if [ ${#BW[@]} -gt 0 ]; then
    echo
    printf '%-32s %12s %12s %12s  %s\n' "busbw, GB/s (rank 0)" "8 B" "1 MiB" "64 MiB" result
    for b in "${BW[@]}"; do
      IFS='|' read -r -a f <<<"$b"
      printf '%-32s %12s %12s %12s  %s\n' "${f[0]}" "${f[1]}" "${f[2]}" "${f[3]}" "${f[4]}"
    done
    if [[ ${BW[*]} == *GPU* ]]; then
      echo "(both GPU ranks share one GPU, time-sliced: the figures show the plumbing, not a link)"
    fi
  fi
  if [ ${#SKIPS[@]} -gt 0 ]; then
    echo
    echo "skipped:"
    for s in "${SKIPS[@]}"; do echo "  $s"; done
  fi
}

T0=$SECONDS
say "meshccl device check: torch NCCL over a veth cable, Socket vs Mesh plugin$([ "$DRY_RUN" = 1 ] && echo ' (dry run)')"
build
if [ "$FAILED" = 0 ]; then
  find_outputs
fi
if [ "$FAILED" = 0 ] && make_netns; then
  perf_run Socket
  perf_run Mesh
  if torch_ready; then
    write_torch_script
    torch_run Socket
    torch_run Mesh
  else
    TORCH_SKIPPED=1
  fi
fi
record total "$([ "$FAILED" = 0 ] && echo ok || echo FAILED)" "$((SECONDS - T0)) s"
summary
if [ "$FAILED" != 0 ]; then
  exit 1
fi
if [ "$TORCH_SKIPPED" = 1 ] && [ "$DRY_RUN" = 0 ]; then
  exit 77
fi
exit 0
