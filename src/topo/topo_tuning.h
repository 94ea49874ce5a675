/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tuning model (mirrors the structure of NCCL 2.30's src/graph/tuning.cc
 * ncclTopoTuneModel and ncclTopoGetAlgoTime): for every collective x
 * algorithm x protocol a bus bandwidth and a latency derived from the
 * searched graphs, and time(bytes) = latency x steps + bytes / bandwidth.
 *
 * The constants are meshccl's, not NCCL's GPU numbers: the latency of one
 * hop through a host FIFO (P2P/SHM) and through the net, the base cost of a
 * collective call, and the bandwidth one channel moves on a host and over
 * the net, measured on hosts by bench/tune_calibrate.sh (make bench). Only
 * NCCL's Simple protocol exists on hosts: LL and LL128 get no bandwidth and
 * are never chosen. Pure logic.
 */
#ifndef MC_TOPO_TUNING_H
#define MC_TOPO_TUNING_H

#include <stddef.h>
#include <stdio.h>

#include "nccl.h"

/* NCCL's function, algorithm and protocol numbering (nccl_tuner.h). */
enum mc_tune_func {
  MC_TUNE_BROADCAST = 0,
  MC_TUNE_REDUCE = 1,
  MC_TUNE_ALLGATHER = 2,
  MC_TUNE_REDUCESCATTER = 3,
  MC_TUNE_ALLREDUCE = 4,
  MC_TUNE_NFUNCS = 5
};
enum mc_tune_algo { MC_TUNE_TREE = 0, MC_TUNE_RING = 1, MC_TUNE_NALGOS = 2 };
enum mc_tune_proto { MC_TUNE_LL = 0, MC_TUNE_LL128 = 1, MC_TUNE_SIMPLE = 2, MC_TUNE_NPROTOS = 3 };

/* Where a hop goes. */
enum mc_tune_hw { MC_TUNE_HW_HOST = 0, MC_TUNE_HW_NET = 1, MC_TUNE_NHW = 2 };

#define MC_TUNE_TREE_CORR_SIZES 23

/* Host constants (µs, GB/s), defaults from the calibration benchmark. */
struct mc_tune_consts {
  float base_lat[MC_TUNE_NALGOS];               /* per collective call */
  float hw_lat[MC_TUNE_NHW][MC_TUNE_NALGOS];    /* per hop */
  float per_ch_bw[MC_TUNE_NHW][MC_TUNE_NALGOS]; /* most one channel moves */
  /* NCCL's treeCorrectionFactor for Simple: the tree all-reduce's bandwidth
   * x this factor at log2(bytes / 64) (0 .. MC_TUNE_TREE_CORR_SIZES-1),
   * between hosts (measured there; 1 on one host). */
  float tree_corr[MC_TUNE_TREE_CORR_SIZES];
};

/* What the model reads from the communicator after Postset. */
struct mc_tune_in {
  int n_ranks;
  int n_nodes;
  int ppn; /* most ranks of one node */
  int n_channels;
  int max_tree_pattern;
  float ring_bw_intra, ring_bw_inter; /* aligned graph information, GB/s per channel */
  float tree_bw_intra, tree_bw_inter;
  float latency_inter; /* the NET's latency (µs) from the ring graph */
  int ring_same_channels;
};

struct mc_tune {
  float bw[MC_TUNE_NFUNCS][MC_TUNE_NALGOS][MC_TUNE_NPROTOS];  /* GB/s of algorithm bandwidth */
  float tree_corr[MC_TUNE_TREE_CORR_SIZES];                   /* from the constants */
  float lat[MC_TUNE_NFUNCS][MC_TUNE_NALGOS][MC_TUNE_NPROTOS]; /* µs */
  int n_ranks;
  /* For algorithms outside NCCL's table that estimate themselves from the
   * same constants (an algorithm table's est_us, src/coll): a collective
   * call's base cost and one step in which every rank sends to and receives
   * from one peer at once, as a ring step does (µs: a host FIFO hop, or a
   * NET hop with the NET's latency twice), and the bandwidth one connection
   * moves (GB/s). 0 without a model. */
  float call_lat;
  float pair_lat;
  float pair_bw;
};

/* meshccl's measured host constants. */
void mc_tune_consts_default(struct mc_tune_consts *c);

/* ncclTopoTuneModel: bandwidths and latencies of every combination the
 * hosts implement (Ring for everything; Tree for all-reduce). */
void mc_tune_model(const struct mc_tune_in *in, const struct mc_tune_consts *c,
                   struct mc_tune *out);

/* ncclTopoGetAlgoTime: estimated µs for `bytes` (the collective's whole
 * buffer: count x element size, x n_ranks for all-gather / reduce-scatter
 * output), -1 when the combination is not available. */
float mc_tune_time(const struct mc_tune *t, int func, int algo, int proto, size_t bytes);

/* The table NCCL prints at NCCL_DEBUG_SUBSYS=TUNING, one line per row. */
void mc_tune_print(const struct mc_tune *t, FILE *out);

const char *mc_tune_func_str(int func);
const char *mc_tune_algo_str(int algo);
const char *mc_tune_proto_str(int proto);

#endif /* MC_TOPO_TUNING_H */
