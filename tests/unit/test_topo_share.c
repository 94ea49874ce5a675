/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What init does to scale with the number of local ranks gives NCCL's
 * results: the path storage (hops shared between paths), the trim that keeps
 * the paths when it removes nothing, the search one rank makes for its host
 * (digest, export, import), the fused XML sent packed.
 *
 * Path storage: every path of every final system of the golden topologies
 * (tests/data/topo/golden/) and of a host of 64 compute devices
 * (tests/data/topo/host-64ranks.xml, `meshccl-topo --ranks 64 --dump`) is
 * written out (from, to, type, bandwidth, count and the hops as the node
 * each link reaches; paths to DEV nodes without hops, which are no longer
 * kept) and hashed with SHA-256. tests/data/topo/paths-sha256.txt holds the
 * hashes the same dump gave with the earlier storage (a list of link
 * pointers per path, copied at every BFS update, as NCCL's
 * ncclTopoLinkList), at commit a2f8dcf.
 */
#include "mc_test.h"
#include "mc_topo_fixture.h"

#include "core/crypto.h"
#include "topo/topo.h"
#include "topo/topo_graph.h"
#include "topo/topo_xml.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct golden {
  const char *file; /* under tests/data/topo */
  int rank;
  bool import; /* a golden folder's dump: replay the net import */
};

static const struct golden goldens[] = {
    {"golden/aws-p4d.24xlarge/topo.xml", 0, true},
    {"golden/aws-p4de.24xlarge/topo.xml", 0, true},
    {"golden/azure-ndv4-a100/topo.xml", 0, true},
    {"golden/aws-g5.48xlarge/topo.xml", 0, true},
    {"golden/synthetic-2s-intel-4gpu-2sw-2nic/topo.xml", 0, true},
    {"golden/synthetic-2s-intel-4gpu-2sw-2nic/topo.xml", 2, true},
    {"golden/synthetic-2s-intel-4gpu-2sw-2nic/topo.xml", 3, true},
    {"golden/synthetic-1s-amd-2gpu-nvlink4-1nic/topo.xml", 0, true},
    {"golden/aws-p5.48xlarge-2023-partial/topo.xml", 0, true},
    {"golden/aws-p5.48xlarge-pr1226-handwritten/topo.xml", 0, true},
    {"golden/azure-ncv4-a100pcie/topo.xml", 0, true},
    {"golden/modal-gvisor-8xb200-hgx-vm/topo.xml", 0, true},
    {"host-64ranks.xml", 0, false},
};
#define N_GOLDENS ((int)(sizeof(goldens) / sizeof(goldens[0])))

static struct mc_xml *load(const struct golden *g)
{
  struct mc_xml *xml = NULL;

  MC_T_OK(mc_xml_create(MC_XML_MAX_NODES, &xml));
  char rel[256];
  snprintf(rel, sizeof(rel), "topo/%s", g->file);
  MC_T_OK(mc_xml_load_file(mc_t_data(rel), xml));
  if (g->import) {
    tt_import_nets(xml);
  }
  return xml;
}

/* Rank g->rank's final system of n_nodes such hosts. always_recompute: the
 * paths are computed again after the trim as NCCL does, else only when it
 * removed a GPU (as init does); *removed_out (may be NULL) says whether it did. */
static struct mc_topo_system *final_system(const struct golden *g, int n_nodes,
                                           bool always_recompute, bool *removed_out)
{
  struct mc_xml *xml = load(g);
  struct mc_topo_system *sys = NULL;
  struct mc_topo_paths_opts opts;
  bool removed = false;

  MC_T_OK(mc_topo_system_from_xml(xml, tt_first_host_hash(xml), &sys));
  mc_xml_destroy(xml);
  mc_topo_paths_opts_init(&opts);
  MC_T_OK(mc_topo_compute_paths(sys, &opts));
  MC_T_OK(mc_topo_trim_system(sys, g->rank, sys->nodes[MC_TOPO_GPU].count * n_nodes, &removed));
  if (always_recompute || removed) {
    MC_T_OK(mc_topo_compute_paths(sys, &opts));
  }
  mc_topo_search_init(sys);
  if (removed_out != NULL) {
    *removed_out = removed;
  }
  return sys;
}

static void node_name(FILE *f, const struct mc_topo_node *n)
{
  fprintf(f, "%s/%llx", mc_topo_node_type_str(n->type), (unsigned long long)n->id);
}

