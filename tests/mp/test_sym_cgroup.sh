#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Symmetric memory under a memory cgroup, as a container's limit: 2 ranks
# allocate 64 MiB windows with ncclMemAlloc, run a symmetric all-reduce on
# them and free them, 9 times each, in a cgroup of 768 MiB (no swap). A peer
# drops its mapping of an allocation its owner freed at their next
# operation, so the job peaks near 520 MiB; peers that kept freed
# allocations mapped (up to 64 of them, as meshccl did before) hold every
# round's buffers, and the job was OOM-killed in this cgroup.
# cgroup v2 (a "memory" controller in /sys/fs/cgroup) or v1
# (/sys/fs/cgroup/memory); root. Skips with the reason where neither can be
# made, and fails instead under CI=true.
# shellcheck source=mp_lib.sh disable=SC2154
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll

LIMIT=$((768 << 20))
CG=""
if [ "$(id -u)" != 0 ]; then
  skip_or_fail "a memory cgroup needs root"
fi
if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
  CG=/sys/fs/cgroup/mc-sym-$$
  mkdir "$CG" && echo "$LIMIT" >"$CG/memory.max" && { echo 0 >"$CG/memory.swap.max" 2>/dev/null || true; }
elif [ -d /sys/fs/cgroup/memory ]; then
  CG=/sys/fs/cgroup/memory/mc-sym-$$
  mkdir "$CG" && echo "$LIMIT" >"$CG/memory.limit_in_bytes" &&
    { echo "$LIMIT" >"$CG/memory.memsw.limit_in_bytes" 2>/dev/null || true; }
fi
if [ -z "$CG" ] || [ ! -d "$CG" ]; then
  skip_or_fail "no memory cgroup can be made here (neither cgroup v2's memory controller nor v1's /sys/fs/cgroup/memory)"
fi
# shellcheck disable=SC2317 # called by the trap
cleanup_cg() {
  mp_cleanup
  rmdir "$CG" 2>/dev/null || true
}
trap cleanup_cg EXIT

# in_cgroup CMD...: runs CMD (and its children) in the cgroup.
in_cgroup() {
  bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$CG" "$@"
}

shm_snapshot
# 16777216 floats: 64 MiB per buffer, 2 buffers per case and rank; one
# case (fresh buffers, freed after it) per type and size.
in_cgroup env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=REG timeout 300 "$RUN" -n 2 "$T/mp_coll" \
  --symmetric 1 --colls allreduce --types float,int32,uint32 --ops sum \
  --sizes 16777216,16777215,16777213 >"$TMP/cg.out" 2>&1
rc=$?
expect_success "2 ranks, 9 rounds of 64 MiB windows allocated, reduced and freed, in a 768 MiB cgroup" \
  "$rc" "$TMP/cg.out"
if grep -q "Killed\|killed by signal 9" "$TMP/cg.out"; then
  not_ok "no rank was OOM-killed"
else
  ok "no rank was OOM-killed"
fi
n=$(grep -c "unmapped rank [01]'s ncclMemAlloc allocation [0-9]* ([0-9]* bytes, freed)" "$TMP/cg.out")
expect_le "freed allocations' mappings were dropped as their owners freed them ($n)" 2 "$n"
expect_eq "nothing left in /dev/shm" "$(shm_orphans | wc -l)" 0
mp_finish
