/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-perf's pure logic without a communicator (tools/perf/): flags and
 * their errors, the per-collective counts and bandwidth formulas, the exact
 * text of the table lines, the JSON report, element encodings and the
 * expected results of the data check.
 */
#include "mc_test.h"
#include "perf.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Parses a space-separated command line ("all_reduce -b 8 ..."). */
static int parse_line(const char *line, struct mc_perf_opts *opts, char *err)
{
  char copy[512];
  char *argv[64];
  int argc = 0;

  snprintf(copy, sizeof(copy), "%s", line);
  argv[argc++] = "meshccl-perf";
  for (char *tok = strtok(copy, " "); (tok != NULL) && (argc < 63); tok = strtok(NULL, " "))
    argv[argc++] = tok;
  argv[argc] = NULL;
  return mc_perf_args_parse(argc, argv, opts, err, MC_PERF_ERR_LEN);
}

/* A command line meshccl-perf refuses with exit 2 (usage), and what it
 * says: the whole message (SAYS_ALL) or a part of it (SAYS_PART). */
enum says { SAYS_ALL, SAYS_PART };
struct refusal {
  const char *line;
  enum says how;
  const char *says;
};

static void expect_refusals(const struct refusal *r, size_t n)
{
  struct mc_perf_opts o;
  char err[MC_PERF_ERR_LEN];

  for (size_t i = 0; i < n; i++) {
    int rc = parse_line(r[i].line, &o, err);

    if (rc != MC_PERF_EXIT_USAGE)
      MC_T_FAIL("'%s': exit %d, expected %d (usage)", r[i].line, rc, MC_PERF_EXIT_USAGE);
    if (r[i].how == SAYS_PART)
      MC_T_CONTAINS(err, r[i].says);
    else
      MC_T_EQ_STR(err, r[i].says);
  }
}

static void defaults_are_nccl_tests(void)
{
  struct mc_perf_opts o;
  char err[MC_PERF_ERR_LEN];

  MC_T_EQ_INT(parse_line("all_reduce", &o, err), MC_PERF_EXIT_OK);
  MC_T_EQ_INT(o.coll, MC_PERF_ALL_REDUCE);
  MC_T_EQ_INT(o.min_bytes, 32 << 20);
  MC_T_EQ_INT(o.max_bytes, 32 << 20);
  MC_T_EQ_INT(o.step_bytes, 1 << 20);
  MC_T_EQ_INT(o.step_factor, 1);
  MC_T_EQ_INT(o.iters, 20);
  MC_T_EQ_INT(o.warmup_iters, 1);
  MC_T_EQ_INT(o.agg_iters, 1);
  MC_T_EQ_INT(o.check, 1);
  MC_T_EQ_INT(o.datatype, ncclFloat);
  MC_T_EQ_INT(o.op, ncclSum);
  MC_T_EQ_INT(o.root, 0);
  MC_T_EQ_INT(o.average, 1);
  MC_T_TRUE(o.output_file == NULL);
}

static void short_and_long_flags(void)
{
  struct mc_perf_opts o;
  char err[MC_PERF_ERR_LEN];

  MC_T_EQ_INT(parse_line("broadcast -b 8 -e 128M -f 2 -n 5 -w 2 -m 3 -c 0 -d half -o max -r -1 "
                         "-z 1 -a 3 -C 1 -T 30 -G 4 -R 1 -J out.json",
                         &o, err),
              MC_PERF_EXIT_OK);
  MC_T_EQ_INT(o.coll, MC_PERF_BROADCAST);
  MC_T_EQ_INT(o.min_bytes, 8);
  MC_T_EQ_INT(o.max_bytes, 128 << 20);
  MC_T_EQ_INT(o.step_factor, 2);
  MC_T_EQ_INT(o.iters, 5);
  MC_T_EQ_INT(o.warmup_iters, 2);
  MC_T_EQ_INT(o.agg_iters, 3);
  MC_T_EQ_INT(o.check, 0);
  MC_T_EQ_INT(o.datatype, ncclHalf);
  MC_T_EQ_INT(o.op, ncclMax);
  MC_T_EQ_INT(o.root, -1);
  MC_T_EQ_INT(o.blocking, 1);
  MC_T_EQ_INT(o.average, 3);
  MC_T_EQ_INT(o.report_cputime, 1);
  MC_T_EQ_INT(o.timeout, 30);
  MC_T_EQ_INT(o.cudagraph, 4);
  MC_T_EQ_INT(o.local_register, 1);
  MC_T_EQ_STR(o.output_file, "out.json");

  MC_T_EQ_INT(parse_line("alltoall_perf --minbytes=1K --maxbytes 1G --stepbytes 512 --iters 7 "
                         "--warmup_iters 0 --agg_iters 2 --check 2 --datatype all --op all "
                         "--root 1 --blocking 0 --average 0 --report_cputime 0 --timeout 0 "
                         "--cudagraph 0 --local_register 0 --output_file r.json",
                         &o, err),
              MC_PERF_EXIT_OK);
  MC_T_EQ_INT(o.coll, MC_PERF_ALLTOALL);
  MC_T_EQ_INT(o.min_bytes, 1024);
  MC_T_EQ_INT(o.max_bytes, 1 << 30);
  MC_T_EQ_INT(o.step_bytes, 512);
  MC_T_EQ_INT(o.iters, 7);
  MC_T_EQ_INT(o.datatype, MC_PERF_ALL);
  MC_T_EQ_INT(o.op, MC_PERF_ALL);
  MC_T_EQ_INT(o.average, 0);

  MC_T_EQ_INT(parse_line("reduce -o premulsum -d f8e5m2", &o, err), MC_PERF_EXIT_OK);
  MC_T_EQ_INT(o.op, MC_PERF_MULSUM);
  MC_T_EQ_INT(o.datatype, ncclFloat8e5m2);

  MC_T_EQ_INT(parse_line("-h", &o, err), MC_PERF_EXIT_OK);
  MC_T_TRUE(o.help);
  MC_T_EQ_INT(parse_line("sendrecv --help", &o, err), MC_PERF_EXIT_OK);
  MC_T_TRUE(o.help);
}

