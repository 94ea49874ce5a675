/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-perf's command line and sweep arithmetic: nccl-tests' flags (short
 * and long forms) and defaults (src/common.cu), type and op names, the size
 * sweep, each collective's element counts (src/<coll>.cu getCollByteCount)
 * and bus-bandwidth factors (getBw). Unlike nccl-tests, a bad value is an
 * error (exit 2) instead of a silent default.
 */
#include "perf.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PROG "meshccl-perf"

static const char *const coll_names[MC_PERF_N_COLLS] = {
    [MC_PERF_ALL_REDUCE] = "all_reduce",
    [MC_PERF_ALL_GATHER] = "all_gather",
    [MC_PERF_REDUCE_SCATTER] = "reduce_scatter",
    [MC_PERF_BROADCAST] = "broadcast",
    [MC_PERF_REDUCE] = "reduce",
    [MC_PERF_ALLTOALL] = "alltoall",
    [MC_PERF_SENDRECV] = "sendrecv",
    [MC_PERF_GATHER] = "gather",
    [MC_PERF_SCATTER] = "scatter",
    [MC_PERF_ALLTOALLV] = "alltoallv",
    [MC_PERF_HYPERCUBE] = "hypercube",
};

#define COLL_LIST                                                                                  \
  "all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv gather scatter "        \
  "alltoallv hypercube"

/* nccl-tests' type names, in ncclDataType_t order. */
static const char *const type_names[ncclNumTypes] = {
    "int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
    "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2",
};
static const size_t type_sizes[ncclNumTypes] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

static const char *const op_names[MC_PERF_N_OPS] = {"sum", "prod", "max", "min", "avg", "mulsum"};

const char *mc_perf_coll_name(enum mc_perf_coll coll)
{
  return ((int)coll >= 0 && coll < MC_PERF_N_COLLS) ? coll_names[coll] : "?";
}

bool mc_perf_coll_has_op(enum mc_perf_coll coll)
{
  return (coll == MC_PERF_ALL_REDUCE) || (coll == MC_PERF_REDUCE_SCATTER) ||
         (coll == MC_PERF_REDUCE);
}

bool mc_perf_coll_has_root(enum mc_perf_coll coll)
{
  return (coll == MC_PERF_BROADCAST) || (coll == MC_PERF_REDUCE) || (coll == MC_PERF_GATHER) ||
         (coll == MC_PERF_SCATTER);
}

const char *mc_perf_type_name(int datatype)
{
  return ((datatype >= 0) && (datatype < ncclNumTypes)) ? type_names[datatype] : NULL;
}

size_t mc_perf_type_size(int datatype)
{
  return ((datatype >= 0) && (datatype < ncclNumTypes)) ? type_sizes[datatype] : 0;
}

const char *mc_perf_op_name(int op)
{
  return ((op >= 0) && (op < MC_PERF_N_OPS)) ? op_names[op] : NULL;
}

int mc_perf_parse_size(const char *text, size_t *bytes_out)
{
  char *end = NULL;
  double value;
  double unit = 1.0;

  if ((text == NULL) || (*text == '\0') || (*text == '-') || (*text == '+'))
    return -1;
  errno = 0;
  value = strtod(text, &end);
  if ((end == text) || (errno != 0) || !(value >= 0.0))
    return -1;
  switch (*end) {
  case 'K':
  case 'k':
    unit = 1024.0;
    end++;
    break;
  case 'M':
  case 'm':
    unit = 1024.0 * 1024.0;
    end++;
    break;
  case 'G':
  case 'g':
    unit = 1024.0 * 1024.0 * 1024.0;
    end++;
    break;
  default:
    break;
  }
  if ((*end == 'B') || (*end == 'b'))
    end++;
  if ((*end != '\0') || (value * unit >= 18446744073709551615.0))
    return -1;
  *bytes_out = (size_t)(value * unit);
  return 0;
}

