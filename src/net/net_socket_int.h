/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to the socket net (net_socket.c: devices, connection set-up;
 * net_socket_io.c: requests, control stream, tasks, helper threads).
 *
 * A connection is one control socket and n_socks data sockets (NCCL's
 * transport/net_socket.cc). Every message sends its size (uint32) on the
 * control socket, followed by the payload when it is at most inline_bytes
 * (or when there are no data sockets); a larger payload is cut into at most
 * one task per data socket, each at least min_task_bytes, assigned
 * round-robin from a per-connection cursor that both sides advance in
 * message order, so each data socket carries its tasks in the same order at
 * both ends. The receiver computes the cut from the size it reads, which is
 * why inline_bytes, min_task_bytes and n_socks travel in the listener's
 * handle: the connector adopts them.
 *
 * Data sockets are driven by n_threads helper threads (socket i belongs to
 * worker i % n_threads) or, with n_threads == 0, by one inline worker that
 * the caller's test() runs. The control socket is always driven by the
 * caller (isend, irecv, test).
 */
#ifndef MC_NET_SOCKET_INT_H
#define MC_NET_SOCKET_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/crypto.h"
#include "net.h"
#include "socket/socket.h"

#define MC_NET_SOCK_MAX_DEVS    16           /* NCCL's MAX_IFS */
#define MC_NET_SOCK_MAX_THREADS 16           /* NCCL's MAX_THREADS */
#define MC_NET_SOCK_MAX_SOCKS   64           /* NCCL's MAX_SOCKETS */
#define MC_NET_SOCK_MAX_BYTES   (1ull << 30) /* max_p2p_bytes: NCCL's MAX_NET_SIZE */
#define MC_NET_SOCK_ERR_BYTES   512
#define MC_NET_SOCK_MAX_INLINE  (1u << 20) /* NCCL_SOCKET_INLINE's range (params.def) */
#define MC_NET_SOCK_MIN_TASK    1024u      /* NCCL_SOCKET_MIN_TASKSIZE's range (params.def) */
#define MC_NET_SOCK_MAX_TASK    (1u << 30)

/* What listen writes into the 128-byte handle. */
struct mc_net_sock_handle {
  union mc_sockaddr addr; /* the listener */
  uint64_t magic;
  uint64_t listen_id; /* random: the listener a connector's response is for */
  int32_t n_socks;    /* data sockets per connection */
  int32_t n_threads;
  uint32_t inline_bytes;
  uint32_t min_task_bytes;
};

/* Reads a handle received from a peer (the 128 bytes listen wrote there)
 * and checks every field against what this library can use before anything
 * acts on it: an IPv4 or IPv6 address with a port, the magic this context
 * expects, socket and thread counts within NCCL's limits, inline and task
 * sizes within their parameters' ranges. Pure (net_socket_handle.c);
 * ncclInvalidArgument naming the field when the bytes are not a usable
 * socket-net handle; *h_out written only on success. */
ncclResult_t mc_net_sock_handle_parse(const void *buf, uint64_t magic,
                                      struct mc_net_sock_handle *h_out);

/* Per-communicator state (init .. finalize). */
struct mc_net_sock_ctx {
  const volatile uint32_t *abort_flag;
  int n_devs;
  struct mc_ifc devs[MC_NET_SOCK_MAX_DEVS];
  struct mc_if_speed speeds[MC_NET_SOCK_MAX_DEVS]; /* read once at init */
  int n_threads;                                   /* resolved NCCL_SOCKET_NTHREADS */
  int n_socks;                                     /* data sockets per connection */
  uint32_t inline_bytes;
  uint32_t min_task_bytes;
  uint64_t magic;
  uint8_t key[MC_SHA256_BYTES];         /* what every socket proves it knows (net_auth.h) */
  int64_t liveness_ms;                  /* TCP_USER_TIMEOUT of its sockets */
  pthread_mutex_t mu;                   /* guards connects */
  struct mc_net_sock_connect *connects; /* unfinished connects (list) */
};

struct mc_net_sock_req;

/* A piece of one message on one data socket. */
struct mc_net_sock_task {
  struct mc_net_sock_req *req;
  char *data;
  size_t bytes;
  size_t done; /* touched only by the worker that owns the socket */
};

/* One data socket and its FIFO of tasks. At most one task per request per
 * socket and at most MC_NET_MAX_REQUESTS requests: the ring never fills. */
struct mc_net_sock_data {
  struct mc_sock sock;
  struct mc_net_sock_task q[MC_NET_MAX_REQUESTS];
  unsigned head; /* next task to move (worker's mutex) */
  unsigned tail; /* next free slot (worker's mutex) */
};

/* A helper thread, or the inline worker when n_threads == 0. */
struct mc_net_sock_worker {
  struct mc_net_sock_comm *comm;
  int id;
  bool has_thread;
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool stop;        /* close asks the thread to end (mu) */
  unsigned pending; /* tasks queued on its sockets (mu) */
};

enum mc_net_sock_req_state {
  MC_NET_SOCK_REQ_FREE = 0,
  MC_NET_SOCK_REQ_CTRL,  /* size (and inline payload) not fully through the control socket */
  MC_NET_SOCK_REQ_TASKS, /* waiting for its tasks */
};

struct mc_net_sock_req {
  struct mc_net_sock_comm *comm;
  int state;
  char *data;
  size_t posted_bytes; /* recv: the buffer's size */
  size_t bytes;        /* the message's size (recv: known once the header is read) */
  uint32_t hdr;        /* size on the wire */
  size_t ctrl_done;    /* bytes of header + payload-on-control moved */
  bool payload_on_ctrl;
  int n_tasks;
  int tasks_done; /* atomic: incremented by workers */
};

