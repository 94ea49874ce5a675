/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tuning model (src/topo/topo_tuning.c) on its own: NCCL's formulas for
 * latency (steps x hop latency) and bandwidth (channels x per-channel
 * bandwidth, ring x nRanks/steps, tree x0.5) with meshccl's host constants,
 * which combinations exist (Simple only; Tree for all-reduce only), and the
 * choices they lead to between namespace hosts.
 */
#include "mc_test.h"

#include "topo/topo_tuning.h"

#include <math.h>

/* The model's inputs between namespace hosts, as init gives them: two
 * channels, graphs of 1.2 GB/s per channel, and the tree graph's pattern 3
 * (NCCL_TOPO_PATTERN_TREE: the search's "Pattern 3" line), which costs the
 * tree NCCL's x0.85. */
static struct mc_tune_in hosts(int n_nodes, int ppn)
{
  return (struct mc_tune_in){.n_ranks = n_nodes * ppn,
                             .n_nodes = n_nodes,
                             .ppn = ppn,
                             .n_channels = 2,
                             .max_tree_pattern = 3,
                             .ring_bw_intra = 1.2f,
                             .ring_bw_inter = 1.2f,
                             .tree_bw_intra = 1.2f,
                             .tree_bw_inter = 1.2f,
                             .latency_inter = 0,
                             .ring_same_channels = 1};
}

static void close_to(float got, float want)
{
  if (fabsf(got - want) > 1e-3f * fabsf(want) + 1e-6f)
    MC_T_FAIL("got %g, want %g", (double)got, (double)want);
}

static void formulas(void)
{
  struct mc_tune_consts c;
  struct mc_tune t;
  struct mc_tune_in in = hosts(8, 1);

  mc_tune_consts_default(&c);
  mc_tune_model(&in, &c, &t);
  /* Ring all-reduce: 2(n-1) NET hops; tree: 2 log2(n). */
  close_to(t.lat[MC_TUNE_ALLREDUCE][MC_TUNE_RING][MC_TUNE_SIMPLE],
           c.base_lat[MC_TUNE_RING] + 14 * c.hw_lat[MC_TUNE_HW_NET][MC_TUNE_RING]);
  close_to(t.lat[MC_TUNE_ALLREDUCE][MC_TUNE_TREE][MC_TUNE_SIMPLE],
           c.base_lat[MC_TUNE_TREE] + 6 * c.hw_lat[MC_TUNE_HW_NET][MC_TUNE_TREE]);
  /* Ring bus bandwidth: channels x min(graph, per-channel) x n / 2(n-1). */
  close_to(t.bw[MC_TUNE_ALLREDUCE][MC_TUNE_RING][MC_TUNE_SIMPLE],
           2 * fminf(1.2f, c.per_ch_bw[MC_TUNE_HW_NET][MC_TUNE_RING]) * 8.0f / 14.0f);
  /* Tree: x0.92, x0.85 for pattern 3, x0.5. */
  close_to(t.bw[MC_TUNE_ALLREDUCE][MC_TUNE_TREE][MC_TUNE_SIMPLE],
           fminf(2 * fminf(1.2f, c.per_ch_bw[MC_TUNE_HW_NET][MC_TUNE_TREE]) * 0.92f,
                 2 * c.per_ch_bw[MC_TUNE_HW_NET][MC_TUNE_TREE]) *
               0.85f * 0.5f);
  /* Only Simple; Tree only for all-reduce. */
  MC_T_TRUE(mc_tune_time(&t, MC_TUNE_ALLREDUCE, MC_TUNE_RING, MC_TUNE_LL, 8) < 0);
  MC_T_TRUE(mc_tune_time(&t, MC_TUNE_ALLREDUCE, MC_TUNE_RING, MC_TUNE_LL128, 8) < 0);
  MC_T_TRUE(mc_tune_time(&t, MC_TUNE_BROADCAST, MC_TUNE_TREE, MC_TUNE_SIMPLE, 8) < 0);
  MC_T_TRUE(mc_tune_time(&t, MC_TUNE_BROADCAST, MC_TUNE_RING, MC_TUNE_SIMPLE, 8) > 0);
  /* time = latency + bytes / (1000 x bandwidth) (no tree correction for rings). */
  close_to(mc_tune_time(&t, MC_TUNE_ALLREDUCE, MC_TUNE_RING, MC_TUNE_SIMPLE, 1 << 20),
           t.lat[MC_TUNE_ALLREDUCE][MC_TUNE_RING][MC_TUNE_SIMPLE] +
               (float)(1 << 20) /
                   (1000.0f * t.bw[MC_TUNE_ALLREDUCE][MC_TUNE_RING][MC_TUNE_SIMPLE]));

  /* The tree all-reduce's bandwidth x the correction at log2(bytes / 64). */
  close_to(mc_tune_time(&t, MC_TUNE_ALLREDUCE, MC_TUNE_TREE, MC_TUNE_SIMPLE, 64 << 10),
           t.lat[MC_TUNE_ALLREDUCE][MC_TUNE_TREE][MC_TUNE_SIMPLE] +
               (float)(64 << 10) / (1000.0f * c.tree_corr[10] *
                                    t.bw[MC_TUNE_ALLREDUCE][MC_TUNE_TREE][MC_TUNE_SIMPLE]));
  MC_T_TRUE(c.tree_corr[10] < 1.0f);

  in.n_ranks = 1;
  mc_tune_model(&in, &c, &t);
  MC_T_TRUE(mc_tune_time(&t, MC_TUNE_ALLREDUCE, MC_TUNE_RING, MC_TUNE_SIMPLE, 8) < 0);
}