/* Every path of the system, one line each. */
static char *dump_paths(const struct mc_topo_system *sys)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);

  MC_T_TRUE(f != NULL);
  for (int ft = 0; ft < MC_TOPO_NODE_TYPES; ft++) {
    if (ft == MC_TOPO_PCI) {
      continue; /* PCI switches hold no paths (topo_paths.c, set_paths) */
    }
    for (int fi = 0; fi < sys->nodes[ft].count; fi++) {
      const struct mc_topo_node *from = sys->nodes[ft].nodes[fi];
      for (int tt = 0; tt < MC_TOPO_NODE_TYPES; tt++) {
        if (from->paths[tt] == NULL) {
          continue;
        }
        for (int ti = 0; ti < sys->nodes[tt].count; ti++) {
          const struct mc_topo_path *p = &from->paths[tt][ti];
          node_name(f, from);
          fprintf(f, " -> ");
          node_name(f, sys->nodes[tt].nodes[ti]);
          fprintf(f, " %s %a %d", mc_topo_path_type_str(p->type), (double)p->bw, p->count);
          if (tt != MC_TOPO_DEV) {
            for (int h = 0; h < p->count; h++) {
              const struct mc_topo_link *l = mc_topo_path_link(sys, p, h);
              MC_T_TRUE(l != NULL);
              fprintf(f, " %s:", mc_topo_link_type_str(l->type));
              node_name(f, l->rem);
            }
          }
          fprintf(f, "\n");
        }
      }
    }
  }
  MC_T_TRUE(fclose(f) == 0);
  return buf;
}

static void sha_hex(const char *text, char hex[2 * MC_SHA256_BYTES + 1])
{
  uint8_t d[MC_SHA256_BYTES];

  mc_sha256(text, strlen(text), d);
  for (int i = 0; i < MC_SHA256_BYTES; i++) {
    snprintf(hex + 2 * i, 3, "%02x", d[i]);
  }
}

/* The hops of every path form a chain of links from the path's node to its
 * base, and the dump of all paths is the one of the earlier storage. */
static void paths_match_list_storage(void)
{
  const char *expected = mc_t_read_file(mc_t_data("topo/paths-sha256.txt"));

  MC_T_TRUE((expected != NULL) && (expected[0] != '\0'));
  for (int g = 0; g < N_GOLDENS; g++) {
    struct mc_topo_system *sys = final_system(&goldens[g], 1, true, NULL);
    char *text = dump_paths(sys);
    char line[512];
    char hex[2 * MC_SHA256_BYTES + 1];

    for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
      for (int i = 0; i < sys->nodes[t].count; i++) {
        const struct mc_topo_node *from = sys->nodes[t].nodes[i];
        for (int bt = 0; bt < MC_TOPO_NODE_TYPES; bt++) {
          for (int b = 0; (from->paths[bt] != NULL) && (b < sys->nodes[bt].count); b++) {
            const struct mc_topo_path *p = &from->paths[bt][b];
            const struct mc_topo_node *at = from;
            if ((bt == MC_TOPO_DEV) || (p->count == 0)) {
              continue;
            }
            for (const struct mc_topo_hop *h = mc_topo_hop_at(sys, p->hops); h != NULL;
                 h = mc_topo_hop_at(sys, h->next)) {
              const struct mc_topo_link *l = mc_topo_hop_link(sys, h);
              MC_T_TRUE((l >= at->links) && (l < at->links + at->n_links));
              at = l->rem;
            }
            MC_T_TRUE(at == sys->nodes[bt].nodes[b]);
          }
        }
      }
    }
    sha_hex(text, hex);
    snprintf(line, sizeof(line), "%s rank %d %s\n", goldens[g].file, goldens[g].rank, hex);
    MC_T_CONTAINS(expected, line);
    free(text);
    mc_topo_system_destroy(sys);
  }
}

/* A trim that removes no GPU keeps the paths, and they are the ones NCCL's
 * second ncclTopoComputePaths makes; a trim that removes one frees them. */
