#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# nccl-tests' gather, scatter, alltoallv and hypercube in meshccl-perf, at 2
# and 3 ranks, every type (fp8 included) and every root: the data check finds
# no wrong element in any row, out of place and in place (alltoallv in place
# is N/A, as in nccl-tests). hypercube needs 2^k ranks: at 3 it says so and
# skips, as nccl-tests does; it also runs at 4.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs
PERF="$MC_BUILD/bin/meshccl-perf"
for n in 2 3; do
  for c in gather scatter alltoallv hypercube; do
    timeout 120 "$RUN" --no-tag -n "$n" "$PERF" "$c" -d all -r -1 -c 1 -b 8 -e 96K -f 64 -n 2 \
      -w 1 >"$TMP/$c.$n.out" 2>&1
    rc=$?
    expect_success "meshccl-perf $c, $n ranks, all types and roots: exit 0" "$rc" "$TMP/$c.$n.out"
    expect_grep "meshccl-perf $c, $n ranks: no wrong element" "$TMP/$c.$n.out" \
      "^# Out of bounds values : 0 OK$"
    if [ "$c" = hypercube ] && [ "$n" = 3 ]; then
      expect_grep "hypercube at 3 ranks: skipped as nccl-tests does" "$TMP/$c.$n.out" \
        "^nRanks 3 is not a power of 2, skipping$"
      expect_eq "hypercube at 3 ranks: said once" \
        "$(grep -c 'is not a power of 2' "$TMP/$c.$n.out")" 1
      continue
    fi
    # 12 types x 3 sizes (x every root for gather and scatter), each row with 0 wrong
    rows=$(grep -cE "^ +[0-9]+ +[0-9]+ " "$TMP/$c.$n.out")
    good=$(grep -cE " 0 +([0-9.e+-]+ +){3}(0|N/A)$" "$TMP/$c.$n.out")
    case $c in gather | scatter) want=$((12 * 3 * n)) ;; *) want=$((12 * 3)) ;; esac
    expect_eq "meshccl-perf $c, $n ranks: $want rows" "$rows" "$want"
    expect_eq "meshccl-perf $c, $n ranks: every row has 0 wrong" "$good" "$want"
  done
done
timeout 60 "$RUN" --no-tag -n 4 "$PERF" hypercube -d all -c 1 -b 8 -e 96K -f 64 -n 2 -w 1 \
  >"$TMP/hc4.out" 2>&1
expect_success "meshccl-perf hypercube, 4 ranks: exit 0" "$?" "$TMP/hc4.out"
expect_grep "meshccl-perf hypercube, 4 ranks: no wrong element" "$TMP/hc4.out" \
  "^# Out of bounds values : 0 OK$"
expect_eq "meshccl-perf hypercube, 4 ranks: 36 rows with 0 wrong" \
  "$(grep -cE " 0 +([0-9.e+-]+ +){3}0$" "$TMP/hc4.out")" 36
mp_finish
