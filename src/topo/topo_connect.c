/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Channels across nodes (mirrors NCCL 2.30's src/graph/connect.cc
 * ncclTopoPreset / ncclTopoPostset with connectRings and connectTrees,
 * src/graph/trees.cc ncclGetBtree / ncclGetDtree, src/graph/rings.cc
 * ncclBuildRings / dumpLine, and the part of src/init.cc initTransportsRank
 * between them: node detection from the gathered ring heads, alignment of
 * the graph information over all ranks, moving Preset's duplicated
 * channels).
 *
 * Input: each rank's Preset output (struct mc_topo_ranks), gathered from
 * every rank. Output: this rank's channels: ring prev/next, the double binary
 * tree (tree 0 on channels [0, n), tree 1 on [n, 2n)), ring orders.
 * Pure logic over plain arrays.
 */
#include "topo/topo_graph.h"

#include "core/check.h"
#include "core/log.h"
#include "core/params.h"
#include "core/utils.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- trees */

void mc_topo_btree(int n, int r, int *up, int *down0, int *down1, int *child_type)
{
  int bit;

  for (bit = 1; bit < n; bit <<= 1) {
    if ((bit & r) != 0) {
      break;
    }
  }
  if (r == 0) {
    *up = -1;
    *down0 = -1;
    *down1 = (n > 1) ? bit >> 1 : -1;
    return;
  }
  *up = (r ^ bit) | (bit << 1);
  if (*up >= n) {
    *up = r ^ bit;
  }
  *child_type = (r < *up) ? 0 : 1;
  {
    int lowbit = bit >> 1;
    /* NCCL's loop recomputes with the old lowbit first, then halves it. */
    *down0 = (lowbit == 0) ? -1 : r - lowbit;
    *down1 = (lowbit == 0) ? -1 : r + lowbit;
    while (*down1 >= n) {
      *down1 = (lowbit == 0) ? -1 : r + lowbit;
      lowbit >>= 1;
    }
  }
}

void mc_topo_dtree(int n, int r, int *t0_up, int *t0_down0, int *t0_down1, int *t0_child_type,
                   int *t1_up, int *t1_down0, int *t1_down1, int *t1_child_type)
{
  mc_topo_btree(n, r, t0_up, t0_down0, t0_down1, t0_child_type);
  if ((n % 2) == 1) {
    /* Odd: shift every node by one. */
    int shifted = (r - 1 + n) % n;
    int u;
    int d0;
    int d1;
    mc_topo_btree(n, shifted, &u, &d0, &d1, t1_child_type);
    *t1_up = (u == -1) ? -1 : (u + 1) % n;
    *t1_down0 = (d0 == -1) ? -1 : (d0 + 1) % n;
    *t1_down1 = (d1 == -1) ? -1 : (d1 + 1) % n;
  } else {
    /* Even: mirror. */
    int u;
    int d0;
    int d1;
    mc_topo_btree(n, n - 1 - r, &u, &d0, &d1, t1_child_type);
    *t1_up = (u == -1) ? -1 : n - 1 - u;
    *t1_down0 = (d0 == -1) ? -1 : n - 1 - d0;
    *t1_down1 = (d1 == -1) ? -1 : n - 1 - d1;
  }
}

/* ---------------------------------------------------------------- preset */

static void info_of(const struct mc_topo_graph *g, struct mc_topo_graph_info *info)
{
  info->pattern = g->pattern;
  info->n_channels = g->n_channels;
  info->same_channels = g->same_channels;
  info->bw_intra = g->bw_intra;
  info->bw_inter = g->bw_inter;
  info->type_intra = g->type_intra;
  info->type_inter = g->type_inter;
  info->cross_nic = g->cross_nic;
}

ncclResult_t mc_topo_preset(const struct mc_topo_system *sys, int rank,
                            const struct mc_topo_graph *ring, const struct mc_topo_graph *tree,
                            int min_comp_cap, struct mc_topo_ranks *ranks_out,
                            struct mc_topo_channel channels_out[MC_TOPO_MAX_CHANNELS])
{
  int local = sys->nodes[MC_TOPO_GPU].count;
  int n = (ring->n_channels < tree->n_channels) ? ring->n_channels : tree->n_channels;
  int child0 = (tree->pattern == MC_TOPO_PATTERN_TREE) ? 0 : 1;
  int child1 = (tree->pattern == MC_TOPO_PATTERN_SPLIT_TREE) ? 1 : 0;