static void trim_keeps_equal_paths(void)
{
  for (int g = 0; g < N_GOLDENS; g++) {
    bool removed = false;
    struct mc_topo_system *a = final_system(&goldens[g], 1, true, NULL);
    struct mc_topo_system *b = final_system(&goldens[g], 1, false, &removed);
    char *ta = dump_paths(a);
    char *tb = dump_paths(b);
    MC_T_EQ_STR(ta, tb);
    MC_T_EQ_INT(a->max_bw == b->max_bw, 1);
    MC_T_EQ_INT(a->total_bw == b->total_bw, 1);
    free(ta);
    free(tb);
    mc_topo_system_destroy(a);
    mc_topo_system_destroy(b);
  }
}

static void expect_same_graph(const struct mc_topo_graph *a, const struct mc_topo_graph *b)
{
  MC_T_EQ_INT(a->n_channels, b->n_channels);
  MC_T_EQ_INT(a->pattern, b->pattern);
  MC_T_EQ_INT(a->same_channels, b->same_channels);
  MC_T_EQ_INT(a->type_intra, b->type_intra);
  MC_T_EQ_INT(a->type_inter, b->type_inter);
  MC_T_EQ_INT(a->cross_nic, b->cross_nic);
  MC_T_EQ_INT(a->n_hops, b->n_hops);
  MC_T_EQ_INT(a->min_channels, b->min_channels);
  MC_T_EQ_INT(a->max_channels, b->max_channels);
  MC_T_TRUE(a->bw_intra == b->bw_intra);
  MC_T_TRUE(a->bw_inter == b->bw_inter);
  MC_T_TRUE(a->latency_inter == b->latency_inter);
  MC_T_TRUE(memcmp(a->intra, b->intra, sizeof(int) * (size_t)(a->n_channels * a->n_gpus)) == 0);
  MC_T_TRUE(memcmp(a->inter, b->inter, sizeof(int64_t) * 2 * (size_t)a->n_channels) == 0);
}

static void expect_same_bws(const struct mc_topo_system *a, const struct mc_topo_system *b)
{
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    MC_T_EQ_INT(a->nodes[t].count, b->nodes[t].count);
    for (int i = 0; i < a->nodes[t].count; i++) {
      const struct mc_topo_node *na = a->nodes[t].nodes[i];
      const struct mc_topo_node *nb = b->nodes[t].nodes[i];
      MC_T_TRUE(memcmp(&na->net.bw, &nb->net.bw, sizeof(float)) == 0);
      MC_T_EQ_INT(na->n_links, nb->n_links);
      for (int l = 0; l < na->n_links; l++) {
        MC_T_TRUE(memcmp(&na->links[l].bw, &nb->links[l].bw, sizeof(float)) == 0);
      }
    }
  }
}

/* Ring, then tree with the ring's channel count, as init searches them. */
static void search(struct mc_topo_system *sys, const struct mc_topo_search_opts *opts,
                   struct mc_topo_graph *ring, struct mc_topo_graph *tree)
{
  int n = sys->nodes[MC_TOPO_GPU].count;

  MC_T_OK(mc_topo_graph_init(ring, MC_TOPO_GRAPH_RING, MC_TOPO_PATTERN_RING, 1,
                             MC_TOPO_MAX_RING_CHANNELS, n));
  MC_T_OK(mc_topo_compute(sys, ring, opts, NULL));
  MC_T_OK(mc_topo_graph_init(tree, MC_TOPO_GRAPH_TREE, MC_TOPO_PATTERN_BALANCED_TREE,
                             ring->n_channels, ring->n_channels, n));
  MC_T_OK(mc_topo_compute(sys, tree, opts, NULL));
}

static void digest_of(const struct mc_topo_system *sys, const struct mc_topo_search_opts *opts,
                      uint8_t d[MC_TOPO_SEARCH_DIGEST_BYTES])
{
  struct mc_topo_paths_opts popts;
  struct mc_topo_graph ring;
  const struct mc_topo_graph *inputs[1] = {&ring};

  mc_topo_paths_opts_init(&popts);
  MC_T_OK(mc_topo_graph_init(&ring, MC_TOPO_GRAPH_RING, MC_TOPO_PATTERN_RING, 1,
                             MC_TOPO_MAX_RING_CHANNELS, sys->nodes[MC_TOPO_GPU].count));
  mc_topo_search_digest(sys, &popts, opts, inputs, 1, d);
  mc_topo_graph_fini(&ring);
}

