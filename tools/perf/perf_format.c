/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-perf's output: nccl-tests' text table (column widths, the two
 * header rows, number formats, footer lines) and a JSON report for -J whose
 * keys follow nccl-tests' JSON output (config, devices, results with
 * out_of_place / in_place, out_of_bounds, average_bus_bandwidth).
 */
#include "perf.h"

#include <stdarg.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static int put(char *buf, size_t buf_len, const char *fmt, ...)
{
  va_list ap;
  int n;

  va_start(ap, fmt);
  n = vsnprintf(buf, buf_len, fmt, ap);
  va_end(ap);
  if (n < 0)
    n = 0;
  return ((size_t)n < buf_len) ? n : (int)(buf_len > 0 ? buf_len - 1 : 0);
}

int mc_perf_fmt_num(char *buf, size_t buf_len, double value, int width)
{
  int digits = 0; /* digits before the decimal point */

  for (double p = 1.0; (value >= p) && (digits < 400); p *= 10.0)
    digits++;
  /* Keep the number in `width` columns: fewer decimals as it grows, then %e. */
  if (digits < width - 2)
    return put(buf, buf_len, "%*.2f", width, value);
  if (digits < width - 1)
    return put(buf, buf_len, "%*.1f", width, value);
  if (digits < width + 1)
    return put(buf, buf_len, "%*.0f", width, value);
  if (width >= 7)
    return put(buf, buf_len, "%*.1e", width, value);
  return put(buf, buf_len, "%*.0e", width, value);
}

int mc_perf_fmt_params(char *buf, size_t buf_len, const struct mc_perf_opts *o)
{
  bool by_factor = o->step_factor > 1;

  return put(buf, buf_len,
             "# nThread %d nGpus %d minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %d "
             "iters: %d agg iters: %d validation: %d graph: %d unalign: %d",
             o->nthreads, o->ngpus, o->min_bytes, o->max_bytes,
             by_factor ? o->step_factor : o->step_bytes, by_factor ? "factor" : "bytes",
             o->warmup_iters, o->iters, o->agg_iters, o->check, o->cudagraph, o->unalign);
}

int mc_perf_fmt_device(char *buf, size_t buf_len, int rank, int group, int pid, const char *host,
                       int device, const char *name)
{
  /* Group is nccl-tests' NCCL_TESTS_SPLIT colour. */
  return put(buf, buf_len, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [host] %s", rank,
             group, pid, host, device, name);
}

#define TS_FORMAT "%Y-%m-%d %H:%M:%S"
#define TS_WIDTH  19 /* strlen("2026-01-31 23:59:59") */

int mc_perf_fmt_header(char *buf, size_t buf_len, int row, bool cputime)
{
  return mc_perf_fmt_header_ts(buf, buf_len, row, cputime, false);
}

int mc_perf_fmt_header_ts(char *buf, size_t buf_len, int row, bool cputime, bool timestamps)
{
  const char *t = cputime ? "cputime" : "time";
  int pad = timestamps ? TS_WIDTH : 0;

  if (row == 1)
    return put(buf, buf_len,
               "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s", "size",
               "count", "type", "redop", "root", t, "algbw", "busbw", "#wrong", t, "algbw", "busbw",
               "#wrong", pad, timestamps ? "timestamp" : "");
  if (row == 2)
    return put(buf, buf_len,
               "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s", "(B)",
               "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
               "", pad, timestamps ? TS_FORMAT : "");
  return put(buf, buf_len,
             "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place  "
             "        ",
             "", "", "", "", "");
}

int mc_perf_fmt_timestamp(char *buf, size_t buf_len, long long when)
{
  time_t t = (time_t)when;
  struct tm tm;
  char s[64];

  if ((localtime_r(&t, &tm) == NULL) || (strftime(s, sizeof(s), TS_FORMAT, &tm) == 0))
    s[0] = '\0';
  return put(buf, buf_len, "%21s", s);
}

int mc_perf_fmt_row_start(char *buf, size_t buf_len, size_t bytes, size_t count, const char *type,
                          const char *op, int root)
{
  return put(buf, buf_len, "%12zu  %12zu  %8s  %6s  %6d", bytes, count, type, op, root);
}

