/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Error-propagation macros (NCCL's NCCLCHECK shape). MC_FAIL marks the point of
 * detection: it WARNs once and records the text for ncclGetLastError. Every
 * layer above propagates with MC_CHECK*, which adds an INFO "file:line -> code"
 * line like NCCL's.
 */
#ifndef MC_CORE_CHECK_H
#define MC_CORE_CHECK_H

#include <errno.h>
#include <string.h>

#include "nccl.h"
#include "log.h"

#define MC_TRACE_RES(_res) mc_log_propagate((_res), MC_FILE_BASENAME, __LINE__)

#define MC_FAILED(_res) (((_res) != ncclSuccess) && ((_res) != ncclInProgress))

#define MC_CHECK(_call)                                                                            \
  do {                                                                                             \
    ncclResult_t mc_res_ = (_call);                                                                \
    if (MC_FAILED(mc_res_)) {                                                                      \
      MC_TRACE_RES(mc_res_);                                                                       \
      return mc_res_;                                                                              \
    }                                                                                              \
  } while (0)

#define MC_CHECK_GOTO(_call, _res, _label)                                                         \
  do {                                                                                             \
    (_res) = (_call);                                                                              \
    if (MC_FAILED(_res)) {                                                                         \
      MC_TRACE_RES(_res);                                                                          \
      goto _label;                                                                                 \
    }                                                                                              \
  } while (0)

/* The point of detection: WARN once, store the text, evaluate to the code. */
#define MC_FAIL(_res, ...)                                                                         \
  mc_error_record((_res), MC_FILE_BASENAME, __LINE__, __func__, __VA_ARGS__)

/* -1/errno system calls; retries EINTR. */
#define MC_SYS_CHECK_GOTO(_expr, _what, _res, _label)                                              \
  do {                                                                                             \
    int mc_rc_;                                                                                    \
    do {                                                                                           \
      mc_rc_ = (_expr);                                                                            \
    } while ((mc_rc_ == -1) && (errno == EINTR));                                                  \
    if (mc_rc_ == -1) {                                                                            \
      (_res) = MC_FAIL(ncclSystemError, "%s failed: %s", (_what), strerror(errno));                \
      goto _label;                                                                                 \
    }                                                                                              \
  } while (0)

#define MC_SYS_CHECK(_expr, _what)                                                                 \
  do {                                                                                             \
    int mc_rc_;                                                                                    \
    do {                                                                                           \
      mc_rc_ = (_expr);                                                                            \
    } while ((mc_rc_ == -1) && (errno == EINTR));                                                  \
    if (mc_rc_ == -1)                                                                              \
      return MC_FAIL(ncclSystemError, "%s failed: %s", (_what), strerror(errno));                  \
  } while (0)

/* Allocation helpers: zeroed, overflow-checked, MC_FAIL on exhaustion. */
#define mc_calloc(_pptr, _n)                                                                       \
  mc_calloc_impl((void **)(_pptr), (_n), sizeof(**(_pptr)), MC_FILE_BASENAME, __LINE__)
ncclResult_t mc_calloc_impl(void **ptr_out, size_t n, size_t elem_bytes, const char *file,
                            int line);

#endif /* MC_CORE_CHECK_H */
