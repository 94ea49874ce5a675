/* SPDX-License-Identifier: Apache-2.0 */
/* Internal to src/transport: the connect blobs and each transport's setup. */
#ifndef MC_TRANSPORT_TP_INT_H
#define MC_TRANSPORT_TP_INT_H

#include "transport/transport.h"

#include "net/net.h"

#define MC_SHM_NAME_BYTES 64

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

/* SHM segments (tp_shm.c). */
ncclResult_t mc_shm_create(const char *name, size_t bytes, void **map_out);
ncclResult_t mc_shm_attach(const char *name, size_t bytes, void **map_out);
void mc_shm_unlink(const char *name);
void mc_shm_name(char *out, const struct mc_tp_comm *tc, const char *what, int recv_rank,
                 int send_rank, int channel, int conn_index);

/* NET (tp_net.c). */
ncclResult_t mc_net_recv_setup(struct mc_tp_comm *tc, struct mc_conn *c, struct mc_blob_r1 *r1);
ncclResult_t mc_net_send_setup(struct mc_tp_comm *tc, struct mc_conn *c,
                               const struct mc_blob_r1 *r1);
/* Advances a pending NET connect/accept; *done when established. */
ncclResult_t mc_net_progress_connect(struct mc_tp_comm *tc, struct mc_conn *c, bool *done);
/* Hands an established NET connection to the proxy thread. */
ncclResult_t mc_proxy_add(struct mc_tp_comm *tc, struct mc_conn *c);
void mc_proxy_remove(struct mc_proxy *p, struct mc_conn *c);
void mc_proxy_stop(struct mc_proxy *p);
void mc_net_conn_free(struct mc_conn *c);

#endif /* MC_TRANSPORT_TP_INT_H */
