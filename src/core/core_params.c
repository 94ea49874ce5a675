/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Parameter loader. Mirrors NCCL's param.cc (environment first, then
 * NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf; the first source wins)
 * with validation and unknown-variable reporting from libfabric and UCX.
 * Loading never logs (logging itself reads parameters): messages are kept
 * and printed by mc_param_report_once().
 */
#include "params.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

extern char **environ;

struct param_desc {
  const char *env;
  bool is_int;
  int64_t def_int;
  int64_t min;
  int64_t max;
  const char *def_str;
  const char *help;
};

static const struct param_desc descs[MC_P_COUNT] = {
#define MC_PARAM_INT(_id, _env, _def, _min, _max, _help)                                           \
  [MC_P_##_id] = {                                                                                 \
      .env = _env, .is_int = true, .def_int = _def, .min = _min, .max = _max, .help = _help},
#define MC_PARAM_STR(_id, _env, _def, _help)                                                       \
  [MC_P_##_id] = {.env = _env, .is_int = false, .def_str = _def, .help = _help},
#include "params.def"
#undef MC_PARAM_INT
#undef MC_PARAM_STR
};

/* NCCL variables that are accepted but not used by this version: they get
 * an INFO line, not an "unknown variable" warning. Prefixes end in '_'. */
static const char *const nccl_ignored[] = {
    "NCCL_IB_",
    "NCCL_GIN_",
    "NCCL_NVLS_",
    "NCCL_COLLNET_",
    "NCCL_RAS_",
    "NCCL_MNNVL_",
    "NCCL_TUNER_PLUGIN",
    "NCCL_PROFILER_PLUGIN",
    "NCCL_NTHREADS",

    "NCCL_LAUNCH_MODE",
    "NCCL_CUMEM_ENABLE",
    "NCCL_DEBUG_TIMESTAMP_LEVELS",
    "NCCL_DEBUG_TIMESTAMP_FORMAT",
    "NCCL_IGNORE_CPU_AFFINITY",
    "NCCL_CHECK_POINTERS",
    "NCCL_OOB_NET_ENABLE",

    "NCCL_P2P_NET_CHUNKSIZE",
    "NCCL_ASYNC_ERROR_HANDLING",
    "NCCL_BLOCKING_WAIT",
    "NCCL_WARN_ENABLE_DEBUG_INFO",
    "NCCL_CUDA_PATH",
    "NCCL_HOME",
    "NCCL_VERSION",
    "NCCL_ROOT",
    "NCCL_LIBRARY",
    "NCCL_INCLUDE_DIR",
    "NCCL_LIB_DIR",
    "NCCL_SOCKET_POLL_TIMEOUT_MSEC",
    /* nccl-tests' own (NCCL_TESTS_SPLIT, NCCL_TESTS_MIN_BW, ...): meshccl-perf reads them. */
    "NCCL_TESTS_",
};

#define MAX_MSGS      32
#define MSG_BYTES     640
#define CONF_MAX      256
#define CONF_LINE_MAX 4096

struct param_val {
  int64_t i;
  char *s;
  enum mc_param_source src;
  bool claimed;     /* a source set this name, validly or not: later sources are ignored */
  char origin[160]; /* "environment" or "file:line" */
};

struct param_msg {
  bool is_warn;
  char text[MSG_BYTES];
};

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static pthread_once_t report_once = PTHREAD_ONCE_INIT;
static struct param_val vals[MC_P_COUNT];
static struct param_msg msgs[MAX_MSGS];
static int n_msgs;

static void add_msg(bool is_warn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_msg(bool is_warn, const char *fmt, ...)
{
  va_list ap;

  if (n_msgs >= MAX_MSGS)
    return;
  va_start(ap, fmt);
  vsnprintf(msgs[n_msgs].text, sizeof(msgs[n_msgs].text), fmt, ap);
  va_end(ap);
  msgs[n_msgs].is_warn = is_warn;
  n_msgs++;
}

static int find_param(const char *name, size_t name_len)
{
  for (int id = 0; id < MC_P_COUNT; id++) {
    if ((strlen(descs[id].env) == name_len) && (strncmp(descs[id].env, name, name_len) == 0))
      return id;
  }
  return -1;
}

static bool is_ignored_nccl(const char *name, size_t name_len)
{
  for (size_t i = 0; i < sizeof(nccl_ignored) / sizeof(nccl_ignored[0]); i++) {
    size_t n = strlen(nccl_ignored[i]);
    if (nccl_ignored[i][n - 1] == '_') {
      if ((name_len >= n) && (strncmp(name, nccl_ignored[i], n) == 0))
        return true;
    } else if ((name_len == n) && (strncmp(name, nccl_ignored[i], n) == 0)) {
      return true;
    }
  }
  return false;
}

/* Parses and validates one value; on failure keeps the default and says why. */
static void set_value(int id, const char *value, enum mc_param_source src, const char *origin)
{
  const struct param_desc *d = &descs[id];
  struct param_val *v = &vals[id];

  v->claimed = true;
  if (d->is_int) {
    char *end = NULL;
    long long x;

    errno = 0;
    x = strtoll(value, &end, 0);
    while ((end != NULL) && isspace((unsigned char)*end))
      end++;
    if ((errno != 0) || (end == value) || (*end != '\0') || (x < d->min) || (x > d->max)) {
      add_msg(true, "%s='%s' (%s) is not an integer in [%lld, %lld]; using the default %lld",
              d->env, value, origin, (long long)d->min, (long long)d->max, (long long)d->def_int);
      return;
    }
    v->i = x;
  } else {
    char *copy = strdup(value);
    if (copy == NULL)
      return;
    free(v->s);
    v->s = copy;
  }
  v->src = src;
  snprintf(v->origin, sizeof(v->origin), "%s", origin);
}

static void report_unknown(const char *name, size_t name_len, const char *where)
{
  char buf[128];
  const char *close;

  snprintf(buf, sizeof(buf), "%.*s", (int)name_len, name);
  if (is_ignored_nccl(buf, strlen(buf))) {
    add_msg(false, "%s is set (%s) but not used by this version of meshccl", buf, where);
    return;
  }
  close = mc_param_closest(buf);
  if (close != NULL)
    add_msg(true, "unknown variable %s (%s); did you mean %s? (docs/ENV.md lists them all)", buf,
            where, close);
  else
    add_msg(true, "unknown variable %s (%s); docs/ENV.md lists the variables meshccl reads", buf,
            where);
}

static bool is_our_prefix(const char *name)
{
  return (strncmp(name, "NCCL_", 5) == 0) || (strncmp(name, "MESHCCL_", 8) == 0);
}

/* Reads NAME=value lines of one file; sets what the environment left unset. */
static void load_conf_file(const char *path, bool must_exist)
{
  FILE *f = fopen(path, "r");
  char line[CONF_LINE_MAX];
  int line_no = 0;

  if (f == NULL) {
    if (must_exist)
      add_msg(true, "NCCL_CONF_FILE=%s cannot be opened: %s", path, strerror(errno));
    return;
  }
  while (fgets(line, sizeof(line), f) != NULL) {
    char *p = line;
    char *eq;
    char *val;
    char *end;
    char origin[160];
    int id;

    line_no++;
    while (isspace((unsigned char)*p))
      p++;
    if ((*p == '#') || (*p == '\0'))
      continue;
    eq = strchr(p, '=');
    if (eq == NULL) {
      add_msg(true, "%s:%d: expected NAME=value, found '%.60s'", path, line_no, p);
      continue;
    }
    end = eq;
    while ((end > p) && isspace((unsigned char)end[-1]))
      end--;
    val = eq + 1;
    while (isspace((unsigned char)*val))
      val++;
    for (char *q = val + strlen(val); (q > val) && isspace((unsigned char)q[-1]); q--)
      q[-1] = '\0';
    snprintf(origin, sizeof(origin), "%s:%d", path, line_no);
    id = find_param(p, (size_t)(end - p));
    if (id < 0) {
      if ((end - p > 5) && ((strncmp(p, "NCCL_", 5) == 0) || (strncmp(p, "MESHCCL_", 8) == 0)))
        report_unknown(p, (size_t)(end - p), origin);
      continue;
    }
    if (!vals[id].claimed)
      set_value(id, val, MC_PARAM_SRC_CONF_FILE, origin);
  }
  fclose(f);
}

static void load_all(void)
{
  const char *conf;
  const char *home;

  for (int id = 0; id < MC_P_COUNT; id++) {
    const char *e = getenv(descs[id].env);
    vals[id].i = descs[id].def_int;
    vals[id].s = (descs[id].def_str != NULL) ? strdup(descs[id].def_str) : NULL;
    vals[id].src = MC_PARAM_SRC_DEFAULT;
    vals[id].claimed = false;
    snprintf(vals[id].origin, sizeof(vals[id].origin), "default");
    if ((e != NULL) && (e[0] != '\0'))
      set_value(id, e, MC_PARAM_SRC_ENV, "environment");
  }
  for (char **ep = environ; (ep != NULL) && (*ep != NULL); ep++) {
    const char *eq = strchr(*ep, '=');
    size_t len;
    if ((eq == NULL) || !is_our_prefix(*ep))
      continue;
    len = (size_t)(eq - *ep);
    if (find_param(*ep, len) < 0)
      report_unknown(*ep, len, "environment");
  }
  conf = getenv("NCCL_CONF_FILE");
  home = getenv("HOME");
  if ((conf != NULL) && (conf[0] != '\0')) {
    load_conf_file(conf, true);
  } else if (home != NULL) {
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/.nccl.conf", home);
    load_conf_file(path, false);
  }
  load_conf_file("/etc/nccl.conf", false);
}

static void ensure_loaded(void)
{
  pthread_once(&load_once, load_all);
}

int64_t mc_param_int(enum mc_param_id id)
{
  ensure_loaded();
  return vals[id].i;
}

const char *mc_param_str(enum mc_param_id id)
{
  ensure_loaded();
  return vals[id].s;
}

enum mc_param_source mc_param_source(enum mc_param_id id)
{
  ensure_loaded();
  return vals[id].src;
}

const char *mc_param_name(enum mc_param_id id)
{
  return descs[id].env;
}

/* A string value as logs and dumps show it: a secret only by its length. */
static const char *shown_value(int id, char *buf, size_t buf_bytes)
{
  const char *v = (vals[id].s != NULL) ? vals[id].s : "";

  if (id != MC_P_SECRET)
    return v;
  snprintf(buf, buf_bytes, "(secret, %zu characters)", strlen(v));
  return buf;
}

static void report_all(void)
{
  /* A misspelt variable is never silent: without NCCL_DEBUG the warning
   * goes to stderr once per process all the same. */
  bool quiet = !mc_log_enabled(MC_LOG_WARN, MC_SUB_ENV);

  for (int i = 0; i < n_msgs; i++) {
    if (msgs[i].is_warn && quiet)
      fprintf(stderr, "meshccl WARN ENV: %s\n", msgs[i].text);
    else if (msgs[i].is_warn)
      mc_log(MC_LOG_WARN, MC_SUB_ENV, MC_FILE_BASENAME, __LINE__, __func__, "ENV: %s",
             msgs[i].text);
    else
      MC_INFO(MC_SUB_ENV, "ENV: %s", msgs[i].text);
  }
  for (int id = 0; id < MC_P_COUNT; id++) {
    char shown[48];
    if (vals[id].src == MC_PARAM_SRC_DEFAULT)
      continue;
    if (descs[id].is_int)
      MC_INFO(MC_SUB_ENV, "%s set by %s to %lld", descs[id].env, vals[id].origin,
              (long long)vals[id].i);
    else
      MC_INFO(MC_SUB_ENV, "%s set by %s to %s", descs[id].env, vals[id].origin,
              shown_value(id, shown, sizeof(shown)));
  }
}

void mc_param_report_once(void)
{
  ensure_loaded();
  pthread_once(&report_once, report_all);
}

static void md_escape(FILE *out, const char *s)
{
  for (; *s != '\0'; s++) {
    if (*s == '|')
      fputs("\\|", out);
    else
      fputc(*s, out);
  }
}

void mc_param_dump(FILE *out, bool markdown, bool changed_only)
{
  ensure_loaded();
  if (markdown) {
    fputs(
        "# Environment variables\n\n"
        "Generated from `src/core/params.def` by `build/bin/meshccl-env --markdown`; do not edit.\n"
        "Values come from the environment, then `NCCL_CONF_FILE` (or `~/.nccl.conf`), then\n"
        "`/etc/nccl.conf`; the first source that sets a variable wins. An invalid value is\n"
        "reported with a warning and the default is used. An `NCCL_*` or `MESHCCL_*` variable\n"
        "that is not listed here gets one warning naming the closest known one. These warnings\n"
        "go to stderr once per process even when `NCCL_DEBUG` is unset, and `meshccl-env`\n"
        "lists them after its table.\n\n"
        "| Variable | Default | Meaning |\n| --- | --- | --- |\n",
        out);
  }
  for (int id = 0; id < MC_P_COUNT; id++) {
    const struct param_desc *d = &descs[id];
    char def[64];

    if (changed_only && (vals[id].src == MC_PARAM_SRC_DEFAULT))
      continue;
    if (d->is_int) {
      if (d->def_int == INT32_MIN)
        snprintf(def, sizeof(def), "unset");
      else
        snprintf(def, sizeof(def), "%lld", (long long)d->def_int);
    } else {
      snprintf(def, sizeof(def), "%s", (d->def_str != NULL) ? d->def_str : "unset");
    }
    if (markdown) {
      fprintf(out, "| `%s` | `%s` | ", d->env, def);
      md_escape(out, d->help);
      fputs(" |\n", out);
    } else if (d->is_int) {
      fprintf(out, "%-30s %-12lld (%s; default %s)\n", d->env, (long long)vals[id].i,
              vals[id].origin, def);
    } else {
      char shown[48];
      fprintf(out, "%-30s %-12s (%s; default %s)\n", d->env,
              (vals[id].s != NULL) ? shown_value(id, shown, sizeof(shown)) : "unset",
              vals[id].origin, def);
    }
  }
  if (markdown) {
    fputs(
        "\n## NCCL variables accepted but not used by this version\n\n"
        "These are NCCL's; setting them is not an error (one INFO line says they are ignored),\n"
        "and later releases of meshccl give them their NCCL meaning. A name ending in `_` stands\n"
        "for every variable with that prefix.\n\n",
        out);
    for (size_t i = 0; i < sizeof(nccl_ignored) / sizeof(nccl_ignored[0]); i++)
      fprintf(out, "%s`%s%s`", (i == 0) ? "" : ", ", nccl_ignored[i],
              (nccl_ignored[i][strlen(nccl_ignored[i]) - 1] == '_') ? "*" : "");
    fputs("\n", out);
  } else {
    for (int i = 0; i < n_msgs; i++)
      if (msgs[i].is_warn)
        fprintf(out, "# warning: %s\n", msgs[i].text);
  }
}

int mc_param_edit_distance(const char *a, const char *b)
{
  size_t la = strlen(a);
  size_t lb = strlen(b);
  int row[128];

  if ((la >= 127) || (lb >= 127))
    return INT_MAX;
  for (size_t j = 0; j <= lb; j++)
    row[j] = (int)j;
  for (size_t i = 1; i <= la; i++) {
    int prev_diag = row[0];
    row[0] = (int)i;
    for (size_t j = 1; j <= lb; j++) {
      int up = row[j];
      int cost = (toupper((unsigned char)a[i - 1]) == toupper((unsigned char)b[j - 1])) ? 0 : 1;
      int best = prev_diag + cost;
      if (row[j] + 1 < best)
        best = row[j] + 1;
      if (row[j - 1] + 1 < best)
        best = row[j - 1] + 1;
      row[j] = best;
      prev_diag = up;
    }
  }
  return row[lb];
}

const char *mc_param_closest(const char *name)
{
  const char *best = NULL;
  int best_d = INT_MAX;

  for (int id = 0; id < MC_P_COUNT; id++) {
    int d = mc_param_edit_distance(name, descs[id].env);
    if (d < best_d) {
      best_d = d;
      best = descs[id].env;
    }
  }
  /* Beyond a third of the name's length the suggestion is noise. */
  if ((best == NULL) || (best_d > 1 + (int)strlen(name) / 3))
    return NULL;
  return best;
}

int mc_param_lookup(const char *name)
{
  return (name == NULL) ? -1 : find_param(name, strlen(name));
}

bool mc_param_is_int(enum mc_param_id id)
{
  return descs[id].is_int;
}

int mc_param_count(void)
{
  return MC_P_COUNT;
}

/* Strings replaced by mc_param_reload_env: readers may still hold them. */
static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;
static char **retired;
static size_t n_retired;

void mc_param_reload_env(enum mc_param_id id)
{
  const char *e;
  char **grown;

  ensure_loaded();
  pthread_mutex_lock(&retired_lock);
  grown = realloc(retired, (n_retired + 1) * sizeof(*retired));
  if (grown == NULL) {
    /* Keeping the old value is safer than freeing a string a reader may hold. */
    pthread_mutex_unlock(&retired_lock);
    return;
  }
  retired = grown;
  retired[n_retired++] = vals[id].s;
  vals[id].s = (descs[id].def_str != NULL) ? strdup(descs[id].def_str) : NULL;
  vals[id].i = descs[id].def_int;
  vals[id].src = MC_PARAM_SRC_DEFAULT;
  vals[id].claimed = false;
  snprintf(vals[id].origin, sizeof(vals[id].origin), "default");
  e = getenv(descs[id].env);
  if ((e != NULL) && (e[0] != '\0'))
    set_value(id, e, MC_PARAM_SRC_ENV, "environment");
  pthread_mutex_unlock(&retired_lock);
}

void mc_param_unload(void)
{
  pthread_mutex_lock(&retired_lock);
  for (int id = 0; id < MC_P_COUNT; id++) {
    free(vals[id].s);
    vals[id].s = NULL;
  }
  for (size_t i = 0; i < n_retired; i++)
    free(retired[i]);
  free(retired);
  retired = NULL;
  n_retired = 0;
  pthread_mutex_unlock(&retired_lock);
}

void mc_param_set_for_tests(enum mc_param_id id, const char *value)
{
  ensure_loaded();
  if (value == NULL) {
    free(vals[id].s);
    vals[id].s = (descs[id].def_str != NULL) ? strdup(descs[id].def_str) : NULL;
    vals[id].i = descs[id].def_int;
    vals[id].src = MC_PARAM_SRC_DEFAULT;
    mc_log_reset_for_tests();
    return;
  }
  set_value(id, value, MC_PARAM_SRC_TEST, "test");
  mc_log_reset_for_tests();
}

void mc_param_reset_for_tests(void)
{
  ensure_loaded();
  for (int id = 0; id < MC_P_COUNT; id++) {
    free(vals[id].s);
    vals[id].s = NULL;
  }
  n_msgs = 0;
  load_all();
  mc_log_reset_for_tests();
}