int mc_perf_fmt_row_result(char *buf, size_t buf_len, double time_us, double algbw, double busbw,
                           bool checked, int64_t wrong)
{
  char t[32];
  char a[32];
  char b[32];

  mc_perf_fmt_num(t, sizeof(t), time_us, 7);
  mc_perf_fmt_num(a, sizeof(a), algbw, 6);
  mc_perf_fmt_num(b, sizeof(b), busbw, 6);
  if (!checked)
    return put(buf, buf_len, "  %7s  %6s  %6s    N/A", t, a, b);
  return put(buf, buf_len, "  %7s  %6s  %6s  %6g", t, a, b, (double)wrong);
}

int mc_perf_fmt_footer(char *buf, size_t buf_len, int line, int n_errors, double avg_busbw)
{
  if (line == 0)
    return put(buf, buf_len, "# %-20s : %d %s", "Out of bounds values", n_errors,
               (n_errors != 0) ? "FAILED" : "OK");
  return put(buf, buf_len, "# %-20s : %g ", "Avg bus bandwidth", avg_busbw);
}

bool mc_perf_bw_failed(double avg_busbw, double min_bw)
{
  /* nccl-tests allows 10% below the threshold. */
  return (min_bw >= 0.0) && (avg_busbw < min_bw * 0.9);
}

int mc_perf_fmt_bw_footer(char *buf, size_t buf_len, double avg_busbw, double min_bw)
{
  const char *verdict = (min_bw < 0.0)                         ? ""
                        : mc_perf_bw_failed(avg_busbw, min_bw) ? "FAILED"
                                                               : "OK";

  return put(buf, buf_len, "# %-20s : %g %s", "Avg bus bandwidth", avg_busbw, verdict);
}

/* nccl-tests' getMemString: B, KB, MB, GB (binary), 2, 1 or 0 decimals as the number grows. */
static int mem_str(char *buf, size_t buf_len, double amount)
{
  const char *unit = " B";
  double a;
  int precision = 0;

  if ((amount >= 1024.0 * 1024.0 * 1024.0) || (amount <= -1024.0 * 1024.0 * 1024.0)) {
    unit = " GB";
    amount /= 1024.0 * 1024.0 * 1024.0;
  } else if ((amount >= 1024.0 * 1024.0) || (amount <= -1024.0 * 1024.0)) {
    unit = " MB";
    amount /= 1024.0 * 1024.0;
  } else if ((amount >= 1024.0) || (amount <= -1024.0)) {
    unit = " KB";
    amount /= 1024.0;
  }
  a = (amount < 0) ? -amount : amount;
  if (a < 10.0)
    precision = 2;
  else if (a < 100.0)
    precision = 1;
  return put(buf, buf_len, "%.*f%s", precision, amount, unit);
}

int mc_perf_fmt_memory(char *buf, size_t buf_len, double init_bytes, double user_bytes,
                       double coll_bytes)
{
  char a[32];
  char b[32];
  char c[32];
  char t[32];

  mem_str(a, sizeof(a), init_bytes);
  mem_str(b, sizeof(b), user_bytes);
  mem_str(c, sizeof(c), coll_bytes);
  mem_str(t, sizeof(t), init_bytes + user_bytes + coll_bytes);
  return put(buf, buf_len,
             "# %-20s : Initialization %s | User-Allocated %s | Collective %s | Total  %s",
             "Host memory usage", a, b, c, t);
}

int mc_perf_fmt_version(char *buf, size_t buf_len, int headers_version, int library_version)
{
  return put(buf, buf_len, "# nccl-tests version %s nccl-headers=%d nccl-library=%d",
             MC_PERF_NCCL_TESTS_VERSION, headers_version, library_version);
}

int mc_perf_fmt_time(char *buf, size_t buf_len, long long when)
{
  time_t t = (time_t)when;
  struct tm tm;
  char s[64];

  if ((localtime_r(&t, &tm) == NULL) || (strftime(s, sizeof(s), TS_FORMAT, &tm) == 0))
    s[0] = '\0';
  return put(buf, buf_len, "%s", s);
}

