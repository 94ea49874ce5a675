/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host-memory bandwidth model of bench/limit (bench/limit.c, docs/TOOLS.md
 * "bench/limit"): from a host's measured figures (one core's copy and reduce
 * rates, a core pair's FIFO rates one way and both ways at once, its cache-line
 * round trip, the aggregate copy
 * rate of m threads), the best busbw (nccl-tests' definition, docs/TOOLS.md)
 * that an all-reduce, all-gather, reduce-scatter or broadcast of n ranks can
 * reach, per algorithm (FIFO ring through SHM slots, single copy from peers'
 * buffers). Pure arithmetic, no measurement: tests/unit/test_limit_model.c
 * checks it exactly. The formulas are in limit_model.c's header comment.
 */
#ifndef MC_LIMIT_MODEL_H
#define MC_LIMIT_MODEL_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MC_LIM_N_ANCHORS      3    /* copy/reduce rates at 1, 16 and 256 MiB */
#define MC_LIM_MAX_AGG        1024 /* aggregate rates known for 1..MC_LIM_MAX_AGG threads */
#define MC_LIM_DUPLEX_ANCHORS 3    /* the pair both ways at working sets of 1, 16 and 256 MiB */

enum mc_lim_coll {
  MC_LIM_ALL_REDUCE,
  MC_LIM_ALL_GATHER,
  MC_LIM_REDUCE_SCATTER,
  MC_LIM_BROADCAST,
  MC_LIM_N_COLLS
};
enum mc_lim_algo { MC_LIM_FIFO, MC_LIM_SINGLE, MC_LIM_N_ALGOS };

/* What the model needs of a host. Rates in GB/s (1e9 B/s), 0 where unknown. */
struct mc_lim_figures {
  double copy[MC_LIM_N_ANCHORS]; /* one core's memcpy: bytes copied per second */
  double red[MC_LIM_N_ANCHORS];  /* one core's float sum c = a + b: bytes of c per second (0: 2/3 of
                                    copy) */
  double pair;                   /* FIFO between two cores: bytes through per second */
  /* Two FIFOs between them run both ways at once (each core fills one and empties the other,
   * as every rank of a ring does): bytes per second each way, with buffers of half the anchor's
   * working set (at MC_LIM_DUPLEX_ANCHORS: 1, 16 and 256 MiB; 0: pair / 2, each core then doing two
   * copies per step where one way does one). duplex_red: the same, each core reducing what it
   * receives with a local operand (float sum; 0: not measured, the reductions then cost as in
   * single copy). */
  double duplex[MC_LIM_DUPLEX_ANCHORS];
  double duplex_red[MC_LIM_DUPLEX_ANCHORS];
  double rtt_ns; /* cache-line round trip between two cores (0: no latency term) */
  int cores;     /* cores the job may use */
  double agg[MC_LIM_MAX_AGG +
             1]; /* agg[m]: m threads' summed copy rate at the DRAM size (0: unknown) */
};

/* The anchor sizes, in bytes: 1, 16, 256 MiB. */
extern const double mc_lim_anchor_bytes[MC_LIM_N_ANCHORS];

/* What one rank does for one operation of `bytes` (nccl-tests' size) among n
 * ranks: bytes of passes (FIFO: the bytes of its hops, each a step into its
 * slot and one out of its peer's; single copy: bytes read from peers'
 * buffers), bytes of purely local copies, bytes of binary-reduction
 * output, hand-offs on the critical path, and the bytes it reads and writes
 * in all (for the tables' headers; the time uses the first four). */
struct mc_lim_bytes {
  double pass;
  double local;
  double red;
  double steps;
  double read;
  double write;
};

void mc_lim_rank_bytes(enum mc_lim_coll coll, enum mc_lim_algo algo, int n, double bytes,
                       struct mc_lim_bytes *out);
/* nccl-tests' bus factor: busbw = algbw * factor. */
double mc_lim_bus_factor(enum mc_lim_coll coll, int n);
/* Bytes one rank keeps in its buffers (input and output), which chooses the copy rate. */
double mc_lim_working_set(enum mc_lim_coll coll, int n, double bytes);

/* A rank's rates with k threads among n ranks, at working set ws (GB/s). */
struct mc_lim_rates {
  double copy;    /* local copy */
  double red;     /* local reduce (output bytes) */
  double fetch;   /* a single-copy pass reading a peer's buffer: min(k * max(pair, duplex(ws)),
                     copy) */
  double hop;     /* a FIFO hop (a step into this rank's slot and one out of its peer's, while
                     the peer does the same): min(k * duplex(ws), copy) */
  double hop_red; /* a hop whose receive reduces: min(k * duplex_red(ws), red); 0: unknown */
};
void mc_lim_rates(const struct mc_lim_figures *f, int n, int k, double ws,
                  struct mc_lim_rates *out);

/* Seconds of one operation, and its busbw in GB/s; 0 where n * k > cores. */
double mc_lim_time(const struct mc_lim_figures *f, enum mc_lim_coll coll, enum mc_lim_algo algo,
                   int n, int k, double bytes);
double mc_lim_busbw(const struct mc_lim_figures *f, enum mc_lim_coll coll, enum mc_lim_algo algo,
                    int n, int k, double bytes);

/* The same for a benchmark whose calls move through buffers of span bytes
 * (meshccl-perf, mpi_perf and nccl-tests: each call at the next offset
 * within -e's bytes, mc_perf_rotation_shift): the rates are those of the
 * working set of a call of span bytes, where the data of every call comes
 * from; span <= bytes: each call's own. */
double mc_lim_time_span(const struct mc_lim_figures *f, enum mc_lim_coll coll,
                        enum mc_lim_algo algo, int n, int k, double bytes, double span);
double mc_lim_busbw_span(const struct mc_lim_figures *f, enum mc_lim_coll coll,
                         enum mc_lim_algo algo, int n, int k, double bytes, double span);

/* "copy1M=22.5,copy16M=11.4,copy256M=10.4,pair=9.5,rtt=380,cores=16,agg4=30,...", or
 * the same keys one per line in a file (lines starting with '#' skipped):
 * fills the keys named, leaves the others. -1 and a message naming the key on error. */
int mc_lim_parse_figures(const char *text, struct mc_lim_figures *f, char *err, size_t err_len);
/* The figures as one such line (what --from-figures reads back). */
void mc_lim_format_figures(const struct mc_lim_figures *f, char *buf, size_t len);

const char *mc_lim_coll_name(enum mc_lim_coll coll);

/* The tables: per collective, per n of ns[] (those <= cores), rows of sizes
 * min_bytes, min_bytes * factor, ... max_bytes; json adds one line per row
 * ({"coll":...}). Returns the rows printed. */
struct mc_lim_print_opts {
  const int *ns;
  int n_ns;
  double min_bytes;
  double max_bytes;
  int factor;
  int json;
  unsigned colls; /* bit (1 << coll); 0: all */
  int no_rotate;  /* 0: calls move through buffers of max_bytes (mc_lim_time_span) */
};
int mc_lim_print(FILE *out, const struct mc_lim_figures *f, const struct mc_lim_print_opts *o);

#ifdef __cplusplus
}
#endif

#endif /* MC_LIMIT_MODEL_H */
