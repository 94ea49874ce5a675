/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-topo --graphs: the ring and tree search of every local rank and the
 * connection of N identical nodes, printed as NCCL 2.30 logs them
 * (ncclTopoPrintGraph; connectTrees' "Tree" lines, ncclBuildRings' "Channel"
 * lines, init.cc's "Ring" and "Trees" lines and channel counts).
 *
 * Every node runs the same file with the same local ranks, so node k's
 * searches are node 0's with every rank number shifted by k x local ranks;
 * node 0's are computed, the others derived, then each rank runs Postset on
 * the gathered data as init does after its AllGather3.
 */
#include "topo_graphs.h"

#include "core/check.h"
#include "core/utils.h"

#include <stdlib.h>
#include <string.h>

/* Ring (id 0, min 1, max 32) then tree (id 1, min = max = ring channels), as init.cc. */
static ncclResult_t search_rank(struct mc_topo_system *sys, const struct mc_topo_search_opts *opts,
                                struct mc_topo_graph *ring, struct mc_topo_graph *tree)
{
  int ngpus = sys->nodes[MC_TOPO_GPU].count;

  MC_CHECK(mc_topo_graph_init(ring, MC_TOPO_GRAPH_RING, MC_TOPO_PATTERN_RING, 1,
                              MC_TOPO_MAX_RING_CHANNELS, ngpus));
  MC_CHECK(mc_topo_compute(sys, ring, opts, NULL));
  MC_CHECK(mc_topo_graph_init(tree, MC_TOPO_GRAPH_TREE, MC_TOPO_PATTERN_BALANCED_TREE,
                              ring->n_channels, ring->n_channels, ngpus));
  MC_CHECK(mc_topo_compute(sys, tree, opts, NULL));
  return ncclSuccess;
}

static int shift(int r, int by)
{
  return (r < 0) ? r : r + by;
}

/* Rank r's contribution on node k, from local rank l's on node 0. */
static void shift_ranks(const struct mc_topo_ranks *src, int by, struct mc_topo_ranks *dst)
{
  *dst = *src;
  for (int c = 0; c < MC_TOPO_RANKS_CHANNELS; c++) {
    dst->ring_recv[c] = shift(src->ring_recv[c], by);
    dst->ring_send[c] = shift(src->ring_send[c], by);
    dst->ring_prev[c] = shift(src->ring_prev[c], by);
    dst->ring_next[c] = shift(src->ring_next[c], by);
    dst->tree_to_parent[c] = shift(src->tree_to_parent[c], by);
    dst->tree_to_child0[c] = shift(src->tree_to_child0[c], by);
    dst->tree_to_child1[c] = shift(src->tree_to_child1[c], by);
  }
}

static void shift_channels(const struct mc_topo_channel *src, int by, struct mc_topo_channel *dst)
{
  for (int c = 0; c < MC_TOPO_MAX_CHANNELS; c++) {
    dst[c] = src[c];
    dst[c].ring_prev = shift(src[c].ring_prev, by);
    dst[c].ring_next = shift(src[c].ring_next, by);
    dst[c].tree_up = shift(src[c].tree_up, by);
    for (int i = 0; i < MC_TOPO_TREE_ARITY; i++) {
      dst[c].tree_down[i] = shift(src[c].tree_down[i], by);
    }
  }
}

/* The printed graphs of one local rank (to tell which ranks differ from rank 0). */
static char *graphs_text(const struct mc_topo_system *sys, const struct mc_topo_graph *g1,
                         const struct mc_topo_graph *g2, const char *sep)
{
  char *buf = NULL;
  size_t bytes = 0;
  FILE *f = open_memstream(&buf, &bytes);

  if (f == NULL) {
    return NULL;
  }
  mc_topo_graph_print(sys, g1, f);
  fputs(sep, f);
  mc_topo_graph_print(sys, g2, f);
  fclose(f);
  return buf;
}

/* Writes text with "NCCL INFO " before every line, and the separator lines as is. */
static void print_info_lines(const char *text, const char *sep, FILE *out)
{
  const char *p = text;

  while (*p != '\0') {
    const char *nl = strchr(p, '\n');
    size_t len = (nl != NULL) ? (size_t)(nl - p) : strlen(p);
    if ((strlen(sep) > 0) && (strncmp(p, sep, strlen(sep) - 1) == 0) && (len == strlen(sep) - 1)) {
      fprintf(out, "%.*s\n", (int)len, p);
    } else {
      fprintf(out, "NCCL INFO %.*s\n", (int)len, p);
    }
    p += len + ((nl != NULL) ? 1 : 0);
  }
}

static const char *type_str(int t)
{
  return mc_topo_path_type_str(t);
}

static void print_aligned(const char *name, const struct mc_topo_graph_info *g, FILE *out)
{
  fprintf(out,
          "aligned %s pattern %d nChannels %d sameChannels %d bwIntra %g bwInter %g typeIntra %s "
          "typeInter %s crossNic %d\n",
          name, g->pattern, g->n_channels, g->same_channels, (double)g->bw_intra,
          (double)g->bw_inter, type_str(g->type_intra), type_str(g->type_inter), g->cross_nic);
}

/* One rank's block of section [e]. */
static ncclResult_t print_rank(const struct mc_topo_channels *ch, const char *tree_log, FILE *out)
{
  char line[128];
  char *trees = NULL;
  size_t trees_bytes = 64 + (size_t)ch->n_channels * 64;
  bool cut = false;

  fprintf(out, "=== rank %d ===\n", ch->rank);
  fprintf(out, "comm rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL 0\n", ch->rank,
          ch->n_ranks, ch->n_nodes, ch->local_ranks, ch->local_rank);
  fputs(tree_log, out);
  for (int c = 0; c < ch->n_channels; c++) {
    mc_topo_ring_line(ch, c, line, sizeof(line));
    fprintf(out, "%s\n", line);
    cut = cut || (strcmp(line + strlen(line) - 3, "...") == 0);
  }
  if (cut) {
    fprintf(out, "(Channel lines above are truncated at 128 chars as in rings.cc; full:)\n");
    for (int c = 0; c < ch->n_channels; c++) {
      fprintf(out, "ChannelFull %02d/%02d :", c, ch->n_channels);
      for (int i = 0; i < ch->n_ranks; i++) {
        fprintf(out, " %d", ch->rings[c * ch->n_ranks + i]);
      }
      fprintf(out, "\n");
    }
  }
  for (int c = 0; c < ch->n_channels; c++) {
    fprintf(out, "Ring %02d : %d -> %d -> %d\n", c, ch->channels[c].ring_prev, ch->rank,
            ch->channels[c].ring_next);
  }
  MC_CHECK(mc_calloc(&trees, trees_bytes));
  mc_topo_trees_line(ch, trees, trees_bytes);
  /* init.cc builds it in a 1024-byte buffer: "Trees" + at most 1022 characters. */
  if (strlen(trees) > 5 + 1022) {
    fprintf(out, "%.*s\n", 5 + 1022, trees);
    fprintf(out, "(Trees line above is truncated at 1023 chars as in init.cc; full:)\n");
    fprintf(out, "TreesFull%s\n", trees + 5);
  } else {
    fprintf(out, "%s\n", trees);
  }
  free(trees);
  fprintf(out, "nChannels %d collChannels %d nvlsChannels %d\n", ch->n_channels, ch->coll_channels,
          ch->nvls_channels);
  return ncclSuccess;
}

/* --json: one graph. */
static void json_graph(const struct mc_topo_system *sys, const struct mc_topo_graph *g, FILE *out)
{
  int ngpus = sys->nodes[MC_TOPO_GPU].count;

  fprintf(out,
          "{\"id\": %d, \"pattern\": %d, \"crossNic\": %d, \"nChannels\": %d, \"bwIntra\": %g, "
          "\"bwInter\": %g, \"latencyInter\": %g, \"typeIntra\": \"%s\", \"typeInter\": \"%s\", "
          "\"sameChannels\": %d, \"channels\": [",
          g->id, g->pattern, g->cross_nic, g->n_channels, (double)g->bw_intra, (double)g->bw_inter,
          (double)g->latency_inter, type_str(g->type_intra), type_str(g->type_inter),
          g->same_channels);
  for (int c = 0; c < g->n_channels; c++) {
    fprintf(out, "%s{", (c > 0) ? ", " : "");
    if (sys->inter) {
      fprintf(out, "\"netIn\": %lld, \"netOut\": %lld, ", (long long)g->inter[2 * c],
              (long long)g->inter[2 * c + 1]);
    }
    fprintf(out, "\"ranks\": [");
    for (int i = 0; i < ngpus; i++) {
      fprintf(out, "%s%d", (i > 0) ? ", " : "", g->intra[c * ngpus + i]);
    }
    fprintf(out, "]}");
  }
  fprintf(out, "]}");
}

/* --json: one rank's channels. */
static void json_rank(const struct mc_topo_channels *ch, FILE *out)
{
  fprintf(out,
          "    {\"rank\": %d, \"node\": %d, \"localRank\": %d, \"nChannels\": %d, "
          "\"collChannels\": %d, \"nvlsChannels\": %d,\n     \"rings\": [",
          ch->rank, ch->node, ch->local_rank, ch->n_channels, ch->coll_channels, ch->nvls_channels);
  for (int c = 0; c < ch->n_channels; c++) {
    fprintf(out, "%s{\"prev\": %d, \"next\": %d, \"order\": [", (c > 0) ? ", " : "",
            ch->channels[c].ring_prev, ch->channels[c].ring_next);
    for (int i = 0; i < ch->n_ranks; i++) {
      fprintf(out, "%s%d", (i > 0) ? ", " : "", ch->rings[c * ch->n_ranks + i]);
    }
    fprintf(out, "]}");
  }
  fprintf(out, "],\n     \"trees\": [");
  for (int c = 0; c < ch->n_channels; c++) {
    const struct mc_topo_channel *t = &ch->channels[c];
    fprintf(out, "%s{\"up\": %d, \"down\": [%d, %d, %d]}", (c > 0) ? ", " : "", t->tree_up,
            t->tree_down[0], t->tree_down[1], t->tree_down[2]);
  }
  fprintf(out, "]}");
}

ncclResult_t topo_graphs_print(struct mc_topo_system **systems, int n_local, int n_nodes, bool json,
                               FILE *out)
{
  struct mc_topo_search_opts sopts;
  struct mc_topo_connect_opts copts;
  struct mc_topo_graph *rings = NULL;
  struct mc_topo_graph *trees = NULL;
  struct mc_topo_ranks *local_ranks = NULL;
  struct mc_topo_channel(*local_ch)[MC_TOPO_MAX_CHANNELS] = NULL;
  struct mc_topo_ranks *all = NULL;
  int n_ranks = n_local * n_nodes;
  char **texts = NULL;
  ncclResult_t res = ncclSuccess;
  const char *dump = mc_param_str(MC_P_GRAPH_DUMP_FILE);

  mc_topo_search_opts_from_params(&sopts);
  mc_topo_connect_opts_from_params(&copts);
  MC_CHECK_GOTO(mc_calloc(&rings, (size_t)n_local), res, out);
  MC_CHECK_GOTO(mc_calloc(&trees, (size_t)n_local), res, out);
  MC_CHECK_GOTO(mc_calloc(&local_ranks, (size_t)n_local), res, out);
  MC_CHECK_GOTO(mc_calloc(&local_ch, (size_t)n_local), res, out);
  MC_CHECK_GOTO(mc_calloc(&texts, (size_t)n_local), res, out);
  MC_CHECK_GOTO(mc_calloc(&all, (size_t)n_ranks), res, out);

  for (int l = 0; l < n_local; l++) {
    int cc_min = 0;
    MC_CHECK_GOTO(search_rank(systems[l], &sopts, &rings[l], &trees[l]), res, out);
    texts[l] = graphs_text(systems[l], &rings[l], &trees[l], "-- tree:\n");
    if (texts[l] == NULL) {
      res = MC_FAIL(ncclSystemError, "meshccl-topo: out of memory");
      goto out;
    }
    MC_CHECK_GOTO(mc_topo_comp_cap(systems[l], &cc_min, NULL), res, out);
    MC_CHECK_GOTO(
        mc_topo_preset(systems[l], l, &rings[l], &trees[l], cc_min, &local_ranks[l], local_ch[l]),
        res, out);
  }
  /* The harness's comm->minCompCap is the smallest sm of all GPUs. */
  {
    int cc = local_ranks[0].min_comp_cap;
    for (int l = 1; l < n_local; l++) {
      cc = (local_ranks[l].min_comp_cap < cc) ? local_ranks[l].min_comp_cap : cc;
    }
    for (int l = 0; l < n_local; l++) {
      local_ranks[l].min_comp_cap = cc;
    }
  }
  if (dump != NULL) {
    const struct mc_topo_graph empty_direct = {.id = MC_TOPO_GRAPH_COLLNET_DIRECT,
                                               .pattern = MC_TOPO_PATTERN_COLLNET_DIRECT};
    const struct mc_topo_graph empty_chain = {.id = MC_TOPO_GRAPH_COLLNET_CHAIN,
                                              .pattern = MC_TOPO_PATTERN_TREE};
    const struct mc_topo_graph empty_nvls = {.id = MC_TOPO_GRAPH_NVLS,
                                             .pattern = MC_TOPO_PATTERN_NVLS};
    const struct mc_topo_graph *gs[5] = {&rings[0], &trees[0], &empty_direct, &empty_chain,
                                         &empty_nvls};
    FILE *f = fopen(dump, "w");
    if (f == NULL) {
      res = MC_FAIL(ncclSystemError, "NCCL_GRAPH_DUMP_FILE %s: cannot open", dump);
      goto out;
    }
    res = mc_topo_graphs_dump(systems[0], gs, 5, f);
    if ((fclose(f) != 0) && (res == ncclSuccess)) {
      res = MC_FAIL(ncclSystemError, "NCCL_GRAPH_DUMP_FILE %s: write error", dump);
    }
    if (res != ncclSuccess) {
      goto out;
    }
  }

  if (json) {
    fprintf(out,
            "{\n  \"nodes\": %d, \"local_ranks\": %d, \"ranks\": %d,\n  \"graphs\": {\"ring\": ",
            n_nodes, n_local, n_ranks);
    json_graph(systems[0], &rings[0], out);
    fprintf(out, ",\n    \"tree\": ");
    json_graph(systems[0], &trees[0], out);
    fprintf(out, "},\n  \"differs\": {");
    for (int l = 1, first = 1; l < n_local; l++) {
      if (strcmp(texts[l], texts[0]) != 0) {
        fprintf(out, "%s\n    \"%d\": {\"ring\": ", first ? "" : ",", l);
        json_graph(systems[l], &rings[l], out);
        fprintf(out, ", \"tree\": ");
        json_graph(systems[l], &trees[l], out);
        fprintf(out, "}");
        first = 0;
      }
    }
    fprintf(out, "},\n");
  } else {
    fprintf(out, "-- ring:\n");
    print_info_lines(texts[0], "-- tree:\n", out);
  }
  for (int l = 1; (l < n_local) && !json; l++) {
    if (strcmp(texts[l], texts[0]) != 0) {
      char *plain = graphs_text(systems[l], &rings[l], &trees[l], "");
      fprintf(out, "-- rank %d (differs):\n", l);
      if (plain != NULL) {
        print_info_lines(plain, "", out);
      }
      free(plain);
    }
  }

  if (!json) {
    fprintf(out, "\n");
  }
  for (int k = 0; k < n_nodes; k++) {
    for (int l = 0; l < n_local; l++) {
      shift_ranks(&local_ranks[l], k * n_local, &all[k * n_local + l]);
    }
  }
  for (int r = 0; r < n_ranks; r++) {
    struct mc_topo_channel preset[MC_TOPO_MAX_CHANNELS];
    struct mc_topo_channels ch;
    char *log = NULL;
    size_t log_bytes = 0;
    FILE *lf = open_memstream(&log, &log_bytes);

    if (lf == NULL) {
      res = MC_FAIL(ncclSystemError, "meshccl-topo: out of memory");
      goto out;
    }
    shift_channels(local_ch[r % n_local], (r / n_local) * n_local, preset);
    res = mc_topo_postset(r, n_ranks, all, preset, &copts, lf, &ch);
    fclose(lf);
    if (res != ncclSuccess) {
      free(log);
      goto out;
    }
    if (json) {
      if (r == 0) {
        fprintf(out, "  \"nodesFirstRank\": [");
        for (int k = 0; k < ch.n_nodes; k++) {
          fprintf(out, "%s%d", (k > 0) ? ", " : "", ch.node_first_rank[k]);
        }
        fprintf(out, "], \"treePatterns\": [");
        for (int k = 0; k < ch.n_nodes; k++) {
          fprintf(out, "%s%d", (k > 0) ? ", " : "", ch.node_tree_pattern[k]);
        }
        fprintf(out, "],\n  \"per_rank\": [\n");
      }
      json_rank(&ch, out);
      fprintf(out, "%s\n", (r == n_ranks - 1) ? "\n  ]\n}" : ",");
      free(log);
      mc_topo_channels_fini(&ch);
      continue;
    }
    if (r == 0) {
      fprintf(out, "nodesFirstRank");
      for (int k = 0; k < ch.n_nodes; k++) {
        fprintf(out, " %d", ch.node_first_rank[k]);
      }
      fprintf(out, " treePatterns");
      for (int k = 0; k < ch.n_nodes; k++) {
        fprintf(out, " %d", ch.node_tree_pattern[k]);
      }
      fprintf(out, "\n");
      print_aligned("ring", &ch.ring, out);
      print_aligned("tree", &ch.tree, out);
    }
    fprintf(out, "\n");
    res = print_rank(&ch, (log != NULL) ? log : "", out);
    free(log);
    mc_topo_channels_fini(&ch);
    if (res != ncclSuccess) {
      goto out;
    }
  }
out:
  for (int l = 0; (rings != NULL) && (trees != NULL) && (l < n_local); l++) {
    mc_topo_graph_fini(&rings[l]);
    mc_topo_graph_fini(&trees[l]);
    if (texts != NULL) {
      free(texts[l]);
    }
  }
  free(rings);
  free(trees);
  free(local_ranks);
  free(local_ch);
  free(texts);
  free(all);
  return res;
}