void mc_perf_opts_init(struct mc_perf_opts *opts)
{
  memset(opts, 0, sizeof(*opts));
  opts->coll = MC_PERF_ALL_REDUCE;
  opts->min_bytes = 32u << 20;
  opts->max_bytes = 32u << 20;
  opts->step_bytes = 1u << 20;
  opts->step_factor = 1;
  opts->iters = 20;
  opts->warmup_iters = 1;
  opts->agg_iters = 1;
  opts->run_cycles = 1;
  opts->check = 1;
  opts->datatype = ncclFloat;
  opts->op = ncclSum;
  opts->root = 0;
  opts->average = 1;
  opts->cta_policy = -1;
  opts->device_cta_count = 16;
  opts->nthreads = 1;
  opts->ngpus = 1;
}

void mc_perf_usage(FILE *f)
{
  fprintf(f,
          "usage: meshccl-run -n N meshccl-perf <collective> [flags]   (or mpirun/srun/torchrun)\n"
          "  <collective>: all_reduce all_gather reduce_scatter broadcast reduce alltoall "
          "sendrecv\n"
          "                gather scatter alltoallv hypercube (hypercube: 2^k ranks)\n"
          "  nccl-tests' flags (one rank per process, buffers in host memory):\n"
          "  -b,--minbytes <size>        smallest size, K/M/G suffixes (default 32M)\n"
          "  -e,--maxbytes <size>        largest size (default 32M)\n"
          "  -i,--stepbytes <size>       increment when -f is 1 (default 1M)\n"
          "  -f,--stepfactor <n>         multiply the size by n each step (default 1: use -i)\n"
          "  -n,--iters <n>              timed iterations per size (default 20)\n"
          "  -w,--warmup_iters <n>       warm-up iterations per size (default 1)\n"
          "  -m,--agg_iters <n>          collectives per iteration, in one group (default 1)\n"
          "  -N,--run_cycles <n>         repeat the sweep n times, 0 = forever (default 1)\n"
          "  -c,--check <n>              checked runs per size, 0 = no check (default 1)\n"
          "  -d,--datatype <type|all>    int8 uint8 int32 uint32 int64 uint64 half float double\n"
          "                              bfloat16 f8e4m3 f8e5m2 (default float)\n"
          "  -o,--op <op|all>            sum prod max min avg mulsum (default sum)\n"
          "  -r,--root <rank|-1>         root of broadcast/reduce/gather/scatter, -1 = every "
          "rank (default 0)\n"
          "  -z,--blocking <0/1>         barrier after every collective (default 0)\n"
          "  -a,--average <0/1/2/3>      time across ranks: rank 0, average, min, max (default "
          "1)\n"
          "  -C,--report_cputime <0/1>   report the time to issue instead of to complete\n"
          "  -S,--report_timestamps <0/1> a timestamp column after the in-place results\n"
          "  -M,--memory_report <0/1>    print host memory used by init, buffers, collectives\n"
          "  -u,--unalign <n>            buffers start n elements past a 4 KiB boundary "
          "(0-511)\n"
          "  -T,--timeout <seconds>      fail when one size takes longer (default 0: none)\n"
          "  -J,--output_file <f.json>   also write the results as JSON\n"
          "  -G,--cudagraph <n>          accepted, ignored (no CUDA graphs on host memory)\n"
          "  -R,--local_register <0/1/2> ncclMemAlloc buffers: 1 ncclCommRegister, 2 symmetric\n"
          "                              windows (collectives read their peers' buffers)\n"
          "  -x,--cta_policy <0/1/2>     accepted, no-op: no CTAs on host (as nccl-tests "
          "without -x)\n"
          "  -D,--device_implementation <n>  accepted, no-op: no device kernels on host, NCCL's\n"
          "                              implementation runs (as -D 0); n > 0 needs -R 2\n"
          "  -V,--device_cta_count <1-128>  accepted, no-op: no CTAs on host\n"
          "  -p,--parallel_init, -y,--stream_null  accepted, no-op\n"
          "  -t,--nthreads 1, -g,--ngpus 1         only 1: start more ranks with the launcher\n"
          "  -h,--help\n"
          "environment: NCCL_TESTS_MIN_BW=<GB/s> fails (exit 1) when the average bus bandwidth\n"
          "  is below 90%% of it; NCCL_TESTS_SPLIT=\"<AND|OR|MOD|DIV> <n>\" or "
          "NCCL_TESTS_SPLIT_MASK=<hex>\n"
          "  run on sub-communicators (ncclCommSplit) by colour; rank 0's group is reported\n"
          "without a launcher (no RANK, OMPI_COMM_WORLD_RANK or SLURM_PROCID): one rank, as\n"
          "  nccl-tests on one GPU without MPI\n"
          "exit codes: 0 ok, 1 wrong results, a failed call, timeout or NCCL_TESTS_MIN_BW, 2 bad\n"
          "  command line or environment\n");
}

