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

/* ---------------------------------------------------------------- system */

#define SYSTEM_MAGIC 0x6d637379u /* "mcsy" */

void mc_topo_system_digest(const struct mc_topo_system *sys,
                           uint8_t digest_out[MC_TOPO_SEARCH_DIGEST_BYTES])
{
  struct mc_topo_paths_opts none;
  struct digest d;

  memset(&none, 0, sizeof(none));
  digest_start(&d, SYSTEM_MAGIC);
  digest_system(&d, sys, &none);
  digest_end(&d, digest_out);
}

/* The bytes begin with this; the layout sizes make a system of another build
 * (another node layout) refuse to import. */
struct system_header {
  uint32_t magic;
  uint32_t node_bytes; /* sizeof(struct mc_topo_node) */
  uint32_t link_bytes; /* sizeof(struct link_wire) */
  int32_t n_types;     /* MC_TOPO_NODE_TYPES */
  int32_t counts[MC_TOPO_NODE_TYPES];
  int32_t n_links; /* all nodes' */
  int32_t system_id;
  int32_t n_hosts;
  int32_t pad;
  uint64_t host_hashes[64];
};

/* A node or a link names another node by type and index. */
struct node_ref {
  int32_t type; /* -1: none */
  int32_t index;
};

/* A node's record: the node as this build lays it out (its pointers are
 * meaningless in another process and are rebuilt), the GPU's parent, and
 * how many of the link records are its own. */
struct node_wire {
  struct mc_topo_node node;
  struct node_ref parent;
  int32_t n_links;
  int32_t pad;
};

struct link_wire {
  int32_t type;
  float bw;
  struct node_ref rem;
};

static int count_links(const struct mc_topo_system *sys)
{
  int n = 0;

  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      n += sys->nodes[t].nodes[i]->n_links;
    }
  }
  return n;
}

static int count_nodes(const struct mc_topo_system *sys)
{
  int n = 0;

  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    n += sys->nodes[t].count;
  }
  return n;
}

size_t mc_topo_system_export_bytes(const struct mc_topo_system *sys)
{
  return sizeof(struct system_header) + (size_t)count_nodes(sys) * sizeof(struct node_wire) +
         (size_t)count_links(sys) * sizeof(struct link_wire);
}

static struct node_ref ref_of(const struct mc_topo_node *n)
{
  struct node_ref r = {.type = -1, .index = -1};

  if (n != NULL) {
    r.type = (int32_t)n->type;
    r.index = n->index;
  }
  return r;
}

ncclResult_t mc_topo_system_export(const struct mc_topo_system *sys, void *buf, size_t bytes)
{
  struct system_header hdr;
  char *p = buf;

  if (bytes != mc_topo_system_export_bytes(sys)) {
    return MC_FAIL(ncclInternalError, "Topo: system export into %zu bytes, %zu needed", bytes,
                   mc_topo_system_export_bytes(sys));
  }
  memset(&hdr, 0, sizeof(hdr));
  hdr.magic = SYSTEM_MAGIC;
  hdr.node_bytes = (uint32_t)sizeof(struct mc_topo_node);
  hdr.link_bytes = (uint32_t)sizeof(struct link_wire);
  hdr.n_types = MC_TOPO_NODE_TYPES;
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    hdr.counts[t] = sys->nodes[t].count;
  }
  hdr.n_links = count_links(sys);
  hdr.system_id = sys->system_id;
  hdr.n_hosts = sys->n_hosts;
  memcpy(hdr.host_hashes, sys->host_hashes, sizeof(hdr.host_hashes));
  memcpy(p, &hdr, sizeof(hdr));
  p += sizeof(hdr);
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      const struct mc_topo_node *n = sys->nodes[t].nodes[i];
      struct node_wire w;
      memset(&w, 0, sizeof(w));
      w.node = *n;
      w.node.gpu.parent = NULL;
      w.node.links = NULL;
      memset(w.node.paths, 0, sizeof(w.node.paths));
      w.parent = ref_of((t == MC_TOPO_GPU) ? n->gpu.parent : NULL);
      w.n_links = n->n_links;
      memcpy(p, &w, sizeof(w));
      p += sizeof(w);
    }
  }
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      const struct mc_topo_node *n = sys->nodes[t].nodes[i];
      for (int l = 0; l < n->n_links; l++) {
        struct link_wire w = {.type = (int32_t)n->links[l].type,
                              .bw = n->links[l].bw,
                              .rem = ref_of(n->links[l].rem)};
        memcpy(p, &w, sizeof(w));
        p += sizeof(w);
      }
    }
  }
  return ncclSuccess;
}

/* The node r names in sys, or NULL when r names none that exists. */
static struct mc_topo_node *node_at(const struct mc_topo_system *sys, struct node_ref r)
{
  if ((r.type < 0) || (r.type >= MC_TOPO_NODE_TYPES) || (r.index < 0) ||
      (r.index >= sys->nodes[r.type].count)) {
    return NULL;
  }
  return sys->nodes[r.type].nodes[r.index];
}

