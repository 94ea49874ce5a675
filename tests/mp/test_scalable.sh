#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ncclCommInitRankScalable with several bootstrap roots (NCCL's multi-root
# bootstrap: rank r registers with root rootIdFromRank(r), each root's last
# rank learns its ring neighbour from the next group's first rank):
#  - 2 and 3 roots over 4 to 8 ranks, and one root per rank: every
#    collective bit-exact on the new communicator (mp_coll --scalable);
#  - bad arguments, local and immediate (mp_scalable args);
#  - one rank passing nId 1 instead of 2, or nranks + 1: every rank fails,
#    naming what differs;
#  - a root nobody listens at: every rank fails within the init timeout,
#    naming the root's address.
# Nothing is left in /dev/shm.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll mp_scalable

shm_snapshot
COLL_ARGS=(--types int8,int32,float,double,bfloat16 --ops sum,max,premulsum --sizes 0,1,7,4099,65539)

for cfg in "4 2" "5 3" "8 2" "8 3" "6 6"; do
  set -- $cfg
  timeout 120 "$RUN" -n "$1" "$T/mp_coll" --scalable "$2" "${COLL_ARGS[@]}" >"$TMP/out" 2>&1
  expect_success "$2 roots, $1 ranks: every collective bit-exact, exit 0" "$?" "$TMP/out"
  expect_eq "$2 roots, $1 ranks: every rank ok" "$(grep -c '] ok [0-9]* checks$' "$TMP/out")" "$1"
done

timeout 60 "$RUN" -n 4 "$T/mp_scalable" args 2 >"$TMP/out" 2>&1
expect_success "bad arguments (nId 0, nId > nranks, NULL ids, an id twice, bad rank): exit 0" \
  "$?" "$TMP/out"
expect_eq "bad arguments: every rank ok" "$(grep -c '] rank [0-9]*: ok$' "$TMP/out")" 4

for bad in 0 1 2 3; do
  MESHCCL_INIT_TIMEOUT=15 timeout 60 "$RUN" -n 4 "$T/mp_scalable" nid 2 "$bad" >"$TMP/out" 2>&1
  expect_eq "rank $bad passes nId 1 of 2: every rank fails naming nId" \
    "$(grep -c '] rank [0-9]*: ok$' "$TMP/out")" 4
  [ "$(grep -c '] rank [0-9]*: ok$' "$TMP/out")" = 4 ] || show "$TMP/out"
  expect_grep "rank $bad passes nId 1 of 2: the message names both nIds" "$TMP/out" \
    "passed nId 1, but rank [0-9]+ .*passed nId 2|passed nId 2, but rank [0-9]+ .*passed nId 1"
done

for bad in 0 3; do
  MESHCCL_INIT_TIMEOUT=15 timeout 60 "$RUN" -n 4 "$T/mp_scalable" nranks 2 "$bad" >"$TMP/out" 2>&1
  expect_eq "rank $bad passes nranks 5 of 4: every rank fails naming both nranks" \
    "$(grep -c '] rank [0-9]*: ok$' "$TMP/out")" 4
  [ "$(grep -c '] rank [0-9]*: ok$' "$TMP/out")" = 4 ] || show "$TMP/out"
done

port=$(free_port)
t0=$(now_ms)
MESHCCL_INIT_TIMEOUT=4 timeout 60 "$RUN" -n 5 "$T/mp_scalable" unreach 2 "$port" >"$TMP/out" 2>&1
expect_eq "root 1 of 2 unreachable: every rank fails naming 127.0.0.1<$port> ($(($(now_ms) - t0)) ms)" \
  "$(grep -c '] rank [0-9]*: ok$' "$TMP/out")" 5
[ "$(grep -c '] rank [0-9]*: ok$' "$TMP/out")" = 5 ] || show "$TMP/out"

expect_eq "nothing left in /dev/shm" "$(shm_orphans | wc -l)" 0
mp_finish