  if ((n <= 0) || (n > MC_TOPO_RANKS_CHANNELS) || (ring->n_gpus != local) ||
      (tree->n_gpus != local) || ((local == 1) && (child0 != 0))) {
    return MC_FAIL(ncclInternalError, "Topo preset: %d ring / %d tree channels over %d GPUs",
                   ring->n_channels, tree->n_channels, local);
  }
  memset(ranks_out, 0, sizeof(*ranks_out));
  info_of(ring, &ranks_out->ring);
  info_of(tree, &ranks_out->tree);
  ranks_out->cross_nic_ring = ring->cross_nic;
  ranks_out->min_comp_cap = min_comp_cap;
  for (int c = 0; c < MC_TOPO_MAX_CHANNELS; c++) {
    struct mc_topo_channel *ch = &channels_out[c];
    ch->ring_prev = ch->ring_next = -1;
    ch->tree_up = -1;
    for (int i = 0; i < MC_TOPO_TREE_ARITY; i++) {
      ch->tree_down[i] = -1;
    }
    ch->tree_depth = 0;
  }
  for (int c = 0; c < n; c++) {
    const int *ri = ring->intra + c * local;
    const int *ti = tree->intra + c * local;
    struct mc_topo_channel *ch = &channels_out[c];
    for (int i = 0; i < local; i++) {
      if (ri[i] == rank) {
        ranks_out->ring_recv[c] = ri[0];
        ranks_out->ring_send[c] = ri[local - 1];
        ranks_out->ring_prev[c] = (i == 0) ? -1 : ri[i - 1];
        ranks_out->ring_next[c] = (i == local - 1) ? -1 : ri[i + 1];
      }
      if (ti[i] == rank) {
        ranks_out->tree_to_parent[c] = ti[0];
        ranks_out->tree_to_child0[c] = ti[child0];
        ranks_out->tree_to_child1[c] = ti[child1];
        ch->tree_up = (i == 0) ? -1 : ti[i - 1];
        ch->tree_down[0] = (i == local - 1) ? -1 : ti[i + 1];
      }
    }
  }
  /* Channels [n, 2n) will carry the second tree of the double binary tree. */
  memcpy(&channels_out[n], &channels_out[0], (size_t)n * sizeof(channels_out[0]));
  return ncclSuccess;
}

/* ---------------------------------------------------------- AllGather3 */

/* A record's Preset channels, as pack and unpack count them. */
static int record_channels(const struct mc_topo_ranks *x)
{
  int n = (x->ring.n_channels < x->tree.n_channels) ? x->ring.n_channels : x->tree.n_channels;

  return (n < 0) ? 0 : (n > MC_TOPO_RANKS_CHANNELS) ? MC_TOPO_RANKS_CHANNELS : n;
}

/* A packed record: the fields before the channel arrays as they are, then
 * each array with record_channels() values, in this order. */
#define RECORD_HEAD_BYTES offsetof(struct mc_topo_ranks, ring_recv)

static const size_t record_arrays[] = {
    offsetof(struct mc_topo_ranks, ring_recv),      offsetof(struct mc_topo_ranks, ring_send),
    offsetof(struct mc_topo_ranks, ring_prev),      offsetof(struct mc_topo_ranks, ring_next),
    offsetof(struct mc_topo_ranks, tree_to_parent), offsetof(struct mc_topo_ranks, tree_to_child0),
    offsetof(struct mc_topo_ranks, tree_to_child1)};
#define RECORD_ARRAYS (sizeof(record_arrays) / sizeof(record_arrays[0]))

size_t mc_topo_ranks_pack(const struct mc_topo_ranks *all, int n_ranks, void *buf)
{
  char *p = buf;
  size_t off = 0;

  for (int r = 0; r < n_ranks; r++) {
    const char *x = (const char *)&all[r];
    size_t arr = (size_t)record_channels(&all[r]) * sizeof(int32_t);
    if (p != NULL) {
      memcpy(p + off, x, RECORD_HEAD_BYTES);
      for (size_t i = 0; i < RECORD_ARRAYS; i++) {
        memcpy(p + off + RECORD_HEAD_BYTES + i * arr, x + record_arrays[i], arr);
      }
    }
    off += RECORD_HEAD_BYTES + RECORD_ARRAYS * arr;
  }
  return off;
}

