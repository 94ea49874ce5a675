/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for multi-process and multi-thread test programs that use only
 * the public API (they link libmeshccl.so as users do).
 */
#ifndef MC_MP_H
#define MC_MP_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "mc_proc.h"
#include "nccl.h"

/* Prints "rank R: <call> failed: <code> <text> (<last error>)" and exits 1 unless ok. */
#define MC_MP_CHECK(_call)                                                                         \
  do {                                                                                             \
    ncclResult_t mc_r_ = (_call);                                                                  \
    if (mc_r_ != ncclSuccess) {                                                                    \
      fprintf(stderr, "%s:%d: %s failed: %d %s (%s)\n", __FILE__, __LINE__, #_call, (int)mc_r_,    \
              ncclGetErrorString(mc_r_), ncclGetLastError(NULL));                                  \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* mc_mp_set_name's rank for a program without ranks: the prefix is "<prog>: ". */
#define MC_MP_NO_RANK INT_MIN

/* Names this program and its rank in MC_MP_FAIL's messages. */
void mc_mp_set_name(const char *prog, int rank);
/* Changes the rank of MC_MP_FAIL's messages. */
void mc_mp_set_rank(int rank);
/* Prints "<prog> rank <r>: <message>" (see mc_mp_set_name) on stderr and exits 1. */
void mc_mp_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
#define MC_MP_FAIL(...) mc_mp_fail(__VA_ARGS__)

/* Fails unless ncclCommCount(comm) is nranks and ncclCommUserRank(comm) is rank. */
void mc_mp_expect_count_rank(ncclComm_t comm, int nranks, int rank);

/* Monotonic clock in seconds. */
double mc_mp_now_sec(void);
/* Integer from the environment, or def. */
int mc_mp_env_int(const char *name, int def);

/* Waits up to limit_s seconds for path to exist (polling every 10 ms). */
bool mc_mp_wait_path(const char *path, int limit_s);
/* Creates path (empty) or fails with "cannot create <path>: <error>". */
void mc_mp_touch(const char *path);
/* Writes id to path as a whole: to path.tmp, then a rename. 0 or -1 (errno set). */
int mc_mp_write_id(const char *path, const ncclUniqueId *id);
/* Reads up to sizeof(*id) bytes of path into id: the bytes read, 0 if it cannot be opened. */
size_t mc_mp_read_id(const char *path, ncclUniqueId *id);

#endif /* MC_MP_H */
