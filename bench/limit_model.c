/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The model of bench/limit: the best busbw a host-memory collective of n ranks
 * can reach on a host, from what one core and one pair of cores measure.
 *
 * Each rank is one thread (k = 1) or k threads (n * k <= cores). For one
 * operation of S bytes (nccl-tests' size: the buffer of all-reduce and
 * broadcast, the whole output of all-gather, the whole input of reduce-scatter)
 * let c = S / n. A rank's work is counted in four kinds:
 *
 *   pass   FIFO: bytes of hops, a step copied into the rank's slot and one
 *          copied out of its peer's, while the peer does the same (a ring's
 *          every rank sends and receives at once); single copy: bytes read
 *          from a peer's buffer. A pass that also writes an output or reads
 *          a local operand beside costs the same (the model is a best case)
 *   local  bytes of copies within the rank's own memory
 *   red    bytes of binary-reduction output (float sum c = a + b)
 *   steps  hand-offs on the critical path (a slot published, a round of
 *          small messages)
 *
 *   time = pass / P + local / C + red * max(0, 1/R - 1/C) + steps * rtt
 *   busbw = S / time * B(n)      B: 2(n-1)/n all-reduce, (n-1)/n all-gather and
 *                                reduce-scatter, 1 broadcast (nccl-tests)
 *
 * with the rank's rates at its working set W (the bytes of its input and
 * output buffers: 2S all-reduce and broadcast, S + c all-gather and
 * reduce-scatter; a benchmark whose calls move through buffers of the
 * sweep's largest size, as meshccl-perf, mpi_perf and nccl-tests do, reads
 * every call's data from that span: W is then the largest size's,
 * mc_lim_time_span):
 *
 *   C = copy rate: k * copy(W), copy() interpolated linearly in log2(W)
 *       between the figures at 1, 16 and 256 MiB (clamped outside), where the
 *       256 MiB point is min(k * copy256M, agg(n k) / n): n ranks of k threads
 *       share the memory bus (agg(m): m threads' summed copy rate at the DRAM
 *       size, interpolated between known m, flat past the largest known,
 *       m * copy256M when none is known)
 *   R = reduce rate: likewise from red1M/16M/256M (2/3 of copy where unknown:
 *       c = a + b moves 3 bytes per output byte where a copy moves 2), the
 *       256 MiB point scaled down as the copy's is
 *   P = FIFO: min(k * duplex(W), C), the rate each way of a pair's two FIFOs
 *       run both ways at once, duplex() linear in log2(W) between the figures
 *       at working sets of 1, 16 and 256 MiB (buffers of half that a side;
 *       pair / 2 where none is measured); single copy:
 *       min(k * max(pair, duplex(W)), C), one way's rate (a bound: both
 *       ranks read at once), or a FIFO hop's where that is higher (a hop
 *       also copies in)
 *
 * Where duplexred is measured (the two ways at once, each core reducing what
 * it receives with a local operand, as a ring's recvReduceSend does), the
 * FIFO's reducing hops (its `red` bytes) cost at min(k * duplexred(W), R)
 * instead, and the others at P, with no separate reduction term:
 *
 *   time = (pass - red) / P + red / Pr + local / C + steps * rtt
 *
 * What each rank does (exact bytes: mc_lim_rank_bytes()) is below.
 */
/* clang-format off */
/*
 *   FIFO (ring through SHM slots, NCCL's SIMPLE primitives; the receiver's
 *   copy out of a slot fused with its copy into the next):
 *     all-reduce      pass (2n-2)c  red (n-1)c  steps 2n-1
 *                     (send; n-2 recvReduceSend; recvReduceCopySend;
 *                     n-2 recvCopySend; recv: 2n-2 chunks into its slots,
 *                     2n-2 out of its peer's)
 *                     reads (2n-2)c slots + n c input, writes (2n-2)c slots + n c output
 *     all-gather      pass (n-1)c   red 0       steps n
 *                     (copySend; n-2 recvCopySend; recv)
 *                     reads (n-1)c + c, writes (n-1)c + n c
 *     reduce-scatter  pass (n-1)c   red (n-1)c  steps n
 *                     (send; n-2 recvReduceSend; recvReduceCopy)
 *                     reads (n-1)c + n c, writes (n-1)c + c
 *     broadcast       pass S        red 0       steps n
 *                     (chain: recvCopySend; the closing empty step)
 *                     reads S, writes 2S (a middle rank)
 *   Single copy (CMA, or symmetric windows -R 2: read peers' buffers directly):
 *     all-reduce      pass 2(n-1)c  red (n-1)c  steps 3
 *                     (reduce slice r of n inputs, copy n-1 slices of peers'
 *                     outputs; 3 rounds)  reads (2n-1)c, writes n c
 *     all-gather      pass (n-1)c   local c     steps 2   reads n c, writes n c
 *     reduce-scatter  pass (n-1)c   red (n-1)c  steps 2   reads n c, writes c
 *     broadcast       pass S                    steps 2   reads S, writes S
 */
/* clang-format on */
/*
 * So the FIFO ring reaches busbw `duplex` for every collective at every n,
 * less the reductions' share, and single copy the higher of `pair` and
 * `duplex`: a bound, since there too both ranks of a pair read at once. On the 2-core development
 * VM the pair's two ways at once moved 23-27 GB/s each way on 1 MiB buffers and 14-15 on 16 MiB
 * ones where one way ran at 13-38 from run to run, and reducing what arrives 21 and 8.5.
 */
#include "limit_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const double mc_lim_anchor_bytes[MC_LIM_N_ANCHORS] = {1048576.0, 16777216.0, 268435456.0};

static const char *const coll_names[MC_LIM_N_COLLS] = {"all_reduce", "all_gather", "reduce_scatter",
                                                       "broadcast"};

const char *mc_lim_coll_name(enum mc_lim_coll coll)
{
  return ((unsigned)coll < MC_LIM_N_COLLS) ? coll_names[coll] : "?";
}

void mc_lim_rank_bytes(enum mc_lim_coll coll, enum mc_lim_algo algo, int n, double bytes,
                       struct mc_lim_bytes *out)
{
  double c = bytes / n;
  struct mc_lim_bytes b = {0};

  if (algo == MC_LIM_FIFO) {
    switch (coll) {
    case MC_LIM_ALL_REDUCE:
      b = (struct mc_lim_bytes){
          (2 * n - 2) * c,        0, (n - 1) * c, 2 * n - 1, (2 * n - 2) * c + n * c,
          (2 * n - 2) * c + n * c};
      break;
    case MC_LIM_ALL_GATHER:
      b = (struct mc_lim_bytes){(n - 1) * c, 0, 0, n, (n - 1) * c + c, (n - 1) * c + n * c};
      break;
    case MC_LIM_REDUCE_SCATTER:
      b = (struct mc_lim_bytes){(n - 1) * c,    0, (n - 1) * c, n, (n - 1) * c + n * c,
                                (n - 1) * c + c};
      break;
    default:
      b = (struct mc_lim_bytes){bytes, 0, 0, n, bytes, 2 * bytes};
      break;
    }
  } else {
    switch (coll) {
    case MC_LIM_ALL_REDUCE:
      b = (struct mc_lim_bytes){2 * (n - 1) * c, 0, (n - 1) * c, 3, (2 * n - 1) * c, n * c};
      break;
    case MC_LIM_ALL_GATHER:
      b = (struct mc_lim_bytes){(n - 1) * c, c, 0, 2, n * c, n * c};
      break;
    case MC_LIM_REDUCE_SCATTER:
      b = (struct mc_lim_bytes){(n - 1) * c, 0, (n - 1) * c, 2, n * c, c};
      break;
    default:
      b = (struct mc_lim_bytes){bytes, 0, 0, 2, bytes, bytes};
      break;
    }
  }
  *out = b;
}

double mc_lim_bus_factor(enum mc_lim_coll coll, int n)
{
  switch (coll) {
  case MC_LIM_ALL_REDUCE:
    return 2.0 * (n - 1) / n;
  case MC_LIM_ALL_GATHER:
  case MC_LIM_REDUCE_SCATTER:
    return (double)(n - 1) / n;
  default:
    return 1.0;
  }
}

double mc_lim_working_set(enum mc_lim_coll coll, int n, double bytes)
{
  if ((coll == MC_LIM_ALL_GATHER) || (coll == MC_LIM_REDUCE_SCATTER))
    return bytes + bytes / n;
  return 2 * bytes;
}

/* m threads' summed copy rate at the DRAM size. */
static double agg_rate(const struct mc_lim_figures *f, int m)
{
  int lo = 0;
  int hi = 0;

  if (m <= MC_LIM_MAX_AGG && f->agg[m] > 0)
    return f->agg[m];
  for (int j = 1; j <= MC_LIM_MAX_AGG; j++) {
    if (f->agg[j] <= 0)
      continue;
    if (j < m)
      lo = j;
    else if (hi == 0)
      hi = j;
  }
  if (lo > 0 && hi > 0)
    return f->agg[lo] + (f->agg[hi] - f->agg[lo]) * (m - lo) / (hi - lo);
  if (lo > 0)
    return f->agg[lo];
  if (hi > 0)
    return fmin(f->agg[hi], m * f->copy[2]);
  return m * f->copy[2];
}

/* A figure at working set ws from its values at the anchors (1, 16, 256
 * MiB): linear in log2(ws) between the known ones (> 0), clamped outside
 * them; one known anchor stands for all; 0 when none is known. */
static double interp(const double v[MC_LIM_N_ANCHORS], double ws)
{
  int prev = -1;

  for (int i = 0; i < MC_LIM_N_ANCHORS; i++) {
    if (v[i] <= 0)
      continue;
    if (ws <= mc_lim_anchor_bytes[i]) {
      if (prev < 0)
        return v[i];
      return v[prev] + (v[i] - v[prev]) * (log2(ws) - log2(mc_lim_anchor_bytes[prev])) /
                           (log2(mc_lim_anchor_bytes[i]) - log2(mc_lim_anchor_bytes[prev]));
    }
    prev = i;
  }
  return (prev >= 0) ? v[prev] : 0;
}

void mc_lim_rates(const struct mc_lim_figures *f, int n, int k, double ws, struct mc_lim_rates *out)
{
  double copy[MC_LIM_N_ANCHORS];
  double red[MC_LIM_N_ANCHORS];
  double share;

  for (int i = 0; i < MC_LIM_N_ANCHORS; i++) {
    copy[i] = k * f->copy[i];
    red[i] = k * ((f->red[i] > 0) ? f->red[i] : f->copy[i] * 2.0 / 3.0);
  }
  share = agg_rate(f, n * k) / n;
  if (share < copy[2]) {
    red[2] *= share / copy[2];
    copy[2] = share;
  }
  out->copy = interp(copy, ws);
  out->red = interp(red, ws);
  out->hop = interp(f->duplex, ws);
  /* a single-copy read of a peer's buffer costs at most a FIFO hop, which also copies in */
  out->fetch = fmin(k * fmax(f->pair, out->hop), out->copy);
  out->hop = fmin(k * ((out->hop > 0) ? out->hop : f->pair / 2), out->copy);
  out->hop_red = interp(f->duplex_red, ws);
  out->hop_red = (out->hop_red > 0) ? fmin(k * out->hop_red, out->red) : 0;
}

double mc_lim_time_span(const struct mc_lim_figures *f, enum mc_lim_coll coll,
                        enum mc_lim_algo algo, int n, int k, double bytes, double span)
{
  struct mc_lim_bytes b;
  struct mc_lim_rates r;
  double extra;

  if ((n < 2) || (k < 1) || (n * k > f->cores) || (f->pair <= 0) || (f->copy[0] <= 0))
    return 0;
  mc_lim_rank_bytes(coll, algo, n, bytes, &b);
  mc_lim_rates(f, n, k, mc_lim_working_set(coll, n, fmax(bytes, span)), &r);
  extra = fmax(0.0, 1.0 / r.red - 1.0 / r.copy);
  if ((algo == MC_LIM_FIFO) && (r.hop_red > 0)) /* its reducing hops as measured */
    return ((b.pass - b.red) / r.hop + b.red / r.hop_red + b.local / r.copy) / 1e9 +
           b.steps * f->rtt_ns * 1e-9;
  return (b.pass / ((algo == MC_LIM_FIFO) ? r.hop : r.fetch) + b.local / r.copy + b.red * extra) /
             1e9 +
         b.steps * f->rtt_ns * 1e-9;
}

double mc_lim_time(const struct mc_lim_figures *f, enum mc_lim_coll coll, enum mc_lim_algo algo,
                   int n, int k, double bytes)
{
  return mc_lim_time_span(f, coll, algo, n, k, bytes, 0);
}

double mc_lim_busbw_span(const struct mc_lim_figures *f, enum mc_lim_coll coll,
                         enum mc_lim_algo algo, int n, int k, double bytes, double span)
{
  double t = mc_lim_time_span(f, coll, algo, n, k, bytes, span);

  return (t > 0) ? bytes / t / 1e9 * mc_lim_bus_factor(coll, n) : 0;
}

double mc_lim_busbw(const struct mc_lim_figures *f, enum mc_lim_coll coll, enum mc_lim_algo algo,
                    int n, int k, double bytes)
{
  return mc_lim_busbw_span(f, coll, algo, n, k, bytes, 0);
}

/* --- figures as text ---------------------------------------------------- */

static const char *const anchor_names[MC_LIM_N_ANCHORS] = {"1M", "16M", "256M"};

_Static_assert(MC_LIM_DUPLEX_ANCHORS == MC_LIM_N_ANCHORS,
               "both-ways figures at the copy's anchors");

/* The anchor a key's suffix names ("1M", "16M", "256M"), -1 for none. */
static int anchor_index(const char *suffix)
{
  for (int i = 0; i < MC_LIM_N_ANCHORS; i++) {
    if (strcmp(suffix, anchor_names[i]) == 0)
      return i;
  }
  return -1;
}

static int set_key(struct mc_lim_figures *f, const char *key, size_t key_len, double v)
{
  char k[32];

  if (key_len == 0 || key_len >= sizeof(k))
    return -1;
  memcpy(k, key, key_len);
  k[key_len] = '\0';
  if (strncmp(k, "copy", 4) == 0 && anchor_index(k + 4) >= 0) {
    f->copy[anchor_index(k + 4)] = v;
  } else if (strncmp(k, "red", 3) == 0 && anchor_index(k + 3) >= 0) {
    f->red[anchor_index(k + 3)] = v;
  } else if (strcmp(k, "pair") == 0) {
    f->pair = v;
  } else if (strcmp(k, "duplex") == 0) { /* every anchor */
    for (int i = 0; i < MC_LIM_DUPLEX_ANCHORS; i++)
      f->duplex[i] = v;
  } else if (strncmp(k, "duplexred", 9) == 0 && anchor_index(k + 9) >= 0) {
    f->duplex_red[anchor_index(k + 9)] = v;
  } else if (strncmp(k, "duplex", 6) == 0 && anchor_index(k + 6) >= 0) {
    f->duplex[anchor_index(k + 6)] = v;
  } else if (strcmp(k, "rtt") == 0) {
    f->rtt_ns = v;
  } else if (strcmp(k, "cores") == 0 && v >= 1 && v <= MC_LIM_MAX_AGG && v == floor(v)) {
    f->cores = (int)v;
  } else if (strncmp(k, "agg", 3) == 0 && k[3] >= '1' && k[3] <= '9') {
    char *end;
    long m = strtol(k + 3, &end, 10);
    if (*end != '\0' || m < 1 || m > MC_LIM_MAX_AGG)
      return -1;
    f->agg[m] = v;
  } else {
    return -1;
  }
  return 0;
}

int mc_lim_parse_figures(const char *text, struct mc_lim_figures *f, char *err, size_t err_len)
{
  const char *p = text;

  while (*p != '\0') {
    const char *key;
    const char *eq;
    const char *end;
    char *num_end;
    double v;

    while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
      p++;
    if (*p == '#') {
      while (*p != '\0' && *p != '\n')
        p++;
      continue;
    }
    if (*p == '\0')
      break;
    key = p;
    end = p + strcspn(p, ", \t\r\n");
    eq = memchr(key, '=', (size_t)(end - key));
    if (eq == NULL) {
      snprintf(err, err_len,
               "limit: figure '%.*s' has no '=' (expected key=GB/s, e.g. copy1M=22.5)",
               (int)(end - key), key);
      return -1;
    }
    v = strtod(eq + 1, &num_end);
    if (num_end != end || eq + 1 == end || !(v >= 0) || isinf(v)) {
      snprintf(err, err_len, "limit: figure '%.*s': '%.*s' is not a number >= 0", (int)(end - key),
               key, (int)(end - eq - 1), eq + 1);
      return -1;
    }
    if (set_key(f, key, (size_t)(eq - key), v) != 0) {
      snprintf(
          err, err_len,
          "limit: unknown figure '%.*s' (keys: copy1M copy16M copy256M red1M red16M red256M "
          "pair duplex duplex1M duplex16M duplex256M duplexred1M duplexred16M duplexred256M rtt "
          "cores aggN)",
          (int)(eq - key), key);
      return -1;
    }
    p = end;
  }
  return 0;
}

void mc_lim_format_figures(const struct mc_lim_figures *f, char *buf, size_t len)
{
  size_t used = 0;

#define APPEND(...)                                                                                \
  do {                                                                                             \
    int w_ = snprintf(buf + used, (used < len) ? len - used : 0, __VA_ARGS__);                     \
    if (w_ > 0)                                                                                    \
      used += (size_t)w_;                                                                          \
  } while (0)
  if (len > 0)
    buf[0] = '\0';
  for (int i = 0; i < MC_LIM_N_ANCHORS; i++)
    APPEND("%scopy%s=%.2f", (i == 0) ? "" : ",", anchor_names[i], f->copy[i]);
  for (int i = 0; i < MC_LIM_N_ANCHORS; i++) {
    if (f->red[i] > 0)
      APPEND(",red%s=%.2f", anchor_names[i], f->red[i]);
  }
  APPEND(",pair=%.2f", f->pair);
  for (int i = 0; i < MC_LIM_DUPLEX_ANCHORS; i++) {
    if (f->duplex[i] > 0)
      APPEND(",duplex%s=%.2f", anchor_names[i], f->duplex[i]);
  }
  for (int i = 0; i < MC_LIM_DUPLEX_ANCHORS; i++) {
    if (f->duplex_red[i] > 0)
      APPEND(",duplexred%s=%.2f", anchor_names[i], f->duplex_red[i]);
  }
  APPEND(",rtt=%.0f,cores=%d", f->rtt_ns, f->cores);
  for (int m = 1; m <= MC_LIM_MAX_AGG; m++) {
    if (f->agg[m] > 0)
      APPEND(",agg%d=%.2f", m, f->agg[m]);
  }
#undef APPEND
}

/* --- tables ----------------------------------------------------------------- */

static void size_str(double bytes, char *buf, size_t len)
{
  if (bytes >= 1073741824.0 && fmod(bytes, 1073741824.0) == 0)
    snprintf(buf, len, "%.0fG", bytes / 1073741824.0);
  else if (bytes >= 1048576.0 && fmod(bytes, 1048576.0) == 0)
    snprintf(buf, len, "%.0fM", bytes / 1048576.0);
  else if (bytes >= 1024.0 && fmod(bytes, 1024.0) == 0)
    snprintf(buf, len, "%.0fK", bytes / 1024.0);
  else
    snprintf(buf, len, "%.0f", bytes);
}

static int print_n(FILE *out, const struct mc_lim_figures *f, const struct mc_lim_print_opts *o,
                   enum mc_lim_coll coll, int n)
{
  int kmax = f->cores / n;
  int ks[2] = {1, kmax};
  int n_k = (kmax > 1) ? 2 : 1;
  struct mc_lim_bytes fb;
  struct mc_lim_bytes sb;
  double span = o->no_rotate ? 0 : o->max_bytes;
  int rows = 0;

  mc_lim_rank_bytes(coll, MC_LIM_FIFO, n, n, &fb);
  mc_lim_rank_bytes(coll, MC_LIM_SINGLE, n, n, &sb);
  fprintf(out, "# %s, %d ranks, %d cores: model busbw (GB/s); per rank, c = size/%d:\n",
          mc_lim_coll_name(coll), n, f->cores, n);
  fprintf(out, "#   fifo:  hops %gc, reductions %gc, %g hand-offs; reads %gc, writes %gc\n",
          fb.pass, fb.red, fb.steps, fb.read, fb.write);
  fprintf(
      out,
      "#   1copy: passes %gc, local copies %gc, reductions %gc, %g rounds; reads %gc, writes %gc\n",
      sb.pass, sb.local, sb.red, sb.steps, sb.read, sb.write);
  if (o->no_rotate)
    fprintf(out, "#   each size on buffers of its own size (its working set stays in the caches "
                 "where it fits)\n");
  else
    fprintf(out,
            "#   calls move through buffers of %.0f bytes as meshccl-perf's and nccl-tests' "
            "do: every size at that working set (--no-rotate: its own)\n",
            o->max_bytes);
  fprintf(out, "#%11s", "size");
  for (int i = 0; i < n_k; i++) {
    char h[32];
    snprintf(h, sizeof(h), "fifo k=%d", ks[i]);
    fprintf(out, "  %11s", h);
    snprintf(h, sizeof(h), "1copy k=%d", ks[i]);
    fprintf(out, "  %11s", h);
  }
  fprintf(out, "\n");
  for (double s = o->min_bytes; s <= o->max_bytes; s *= o->factor) {
    fprintf(out, "%12.0f", s);
    for (int i = 0; i < n_k; i++) {
      fprintf(out, "  %11.2f", mc_lim_busbw_span(f, coll, MC_LIM_FIFO, n, ks[i], s, span));
      fprintf(out, "  %11.2f", mc_lim_busbw_span(f, coll, MC_LIM_SINGLE, n, ks[i], s, span));
    }
    fprintf(out, "\n");
    rows++;
    if (o->factor < 2)
      break;
  }
  if (o->json) {
    for (double s = o->min_bytes; s <= o->max_bytes; s *= o->factor) {
      char sz[32];
      size_str(s, sz, sizeof(sz));
      for (int i = 0; i < n_k; i++) {
        fprintf(
            out,
            "{\"coll\":\"%s\",\"n\":%d,\"k\":%d,\"bytes\":%.0f,\"size\":\"%s\",\"fifo_busbw\":%.3f,"
            "\"single_busbw\":%.3f,\"fifo_us\":%.3f,\"single_us\":%.3f}\n",
            mc_lim_coll_name(coll), n, ks[i], s, sz,
            mc_lim_busbw_span(f, coll, MC_LIM_FIFO, n, ks[i], s, span),
            mc_lim_busbw_span(f, coll, MC_LIM_SINGLE, n, ks[i], s, span),
            mc_lim_time_span(f, coll, MC_LIM_FIFO, n, ks[i], s, span) * 1e6,
            mc_lim_time_span(f, coll, MC_LIM_SINGLE, n, ks[i], s, span) * 1e6);
      }
      if (o->factor < 2)
        break;
    }
  }
  fprintf(out, "\n");
  return rows;
}

int mc_lim_print(FILE *out, const struct mc_lim_figures *f, const struct mc_lim_print_opts *o)
{
  int rows = 0;

  for (int coll = 0; coll < MC_LIM_N_COLLS; coll++) {
    if (o->colls != 0 && (o->colls & (1u << coll)) == 0)
      continue;
    for (int i = 0; i < o->n_ns; i++) {
      int n = o->ns[i];
      int dup = 0;
      for (int j = 0; j < i; j++)
        dup |= (o->ns[j] == n);
      if (dup || n < 2 || n > f->cores)
        continue;
      rows += print_n(out, f, o, (enum mc_lim_coll)coll, n);
    }
  }
  return rows;
}