ncclResult_t mc_topo_ranks_unpack(const void *buf, size_t bytes, int n_ranks,
                                  struct mc_topo_ranks *all)
{
  const char *p = buf;
  size_t off = 0;

  for (int r = 0; r < n_ranks; r++) {
    char *x = (char *)&all[r];
    size_t arr;
    memset(x, 0, sizeof(all[r]));
    if (bytes - off < RECORD_HEAD_BYTES) {
      return MC_FAIL(ncclRemoteError, "AllGather3: %zu bytes end before rank %d's record", bytes,
                     r);
    }
    memcpy(x, p + off, RECORD_HEAD_BYTES);
    arr = (size_t)record_channels(&all[r]) * sizeof(int32_t);
    if ((bytes - off - RECORD_HEAD_BYTES) / RECORD_ARRAYS < arr) {
      return MC_FAIL(ncclRemoteError, "AllGather3: %zu bytes end within rank %d's %d channels",
                     bytes, r, record_channels(&all[r]));
    }
    for (size_t i = 0; i < RECORD_ARRAYS; i++) {
      memcpy(x + record_arrays[i], p + off + RECORD_HEAD_BYTES + i * arr, arr);
    }
    off += RECORD_HEAD_BYTES + RECORD_ARRAYS * arr;
  }
  if (off != bytes) {
    return MC_FAIL(ncclRemoteError, "AllGather3: %zu bytes hold %d ranks' records in %zu", bytes,
                   n_ranks, off);
  }
  return ncclSuccess;
}

/* ---------------------------------------------------------------- postset */

void mc_topo_connect_opts_from_params(struct mc_topo_connect_opts *opts)
{
  int64_t v;

  opts->min_channels = 0;
  opts->max_channels = MC_TOPO_MAX_CHANNELS;
  opts->min_ctas = 1;
  opts->max_ctas = MC_TOPO_MAX_CHANNELS;
  opts->n_node_orders = 0;
  opts->node_orders = NULL;
  /* The legacy names first, the new ones win (connect.cc ncclMin/MaxNchannels). */
  if ((v = mc_param_int(MC_P_MIN_NRINGS)) != -2)
    opts->min_channels = (int)v;
  if ((v = mc_param_int(MC_P_MIN_NCHANNELS)) != -2)
    opts->min_channels = (int)v;
  if ((v = mc_param_int(MC_P_MAX_NRINGS)) != -2)
    opts->max_channels = (int)v;
  if ((v = mc_param_int(MC_P_MAX_NCHANNELS)) != -2)
    opts->max_channels = (int)v;
  if (opts->min_channels > MC_TOPO_MAX_CHANNELS) {
    MC_INFO(MC_SUB_GRAPH | MC_SUB_ENV, "User asked for a minimum of %d channels, limiting to %d",
            opts->min_channels, MC_TOPO_MAX_CHANNELS);
    opts->min_channels = MC_TOPO_MAX_CHANNELS;
  }
  if (opts->min_channels < 0)
    opts->min_channels = 0;
  if (opts->max_channels > MC_TOPO_MAX_CHANNELS)
    opts->max_channels = MC_TOPO_MAX_CHANNELS;
  if (opts->max_channels < 1) {
    MC_INFO(MC_SUB_GRAPH | MC_SUB_ENV, "User asked for a maximum of %d channels, setting it to 1",
            opts->max_channels);
    opts->max_channels = 1;
  }
}

static int log2i(int n)
{
  int l = 0;

  while (n >>= 1) {
    l++;
  }
  return l;
}

