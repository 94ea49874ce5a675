/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host-measured decisions of the data path (tp_decide.h): spin vs yield
 * and threads per rank from the host's CPUs and the cgroup's quota, plain vs streaming slot
 * writes from the rates a SHM sender achieved with each, single copy (CMA)
 * vs the FIFO per step size from what the process measured of both.
 */
#include "transport/tp_decide.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int mc_tp_host_cpus(const struct mc_host_figures *f)
{
  int cpus = f->online_cpus;

  if ((f->quota_cpus > 0) && ((cpus <= 0) || (f->quota_cpus < cpus)))
    cpus = f->quota_cpus;
  return (cpus > 0) ? cpus : 0;
}

int mc_tp_decide_spin(const struct mc_host_figures *f, int *cpus_out)
{
  int cpus = mc_tp_host_cpus(f);

  if (cpus_out != NULL)
    *cpus_out = cpus;
  if ((cpus > 0) && (f->local_ranks > cpus))
    return MC_SPIN_PASSES_YIELD;
  return MC_SPIN_PASSES_SPIN;
}

int mc_tp_decide_threads(const struct mc_host_figures *f, int n_channels, int forced, int *idle_out)
{
  int cpus = mc_tp_host_cpus(f);
  int idle;
  int k;

  idle =
      ((cpus > 0) && (f->local_ranks > 0) && (cpus > f->local_ranks)) ? cpus - f->local_ranks : 0;
  if (idle_out != NULL)
    *idle_out = idle;
  if (forced >= 1)
    return (forced > MC_THREADS_MAX) ? MC_THREADS_MAX : forced;
  k = (idle > 0) ? idle / f->local_ranks + 1 : 1;
  if ((n_channels >= 1) && (k > n_channels))
    k = n_channels;
  if (k > MC_THREADS_MAX)
    k = MC_THREADS_MAX;
  return (k < 1) ? 1 : k;
}

static bool in_list(const int *v, int n, int x)
{
  for (int i = 0; i < n; i++)
    if (v[i] == x)
      return true;
  return false;
}

void mc_tp_decide_worker_cpus(const int *mask_cpus, int n_mask, int n_online, int cur, int k,
                              int local_rank, int local_ranks, int *cpus_out)
{
  int got = 0;

  for (int i = 0; i < k - 1; i++)
    cpus_out[i] = -1;
  if (n_online <= 0)
    return;
  if ((n_mask >= k) && (n_mask < n_online) && (cur >= 0)) {
    int far = (n_mask > 0) ? mask_cpus[n_mask - 1] + cur + 1 : 0;
    for (int d = 1; (d <= far) && (got < k - 1); d++) {
      int cand[2] = {cur - d, cur + d};
      for (int j = 0; (j < 2) && (got < k - 1); j++)
        if ((cand[j] >= 0) && in_list(mask_cpus, n_mask, cand[j]))
          cpus_out[got++] = cand[j];
    }
    return;
  }
  for (int i = 0; i < k - 1; i++)
    cpus_out[i] = (local_ranks + local_rank * (k - 1) + i) % n_online;
}

/* quota / period rounded up; 0 when quota < 0 (no limit) or either is bad. */
static int quota_cpus(long long quota, long long period)
{
  if ((quota <= 0) || (period <= 0))
    return 0;
  return (int)((quota + period - 1) / period);
}

int mc_tp_cgroup_v2_cpus(const char *cpu_max)
{
  long long quota;
  long long period;

  if ((cpu_max == NULL) || (strncmp(cpu_max, "max", 3) == 0))
    return 0;
  if (sscanf(cpu_max, "%lld %lld", &quota, &period) != 2)
    return 0;
  return quota_cpus(quota, period);
}

int mc_tp_cgroup_v1_cpus(const char *quota_us, const char *period_us)
{
  long long quota;
  long long period;

  if ((quota_us == NULL) || (period_us == NULL))
    return 0;
  if ((sscanf(quota_us, "%lld", &quota) != 1) || (sscanf(period_us, "%lld", &period) != 1))
    return 0;
  return quota_cpus(quota, period);
}

/* The first line of dir/name into buf (false when unreadable). */
static bool read_line(const char *dir, const char *name, char *buf, size_t size)
{
  char path[1100];
  FILE *f;
  bool ok;

  if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
    return false;
  f = fopen(path, "re");
  if (f == NULL)
    return false;
  ok = (fgets(buf, (int)size, f) != NULL);
  fclose(f);
  return ok;
}

