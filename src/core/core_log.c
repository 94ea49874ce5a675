/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging in NCCL's format (debug.cc): "host:pid:tid [dev] NCCL INFO msg",
 * WARN lines preceded by an empty line and carrying file:line (function),
 * NCCL_DEBUG / NCCL_DEBUG_SUBSYS / NCCL_DEBUG_FILE with %h and %p.
 * NCCL_DEBUG=ABORT logs like INFO and aborts the process at the first WARN,
 * leaving a core dump at the point of detection.
 */
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "params.h"
#include "utils.h"

#define LAST_ERROR_BYTES 1024

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_loaded; /* guarded by log_lock */
static enum mc_log_level log_level;
static unsigned long log_mask;
static FILE *log_file;
static bool log_file_owned;
static char log_host[256];
static int log_pid;
static uint64_t log_epoch_ns;

/* The sink (mc_log_set_sink): fn and arg change together under log_lock;
 * has_sink lets the common case (no sink) skip the lock. */
static mc_log_sink_fn sink_fn;
static void *sink_arg;
static int has_sink;
unsigned long mc_log_info_subs = ~0UL;

static char last_error_global[LAST_ERROR_BYTES];
static __thread char last_error_thread[LAST_ERROR_BYTES];
static __thread int thread_dev;

static const struct {
  const char *word;
  unsigned long bit;
} subsys_words[] = {
    {"INIT", MC_SUB_INIT},
    {"COLL", MC_SUB_COLL},
    {"P2P", MC_SUB_P2P},
    {"SHM", MC_SUB_SHM},
    {"NET", MC_SUB_NET},
    {"GRAPH", MC_SUB_GRAPH},
    {"TUNING", MC_SUB_TUNING},
    {"ENV", MC_SUB_ENV},
    {"ALLOC", MC_SUB_ALLOC},
    {"CALL", MC_SUB_CALL},
    {"PROXY", MC_SUB_PROXY},
    {"NVLS", MC_SUB_NVLS},
    {"BOOTSTRAP", MC_SUB_BOOTSTRAP},
    {"REG", MC_SUB_REG},
    {"PROFILE", MC_SUB_PROFILE},
    {"RAS", MC_SUB_RAS},
    {"DESTROY", MC_SUB_DESTROY},
    {"ALLOC_HOST", MC_SUB_ALLOC_HOST},
    {"ALL", (unsigned long)MC_SUB_ALL},
};

bool mc_log_parse_subsys(const char *spec, unsigned long *mask_out, char *bad_word_out,
                         size_t bad_word_bytes)
{
  bool invert = false;
  unsigned long mask = 0;
  char buf[512];
  char *save = NULL;

  if (spec[0] == '^') {
    invert = true;
    spec++;
  }
  snprintf(buf, sizeof(buf), "%s", spec);
  for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
    bool found = false;
    size_t len;
    while (isspace((unsigned char)*tok))
      tok++;
    len = strlen(tok);
    while ((len > 0) && isspace((unsigned char)tok[len - 1]))
      tok[--len] = '\0';
    if (len == 0)
      continue;
    for (size_t i = 0; i < sizeof(subsys_words) / sizeof(subsys_words[0]); i++) {
      if (strcasecmp(tok, subsys_words[i].word) == 0) {
        mask |= subsys_words[i].bit;
        found = true;
        break;
      }
    }
    if (!found) {
      if (bad_word_out != NULL)
        snprintf(bad_word_out, bad_word_bytes, "%s", tok);
      return false;
    }
  }
  *mask_out = invert ? ~mask : mask;
  return true;
}

void mc_log_expand_filename(const char *pattern, const char *host, int pid, char *out,
                            size_t out_bytes)
{
  size_t used = 0;

  out[0] = '\0';
  for (const char *p = pattern; *p != '\0'; p++) {
    if ((p[0] == '%') && (p[1] == 'h')) {
      for (const char *h = host; *h != '\0'; h++)
        mc_str_appendf(out, out_bytes, &used, "%c", ((*h == '%') || (*h == '/')) ? '-' : *h);
      p++;
    } else if ((p[0] == '%') && (p[1] == 'p')) {
      mc_str_appendf(out, out_bytes, &used, "%d", pid);
      p++;
    } else if ((p[0] == '%') && (p[1] == '%')) {
      mc_str_appendf(out, out_bytes, &used, "%%");
      p++;
    } else {
      mc_str_appendf(out, out_bytes, &used, "%c", *p);
    }
  }
}

/* Called with log_lock held: the INFO mask MC_INFO_ON tests. */
static void update_info_subs(void)
{
  unsigned long subs = (log_level >= MC_LOG_INFO) ? log_mask : 0;

  if (__atomic_load_n(&has_sink, __ATOMIC_ACQUIRE) != 0)
    subs = ~0UL; /* the sink's owner filters */
  __atomic_store_n(&mc_log_info_subs, subs, __ATOMIC_RELAXED);
}

