/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Channel search and connection without sockets: NCCL's double binary trees
 * (values printed by NCCL 2.30's own src/graph/trees.cc), a searched ring and
 * tree on a real server's file, bandwidth given back after a search, the
 * graph XML read back, channel limits, and received data checked before use.
 * The whole output against NCCL's for every golden server is
 * tests/mp/test_topo_graphs.sh.
 */
#include "mc_test.h"
#include "mc_topo_fixture.h"

#include "topo/topo.h"
#include "topo/topo_graph.h"
#include "topo/topo_xml.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ trees */

struct dtree_row {
  int t0[4]; /* up, down0, down1, child type (-2: not written, the root's) */
  int t1[4];
};

static void check_dtree(int n, const struct dtree_row *rows)
{
  for (int r = 0; r < n; r++) {
    int v[8] = {-2, -2, -2, -2, -2, -2, -2, -2};
    mc_topo_dtree(n, r, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
    for (int i = 0; i < 4; i++) {
      if ((i == 3) && (rows[r].t0[3] == -2)) {
        continue;
      }
      if (v[i] != rows[r].t0[i]) {
        MC_T_FAIL("n=%d r=%d tree 0 field %d: %d, NCCL %d", n, r, i, v[i], rows[r].t0[i]);
      }
    }
    for (int i = 0; i < 4; i++) {
      if ((i == 3) && (rows[r].t1[3] == -2)) {
        continue;
      }
      if (v[4 + i] != rows[r].t1[i]) {
        MC_T_FAIL("n=%d r=%d tree 1 field %d: %d, NCCL %d", n, r, i, v[4 + i], rows[r].t1[i]);
      }
    }
  }
}

static void dtree_as_nccl(void)
{
  static const struct dtree_row n4[] = {
      {{-1, -1, 2, -2}, {1, -1, -1, 1}},
      {{2, -1, -1, 0}, {3, 2, 0, 1}},
      {{0, 1, 3, 1}, {1, -1, -1, 0}},
      {{2, -1, -1, 1}, {-1, -1, 1, -2}},
  };
  static const struct dtree_row n7[] = {
      {{-1, -1, 4, -2}, {5, 6, -1, 1}}, {{2, -1, -1, 0}, {-1, -1, 5, -2}},
      {{4, 1, 3, 0}, {3, -1, -1, 0}},   {{2, -1, -1, 1}, {5, 2, 4, 0}},
      {{0, 2, 6, 1}, {3, -1, -1, 1}},   {{6, -1, -1, 0}, {1, 3, 0, 1}},
      {{4, 5, -1, 1}, {0, -1, -1, 0}},
  };
  static const struct dtree_row n13[] = {
      {{-1, -1, 8, -2}, {9, 11, -1, 1}}, {{2, -1, -1, 0}, {-1, -1, 9, -2}},
      {{4, 1, 3, 0}, {3, -1, -1, 0}},    {{2, -1, -1, 1}, {5, 2, 4, 0}},
      {{8, 2, 6, 0}, {3, -1, -1, 1}},    {{6, -1, -1, 0}, {9, 3, 7, 0}},
      {{4, 5, 7, 1}, {7, -1, -1, 0}},    {{6, -1, -1, 1}, {5, 6, 8, 1}},
      {{0, 4, 12, 1}, {7, -1, -1, 1}},   {{10, -1, -1, 0}, {1, 5, 0, 1}},
      {{12, 9, 11, 0}, {11, -1, -1, 0}}, {{10, -1, -1, 1}, {0, 10, 12, 0}},
      {{8, 10, -1, 1}, {11, -1, -1, 1}},
  };
  int up = 0;
  int d0 = 0;
  int d1 = 0;
  int ct = -2;

  check_dtree(4, n4);
  check_dtree(7, n7);
  check_dtree(13, n13);
  mc_topo_btree(1, 0, &up, &d0, &d1, &ct);
  MC_T_EQ_INT(up, -1);
  MC_T_EQ_INT(d0, -1);
  MC_T_EQ_INT(d1, -1);
}

/* ------------------------------------------------------------ search */

/* Local rank `rank`'s final system of a golden server, as one of n_nodes. */
static struct mc_topo_system *final_system(const char *name, int rank, int n_nodes)
{
  char path[512];
  struct mc_xml *xml = NULL;
  struct mc_topo_system *sys = NULL;
  struct mc_topo_paths_opts opts;

  snprintf(path, sizeof(path), "topo/golden/%s/topo.xml", name);
  MC_T_OK(mc_xml_create(MC_XML_MAX_NODES, &xml));
  MC_T_OK(mc_xml_load_file(mc_t_data(path), xml));
  /* The file's nets imported as NCCL's net plugin import (as meshccl-topo does). */
  MC_T_OK(mc_topo_nets_from_file(xml));
  MC_T_OK(mc_topo_system_from_xml(xml, tt_first_host_hash(xml), &sys));
  mc_xml_destroy(xml);
  mc_topo_paths_opts_init(&opts);
  MC_T_OK(mc_topo_compute_paths(sys, &opts));
  MC_T_OK(mc_topo_trim_system(sys, rank, sys->nodes[MC_TOPO_GPU].count * n_nodes, NULL));
  MC_T_OK(mc_topo_compute_paths(sys, &opts));
  mc_topo_search_init(sys);
  return sys;
}

static double total_link_bw(const struct mc_topo_system *sys)
{
  double sum = 0;

  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      const struct mc_topo_node *n = sys->nodes[t].nodes[i];
      for (int l = 0; l < n->n_links; l++) {
        sum += n->links[l].bw;
      }
      if (t == MC_TOPO_NET) {
        sum += n->net.bw;
      }
    }
  }
  return sum;
}