static int usage_error(char *err, size_t err_len, const char *fmt, ...)
{
  va_list ap;
  int n = snprintf(err, err_len, "%s: ", PROG);

  va_start(ap, fmt);
  if ((n >= 0) && ((size_t)n < err_len))
    vsnprintf(err + n, err_len - (size_t)n, fmt, ap);
  va_end(ap);
  return MC_PERF_EXIT_USAGE;
}

static int parse_int(const char *text, long min, long max, int *out)
{
  char *end = NULL;
  long v;

  errno = 0;
  v = strtol(text, &end, 0);
  if ((end == text) || (*end != '\0') || (errno != 0) || (v < min) || (v > max))
    return -1;
  *out = (int)v;
  return 0;
}

static int parse_coll(const char *name, enum mc_perf_coll *out)
{
  size_t len = strlen(name);

  /* "all_reduce_perf" (nccl-tests' binary name) is accepted too. */
  if ((len > 5) && (strcmp(name + len - 5, "_perf") == 0))
    len -= 5;
  for (int c = 0; c < MC_PERF_N_COLLS; c++) {
    if ((strlen(coll_names[c]) == len) && (strncmp(name, coll_names[c], len) == 0)) {
      *out = (enum mc_perf_coll)c;
      return 0;
    }
  }
  return -1;
}

static int parse_name(const char *text, const char *const *names, int n, int *out)
{
  if (strcmp(text, "all") == 0) {
    *out = MC_PERF_ALL;
    return 0;
  }
  for (int i = 0; i < n; i++) {
    if (strcmp(text, names[i]) == 0) {
      *out = i;
      return 0;
    }
  }
  return -1;
}

static const struct option long_opts[] = {
    {"nthreads", required_argument, 0, 't'},
    {"ngpus", required_argument, 0, 'g'},
    {"minbytes", required_argument, 0, 'b'},
    {"maxbytes", required_argument, 0, 'e'},
    {"stepbytes", required_argument, 0, 'i'},
    {"stepfactor", required_argument, 0, 'f'},
    {"iters", required_argument, 0, 'n'},
    {"agg_iters", required_argument, 0, 'm'},
    {"warmup_iters", required_argument, 0, 'w'},
    {"run_cycles", required_argument, 0, 'N'},
    {"parallel_init", required_argument, 0, 'p'},
    {"check", required_argument, 0, 'c'},
    {"op", required_argument, 0, 'o'},
    {"datatype", required_argument, 0, 'd'},
    {"root", required_argument, 0, 'r'},
    {"blocking", required_argument, 0, 'z'},
    {"stream_null", required_argument, 0, 'y'},
    {"timeout", required_argument, 0, 'T'},
    {"cudagraph", required_argument, 0, 'G'},
    {"report_cputime", required_argument, 0, 'C'},
    {"output_file", required_argument, 0, 'J'},
    {"average", required_argument, 0, 'a'},
    {"local_register", required_argument, 0, 'R'},
    {"report_timestamps", required_argument, 0, 'S'},
    {"cta_policy", required_argument, 0, 'x'},
    {"device_implementation", required_argument, 0, 'D'},
    {"device_cta_count", required_argument, 0, 'V'},
    {"memory_report", required_argument, 0, 'M'},
    {"memory", required_argument, 0, 'M'}, /* nccl-tests' long name; its help says memory_report */
    {"unalign", required_argument, 0, 'u'},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
};