/* Called with log_lock held. Problems found here are printed to stderr:
 * there is no log yet to print them to. */
static void load_config(void)
{
  const char *level = mc_param_str(MC_P_DEBUG);
  const char *subsys = mc_param_str(MC_P_DEBUG_SUBSYS);
  const char *file = mc_param_str(MC_P_DEBUG_FILE);
  char bad[64];

  mc_host_name(log_host, sizeof(log_host));
  log_pid = (int)getpid();
  log_epoch_ns = mc_time_ns();
  log_level = MC_LOG_NONE;
  if (level != NULL) {
    if (strcasecmp(level, "VERSION") == 0)
      log_level = MC_LOG_VERSION;
    else if (strcasecmp(level, "WARN") == 0)
      log_level = MC_LOG_WARN;
    else if (strcasecmp(level, "INFO") == 0)
      log_level = MC_LOG_INFO;
    else if (strcasecmp(level, "ABORT") == 0)
      log_level = MC_LOG_ABORT;
    else if (strcasecmp(level, "TRACE") == 0)
      log_level = MC_LOG_TRACE;
    else
      fprintf(stderr,
              "%s:%d:%d NCCL WARN NCCL_DEBUG='%s' is not one of VERSION, WARN, INFO, "
              "ABORT, TRACE; logging disabled\n",
              log_host, log_pid, mc_gettid(), level);
  }
  log_mask = MC_SUB_INIT | MC_SUB_BOOTSTRAP | MC_SUB_ENV;
  if ((subsys != NULL) && !mc_log_parse_subsys(subsys, &log_mask, bad, sizeof(bad))) {
    fprintf(stderr,
            "%s:%d:%d NCCL WARN NCCL_DEBUG_SUBSYS='%s': unknown subsystem '%s'; "
            "using INIT,BOOTSTRAP,ENV\n",
            log_host, log_pid, mc_gettid(), subsys, bad);
    log_mask = MC_SUB_INIT | MC_SUB_BOOTSTRAP | MC_SUB_ENV;
  }
  if (log_file_owned && (log_file != NULL))
    fclose(log_file);
  log_file = stdout;
  log_file_owned = false;
  if ((file != NULL) && (log_level > MC_LOG_VERSION)) {
    char path[4096];
    FILE *f;
    mc_log_expand_filename(file, log_host, log_pid, path, sizeof(path));
    f = fopen(path, "w");
    if (f == NULL) {
      fprintf(stderr,
              "%s:%d:%d NCCL WARN NCCL_DEBUG_FILE=%s: cannot open %s: %s; logging to "
              "stdout\n",
              log_host, log_pid, mc_gettid(), file, path, strerror(errno));
    } else {
      setvbuf(f, NULL, _IOLBF, 0);
      log_file = f;
      log_file_owned = true;
    }
  }
  update_info_subs();
  __atomic_store_n(&log_loaded, 1, __ATOMIC_RELEASE);
}

static void ensure_config(void)
{
  if (__atomic_load_n(&log_loaded, __ATOMIC_ACQUIRE) != 0)
    return;
  pthread_mutex_lock(&log_lock);
  if (log_loaded == 0)
    load_config();
  pthread_mutex_unlock(&log_lock);
}

void mc_log_reload_env(void)
{
  pthread_mutex_lock(&log_lock);
  mc_param_reload_env(MC_P_DEBUG);
  mc_param_reload_env(MC_P_DEBUG_SUBSYS);
  mc_param_reload_env(MC_P_DEBUG_FILE);
  load_config();
  pthread_mutex_unlock(&log_lock);
}

void mc_log_reset_for_tests(void)
{
  pthread_mutex_lock(&log_lock);
  load_config();
  pthread_mutex_unlock(&log_lock);
}

void mc_log_set_sink(mc_log_sink_fn fn, void *arg)
{
  pthread_mutex_lock(&log_lock);
  sink_fn = fn;
  sink_arg = arg;
  __atomic_store_n(&has_sink, (fn != NULL) ? 1 : 0, __ATOMIC_RELEASE);
  if (log_loaded != 0)
    update_info_subs();
  pthread_mutex_unlock(&log_lock);
}

/* Copies the sink under the lock; false when there is none. */
static bool sink_get(mc_log_sink_fn *fn_out, void **arg_out)
{
  if (__atomic_load_n(&has_sink, __ATOMIC_ACQUIRE) == 0)
    return false;
  pthread_mutex_lock(&log_lock);
  *fn_out = sink_fn;
  *arg_out = sink_arg;
  pthread_mutex_unlock(&log_lock);
  return *fn_out != NULL;
}

bool mc_log_enabled(enum mc_log_level level, unsigned long sub)
{
  if (__atomic_load_n(&has_sink, __ATOMIC_ACQUIRE) != 0)
    return level != MC_LOG_NONE; /* the sink's owner filters */
  ensure_config();
  if (level == MC_LOG_WARN)
    return log_level >= MC_LOG_WARN;
  if ((level == MC_LOG_INFO) || (level == MC_LOG_TRACE))
    return (log_level >= level) && ((sub & log_mask) != 0);
  return log_level >= level;
}

