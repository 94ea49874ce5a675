/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small shared helpers: monotonic time and deadlines, host and process
 * identity hashes (NCCL's getHostHash/getPidHash), thread naming.
 */
#ifndef MC_CORE_UTILS_H
#define MC_CORE_UTILS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

/* Monotonic clock in nanoseconds / seconds. */
uint64_t mc_time_ns(void);
double mc_time_sec(void);

/* A point in monotonic time after which a wait gives up. */
struct mc_deadline {
  uint64_t at_ns; /* UINT64_MAX: never */
  int64_t span_ms;
};

/* Deadline ms milliseconds from now; ms < 0 means never. */
struct mc_deadline mc_deadline_in_ms(int64_t ms);
bool mc_deadline_passed(struct mc_deadline dl);
/* Milliseconds left (0 when passed, INT32_MAX when never), capped to cap_ms when cap_ms >= 0. */
int mc_deadline_left_ms(struct mc_deadline dl, int cap_ms);
/* The earlier of two deadlines. */
struct mc_deadline mc_deadline_min(struct mc_deadline a, struct mc_deadline b);

/* A wait polls in ticks to see its abort flag, deadline and check. The tick
 * after progress is MC_WAIT_TICK_MS; each quiet tick doubles it up to
 * MC_WAIT_TICK_MAX_MS, so that a long wait (a rank waiting for hundreds of
 * others to join) wakes a dozen times a second instead of a hundred. */
#define MC_WAIT_TICK_MS     10
#define MC_WAIT_TICK_MAX_MS 80
/* The next tick after one of tick ms in which something happened (progressed) or not. */
int mc_wait_tick_next(int tick, bool progressed);

/* Sleeps ms milliseconds or until *abort_flag becomes non-zero. */
void mc_sleep_ms_abortable(int ms, const volatile uint32_t *abort_flag);

/* 64-bit FNV-1a hash. */
uint64_t mc_hash64(const void *data, size_t bytes);
/* Combines two hashes (order matters). */
uint64_t mc_hash_combine(uint64_t a, uint64_t b);

/* Host name up to the first '.' (NCCL's getHostName with delim '.'). */
void mc_host_name(char *out, size_t out_bytes);
/* Hash of NCCL_HOSTID, else host name + /proc/sys/kernel/random/boot_id. */
uint64_t mc_host_hash(void);
/* Hash of the pid and the pid namespace (NCCL's getPidHash). */
uint64_t mc_pid_hash(void);
/* This process's PID namespace: the inode and device of /proc/self/ns/pid
 * (stat). Two processes are in one PID namespace exactly when both are
 * equal; 0 and 0 when it cannot be read (no /proc): unknown, never equal. */
void mc_pidns_id(uint64_t *ino_out, uint64_t *dev_out);

/* Fault injection (MESHCCL_FAULT_INIT=STAGE:ACTION): when stage is STAGE,
 * the first time only, WARNs and sends this process ACTION's signal (kill:
 * SIGKILL; stop: SIGSTOP, returning once continued). Anything else: nothing.
 * An invalid value WARNs once. Thread-safe. */
void mc_fault_point(const char *stage);

/* Kernel thread id. */
int mc_gettid(void);

/* Names the calling thread when NCCL_SET_THREAD_NAME=1 ("NCCL BootstrapR"). */
void mc_thread_set_name(const char *name);

/* Fills buf with bytes from the kernel's random source. */
ncclResult_t mc_random_bytes(void *buf, size_t bytes);

/*
 * What to add to a system call's error for errno err: for EMFILE "; this
 * process is at its open-files limit (RLIMIT_NOFILE 32, hard 32): raise
 * `ulimit -n`", for ENFILE the system's (fs.file-max), for anything else "".
 * Returns buf (errno is kept).
 */
const char *mc_fd_limit_hint(int err, char *buf, size_t buf_bytes);
#define MC_FD_HINT_BYTES 128

/* snprintf that appends to buf at *used, never overflowing; returns buf. */
char *mc_str_appendf(char *buf, size_t buf_bytes, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Formats a sorted list of ints as ranges ("1-3,7") into buf. */
void mc_str_int_ranges(const int *v, int n, char *buf, size_t buf_bytes);

#endif /* MC_CORE_UTILS_H */
