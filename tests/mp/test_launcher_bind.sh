#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# meshccl-run --bind-to core pins rank i to the i-th CPU of the launcher's
# affinity mask, as mpirun --bind-to core does, and --report-bindings says
# so, one line per rank (Open MPI's --report-bindings); each rank's
# /proc/self/status then lists that one CPU. A bound rank still decides spin
# vs yield from the host's CPUs, not from its one-CPU mask: 2 ranks on a
# host of at least 2 CPUs spin (INFO TUNING says so). --bind-to none (the
# default) leaves the mask alone; --bind-to anything else is a usage error.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
# shellcheck disable=SC2119 # meshccl-perf is in bin/, not tests/
need_progs
PERF="$MC_BUILD/bin/meshccl-perf"
[ -x "$PERF" ] || {
  not_ok "built: $PERF"
  mp_finish
}
mask=$(grep Cpus_allowed_list /proc/self/status | cut -f2)
cpus=$(taskset -c -p $$ 2>/dev/null | sed 's/.*: //')
first=$(python3 -c "
import os; c = sorted(os.sched_getaffinity(0)); print(' '.join(map(str, c[:2])))" 2>/dev/null)
# shellcheck disable=SC2086 # two words
set -- $first
[ $# -eq 2 ] || skip_or_fail "the launcher's affinity mask ($mask${cpus:+, $cpus}) holds fewer than 2 CPUs"
cpu0=$1
cpu1=$2

"$RUN" -n 2 --bind-to core --report-bindings -- \
  sh -c 'grep Cpus_allowed_list /proc/self/status' >"$TMP/bind.out" 2>"$TMP/bind.err"
expect_success "--bind-to core: the job runs" "$?" "$TMP/bind.err"
expect_eq "--report-bindings: one line per rank, Open MPI's way" \
  "$(grep '^meshccl-run: rank' "$TMP/bind.err" | tr '\n' '|')" \
  "meshccl-run: rank 0 bound to CPU $cpu0|meshccl-run: rank 1 bound to CPU $cpu1|"
expect_eq "each rank's Cpus_allowed_list is its one CPU" \
  "$(sort "$TMP/bind.out" | tr '\t' ' ' | tr '\n' '|')" \
  "[0] Cpus_allowed_list: $cpu0|[1] Cpus_allowed_list: $cpu1|"

"$RUN" -n 2 --report-bindings -- sh -c 'grep Cpus_allowed_list /proc/self/status' \
  >"$TMP/none.out" 2>"$TMP/none.err"
expect_eq "default (--bind-to none): reported not bound" \
  "$(grep '^meshccl-run: rank' "$TMP/none.err" | tr '\n' '|')" \
  "meshccl-run: rank 0 not bound|meshccl-run: rank 1 not bound|"
expect_eq "default: the ranks keep the launcher's mask" \
  "$(sort "$TMP/none.out" | tr '\t' ' ' | tr '\n' '|')" \
  "[0] Cpus_allowed_list: $mask|[1] Cpus_allowed_list: $mask|"

"$RUN" --bind-to socket -n 1 true >"$TMP/bad" 2>&1
expect_eq "--bind-to socket: usage error (exit 2)" "$?" 2
expect_grep "--bind-to socket: names the value" "$TMP/bad" \
  "^meshccl-run: --bind-to takes core or none, got 'socket'$"

# Bound to one CPU each, the ranks of this host still spin: the decision
# takes the host's online CPUs (and the cgroup quota), not the mask.
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING "$RUN" -n 2 --bind-to core -- \
  "$PERF" all_reduce -b 1M -e 1M -n 2 -w 1 >"$TMP/spin.out" 2>&1
expect_success "bound all_reduce runs" "$?" "$TMP/spin.out"
online=$(getconf _NPROCESSORS_ONLN)
for r in 0 1; do
  expect_grep "rank $r bound: spin decision at INFO TUNING names its inputs" "$TMP/spin.out" \
    "NCCL INFO rank $r: waiting ranks (spin|yield) \([0-9]+ idle passes before yielding\): 2 local ranks on [0-9]+ CPUs \(online $online, cgroup quota [0-9]+, this rank's affinity 1\)"
done
if [ "$(sed -n 's/.*cgroup quota \([0-9]*\),.*/\1/p' "$TMP/spin.out" | head -1)" = 0 ] ||
  [ "$(sed -n 's/.*cgroup quota \([0-9]*\),.*/\1/p' "$TMP/spin.out" | head -1)" -ge 2 ]; then
  expect_eq "2 bound ranks on $online online CPUs: both spin" \
    "$(grep -c "waiting ranks spin (2000 idle passes" "$TMP/spin.out")" 2
fi

mp_finish
