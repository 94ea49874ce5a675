/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Channel graphs: NCCL 2.30's search for rings and trees over a system
 * (src/graph/search.cc, ncclTopoCompute), their log lines and graph XML
 * (ncclTopoPrintGraph, ncclTopoDumpGraphs, NCCL_GRAPH_FILE), and the
 * connection of the per-node graphs into rings and double binary trees across
 * nodes (src/graph/connect.cc ncclTopoPreset / ncclTopoPostset,
 * src/graph/trees.cc, src/graph/rings.cc, and init.cc's alignment of the
 * graph information gathered from every rank).
 *
 * Pure logic: no sockets, no logging. The search mutates the system's link
 * and NET bandwidths while it runs and restores them before it returns; a
 * system is searched by one thread at a time. Search budgets are iteration
 * counts, so results are deterministic.
 */
#ifndef MC_TOPO_GRAPH_H
#define MC_TOPO_GRAPH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "nccl.h"
#include "topo/topo.h"

/* NCCL's MAXCHANNELS. */
#define MC_TOPO_MAX_CHANNELS 64
/* The ring search's channel limit (init.cc: MAXCHANNELS/2). */
#define MC_TOPO_MAX_RING_CHANNELS 32
/* Children of a tree node (NCCL_MAX_TREE_ARITY). */
#define MC_TOPO_TREE_ARITY 3

/* Graph patterns, NCCL's values (src/include/graph.h). */
enum mc_topo_pattern {
  MC_TOPO_PATTERN_BALANCED_TREE = 1, /* parent + child0 on intra[0]... split NIC traffic */
  MC_TOPO_PATTERN_SPLIT_TREE = 2,
  MC_TOPO_PATTERN_TREE = 3,
  MC_TOPO_PATTERN_RING = 4,
  MC_TOPO_PATTERN_NVLS = 5,
  MC_TOPO_PATTERN_COLLNET_DIRECT = 6
};

/* Graph ids as init.cc passes them. */
enum mc_topo_graph_id {
  MC_TOPO_GRAPH_RING = 0,
  MC_TOPO_GRAPH_TREE = 1,
  MC_TOPO_GRAPH_COLLNET_CHAIN = 2,
  MC_TOPO_GRAPH_NVLS = 3,
  MC_TOPO_GRAPH_COLLNET_DIRECT = 4
};

/* NCCL's struct ncclTopoGraph. intra and inter are owned (mc_topo_graph_init
 * allocates them for a system's GPU count). */
struct mc_topo_graph {
  /* inputs */
  int id;
  int pattern;
  int collnet;
  int min_channels;
  int max_channels;
  /* outputs */
  int n_channels;
  float bw_intra; /* GB/s per channel */
  float bw_inter;
  float latency_inter;
  int type_intra; /* enum mc_path_type */
  int type_inter;
  int same_channels;
  int cross_nic;
  int n_hops;
  int n_gpus;     /* GPUs per channel (the system's GPU count) */
  int *intra;     /* [MC_TOPO_MAX_CHANNELS * n_gpus]: ranks per channel */
  int64_t *inter; /* [MC_TOPO_MAX_CHANNELS * 2]: NET ids where a channel enters and leaves */
};

/* Knobs of the search (parameters NCCL reads itself). */
struct mc_topo_search_opts {
  int cross_nic;          /* NCCL_CROSS_NIC: 0, 1 or 2 (default) */
  bool scatter_nets;      /* NCCL_MNNVL_SCATTER_NETS_ENABLE, default 1 */
  const char *graph_file; /* NCCL_GRAPH_FILE, NULL when unset (not owned) */
};

/* NCCL's defaults: cross_nic 2, scatter on, no graph file. */
void mc_topo_search_opts_init(struct mc_topo_search_opts *opts);
/* The defaults, then NCCL_CROSS_NIC, NCCL_MNNVL_SCATTER_NETS_ENABLE
 * and NCCL_GRAPH_FILE. */
void mc_topo_search_opts_from_params(struct mc_topo_search_opts *opts);

/* Allocates intra/inter for n_gpus GPUs and sets the inputs; outputs zero. */
ncclResult_t mc_topo_graph_init(struct mc_topo_graph *graph, int id, int pattern, int min_channels,
                                int max_channels, int n_gpus);
/* Frees intra/inter (the struct itself is the caller's); accepts a zeroed graph. */
void mc_topo_graph_fini(struct mc_topo_graph *graph);
/* Deep copy between graphs of the same n_gpus. */
void mc_topo_graph_copy(struct mc_topo_graph *dst, const struct mc_topo_graph *src);

