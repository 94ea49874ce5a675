/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mesh net's relay service. Hosts of a direct-connect mesh have no IP
 * forwarding; when host A reaches host C through B, A's sockets end on B and
 * B opens one matching socket onward to C for each of them. From then on B
 * only moves bytes, socket for socket and in both directions: that is this
 * service. Connection set-up (the route header, authentication) happens
 * before a pair of sockets is handed over here; the relay never looks at the
 * bytes.
 *
 * One service thread forwards every pipe (a pair of connected stream
 * sockets) with epoll. Each direction moves through a kernel pipe with
 * splice() (zero copy), or through a user buffer with read()/write() when
 * splice is not possible for those sockets. Data is forwarded as it arrives
 * (cut-through), in order per socket, and at most a bounded number of bytes
 * is held per direction: a source is read only while its destination has
 * room, so TCP's flow control carries back-pressure from the last receiver
 * to the first sender. An end-of-file on one side becomes a shutdown(SHUT_WR)
 * on the other once everything before it is delivered; a socket error on
 * either side closes both sockets at once, with a reset, so that both ends
 * see the failure.
 */
#ifndef MC_NET_MESH_RELAY_H
#define MC_NET_MESH_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "nccl.h"

#define MC_MESH_RELAY_DEFAULT_MAX_PIPES 1024
/* Asked of each kernel pipe with F_SETPIPE_SZ; the kernel may refuse it
 * (fs.pipe-max-size, fs.pipe-user-pages-soft), then the pipe's capacity is
 * the bound. Also the buffer of a read/write direction. */
#define MC_MESH_RELAY_DEFAULT_DIR_BYTES (1u << 20)
#define MC_MESH_RELAY_DEFAULT_POLL_MS   100
#define MC_MESH_RELAY_LABEL_BYTES       192

/* Options of a relay service; zero means the default. */
struct mc_mesh_relay_opts {
  const char *name; /* for logs ("relay" when NULL) */
  int max_pipes;    /* pipes forwarded at once (MC_MESH_RELAY_DEFAULT_MAX_PIPES) */
  /* Most bytes held for one direction of one pipe. 0: the kernel pipe's
   * capacity after asking for MC_MESH_RELAY_DEFAULT_DIR_BYTES (the same for
   * a read/write direction). */
  size_t dir_bytes;
  int poll_ms;     /* longest wait before the abort flag is checked again */
  bool force_copy; /* read()/write() through a user buffer, never splice */
};

/* Counters of one relay service since create. */
struct mc_mesh_relay_stats {
  int n_active;           /* pipes being forwarded (including just added) */
  uint64_t n_finished;    /* both directions ended with end-of-file */
  uint64_t n_failed;      /* closed at once after a socket error */
  uint64_t n_closed;      /* still open at abort or destroy, closed then */
  uint64_t n_copy_dirs;   /* directions that used read()/write() instead of splice */
  uint64_t bytes_a_to_b;  /* delivered to fd_b, over every pipe */
  uint64_t bytes_b_to_a;  /* delivered to fd_a, over every pipe */
  size_t dir_limit_bytes; /* the largest per-direction bound in use */
  size_t peak_dir_bytes;  /* most bytes ever held for one direction */
};

struct mc_mesh_relay;

/*
 * Starts a relay service (one thread, an epoll set, a wake-up eventfd).
 * opts may be NULL (every default). abort_flag (may be NULL) is polled by
 * the service at least every poll_ms: once it is non-zero the service closes
 * every pipe, stops forwarding and refuses new pipes; destroy still has to
 * be called. *relay_out is written only on success. ncclSystemError when a
 * system resource is missing, ncclInvalidArgument for negative options.
 */
ncclResult_t mc_mesh_relay_create(const struct mc_mesh_relay_opts *opts,
                                  const volatile uint32_t *abort_flag,
                                  struct mc_mesh_relay **relay_out);

/*
 * Stops the service: closes every pipe's sockets (counted in n_closed),
 * joins the thread, frees everything and logs a one-line summary at INFO
 * (NET). Returns within about poll_ms plus the time of one round of
 * forwarding. NULL is a no-op. Not to be called concurrently with add.
 */
void mc_mesh_relay_destroy(struct mc_mesh_relay *relay);

/*
 * Hands two connected stream sockets (TCP or AF_UNIX) to the relay, which
 * forwards fd_a -> fd_b and fd_b -> fd_a until both directions have ended,
 * then closes both. label (may be NULL) names the pipe in logs
 * ("rank 3 -> host c2 sock 1"); it is copied. Both sockets are made
 * non-blocking and, when TCP, get TCP_NODELAY (the relay must not add
 * Nagle's delay to what the ends send).
 *
 * When no kernel pipe can be made (descriptors or pipe memory exhausted),
 * that direction is forwarded with read/write.
 *
 * On success the relay owns both descriptors. On failure the caller keeps
 * them, unchanged (unless making them non-blocking is what failed):
 * ncclInvalidArgument for bad descriptors; ncclSystemError when max_pipes
 * pipes are already forwarded (the message names the limit) or memory is
 * short; ncclInternalError after an abort or once destroy has begun.
 * Thread-safe; does not block on I/O.
 */
ncclResult_t mc_mesh_relay_add(struct mc_mesh_relay *relay, int fd_a, int fd_b, const char *label);

/*
 * The local interface with address `local` (port ignored) went down: every
 * pipe one of whose sockets is bound to that address is closed with a reset
 * on both sides, at once, instead of when TCP gives up on the dead cable
 * (TCP_USER_TIMEOUT), so that the relayed connection's ends move or fail
 * without waiting; the link state names the cable. `why` is logged. Any
 * thread; does not wait (the service thread does it on its next wake-up);
 * accepts a NULL relay. At most MC_MESH_RELAY_MAX_FAILS requests wait at a
 * time, more are dropped (the pipes then end by TCP's timeout).
 */
#define MC_MESH_RELAY_MAX_FAILS 8
void mc_mesh_relay_fail_local(struct mc_mesh_relay *relay, const struct sockaddr *local,
                              const char *why);

/* Copies the counters (thread-safe; all zero for a NULL relay). */
void mc_mesh_relay_stats(struct mc_mesh_relay *relay, struct mc_mesh_relay_stats *stats_out);

#endif /* MC_NET_MESH_RELAY_H */
