/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One channel search for all the ranks of a host. NCCL 2.30 has every rank
 * search its own system (init.cc: ncclTopoCompute for the ring and the tree
 * graphs on each rank); the ranks of a host build the same system from the
 * same fused XML, so they find the same graphs. Here one rank searches, and
 * the others take its graphs when the digest of what a search reads is the
 * same on their side:
 *
 *   - mc_topo_search_digest: SHA-256 of the system (every node with its
 *     attributes, every link with its bandwidth and far end), the path and
 *     search options (the paths are a function of the system and the path
 *     options), and the search inputs of the graphs;
 *   - mc_topo_search_export: the graphs after the search (their channels:
 *     the rows of intra and inter past n_channels are not part of a graph,
 *     nothing reads them) and the bandwidths the search
 *     leaves on the system (link and NET bandwidths: NCCL's search gives back
 *     what it charged with rounding to 1/1000 GB/s, and leaves a NET charged
 *     when no GPU reaches it) as plain bytes;
 *   - mc_topo_search_import: the same bytes applied to another rank's system
 *     with the same digest: its graphs and its system end as its own search
 *     would have left them.
 *
 * Pure logic: no sockets, no logging.
 */
#include "topo/topo_graph.h"

#include "core/check.h"
#include "core/crypto.h"
#include "topo/topo_int.h"

#include <stdlib.h>
#include <string.h>

#define SHARE_MAGIC 0x6d637368u /* "mcsh" */
#define PATHS_MAGIC 0x6d637061u /* "mcpa" */

/* Values are gathered in blocks and hashed a block at a time (a call per
 * value made the digest cost more than the search it replaces). */
#define DIGEST_BLOCK 512

struct digest {
  struct mc_sha256 sha;
  int n;
  int64_t v[DIGEST_BLOCK];
};

static void put_i64(struct digest *d, int64_t v)
{
  if (d->n == DIGEST_BLOCK) {
    mc_sha256_update(&d->sha, d->v, sizeof(d->v));
    d->n = 0;
  }
  d->v[d->n++] = v;
}

static void put_f32(struct digest *d, float v)
{
  uint32_t bits;

  memcpy(&bits, &v, sizeof(bits));
  put_i64(d, bits);
}

/* A node: its id, the attributes of its type (the others are never read for
 * that type), its links. */
static void digest_node(struct digest *d, const struct mc_topo_node *n)
{
  put_i64(d, n->type);
  put_i64(d, n->id);
  switch (n->type) {
  case MC_TOPO_GPU:
    put_i64(d, n->gpu.dev);
    put_i64(d, n->gpu.rank);
    put_i64(d, n->gpu.sm);
    put_i64(d, n->gpu.gdr);
    put_i64(d, n->gpu.mlopart);
    put_i64(d, (n->gpu.parent != NULL) ? n->gpu.parent->index : -1);
    break;
  case MC_TOPO_DEV:
    put_i64(d, (int64_t)n->dev.device);
    put_i64(d, n->dev.dev);
    put_i64(d, n->dev.sm);
    put_i64(d, n->dev.n_gpus);
    break;
  case MC_TOPO_CPU:
    put_i64(d, n->cpu.arch);
    put_i64(d, n->cpu.vendor);
    put_i64(d, n->cpu.model);
    break;
  case MC_TOPO_PCI:
    put_i64(d, (int64_t)n->pci.device);
    break;
  default: /* NET and the net-like types (GIN, RMA), NIC, NVS, CXB */
    put_i64(d, n->net.dev);
    put_i64(d, (int64_t)n->net.asic);
    put_i64(d, n->net.port);
    put_f32(d, n->net.bw);
    put_f32(d, n->net.latency);
    put_i64(d, n->net.gdr);
    put_i64(d, n->net.coll);
    put_i64(d, n->net.max_channels);
    put_i64(d, n->net.local_gpu);
    put_i64(d, n->net.rail);
    put_i64(d, n->net.plane);
    break;
  }
  put_i64(d, n->n_links);
  for (int l = 0; l < n->n_links; l++) {
    put_i64(d, ((int64_t)n->links[l].type << 40) | ((int64_t)n->links[l].rem->type << 32) |
                   (uint32_t)n->links[l].rem->index);
    put_f32(d, n->links[l].bw);
  }
}

