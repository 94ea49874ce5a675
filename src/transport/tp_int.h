/* SPDX-License-Identifier: Apache-2.0 */
/* Internal to src/transport: the connect blobs and each transport's setup. */
#ifndef MC_TRANSPORT_TP_INT_H
#define MC_TRANSPORT_TP_INT_H

#include "transport/transport.h"

#include "net/net.h"
#include "transport/tp_decide.h"

#define MC_SHM_NAME_BYTES 64

/* Bootstrap tags of the two rounds (transport.c) for a connection. */
#define MC_TP_TAG_BASE       (1 << 27)
#define MC_TP_TAG_R1(_c, _i) (MC_TP_TAG_BASE | (0 << 24) | ((_i) << 16) | (_c))
#define MC_TP_TAG_R2(_c, _i) (MC_TP_TAG_BASE | (1 << 24) | ((_i) << 16) | (_c))
/* The kind of a round's message when its sender's own set-up failed. */
#define MC_TP_BLOB_FAILED 0xffu

/* Round 1, receiver -> sender: the receiver's choice and what the sender needs. */
struct mc_blob_r1 {
  uint32_t kind;
  uint32_t same_process;
  uint64_t bytes; /* SHM: segment size; P2P: slot bytes */
  uint64_t addr;  /* P2P same process: the ctrl */
  char shm_name[MC_SHM_NAME_BYTES];
  int32_t net_dev;
  char handle[MC_NET_HANDLE_BYTES];
};

/* Round 2, sender -> receiver. */
struct mc_blob_r2 {
  uint32_t kind;
  uint32_t ok;
  uint64_t slots; /* P2P: the sender's slots */
};

/* What the receiver knows when it picks a transport for a peer. */
struct mc_tp_select {
  int peer;
  bool same_host;
  bool same_process;
  enum mc_topo_transport topo_choice; /* topo's P2P ▸ SHM ▸ NET for the pair */
};

/*
 * A transport (NCCL's struct ncclTransport, host edition). Setup runs in the
 * two bootstrap rounds of transport.c:
 *   can_connect   on the receiver: may this transport carry the connection?
 *   recv_setup    receiver, round 1: create what lives on its side, describe it
 *   send_setup    sender, round 2: attach / allocate / start connecting
 *   recv_connect  receiver: take the sender's answer
 *   progress      both (NULL: nothing left): finish a multi-step connect
 *   start         both (NULL: nothing): the connection goes live (NET: proxy)
 *   free          both: the transport's own resources (shared ones: mc_conn_free)
 *   how           text for the "Channel ... via <name>/" line after the slash
 */
struct mc_transport {
  enum mc_topo_transport kind;
  const char *name;
  bool (*can_connect)(struct mc_tp_comm *tc, const struct mc_tp_select *sel);
  ncclResult_t (*recv_setup)(struct mc_tp_comm *tc, struct mc_conn_req *q, struct mc_blob_r1 *r1);
  ncclResult_t (*send_setup)(struct mc_tp_comm *tc, struct mc_conn_req *q,
                             const struct mc_blob_r1 *r1, struct mc_blob_r2 *r2);
  ncclResult_t (*recv_connect)(struct mc_conn_req *q, const struct mc_blob_r2 *r2);
  ncclResult_t (*progress)(struct mc_tp_comm *tc, struct mc_conn *c, bool *done);
  ncclResult_t (*start)(struct mc_tp_comm *tc, struct mc_conn *c);
  void (*free)(struct mc_conn *c);
  const char *(*how)(const struct mc_tp_comm *tc, const struct mc_conn *c);
};

extern const struct mc_transport mc_tp_p2p; /* tp_p2p.c */
extern const struct mc_transport mc_tp_shm; /* tp_shm.c */
extern const struct mc_transport mc_tp_net; /* tp_net.c */

/* ------------------------------------------- connect messages (tp_blob.c) */

/* Bytes of the counters page in front of the slots. */
size_t mc_tp_ctrl_bytes(void);