static void sizes(void)
{
  size_t v = 0;

  MC_T_EQ_INT(mc_perf_parse_size("8", &v), 0);
  MC_T_EQ_INT(v, 8);
  MC_T_EQ_INT(mc_perf_parse_size("1K", &v), 0);
  MC_T_EQ_INT(v, 1024);
  MC_T_EQ_INT(mc_perf_parse_size("1.5m", &v), 0);
  MC_T_EQ_INT(v, 3 << 19);
  MC_T_EQ_INT(mc_perf_parse_size("2G", &v), 0);
  MC_T_EQ_INT(v, 2LL << 30);
  MC_T_EQ_INT(mc_perf_parse_size("32MB", &v), 0);
  MC_T_EQ_INT(v, 32 << 20);
  MC_T_EQ_INT(mc_perf_parse_size("1Q", &v), -1);
  MC_T_EQ_INT(mc_perf_parse_size("", &v), -1);
  MC_T_EQ_INT(mc_perf_parse_size("-8", &v), -1);
  MC_T_EQ_INT(mc_perf_parse_size("8 K", &v), -1);
  MC_T_EQ_INT(mc_perf_parse_size("K", &v), -1);
}

static const struct refusal usage_errors[] = {
    {"all_reduce -b 1Q", SAYS_ALL,
     "meshccl-perf: invalid size '1Q' for -b/--minbytes (a number of bytes with an "
     "optional K, M or G suffix, e.g. 8, 64K, 1.5M, 2G)"},
    {"all_reduce -b 64M -e 32M", SAYS_ALL,
     "meshccl-perf: invalid sizes for 'minbytes' and 'maxbytes': 67108864 > "
     "33554432 (-b must not exceed -e)"},
    {"all_reduce --frobnicate 1", SAYS_ALL, "meshccl-perf: unknown option '--frobnicate' (see -h)"},
    {"all_reduce -q 1", SAYS_ALL, "meshccl-perf: unknown option '-q' (see -h)"},
    {"all_reduce -n", SAYS_ALL, "meshccl-perf: option '-n' needs a value (see -h)"},
    {"all_reduce -n 0", SAYS_ALL,
     "meshccl-perf: invalid value '0' for -n/--iters (an integer from 1 to "
     "1073741824)"},
    {"all_reduce -a 4", SAYS_PART, "-a/--average"},
    {"all_reduce -g 8", SAYS_PART, "one rank per process"},
    {"all_reduce -d fp32", SAYS_PART, "unknown datatype 'fp32'"},
    {"all_reduce -o xor", SAYS_PART, "unknown op 'xor'"},
    {"allreduce", SAYS_PART, "unknown collective 'allreduce'"},
    {"", SAYS_PART, "missing collective"},
    {"all_gather -b 8 stray", SAYS_ALL, "meshccl-perf: unexpected argument 'stray' (see -h)"},
    {"all_gather -b 8 -e 64 -i 0", SAYS_PART, "never ends"},
    /* nccl-tests' later flags (gpu_era_flags parses their good values) */
    {"all_reduce -S 2", SAYS_ALL,
     "meshccl-perf: invalid value '2' for -S/--report_timestamps (an integer from 0 "
     "to 1)"},
    {"all_reduce -x 3", SAYS_PART, "-x/--cta_policy"},
    {"all_reduce -V 0", SAYS_PART, "-V/--device_cta_count (an integer from 1 to 128)"},
    {"all_reduce -M x", SAYS_PART, "-M/--memory_report"},
    {"all_reduce -u 512", SAYS_PART, "-u/--unalign (an integer from 0 to 511)"},
    /* nccl-tests' own rule: a device implementation needs symmetric registration. */
    {"all_reduce -D 1", SAYS_ALL,
     "meshccl-perf: device implementation (-D > 0) requires enabling symmetric "
     "memory registration (-R 2)"},
    {"gatherx", SAYS_PART,
     "unknown collective 'gatherx' (all_reduce all_gather reduce_scatter "
     "broadcast reduce alltoall sendrecv gather scatter alltoallv hypercube)"},
};

static void errors_are_clear_and_exit_2(void)
{
  expect_refusals(usage_errors, sizeof(usage_errors) / sizeof(usage_errors[0]));
}

/* What mc_perf_coll_counts gives for bytes of type_size-byte elements
 * over n_ranks (NA: not checked here). */
#define NA (-1)
struct counts_case {
  enum mc_perf_coll coll;
  size_t bytes;
  size_t type_size;
  int n_ranks;
  long long send, recv, param, send_inplace, recv_inplace;
};

static void expect_counts(const struct counts_case *k, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    const long long want[5] = {k[i].send, k[i].recv, k[i].param, k[i].send_inplace,
                               k[i].recv_inplace};
    struct mc_perf_counts c;
    long long got[5];

    mc_perf_coll_counts(k[i].coll, k[i].bytes, k[i].type_size, k[i].n_ranks, &c);
    got[0] = (long long)c.send_count;
    got[1] = (long long)c.recv_count;
    got[2] = (long long)c.param_count;
    got[3] = (long long)c.send_inplace;
    got[4] = (long long)c.recv_inplace;
    for (int f = 0; f < 5; f++) {
      if ((want[f] != NA) && (got[f] != want[f]))
        MC_T_FAIL("%s, %zu bytes, %d ranks: count %d (send, recv, param, send/recv in place) "
                  "is %lld, expected %lld",
                  mc_perf_coll_name(k[i].coll), k[i].bytes, k[i].n_ranks, f, got[f], want[f]);
    }
  }
}

/* 1000 bytes of float over 3 ranks: 250 elements, 83 per rank. Fields:
 * send, recv, param (the count column), send and receive in-place offsets. */
static const struct counts_case classic_counts[] = {
    {MC_PERF_ALL_REDUCE, 1000, 4, 3, 250, 250, 250, NA, NA},
    {MC_PERF_ALL_GATHER, 1000, 4, 3, 83, 249, 83, 83, 0},
    {MC_PERF_REDUCE_SCATTER, 1000, 4, 3, 249, 83, 83, 0, 83},
    {MC_PERF_ALLTOALL, 1000, 4, 3, 249, 249, 83, NA, NA},
    {MC_PERF_SENDRECV, 1001, 4, 3, NA, NA, 250, NA, NA},
};

