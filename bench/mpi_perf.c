/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mpi_perf: the MPI baseline for meshccl-perf. Times MPI_Allreduce,
 * MPI_Allgather, MPI_Reduce_scatter_block and MPI_Bcast on float32 (sum)
 * from 8 B to 256 MiB, out-of-place and in-place (MPI_IN_PLACE), and prints
 * nccl-tests' table with nccl-tests' formulas: the same code as meshccl-perf
 * (tools/perf/ is compiled in), so the two tables line up column for column.
 *
 *   mpirun --allow-run-as-root --oversubscribe -np 4 build/bench/mpi_perf [flags]
 *     -b/--minbytes 8  -e/--maxbytes 256M  -f/--stepfactor 2  -n/--iters 20
 *     -w/--warmup_iters 5  -c/--check 1  -a/--average 1 (0 rank 0, 1 avg, 2 min, 3 max)
 *     -C/--colls all_reduce,all_gather,reduce_scatter,broadcast
 *
 * MPI_Bcast has no out-of-place form: both columns time the same call.
 * The timed calls move through buffers of -e bytes as meshccl-perf's (and
 * nccl-tests') do, each call at the next offset (mc_perf_rotation_shift): a
 * size below the caches is timed on the same memory traffic by both tools.
 * Built by `make bench-mpi` with Debian's Open MPI (mpicc).
 */
#include "perf.h"

#include <getopt.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

struct mpi_coll {
  const char *name;
  const char *mpi_name;
  enum mc_perf_coll coll;
};

static const struct mpi_coll mpi_colls[] = {
    {"all_reduce", "MPI_Allreduce", MC_PERF_ALL_REDUCE},
    {"all_gather", "MPI_Allgather", MC_PERF_ALL_GATHER},
    {"reduce_scatter", "MPI_Reduce_scatter_block", MC_PERF_REDUCE_SCATTER},
    {"broadcast", "MPI_Bcast", MC_PERF_BROADCAST},
};
#define N_MPI_COLLS ((int)(sizeof(mpi_colls) / sizeof(mpi_colls[0])))

struct mpi_bench {
  struct mc_perf_opts o;
  bool selected[N_MPI_COLLS];
  int rank;
  int n_ranks;
  char *send;
  char *recv;
  float *expected;
};

/* One call on the buffers `shift` bytes in (mc_perf_rotation_shift). */
static void run_once(const struct mpi_bench *b, enum mc_perf_coll coll,
                     const struct mc_perf_counts *c, bool in_place, size_t shift)
{
  int n = (int)c->param_count;
  char *send = b->send + shift;
  char *recv = b->recv + shift;

  switch (coll) {
  case MC_PERF_ALL_REDUCE:
    MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    break;
  case MC_PERF_ALL_GATHER:
    if (in_place)
      MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, n, MPI_FLOAT, MPI_COMM_WORLD);
    else
      MPI_Allgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, MPI_COMM_WORLD);
    break;
  case MC_PERF_REDUCE_SCATTER:
    MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : send, recv, n, MPI_FLOAT, MPI_SUM,
                             MPI_COMM_WORLD);
    break;
  default:
    MPI_Bcast(recv, n, MPI_FLOAT, 0, MPI_COMM_WORLD);
    break;
  }
}

/* Inputs where MPI reads them (MPI's in-place layouts), expected result on the host. */
static void init_data(struct mpi_bench *b, enum mc_perf_coll coll, const struct mc_perf_counts *c,
                      bool in_place, int rep)
{
  char *in = in_place ? b->recv : b->send;

  memset(b->recv, 0, c->recv_count > c->send_count ? c->recv_count * 4 : c->send_count * 4);
  if ((coll == MC_PERF_ALL_GATHER) && in_place)
    in = b->recv + c->param_count * 4 * (size_t)b->rank;
  if (coll == MC_PERF_BROADCAST)
    in = b->recv;
  mc_perf_fill_input(ncclFloat, ncclSum, in, c->send_count, 0, b->rank, rep);
  mc_perf_fill_expected(coll, ncclFloat, ncclSum, 0, b->rank, b->n_ranks, c, rep, b->expected);
}