/* Zeroed counters on this process's heap, aligned as struct mc_conn_ctrl
 * requires (calloc's 16 bytes would not do): c->own_ctrl and c->ctrl
 * (transport.c). */
ncclResult_t mc_tp_ctrl_alloc(struct mc_conn *c);
/* P2P in one process: the receiver allocates the counters both ends share
 * (c->shared, c->ctrl); the sender joins them with the address the receiver
 * published and hands its slots to them (c->slots must be set). The last
 * end freed (mc_conn_free) frees both. */
ncclResult_t mc_tp_shared_alloc(struct mc_conn *c);
void mc_tp_shared_join(struct mc_conn *c, struct mc_conn_ctrl *ctrl);

/* The /dev/shm name of a connection's segment ("shm") or P2P counters page
 * ("p2p"), made by the receiving rank in process creator_pid. */
void mc_shm_name(char *out, uint64_t comm_hash, const char *what, int recv_rank, int send_rank,
                 int channel, int conn_index, int creator_pid);

/* What this rank knows about the other end of a connection, from the
 * bootstrap allgather and its own process, to check its connect messages. */
struct mc_tp_blob_view {
  int rank; /* this rank */
  int peer;
  int channel;
  int conn_index;
  uint64_t comm_hash;
  int peer_pid;
  bool same_host;    /* host hashes equal */
  bool same_process; /* same host, and the peer's pid is this process's */
  bool peer_freed;   /* the peer was of this process, its communicator is freed */
  size_t slot_bytes; /* what this rank's collectives put in one slot */
};

/* Whether peer is a rank of this very process: its host hash is this
 * rank's, its pid and pid hash (pid namespace included) this process's own,
 * and its communicator (mc_tp_peer.canary) a live one of this process
 * (core/registry.h). Only then may a connect message's pointers be used,
 * and only otherwise may process_vm_readv read the peer (at the pid the
 * bootstrap's authenticated allgather gave, mc_tp_peer.pid). */
bool mc_tp_peer_is_this_process(const struct mc_tp_comm *tc, int peer);

void mc_tp_blob_view_make(const struct mc_tp_comm *tc, const struct mc_conn_req *q,
                          struct mc_tp_blob_view *v_out);
/* The sender's check of the receiver's round-1 message (kind not
 * MC_TP_BLOB_FAILED): ncclRemoteError naming the peer and the field otherwise. */
ncclResult_t mc_tp_blob_r1_check(const struct mc_tp_blob_view *v, const struct mc_blob_r1 *r1);
/* The receiver's check of the sender's round-2 answer for a connection of
 * transport kind: ncclRemoteError naming the peer otherwise. */
ncclResult_t mc_tp_blob_r2_check(const struct mc_tp_blob_view *v, uint32_t kind,
                                 const struct mc_blob_r2 *r2);

/* SHM segments (tp_shm.c). */
ncclResult_t mc_shm_create(const char *name, size_t bytes, void **map_out);
ncclResult_t mc_shm_attach(const char *name, size_t bytes, void **map_out);
void mc_shm_unlink(const char *name);

/* How long a NET connection a collective waits on may move nothing:
 * MESHCCL_NET_TIMEOUT, and for the Mesh net at least its failover time
 * (tp_net.c: the proxy's watchdog, and the connections a collective makes
 * at first use, transport.c). */
uint64_t mc_tp_net_timeout_ns(const struct mc_tp_comm *tc);

/* The proxy thread (tp_net.c). */
void mc_proxy_remove(struct mc_proxy *p, struct mc_conn *c);
/* Stops the thread and frees the proxy; true when the thread had to be
 * abandoned inside a plugin call instead (nothing freed: the proxy keeps
 * net_ctx, the net context its connections use, for the thread). */
bool mc_proxy_stop(struct mc_proxy *p, void *net_ctx);
/* c is freed while p is abandoned (mc_proxy_wedged): what it holds is left
 * to the thread, in p (tp_net.c). */
void mc_proxy_leave_conn(struct mc_proxy *p, const struct mc_conn *c);

#endif /* MC_TRANSPORT_TP_INT_H */