static void counts_round_as_nccl_tests(void)
{
  expect_counts(classic_counts, sizeof(classic_counts) / sizeof(classic_counts[0]));
}

/* nccl-tests' bus factor of coll over n_ranks, and algbw/busbw (GB/s) of
 * count elements of type_size bytes moved in seconds. */
struct factor_case {
  enum mc_perf_coll coll;
  int n_ranks;
  double factor;
};
struct bw_case {
  enum mc_perf_coll coll;
  size_t count;
  size_t type_size;
  int n_ranks;
  double seconds;
  double alg;
  double bus;
};

static void expect_bandwidth(const struct factor_case *f, size_t n_f, const struct bw_case *b,
                             size_t n_b)
{
  for (size_t i = 0; i < n_f; i++) {
    double got = mc_perf_bus_factor(f[i].coll, f[i].n_ranks);

    if (got != f[i].factor)
      MC_T_FAIL("%s over %d ranks: bus factor %g, expected %g", mc_perf_coll_name(f[i].coll),
                f[i].n_ranks, got, f[i].factor);
  }
  for (size_t i = 0; i < n_b; i++) {
    double alg;
    double bus;

    mc_perf_bandwidth(b[i].coll, b[i].count, b[i].type_size, b[i].n_ranks, b[i].seconds, &alg,
                      &bus);
    if ((fabs(alg - b[i].alg) >= 1e-12) || (fabs(bus - b[i].bus) >= 1e-12))
      MC_T_FAIL("%s: algbw %g busbw %g, expected %g %g", mc_perf_coll_name(b[i].coll), alg, bus,
                b[i].alg, b[i].bus);
  }
}

static const struct factor_case classic_factors[] = {
    {MC_PERF_ALL_REDUCE, 4, 1.5}, {MC_PERF_ALL_GATHER, 4, 0.75}, {MC_PERF_REDUCE_SCATTER, 2, 0.5},
    {MC_PERF_ALLTOALL, 8, 0.875}, {MC_PERF_BROADCAST, 8, 1.0},   {MC_PERF_REDUCE, 8, 1.0},
    {MC_PERF_SENDRECV, 8, 1.0},
};
static const struct bw_case classic_bw[] = {
    /* 250M floats in 1 s over 4 ranks: 1 GB/s, bus 1.5. */
    {MC_PERF_ALL_REDUCE, 250000000, 4, 4, 1.0, 1.0, 1.5},
    /* allgather's count is per rank: the data is n times larger. */
    {MC_PERF_ALL_GATHER, 250000000, 4, 4, 2.0, 2.0, 1.5},
};

static void bandwidth_formulas(void)
{
  expect_bandwidth(classic_factors, sizeof(classic_factors) / sizeof(classic_factors[0]),
                   classic_bw, sizeof(classic_bw) / sizeof(classic_bw[0]));
}

static void sweep(void)
{
  struct mc_perf_opts o;

  mc_perf_opts_init(&o);
  MC_T_EQ_INT(mc_perf_next_size(&o, 32 << 20), (32 << 20) + (1 << 20));
  o.step_factor = 2;
  MC_T_EQ_INT(mc_perf_next_size(&o, 8), 16);
  /* Timed calls move through -e's bytes (nccl-tests' startColl): 64 KiB in 256 KiB takes the
   * offsets 0, 64K, 128K, 192K, then 0 again; a size that does not divide -e stops short of
   * its end; the largest size and a zero size stay at 0. */
  MC_T_EQ_INT(mc_perf_rotation_shift(262144, 65536, 0), 0);
  MC_T_EQ_INT(mc_perf_rotation_shift(262144, 65536, 3), 196608);
  MC_T_EQ_INT(mc_perf_rotation_shift(262144, 65536, 4), 0);
  MC_T_EQ_INT(mc_perf_rotation_shift(262144, 100000, 1), 100000);
  MC_T_EQ_INT(mc_perf_rotation_shift(262144, 100000, 2), 0);
  MC_T_EQ_INT(mc_perf_rotation_shift(262144, 262144, 7), 0);
  MC_T_EQ_INT(mc_perf_rotation_shift(262144, 0, 5), 0);
}

/* mc_perf_fmt_num: value in width columns, as nccl-tests prints it. */
static const struct {
  double value;
  int width;
  const char *text;
} numbers[] = {
    {0.5, 7, "   0.50"},     {9999.994, 7, "9999.99"}, {12345.64, 7, "12345.6"},
    {1234567, 7, "1234567"}, {12345678, 7, "1.2e+07"}, {0.0, 6, "  0.00"},
    {123.456, 6, "123.46"},  {1234.56, 6, "1234.6"},   {123456, 6, "123456"},
    {1234567, 6, " 1e+06"},
};

static void number_format(void)
{
  char s[32];

  for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++) {
    mc_perf_fmt_num(s, sizeof(s), numbers[i].value, numbers[i].width);
    MC_T_EQ_STR(s, numbers[i].text);
  }
}

