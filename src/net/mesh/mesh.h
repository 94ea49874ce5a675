/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mesh net's contract with the rest of meshccl (its ops table is
 * mc_net_mesh_ops in net/net.h): what the communicator needs to make its
 * rings follow the cables of a direct-connect mesh. The pure graph, route
 * and ring logic is in mesh_graph.h.
 */
#ifndef MC_NET_MESH_MESH_H
#define MC_NET_MESH_MESH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nccl.h"
#include "net/mesh/mesh_graph.h"

/*
 * This host as the mesh sees it: its mesh NICs that carry collective data
 * (MESHCCL_MESH_IFNAME, lanes, the management interface excluded, as the
 * Mesh net chooses them), with host_hash and name as given (name may be
 * NULL). mgmt_ifname (may be NULL): the bootstrap's interface, excluded as
 * the management lane when NCCL_SOCKET_IFNAME is unset. Logs nothing.
 * Blocks only on getifaddrs and sysfs reads; thread-safe. *host_out is
 * written on success only.
 * Errors: those of the NIC choice (ncclInvalidUsage naming the variables
 * when no interface is left, ncclSystemError when getifaddrs fails).
 */
ncclResult_t mc_net_mesh_local_host(uint64_t host_hash, const char *name, const char *mgmt_ifname,
                                    struct mc_mesh_host *host_out);

/*
 * One entry per host of hosts[0..n_ranks) (one per rank, as allgathered):
 * the first rank's description of each host_hash, in rank order, into
 * uniq_out (room for n_ranks). Returns how many. Pure.
 */
int mc_net_mesh_hosts_unique(const struct mc_mesh_host *hosts, int n_ranks,
                             struct mc_mesh_host *uniq_out);

/*
 * Whether hosts (as allgathered, one entry per host) are cabled as a
 * direct-connect mesh that the Mesh net should carry: at least 3 hosts, no
 * subnet that every host has an address on (that would be a switched
 * network, the socket net's case), and every host reachable from every
 * other over the links. why_out receives one line saying why or why not.
 * Pure.
 */
bool mc_net_mesh_is_direct(const struct mc_mesh_host *hosts, int n_hosts, char *why_out,
                           size_t why_bytes);

/*
 * meshccl-topo --mesh: starts the Mesh net on this host (secret from
 * MESHCCL_SECRET, if set), lets discovery run for wait_ms, and prints to out
 * the mesh NICs (address, subnet, speed, lane) and what discovery learned
 * (hosts, links, shape, routes), then stops the net. Blocks for wait_ms.
 * Errors: those of the net's init (no mesh NIC, sockets).
 */
ncclResult_t mc_net_mesh_explain(FILE *out, int wait_ms);

#endif /* MC_NET_MESH_MESH_H */
