/* SPDX-License-Identifier: Apache-2.0 */
/* Stage "topo" of a communicator's init (init_topo.c). */
#ifndef MC_INIT_TOPO_H
#define MC_INIT_TOPO_H

#include "nccl.h"

struct ncclComm;

/* Stage "topo" (init_topo.c): NCCL_TOPO_FILE or detection (NICs: the
 * devices of comm->net.ops), intra-host
 * allgather and fusion of the XML, system, paths, trim; logs the transport
 * each local peer would use. Sets comm->topo.system. */
ncclResult_t mc_comm_stage_topo(struct ncclComm *comm);
/* Closes the memfd of the shared paths, if this rank made one (idempotent). */
void mc_comm_paths_close(struct ncclComm *comm);

#endif /* MC_INIT_TOPO_H */
