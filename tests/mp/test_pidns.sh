#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Ranks of one host in different PID namespaces, as containers started with
# docker --ipc=host --net=host are: one /dev/shm, one network, one host name
# and boot id, so one host to meshccl, but a peer's pid is not that process
# here. Each rank is started by hand (the environment a launcher gives it,
# as torchrun does) under unshare --pid --fork --mount-proc, sharing /dev/shm
# and the network. The cases:
#   1. two ranks, each in its own PID namespace: meshccl-perf -R 2 (symmetric
#      windows) all-reduce, all-gather and reduce-scatter give checked
#      results; the symmetric algorithm is not chosen; each rank says once
#      at INFO that its peer is in another PID namespace;
#   2. the same with MESHCCL_P2P_CMA=1: no P2P/CMA connection (SHM instead);
#   3. a rank in its namespace killed (SIGKILL) mid-run: the other fails
#      within MESHCCL_NET_TIMEOUT (and a margin), naming it, no hang;
#   4. rank 0 on the host, rank 1 in a namespace: the all-reduce succeeds.
# Skips (exit 77) where unshare is refused (not root, no user namespaces),
# unless CI=true.
# shellcheck shell=bash source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs
PERF="$MC_BUILD/bin/meshccl-perf"
NS=(unshare --pid --fork --kill-child --mount-proc)

if ! "${NS[@]}" true >"$TMP/unshare.out" 2>&1; then
  skip_or_fail "unshare --pid --fork --mount-proc is refused here: $(head -n 1 "$TMP/unshare.out")"
fi

# start NAME RANK N PORT IN_NS CMD...: rank RANK of N (root at 127.0.0.1:PORT)
# in the background, in a PID namespace of its own when IN_NS is 1.
start() {
  local name=$1 rank=$2 n=$3 port=$4 in_ns=$5
  shift 5
  local ns=()
  [ "$in_ns" = 1 ] && ns=("${NS[@]}")
  bg "$name" env RANK="$rank" WORLD_SIZE="$n" LOCAL_RANK="$rank" LOCAL_WORLD_SIZE="$n" \
    NODE_RANK=0 NCCL_COMM_ID="127.0.0.1:$port" MASTER_ADDR=127.0.0.1 \
    MASTER_PORT="$(free_port)" "${ns[@]}" "$@"
}

# pair CASE NS0 NS1 CMD...: ranks 0 and 1 of CMD, each in a namespace of its
# own or not; waits for both (120 s guard: sanitizer builds): RC_CASE_0, RC_CASE_1.
pair() {
  local name=$1 ns0=$2 ns1=$3 port
  shift 3
  port=$(free_port)
  T0_MS=$(now_ms)
  start "${name}_0" 0 2 "$port" "$ns0" "$@"
  start "${name}_1" 1 2 "$port" "$ns1" "$@"
  wait_bg "${name}_0" 120
  wait_bg "${name}_1" 120
}

export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING,P2P,SHM
shm_snapshot

# --- 1. two PID namespaces: symmetric windows, results checked ---------------
for coll in all_reduce all_gather reduce_scatter; do
  pair "sym_$coll" 1 1 "$PERF" "$coll" -b 8 -e 1M -f 16 -R 2 -c 1
  for r in 0 1; do
    rcv="RC_sym_${coll}_$r"
    expect_success "two PID namespaces, $coll -R 2, rank $r: exit 0" "${!rcv}" \
      "$TMP/sym_${coll}_$r.out"
  done
  expect_grep "two PID namespaces, $coll -R 2: no wrong element (meshccl-perf -c 1)" \
    "$TMP/sym_${coll}_0.out" '^# Out of bounds values : 0 OK'
  if grep -Eq -- '-> Algo 9 ' "$TMP/sym_${coll}_0.out" "$TMP/sym_${coll}_1.out"; then
    not_ok "two PID namespaces, $coll: the symmetric algorithm (Algo 9) is never chosen"
  else
    ok "two PID namespaces, $coll: the symmetric algorithm (Algo 9) is never chosen"
  fi
done
expect_grep "two PID namespaces: rank 0 says rank 1 is in another PID namespace (INFO)" \
  "$TMP/sym_all_reduce_0.out" \
  'NCCL INFO rank 1 \(pid 1\) is in another PID namespace than rank 0 \(pid 1\): no CMA, no symmetric mapping, no pid liveness'
expect_grep "two PID namespaces: rank 1 says it of rank 0 (INFO)" "$TMP/sym_all_reduce_1.out" \
  'NCCL INFO rank 0 \(pid 1\) is in another PID namespace than rank 1 \(pid 1\)'