/* p4d, 2 nodes: NCCL's 4 x 12 GB/s rings (channel 0: NET0 0 7 6 5 4 3 2 1 NET0)
 * and balanced trees at 24/12 (pass 2 raised the intra-node bandwidth). */
static void p4d_two_nodes(void)
{
  struct mc_topo_system *sys = final_system("aws-p4d.24xlarge", 0, 2);
  struct mc_topo_search_opts opts;
  struct mc_topo_graph ring;
  struct mc_topo_graph tree;
  static const int ch0[8] = {0, 7, 6, 5, 4, 3, 2, 1};
  double before = total_link_bw(sys);

  mc_topo_search_opts_init(&opts);
  MC_T_OK(mc_topo_graph_init(&ring, MC_TOPO_GRAPH_RING, MC_TOPO_PATTERN_RING, 1, 32, 8));
  MC_T_OK(mc_topo_compute(sys, &ring, &opts, NULL));
  MC_T_EQ_INT(ring.n_channels, 4);
  MC_T_TRUE(ring.bw_intra == 12.0f);
  MC_T_TRUE(ring.bw_inter == 12.0f);
  MC_T_EQ_INT(ring.type_intra, MC_PATH_NVL);
  MC_T_EQ_INT(ring.type_inter, MC_PATH_PIX);
  for (int i = 0; i < 8; i++) {
    MC_T_EQ_INT(ring.intra[i], ch0[i]);
  }
  MC_T_EQ_INT(ring.inter[0], 0);
  MC_T_EQ_INT(ring.inter[1], 0);
  /* The NIC of each channel (ncclTopoGetNetDev): rank 0 heads channel 0 and
   * enters by NET 0; channel 1 starts at rank 2, rank 0 leaves it by NET 1. */
  {
    int dev = -2;
    mc_topo_graph_net_dev(sys, &ring, 0, 0, &dev);
    MC_T_EQ_INT(dev, 0);
    mc_topo_graph_net_dev(sys, &ring, 0, 1, &dev);
    MC_T_EQ_INT(dev, 1);
    mc_topo_graph_net_dev(sys, &ring, 2, 5, &dev); /* channel 5 is search channel 1 */
    MC_T_EQ_INT(dev, 1);
  }
  /* Every GB/s the search charged was given back. */
  MC_T_TRUE(total_link_bw(sys) == before);

  MC_T_OK(mc_topo_graph_init(&tree, MC_TOPO_GRAPH_TREE, MC_TOPO_PATTERN_BALANCED_TREE,
                             ring.n_channels, ring.n_channels, 8));
  MC_T_OK(mc_topo_compute(sys, &tree, &opts, NULL));
  MC_T_EQ_INT(tree.pattern, MC_TOPO_PATTERN_BALANCED_TREE);
  MC_T_EQ_INT(tree.n_channels, 4);
  MC_T_TRUE(tree.bw_intra == 24.0f);
  MC_T_TRUE(tree.bw_inter == 12.0f);

  /* The same search again gives the same graph. */
  {
    struct mc_topo_graph again;
    MC_T_OK(mc_topo_graph_init(&again, MC_TOPO_GRAPH_RING, MC_TOPO_PATTERN_RING, 1, 32, 8));
    MC_T_OK(mc_topo_compute(sys, &again, &opts, NULL));
    MC_T_EQ_INT(again.n_channels, ring.n_channels);
    MC_T_TRUE(memcmp(again.intra, ring.intra, sizeof(int) * 8 * 4) == 0);
    MC_T_TRUE(memcmp(again.inter, ring.inter, sizeof(int64_t) * 2 * 4) == 0);
    mc_topo_graph_fini(&again);
  }
  mc_topo_graph_fini(&ring);
  mc_topo_graph_fini(&tree);
  mc_topo_system_destroy(sys);
}