/* A golden's system before any path. */
static struct mc_topo_system *bare_system(const struct golden *g)
{
  struct mc_xml *xml = load(g);
  struct mc_topo_system *sys = NULL;

  MC_T_OK(mc_topo_system_from_xml(xml, tt_first_host_hash(xml), &sys));
  mc_xml_destroy(xml);
  return sys;
}

/* sys's paths exported into a fresh read-only mapping (*bytes_out). */
static void *export_mapped(const struct mc_topo_system *sys, size_t *bytes_out)
{
  size_t bytes = mc_topo_paths_export_bytes(sys);
  void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

  MC_T_TRUE(map != MAP_FAILED);
  MC_T_OK(mc_topo_paths_export(sys, map, bytes));
  MC_T_EQ_INT(mprotect(map, bytes, PROT_READ), 0);
  *bytes_out = bytes;
  return map;
}

/* A system that takes another's exported paths (same digest) has every path,
 * hop by hop, and every NET's local GPU, of its own computation; trimmed and
 * searched, it ends as the computing one. A system with other links refuses
 * them and is left without paths. */
static void imported_paths_are_computed_ones(void)
{
  struct mc_topo_paths_opts opts;

  mc_topo_paths_opts_init(&opts);
  for (int g = 0; g < N_GOLDENS; g++) {
    struct mc_topo_system *a = bare_system(&goldens[g]);
    struct mc_topo_system *b = bare_system(&goldens[g]);
    /* The 64-rank host against the servers: other nodes, other links. */
    struct mc_topo_system *other = bare_system(&goldens[(g == N_GOLDENS - 1) ? 0 : N_GOLDENS - 1]);
    struct mc_topo_search_opts sopts;
    struct mc_topo_graph ring_a, tree_a, ring_b, tree_b;
    uint8_t da[MC_TOPO_SEARCH_DIGEST_BYTES];
    uint8_t db[MC_TOPO_SEARCH_DIGEST_BYTES];
    int n = a->nodes[MC_TOPO_GPU].count;
    bool removed_a = false;
    bool removed_b = false;
    size_t bytes = 0;
    void *map;
    char *ta;
    char *tb;

    mc_topo_paths_digest(a, &opts, da);
    mc_topo_paths_digest(b, &opts, db);
    MC_T_EQ_INT(memcmp(da, db, sizeof(da)), 0);
    MC_T_OK(mc_topo_compute_paths(a, &opts));
    map = export_mapped(a, &bytes);
    MC_T_EQ_INT(mc_topo_paths_import(other, map, bytes, 0), ncclInternalError);
    MC_T_CONTAINS(mc_t_last_error(), "shared paths do not fit this system");
    MC_T_TRUE(other->nodes[MC_TOPO_GPU].nodes[0]->paths[MC_TOPO_GPU] == NULL);
    MC_T_OK(mc_topo_paths_import(b, map, bytes, 0));
    ta = dump_paths(a);
    tb = dump_paths(b);
    MC_T_EQ_STR(ta, tb);
    for (int i = 0; i < a->nodes[MC_TOPO_NET].count; i++) {
      MC_T_EQ_INT(b->nodes[MC_TOPO_NET].nodes[i]->net.local_gpu,
                  a->nodes[MC_TOPO_NET].nodes[i]->net.local_gpu);
    }
    /* The summary comes with them: the domains and the largest bandwidths. */
    MC_T_TRUE((a->gpu_domain != NULL) && (b->gpu_domain != NULL));
    MC_T_TRUE(memcmp(a->gpu_domain, b->gpu_domain, sizeof(int32_t) * (size_t)n) == 0);
    MC_T_TRUE(memcmp(a->path_max_bw, b->path_max_bw, sizeof(a->path_max_bw)) == 0);
    MC_T_OK(mc_topo_trim_system(a, goldens[g].rank, n, &removed_a));
    MC_T_OK(mc_topo_trim_system(b, goldens[g].rank, n, &removed_b));
    MC_T_EQ_INT(removed_a, removed_b);
    if (removed_a) { /* as init: both compute them again */
      MC_T_OK(mc_topo_compute_paths(a, &opts));
      MC_T_OK(mc_topo_compute_paths(b, &opts));
    }
    mc_topo_search_init(a);
    mc_topo_search_init(b);
    MC_T_TRUE(a->max_bw == b->max_bw);
    MC_T_TRUE(a->total_bw == b->total_bw);
    mc_topo_search_opts_init(&sopts);
    search(a, &sopts, &ring_a, &tree_a);
    search(b, &sopts, &ring_b, &tree_b);
    expect_same_graph(&ring_a, &ring_b);
    expect_same_graph(&tree_a, &tree_b);
    expect_same_bws(a, b);
    mc_topo_graph_fini(&ring_a);
    mc_topo_graph_fini(&tree_a);
    mc_topo_graph_fini(&ring_b);
    mc_topo_graph_fini(&tree_b);
    free(ta);
    free(tb);
    mc_topo_system_destroy(a);
    mc_topo_system_destroy(b);
    mc_topo_system_destroy(other);
  }
}

