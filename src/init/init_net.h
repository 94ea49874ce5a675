/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stage "net" of a communicator's init (init_net.c): the net secret, the net
 * and its context; the node orders of rings that follow the Mesh net's cables;
 * host names for messages.
 */
#ifndef MC_INIT_NET_H
#define MC_INIT_NET_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

struct ncclComm;
struct mc_topo_ranks;

/* Stage "net" (init_net.c): the net secret, the net (mc_net_select) and its
 * per-communicator context (NCCL's ncclNetInit). Sets comm->net. */
ncclResult_t mc_comm_stage_net(struct ncclComm *comm);
/* The secret the nets authenticate the communicator's connections with
 * (MC_NET_SECRET_BYTES): derived from the unique id, its bootstrap secret
 * included. */
void mc_comm_net_secret(const ncclUniqueId *id, uint8_t secret_out[32]);
/* Finalizes the net context (once; nothing when there is none). */
void mc_comm_net_fini(struct ncclComm *comm);

/* Rings that follow the cables (init_net.c): for a communicator whose net
 * offers node orders (its node_orders op, e.g. the Mesh net's) on 3 or
 * more hosts, the net's orders become Postset's node orders, Postset's
 * nodes numbered from `all` (the AllGather3 output; collective: every rank
 * calls it with the same `all`): *orders_out (*n_orders_out x nodes, caller
 * frees) or NULL and 0 (NCCL's order). */
ncclResult_t mc_comm_net_node_orders(struct ncclComm *comm, const struct mc_topo_ranks *all,
                                     int *n_orders_out, int **orders_out);

/* "ranks 0,2,4-5" / "rank 3": the ranks of node k (comm->nodes), for
 * messages that name a host as "host k (name, ranks ...)". */
void mc_comm_node_ranks_str(const struct ncclComm *comm, int k, char *buf, size_t bytes);

#endif /* MC_INIT_NET_H */