/* NCCL_GRAPH_FILE: a dumped graph reads back to the same channels. */
static void graph_file_round_trip(void)
{
  struct mc_topo_system *sys = final_system("aws-p4d.24xlarge", 0, 2);
  struct mc_topo_search_opts opts;
  struct mc_topo_graph ring;
  struct mc_topo_graph tree;
  struct mc_topo_graph loaded;
  char path[512];
  FILE *f;
  int n_loaded = -1;

  mc_topo_search_opts_init(&opts);
  MC_T_OK(mc_topo_graph_init(&ring, MC_TOPO_GRAPH_RING, MC_TOPO_PATTERN_RING, 1, 32, 8));
  MC_T_OK(mc_topo_compute(sys, &ring, &opts, NULL));
  MC_T_OK(mc_topo_graph_init(&tree, MC_TOPO_GRAPH_TREE, MC_TOPO_PATTERN_BALANCED_TREE,
                             ring.n_channels, ring.n_channels, 8));
  MC_T_OK(mc_topo_compute(sys, &tree, &opts, NULL));
  mc_t_tmp_path("graph.xml", path, sizeof(path));
  f = fopen(path, "w");
  MC_T_TRUE(f != NULL);
  {
    const struct mc_topo_graph *gs[2] = {&ring, &tree};
    MC_T_OK(mc_topo_graphs_dump(sys, gs, 2, f));
  }
  fclose(f);
  opts.graph_file = path;
  MC_T_OK(mc_topo_graph_init(&loaded, MC_TOPO_GRAPH_TREE, MC_TOPO_PATTERN_BALANCED_TREE, 1, 1, 8));
  MC_T_OK(mc_topo_compute(sys, &loaded, &opts, &n_loaded));
  MC_T_EQ_INT(n_loaded, 4);
  MC_T_EQ_INT(loaded.n_channels, tree.n_channels);
  MC_T_TRUE(loaded.bw_intra == tree.bw_intra);
  MC_T_EQ_INT(loaded.type_inter, tree.type_inter);
  MC_T_TRUE(memcmp(loaded.intra, tree.intra, sizeof(int) * 8 * 4) == 0);
  MC_T_TRUE(memcmp(loaded.inter, tree.inter, sizeof(int64_t) * 2 * 4) == 0);

  /* A malformed file names itself and the line. */
  mc_t_write_file(path, "<graphs version=\"1\">\n  <graph id=\"1\" pattern=\"1\">\n");
  MC_T_EQ_INT(mc_topo_compute(sys, &loaded, &opts, NULL), ncclInvalidUsage);
  MC_T_TRUE(strstr(mc_t_last_error(), "graph.xml:2") != NULL);
  mc_topo_graph_fini(&ring);
  mc_topo_graph_fini(&tree);
  mc_topo_graph_fini(&loaded);
  mc_topo_system_destroy(sys);
}