/* The GPUs' domains in another's bytes are checked before a trim reads
 * them: one out of its range (a GPU joins only a lower one) refuses the
 * paths, and the system is left without them. */
static void imported_domains_checked(void)
{
  struct mc_topo_paths_opts opts;
  struct mc_topo_system *a = bare_system(&goldens[0]);
  struct mc_topo_system *b = bare_system(&goldens[0]);
  int n = a->nodes[MC_TOPO_GPU].count;
  size_t bytes = 0;
  char *map;
  int32_t bad = 2;

  MC_T_TRUE(n >= 2);
  mc_topo_paths_opts_init(&opts);
  MC_T_OK(mc_topo_compute_paths(a, &opts));
  map = export_mapped(a, &bytes);
  MC_T_EQ_INT(mprotect(map, bytes, PROT_READ | PROT_WRITE), 0);
  /* The domains end the bytes: GPU 1's may be 0 or 1, not 2. */
  memcpy(map + bytes - sizeof(int32_t) * (size_t)(n - 1), &bad, sizeof(bad));
  MC_T_EQ_INT(mc_topo_paths_import(b, map, bytes, 0), ncclInternalError);
  MC_T_CONTAINS(mc_t_last_error(), "a GPU's domain out of range");
  MC_T_TRUE(b->gpu_domain == NULL);
  MC_T_TRUE(b->nodes[MC_TOPO_GPU].nodes[0]->paths[MC_TOPO_GPU] == NULL);
  MC_T_EQ_INT(mc_topo_trim_system(b, goldens[0].rank, n, NULL), ncclInternalError);
  MC_T_CONTAINS(mc_t_last_error(), "trim before the paths");
  MC_T_EQ_INT(munmap(map, bytes), 0);
  mc_topo_system_destroy(a);
  mc_topo_system_destroy(b);
}

/* mc_topo_print's text of sys (caller frees). */
static char *print_text(const struct mc_topo_system *sys)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);

  MC_T_TRUE(f != NULL);
  MC_T_OK(mc_topo_print(sys, f));
  fclose(f);
  return buf;
}

/* A system imported from another's bytes (at any alignment) is the built
 * one: the same digest and print, the same paths hop by hop (and so the same
 * trim and searches: what they read has the same digest). Bytes cut short,
 * naming a node that does not exist, or made with another node layout are
 * refused, nothing kept. */
