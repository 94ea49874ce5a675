/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Paths over the system graph. Mirrors NCCL 2.30's src/graph/paths.cc (and
 * the "local" queries of src/graph/topo.cc, ncclTopoSearchInit of search.cc):
 * BFS per base node with the 2.30 DEV gate and type-first update rule, P2P
 * reroutes through the CPU, the transports' canConnect step, P2C, PXN and
 * no-GDR reroutes, trim of unreachable GPUs.
 *
 * Length: one port of NCCL's paths.cc, kept in its shape so the two read side by side.
 */
#include "topo/topo.h"
#include "topo/topo_int.h"

#include "check.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MAXCHANNELS 64

static const char *const path_type_str[] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB",
                                            "P2C", "PXN", "PHB", "SYS", "NET", "DIS"};

const char *mc_topo_path_type_str(int type)
{
  if ((type < 0) || (type > MC_PATH_DIS)) {
    return "?";
  }
  return path_type_str[type];
}

void mc_topo_paths_opts_init(struct mc_topo_paths_opts *opts)
{
  memset(opts, 0, sizeof(*opts));
  opts->p2p_level = -1;
  opts->pxn_c2c = true;
  opts->net_gdr_level = -1;
  opts->net_gdr_read = -2;
  opts->net_gdr_c2c = true;
  opts->check_transports = true;
}

int mc_topo_level_parse(const char *str)
{
  static const int old_to_new[] = {MC_PATH_LOC, MC_PATH_PIX, MC_PATH_PXB,
                                   MC_PATH_PHB, MC_PATH_SYS, MC_PATH_SYS};

  if (str == NULL) {
    return -1;
  }
  for (int i = 0; i <= MC_PATH_SYS; i++) {
    if (strcmp(str, path_type_str[i]) == 0) {
      return i;
    }
  }
  if ((str[0] >= '0') && (str[0] <= '9')) {
    long old = strtol(str, NULL, 0);
    if (old > 5) {
      old = 5;
    }
    if (old < 0) {
      old = 0;
    }
    return old_to_new[old];
  }
  return -1;
}

/* ---------------------------------------------------------------- storage */

#define HOPS_MIN 256

/* A new hop over link number link, followed by hop ref next: *ref_out. The
 * hops grow geometrically (a realloc: hop pointers do not outlive it, refs
 * do); all of them are freed at once with the paths. */
static ncclResult_t hop_new(struct mc_topo_system *sys, uint32_t link, uint32_t next,
                            uint32_t *ref_out)
{
  if (sys->n_hops == sys->cap_hops) {
    uint32_t cap = (sys->cap_hops == 0) ? HOPS_MIN : 2 * sys->cap_hops;
    struct mc_topo_hop *n;
    if (sys->cap_hops > UINT32_MAX / 4) {
      return MC_FAIL(ncclSystemError, "Topo: more than %u path hops", sys->cap_hops);
    }
    n = realloc(sys->hops, (size_t)cap * sizeof(*n));
    if (n == NULL) {
      return MC_FAIL(ncclSystemError, "Topo: out of memory for %u path hops", cap);
    }
    sys->hops = n;
    sys->cap_hops = cap;
  }
  sys->hops[sys->n_hops] = (struct mc_topo_hop){.link = link, .next = next};
  *ref_out = ++sys->n_hops;
  return ncclSuccess;
}

/* Numbers every link, node by node in type order (the same numbers in every
 * process with the same system): node->link_base and the link table. */
static ncclResult_t links_number(struct mc_topo_system *sys)
{
  int n = 0;

  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      n += sys->nodes[t].nodes[i]->n_links;
    }
  }
  free(sys->link_table);
  sys->link_table = NULL;
  sys->n_link_table = 0;
  MC_CHECK(mc_calloc(&sys->link_table, (size_t)(n > 0 ? n : 1)));
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      struct mc_topo_node *node = sys->nodes[t].nodes[i];
      node->link_base = sys->n_link_table;
      for (int l = 0; l < node->n_links; l++) {
        sys->link_table[sys->n_link_table++] = &node->links[l];
      }
    }
  }
  return ncclSuccess;
}

struct mc_topo_link *mc_topo_path_link(const struct mc_topo_system *sys,
                                       const struct mc_topo_path *path, int i)
{
  const struct mc_topo_hop *h = mc_topo_hop_at(sys, path->hops);

  for (; (h != NULL) && (i > 0); i--) {
    h = mc_topo_hop_at(sys, h->next);
  }
  return (h != NULL) ? mc_topo_hop_link(sys, h) : NULL;
}

static ncclResult_t paths_alloc(struct mc_topo_system *sys, struct mc_topo_node *node, int type)
{
  int n = sys->nodes[type].count;

  if (node->paths[type] != NULL) {
    return ncclSuccess;
  }
  MC_CHECK(mc_calloc(&node->paths[type], (size_t)(n > 0 ? n : 1)));
  for (int i = 0; i < n; i++) {
    node->paths[type][i].type = MC_PATH_DIS;
  }
  return ncclSuccess;
}

void mc_topo_free_paths(struct mc_topo_system *sys)
{
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      struct mc_topo_node *node = sys->nodes[t].nodes[i];
      for (int t2 = 0; t2 < MC_TOPO_NODE_TYPES; t2++) {
        if (sys->paths_map == NULL) {
          free(node->paths[t2]);
        }
        node->paths[t2] = NULL;
      }
    }
  }
  if (sys->paths_map != NULL) {
    (void)munmap(sys->paths_map, sys->paths_map_bytes);
  } else {
    free(sys->hops);
  }
  if (sys->paths_map == NULL) {
    free(sys->gpu_domain);
  }
  sys->gpu_domain = NULL;
  sys->paths_map = NULL;
  sys->paths_map_bytes = 0;
  sys->hops = NULL;
  sys->n_hops = 0;
  sys->cap_hops = 0;
  free(sys->link_table);
  sys->link_table = NULL;
  sys->n_link_table = 0;
}

/* ---------------------------------------------------------------- BFS */

/* A fresh BFS level number: a node is queued for the next level at most once
 * (NCCL's nextNodeList search, in O(1)). */
static unsigned bfs_level_new(struct mc_topo_system *sys)
{
  if (++sys->bfs_level == 0) {
    for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
      for (int i = 0; i < sys->nodes[t].count; i++) {
        sys->nodes[t].nodes[i]->mark = 0;
      }
    }
    sys->bfs_level = 1;
  }
  return sys->bfs_level;
}

/* One BFS from a base: the paths to it by node (dense, so that the walk
 * stays in a few cache lines), scattered into the nodes' path arrays at the
 * end; `touched` marks the nodes NCCL's getPath would have given an array. */