/*
 * The JSON writer: a stack of open containers, so that a key or value knows whether it needs
 * a comma and an unfinished report can still be closed (nccl-tests' util.cu keeps the same
 * states; the code is our own).
 */
enum json_state {
  JSON_KEY = 1,      /* a key was written, its value comes next */
  JSON_OBJECT_EMPTY, /* {, nothing in it yet */
  JSON_OBJECT_SOME,
  JSON_LIST_EMPTY,
  JSON_LIST_SOME,
};

static int jw_top(const struct mc_perf_json *js)
{
  return (js->depth > 0) ? js->state[js->depth - 1] : 0;
}

static void jw_push(struct mc_perf_json *js, enum json_state st)
{
  /* The report nests 4 deep at most; the bound only guards against our own misuse. */
  if (js->depth < MC_PERF_JSON_MAX_DEPTH)
    js->state[js->depth++] = (unsigned char)st;
}

int mc_perf_json_quote(char *buf, size_t buf_len, const char *s)
{
  char out[MC_PERF_JSON_STR_MAX];
  size_t n = 0;

  for (; (s != NULL) && (*s != '\0'); s++) {
    unsigned char ch = (unsigned char)*s;
    char esc = 0;

    if ((ch == '"') || (ch == '\\') || (ch == '/'))
      esc = (char)ch;
    else if (ch == '\t')
      esc = 't';
    else if (ch == '\n')
      esc = 'n';
    else if ((ch < 0x20) || (ch > 0x7e))
      break; /* nccl-tests gives up on the rest of a string with other bytes */
    if (n + ((esc != 0) ? 2 : 1) >= sizeof(out))
      break;
    if (esc != 0) {
      out[n++] = '\\';
      out[n++] = esc;
    } else {
      out[n++] = (char)ch;
    }
  }
  out[n] = '\0';
  return put(buf, buf_len, "\"%s\"", out);
}

/* Before a value: a comma between list items; a key's value ends the key. */
static void jw_value_start(struct mc_perf_json *js)
{
  switch (jw_top(js)) {
  case JSON_LIST_EMPTY:
    js->state[js->depth - 1] = JSON_LIST_SOME;
    break;
  case JSON_LIST_SOME:
    fputc(',', js->f);
    break;
  case JSON_KEY:
    js->depth--;
    break;
  default:
    break;
  }
}

static void jw_key(struct mc_perf_json *js, const char *key)
{
  char q[MC_PERF_JSON_STR_MAX + 2];

  if (jw_top(js) == JSON_OBJECT_SOME)
    fputc(',', js->f);
  else if (jw_top(js) == JSON_OBJECT_EMPTY)
    js->state[js->depth - 1] = JSON_OBJECT_SOME;
  mc_perf_json_quote(q, sizeof(q), key);
  fprintf(js->f, "%s:", q);
  jw_push(js, JSON_KEY);
}

static void jw_open(struct mc_perf_json *js, bool list)
{
  jw_value_start(js);
  fputc(list ? '[' : '{', js->f);
  jw_push(js, list ? JSON_LIST_EMPTY : JSON_OBJECT_EMPTY);
}

/* Closes the innermost container; a key still waiting for its value gets null first. */
static void jw_close(struct mc_perf_json *js)
{
  if (jw_top(js) == JSON_KEY) {
    fputs("null", js->f);
    js->depth--;
  }
  if (js->depth == 0)
    return;
  fputc(((jw_top(js) == JSON_LIST_EMPTY) || (jw_top(js) == JSON_LIST_SOME)) ? ']' : '}', js->f);
  js->depth--;
}

static void jw_str(struct mc_perf_json *js, const char *s)
{
  char q[MC_PERF_JSON_STR_MAX + 2];

  jw_value_start(js);
  if (s == NULL) {
    fputs("null", js->f);
    return;
  }
  mc_perf_json_quote(q, sizeof(q), s);
  fputs(q, js->f);
}