/* The quota (CPUs) of the cgroup at base + rel and of each one above it up
 * to base: the lowest (0: none). */
static int walk_quota(const char *base, const char *rel, bool v2)
{
  char dir[1024];
  char a[128];
  char b[128];
  int best = 0;
  size_t root_len = strlen(base);

  snprintf(dir, sizeof(dir), "%s%s", base, rel);
  for (;;) {
    int cpus = 0;
    char *slash;
    if (v2 && read_line(dir, "cpu.max", a, sizeof(a)))
      cpus = mc_tp_cgroup_v2_cpus(a);
    else if (!v2 && read_line(dir, "cpu.cfs_quota_us", a, sizeof(a)) &&
             read_line(dir, "cpu.cfs_period_us", b, sizeof(b)))
      cpus = mc_tp_cgroup_v1_cpus(a, b);
    if ((cpus > 0) && ((best == 0) || (cpus < best)))
      best = cpus;
    slash = strrchr(dir, '/');
    if ((slash == NULL) || ((size_t)(slash - dir) < root_len))
      break;
    *slash = '\0';
  }
  return best;
}

/* The lowest quota of this process's cgroups, v2 ("0::PATH") or v1 (the
 * hierarchy whose controllers include cpu). */
static int cgroup_quota(const char *cg_root, const char *text)
{
  int best = 0;

  for (const char *line = text; (line != NULL) && (*line != '\0');) {
    const char *end = strchr(line, '\n');
    size_t len = (end != NULL) ? (size_t)(end - line) : strlen(line);
    char buf[1024];
    char *c1;
    char *c2;
    int cpus = 0;
    snprintf(buf, sizeof(buf), "%.*s", (int)len, line);
    line = (end != NULL) ? end + 1 : NULL;
    c1 = strchr(buf, ':');
    c2 = (c1 != NULL) ? strchr(c1 + 1, ':') : NULL;
    if (c2 == NULL)
      continue;
    *c1 = '\0';
    *c2 = '\0';
    if ((strcmp(buf, "0") == 0) && (c1[1] == '\0')) {
      cpus = walk_quota(cg_root, (strcmp(c2 + 1, "/") == 0) ? "" : c2 + 1, true);
    } else {
      char base[1024];
      bool has_cpu = false;
      char *save = NULL;
      for (char *t = strtok_r(c1 + 1, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save))
        has_cpu = has_cpu || (strcmp(t, "cpu") == 0);
      if (!has_cpu)
        continue;
      snprintf(base, sizeof(base), "%s/cpu,cpuacct", cg_root);
      cpus = walk_quota(base, (strcmp(c2 + 1, "/") == 0) ? "" : c2 + 1, false);
      if (cpus == 0) {
        snprintf(base, sizeof(base), "%s/cpu", cg_root);
        cpus = walk_quota(base, (strcmp(c2 + 1, "/") == 0) ? "" : c2 + 1, false);
      }
    }
    if ((cpus > 0) && ((best == 0) || (cpus < best)))
      best = cpus;
  }
  return best;
}

void mc_tp_host_figures_read(const char *cg_root, const char *proc_cgroup, int local_ranks,
                             struct mc_host_figures *out)
{
  cpu_set_t set;
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  char text[4096];

  memset(out, 0, sizeof(*out));
  out->local_ranks = local_ranks;
  out->online_cpus = (n > 0) ? (int)n : 0;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    out->affinity_cpus = CPU_COUNT(&set);
  if (proc_cgroup == NULL) {
    FILE *f = fopen("/proc/self/cgroup", "re");
    size_t got = 0;
    if (f != NULL) {
      got = fread(text, 1, sizeof(text) - 1, f);
      fclose(f);
    }
    text[got] = '\0';
    proc_cgroup = text;
  }
  out->quota_cpus = cgroup_quota(cg_root, proc_cgroup);
}

/* v's first n samples (at most 64), sorted into s; their count. */
static int sorted_samples(const float *v, int n, float s[64])
{
  if (n <= 0)
    return 0;
  if (n > 64)
    n = 64;
  memcpy(s, v, (size_t)n * sizeof(*s));
  for (int i = 1; i < n; i++) { /* insertion sort: a handful of samples */
    float x = s[i];
    int j = i - 1;
    for (; (j >= 0) && (s[j] > x); j--)
      s[j + 1] = s[j];
    s[j + 1] = x;
  }
  return n;
}