struct bfs {
  int total;
  int off[MC_TOPO_NODE_TYPES]; /* first dense index of each node type */
  struct mc_topo_node **cur;   /* [total] */
  struct mc_topo_node **next;  /* [total] */
  struct mc_topo_path *dist;   /* [total] */
  unsigned *touched;           /* [total]: serial of the last BFS that touched it */
  unsigned serial;
};

static inline int bfs_index(const struct bfs *b, const struct mc_topo_node *n)
{
  return b->off[n->type] + n->index;
}

/* One BFS step from node (path p to base) over link. */
static ncclResult_t relax(struct mc_topo_system *sys, struct bfs *b, struct mc_topo_node *base,
                          struct mc_topo_node *node, struct mc_topo_link *link,
                          const struct mc_topo_paths_opts *opts, bool *updated)
{
  struct mc_topo_node *rem = link->rem;
  struct mc_topo_path *p = &b->dist[bfs_index(b, node)];
  struct mc_topo_path *rp = &b->dist[bfs_index(b, rem)];
  int rev = -1;
  uint32_t hop = 0;
  int max_len = (base->type == MC_TOPO_GPU) ? 2 : 1;
  const struct mc_topo_node *base_dev = (base->type == MC_TOPO_GPU) ? base->gpu.parent : base;
  float bw = (p->bw < link->bw) ? p->bw : link->bw;
  int t;

  *updated = false;
  b->touched[bfs_index(b, rem)] = b->serial;
  /* 2.30 DEV gate: only GPU leaves and (NVB) NVLink hops pass through a DEV. */
  if ((node != base_dev) && (node->type == MC_TOPO_DEV) &&
      ((link->type != MC_TOPO_LINK_LOC) || (rem->type != MC_TOPO_GPU)) &&
      (opts->nvb_disable || (link->type != MC_TOPO_LINK_NVL) || (rem->type != MC_TOPO_DEV) ||
       (p->count > max_len))) {
    return ncclSuccess;
  }
  t = (link->type == MC_TOPO_LINK_NET) ? MC_PATH_LOC : (int)link->type;
  if ((node->type == MC_TOPO_PCI) && (rem->type == MC_TOPO_PCI)) {
    t = MC_PATH_PXB;
  }
  if ((link->type == MC_TOPO_LINK_PCI) &&
      ((node->type == MC_TOPO_CPU) || (rem->type == MC_TOPO_CPU))) {
    t = MC_PATH_PHB;
  }
  if ((node->type == MC_TOPO_DEV) && (p->type == MC_PATH_NVL) && (t == MC_PATH_NVL) &&
      (p->count + 1 > max_len)) {
    t = MC_PATH_NVB;
  }
  if ((int)p->type > t) {
    t = (int)p->type;
  }
  /* 2.30 update rule: better type, then higher bw, then fewer hops. */
  if (!((t < (int)rp->type) || ((t == (int)rp->type) && (rp->bw < bw)) ||
        ((t == (int)rp->type) && (rp->bw == bw) && (rp->count > p->count + 1)))) {
    return ncclSuccess;
  }
  for (int l = 0; l < rem->n_links; l++) {
    if ((rem->links[l].rem == node) && (rem->links[l].type == link->type)) {
      rev = l;
      break;
    }
  }
  if (rev < 0) {
    return MC_FAIL(ncclInternalError, "Topo: no reverse link from %s/%lx to %s/%lx",
                   mc_topo_node_type_str(rem->type), (unsigned long)rem->id,
                   mc_topo_node_type_str(node->type), (unsigned long)node->id);
  }
  /* The reverse link, then node's path as it is now (NCCL copies the list).
   * Nothing follows a path to a DEV (NCCL reads their type, bw and count
   * only: ncclTopoSearchInit, ncclTopoPrintPaths): no hops for those. */
  if (base->type != MC_TOPO_DEV) {
    MC_CHECK(hop_new(sys, (uint32_t)(rem->link_base + rev), p->hops, &hop));
  }
  rp->hops = hop;
  rp->count = (int16_t)(p->count + 1);
  rp->bw = bw;
  rp->type = (uint8_t)t;
  *updated = true;
  return ncclSuccess;
}

/* ncclTopoSetPaths: paths from every node to base, breadth first. */
static ncclResult_t set_paths(struct mc_topo_system *sys, struct bfs *b, struct mc_topo_node *base,
                              const struct mc_topo_paths_opts *opts)
{
  int bidx = base->index;
  int n_cur = 1;
  struct mc_topo_node **cur = b->cur;
  struct mc_topo_node **next = b->next;
  struct mc_topo_path *bp = &b->dist[bfs_index(b, base)];

  b->serial++;
  /* Each BFS writes entry bidx of the arrays only: it starts from NCCL's
   * fresh entries (DIS, no hops). */
  for (int i = 0; i < b->total; i++) {
    b->dist[i] = (struct mc_topo_path){.hops = 0, .bw = 0, .count = 0, .type = MC_PATH_DIS};
  }
  b->touched[bfs_index(b, base)] = b->serial;
  bp->count = 0;
  bp->bw = (float)MC_TOPO_LOC_BW;
  bp->type = MC_PATH_LOC;
  cur[0] = base;
  while (n_cur > 0) {
    unsigned level = bfs_level_new(sys);
    int n_next = 0;
    struct mc_topo_node **tmp;
    for (int n = 0; n < n_cur; n++) {
      struct mc_topo_node *node = cur[n];
      for (int l = 0; l < node->n_links; l++) {
        struct mc_topo_node *rem = node->links[l].rem;
        bool updated = false;
        MC_CHECK(relax(sys, b, base, node, &node->links[l], opts, &updated));
        if (updated && (rem->mark != level) && (n_next < b->total)) {
          rem->mark = level;
          next[n_next++] = rem;
        }
      }
    }
    tmp = cur;
    cur = next;
    next = tmp;
    n_cur = n_next;
  }
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    /* NCCL gives PCI switches path arrays too, but nothing reads them (the
     * search, the transports and ncclTopoPrint read the paths of GPUs, NETs,
     * CPUs, NVSwitches and DEVs): with a PCI device per rank on a host of
     * 256 ranks they were a third of the path memory of every rank. */
    if (t == MC_TOPO_PCI) {
      continue;
    }
    for (int i = 0; i < sys->nodes[t].count; i++) {
      struct mc_topo_node *node = sys->nodes[t].nodes[i];
      if (b->touched[b->off[t] + i] != b->serial) {
        continue;
      }
      MC_CHECK(paths_alloc(sys, node, base->type));
      node->paths[base->type][bidx] = b->dist[b->off[t] + i];
    }
  }
  return ncclSuccess;
}

/* ---------------------------------------------------------------- queries */