/* The long name of short option c, for messages ("-n/--iters"). */
static const char *long_name(int c)
{
  for (const struct option *o = long_opts; o->name != NULL; o++) {
    if (o->val == c)
      return o->name;
  }
  return "?";
}

/* One flag with its argument; MC_PERF_EXIT_OK or a usage error in err. */
static int parse_flag(int c, const char *arg, struct mc_perf_opts *o, char *err, size_t err_len)
{
  int *int_field = NULL;
  long min = 0;
  long max = 1L << 30;

  switch (c) {
  case 'b':
  case 'e':
  case 'i': {
    size_t *field = (c == 'b') ? &o->min_bytes : (c == 'e') ? &o->max_bytes : &o->step_bytes;
    if (mc_perf_parse_size(arg, field) != 0)
      return usage_error(err, err_len,
                         "invalid size '%s' for -%c/--%s (a number of bytes with an optional K, "
                         "M or G suffix, e.g. 8, 64K, 1.5M, 2G)",
                         arg, c, long_name(c));
    return MC_PERF_EXIT_OK;
  }
  case 'f': {
    int factor;
    if ((parse_int(arg, 1, 1L << 20, &factor) != 0))
      return usage_error(err, err_len, "invalid value '%s' for -f/--stepfactor (an integer >= 1)",
                         arg);
    o->step_factor = (size_t)factor;
    return MC_PERF_EXIT_OK;
  }
  case 'd':
    if (parse_name(arg, type_names, ncclNumTypes, &o->datatype) != 0)
      return usage_error(err, err_len,
                         "unknown datatype '%s' for -d/--datatype (int8 uint8 int32 uint32 int64 "
                         "uint64 half float double bfloat16 f8e4m3 f8e5m2 all)",
                         arg);
    return MC_PERF_EXIT_OK;
  case 'o':
    if (strcmp(arg, "premulsum") == 0)
      arg = "mulsum";
    if (parse_name(arg, op_names, MC_PERF_N_OPS, &o->op) != 0)
      return usage_error(err, err_len,
                         "unknown op '%s' for -o/--op (sum prod max min avg mulsum all)", arg);
    return MC_PERF_EXIT_OK;
  case 'J':
    o->output_file = arg;
    return MC_PERF_EXIT_OK;
  case 'n':
    int_field = &o->iters;
    min = 1;
    break;
  case 'w':
    int_field = &o->warmup_iters;
    break;
  case 'm':
    int_field = &o->agg_iters;
    min = 1;
    break;
  case 'N':
    int_field = &o->run_cycles;
    break;
  case 'c':
    int_field = &o->check;
    break;
  case 'r':
    int_field = &o->root;
    min = -1;
    break;
  case 'z':
    int_field = &o->blocking;
    max = 1;
    break;
  case 'y':
    int_field = &o->stream_null;
    max = 1;
    break;
  case 'p':
    int_field = &o->parallel_init;
    max = 1;
    break;
  case 'T':
    int_field = &o->timeout;
    break;
  case 'G':
    int_field = &o->cudagraph;
    break;
  case 'C':
    int_field = &o->report_cputime;
    max = 1;
    break;
  case 'a':
    int_field = &o->average;
    max = 3;
    break;
  case 'R':
    int_field = &o->local_register;
    max = 2;
    break;
  case 'S':
    int_field = &o->report_timestamps;
    max = 1;
    break;
  case 'x':
    int_field = &o->cta_policy;
    max = 2;
    break;
  case 'D':
    int_field = &o->device_impl;
    break;
  case 'V':
    int_field = &o->device_cta_count;
    min = 1;
    max = 128;
    break;
  case 'M':
    int_field = &o->memory_report;
    max = 1;
    break;
  case 'u':
    int_field = &o->unalign;
    max = 511;
    break;
  case 't':
  case 'g':
    int_field = (c == 't') ? &o->nthreads : &o->ngpus;
    min = 1;
    max = 1;
    break;
  default:
    return usage_error(err, err_len, "internal: flag -%c not handled", c);
  }
  if (parse_int(arg, min, max, int_field) != 0) {
    if ((c == 't') || (c == 'g'))
      return usage_error(err, err_len,
                         "-%c/--%s must be 1: meshccl-perf runs one rank per process; start more "
                         "ranks with meshccl-run -n N or mpirun -np N",
                         c, long_name(c));
    return usage_error(err, err_len, "invalid value '%s' for -%c/--%s (an integer from %ld to %ld)",
                       arg, c, long_name(c), min, max);
  }
  return MC_PERF_EXIT_OK;
}

