#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Misconfiguration is never silent: without NCCL_DEBUG, a misspelt or
# invalid NCCL_*/MESHCCL_* variable still gets one line on stderr per
# process; meshccl-env lists the same warnings; NCCL_NET naming no network
# fails init naming the networks there are; a bad NCCL_ALGO fails the first
# collective, and a GPU protocol asked for is said; a lone rank gives up at
# MESHCCL_INIT_TIMEOUT (to within a second) naming the rank that never came.
# shellcheck source=mp_lib.sh disable=SC2154 # bg and wait_bg set PID_*, RC_*, MS_*
. "$(dirname "$0")/mp_lib.sh"
need_progs
HELLO="$MC_BUILD/bin/meshccl-hello"
ENVTOOL="$MC_BUILD/bin/meshccl-env"

# A misspelt variable, NCCL_DEBUG unset: one stderr line per rank.
env -u NCCL_DEBUG NCCL_SOCKT_IFNAME=lo "$RUN" -n 2 "$HELLO" >"$TMP/typo.out" 2>&1
expect_eq "misspelt variable: job still runs" "$?" 0
expect_eq "misspelt variable: one warning per rank on stderr, naming the closest variable" \
  "$(grep -c '^\[[01]\] meshccl WARN ENV: unknown variable NCCL_SOCKT_IFNAME (environment); did you mean NCCL_SOCKET_IFNAME? (docs/ENV.md lists them all)$' "$TMP/typo.out")" 2

# An invalid value, NCCL_DEBUG unset.
env -u NCCL_DEBUG NCCL_SOCKET_NTHREADS=abc "$RUN" -n 1 "$HELLO" >"$TMP/bad.out" 2>&1
expect_grep "invalid value: warned on stderr with the range and the default used" "$TMP/bad.out" \
  "meshccl WARN ENV: NCCL_SOCKET_NTHREADS='abc' \(environment\) is not an integer in \[-2, 16\]; using the default -2"

# With NCCL_DEBUG=WARN the warning is a normal NCCL WARN line, not printed twice.
NCCL_DEBUG=WARN NCCL_SOCKT_IFNAME=lo "$RUN" -n 1 "$HELLO" >"$TMP/warn.out" 2>&1
expect_eq "NCCL_DEBUG=WARN: one NCCL WARN line, no plain one" \
  "$(grep -c 'NCCL WARN ENV: unknown variable NCCL_SOCKT_IFNAME' "$TMP/warn.out") $(grep -c 'meshccl WARN ENV' "$TMP/warn.out")" "1 0"

# meshccl-env lists the same warnings after the table.
NCCL_SOCKT_IFNAME=lo MESHCCL_INIT_TIMEOUT=abc "$ENVTOOL" >"$TMP/env.out" 2>&1
expect_grep "meshccl-env: lists the unknown variable" "$TMP/env.out" \
  '^# warning: unknown variable NCCL_SOCKT_IFNAME \(environment\); did you mean NCCL_SOCKET_IFNAME\?'
expect_grep "meshccl-env: lists the invalid value" "$TMP/env.out" \
  "^# warning: MESHCCL_INIT_TIMEOUT='abc' \(environment\) is not an integer in \[1, 86400\]; using the default 300$"

# NCCL_NET naming no network: init fails on every rank, as NCCL's does.
NCCL_NET=Foo NCCL_NET_PLUGIN=none "$RUN" -n 2 "$HELLO" >"$TMP/net.out" 2>&1
expect_eq "NCCL_NET=Foo: the job fails" "$?" 1
expect_grep "NCCL_NET=Foo: the error names the networks that exist" "$TMP/net.out" \
  'init failed: invalid usage .*NCCL_NET=Foo names no network; the networks are: Socket, Mesh'

