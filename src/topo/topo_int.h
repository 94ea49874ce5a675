/* SPDX-License-Identifier: Apache-2.0 */
/* Private to src/topo/: helpers shared by topo_system.c and topo_paths.c. */
#ifndef MC_TOPO_INT_H
#define MC_TOPO_INT_H

#include "topo/topo.h"

/* Node of that type at index i (no bounds check). */
static inline struct mc_topo_node *mc_topo_node_at(const struct mc_topo_system *sys, int type,
                                                   int i)
{
  return sys->nodes[type].nodes[i];
}

/* Removes the node (its links and the links pointing at it); paths must be
 * freed first. */
ncclResult_t mc_topo_node_remove(struct mc_topo_system *sys, int type, int index);

#endif /* MC_TOPO_INT_H */
