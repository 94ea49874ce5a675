/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ring against Tree all-reduce in one communicator, interleaved: for every
 * size, rounds of (K all-reduces on the ring, K on the tree), the algorithm
 * switched between them on every rank alike. Each algorithm's time is the
 * median over the rounds of its mean time per call, so both meet the same
 * process placement, the same connections and the same moments of a noisy
 * host: run as separate processes, the two differed by 1.5x from one run to
 * the next at 2 namespace hosts on a 2-core VM. The comparison is the median
 * over the rounds of each round's tree/ring ratio: the two halves of a round
 * run a few milliseconds apart, in the same state of the host, so a round
 * spent in a slow state (the scheduler's placement of the ranks' threads
 * changes a call's time by up to 3x here) slows both alike and does not move
 * the ratio.
 *
 * How many rounds: at least min-rounds, then more until the 95% confidence
 * interval of that median (the distribution-free one, between the order
 * statistics n/2 -+ 0.98 sqrt(n)) is within +-CI_TARGET of it, or max-rounds,
 * or TIME_BUDGET_S seconds of the size's rounds. Rank 0 decides and tells
 * the others with a broadcast, outside the timed calls. A fixed 9 or 21
 * rounds left the ratio of sizes where the two are close wandering by 10-15%
 * from one run to the next; the interval says how far the printed one can be
 * trusted. The tuning model's choice for each size (mc_coll_algo_choose with
 * every algorithm allowed) is printed next to them.
 *
 * Launched like meshccl-perf (meshccl-run, mpirun, or RANK/WORLD_SIZE and
 * NCCL_COMM_ID); rank 0 prints one line per size:
 *   size ring_us tree_us tree/ring model-choice rounds ratio_lo ratio_hi
 * Not a test: timings belong here.
 * Usage: algo_pair [min-bytes] [max-bytes] [min-rounds] [max-rounds] [other]
 * other: the algorithm timed against Ring, an NCCL_ALGO name (default Tree;
 * e.g. RecDouble); the "tree" columns are its.
 */
#include "coll/coll.h"
#include "init/comm.h"
#include "meshccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

/* The confidence interval the rounds aim at (+-3% of the median ratio), and
 * the time one size may take beyond its first min-rounds rounds. */
#define CI_TARGET     0.03
#define TIME_BUDGET_S 20.0

static double now_us(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a;
  double y = *(const double *)b;

  return (x > y) - (x < y);
}