# A lone rank: MESHCCL_INIT_TIMEOUT=2 is kept to within a second.
PORT=$(free_port)
T0_MS=$(now_ms)
bg lone env RANK=0 WORLD_SIZE=2 NCCL_COMM_ID="127.0.0.1:$PORT" MESHCCL_INIT_TIMEOUT=2 "$HELLO"
wait_bg lone 20
expect_eq "lone rank: exit 1" "$RC_lone" 1
expect_le "lone rank: gave up within 3 s of MESHCCL_INIT_TIMEOUT=2" "$MS_lone" 3000
expect_grep "lone rank: names the rank that never joined" "$TMP/lone.out" \
  'timeout: Bootstrap: rank 0: rank 1 of 2 never joined the bootstrap root at 127\.0\.0\.1<[0-9]+> within 2 s \(MESHCCL_INIT_TIMEOUT\)'

# NCCL_ALGO and NCCL_PROTO are read at init, as NCCL's ncclTopoTuneModel
# does: a bad name fails init on every rank, naming it (also when only one
# rank has it: the others learn it from the root); a protocol meshccl does
# not implement is said once per process on stderr, NCCL_DEBUG unset, with
# no collective run (meshccl-hello only initialises).
env -u NCCL_DEBUG NCCL_ALGO=Rign timeout 60 "$RUN" -n 2 "$HELLO" -q >"$TMP/algo.out" 2>&1
expect_eq "NCCL_ALGO=Rign: init fails (exit 1)" "$?" 1
expect_eq "NCCL_ALGO=Rign: each rank's init names the name and the known ones" \
  "$(grep -c "NCCL_ALGO: unknown name 'Rign' (known: Tree, Ring," "$TMP/algo.out")" 2
env -u NCCL_DEBUG timeout 60 "$RUN" -n 2 bash -c '[ "$RANK" = 1 ] && export NCCL_ALGO="allreduce:ring;alltoall:ring"; exec "$0" "$@"' \
  "$HELLO" -q >"$TMP/algo1.out" 2>&1
expect_eq "rank 1 alone with a bad NCCL_ALGO: the job fails (exit 1)" "$?" 1
expect_grep "... rank 1 names the collective" "$TMP/algo1.out" \
  "^\[1\] .*NCCL_ALGO: unknown collective 'alltoall'"
expect_grep "... rank 0 fails too, with rank 1's reason" "$TMP/algo1.out" \
  "^\[0\] .*rank 1.*NCCL_ALGO: unknown collective 'alltoall'"
env -u NCCL_DEBUG NCCL_PROTO=LL128 timeout 60 "$RUN" -n 2 "$HELLO" -q >"$TMP/proto.out" 2>&1
expect_eq "NCCL_PROTO=LL128: init succeeds" "$?" 0
expect_eq "NCCL_PROTO=LL128: one stderr line per rank, at init, says Simple is used" \
  "$(grep -c '^\[[01]\] meshccl WARN ENV: NCCL_PROTO=LL128: meshccl implements only Simple (LL and LL128 are GPU protocols): every collective uses Simple$' "$TMP/proto.out")" 2
PERF1=("$MC_BUILD/bin/meshccl-perf" all_reduce -b 8 -e 8 -n 1 -w 0)
env -u NCCL_DEBUG NCCL_PROTO=LL128 timeout 60 "$RUN" -n 2 "${PERF1[@]}" >"$TMP/proto1.out" 2>&1
expect_eq "NCCL_PROTO=LL128 with collectives: still one line per rank" \
  "$(grep -c 'meshccl WARN ENV: NCCL_PROTO=LL128' "$TMP/proto1.out")" 2
env -u NCCL_DEBUG NCCL_PROTO=^LL128 timeout 60 "$RUN" -n 2 "${PERF1[@]}" >"$TMP/proto2.out" 2>&1
expect_eq "NCCL_PROTO=^LL128 (Simple allowed, no GPU protocol asked for): nothing said" \
  "$(grep -c 'NCCL_PROTO' "$TMP/proto2.out")" 0

mp_finish