static void table_lines(void)
{
  struct mc_perf_opts o;
  char s[512];

  mc_perf_opts_init(&o);
  o.min_bytes = 8;
  o.max_bytes = 128 << 20;
  o.step_factor = 2;
  mc_perf_fmt_params(s, sizeof(s), &o);
  MC_T_EQ_STR(s, "# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: "
                 "1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0");
  mc_perf_opts_init(&o);
  mc_perf_fmt_params(s, sizeof(s), &o);
  MC_T_CONTAINS(s, "minBytes 33554432 maxBytes 33554432 step: 1048576(bytes)");

  mc_perf_fmt_device(s, sizeof(s), 0, 0, 4242, "vm", 0, "meshccl host memory");
  MC_T_EQ_STR(s,
              "#  Rank  0 Group  0 Pid   4242 on         vm device  0 [host] meshccl host memory");
  mc_perf_fmt_device(s, sizeof(s), 3, 1, 4245, "vm", 3, "meshccl host memory");
  MC_T_EQ_STR(s,
              "#  Rank  3 Group  1 Pid   4245 on         vm device  3 [host] meshccl host memory");

  mc_perf_fmt_header(s, sizeof(s), 0, false);
  MC_T_EQ_STR(s, "#                                                              out-of-place      "
                 "                 in-place          ");
  mc_perf_fmt_header(s, sizeof(s), 1, false);
  MC_T_EQ_STR(s, "#       size         count      type   redop    root     time   algbw   busbw  "
                 "#wrong     time   algbw   busbw  #wrong ");
  mc_perf_fmt_header(s, sizeof(s), 2, false);
  MC_T_EQ_STR(s, "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)  "
                 "           (us)  (GB/s)  (GB/s)         ");
  mc_perf_fmt_header(s, sizeof(s), 1, true);
  MC_T_CONTAINS(s, "root  cputime   algbw");

  mc_perf_fmt_row_start(s, sizeof(s), 33554432, 8388608, "float", "sum", -1);
  MC_T_EQ_STR(s, "    33554432       8388608     float     sum      -1");
  mc_perf_fmt_row_result(s, sizeof(s), 3117.25, 10.764, 16.146, true, 0);
  MC_T_EQ_STR(s, "  3117.25   10.76   16.15       0");
  mc_perf_fmt_row_result(s, sizeof(s), 12.5, 0.0006, 0.0009, false, 0);
  MC_T_EQ_STR(s, "    12.50    0.00    0.00    N/A");
  mc_perf_fmt_row_result(s, sizeof(s), 123456.0, 1.0, 1.0, true, 3);
  MC_T_EQ_STR(s, "   123456    1.00    1.00       3");

  mc_perf_fmt_footer(s, sizeof(s), 0, 0, 0);
  MC_T_EQ_STR(s, "# Out of bounds values : 0 OK");
  mc_perf_fmt_footer(s, sizeof(s), 0, 2, 0);
  MC_T_EQ_STR(s, "# Out of bounds values : 2 FAILED");
  mc_perf_fmt_footer(s, sizeof(s), 1, 0, 5.64721);
  MC_T_EQ_STR(s, "# Avg bus bandwidth    : 5.64721 ");
}

/* Writes a report of one row with the JSON functions into the test's tmp file; returns its text. */
static const char *json_run(bool complete, const char *path)
{
  struct mc_perf_opts o;
  struct mc_perf_json js;
  char *argv[] = {"meshccl-perf", "all_reduce", "-J", "a\"b/c.json"};
  char *envp[] = {"A=1", "TAB=x\ty", "CUT=abc\001def", "MESHCCL_SECRET=s", NULL};
  FILE *f;

  mc_perf_opts_init(&o);
  o.min_bytes = 8;
  o.max_bytes = 64;
  o.step_factor = 8;
  f = fopen(path, "w");
  MC_T_TRUE(f != NULL);
  if (f == NULL)
    return "";
  mc_perf_json_begin(&js, f, 0, 4, argv, envp, 23007);
  mc_perf_json_config(&js, &o);
  mc_perf_json_device(&js, 0, 0, 10, "vm", 0, "host", "meshccl host memory");
  mc_perf_json_device(&js, 1, 1, 11, "vm2", 1, "host", "meshccl host memory");
  mc_perf_json_config_end(&js);
  mc_perf_json_results(&js);
  mc_perf_json_row_start(&js, 8, 2, "float", "sum", -1);
  mc_perf_json_row_result(&js, false, false, 10.5, 0.5, 0.5, true, 0);
  if (complete) {
    mc_perf_json_row_result(&js, true, false, 11.0, 0.25, 0.25, false, 0);
    mc_perf_json_row_end(&js, 20, "");
    mc_perf_json_footer(&js, 0, 0.375, -1.0);
    mc_perf_json_errors(&js, "");
  }
  mc_perf_json_finish(&js, 3600);
  fclose(f);
  return mc_t_read_file(path);
}

/* The report byte for byte as nccl-tests' util.cu writes it: keys, order, value forms. */
static void json_report(void)
{
  char path[512];
  const char *text;

  setenv("TZ", "UTC", 1);
  tzset();
  mc_t_tmp_path("perf.json", path, sizeof(path));
  MC_T_EQ_STR(json_run(true, path),
              "{\"version\":2,\"start_time\":\"1970-01-01 00:00:00\","
              "\"args\":[\"meshccl-perf\",\"all_reduce\",\"-J\",\"a\\\"b\\/c.json\"],"
              "\"env\":[\"A=1\",\"TAB=x\\ty\",\"CUT=abc\",\"MESHCCL_SECRET=<redacted>\"],\"nccl_"
              "version\":23007,"
              "\"config\":{\"nthreads\":1,\"ngpus\":1,\"minimum_bytes\":8,\"maximum_bytes\":64,"
              "\"step_factor\":8,\"warmup_iters\":1,\"iterations\":20,\"aggregated_iterations\":1,"
              "\"validation\":1,\"graph\":0,\"blocking_collectives\":\"false\","
              "\"per_iter_timing\":\"false\",\"parallel_init\":\"false\","
              "\"devices\":[{\"rank\":0,\"group\":0,\"pid\":10,\"hostname\":\"vm\",\"device\":0,"
              "\"device_hex\":\"host\",\"device_info\":\"meshccl host memory\"},"
              "{\"rank\":1,\"group\":1,\"pid\":11,\"hostname\":\"vm2\",\"device\":1,"
              "\"device_hex\":\"host\",\"device_info\":\"meshccl host memory\"}]},"
              "\"results\":[{\"size\":8,\"count\":2,\"type\":\"float\",\"redop\":\"sum\","
              "\"root\":\"    -1\",\"out_of_place\":{\"time\":10.500000,\"alg_bw\":0.500000,"
              "\"bus_bw\":0.500000,\"nwrong\":0.000000},\"in_place\":{\"time\":11.000000,"
              "\"alg_bw\":0.250000,\"bus_bw\":0.250000,\"nwrong\":null},"
              "\"actual_iterations\":20,\"experiment_name\":\"\"}],"
              "\"out_of_bounds\":{\"count\":0,\"okay\":\"true\"},"
              "\"average_bus_bandwidth\":{\"bandwidth\":0.375000,\"okay\":\"unchecked\"},"
              "\"errors\":[\"\"],\"end_time\":\"1970-01-01 01:00:00\"}");
  /* A run that failed mid-row: closed as nccl-tests' jsonOutputFinalize closes it, the row,
   * the results and the top object, without end_time. */
  text = json_run(false, path);
  MC_T_CONTAINS(text, "\"results\":[{\"size\":8,\"count\":2,\"type\":\"float\","
                      "\"redop\":\"sum\",\"root\":\"    -1\",\"out_of_place\":{\"time\":10.500000,"
                      "\"alg_bw\":0.500000,\"bus_bw\":0.500000,\"nwrong\":0.000000}}]}");
  MC_T_TRUE(strstr(text, "end_time") == NULL);
  unsetenv("TZ");
  tzset();
  mc_t_tmp_cleanup();
}