static int faster(const struct mc_tune *t, size_t bytes)
{
  float tree = mc_tune_time(t, MC_TUNE_ALLREDUCE, MC_TUNE_TREE, MC_TUNE_SIMPLE, bytes);
  float ring = mc_tune_time(t, MC_TUNE_ALLREDUCE, MC_TUNE_RING, MC_TUNE_SIMPLE, bytes);
  return (tree >= 0) && (tree <= ring) ? MC_TUNE_TREE : MC_TUNE_RING;
}

/* n namespace hosts, one rank each: the model's choice at each size from
 * 8 B to 64 MiB, one letter per power of two ('T' Tree, 'R' Ring). */
static void expect_choices_of(struct mc_tune_in in, const char *want)
{
  struct mc_tune_consts c;
  struct mc_tune t;
  char got[32];
  int k = 0;

  mc_tune_consts_default(&c);
  mc_tune_model(&in, &c, &t);
  for (size_t b = 8; b <= (64u << 20); b *= 2)
    got[k++] = (faster(&t, b) == MC_TUNE_TREE) ? 'T' : 'R';
  got[k] = '\0';
  MC_T_EQ_STR(got, want);
}

static void expect_choices(int n, const char *want)
{
  expect_choices_of(hosts(n, 1), want);
}

/* The choices the measurements call for between namespace hosts:
 *  - 2 hosts: tree up to 32 KiB (a ring step costs more than a tree hop),
 *    ring from 64 KiB but at 512 KiB (both trees, one slot each);
 *  - 4 hosts: tree up to 64 KiB, ring at 128-256 KiB (a tree on one channel
 *    of one chunk: the correction factors), tree at 512 KiB-1 MiB (both
 *    trees), ring from 2 MiB (a ring moves its bytes faster);
 *  - 8 hosts: tree at every size. */
static void choices_between_hosts(void)
{
  /*                 8 B ... 1 KiB ... 1 MiB ... 64 MiB */
  expect_choices(2, "TTTTTTTTTTTTTRRRTRRRRRRR");
  expect_choices(4, "TTTTTTTTTTTTTTRRTTRRRRRR");
  expect_choices(8, "TTTTTTTTTTTTTTTTTTTTTTTT");
}

/* On one host (a graph of 10 GB/s per channel, a balanced tree) the tree's
 * corrections, measured between hosts, do not apply: with 4 and 8 ranks the
 * ring is the faster at every size, where 512 KiB's correction (1.6) would
 * have made the tree so. */
static void one_host_keeps_rings(void)
{
  for (int ppn = 4; ppn <= 8; ppn *= 2) {
    struct mc_tune_in in = hosts(1, ppn);
    in.max_tree_pattern = 1;
    in.ring_bw_intra = in.ring_bw_inter = in.tree_bw_intra = in.tree_bw_inter = 10.0f;
    expect_choices_of(in, "RRRRRRRRRRRRRRRRRRRRRRRR");
  }
}

MC_T_MAIN(formulas, choices_between_hosts, one_host_keeps_rings)