static void jw_int(struct mc_perf_json *js, long long v)
{
  jw_value_start(js);
  fprintf(js->f, "%lld", v);
}

static void jw_size(struct mc_perf_json *js, size_t v)
{
  jw_value_start(js);
  fprintf(js->f, "%zu", v);
}

/* nccl-tests writes booleans as strings. */
static void jw_bool(struct mc_perf_json *js, bool v)
{
  jw_str(js, v ? "true" : "false");
}

static void jw_null(struct mc_perf_json *js)
{
  jw_value_start(js);
  fputs("null", js->f);
}

static void jw_double(struct mc_perf_json *js, double v)
{
  jw_value_start(js);
  if (v != v)
    fputs("\"nan\"", js->f);
  else if ((v > 1.7976931348623157e308) || (v < -1.7976931348623157e308))
    fputs((v > 0) ? "\"inf\"" : "\"-inf\"", js->f);
  else
    fprintf(js->f, "%f", v);
}

static void jw_time(struct mc_perf_json *js, long long when)
{
  char s[64];

  mc_perf_fmt_time(s, sizeof(s), when);
  jw_str(js, s);
}

/* Whether a variable's name says its value is a secret. */
static bool env_is_secret(const char *entry, size_t name_len)
{
  static const char *const words[] = {"SECRET", "TOKEN", "PASSWORD", "PASSWD", "CREDENTIAL"};

  for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
    size_t n = strlen(words[w]);

    for (size_t i = 0; i + n <= name_len; i++) {
      if (strncasecmp(entry + i, words[w], n) == 0)
        return true;
    }
  }
  return false;
}

const char *mc_perf_env_redact(const char *entry, char *buf, size_t buf_len)
{
  const char *eq = strchr(entry, '=');

  if ((eq == NULL) || !env_is_secret(entry, (size_t)(eq - entry)))
    return entry;
  snprintf(buf, buf_len, "%.*s=<redacted>", (int)(eq - entry), entry);
  return buf;
}

void mc_perf_json_begin(struct mc_perf_json *js, FILE *f, long long start, int argc, char **argv,
                        char **envp, int nccl_version)
{
  js->f = f;
  js->depth = 0;
  jw_open(js, false);
  jw_key(js, "version");
  jw_int(js, MC_PERF_JSON_VERSION);
  jw_key(js, "start_time");
  jw_time(js, start);
  jw_key(js, "args");
  jw_open(js, true);
  for (int i = 0; i < argc; i++)
    jw_str(js, argv[i]);
  jw_close(js);
  jw_key(js, "env");
  jw_open(js, true);
  for (char **e = envp; (e != NULL) && (*e != NULL); e++) {
    char redacted[MC_PERF_JSON_STR_MAX];

    jw_str(js, mc_perf_env_redact(*e, redacted, sizeof(redacted)));
  }
  jw_close(js);
  jw_key(js, "nccl_version");
  jw_int(js, nccl_version);
}

void mc_perf_json_config(struct mc_perf_json *js, const struct mc_perf_opts *o)
{
  jw_key(js, "config");
  jw_open(js, false);
  jw_key(js, "nthreads");
  jw_int(js, o->nthreads);
  jw_key(js, "ngpus");
  jw_int(js, o->ngpus);
  jw_key(js, "minimum_bytes");
  jw_size(js, o->min_bytes);
  jw_key(js, "maximum_bytes");
  jw_size(js, o->max_bytes);
  if (o->step_factor > 1) {
    jw_key(js, "step_factor");
    jw_int(js, (long long)o->step_factor);
  } else {
    jw_key(js, "step_bytes");
    jw_size(js, o->step_bytes);
  }
  jw_key(js, "warmup_iters");
  jw_int(js, o->warmup_iters);
  jw_key(js, "iterations");
  jw_int(js, o->iters);
  jw_key(js, "aggregated_iterations");
  jw_int(js, o->agg_iters);
  jw_key(js, "validation");
  jw_int(js, o->check);
  jw_key(js, "graph");
  jw_int(js, o->cudagraph);
  jw_key(js, "blocking_collectives");
  jw_bool(js, o->blocking != 0);
  jw_key(js, "per_iter_timing"); /* nccl-tests' -I: not offered, always off */
  jw_bool(js, false);
  jw_key(js, "parallel_init");
  jw_bool(js, o->parallel_init != 0);
  jw_key(js, "devices");
  jw_open(js, true);
}