const struct mc_topo_path *mc_topo_path_get(const struct mc_topo_system *sys,
                                            enum mc_topo_node_type from_type, int from_idx,
                                            enum mc_topo_node_type to_type, int to_idx)
{
  const struct mc_topo_node *from;

  if ((from_idx < 0) || (from_idx >= sys->nodes[from_type].count) || (to_idx < 0) ||
      (to_idx >= sys->nodes[to_type].count)) {
    return NULL;
  }
  from = sys->nodes[from_type].nodes[from_idx];
  if (from->paths[to_type] == NULL) {
    return NULL;
  }
  return &from->paths[to_type][to_idx];
}

enum mc_path_type mc_topo_path_type(const struct mc_topo_system *sys,
                                    enum mc_topo_node_type from_type, int from_idx,
                                    enum mc_topo_node_type to_type, int to_idx)
{
  const struct mc_topo_path *p = mc_topo_path_get(sys, from_type, from_idx, to_type, to_idx);
  return (p == NULL) ? MC_PATH_DIS : p->type;
}

float mc_topo_path_bw(const struct mc_topo_system *sys, enum mc_topo_node_type from_type,
                      int from_idx, enum mc_topo_node_type to_type, int to_idx)
{
  const struct mc_topo_path *p = mc_topo_path_get(sys, from_type, from_idx, to_type, to_idx);
  return (p == NULL) ? 0.0f : p->bw;
}

int mc_topo_path_hops(const struct mc_topo_system *sys, enum mc_topo_node_type from_type,
                      int from_idx, enum mc_topo_node_type to_type, int to_idx)
{
  const struct mc_topo_path *p = mc_topo_path_get(sys, from_type, from_idx, to_type, to_idx);
  return (p == NULL) ? -1 : p->count;
}

/* ncclTopoDevToRank: rank of the GPU with that NVML dev on system sid. */
static ncclResult_t dev_to_rank(const struct mc_topo_system *sys, int64_t sid, int dev,
                                int *rank_out)
{
  for (int i = 0; i < sys->nodes[MC_TOPO_GPU].count; i++) {
    const struct mc_topo_node *g = sys->nodes[MC_TOPO_GPU].nodes[i];
    if ((MC_TOPO_ID_SYSTEM(g->id) == sid) && (g->gpu.dev == dev)) {
      *rank_out = g->gpu.rank;
      return ncclSuccess;
    }
  }
  return MC_FAIL(ncclInternalError, "Topo: no GPU with NVML dev %d on system %ld", dev, (long)sid);
}

ncclResult_t mc_topo_local_cpu(const struct mc_topo_system *sys, int gpu_idx, int *cpu_idx_out)
{
  const struct mc_topo_path *paths = sys->nodes[MC_TOPO_GPU].nodes[gpu_idx]->paths[MC_TOPO_CPU];
  int min_hops = 0;
  int local = -1;

  for (int c = 0; (paths != NULL) && (c < sys->nodes[MC_TOPO_CPU].count); c++) {
    int hops = paths[c].count;
    if ((hops > 0) && ((min_hops == 0) || (hops < min_hops))) {
      local = c;
      min_hops = hops;
    }
  }
  if (local == -1) {
    return MC_FAIL(ncclInternalError, "Topo: no CPU reachable from GPU %d", gpu_idx);
  }
  *cpu_idx_out = local;
  return ncclSuccess;
}

int mc_topo_get_local(const struct mc_topo_system *sys, enum mc_topo_node_type type, int idx,
                      enum mc_topo_node_type result_type, int *locals)
{
  const struct mc_topo_path *paths = sys->nodes[type].nodes[idx]->paths[result_type];
  int min_type = MC_PATH_DIS;
  float max_bw = 0;
  int count = 0;

  if (paths == NULL) {
    return 0;
  }
  for (int i = 0; i < sys->nodes[result_type].count; i++) {
    if ((paths[i].bw > max_bw) || ((paths[i].bw == max_bw) && ((int)paths[i].type < min_type))) {
      max_bw = paths[i].bw;
      min_type = (int)paths[i].type;
      count = 0;
    }
    if ((paths[i].bw == max_bw) && ((int)paths[i].type == min_type)) {
      locals[count++] = i;
    }
  }
  return count;
}

static int mirror_bits(int val, int pow2)
{
  int mirror = 0;

  for (int b = 1, mb = (pow2 >> 1); b < pow2; b <<= 1, mb >>= 1) {
    if ((val & b) != 0) {
      mirror |= mb;
    }
  }
  return mirror;
}

ncclResult_t mc_topo_get_local_net(const struct mc_topo_system *sys, int rank, int channel,
                                   int *net_idx_out)
{
  int n_nets = sys->nodes[MC_TOPO_NET].count;
  int n_gpus_all = sys->nodes[MC_TOPO_GPU].count;
  int g = mc_topo_rank_to_index(sys, rank);
  int *nets = NULL;
  int *gpus = NULL;
  int n_local_nets;
  int n_local_gpus;
  int nets_per_gpu;
  int i;
  ncclResult_t res = ncclSuccess;

  if (g < 0) {
    return MC_FAIL(ncclInternalError, "Topo: rank %d is not in the system", rank);
  }
  MC_CHECK(mc_calloc(&nets, (size_t)(n_nets + 1)));
  MC_CHECK_GOTO(mc_calloc(&gpus, (size_t)(n_gpus_all + 1)), res, out);
  n_local_nets = mc_topo_get_local(sys, MC_TOPO_GPU, g, MC_TOPO_NET, nets);
  if (n_local_nets == 0) {
    res = MC_FAIL(ncclInternalError, "Topo: no local path from GPU %d to a NET", g);
    goto out;
  }
  n_local_gpus = mc_topo_get_local(sys, MC_TOPO_NET, nets[0], MC_TOPO_GPU, gpus);
  if (n_local_gpus == 0) {
    n_local_gpus = 1;
  }
  nets_per_gpu = (n_local_nets + n_local_gpus - 1) / n_local_gpus;
  i = sys->nodes[MC_TOPO_GPU].nodes[g]->gpu.dev % n_local_gpus;
  if ((n_local_nets & (n_local_nets - 1)) == 0) {
    i = mirror_bits(i, n_local_nets);
  }
  i += channel % nets_per_gpu;
  *net_idx_out = nets[i % n_local_nets];
out:
  free(nets);
  free(gpus);
  return res;
}

