/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The channel search (mirrors NCCL 2.30's src/graph/search.cc: followPath,
 * ncclTopoFollowPath, ncclTopoSearchNextGpuSort, ncclTopoSelectNets,
 * ncclTopoSearchCheckNet, ncclTopoSearchRecGpu, ncclTopoSearchRecNet,
 * ncclTopoSearchRec, ncclTopoCompareGraphs, ncclTopoDupChannels and
 * ncclTopoCompute). Input: a system with paths (mc_topo_compute_paths,
 * mc_topo_search_init). Output: the graph's channels, each an order of the
 * node's GPUs (ranks) and, between nodes, the NET it enters and leaves by.
 *
 * The search is a depth-first walk with bandwidth accounting: following a
 * path charges the channel's bandwidth on every link of it and fails when a
 * link has too little left; backtracking gives it back. Budgets are counts of
 * visited steps (NCCL's NCCL_SEARCH_* constants), never wall-clock time, so
 * the same system always yields the same graph. The NVLS and CollNet patterns
 * are not searched (no NVSwitch multicast or CollNet on hosts): such graphs
 * keep 0 channels, as NCCL's init leaves them when unsupported.
 *
 * Length: one port of NCCL's search.cc, kept in its shape so the two read side by side.
 */
#include "topo/topo_graph.h"

#include "core/check.h"
#include "core/log.h"
#include "core/params.h"
#include "topo/topo_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Budgets (search.cc): iteration counts. */
#define SEARCH_GLOBAL_TIMEOUT       (1LL << 19)
#define SEARCH_TIMEOUT              (1 << 14)
#define SEARCH_TIMEOUT_TREE         (1 << 14)
#define SEARCH_TIMEOUT_SAMECHANNELS (1 << 8)
/* The first channel's PCI-order try runs on a budget of its own. */
#define SEARCH_TIMEOUT_PCI_ORDER (1 << 10)

#define FORCED_ORDER_PCI    1
#define FORCED_ORDER_REPLAY 2

/* P2P through an Intel root complex costs 20% more PCI bandwidth (topo.h INTEL_P2P_OVERHEAD). */
#define INTEL_P2P_OVERHEAD(_bw) ((_bw)*6 / 5)

/* Per-search state: the graph being built, the best one so far, scratch. */
struct search {
  struct mc_topo_system *sys;
  const struct mc_topo_search_opts *opts;
  struct mc_topo_graph *graph; /* being built (NCCL's tmpGraph) */
  struct mc_topo_graph *best;  /* NCCL's saveGraph: the caller's graph */
  /* order[g * ngpus ...]: every GPU reachable from GPU g, best first, as
   * ncclTopoSearchNextGpuSort sorts them without a NET (their keys are paths,
   * which do not change during a search); n_order[g] of them, -1 until
   * sorted. Filtering the used ones out of it keeps NCCL's order. */
  int *order;
  int *n_order;
  /* select_nets' answers, which depend on paths only: for GPU g (-1 for
   * all, slot g + 1) and type_inter t (-1..MC_PATH_DIS, slot t + 1),
   * n_nets_of[slot] NETs (-1 until asked) in nets_of[slot * n_nets ...]. */
  int *nets_of;
  int *n_nets_of;
};

#define NETS_TYPE_SLOTS (MC_PATH_DIS + 2)

static ncclResult_t search_rec(struct search *s, int *time);

static inline struct mc_topo_node *node_at(const struct mc_topo_system *sys, int type, int i)
{
  return sys->nodes[type].nodes[i];
}

static inline int n_of(const struct mc_topo_system *sys, int type)
{
  return sys->nodes[type].count;
}

/* ------------------------------------------------------- bandwidth walk */

/* The link of node2 that leads back to node1 with the same type. */
static struct mc_topo_link *find_rev_link(struct mc_topo_node *node1, struct mc_topo_node *node2,
                                          int type)
{
  for (int l = 0; l < node2->n_links; l++) {
    if ((node2->links[l].rem == node1) && ((int)node2->links[l].type == type)) {
      return &node2->links[l];
    }
  }
  return NULL;
}

static inline void sub_round(float *a, float b)
{
  /* NCCL's SUB_ROUND: float arithmetic drifts; keep 1/1000 GB/s. */
  *a = roundf((*a - b) * 1000) / 1000;
}

/* followPath: charges bw on the first max_steps links of path; *steps_out is
 * the number of links charged (< max_steps when one lacked bandwidth). */
static ncclResult_t follow_path(const struct mc_topo_system *sys, const struct mc_topo_path *path,
                                struct mc_topo_node *start, int max_steps, float bw, int *steps_out)
{
  float pci_bw = bw;
  struct mc_topo_node *node = start;
  const struct mc_topo_hop *hop = mc_topo_hop_at(sys, path->hops);

  if ((path->type == MC_PATH_PHB) && (start->type == MC_TOPO_GPU)) {
    for (const struct mc_topo_hop *h = hop; h != NULL; h = mc_topo_hop_at(sys, h->next)) {
      const struct mc_topo_node *n = mc_topo_hop_link(sys, h)->rem;
      if ((n->type == MC_TOPO_CPU) && (n->cpu.arch == MC_TOPO_CPU_ARCH_X86) &&
          (n->cpu.vendor == MC_TOPO_CPU_VENDOR_INTEL)) {
        pci_bw = INTEL_P2P_OVERHEAD(bw);
      }
    }
  }
  for (int step = 0; step < max_steps; step++, hop = mc_topo_hop_at(sys, hop->next)) {
    struct mc_topo_link *link = mc_topo_hop_link(sys, hop);
    struct mc_topo_link *rev = NULL;
    float fw_bw = (link->type == MC_TOPO_LINK_PCI) ? pci_bw : bw;
    float rev_bw = 0;

    /* Old GPUs (sm < 80) pay 1/8 of the traffic they receive on the way back. */
    if ((link->rem->type == MC_TOPO_DEV) && (link->rem->dev.sm < 80) &&
        (start->type != MC_TOPO_GPU)) {
      rev = find_rev_link(node, link->rem, (int)link->type);
      rev_bw += fw_bw / 8;
    }
    if ((link->rem->type == MC_TOPO_CPU) && (link->rem->cpu.arch == MC_TOPO_CPU_ARCH_POWER) &&
        (link->type == MC_TOPO_LINK_NVL)) {
      if (rev == NULL) {
        rev = find_rev_link(node, link->rem, (int)link->type);
      }
      rev_bw += fw_bw;
    }
    if ((rev_bw != 0) && (rev == NULL)) {
      return MC_FAIL(ncclInternalError, "Topo search: no reverse link for %s/%llx -> %s/%llx",
                     mc_topo_node_type_str(node->type), (unsigned long long)node->id,
                     mc_topo_node_type_str(link->rem->type), (unsigned long long)link->rem->id);
    }
    if ((link->bw < fw_bw) || ((rev_bw != 0) && (rev->bw < rev_bw))) {
      *steps_out = step;
      return ncclSuccess;
    }
    sub_round(&link->bw, fw_bw);
    if (rev_bw != 0) {
      sub_round(&rev->bw, rev_bw);
    }
    node = link->rem;
  }
  *steps_out = max_steps;
  return ncclSuccess;
}

static bool is_tree_pattern(int pattern)
{
  return (pattern == MC_TOPO_PATTERN_BALANCED_TREE) || (pattern == MC_TOPO_PATTERN_TREE) ||
         (pattern == MC_TOPO_PATTERN_SPLIT_TREE);
}

/*
 * ncclTopoFollowPath: from (type1, i1) to (type2, i2); mult 1 charges, -1
 * gives back. *node_out is the destination on success, NULL when the path is
 * of a type the graph does not allow or lacks bandwidth. type1 -1: no path
 * to follow (a channel's first GPU).
 */
static ncclResult_t follow(struct search *s, int type1, int i1, int type2, int i2, float mult,
                           struct mc_topo_node **node_out)
{
  struct mc_topo_system *sys = s->sys;
  struct mc_topo_graph *g = s->graph;
  struct mc_topo_node *n1;
  struct mc_topo_node *n2 = node_at(sys, type2, i2);
  const struct mc_topo_path *path;
  const struct mc_topo_path *rev_path;
  bool intra;
  float bw;
  int type;
  int step = 0;

  *node_out = n2;
  if (type1 == -1) {
    return ncclSuccess;
  }
  n1 = node_at(sys, type1, i1);
  if ((n1->paths[type2] == NULL) || (n2->paths[type1] == NULL)) {
    return MC_FAIL(ncclInternalError, "Topo search: no path computed from %s/%d to %s/%d",
                   mc_topo_node_type_str(type1), i1, mc_topo_node_type_str(type2), i2);
  }
  path = &n1->paths[type2][i2];
  rev_path = &n2->paths[type1][i1];
  *node_out = NULL;
  intra = ((type1 == MC_TOPO_GPU) || (type1 == MC_TOPO_NVS)) &&
          ((type2 == MC_TOPO_GPU) || (type2 == MC_TOPO_NVS));
  bw = intra ? g->bw_intra : g->bw_inter;
  type = intra ? g->type_intra : g->type_inter;

  if ((int)path->type >= MC_PATH_DIS) {
    return ncclSuccess;
  }
  if ((mult == 1) && ((int)path->type > type)) {
    return ncclSuccess;
  }
  if ((mult == 1) && is_tree_pattern(g->pattern) && ((int)rev_path->type > type)) {
    return ncclSuccess;
  }
  bw *= mult;
  MC_CHECK(follow_path(sys, path, n1, path->count, bw, &step));
  if (step < path->count) {
    /* Not enough bandwidth: give back what was charged. */
    MC_CHECK(follow_path(sys, path, n1, step, -bw, &step));
    return ncclSuccess;
  }
  g->n_hops += (int)(mult * (float)path->count);
  *node_out = n2;
  return ncclSuccess;
}

/* ------------------------------------------------------- GPU ordering */

/* gpuPciBw: the GPU's PCI link bandwidth (the smaller direction), truncated. */
static int gpu_pci_bw(const struct mc_topo_node *gpu)
{
  const struct mc_topo_node *dev = gpu->gpu.parent;

  if (dev == NULL) {
    return -1;
  }
  for (int l = 0; l < dev->n_links; l++) {
    const struct mc_topo_link *gl = &dev->links[l];
    if (gl->type != MC_TOPO_LINK_PCI) {
      continue;
    }
    for (int k = 0; k < gl->rem->n_links; k++) {
      const struct mc_topo_link *pl = &gl->rem->links[k];
      if (pl->rem == dev) {
        return (int)((gl->bw < pl->bw) ? gl->bw : pl->bw);
      }
    }
  }
  return -1;
}

struct gpu_score {
  int g;
  int start_index; /* least important */
  int intra_hops;
  int intra_bw;
  int inter_hops;
  int inter_pci_bw;
  int inter_bw; /* most important */
};

static int cmp_score(const void *a, const void *b)
{
  const struct gpu_score *s1 = a;
  const struct gpu_score *s2 = b;
  int d;

  if ((d = s2->inter_bw - s1->inter_bw) != 0)
    return d;
  if ((d = s2->inter_pci_bw - s1->inter_pci_bw) != 0)
    return d;
  if ((d = s1->inter_hops - s2->inter_hops) != 0)
    return d;
  if ((d = s2->intra_bw - s1->intra_bw) != 0)
    return d;
  if ((d = s1->intra_hops - s2->intra_hops) != 0)
    return d;
  return s1->start_index - s2->start_index;
}

static int net_index_of(const struct mc_topo_system *sys, int64_t id)
{
  for (int n = 0; n < n_of(sys, MC_TOPO_NET); n++) {
    if (node_at(sys, MC_TOPO_NET, n)->id == id) {
      return n;
    }
  }
  return -1;
}

static int gpu_index_of_rank(const struct mc_topo_system *sys, int rank)
{
  return mc_topo_rank_to_index(sys, rank);
}

/* The GPUs reachable from gpu and not used by channel flag (flag 0: every
 * one), best first by cmp_score (a total order: start_index breaks ties),
 * into next; *count_out of them. */
static ncclResult_t sort_candidates(struct search *s, struct mc_topo_node *gpu,
                                    const struct mc_topo_path *net_paths, uint64_t flag, int *next,
                                    int *count_out)
{
  struct mc_topo_system *sys = s->sys;
  int ngpus = n_of(sys, MC_TOPO_GPU);
  const struct mc_topo_path *paths = gpu->paths[MC_TOPO_GPU];
  struct gpu_score *scores = NULL;
  int start = gpu->index;
  int count = 0;

  MC_CHECK(mc_calloc(&scores, (size_t)ngpus));
  for (int i = 1; i < ngpus; i++) {
    int c = (start + i) % ngpus;
    if (paths[c].count == 0) {
      continue;
    }
    if ((node_at(sys, MC_TOPO_GPU, c)->used & flag) != 0) {
      continue;
    }
    scores[count].g = c;
    scores[count].start_index = i;
    scores[count].intra_hops = paths[c].count;
    scores[count].intra_bw = (int)paths[c].bw;
    if (net_paths != NULL) {
      scores[count].inter_hops = net_paths[c].count;
      scores[count].inter_pci_bw = gpu_pci_bw(node_at(sys, MC_TOPO_GPU, c));
      scores[count].inter_bw = (int)net_paths[c].bw;
    }
    count++;
  }
  qsort(scores, (size_t)count, sizeof(*scores), cmp_score);
  for (int i = 0; i < count; i++) {
    next[i] = scores[i].g;
  }
  *count_out = count;
  free(scores);
  return ncclSuccess;
}

/*
 * ncclTopoSearchNextGpuSort: the GPUs to try after `gpu`, best first.
 * sort_net 1 scores by the path from the channel's start NET too; -1 reverses
 * the order when every candidate is alike from here.
 */
static ncclResult_t next_gpu_sort(struct search *s, struct mc_topo_node *gpu, int *next,
                                  int *count_out, int sort_net)
{
  struct mc_topo_system *sys = s->sys;
  struct mc_topo_graph *g = s->graph;
  const uint64_t flag = 1ULL << g->n_channels;
  int ngpus = n_of(sys, MC_TOPO_GPU);
  const struct mc_topo_path *paths = gpu->paths[MC_TOPO_GPU];
  const struct mc_topo_path *net_paths = NULL;
  int start = gpu->index;
  int count = 0;

  if (sort_net != 0) {
    int n = net_index_of(sys, g->inter[g->n_channels * 2]);
    if (n < 0) {
      return MC_FAIL(ncclInternalError, "Topo search: net id %llx not found",
                     (unsigned long long)g->inter[g->n_channels * 2]);
    }
    net_paths = node_at(sys, MC_TOPO_NET, n)->paths[MC_TOPO_GPU];
  }
  if (net_paths == NULL) {
    /* Keys without a NET are paths only: one sort per GPU and search. */
    int *order = &s->order[(size_t)start * (size_t)ngpus];
    if (s->n_order[start] < 0) {
      MC_CHECK(sort_candidates(s, gpu, NULL, 0, order, &s->n_order[start]));
    }
    for (int i = 0; i < s->n_order[start]; i++) {
      if ((node_at(sys, MC_TOPO_GPU, order[i])->used & flag) == 0) {
        next[count++] = order[i];
      }
    }
  } else {
    MC_CHECK(sort_candidates(s, gpu, net_paths, flag, next, &count));
    bool same_intra = true;
    for (int i = 1; i < count; i++) {
      if ((paths[next[i]].count != paths[next[0]].count) ||
          ((int)paths[next[i]].bw != (int)paths[next[0]].bw)) {
        same_intra = false;
      }
    }
    if ((sort_net == -1) && same_intra) {
      for (int i = 0; i < count / 2; i++) {
        int t = next[i];
        next[i] = next[count - 1 - i];
        next[count - 1 - i] = t;
      }
    }
  }
  *count_out = count;

  if (n_of(sys, MC_TOPO_NVS) > 0) {
    /* NVSwitches prefer a few peers per GPU: only the index neighbours. */
    int prev_gpu = (start - 1 + ngpus) % ngpus;
    int next_gpu = (start + 1) % ngpus;
    int first[2];
    int n_first;
    int real = 0;

    if (g->pattern == MC_TOPO_PATTERN_RING) {
      first[0] = next_gpu;
      first[1] = prev_gpu;
      n_first = 2;
    } else if ((g->pattern == MC_TOPO_PATTERN_SPLIT_TREE) ||
               (g->pattern == MC_TOPO_PATTERN_BALANCED_TREE)) {
      first[0] = prev_gpu;
      first[1] = next_gpu;
      n_first = 2;
    } else {
      first[0] = next_gpu;
      n_first = 1;
    }
    if ((next_gpu == prev_gpu) && (n_first == 2)) {
      n_first = 1;
    }
    for (int f = 0; f < n_first; f++) {
      int i = 0;
      while ((i < count) && (next[i] != first[f])) {
        i++;
      }
      if (i < count) {
        for (; i > 0; i--) {
          next[i] = next[i - 1];
        }
        next[0] = first[f];
        real++;
      }
    }
    *count_out = real;
  }
  return ncclSuccess;
}

/* ------------------------------------------------------- NET candidates */

static void add_unique(int *nets, int *count, int n)
{
  for (int i = 0; i < *count; i++) {
    if (nets[i] == n) {
      return;
    }
  }
  nets[(*count)++] = n;
}

/* ncclTopoPrefNetsGpuFirst: for channel c, each GPU's NET, until every GPU wraps. */
static ncclResult_t pref_nets_gpu_first(const struct mc_topo_system *sys, int gpu, int *nets,
                                        int *count)
{
  int ngpus = (gpu == -1) ? n_of(sys, MC_TOPO_GPU) : 1;
  int left = ngpus;
  int *ids = NULL;
  int *first = NULL;
  ncclResult_t res = ncclSuccess;

  MC_CHECK(mc_calloc(&ids, (size_t)ngpus));
  MC_CHECK_GOTO(mc_calloc(&first, (size_t)ngpus), res, out);
  for (int i = 0; i < ngpus; i++) {
    ids[i] = (gpu == -1) ? i : gpu;
  }
  for (int c = 0; (c < MC_TOPO_MAX_CHANNELS) && (left > 0); c++) {
    for (int i = 0; i < ngpus; i++) {
      int net = -1;
      if (ids[i] == -1) {
        continue;
      }
      MC_CHECK_GOTO(
          mc_topo_get_local_net(sys, node_at(sys, MC_TOPO_GPU, ids[i])->gpu.rank, c, &net), res,
          out);
      if (c == 0) {
        first[i] = net;
      } else if (first[i] == net) {
        ids[i] = -1;
        left--;
        continue;
      }
      add_unique(nets, count, net);
    }
  }
out:
  free(ids);
  free(first);
  return res;
}

/* ncclTopoPrefNetsChannelFirst: each GPU's NETs for channels 0, 1, ... until they wrap. */
static ncclResult_t pref_nets_channel_first(const struct mc_topo_system *sys, int gpu, int *nets,
                                            int *count)
{
  for (int g = 0; g < n_of(sys, MC_TOPO_GPU); g++) {
    int local[MC_TOPO_MAX_CHANNELS];
    int n_local = 0;
    if ((gpu != -1) && (gpu != g)) {
      continue;
    }
    for (int c = 0; c < MC_TOPO_MAX_CHANNELS; c++) {
      int net = -1;
      MC_CHECK(mc_topo_get_local_net(sys, node_at(sys, MC_TOPO_GPU, g)->gpu.rank, c, &net));
      if ((n_local > 0) && (net == local[0])) {
        break;
      }
      local[n_local++] = net;
    }
    for (int i = 0; i < n_local; i++) {
      add_unique(nets, count, local[i]);
    }
  }
  return ncclSuccess;
}

/*
 * ncclTopoSelectNets: the NETs to try for `gpu` (-1: all GPUs), preferred ones
 * first, then every other NET whose path type is at most type_inter, by type.
 * nets has room for every NET of the system.
 */
static ncclResult_t select_nets_uncached(const struct search *s, int type_inter, int gpu, int *nets,
                                         int *count_out);

/* select_nets through the search's cache (its answer depends on paths only,
 * which do not change during a search). */
static ncclResult_t select_nets(struct search *s, int type_inter, int gpu, int *nets,
                                int *count_out)
{
  int n_nets = n_of(s->sys, MC_TOPO_NET);
  int n_slots = (n_of(s->sys, MC_TOPO_GPU) + 1) * NETS_TYPE_SLOTS;
  int slot;

  if ((type_inter < -1) || (type_inter > MC_PATH_DIS) || (gpu < -1) ||
      (gpu >= n_of(s->sys, MC_TOPO_GPU))) {
    return select_nets_uncached(s, type_inter, gpu, nets, count_out);
  }
  if (s->nets_of == NULL) {
    MC_CHECK(mc_calloc(&s->n_nets_of, (size_t)n_slots));
    if (mc_calloc(&s->nets_of, (size_t)n_slots * (size_t)(n_nets + 1)) != ncclSuccess) {
      free(s->n_nets_of);
      s->n_nets_of = NULL;
      return ncclSystemError;
    }
    for (int i = 0; i < n_slots; i++) {
      s->n_nets_of[i] = -1;
    }
  }
  slot = (gpu + 1) * NETS_TYPE_SLOTS + type_inter + 1;
  if (s->n_nets_of[slot] < 0) {
    MC_CHECK(select_nets_uncached(s, type_inter, gpu, &s->nets_of[(size_t)slot * (size_t)n_nets],
                                  &s->n_nets_of[slot]));
  }
  memcpy(nets, &s->nets_of[(size_t)slot * (size_t)n_nets],
         (size_t)s->n_nets_of[slot] * sizeof(*nets));
  *count_out = s->n_nets_of[slot];
  return ncclSuccess;
}

static ncclResult_t select_nets_uncached(const struct search *s, int type_inter, int gpu, int *nets,
                                         int *count_out)
{
  const struct mc_topo_system *sys = s->sys;
  int count = 0;

  if ((sys->n_hosts > 1) && s->opts->scatter_nets) {
    MC_CHECK(pref_nets_gpu_first(sys, gpu, nets, &count));
  } else {
    MC_CHECK(pref_nets_channel_first(sys, gpu, nets, &count));
  }
  for (int t = 0; t <= type_inter; t++) {
    for (int g = 0; g < n_of(sys, MC_TOPO_GPU); g++) {
      const struct mc_topo_path *paths = node_at(sys, MC_TOPO_GPU, g)->paths[MC_TOPO_NET];
      if ((gpu != -1) && (gpu != g)) {
        continue;
      }
      for (int n = 0; (n < n_of(sys, MC_TOPO_NET)) && (n < MC_TOPO_MAX_CHANNELS); n++) {
        if ((int)paths[n].type == t) {
          add_unique(nets, &count, n);
        }
      }
    }
  }
  *count_out = count;
  return ncclSuccess;
}

/* ncclTopoSearchCheckNet: may a channel that started at start_net leave by NET n? */
static bool check_net(const struct search *s, const struct mc_topo_node *start_net, int n, int step)
{
  const struct mc_topo_graph *g = s->graph;
  const struct mc_topo_node *net = node_at(s->sys, MC_TOPO_NET, n);

  if ((net->net.plane != MC_TOPO_UNDEF) && (start_net->net.plane != MC_TOPO_UNDEF) &&
      (net->net.plane != start_net->net.plane)) {
    return false;
  }
  if ((g->pattern == MC_TOPO_PATTERN_TREE) && (net->id != start_net->id)) {
    return false; /* trees are symmetric */
  }
  if ((g->pattern == MC_TOPO_PATTERN_RING) && (g->cross_nic == 2)) {
    /* Odd channels end where the previous channel started (rail alternation). */
    if (((g->n_channels & 1) != 0) && (net->id != g->inter[(g->n_channels - 1) * 2])) {
      return false;
    }
  } else if (g->cross_nic == 0) {
    if ((net->net.rail != MC_TOPO_UNDEF) && (start_net->net.rail != MC_TOPO_UNDEF)) {
      if (net->net.rail != start_net->net.rail) {
        return false;
      }
    } else if ((net->net.asic != start_net->net.asic) || (net->net.port != start_net->net.port)) {
      /* NCCL_MNNVL_RAIL_PER_HOST matches by PCI id across hosts of one MNNVL
       * domain; a system here holds one host, so asic/port decides. */
      return false;
    }
  }
  if ((g->pattern == MC_TOPO_PATTERN_BALANCED_TREE) && (step != 0) &&
      (net->id != g->inter[g->n_channels * 2 + 1])) {
    return false;
  }
  return true;
}

/* ------------------------------------------------------- recursion */

static ncclResult_t rec_gpu(struct search *s, struct mc_topo_node *gpu, int step, int back_to_net,
                            int back_to_first_rank, int forced_order, int *time);

/* ncclTopoReplayGetGpu: the GPU at position step+1 of the previous channel. */
static ncclResult_t replay_get_gpu(const struct search *s, int step, int *g_out)
{
  const struct mc_topo_graph *g = s->graph;
  int ngpus = n_of(s->sys, MC_TOPO_GPU);
  int idx;

  if (g->n_channels == 0) {
    return MC_FAIL(ncclInternalError, "Topo search: replay without a previous channel");
  }
  idx = gpu_index_of_rank(s->sys, g->intra[(g->n_channels - 1) * ngpus + step + 1]);
  if (idx < 0) {
    return MC_FAIL(ncclInternalError, "Topo search: replayed rank %d not in the system",
                   g->intra[(g->n_channels - 1) * ngpus + step + 1]);
  }
  *g_out = idx;
  return ncclSuccess;
}

/* ncclTopoSearchTryGpu: go to GPU gi from (type, index) and continue from there. */
static ncclResult_t try_gpu(struct search *s, int step, int back_to_net, int back_to_first_rank,
                            int forced_order, int *time, int type, int index, int gi)
{
  const uint64_t flag = 1ULL << s->graph->n_channels;
  struct mc_topo_node *gpu = NULL;

  MC_CHECK(follow(s, type, index, MC_TOPO_GPU, gi, 1, &gpu));
  if (gpu != NULL) {
    gpu->used ^= flag;
    MC_CHECK(rec_gpu(s, gpu, step, back_to_net, back_to_first_rank, forced_order, time));
    gpu->used ^= flag;
    MC_CHECK(follow(s, type, index, MC_TOPO_GPU, gi, -1, &gpu));
  }
  return ncclSuccess;
}

/* ncclTopoCompareGraphs: is the graph being built better than the best? */
static bool better(const struct mc_topo_graph *g, const struct mc_topo_graph *ref)
{
  float bw = (float)g->n_channels * g->bw_intra;
  float ref_bw = (float)ref->n_channels * ref->bw_intra;

  if (g->n_channels < g->min_channels) {
    return false;
  }
  if (bw > ref_bw) {
    return true;
  }
  if (bw < ref_bw) {
    return false;
  }
  return (g->pattern == ref->pattern) && (g->cross_nic == ref->cross_nic) &&
         (g->n_hops < ref->n_hops);
}

static ncclResult_t rec_gpu_back_to_net(struct search *s, struct mc_topo_node *gpu, int gi,
                                        int step, int back_to_first_rank, int forced_order,
                                        int *time)
{
  struct mc_topo_system *sys = s->sys;
  struct mc_topo_graph *g = s->graph;
  int start_idx = net_index_of(sys, g->inter[g->n_channels * 2]);
  int *nets = NULL;
  int n_nets = 0;
  ncclResult_t res = ncclSuccess;

  if (start_idx < 0) {
    return MC_FAIL(ncclInternalError, "Topo search: net id %llx not found",
                   (unsigned long long)g->inter[g->n_channels * 2]);
  }
  MC_CHECK(mc_calloc(&nets, (size_t)n_of(sys, MC_TOPO_NET) + 1));
  MC_CHECK_GOTO(select_nets(s, g->type_inter, gi, nets, &n_nets), res, out);
  for (int i = 0; i < n_nets; i++) {
    int n = nets[i];
    int next_back_to_net = -1;
    float bw_inter_save = g->bw_inter;
    struct mc_topo_node *net = NULL;

    if (!check_net(s, node_at(sys, MC_TOPO_NET, start_idx), n, step)) {
      continue;
    }
    if (g->pattern == MC_TOPO_PATTERN_BALANCED_TREE) {
      /* Half of the NET traffic on each of the first two GPUs. */
      if (step == 0) {
        next_back_to_net = 1;
      }
      g->bw_inter /= 2;
    }
    MC_CHECK_GOTO(follow(s, MC_TOPO_GPU, gi, MC_TOPO_NET, n, 1, &net), res, out);
    g->bw_inter = bw_inter_save;
    if (net != NULL) {
      g->inter[g->n_channels * 2 + 1] = net->id;
      MC_CHECK_GOTO(rec_gpu(s, gpu, step, next_back_to_net, back_to_first_rank, forced_order, time),
                    res, out);
      if (g->pattern == MC_TOPO_PATTERN_BALANCED_TREE) {
        g->bw_inter /= 2;
      }
      MC_CHECK_GOTO(follow(s, MC_TOPO_GPU, gi, MC_TOPO_NET, n, -1, &net), res, out);
      g->bw_inter = bw_inter_save;
    }
  }
out:
  free(nets);
  return res;
}

/* ncclTopoSearchRecGpu: `gpu` is at position `step` of the current channel. */
static ncclResult_t rec_gpu(struct search *s, struct mc_topo_node *gpu, int step, int back_to_net,
                            int back_to_first_rank, int forced_order, int *time)
{
  struct mc_topo_system *sys = s->sys;
  struct mc_topo_graph *g = s->graph;
  int ngpus = n_of(sys, MC_TOPO_GPU);
  int gi;

  if (*time <= 0) {
    return ncclSuccess;
  }
  (*time)--;

  if (step == ngpus) {
    /* A channel is complete: keep it if it is the best so far, then try one more. */
    g->n_channels++;
    if (better(g, s->best)) {
      mc_topo_graph_copy(s->best, g);
      if (g->n_channels == g->max_channels) {
        *time = -1;
      }
    }
    if (g->n_channels < g->max_channels) {
      MC_CHECK(search_rec(s, time));
    }
    g->n_channels--;
    return ncclSuccess;
  }
  g->intra[g->n_channels * ngpus + step] = gpu->gpu.rank;
  gi = gpu->index;

  if (step == back_to_net) {
    if (sys->inter) {
      MC_CHECK(rec_gpu_back_to_net(s, gpu, gi, step, back_to_first_rank, forced_order, time));
    }
  } else if (step < ngpus - 1) {
    int *next = NULL;
    int count = 0;
    ncclResult_t res = ncclSuccess;

    MC_CHECK(mc_calloc(&next, (size_t)ngpus));
    if (forced_order == FORCED_ORDER_PCI) {
      next[0] = step + 1;
      count = 1;
    } else if (forced_order == FORCED_ORDER_REPLAY) {
      res = replay_get_gpu(s, step, &next[0]);
      count = 1;
    } else {
      int sort_net = (back_to_net == -1) ? 0 : (back_to_net == step + 1) ? 1 : -1;
      res = next_gpu_sort(s, gpu, next, &count, sort_net);
    }
    for (int i = 0; (res == ncclSuccess) && (i < count); i++) {
      res = try_gpu(s, step + 1, back_to_net, back_to_first_rank, forced_order, time, MC_TOPO_GPU,
                    gi, next[i]);
    }
    free(next);
    return res;
  } else if (step == back_to_first_rank) {
    /* Close the intra-node ring. */
    int p = gpu_index_of_rank(sys, g->intra[g->n_channels * ngpus]);
    struct mc_topo_node *first = NULL;

    if (p < 0) {
      return MC_FAIL(ncclInternalError, "Topo search: rank %d not in the system",
                     g->intra[g->n_channels * ngpus]);
    }
    MC_CHECK(follow(s, MC_TOPO_GPU, gi, MC_TOPO_GPU, p, 1, &first));
    if (first != NULL) {
      MC_CHECK(rec_gpu(s, first, step + 1, back_to_net, -1, forced_order, time));
      MC_CHECK(follow(s, MC_TOPO_GPU, gi, MC_TOPO_GPU, p, -1, &first));
    }
  } else {
    MC_CHECK(rec_gpu(s, gpu, ngpus, -1, -1, forced_order, time));
  }
  return ncclSuccess;
}

/* Charges (sign 1) or gives back (-1) bw on every NET of net's (asic, port). */
static void charge_port(struct mc_topo_system *sys, const struct mc_topo_node *net, int bw,
                        int sign)
{
  uint64_t asic = net->net.asic;
  int port = net->net.port;

  for (int i = 0; i < n_of(sys, MC_TOPO_NET); i++) {
    struct mc_topo_node *o = node_at(sys, MC_TOPO_NET, i);
    if ((o->net.asic == asic) && (o->net.port == port)) {
      o->net.bw -= (float)(sign * bw);
    }
  }
}

/* The first GPUs to try from a NET that starts a channel. */
static ncclResult_t rec_net_start(struct search *s, struct mc_topo_node *net, int n,
                                  int back_to_net, int back_to_first_rank, int *time, int *locals,
                                  bool *keep_charged)
{
  struct mc_topo_system *sys = s->sys;
  struct mc_topo_graph *g = s->graph;
  int local_gpu;
  int n_locals;

  if ((g->n_channels > 0) && (g->same_channels == 1)) {
    int gi = -1;
    MC_CHECK(replay_get_gpu(s, -1, &gi));
    return try_gpu(s, 0, back_to_net, back_to_first_rank, FORCED_ORDER_REPLAY, time, MC_TOPO_NET, n,
                   gi);
  }
  if ((g->n_channels == 0) && (n_of(sys, MC_TOPO_NVS) == 0)) {
    /* PCI order first, as a reference, on a small budget of its own. */
    int t = SEARCH_TIMEOUT_PCI_ORDER;
    MC_CHECK(
        try_gpu(s, 0, back_to_net, back_to_first_rank, FORCED_ORDER_PCI, &t, MC_TOPO_NET, n, 0));
    if (t == -1) {
      *time = -1;
    }
  }
  local_gpu = net->net.local_gpu;
  if (local_gpu != -1) {
    MC_CHECK(try_gpu(s, 0, back_to_net, back_to_first_rank, 0, time, MC_TOPO_NET, n, local_gpu));
  }
  n_locals = mc_topo_get_local(sys, MC_TOPO_NET, n, MC_TOPO_GPU, locals);
  if ((n_locals == 0) || ((int)net->paths[MC_TOPO_GPU][locals[0]].type == MC_PATH_DIS)) {
    /* No GPU reaches this NET. NCCL 2.30 skips it with a `continue` that also
     * skips giving its bandwidth back; later channels see it charged. */
    *keep_charged = true;
    return ncclSuccess;
  }
  for (int i = 0; i < n_locals; i++) {
    if (locals[i] == local_gpu) {
      continue;
    }
    MC_CHECK(try_gpu(s, 0, back_to_net, back_to_first_rank, 0, time, MC_TOPO_NET, n, locals[i]));
  }
  return ncclSuccess;
}

/* ncclTopoSearchRecNet: start the next channel at each candidate NET in turn. */
static ncclResult_t rec_net(struct search *s, int back_to_net, int back_to_first_rank, int *time)
{
  struct mc_topo_system *sys = s->sys;
  struct mc_topo_graph *g = s->graph;
  const int bw = (int)g->bw_inter; /* NCCL truncates here */
  int *nets = NULL;
  int *locals = NULL;
  int n_nets = 0;
  ncclResult_t res = ncclSuccess;

  MC_CHECK(mc_calloc(&nets, (size_t)n_of(sys, MC_TOPO_NET) + 1));
  MC_CHECK_GOTO(mc_calloc(&locals, (size_t)n_of(sys, MC_TOPO_GPU) + 1), res, out);
  MC_CHECK_GOTO(select_nets(s, g->type_inter, -1, nets, &n_nets), res, out);
  for (int i = 0; i < n_nets; i++) {
    int n = nets[(g->n_channels + i) % n_nets];
    struct mc_topo_node *net = node_at(sys, MC_TOPO_NET, n);

    if ((g->collnet != 0) && (net->net.coll == 0)) {
      continue;
    }
    if (net->net.bw < (float)bw) {
      continue;
    }
    if ((g->pattern == MC_TOPO_PATTERN_RING) && (g->cross_nic == 2) && ((g->n_channels & 1) != 0) &&
        (net->id != g->inter[(g->n_channels - 1) * 2 + 1])) {
      continue; /* odd channels start where the previous one ended */
    }
    g->inter[g->n_channels * 2] = net->id;
    g->latency_inter = net->net.latency;
    bool keep_charged = false;
    charge_port(sys, net, bw, 1);
    res = rec_net_start(s, net, n, back_to_net, back_to_first_rank, time, locals, &keep_charged);
    if (res != ncclSuccess) {
      goto out;
    }
    if (!keep_charged) {
      charge_port(sys, net, bw, -1);
    }
  }
out:
  free(nets);
  free(locals);
  return res;
}

/* ncclTopoSearchParams: where a channel goes back to the NET / first GPU. */
static void search_params(const struct mc_topo_system *sys, int pattern, int *back_to_net,
                          int *back_to_first_rank)
{
  int ngpus = n_of(sys, MC_TOPO_GPU);

  if (sys->inter) {
    *back_to_net = (pattern == MC_TOPO_PATTERN_RING)         ? ngpus - 1
                   : (pattern == MC_TOPO_PATTERN_SPLIT_TREE) ? 1
                                                             : 0;
    *back_to_first_rank = -1;
  } else {
    *back_to_net = -1;
    *back_to_first_rank = (pattern == MC_TOPO_PATTERN_RING) ? ngpus - 1 : -1;
  }
}

/* ncclTopoSearchRec: one more channel. */
static ncclResult_t search_rec(struct search *s, int *time)
{
  struct mc_topo_graph *g = s->graph;
  int back_to_net;
  int back_to_first_rank;

  search_params(s->sys, g->pattern, &back_to_net, &back_to_first_rank);
  if (s->sys->inter) {
    return rec_net(s, back_to_net, back_to_first_rank, time);
  }
  if (g->n_channels == 0) {
    MC_CHECK(try_gpu(s, 0, back_to_net, back_to_first_rank, FORCED_ORDER_PCI, time, -1, -1, 0));
  } else {
    int gi = -1;
    MC_CHECK(replay_get_gpu(s, -1, &gi));
    MC_CHECK(try_gpu(s, 0, back_to_net, back_to_first_rank, FORCED_ORDER_REPLAY, time, -1, -1, gi));
  }
  if ((g->same_channels == 0) || (g->n_channels == 0)) {
    for (int gi = 0; gi < n_of(s->sys, MC_TOPO_GPU); gi++) {
      MC_CHECK(try_gpu(s, 0, back_to_net, back_to_first_rank, 0, time, -1, -1, gi));
    }
  }
  return ncclSuccess;
}

/* ------------------------------------------------------- graph object */

void mc_topo_search_opts_init(struct mc_topo_search_opts *opts)
{
  memset(opts, 0, sizeof(*opts));
  opts->cross_nic = 2;
  opts->scatter_nets = true;
}

void mc_topo_search_opts_from_params(struct mc_topo_search_opts *opts)
{
  mc_topo_search_opts_init(opts);
  opts->cross_nic = (int)mc_param_int(MC_P_CROSS_NIC);
  opts->scatter_nets = (mc_param_int(MC_P_MNNVL_SCATTER_NETS_ENABLE) != 0);
  opts->graph_file = mc_param_str(MC_P_GRAPH_FILE);
}

ncclResult_t mc_topo_graph_init(struct mc_topo_graph *graph, int id, int pattern, int min_channels,
                                int max_channels, int n_gpus)
{
  int n = (n_gpus > 0) ? n_gpus : 1;

  memset(graph, 0, sizeof(*graph));
  MC_CHECK(mc_calloc(&graph->intra, (size_t)MC_TOPO_MAX_CHANNELS * (size_t)n));
  if (mc_calloc(&graph->inter, (size_t)MC_TOPO_MAX_CHANNELS * 2) != ncclSuccess) {
    free(graph->intra);
    graph->intra = NULL;
    return ncclSystemError;
  }
  graph->id = id;
  graph->pattern = pattern;
  graph->min_channels = min_channels;
  graph->max_channels = max_channels;
  graph->n_gpus = n_gpus;
  return ncclSuccess;
}

void mc_topo_graph_fini(struct mc_topo_graph *graph)
{
  free(graph->intra);
  free(graph->inter);
  graph->intra = NULL;
  graph->inter = NULL;
}

void mc_topo_graph_copy(struct mc_topo_graph *dst, const struct mc_topo_graph *src)
{
  int *intra = dst->intra;
  int64_t *inter = dst->inter;
  int n = (src->n_gpus > 0) ? src->n_gpus : 1;

  memcpy(intra, src->intra, (size_t)MC_TOPO_MAX_CHANNELS * (size_t)n * sizeof(*intra));
  memcpy(inter, src->inter, (size_t)MC_TOPO_MAX_CHANNELS * 2 * sizeof(*inter));
  *dst = *src;
  dst->intra = intra;
  dst->inter = inter;
}

ncclResult_t mc_topo_comp_cap(const struct mc_topo_system *sys, int *cc_min_out, int *cc_max_out)
{
  int lo;
  int hi;

  if (n_of(sys, MC_TOPO_GPU) == 0) {
    return MC_FAIL(ncclInternalError, "Topo: no GPU in the system");
  }
  lo = hi = node_at(sys, MC_TOPO_GPU, 0)->gpu.sm;
  for (int g = 1; g < n_of(sys, MC_TOPO_GPU); g++) {
    int sm = node_at(sys, MC_TOPO_GPU, g)->gpu.sm;
    lo = (sm < lo) ? sm : lo;
    hi = (sm > hi) ? sm : hi;
  }
  if (cc_min_out != NULL)
    *cc_min_out = lo;
  if (cc_max_out != NULL)
    *cc_max_out = hi;
  return ncclSuccess;
}

/* ncclTopoGetGpuMinPath / MaxPath: best and worst path type from a GPU to `type`. */
static void gpu_path_bounds(const struct mc_topo_system *sys, int type, int *lo_out, int *hi_out)
{
  int lo = MC_PATH_SYS;
  int hi = MC_PATH_LOC;

  for (int i = 0; i < n_of(sys, MC_TOPO_GPU); i++) {
    const struct mc_topo_path *paths = node_at(sys, MC_TOPO_GPU, i)->paths[type];
    if (paths == NULL) {
      continue;
    }
    for (int j = 0; j < n_of(sys, type); j++) {
      if ((type == MC_TOPO_GPU) && (i == j)) {
        continue;
      }
      lo = ((int)paths[j].type < lo) ? (int)paths[j].type : lo;
      hi = ((int)paths[j].type > hi) ? (int)paths[j].type : hi;
    }
  }
  *lo_out = lo;
  *hi_out = hi;
}

/* ncclTopoSplitNvLink: exactly two NVLink domains of more than one GPU. */
static ncclResult_t split_nvlink(const struct mc_topo_system *sys, bool *split_out)
{
  int ngpus = n_of(sys, MC_TOPO_GPU);
  int *domain = NULL;
  int *count = NULL;
  int n_domains = 0;

  MC_CHECK(mc_calloc(&domain, (size_t)ngpus + 1));
  if (mc_calloc(&count, (size_t)ngpus + 1) != ncclSuccess) {
    free(domain);
    return ncclSystemError;
  }
  for (int g = 0; g < ngpus; g++) {
    domain[g] = g;
  }
  for (int g = 0; g < ngpus; g++) {
    const struct mc_topo_path *paths = node_at(sys, MC_TOPO_GPU, g)->paths[MC_TOPO_GPU];
    for (int p = g + 1; p < ngpus; p++) {
      if (paths[p].type == MC_PATH_NVL) {
        domain[p] = domain[g];
      }
    }
  }
  for (int g = 0; g < ngpus; g++) {
    count[domain[g]]++;
  }
  for (int g = 0; g < ngpus; g++) {
    if (count[g] > 1) {
      n_domains++;
    }
  }
  *split_out = (n_domains == 2);
  free(domain);
  free(count);
  return ncclSuccess;
}

/* ncclTopoDupChannels: fast single channels are doubled, each at half speed. */
static void dup_channels(struct mc_topo_graph *g, int cc_min)
{
  int n = g->n_gpus;
  int dup;
  int div;

  if ((g->n_channels == 0) || (g->pattern == MC_TOPO_PATTERN_NVLS) || (g->bw_intra < 25.0f)) {
    return;
  }
  if ((cc_min > 80) && (g->bw_intra < 50.0f) && (g->n_channels > 4)) {
    return;
  }
  dup = (g->n_channels * 2 < g->max_channels) ? g->n_channels * 2 : g->max_channels;
  memcpy(g->intra + g->n_channels * n, g->intra,
         (size_t)(dup - g->n_channels) * (size_t)n * sizeof(*g->intra));
  memcpy(g->inter + g->n_channels * 2, g->inter,
         (size_t)(dup - g->n_channels) * 2 * sizeof(*g->inter));
  div = (dup + g->n_channels - 1) / g->n_channels;
  g->bw_intra /= (float)div;
  g->bw_inter /= (float)div;
  g->n_channels = dup;
}

/* Speed tables, GB/s per channel, highest first (search.cc, NCCL 2.30). */
static const float speed_intra[] = {40.0f, 30.0f, 20.0f, 18.0f, 15.0f, 12.0f, 10.0f,
                                    9.0f,  7.0f,  6.0f,  5.0f,  4.0f,  3.0f};
static const float speed_inter[] = {48.0f, 30.0f, 28.0f, 24.0f, 20.0f, 18.0f, 15.0f,
                                    12.0f, 10.0f, 9.0f,  7.0f,  6.0f,  5.0f,  4.0f,
                                    3.0f,  2.4f,  1.2f,  0.24f, 0.12f};
static const float sm90_speed_intra[] = {60.0f, 50.0f, 40.0f, 30.0f, 24.0f, 20.0f,
                                         15.0f, 12.0f, 11.0f, 6.0f,  3.0f};
static const float sm90_speed_inter[] = {48.0f, 45.0f, 42.0f, 40.0f, 30.0f, 24.0f,
                                         22.0f, 20.0f, 17.5f, 15.0f, 12.0f, 6.0f,
                                         3.0f,  2.4f,  1.2f,  0.24f, 0.12f};
static const float sm100_speed_intra[] = {90.0f, 80.0f, 70.0f, 60.0f, 50.0f, 45.0f,
                                          40.0f, 30.0f, 24.0f, 20.0f, 19.0f, 18.0f};
static const float sm100_speed_inter[] = {96.0f, 86.0f, 80.0f, 48.0f, 45.1f, 42.0f, 40.0f,
                                          30.0f, 24.0f, 22.0f, 20.0f, 17.5f, 15.0f, 12.0f,
                                          6.0f,  3.0f,  2.4f,  1.2f,  0.24f, 0.12f};

#define N_OF(_a) ((int)(sizeof(_a) / sizeof((_a)[0])))

static void speed_table(bool inter, int cc_min, const float **speeds, int *n)
{
  if (!inter) {
    *speeds = (cc_min >= 100) ? sm100_speed_intra : (cc_min >= 90) ? sm90_speed_intra : speed_intra;
    *n = (cc_min >= 100)  ? N_OF(sm100_speed_intra)
         : (cc_min >= 90) ? N_OF(sm90_speed_intra)
                          : N_OF(speed_intra);
  } else {
    *speeds = (cc_min >= 100) ? sm100_speed_inter : (cc_min >= 90) ? sm90_speed_inter : speed_inter;
    *n = (cc_min >= 100)  ? N_OF(sm100_speed_inter)
         : (cc_min >= 90) ? N_OF(sm90_speed_inter)
                          : N_OF(speed_inter);
  }
}

/* When nothing was found: GPUs in index order at a token bandwidth. */
static ncclResult_t simple_order(struct search *s)
{
  struct mc_topo_system *sys = s->sys;
  struct mc_topo_graph *g = s->best;
  int ngpus = n_of(sys, MC_TOPO_GPU);
  int *nets = NULL;
  int n_nets = 0;
  int64_t first = -1;
  int64_t last = -1;
  ncclResult_t res = ncclSuccess;

  for (int i = 0; i < ngpus; i++) {
    g->intra[i] = node_at(sys, MC_TOPO_GPU, i)->gpu.rank;
  }
  g->bw_intra = 0.1f;
  g->type_intra = MC_PATH_SYS;
  if (n_of(sys, MC_TOPO_NET) > 0) {
    MC_CHECK(mc_calloc(&nets, (size_t)n_of(sys, MC_TOPO_NET) + 1));
    /* The fallback looks at the graph being built for type_inter -1: only preferred NETs. */
    MC_CHECK_GOTO(select_nets(s, -1, 0, nets, &n_nets), res, out);
    first = (n_nets > 0) ? node_at(sys, MC_TOPO_NET, nets[0])->id : -1;
    MC_CHECK_GOTO(select_nets(s, -1, ngpus - 1, nets, &n_nets), res, out);
    last = (n_nets > 0) ? node_at(sys, MC_TOPO_NET, nets[0])->id : -1;
  }
  if ((first != -1) && (last != -1)) {
    g->inter[0] = first;
    g->inter[1] = last;
    g->bw_inter = 0.1f;
    g->type_inter = MC_PATH_SYS;
  } else {
    g->inter[0] = g->inter[1] = -1;
    g->bw_inter = 0;
    g->type_inter = MC_PATH_DIS;
  }
  g->n_channels = 1;
out:
  free(nets);
  return res;
}

/* The search loop of ncclTopoCompute (after setup): passes 1 and 2. */
static ncclResult_t compute_loop(struct search *s, int cc_min, int cross_nic, int min_intra,
                                 int max_intra, int min_inter, int max_inter, int try_same)
{
  struct mc_topo_system *sys = s->sys;
  struct mc_topo_graph *graph = s->best;
  struct mc_topo_graph *tmp = s->graph;
  const float *speeds;
  int n_speeds;
  int idx = 0;
  int pass = 1;
  int64_t global_timeout = SEARCH_GLOBAL_TIMEOUT;
  int time;
  float max_bw = sys->max_bw;
  float total_bw = sys->total_bw;
  int ndevs = n_of(sys, MC_TOPO_DEV);
  int cpu_arch = MC_TOPO_UNDEF;
  int cpu_vendor = MC_TOPO_UNDEF;

  if (n_of(sys, MC_TOPO_CPU) > 0) {
    cpu_arch = node_at(sys, MC_TOPO_CPU, 0)->cpu.arch;
    cpu_vendor = node_at(sys, MC_TOPO_CPU, 0)->cpu.vendor;
  }
  speed_table(sys->inter, cc_min, &speeds, &n_speeds);
  /* Other patterns need not return to the first NET: more NVLink bandwidth. */
  if ((ndevs > 1) && (graph->pattern != MC_TOPO_PATTERN_RING)) {
    total_bw = (float)((double)total_bw * ((double)ndevs * 1.0 / (double)(ndevs - 1)));
  }
  while (((speeds[idx] > max_bw) || (speeds[idx] * (float)graph->min_channels > total_bw)) &&
         (idx < n_speeds - 1)) {
    idx++;
  }
  tmp->bw_intra = tmp->bw_inter = speeds[idx];

  for (;;) {
    /* search: */
    time = tmp->same_channels                       ? SEARCH_TIMEOUT_SAMECHANNELS
           : (tmp->pattern == MC_TOPO_PATTERN_TREE) ? SEARCH_TIMEOUT_TREE
                                                    : SEARCH_TIMEOUT;
    tmp->n_channels = 0;
    global_timeout -= time;
    MC_CHECK(search_rec(s, &time));

    bool done = (time == -1) || ((float)graph->n_channels * graph->bw_inter >= sys->total_bw);
    if (!done && (pass == 1)) {
      if ((tmp->same_channels == 1) &&
          !((cpu_arch == MC_TOPO_CPU_ARCH_X86) && (cpu_vendor == MC_TOPO_CPU_VENDOR_AMD) &&
            (tmp->type_intra == MC_PATH_SYS))) {
        tmp->same_channels = 0;
        continue;
      }
      tmp->same_channels = try_same;
      if (time != -1) {
        global_timeout += time;
      } else {
        global_timeout = SEARCH_GLOBAL_TIMEOUT;
      }
      if ((global_timeout < 0) && (graph->n_channels > 0)) {
        done = true;
      }
    }
    if (!done && (pass == 1)) {
      if ((cc_min >= 90) && (tmp->pattern == MC_TOPO_PATTERN_BALANCED_TREE)) {
        tmp->pattern = MC_TOPO_PATTERN_TREE;
        continue;
      }
      tmp->pattern = graph->pattern;

      int max_i = sys->inter ? tmp->type_inter : max_intra;
      if ((tmp->type_intra < max_i) &&
          ((graph->n_channels == 0) || (tmp->type_intra < graph->type_intra))) {
        tmp->type_intra += 1;
        if (tmp->type_intra < MC_PATH_DIS) {
          continue;
        }
      }
      tmp->type_intra = min_intra;

      if (sys->inter && (tmp->type_inter < max_inter) &&
          ((graph->n_channels == 0) || (tmp->type_inter < graph->type_inter) ||
           (tmp->type_inter < MC_PATH_PXN))) {
        tmp->type_inter += 1;
        if (tmp->type_inter < MC_PATH_DIS) {
          continue;
        }
      }
      tmp->type_inter = min_inter;

      if ((cross_nic == 2) && (tmp->cross_nic == 0) &&
          ((graph->pattern == MC_TOPO_PATTERN_RING) ||
           (graph->pattern == MC_TOPO_PATTERN_BALANCED_TREE))) {
        tmp->cross_nic = 2;
        continue;
      }
      tmp->cross_nic = (cross_nic == 1) ? 1 : 0;

      if ((idx < n_speeds - 1) &&
          ((graph->n_channels == 0) || (speeds[idx + 1] / graph->bw_inter > .49))) {
        tmp->bw_inter = tmp->bw_intra = speeds[++idx];
        continue;
      }
      idx = 0;
      while ((speeds[idx] > max_bw) && (idx < n_speeds - 1)) {
        idx++;
      }
      tmp->bw_intra = tmp->bw_inter = speeds[idx];
    }
    /* done: */
    if (pass == 1) {
      time = -1;
      dup_channels(graph, cc_min);
      mc_topo_graph_copy(tmp, graph);
      idx = 0;
      while ((speeds[idx] > graph->bw_inter) && (idx < n_speeds - 1)) {
        idx++;
      }
      tmp->bw_intra = tmp->bw_inter = speeds[idx];
      tmp->min_channels = graph->n_channels;
      pass = 2;
    }
    /* Pass 2: try to raise the bandwidth with at least as many channels. */
    if ((time != 0) && (idx > 0)) {
      if (graph->pattern == MC_TOPO_PATTERN_RING) {
        tmp->bw_intra = tmp->bw_inter = speeds[--idx];
        continue;
      }
      if ((graph->pattern != MC_TOPO_PATTERN_NVLS) && (tmp->bw_intra == graph->bw_intra) &&
          (tmp->bw_intra < tmp->bw_inter * 2)) {
        tmp->bw_intra = speeds[--idx];
        continue;
      }
    }
    break;
  }
  return ncclSuccess;
}

ncclResult_t mc_topo_compute(struct mc_topo_system *sys, struct mc_topo_graph *graph,
                             const struct mc_topo_search_opts *opts, int *loaded_out)
{
  struct mc_topo_graph tmp;
  struct search s = {.sys = sys, .opts = opts, .graph = &tmp, .best = graph};
  int ngpus = n_of(sys, MC_TOPO_GPU);
  int cc_min = 0;
  int cross_nic;
  int min_intra = MC_PATH_LOC;
  int min_inter = MC_PATH_PIX;
  int max_intra = MC_PATH_SYS;
  int max_inter = MC_PATH_SYS;
  int try_same;
  bool split = false;
  ncclResult_t res;

  if (loaded_out != NULL) {
    *loaded_out = -1;
  }
  if (ngpus != graph->n_gpus) {
    return MC_FAIL(ncclInternalError, "Topo search: graph made for %d GPUs, system has %d",
                   graph->n_gpus, ngpus);
  }
  MC_CHECK(mc_topo_comp_cap(sys, &cc_min, NULL));
  cross_nic = ((n_of(sys, MC_TOPO_NET) > 1) && ((graph->pattern == MC_TOPO_PATTERN_RING) ||
                                                (graph->pattern == MC_TOPO_PATTERN_BALANCED_TREE) ||
                                                (graph->pattern == MC_TOPO_PATTERN_SPLIT_TREE)))
                  ? opts->cross_nic
                  : 0;
  graph->cross_nic = (cross_nic == 1) ? 1 : 0;
  graph->bw_intra = graph->bw_inter = 0;
  graph->latency_inter = 0;
  if (ngpus > 1) {
    gpu_path_bounds(sys, MC_TOPO_GPU, &min_intra, &max_intra);
  }
  if (sys->inter) {
    gpu_path_bounds(sys, MC_TOPO_NET, &min_inter, &max_inter);
    max_intra = max_inter;
  }
  /* Ampere's balanced trees sometimes need to come back through SYS or PHB. */
  if (cc_min < 90) {
    max_inter = MC_PATH_SYS;
  }
  graph->type_intra = min_intra;
  graph->type_inter = min_inter;
  graph->n_channels = 0;
  try_same = (graph->pattern == MC_TOPO_PATTERN_NVLS) ? 0 : 1;
  graph->same_channels = try_same;

  if (opts->graph_file != NULL) {
    int n_loaded = 0;
    MC_CHECK(mc_topo_graph_load(sys, graph, opts, &n_loaded));
    if (loaded_out != NULL) {
      *loaded_out = n_loaded;
    }
    if (graph->n_channels > 0) {
      return ncclSuccess;
    }
  }
  if ((graph->pattern == MC_TOPO_PATTERN_NVLS) ||
      (graph->pattern == MC_TOPO_PATTERN_COLLNET_DIRECT) || (graph->collnet != 0)) {
    return ncclSuccess; /* not searched on hosts: no NVLS multicast, no CollNet */
  }
  if ((ngpus == 1) && (graph->pattern != MC_TOPO_PATTERN_RING)) {
    graph->pattern = MC_TOPO_PATTERN_TREE;
  }
  MC_CHECK(split_nvlink(sys, &split));
  if ((graph->pattern == MC_TOPO_PATTERN_RING) && split) {
    /* Two NVLink islands joined by a slower link: trees need 2 channels, so rings too. */
    if ((graph->max_channels >= 2) && (graph->min_channels == 1)) {
      graph->min_channels = 2;
    }
  }
  MC_CHECK(mc_calloc(&s.order, (size_t)ngpus * (size_t)ngpus + 1));
  MC_CHECK_GOTO(mc_calloc(&s.n_order, (size_t)ngpus + 1), res, out);
  for (int g = 0; g < ngpus; g++) {
    s.n_order[g] = -1;
  }
  MC_CHECK_GOTO(mc_topo_graph_init(&tmp, graph->id, graph->pattern, graph->min_channels,
                                   graph->max_channels, ngpus),
                res, out);
  mc_topo_graph_copy(&tmp, graph);
  for (int g = 0; g < ngpus; g++) {
    node_at(sys, MC_TOPO_GPU, g)->used = 0;
  }
  res = compute_loop(&s, cc_min, cross_nic, min_intra, max_intra, min_inter, max_inter, try_same);
  if ((res == ncclSuccess) && (graph->n_channels == 0)) {
    res = simple_order(&s);
  }
  mc_topo_graph_fini(&tmp);
out:
  free(s.order);
  free(s.n_order);
  free(s.nets_of);
  free(s.n_nets_of);
  return res;
}

void mc_topo_graph_net_dev(const struct mc_topo_system *sys, const struct mc_topo_graph *graph,
                           int rank, int channel, int *dev_out)
{
  int ngpus = n_of(sys, MC_TOPO_GPU);
  int c;
  int n;

  *dev_out = -1;
  if (!sys->inter || (graph->n_channels <= 0) || (ngpus <= 0)) {
    return;
  }
  c = channel % graph->n_channels;
  n = net_index_of(sys, graph->inter[c * 2 + ((graph->intra[c * ngpus] == rank) ? 0 : 1)]);
  if (n >= 0) {
    *dev_out = node_at(sys, MC_TOPO_NET, n)->net.dev;
  }
}

void mc_topo_graph_print(const struct mc_topo_system *sys, const struct mc_topo_graph *graph,
                         FILE *out)
{
  int ngpus = n_of(sys, MC_TOPO_GPU);

  fprintf(out, "Pattern %d, crossNic %d, nChannels %d, bw %f/%f, type %s/%s, sameChannels %d\n",
          graph->pattern, graph->cross_nic, graph->n_channels, (double)graph->bw_intra,
          (double)graph->bw_inter, mc_topo_path_type_str(graph->type_intra),
          mc_topo_path_type_str(graph->type_inter), graph->same_channels);
  for (int c = 0; c < graph->n_channels; c++) {
    fprintf(out, "%2d :", c);
    if (sys->inter) {
      fprintf(out, " NET/%llx-%llx", (unsigned long long)MC_TOPO_ID_SYSTEM(graph->inter[2 * c]),
              (unsigned long long)MC_TOPO_ID_LOCAL(graph->inter[2 * c]));
    }
    for (int i = 0; i < ngpus; i++) {
      int g = gpu_index_of_rank(sys, graph->intra[ngpus * c + i]);
      int64_t id = (g >= 0) ? node_at(sys, MC_TOPO_GPU, g)->id : -1;
      fprintf(out, " GPU/%llx-%llx", (unsigned long long)MC_TOPO_ID_SYSTEM(id),
              (unsigned long long)MC_TOPO_ID_LOCAL(id));
      if (graph->id == MC_TOPO_GRAPH_NVLS) {
        break; /* NVLS graphs name only the head */
      }
    }
    if (sys->inter) {
      fprintf(out, " NET/%llx-%llx", (unsigned long long)MC_TOPO_ID_SYSTEM(graph->inter[2 * c + 1]),
              (unsigned long long)MC_TOPO_ID_LOCAL(graph->inter[2 * c + 1]));
    }
    fprintf(out, "\n");
  }
}
