/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to the rank side of the bootstrap: the rank object (struct
 * mc_boot) and what its three files share. boot_rank.c creates it (listeners
 * and their service thread, registration with the root, the ring) and
 * destroys it; boot_p2p.c carries point-to-point messages between ranks
 * (mc_boot_send/recv and their queue of unexpected messages); boot_coll.c
 * runs the collectives over those (allgather, barrier, allgather of a
 * subset). What the root and the ranks share is bootstrap_int.h.
 */
#ifndef MC_BOOT_RANK_INT_H
#define MC_BOOT_RANK_INT_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bootstrap.h"
#include "bootstrap_int.h"
#include "utils.h"

#define MC_BOOT_EXPLAIN_WAIT_MS                                                                    \
  1000 /* after a peer error, how long to wait for the root's reason */
#define MC_BOOT_MAX_UNEXPECTED 4096
#define MC_BOOT_OUT_CONNS_MAX  64 /* message connections a rank keeps open to its peers */

/* A message that arrived before this rank asked for it: its payload, or for
 * a stream (allgather_sub) its dedicated connection. */
struct mc_boot_unexpected {
  struct mc_boot_p2p_header hdr;
  struct mc_sock sock; /* streams only (fd -1 otherwise) */
  void *data;          /* messages: hdr.bytes, read off the connection */
  struct mc_boot_unexpected *next;
};

/* An outgoing message connection kept open to a peer. */
struct mc_boot_out_conn {
  int peer;
  uint64_t used; /* b->use_seq at its last message: the least recent is closed first */
  struct mc_sock s;
};

/* An incoming message connection: messages of one sender, one after another,
 * until the sender closes it. */
struct mc_boot_in_conn {
  int rank; /* the sender, -1 until its first header */
  struct mc_sock s;
};

struct mc_boot {
  int rank;
  int n_ranks;
  uint64_t magic;
  uint8_t key[MC_BOOT_KEY_BYTES]; /* authentication key of the id's secret */
  const volatile uint32_t *abort_flag;
  struct mc_ifc ifc;
  struct mc_sock ctl; /* to the root, open until init ends */
  union mc_sockaddr root_addr;
  int n_roots;  /* 1, or nId of ncclCommInitRankScalable */
  int root_idx; /* which of them this rank registers with */
  /* With several roots, the first rank of a group: its connection to the
   * previous group's root (MC_BOOT_CTL_NEIGHBOR), open until init ends. */
  struct mc_sock nbr;
  union mc_sockaddr nbr_addr;
  /* The own root's answer (NEXT), once received: by boot_register, or by
   * own_link_check when it came while this rank was still joining the
   * previous group's root or explaining a failure of that join. */
  struct mc_boot_ctl next_msg;
  bool has_next;
  /* The own root's failure notice when it came during that join: the join
   * goes on until own_fail_dl, so that the previous group learns it too. */
  struct mc_boot_ctl own_fail;
  bool has_own_fail;
  struct mc_deadline own_fail_dl;
  struct mc_boot_acceptor ring_listen; /* ring_listen and p2p_listen: under svc_lock */
  struct mc_boot_acceptor p2p_listen;
  pthread_mutex_t svc_lock;
  pthread_cond_t svc_cond; /* a connection was authenticated */
  pthread_t svc_thread;
  bool is_svc_started;
  bool svc_stop;
  int svc_wake_fd;
  struct mc_sock ring_send; /* to rank + 1 */
  struct mc_sock ring_recv; /* from rank - 1 */
  struct mc_boot_peer *peers;
  struct mc_boot_unexpected *unexp;
  int n_unexp;
  /* Point-to-point messages (mc_boot_send/recv) travel on connections kept
   * open: an authenticated connection per message cost about 300 us of CPU
   * over the two ranks (six wake-ups), and init sends the same peers many. */
  struct mc_boot_out_conn out[MC_BOOT_OUT_CONNS_MAX];
  int n_out;
  uint64_t use_seq;
  /* When each rank's goodbye (MC_BOOT_BYE_BYTES) arrived, 0 before; [n_ranks],
   * allocated with the first. */
  uint64_t *bye_ns;
  struct mc_boot_in_conn *in;
  int n_in;
  int cap_in;
  struct pollfd *in_pfd; /* cap_in + 1 */
  int ready_fd;          /* eventfd: the service has an authenticated connection ready */
  struct mc_boot_timings t;
  char host[MC_BOOT_HOST_BYTES];
  int pid;
  uint32_t ag_seq;
  uint32_t world_seq; /* allgathers over all ranks (mc_boot_allgather): the one running */
  struct mc_deadline init_dl;
};

/* The expected message: a payload of `bytes` into data, or a stream's
 * connection into *stream (then data is NULL). */
struct mc_boot_p2p_want {
  int peer; /* -1: any rank */
  int tag;
  void *data;
  size_t bytes;
  struct mc_sock *stream;
};

/* ---------- boot_rank.c ---------- */

/* The wait of a bootstrap operation: during init, init's deadline and the
 * root's failure notices; after it, MESHCCL_BOOTSTRAP_TIMEOUT. */
struct mc_wait mc_boot_rank_wait(struct mc_boot *b);
/* Connects and authenticates to a peer (or the root). */
ncclResult_t mc_boot_rank_connect(struct mc_boot *b, const union mc_sockaddr *to, uint64_t magic,
                                  uint32_t type, const struct mc_wait *w, struct mc_sock *s_out,
                                  bool *is_auth_failure_out);
/* The error of a failure seen on socket s while talking to peer (doing:
 * what this rank was doing), said once; res or the root's reason. */
ncclResult_t mc_boot_rank_fail(struct mc_boot *b, ncclResult_t res, const struct mc_sock *s,
                               int peer, const char *doing);

/* ---------- boot_p2p.c ---------- */

/* A dedicated connection to peer announcing a stream with tag (allgather_sub). */
ncclResult_t mc_boot_p2p_stream_connect(struct mc_boot *b, int peer, int tag, struct mc_sock *s);
/* Waits for the expected message, queueing every other one that comes first. */
ncclResult_t mc_boot_p2p_wait(struct mc_boot *b, const struct mc_boot_p2p_want *wt);
/* Queues a message (data, owned from then on) or a stream's connection. */
ncclResult_t mc_boot_p2p_unexp_add(struct mc_boot *b, const struct mc_boot_p2p_header *hdr,
                                   struct mc_sock *stream, void *data);
/* The expected message from the unexpected queue: 1 found (*res), 0 not there. */
int mc_boot_p2p_unexp_take(struct mc_boot *b, const struct mc_boot_p2p_want *wt, ncclResult_t *res);
/* Adds the connections the service has authenticated to the incoming ones. */
ncclResult_t mc_boot_p2p_in_take(struct mc_boot *b);
/* Reads the next message off readable incoming connection i: 1 the expected
 * one (*res), 0 queued or the connection ended, -1 the wait ended (*res). */
int mc_boot_p2p_in_read(struct mc_boot *b, int i, const struct mc_boot_p2p_want *wt,
                        const struct mc_wait *w, ncclResult_t *res);
/* Frees the queue and closes the message connections (mc_boot_destroy). */
void mc_boot_p2p_close(struct mc_boot *b);

#endif /* MC_BOOT_RANK_INT_H */
