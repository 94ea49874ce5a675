/* SPDX-License-Identifier: Apache-2.0 */
/*
 * limit: what this host lets a host-memory collective reach, measured on the
 * cores this job may use (sched_getaffinity), then modelled.
 *
 * Measures (rank i's core is the i-th CPU of the affinity mask; the pair is
 * the first two, or -p A,B):
 *   copy    one core's memcpy, bytes copied per second, at 1, 16, 256 MiB
 *   red     one core's float sum c = a + b, bytes of c per second, same sizes
 *   pair    a FIFO between two cores shaped like the SHM transport's (8 slots
 *           of 128 KiB; the writer copies a private 16 MiB buffer into the
 *           slots, the reader copies them out into its own): the fastest
 *           16 MiB pass of three runs
 *   duplex  two such FIFOs run both ways at once, each core filling one and
 *           emptying the other step by step (what every rank of a ring
 *           does), with buffers of 512 KiB, 8 MiB and 128 MiB a side
 *           (working sets of 1, 16 and 256 MiB): the fastest 16 MiB pass's
 *           rate each way
 *   duplexred  the same, each core emptying the other's FIFO by reducing
 *           it with a local operand (float sum, meshccl's kernel: a ring's
 *           recvReduceSend)
 *   rtt     the round trip of one cache line between the pair (the fastest
 *           of 21 batches of 5000)
 * Best figures, not medians: the model is a bound, and on a host shared with
 * other jobs a spinning side that waits to run makes whole runs measure the
 * scheduler.
 *   aggM    M threads on M cores copying at once (DRAM size): their summed
 *           rate, best of 3 windows
 * then prints the model of limit_model.c (formulas in its header comment and
 * in docs/TOOLS.md "bench/limit"): per collective and rank count, the best
 * busbw of a FIFO ring and of single-copy reads, with one thread per rank and
 * with k = cores / n threads per rank: what MESHCCL_NTHREADS's default gives
 * (the idle cores, cores - n, shared among the n ranks, plus the rank's own
 * thread: (cores - n) / n + 1 = cores / n), when the rank has at least k
 * channels (the default caps k at the channels; NCCL_MIN_NCHANNELS raises
 * them).
 *
 *   build/bench/limit [-n 2,4,8,16] [-b 64K] [-e 256M] [-f 4] [-t SEC] [-J]
 *                     [-p A,B] [-c all_reduce,...] [--no-rotate]
 *                     [--from-figures SPEC|FILE]
 *
 * The rows model calls that move through buffers of -e bytes, as
 * meshccl-perf, mpi_perf and nccl-tests time them (every size at the
 * largest's working set); --no-rotate models each size on its own buffers.
 *
 * --from-figures takes "copy1M=22.5,copy16M=11.4,copy256M=10.4,pair=9.5,
 * rtt=380,cores=16" (or a file of such keys) and measures nothing: the model
 * for another host. The figures line it prints ("# figures: ...") is what
 * --from-figures reads back. -J adds one JSON line per row ({"coll":...}).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coll/coll_reduce.h"
#include "transport/tp_decide.h"
#include "transport/transport.h"
#include "limit_model.h"
#include "pair_probe.h"

#define FIFO_BUF (16u << 20) /* one pass of the pair's FIFO */
/* Each side's buffers: half the largest both-ways working set (256 MiB). */
#define PAIR_BUF_MAX ((size_t)mc_lim_anchor_bytes[MC_LIM_DUPLEX_ANCHORS - 1] / 2)
#define RTT_BATCHES  21
#define RTT_TRIPS    5000
#define SPIN_LIMIT_S 20.0
/* The pair's runs of at least min_run_s: three per FIFO way measured (one
 * way, then both ways copying and reducing at each anchor, fifo_runs). */
#define PAIR_RUNS (3 * (1 + 2 * MC_LIM_DUPLEX_ANCHORS))
#define MAX_CPUS  1024

static double min_run_s = 0.1; /* -t: each figure is the best of 3 runs this long */