static void align(struct mc_topo_graph_info *a, const struct mc_topo_graph_info *b)
{
  a->n_channels = (b->n_channels < a->n_channels) ? b->n_channels : a->n_channels;
  a->same_channels = (b->same_channels < a->same_channels) ? b->same_channels : a->same_channels;
  a->bw_intra = (b->bw_intra < a->bw_intra) ? b->bw_intra : a->bw_intra;
  a->bw_inter = (b->bw_inter < a->bw_inter) ? b->bw_inter : a->bw_inter;
  a->type_intra = (b->type_intra > a->type_intra) ? b->type_intra : a->type_intra;
  a->type_inter = (b->type_inter > a->type_inter) ? b->type_inter : a->type_inter;
  a->cross_nic = (b->cross_nic > a->cross_nic) ? b->cross_nic : a->cross_nic;
}

/* copyChannels: channels [start, end) repeat channels [0, end - start). */
static int copy_channels(struct mc_topo_channels *out, int start, int end, int *prev, int *next)
{
  int n = out->n_ranks;
  int c;

  for (c = start; c < end; c++) {
    memcpy(prev + c * n, prev + (c - start) * n, (size_t)n * sizeof(*prev));
    memcpy(next + c * n, next + (c - start) * n, (size_t)n * sizeof(*next));
    out->channels[c] = out->channels[c - start];
  }
  return (end > start) ? end : start;
}

static void set_tree_up(struct mc_topo_channel *ch, const int *indexes, int u)
{
  if (u != -1) {
    ch->tree_up = indexes[u];
  }
}

static ncclResult_t set_tree_down(struct mc_topo_channel *ch, const int *indexes, int d)
{
  int x = 0;

  if (d == -1) {
    return ncclSuccess;
  }
  while ((x < MC_TOPO_TREE_ARITY) && (ch->tree_down[x] >= 0)) {
    x++;
  }
  if (x == MC_TOPO_TREE_ARITY) {
    return MC_FAIL(ncclInternalError, "Internal error : tree already has %d children (%d %d %d)", x,
                   ch->tree_down[0], ch->tree_down[1], ch->tree_down[2]);
  }
  ch->tree_down[x] = indexes[d];
  return ncclSuccess;
}

/* connectTrees: the double binary tree over nodes, entering each node at its
 * treeToParent rank and leaving to children from treeToChild0/1. */
static ncclResult_t connect_trees(struct mc_topo_channels *out, int n, const int *ttp_all,
                                  const int *ttc0_all, const int *ttc1_all, FILE *log)
{
  int nn = out->n_nodes;
  int node = out->node;
  int depth = out->n_ranks / nn - 1 + log2i(nn);
  int t0u;
  int t0d0;
  int t0d1;
  int t0ct = 0;
  int t1u;
  int t1d0;
  int t1d1;
  int t1ct = 0;

  mc_topo_dtree(nn, node, &t0u, &t0d0, &t0d1, &t0ct, &t1u, &t1d0, &t1d1, &t1ct);
  for (int c = 0; c < n; c++) {
    struct mc_topo_channel *ch0 = &out->channels[c];
    struct mc_topo_channel *ch1 = &out->channels[c + n];
    const int *ttp = ttp_all + c * nn;
    const int *ttc0 = ttc0_all + c * nn;
    const int *ttc1 = ttc1_all + c * nn;
    int rank = out->rank;

    if (rank == ttp[node]) {
      set_tree_up(ch0, (t0ct == 0) ? ttc0 : ttc1, t0u);
      set_tree_up(ch1, (t1ct == 0) ? ttc0 : ttc1, t1u);
    }
    if (rank == ttc0[node]) {
      MC_CHECK(set_tree_down(ch0, ttp, t0d0));
      MC_CHECK(set_tree_down(ch1, ttp, t1d0));
    }
    if (rank == ttc1[node]) {
      MC_CHECK(set_tree_down(ch0, ttp, t0d1));
      MC_CHECK(set_tree_down(ch1, ttp, t1d1));
    }
    if ((log != NULL) && ((rank == ttp[node]) || (rank == ttc0[node]) || (rank == ttc1[node]))) {
      fprintf(log, "Tree %d : %d -> %d -> %d/%d/%d\n", c, ch0->tree_up, rank, ch0->tree_down[0],
              ch0->tree_down[1], ch0->tree_down[2]);
      fprintf(log, "Tree %d : %d -> %d -> %d/%d/%d\n", c + n, ch1->tree_up, rank, ch1->tree_down[0],
              ch1->tree_down[1], ch1->tree_down[2]);
    }
    ch0->tree_depth = ch1->tree_depth = depth;
  }
  return ncclSuccess;
}