float mc_tp_median(const float *v, int n)
{
  float s[64];

  n = sorted_samples(v, n, s);
  if (n == 0)
    return 0;
  return ((n & 1) != 0) ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

float mc_tp_lower_quartile(const float *v, int n)
{
  float s[64];

  n = sorted_samples(v, n, s);
  return (n == 0) ? 0 : s[(n - 1) / 4];
}

bool mc_tp_decide_stream(const float *plain, int n_plain, const float *stream, int n_stream,
                         bool is_stream, float *plain_out, float *stream_out)
{
  float p = mc_tp_median(plain, n_plain);
  float s = mc_tp_median(stream, n_stream);
  float k = 1.0f + MC_STREAM_MARGIN_PCT / 100.0f;

  if (plain_out != NULL)
    *plain_out = p;
  if (stream_out != NULL)
    *stream_out = s;
  if ((n_plain == 0) || (n_stream == 0))
    return is_stream;
  if (is_stream)
    return !((p > s * k) && (mc_tp_lower_quartile(plain, n_plain) > s));
  return (s > p * k) && (mc_tp_lower_quartile(stream, n_stream) > p);
}

bool mc_tp_stream_separated(const float *plain, int n_plain, const float *stream, int n_stream)
{
  float p = mc_tp_median(plain, n_plain);
  float s = mc_tp_median(stream, n_stream);

  if ((n_plain == 0) || (n_stream == 0))
    return false;
  return (p >= s) ? (mc_tp_lower_quartile(plain, n_plain) >= s)
                  : (mc_tp_lower_quartile(stream, n_stream) >= p);
}

size_t mc_tp_decide_cma(const struct mc_cma_figures *f, size_t max_step)
{
  size_t from = MC_CMA_NEVER;
  int top = -1;

  for (int i = 0; (i < f->n_sizes) && (i < MC_CMA_MAX_SIZES); i++)
    if (f->bytes[i] <= max_step)
      top = i;
  /* From the largest size down: the threshold is the last size of the
   * unbroken run of CMA wins that ends at the largest. */
  for (int i = top; i >= 0; i--) {
    double fifo = f->fifo_gbps[i];
    double cma = f->cma_gbps[i];
    bool wins = (fifo > 0) && (cma > 0) && (cma * 100.0 >= fifo * (100.0 + MC_CMA_MARGIN_PCT));
    if (!wins)
      break;
    from = f->bytes[i];
  }
  return from;
}

float mc_tp_cma_rate(size_t bytes, double call_ns, double copy_gbps)
{
  double ns;

  if ((bytes == 0) || (copy_gbps <= 0))
    return 0;
  ns = call_ns + (double)bytes / copy_gbps; /* GB/s = bytes per ns */
  return (float)((double)bytes / ns);
}

/* "1024K" / "32M" / "48K" (sysfs cache size) in KiB; 0 when unreadable. */
static int cache_kib(const char *text)
{
  char *end = NULL;
  long v = strtol(text, &end, 10);

  if ((end == text) || (v <= 0))
    return 0;
  if ((*end == 'M') || (*end == 'm'))
    v *= 1024;
  else if ((*end == 'G') || (*end == 'g'))
    v *= 1024 * 1024;
  else if ((*end != 'K') && (*end != 'k'))
    v /= 1024; /* plain bytes */
  return (v > 0x3fffffff) ? 0x3fffffff : (int)v;
}

/* CPUs in a cpulist ("0-3,8,10-11"); 1 when it names none. */
static int cpulist_count(const char *text)
{
  int n = 0;
  const char *p = text;

  while ((*p != '\0') && (*p != '\n')) {
    char *end = NULL;
    long a = strtol(p, &end, 10);
    long b = a;
    if (end == p)
      break;
    if (*end == '-') {
      p = end + 1;
      b = strtol(p, &end, 10);
      if (end == p)
        break;
    }
    if (b >= a)
      n += (int)(b - a + 1);
    p = (*end == ',') ? end + 1 : end;
    if (end == p)
      break;
  }
  return (n > 0) ? n : 1;
}

bool mc_tp_cache_read(const char *root, int cpu, struct mc_cache_facts *out)
{
  char dir[1024];
  size_t root_len = strlen(root);

  memset(out, 0, sizeof(*out));
  out->cpu = cpu;
  while ((root_len > 0) && (root[root_len - 1] == '/'))
    root_len--;
  for (int idx = 0; idx < 16; idx++) {
    char level[32];
    char type[32];
    char size[32];
    char shared[256];
    int lvl;
    int kib;
    int sharing;
    snprintf(dir, sizeof(dir), "%.*s/sys/devices/system/cpu/cpu%d/cache/index%d", (int)root_len,
             root, cpu, idx);
    if (!read_line(dir, "level", level, sizeof(level)) ||
        !read_line(dir, "type", type, sizeof(type)) || !read_line(dir, "size", size, sizeof(size)))
      continue;
    if (strncmp(type, "Instruction", 11) == 0)
      continue;
    lvl = atoi(level);
    kib = cache_kib(size);
    sharing = read_line(dir, "shared_cpu_list", shared, sizeof(shared)) ? cpulist_count(shared) : 1;
    if (kib == 0)
      continue;
    if (lvl == 2) {
      out->l2_kib = kib;
      out->l2_sharing = sharing;
    }
    if ((lvl >= 2) && (lvl >= out->llc_level)) {
      out->llc_level = lvl;
      out->llc_kib = kib;
      out->llc_sharing = sharing;
    }
  }
  if (out->l2_kib == 0) {
    memset(out, 0, sizeof(*out));
    out->cpu = cpu;
    return false;
  }
  return true;
}

size_t mc_tp_decide_fifo(const struct mc_cache_facts *c, int hot_conns)
{
  uint64_t budget;
  size_t fifo = MC_FIFO_MAX_BYTES;

  if ((c->l2_kib <= 0) || (hot_conns <= 0))
    return MC_FIFO_MIN_BYTES;
  budget = (uint64_t)c->l2_kib * 1024u * MC_FIFO_L2_SHARE /
           (uint64_t)((c->l2_sharing > 0) ? c->l2_sharing : 1);
  while ((fifo > MC_FIFO_MIN_BYTES) && ((uint64_t)fifo * (uint64_t)hot_conns > budget))
    fifo /= 2;
  return fifo;
}

/* The L2 one core has (l2_kib / l2_sharing), MC_STREAM_OUT_BYTES without
 * an L2 figure. */
static size_t core_l2_bytes(const struct mc_cache_facts *c)
{
  if (c->l2_kib <= 0)
    return MC_STREAM_OUT_BYTES;
  return (size_t)c->l2_kib * 1024u / (size_t)((c->l2_sharing > 0) ? c->l2_sharing : 1);
}

size_t mc_tp_decide_stream_out(const struct mc_cache_facts *c)
{
  return core_l2_bytes(c);
}

size_t mc_tp_decide_sym_chunk(const struct mc_cache_facts *c, int n_ranks)
{
  size_t chunk = (core_l2_bytes(c) / (size_t)((n_ranks > 0 ? n_ranks : 1) + 2)) & ~(size_t)4095;

  return (chunk < MC_SYM_CHUNK_MIN_BYTES) ? MC_SYM_CHUNK_MIN_BYTES : chunk;
}

size_t mc_tp_decide_oneshot(int n_ranks, const struct mc_handoff_figures *f, size_t limit)
{
  double n = n_ranks;
  double s;
  size_t bytes;

  if (limit < MC_ONESHOT_MIN_BYTES)
    return limit;
  if (n_ranks == 2) /* the same bytes both ways: the one-shot's single hand-off wins */
    return limit & ~(size_t)63;
  if ((f->cpus > 0) && (n_ranks > f->cpus)) /* each hand-off waits for the scheduler */
    return limit & ~(size_t)63;
  if ((n_ranks < 2) || (f->handoff_ns <= 0) || (f->copy_gbps <= 0))
    return MC_ONESHOT_MIN_BYTES;
  s = (2.0 * n - 3.0) * n * (double)f->handoff_ns * (double)f->copy_gbps /
      (2.0 * (n - 1.0) * (n - 2.0));
  if (s >= (double)limit)
    return limit & ~(size_t)63;
  bytes = (size_t)s & ~(size_t)63;
  return (bytes < MC_ONESHOT_MIN_BYTES) ? MC_ONESHOT_MIN_BYTES : bytes;
}