/* Every node of the header's counts, each as its record says, without links. */
static ncclResult_t import_nodes(struct mc_topo_system *sys, const struct system_header *hdr,
                                 const struct node_wire *w)
{
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    struct mc_topo_node_set *set = &sys->nodes[t];
    MC_CHECK(mc_calloc(&set->nodes, (size_t)((hdr->counts[t] > 0) ? hdr->counts[t] : 1)));
    set->cap = (hdr->counts[t] > 0) ? hdr->counts[t] : 1;
    for (int i = 0; i < hdr->counts[t]; i++, w++) {
      struct mc_topo_node *n = NULL;
      if (((int)w->node.type != t) || (w->node.index != i) || (w->n_links < 0) ||
          (w->n_links > hdr->n_links)) {
        return MC_FAIL(ncclInternalError,
                       "Topo: shared system node %d of type %d says type %d, index %d, %d links", i,
                       t, (int)w->node.type, w->node.index, w->n_links);
      }
      MC_CHECK(mc_calloc(&n, 1));
      set->nodes[set->count++] = n;
      *n = w->node;
      n->gpu.parent = NULL;
      n->links = NULL;
      n->n_links = 0;
      n->cap_links = 0;
      memset(n->paths, 0, sizeof(n->paths));
      if (w->n_links > 0) {
        MC_CHECK(mc_calloc(&n->links, (size_t)w->n_links));
        n->cap_links = w->n_links;
      }
    }
  }
  return ncclSuccess;
}

/* The GPUs' parents and every node's links, now that every node exists. */
static ncclResult_t import_refs(struct mc_topo_system *sys, const struct node_wire *nw,
                                const struct link_wire *lw, int n_links)
{
  int used = 0;

  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++, nw++) {
      struct mc_topo_node *n = sys->nodes[t].nodes[i];
      if (nw->parent.type >= 0) {
        n->gpu.parent = node_at(sys, nw->parent);
        if ((t != MC_TOPO_GPU) || (n->gpu.parent == NULL)) {
          return MC_FAIL(ncclInternalError,
                         "Topo: shared system node %d of type %d has parent %d/%d", i, t,
                         nw->parent.type, nw->parent.index);
        }
      }
      if (used + nw->n_links > n_links) {
        return MC_FAIL(ncclInternalError, "Topo: shared system has more than %d links", n_links);
      }
      for (int l = 0; l < nw->n_links; l++, lw++) {
        n->links[l].type = (enum mc_topo_link_type)lw->type;
        n->links[l].bw = lw->bw;
        n->links[l].rem = node_at(sys, lw->rem);
        if (n->links[l].rem == NULL) {
          return MC_FAIL(ncclInternalError, "Topo: shared system node %d of type %d links to %d/%d",
                         i, t, lw->rem.type, lw->rem.index);
        }
      }
      n->n_links = nw->n_links;
      used += nw->n_links;
    }
  }
  if (used != n_links) {
    return MC_FAIL(ncclInternalError, "Topo: shared system has %d links, its nodes %d", n_links,
                   used);
  }
  return ncclSuccess;
}

ncclResult_t mc_topo_system_import(const void *buf, size_t bytes, struct mc_topo_system **sys_out)
{
  struct system_header hdr;
  struct mc_topo_system *sys = NULL;
  const char *p = buf;
  size_t n_nodes = 0;
  ncclResult_t res;

  if (bytes < sizeof(hdr)) {
    return MC_FAIL(ncclInternalError, "Topo: shared system of %zu bytes is truncated", bytes);
  }
  memcpy(&hdr, p, sizeof(hdr));
  if ((hdr.magic != SYSTEM_MAGIC) || (hdr.node_bytes != sizeof(struct mc_topo_node)) ||
      (hdr.link_bytes != sizeof(struct link_wire)) || (hdr.n_types != MC_TOPO_NODE_TYPES) ||
      (hdr.n_links < 0) || (hdr.n_hosts < 0)) {
    return MC_FAIL(ncclInternalError,
                   "Topo: shared system made by another build (nodes of %u bytes, here %zu)",
                   hdr.node_bytes, sizeof(struct mc_topo_node));
  }
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    if ((hdr.counts[t] < 0) || (hdr.counts[t] > MC_TOPO_MAX_NODES)) {
      return MC_FAIL(ncclInternalError, "Topo: shared system has %d nodes of type %d",
                     hdr.counts[t], t);
    }
    n_nodes += (size_t)hdr.counts[t];
  }
  if (bytes != sizeof(hdr) + n_nodes * sizeof(struct node_wire) +
                   (size_t)hdr.n_links * sizeof(struct link_wire)) {
    return MC_FAIL(ncclInternalError, "Topo: shared system of %zu bytes for %zu nodes, %d links",
                   bytes, n_nodes, hdr.n_links);
  }
  MC_CHECK(mc_calloc(&sys, 1));
  sys->system_id = hdr.system_id;
  sys->n_hosts = hdr.n_hosts;
  memcpy(sys->host_hashes, hdr.host_hashes, sizeof(sys->host_hashes));
  /* Records may sit at any offset of the caller's buffer: copy each one out. */
  {
    struct node_wire *nw = NULL;
    struct link_wire *lw = NULL;
    MC_CHECK_GOTO(mc_calloc(&nw, (n_nodes > 0) ? n_nodes : 1), res, fail);
    res = mc_calloc(&lw, (hdr.n_links > 0) ? (size_t)hdr.n_links : 1);
    if (res == ncclSuccess) {
      memcpy(nw, p + sizeof(hdr), n_nodes * sizeof(*nw));
      memcpy(lw, p + sizeof(hdr) + n_nodes * sizeof(*nw), (size_t)hdr.n_links * sizeof(*lw));
      res = import_nodes(sys, &hdr, nw);
      if (res == ncclSuccess)
        res = import_refs(sys, nw, lw, hdr.n_links);
    }
    free(lw);
    free(nw);
    if (res != ncclSuccess)
      goto fail;
  }
  MC_CHECK_GOTO(mc_topo_rank_table_build(sys), res, fail);
  *sys_out = sys;
  return ncclSuccess;
fail:
  mc_topo_system_destroy(sys);
  return res;
}
