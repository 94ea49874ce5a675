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
             "iters: %d agg iters: %d validation: %d graph: %d",
             o->nthreads, o->ngpus, o->min_bytes, o->max_bytes,
             by_factor ? o->step_factor : o->step_bytes, by_factor ? "factor" : "bytes",
             o->warmup_iters, o->iters, o->agg_iters, o->check, o->cudagraph);
}

int mc_perf_fmt_device(char *buf, size_t buf_len, int rank, int pid, const char *host, int device,
                       const char *name)
{
  /* Group is nccl-tests' NCCL_TESTS_SPLIT colour: always one group here. */
  return put(buf, buf_len, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [host] %s", rank, 0,
             pid, host, device, name);
}

int mc_perf_fmt_header(char *buf, size_t buf_len, int row, bool cputime)
{
  const char *t = cputime ? "cputime" : "time";

  if (row == 0)
    return put(buf, buf_len,
               "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place  "
               "        ",
               "", "", "", "", "");
  if (row == 1)
    return put(buf, buf_len, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s ",
               "size", "count", "type", "redop", "root", t, "algbw", "busbw", "#wrong", t, "algbw",
               "busbw", "#wrong");
  return put(buf, buf_len, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s ",
             "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
             "(GB/s)", "");
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

void mc_perf_json_device(struct mc_perf_json *js, int rank, int pid, const char *host, int device,
                         bool first)
{
  fprintf(js->f, "%s{\"rank\":%d,\"group\":0,\"pid\":%d,\"hostname\":", first ? "" : ",", rank,
          pid);
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
  fprintf(js->f, "%s],\"out_of_bounds\":{\"count\":%d,\"okay\":%s},",
          (js->n_results == 0) ? "],\"results\":[" : "", n_errors,
          (n_errors == 0) ? "true" : "false");
  fprintf(js->f, "\"average_bus_bandwidth\":{\"bandwidth\":");
  json_num(js->f, avg_busbw);
  fprintf(js->f, "}}\n");
}
