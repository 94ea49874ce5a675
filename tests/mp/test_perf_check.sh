#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# meshccl-perf -c 1 over every collective x every type (fp8 included) x every
# op x every root, 3 ranks: nccl-tests' own data check (per-rank premulsum
# scalars, as nccl-tests uses them) finds no wrong element, out of place and
# in place, on both sides of the one-shot / ring switch.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs
PERF="$MC_BUILD/bin/meshccl-perf"
for c in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
  timeout 120 "$RUN" -n 3 "$PERF" "$c" -d all -o all -r -1 -c 1 -b 8 -e 96K -f 64 -n 2 -w 1 \
    >"$TMP/$c.out" 2>&1
  rc=$?
  expect_success "meshccl-perf $c, all types, ops and roots: exit 0" "$rc" "$TMP/$c.out"
  expect_grep "meshccl-perf $c: no wrong element" "$TMP/$c.out" "Out of bounds values : 0 OK"
done
mp_finish
