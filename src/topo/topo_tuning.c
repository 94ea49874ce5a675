/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tuning model (NCCL 2.30's src/graph/tuning.cc ncclTopoTuneModel and
 * ncclTopoGetAlgoTime, with meshccl's host constants): see topo_tuning.h.
 *
 * Bandwidth, as NCCL: the graph's per-channel bandwidth (intra-node graphs
 * up to 2 nodes, inter-node beyond), capped by what one channel moves on a
 * host or over the net, times the channel count; trees pay NCCL's 0.92
 * (x0.85 for the TREE pattern); algorithm bandwidth is bus bandwidth x
 * nRanks / steps for rings and x0.5 for trees. Latency, as NCCL: a base cost
 * plus, per step of the algorithm, the latency of the hop it crosses (host
 * FIFO or net, plus the NET's own latency twice for Simple).
 */
#include "topo/topo_tuning.h"

#include <stdint.h>
#include <string.h>

/*
 * Measured by bench/tree_ring_netns.sh on a quiet 2-core VM (bench/algo_pair.c:
 * Ring and Tree in turns in one communicator, compared by the median of the
 * rounds' ratios, rank r on core r mod 2; the figures are in
 * docs/design/datapath.md, "Algorithms and tuning"):
 *  - a call costs about 5 us; a hop through a host FIFO about 1 us;
 *  - a NET hop (socket net between network namespaces) costs 15-20 us at 2
 *    hosts, ring step and tree hop alike once a message up to 64 KiB travels
 *    inline (NCCL_SOCKET_INLINE); from 4 hosts, which share the VM's two
 *    cores, 40-75 us. The ring keeps 30 us to the tree's 20 (a ring step has
 *    every rank send and receive at once), which puts 2 hosts' crossover at
 *    32-64 KiB; meshccl keeps the ring's own NET latency at one rank per
 *    node, where NCCL 2.30 (tuning.cc) uses the tree's;
 *  - bandwidth between namespace hosts is the cores', shared by all ranks,
 *    and a ring and a tree all-reduce move the same bytes: at 64 MiB the
 *    tree takes 1.1-1.2x the ring's time at 2 hosts and 0.95-1.2x at 4 and
 *    8. The searched tree between hosts has pattern 3 (NCCL's x0.85 on top
 *    of x0.92 x0.5: 0.70 GB/s for 2 channels of 0.9); a ring's 0.55 per
 *    channel (1.1 GB/s at 2 hosts, 0.73 at 4, 0.63 at 8) puts the crossover
 *    where it was measured: rings from 2 MiB at 4 hosts, where trees win
 *    at 512 KiB-1 MiB by 5-30%, and trees at every size at 8 hosts, where
 *    they win up to 4 MiB and the two are level above;
 *  - a tree all-reduce below 512 KiB is one chunk on one tree, which climbs
 *    and descends it without a pipeline: between 4 hosts, 128-256 KiB took
 *    0.95-1.2x the ring's time, where 64 KiB took 0.85x and 512 KiB 0.7x
 *    (the correction factors below: 64 KiB 0.8, 128 KiB 0.6, 256 KiB 0.75);
 *  - from 512 KiB a tree all-reduce runs on both trees (coll_algo.c), one
 *    slot per tree: between 2 hosts 512 KiB took 0.90-0.99x the ring's
 *    time in 6 of 8 runs and 1.04-1.09x in the others (bench/algo_pair.c,
 *    9-101 rounds each), where the pattern-3 bandwidth says 1.4x; 1.6 there
 *    brings the model's tree under the ring (a choice that changes only
 *    2 hosts': from 4 hosts trees were chosen there already). At 1 MiB
 *    the runs split (0.58-0.77x in four, 1.19-1.68x in four) and the
 *    model keeps the ring;
 *  - on one host both are bound by memory bandwidth, 5 GB/s per channel.
 */
void mc_tune_consts_default(struct mc_tune_consts *c)
{
  memset(c, 0, sizeof(*c));
  c->base_lat[MC_TUNE_TREE] = 5.0f;
  c->base_lat[MC_TUNE_RING] = 5.0f;
  c->hw_lat[MC_TUNE_HW_HOST][MC_TUNE_TREE] = 1.0f;
  c->hw_lat[MC_TUNE_HW_HOST][MC_TUNE_RING] = 1.0f;
  c->hw_lat[MC_TUNE_HW_NET][MC_TUNE_TREE] = 20.0f;
  c->hw_lat[MC_TUNE_HW_NET][MC_TUNE_RING] = 30.0f;
  c->per_ch_bw[MC_TUNE_HW_HOST][MC_TUNE_TREE] = 5.0f;
  c->per_ch_bw[MC_TUNE_HW_HOST][MC_TUNE_RING] = 5.0f;
  c->per_ch_bw[MC_TUNE_HW_NET][MC_TUNE_TREE] = 0.9f;
  c->per_ch_bw[MC_TUNE_HW_NET][MC_TUNE_RING] = 0.55f;
  for (int i = 0; i < MC_TUNE_TREE_CORR_SIZES; i++)
    c->tree_corr[i] = 1.0f;
  c->tree_corr[10] = 0.8f;  /* 64 KiB */
  c->tree_corr[11] = 0.6f;  /* 128 KiB */
  c->tree_corr[12] = 0.75f; /* 256 KiB */
  c->tree_corr[13] = 1.6f;  /* 512 KiB */
}

static int log2i(int n)
{
  int l = 0;

  while (n >>= 1) {
    l++;
  }
  return l;
}

static float minf(float a, float b)
{
  return (a < b) ? a : b;
}

/* Steps of the ring version of each function (NCCL's nsteps). */
static int ring_steps(int func, int n)
{
  switch (func) {
  case MC_TUNE_ALLREDUCE:
    return 2 * (n - 1);
  case MC_TUNE_ALLGATHER:
  case MC_TUNE_REDUCESCATTER:
    return n - 1;
  default:
    return n; /* broadcast, reduce: a chain */
  }
}

static void model_one(const struct mc_tune_in *in, const struct mc_tune_consts *c, int func,
                      int algo, struct mc_tune *out)
{
  int hw = (in->n_nodes == 1) ? MC_TUNE_HW_HOST : MC_TUNE_HW_NET;
  int n = in->n_ranks;
  int nsteps = ring_steps(func, n);
  float graph_bw;
  float bw;
  float bus;
  float lat;
  float intra_lat = c->hw_lat[MC_TUNE_HW_HOST][algo];
  float inter_lat = c->hw_lat[MC_TUNE_HW_NET][algo] +
                    2.0f * in->latency_inter; /* Simple pays the NET's latency twice */

  if (algo == MC_TUNE_RING) {
    graph_bw = (in->n_nodes <= 2) ? in->ring_bw_intra : in->ring_bw_inter;
  } else {
    graph_bw = (in->n_nodes <= 2) ? in->tree_bw_intra : in->tree_bw_inter;
  }
  bw = minf(graph_bw, c->per_ch_bw[hw][algo]);
  bus = (float)in->n_channels * bw;
  if (algo == MC_TUNE_TREE) {
    bus = minf(bus * 0.92f, (float)in->n_channels * c->per_ch_bw[hw][algo]);
    if (in->max_tree_pattern == 3) {
      bus *= 0.85f;
    }
    bus *= 0.5f;
  } else {
    bus *= (float)n / (float)nsteps;
  }

  lat = c->base_lat[algo];
  if (algo == MC_TUNE_RING) {
    if ((func == MC_TUNE_BROADCAST) || (func == MC_TUNE_REDUCE)) {
      lat += (float)nsteps * c->hw_lat[hw][MC_TUNE_RING];
    } else {
      int inter_steps = (in->n_nodes == 1)            ? 0
                        : (func == MC_TUNE_ALLREDUCE) ? 2 * (in->n_nodes - 1)
                                                      : in->n_nodes - 1;
      lat += (float)(nsteps - inter_steps) * intra_lat + (float)inter_steps * inter_lat;
    }
  } else {
    lat += 2.0f * ((float)(in->ppn - 1) * intra_lat + (float)log2i(in->n_nodes) * inter_lat);
  }
  out->bw[func][algo][MC_TUNE_SIMPLE] = bus;
  out->lat[func][algo][MC_TUNE_SIMPLE] = lat;
}

void mc_tune_model(const struct mc_tune_in *in, const struct mc_tune_consts *c, struct mc_tune *out)
{
  memset(out, 0, sizeof(*out));
  out->n_ranks = in->n_ranks;
  /* The corrections were measured between hosts; on one host the tree's
   * bandwidth is the model's own. */
  for (int i = 0; i < MC_TUNE_TREE_CORR_SIZES; i++)
    out->tree_corr[i] = (in->n_nodes > 1) ? c->tree_corr[i] : 1.0f;
  if ((in->n_ranks <= 1) || (in->n_channels <= 0) || (in->n_nodes <= 0)) {
    return;
  }
  {
    int hw = (in->n_nodes == 1) ? MC_TUNE_HW_HOST : MC_TUNE_HW_NET;
    float graph_bw = (in->n_nodes <= 2) ? in->ring_bw_intra : in->ring_bw_inter;

    out->call_lat = c->base_lat[MC_TUNE_RING];
    out->pair_lat = (hw == MC_TUNE_HW_HOST)
                        ? c->hw_lat[MC_TUNE_HW_HOST][MC_TUNE_RING]
                        : c->hw_lat[MC_TUNE_HW_NET][MC_TUNE_RING] + 2.0f * in->latency_inter;
    out->pair_bw = minf(graph_bw, c->per_ch_bw[hw][MC_TUNE_RING]);
  }
  for (int f = 0; f < MC_TUNE_NFUNCS; f++) {
    model_one(in, c, f, MC_TUNE_RING, out);
    if (f == MC_TUNE_ALLREDUCE) {
      model_one(in, c, f, MC_TUNE_TREE, out);
    }
  }
}

float mc_tune_time(const struct mc_tune *t, int func, int algo, int proto, size_t bytes)
{
  float bw;
  float lat;

  if ((func < 0) || (func >= MC_TUNE_NFUNCS) || (algo < 0) || (algo >= MC_TUNE_NALGOS) ||
      (proto < 0) || (proto >= MC_TUNE_NPROTOS)) {
    return -1.0f;
  }
  bw = t->bw[func][algo][proto];
  lat = t->lat[func][algo][proto];
  if (bw == 0) {
    return -1.0f;
  }
  /* NCCL's treeCorrectionFactor (a GPU measurement) replaced by the host's. */
  if ((algo == MC_TUNE_TREE) && (func == MC_TUNE_ALLREDUCE)) {
    int log_size = log2i((int)((bytes >> 6) > (size_t)INT32_MAX ? INT32_MAX : (bytes >> 6)));

    if (((bytes >> 6) > 0) && (log_size < MC_TUNE_TREE_CORR_SIZES) && (t->tree_corr[log_size] > 0))
      bw *= t->tree_corr[log_size];
  }
  return lat + (float)((double)bytes / (1000.0 * (double)bw));
}

const char *mc_tune_func_str(int func)
{
  static const char *const names[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter",
                                      "AllReduce"};
  return ((func >= 0) && (func < MC_TUNE_NFUNCS)) ? names[func] : "?";
}

const char *mc_tune_algo_str(int algo)
{
  return (algo == MC_TUNE_TREE) ? "Tree" : (algo == MC_TUNE_RING) ? "Ring" : "?";
}

const char *mc_tune_proto_str(int proto)
{
  static const char *const names[] = {"LL", "LL128", "Simple"};
  return ((proto >= 0) && (proto < MC_TUNE_NPROTOS)) ? names[proto] : "?";
}

void mc_tune_print(const struct mc_tune *t, FILE *out)
{
  fprintf(out, "%-13s %14s %14s\n", "", "Tree Simple", "Ring Simple");
  for (int f = 0; f < MC_TUNE_NFUNCS; f++) {
    fprintf(out, "%-13s", mc_tune_func_str(f));
    for (int a = 0; a < MC_TUNE_NALGOS; a++) {
      fprintf(out, " %7.1f/%6.2f", (double)t->lat[f][a][MC_TUNE_SIMPLE],
              (double)t->bw[f][a][MC_TUNE_SIMPLE]);
    }
    fprintf(out, "\n");
  }
}
