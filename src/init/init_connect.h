/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stage "connect" of a communicator's init (init_connect.c): the channels
 * and their connections, the connection indices the collectives share.
 */
#ifndef MC_INIT_CONNECT_H
#define MC_INIT_CONNECT_H

#include "nccl.h"

struct ncclComm;
struct mc_conn_req;

/* Stage "connect" (init_connect.c): transports for every peer, the ring
 * channels and their connections. Sets comm->data. */
ncclResult_t mc_comm_stage_connect(struct ncclComm *comm);
/* Connection indices (conn_index of struct mc_conn_req): which of a pair's
 * connections on a channel a request is. */
enum mc_conn_index {
  MC_CONN_RING = 0,
  MC_CONN_P2P = 1,
  MC_CONN_ONESHOT = 2,
  MC_CONN_TREE = 3, /* every tree connection: a pair is parent and child once per channel */
  MC_CONN_ALGO = 16 /* + an algorithm's number: connections it makes for itself */
};

/* The requests for every channel's tree connections (send and receive with
 * the parent and each child), for the runtime connect of the collectives.
 * Fills reqs when it is not NULL; returns how many there are. */
int mc_comm_tree_conn_reqs(struct ncclComm *comm, struct mc_conn_req *reqs);
/* Frees what stage_connect and later collectives made. */
void mc_comm_free_connections(struct ncclComm *comm);

#endif /* MC_INIT_CONNECT_H */
