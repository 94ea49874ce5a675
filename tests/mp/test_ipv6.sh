#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Bootstrap over IPv6: a root at [::1] (NCCL_COMM_ID), 3 ranks through
# meshccl-run; the bootstrap interface is the IPv6 loopback. And a bad
# NCCL_COMM_ID is refused at once with a message naming the value.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_init

if ! python3 -c 'import socket; s=socket.socket(socket.AF_INET6); s.bind(("::1", 0))' 2>/dev/null; then
  skip_or_fail "no IPv6 loopback on this machine"
fi
port=$(free_port)
NCCL_COMM_ID="[::1]:$port" timeout 60 "$RUN" -n 3 "$MC_BUILD/bin/meshccl-hello" >"$TMP/out" 2>&1
rc=$?
expect_success "3 ranks with NCCL_COMM_ID=[::1]:$port: exit 0" "$rc" "$TMP/out"
expect_eq "every rank bootstraps over lo ::1" "$(grep -cE '^\[0\] +[0-9]+ .* lo ::1 ' "$TMP/out")" 3

NCCL_COMM_ID="[::1:$port" timeout 20 "$RUN" -n 2 "$MC_BUILD/bin/meshccl-hello" >"$TMP/bad" 2>&1
rc=$?
expect_eq "NCCL_COMM_ID=[::1:$port (unterminated): the job fails" "$rc" 1
expect_grep "the message names NCCL_COMM_ID and its value" "$TMP/bad" "NCCL_COMM_ID='\[::1:$port'"
mp_finish
