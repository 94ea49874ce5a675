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

/* JSON string with the escapes JSON requires. */
static void json_str(FILE *f, const char *s)
{
  fputc('"', f);
  for (; (s != NULL) && (*s != '\0'); s++) {
    unsigned char ch = (unsigned char)*s;

    if ((ch == '"') || (ch == '\\'))
      fprintf(f, "\\%c", ch);
    else if (ch == '\n')
      fputs("\\n", f);
    else if (ch == '\t')
      fputs("\\t", f);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

/* A double as JSON (no NaN or Inf in JSON: null). */
static void json_num(FILE *f, double v)
{
  if ((v != v) || (v > 1e308) || (v < -1e308))
    fputs("null", f);
  else
    fprintf(f, "%.6f", v);
}

void mc_perf_json_begin(struct mc_perf_json *js, FILE *f, const struct mc_perf_opts *o, int argc,
                        char **argv, int nccl_version, int n_ranks)
{
  js->f = f;
  js->n_results = 0;
  fprintf(f, "{\"version\":2,\"tool\":\"meshccl-perf\",\"collective\":");
  json_str(f, mc_perf_coll_name(o->coll));
  fprintf(f, ",\"args\":[");
  for (int i = 0; i < argc; i++) {
    if (i > 0)
      fputc(',', f);
    json_str(f, argv[i]);
  }
  fprintf(f,
          "],\"nccl_version\":%d,\"nranks\":%d,\"config\":{\"nthreads\":%d,\"ngpus\":%d,"
          "\"minimum_bytes\":%zu,\"maximum_bytes\":%zu,",
          nccl_version, n_ranks, o->nthreads, o->ngpus, o->min_bytes, o->max_bytes);
  if (o->step_factor > 1)
    fprintf(f, "\"step_factor\":%zu,", o->step_factor);
  else
    fprintf(f, "\"step_bytes\":%zu,", o->step_bytes);
  fprintf(f,
          "\"warmup_iters\":%d,\"iterations\":%d,\"aggregated_iterations\":%d,\"validation\":%d,"
          "\"graph\":%d,\"blocking_collectives\":%s,\"average\":%d},\"devices\":[",
          o->warmup_iters, o->iters, o->agg_iters, o->check, o->cudagraph,
          o->blocking ? "true" : "false", o->average);
}

void mc_perf_json_device(struct mc_perf_json *js, int rank, int group, int pid, const char *host,
                         int device, bool first)
{
  fprintf(js->f, "%s{\"rank\":%d,\"group\":%d,\"pid\":%d,\"hostname\":", first ? "" : ",", rank,
          group, pid);
  json_str(js->f, host);
  fprintf(js->f, ",\"device\":%d}", device);
}

void mc_perf_json_row_start(struct mc_perf_json *js, size_t bytes, size_t count, const char *type,
                            const char *op, int root)
{
  fprintf(js->f,
          "%s{\"size\":%zu,\"count\":%zu,\"type\":", (js->n_results == 0) ? "],\"results\":[" : ",",
          bytes, count);
  json_str(js->f, type);
  fprintf(js->f, ",\"redop\":");
  json_str(js->f, op);
  fprintf(js->f, ",\"root\":%d", root);
  js->n_results++;
}

void mc_perf_json_row_result(struct mc_perf_json *js, bool in_place, bool cputime, double time_us,
                             double algbw, double busbw, bool checked, int64_t wrong)
{
  fprintf(js->f, ",\"%s\":{\"%s\":", in_place ? "in_place" : "out_of_place",
          cputime ? "cpu_time" : "time");
  json_num(js->f, time_us);
  fprintf(js->f, ",\"alg_bw\":");
  json_num(js->f, algbw);
  fprintf(js->f, ",\"bus_bw\":");
  json_num(js->f, busbw);
  if (checked)
    fprintf(js->f, ",\"nwrong\":%lld}", (long long)wrong);
  else
    fprintf(js->f, ",\"nwrong\":null}");
}

void mc_perf_json_row_end(struct mc_perf_json *js)
{
  fputc('}', js->f);
}

void mc_perf_json_end(struct mc_perf_json *js, int n_errors, double avg_busbw)
{
  mc_perf_json_end_bw(js, n_errors, avg_busbw, -1.0);
}

void mc_perf_json_end_bw(struct mc_perf_json *js, int n_errors, double avg_busbw, double min_bw)
{
  fprintf(js->f, "%s],\"out_of_bounds\":{\"count\":%d,\"okay\":%s},",
          (js->n_results == 0) ? "],\"results\":[" : "", n_errors,
          (n_errors == 0) ? "true" : "false");
  fprintf(js->f, "\"average_bus_bandwidth\":{\"bandwidth\":");
  json_num(js->f, avg_busbw);
  fprintf(js->f, ",\"okay\":%s}}\n",
          (min_bw < 0.0)                         ? "\"unchecked\""
          : mc_perf_bw_failed(avg_busbw, min_bw) ? "false"
                                                 : "true");
}
