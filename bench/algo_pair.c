/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Ring against Tree all-reduce in one communicator, interleaved: for every
 * size, ROUNDS rounds of (K all-reduces on the ring, K on the tree), the
 * algorithm switched between them on every rank alike. Each algorithm's time
 * is the median over the rounds of its mean time per call, so both meet the
 * same process placement, the same connections and the same moments of a
 * noisy host: run as separate processes, the two differed by 1.5x from one
 * run to the next at 2 namespace hosts on a 2-core VM. The comparison is the
 * median over the rounds of each round's tree/ring ratio: the two halves of a
 * round run a few milliseconds apart, in the same state of the host, so a
 * round spent in a slow state (the scheduler's placement of the ranks'
 * threads changes a call's time by up to 3x here) slows both alike and does
 * not move the ratio. The tuning model's choice for each size
 * (mc_coll_algo_choose with every algorithm allowed) is printed next to them.
 *
 * Launched like meshccl-perf (meshccl-run, mpirun, or RANK/WORLD_SIZE and
 * NCCL_COMM_ID); rank 0 prints one line per size:
 *   size ring_us tree_us tree/ring model-choice
 * Not a test: timings belong here. Usage: algo_pair [min-bytes] [max-bytes] [rounds]
 */
#include "coll/coll.h"
#include "init/comm.h"
#include "meshccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

  comm->algo_allowed[MC_COLL_ALLREDUCE] = mask;
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
  comm->algo_allowed[MC_COLL_ALLREDUCE] = all;
  if (mc_coll_algo_choose(&op) != ncclSuccess)
    return "?";
  return op.algo->name;
}

int main(int argc, char **argv)
{
  size_t min_bytes = (argc > 1) ? parse_size(argv[1]) : 8;
  size_t max_bytes = (argc > 2) ? parse_size(argv[2]) : (64u << 20);
  int rounds = (argc > 3) ? atoi(argv[3]) : 9;
  uint32_t ring = 1u << MC_ALGO_RING;
  uint32_t tree = 1u << MC_ALGO_TREE;
  uint32_t all;
  ncclComm_t comm = NULL;
  float *buf = NULL;
  double *t_ring = NULL;
  double *t_tree = NULL;
  double *ratio = NULL;
  int rank = 0;
  int n_ranks = 0;
  int rc = 1;

  if ((min_bytes < 4) || (max_bytes < min_bytes) || (rounds < 1) || (rounds > 1000)) {
    fprintf(stderr, "usage: algo_pair [min-bytes >= 4] [max-bytes] [rounds 1-1000]\n");
    return 2;
  }
  if (meshcclCommInitFromEnv(&comm, NULL) != ncclSuccess) {
    fprintf(stderr, "algo_pair: meshcclCommInitFromEnv failed\n");
    return 1;
  }
  ncclCommUserRank(comm, &rank);
  ncclCommCount(comm, &n_ranks);
  buf = calloc(max_bytes / sizeof(float) + 1, sizeof(float));
  t_ring = calloc((size_t)rounds, sizeof(double));
  t_tree = calloc((size_t)rounds, sizeof(double));
  ratio = calloc((size_t)rounds, sizeof(double));
  if ((buf == NULL) || (t_ring == NULL) || (t_tree == NULL) || (ratio == NULL)) {
    fprintf(stderr, "algo_pair: out of memory for %zu bytes\n", max_bytes);
    goto out;
  }
  /* The first call reads NCCL_ALGO and builds the model: keep what it allows. */
  if (ncclAllReduce(buf, buf, 1, ncclFloat32, ncclSum, comm, NULL) != ncclSuccess)
    goto out;
  all = comm->algo_allowed[MC_COLL_ALLREDUCE];
  if (rank == 0) {
    printf("# algo_pair: all_reduce float sum, %d ranks, Ring and Tree interleaved in one "
           "communicator, median of %d rounds (us per call; tree/ring: median of the rounds' "
           "ratios)\n",
           n_ranks, rounds);
    printf("# %10s %10s %10s %9s %6s\n", "size", "ring", "tree", "tree/ring", "model");
  }
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    size_t count = bytes / sizeof(float);
    int k = calls_per_round(bytes);
    double warm;
    const char *choice;
    if ((timed(comm, ring, buf, count, 2, &warm) != ncclSuccess) ||
        (timed(comm, tree, buf, count, 2, &warm) != ncclSuccess))
      goto out;
    for (int r = 0; r < rounds; r++) {
      /* Which goes first alternates: neither always follows the other. */
      uint32_t first = (r % 2) ? tree : ring;
      uint32_t second = (r % 2) ? ring : tree;
      double a;
      double b;
      if ((timed(comm, first, buf, count, k, &a) != ncclSuccess) ||
          (timed(comm, second, buf, count, k, &b) != ncclSuccess))
        goto out;
      t_ring[r] = (first == ring) ? a : b;
      t_tree[r] = (first == ring) ? b : a;
      ratio[r] = t_tree[r] / t_ring[r];
    }
    choice = model_choice(comm, all, count);
    if (rank == 0) {
      printf("  %10zu %10.1f %10.1f %9.3f %6s\n", bytes, median(t_ring, rounds),
             median(t_tree, rounds), median(ratio, rounds), choice);
      fflush(stdout);
    }
  }
  rc = 0;
out:
  if (rc != 0)
    fprintf(stderr, "algo_pair: rank %d: an all-reduce failed\n", rank);
  free(ratio);
  free(t_tree);
  free(t_ring);
  free(buf);
  if (comm != NULL)
    ncclCommDestroy(comm);
  return rc;
}