/* ------------------------------------------------------------ connection */

/* Two nodes of two ranks, one channel each: ranks 0 1 | 2 3. */
static void two_by_two(struct mc_topo_ranks all[4], struct mc_topo_channel preset[4][64])
{
  memset(all, 0, 4 * sizeof(all[0]));
  for (int r = 0; r < 4; r++) {
    int first = (r / 2) * 2;
    struct mc_topo_ranks *x = &all[r];
    x->ring = (struct mc_topo_graph_info){
        .pattern = MC_TOPO_PATTERN_RING, .n_channels = 1, .bw_intra = 12, .bw_inter = 12};
    x->tree = x->ring;
    x->tree.pattern = MC_TOPO_PATTERN_BALANCED_TREE;
    x->ring_recv[0] = first;
    x->ring_send[0] = first + 1;
    x->ring_prev[0] = (r == first) ? -1 : first;
    x->ring_next[0] = (r == first) ? first + 1 : -1;
    x->tree_to_parent[0] = first;
    x->tree_to_child0[0] = first + 1;
    x->tree_to_child1[0] = first;
    x->min_comp_cap = 80;
    for (int c = 0; c < 64; c++) {
      preset[r][c] = (struct mc_topo_channel){
          .ring_prev = -1, .ring_next = -1, .tree_up = -1, .tree_down = {-1, -1, -1}};
    }
    preset[r][0].tree_up = preset[r][1].tree_up = (r == first) ? -1 : first;
    preset[r][0].tree_down[0] = preset[r][1].tree_down[0] = (r == first) ? first + 1 : -1;
  }
}

/* No channel bounds (NCCL's defaults). */
static const struct mc_topo_connect_opts unbounded = {
    .min_channels = 0, .max_channels = 64, .min_ctas = 1, .max_ctas = 64};

static void postset_two_nodes(void)
{
  struct mc_topo_ranks all[4];
  struct mc_topo_channel preset[4][64];
  struct mc_topo_connect_opts opts = unbounded;
  struct mc_topo_channels ch;
  char line[128];

  two_by_two(all, preset);
  MC_T_OK(mc_topo_postset(1, 4, all, preset[1], &opts, NULL, &ch));
  MC_T_EQ_INT(ch.n_nodes, 2);
  MC_T_EQ_INT(ch.n_channels, 2);
  MC_T_EQ_INT(ch.channels[0].ring_prev, 0);
  MC_T_EQ_INT(ch.channels[0].ring_next, 2);
  mc_topo_ring_line(&ch, 0, line, sizeof(line));
  MC_T_EQ_STR(line, "Channel 00/02 : 1 2 3 0");
  /* Tree 0: node 0 is the root with node 1 below; rank 1 (child0 of node 0)
   * receives node 1's parent rank 2. Tree 1 (mirrored): node 1 is the root. */
  MC_T_EQ_INT(ch.channels[0].tree_up, 0);
  MC_T_EQ_INT(ch.channels[0].tree_down[0], -1);
  mc_topo_channels_fini(&ch);
  MC_T_OK(mc_topo_postset(0, 4, all, preset[0], &opts, NULL, &ch));
  MC_T_EQ_INT(ch.channels[0].tree_up, -1);
  MC_T_EQ_INT(ch.channels[0].tree_down[0], 1);
  MC_T_EQ_INT(ch.channels[0].tree_down[1], 2);
  MC_T_EQ_INT(ch.channels[1].tree_up, 2);
  mc_topo_channels_fini(&ch);

  /* NCCL_MAX_NCHANNELS=1, then NCCL_MIN_NCHANNELS=5 (channels repeat). */
  opts.max_channels = 1;
  MC_T_OK(mc_topo_postset(0, 4, all, preset[0], &opts, NULL, &ch));
  MC_T_EQ_INT(ch.n_channels, 1);
  mc_topo_channels_fini(&ch);
  opts.max_channels = 64;
  opts.min_channels = 5;
  MC_T_OK(mc_topo_postset(0, 4, all, preset[0], &opts, NULL, &ch));
  MC_T_EQ_INT(ch.n_channels, 5);
  MC_T_EQ_INT(ch.channels[4].tree_down[1], 2); /* channel 4 repeats channel 0 */
  MC_T_EQ_INT(ch.channels[3].tree_up, 2);      /* channel 3 repeats channel 1 */
  mc_topo_channels_fini(&ch);
}