static void imported_system_is_built_one(void)
{
  struct mc_topo_paths_opts opts;

  mc_topo_paths_opts_init(&opts);
  for (int g = 0; g < N_GOLDENS; g++) {
    struct mc_topo_system *a = bare_system(&goldens[g]);
    struct mc_topo_system *b = NULL;
    struct mc_topo_system *bad = NULL;
    uint8_t da[MC_TOPO_SEARCH_DIGEST_BYTES];
    uint8_t db[MC_TOPO_SEARCH_DIGEST_BYTES];
    size_t bytes = mc_topo_system_export_bytes(a);
    char *buf = calloc(1, bytes + 1);
    char *pa;
    char *pb;
    int32_t v;

    MC_T_TRUE(buf != NULL);
    MC_T_EQ_INT(mc_topo_system_export(a, buf + 1, bytes - 1), ncclInternalError);
    MC_T_OK(mc_topo_system_export(a, buf + 1, bytes));
    MC_T_OK(mc_topo_system_import(buf + 1, bytes, &b));
    mc_topo_system_digest(a, da);
    mc_topo_system_digest(b, db);
    MC_T_EQ_INT(memcmp(da, db, sizeof(da)), 0);
    pa = print_text(a);
    pb = print_text(b);
    MC_T_EQ_STR(pa, pb);
    free(pa);
    free(pb);
    MC_T_OK(mc_topo_compute_paths(a, &opts));
    MC_T_OK(mc_topo_compute_paths(b, &opts));
    pa = dump_paths(a);
    pb = dump_paths(b);
    MC_T_EQ_STR(pa, pb);
    free(pa);
    free(pb);
    mc_topo_paths_digest(a, &opts, da);
    mc_topo_paths_digest(b, &opts, db);
    MC_T_EQ_INT(memcmp(da, db, sizeof(da)), 0);

    MC_T_EQ_INT(mc_topo_system_import(buf + 1, bytes - 1, &bad), ncclInternalError);
    MC_T_CONTAINS(mc_t_last_error(), "shared system of");
    /* the last link names node 9999 of its type */
    memcpy(&v, buf + 1 + bytes - sizeof(v), sizeof(v));
    v = 9999;
    memcpy(buf + 1 + bytes - sizeof(v), &v, sizeof(v));
    MC_T_EQ_INT(mc_topo_system_import(buf + 1, bytes, &bad), ncclInternalError);
    MC_T_CONTAINS(mc_t_last_error(), "links to");
    /* another build: the node size in the header differs */
    memcpy(&v, buf + 1 + 4, sizeof(v));
    v += 8;
    memcpy(buf + 1 + 4, &v, sizeof(v));
    MC_T_EQ_INT(mc_topo_system_import(buf + 1, bytes, &bad), ncclInternalError);
    MC_T_CONTAINS(mc_t_last_error(), "another build");
    MC_T_NULL(bad);
    free(buf);
    mc_topo_system_destroy(a);
    mc_topo_system_destroy(b);
  }
}

/* A rank that takes another rank's search (same digest) ends with the
 * graphs and the system its own search would have left: one host and two. */
static void shared_search_is_own_search(void)
{
  struct mc_topo_search_opts opts;

  mc_topo_search_opts_init(&opts);
  for (int g = 0; g < N_GOLDENS; g++) {
    for (int n_nodes = 1; n_nodes <= 2; n_nodes++) {
      struct mc_topo_system *leader = final_system(&goldens[g], n_nodes, false, NULL);
      struct mc_topo_system *own = final_system(&goldens[g], n_nodes, false, NULL);
      struct mc_topo_system *taker = final_system(&goldens[g], n_nodes, false, NULL);
      struct mc_topo_graph lring, ltree, oring, otree;
      struct mc_topo_graph tring = {0};
      struct mc_topo_graph ttree = {0};
      struct mc_topo_graph *tg[2] = {&tring, &ttree};
      const struct mc_topo_graph *lg[2] = {&lring, &ltree};
      uint8_t dl[MC_TOPO_SEARCH_DIGEST_BYTES];
      uint8_t dt[MC_TOPO_SEARCH_DIGEST_BYTES];
      int n = leader->nodes[MC_TOPO_GPU].count;
      void *buf = NULL;
      size_t bytes = 0;

      digest_of(leader, &opts, dl);
      digest_of(taker, &opts, dt);
      MC_T_TRUE(memcmp(dl, dt, sizeof(dl)) == 0);
      search(leader, &opts, &lring, &ltree);
      search(own, &opts, &oring, &otree);
      MC_T_OK(mc_topo_search_export(leader, lg, 2, &buf, &bytes));
      MC_T_OK(mc_topo_graph_init(&tring, MC_TOPO_GRAPH_RING, MC_TOPO_PATTERN_RING, 0, 0, n));
      MC_T_OK(mc_topo_graph_init(&ttree, MC_TOPO_GRAPH_TREE, MC_TOPO_PATTERN_TREE, 0, 0, n));
      MC_T_OK(mc_topo_search_import(taker, tg, 2, buf, bytes));
      expect_same_graph(&oring, &tring);
      expect_same_graph(&otree, &ttree);
      expect_same_bws(own, taker);
      /* Bytes that do not fit are refused, naming what. */
      MC_T_EQ_INT(mc_topo_search_import(taker, tg, 2, buf, bytes - 1), ncclInternalError);
      MC_T_CONTAINS(mc_t_last_error(), "shared");
      free(buf);
      mc_topo_graph_fini(&lring);
      mc_topo_graph_fini(&ltree);
      mc_topo_graph_fini(&oring);
      mc_topo_graph_fini(&otree);
      mc_topo_graph_fini(&tring);
      mc_topo_graph_fini(&ttree);
      mc_topo_system_destroy(leader);
      mc_topo_system_destroy(own);
      mc_topo_system_destroy(taker);
    }
  }
}