/* The system and the path options: what the paths are a function of. */
static void digest_system(struct digest *d, const struct mc_topo_system *sys,
                          const struct mc_topo_paths_opts *paths_opts)
{
  put_i64(d, sys->system_id);
  put_i64(d, sys->n_hosts);
  for (int i = 0; (i < sys->n_hosts) && (i < (int)(sizeof(sys->host_hashes) / 8)); i++) {
    put_i64(d, (int64_t)sys->host_hashes[i]);
  }
  put_f32(d, sys->max_bw);
  put_f32(d, sys->total_bw);
  put_i64(d, sys->inter);
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    put_i64(d, sys->nodes[t].count);
    for (int i = 0; i < sys->nodes[t].count; i++) {
      digest_node(d, sys->nodes[t].nodes[i]);
    }
  }
  put_i64(d, paths_opts->p2p_level);
  put_i64(d, paths_opts->p2p_disable);
  put_i64(d, paths_opts->nvb_disable);
  put_i64(d, paths_opts->pxn_disable);
  put_i64(d, paths_opts->pxn_c2c);
  put_i64(d, paths_opts->net_gdr_level);
  put_i64(d, paths_opts->net_gdr_read);
  put_i64(d, paths_opts->net_gdr_c2c);
  put_i64(d, paths_opts->net_gdr_mlopart);
  put_i64(d, paths_opts->net_disable_intra);
  put_i64(d, paths_opts->shm_disable);
  put_i64(d, paths_opts->check_transports);
}

static void digest_start(struct digest *d, int64_t magic)
{
  mc_sha256_init(&d->sha);
  d->n = 0;
  put_i64(d, magic);
}

static void digest_end(struct digest *d, uint8_t digest_out[MC_TOPO_SEARCH_DIGEST_BYTES])
{
  mc_sha256_update(&d->sha, d->v, (size_t)d->n * sizeof(d->v[0]));
  mc_sha256_final(&d->sha, digest_out);
}

void mc_topo_paths_digest(const struct mc_topo_system *sys,
                          const struct mc_topo_paths_opts *paths_opts,
                          uint8_t digest_out[MC_TOPO_SEARCH_DIGEST_BYTES])
{
  struct digest d;

  digest_start(&d, PATHS_MAGIC);
  digest_system(&d, sys, paths_opts);
  digest_end(&d, digest_out);
}

void mc_topo_search_digest(const struct mc_topo_system *sys,
                           const struct mc_topo_paths_opts *paths_opts,
                           const struct mc_topo_search_opts *search_opts,
                           const struct mc_topo_graph *const *graphs, int n_graphs,
                           uint8_t digest_out[MC_TOPO_SEARCH_DIGEST_BYTES])
{
  struct digest d;

  digest_start(&d, SHARE_MAGIC);
  digest_system(&d, sys, paths_opts);
  put_i64(&d, search_opts->cross_nic);
  put_i64(&d, search_opts->scatter_nets);
  put_i64(&d, search_opts->graph_file != NULL);
  for (int g = 0; g < n_graphs; g++) {
    put_i64(&d, graphs[g]->id);
    put_i64(&d, graphs[g]->pattern);
    put_i64(&d, graphs[g]->collnet);
    put_i64(&d, graphs[g]->min_channels);
    put_i64(&d, graphs[g]->max_channels);
    put_i64(&d, graphs[g]->n_gpus);
  }
  digest_end(&d, digest_out);
}

/* ---------------------------------------------------------------- bytes */