void mc_perf_json_device(struct mc_perf_json *js, int rank, int group, int pid, const char *host,
                         int device, const char *device_hex, const char *device_info)
{
  jw_open(js, false);
  jw_key(js, "rank");
  jw_int(js, rank);
  jw_key(js, "group");
  jw_int(js, group);
  jw_key(js, "pid");
  jw_int(js, pid);
  jw_key(js, "hostname");
  jw_str(js, host);
  jw_key(js, "device");
  jw_int(js, device);
  jw_key(js, "device_hex");
  jw_str(js, device_hex);
  jw_key(js, "device_info");
  jw_str(js, device_info);
  jw_close(js);
}

void mc_perf_json_config_end(struct mc_perf_json *js)
{
  jw_close(js); /* devices */
  jw_close(js); /* config */
}

void mc_perf_json_results(struct mc_perf_json *js)
{
  jw_key(js, "results");
  jw_open(js, true);
}

void mc_perf_json_row_start(struct mc_perf_json *js, size_t bytes, size_t count, const char *type,
                            const char *op, int root)
{
  char root_str[32];

  snprintf(root_str, sizeof(root_str), "%6d", root);
  jw_open(js, false);
  jw_key(js, "size");
  jw_size(js, bytes);
  jw_key(js, "count");
  jw_size(js, count);
  jw_key(js, "type");
  jw_str(js, type);
  jw_key(js, "redop");
  jw_str(js, op);
  jw_key(js, "root");
  jw_str(js, root_str);
}

void mc_perf_json_row_result(struct mc_perf_json *js, bool in_place, bool cputime, double time_us,
                             double algbw, double busbw, bool checked, int64_t wrong)
{
  jw_key(js, in_place ? "in_place" : "out_of_place");
  jw_open(js, false);
  jw_key(js, cputime ? "cpu_time" : "time");
  jw_double(js, time_us);
  jw_key(js, "alg_bw");
  jw_double(js, algbw);
  jw_key(js, "bus_bw");
  jw_double(js, busbw);
  jw_key(js, "nwrong");
  if (checked)
    jw_double(js, (double)wrong);
  else
    jw_null(js);
  jw_close(js);
}

void mc_perf_json_row_end(struct mc_perf_json *js, int actual_iters, const char *experiment)
{
  jw_key(js, "actual_iterations");
  jw_int(js, actual_iters);
  jw_key(js, "experiment_name");
  jw_str(js, experiment);
  jw_close(js);
}

void mc_perf_json_footer(struct mc_perf_json *js, int n_errors, double avg_busbw, double min_bw)
{
  jw_close(js); /* results */
  jw_key(js, "out_of_bounds");
  jw_open(js, false);
  jw_key(js, "count");
  jw_int(js, n_errors);
  jw_key(js, "okay");
  jw_bool(js, n_errors == 0);
  jw_close(js);
  jw_key(js, "average_bus_bandwidth");
  jw_open(js, false);
  jw_key(js, "bandwidth");
  jw_double(js, avg_busbw);
  jw_key(js, "okay");
  if (min_bw < 0.0)
    jw_str(js, "unchecked");
  else
    jw_bool(js, !mc_perf_bw_failed(avg_busbw, min_bw));
  jw_close(js);
}

void mc_perf_json_errors(struct mc_perf_json *js, const char *last_error)
{
  jw_key(js, "errors");
  jw_open(js, true);
  if (last_error != NULL)
    jw_str(js, last_error);
  jw_close(js);
}

void mc_perf_json_finish(struct mc_perf_json *js, long long end)
{
  if ((js->depth == 1) && (jw_top(js) != JSON_KEY)) {
    jw_key(js, "end_time");
    jw_time(js, end);
  }
  while (js->depth > 0)
    jw_close(js);
}