/* Another trim, another option, or a searched system: another digest. */
static void digest_tells_systems_apart(void)
{
  const struct golden *syn = &goldens[4];
  const struct golden syn2 = {syn->file, 2, true};
  struct mc_topo_search_opts opts;
  struct mc_topo_search_opts cross0;
  struct mc_topo_system *a = final_system(syn, 1, false, NULL);
  struct mc_topo_system *b = final_system(&syn2, 1, false, NULL);
  uint8_t da[MC_TOPO_SEARCH_DIGEST_BYTES];
  uint8_t db[MC_TOPO_SEARCH_DIGEST_BYTES];
  struct mc_topo_graph ring, tree;

  mc_topo_search_opts_init(&opts);
  cross0 = opts;
  cross0.cross_nic = 0;
  digest_of(a, &opts, da);
  digest_of(b, &opts, db);
  MC_T_TRUE(memcmp(da, db, sizeof(da)) != 0);
  digest_of(a, &cross0, db);
  MC_T_TRUE(memcmp(da, db, sizeof(da)) != 0);
  search(a, &opts, &ring, &tree);
  digest_of(a, &opts, db);
  /* This system's search leaves every bandwidth as it found it. */
  MC_T_TRUE(memcmp(da, db, sizeof(da)) == 0);
  a->nodes[MC_TOPO_GPU].nodes[0]->links[0].bw += 1.0f;
  digest_of(a, &opts, db);
  MC_T_TRUE(memcmp(da, db, sizeof(da)) != 0);
  mc_topo_graph_fini(&ring);
  mc_topo_graph_fini(&tree);
  mc_topo_system_destroy(a);
  mc_topo_system_destroy(b);
}

static char *xml_text(const struct mc_xml *xml)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);

  MC_T_TRUE(f != NULL);
  MC_T_OK(mc_xml_dump(xml, f));
  MC_T_TRUE(fclose(f) == 0);
  return buf;
}

/* A packed tree unpacks to the same elements, in the same order. */
static void xml_pack_round_trip(void)
{
  for (int g = 0; g < N_GOLDENS; g++) {
    struct mc_xml *a = load(&goldens[g]);
    struct mc_xml *b = NULL;
    struct mc_xml *small = NULL;
    void *buf = NULL;
    size_t bytes = 0;
    char *ta;
    char *tb;

    MC_T_OK(mc_xml_create(MC_XML_MAX_NODES, &b));
    MC_T_OK(mc_xml_pack(a, &buf, &bytes));
    MC_T_OK(mc_xml_unpack(buf, bytes, b));
    MC_T_EQ_INT(b->n_nodes, a->n_nodes);
    for (int i = 0; i < a->n_nodes; i++) {
      MC_T_EQ_STR(b->nodes[i].name, a->nodes[i].name);
      MC_T_EQ_INT(b->nodes[i].type, a->nodes[i].type);
      MC_T_EQ_INT(b->nodes[i].line, a->nodes[i].line);
      MC_T_EQ_INT(b->nodes[i].n_subs, a->nodes[i].n_subs);
    }
    ta = xml_text(a);
    tb = xml_text(b);
    MC_T_EQ_STR(tb, ta);
    /* Truncated bytes, or a tree too small for them: refused, tree left empty. */
    MC_T_EQ_INT(mc_xml_unpack(buf, bytes - 1, b), ncclInvalidUsage);
    MC_T_EQ_INT(b->n_nodes, 0);
    MC_T_OK(mc_xml_create(2, &small));
    MC_T_EQ_INT(mc_xml_unpack(buf, bytes, small), ncclInvalidUsage);
    free(ta);
    free(tb);
    free(buf);
    mc_xml_destroy(small);
    mc_xml_destroy(a);
    mc_xml_destroy(b);
  }
}

MC_T_MAIN(paths_match_list_storage, trim_keeps_equal_paths, imported_paths_are_computed_ones,
          imported_domains_checked, imported_system_is_built_one, shared_search_is_own_search,
          digest_tells_systems_apart, xml_pack_round_trip)