/* The scalar outputs of a graph, as they travel. */
struct graph_wire {
  int32_t id;
  int32_t pattern;
  int32_t collnet;
  int32_t min_channels;
  int32_t max_channels;
  int32_t n_channels;
  float bw_intra;
  float bw_inter;
  float latency_inter;
  int32_t type_intra;
  int32_t type_inter;
  int32_t same_channels;
  int32_t cross_nic;
  int32_t n_hops;
  int32_t n_gpus;
};

struct share_header {
  uint32_t magic;
  int32_t n_graphs;
  int32_t n_gpus;
  int32_t n_bws; /* link bandwidths, then one per NET */
};

static int count_bws(const struct mc_topo_system *sys)
{
  int n = sys->nodes[MC_TOPO_NET].count;

  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      n += sys->nodes[t].nodes[i]->n_links;
    }
  }
  return n;
}

/* A graph's bytes: its scalars, then its n_channels rows of intra and inter
 * (the rows past n_channels are not part of a graph: nothing reads them). */
static size_t graph_bytes(int n_gpus, int n_channels)
{
  return sizeof(struct graph_wire) + (size_t)n_channels * (size_t)n_gpus * sizeof(int32_t) +
         (size_t)n_channels * 2 * sizeof(int64_t);
}

ncclResult_t mc_topo_search_export(const struct mc_topo_system *sys,
                                   const struct mc_topo_graph *const *graphs, int n_graphs,
                                   void **buf_out, size_t *bytes_out)
{
  int n_gpus = sys->nodes[MC_TOPO_GPU].count;
  struct share_header hdr = {
      .magic = SHARE_MAGIC, .n_graphs = n_graphs, .n_gpus = n_gpus, .n_bws = count_bws(sys)};
  size_t bytes = sizeof(hdr) + (size_t)hdr.n_bws * sizeof(float);
  char *buf = NULL;
  char *p;

  for (int g = 0; g < n_graphs; g++) {
    if ((graphs[g]->n_gpus != n_gpus) || (graphs[g]->n_channels < 0) ||
        (graphs[g]->n_channels > MC_TOPO_MAX_CHANNELS)) {
      return MC_FAIL(ncclInternalError, "Topo: graph %d (%d channels over %d GPUs) on %d GPUs", g,
                     graphs[g]->n_channels, graphs[g]->n_gpus, n_gpus);
    }
    bytes += graph_bytes(n_gpus, graphs[g]->n_channels);
  }
  MC_CHECK(mc_calloc(&buf, bytes));
  p = buf;
  memcpy(p, &hdr, sizeof(hdr));
  p += sizeof(hdr);
  for (int g = 0; g < n_graphs; g++) {
    const struct mc_topo_graph *gr = graphs[g];
    struct graph_wire w = {.id = gr->id,
                           .pattern = gr->pattern,
                           .collnet = gr->collnet,
                           .min_channels = gr->min_channels,
                           .max_channels = gr->max_channels,
                           .n_channels = gr->n_channels,
                           .bw_intra = gr->bw_intra,
                           .bw_inter = gr->bw_inter,
                           .latency_inter = gr->latency_inter,
                           .type_intra = gr->type_intra,
                           .type_inter = gr->type_inter,
                           .same_channels = gr->same_channels,
                           .cross_nic = gr->cross_nic,
                           .n_hops = gr->n_hops,
                           .n_gpus = gr->n_gpus};
    memcpy(p, &w, sizeof(w));
    p += sizeof(w);
    for (int i = 0; i < gr->n_channels * n_gpus; i++) {
      int32_t v = gr->intra[i];
      memcpy(p, &v, sizeof(v));
      p += sizeof(v);
    }
    memcpy(p, gr->inter, (size_t)gr->n_channels * 2 * sizeof(int64_t));
    p += (size_t)gr->n_channels * 2 * sizeof(int64_t);
  }
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      const struct mc_topo_node *n = sys->nodes[t].nodes[i];
      for (int l = 0; l < n->n_links; l++) {
        memcpy(p, &n->links[l].bw, sizeof(float));
        p += sizeof(float);
      }
    }
  }
  for (int i = 0; i < sys->nodes[MC_TOPO_NET].count; i++) {
    memcpy(p, &sys->nodes[MC_TOPO_NET].nodes[i]->net.bw, sizeof(float));
    p += sizeof(float);
  }
  *buf_out = buf;
  *bytes_out = bytes;
  return ncclSuccess;
}

