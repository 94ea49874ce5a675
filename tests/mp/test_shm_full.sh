#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A /dev/shm too small for the SHM transport (a 1 MiB tmpfs mounted over
# /dev/shm in a private mount namespace): init fails at connect on every
# rank with a message naming the size needed and what to change, nothing is
# left in that /dev/shm, and with a smaller NCCL_BUFFSIZE the same job runs.
# Needs root and unshare: skipped otherwise, failed under CI.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_coll
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null; then
  if [ "${CI:-}" = true ]; then
    echo "not ok - needs root and unshare (CI=true: not skipping)"
    exit 1
  fi
  echo "# skip: needs root and unshare"
  exit 77
fi
small_shm() { # CMD...: run with a 1 MiB /dev/shm; prints what is left in it after
  timeout 60 unshare -m sh -c 'mount -t tmpfs -o size=1m tmpfs /dev/shm || exit 99; "$@"; rc=$?;
    echo "left in /dev/shm: $(ls /dev/shm | wc -l)"; exit $rc' sh "$@"
}
NCCL_P2P_DISABLE=1 NCCL_BUFFSIZE=4194304 small_shm "$RUN" -n 2 "$T/mp_coll" --types float \
  --sizes 7 >"$TMP/full.out" 2>&1
expect_eq "1 MiB /dev/shm, 4 MiB FIFOs: the job fails" "$?" 1
expect_grep "the message names the size and the remedy" "$TMP/full.out" \
  "init failed: (.*failed: )?NCCL SHM: /dev/shm has no room for 4198400 bytes \(segment /meshccl-shm-.*\): enlarge /dev/shm \(docker run --shm-size\) or lower NCCL_BUFFSIZE"
expect_grep "nothing left in that /dev/shm" "$TMP/full.out" "^left in /dev/shm: 0$"
NCCL_P2P_DISABLE=1 NCCL_BUFFSIZE=65536 small_shm "$RUN" -n 2 "$T/mp_coll" \
  --types float --sizes 7,4099 >"$TMP/small.out" 2>&1
expect_success "the same /dev/shm with NCCL_BUFFSIZE=65536: the job runs" "$?" "$TMP/small.out"
mp_finish