int mc_perf_args_parse(int argc, char **argv, struct mc_perf_opts *opts, char *err, size_t err_len)
{
  static const char short_opts[] = ":t:g:b:e:i:f:n:m:w:N:p:c:o:d:r:z:y:T:G:C:J:a:R:S:x:D:V:M:u:h";
  struct mc_perf_opts o;
  int res;

  mc_perf_opts_init(&o);
  err[0] = '\0';
  if ((argc < 2) || (argv[1] == NULL))
    return usage_error(err, err_len, "missing collective: " COLL_LIST " (see -h)");
  if ((strcmp(argv[1], "-h") == 0) || (strcmp(argv[1], "--help") == 0)) {
    o.help = true;
    *opts = o;
    return MC_PERF_EXIT_OK;
  }
  if (parse_coll(argv[1], &o.coll) != 0)
    return usage_error(err, err_len, "unknown collective '%s' (" COLL_LIST ")", argv[1]);

  /* argv[1] plays getopt's program name, so the flags start at argv[2]. */
  optind = 0; /* 0: glibc re-initialises its scanner too */
  opterr = 0;
  for (;;) {
    int c = getopt_long(argc - 1, argv + 1, short_opts, long_opts, NULL);
    const char *bad = argv[1 + optind - 1];

    if (c == -1)
      break;
    if (c == 'h') {
      o.help = true;
      continue;
    }
    if (c == ':')
      return usage_error(err, err_len, "option '%s' needs a value (see -h)", bad);
    if (c == '?') {
      if (optopt != 0)
        return usage_error(err, err_len, "unknown option '-%c' (see -h)", optopt);
      return usage_error(err, err_len, "unknown option '%s' (see -h)", bad);
    }
    res = parse_flag(c, optarg, &o, err, err_len);
    if (res != MC_PERF_EXIT_OK)
      return res;
  }
  if (optind < argc - 1)
    return usage_error(err, err_len, "unexpected argument '%s' (see -h)", argv[1 + optind]);
  if (o.min_bytes > o.max_bytes)
    return usage_error(err, err_len,
                       "invalid sizes for 'minbytes' and 'maxbytes': %zu > %zu (-b must not "
                       "exceed -e)",
                       o.min_bytes, o.max_bytes);
  if ((o.step_factor <= 1) && (o.step_bytes == 0) && (o.min_bytes < o.max_bytes))
    return usage_error(err, err_len,
                       "-i/--stepbytes 0 with -f/--stepfactor 1 never ends the "
                       "sweep: give -i > 0 or -f > 1");
  if (o.min_bytes == 0 && o.step_factor > 1 && o.max_bytes > 0)
    return usage_error(err, err_len,
                       "-b/--minbytes 0 with -f/--stepfactor %zu never grows: give "
                       "-b > 0",
                       o.step_factor);
  if ((o.device_impl > 0) && (o.local_register != 2))
    return usage_error(err, err_len,
                       "device implementation (-D > 0) requires enabling symmetric memory "
                       "registration (-R 2)");
  *opts = o;
  return MC_PERF_EXIT_OK;
}

size_t mc_perf_next_size(const struct mc_perf_opts *opts, size_t bytes)
{
  return (opts->step_factor > 1) ? bytes * opts->step_factor : bytes + opts->step_bytes;
}