ncclResult_t mc_topo_search_import(struct mc_topo_system *sys, struct mc_topo_graph *const *graphs,
                                   int n_graphs, const void *buf, size_t bytes)
{
  int n_gpus = sys->nodes[MC_TOPO_GPU].count;
  struct share_header hdr;
  const char *p = buf;
  const char *end = p + bytes;

  if (bytes < sizeof(hdr)) {
    return MC_FAIL(ncclInternalError, "Topo: shared search of %zu bytes is truncated", bytes);
  }
  memcpy(&hdr, p, sizeof(hdr));
  p += sizeof(hdr);
  if ((hdr.magic != SHARE_MAGIC) || (hdr.n_graphs != n_graphs) || (hdr.n_gpus != n_gpus) ||
      (hdr.n_bws != count_bws(sys))) {
    return MC_FAIL(ncclInternalError,
                   "Topo: shared search (%d graphs, %d GPUs, %d bandwidths) does not fit this "
                   "system (%d graphs, %d GPUs)",
                   hdr.n_graphs, hdr.n_gpus, hdr.n_bws, n_graphs, n_gpus);
  }
  for (int g = 0; g < n_graphs; g++) {
    struct mc_topo_graph *gr = graphs[g];
    struct graph_wire w;
    if ((gr->n_gpus != n_gpus) || ((size_t)(end - p) < sizeof(w))) {
      return MC_FAIL(ncclInternalError, "Topo: shared search does not fit graph %d", g);
    }
    memcpy(&w, p, sizeof(w));
    p += sizeof(w);
    if ((w.n_channels < 0) || (w.n_channels > MC_TOPO_MAX_CHANNELS) ||
        ((size_t)(end - p) < graph_bytes(n_gpus, w.n_channels) - sizeof(w))) {
      return MC_FAIL(ncclInternalError, "Topo: shared graph %d has %d channels in %zu bytes", g,
                     w.n_channels, (size_t)(end - p));
    }
    gr->id = w.id;
    gr->pattern = w.pattern;
    gr->collnet = w.collnet;
    gr->min_channels = w.min_channels;
    gr->max_channels = w.max_channels;
    gr->n_channels = w.n_channels;
    gr->bw_intra = w.bw_intra;
    gr->bw_inter = w.bw_inter;
    gr->latency_inter = w.latency_inter;
    gr->type_intra = w.type_intra;
    gr->type_inter = w.type_inter;
    gr->same_channels = w.same_channels;
    gr->cross_nic = w.cross_nic;
    gr->n_hops = w.n_hops;
    for (int i = 0; i < w.n_channels * n_gpus; i++) {
      int32_t v;
      memcpy(&v, p, sizeof(v));
      p += sizeof(v);
      gr->intra[i] = v;
    }
    memcpy(gr->inter, p, (size_t)w.n_channels * 2 * sizeof(int64_t));
    p += (size_t)w.n_channels * 2 * sizeof(int64_t);
  }
  if ((size_t)(end - p) != (size_t)hdr.n_bws * sizeof(float)) {
    return MC_FAIL(ncclInternalError,
                   "Topo: shared search has %zu bytes of bandwidths, %d expected",
                   (size_t)(end - p), hdr.n_bws);
  }
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      struct mc_topo_node *n = sys->nodes[t].nodes[i];
      for (int l = 0; l < n->n_links; l++) {
        memcpy(&n->links[l].bw, p, sizeof(float));
        p += sizeof(float);
      }
    }
  }
  for (int i = 0; i < sys->nodes[MC_TOPO_NET].count; i++) {
    memcpy(&sys->nodes[MC_TOPO_NET].nodes[i]->net.bw, p, sizeof(float));
    p += sizeof(float);
  }
  return ncclSuccess;
}