/* ncclBuildRings: ring orders from next[], checked to close and hold every rank. */
static ncclResult_t build_rings(struct mc_topo_channels *out, const int *next)
{
  int nr = out->n_ranks;
  char *seen = NULL;

  if (nr <= 0) {
    return MC_FAIL(ncclInternalError, "Topo rings: %d ranks", nr);
  }
  MC_CHECK(mc_calloc(&seen, (size_t)nr));
  for (int r = 0; r < out->n_channels; r++) {
    int *ring = out->rings + r * nr;
    int cur = out->rank;
    for (int i = 0; i < nr; i++) {
      ring[i] = cur;
      cur = next[r * nr + cur];
      if ((cur < 0) || (cur >= nr)) {
        free(seen);
        return MC_FAIL(ncclInternalError, "Error : ring %d is broken after rank %d", r, ring[i]);
      }
    }
    if (cur != out->rank) {
      free(seen);
      return MC_FAIL(ncclInternalError, "Error : ring %d does not loop back to start (%d != %d)", r,
                     cur, out->rank);
    }
    memset(seen, 0, (size_t)nr);
    for (int i = 0; i < nr; i++) {
      seen[ring[i]] = 1;
    }
    for (int i = 0; i < nr; i++) {
      if (seen[i] == 0) {
        free(seen);
        return MC_FAIL(ncclInternalError, "Error : ring %d does not contain rank %d", r, i);
      }
    }
  }
  free(seen);
  return ncclSuccess;
}

/* Every rank number received is checked before it indexes anything. */
static ncclResult_t check_ranks(const struct mc_topo_ranks *all, int n_ranks)
{
  for (int r = 0; r < n_ranks; r++) {
    const struct mc_topo_ranks *x = &all[r];
    int n = (x->ring.n_channels < x->tree.n_channels) ? x->ring.n_channels : x->tree.n_channels;
    if ((n < 1) || (n > MC_TOPO_RANKS_CHANNELS)) {
      return MC_FAIL(ncclRemoteError, "rank %d: %d ring / %d tree channels", r, x->ring.n_channels,
                     x->tree.n_channels);
    }
    for (int c = 0; c < n; c++) {
      const int32_t v[] = {x->ring_recv[c],      x->ring_send[c],      x->tree_to_parent[c],
                           x->tree_to_child0[c], x->tree_to_child1[c], x->ring_prev[c] + 1,
                           x->ring_next[c] + 1};
      for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        if ((v[i] < 0) || (v[i] >= n_ranks + ((i >= 5) ? 1 : 0))) {
          return MC_FAIL(ncclRemoteError, "rank %d: channel %d names rank %d of %d", r, c,
                         (i >= 5) ? v[i] - 1 : v[i], n_ranks);
        }
      }
    }
  }
  return ncclSuccess;
}

/* init.cc after AllGather3: nodes, local ranks, aligned graph information. */
static ncclResult_t find_nodes(struct mc_topo_channels *out, const struct mc_topo_ranks *all)
{
  int nr = out->n_ranks;

  MC_CHECK(mc_calloc(&out->node_first_rank, (size_t)nr));
  MC_CHECK(mc_calloc(&out->node_tree_pattern, (size_t)nr));
  MC_CHECK(mc_calloc(&out->rank_to_node, (size_t)nr));
  out->n_nodes = 0;
  for (int r = 0; r < nr; r++) {
    int first = all[r].ring_recv[0];
    int node = 0;
    while ((node < out->n_nodes) && (out->node_first_rank[node] != first)) {
      node++;
    }
    if (node == out->n_nodes) {
      out->n_nodes++;
      out->node_first_rank[node] = first;
      out->node_tree_pattern[node] = all[r].tree.pattern;
    }
    out->rank_to_node[r] = node;
  }
  out->node = out->rank_to_node[out->rank];
  out->local_ranks = 0;
  out->local_rank = -1;
  for (int r = 0; r < nr; r++) {
    if (out->rank_to_node[r] == out->node) {
      if (r == out->rank) {
        out->local_rank = out->local_ranks;
      }
      out->local_ranks++;
    }
  }
  out->ring = all[out->rank].ring;
  out->tree = all[out->rank].tree;
  out->max_tree_pattern = 0;
  for (int r = 0; r < nr; r++) {
    align(&out->ring, &all[r].ring);
    align(&out->tree, &all[r].tree);
    out->max_tree_pattern =
        (all[r].tree.pattern > out->max_tree_pattern) ? all[r].tree.pattern : out->max_tree_pattern;
  }
  return ncclSuccess;
}

