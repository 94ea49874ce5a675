#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# P2P between processes of one host (src/transport/tp_p2p.c, tp_cma.c):
#   1. MESHCCL_P2P_CMA unset (auto): the host's first local rank measures the
#      probe, the others take its figures (one probe a host), and every rank
#      logs them at NCCL_DEBUG_SUBSYS=TUNING (FIFO hop and process_vm_readv
#      rates per step size, and the decision; the same on every rank, naming
#      the rank that measured them), and its connections follow the decision: P2P/CMA
#      where single copy wins at some step size, else SHM with the reason on the
#      Transport line; results checked either way (meshccl-perf -c 1);
#   2. single copy forced (MESHCCL_P2P_CMA=1) and a threshold inside the
#      slot (MESHCCL_P2P_CMA_BYTES=65536 with 128 KiB slots: an operation's
#      full steps go by single copy, its short last ones and the partial
#      reductions through the slots): every type x every op x in and out of
#      place (in place: input and output overlap exactly), element counts
#      0, 1, 7, 1000, 4099, 40000, 262147 (sizes of no alignment), buffers
#      at odd addresses (mp_coll --offset 3), 2 and 3 processes;
#   3. cross-memory attach refused: two ranks of user nobody in different
#      groups (the kernel's ptrace access check wants both ids equal, so
#      process_vm_readv fails with EPERM, as between users; the /dev/shm
#      segments stay the user's own), single copy asked for (=1): each rank
#      says once at INFO that the kernel refuses it, naming the peer, the
#      connections are SHM and the results right. Needs root (setpriv); else
#      a skip saying so (a failure under CI=true);
#   4. nothing left in /dev/shm.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll
PERF="$MC_BUILD/bin/meshccl-perf"
ALL_TYPES=int8,uint8,int32,uint32,int64,uint64,half,float,double,bfloat16
SIZES=0,1,7,1000,4099,40000,262147
shm_snapshot

# --- 1. auto ---------------------------------------------------------------
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING,INIT,P2P timeout 120 "$RUN" -n 2 "$PERF" all_reduce \
  -b 64K -e 4M -f 4 -w 1 -n 2 -c 1 >"$TMP/auto.out" 2>&1
expect_success "auto: meshccl-perf all_reduce, 2 processes, exit 0" "$?" "$TMP/auto.out"
expect_grep "auto: no wrong element" "$TMP/auto.out" '^\[0\] # Out of bounds values : 0 OK'
expect_eq "auto: rank 0 measures the host's probe and logs it once (TUNING)" \
  "$(grep -c "^\[0\] .*NCCL INFO P2P/CMA probe ([0-9.]* ms): per step size, GB/s: FIFO hop" \
    "$TMP/auto.out")" 1
expect_eq "auto: rank 1 takes rank 0's figures and logs them once (TUNING)" \
  "$(grep -c "^\[1\] .*NCCL INFO P2P/CMA probe (rank 0's, for this host's ranks): per step size, GB/s: FIFO hop" \
    "$TMP/auto.out")" 1
expect_eq "auto: both ranks log the same figures and decision" \
  "$(grep "NCCL INFO P2P/CMA probe" "$TMP/auto.out" | sed -E 's/.*\): per step size/per step size/' |
    sort -u | wc -l)" 1
if grep -q 'the FIFO is faster at every size' "$TMP/auto.out"; then
  echo "# this host: the FIFO wins at every step size"
  expect_grep "auto, FIFO faster here: the connections are SHM, and the line says why" \
    "$TMP/auto.out" \
    'Transport: rank 1 -> rank 0 uses SHM .*this host.s probe found the FIFO faster than cross-memory attach at every step size'
  if grep -q 'via P2P/CMA' "$TMP/auto.out"; then
    not_ok "auto, FIFO faster here: no P2P/CMA connection"
  else
    ok "auto, FIFO faster here: no P2P/CMA connection"
  fi
else
  echo "# this host: single copy wins from some step size"
  expect_grep "auto, single copy wins here: the probe names the step size" "$TMP/auto.out" \
    'single copy \(the receiver reads the sender.s buffer\) for steps of [0-9]+ bytes and more'
  expect_grep "auto, single copy wins here: P2P/CMA connections" "$TMP/auto.out" \
    'Channel 00/0 : 0\[0\] -> 1\[1\] via P2P/CMA'