/*
 * ncclTopoCompute: searches the best channels of graph->pattern on sys (paths
 * computed, mc_topo_search_init done), or loads them from opts->graph_file.
 * *loaded_out (may be NULL) receives the number of channels the file gave
 * (-1 when no file was read). Errors: ncclInvalidUsage for an unreadable or
 * invalid graph file (naming it), ncclInternalError on broken invariants.
 */
ncclResult_t mc_topo_compute(struct mc_topo_system *sys, struct mc_topo_graph *graph,
                             const struct mc_topo_search_opts *opts, int *loaded_out);

/* ---------------------------------------------- one search for a host
 * (topo_share.c): NCCL has every rank search; ranks whose systems are the
 * same find the same graphs, so one of them may search for all. */

#define MC_TOPO_SEARCH_DIGEST_BYTES 32

/* SHA-256 of what mc_topo_compute_paths reads: the system's nodes and links
 * and the path options. Equal digests, equal paths (mc_topo_paths_export). */
void mc_topo_paths_digest(const struct mc_topo_system *sys,
                          const struct mc_topo_paths_opts *paths_opts,
                          uint8_t digest_out[MC_TOPO_SEARCH_DIGEST_BYTES]);

/* SHA-256 of the system's nodes and links alone (mc_topo_paths_digest's
 * system part, without options): equal digests, equal systems. */
void mc_topo_system_digest(const struct mc_topo_system *sys,
                           uint8_t digest_out[MC_TOPO_SEARCH_DIGEST_BYTES]);

/*
 * The system itself for another process of the host (its local ranks build
 * the same system from the same fused XML, so one may build it for all):
 * mc_topo_system_export writes every node and link position-independent (a
 * link and a GPU's parent name their node by type and index) into bytes
 * (mc_topo_system_export_bytes of them; ncclInternalError for another size);
 * mc_topo_system_import makes a system equal to the exported one
 * (mc_topo_system_digest equal), without paths, from bytes at any alignment.
 * Export a system as mc_topo_system_from_xml made it, before its paths: a
 * system is exported with the NET fields its paths set. Import checks the
 * build's node layout, every count and every reference (ncclInternalError
 * naming what does not fit; *sys_out untouched, nothing kept).
 */
size_t mc_topo_system_export_bytes(const struct mc_topo_system *sys);
ncclResult_t mc_topo_system_export(const struct mc_topo_system *sys, void *buf, size_t bytes);
ncclResult_t mc_topo_system_import(const void *buf, size_t bytes, struct mc_topo_system **sys_out);

/*
 * SHA-256 of everything mc_topo_compute reads for graphs[0..n_graphs) (their
 * inputs: id, pattern, collnet, channel limits, GPU count): the system's nodes
 * and links with their bandwidths, the options its paths were computed with
 * (paths_opts) and the search options. Two ranks with equal digests get equal
 * graphs from the same searches, and leave their systems equal.
 */
void mc_topo_search_digest(const struct mc_topo_system *sys,
                           const struct mc_topo_paths_opts *paths_opts,
                           const struct mc_topo_search_opts *search_opts,
                           const struct mc_topo_graph *const *graphs, int n_graphs,
                           uint8_t digest_out[MC_TOPO_SEARCH_DIGEST_BYTES]);

/*
 * After the searches: graphs[0..n_graphs) (their n_channels rows) and the link
 * and NET bandwidths the searches left on sys, as bytes (*buf_out, caller
 * frees; *bytes_out). ncclInternalError when a graph was made for another GPU
 * count.
 */
ncclResult_t mc_topo_search_export(const struct mc_topo_system *sys,
                                   const struct mc_topo_graph *const *graphs, int n_graphs,
                                   void **buf_out, size_t *bytes_out);

/*
 * Applies mc_topo_search_export's bytes from a system with the same digest:
 * fills graphs[0..n_graphs) (initialised for sys's GPU count) and sets sys's
 * link and NET bandwidths. ncclInternalError when the bytes do not fit sys
 * (GPU, graph or link counts); nothing is trusted beyond the sizes, so only
 * bytes from an equal digest give NCCL's result.
 */
ncclResult_t mc_topo_search_import(struct mc_topo_system *sys, struct mc_topo_graph *const *graphs,
                                   int n_graphs, const void *buf, size_t bytes);

/* ncclTopoPrintGraph's lines, without the log prefix, one per line. */
void mc_topo_graph_print(const struct mc_topo_system *sys, const struct mc_topo_graph *graph,
                         FILE *out);

/*
 * ncclTopoGetXmlFromGraphs + the XML writer: <graphs version="1"> with one
 * <graph> per graph in the order given (init.cc: ring, tree, collnet direct,
 * collnet chain, nvls). Path types without a graph-XML name (C2C, NET, DIS)
 * are ncclInternalError, as NCCL's kvConvertToStr.
 */