/* The config's step key, the okay verdicts, nan, and the first line's version. */
static void json_values(void)
{
  char path[512];
  char s[256];
  struct mc_perf_opts o;
  struct mc_perf_json js;
  const char *text;
  FILE *f;

  mc_t_tmp_path("values.json", path, sizeof(path));
  mc_perf_opts_init(&o);
  o.blocking = 1;
  f = fopen(path, "w");
  MC_T_TRUE(f != NULL);
  if (f == NULL)
    return;
  mc_perf_json_begin(&js, f, 0, 0, NULL, NULL, 23007);
  mc_perf_json_config(&js, &o);
  mc_perf_json_config_end(&js);
  mc_perf_json_results(&js);
  mc_perf_json_row_start(&js, 4, 1, "int8", "none", 0);
  mc_perf_json_row_result(&js, false, true, 0.0 / 0.0, 1.0, 2.0, true, 3);
  mc_perf_json_row_end(&js, 5, "x");
  mc_perf_json_footer(&js, 2, 10.0, 11.0);
  mc_perf_json_errors(&js, NULL);
  mc_perf_json_finish(&js, 0);
  fclose(f);
  text = mc_t_read_file(path);
  MC_T_CONTAINS(text, "\"args\":[],\"env\":[],\"nccl_version\":23007,");
  MC_T_CONTAINS(text, "\"maximum_bytes\":33554432,\"step_bytes\":1048576,\"warmup_iters\":1,");
  MC_T_CONTAINS(text, "\"blocking_collectives\":\"true\",");
  MC_T_CONTAINS(text, "\"devices\":[]},\"results\":[");
  MC_T_CONTAINS(text, "\"root\":\"     0\",\"out_of_place\":{\"cpu_time\":\"nan\","
                      "\"alg_bw\":1.000000,\"bus_bw\":2.000000,\"nwrong\":3.000000},"
                      "\"actual_iterations\":5,\"experiment_name\":\"x\"}]");
  /* 10 >= 90% of 11: okay "true" as a string, as nccl-tests writes booleans */
  MC_T_CONTAINS(text, "\"out_of_bounds\":{\"count\":2,\"okay\":\"false\"},"
                      "\"average_bus_bandwidth\":{\"bandwidth\":10.000000,\"okay\":\"true\"},"
                      "\"errors\":[],\"end_time\":");
  mc_perf_json_quote(s, sizeof(s), "caf\xc3\xa9 au lait");
  MC_T_EQ_STR(s, "\"caf\"");
  MC_T_EQ_STR(mc_perf_env_redact("MESHCCL_SECRET=k3y", s, sizeof(s)), "MESHCCL_SECRET=<redacted>");
  MC_T_EQ_STR(mc_perf_env_redact("hf_token=abc=d", s, sizeof(s)), "hf_token=<redacted>");
  MC_T_EQ_STR(mc_perf_env_redact("NCCL_DEBUG=SECRET", s, sizeof(s)), "NCCL_DEBUG=SECRET");
  MC_T_EQ_STR(mc_perf_env_redact("NOEQUALS", s, sizeof(s)), "NOEQUALS");
  mc_perf_fmt_version(s, sizeof(s), 23007, 23007);
  MC_T_EQ_STR(s, "# nccl-tests version 2.19.1 nccl-headers=23007 nccl-library=23007");
  mc_t_tmp_cleanup();
}

static void element_encodings(void)
{
  uint8_t b[16];

  /* Small integers are exact in every type. */
  for (int t = 0; t < ncclNumTypes; t++) {
    for (int v = 0; v <= 8; v++) { /* e5m2 has 2 mantissa bits: 9 is not exact */
      mc_perf_store(t, b, 1, v);
      MC_T_EQ_INT((long long)mc_perf_load(t, b, 1), v);
    }
  }
  mc_perf_store(ncclHalf, b, 0, 65504.0);
  MC_T_TRUE(mc_perf_load(ncclHalf, b, 0) == 65504.0);
  mc_perf_store(ncclHalf, b, 0, 1e6);
  MC_T_TRUE(isinf(mc_perf_load(ncclHalf, b, 0)));
  mc_perf_store(ncclHalf, b, 0, -0.5);
  MC_T_EQ_INT(((uint16_t *)b)[0], 0xb800);
  mc_perf_store(ncclHalf, b, 0, 1.0 / 65536);         /* subnormal: 2^-16 */
  MC_T_EQ_INT(((uint16_t *)b)[0], 0x0100);            /* 256 * 2^-24 */
  mc_perf_store(ncclBfloat16, b, 0, 1.0 + 1.0 / 256); /* a tie: rounds to even, 1.0 */
  MC_T_EQ_INT(((uint16_t *)b)[0], 0x3f80);
  mc_perf_store(ncclFloat8e4m3, b, 0, 1000.0); /* saturates */
  MC_T_EQ_INT(b[0], 0x7e);
  MC_T_TRUE(mc_perf_load(ncclFloat8e4m3, b, 0) == 448.0);
  mc_perf_store(ncclFloat8e5m2, b, 0, 1e6);
  MC_T_TRUE(mc_perf_load(ncclFloat8e5m2, b, 0) == 57344.0);
  mc_perf_store(ncclFloat8e4m3, b, 0, 17.0); /* 3 mantissa bits: 16 or 18, tie to even 16 */
  MC_T_TRUE(mc_perf_load(ncclFloat8e4m3, b, 0) == 16.0);
  mc_perf_store(ncclInt8, b, 0, -3);
  MC_T_EQ_INT(mc_perf_load(ncclInt8, b, 0), -3);
}

