/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-perf: nccl-tests' performance tools in one binary, one rank per
 * process (meshccl-run, mpirun, srun, torchrun):
 *
 *   meshccl-run -n 4 meshccl-perf all_reduce -b 8 -e 128M -f 2
 *
 * Mirrors nccl-tests (src/common.cu, src/<coll>.cu): the same flags and
 * defaults, the same table (size, count, type, redop, root, then time,
 * algbw, busbw and #wrong out-of-place and in-place), the same formulas
 * (algbw = bytes / time; busbw = algbw * 2(n-1)/n, (n-1)/n or 1) and the same
 * footer. Times are averaged over the iterations, then combined across ranks
 * as -a says (default: the average, as nccl-tests) with one small
 * ncclAllReduce of a double. alltoall, alltoallv, sendrecv and hypercube are
 * grouped ncclSend/ncclRecv, as in nccl-tests. Rank 0 prints.
 *
 * NCCL_TESTS_SPLIT / NCCL_TESTS_SPLIT_MASK split the job as nccl-tests does
 * (src/common.cu run()): each rank gets a colour, ncclCommSplit makes one
 * communicator per colour, the collectives run on it, and the timing, error
 * and barrier reductions stay on the whole job (nccl-tests uses
 * MPI_COMM_WORLD for them). Without a launcher environment the tool runs as
 * one rank, as nccl-tests does on one GPU without MPI.
 *
 * The pure logic (flags, counts, formats, data check) is in tools/perf/ and
 * compiled into this file, since the build makes one executable per
 * tools/meshccl_*.c; tests/unit/test_perf_format.c tests it alone.
 */
#include "perf/perf.h"
#include "perf/perf_args.c"
#include "perf/perf_data.c"
#include "perf/perf_format.c"

#include "meshccl.h"
#include "nccl.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUF_ALIGN 4096

struct bench {
  struct mc_perf_opts o;
  ncclComm_t world; /* every rank of the job: timing, errors, barriers */
  ncclComm_t comm;  /* the collectives' communicator: world, or this rank's colour */
  int rank;         /* in comm */
  int n_ranks;
  int world_rank;
  int world_ranks;
  int color;
  double min_bw;   /* NCCL_TESTS_MIN_BW, -1 = not set */
  double mem_init; /* -M: bytes, resident growth over init */
  double mem_user;
  double mem_coll;
  void *send;
  void *recv;
  void *reg[2];        /* -R 1: ncclCommRegister handles of send, recv */
  ncclWindow_t win[2]; /* -R 2: their NCCL_WIN_COLL_SYMMETRIC windows */
  void *expected;
  void *scratch; /* 8 bytes: timing and error reductions, barriers */
  size_t buf_bytes;
  bool print; /* rank 0 */
  bool json;
  struct mc_perf_json js;
  double bw_sum;
  int bw_count;
  int n_errors; /* checked results with wrong elements, this rank */
  int rep;
  int *colors; /* world_ranks colours, for the device lines */
  char timeout_msg[160];
};

static struct bench *the_bench; /* for the -T alarm handler */

static double now_sec(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_alarm(int sig)
{
  ssize_t n;

  (void)sig;
  n = write(STDERR_FILENO, the_bench->timeout_msg, strlen(the_bench->timeout_msg));
  (void)n;
  _exit(MC_PERF_EXIT_FAIL);
}

/* Resident bytes of this process (-M), 0 when /proc is not readable. */
static double resident_bytes(void)
{
  long pages = 0;
  long resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");

  if (f == NULL)
    return 0.0;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
    resident = 0;
  fclose(f);
  return (double)resident * (double)sysconf(_SC_PAGESIZE);
}

/* Rank 0 prints a line to stdout. */
static void out(struct bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out(struct bench *b, const char *fmt, ...)
{
  va_list ap;

  if (!b->print)
    return;
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
}

/* "rank R: " for messages; nothing while the rank is unknown (b->rank < 0). */
static const char *rank_prefix(const struct bench *b, char *buf, size_t bytes)
{
  if (b->rank < 0)
    return "";
  snprintf(buf, bytes, "rank %d: ", b->rank);
  return buf;
}

static ncclResult_t fail_call(struct bench *b, const char *what, ncclResult_t res)
{
  char who[32];

  fprintf(stderr, "meshccl-perf: %s%s failed: %s: %s\n", rank_prefix(b, who, sizeof(who)), what,
          ncclGetErrorString(res), ncclGetLastError(b->comm));
  return res;
}

/* Propagates a failure already reported by the callee. */
#define MC_PERF_TRY(_call)                                                                         \
  do {                                                                                             \
    ncclResult_t perf_try_ = (_call);                                                              \
    if (perf_try_ != ncclSuccess)                                                                  \
      return perf_try_;                                                                            \
  } while (0)

#define PERF_CHECK(_b, _what, _call)                                                               \
  do {                                                                                             \
    ncclResult_t perf_res_ = (_call);                                                              \
    if (perf_res_ != ncclSuccess)                                                                  \
      return fail_call((_b), (_what), perf_res_);                                                  \
  } while (0)

/* One small allreduce of a double: the timing and error reductions, and the barrier. */
static ncclResult_t allreduce_double(struct bench *b, double *value, ncclRedOp_t op)
{
  memcpy(b->scratch, value, sizeof(*value));
  PERF_CHECK(b, "ncclAllReduce (timing)",
             ncclAllReduce(b->scratch, b->scratch, 1, ncclFloat64, op, b->world, NULL));
  memcpy(value, b->scratch, sizeof(*value));
  return ncclSuccess;
}

static ncclResult_t barrier(struct bench *b)
{
  double x = 0;

  return allreduce_double(b, &x, ncclSum);
}

/*
 * nccl-tests' hypercube: an allgather by recursive doubling over 2^k ranks;
 * step `mask` swaps the mask blocks gathered so far with rank ^ mask.
 */
static ncclResult_t hypercube(struct bench *b, const char *sb, char *rb,
                              const struct mc_perf_counts *c, int type)
{
  size_t block = c->param_count * mc_perf_type_size(type);

  if (rb + (size_t)b->rank * block != sb)
    memcpy(rb + (size_t)b->rank * block, sb, block);
  for (int mask = 1; mask < b->n_ranks; mask <<= 1) {
    int first = b->rank & ~(mask - 1);
    int peer = b->rank ^ mask;
    size_t n = c->param_count * (size_t)mask;

    PERF_CHECK(b, "ncclGroupStart", ncclGroupStart());
    PERF_CHECK(b, "ncclSend", ncclSend(rb + (size_t)first * block, n, type, peer, b->comm, NULL));
    PERF_CHECK(b, "ncclRecv",
               ncclRecv(rb + (size_t)(first ^ mask) * block, n, type, peer, b->comm, NULL));
    PERF_CHECK(b, "ncclGroupEnd", ncclGroupEnd());
  }
  return ncclSuccess;
}

static ncclResult_t grouped_p2p(struct bench *b, const char *sb, char *rb,
                                const struct mc_perf_counts *c, int type)
{
  size_t block = c->param_count * mc_perf_type_size(type);

  if ((b->o.coll != MC_PERF_SENDRECV) && (c->param_count == 0))
    return ncclSuccess; /* fewer elements than ranks: nothing to exchange (nccl-tests skips too) */
  if (b->o.coll == MC_PERF_HYPERCUBE)
    return hypercube(b, sb, rb, c, type);
  PERF_CHECK(b, "ncclGroupStart", ncclGroupStart());
  if (b->o.coll == MC_PERF_ALLTOALL) {
    for (int r = 0; r < b->n_ranks; r++) {
      PERF_CHECK(b, "ncclSend", ncclSend(sb + r * block, c->param_count, type, r, b->comm, NULL));
      PERF_CHECK(b, "ncclRecv", ncclRecv(rb + r * block, c->param_count, type, r, b->comm, NULL));
    }
  } else if (b->o.coll == MC_PERF_ALLTOALLV) { /* nccl-tests' alltoallv: per-peer counts */
    for (int r = 0; r < b->n_ranks; r++) {
      size_t to_r = mc_perf_alltoallv_count(c->param_count, b->rank, r, b->n_ranks);
      size_t from_r = mc_perf_alltoallv_count(c->param_count, r, b->rank, b->n_ranks);
      PERF_CHECK(b, "ncclSend", ncclSend(sb + r * block, to_r, type, r, b->comm, NULL));
      PERF_CHECK(b, "ncclRecv", ncclRecv(rb + r * block, from_r, type, r, b->comm, NULL));
    }
  } else {
    int next = (b->rank + 1) % b->n_ranks;
    int prev = (b->rank + b->n_ranks - 1) % b->n_ranks;
    PERF_CHECK(b, "ncclSend", ncclSend(sb, c->param_count, type, next, b->comm, NULL));
    PERF_CHECK(b, "ncclRecv", ncclRecv(rb, c->param_count, type, prev, b->comm, NULL));
  }
  PERF_CHECK(b, "ncclGroupEnd", ncclGroupEnd());
  return ncclSuccess;
}

/* Where the send and receive data of a run are (nccl-tests' in-place offsets). */
static void run_buffers(struct bench *b, const struct mc_perf_counts *c, int type, bool in_place,
                        size_t shift, char **sb, char **rb)
{
  size_t es = mc_perf_type_size(type);
  size_t skew = (size_t)b->o.unalign * es; /* -u */
  char *recv = (char *)b->recv + skew + shift;

  *sb = in_place ? recv + c->send_inplace * es * (size_t)b->rank : (char *)b->send + skew + shift;
  *rb = in_place ? recv + c->recv_inplace * es * (size_t)b->rank : recv;
}

static ncclResult_t run_coll(struct bench *b, const struct mc_perf_counts *c, int type, int op_idx,
                             int root, bool in_place, size_t shift)
{
  ncclRedOp_t op = (op_idx == MC_PERF_MULSUM) ? ncclSum : (ncclRedOp_t)op_idx;
  size_t n = c->param_count;
  char *sb;
  char *rb;
  ncclResult_t res = ncclSuccess;

  run_buffers(b, c, type, in_place, shift, &sb, &rb);
  if (mc_perf_coll_has_op(b->o.coll) && (op_idx == MC_PERF_MULSUM)) {
    uint64_t scalar = 0;
    mc_perf_store(type, &scalar, 0, mc_perf_premul_scalar(b->rank));
    PERF_CHECK(b, "ncclRedOpCreatePreMulSum",
               ncclRedOpCreatePreMulSum(&op, &scalar, type, ncclScalarHostImmediate, b->comm));
  }
  switch (b->o.coll) {
  case MC_PERF_ALL_REDUCE:
    res = ncclAllReduce(sb, rb, n, type, op, b->comm, NULL);
    break;
  case MC_PERF_ALL_GATHER:
    res = ncclAllGather(sb, rb, n, type, b->comm, NULL);
    break;
  case MC_PERF_REDUCE_SCATTER:
    res = ncclReduceScatter(sb, rb, n, type, op, b->comm, NULL);
    break;
  case MC_PERF_BROADCAST:
    res = ncclBroadcast(sb, rb, n, type, root, b->comm, NULL);
    break;
  case MC_PERF_REDUCE:
    res = ncclReduce(sb, rb, n, type, op, root, b->comm, NULL);
    break;
  case MC_PERF_GATHER: /* nothing to move when a rank's block is empty (nccl-tests skips too) */
    res = (n == 0) ? ncclSuccess : ncclGather(sb, rb, n, type, root, b->comm, NULL);
    break;
  case MC_PERF_SCATTER:
    res = (n == 0) ? ncclSuccess : ncclScatter(sb, rb, n, type, root, b->comm, NULL);
    break;
  default:
    return grouped_p2p(b, sb, rb, c, type);
  }
  if (res != ncclSuccess)
    return fail_call(b, mc_perf_coll_name(b->o.coll), res);
  if (mc_perf_coll_has_op(b->o.coll) && (op_idx == MC_PERF_MULSUM))
    PERF_CHECK(b, "ncclRedOpDestroy", ncclRedOpDestroy(op, b->comm));
  return ncclSuccess;
}

/* In-place grouped send/recv on one buffer has no defined result: not checked (as nccl-tests). */
static bool is_checked(const struct bench *b, bool in_place)
{
  return (b->o.check > 0) &&
         !(in_place && ((b->o.coll == MC_PERF_ALLTOALL) || (b->o.coll == MC_PERF_ALLTOALLV) ||
                        (b->o.coll == MC_PERF_SENDRECV)));
}

/* Inputs where the send data is, a zeroed receive buffer, the expected result on the host. */
static void init_data(struct bench *b, const struct mc_perf_counts *c, int type, int op, int root,
                      bool in_place, int rep)
{
  size_t es = mc_perf_type_size(type);
  size_t extent = mc_perf_counts_bytes(c, es);
  char *sb;
  char *rb;

  run_buffers(b, c, type, in_place, 0, &sb, &rb);
  extent += (size_t)b->o.unalign * es;
  memset(b->recv, 0, (extent > b->buf_bytes) ? b->buf_bytes : extent);
  mc_perf_fill_input(type, op, sb, c->send_count, 0, b->rank, rep);
  mc_perf_fill_expected(b->o.coll, type, op, root, b->rank, b->n_ranks, c, rep, b->expected);
}

static int64_t check_data(struct bench *b, const struct mc_perf_counts *c, int type, int root,
                          bool in_place)
{
  char *sb;
  char *rb;

  if (((b->o.coll == MC_PERF_REDUCE) || (b->o.coll == MC_PERF_GATHER)) && (b->rank != root))
    return 0; /* only the root receives */
  run_buffers(b, c, type, in_place, 0, &sb, &rb);
  return mc_perf_count_wrong(type, rb, b->expected, c->recv_count);
}

/* Seconds per collective, combined across ranks as -a says. */
static ncclResult_t timed_loop(struct bench *b, const struct mc_perf_counts *c, int type, int op,
                               int root, bool in_place, double *sec_out)
{
  size_t es = mc_perf_type_size(type);
  size_t total = mc_perf_counts_bytes(c, es);
  int n_calls = b->o.iters * b->o.agg_iters;
  double t0;
  double cpu;
  double sec;

  MC_PERF_TRY(barrier(b));
  t0 = now_sec();
  for (int it = 0; it < b->o.iters; it++) {
    if (b->o.agg_iters > 1)
      PERF_CHECK(b, "ncclGroupStart", ncclGroupStart());
    for (int a = 0; a < b->o.agg_iters; a++) {
      size_t shift = mc_perf_rotation_shift(b->o.max_bytes, total, (size_t)it * b->o.agg_iters + a);
      MC_PERF_TRY(run_coll(b, c, type, op, root, in_place, shift));
    }
    if (b->o.agg_iters > 1)
      PERF_CHECK(b, "ncclGroupEnd", ncclGroupEnd());
    if (b->o.blocking)
      MC_PERF_TRY(barrier(b));
  }
  /* Host collectives complete when their call (or group) returns: issue == completion. */
  cpu = (now_sec() - t0) / n_calls;
  sec = (now_sec() - t0) / n_calls;
  if (b->o.report_cputime)
    sec = cpu;
  switch (b->o.average) {
  case 0: /* rank 0's */
    sec = (b->world_rank == 0) ? sec : 0.0;
    MC_PERF_TRY(allreduce_double(b, &sec, ncclSum));
    break;
  case 2:
    MC_PERF_TRY(allreduce_double(b, &sec, ncclMin));
    break;
  case 3:
    MC_PERF_TRY(allreduce_double(b, &sec, ncclMax));
    break;
  default:
    MC_PERF_TRY(allreduce_double(b, &sec, ncclSum));
    sec /= b->world_ranks; /* every rank of the job, as nccl-tests' totalProcs */
    break;
  }
  *sec_out = sec;
  return ncclSuccess;
}

/* One half of a table row (nccl-tests' BenchTime): time, bandwidths, checked runs. */
static ncclResult_t bench_time(struct bench *b, const struct mc_perf_counts *c, int type, int op,
                               int root, bool in_place)
{
  bool checked = is_checked(b, in_place);
  double sec = 0;
  double algbw;
  double busbw;
  double wrong_all = 0;
  int64_t wrong = 0;
  char line[128];

  if (checked) /* the timed runs then work on valid data too */
    init_data(b, c, type, op, root, in_place, 99);
  MC_PERF_TRY(run_coll(b, c, type, op, root, in_place, 0));
  MC_PERF_TRY(timed_loop(b, c, type, op, root, in_place, &sec));
  mc_perf_bandwidth(b->o.coll, c->param_count, mc_perf_type_size(type), b->n_ranks, sec, &algbw,
                    &busbw);
  for (int i = 0; checked && (i < b->o.check); i++) {
    init_data(b, c, type, op, root, in_place, ++b->rep);
    MC_PERF_TRY(barrier(b));
    MC_PERF_TRY(run_coll(b, c, type, op, root, in_place, 0));
    wrong = check_data(b, c, type, root, in_place);
    wrong_all = (double)wrong;
    MC_PERF_TRY(allreduce_double(b, &wrong_all, ncclSum));
    if (wrong != 0)
      b->n_errors++;
    if (wrong_all != 0)
      break;
  }
  mc_perf_fmt_row_result(line, sizeof(line), sec * 1e6, algbw, busbw, checked, (int64_t)wrong_all);
  out(b, "%s", line);
  if (in_place && b->o.report_timestamps) { /* -S: when the row ended (nccl-tests) */
    mc_perf_fmt_timestamp(line, sizeof(line), (long long)time(NULL));
    out(b, "%s", line);
  }
  if (b->json)
    mc_perf_json_row_result(&b->js, in_place, b->o.report_cputime, sec * 1e6, algbw, busbw, checked,
                            (int64_t)wrong_all);
  b->bw_sum += busbw;
  b->bw_count++;
  return ncclSuccess;
}

/* Warm-up at every power-of-two size, then the sweep (nccl-tests' TimeTest). */
static ncclResult_t time_test(struct bench *b, int type, int op, int root)
{
  struct mc_perf_counts c;
  size_t es = mc_perf_type_size(type);
  /* nccl-tests' hypercube.cu leaves the redop column empty; the others say "none". */
  const char *op_name = mc_perf_coll_has_op(b->o.coll)     ? mc_perf_op_name(op)
                        : (b->o.coll == MC_PERF_HYPERCUBE) ? ""
                                                           : "none";
  int print_root = mc_perf_coll_has_root(b->o.coll) ? root : -1;
  char line[128];

  MC_PERF_TRY(barrier(b));
  for (size_t size = b->o.min_bytes; size <= b->o.max_bytes; size = (size > 0) ? size * 2 : 1) {
    mc_perf_coll_counts(b->o.coll, size, es, b->n_ranks, &c);
    for (int i = 0; i < b->o.warmup_iters; i++)
      MC_PERF_TRY(run_coll(b, &c, type, op, root, false, 0));
  }
  for (int cycle = 0; (b->o.run_cycles == 0) || (cycle < b->o.run_cycles); cycle++) {
    for (size_t size = b->o.min_bytes; size <= b->o.max_bytes;) {
      size_t next = mc_perf_next_size(&b->o, size);

      if (b->o.timeout > 0)
        alarm((unsigned)b->o.timeout);
      mc_perf_coll_counts(b->o.coll, size, es, b->n_ranks, &c);
      mc_perf_fmt_row_start(line, sizeof(line), mc_perf_counts_bytes(&c, es), c.param_count,
                            mc_perf_type_name(type), op_name, print_root);
      out(b, "%s", line);
      if (b->json)
        mc_perf_json_row_start(&b->js, mc_perf_counts_bytes(&c, es), c.param_count,
                               mc_perf_type_name(type), op_name, print_root);
      MC_PERF_TRY(bench_time(b, &c, type, op, root, false));
      MC_PERF_TRY(bench_time(b, &c, type, op, root, true));
      out(b, "\n");
      if (b->print)
        fflush(stdout);
      if (b->json)
        mc_perf_json_row_end(&b->js, b->o.iters, "");
      if (next <= size)
        break;
      size = next;
    }
  }
  alarm(0);
  return ncclSuccess;
}

/* Every type, op and root the flags ask for. */
static ncclResult_t run_all(struct bench *b)
{
  int t_first = (b->o.datatype == MC_PERF_ALL) ? 0 : b->o.datatype;
  int t_last = (b->o.datatype == MC_PERF_ALL) ? ncclNumTypes - 1 : b->o.datatype;
  bool has_op = mc_perf_coll_has_op(b->o.coll);
  int o_first = !has_op ? ncclSum : (b->o.op == MC_PERF_ALL) ? 0 : b->o.op;
  int o_last = !has_op ? ncclSum : (b->o.op == MC_PERF_ALL) ? MC_PERF_N_OPS - 1 : b->o.op;
  bool all_roots = mc_perf_coll_has_root(b->o.coll) && (b->o.root == -1);
  int r_first = all_roots ? 0 : (b->o.root < 0 ? 0 : b->o.root);
  int r_last = all_roots ? b->n_ranks - 1 : r_first;

  if ((b->o.coll == MC_PERF_HYPERCUBE) && ((b->n_ranks & (b->n_ranks - 1)) != 0)) {
    out(b, "nRanks %d is not a power of 2, skipping\n", b->n_ranks); /* as nccl-tests */
    return ncclSuccess;
  }
  for (int t = t_first; t <= t_last; t++) {
    for (int op = o_first; op <= o_last; op++) {
      for (int r = r_first; r <= r_last; r++)
        MC_PERF_TRY(time_test(b, t, op, r));
    }
  }
  return ncclSuccess;
}

/*
 * Whether every rank can run the same sequence of tests: the timing and error reductions span
 * the job, so with NCCL_TESTS_SPLIT groups of different sizes must not run a different number
 * of tests (-r -1 loops over a group's ranks; hypercube skips groups of 3, 5, ... ranks), and
 * -r must be a rank of every group. Returns MC_PERF_EXIT_OK or MC_PERF_EXIT_USAGE (said once).
 */
static int check_groups(struct bench *b)
{
  double smallest = b->n_ranks;
  double largest = b->n_ranks;
  bool rooted = mc_perf_coll_has_root(b->o.coll);

  if ((allreduce_double(b, &smallest, ncclMin) != ncclSuccess) ||
      (allreduce_double(b, &largest, ncclMax) != ncclSuccess))
    return MC_PERF_EXIT_FAIL;
  if (rooted && (b->o.root >= (int)smallest)) {
    if (b->print)
      fprintf(stderr,
              "meshccl-perf: -r/--root %d is not a rank of %s %d-rank communicator (0..%d, or "
              "-1 for every rank in turn)\n",
              b->o.root, (smallest != largest) ? "the smallest NCCL_TESTS_SPLIT group's" : "this",
              (int)smallest, (int)smallest - 1);
    return MC_PERF_EXIT_USAGE;
  }
  if ((smallest != largest) &&
      ((rooted && (b->o.root == -1)) || (b->o.coll == MC_PERF_HYPERCUBE))) {
    if (b->print)
      fprintf(stderr,
              "meshccl-perf: NCCL_TESTS_SPLIT made groups of %d to %d ranks: %s would run a "
              "different number of tests in each; give groups of one size\n",
              (int)smallest, (int)largest, rooted ? "-r -1" : "hypercube");
    return MC_PERF_EXIT_USAGE;
  }
  return MC_PERF_EXIT_OK;
}

/* nccl-tests never overwrites a JSON report: path, else path.0, path.1, ... */
static FILE *open_json(const char *path, char *used, size_t used_len)
{
  snprintf(used, used_len, "%s", path);
  for (int i = 0; i < 1000; i++) {
    int fd = open(used, O_WRONLY | O_CREAT | O_EXCL, 0644);

    if (fd >= 0)
      return fdopen(fd, "w");
    if (errno != EEXIST)
      return NULL;
    snprintf(used, used_len, "%s.%d", path, i);
  }
  return NULL;
}

/*
 * -J: rank 0 opens the report before anything is printed, as nccl-tests' main() does
 * (jsonOutputInit), so "# Writing JSON output to ..." is the first line. Only *.json is
 * written; nccl-tests silently writes nothing for other names, we say so on stderr.
 */
static void report_open(struct bench *b, int argc, char **argv, int version)
{
  extern char **environ;
  const char *ext = strrchr(b->o.output_file, '.');
  const char *slash = strrchr(b->o.output_file, '/');
  char used[1024];
  FILE *f;

  if ((ext == NULL) || ((slash != NULL) && (ext < slash)) || (strcasecmp(ext, ".json") != 0)) {
    fprintf(stderr,
            "meshccl-perf: -J/--output_file %s ignored: only a name ending in .json is written "
            "(nccl-tests writes nothing for other names)\n",
            b->o.output_file);
    return;
  }
  f = open_json(b->o.output_file, used, sizeof(used));
  if (f == NULL) {
    out(b, "# skipping json output; %s not accessible\n", b->o.output_file);
    return;
  }
  out(b, "# Writing JSON output to %s\n", used);
  b->json = true;
  mc_perf_json_begin(&b->js, f, (long long)time(NULL), argc, argv, environ, version);
}

/* nccl-tests' writeDeviceReport and writeResultHeader (src/util.cu), lines and JSON. */
static void print_header(struct bench *b, int argc, char **argv)
{
  char line[512];
  int version = 0;

  ncclGetVersion(&version);
  if ((b->o.output_file != NULL) && b->print)
    report_open(b, argc, argv, version);
  mc_perf_fmt_version(line, sizeof(line), NCCL_VERSION_CODE, version);
  out(b, "%s\n", line);
  out(b, "# Collective test starting: %s_perf\n", mc_perf_coll_name(b->o.coll));
  mc_perf_fmt_params(line, sizeof(line), &b->o);
  out(b, "%s\n", line);
  if (b->o.blocking)
    out(b, "# Blocking Enabled: wait for completion and barrier after each collective \n");
  if (b->json)
    mc_perf_json_config(&b->js, &b->o);
  if (b->o.cudagraph != 0)
    out(b, "# -G/--cudagraph %d ignored: host-memory collectives have no CUDA graphs\n",
        b->o.cudagraph);
  if (b->o.local_register == 1)
    out(b, "# -R/--local_register 1: buffers from ncclMemAlloc, registered (ncclCommRegister; "
           "nothing to pin on host memory: the collectives run as without)\n");
  else if (b->o.local_register == 2)
    out(b, "# -R/--local_register 2: buffers from ncclMemAlloc in NCCL_WIN_COLL_SYMMETRIC "
           "windows (all-reduce, all-gather, reduce-scatter on one host read their peers' buffers: "
           "Symmetric)\n");
  if (b->o.cta_policy >= 0)
    out(b, "# -x/--cta_policy %d ignored: host-memory collectives run no CTAs\n", b->o.cta_policy);
  if (b->o.device_impl != 0)
    out(b,
        "# -D/--device_implementation %d ignored: no device kernels on host memory; NCCL's "
        "implementation runs (as -D 0)\n",
        b->o.device_impl);
  if (b->o.device_cta_count != 16)
    out(b, "# -V/--device_cta_count %d ignored: host-memory collectives run no CTAs\n",
        b->o.device_cta_count);
  out(b, "#\n# Using devices\n");
  for (int r = 0; b->print && (r < b->world_ranks); r++) {
    meshcclCommInfo_t p;
    if (meshcclCommGetPeerInfo(b->world, r, &p) != ncclSuccess)
      continue;
    mc_perf_fmt_device(line, sizeof(line), r, b->colors[r], p.pid, p.host, p.device,
                       "meshccl host memory");
    out(b, "%s\n", line);
    /* nccl-tests' JSON has the device line's fields: "[host]" is the bus id's place. */
    if (b->json)
      mc_perf_json_device(&b->js, r, b->colors[r], p.pid, p.host, p.device, "host",
                          "meshccl host memory");
  }
  if (b->json) {
    mc_perf_json_config_end(&b->js);
    mc_perf_json_results(&b->js);
  }
  out(b, "#\n");
  for (int row = 0; row < 3; row++) {
    mc_perf_fmt_header_ts(line, sizeof(line), row, b->o.report_cputime, b->o.report_timestamps);
    out(b, "%s\n", line);
  }
  if (b->print)
    fflush(stdout);
}

/* Whether a launcher set anything; with none the tool runs as one rank, as nccl-tests runs
 * on one GPU without MPI. The tool reads these itself because meshcclGetEnvInfo only says
 * that something is missing. */
static bool has_launcher_env(void)
{
  return (getenv("RANK") != NULL) || (getenv("WORLD_SIZE") != NULL) ||
         (getenv("OMPI_COMM_WORLD_RANK") != NULL) || (getenv("SLURM_PROCID") != NULL);
}

static ncclResult_t init_world(struct bench *b)
{
  meshcclEnvInfo_t env;
  ncclUniqueId id;

  if (!has_launcher_env()) {
    b->rank = 0;
    PERF_CHECK(b, "ncclGetUniqueId", ncclGetUniqueId(&id));
    PERF_CHECK(b, "ncclCommInitRank (one rank, no launcher)",
               ncclCommInitRank(&b->world, 1, id, 0));
    return ncclSuccess;
  }
  /* The launcher's rank names this process in an init failure: the
   * communicator, which would say it, does not exist then. */
  b->rank = (meshcclGetEnvInfo(&env) == ncclSuccess) ? env.rank : -1;
  PERF_CHECK(b, "meshcclCommInitFromEnv", meshcclCommInitFromEnv(&b->world, NULL));
  return ncclSuccess;
}

/* nccl-tests' NCCL_TESTS_SPLIT: one communicator per colour, ranks in world order. */
static ncclResult_t split_world(struct bench *b, const char *split, const char *mask)
{
  char err[MC_PERF_ERR_LEN];

  if (mc_perf_split_color(split, mask, b->world_rank, &b->color, err, sizeof(err)) != 0) {
    fprintf(stderr, "%s\n", err); /* main checked the grammar: a colour overflow */
    return ncclInvalidUsage;
  }
  b->colors = calloc((size_t)b->world_ranks, sizeof(*b->colors));
  if (b->colors == NULL) {
    fprintf(stderr, "meshccl-perf: rank %d: out of memory\n", b->world_rank);
    return ncclSystemError;
  }
  b->colors[b->world_rank] = b->color;
  PERF_CHECK(b, "ncclAllGather (split colours)",
             ncclAllGather(b->colors + b->world_rank, b->colors, 1, ncclInt32, b->world, NULL));
  if ((split == NULL) && (mask == NULL)) {
    b->comm = b->world;
    return ncclSuccess;
  }
  PERF_CHECK(b, "ncclCommSplit (NCCL_TESTS_SPLIT)",
             ncclCommSplit(b->world, b->color, b->world_rank, &b->comm, NULL));
  return ncclSuccess;
}

/* The send and receive buffers: aligned host memory, or with -R 1 / -R 2
 * (nccl-tests' local and symmetric registration) ncclMemAlloc memory
 * registered with the collectives' communicator: ncclCommRegister handles,
 * or NCCL_WIN_COLL_SYMMETRIC windows. NULL buffers: out of memory. */
static ncclResult_t buffers_alloc(struct bench *b)
{
  void **bufs[2] = {&b->send, &b->recv};

  if (b->o.local_register == 0) {
    for (int i = 0; i < 2; i++)
      if (posix_memalign(bufs[i], BUF_ALIGN, b->buf_bytes) != 0)
        *bufs[i] = NULL;
    return ncclSuccess;
  }
  for (int i = 0; i < 2; i++) {
    PERF_CHECK(b, "ncclMemAlloc", ncclMemAlloc(bufs[i], b->buf_bytes));
    if (b->o.local_register == 1)
      PERF_CHECK(b, "ncclCommRegister",
                 ncclCommRegister(b->comm, *bufs[i], b->buf_bytes, &b->reg[i]));
    else
      PERF_CHECK(b, "ncclCommWindowRegister",
                 ncclCommWindowRegister(b->comm, *bufs[i], b->buf_bytes, &b->win[i],
                                        NCCL_WIN_COLL_SYMMETRIC));
  }
  return ncclSuccess;
}

static void buffers_free(struct bench *b)
{
  void **bufs[2] = {&b->send, &b->recv};

  for (int i = 0; i < 2; i++) {
    if (b->o.local_register == 0) {
      free(*bufs[i]);
    } else {
      /* Errors ignored: the communicator frees what is left registered. */
      if (b->reg[i] != NULL)
        (void)ncclCommDeregister(b->comm, b->reg[i]);
      if (b->win[i] != NULL)
        (void)ncclCommWindowDeregister(b->comm, b->win[i]);
      if (*bufs[i] != NULL)
        (void)ncclMemFree(*bufs[i]);
    }
    b->reg[i] = NULL;
    b->win[i] = NULL;
    *bufs[i] = NULL;
  }
}

static ncclResult_t bench_setup(struct bench *b, const char *split, const char *mask)
{
  int device = 0;
  double rss0 = resident_bytes();

  MC_PERF_TRY(init_world(b));
  PERF_CHECK(b, "ncclCommUserRank", ncclCommUserRank(b->world, &b->world_rank));
  PERF_CHECK(b, "ncclCommCount", ncclCommCount(b->world, &b->world_ranks));
  b->rank = b->world_rank;
  MC_PERF_TRY(split_world(b, split, mask));
  PERF_CHECK(b, "ncclCommUserRank", ncclCommUserRank(b->comm, &b->rank));
  PERF_CHECK(b, "ncclCommCount", ncclCommCount(b->comm, &b->n_ranks));
  PERF_CHECK(b, "ncclCommCuDevice", ncclCommCuDevice(b->comm, &device));
  b->mem_init = resident_bytes() - rss0;
  b->print = (b->world_rank == 0);
  snprintf(b->timeout_msg, sizeof(b->timeout_msg),
           "meshccl-perf: rank %d: test timeout (%ds): one size took longer than -T\n",
           b->world_rank, b->o.timeout);
  /* nccl-tests' buffers: maxBytes each for send and receive, expected as large; the extra
   * page holds -u's skew (at most 511 elements of 8 bytes). */
  b->buf_bytes = b->o.max_bytes + BUF_ALIGN;
  MC_PERF_TRY(buffers_alloc(b));
  if ((b->send == NULL) || (b->recv == NULL) ||
      (posix_memalign(&b->expected, BUF_ALIGN, b->buf_bytes) != 0) ||
      (posix_memalign(&b->scratch, BUF_ALIGN, sizeof(double)) != 0)) {
    fprintf(stderr, "meshccl-perf: rank %d: cannot allocate 3 x %zu bytes; lower -e/--maxbytes\n",
            b->world_rank, b->buf_bytes);
    return ncclSystemError;
  }
  b->mem_user = 3.0 * (double)b->buf_bytes;
  memset(b->send, 0, b->buf_bytes); /* fault the pages in before timing */
  memset(b->recv, 0, b->buf_bytes);
  return ncclSuccess;
}

/* After a failure the communicator is aborted (NCCL's advice: a destroy
 * may wait for peers that are gone); either call failing is reported. */
static void bench_cleanup(struct bench *b, bool failed)
{
  ncclResult_t res;

  buffers_free(b);
  free(b->expected);
  free(b->scratch);
  free(b->colors);
  b->colors = NULL;
  if ((b->comm != NULL) && (b->comm != b->world)) {
    res = failed ? ncclCommAbort(b->comm) : ncclCommDestroy(b->comm);
    if (res != ncclSuccess)
      (void)fail_call(b, failed ? "ncclCommAbort" : "ncclCommDestroy", res);
  }
  b->comm = NULL;
  if (b->world == NULL)
    return;
  res = failed ? ncclCommAbort(b->world) : ncclCommDestroy(b->world);
  if (res != ncclSuccess)
    (void)fail_call(b, failed ? "ncclCommAbort" : "ncclCommDestroy", res);
  b->world = NULL;
}

/*
 * Finishes the JSON report (end_time when it is complete; a failed run's report is closed as
 * nccl-tests' jsonOutputFinalize closes it) and closes the file; false (reported) when it could
 * not be written whole.
 */
static bool json_close(struct bench *b)
{
  bool ok;

  mc_perf_json_finish(&b->js, (long long)time(NULL));
  ok = (ferror(b->js.f) == 0);

  ok = (fclose(b->js.f) == 0) && ok;
  b->json = false;
  if (!ok)
    fprintf(stderr, "meshccl-perf: rank %d: writing the JSON report %s failed: %s\n", b->rank,
            b->o.output_file, strerror(errno));
  return ok;
}

static int finish(struct bench *b)
{
  double errors = b->n_errors;
  double avg = (b->bw_count > 0) ? b->bw_sum / b->bw_count : 0.0;
  char line[256];
  double mem_init = b->mem_init;
  double mem_user = b->mem_user;
  double mem_coll = b->mem_coll;
  bool bw_failed = mc_perf_bw_failed(avg, b->min_bw);
  const char *last_error;

  if ((allreduce_double(b, &errors, ncclSum) != ncclSuccess) ||
      (allreduce_double(b, &mem_init, ncclMax) != ncclSuccess) ||
      (allreduce_double(b, &mem_user, ncclMax) != ncclSuccess) ||
      (allreduce_double(b, &mem_coll, ncclMax) != ncclSuccess))
    return MC_PERF_EXIT_FAIL;
  mc_perf_fmt_footer(line, sizeof(line), 0, (int)errors, avg);
  out(b, "%s\n", line);
  mc_perf_fmt_bw_footer(line, sizeof(line), avg, b->min_bw);
  out(b, "%s\n#\n# Collective test concluded: %s_perf\n", line, mc_perf_coll_name(b->o.coll));
  if (b->o.memory_report) {
    mc_perf_fmt_memory(line, sizeof(line), mem_init, mem_user, mem_coll);
    out(b, "%s\n", line);
  }
  /* nccl-tests ends with "#" and the last error, an empty line when there is none. */
  last_error = ncclGetLastError(NULL);
  if ((last_error != NULL) && (last_error[0] != '\0'))
    out(b, "#\n# error: %s\n", last_error);
  else
    out(b, "#\n\n");
  if (bw_failed && b->print)
    fprintf(stderr,
            "meshccl-perf: average bus bandwidth %g GB/s is below 90%% of NCCL_TESTS_MIN_BW=%g\n",
            avg, b->min_bw);
  if (b->json) {
    mc_perf_json_footer(&b->js, (int)errors, avg, b->min_bw);
    mc_perf_json_errors(&b->js, last_error);
    if (!json_close(b))
      return MC_PERF_EXIT_FAIL;
  }
  return ((errors != 0) || bw_failed) ? MC_PERF_EXIT_FAIL : MC_PERF_EXIT_OK;
}

int main(int argc, char **argv)
{
  static struct bench b;
  char err[MC_PERF_ERR_LEN];
  const char *split;
  const char *mask;
  int color = 0;
  int rc;
  double rss0;

  setlinebuf(stdout);
  rc = mc_perf_args_parse(argc, argv, &b.o, err, sizeof(err));
  if (rc != MC_PERF_EXIT_OK) {
    fprintf(stderr, "%s\n", err);
    return rc;
  }
  if (b.o.help) {
    mc_perf_usage(stdout);
    return MC_PERF_EXIT_OK;
  }
  /* The environment is checked before init, so that a bad value stops every rank alike. */
  split = getenv("NCCL_TESTS_SPLIT");
  mask = getenv("NCCL_TESTS_SPLIT_MASK");
  if ((mc_perf_split_color(split, mask, 0, &color, err, sizeof(err)) != 0) ||
      (mc_perf_parse_min_bw(getenv("NCCL_TESTS_MIN_BW"), &b.min_bw, err, sizeof(err)) != 0)) {
    fprintf(stderr, "%s\n", err);
    return MC_PERF_EXIT_USAGE;
  }
  the_bench = &b;
  signal(SIGALRM, on_alarm);
  if (bench_setup(&b, split, mask) != ncclSuccess) {
    bench_cleanup(&b, true);
    return MC_PERF_EXIT_FAIL;
  }
  rc = check_groups(&b);
  if (rc != MC_PERF_EXIT_OK) {
    bench_cleanup(&b, rc == MC_PERF_EXIT_FAIL);
    return rc;
  }
  print_header(&b, argc, argv);
  rss0 = resident_bytes();
  rc = (run_all(&b) == ncclSuccess) ? MC_PERF_EXIT_OK : MC_PERF_EXIT_FAIL;
  b.mem_coll = resident_bytes() - rss0;
  if (rc == MC_PERF_EXIT_OK)
    rc = finish(&b);
  if (b.json) /* a run that failed: what was written is closed, without end_time */
    (void)json_close(&b);
  bench_cleanup(&b, rc == MC_PERF_EXIT_FAIL);
  return rc;
}