void mc_log_set_thread_dev(int dev)
{
  thread_dev = dev;
}

void mc_log_v(enum mc_log_level level, unsigned long sub, const char *file, int line,
              const char *func, const char *fmt, va_list ap)
{
  int saved_errno = errno;
  char msg[2048];
  char line_buf[2600];
  mc_log_sink_fn fn;
  void *arg;

  if (sink_get(&fn, &arg)) {
    if (level != MC_LOG_NONE) {
      vsnprintf(msg, sizeof(msg), fmt, ap);
      fn(arg, level, sub, file, line, func, msg);
    }
    errno = saved_errno;
    return;
  }
  if (!mc_log_enabled(level, sub)) {
    errno = saved_errno;
    return;
  }
  vsnprintf(msg, sizeof(msg), fmt, ap);
  switch (level) {
  case MC_LOG_WARN:
    snprintf(line_buf, sizeof(line_buf), "\n%s:%d:%d [%d] %s:%d (%s) NCCL WARN %s\n", log_host,
             log_pid, mc_gettid(), thread_dev, file, line, func, msg);
    break;
  case MC_LOG_TRACE:
    snprintf(line_buf, sizeof(line_buf), "%s:%d:%d [%d] %.6f %s:%d NCCL TRACE %s\n", log_host,
             log_pid, mc_gettid(), thread_dev, (double)(mc_time_ns() - log_epoch_ns) / 1e6, func,
             line, msg);
    break;
  case MC_LOG_VERSION:
    snprintf(line_buf, sizeof(line_buf), "%s\n", msg);
    break;
  default:
    snprintf(line_buf, sizeof(line_buf), "%s:%d:%d [%d] NCCL INFO %s\n", log_host, log_pid,
             mc_gettid(), thread_dev, msg);
    break;
  }
  pthread_mutex_lock(&log_lock);
  fputs(line_buf, log_file);
  fflush(log_file);
  pthread_mutex_unlock(&log_lock);
  if ((level == MC_LOG_WARN) && (log_level == MC_LOG_ABORT))
    abort();
  errno = saved_errno;
}

void mc_log(enum mc_log_level level, unsigned long sub, const char *file, int line,
            const char *func, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  mc_log_v(level, sub, file, line, func, fmt, ap);
  va_end(ap);
}

ncclResult_t mc_error_record(ncclResult_t res, const char *file, int line, const char *func,
                             const char *fmt, ...)
{
  va_list ap;
  int saved_errno = errno;

  va_start(ap, fmt);
  vsnprintf(last_error_thread, sizeof(last_error_thread), fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&log_lock);
  memcpy(last_error_global, last_error_thread, sizeof(last_error_global));
  pthread_mutex_unlock(&log_lock);
  mc_log(MC_LOG_WARN, MC_SUB_ALL, file, line, func, "%s", last_error_thread);
  errno = saved_errno;
  return res;
}

void mc_log_propagate(ncclResult_t res, const char *file, int line)
{
  mc_log(MC_LOG_INFO, MC_SUB_ALL, file, line, "", "%s:%d -> %d", file, line, (int)res);
}

const char *mc_error_last(void)
{
  /* The process's last error is copied under the lock that its writers
   * hold: another thread may record one while the caller reads it. */
  static __thread char global_copy[LAST_ERROR_BYTES];

  if (last_error_thread[0] != '\0')
    return last_error_thread;
  pthread_mutex_lock(&log_lock);
  memcpy(global_copy, last_error_global, sizeof(global_copy));
  pthread_mutex_unlock(&log_lock);
  return global_copy;
}

void mc_error_last_copy(char *buf, size_t buf_bytes)
{
  snprintf(buf, buf_bytes, "%s", last_error_thread);
}

void mc_error_clear_thread(void)
{
  last_error_thread[0] = '\0';
}

void mc_error_set_thread(const char *text)
{
  snprintf(last_error_thread, sizeof(last_error_thread), "%s", text);
}

void mc_log_version_once(void)
{
  static int printed;

  ensure_config();
  if (__atomic_exchange_n(&printed, 1, __ATOMIC_RELAXED) != 0)
    return;
  if ((log_level == MC_LOG_VERSION) || (log_level == MC_LOG_WARN))
    mc_log(MC_LOG_VERSION, MC_SUB_ALL, MC_FILE_BASENAME, __LINE__, __func__,
           "NCCL version %d.%d.%d+%s (meshccl, host memory)", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
           NCCL_SUFFIX);
  else
    MC_INFO(MC_SUB_INIT, "NCCL version %d.%d.%d+%s (meshccl, host memory)", NCCL_MAJOR, NCCL_MINOR,
            NCCL_PATCH, NCCL_SUFFIX);
}