/* Rail alternation: with a crossNic 2 ring, the odd nodes take their ring
 * channels in swapped pairs. Two nodes of two ranks, channel 0 in rank order
 * on each node and channel 1 reversed: node 1 runs channel 0 as 3 2. */
static void postset_rail_alternation(void)
{
  struct mc_topo_ranks all[4];
  struct mc_topo_channel preset[4][64];
  struct mc_topo_channels ch;
  char line[128];

  for (int cross = 0; cross <= 2; cross += 2) {
    two_by_two(all, preset);
    for (int r = 0; r < 4; r++) {
      int first = (r / 2) * 2;
      all[r].ring.n_channels = all[r].tree.n_channels = 2;
      all[r].cross_nic_ring = cross;
      all[r].ring_recv[1] = first + 1;
      all[r].ring_send[1] = first;
      all[r].ring_prev[1] = (r == first) ? first + 1 : -1;
      all[r].ring_next[1] = (r == first) ? -1 : first;
      all[r].tree_to_parent[1] = first;
      all[r].tree_to_child0[1] = first + 1;
      all[r].tree_to_child1[1] = first;
    }
    MC_T_OK(mc_topo_postset(0, 4, all, preset[0], &unbounded, NULL, &ch));
    MC_T_EQ_INT(ch.n_channels, 4);
    mc_topo_ring_line(&ch, 0, line, sizeof(line));
    MC_T_EQ_STR(line, (cross == 2) ? "Channel 00/04 : 0 1 3 2" : "Channel 00/04 : 0 1 2 3");
    mc_topo_ring_line(&ch, 1, line, sizeof(line));
    MC_T_EQ_STR(line, (cross == 2) ? "Channel 01/04 : 0 2 3 1" : "Channel 01/04 : 0 3 2 1");
    mc_topo_channels_fini(&ch);
  }
}

/* AllGather3's packed records: each rank's channels only (the smaller of its
 * ring's and tree's counts), every value back as it was; bytes that end
 * early or run over are refused naming the rank. */
static void ranks_pack_round_trip(void)
{
  struct mc_topo_ranks all[3];
  struct mc_topo_ranks back[3];
  const int rings[3] = {1, 3, MC_TOPO_RANKS_CHANNELS};
  const int trees[3] = {1, 2, MC_TOPO_RANKS_CHANNELS};
  size_t bytes;
  size_t want = 0;
  char *buf;

  memset(all, 0, sizeof(all));
  for (int r = 0; r < 3; r++) {
    all[r].ring.n_channels = rings[r];
    all[r].tree.n_channels = trees[r];
    all[r].ring.bw_intra = 20.5f + (float)r;
    all[r].tree.pattern = MC_TOPO_PATTERN_BALANCED_TREE;
    all[r].cross_nic_ring = r;
    all[r].min_comp_cap = 80 + r;
    for (int c = 0; c < trees[r]; c++) {
      all[r].ring_recv[c] = 100 * r + c;
      all[r].ring_send[c] = 100 * r + c + 1;
      all[r].ring_prev[c] = -1;
      all[r].ring_next[c] = 100 * r + c + 3;
      all[r].tree_to_parent[c] = 100 * r + c + 4;
      all[r].tree_to_child0[c] = 100 * r + c + 5;
      all[r].tree_to_child1[c] = 100 * r + c + 6;
    }
    want += 2 * sizeof(struct mc_topo_graph_info) + 8 + 7 * 4 * (size_t)trees[r];
  }
  bytes = mc_topo_ranks_pack(all, 3, NULL);
  MC_T_EQ_INT((long)bytes, (long)want);
  buf = malloc(bytes + 1);
  MC_T_TRUE(buf != NULL);
  MC_T_EQ_INT((long)mc_topo_ranks_pack(all, 3, buf), (long)bytes);
  memset(back, 0xff, sizeof(back));
  MC_T_OK(mc_topo_ranks_unpack(buf, bytes, 3, back));
  MC_T_EQ_INT(memcmp(all, back, sizeof(all)), 0);
  MC_T_EQ_INT(mc_topo_ranks_unpack(buf, bytes - 1, 3, back), ncclRemoteError);
  MC_T_CONTAINS(mc_t_last_error(), "within rank 2's 32 channels");
  MC_T_EQ_INT(mc_topo_ranks_unpack(buf, 10, 3, back), ncclRemoteError);
  MC_T_CONTAINS(mc_t_last_error(), "10 bytes end before rank 0's record");
  buf[bytes] = 0;
  MC_T_EQ_INT(mc_topo_ranks_unpack(buf, bytes + 1, 3, back), ncclRemoteError);
  MC_T_CONTAINS(mc_t_last_error(), "hold 3 ranks' records in");
  free(buf);
}