ncclResult_t mc_topo_get_local_gpu(const struct mc_topo_system *sys, int net_idx, int *gpu_idx_out)
{
  int *gpus = NULL;
  int n_gpus;
  ncclResult_t res = ncclSuccess;

  *gpu_idx_out = -1;
  MC_CHECK(mc_calloc(&gpus, (size_t)(sys->nodes[MC_TOPO_GPU].count + 1)));
  n_gpus = mc_topo_get_local(sys, MC_TOPO_NET, net_idx, MC_TOPO_GPU, gpus);
  for (int c = 0; c < MAXCHANNELS; c++) {
    for (int lg = 0; lg < n_gpus; lg++) {
      int net = -1;
      MC_CHECK_GOTO(
          mc_topo_get_local_net(sys, sys->nodes[MC_TOPO_GPU].nodes[gpus[lg]]->gpu.rank, c, &net),
          res, out);
      if (net == net_idx) {
        *gpu_idx_out = gpus[lg];
        goto out;
      }
    }
  }
out:
  free(gpus);
  return res;
}

/* ---------------------------------------------------------------- checks */

static int cpu0_is_amd_x86(const struct mc_topo_system *sys)
{
  const struct mc_topo_node *cpu;

  if (sys->nodes[MC_TOPO_CPU].count == 0) {
    return 0;
  }
  cpu = sys->nodes[MC_TOPO_CPU].nodes[0];
  return (cpu->cpu.arch == MC_TOPO_CPU_ARCH_X86) && (cpu->cpu.vendor == MC_TOPO_CPU_VENDOR_AMD);
}

ncclResult_t mc_topo_check_p2p(const struct mc_topo_system *sys,
                               const struct mc_topo_paths_opts *opts, int rank1, int rank2,
                               int *p2p_out, int *read_out, int *intermediate_out)
{
  int g1 = mc_topo_rank_to_index(sys, rank1);
  int g2 = mc_topo_rank_to_index(sys, rank2);
  int level = MC_PATH_PXB;
  int inter = -1;
  const struct mc_topo_node *gpu1;
  const struct mc_topo_path *path;

  *p2p_out = 0;
  if (read_out != NULL) {
    *read_out = 0;
  }
  if (intermediate_out != NULL) {
    *intermediate_out = -1;
  }
  if (g1 < 0) {
    return MC_FAIL(ncclInternalError, "Topo: rank %d is not in the system", rank1);
  }
  if (g2 < 0) {
    return ncclSuccess;
  }
  gpu1 = sys->nodes[MC_TOPO_GPU].nodes[g1];
  path = &gpu1->paths[MC_TOPO_GPU][g2];
  /* 2.30: GPU-DEV-DEV-DEV-GPU, the intermediate DEV is the remote of list[1]. */
  if (path->count == 4) {
    const struct mc_topo_node *mid = mc_topo_path_link(sys, path, 1)->rem;
    if (mid->type == MC_TOPO_DEV) {
      MC_CHECK(dev_to_rank(sys, MC_TOPO_ID_SYSTEM(mid->id), mid->dev.dev, &inter));
    }
  }
  if (cpu0_is_amd_x86(sys) && (sys->nodes[MC_TOPO_DEV].count <= 2)) {
    level = MC_PATH_SYS;
  }
  if (opts->p2p_disable) {
    level = MC_PATH_LOC;
  } else if (opts->p2p_level >= 0) {
    level = opts->p2p_level;
  }
  if ((int)path->type <= level) {
    *p2p_out = 1;
  }
  if ((path->type == MC_PATH_NVL) && (read_out != NULL)) {
    const struct mc_topo_node *gpu2 = sys->nodes[MC_TOPO_GPU].nodes[g2];
    if ((gpu1->gpu.sm == gpu2->gpu.sm) && (gpu1->gpu.sm == 80)) {
      *read_out = 1;
    }
  }
  if (intermediate_out != NULL) {
    *intermediate_out = inter;
  }
  return ncclSuccess;
}

int mc_topo_check_net(const struct mc_topo_system *sys, const struct mc_topo_paths_opts *opts,
                      int rank1, int rank2)
{
  int g1 = mc_topo_rank_to_index(sys, rank1);
  int g2 = mc_topo_rank_to_index(sys, rank2);
  const struct mc_topo_node *gpu1;
  const struct mc_topo_node *gpu2;
  float speed;
  float net1 = 0;
  float net2 = 0;

  if (opts->net_disable_intra || (g1 < 0) || (g2 < 0)) {
    return 0;
  }
  gpu1 = sys->nodes[MC_TOPO_GPU].nodes[g1];
  gpu2 = sys->nodes[MC_TOPO_GPU].nodes[g2];
  speed = gpu1->paths[MC_TOPO_GPU][g2].bw;
  for (int n = 0; n < sys->nodes[MC_TOPO_NET].count; n++) {
    const struct mc_topo_path *p = &gpu1->paths[MC_TOPO_NET][n];
    if ((p->type <= MC_PATH_PXB) && (p->bw > net1)) {
      net1 = p->bw;
    }
    p = &gpu2->paths[MC_TOPO_NET][n];
    if ((p->type <= MC_PATH_PXB) && (p->bw > net2)) {
      net2 = p->bw;
    }
  }
  return (net1 > speed) && (net2 > speed);
}

ncclResult_t mc_topo_intermediate_rank(const struct mc_topo_system *sys, int rank, int net_idx,
                                       int *rank_out)
{
  int g = mc_topo_rank_to_index(sys, rank);
  const struct mc_topo_path *path;
  const struct mc_topo_node *node;
  const struct mc_topo_hop *hop;
  int i = 1;

  if (g < 0) {
    return MC_FAIL(ncclInternalError, "Topo: rank %d is not in the system", rank);
  }
  path = &sys->nodes[MC_TOPO_GPU].nodes[g]->paths[MC_TOPO_NET][net_idx];
  if (path->type != MC_PATH_PXN) {
    *rank_out = rank;
    return ncclSuccess;
  }
  hop = mc_topo_hop_at(sys, path->hops);
  hop = (hop != NULL) ? mc_topo_hop_at(sys, hop->next) : NULL;
  while ((i < path->count) && (mc_topo_hop_link(sys, hop)->rem->type == MC_TOPO_NVS)) {
    hop = mc_topo_hop_at(sys, hop->next);
    i++;
  }
  node = (i < path->count) ? mc_topo_hop_link(sys, hop)->rem : NULL;
  if ((node != NULL) && (node->type == MC_TOPO_DEV)) {
    for (int l = 0; l < node->n_links; l++) {
      if (node->links[l].rem->type == MC_TOPO_GPU) {
        node = node->links[l].rem;
        break;
      }
    }
  }
  if ((node == NULL) || (node->type != MC_TOPO_GPU)) {
    return MC_FAIL(ncclInternalError, "Topo: no intermediate GPU between rank %d and NET %d", rank,
                   net_idx);
  }
  return dev_to_rank(sys, MC_TOPO_ID_SYSTEM(node->id), node->gpu.dev, rank_out);
}