ncclResult_t mc_topo_graphs_dump(const struct mc_topo_system *sys,
                                 const struct mc_topo_graph *const *graphs, int n_graphs,
                                 FILE *out);

/*
 * ncclTopoGetNetDev with a graph: the NET a rank's channel enters (the rank
 * heads the channel's order in its node) or leaves by, as the search chose
 * it. *dev_out is that NET's device index (its XML dev), -1 when the graph
 * has no NET (one node) or no channel.
 */
void mc_topo_graph_net_dev(const struct mc_topo_system *sys, const struct mc_topo_graph *graph,
                           int rank, int channel, int *dev_out);

/* ncclTopoGetCompCap: smallest and largest sm of the system's GPUs. */
ncclResult_t mc_topo_comp_cap(const struct mc_topo_system *sys, int *cc_min_out, int *cc_max_out);

/* ---------------------------------------------------------- connection */

/* What one rank contributes to the AllGather3 step (NCCL's ncclTopoRanks plus
 * the graph information init.cc aligns). Plain data: it travels as bytes. */
struct mc_topo_graph_info {
  int32_t pattern;
  int32_t n_channels;
  int32_t same_channels;
  float bw_intra;
  float bw_inter;
  int32_t type_intra;
  int32_t type_inter;
  int32_t cross_nic;
};

/* Preset's channels: the searched ones, at most half of the channels (the
 * other half carries the double binary tree's second tree). */
#define MC_TOPO_RANKS_CHANNELS (MC_TOPO_MAX_CHANNELS / 2)

struct mc_topo_ranks {
  struct mc_topo_graph_info ring;
  struct mc_topo_graph_info tree;
  int32_t cross_nic_ring;
  int32_t min_comp_cap;
  /* Per Preset channel (the packed form holds only these up to its count). */
  int32_t ring_recv[MC_TOPO_RANKS_CHANNELS];
  int32_t ring_send[MC_TOPO_RANKS_CHANNELS];
  int32_t ring_prev[MC_TOPO_RANKS_CHANNELS];
  int32_t ring_next[MC_TOPO_RANKS_CHANNELS];
  int32_t tree_to_parent[MC_TOPO_RANKS_CHANNELS];
  int32_t tree_to_child0[MC_TOPO_RANKS_CHANNELS];
  int32_t tree_to_child1[MC_TOPO_RANKS_CHANNELS];
};

/* AllGather3's array on the wire: each rank's record with only its Preset
 * channels (the smaller of its ring's and tree's channel counts): 128
 * bytes a rank with 2 channels where the record takes 968. pack writes the
 * n_ranks records into buf (NULL: nothing) and returns the bytes they take;
 * unpack fills all[0..n_ranks) from exactly that many bytes, and fails
 * (ncclRemoteError, naming the rank) on bytes that do not hold n_ranks
 * records. The values are checked by mc_topo_postset. */
size_t mc_topo_ranks_pack(const struct mc_topo_ranks *all, int n_ranks, void *buf);
ncclResult_t mc_topo_ranks_unpack(const void *buf, size_t bytes, int n_ranks,
                                  struct mc_topo_ranks *all);

/* One channel as connect.cc leaves it (NCCL's ncclChannel ring/tree parts). */
struct mc_topo_channel {
  int ring_prev;
  int ring_next;
  int tree_up;
  int tree_down[MC_TOPO_TREE_ARITY];
  int tree_depth;
};

/* This rank's channels after Postset. */
struct mc_topo_channels {
  int rank;
  int n_ranks;
  int n_nodes;
  int node;
  int local_rank;
  int local_ranks;
  int n_channels;      /* final comm->nChannels */
  int coll_channels;   /* comm->collChannels */
  int nvls_channels;   /* always 0: NVLS needs NVSwitch multicast */
  int n_tree_channels; /* channels before Postset doubled them */
  struct mc_topo_channel channels[MC_TOPO_MAX_CHANNELS];
  int *rings;             /* [n_channels * n_ranks]: ring c starting at rank (ncclBuildRings) */
  int *node_first_rank;   /* [n_nodes] */
  int *node_tree_pattern; /* [n_nodes] */
  int *rank_to_node;      /* [n_ranks] */
  struct mc_topo_graph_info ring; /* aligned over every rank */
  struct mc_topo_graph_info tree;
  int max_tree_pattern;
};

/*
 * ncclTopoPreset for one rank: n_channels = min(ring, tree) channels, this
 * rank's place in the ring and tree of each, its ring/tree graph info.
 * channels_out receives the intra-node tree links (up, down[0]) for channels
 * [0, 2n) (the second half a copy of the first, as Preset duplicates them).
 */
