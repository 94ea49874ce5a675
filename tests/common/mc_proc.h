/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Process helpers shared by the unit test harness (mc_test) and the
 * multi-process test programs (mc_mp): fd and thread counts from /proc, and
 * clock readings in seconds. Only libc: both libraries link this file.
 */
#ifndef MC_PROC_H
#define MC_PROC_H

#include <time.h>

/* The thread count once it has not changed for 50 ms (at most 2 s): a
 * baseline that threads just joined by an earlier test no longer inflate. */
int mc_count_threads_stable(void);

/* Number of entries of a directory other than dot-files, -1 if it cannot be opened. */
int mc_count_dir(const char *path);
/* Number of open file descriptors of this process (/proc/self/fd). */
int mc_count_fds(void);
/* Number of threads of this process (/proc/self/task). */
int mc_count_threads(void);
/* Number of threads once it equals `want`, or after timeout_ms: a joined
 * thread can stay in /proc/self/task for a moment after pthread_join
 * returns (the kernel wakes the joiner before it releases the task). */
int mc_count_threads_settled(int want, int timeout_ms);
/* Reading of clock id (CLOCK_MONOTONIC, CLOCK_PROCESS_CPUTIME_ID, ...) in seconds. */
double mc_clock_sec(clockid_t id);

#endif /* MC_PROC_H */
