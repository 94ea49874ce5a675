/* SPDX-License-Identifier: Apache-2.0 */
/* Stage "graphs" of a communicator's init (init_graphs.c). */
#ifndef MC_INIT_GRAPHS_H
#define MC_INIT_GRAPHS_H

#include "nccl.h"

struct ncclComm;

/* Stage "graphs" (init_graphs.c): ring and tree search on comm->topo.system,
 * NCCL_GRAPH_DUMP_FILE, Preset, the gather of every rank's Preset output,
 * Postset. Sets comm->topo.ring_graph, tree_graph, graph. */
ncclResult_t mc_comm_stage_graphs(struct ncclComm *comm);

#endif /* MC_INIT_GRAPHS_H */
