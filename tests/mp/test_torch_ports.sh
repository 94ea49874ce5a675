#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# meshccl-run's two ports, as a torch.distributed job sees them: NCCL_COMM_ID
# (meshccl's bootstrap root) and MASTER_PORT (the store torch opens at
# MASTER_ADDR) differ, a port the user gives (environment or -x) is kept, the
# same port for both is refused naming both, and a failed job says which port
# is which before its last line. (tests/py/test_torch_collectives.sh runs a
# torch job with both listeners open at once.)
. "$(dirname "$0")/mp_lib.sh"
need_progs

"$RUN" -n 2 --no-tag bash -c 'echo "$NCCL_COMM_ID $MASTER_ADDR $MASTER_PORT"' > "$TMP/out"
read -r id addr mport < <(sort -u "$TMP/out")
expect_eq "both ranks see the same ports" "$(sort -u "$TMP/out" | wc -l)" 1
[ "${id##*:}" != "$mport" ] && [ "$addr" = 127.0.0.1 ]
check "NCCL_COMM_ID ($id) and MASTER_PORT ($mport) are two ports on 127.0.0.1"

port=$(free_port)
MASTER_PORT=$port "$RUN" -n 2 --no-tag bash -c 'echo "$NCCL_COMM_ID $MASTER_PORT"' > "$TMP/out"
read -r id mport < <(sort -u "$TMP/out")
[ "$mport" = "$port" ] && [ "${id##*:}" != "$port" ]
check "a MASTER_PORT the user set is kept, NCCL_COMM_ID gets another ($id, $mport)"
"$RUN" -n 1 --no-tag -x MASTER_PORT="$port" bash -c 'echo "$NCCL_COMM_ID $MASTER_PORT"' > "$TMP/out"
read -r id mport < "$TMP/out"
[ "$mport" = "$port" ] && [ "${id##*:}" != "$port" ]
check "the same with -x MASTER_PORT=$port ($id, $mport)"

NCCL_COMM_ID=127.0.0.1:$port MASTER_PORT=$port "$RUN" -n 2 true > "$TMP/out" 2> "$TMP/err"
expect_eq "NCCL_COMM_ID and MASTER_PORT on one port: refused" "$?" 1
expect_grep "... naming both and what each is for" "$TMP/err" \
  "NCCL_COMM_ID=127.0.0.1:$port \(meshccl's bootstrap root\) and MASTER_ADDR:MASTER_PORT=127.0.0.1:$port \(the store"
NCCL_COMM_ID=localhost:$port MASTER_PORT=$port "$RUN" -n 1 true 2> /dev/null
expect_eq "... also spelled localhost" "$?" 1
NCCL_COMM_ID=10.9.8.7:$port MASTER_PORT=$port "$RUN" -n 1 true
expect_eq "the same port number on another host is fine" "$?" 0

"$RUN" -n 2 bash -c 'exit $RANK' > "$TMP/out" 2> "$TMP/err"
expect_eq "a failing rank: the job fails" "$?" 1
expect_grep "a failing rank: the ports are named" "$TMP/err" \
  "^meshccl-run: ports of this job: NCCL_COMM_ID=127\.0\.0\.1:[0-9]+ \(meshccl's bootstrap root\), MASTER_ADDR:MASTER_PORT=127\.0\.0\.1:[0-9]+ \(the store torch\.distributed opens with env://\)$"
expect_eq "a failing rank: the last line still names the rank" "$(tail -n 1 "$TMP/err")" \
  "meshccl-run: job failed: rank 1 exited with status 1"
mp_finish