fi

# --- 2. correctness of single copy -------------------------------------------
for n in 2 3; do
  MESHCCL_P2P_CMA=1 run_case "forced, $n processes, all types and ops, odd addresses" 300 \
    "$RUN" -n "$n" "$T/mp_coll" --types $ALL_TYPES --sizes $SIZES --offset 3
  MESHCCL_P2P_CMA_BYTES=65536 run_case "threshold 64 KiB, $n processes, all types and ops" 300 \
    "$RUN" -n "$n" "$T/mp_coll" --types $ALL_TYPES --sizes $SIZES --offset 1
done
MESHCCL_P2P_CMA_BYTES=65536 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING,INIT,P2P timeout 120 \
  "$RUN" -n 2 "$PERF" all_reduce -b 4 -e 4M -f 8 -w 1 -n 2 -c 1 >"$TMP/thr.out" 2>&1
expect_success "threshold 64 KiB: meshccl-perf all_reduce 4 B .. 4 MiB, exit 0" "$?" \
  "$TMP/thr.out"
expect_grep "threshold 64 KiB: no wrong element" "$TMP/thr.out" '^\[0\] # Out of bounds values : 0 OK'
expect_grep "threshold 64 KiB: said at TUNING, no probe" "$TMP/thr.out" \
  'P2P/CMA: single copy for steps of 65536 bytes and more, the FIFO below \(MESHCCL_P2P_CMA_BYTES; no probe\)'
expect_grep "threshold 64 KiB: P2P/CMA connections" "$TMP/thr.out" \
  'Channel 00/0 : 0\[0\] -> 1\[1\] via P2P/CMA'

# --- 3. cross-memory attach refused ------------------------------------------
refused() {
  local port
  if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
    skip_or_fail "cross-memory attach refused: needs root and setpriv to run ranks as nobody in two groups"
  fi
  if ! setpriv --reuid=65534 --regid=65533 --clear-groups "$PERF" --help >"$TMP/setpriv.out" 2>&1; then
    skip_or_fail "cross-memory attach refused: user nobody cannot run $PERF: $(head -n 1 "$TMP/setpriv.out")"
  fi
  port=$(free_port)
  T0_MS=$(now_ms)
  for r in 0 1; do
    bg "refused_$r" env RANK="$r" WORLD_SIZE=2 LOCAL_RANK="$r" LOCAL_WORLD_SIZE=2 NODE_RANK=0 \
      NCCL_COMM_ID="127.0.0.1:$port" MASTER_ADDR=127.0.0.1 MASTER_PORT="$(free_port)" \
      MESHCCL_P2P_CMA=1 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,P2P,SHM \
      setpriv --reuid=65534 --regid=$((65533 + r)) --clear-groups \
      "$PERF" all_reduce -b 8 -e 8M -f 16 -w 1 -n 2 -c 1
  done
  wait_bg refused_0 120
  wait_bg refused_1 120
  for r in 0 1; do
    local rcv="RC_refused_$r" peer=$((1 - r))
    expect_success "CMA refused, rank $r: exit 0" "${!rcv}" "$TMP/refused_$r.out"
    expect_eq "CMA refused, rank $r: says once that the kernel refuses it, naming rank $peer" \
      "$(grep -c "NCCL INFO P2P: the kernel refuses cross-memory attach to rank $peer (pid [0-9]*): Operation not permitted; using SHM" \
        "$TMP/refused_$r.out")" 1
  done
  expect_grep "CMA refused: no wrong element" "$TMP/refused_0.out" '^# Out of bounds values : 0 OK'
  expect_grep "CMA refused: the connections are SHM" "$TMP/refused_0.out" \
    'Channel 00/0 : 0\[0\] -> 1\[1\] via SHM'
  if grep -q 'via P2P' "$TMP/refused_0.out" "$TMP/refused_1.out"; then
    not_ok "CMA refused: no P2P connection"
  else
    ok "CMA refused: no P2P connection"
  fi
}
refused

expect_eq "nothing left in /dev/shm" "$(shm_orphans | wc -l)" 0
mp_finish