/* Each node order must be a permutation of 0..n_nodes-1. */
static ncclResult_t check_node_orders(const struct mc_topo_connect_opts *opts, int n_nodes)
{
  if (opts->n_node_orders <= 0)
    return ncclSuccess;
  if (opts->node_orders == NULL)
    return MC_FAIL(ncclInvalidArgument, "Topo postset: %d node orders but no array",
                   opts->n_node_orders);
  for (int o = 0; o < opts->n_node_orders; o++) {
    const int *order = opts->node_orders + o * n_nodes;
    uint64_t seen[(MC_TOPO_MAX_NODES_ORDERED + 63) / 64] = {0};
    if (n_nodes > MC_TOPO_MAX_NODES_ORDERED)
      return MC_FAIL(ncclInvalidArgument, "Topo postset: node orders for %d nodes (at most %d)",
                     n_nodes, MC_TOPO_MAX_NODES_ORDERED);
    for (int k = 0; k < n_nodes; k++) {
      int v = order[k];
      if ((v < 0) || (v >= n_nodes) || ((seen[v / 64] >> (v % 64)) & 1))
        return MC_FAIL(ncclInvalidArgument,
                       "Topo postset: node order %d is not a permutation of the %d nodes "
                       "(position %d holds %d)",
                       o, n_nodes, k, v);
      seen[v / 64] |= 1ull << (v % 64);
    }
  }
  return ncclSuccess;
}

/* Rail alternation (init.cc): the odd nodes of a crossNic 2 ring swap their
 * ring channels in pairs; rank r's ring channel c is its record's
 * rail_channel(all[r], its node, n, c). */
static int rail_channel(const struct mc_topo_ranks *x, int node, int n, int c)
{
  return ((x->cross_nic_ring == 2) && ((n % 2) == 0) && ((node % 2) == 1)) ? (c ^ 1) : c;
}

ncclResult_t mc_topo_postset(int rank, int n_ranks, const struct mc_topo_ranks *all,
                             const struct mc_topo_channel preset[MC_TOPO_MAX_CHANNELS],
                             const struct mc_topo_connect_opts *opts, FILE *log,
                             struct mc_topo_channels *out)
{
  int *ring_prev = NULL;
  int *ring_next = NULL;
  int *ring_recv = NULL;
  int *ring_send = NULL;
  int *ttp = NULL;
  int *ttc0 = NULL;
  int *ttc1 = NULL;
  int n_orig;
  int n;
  int n_ring_ch;
  int nn;
  int min_cc = 0;
  ncclResult_t res = ncclSuccess;

  memset(out, 0, sizeof(*out));
  out->rank = rank;
  out->n_ranks = n_ranks;
  if ((rank < 0) || (rank >= n_ranks)) {
    return MC_FAIL(ncclInternalError, "Topo postset: rank %d of %d", rank, n_ranks);
  }
  MC_CHECK(check_ranks(all, n_ranks));
  MC_CHECK_GOTO(find_nodes(out, all), res, fail);
  nn = out->n_nodes;

  min_cc = all[0].min_comp_cap;
  for (int r = 1; r < n_ranks; r++) {
    min_cc = (all[r].min_comp_cap < min_cc) ? all[r].min_comp_cap : min_cc;
  }

  n_orig = (all[rank].ring.n_channels < all[rank].tree.n_channels) ? all[rank].ring.n_channels
                                                                   : all[rank].tree.n_channels;
  n = (out->tree.n_channels < out->ring.n_channels) ? out->tree.n_channels : out->ring.n_channels;
  out->ring.n_channels = out->tree.n_channels = n;
  out->n_tree_channels = n;
  memcpy(out->channels, preset, sizeof(out->channels));
  if (n < n_orig) {
    /* Preset duplicated channels [0, n_orig); keep the duplicates next to the first n. */
    for (int i = 0; i < n; i++) {
      out->channels[n + i] = preset[n_orig + i];
    }
  }

