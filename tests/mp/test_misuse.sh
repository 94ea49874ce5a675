#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# API misuse in one process (mp_misuse.c), exact codes and messages: every
# call on a destroyed or aborted communicator, or on an address that never
# was one, is ncclInvalidArgument without reading freed memory (the
# sanitizer build runs it too); a second thread on a communicator that
# another thread drives (a running collective, or an open group) gets
# ncclInvalidUsage while the first completes with the right data.
# shellcheck source=mp_lib.sh
. "$(dirname "$0")/mp_lib.sh"
need_progs mp_misuse

for what in destroyed threads; do
  timeout 60 "$T/mp_misuse" "$what" >"$TMP/$what.out" 2>&1
  rc=$?
  expect_success "mp_misuse $what: exit 0" "$rc" "$TMP/$what.out"
  expect_grep "mp_misuse $what: every check ran" "$TMP/$what.out" "^$what: ok$"
done
mp_finish