expect_eq "two PID namespaces: said once per peer" \
  "$(grep -c 'is in another PID namespace' "$TMP/sym_all_reduce_0.out")" 1

# --- 2. MESHCCL_P2P_CMA=1: no cross-memory attach to another namespace --------
MESHCCL_P2P_CMA=1 pair cma 1 1 "$PERF" all_reduce -b 8 -e 1M -f 16 -R 2 -c 1
for r in 0 1; do
  rcv="RC_cma_$r"
  expect_success "MESHCCL_P2P_CMA=1, two PID namespaces, rank $r: exit 0" "${!rcv}" \
    "$TMP/cma_$r.out"
done
expect_grep "MESHCCL_P2P_CMA=1: no wrong element" "$TMP/cma_0.out" \
  '^# Out of bounds values : 0 OK'
if grep -q 'via P2P/CMA' "$TMP/cma_0.out" "$TMP/cma_1.out"; then
  not_ok "MESHCCL_P2P_CMA=1, two PID namespaces: no P2P/CMA connection"
  grep 'via P2P/CMA' "$TMP/cma_0.out" | head -n 3 | sed 's/^/#   | /'
else
  ok "MESHCCL_P2P_CMA=1, two PID namespaces: no P2P/CMA connection"
fi
expect_grep "MESHCCL_P2P_CMA=1, two PID namespaces: the ranks talk over SHM" "$TMP/cma_0.out" \
  'via SHM/'

# --- 3. a rank killed in its namespace: the other fails within the timeout ---
timeout_s=3
port=$(free_port)
T0_MS=$(now_ms)
for r in 0 1; do # -N 0: the sweep forever
  MESHCCL_NET_TIMEOUT=$timeout_s NCCL_DEBUG_SUBSYS=INIT start "kill_$r" "$r" 2 "$port" 1 \
    "$PERF" all_reduce -b 1M -e 1M -N 0 -c 0 -R 2
done
victim=""
for _ in $(seq 1 600); do # until both ranks are initialized (60 s at most)
  if grep -q 'Init COMPLETE' "$TMP/kill_0.out" 2>/dev/null &&
    grep -q 'Init COMPLETE' "$TMP/kill_1.out" 2>/dev/null; then
    sleep 1 # collectives running (their output is buffered)
    victim=$(pgrep -P "$PID_kill_1" | head -n 1)
    break
  fi
  sleep 0.1
done
if [ -z "$victim" ]; then
  not_ok "kill: both ranks initialized, rank 1 in its namespace"
  show "$TMP/kill_1.out"
else
  kill -KILL "$victim"
  T0_MS=$(now_ms)
  wait_bg kill_0 $((timeout_s + 30))
  wait_bg kill_1 10
  if [ "$RC_kill_0" != hang ] && [ "$RC_kill_0" != 0 ]; then
    ok "kill: rank 0 fails (exit $RC_kill_0), no hang"
  else
    not_ok "kill: rank 0 fails (exit $RC_kill_0), no hang"
    show "$TMP/kill_0.out"
  fi
  expect_le "kill: rank 0 fails within MESHCCL_NET_TIMEOUT=$timeout_s s and 10 s more ($MS_kill_0 ms)" \
    "$MS_kill_0" $(((timeout_s + 10) * 1000))
  # The kill lands in a measured all-reduce or in the one-double all-reduce
  # that gathers the timings between sizes.
  expect_grep "kill: rank 0 names rank 1" "$TMP/kill_0.out" \
    '(all_reduce|ncclAllReduce \(timing\)) failed: .*(rank 1 \(pid 1 on [^,]*, in another PID namespace\) moved nothing|connection (to|from) rank 1 .*failed)'
fi

# --- 4. rank 0 on the host, rank 1 in a PID namespace ------------------------
pair mixed 0 1 "$PERF" all_reduce -b 8 -e 1M -f 16 -R 2 -c 1
for r in 0 1; do
  rcv="RC_mixed_$r"
  expect_success "rank 0 on the host, rank 1 in a PID namespace, rank $r: exit 0" "${!rcv}" \
    "$TMP/mixed_$r.out"
done
expect_grep "host and namespace: no wrong element" "$TMP/mixed_0.out" \
  '^# Out of bounds values : 0 OK'
expect_grep "host and namespace: rank 0 says rank 1 is in another PID namespace" \
  "$TMP/mixed_0.out" 'NCCL INFO rank 1 \(pid 1\) is in another PID namespace than rank 0'

expect_eq "nothing left in /dev/shm" "$(shm_orphans | tr '\n' ' ')" ""
mp_finish