static int pin_self(int cpu)
{
  cpu_set_t set;

  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *xalloc(size_t bytes, int fill)
{
  void *p = aligned_alloc(4096, bytes);

  if (p == NULL) {
    fprintf(stderr, "limit: out of memory allocating %zu bytes\n", bytes);
    exit(1);
  }
  memset(p, fill, bytes); /* fault the pages in before timing */
  return p;
}

/* --- one core ------------------------------------------------------------- */

/* c = a + b with meshccl's own kernel (src/coll/coll_reduce.c, the ISA it picks). */
static void reduce_sum(float *c, const float *a, const float *b, size_t n)
{
  static struct mc_redop op;
  static int ready;

  if (!ready) {
    if (mc_redop_builtin(ncclFloat32, ncclSum, 1, &op) != ncclSuccess) {
      fprintf(stderr, "limit: mc_redop_builtin(float32, sum) failed\n");
      exit(1);
    }
    ready = 1;
  }
  mc_reduce(&op, c, a, b, n, 0);
}

/* Bytes per second (GB/s) of memcpy (red = 0) or c = a + b (red = 1) at `bytes`, best of 3 runs. */
static double core_rate(size_t bytes, int red)
{
  char *a = xalloc(bytes, 1);
  char *b = xalloc(bytes, 2);
  char *c = red ? xalloc(bytes, 0) : NULL;
  double best = 0;

  for (int run = 0; run < 3; run++) {
    size_t reps = 0;
    double t0 = pair_now_sec();
    double dt;
    do {
      if (red)
        reduce_sum((float *)c, (const float *)a, (const float *)b, bytes / sizeof(float));
      else
        memcpy(b, a, bytes);
      __asm__ __volatile__("" : : "r"(b), "r"(c) : "memory");
      reps++;
      dt = pair_now_sec() - t0;
    } while (dt < min_run_s);
    if ((double)bytes * (double)reps / dt / 1e9 > best)
      best = (double)bytes * (double)reps / dt / 1e9;
  }
  free(a);
  free(b);
  free(c);
  return best;
}

/* --- m threads at once ------------------------------------------------------ */

#define AGG_WINDOWS 3

struct agg_arg {
  int cpu;
  size_t bytes;
  pthread_barrier_t *start; /* m threads and main, before each window */
  size_t reps[AGG_WINDOWS];
  double dt[AGG_WINDOWS];
  int err;
};

static void *agg_thread(void *p)
{
  struct agg_arg *a = p;
  char *src;
  char *dst;

  a->err = pin_self(a->cpu);
  src = xalloc(a->bytes, 1);
  dst = xalloc(a->bytes, 2);
  /* Every thread allocated before the first barrier; each window starts at one. */
  for (int w = 0; w < AGG_WINDOWS; w++) {
    double t0;
    pthread_barrier_wait(a->start);
    t0 = pair_now_sec();
    a->reps[w] = 0;
    do {
      memcpy(dst, src, a->bytes);
      __asm__ __volatile__("" : : "r"(dst) : "memory");
      a->reps[w]++;
      a->dt[w] = pair_now_sec() - t0;
    } while (a->dt[w] < min_run_s);
  }
  free(src);
  free(dst);
  return NULL;
}

/* Summed copy rate of m threads on cpus[0..m-1], each copying max(256/m, 32)
 * MiB: the best of AGG_WINDOWS windows, each the bytes of all threads over
 * the longest thread's time. */
static double agg_rate(const int *cpus, int m)
{
  struct agg_arg args[MAX_CPUS];
  pthread_t th[MAX_CPUS];
  pthread_barrier_t start;
  size_t bytes = (size_t)256 << 20;
  double best = 0;

  bytes = (bytes / (size_t)m > ((size_t)32 << 20)) ? bytes / (size_t)m : (size_t)32 << 20;
  pthread_barrier_init(&start, NULL, (unsigned)m + 1);
  for (int i = 0; i < m; i++)
    args[i] = (struct agg_arg){.cpu = cpus[i], .bytes = bytes, .start = &start};
  for (int i = 0; i < m; i++) {
    if (pthread_create(&th[i], NULL, agg_thread, &args[i]) != 0) {
      fprintf(stderr, "limit: pthread_create failed for aggregate thread %d of %d\n", i, m);
      exit(1);
    }
  }
  for (int w = 0; w < AGG_WINDOWS; w++)
    pthread_barrier_wait(&start);
  for (int i = 0; i < m; i++) {
    pthread_join(th[i], NULL);
    if (args[i].err != 0)
      fprintf(stderr, "limit: could not pin aggregate thread %d to CPU %d: %s\n", i, cpus[i],
              strerror(args[i].err));
  }
  for (int w = 0; w < AGG_WINDOWS; w++) {
    double sum = 0;
    double dt = 0;
    for (int i = 0; i < m; i++) {
      sum += (double)args[i].reps[w] * (double)bytes;
      dt = (args[i].dt[w] > dt) ? args[i].dt[w] : dt;
    }
    if (dt > 0 && sum / dt / 1e9 > best)
      best = sum / dt / 1e9;
  }
  pthread_barrier_destroy(&start);
  return best;
}

/* --- a pair of cores -------------------------------------------------------- */

/* The two-core probe's shared state (pair_probe.h) and where its sides run. */
struct pair_shared {
  struct mc_pair p;
  struct mc_pair q; /* the way back, for the two ways at once */
  /* their rate each way (side 1's view) per working set anchor, and when each side
   * reduces what it receives with a local operand */
  double duplex[MC_LIM_DUPLEX_ANCHORS];
  double duplex_red[MC_LIM_DUPLEX_ANCHORS];
  int cpu[2];
  int pin_err[2];
};

struct pair_arg {
  struct pair_shared *sh;
  int who;
};

/* How the FIFOs run: one way (side 0 fills p from src, side 1 empties it
 * into dst), both ways at once (each side fills its FIFO from src and
 * empties the other's into dst; p side 0 to 1, q back), or both ways with a
 * reduction (each side empties the other's FIFO by dst = slot + opnd, float
 * sum: a ring's recvReduceSend). */
enum fifo_way { ONE_WAY, BOTH_WAYS, BOTH_WAYS_REDUCE };

/* Receives step k of `in`: reduced with opnd into dst. 0 on failure. */
static int take_reduce(struct mc_pair *in, uint64_t k, char *dst, const char *opnd, double t_end)
{
  char *slot = pair_fifo_take(in, k, t_end);

  if (slot == NULL)
    return 0;
  reduce_sum((float *)dst, (const float *)slot, (const float *)opnd,
             PAIR_SLOT_BYTES / sizeof(float));
  pair_fifo_release(in, k);
  return 1;
}

/* Three runs of 16 MiB passes, each run at least min_run_s, through the
 * FIFO `way`; the steps go through the first `window` bytes of src, dst and
 * opnd, over and over, a pass going on where the last stopped (the working
 * set). *kp and *kq count the steps of p and q,
 * *n the control messages on p's ping/pong; the writer (side 0) decides how many
 * passes a run takes. The fastest pass in GB/s (each way), 0 on failure. */
static double fifo_runs(struct pair_shared *ps, int who, enum fifo_way way, size_t window,
                        char *src, char *dst, const char *opnd, uint64_t *kp, uint64_t *kq,
                        uint64_t *n, double t_end)
{
  struct mc_pair *sh = &ps->p;
  uint64_t per_buf = FIFO_BUF / PAIR_SLOT_BYTES;
  uint64_t per_window = window / PAIR_SLOT_BYTES;
  uint64_t at = 0; /* steps so far: where in the window the next one goes */
  double best = 0;

  for (int run = 0; run < 3; run++) {
    uint64_t passes = 0;
    double t0 = pair_now_sec();
    for (;;) {
      double tp = pair_now_sec();
      double gbps;
      for (uint64_t s = 0; s < per_buf; s++) {
        size_t off = (at++ % per_window) * PAIR_SLOT_BYTES;
        char *from = src + off;
        char *to = dst + off;
        struct mc_pair *out = (who == 0) ? &ps->p : &ps->q;
        struct mc_pair *in = (who == 0) ? &ps->q : &ps->p;
        uint64_t k_out = (who == 0) ? *kp : *kq;
        uint64_t k_in = (who == 0) ? *kq : *kp;
        int ok;
        if (way == ONE_WAY)
          ok = pair_fifo_step(sh, who, *kp, (who == 0) ? from : to, t_end);
        else if (way == BOTH_WAYS)
          ok = pair_duplex_step(out, k_out, in, k_in, from, to, t_end);
        else
          ok = pair_fifo_step(out, 0, k_out, from, t_end) &&
               take_reduce(in, k_in, to, opnd + off, t_end);
        if (!ok)
          return 0;
        ++*kp;
        *kq += (way != ONE_WAY) ? 1 : 0;
      }
      passes++;
      /* The fastest pass: what the pair does while both sides run (under
       * load, whole runs measure the scheduler). */
      gbps = (double)FIFO_BUF / (pair_now_sec() - tp) / 1e9;
      best = (gbps > best) ? gbps : best;
      /* Both sides run the same number of passes: 4 per run, and more while
       * the run is shorter than min_run_s (side 0 decides, through ping). */
      if (who == 0) {
        int more = (passes < 4) || (pair_now_sec() - t0 < min_run_s);
        atomic_store_explicit(&sh->ping, ++*n * 2 + (uint64_t)more, memory_order_release);
        if (!pair_wait(sh, &sh->pong, *n, t_end))
          return 0;
        if (!more)
          break;
      } else {
        uint64_t v;
        ++*n;
        while ((v = atomic_load_explicit(&sh->ping, memory_order_acquire)) < *n * 2) {
          if (atomic_load(&sh->failed) != 0 || pair_now_sec() > t_end)
            return 0;
        }
        atomic_store_explicit(&sh->pong, *n, memory_order_release);
        if ((v & 1) == 0)
          break;
      }
    }
  }
  return best;
}

/* Side 0 pings and fills the FIFO, side 1 answers and empties it; then both
 * fill one FIFO and empty the other at once. */
static void *pair_side(void *p)
{
  struct pair_arg *a = p;
  struct pair_shared *ps = a->sh;
  struct mc_pair *sh = &ps->p;
  int who = a->who;
  double t_end = pair_now_sec() + SPIN_LIMIT_S + PAIR_RUNS * min_run_s;
  double batch_ns[RTT_BATCHES];
  char *src;
  char *dst;
  char *opnd;
  uint64_t n = 0;
  uint64_t k = 0;
  uint64_t kq = 0;
  double one_way;
  double both_ways[MC_LIM_DUPLEX_ANCHORS] = {0};
  double both_red[MC_LIM_DUPLEX_ANCHORS] = {0};

  ps->pin_err[who] = pin_self(ps->cpu[who]);
  src = xalloc(PAIR_BUF_MAX, who + 1);
  dst = xalloc(PAIR_BUF_MAX, who + 3);
  opnd = xalloc(PAIR_BUF_MAX, 0);
  if (!pair_rtt(sh, who, RTT_BATCHES, RTT_TRIPS, t_end, &n, batch_ns))
    goto fail;
  if (who == 0)
    sh->rtt_ns = batch_ns[0]; /* the fastest batch, for the same reason */
  one_way = fifo_runs(ps, who, ONE_WAY, FIFO_BUF, src, dst, opnd, &k, &kq, &n, t_end);
  if (one_way <= 0)
    goto fail;
  /* Both ways at the working sets of the model's anchors: src and dst (and
   * the operand) of half the anchor each. */
  for (int i = 0; i < MC_LIM_DUPLEX_ANCHORS; i++) {
    size_t window = (size_t)mc_lim_anchor_bytes[i] / 2;
    both_ways[i] = fifo_runs(ps, who, BOTH_WAYS, window, src, dst, opnd, &k, &kq, &n, t_end);
    both_red[i] = fifo_runs(ps, who, BOTH_WAYS_REDUCE, window, src, dst, opnd, &k, &kq, &n, t_end);
    if ((both_ways[i] <= 0) || (both_red[i] <= 0))
      goto fail;
  }
  if (who == 1) {
    sh->gbps = one_way; /* the reader's view: bytes out of the FIFO per second */
    memcpy(ps->duplex, both_ways, sizeof(both_ways));
    memcpy(ps->duplex_red, both_red, sizeof(both_red));
  }
  free(src);
  free(dst);
  free(opnd);
  return NULL;
fail:
  atomic_store(&sh->failed, 1);
  atomic_store(&ps->q.failed, 1);
  free(src);
  free(dst);
  free(opnd);
  return NULL;
}

static int pair_measure(int cpu_a, int cpu_b, double *rtt_ns, double *gbps,
                        double duplex[MC_LIM_DUPLEX_ANCHORS],
                        double duplex_red[MC_LIM_DUPLEX_ANCHORS])
{
  struct pair_shared *sh = aligned_alloc(4096, sizeof(*sh));
  struct pair_arg args[2];
  pthread_t th[2];
  int ok;

  if (sh == NULL) {
    fprintf(stderr, "limit: out of memory for the FIFO\n");
    return -1;
  }
  memset(sh, 0, sizeof(*sh));
  sh->cpu[0] = cpu_a;
  sh->cpu[1] = cpu_b;
  for (int i = 0; i < 2; i++) {
    args[i] = (struct pair_arg){sh, i};
    if (pthread_create(&th[i], NULL, pair_side, &args[i]) != 0) {
      fprintf(stderr, "limit: pthread_create failed for the pair\n");
      exit(1);
    }
  }
  pthread_join(th[0], NULL);
  pthread_join(th[1], NULL);
  ok = (atomic_load(&sh->p.failed) == 0);
  for (int i = 0; i < 2; i++) {
    if (sh->pin_err[i] != 0)
      fprintf(stderr, "limit: could not pin the pair's side %d to CPU %d: %s\n", i, sh->cpu[i],
              strerror(sh->pin_err[i]));
  }
  if (!ok)
    fprintf(stderr, "limit: the pair on CPUs %d and %d did not finish within %.0f s\n", cpu_a,
            cpu_b, SPIN_LIMIT_S + PAIR_RUNS * min_run_s);
  *rtt_ns = sh->p.rtt_ns;
  *gbps = sh->p.gbps;
  memcpy(duplex, sh->duplex, sizeof(sh->duplex));
  memcpy(duplex_red, sh->duplex_red, sizeof(sh->duplex_red));
  free(sh);
  return ok ? 0 : -1;
}

/* --- command line ---------------------------------------------------------- */

static int parse_size(const char *s, double *out)
{
  char *end;
  double v = strtod(s, &end);

  if (end == s || v <= 0)
    return -1;
  switch (*end) {
  case 'K':
  case 'k':
    v *= 1024, end++;
    break;
  case 'M':
  case 'm':
    v *= 1048576, end++;
    break;
  case 'G':
  case 'g':
    v *= 1073741824, end++;
    break;
  default:
    break;
  }
  if (*end != '\0')
    return -1;
  *out = v;
  return 0;
}

static void usage(FILE *f)
{
  fprintf(f,
          "usage: limit [-n 2,4,8,16] [-b 64K] [-e 256M] [-f 4] [-t SEC] [-J] [-p A,B]\n"
          "             [-c all_reduce,all_gather,reduce_scatter,broadcast] [--no-rotate]\n"
          "             [--from-figures SPEC|FILE]\n"
          "  -n LIST   rank counts (the host's core count is added; those above it are left out)\n"
          "  -b/-e/-f  model sizes: from, to, factor (default 64K 256M 4)\n"
          "  --no-rotate  each size on its own buffers (default: calls move through buffers of\n"
          "            -e bytes, as meshccl-perf, mpi_perf and nccl-tests time them)\n"
          "  -t SEC    each measurement: best of 3 runs of at least SEC (default 0.1)\n"
          "  -p A,B    the pair's CPUs (default: the first two of the affinity mask)\n"
          "  -J        one JSON line per row after each table\n"
          "  --from-figures SPEC|FILE   measure nothing: model the host these figures describe\n"
          "            (copy1M= copy16M= copy256M= red1M= red16M= red256M= pair= GB/s, rtt= ns,\n"
          "             cores=, aggM= GB/s of M threads copying at once)\n");
}

static int read_spec(const char *arg, struct mc_lim_figures *f)
{
  char err[256];
  char *text = NULL;
  FILE *fp = strchr(arg, '=') ? NULL : fopen(arg, "r");

  if (fp != NULL) {
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    int ch;
    while (mem != NULL && (ch = fgetc(fp)) != EOF)
      fputc(ch, mem);
    fclose(fp);
    if (mem == NULL || fclose(mem) != 0) {
      fprintf(stderr, "limit: cannot read figures file %s\n", arg);
      return -1;
    }
  } else if (strchr(arg, '=') == NULL) {
    fprintf(stderr, "limit: --from-figures %s: no such file, and not key=value figures: %s\n", arg,
            strerror(errno));
    return -1;
  }
  if (mc_lim_parse_figures((text != NULL) ? text : arg, f, err, sizeof(err)) != 0) {
    fprintf(stderr, "%s (in --from-figures %s)\n", err, arg);
    free(text);
    return -1;
  }
  free(text);
  return 0;
}

/* The library's P2P/CMA probe (src/transport/tp_cma.c) on cpu, and what
 * P2P between processes decides from it for one host's 128 KiB slots. */
static void print_cma(int cpu)
{
  struct mc_cma_figures f;
  const char *why = NULL;
  cpu_set_t one;
  cpu_set_t old;
  size_t from;

  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  sched_getaffinity(0, sizeof(old), &old);
  sched_setaffinity(0, sizeof(one), &one);
  mc_tp_cma_probe(131072, &f, &why);
  sched_setaffinity(0, sizeof(old), &old);
  if (why != NULL) {
    printf("# P2P/CMA probe: %s\n", why);
    return;
  }
  printf("# P2P/CMA probe, GB/s per step:");
  for (int i = 0; i < f.n_sizes; i++)
    printf(" %zuK FIFO hop %.1f CMA %.1f%s", f.bytes[i] >> 10, f.fifo_gbps[i], f.cma_gbps[i],
           (i + 1 < f.n_sizes) ? "," : "\n");
  from = mc_tp_decide_cma(&f, 131072);
  if (from == MC_CMA_NEVER)
    printf("# P2P/CMA decision (128 KiB slots): the FIFO at every size (SHM between processes)\n");
  else
    printf("# P2P/CMA decision (128 KiB slots): single copy for steps of %zu bytes and more\n",
           from);
}

int main(int argc, char **argv)
{
  static struct mc_lim_figures fig; /* large (agg[]): not on the stack */
  int ns[16] = {2, 4, 8, 16};
  int n_ns = 4;
  struct mc_lim_print_opts po = {.min_bytes = 65536, .max_bytes = 268435456, .factor = 4};
  const char *from = NULL;
  int pair_cpu[2] = {-1, -1};
  int cpus[MAX_CPUS];
  int n_cpus = 0;
  cpu_set_t set;

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(a, "-J") == 0) {
      po.json = 1;
      continue;
    } else if (strcmp(a, "--no-rotate") == 0) {
      po.no_rotate = 1;
      continue;
    }
    if (v == NULL) {
      fprintf(stderr, "limit: %s needs a value\n", a);
      usage(stderr);
      return 2;
    }
    i++;
    if (strcmp(a, "-n") == 0) {
      char *end;
      const char *p = v;
      n_ns = 0;
      while (*p != '\0' && n_ns < 15) {
        long n = strtol(p, &end, 10);
        if (end == p || n < 2 || n > MC_LIM_MAX_AGG || (*end != ',' && *end != '\0')) {
          fprintf(stderr, "limit: -n %s: expected rank counts >= 2, comma-separated\n", v);
          return 2;
        }
        ns[n_ns++] = (int)n;
        p = (*end == ',') ? end + 1 : end;
      }
    } else if (strcmp(a, "-b") == 0 || strcmp(a, "-e") == 0) {
      if (parse_size(v, (a[1] == 'b') ? &po.min_bytes : &po.max_bytes) != 0) {
        fprintf(stderr, "limit: %s %s: expected a size (64K, 256M, ...)\n", a, v);
        return 2;
      }
    } else if (strcmp(a, "-f") == 0) {
      po.factor = atoi(v);
      if (po.factor < 2) {
        fprintf(stderr, "limit: -f %s: expected a factor >= 2\n", v);
        return 2;
      }
    } else if (strcmp(a, "-t") == 0) {
      min_run_s = atof(v);
      if (!(min_run_s > 0 && min_run_s <= 10)) {
        fprintf(stderr, "limit: -t %s: expected seconds in (0, 10]\n", v);
        return 2;
      }
    } else if (strcmp(a, "-p") == 0) {
      if (sscanf(v, "%d,%d", &pair_cpu[0], &pair_cpu[1]) != 2 || pair_cpu[0] < 0 ||
          pair_cpu[1] < 0) {
        fprintf(stderr, "limit: -p %s: expected two CPU numbers A,B\n", v);
        return 2;
      }
    } else if (strcmp(a, "-c") == 0) {
      char copy[256];
      snprintf(copy, sizeof(copy), "%s", v);
      po.colls = 0;
      for (char *tok = strtok(copy, ","); tok != NULL; tok = strtok(NULL, ",")) {
        int found = 0;
        for (int c = 0; c < MC_LIM_N_COLLS; c++) {
          if (strcmp(tok, mc_lim_coll_name((enum mc_lim_coll)c)) == 0) {
            po.colls |= 1u << c;
            found = 1;
          }
        }
        if (!found) {
          fprintf(stderr, "limit: -c: unknown collective '%s'\n", tok);
          return 2;
        }
      }
    } else if (strcmp(a, "--from-figures") == 0) {
      from = v;
    } else {
      fprintf(stderr, "limit: unknown option %s\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (po.min_bytes > po.max_bytes) {
    fprintf(stderr, "limit: -b is above -e\n");
    return 2;
  }

  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    fprintf(stderr, "limit: sched_getaffinity failed: %s\n", strerror(errno));
    return 1;
  }
  for (int c = 0; c < CPU_SETSIZE && n_cpus < MAX_CPUS; c++) {
    if (CPU_ISSET(c, &set))
      cpus[n_cpus++] = c;
  }
  fig.cores = n_cpus;

  if (from != NULL) {
    if (read_spec(from, &fig) != 0)
      return 2;
    if (fig.copy[0] <= 0 || fig.copy[1] <= 0 || fig.copy[2] <= 0 || fig.pair <= 0) {
      fprintf(stderr, "limit: --from-figures needs copy1M, copy16M, copy256M and pair (GB/s)\n");
      return 2;
    }
    printf("# limit: model from recorded figures (nothing measured)\n");
  } else {
    if (n_cpus < 2) {
      fprintf(stderr,
              "limit: the affinity mask allows %d CPU; the pair and the model need 2 or more\n",
              n_cpus);
      return 1;
    }
    if (pair_cpu[0] < 0) {
      pair_cpu[0] = cpus[0];
      pair_cpu[1] = cpus[1];
    }
    printf("# limit: %d CPUs in the affinity mask (%d", n_cpus, cpus[0]);
    for (int i = 1; i < n_cpus && i < 64; i++)
      printf(",%d", cpus[i]);
    printf("%s); rank i runs on the i-th; single-core figures on CPU %d, pair on %d,%d\n",
           (n_cpus > 64) ? ",..." : "", cpus[0], pair_cpu[0], pair_cpu[1]);
    {
      double load[1];
      long online = sysconf(_SC_NPROCESSORS_ONLN);
      if (getloadavg(load, 1) == 1 && load[0] >= 0.5)
        printf("# load average %.1f on %ld online CPUs: other jobs share these cores; figures "
               "measured now are "
               "low, and the pair's round trip long whenever a side waits to run\n",
               load[0], online);
    }
    fflush(stdout);
    {
      /* The single-core figures on cpus[0], measured from a pinned thread. */
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus[0], &one);
      if (sched_setaffinity(0, sizeof(one), &one) != 0)
        fprintf(stderr, "limit: could not pin to CPU %d: %s\n", cpus[0], strerror(errno));
      for (int i = 0; i < MC_LIM_N_ANCHORS; i++) {
        fig.copy[i] = core_rate((size_t)mc_lim_anchor_bytes[i], 0);
        fig.red[i] = core_rate((size_t)mc_lim_anchor_bytes[i], 1);
      }
      sched_setaffinity(0, sizeof(set), &set);
    }
    if (pair_measure(pair_cpu[0], pair_cpu[1], &fig.rtt_ns, &fig.pair, fig.duplex,
                     fig.duplex_red) != 0)
      return 1;
    for (int m = 1; m <= n_cpus && m <= MC_LIM_MAX_AGG; m++)
      fig.agg[m] = agg_rate(cpus, m);
    printf("# %-10s %10s %10s %10s\n", "GB/s", "1 MiB", "16 MiB", "256 MiB");
    printf("# %-10s %10.2f %10.2f %10.2f\n", "copy", fig.copy[0], fig.copy[1], fig.copy[2]);
    printf("# %-10s %10.2f %10.2f %10.2f\n", "reduce", fig.red[0], fig.red[1], fig.red[2]);
    printf("# pair FIFO %.2f GB/s one way; cache-line round trip %.0f ns\n", fig.pair, fig.rtt_ns);
    printf("# pair both ways at once, GB/s each way (working set 1 MiB / 16 MiB / 256 MiB): "
           "copying what arrives %.2f / %.2f / %.2f, reducing it %.2f / %.2f / %.2f\n",
           fig.duplex[0], fig.duplex[1], fig.duplex[2], fig.duplex_red[0], fig.duplex_red[1],
           fig.duplex_red[2]);
    printf("# aggregate copy (threads: GB/s):");
    for (int m = 1; m <= n_cpus && m <= MC_LIM_MAX_AGG; m++)
      printf(" %d: %.1f", m, fig.agg[m]);
    printf("\n");
    print_cma(cpus[0]);
  }
  {
    char line[4096];
    mc_lim_format_figures(&fig, line, sizeof(line));
    printf("# figures: %s\n", line);
    if (from != NULL && fig.red[0] <= 0)
      printf("# no red* figures: reductions at 2/3 of the copy rate (memory-bound)\n");
    if (from != NULL) {
      int known = 0;
      for (int m = 1; m <= MC_LIM_MAX_AGG; m++)
        known |= (fig.agg[m] > 0);
      if (!known)
        printf("# no agg* figures: memory bandwidth assumed to grow with the threads (an upper "
               "bound)\n");
    }
  }
  if (n_ns < 16)
    ns[n_ns++] = fig.cores;
  printf("# k = cores / n threads per rank: meshccl's MESHCCL_NTHREADS default where the rank has "
         "at least k channels (at most the channels otherwise; NCCL_MIN_NCHANNELS=k)\n");
  printf("\n");
  po.ns = ns;
  po.n_ns = n_ns;
  mc_lim_print(stdout, &fig, &po);
  return 0;
}
