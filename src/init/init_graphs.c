/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Init stage "graphs" (NCCL 2.30's initTransportsRank from the ring and tree
 * ncclTopoCompute calls to ncclTopoPostset): every rank searches the ring and
 * the tree over its own final system, logs them (ncclTopoPrintGraph), writes
 * NCCL_GRAPH_DUMP_FILE when it is the dumping rank, runs Preset, gathers
 * every rank's Preset output over the bootstrap (NCCL's AllGather3), and runs
 * Postset: rings across nodes, double binary trees, channel counts. Logs
 * NCCL's "Tree", "Channel" (rank 0), "Ring" and "Trees" lines.
 *
 * Input: comm->topo.system. Output: comm->topo.ring_graph, tree_graph,
 * graph (this rank's channels).
 */
#include "init_graphs.h"

#include "comm.h"
#include "init_net.h"
#include "init_steps.h"
#include "init_gather.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "log.h"
#include "net/net.h"
#include "params.h"
#include "topo/topo.h"
#include "topo/topo_graph.h"

#define TAG_SHARE_HEAD (MC_BOOT_TAG_INTRANODE | 0x111)
#define TAG_SHARE_DATA (MC_BOOT_TAG_INTRANODE | 0x112)
#define TAG_ALLGATHER3 (MC_BOOT_TAG_INTRANODE | 0x113) /* to 0x115 */

/* Logs each line of a memory stream's text at INFO. */
static void log_lines(unsigned sub, const char *text)
{
  const char *p = text;

  while ((p != NULL) && (*p != '\0')) {
    const char *nl = strchr(p, '\n');
    int len = (nl != NULL) ? (int)(nl - p) : (int)strlen(p);
    MC_INFO(sub, "%.*s", len, p);
    p += len + ((nl != NULL) ? 1 : 0);
  }
}

static void log_graph(const struct mc_topo_system *sys, const struct mc_topo_graph *g)
{
  char *buf = NULL;
  size_t bytes = 0;
  FILE *f;

  if (!mc_log_enabled(MC_LOG_INFO, MC_SUB_GRAPH))
    return;
  f = open_memstream(&buf, &bytes);
  if (f == NULL)
    return;
  mc_topo_graph_print(sys, g, f);
  fclose(f);
  log_lines(MC_SUB_GRAPH, buf);
  free(buf);
}

static ncclResult_t dump_graphs(struct ncclComm *comm)
{
  const char *path = mc_param_str(MC_P_GRAPH_DUMP_FILE);
  const struct mc_topo_graph direct = {.id = MC_TOPO_GRAPH_COLLNET_DIRECT,
                                       .pattern = MC_TOPO_PATTERN_COLLNET_DIRECT};
  const struct mc_topo_graph chain = {.id = MC_TOPO_GRAPH_COLLNET_CHAIN,
                                      .pattern = MC_TOPO_PATTERN_TREE};
  const struct mc_topo_graph nvls = {.id = MC_TOPO_GRAPH_NVLS, .pattern = MC_TOPO_PATTERN_NVLS};
  const struct mc_topo_graph *gs[5] = {&comm->topo.ring_graph, &comm->topo.tree_graph, &direct,
                                       &chain, &nvls};
  FILE *f;
  ncclResult_t res;

  if ((path == NULL) || (comm->rank != mc_param_int(MC_P_GRAPH_DUMP_FILE_RANK)))
    return ncclSuccess;
  MC_INFO(MC_SUB_ENV, "NCCL_GRAPH_DUMP_FILE set by environment to %s", path);
  f = fopen(path, "w");
  if (f == NULL) {
    /* NCCL only logs it: a dump is a diagnostic, not a reason to fail init. */
    MC_INFO(MC_SUB_GRAPH, "Unable to open %s, not dumping graphs.", path);
    return ncclSuccess;
  }
  res = mc_topo_graphs_dump(comm->topo.system, gs, 5, f);
  if ((fclose(f) != 0) && (res == ncclSuccess))
    res = MC_FAIL(ncclSystemError, "NCCL_GRAPH_DUMP_FILE %s: write error", path);
  return res;
}

/* NCCL's ring and tree searches on this rank's system (init.cc). */
static ncclResult_t search_here(struct ncclComm *comm, const struct mc_topo_search_opts *opts,
                                struct mc_comm_steps *steps)
{
  int ngpus = comm->topo.system->nodes[MC_TOPO_GPU].count;

  MC_CHECK(mc_topo_compute(comm->topo.system, &comm->topo.ring_graph, opts, NULL));
  mc_comm_steps_mark(steps, "ring");
  MC_CHECK(mc_topo_graph_init(&comm->topo.tree_graph, MC_TOPO_GRAPH_TREE,
                              MC_TOPO_PATTERN_BALANCED_TREE, comm->topo.ring_graph.n_channels,
                              comm->topo.ring_graph.n_channels, ngpus));
  MC_CHECK(mc_topo_compute(comm->topo.system, &comm->topo.tree_graph, opts, NULL));
  mc_comm_steps_mark(steps, "tree");
  return ncclSuccess;
}

/* What the first local rank sends down the host's broadcast tree. */
struct shared_head {
  uint8_t digest[MC_TOPO_SEARCH_DIGEST_BYTES];
  uint64_t bytes; /* mc_topo_search_export's, sent next */
};

/*
 * The searches, once per host (MESHCCL_SEARCH_SHARE): local rank 0 searches
 * and broadcasts the digest of its system and the graphs to the host's
 * ranks; a rank whose own digest is the same takes the graphs (and the
 * bandwidths the searches leave behind), any other rank searches itself.
 * NCCL searches on every rank; the results are the same (topo_share.c).
 */
static ncclResult_t search_shared(struct ncclComm *comm, const struct mc_topo_search_opts *opts,
                                  struct mc_comm_steps *steps)
{
  const struct mc_comm_nodes *nd = &comm->nodes;
  const struct mc_topo_graph *inputs[1] = {&comm->topo.ring_graph};
  struct mc_topo_graph *graphs[2] = {&comm->topo.ring_graph, &comm->topo.tree_graph};
  struct mc_topo_paths_opts popts;
  struct shared_head head;
  uint8_t mine[MC_TOPO_SEARCH_DIGEST_BYTES];
  void *buf = NULL;
  char *data = NULL;
  size_t bytes = 0;
  int ngpus = comm->topo.system->nodes[MC_TOPO_GPU].count;
  ncclResult_t res = ncclSuccess;

  mc_topo_paths_opts_from_params(&popts);
  mc_topo_search_digest(comm->topo.system, &popts, opts, inputs, 1, mine);
  memset(&head, 0, sizeof(head));
  if (nd->local_rank == 0) {
    MC_CHECK(search_here(comm, opts, steps));
    memcpy(head.digest, mine, sizeof(mine));
    MC_CHECK(mc_topo_search_export(comm->topo.system, (const struct mc_topo_graph *const *)graphs,
                                   2, &buf, &bytes));
    head.bytes = bytes;
    res = mc_comm_bcast_tree(comm, nd->local_rank_to_rank, nd->local_ranks, 0, &head, sizeof(head),
                             TAG_SHARE_HEAD);
    if (res == ncclSuccess)
      res = mc_comm_bcast_tree(comm, nd->local_rank_to_rank, nd->local_ranks, 0, buf, bytes,
                               TAG_SHARE_DATA);
    free(buf);
    mc_comm_steps_mark(steps, "share");
    return res;
  }
  MC_CHECK(mc_comm_bcast_tree(comm, nd->local_rank_to_rank, nd->local_ranks, nd->local_rank, &head,
                              sizeof(head), TAG_SHARE_HEAD));
  if (head.bytes > MC_BOOT_MAX_MSG_BYTES)
    return MC_FAIL(ncclRemoteError, "Graphs: rank %d announced %llu bytes of graphs (at most %u)",
                   nd->local_rank_to_rank[0], (unsigned long long)head.bytes,
                   MC_BOOT_MAX_MSG_BYTES);
  MC_CHECK(mc_calloc(&data, (size_t)head.bytes + 1));
  MC_CHECK_GOTO(mc_comm_bcast_tree(comm, nd->local_rank_to_rank, nd->local_ranks, nd->local_rank,
                                   data, (size_t)head.bytes, TAG_SHARE_DATA),
                res, out);
  mc_comm_steps_mark(steps, "share");
  if (memcmp(head.digest, mine, sizeof(mine)) == 0) {
    MC_CHECK_GOTO(mc_topo_graph_init(&comm->topo.tree_graph, MC_TOPO_GRAPH_TREE,
                                     MC_TOPO_PATTERN_BALANCED_TREE, 0, 0, ngpus),
                  res, out);
    MC_CHECK_GOTO(mc_topo_search_import(comm->topo.system, graphs, 2, data, (size_t)head.bytes),
                  res, out);
    MC_INFO(MC_SUB_GRAPH, "Graphs: rank %d takes the ring and tree graphs of rank %d (same system)",
            comm->rank, nd->local_rank_to_rank[0]);
  } else {
    MC_INFO(MC_SUB_GRAPH,
            "Graphs: rank %d's system differs from rank %d's (trimmed otherwise, or other "
            "parameters): searching here",
            comm->rank, nd->local_rank_to_rank[0]);
    MC_CHECK_GOTO(search_here(comm, opts, steps), res, out);
  }
out:
  free(data);
  return res;
}

static ncclResult_t search(struct ncclComm *comm, struct mc_comm_steps *steps)
{
  struct mc_topo_search_opts opts;
  int ngpus = comm->topo.system->nodes[MC_TOPO_GPU].count;

  mc_topo_search_opts_from_params(&opts);
  MC_CHECK(mc_topo_graph_init(&comm->topo.ring_graph, MC_TOPO_GRAPH_RING, MC_TOPO_PATTERN_RING, 1,
                              MC_TOPO_MAX_RING_CHANNELS, ngpus));
  /* A graph file is read by every rank, as NCCL does. */
  if ((comm->nodes.local_ranks > 1) && (opts.graph_file == NULL) &&
      (comm->peers[comm->nodes.local_rank_to_rank[0]].search_share != 0)) {
    MC_CHECK(search_shared(comm, &opts, steps));
  } else {
    MC_CHECK(search_here(comm, &opts, steps));
  }
  log_graph(comm->topo.system, &comm->topo.ring_graph);
  log_graph(comm->topo.system, &comm->topo.tree_graph);
  return dump_graphs(comm);
}

static void log_channels(struct ncclComm *comm, const char *tree_log)
{
  const struct mc_topo_channels *ch = &comm->topo.graph;
  char line[128];
  char *trees = NULL;
  size_t trees_bytes = 5 + 1023; /* "Trees" and what init.cc's 1024-byte buffer holds */

  log_lines(MC_SUB_GRAPH, tree_log);
  if (comm->rank == 0) {
    for (int c = 0; c < ch->n_channels; c++) {
      mc_topo_ring_line(ch, c, line, sizeof(line));
      MC_INFO(MC_SUB_INIT, "%s", line);
    }
  }
  for (int c = 0; c < ch->n_channels; c++) {
    MC_INFO(MC_SUB_GRAPH, "Ring %02d : %d -> %d -> %d", c, ch->channels[c].ring_prev, comm->rank,
            ch->channels[c].ring_next);
  }
  trees = malloc(trees_bytes);
  if (trees != NULL) {
    mc_topo_trees_line(ch, trees, trees_bytes);
    MC_INFO(MC_SUB_INIT, "%s", trees);
    free(trees);
  }
  MC_INFO(MC_SUB_INIT,
          "%d coll channels, %d collnet channels, %d nvls channels, %d p2p channels, %d p2p "
          "channels per peer",
          ch->coll_channels, 0, ch->nvls_channels, ch->n_channels, 1);
}

static size_t ranks_pack(const void *all, int n, void *buf)
{
  return mc_topo_ranks_pack(all, n, buf);
}

static ncclResult_t ranks_unpack(const void *buf, size_t bytes, int n, void *all)
{
  return mc_topo_ranks_unpack(buf, bytes, n, all);
}

static const struct mc_comm_packing ranks_packing = {ranks_pack, ranks_unpack};

ncclResult_t mc_comm_stage_graphs(struct ncclComm *comm)
{
  struct mc_topo_ranks *all = NULL;
  struct mc_topo_channel preset[MC_TOPO_MAX_CHANNELS];
  struct mc_topo_connect_opts copts;
  int cc_min = 0;
  char *tree_log = NULL;
  size_t tree_log_bytes = 0;
  FILE *lf = NULL;
  int *node_orders = NULL;
  struct mc_comm_steps steps;
  ncclResult_t res;

  mc_comm_steps_start(&steps);
  MC_CHECK(search(comm, &steps));
  MC_CHECK(mc_topo_comp_cap(comm->topo.system, &cc_min, NULL));
  MC_CHECK(mc_calloc(&all, (size_t)comm->n_ranks));
  MC_CHECK_GOTO(mc_topo_preset(comm->topo.system, comm->rank, &comm->topo.ring_graph,
                               &comm->topo.tree_graph, cc_min, &all[comm->rank], preset),
                res, out);
  mc_comm_steps_mark(&steps, "preset");
  /* AllGather3: every rank's place in its node's rings and trees, sent down
   * with only each rank's channels (the records hold the most Preset makes). */
  MC_CHECK_GOTO(mc_comm_allgather_packed(comm, all, sizeof(*all), &ranks_packing, TAG_ALLGATHER3),
                res, out);
  mc_comm_steps_mark(&steps, "allgather");
  mc_topo_connect_opts_from_params(&copts);
  /* On a direct-connect mesh the rings cross the hosts along the cables. */
  if (comm->net.ops->node_orders != NULL) {
    MC_CHECK_GOTO(mc_comm_net_node_orders(comm, all, &copts.n_node_orders, &node_orders), res, out);
    copts.node_orders = node_orders;
  }
  lf = open_memstream(&tree_log, &tree_log_bytes);
  if (lf == NULL) {
    res = MC_FAIL(ncclSystemError, "out of memory");
    goto out;
  }
  res = mc_topo_postset(comm->rank, comm->n_ranks, all, preset, &copts, lf, &comm->topo.graph);
  fclose(lf);
  if (res != ncclSuccess)
    goto out;
  log_channels(comm, (tree_log != NULL) ? tree_log : "");
  mc_comm_steps_mark(&steps, "postset");
  mc_comm_steps_log(&steps, comm, "Graphs");
out:
  free(node_orders);
  free(tree_log);
  free(all);
  return res;
}