  MC_CHECK_GOTO(mc_calloc(&ring_prev, (size_t)MC_TOPO_MAX_CHANNELS * (size_t)n_ranks), res, fail);
  MC_CHECK_GOTO(mc_calloc(&ring_next, (size_t)MC_TOPO_MAX_CHANNELS * (size_t)n_ranks), res, fail);
  MC_CHECK_GOTO(mc_calloc(&ring_recv, (size_t)MC_TOPO_MAX_CHANNELS * (size_t)nn), res, fail);
  MC_CHECK_GOTO(mc_calloc(&ring_send, (size_t)MC_TOPO_MAX_CHANNELS * (size_t)nn), res, fail);
  MC_CHECK_GOTO(mc_calloc(&ttp, (size_t)MC_TOPO_MAX_CHANNELS * (size_t)nn), res, fail);
  MC_CHECK_GOTO(mc_calloc(&ttc0, (size_t)MC_TOPO_MAX_CHANNELS * (size_t)nn), res, fail);
  MC_CHECK_GOTO(mc_calloc(&ttc1, (size_t)MC_TOPO_MAX_CHANNELS * (size_t)nn), res, fail);
  for (int c = 0; c < n; c++) {
    for (int k = 0; k < nn; k++) {
      const struct mc_topo_ranks *f = &all[out->node_first_rank[k]];
      int rc = rail_channel(f, k, n, c);
      ring_recv[c * nn + k] = f->ring_recv[rc];
      ring_send[c * nn + k] = f->ring_send[rc];
      ttp[c * nn + k] = f->tree_to_parent[c];
      ttc0[c * nn + k] = f->tree_to_child0[c];
      ttc1[c * nn + k] = f->tree_to_child1[c];
    }
    for (int r = 0; r < n_ranks; r++) {
      int rc = rail_channel(&all[r], out->rank_to_node[r], n, c);
      ring_prev[c * n_ranks + r] = all[r].ring_prev[rc];
      ring_next[c * n_ranks + r] = all[r].ring_next[rc];
    }
  }

  MC_CHECK_GOTO(check_node_orders(opts, nn), res, fail);
  /* The doubled channels c + n start as copies of channel c (NCCL copies
   * them after connectRings; with node orders each needs its own). With
   * more node orders than that (a mesh whose cables carry more rings), one
   * channel per order: channel cc copies searched channel cc % n. */
  n_ring_ch = 2 * n;
  if ((n > 0) && (opts->n_node_orders > n_ring_ch))
    n_ring_ch =
        (opts->n_node_orders < MC_TOPO_MAX_CHANNELS) ? opts->n_node_orders : MC_TOPO_MAX_CHANNELS;
  for (int cc = n; cc < n_ring_ch; cc++) {
    memcpy(ring_prev + cc * n_ranks, ring_prev + (cc % n) * n_ranks,
           (size_t)n_ranks * sizeof(*ring_prev));
    memcpy(ring_next + cc * n_ranks, ring_next + (cc % n) * n_ranks,
           (size_t)n_ranks * sizeof(*ring_next));
  }
  /* connectRings: node k's ring head receives from node k-1's tail, k
   * running over the nodes in the channel's order. */
  for (int cc = 0; cc < n_ring_ch; cc++) {
    const int *recv = ring_recv + (cc % n) * nn;
    const int *send = ring_send + (cc % n) * nn;
    const int *order =
        (opts->n_node_orders > 0) ? opts->node_orders + (cc % opts->n_node_orders) * nn : NULL;
    for (int k = 0; k < nn; k++) {
      int cur = (order != NULL) ? order[k] : k;
      int before = (order != NULL) ? order[(k - 1 + nn) % nn] : (k - 1 + nn) % nn;
      int after = (order != NULL) ? order[(k + 1) % nn] : (k + 1) % nn;
      ring_prev[cc * n_ranks + recv[cur]] = send[before];
      ring_next[cc * n_ranks + send[cur]] = recv[after];
    }
  }
  MC_CHECK_GOTO(connect_trees(out, n, ttp, ttc0, ttc1, log), res, fail);
  /* Channels past the doubled ones take the trees of the one they copy. */
  for (int c = 2 * n; c < n_ring_ch; c++)
    out->channels[c] = out->channels[c % (2 * n)];

