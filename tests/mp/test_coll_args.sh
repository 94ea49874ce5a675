#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Bad arguments to the collectives: NCCL's codes and a message naming the
# argument, at once (mp_coll_args.c); a bad call inside a group fails the
# group and nothing of it runs.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll_args
timeout 60 "$T/mp_coll_args" >"$TMP/out" 2>&1
expect_success "every bad argument gets NCCL's code and a message naming it" "$?" "$TMP/out"
expect_grep "NULL sendbuff: invalid argument" "$TMP/out" \
  '^AllReduce\(NULL sendbuff\) -> invalid argument.*AllReduce : sendbuff argument is NULL'
expect_grep "a group with a bad call fails" "$TMP/out" \
  '^GroupEnd after a bad call -> invalid argument'
mp_finish