static double median(double *v, int n)
{
  qsort(v, (size_t)n, sizeof(*v), cmp_double);
  return (n % 2) ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The median of v[0..n) and its distribution-free 95% confidence interval:
 * the order statistics j = floor(n/2 - 0.98 sqrt(n)) and
 * k = ceil(1 + n/2 + 0.98 sqrt(n)), counted from 1 (the whole range below 9
 * values). v is left as it was; scratch holds n values. */
static void median_ci(const double *v, int n, double *scratch, double *med, double *lo, double *hi)
{
  double half = 0.98 * sqrt((double)n);
  int j = (int)floor((double)n / 2 - half);
  int k = (int)ceil(1 + (double)n / 2 + half);

  memcpy(scratch, v, (size_t)n * sizeof(*v));
  *med = median(scratch, n);
  j = (j < 1) ? 1 : j;
  k = (k > n) ? n : k;
  *lo = scratch[j - 1];
  *hi = scratch[k - 1];
}

/* A size as nccl-tests writes it: 8, 64K, 4M, 1G. 0 when it is not one. */
static size_t parse_size(const char *s)
{
  char *end = NULL;
  unsigned long long v = strtoull(s, &end, 10);

  if ((end == s) || (v == 0))
    return 0;
  switch (*end) {
  case 'K':
  case 'k':
    v <<= 10;
    end++;
    break;
  case 'M':
  case 'm':
    v <<= 20;
    end++;
    break;
  case 'G':
  case 'g':
    v <<= 30;
    end++;
    break;
  default:
    break;
  }
  return (*end == '\0') ? (size_t)v : 0;
}

/* Calls per round: about 4 MiB moved, 2 to 100 calls. */
static int calls_per_round(size_t bytes)
{
  size_t k = (4u << 20) / (bytes ? bytes : 1);

  return (k < 2) ? 2 : (k > 100) ? 100 : (int)k;
}

/* Mean time (us) of k all-reduces of count floats on the algorithms mask allows. */
static ncclResult_t timed(ncclComm_t comm, uint32_t mask, float *buf, size_t count, int k,
                          double *us_out)
{
  double t0;

  comm->coll.algo_allowed[MC_COLL_ALLREDUCE] = mask;
  t0 = now_us();
  for (int i = 0; i < k; i++) {
    ncclResult_t res = ncclAllReduce(buf, buf, count, ncclFloat32, ncclSum, comm, NULL);
    if (res != ncclSuccess)
      return res;
  }
  *us_out = (now_us() - t0) / k;
  return ncclSuccess;
}

/* The model's algorithm for an all-reduce of bytes, every algorithm allowed. */
static const char *model_choice(ncclComm_t comm, uint32_t all, size_t count)
{
  struct mc_op op;

  memset(&op, 0, sizeof(op));
  op.kind = MC_COLL_ALLREDUCE;
  op.comm = comm;
  op.count = count;
  op.esize = sizeof(float);
  comm->coll.algo_allowed[MC_COLL_ALLREDUCE] = all;
  if (mc_coll_algo_choose(&op) != ncclSuccess)
    return "?";
  return op.algo->name;
}

/* The algorithm timed against Ring (argument 5): Tree unless named. */
static uint32_t g_other = 1u << MC_ALGO_TREE;

/* One round: k calls on each algorithm, which goes first alternating with
 * the round's number, so neither always follows the other. */
static ncclResult_t one_round(ncclComm_t comm, int r, float *buf, size_t count, int k,
                              double *ring_us, double *tree_us)
{
  uint32_t ring = 1u << MC_ALGO_RING;
  uint32_t tree = g_other;
  uint32_t first = (r % 2) ? tree : ring;
  uint32_t second = (r % 2) ? ring : tree;
  double a;
  double b;

  if ((timed(comm, first, buf, count, k, &a) != ncclSuccess) ||
      (timed(comm, second, buf, count, k, &b) != ncclSuccess))
    return ncclSystemError;
  *ring_us = (first == ring) ? a : b;
  *tree_us = (first == ring) ? b : a;
  return ncclSuccess;
}

/* Rank 0's answer to "one more round?", the same on every rank. */
static ncclResult_t more_rounds(ncclComm_t comm, int rank, int done, int min_rounds, int max_rounds,
                                double started_us, const double *ratio, double *scratch, int *more)
{
  int32_t flag = 0;

  if ((rank == 0) && (done < max_rounds)) {
    double med;
    double lo;
    double hi;
    median_ci(ratio, done, scratch, &med, &lo, &hi);
    flag = (done < min_rounds) || (((hi - med) > CI_TARGET * med || (med - lo) > CI_TARGET * med) &&
                                   (now_us() - started_us < TIME_BUDGET_S * 1e6));
  }
  if (ncclBroadcast(&flag, &flag, 1, ncclInt32, 0, comm, NULL) != ncclSuccess)
    return ncclSystemError;
  *more = flag;
  return ncclSuccess;
}

int main(int argc, char **argv)
{
  size_t min_bytes = (argc > 1) ? parse_size(argv[1]) : 8;
  size_t max_bytes = (argc > 2) ? parse_size(argv[2]) : (64u << 20);
  int min_rounds = (argc > 3) ? atoi(argv[3]) : 9;
  int max_rounds = (argc > 4) ? atoi(argv[4]) : 101;
  uint32_t all;
  ncclComm_t comm = NULL;
  float *buf = NULL;
  double *t_ring = NULL;
  double *t_tree = NULL;
  double *ratio = NULL;
  double *scratch = NULL;
  int rank = 0;
  int n_ranks = 0;
  int rc = 1;

  struct mc_algo_env env;

  if ((min_bytes < 4) || (max_bytes < min_bytes) || (min_rounds < 1) || (max_rounds < min_rounds) ||
      (max_rounds > 1000) ||
      ((argc > 5) && (mc_algo_env_parse(argv[5], NULL, &env) != ncclSuccess))) {
    fprintf(stderr, "usage: algo_pair [min-bytes >= 4] [max-bytes] [min-rounds >= 1] "
                    "[max-rounds, min-rounds to 1000] [other algorithm, an NCCL_ALGO name]\n");
    return 2;
  }
  if (argc > 5)
    g_other = env.allowed[MC_COLL_ALLREDUCE];
  if (meshcclCommInitFromEnv(&comm, NULL) != ncclSuccess) {
    fprintf(stderr, "algo_pair: meshcclCommInitFromEnv failed\n");
    return 1;
  }
  ncclCommUserRank(comm, &rank);
  ncclCommCount(comm, &n_ranks);
  buf = calloc(max_bytes / sizeof(float) + 1, sizeof(float));
  t_ring = calloc((size_t)max_rounds, sizeof(double));
  t_tree = calloc((size_t)max_rounds, sizeof(double));
  ratio = calloc((size_t)max_rounds, sizeof(double));
  scratch = calloc((size_t)max_rounds, sizeof(double));
  if ((buf == NULL) || (t_ring == NULL) || (t_tree == NULL) || (ratio == NULL) ||
      (scratch == NULL)) {
    fprintf(stderr, "algo_pair: out of memory for %zu bytes\n", max_bytes);
    goto out;
  }
  /* The first call reads NCCL_ALGO and builds the model: keep what it allows. */
  if (ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess)
    goto out;
  all = comm->coll.algo_allowed[MC_COLL_ALLREDUCE];
  if (rank == 0) {
    printf("# algo_pair: all_reduce float sum, %d ranks, Ring and %s interleaved in one "
           "communicator, %d-%d rounds until the median ratio's 95%% interval is within "
           "+-%.0f%% (us per call: medians over the rounds; tree/ring: median of the rounds' "
           "ratios, and its interval)\n",
           n_ranks, (argc > 5) ? argv[5] : "Tree", min_rounds, max_rounds, CI_TARGET * 100);
    printf("# %10s %10s %10s %9s %6s %6s %9s %9s\n", "size", "ring", "tree", "tree/ring", "model",
           "rounds", "ratio_lo", "ratio_hi");
  }
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    size_t count = bytes / sizeof(float);
    int k = calls_per_round(bytes);
    int done = 0;
    int more = 1;
    double started;
    double med;
    double lo;
    double hi;
    const char *choice;
    /* Two calls of each, untimed: the size's first calls pay for what a
     * steady state does not (new FIFO slots touched, the chunking's plan). */
    if (one_round(comm, 0, buf, count, 2, &med, &lo) != ncclSuccess)
      goto out;
    started = now_us();
    while (more) {
      if (one_round(comm, done, buf, count, k, &t_ring[done], &t_tree[done]) != ncclSuccess)
        goto out;
      ratio[done] = t_tree[done] / t_ring[done];
      done++;
      if (more_rounds(comm, rank, done, min_rounds, max_rounds, started, ratio, scratch, &more) !=
          ncclSuccess)
        goto out;
    }
    choice = model_choice(comm, all, count);
    if (rank == 0) {
      median_ci(ratio, done, scratch, &med, &lo, &hi);
      printf("  %10zu %10.1f %10.1f %9.3f %6s %6d %9.3f %9.3f\n", bytes, median(t_ring, done),
             median(t_tree, done), med, choice, done, lo, hi);
      fflush(stdout);
    }
  }
  rc = 0;
out:
  if (rc != 0)
    fprintf(stderr, "algo_pair: rank %d: an all-reduce failed\n", rank);
  free(scratch);
  free(ratio);
  free(t_tree);
  free(t_ring);
  free(buf);
  if (comm != NULL)
    ncclCommDestroy(comm);
  return rc;
}
