/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small shared helpers. The host and pid hashes follow NCCL's
 * misc/utils.cc: host = hostname + boot id (or NCCL_HOSTID alone),
 * pid = pid + pid namespace.
 */
#include "utils.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "params.h"

uint64_t mc_time_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double mc_time_sec(void)
{
  return (double)mc_time_ns() / 1e9;
}

struct mc_deadline mc_deadline_in_ms(int64_t ms)
{
  struct mc_deadline dl;

  dl.span_ms = ms;
  dl.at_ns = (ms < 0) ? UINT64_MAX : mc_time_ns() + (uint64_t)ms * 1000000ull;
  return dl;
}

bool mc_deadline_passed(struct mc_deadline dl)
{
  return (dl.at_ns != UINT64_MAX) && (mc_time_ns() >= dl.at_ns);
}

int mc_deadline_left_ms(struct mc_deadline dl, int cap_ms)
{
  uint64_t now;
  uint64_t left_ms;

  if (dl.at_ns == UINT64_MAX)
    return (cap_ms >= 0) ? cap_ms : INT32_MAX;
  now = mc_time_ns();
  if (now >= dl.at_ns)
    return 0;
  left_ms = (dl.at_ns - now + 999999ull) / 1000000ull;
  if ((cap_ms >= 0) && (left_ms > (uint64_t)cap_ms))
    return cap_ms;
  return (left_ms > INT32_MAX) ? INT32_MAX : (int)left_ms;
}

struct mc_deadline mc_deadline_min(struct mc_deadline a, struct mc_deadline b)
{
  return (a.at_ns <= b.at_ns) ? a : b;
}

int mc_wait_tick_next(int tick, bool progressed)
{
  if (progressed || (tick < MC_WAIT_TICK_MS))
    return MC_WAIT_TICK_MS;
  return (tick > MC_WAIT_TICK_MAX_MS / 2) ? MC_WAIT_TICK_MAX_MS : 2 * tick;
}

void mc_sleep_ms_abortable(int ms, const volatile uint32_t *abort_flag)
{
  struct mc_deadline dl = mc_deadline_in_ms(ms);

  while (!mc_deadline_passed(dl)) {
    struct timespec ts = {0, 0};
    int left = mc_deadline_left_ms(dl, 10);

    if ((abort_flag != NULL) && (__atomic_load_n(abort_flag, __ATOMIC_ACQUIRE) != 0))
      return;
    ts.tv_nsec = (long)left * 1000000L;
    nanosleep(&ts, NULL);
  }
}