struct mc_net_sock_comm {
  bool is_send;
  const volatile uint32_t *abort_flag;
  struct mc_sock ctrl;
  char peer_str[MC_SOCKADDR_STRLEN];
  /* "<local> -> <peer>" for a send comm, "<peer> -> <local>" for a receive
   * comm: the link, as messages name it. */
  char link_str[2 * MC_SOCKADDR_STRLEN + 8];
  uint64_t moved_bytes; /* atomic: bytes through any of its sockets, for get_progress */
  int64_t liveness_ms;  /* TCP_USER_TIMEOUT set on its sockets; 0: none (the Mesh net's) */
  int n_socks;
  int n_threads;
  int n_workers; /* n_threads, or 1 inline worker when there are data sockets */
  uint32_t inline_bytes;
  uint32_t min_task_bytes;
  struct mc_net_sock_data *data;      /* [n_socks] */
  struct mc_net_sock_worker *workers; /* [n_workers] */
  int next_sock;                      /* round-robin cursor, advanced in message order */
  struct mc_net_sock_req reqs[MC_NET_MAX_REQUESTS];
  /* Requests whose control part is unfinished, in posting order. */
  struct mc_net_sock_req *fifo[MC_NET_MAX_REQUESTS];
  unsigned fifo_head;
  unsigned fifo_tail;
  /* The first error, from any thread; reported (MC_FAIL) once by the caller,
   * or only returned when is_quiet (a user that recovers from it, the Mesh
   * net's reliability layer, reads err_text and decides what to say). */
  bool is_quiet;
  pthread_mutex_t err_mu;
  int has_err; /* atomic */
  /* atomic: the error is not confined to the control stream (a data socket
   * failed, or the comm was closed under it): every unfinished request is
   * lost. Without it, the requests whose control part went through still
   * complete as their data arrives (a peer that closes after its last
   * message: what it sent before is delivered). */
  int err_all;
  ncclResult_t err;
  bool err_reported;
  /* How the first error came (err_mu): MC_NET_SOCK_CLOSED_BY_PEER when the
   * peer's end closed the connection (end of stream) or reset it (the peer's
   * kernel has no socket for it any more), else 0. The Mesh net tells a
   * peer's process that went away from a cable that failed by it. */
  int err_kind;
  char err_text[MC_NET_SOCK_ERR_BYTES];
};

#define MC_NET_SOCK_CLOSED_BY_PEER 1

/* net_socket_io.c */

/* Builds a connection from its connected sockets (ctrl + n_socks data, in
 * index order; ownership of the fds moves to the comm, and the donors' fds
 * are set to -1) and starts its helper threads. */
ncclResult_t mc_net_sock_comm_create(bool is_send, const volatile uint32_t *abort_flag,
                                     struct mc_sock *socks, int n_socks, int n_threads,
                                     uint32_t inline_bytes, uint32_t min_task_bytes,
                                     struct mc_net_sock_comm **comm_out);
/* Gives every socket of comm TCP keepalive and TCP_USER_TIMEOUT =
 * timeout_ms (mc_sock_set_liveness); a failure is recorded (MC_FAIL)
 * naming the link. */
ncclResult_t mc_net_sock_comm_set_liveness(struct mc_net_sock_comm *comm, int64_t timeout_ms);
/* struct mc_net_ops.get_progress of the socket net. */
ncclResult_t mc_net_sock_get_progress(void *comm, uint64_t *bytes_out, char *link,
                                      size_t link_bytes);
/* Stops the threads, closes the sockets, frees (accepts NULL). */
void mc_net_sock_comm_destroy(struct mc_net_sock_comm *comm);

ncclResult_t mc_net_sock_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                               void **request);
ncclResult_t mc_net_sock_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                               void **mhandles, void **request);
ncclResult_t mc_net_sock_test(void *request, int *done, size_t *sizes);

/* What the nets over these comms (Socket, Mesh) share in their ops. */

/* Fills props for device dev: host memory, NCCL's maxComms of 65536, one
 * buffer per irecv, dev alone, MC_NET_SOCK_MAX_BYTES, no rail or plane;
 * the rest is zero for the caller to set (name, PCI path, guid, speed). */
void mc_net_sock_props_init(int dev, struct mc_net_props *props_out);
/* reg_mr: host memory needs no handle (*mhandle_out = NULL); another type
 * is refused, the message naming the net by tag ("NET/Socket"). */
ncclResult_t mc_net_sock_reg_host(const char *tag, int type, void **mhandle_out);
/* dereg_mr of a net whose reg_mr is mc_net_sock_reg_host: nothing to undo. */
ncclResult_t mc_net_sock_dereg_mr(void *comm, void *mhandle);
/* NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD with the automatic values
 * (-2) resolved and the product capped at MC_NET_SOCK_MAX_SOCKS (WARNed
 * once, the message naming the net by tag): helper threads and data
 * sockets per connection. */
void mc_net_sock_threads(const char *tag, int *n_threads_out, int *n_socks_out);
/* The secret a net derives its key from: the communicator's
 * (args->secret), else MESHCCL_SECRET, else none (NULL, 0 bytes). */
void mc_net_sock_secret(const struct mc_net_init_args *args, const void **secret_out,
                        size_t *bytes_out);

#endif /* MC_NET_SOCKET_INT_H */