static void expected_results(void)
{
  struct mc_perf_counts c;
  int32_t exp[64];
  int8_t exp8[4];
  float expf[64];

  /* all_reduce sum over 4 ranks: element i = sum_r (3i + 5r) % 8. */
  mc_perf_coll_counts(MC_PERF_ALL_REDUCE, 16, 4, 4, &c);
  mc_perf_fill_expected(MC_PERF_ALL_REDUCE, ncclInt32, ncclSum, 0, 0, 4, &c, 0, exp);
  MC_T_EQ_INT(exp[0], 0 + 5 + 2 + 7);
  MC_T_EQ_INT(exp[1], 3 + 0 + 5 + 2);
  /* prod of 16 alternating 1s and 2s is 2^8: wraps to 0 in int8, exact in float. */
  mc_perf_coll_counts(MC_PERF_ALL_REDUCE, 4, 1, 16, &c);
  mc_perf_fill_expected(MC_PERF_ALL_REDUCE, ncclInt8, ncclProd, 0, 0, 16, &c, 0, exp8);
  MC_T_EQ_INT(exp8[0], 0);
  mc_perf_coll_counts(MC_PERF_ALL_REDUCE, 16, 4, 16, &c);
  mc_perf_fill_expected(MC_PERF_ALL_REDUCE, ncclFloat, ncclProd, 0, 0, 16, &c, 0, expf);
  MC_T_TRUE(expf[0] == 256.0f);
  /* integer avg: sum, then a truncating division. */
  mc_perf_coll_counts(MC_PERF_ALL_REDUCE, 16, 4, 4, &c);
  mc_perf_fill_expected(MC_PERF_ALL_REDUCE, ncclInt32, ncclAvg, 0, 0, 4, &c, 0, exp);
  MC_T_EQ_INT(exp[0], 14 / 4);
  /* mulsum: odd ranks count twice. */
  mc_perf_fill_expected(MC_PERF_ALL_REDUCE, ncclInt32, MC_PERF_MULSUM, 0, 0, 4, &c, 0, exp);
  MC_T_EQ_INT(exp[0], 0 + 2 * 5 + 2 + 2 * 7);
  /* all_gather: block j is rank j's input. */
  mc_perf_coll_counts(MC_PERF_ALL_GATHER, 32, 4, 4, &c); /* 2 per rank */
  mc_perf_fill_expected(MC_PERF_ALL_GATHER, ncclInt32, ncclSum, 0, 1, 4, &c, 0, exp);
  MC_T_EQ_INT(exp[2], (int)mc_perf_input_value(ncclSum, 1, 0, 0));
  MC_T_EQ_INT(exp[7], (int)mc_perf_input_value(ncclSum, 3, 1, 0));
  /* reduce_scatter: rank 2 gets elements 4 and 5 of the reduction. */
  mc_perf_coll_counts(MC_PERF_REDUCE_SCATTER, 32, 4, 4, &c);
  mc_perf_fill_expected(MC_PERF_REDUCE_SCATTER, ncclInt32, ncclMax, 0, 2, 4, &c, 0, exp);
  MC_T_EQ_INT(exp[0], 6); /* max of (12 + 5r) % 8 = 4, 1, 6, 3 */
  /* alltoall: rank 1's block p is rank p's block 1. */
  mc_perf_coll_counts(MC_PERF_ALLTOALL, 32, 4, 4, &c);
  mc_perf_fill_expected(MC_PERF_ALLTOALL, ncclInt32, ncclSum, 0, 1, 4, &c, 0, exp);
  MC_T_EQ_INT(exp[6], (int)mc_perf_input_value(ncclSum, 3, 2, 0));
  /* sendrecv: from the previous rank; broadcast: the root's input. */
  mc_perf_coll_counts(MC_PERF_SENDRECV, 16, 4, 4, &c);
  mc_perf_fill_expected(MC_PERF_SENDRECV, ncclInt32, ncclSum, 0, 0, 4, &c, 0, exp);
  MC_T_EQ_INT(exp[1], (int)mc_perf_input_value(ncclSum, 3, 1, 0));
  mc_perf_fill_expected(MC_PERF_BROADCAST, ncclInt32, ncclSum, 2, 0, 4, &c, 0, exp);
  MC_T_EQ_INT(exp[1], (int)mc_perf_input_value(ncclSum, 2, 1, 0));
}

static void wrong_elements_are_counted(void)
{
  float got[8];
  float exp[8];
  int64_t gi[4] = {1, 2, 3, 4};
  int64_t ei[4] = {1, 2, 3, 5};

  for (int i = 0; i < 8; i++)
    got[i] = exp[i] = (float)(i * 10);
  MC_T_EQ_INT(mc_perf_count_wrong(ncclFloat, got, exp, 8), 0);
  got[3] *= 1.000001f; /* within float's 1e-5 */
  MC_T_EQ_INT(mc_perf_count_wrong(ncclFloat, got, exp, 8), 0);
  got[5] += 1.0f;
  got[6] = 0;
  MC_T_EQ_INT(mc_perf_count_wrong(ncclFloat, got, exp, 8), 2);
  MC_T_EQ_INT(mc_perf_count_wrong(ncclInt64, gi, ei, 4), 1);
}

/* nccl-tests' later flags: -S -x -D -V -M -u, their long names and GPU-only no-ops (their
 * refused values are in usage_errors). */