static double time_loop(struct mpi_bench *b, enum mc_perf_coll coll, const struct mc_perf_counts *c,
                        bool in_place)
{
  size_t total = mc_perf_counts_bytes(c, 4);
  double t0;
  double sec;
  MPI_Op op = MPI_SUM;

  MPI_Barrier(MPI_COMM_WORLD);
  t0 = MPI_Wtime();
  for (int i = 0; i < b->o.iters; i++)
    run_once(b, coll, c, in_place, mc_perf_rotation_shift(b->o.max_bytes, total, (size_t)i));
  sec = (MPI_Wtime() - t0) / b->o.iters;
  if (b->o.average == 0)
    MPI_Bcast(&sec, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  else {
    op = (b->o.average == 2) ? MPI_MIN : (b->o.average == 3) ? MPI_MAX : MPI_SUM;
    MPI_Allreduce(MPI_IN_PLACE, &sec, 1, MPI_DOUBLE, op, MPI_COMM_WORLD);
    if (b->o.average == 1)
      sec /= b->n_ranks;
  }
  return sec;
}

/* One half of a row: timing, then the check; returns the wrong elements of all ranks. */
static long long bench_half(struct mpi_bench *b, enum mc_perf_coll coll,
                            const struct mc_perf_counts *c, bool in_place, double *bw_sum)
{
  double sec;
  double algbw;
  double busbw;
  long long wrong = 0;
  char line[128];

  /* Zeros: repeated in-place sums of earlier results would grow without bound. */
  memset(b->recv, 0, mc_perf_counts_bytes(c, 4));
  for (int i = 0; i < b->o.warmup_iters; i++)
    run_once(b, coll, c, in_place, 0);
  sec = time_loop(b, coll, c, in_place);
  mc_perf_bandwidth(coll, c->param_count, 4, b->n_ranks, sec, &algbw, &busbw);
  if (b->o.check > 0) {
    init_data(b, coll, c, in_place, 1);
    run_once(b, coll, c, in_place, 0);
    wrong = mc_perf_count_wrong(ncclFloat, b->recv, b->expected, c->recv_count);
    MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
  }
  mc_perf_fmt_row_result(line, sizeof(line), sec * 1e6, algbw, busbw, b->o.check > 0, wrong);
  if (b->rank == 0)
    printf("%s", line);
  *bw_sum += busbw;
  return wrong;
}

static int run_coll(struct mpi_bench *b, const struct mpi_coll *mc)
{
  double bw_sum = 0;
  int n_cells = 0;
  int n_errors = 0;
  char line[512];
  struct mc_perf_counts c;

  if (b->rank == 0) {
    printf("# Collective test starting: %s_perf (%s, float%s)\n", mc->name, mc->mpi_name,
           mc_perf_coll_has_op(mc->coll) ? " sum" : "");
    mc_perf_fmt_params(line, sizeof(line), &b->o);
    printf("%s\n#\n", line);
    for (int row = 0; row < 3; row++) {
      mc_perf_fmt_header(line, sizeof(line), row, false);
      printf("%s\n", line);
    }
  }
  for (size_t size = b->o.min_bytes; size <= b->o.max_bytes;) {
    size_t next = mc_perf_next_size(&b->o, size);

    mc_perf_coll_counts(mc->coll, size, 4, b->n_ranks, &c);
    mc_perf_fmt_row_start(
        line, sizeof(line), mc_perf_counts_bytes(&c, 4), c.param_count, "float",
        (mc->coll == MC_PERF_ALL_REDUCE) || (mc->coll == MC_PERF_REDUCE_SCATTER) ? "sum" : "none",
        (mc->coll == MC_PERF_BROADCAST) ? 0 : -1);
    if (b->rank == 0)
      printf("%s", line);
    n_errors += (bench_half(b, mc->coll, &c, false, &bw_sum) != 0);
    n_errors += (bench_half(b, mc->coll, &c, true, &bw_sum) != 0);
    n_cells += 2;
    if (b->rank == 0) {
      printf("\n");
      fflush(stdout);
    }
    if (next <= size)
      break;
    size = next;
  }
  if (b->rank == 0) {
    mc_perf_fmt_footer(line, sizeof(line), 0, n_errors, 0);
    printf("%s\n", line);
    mc_perf_fmt_footer(line, sizeof(line), 1, n_errors, bw_sum / n_cells);
    printf("%s\n#\n", line);
  }
  return n_errors;
}

static int parse_colls(struct mpi_bench *b, const char *list)
{
  char copy[256];

  snprintf(copy, sizeof(copy), "%s", list);
  memset(b->selected, 0, sizeof(b->selected));
  for (char *tok = strtok(copy, ","); tok != NULL; tok = strtok(NULL, ",")) {
    bool found = false;
    for (int i = 0; i < N_MPI_COLLS; i++) {
      if ((strcmp(tok, mpi_colls[i].name) == 0) || (strcmp(tok, "all") == 0)) {
        b->selected[i] = true;
        found = true;
      }
    }
    if (!found)
      return -1;
  }
  return 0;
}

static int parse_args(struct mpi_bench *b, int argc, char **argv)
{
  static const struct option longs[] = {
      {"minbytes", required_argument, 0, 'b'},
      {"maxbytes", required_argument, 0, 'e'},
      {"stepfactor", required_argument, 0, 'f'},
      {"iters", required_argument, 0, 'n'},
      {"warmup_iters", required_argument, 0, 'w'},
      {"check", required_argument, 0, 'c'},
      {"average", required_argument, 0, 'a'},
      {"colls", required_argument, 0, 'C'},
      {0, 0, 0, 0},
  };
  int c;

  mc_perf_opts_init(&b->o);
  b->o.min_bytes = 8;
  b->o.max_bytes = 256u << 20;
  b->o.step_factor = 2;
  b->o.warmup_iters = 5;
  for (int i = 0; i < N_MPI_COLLS; i++)
    b->selected[i] = true;
  while ((c = getopt_long(argc, argv, "b:e:f:n:w:c:a:C:", longs, NULL)) != -1) {
    int bad = 0;
    switch (c) {
    case 'b':
      bad = mc_perf_parse_size(optarg, &b->o.min_bytes);
      break;
    case 'e':
      bad = mc_perf_parse_size(optarg, &b->o.max_bytes);
      break;
    case 'f':
      b->o.step_factor = (size_t)atol(optarg);
      break;
    case 'n':
      b->o.iters = atoi(optarg);
      break;
    case 'w':
      b->o.warmup_iters = atoi(optarg);
      break;
    case 'c':
      b->o.check = atoi(optarg);
      break;
    case 'a':
      b->o.average = atoi(optarg);
      break;
    case 'C':
      bad = parse_colls(b, optarg);
      break;
    default:
      bad = -1;
      break;
    }
    if (bad != 0)
      return -1;
  }
  if ((b->o.min_bytes == 0) || (b->o.min_bytes > b->o.max_bytes) || (b->o.step_factor < 2) ||
      (b->o.iters < 1) || (b->o.warmup_iters < 0) || (b->o.average < 0) || (b->o.average > 3))
    return -1;
  return 0;
}

int main(int argc, char **argv)
{
  struct mpi_bench b;
  int n_errors = 0;
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;

  memset(&b, 0, sizeof(b));
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &b.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &b.n_ranks);
  if (parse_args(&b, argc, argv) != 0) {
    if (b.rank == 0)
      fprintf(stderr, "usage: mpirun -np N mpi_perf [-b 8] [-e 256M] [-f 2 (>= 2)] [-n 20] [-w 5] "
                      "[-c 1] [-a 0|1|2|3] [-C all_reduce,all_gather,reduce_scatter,broadcast]\n");
    MPI_Finalize();
    return 2;
  }
  b.send = aligned_alloc(4096, b.o.max_bytes + 4096);
  b.recv = aligned_alloc(4096, b.o.max_bytes + 4096);
  b.expected = aligned_alloc(4096, b.o.max_bytes + 4096);
  if ((b.send == NULL) || (b.recv == NULL) || (b.expected == NULL)) {
    fprintf(stderr, "mpi_perf: rank %d: cannot allocate 3 x %zu bytes\n", b.rank, b.o.max_bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  memset(b.send, 0, b.o.max_bytes);
  memset(b.recv, 0, b.o.max_bytes);
  MPI_Get_library_version(version, &len);
  if (b.rank == 0)
    printf("# mpi_perf: %d ranks, %.*s\n", b.n_ranks, (int)strcspn(version, "\n,"), version);
  for (int i = 0; i < N_MPI_COLLS; i++) {
    if (b.selected[i])
      n_errors += run_coll(&b, &mpi_colls[i]);
  }
  free(b.send);
  free(b.recv);
  free(b.expected);
  MPI_Finalize();
  return (n_errors != 0) ? 1 : 0;
}