size_t mc_perf_counts_bytes(const struct mc_perf_counts *c, size_t type_size)
{
  return ((c->send_count > c->recv_count) ? c->send_count : c->recv_count) * type_size;
}

size_t mc_perf_rotation_shift(size_t max_bytes, size_t op_bytes, size_t call)
{
  size_t steps = (op_bytes > 0) ? max_bytes / op_bytes : 1;

  return op_bytes * (call % ((steps > 0) ? steps : 1));
}

void mc_perf_coll_counts(enum mc_perf_coll coll, size_t bytes, size_t type_size, int n_ranks,
                         struct mc_perf_counts *out)
{
  size_t count = (type_size > 0) ? bytes / type_size : 0;
  size_t per_rank = (n_ranks > 0) ? count / (size_t)n_ranks : 0;
  struct mc_perf_counts c = {count, count, count, 0, 0};

  switch (coll) {
  case MC_PERF_ALL_GATHER: /* send one block, receive n */
    c.send_count = per_rank;
    c.recv_count = per_rank * (size_t)n_ranks;
    c.param_count = per_rank;
    c.send_inplace = per_rank;
    break;
  case MC_PERF_REDUCE_SCATTER: /* send n blocks, receive one */
    c.send_count = per_rank * (size_t)n_ranks;
    c.recv_count = per_rank;
    c.param_count = per_rank;
    c.recv_inplace = per_rank;
    break;
  case MC_PERF_ALLTOALL:  /* one block to and from every rank */
  case MC_PERF_ALLTOALLV: /* up to one block (its per-peer count) */
    c.send_count = per_rank * (size_t)n_ranks;
    c.recv_count = per_rank * (size_t)n_ranks;
    c.param_count = per_rank;
    break;
  case MC_PERF_GATHER:    /* one block to the root, 16-byte multiples (nccl-tests' gather.cu) */
  case MC_PERF_HYPERCUBE: /* an allgather by recursive doubling (hypercube.cu) */
    per_rank = (type_size > 0) ? per_rank & ~((16 / type_size) - 1) : 0;
    c.send_count = per_rank;
    c.recv_count = per_rank * (size_t)n_ranks;
    c.param_count = per_rank;
    c.send_inplace = per_rank;
    break;
  case MC_PERF_SCATTER: /* the root's n blocks, one to each rank */
    per_rank = (type_size > 0) ? per_rank & ~((16 / type_size) - 1) : 0;
    c.send_count = per_rank * (size_t)n_ranks;
    c.recv_count = per_rank;
    c.param_count = per_rank;
    c.recv_inplace = per_rank;
    break;
  default:
    break;
  }
  *out = c;
}

double mc_perf_bus_factor(enum mc_perf_coll coll, int n_ranks)
{
  double n = (double)n_ranks;

  switch (coll) {
  case MC_PERF_ALL_REDUCE:
    return 2.0 * (n - 1.0) / n;
  case MC_PERF_ALL_GATHER:
  case MC_PERF_REDUCE_SCATTER:
  case MC_PERF_ALLTOALL:
  case MC_PERF_ALLTOALLV:
  case MC_PERF_GATHER:
  case MC_PERF_SCATTER:
    return (n - 1.0) / n;
  default: /* broadcast, reduce, sendrecv, hypercube (its algbw already counts n-1 blocks) */
    return 1.0;
  }
}

size_t mc_perf_alltoallv_count(size_t chunk, int from, int to, int n_ranks)
{
  if (n_ranks <= 0)
    return 0;
  return chunk * (size_t)(1 + ((from + to) % n_ranks)) / (size_t)n_ranks;
}