static void gpu_era_flags(void)
{
  struct mc_perf_opts o;
  char err[MC_PERF_ERR_LEN];

  MC_T_EQ_INT(parse_line("all_reduce", &o, err), MC_PERF_EXIT_OK);
  MC_T_EQ_INT(o.report_timestamps, 0);
  MC_T_EQ_INT(o.cta_policy, -1);
  MC_T_EQ_INT(o.device_impl, 0);
  MC_T_EQ_INT(o.device_cta_count, 16);
  MC_T_EQ_INT(o.memory_report, 0);
  MC_T_EQ_INT(o.unalign, 0);
  MC_T_EQ_INT(parse_line("gather -S 1 -x 2 -D 0 -V 32 -M 1 -u 3", &o, err), MC_PERF_EXIT_OK);
  MC_T_EQ_INT(o.coll, MC_PERF_GATHER);
  MC_T_EQ_INT(o.report_timestamps, 1);
  MC_T_EQ_INT(o.cta_policy, 2);
  MC_T_EQ_INT(o.device_cta_count, 32);
  MC_T_EQ_INT(o.memory_report, 1);
  MC_T_EQ_INT(o.unalign, 3);
  MC_T_EQ_INT(parse_line("scatter_perf --report_timestamps 1 --cta_policy 1 "
                         "--device_implementation 1 --local_register 2 --device_cta_count 8 "
                         "--memory 1 --unalign 7",
                         &o, err),
              MC_PERF_EXIT_OK);
  MC_T_EQ_INT(o.coll, MC_PERF_SCATTER);
  MC_T_EQ_INT(o.device_impl, 1);
  MC_T_EQ_INT(o.memory_report, 1);
  MC_T_EQ_INT(o.unalign, 7);
  MC_T_EQ_INT(parse_line("alltoallv --memory_report 1", &o, err), MC_PERF_EXIT_OK);
  MC_T_EQ_INT(o.coll, MC_PERF_ALLTOALLV);
  MC_T_EQ_INT(o.memory_report, 1);
  MC_T_EQ_INT(parse_line("hypercube_perf", &o, err), MC_PERF_EXIT_OK);
  MC_T_EQ_INT(o.coll, MC_PERF_HYPERCUBE);
}

/* 1000 bytes of float over 3 ranks: 83 per rank, 80 in 16-byte multiples;
 * hypercube: 62 doubles. */
static const struct counts_case new_counts[] = {
    {MC_PERF_GATHER, 1000, 4, 3, 80, 240, 80, 80, 0},
    {MC_PERF_SCATTER, 1000, 4, 3, 240, 80, NA, 0, 80},
    {MC_PERF_HYPERCUBE, 1000, 8, 2, 62, 124, NA, NA, NA},
    {MC_PERF_ALLTOALLV, 1000, 4, 3, 249, 249, 83, NA, NA},
};

static const struct factor_case new_factors[] = {
    {MC_PERF_GATHER, 4, 0.75},
    {MC_PERF_SCATTER, 4, 0.75},
    {MC_PERF_ALLTOALLV, 4, 0.75},
    {MC_PERF_HYPERCUBE, 4, 1.0},
};
/* gather: count * n bytes; hypercube: count * (n - 1) bytes, busbw = algbw. */
static const struct bw_case new_bw[] = {
    {MC_PERF_GATHER, 250000000, 4, 4, 2.0, 2.0, 1.5},
    {MC_PERF_HYPERCUBE, 250000000, 4, 4, 1.0, 3.0, 3.0},
};

/* gather, scatter, alltoallv, hypercube: nccl-tests' counts (16-byte blocks) and bandwidths. */
static void new_collectives_counts_and_bandwidth(void)
{
  expect_counts(new_counts, sizeof(new_counts) / sizeof(new_counts[0]));
  /* Per-peer counts: (1 + (from + to) % n) / n of the block. */
  MC_T_EQ_INT(mc_perf_alltoallv_count(90, 0, 0, 3), 30);
  MC_T_EQ_INT(mc_perf_alltoallv_count(90, 0, 1, 3), 60);
  MC_T_EQ_INT(mc_perf_alltoallv_count(90, 1, 1, 3), 90);
  MC_T_EQ_INT(mc_perf_alltoallv_count(90, 2, 2, 3), 60);

  expect_bandwidth(new_factors, sizeof(new_factors) / sizeof(new_factors[0]), new_bw,
                   sizeof(new_bw) / sizeof(new_bw[0]));
}

static void new_collectives_expected(void)
{
  struct mc_perf_counts c;
  float e[64];

  /* scatter from root 1 over 2 ranks: rank 0 gets block 0 of rank 1's input. */
  mc_perf_coll_counts(MC_PERF_SCATTER, 128, 4, 2, &c); /* 16 per rank */
  mc_perf_fill_expected(MC_PERF_SCATTER, ncclFloat, ncclSum, 1, 1, 2, &c, 5, e);
  for (size_t i = 0; i < c.recv_count; i++)
    MC_T_TRUE(e[i] == (float)mc_perf_input_value(ncclSum, 1, 16 + i, 5));
  /* alltoallv on 2 ranks, 8 per block: rank 1 gets 4 from rank 0, then 4 zeros; 8 from itself. */
  mc_perf_coll_counts(MC_PERF_ALLTOALLV, 64, 4, 2, &c);
  mc_perf_fill_expected(MC_PERF_ALLTOALLV, ncclFloat, ncclSum, 0, 1, 2, &c, 3, e);
  MC_T_EQ_INT(mc_perf_alltoallv_count(8, 0, 1, 2), 8);
  MC_T_EQ_INT(mc_perf_alltoallv_count(8, 1, 1, 2), 4);
  for (size_t i = 0; i < 8; i++)
    MC_T_TRUE(e[i] == (float)mc_perf_input_value(ncclSum, 0, 8 + i, 3));
  for (size_t i = 0; i < 4; i++)
    MC_T_TRUE(e[8 + i] == (float)mc_perf_input_value(ncclSum, 1, 8 + i, 3));
  for (size_t i = 4; i < 8; i++)
    MC_T_TRUE(e[8 + i] == 0.0f);
}

