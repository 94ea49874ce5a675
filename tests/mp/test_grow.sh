#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# ncclCommGrow (NCCL 2.28's contract) in meshccl-run jobs: a parent of the
# first ranks grows to the whole job, 2 -> 4 and 3 -> 5 ranks.
#  - every collective bit-exact on the grown communicator, and the parent
#    still all-reduces afterwards (mp_coll --grow);
#  - ranks kept and given, bad arguments of existing and new ranks, a grow
#    without an id, a second id, the id consumed (mp_grow).
# Nothing is left in /dev/shm.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll mp_grow

shm_snapshot
COLL_ARGS=(--types int8,int32,float,double,bfloat16 --ops sum,max,premulsum --sizes 0,1,7,4099,65539)

for cfg in "4 2" "5 3"; do
  set -- $cfg
  timeout 120 "$RUN" -n "$1" "$T/mp_coll" --grow "$2" "${COLL_ARGS[@]}" >"$TMP/out" 2>&1
  expect_success "grow $2 -> $1 ranks: every collective bit-exact, parent still works" "$?" \
    "$TMP/out"
  expect_eq "grow $2 -> $1 ranks: every rank ok" "$(grep -c '] ok [0-9]* checks$' "$TMP/out")" "$1"
  timeout 60 "$RUN" -n "$1" "$T/mp_grow" "$2" >"$TMP/out" 2>&1
  expect_success "grow $2 -> $1 ranks: contract and argument errors, exit 0" "$?" "$TMP/out"
  expect_eq "grow $2 -> $1 ranks: contract and argument errors, every rank ok" \
    "$(grep -c '] rank [0-9]*: ok$' "$TMP/out")" "$1"
done

expect_eq "nothing left in /dev/shm" "$(shm_orphans | wc -l)" 0
mp_finish