ncclResult_t mc_topo_check_gdr(const struct mc_topo_system *sys,
                               const struct mc_topo_paths_opts *opts, int rank, int net_idx,
                               int read, enum mc_topo_gdr_mode *mode_out)
{
  const struct mc_topo_node *net = sys->nodes[MC_TOPO_NET].nodes[net_idx];
  const struct mc_topo_node *gpu;
  int g = mc_topo_rank_to_index(sys, rank);
  int level;
  int distance;
  int c = -1;

  *mode_out = MC_TOPO_GDR_DISABLED;
  if (g < 0) {
    return MC_FAIL(ncclInternalError, "Topo: rank %d is not in the system", rank);
  }
  gpu = sys->nodes[MC_TOPO_GPU].nodes[g];
  if ((net->net.gdr == 0) || (gpu->gpu.gdr == 0)) {
    return ncclSuccess;
  }
  if ((gpu->gpu.mlopart != MC_TOPO_UNDEF) && !opts->net_gdr_mlopart) {
    return ncclSuccess;
  }
  if (read) {
    if (opts->net_gdr_read == 0) {
      return ncclSuccess;
    }
    if ((opts->net_gdr_read < 0) && (gpu->gpu.sm < 80)) {
      int nvlink = (sys->nodes[MC_TOPO_GPU].count == 1);
      for (int i = 0; i < sys->nodes[MC_TOPO_GPU].count; i++) {
        if ((i != g) && (gpu->paths[MC_TOPO_GPU][i].type == MC_PATH_NVL)) {
          nvlink = 1;
          break;
        }
      }
      if (!nvlink) {
        return ncclSuccess;
      }
    }
  }
  level = opts->net_gdr_c2c ? MC_PATH_P2C : MC_PATH_PXB;
  if (opts->net_gdr_level >= 0) {
    level = opts->net_gdr_level;
  }
  distance = (int)gpu->paths[MC_TOPO_NET][net_idx].type;
  if (distance == MC_PATH_PXN) {
    int proxy = -1;
    MC_CHECK(mc_topo_intermediate_rank(sys, rank, net_idx, &proxy));
    g = mc_topo_rank_to_index(sys, proxy);
    gpu = sys->nodes[MC_TOPO_GPU].nodes[g];
    distance = (int)gpu->paths[MC_TOPO_NET][net_idx].type;
  }
  if (distance > level) {
    return ncclSuccess;
  }
  MC_CHECK(mc_topo_local_cpu(sys, g, &c));
  if ((gpu->paths[MC_TOPO_CPU][c].type == MC_PATH_C2C) && (distance != MC_PATH_P2C)) {
    *mode_out = MC_TOPO_GDR_PCI;
  } else {
    *mode_out = MC_TOPO_GDR_DEFAULT;
  }
  return ncclSuccess;
}

/* ---------------------------------------------------------------- compute */

static int merge_path_type(int a, int b)
{
  int max = (a > b) ? a : b;
  int min = (a > b) ? b : a;

  if ((max == MC_PATH_PHB) && (min == MC_PATH_C2C)) {
    return MC_PATH_P2C;
  }
  return max;
}

/* addInterStep: src(t1,i1) -> dst(t2,i2) := src -> mid(tx,ix) + mid -> dst. */
static ncclResult_t add_inter_step(struct mc_topo_system *sys, int tx, int ix, int t1, int i1,
                                   int t2, int i2)
{
  struct mc_topo_node *mid = sys->nodes[tx].nodes[ix];
  struct mc_topo_node *src = sys->nodes[t1].nodes[i1];
  struct mc_topo_path *a = &src->paths[tx][ix];
  struct mc_topo_path *b = &mid->paths[t2][i2];
  struct mc_topo_path *p = &src->paths[t2][i2];
  struct mc_topo_path merged = {.hops = b->hops, .count = (int16_t)(a->count + b->count)};
  uint32_t last = 0;

  /* a's links copied, then b's hops themselves (they never change). The
   * hops may move as they grow: refs, not pointers, across hop_new. */
  for (uint32_t h = a->hops; h != 0; h = sys->hops[h - 1].next) {
    uint32_t hop = 0;
    MC_CHECK(hop_new(sys, sys->hops[h - 1].link, b->hops, &hop));
    if (last == 0) {
      merged.hops = hop;
    } else {
      sys->hops[last - 1].next = hop;
    }
    last = hop;
  }
  merged.type = (uint8_t)merge_path_type((int)a->type, (int)b->type);
  if (tx == MC_TOPO_GPU) {
    merged.type = MC_PATH_PXN;
  }
  merged.bw = (a->bw < b->bw) ? a->bw : b->bw;
  *p = merged;
  return ncclSuccess;
}

/* P2P reroutes through the CPU, then (with a communicator) the transports'
 * canConnect: P2P = CheckP2p && (intermediate || !CheckNet), SHM = !CheckNet. */
static ncclResult_t p2p_step(struct mc_topo_system *sys, const struct mc_topo_paths_opts *opts)
{
  int n_gpus = sys->nodes[MC_TOPO_GPU].count;

  for (int g = 0; g < n_gpus; g++) {
    int rank_g = sys->nodes[MC_TOPO_GPU].nodes[g]->gpu.rank;
    for (int p = 0; p < n_gpus; p++) {
      int p2p = 0;
      MC_CHECK(mc_topo_check_p2p(sys, opts, sys->nodes[MC_TOPO_GPU].nodes[p]->gpu.rank, rank_g,
                                 &p2p, NULL, NULL));
      if (p2p == 0) {
        int cpu = -1;
        MC_CHECK(mc_topo_local_cpu(sys, g, &cpu));
        MC_CHECK(add_inter_step(sys, MC_TOPO_CPU, cpu, MC_TOPO_GPU, p, MC_TOPO_GPU, g));
      }
    }
    if (!opts->check_transports) {
      continue;
    }
    for (int p = 0; p < n_gpus; p++) {
      int rank_p = sys->nodes[MC_TOPO_GPU].nodes[p]->gpu.rank;
      int p2p = 0;
      int inter = -1;
      int use_net;
      if (p == g) {
        continue;
      }
      MC_CHECK(mc_topo_check_p2p(sys, opts, rank_p, rank_g, &p2p, NULL, &inter));
      use_net = mc_topo_check_net(sys, opts, rank_p, rank_g);
      if ((p2p != 0) && (inter == -1) && use_net) {
        p2p = 0;
      }
      if ((p2p == 0) && (opts->shm_disable || use_net)) {
        sys->nodes[MC_TOPO_GPU].nodes[p]->paths[MC_TOPO_GPU][g].type = MC_PATH_NET;
      }
    }
  }
  return ncclSuccess;
}

