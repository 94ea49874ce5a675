#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# meshccl-perf names the rank that failed to initialise: two ranks started by
# hand (RANK, WORLD_SIZE, NCCL_COMM_ID) on one device, so that both fail
# init; each prints its own rank (from the launcher's environment, since the
# communicator does not exist) and exits 1 (a rank may learn of the other's
# failure first: the cause is the same). Bad flag values and bad nccl-tests
# variables exit 2 naming the flag or variable, before any init.
# shellcheck source=mp_lib.sh disable=SC2154 # bg and wait_bg set RC_*
. "$(dirname "$0")/mp_lib.sh"
need_progs
PERF="$MC_BUILD/bin/meshccl-perf"

PORT=$(free_port)
T0_MS=$(now_ms)
for r in 0 1; do
  bg "p$r" env RANK=$r WORLD_SIZE=2 NCCL_COMM_ID="127.0.0.1:$PORT" MESHCCL_DEVICE=0 \
    MESHCCL_INIT_TIMEOUT=10 "$PERF" all_reduce -b 8 -e 8
done
for r in 0 1; do wait_bg "p$r" 30; done
for r in 0 1; do
  rcv="RC_p$r"
  expect_eq "init fails on rank $r: exit 1" "${!rcv}" 1
  expect_grep "rank $r names itself" "$TMP/p$r.out" \
    "^meshccl-perf: rank $r: meshcclCommInitFromEnv failed: (invalid usage \(run with NCCL_DEBUG=WARN for details\)|remote process exited or there was a network error): .*Multiple ranks are using the same device: rank 0 \(pid [0-9]+\) and rank 1 \(pid [0-9]+\) on host .* both use device 0"
  expect_eq "rank $r names no other rank" "$(grep -c "^meshccl-perf: rank $((1 - r)):" "$TMP/p$r.out")" 0
done

# bad_value NAME PATTERN ENV... -- ARGS...: exit 2, one line naming what was wrong
bad_value() {
  local name=$1 pattern=$2
  shift 2
  local envs=()
  while [ "$1" != -- ]; do
    envs+=("$1")
    shift
  done
  shift
  env -u RANK -u WORLD_SIZE "${envs[@]}" timeout 20 "$PERF" "$@" >"$TMP/bad.out" 2>&1
  expect_eq "$name: exit 2" "$?" 2
  expect_grep "$name: says why" "$TMP/bad.out" "$pattern"
}
bad_value "-S 2" "^meshccl-perf: invalid value '2' for -S/--report_timestamps \(an integer from 0 to 1\)$" \
  -- all_reduce -S 2
bad_value "-x 9" "^meshccl-perf: invalid value '9' for -x/--cta_policy " -- all_reduce -x 9
bad_value "-V 0" "^meshccl-perf: invalid value '0' for -V/--device_cta_count \(an integer from 1 to 128\)$" \
  -- gather -V 0
bad_value "--memory_report on" "^meshccl-perf: invalid value 'on' for -M/--memory_report " \
  -- scatter --memory_report on
bad_value "-u 600" "^meshccl-perf: invalid value '600' for -u/--unalign \(an integer from 0 to 511\)$" \
  -- alltoallv -u 600
bad_value "-D 1 without -R 2" "^meshccl-perf: device implementation \(-D > 0\) requires enabling symmetric memory registration \(-R 2\)$" \
  -- hypercube -D 1
bad_value "NCCL_TESTS_SPLIT=XOR 1" "^meshccl-perf: invalid NCCL_TESTS_SPLIT 'XOR 1' " \
  "NCCL_TESTS_SPLIT=XOR 1" -- all_reduce -b 8 -e 8
bad_value "NCCL_TESTS_SPLIT=MOD 0" "^meshccl-perf: invalid NCCL_TESTS_SPLIT 'MOD 0' " \
  "NCCL_TESTS_SPLIT=MOD 0" -- all_reduce -b 8 -e 8
bad_value "NCCL_TESTS_SPLIT_MASK=xyz" "^meshccl-perf: invalid NCCL_TESTS_SPLIT_MASK 'xyz' " \
  "NCCL_TESTS_SPLIT_MASK=xyz" -- all_reduce -b 8 -e 8
bad_value "NCCL_TESTS_MIN_BW=fast" "^meshccl-perf: invalid NCCL_TESTS_MIN_BW 'fast' \(a bus bandwidth in GB/s" \
  "NCCL_TESTS_MIN_BW=fast" -- all_reduce -b 8 -e 8
mp_finish
