#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# External net plugins end to end: 3 ranks, each its own NCCL_HOSTID "host"
# (so every connection is NET), with NCCL_NET_PLUGIN naming the fake
# third-party plugin of each ABI version in turn (tests/plugins/fake_net.c:
# TCP over loopback): all-reduce, all-gather, broadcast, reduce-scatter and
# send/recv give exact integer results (mp_coll), and every rank's log says
# which plugin, version and file it used. Also: a plugin by name through
# LD_LIBRARY_PATH, a plugin whose test() never reports sizes, plugins whose
# connect and accept wait for each other or block (also with the receive
# first in a group, and one-shot all-reduces on one host), a plugin whose
# test() blocks in the proxy thread failing the collective after
# MESHCCL_NET_TIMEOUT (or ncclCommAbort ending it sooner), and
# NCCL_NET_PLUGIN naming nothing loadable failing init
# with the reason instead of falling back to sockets.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll mp_net_timeout mp_abort_wait
PLUGINS="$MC_BUILD/tests/plugins"
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET

COLLS=allreduce,allgather,broadcast,reducescatter,sendrecv
three_hosts() { # LOG ENV... -- runs mp_coll ($COLLS) on 3 "hosts"
  local log=$1
  shift
  env "$@" timeout 120 "$RUN" -n 3 bash -c 'NCCL_HOSTID=h$RANK exec "$0" "$@"' "$T/mp_coll" \
    --colls "$COLLS" --types int32,uint8 --ops sum,max --sizes 0,1,7,4099,262147 >"$log" 2>&1
}

for v in 6 7 8 9 10 11 12; do
  lib="$PLUGINS/libnccl-net-fake$v.so"
  three_hosts "$TMP/v$v.out" NCCL_NET_PLUGIN="$lib"
  expect_success "v$v plugin by path: every collective exact on 3 hosts" "$?" "$TMP/v$v.out"
  expect_eq "v$v: each rank logs the plugin it loaded" \
    "$(grep -c "NET/Plugin: Loaded net plugin Fake (v$v) from $lib, symbol ncclNetPlugin_v$v" "$TMP/v$v.out")" 3
  expect_eq "v$v: each rank uses it" \
    "$(grep -c "Using network Fake (net plugin v$v, $lib)" "$TMP/v$v.out")" 3
  expect_grep "v$v: connections go through the plugin" "$TMP/v$v.out" 'via NET/Fake/[0-9]+$'
  expect_eq "v$v: every NET connection does" "$(grep -c 'via NET/Fake' "$TMP/v$v.out")" \
    "$(grep -c 'via NET' "$TMP/v$v.out")"
done

# A plugin that never fills test()'s sizes (NCCL copes; so must the receivers).
three_hosts "$TMP/nosizes.out" NCCL_NET_PLUGIN="$PLUGINS/libnccl-net-fake12.so" FAKE_NET_NO_SIZES=1
expect_success "a plugin that reports no sizes: every collective exact" "$?" "$TMP/nosizes.out"
expect_grep "... and it is said once" "$TMP/nosizes.out" \
  'test\(\) does not report sizes; receivers go by the sizes they expect'

# Plugins whose connect and accept need the peer to call in: a handshake
# (neither completes until the other side was called), and a plugin that
# behaves as nccl-fastsocket does (connect returns at once while the
# connection is made, accept blocks until a connector arrives, the first
# test() of a send blocks until the acceptor acked it; no sizes reported):
# init and the connections made at first use (trees) complete.
three_hosts "$TMP/handshake.out" NCCL_NET_PLUGIN="$PLUGINS/libnccl-net-fake6.so" FAKE_NET_HANDSHAKE=1
expect_success "a plugin whose connect and accept wait for each other: every collective exact" \
  "$?" "$TMP/handshake.out"
three_hosts "$TMP/blocking.out" NCCL_NET_PLUGIN="$PLUGINS/libnccl-net-fake6.so" FAKE_NET_BLOCKING=1 \
  FAKE_NET_NO_SIZES=1
expect_success "a plugin whose accept blocks (as nccl-fastsocket's): every collective exact" \
  "$?" "$TMP/blocking.out"
# Connections at first use whose receive comes first on every rank (a group
# that posts its receive before its send): each rank must call connect for
# its sends before it blocks in accept, or every rank waits in accept for a
# connect its peer makes only after its own accept (the plugin's blocking
# accept is out of reach of MESHCCL_NET_TIMEOUT). Bounded by the fake's 60 s
# accept and the 120 s timeout; MESHCCL_NET_TIMEOUT=5 must not be needed.
COLLS=recvsend,sendrecv,alltoall,allreduce three_hosts "$TMP/recvfirst.out" \
  NCCL_NET_PLUGIN="$PLUGINS/libnccl-net-fake6.so" FAKE_NET_BLOCKING=1 FAKE_NET_NO_SIZES=1 \
  MESHCCL_NET_TIMEOUT=5
expect_success "a blocking accept with the receive first in the group: exact, no deadlock" \
  "$?" "$TMP/recvfirst.out"
expect_eq "... and the plugin's request rules held (posting order, 16 outstanding)" \
  "$(grep -Ec 'invalid request|unable to allocate requests|no connector within' "$TMP/recvfirst.out")" 0

