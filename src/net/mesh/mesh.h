/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mesh net's contract with the rest of meshccl (its ops table is
 * mc_net_mesh_ops in net/net.h): what the communicator needs to make its
 * rings follow the cables of a direct-connect mesh. The pure graph, route
 * and ring logic is in mesh_graph.h.
 */
#ifndef MC_NET_MESH_MESH_H
#define MC_NET_MESH_MESH_H

#include <stdint.h>

#include "nccl.h"
#include "net/mesh/mesh_graph.h"

/*
 * This host as the mesh sees it: its mesh NICs that carry collective data
 * (MESHCCL_MESH_IFNAME, lanes, the management interface excluded, as the
 * Mesh net chooses them), with host_hash and name as given (name may be
 * NULL). Logs the NICs at INFO (NET). Blocks only on getifaddrs and sysfs
 * reads; thread-safe. *host_out is written on success only.
 * Errors: those of the NIC choice (ncclInvalidUsage naming the variables
 * when no interface is left, ncclSystemError when getifaddrs fails).
 */
ncclResult_t mc_net_mesh_local_host(uint64_t host_hash, const char *name,
                                    struct mc_mesh_host *host_out);

#endif /* MC_NET_MESH_MESH_H */