/* GPU -(C2C)- CPU -(PCI)- NIC: the local NETs become P2C. */
static ncclResult_t p2c_step(struct mc_topo_system *sys)
{
  int *locals = NULL;
  ncclResult_t res = ncclSuccess;

  MC_CHECK(mc_calloc(&locals, (size_t)(sys->nodes[MC_TOPO_NET].count + 1)));
  for (int g = 0; g < sys->nodes[MC_TOPO_GPU].count; g++) {
    struct mc_topo_node *gpu = sys->nodes[MC_TOPO_GPU].nodes[g];
    int c = -1;
    int n_local;
    MC_CHECK_GOTO(mc_topo_local_cpu(sys, g, &c), res, out);
    n_local = mc_topo_get_local(sys, MC_TOPO_GPU, g, MC_TOPO_NET, locals);
    for (int l = 0; l < n_local; l++) {
      int n = locals[l];
      struct mc_topo_node *net = sys->nodes[MC_TOPO_NET].nodes[n];
      if (merge_path_type((int)gpu->paths[MC_TOPO_CPU][c].type,
                          (int)net->paths[MC_TOPO_CPU][c].type) == MC_PATH_P2C) {
        if (gpu->paths[MC_TOPO_NET][n].type > MC_PATH_P2C) {
          gpu->paths[MC_TOPO_NET][n].type = MC_PATH_P2C;
        }
        if (net->paths[MC_TOPO_GPU][g].type > MC_PATH_P2C) {
          net->paths[MC_TOPO_GPU][g].type = MC_PATH_P2C;
        }
      }
    }
  }
out:
  free(locals);
  return res;
}

/* PXN rewrites (GPU -> NET only) and reroutes through the CPU without GDR. */
static ncclResult_t net_step(struct mc_topo_system *sys, const struct mc_topo_paths_opts *opts)
{
  for (int n = 0; n < sys->nodes[MC_TOPO_NET].count; n++) {
    /* NCCL asks for the NET's local GPU once per GPU; the answer changes only
     * when a path was rerouted since (add_inter_step below). */
    bool local_known = false;
    int peer_idx = -1;
    for (int g = 0; g < sys->nodes[MC_TOPO_GPU].count; g++) {
      struct mc_topo_node *gpu = sys->nodes[MC_TOPO_GPU].nodes[g];
      enum mc_topo_gdr_mode gdr = MC_TOPO_GDR_DISABLED;
      if (!opts->pxn_disable) {
        if (!local_known) {
          MC_CHECK(mc_topo_get_local_gpu(sys, n, &peer_idx));
          local_known = true;
        }
        if ((peer_idx != g) && (peer_idx != -1)) {
          struct mc_topo_node *peer = sys->nodes[MC_TOPO_GPU].nodes[peer_idx];
          int pxn_type = opts->pxn_c2c ? MC_PATH_P2C : MC_PATH_PXB;
          MC_CHECK(mc_topo_check_gdr(sys, opts, peer->gpu.rank, n, 1, &gdr));
          if (((int)peer->paths[MC_TOPO_NET][n].type <= pxn_type) &&
              (gdr != MC_TOPO_GDR_DISABLED) && (peer->paths[MC_TOPO_GPU][g].type <= MC_PATH_NVL) &&
              (MC_TOPO_ID_SYSTEM(peer->id) == MC_TOPO_ID_SYSTEM(gpu->id)) &&
              ((peer->paths[MC_TOPO_NET][n].bw > gpu->paths[MC_TOPO_NET][n].bw) ||
               (gpu->paths[MC_TOPO_NET][n].type > MC_PATH_PXN))) {
            MC_CHECK(add_inter_step(sys, MC_TOPO_GPU, peer_idx, MC_TOPO_GPU, g, MC_TOPO_NET, n));
            local_known = false;
          }
        }
      }
      if (gpu->paths[MC_TOPO_NET][n].type < MC_PATH_PHB) {
        MC_CHECK(mc_topo_check_gdr(sys, opts, gpu->gpu.rank, n, 0, &gdr));
        if (gdr == MC_TOPO_GDR_DISABLED) {
          int c = -1;
          MC_CHECK(mc_topo_local_cpu(sys, g, &c));
          MC_CHECK(add_inter_step(sys, MC_TOPO_CPU, c, MC_TOPO_NET, n, MC_TOPO_GPU, g));
          MC_CHECK(add_inter_step(sys, MC_TOPO_CPU, c, MC_TOPO_GPU, g, MC_TOPO_NET, n));
          local_known = false;
        }
      }
    }
  }
  return ncclSuccess;
}

/* Each NET's local GPU, once the paths are final. */
static ncclResult_t nets_local_gpu(struct mc_topo_system *sys)
{
  for (int n = 0; n < sys->nodes[MC_TOPO_NET].count; n++) {
    struct mc_topo_node *net = sys->nodes[MC_TOPO_NET].nodes[n];
    MC_CHECK(mc_topo_get_local_gpu(sys, n, &net->net.local_gpu));
  }
  return ncclSuccess;
}

/* ncclTopoTrimSystem's domains: GPU g joins the lowest domain of a GPU
 * before it that it reaches below PATH_NET. */
static void gpu_domains(const struct mc_topo_system *sys, int32_t *domains)
{
  for (int g = 0; g < sys->nodes[MC_TOPO_GPU].count; g++) {
    const struct mc_topo_path *paths = sys->nodes[MC_TOPO_GPU].nodes[g]->paths[MC_TOPO_GPU];
    domains[g] = g;
    for (int p = 0; (paths != NULL) && (p < g); p++) {
      if ((paths[p].type < MC_PATH_NET) && (domains[p] < domains[g])) {
        domains[g] = domains[p];
      }
    }
  }
}

/* ncclTopoSearchInit's getMaxBw over every DEV, towards target. */
static float path_max_bw(const struct mc_topo_system *sys, int target)
{
  float max_bw = 0;

  for (int d = 0; d < sys->nodes[MC_TOPO_DEV].count; d++) {
    const struct mc_topo_path *paths = sys->nodes[MC_TOPO_DEV].nodes[d]->paths[target];
    for (int i = 0; (paths != NULL) && (i < sys->nodes[target].count); i++) {
      if ((paths[i].count != 0) && (paths[i].bw > max_bw)) {
        max_bw = paths[i].bw;
      }
    }
  }
  return max_bw;
}

/* The summary of freshly computed paths (mc_topo_system's summary). */
static ncclResult_t paths_summarize(struct mc_topo_system *sys)
{
  int n_gpus = sys->nodes[MC_TOPO_GPU].count;

  MC_CHECK(mc_calloc(&sys->gpu_domain, (size_t)(n_gpus > 0 ? n_gpus : 1)));
  gpu_domains(sys, sys->gpu_domain);
  sys->path_max_bw[0] = path_max_bw(sys, MC_TOPO_DEV);
  sys->path_max_bw[1] = path_max_bw(sys, MC_TOPO_NET);
  return ncclSuccess;
}

