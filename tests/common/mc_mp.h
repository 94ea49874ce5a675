/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for multi-process and multi-thread test programs that use only
 * the public API (they link libmeshccl.so as users do).
 */
#ifndef MC_MP_H
#define MC_MP_H

#include <stdbool.h>
#include <stdio.h>

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

/* Number of open file descriptors of this process (/proc/self/fd). */
int mc_mp_count_fds(void);
/* Number of threads of this process (/proc/self/task). */
int mc_mp_count_threads(void);
/* Integer from the environment, or def. */
int mc_mp_env_int(const char *name, int def);

#endif /* MC_MP_H */