/* Four nodes of two ranks; node orders make the rings cross nodes in the
 * cables' order (0 2 1 3 and its reverse) instead of the node index order,
 * channel c taking order c % 2, for the doubled channels too. */
static void postset_node_orders(void)
{
  struct mc_topo_ranks all[8];
  struct mc_topo_channel preset[8][64];
  const int orders[2][4] = {{0, 2, 1, 3}, {0, 3, 1, 2}};
  struct mc_topo_connect_opts opts = {.min_channels = 0,
                                      .max_channels = 64,
                                      .min_ctas = 1,
                                      .max_ctas = 64,
                                      .n_node_orders = 2,
                                      .node_orders = &orders[0][0]};
  struct mc_topo_channels ch;
  char line[128];
  const int bad[2][4] = {{0, 2, 2, 3}, {0, 1, 2, 3}};
  const int four[4][4] = {{0, 2, 1, 3}, {0, 3, 1, 2}, {0, 1, 2, 3}, {0, 3, 2, 1}};

  memset(all, 0, sizeof(all));
  for (int r = 0; r < 8; r++) {
    int first = (r / 2) * 2;
    all[r].ring = (struct mc_topo_graph_info){
        .pattern = MC_TOPO_PATTERN_RING, .n_channels = 1, .bw_intra = 12, .bw_inter = 12};
    all[r].tree = all[r].ring;
    all[r].tree.pattern = MC_TOPO_PATTERN_BALANCED_TREE;
    all[r].ring_recv[0] = first;
    all[r].ring_send[0] = first + 1;
    all[r].ring_prev[0] = (r == first) ? -1 : first;
    all[r].ring_next[0] = (r == first) ? first + 1 : -1;
    all[r].tree_to_parent[0] = first;
    all[r].tree_to_child0[0] = first + 1;
    all[r].tree_to_child1[0] = first;
    all[r].min_comp_cap = 80;
    for (int c = 0; c < 64; c++) {
      preset[r][c] = (struct mc_topo_channel){
          .ring_prev = -1, .ring_next = -1, .tree_up = -1, .tree_down = {-1, -1, -1}};
    }
  }
  MC_T_OK(mc_topo_postset(0, 8, all, preset[0], &opts, NULL, &ch));
  MC_T_EQ_INT(ch.n_nodes, 4);
  MC_T_EQ_INT(ch.n_channels, 2);
  mc_topo_ring_line(&ch, 0, line, sizeof(line));
  MC_T_EQ_STR(line, "Channel 00/02 : 0 1 4 5 2 3 6 7");
  mc_topo_ring_line(&ch, 1, line, sizeof(line));
  MC_T_EQ_STR(line, "Channel 01/02 : 0 1 6 7 2 3 4 5");
  /* The rank's own neighbours follow each channel's order too. */
  MC_T_EQ_INT(ch.channels[0].ring_prev, 7);
  MC_T_EQ_INT(ch.channels[1].ring_prev, 5);
  mc_topo_channels_fini(&ch);
  MC_T_OK(mc_topo_postset(1, 8, all, preset[1], &opts, NULL, &ch));
  MC_T_EQ_INT(ch.channels[0].ring_next, 4);
  MC_T_EQ_INT(ch.channels[1].ring_next, 6);
  mc_topo_channels_fini(&ch);

  /* Four orders (two cable-disjoint cycles, each both ways): one channel
   * each, not two channels repeating orders 0 and 1; NCCL_MAX_NCHANNELS
   * still bounds them, NCCL_MIN_NCHANNELS repeats all four. */
  opts.n_node_orders = 4;
  opts.node_orders = &four[0][0];
  MC_T_OK(mc_topo_postset(0, 8, all, preset[0], &opts, NULL, &ch));
  MC_T_EQ_INT(ch.n_channels, 4);
  mc_topo_ring_line(&ch, 2, line, sizeof(line));
  MC_T_EQ_STR(line, "Channel 02/04 : 0 1 2 3 4 5 6 7");
  mc_topo_ring_line(&ch, 3, line, sizeof(line));
  MC_T_EQ_STR(line, "Channel 03/04 : 0 1 6 7 4 5 2 3");
  MC_T_EQ_INT(ch.channels[2].ring_prev, 7);
  MC_T_EQ_INT(ch.channels[3].ring_prev, 3);
  MC_T_EQ_INT(ch.channels[2].tree_up, ch.channels[0].tree_up);
  mc_topo_channels_fini(&ch);
  opts.max_channels = 3;
  MC_T_OK(mc_topo_postset(0, 8, all, preset[0], &opts, NULL, &ch));
  MC_T_EQ_INT(ch.n_channels, 3);
  mc_topo_channels_fini(&ch);
  opts.max_channels = 64;
  opts.min_channels = 8;
  MC_T_OK(mc_topo_postset(0, 8, all, preset[0], &opts, NULL, &ch));
  MC_T_EQ_INT(ch.n_channels, 8);
  mc_topo_ring_line(&ch, 7, line, sizeof(line));
  MC_T_EQ_STR(line, "Channel 07/08 : 0 1 6 7 4 5 2 3");
  mc_topo_channels_fini(&ch);
  opts.min_channels = 0;
  opts.n_node_orders = 2;

  opts.node_orders = &bad[0][0];
  MC_T_EQ_INT(mc_topo_postset(0, 8, all, preset[0], &opts, NULL, &ch), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "node order 0 is not a permutation of the 4 nodes "
                                   "(position 2 holds 2)");
}

