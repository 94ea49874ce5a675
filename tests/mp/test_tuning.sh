#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The single-host FIFO size and the one-shot all-reduce's threshold that init
# decides from the host (src/init/init_connect.c, src/transport/tp_decide.c),
# on 2-rank meshccl-perf jobs pinned to CPUs 0-1:
# * one NCCL_DEBUG_SUBSYS=TUNING line per rank says both, the same on every
#   rank, with the caches they came from: the recorded trees of
#   tests/data/sysfs/make-cache.sh (MESHCCL_SYSFS_ROOT) give 1 MiB (the VM's
#   1 MiB L2) and 2 MiB (a Sapphire Rapids Xeon's 2 MiB L2) for 2 channels;
#   on 2 ranks the one-shot goes up to what its slots take (slot / 2);
# * all-reduces take the one-shot up to that size, another algorithm above;
# * NCCL_BUFFSIZE and MESHCCL_ALLREDUCE_ONESHOT_BYTES still force theirs;
# * 3 ranks: the model's threshold (the one-shot's limit where they outnumber
#   the CPUs), the same on every rank.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs
PERF="$MC_BUILD/bin/meshccl-perf"
DATA="$MC_SRC/tests/data/sysfs"
taskset -c 0-1 true 2>/dev/null || skip_or_fail "CPUs 0 and 1 to pin the ranks to"
export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING NCCL_MIN_NCHANNELS=2 NCCL_MAX_NCHANNELS=2
TUNE_RE='NCCL INFO rank [0-9]+: FIFO '

# job NAME NRANKS SIZES ENV...: a meshccl-perf all_reduce job over SIZES ("B E").
job() {
  local name=$1 n=$2 b=${3% *} e=${3#* }
  shift 3
  env "$@" timeout 60 taskset -c 0-1 "$RUN" -n "$n" "$PERF" all_reduce -b "$b" -e "$e" -f 2 \
    -n 1 -w 0 -c 1 >"$TMP/$name.out" 2>&1
  expect_success "$name: exit 0" "$?" "$TMP/$name.out"
  expect_eq "$name: one TUNING line per rank" "$(grep -Ec "$TUNE_RE" "$TMP/$name.out")" "$n"
  expect_eq "$name: the same decision on every rank" \
    "$(grep -E "$TUNE_RE" "$TMP/$name.out" | sed -E 's/.*rank [0-9]+: //; s/; this process.*//' |
      sort -u | wc -l)" 1
}

# oneshot NAME BYTES yes|no: the all-reduce of BYTES ran one-shot (algorithm 7) or not.
oneshot() {
  local want=0
  [ "$3" = yes ] && want=2
  expect_eq "$1: $2 bytes one-shot: $3" \
    "$(grep -E "AllReduce: $2 Bytes -> Algo 7 " "$TMP/$1.out" | sed -E 's/.*\[([0-9]+)\] NCCL INFO.*/\1/' |
      sort -u | wc -l)" "$want"
  expect_grep "$1: $2 bytes ran" "$TMP/$1.out" "AllReduce: $2 Bytes -> Algo "
}

job vm 2 "32K 128K" MESHCCL_SYSFS_ROOT="$DATA/cache-epyc-vm"
expect_grep "vm: FIFO 1 MiB from the VM's 1 MiB L2, one-shot up to 64 KiB" "$TMP/vm.out" \
  "rank 0: FIFO 1 MiB per connection \(L2 1024 KiB per core \(CPU [01] of local rank 0: 1024 KiB shared by 1; last level L3 32768 KiB shared by 2\), 2 connections per channel x 2 channels in 4 x L2\); one-shot all-reduce up to 64 KiB \(2 ranks"
oneshot vm 65536 yes
oneshot vm 131072 no
expect_grep "vm: outputs streamed from the VM's 1 MiB L2" "$TMP/vm.out" \
  "rank 0: FIFO .*; out-of-place outputs from 1 MiB written with streaming stores \(the L2 of one core\);"
expect_grep "vm: symmetric all-reduce chunks of the 1 MiB L2 over 2 ranks + 2" "$TMP/vm.out" \
  "rank 0: FIFO .*; symmetric all-reduce in chunks of 256 KiB \(one core's L2 / \(2 ranks \+ 2\), at least 32 KiB\)$"

job xeon 2 "64K 256K" MESHCCL_SYSFS_ROOT="$DATA/cache-xeon16"
expect_grep "xeon: FIFO 2 MiB from a 2 MiB L2, one-shot up to 128 KiB" "$TMP/xeon.out" \
  "rank 1: FIFO 2 MiB per connection \(L2 2048 KiB per core .*; one-shot all-reduce up to 128 KiB \(2 ranks"
oneshot xeon 131072 yes
oneshot xeon 262144 no
expect_grep "xeon: outputs streamed from its 2 MiB L2" "$TMP/xeon.out" \
  "rank 1: FIFO .*; out-of-place outputs from 2 MiB written with streaming stores \(the L2 of one core\); symmetric all-reduce in chunks of 512 KiB "

job forced 2 "4K 8K" MESHCCL_SYSFS_ROOT="$DATA/cache-xeon16" NCCL_BUFFSIZE=524288 \
  MESHCCL_ALLREDUCE_ONESHOT_BYTES=4096
expect_grep "forced: NCCL_BUFFSIZE and MESHCCL_ALLREDUCE_ONESHOT_BYTES win" "$TMP/forced.out" \
  "rank 0: FIFO 512 KiB per connection \(NCCL_BUFFSIZE\); one-shot all-reduce up to 4 KiB \(MESHCCL_ALLREDUCE_ONESHOT_BYTES\)"
oneshot forced 4096 yes
oneshot forced 8192 no

job off 2 "4K 4K" MESHCCL_ALLREDUCE_ONESHOT_BYTES=0
expect_grep "off: MESHCCL_ALLREDUCE_ONESHOT_BYTES=0 disables the one-shot" "$TMP/off.out" \
  "one-shot all-reduce up to 0 B \(MESHCCL_ALLREDUCE_ONESHOT_BYTES\)"
oneshot off 4096 no

job nostream 2 "4K 4K" MESHCCL_STREAM_OUT_BYTES=0
expect_grep "nostream: MESHCCL_STREAM_OUT_BYTES=0: no output streamed" "$TMP/nostream.out" \
  "out-of-place outputs never written with streaming stores \(MESHCCL_STREAM_OUT_BYTES\); symmetric all-reduce in chunks of "

job model 3 "4K 4K" MESHCCL_SYSFS_ROOT="$DATA/cache-epyc-vm"
expect_grep "model: 3 ranks take the model's threshold (its floor without figures, the limit on 2 CPUs)" \
  "$TMP/model.out" "one-shot all-reduce up to [0-9]+ (B|KiB) \((model for 3 ranks: hand-off [0-9]+ ns|local rank 0's hand-off probe gave no figures|3 ranks on 2 CPUs: every hand-off)"
mp_finish