/* -S, NCCL_TESTS_MIN_BW and -M lines, exactly as nccl-tests prints them. */
static void timestamps_min_bw_memory_lines(void)
{
  char s[512];

  mc_perf_fmt_header_ts(s, sizeof(s), 1, false, true);
  MC_T_EQ_STR(s, "#       size         count      type   redop    root     time   algbw   busbw  "
                 "#wrong     time   algbw   busbw  #wrong           timestamp");
  mc_perf_fmt_header_ts(s, sizeof(s), 2, false, true);
  MC_T_EQ_STR(s, "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)  "
                 "           (us)  (GB/s)  (GB/s)           %Y-%m-%d %H:%M:%S");
  mc_perf_fmt_timestamp(s, sizeof(s), 0);
  MC_T_EQ_INT((long long)strlen(s), 21);
  MC_T_TRUE((s[0] == ' ') && (s[1] == ' ') && (s[6] == '-') && (s[15] == ':'));

  mc_perf_fmt_bw_footer(s, sizeof(s), 5.64721, -1);
  MC_T_EQ_STR(s, "# Avg bus bandwidth    : 5.64721 ");
  mc_perf_fmt_bw_footer(s, sizeof(s), 9.5, 10);
  MC_T_EQ_STR(s, "# Avg bus bandwidth    : 9.5 OK");
  mc_perf_fmt_bw_footer(s, sizeof(s), 8.9, 10);
  MC_T_EQ_STR(s, "# Avg bus bandwidth    : 8.9 FAILED");
  MC_T_TRUE(!mc_perf_bw_failed(0.0, -1));
  MC_T_TRUE(mc_perf_bw_failed(0.5, 1e9));

  mc_perf_fmt_memory(s, sizeof(s), 1.6 * 1024 * 1024, 15 * 1024, 0);
  MC_T_EQ_STR(s, "# Host memory usage    : Initialization 1.60 MB | User-Allocated 15.0 KB | "
                 "Collective 0.00 B | Total  1.61 MB");
}

/* NCCL_TESTS_SPLIT's grammar (nccl-tests' README) and NCCL_TESTS_SPLIT_MASK. */
static void split_colors(void)
{
  char err[MC_PERF_ERR_LEN];
  int color = -1;

  MC_T_EQ_INT(mc_perf_split_color(NULL, NULL, 5, &color, err, sizeof(err)), 0);
  MC_T_EQ_INT(color, 0);
  MC_T_EQ_INT(mc_perf_split_color("MOD 2", NULL, 5, &color, err, sizeof(err)), 0);
  MC_T_EQ_INT(color, 1);
  MC_T_EQ_INT(mc_perf_split_color("mod2", NULL, 4, &color, err, sizeof(err)), 0);
  MC_T_EQ_INT(color, 0);
  MC_T_EQ_INT(mc_perf_split_color("%3", NULL, 5, &color, err, sizeof(err)), 0);
  MC_T_EQ_INT(color, 2);
  MC_T_EQ_INT(mc_perf_split_color("AND 0x1", NULL, 3, &color, err, sizeof(err)), 0);
  MC_T_EQ_INT(color, 1);
  MC_T_EQ_INT(mc_perf_split_color("&0b10", NULL, 6, &color, err, sizeof(err)), 0);
  MC_T_EQ_INT(color, 2);
  MC_T_EQ_INT(mc_perf_split_color("OR 0x7", NULL, 9, &color, err, sizeof(err)), 0);
  MC_T_EQ_INT(color, 15);
  MC_T_EQ_INT(mc_perf_split_color("|1", NULL, 2, &color, err, sizeof(err)), 0);
  MC_T_EQ_INT(color, 3);
  MC_T_EQ_INT(mc_perf_split_color("DIV 8", NULL, 17, &color, err, sizeof(err)), 0);
  MC_T_EQ_INT(color, 2);
  MC_T_EQ_INT(mc_perf_split_color("/2", NULL, 3, &color, err, sizeof(err)), 0);
  MC_T_EQ_INT(color, 1);
  /* The mask wins over NCCL_TESTS_SPLIT and is hexadecimal, as in nccl-tests. */
  MC_T_EQ_INT(mc_perf_split_color("MOD 2", "10", 31, &color, err, sizeof(err)), 0);
  MC_T_EQ_INT(color, 16);
  MC_T_EQ_INT(mc_perf_split_color(NULL, "0x3", 6, &color, err, sizeof(err)), 0);
  MC_T_EQ_INT(color, 2);

  MC_T_EQ_INT(mc_perf_split_color("XOR 1", NULL, 0, &color, err, sizeof(err)), -1);
  MC_T_CONTAINS(err, "meshccl-perf: invalid NCCL_TESTS_SPLIT 'XOR 1'");
  MC_T_EQ_INT(mc_perf_split_color("MOD 0", NULL, 0, &color, err, sizeof(err)), -1);
  MC_T_CONTAINS(err, "not 0 for MOD and DIV");
  MC_T_EQ_INT(mc_perf_split_color("MOD two", NULL, 0, &color, err, sizeof(err)), -1);
  MC_T_EQ_INT(mc_perf_split_color(NULL, "zz", 0, &color, err, sizeof(err)), -1);
  MC_T_CONTAINS(err, "invalid NCCL_TESTS_SPLIT_MASK 'zz'");
}

static void min_bw_values(void)
{
  char err[MC_PERF_ERR_LEN];
  double v = 0;

  MC_T_EQ_INT(mc_perf_parse_min_bw(NULL, &v, err, sizeof(err)), 0);
  MC_T_TRUE(v == -1.0);
  MC_T_EQ_INT(mc_perf_parse_min_bw("1e9", &v, err, sizeof(err)), 0);
  MC_T_TRUE(v == 1e9);
  MC_T_EQ_INT(mc_perf_parse_min_bw("fast", &v, err, sizeof(err)), -1);
  MC_T_EQ_STR(err, "meshccl-perf: invalid NCCL_TESTS_MIN_BW 'fast' (a bus bandwidth in GB/s, e.g. "
                   "10 or 1e9)");
  MC_T_EQ_INT(mc_perf_parse_min_bw("-1", &v, err, sizeof(err)), -1);
}

MC_T_MAIN(defaults_are_nccl_tests, short_and_long_flags, sizes, errors_are_clear_and_exit_2,
          counts_round_as_nccl_tests, bandwidth_formulas, sweep, number_format, table_lines,
          json_report, json_values, element_encodings, expected_results, wrong_elements_are_counted,
          gpu_era_flags, new_collectives_counts_and_bandwidth, new_collectives_expected,
          timestamps_min_bw_memory_lines, split_colors, min_bw_values)