ncclResult_t mc_topo_preset(const struct mc_topo_system *sys, int rank,
                            const struct mc_topo_graph *ring, const struct mc_topo_graph *tree,
                            int min_comp_cap, struct mc_topo_ranks *ranks_out,
                            struct mc_topo_channel channels_out[MC_TOPO_MAX_CHANNELS]);

/* Channel-count limits of the final step (NCCL_MIN/MAX_NCHANNELS and the
 * config's minCTAs/maxCTAs). */
#define MC_TOPO_MAX_NODES_ORDERED 1024 /* nodes a node order may hold */

struct mc_topo_connect_opts {
  int min_channels; /* ncclMinNchannels(): 0..64 */
  int max_channels; /* ncclMaxNchannels(): 1..64 */
  int min_ctas;
  int max_ctas;
  /* meshccl's extension for hosts cabled directly to each other: the order
   * in which each channel's ring crosses the nodes, so that every hop between
   * nodes is a cable. node_orders holds n_node_orders permutations of the node
   * indices (n_nodes each, not owned); channel c of the 2x doubled channels
   * uses order c % n_node_orders, and with more orders than doubled channels
   * there is one channel per order (at most MC_TOPO_MAX_CHANNELS, then
   * NCCL_MAX_NCHANNELS), channel c copying searched channel c % n otherwise.
   * 0 orders: NCCL's (node index order). */
  int n_node_orders;
  const int *node_orders;
};

/* Defaults (0, 64, 1, 64), then NCCL_MIN_NCHANNELS/NCCL_MIN_NRINGS and
 * NCCL_MAX_NCHANNELS/NCCL_MAX_NRINGS. */
void mc_topo_connect_opts_from_params(struct mc_topo_connect_opts *opts);

/*
 * init.cc after AllGather3 + ncclTopoPostset, for rank `rank`: nodes from each
 * rank's ring_recv[0], alignment of the graph information (min/max over all
 * ranks), moving Preset's duplicated channels when the channel count shrank,
 * rail alternation, connectRings, connectTrees (double binary tree), channel
 * doubling, NCCL_MIN/MAX_NCHANNELS, ncclBuildRings. all[r] is rank r's
 * contribution; channels holds this rank's Preset output and is updated.
 * out receives everything (free with mc_topo_channels_fini). `log` (may be
 * NULL) receives NCCL's "Tree %d : ..." lines, without prefix.
 * Errors: ncclInternalError when a ring does not close or misses a rank
 * (NCCL's ncclBuildRings checks), naming the ring and the rank;
 * ncclInvalidArgument when a node order is not a permutation of the nodes.
 */
ncclResult_t mc_topo_postset(int rank, int n_ranks, const struct mc_topo_ranks *all,
                             const struct mc_topo_channel preset[MC_TOPO_MAX_CHANNELS],
                             const struct mc_topo_connect_opts *opts, FILE *log,
                             struct mc_topo_channels *out);
void mc_topo_channels_fini(struct mc_topo_channels *ch);

/* NCCL's dumpLine: "Channel %02d/%02d :" and the ring, 128 characters at most
 * ("..." when cut). */
void mc_topo_ring_line(const struct mc_topo_channels *ch, int c, char *buf, size_t bytes);
/* init.cc's "Trees [c] d0/d1/d2->rank->up ..." line (cut at 1023 characters). */
void mc_topo_trees_line(const struct mc_topo_channels *ch, char *buf, size_t bytes);

/* ncclGetBtree / ncclGetDtree (src/graph/trees.cc): nodes 0..n-1, root 0. */
void mc_topo_btree(int n, int r, int *up, int *down0, int *down1, int *child_type);
void mc_topo_dtree(int n, int r, int *t0_up, int *t0_down0, int *t0_down1, int *t0_child_type,
                   int *t1_up, int *t1_down0, int *t1_down1, int *t1_child_type);

/* A communicator's topology and graphs (its part of struct ncclComm,
 * comm->topo): set by init's stages "topo" (init_topo.c) and "graphs"
 * (init_graphs.c), freed with the communicator. */
struct mc_comm_topo {
  struct mc_topo_system *system; /* this rank's final (trimmed) system, with paths */
  /* Local rank 0 with MESHCCL_PATHS_SHARE: the memfd of its paths, which the
   * other local ranks open through /proc, closed once every local rank has
   * passed init (or init failed); -1 when none. */
  int paths_fd;
  /* The searched graphs of this rank's node and its channels (Postset). */
  struct mc_topo_graph ring_graph;
  struct mc_topo_graph tree_graph;
  struct mc_topo_channels graph;
};

#endif /* MC_TOPO_GRAPH_H */
