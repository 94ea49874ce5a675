/* SPDX-License-Identifier: Apache-2.0 */
/* meshccl-topo --graphs (topo_graphs.c). */
#ifndef MC_TOOLS_TOPO_GRAPHS_H
#define MC_TOOLS_TOPO_GRAPHS_H

#include <stdbool.h>
#include <stdio.h>

#include "core/params.h"
#include "topo/topo.h"
#include "topo/topo_graph.h"

/*
 * Searches the ring and tree of each local rank on its final system
 * (systems[0..n_local-1]; their link bandwidths are used and restored),
 * connects n_nodes identical nodes and prints NCCL's graph and connection
 * lines: "-- ring:"/"-- tree:" blocks (with "NCCL INFO " prefixes), a
 * "-- rank R (differs):" block per local rank whose graphs differ from rank
 * 0's, the node heads and aligned graph information, then one block per rank.
 * NCCL_GRAPH_DUMP_FILE, when set, receives local rank 0's graph XML.
 * json: the same facts as one JSON object (docs/TOOLS.md).
 */
ncclResult_t topo_graphs_print(struct mc_topo_system **systems, int n_local, int n_nodes, bool json,
                               FILE *out);

#endif /* MC_TOOLS_TOPO_GRAPHS_H */
