/* SPDX-License-Identifier: Apache-2.0 */
/* Private to src/topo/: helpers shared by topo_system.c, topo_paths.c and topo_detect.c. */
#ifndef MC_TOPO_INT_H
#define MC_TOPO_INT_H

#include "topo/topo.h"

#include <stdbool.h>
#include <stddef.h>

/* Node of that type at index i (no bounds check). */
static inline struct mc_topo_node *mc_topo_node_at(const struct mc_topo_system *sys, int type,
                                                   int i)
{
  return sys->nodes[type].nodes[i];
}

/* Removes the node (its links and the links pointing at it); paths must be
 * freed first. Keeps the other nodes' index and the rank table. */
ncclResult_t mc_topo_node_remove(struct mc_topo_system *sys, int type, int index);

/* (Re)builds sys's rank -> GPU index table from the GPUs' ranks (after the
 * GPUs changed); mc_topo_rank_to_index reads it. */
ncclResult_t mc_topo_rank_table_build(struct mc_topo_system *sys);

/*
 * sysfs/procfs through one root (topo_sysfs.c; hwloc's HWLOC_FSROOT). `rel`
 * is an absolute path of the running host ("/sys/...", "/proc/...") that is
 * read under root ("/" reads the host itself).
 */
/* root + rel into path (truncation is ncclInternalError). */
ncclResult_t mc_sysfs_path(const char *root, const char *rel, char *path, size_t path_bytes);
/* open(root + rel, flags); -1 with errno as open(2). */
int mc_sysfs_open(const char *root, const char *rel, int flags);
/* Reads a small text file, trailing whitespace stripped. A file that does not
 * exist (ENOENT, ENOTDIR) is success with *found_out false and buf "";
 * any other failure is ncclSystemError naming the file. */
ncclResult_t mc_sysfs_read(const char *root, const char *rel, char *buf, size_t buf_bytes,
                           bool *found_out);
/* Same, for optional files: any failure is "not found" (returns false). */
bool mc_sysfs_read_opt(const char *root, const char *rel, char *buf, size_t buf_bytes);
/* realpath of root + rel, given back relative to root ("/sys/devices/...");
 * false when it does not resolve (or resolves outside root). */
bool mc_sysfs_realpath(const char *root, const char *rel, char *out, size_t out_bytes);

/* NCCL's busIdToInt64: hex digits of "dddd:bb:dd.f" ('.' and ':' skipped,
 * stops at any other character). */
int64_t mc_topo_bus_id_to_int64(const char *str);

/* NCCL_GRAPH_FILE: graph->id's graph from opts->graph_file (topo_graph_xml.c);
 * *n_loaded_out its channel elements. */
struct mc_topo_graph;
struct mc_topo_search_opts;
ncclResult_t mc_topo_graph_load(struct mc_topo_system *sys, struct mc_topo_graph *graph,
                                const struct mc_topo_search_opts *opts, int *n_loaded_out);

/* keep="1" on every <gpu> that carries a rank (what NCCL's FillGpu marks),
 * so that mc_topo_xml_trim keeps the local ranks' devices. Walks the tree
 * from node. */
struct mc_xml_node;
ncclResult_t mc_topo_xml_keep_ranked_gpus(struct mc_xml_node *node);

#endif /* MC_TOPO_INT_H */