  for (int c = 0; c < n_ring_ch; c++) {
    out->channels[c].ring_prev = ring_prev[c * n_ranks + rank];
    out->channels[c].ring_next = ring_next[c * n_ranks + rank];
  }
  out->n_channels = (n_ring_ch < MC_TOPO_MAX_CHANNELS) ? n_ring_ch : MC_TOPO_MAX_CHANNELS;

  /* Fast NVLink rings on sm90+ across nodes: more channels (4 per searched one). */
  if ((min_cc >= 90) && (nn > 1) && (out->ring.bw_intra > 45.0f) && (out->n_channels < 16)) {
    out->n_channels =
        copy_channels(out, out->n_channels, 2 * out->n_channels, ring_prev, ring_next);
  }
  /* NCCL_MIN/MAX_NCHANNELS and the config's CTA bounds. */
  {
    int lim = opts->max_channels;
    int lo = (opts->min_channels > opts->min_ctas) ? opts->min_channels : opts->min_ctas;
    lim = (out->n_channels < lim) ? out->n_channels : lim;
    lim = (opts->max_ctas < lim) ? opts->max_ctas : lim;
    out->n_channels = lim;
    lo = (lo > MC_TOPO_MAX_CHANNELS) ? MC_TOPO_MAX_CHANNELS : lo;
    out->n_channels = copy_channels(out, out->n_channels, lo, ring_prev, ring_next);
  }
  out->coll_channels = out->n_channels;
  out->nvls_channels = 0;

  MC_CHECK_GOTO(mc_calloc(&out->rings, (size_t)out->n_channels * (size_t)n_ranks), res, fail);
  MC_CHECK_GOTO(build_rings(out, ring_next), res, fail);
  goto done;
fail:
  mc_topo_channels_fini(out);
done:
  free(ring_prev);
  free(ring_next);
  free(ring_recv);
  free(ring_send);
  free(ttp);
  free(ttc0);
  free(ttc1);
  return res;
}

void mc_topo_channels_fini(struct mc_topo_channels *ch)
{
  free(ch->rings);
  free(ch->node_first_rank);
  free(ch->node_tree_pattern);
  free(ch->rank_to_node);
  ch->rings = NULL;
  ch->node_first_rank = NULL;
  ch->node_tree_pattern = NULL;
  ch->rank_to_node = NULL;
}

/* ---------------------------------------------------------------- lines */

void mc_topo_ring_line(const struct mc_topo_channels *ch, int c, char *buf, size_t bytes)
{
  /* dumpLine: a 128-byte line, "..." at its end when the ring did not fit. */
  char line[128];
  int width = snprintf(NULL, 0, "%d", ch->n_ranks - 1);
  int n = snprintf(line, sizeof(line), "Channel %02d/%02d :", c, ch->n_channels);
  const int *ring = ch->rings + c * ch->n_ranks;

  for (int i = 0; (i < ch->n_ranks) && (n < (int)sizeof(line) - 1); i++) {
    n += snprintf(line + n, sizeof(line) - (size_t)n, " %*d", width, ring[i]);
  }
  if (n >= (int)sizeof(line)) {
    snprintf(line + sizeof(line) - 4, 4, "...");
  }
  snprintf(buf, bytes, "%s", line);
}

void mc_topo_trees_line(const struct mc_topo_channels *ch, char *buf, size_t bytes)
{
  size_t len = 0;

  if (bytes == 0) {
    return;
  }
  len = (size_t)snprintf(buf, bytes, "Trees");
  for (int c = 0; (c < ch->n_channels) && (len < bytes); c++) {
    const struct mc_topo_channel *t = &ch->channels[c];
    len += (size_t)snprintf(buf + len, bytes - len, " [%d] %d/%d/%d->%d->%d", c, t->tree_down[0],
                            t->tree_down[1], t->tree_down[2], ch->rank, t->tree_up);
  }
}
