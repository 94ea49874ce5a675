/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging in NCCL's format and with NCCL's variables (NCCL_DEBUG,
 * NCCL_DEBUG_SUBSYS, NCCL_DEBUG_FILE): "host:pid:tid [dev] NCCL INFO msg".
 * Also the last-error record behind ncclGetLastError. The only global state
 * here is the log configuration (loaded once) and the last error text.
 */
#ifndef MC_CORE_LOG_H
#define MC_CORE_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "nccl.h"

/* Levels: NCCL_DEBUG's words and numbers. */
enum mc_log_level {
  MC_LOG_NONE = 0,
  MC_LOG_VERSION = 1,
  MC_LOG_WARN = 2,
  MC_LOG_INFO = 3,
  MC_LOG_ABORT = 4,
  MC_LOG_TRACE = 5
};

/* Subsystems: NCCL_DEBUG_SUBSYS's words and bits. */
enum mc_log_sub {
  MC_SUB_INIT = 0x1,
  MC_SUB_COLL = 0x2,
  MC_SUB_P2P = 0x4,
  MC_SUB_SHM = 0x8,
  MC_SUB_NET = 0x10,
  MC_SUB_GRAPH = 0x20,
  MC_SUB_TUNING = 0x40,
  MC_SUB_ENV = 0x80,
  MC_SUB_ALLOC = 0x100,
  MC_SUB_CALL = 0x200,
  MC_SUB_PROXY = 0x400,
  MC_SUB_NVLS = 0x800,
  MC_SUB_BOOTSTRAP = 0x1000,
  MC_SUB_REG = 0x2000,
  MC_SUB_PROFILE = 0x4000,
  MC_SUB_RAS = 0x8000,
  MC_SUB_DESTROY = 0x10000,
  MC_SUB_ALLOC_HOST = 0x20000,
  MC_SUB_ALL = ~0
};

#define MC_FILE_BASENAME (__builtin_strrchr("/" __FILE__, '/') + 1)

/* Emits one line if the level and subsystem are enabled (errno preserved). */
void mc_log(enum mc_log_level level, unsigned long sub, const char *file, int line,
            const char *func, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
void mc_log_v(enum mc_log_level level, unsigned long sub, const char *file, int line,
              const char *func, const char *fmt, va_list ap);

/* True when a message of this level and subsystem would be printed. */
bool mc_log_enabled(enum mc_log_level level, unsigned long sub);

/* Subsystems printed at INFO: every bit until the configuration is loaded
 * (so the first test loads it through mc_log_enabled), then NCCL_DEBUG_SUBSYS's
 * mask when NCCL_DEBUG is INFO or TRACE, else 0; every bit while a sink is
 * installed. Read it through MC_INFO_ON. */
extern unsigned long mc_log_info_subs;

/* Whether an INFO line of subsystem _sub would be printed, for lines on hot
 * paths (one per collective): when the subsystem is off this costs one load
 * and one branch, and the arguments of the line are never computed. */
#define MC_INFO_ON(_sub)                                                                           \
  (__builtin_expect((__atomic_load_n(&mc_log_info_subs, __ATOMIC_RELAXED) & (_sub)) != 0, 0) &&    \
   mc_log_enabled(MC_LOG_INFO, (_sub)))

#define MC_WARN(...)                                                                               \
  mc_log(MC_LOG_WARN, MC_SUB_ALL, MC_FILE_BASENAME, __LINE__, __func__, __VA_ARGS__)
#define MC_INFO(_sub, ...)                                                                         \
  mc_log(MC_LOG_INFO, (_sub), MC_FILE_BASENAME, __LINE__, __func__, __VA_ARGS__)
#ifdef MC_ENABLE_TRACE
#define MC_TRACE(_sub, ...)                                                                        \
  mc_log(MC_LOG_TRACE, (_sub), MC_FILE_BASENAME, __LINE__, __func__, __VA_ARGS__)
#else
#define MC_TRACE(_sub, ...) ((void)0)
#endif

#define MC_WARN_ONCE(...)                                                                          \
  do {                                                                                             \
    static int mc_once_;                                                                           \
    if (__atomic_exchange_n(&mc_once_, 1, __ATOMIC_RELAXED) == 0)                                  \
      MC_WARN(__VA_ARGS__);                                                                        \
  } while (0)

/* Records an error: WARN at the detection point, text kept for ncclGetLastError.
 * Returns res. */
ncclResult_t mc_error_record(ncclResult_t res, const char *file, int line, const char *func,
                             const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* The INFO "file:line -> code" propagation line. */
void mc_log_propagate(ncclResult_t res, const char *file, int line);

/* Last error recorded by the calling thread, or by the process when the
 * thread has none ("" when none). */
const char *mc_error_last(void);
/* Copies the calling thread's last error into buf (NUL-terminated). */
void mc_error_last_copy(char *buf, size_t buf_bytes);
/* Forgets the calling thread's last error (start of an API call). */
void mc_error_clear_thread(void);
/* Makes text the calling thread's last error, without logging it: an error
 * another thread of the same call detected and reported (the collectives'
 * workers hand theirs to the calling thread). */
void mc_error_set_thread(const char *text);

/*
 * A sink takes the place of meshccl's own printing: once installed, every
 * line (WARN, INFO, TRACE, VERSION, propagation lines) is formatted and handed
 * to fn instead of being filtered by NCCL_DEBUG / NCCL_DEBUG_SUBSYS and
 * printed, because the sink's owner filters (the mesh plugin hands lines to
 * the logger NCCL gave it, which applies NCCL's own NCCL_DEBUG). file is the
 * basename, func the function, msg the formatted text without a newline.
 * mc_error_record still keeps the text for mc_error_last. fn runs on the
 * logging thread, without meshccl's log lock held, so it may log again only
 * through its own means.
 */
typedef void (*mc_log_sink_fn)(void *arg, enum mc_log_level level, unsigned long sub,
                               const char *file, int line, const char *func, const char *msg);

/* Installs fn (with arg) as the process-wide sink; fn == NULL goes back to
 * meshccl's own printing. Thread-safe: a line being written when the sink
 * changes goes to the old or to the new one, so fn and arg must stay
 * callable until the process exits (or the library holding them is
 * unloaded). */
void mc_log_set_sink(mc_log_sink_fn fn, void *arg);

/* The "[dev]" printed in every line of this thread (NCCL prints the CUDA device). */
void mc_log_set_thread_dev(int dev);

/* Reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE from the
 * environment again and applies them (ncclResetDebugInit). Thread-safe:
 * lines being written finish with the old configuration. */
void mc_log_reload_env(void);

/* Re-reads the log configuration (tests). */
void mc_log_reset_for_tests(void);

/* Parses an NCCL_DEBUG_SUBSYS value into a mask; false on an unknown word
 * (bad_word_out gets it). */
bool mc_log_parse_subsys(const char *spec, unsigned long *mask_out, char *bad_word_out,
                         size_t bad_word_bytes);

/* Expands %h (host up to the first '.') and %p (pid) of NCCL_DEBUG_FILE. */
void mc_log_expand_filename(const char *pattern, const char *host, int pid, char *out,
                            size_t out_bytes);

/* Prints "NCCL version ..." once per process at VERSION level or above. */
void mc_log_version_once(void);

#endif /* MC_CORE_LOG_H */