# One host with P2P and SHM off: every connection is NET, and small
# all-reduces take the one-shot algorithm, whose connections at first use
# are a receive then a send with every peer, through the blocking plugin
# that reports no sizes (the receivers go by theirs; the signature in each
# step's header still catches mismatched calls).
env NCCL_NET_PLUGIN="$PLUGINS/libnccl-net-fake6.so" FAKE_NET_BLOCKING=1 FAKE_NET_NO_SIZES=1 \
  NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 MESHCCL_NET_TIMEOUT=5 NCCL_DEBUG_SUBSYS=INIT,NET,TUNING \
  timeout 120 "$RUN" -n 3 "$T/mp_coll" --colls allreduce --types int32,float --ops sum,max \
  --sizes 0,1,7,4099 >"$TMP/oneshot.out" 2>&1
expect_success "one-shot all-reduce through a blocking plugin without sizes: exact" "$?" \
  "$TMP/oneshot.out"
expect_grep "... and it ran one-shot" "$TMP/oneshot.out" 'Algo 7 .*OneShot: small all-reduce on one host'
expect_eq "... over NET only" "$(grep -Ec 'via (P2P|SHM)' "$TMP/oneshot.out")" 0

# A plugin call that blocks in the proxy thread (nccl-fastsocket's first
# test() of a send waits, forever, until the peer accepted the connection):
# the watchdog runs in that thread, so the rank itself fails the collective
# after MESHCCL_NET_TIMEOUT, naming the call, instead of waiting on; the
# next call says the same and ncclCommAbort returns (mp_net_timeout exits 3),
# with a v6 plugin and a v12 one (whose context is then not finalized).
for v in 6 12; do
  SECONDS=0
  env NCCL_NET_PLUGIN="$PLUGINS/libnccl-net-fake$v.so" MESHCCL_NET_TIMEOUT=3 NCCL_DEBUG=WARN \
    timeout 100 "$RUN" -n 3 bash -c \
    'export NCCL_HOSTID=h$RANK; [ "$RANK" = 1 ] && export FAKE_NET_HANG_TEST=1; exec "$0" "$@"' \
    "$T/mp_net_timeout" 3 4099 >"$TMP/hang$v.out" 2>&1
  rc=$?
  expect_eq "v$v: a plugin's test() that blocks fails the job" "$rc" 3
  expect_le "... within MESHCCL_NET_TIMEOUT and some (s)" "$SECONDS" 30
  expect_grep "... the rank whose proxy is blocked says so itself, then aborts" "$TMP/hang$v.out" \
    "^(\[1\] )?rank 1: remote process exited or there was a network error after 0 all-reduces .*\(async 6, again 6\): NET/Fake: the proxy thread has been inside the plugin's test\(\) on the connection to rank [02] for [0-9.]+ s while a collective waited \(MESHCCL_NET_TIMEOUT=3 s\)"
done

# The same blocked call, and ncclCommAbort from a second thread of every rank
# 2 s into the all-reduce, long before MESHCCL_NET_TIMEOUT: the all-reduce
# fails and the abort returns on every rank (the blocked rank abandons its
# proxy thread instead of waiting for its lock).
SECONDS=0
env NCCL_NET_PLUGIN="$PLUGINS/libnccl-net-fake6.so" MESHCCL_NET_TIMEOUT=60 NCCL_DEBUG=WARN \
  timeout 100 "$RUN" -n 3 bash -c \
  'export NCCL_HOSTID=h$RANK; [ "$RANK" = 1 ] && export FAKE_NET_HANG_TEST=1; exec "$0" "$@"' \
  "$T/mp_abort_wait" 2000 >"$TMP/abort.out" 2>&1
expect_success "ncclCommAbort ends a wait on a blocked plugin call" "$?" "$TMP/abort.out"
expect_le "... within seconds (s)" "$SECONDS" 20
expect_grep "... the blocked rank's all-reduce and abort return" "$TMP/abort.out" \
  '^(\[1\] )?rank 1: all-reduce returned [1-9][0-9]* after [2-4]\.[0-9]+ s; abort returned 0 after 0\.[0-9]+ s'
expect_grep "... naming the abandoned call" "$TMP/abort.out" \
  "NET/Fake: the proxy thread is blocked inside the plugin's test\(\) on the connection to rank [02] \(aborted\)"

three_hosts "$TMP/name.out" NCCL_NET_PLUGIN=fake9 LD_LIBRARY_PATH="$PLUGINS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
expect_success "plugin by name through LD_LIBRARY_PATH" "$?" "$TMP/name.out"
expect_eq "by name: libnccl-net-fake9.so loaded on every rank" \
  "$(grep -c "Loaded net plugin Fake (v9) from .*/libnccl-net-fake9.so" "$TMP/name.out")" 3

timeout 60 env NCCL_NET_PLUGIN=nosuch "$RUN" -n 3 bash -c 'NCCL_HOSTID=h$RANK exec "$0" "$@"' \
  "$T/mp_coll" --colls allreduce --types int32 --sizes 1 >"$TMP/nosuch.out" 2>&1
expect_eq "a plugin that cannot be loaded fails init" "$?" 1
expect_grep "... naming what was asked and why" "$TMP/nosuch.out" \
  'NCCL_NET_PLUGIN=nosuch: no plugin could be loaded: nosuch: cannot open shared object file'
mp_finish