uint64_t mc_hash64(const void *data, size_t bytes)
{
  const unsigned char *p = data;
  uint64_t h = 0xcbf29ce484222325ull;

  for (size_t i = 0; i < bytes; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

uint64_t mc_hash_combine(uint64_t a, uint64_t b)
{
  uint64_t v[2] = {a, b};

  return mc_hash64(v, sizeof(v));
}

void mc_host_name(char *out, size_t out_bytes)
{
  char *dot;

  if (gethostname(out, out_bytes) != 0)
    snprintf(out, out_bytes, "unknown");
  out[out_bytes - 1] = '\0';
  dot = strchr(out, '.');
  if (dot != NULL)
    *dot = '\0';
}

static void read_first_line(const char *path, char *out, size_t out_bytes)
{
  FILE *f = fopen(path, "r");

  out[0] = '\0';
  if (f == NULL)
    return;
  if (fgets(out, (int)out_bytes, f) == NULL)
    out[0] = '\0';
  fclose(f);
  out[strcspn(out, "\n")] = '\0';
}

uint64_t mc_host_hash(void)
{
  const char *host_id = mc_param_str(MC_P_HOSTID);
  char buf[1024];
  char boot_id[128];
  size_t used = 0;

  if (host_id != NULL)
    return mc_hash64(host_id, strlen(host_id));
  if (gethostname(buf, sizeof(buf)) != 0)
    buf[0] = '\0';
  buf[sizeof(buf) - 1] = '\0';
  used = strlen(buf);
  read_first_line("/proc/sys/kernel/random/boot_id", boot_id, sizeof(boot_id));
  mc_str_appendf(buf, sizeof(buf), &used, "%s", boot_id);
  return mc_hash64(buf, strlen(buf));
}

uint64_t mc_pid_hash(void)
{
  char buf[256];
  char ns[128];
  ssize_t n;
  size_t used;

  snprintf(buf, sizeof(buf), "%ld", (long)getpid());
  used = strlen(buf);
  n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  if (n > 0) {
    ns[n] = '\0';
    mc_str_appendf(buf, sizeof(buf), &used, "%s", ns);
  }
  return mc_hash64(buf, strlen(buf));
}

void mc_pidns_id(uint64_t *ino_out, uint64_t *dev_out)
{
  struct stat st;

  if ((stat("/proc/self/ns/pid", &st) == 0) && (st.st_ino != 0)) {
    *ino_out = (uint64_t)st.st_ino;
    *dev_out = (uint64_t)st.st_dev;
  } else {
    *ino_out = 0;
    *dev_out = 0;
  }
}

int mc_gettid(void)
{
  return (int)syscall(SYS_gettid);
}

void mc_thread_set_name(const char *name)
{
  char short_name[16];

  if (mc_param_int(MC_P_SET_THREAD_NAME) == 0)
    return;
  snprintf(short_name, sizeof(short_name), "%s", name); /* the kernel keeps 15 characters */
  pthread_setname_np(pthread_self(), short_name);
}

const char *mc_fd_limit_hint(int err, char *buf, size_t buf_bytes)
{
  int saved = errno;
  struct rlimit rl;

  buf[0] = '\0';
  if (err == ENFILE) {
    snprintf(buf, buf_bytes, "; the system is at its open-files limit (sysctl fs.file-max)");
  } else if (err == EMFILE) {
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
      rl.rlim_cur = rl.rlim_max = 0;
    snprintf(buf, buf_bytes,
             "; this process is at its open-files limit (RLIMIT_NOFILE %llu, hard %llu): raise "
             "`ulimit -n`",
             (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max);
  }
  errno = saved;
  return buf;
}

ncclResult_t mc_random_bytes(void *buf, size_t bytes)
{
  size_t done = 0;

  while (done < bytes) {
    ssize_t n = getrandom((char *)buf + done, bytes - done, 0);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return MC_FAIL(ncclSystemError, "getrandom failed: %s", strerror(errno));
    }
    done += (size_t)n;
  }
  return ncclSuccess;
}

char *mc_str_appendf(char *buf, size_t buf_bytes, size_t *used, const char *fmt, ...)
{
  va_list ap;
  int n;

  if (*used >= buf_bytes)
    return buf;
  va_start(ap, fmt);
  n = vsnprintf(buf + *used, buf_bytes - *used, fmt, ap);
  va_end(ap);
  if (n > 0)
    *used = ((size_t)n >= buf_bytes - *used) ? buf_bytes - 1 : *used + (size_t)n;
  return buf;
}

void mc_str_int_ranges(const int *v, int n, char *buf, size_t buf_bytes)
{
  size_t used = 0;

  buf[0] = '\0';
  for (int i = 0; i < n;) {
    int j = i;
    while ((j + 1 < n) && (v[j + 1] == v[j] + 1))
      j++;
    if (j == i)
      mc_str_appendf(buf, buf_bytes, &used, "%s%d", (i == 0) ? "" : ",", v[i]);
    else
      mc_str_appendf(buf, buf_bytes, &used, "%s%d-%d", (i == 0) ? "" : ",", v[i], v[j]);
    i = j + 1;
  }
}

ncclResult_t mc_calloc_impl(void **ptr_out, size_t n, size_t elem_bytes, const char *file, int line)
{
  void *p;

  if (n == 0)
    n = 1;
  p = calloc(n, elem_bytes);
  if (p == NULL)
    return mc_error_record(ncclSystemError, file, line, __func__,
                           "out of memory allocating %zu x %zu bytes", n, elem_bytes);
  *ptr_out = p;
  return ncclSuccess;
}

void mc_fault_point(const char *stage)
{
  static const char *const stages[] = {"bootstrap", "peers", "connect"};
  static int fired;
  const char *v = mc_param_str(MC_P_FAULT_INIT);
  const char *colon;
  bool is_valid = false;
  int sig = 0;

  if (v == NULL)
    return;
  colon = strchr(v, ':');
  if (colon != NULL) {
    if (strcmp(colon + 1, "kill") == 0)
      sig = SIGKILL;
    else if (strcmp(colon + 1, "stop") == 0)
      sig = SIGSTOP;
    for (size_t i = 0; i < sizeof(stages) / sizeof(stages[0]); i++)
      is_valid |= (strlen(stages[i]) == (size_t)(colon - v)) &&
                  (strncmp(v, stages[i], (size_t)(colon - v)) == 0);
  }
  if (!is_valid || (sig == 0)) {
    MC_WARN_ONCE("MESHCCL_FAULT_INIT='%s' is not STAGE:ACTION (STAGE bootstrap, peers or connect; "
                 "ACTION kill or stop); no fault is injected",
                 v);
    return;
  }
  if ((strncmp(v, stage, (size_t)(colon - v)) != 0) || (strlen(stage) != (size_t)(colon - v)))
    return;
  if (__atomic_exchange_n(&fired, 1, __ATOMIC_RELAXED) != 0)
    return;
  MC_WARN("Fault injection: MESHCCL_FAULT_INIT=%s: pid %d sends itself %s at stage %s", v,
          (int)getpid(), (sig == SIGKILL) ? "SIGKILL" : "SIGSTOP", stage);
  (void)raise(sig);
}