ncclResult_t mc_topo_compute_paths(struct mc_topo_system *sys,
                                   const struct mc_topo_paths_opts *opts)
{
  static const int base_types[] = {MC_TOPO_CPU, MC_TOPO_DEV, MC_TOPO_GPU, MC_TOPO_NET,
                                   MC_TOPO_GIN, MC_TOPO_RMA, MC_TOPO_NVS};
  struct bfs b = {0};
  ncclResult_t res = ncclSuccess;

  mc_topo_free_paths(sys);
  MC_CHECK(links_number(sys));
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    b.off[t] = b.total;
    b.total += sys->nodes[t].count;
  }
  MC_CHECK_GOTO(mc_calloc(&b.cur, (size_t)b.total + 1), res, out);
  MC_CHECK_GOTO(mc_calloc(&b.next, (size_t)b.total + 1), res, out);
  MC_CHECK_GOTO(mc_calloc(&b.dist, (size_t)b.total + 1), res, out);
  MC_CHECK_GOTO(mc_calloc(&b.touched, (size_t)b.total + 1), res, out);
  for (size_t k = 0; k < sizeof(base_types) / sizeof(base_types[0]); k++) {
    int t = base_types[k];
    for (int i = 0; i < sys->nodes[t].count; i++) {
      MC_CHECK_GOTO(set_paths(sys, &b, sys->nodes[t].nodes[i], opts), res, out);
    }
  }
out:
  free(b.cur);
  free(b.next);
  free(b.dist);
  free(b.touched);
  if (res != ncclSuccess) {
    return res;
  }
  MC_CHECK(p2p_step(sys, opts));
  if (sys->nodes[MC_TOPO_NET].count > 0) {
    MC_CHECK(p2c_step(sys));
    MC_CHECK(net_step(sys, opts));
  }
  MC_CHECK(nets_local_gpu(sys));
  return paths_summarize(sys);
}

/* ---------------------------------------------------------------- sharing */

#define PATHS_MAGIC 0x6d637061u /* "mcpa" */
#define PATHS_ALIGN 64

/* The bytes of mc_topo_paths_export: this head, the directory of the path
 * arrays, the arrays, the hops, the GPUs' domains (each part
 * PATHS_ALIGN-aligned). */
struct paths_head {
  uint32_t magic;
  uint32_t n_arrays;
  uint32_t n_hops;
  uint32_t n_links;
  uint64_t bytes;
  uint64_t hops_off;
  uint64_t domains_off;
  uint32_t n_gpus;
  float path_max_bw[2];
};

/* One path array: from node (type, index) to every node of type base. */
struct paths_dir {
  uint8_t type;
  uint8_t base;
  uint16_t pad;
  uint32_t index;
  uint64_t off;
};

static size_t paths_align(size_t x)
{
  return (x + PATHS_ALIGN - 1) & ~(size_t)(PATHS_ALIGN - 1);
}

#define PATHS_DIR_OFF paths_align(sizeof(struct paths_head))

/* Where the arrays start after a directory of n_arrays entries. */
static size_t arrays_off(uint32_t n_arrays)
{
  return PATHS_DIR_OFF + paths_align((size_t)n_arrays * sizeof(struct paths_dir));
}

static size_t array_bytes(const struct mc_topo_system *sys, int base)
{
  int n = sys->nodes[base].count;
  return paths_align((size_t)(n > 0 ? n : 1) * sizeof(struct mc_topo_path));
}

/* The number of path arrays of sys, and their bytes. */
static uint32_t paths_arrays(const struct mc_topo_system *sys, size_t *array_bytes_out)
{
  uint32_t n = 0;
  size_t bytes = 0;

  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      for (int b = 0; b < MC_TOPO_NODE_TYPES; b++) {
        if (sys->nodes[t].nodes[i]->paths[b] != NULL) {
          n++;
          bytes += array_bytes(sys, b);
        }
      }
    }
  }
  *array_bytes_out = bytes;
  return n;
}

/* Where the domains start after the hops that start at hops_off. */
static size_t domains_off(size_t hops_off, uint32_t n_hops)
{
  return paths_align(hops_off + (size_t)n_hops * sizeof(struct mc_topo_hop));
}

size_t mc_topo_paths_export_bytes(const struct mc_topo_system *sys)
{
  size_t arrays = 0;
  uint32_t n = paths_arrays(sys, &arrays);

  return domains_off(arrays_off(n) + arrays, sys->n_hops) +
         (size_t)sys->nodes[MC_TOPO_GPU].count * sizeof(int32_t);
}

ncclResult_t mc_topo_paths_export(const struct mc_topo_system *sys, void *buf, size_t bytes)
{
  char *base = buf;
  size_t arrays = 0;
  struct paths_head head = {.magic = PATHS_MAGIC,
                            .n_hops = sys->n_hops,
                            .n_links = (uint32_t)sys->n_link_table,
                            .bytes = bytes};
  struct paths_dir *dir;
  size_t off;
  size_t need;
  uint32_t k = 0;

  head.n_arrays = paths_arrays(sys, &arrays);
  off = arrays_off(head.n_arrays);
  need = mc_topo_paths_export_bytes(sys);
  if (bytes != need) {
    return MC_FAIL(ncclInternalError, "Topo: paths export into %zu bytes, %zu needed", bytes, need);
  }
  if (sys->gpu_domain == NULL) {
    return MC_FAIL(ncclInternalError, "Topo: paths export without the paths' summary");
  }
  dir = (struct paths_dir *)(base + PATHS_DIR_OFF);
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      const struct mc_topo_node *node = sys->nodes[t].nodes[i];
      for (int b = 0; b < MC_TOPO_NODE_TYPES; b++) {
        if (node->paths[b] == NULL) {
          continue;
        }
        dir[k++] = (struct paths_dir){
            .type = (uint8_t)t, .base = (uint8_t)b, .index = (uint32_t)i, .off = off};
        memcpy(base + off, node->paths[b],
               (size_t)sys->nodes[b].count * sizeof(struct mc_topo_path));
        off += array_bytes(sys, b);
      }
    }
  }
  head.hops_off = off;
  if (sys->n_hops > 0) {
    memcpy(base + off, sys->hops, (size_t)sys->n_hops * sizeof(struct mc_topo_hop));
  }
  head.domains_off = domains_off(off, sys->n_hops);
  head.n_gpus = (uint32_t)sys->nodes[MC_TOPO_GPU].count;
  memcpy(base + head.domains_off, sys->gpu_domain, (size_t)head.n_gpus * sizeof(int32_t));
  head.path_max_bw[0] = sys->path_max_bw[0];
  head.path_max_bw[1] = sys->path_max_bw[1];
  memcpy(base, &head, sizeof(head));
  return ncclSuccess;
}