/* A rank number from the wire that is out of range fails naming the sender. */
static void postset_rejects_bad_ranks(void)
{
  struct mc_topo_ranks all[4];
  struct mc_topo_channel preset[4][64];
  struct mc_topo_channels ch;

  two_by_two(all, preset);
  all[3].ring_next[0] = 7;
  MC_T_EQ_INT(mc_topo_postset(0, 4, all, preset[0], &unbounded, NULL, &ch), ncclRemoteError);
  MC_T_TRUE(strstr(mc_t_last_error(), "rank 3") != NULL);
  two_by_two(all, preset);
  all[2].ring.n_channels = 0;
  MC_T_EQ_INT(mc_topo_postset(0, 4, all, preset[0], &unbounded, NULL, &ch), ncclRemoteError);
  MC_T_TRUE(strstr(mc_t_last_error(), "rank 2") != NULL);
}

/* dumpLine: 128 characters at most, "..." at the end of a cut line. */
static void ring_line_truncated(void)
{
  struct mc_topo_channels ch;
  char line[128];
  int rings[64];

  memset(&ch, 0, sizeof(ch));
  ch.n_ranks = 64;
  ch.n_channels = 2;
  ch.rings = rings;
  for (int i = 0; i < 64; i++) {
    rings[i] = i;
  }
  mc_topo_ring_line(&ch, 0, line, sizeof(line));
  MC_T_EQ_INT(strlen(line), 127);
  MC_T_TRUE(strcmp(line + 124, "...") == 0);
  MC_T_TRUE(strncmp(line, "Channel 00/02 :  0  1  2", 24) == 0);
}

MC_T_MAIN(dtree_as_nccl, p4d_two_nodes, graph_file_round_trip, postset_two_nodes,
          postset_rail_alternation, ranks_pack_round_trip, postset_node_orders,
          postset_rejects_bad_ranks, ring_line_truncated)
