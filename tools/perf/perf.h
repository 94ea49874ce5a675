/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-perf's pure logic, usable without a communicator: command line
 * (nccl-tests' flags and defaults), the size sweep, per-collective element
 * counts and bus-bandwidth factors, the text and JSON result lines, and the
 * data check (deterministic per-rank inputs, host-side expected results,
 * wrong-element counts). tools/meshccl_perf.c runs the collectives around it;
 * tests/unit/test_perf_format.c tests it alone.
 *
 * Mirrors nccl-tests (src/common.cu, src/util.cu, src/<coll>.cu) in flags,
 * output layout and formulas; the code is our own.
 */
#ifndef MC_PERF_H
#define MC_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nccl.h"

enum mc_perf_coll {
  MC_PERF_ALL_REDUCE = 0,
  MC_PERF_ALL_GATHER,
  MC_PERF_REDUCE_SCATTER,
  MC_PERF_BROADCAST,
  MC_PERF_REDUCE,
  MC_PERF_ALLTOALL,
  MC_PERF_SENDRECV,
  MC_PERF_GATHER,
  MC_PERF_SCATTER,
  MC_PERF_ALLTOALLV,
  MC_PERF_HYPERCUBE,
  MC_PERF_N_COLLS
};

/* Exit codes of meshccl-perf. */
#define MC_PERF_EXIT_OK    0 /* ran; no wrong element */
#define MC_PERF_EXIT_FAIL  1 /* wrong elements, a failed call, the -T timeout, NCCL_TESTS_MIN_BW */
#define MC_PERF_EXIT_USAGE 2 /* bad command line */

#define MC_PERF_ALL     -1         /* datatype / op / root "all" */
#define MC_PERF_MULSUM  ncclNumOps /* op index of premulsum (nccl-tests' "mulsum") */
#define MC_PERF_N_OPS   (ncclNumOps + 1)
#define MC_PERF_ERR_LEN 256

/* The command line, nccl-tests' names and defaults. */
struct mc_perf_opts {
  enum mc_perf_coll coll;
  size_t min_bytes;        /* -b, default 32M */
  size_t max_bytes;        /* -e, default 32M */
  size_t step_bytes;       /* -i, default 1M */
  size_t step_factor;      /* -f, default 1 (then step_bytes is used) */
  int iters;               /* -n, default 20 */
  int warmup_iters;        /* -w, default 1 */
  int agg_iters;           /* -m, default 1 */
  int run_cycles;          /* -N, default 1; 0 = forever */
  int check;               /* -c, default 1: number of checked runs per size */
  int datatype;            /* -d, ncclDataType_t or MC_PERF_ALL; default float */
  int op;                  /* -o, ncclRedOp_t, MC_PERF_MULSUM or MC_PERF_ALL; default sum */
  int root;                /* -r, default 0; -1 = every root in turn */
  int blocking;            /* -z: barrier after every collective */
  int cudagraph;           /* -G: accepted, ignored (no CUDA graphs on host memory) */
  int report_cputime;      /* -C */
  int report_timestamps;   /* -S: a timestamp column after the in-place results */
  int cta_policy;          /* -x: accepted, no-op (no CTAs on host); -1 = not set */
  int device_impl;         /* -D: only 0 (NCCL's implementation); GPU device kernels */
  int device_cta_count;    /* -V: accepted, no-op (no CTAs on host); default 16 */
  int memory_report;       /* -M: print the memory usage line */
  int unalign;             /* -u: buffers start this many elements past an aligned address */
  int average;             /* -a: 0 rank 0, 1 average (default), 2 min, 3 max across ranks */
  int timeout;             /* -T seconds, 0 = none */
  int local_register;      /* -R: 1 ncclCommRegister, 2 symmetric windows (ncclMemAlloc buffers) */
  int parallel_init;       /* -p: accepted, no-op (one rank per process) */
  int stream_null;         /* -y: accepted, no-op */
  int nthreads;            /* -t: only 1 */
  int ngpus;               /* -g: only 1 */
  const char *output_file; /* -J, JSON when it ends in .json; NULL = none */
  bool help;               /* -h */
};

/* What a collective moves for a given size (nccl-tests' getCollByteCount). */
struct mc_perf_counts {
  size_t send_count;   /* elements in the send buffer */
  size_t recv_count;   /* elements in the receive buffer (the checked ones) */
  size_t param_count;  /* the count argument of the call ("count" column) */
  size_t send_inplace; /* in-place: send buffer = recv buffer + send_inplace * rank elements */
  size_t recv_inplace; /* in-place: receive buffer offset per rank, elements */
};

/* The bytes of c's larger buffer (send or receive) of type_size elements:
 * the "size" column, and the extent a call's buffers take. */
size_t mc_perf_counts_bytes(const struct mc_perf_counts *c, size_t type_size);

/* Name on the command line and in messages: "all_reduce", ... */
const char *mc_perf_coll_name(enum mc_perf_coll coll);
/* Whether the collective takes an op / a root (else the table says none / -1). */
bool mc_perf_coll_has_op(enum mc_perf_coll coll);
bool mc_perf_coll_has_root(enum mc_perf_coll coll);

/* nccl-tests' type and op names; NULL when out of range. */
const char *mc_perf_type_name(int datatype);
size_t mc_perf_type_size(int datatype);
const char *mc_perf_op_name(int op);

/*
 * Parses "32", "1K", "1.5M", "2G" (binary units, nccl-tests' parsesize;
 * a trailing "B" is allowed). Returns 0, or -1 for anything else.
 */
int mc_perf_parse_size(const char *text, size_t *bytes_out);

/* Fills *opts with nccl-tests' defaults. */
void mc_perf_opts_init(struct mc_perf_opts *opts);

/*
 * Parses argv: the collective name first (argv[1]), then flags in short or
 * long form. Returns MC_PERF_EXIT_OK (opts->help set for -h) or
 * MC_PERF_EXIT_USAGE with one line in err ("meshccl-perf: ..."). Uses
 * getopt_long: resets optind, not thread-safe.
 */
int mc_perf_args_parse(int argc, char **argv, struct mc_perf_opts *opts, char *err, size_t err_len);

/* The usage text of meshccl-perf. */
void mc_perf_usage(FILE *f);

/* Next size of the sweep (times step_factor when > 1, else plus step_bytes). */
size_t mc_perf_next_size(const struct mc_perf_opts *opts, size_t bytes);

/*
 * Where in its buffers the call-th timed call of op_bytes runs: nccl-tests'
 * startColl moves each call op_bytes further, wrapping within max_bytes, so
 * that a small size does not find its data in the caches the previous call
 * left. meshccl-perf and mpi_perf both time so: the two see the same memory.
 */
size_t mc_perf_rotation_shift(size_t max_bytes, size_t op_bytes, size_t call);

/* Counts of coll for `bytes` of datatype over n_ranks (sizes rounded down as nccl-tests does). */
void mc_perf_coll_counts(enum mc_perf_coll coll, size_t bytes, size_t type_size, int n_ranks,
                         struct mc_perf_counts *out);

/*
 * alltoallv's per-peer counts: rank `from` sends rank `to` this many of the
 * chunk elements its block for `to` holds (from chunk/n to chunk: every pair
 * moves a different amount, deterministic on every rank).
 */
size_t mc_perf_alltoallv_count(size_t chunk, int from, int to, int n_ranks);

/* busbw / algbw: 2(n-1)/n, (n-1)/n or 1. */
double mc_perf_bus_factor(enum mc_perf_coll coll, int n_ranks);

/* algbw and busbw in GB/s (1e9 B/s) for a call of param_count elements taking sec seconds. */
void mc_perf_bandwidth(enum mc_perf_coll coll, size_t param_count, size_t type_size, int n_ranks,
                       double sec, double *algbw_out, double *busbw_out);

/*
 * Text of the result table. Each function writes one piece into buf
 * (NUL-terminated, truncated to buf_len) and returns the length it wrote.
 */
/* A number in exactly `width` columns: 2, 1 or 0 decimals as it grows, then %e (nccl-tests). */
int mc_perf_fmt_num(char *buf, size_t buf_len, double value, int width);
/* The "# nThread ..." line, without newline. */
int mc_perf_fmt_params(char *buf, size_t buf_len, const struct mc_perf_opts *opts);
/* "#  Rank  0 Group  0 Pid   1234 on       host device  0 [host] <name>" */
int mc_perf_fmt_device(char *buf, size_t buf_len, int rank, int group, int pid, const char *host,
                       int device, const char *name);
/* Header row `row` (0, 1 or 2) of the table, without newline. */
int mc_perf_fmt_header(char *buf, size_t buf_len, int row, bool cputime);
/* The same with -S: a right-aligned "timestamp" column (nccl-tests' writeResultHeader). */
int mc_perf_fmt_header_ts(char *buf, size_t buf_len, int row, bool cputime, bool timestamps);
/* The -S cell: " " + "YYYY-MM-DD HH:MM:SS" in 21 columns, local time of `when`. */
int mc_perf_fmt_timestamp(char *buf, size_t buf_len, long long when);
/* Start of a table row: size, count, type, redop, root. */
int mc_perf_fmt_row_start(char *buf, size_t buf_len, size_t bytes, size_t count, const char *type,
                          const char *op, int root);
/* One half of a row: time (us), algbw, busbw, #wrong (N/A when !checked). */
int mc_perf_fmt_row_result(char *buf, size_t buf_len, double time_us, double algbw, double busbw,
                           bool checked, int64_t wrong);
/* "# Out of bounds values : 0 OK" and "# Avg bus bandwidth    : 1.23 " (line 0 or 1). */
int mc_perf_fmt_footer(char *buf, size_t buf_len, int line, int n_errors, double avg_busbw);
/*
 * "# Avg bus bandwidth    : 1.23 OK" against NCCL_TESTS_MIN_BW (min_bw < 0: not set, the line
 * ends with a space): FAILED below 90% of min_bw, as nccl-tests.
 */
int mc_perf_fmt_bw_footer(char *buf, size_t buf_len, double avg_busbw, double min_bw);
/* Whether avg_busbw fails NCCL_TESTS_MIN_BW (min_bw < 0: never). */
bool mc_perf_bw_failed(double avg_busbw, double min_bw);
/*
 * -M: "# Host memory usage    : Initialization 1.20 MB | User-Allocated 96.00 MB | Collective
 * 0 B | Total  97.20 MB" (nccl-tests' writeMemInfo, host memory instead of GPU memory).
 */
int mc_perf_fmt_memory(char *buf, size_t buf_len, double init_bytes, double user_bytes,
                       double coll_bytes);

/*
 * nccl-tests' rank colours for sub-communicators: NCCL_TESTS_SPLIT_MASK=<hex> is
 * rank & mask; else NCCL_TESTS_SPLIT="<op><value>" with op AND (&), OR (|),
 * MOD (%) or DIV (/) and a decimal, 0x hex or 0b binary value, blanks allowed
 * ("MOD 2", "&0x1"). NULL for both: colour 0. Returns 0, or -1 with one line
 * in err naming the variable (nccl-tests would silently use colour 0).
 */
int mc_perf_split_color(const char *split, const char *mask, int rank, int *color_out, char *err,
                        size_t err_len);
/* NCCL_TESTS_MIN_BW (GB/s): -1 when text is NULL; -1 and a message in err when it is no number. */
int mc_perf_parse_min_bw(const char *text, double *min_bw_out, char *err, size_t err_len);

/*
 * JSON report (-J file.json), nccl-tests' (src/util.cu, JSON_FILE_VERSION 2): one object
 * written as the run goes, in this order of calls and keys:
 *
 *   begin        {"version":2,"start_time":"YYYY-MM-DD HH:MM:SS","args":[...],"env":[...],
 *                 "nccl_version":N,
 *   config       "config":{"nthreads","ngpus","minimum_bytes","maximum_bytes",
 *                 "step_factor" or "step_bytes","warmup_iters","iterations",
 *                 "aggregated_iterations","validation","graph","blocking_collectives",
 *                 "per_iter_timing","parallel_init","devices":[
 *   device       {"rank","group","pid","hostname","device","device_hex","device_info"}
 *   config_end   ]},
 *   results      "results":[
 *   row_start    {"size","count","type","redop","root",
 *   row_result   "out_of_place" (then "in_place"):{"time" or "cpu_time","alg_bw","bus_bw","nwrong"}
 *   row_end      "actual_iterations","experiment_name"}
 *   footer       ],"out_of_bounds":{"count","okay"},"average_bus_bandwidth":{"bandwidth","okay"}
 *   errors       ,"errors":[<ncclGetLastError>]
 *   finish       ,"end_time":"..."} (end_time only when every container was closed; an
 *                unfinished report, a failed run, is closed as nccl-tests closes it: a key
 *                waiting for its value gets null, open lists and objects are closed)
 *
 * Value forms are nccl-tests': integers as %d / %zu, doubles as %f ("nan" as a string), booleans
 * as the strings "true" and "false", root as the string "%6d" ("     0"), nwrong as a double or
 * null when not checked. Strings escape " \ / tab and newline and stop at the first other byte
 * outside 0x20-0x7e (nccl-tests' sanitizeJson), so the file is plain ASCII JSON. The one
 * difference: an infinite double is written as the string "inf" ("-inf"), where nccl-tests
 * writes a bare inf that no JSON parser reads.
 */
#define MC_PERF_JSON_VERSION   2
#define MC_PERF_JSON_MAX_DEPTH 8
#define MC_PERF_JSON_STR_MAX   2048 /* a string's escaped length, NUL included (nccl-tests') */

struct mc_perf_json {
  FILE *f;
  int depth;                                   /* open containers and pending keys */
  unsigned char state[MC_PERF_JSON_MAX_DEPTH]; /* enum in perf_format.c, one per level */
};

/* "YYYY-MM-DD HH:MM:SS", local time of `when` (nccl-tests' formatNow). */
int mc_perf_fmt_time(char *buf, size_t buf_len, long long when);
/* JSON string form of s: quoted, escaped, cut as nccl-tests' sanitizeJson cuts. */
int mc_perf_json_quote(char *buf, size_t buf_len, const char *s);

/*
 * An environment entry as the report's "env" list writes it: entry itself, or "NAME=<redacted>"
 * (in buf) when NAME contains SECRET, TOKEN, PASSWORD, PASSWD or CREDENTIAL (any case), so that
 * MESHCCL_SECRET does not end up in a results file. nccl-tests writes every value.
 */
const char *mc_perf_env_redact(const char *entry, char *buf, size_t buf_len);
/* Opens the top object: version, start_time (local time of start), args, env (NULL-terminated
 * "NAME=value" strings, secrets redacted), nccl_version. f stays the caller's. */
void mc_perf_json_begin(struct mc_perf_json *js, FILE *f, long long start, int argc, char **argv,
                        char **envp, int nccl_version);
/* "config":{...,"devices":[ */
void mc_perf_json_config(struct mc_perf_json *js, const struct mc_perf_opts *opts);
/* One device line's fields (nccl-tests parses its "#  Rank ..." line into these). */
void mc_perf_json_device(struct mc_perf_json *js, int rank, int group, int pid, const char *host,
                         int device, const char *device_hex, const char *device_info);
/* ]} closing devices and config. */
void mc_perf_json_config_end(struct mc_perf_json *js);
/* "results":[ */
void mc_perf_json_results(struct mc_perf_json *js);
void mc_perf_json_row_start(struct mc_perf_json *js, size_t bytes, size_t count, const char *type,
                            const char *op, int root);
void mc_perf_json_row_result(struct mc_perf_json *js, bool in_place, bool cputime, double time_us,
                             double algbw, double busbw, bool checked, int64_t wrong);
void mc_perf_json_row_end(struct mc_perf_json *js, int actual_iters, const char *experiment);
/* Closes results; out_of_bounds and average_bus_bandwidth ("okay": "unchecked" when min_bw < 0,
 * else whether avg_busbw >= 90% of min_bw). */
void mc_perf_json_footer(struct mc_perf_json *js, int n_errors, double avg_busbw, double min_bw);
/* "errors":[last_error] ([] when last_error is NULL). */
void mc_perf_json_errors(struct mc_perf_json *js, const char *last_error);
/* end_time (local time of `end`) when the top object is the only one open, then closes
 * everything still open. The file stays open. */
void mc_perf_json_finish(struct mc_perf_json *js, long long end);

/* "# nccl-tests version 2.19.1 nccl-headers=N nccl-library=N" (without newline). */
#define MC_PERF_NCCL_TESTS_VERSION "2.19.1" /* nccl-tests' src/common.h whose output we match */
int mc_perf_fmt_version(char *buf, size_t buf_len, int headers_version, int library_version);

/*
 * Data check. Inputs are small non-negative integers (exact in every type,
 * fp8 included), a function of (rank, element index, rep); prod uses 1 and 2
 * so products stay exact powers of two.
 */
/* Premulsum scalar of a rank (the same on every element): 1 or 2. */
double mc_perf_premul_scalar(int rank);
/* Input value of element `index` of `rank` for op in run `rep`. */
double mc_perf_input_value(int op, int rank, size_t index, int rep);
/* Writes count inputs of rank (elements first_index...) into buf. */
void mc_perf_fill_input(int datatype, int op, void *buf, size_t count, size_t first_index, int rank,
                        int rep);
/*
 * Writes the expected receive buffer of `rank` (c.recv_count elements) for coll. gather: only
 * the root's (the others receive nothing); alltoallv: the part of each block past the peer's
 * count is 0 (the receive buffer starts zeroed).
 */
void mc_perf_fill_expected(enum mc_perf_coll coll, int datatype, int op, int root, int rank,
                           int n_ranks, const struct mc_perf_counts *c, int rep, void *expected);
/* Elements of got that differ from expected: exact for integers, relative tolerance for floats. */
int64_t mc_perf_count_wrong(int datatype, const void *got, const void *expected, size_t count);
/* Relative tolerance used for a type (0 for integers). */
double mc_perf_tolerance(int datatype);

/* Element access in a type's own encoding (half, bfloat16, fp8 by bit manipulation). */
void mc_perf_store(int datatype, void *buf, size_t index, double value);
double mc_perf_load(int datatype, const void *buf, size_t index);

#endif /* MC_PERF_H */