void mc_perf_bandwidth(enum mc_perf_coll coll, size_t param_count, size_t type_size, int n_ranks,
                       double sec, double *algbw_out, double *busbw_out)
{
  double bytes = (double)param_count * (double)type_size;
  double algbw;

  /* The per-rank count of allgather, reducescatter and alltoall is 1/n of the data. */
  if ((coll == MC_PERF_ALL_GATHER) || (coll == MC_PERF_REDUCE_SCATTER) ||
      (coll == MC_PERF_ALLTOALL) || (coll == MC_PERF_ALLTOALLV) || (coll == MC_PERF_GATHER) ||
      (coll == MC_PERF_SCATTER))
    bytes *= (double)n_ranks;
  else if (coll == MC_PERF_HYPERCUBE) /* each rank receives n-1 blocks */
    bytes *= (double)(n_ranks - 1);
  algbw = (sec > 0) ? bytes / 1.0e9 / sec : 0.0;
  *algbw_out = algbw;
  *busbw_out = algbw * mc_perf_bus_factor(coll, n_ranks);
}

/* An integer in base 10, 0x hex or 0b binary after optional blanks (nccl-tests' parseInt). */
static int split_value(const char *text, int *out)
{
  char *end = NULL;
  unsigned long v;

  while ((*text == ' ') || (*text == '\t'))
    text++;
  errno = 0;
  if ((text[0] == '0') && ((text[1] == 'b') || (text[1] == 'B')))
    v = strtoul(text + 2, &end, 2);
  else
    v = strtoul(text, &end, 0);
  if ((end == text) || (errno != 0) || (*end != '\0') || (text[0] == '-') || (v > 0x7fffffffUL))
    return -1;
  *out = (int)v;
  return 0;
}

int mc_perf_split_color(const char *split, const char *mask, int rank, int *color_out, char *err,
                        size_t err_len)
{
  static const struct {
    const char *word;
    const char *sym;
  } ops[] = {{"AND", "&"}, {"OR", "|"}, {"MOD", "%"}, {"DIV", "/"}};
  int value = 0;

  err[0] = '\0';
  if (mask != NULL) { /* hexadecimal, with or without 0x (strtoul base 16) */
    char *end = NULL;
    unsigned long m;

    errno = 0;
    m = strtoul(mask, &end, 16);
    if ((end == mask) || (*end != '\0') || (errno != 0) || (mask[0] == '-')) {
      usage_error(err, err_len, "invalid NCCL_TESTS_SPLIT_MASK '%s' (a hexadecimal mask, e.g. 0x1)",
                  mask);
      return -1;
    }
    *color_out = (int)((unsigned long)rank & m);
    return 0;
  }
  if (split == NULL) {
    *color_out = 0;
    return 0;
  }
  for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
    size_t wl = strlen(ops[i].word);
    const char *rest = NULL;

    if (strncasecmp(split, ops[i].word, wl) == 0)
      rest = split + wl;
    else if (split[0] == ops[i].sym[0])
      rest = split + 1;
    if (rest == NULL)
      continue;
    if ((split_value(rest, &value) != 0) || ((i >= 2) && (value == 0)))
      break;
    switch (i) {
    case 0:
      *color_out = rank & value;
      break;
    case 1:
      *color_out = rank | value;
      break;
    case 2:
      *color_out = rank % value;
      break;
    default:
      *color_out = rank / value;
      break;
    }
    return 0;
  }
  usage_error(err, err_len,
              "invalid NCCL_TESTS_SPLIT '%s' (<op><value>: op AND, OR, MOD or DIV, or &, |, %%, /; "
              "value decimal, 0x hex or 0b binary, not 0 for MOD and DIV; e.g. \"MOD 2\")",
              split);
  return -1;
}

int mc_perf_parse_min_bw(const char *text, double *min_bw_out, char *err, size_t err_len)
{
  char *end = NULL;
  double v;

  err[0] = '\0';
  if (text == NULL) {
    *min_bw_out = -1.0;
    return 0;
  }
  errno = 0;
  v = strtod(text, &end);
  if ((end == text) || (*end != '\0') || (errno != 0) || !(v >= 0.0)) {
    usage_error(err, err_len,
                "invalid NCCL_TESTS_MIN_BW '%s' (a bus bandwidth in GB/s, e.g. 10 or 1e9)", text);
    *min_bw_out = -1.0;
    return -1;
  }
  *min_bw_out = v;
  return 0;
}