static ncclResult_t import_fail(struct mc_topo_system *sys, const char *why)
{
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      memset(sys->nodes[t].nodes[i]->paths, 0, sizeof(sys->nodes[t].nodes[i]->paths));
    }
  }
  sys->hops = NULL;
  sys->n_hops = 0;
  sys->cap_hops = 0;
  sys->gpu_domain = NULL;
  return MC_FAIL(ncclInternalError, "Topo: shared paths do not fit this system: %s", why);
}

ncclResult_t mc_topo_paths_import(struct mc_topo_system *sys, void *map, size_t map_bytes,
                                  size_t offset)
{
  char *base = (char *)map + offset;
  size_t bytes = (offset < map_bytes) ? map_bytes - offset : 0;
  struct paths_head head;
  const struct paths_dir *dir;
  size_t dir_end;

  mc_topo_free_paths(sys);
  if (bytes < sizeof(head)) {
    return import_fail(sys, "shorter than its head");
  }
  memcpy(&head, base, sizeof(head));
  dir_end = arrays_off(head.n_arrays);
  if ((head.magic != PATHS_MAGIC) || (head.bytes != bytes) || (dir_end > bytes) ||
      (head.hops_off < dir_end) || (head.hops_off > bytes) ||
      ((bytes - head.hops_off) / sizeof(struct mc_topo_hop) < head.n_hops) ||
      (head.domains_off != domains_off(head.hops_off, head.n_hops)) || (head.domains_off > bytes) ||
      ((bytes - head.domains_off) / sizeof(int32_t) < head.n_gpus)) {
    return import_fail(sys, "bad head");
  }
  if (head.n_gpus != (uint32_t)sys->nodes[MC_TOPO_GPU].count) {
    return import_fail(sys, "another GPU count");
  }
  MC_CHECK(links_number(sys));
  if (head.n_links != (uint32_t)sys->n_link_table) {
    return import_fail(sys, "another link count");
  }
  dir = (const struct paths_dir *)(base + PATHS_DIR_OFF);
  for (uint32_t k = 0; k < head.n_arrays; k++) {
    const struct paths_dir *e = &dir[k];
    struct mc_topo_node *node;
    if ((e->type >= MC_TOPO_NODE_TYPES) || (e->base >= MC_TOPO_NODE_TYPES) ||
        (e->index >= (uint32_t)sys->nodes[e->type].count) || (e->off < dir_end) ||
        (e->off > head.hops_off) || (head.hops_off - e->off < array_bytes(sys, e->base))) {
      return import_fail(sys, "bad directory entry");
    }
    node = sys->nodes[e->type].nodes[e->index];
    if (node->paths[e->base] != NULL) {
      return import_fail(sys, "a path array twice");
    }
    node->paths[e->base] = (struct mc_topo_path *)(base + e->off);
  }
  sys->gpu_domain = (int32_t *)(base + head.domains_off);
  for (uint32_t g = 0; g < head.n_gpus; g++) {
    if ((sys->gpu_domain[g] < 0) || ((uint32_t)sys->gpu_domain[g] > g)) {
      return import_fail(sys, "a GPU's domain out of range");
    }
  }
  sys->path_max_bw[0] = head.path_max_bw[0];
  sys->path_max_bw[1] = head.path_max_bw[1];
  sys->hops = (struct mc_topo_hop *)(base + head.hops_off);
  sys->n_hops = head.n_hops;
  sys->cap_hops = head.n_hops;
  sys->paths_map = map;
  sys->paths_map_bytes = map_bytes;
  return nets_local_gpu(sys);
}

ncclResult_t mc_topo_trim_system(struct mc_topo_system *sys, int my_rank, int n_ranks,
                                 bool *removed_out)
{
  int n_gpus = sys->nodes[MC_TOPO_GPU].count;
  int64_t *ids = NULL;
  int my_domain = 0;
  int n_removed = 0;
  ncclResult_t res = ncclSuccess;

  if (sys->gpu_domain == NULL) {
    return MC_FAIL(ncclInternalError, "Topo: trim before the paths");
  }
  MC_CHECK(mc_calloc(&ids, (size_t)(n_gpus + 1)));
  for (int g = 0; g < n_gpus; g++) {
    if (sys->nodes[MC_TOPO_GPU].nodes[g]->gpu.rank == my_rank) {
      my_domain = sys->gpu_domain[g];
    }
  }
  /* The GPUs to remove, by id: indices move as GPUs go. */
  for (int g = 0; g < n_gpus; g++) {
    if (sys->gpu_domain[g] != my_domain) {
      ids[n_removed++] = sys->nodes[MC_TOPO_GPU].nodes[g]->id;
    }
  }
  /* Nothing to remove: the paths stay (computing them again gives the same). */
  if (n_removed > 0) {
    mc_topo_free_paths(sys);
  }
  for (int i = 0; i < n_removed; i++) {
    int g = mc_topo_id_to_index(sys, MC_TOPO_GPU, ids[i]);
    if (g < 0) {
      res = MC_FAIL(ncclInternalError, "Topo: trim lost GPU %lx", (unsigned long)ids[i]);
      goto out;
    }
    MC_CHECK_GOTO(mc_topo_node_remove(sys, MC_TOPO_GPU, g), res, out);
  }
  sys->inter = (sys->nodes[MC_TOPO_GPU].count != n_ranks);
  if (removed_out != NULL) {
    *removed_out = (n_removed > 0);
  }
out:
  free(ids);
  return res;
}

void mc_topo_search_init(struct mc_topo_system *sys)
{
  sys->max_bw = 0;
  sys->total_bw = 0;
  if (!sys->inter && (sys->nodes[MC_TOPO_GPU].count == 1)) {
    sys->max_bw = (float)MC_TOPO_LOC_BW;
    sys->total_bw = (float)MC_TOPO_LOC_BW;
    return;
  }
  /* The paths' part is in their summary (without paths, none: 0). */
  sys->max_bw = (sys->gpu_domain != NULL) ? sys->path_max_bw[sys->inter ? 1 : 0] : 0;
  for (int d = 0; d < sys->nodes[MC_TOPO_DEV].count; d++) {
    const struct mc_topo_node *dev = sys->nodes[MC_TOPO_DEV].nodes[d];
    float nvl = 0;
    float pci = 0;
    for (int l = 0; l < dev->n_links; l++) {
      if (dev->links[l].type == MC_TOPO_LINK_NVL) {
        nvl += dev->links[l].bw;
      }
      if (dev->links[l].type == MC_TOPO_LINK_PCI) {
        pci = dev->links[l].bw;
      }
    }
    if (((pci > nvl) ? pci : nvl) > sys->total_bw) {
      sys->total_bw = (pci > nvl) ? pci : nvl;
    }
  }
}
