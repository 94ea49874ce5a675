/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to src/bootstrap/: what the bootstrap sends on the wire, and the
 * pieces shared by the root (boot_root.c) and the ranks (boot_rank.c).
 *
 *  - Authentication (boot_proto.c, boot_accept.c): every bootstrap
 *    connection, after NCCL's 12-byte handshake (magic, socket type), proves
 *    in both directions that each side knows the job's secret, by HMAC-SHA256
 *    over a nonce of each side (docs/design/bootstrap.md):
 *        client -> server  HELLO    magic, type, version, client nonce  (48 bytes)
 *        server -> client  CHALLENGE version, server nonce              (36 bytes)
 *        client -> server  PROOF    MAC("C", ...)                        (32 bytes)
 *        server -> client  VERDICT  ACCEPT + MAC("S", ...) | REJECT      (36 bytes)
 *    The server proves itself only to a client that proved itself first.
 *  - Control messages between a rank and the root (struct mc_boot_ctl,
 *    framed by a uint32 length), ring and p2p headers.
 *
 * The parsers are pure functions over bytes: they never trust a received
 * length, rank or address before checking it, and tests/fuzz/fuzz_boot_msg.c
 * feeds them without sockets. Wire integers are in host byte order, as in
 * NCCL's bootstrap (every rank runs the same architecture).
 */
#ifndef MC_BOOTSTRAP_INT_H
#define MC_BOOTSTRAP_INT_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bootstrap.h"
#include "crypto.h"

#define MC_BOOT_HOST_BYTES 64
#define MC_BOOT_TEXT_BYTES 600
#define MC_BOOT_MAX_RANKS  (1 << 20) /* largest nranks the root accepts in a registration */

/* ---------- authentication (boot_proto.c) ---------- */

#define MC_BOOT_AUTH_VERSION    1
#define MC_BOOT_KEY_BYTES       MC_SHA256_BYTES
#define MC_BOOT_NONCE_BYTES     32
#define MC_BOOT_HS_BYTES        12 /* NCCL's handshake: magic (8) and socket type (4) */
#define MC_BOOT_HELLO_BYTES     (MC_BOOT_HS_BYTES + 4 + MC_BOOT_NONCE_BYTES)
#define MC_BOOT_CHALLENGE_BYTES (4 + MC_BOOT_NONCE_BYTES)
#define MC_BOOT_PROOF_BYTES     MC_SHA256_BYTES
#define MC_BOOT_VERDICT_BYTES   (4 + MC_SHA256_BYTES)

#define MC_BOOT_VERDICT_ACCEPT 0x50434341u /* "ACCP" */
#define MC_BOOT_VERDICT_REJECT 0x544a4552u /* "REJT" */

/* One exchange as both sides see it: what the MACs cover. */
struct mc_boot_auth {
  uint64_t magic;
  uint32_t type;
  uint8_t nc[MC_BOOT_NONCE_BYTES]; /* client nonce */
  uint8_t ns[MC_BOOT_NONCE_BYTES]; /* server nonce */
};

/* The authentication key of a secret (an HMAC of it under a fixed label, so
 * that the key differs from the secret the net secret is derived from). */
void mc_boot_auth_key(const uint8_t secret[MC_BOOT_SECRET_BYTES],
                      uint8_t key_out[MC_BOOT_KEY_BYTES]);
/* HMAC(key, dir | version | magic | type | nc | ns); dir is 'C' or 'S'. */
void mc_boot_auth_mac(const uint8_t key[MC_BOOT_KEY_BYTES], char dir, const struct mc_boot_auth *a,
                      uint8_t mac_out[MC_SHA256_BYTES]);

void mc_boot_auth_hello_build(const struct mc_boot_auth *a, uint8_t out[MC_BOOT_HELLO_BYTES]);
/*
 * Checks the first `got` bytes (got <= MC_BOOT_HELLO_BYTES) of a hello
 * against a->magic and a->type, as they arrive: -1 when they cannot start a
 * valid hello (why says what is wrong), 0 when fine so far, 1 when complete
 * (a->nc filled).
 */
int mc_boot_auth_hello_parse(struct mc_boot_auth *a, const uint8_t *buf, size_t got, char *why,
                             size_t why_bytes);
void mc_boot_auth_challenge_build(const struct mc_boot_auth *a,
                                  uint8_t out[MC_BOOT_CHALLENGE_BYTES]);
/* A complete challenge: a->ns filled, or false with why. */
bool mc_boot_auth_challenge_parse(struct mc_boot_auth *a, const uint8_t *buf, size_t bytes,
                                  char *why, size_t why_bytes);
void mc_boot_auth_proof_build(const uint8_t key[MC_BOOT_KEY_BYTES], const struct mc_boot_auth *a,
                              uint8_t out[MC_BOOT_PROOF_BYTES]);
/* True when buf is the client's proof for this exchange (constant-time compare). */
bool mc_boot_auth_proof_check(const uint8_t key[MC_BOOT_KEY_BYTES], const struct mc_boot_auth *a,
                              const uint8_t *buf, size_t bytes);
void mc_boot_auth_verdict_build(const uint8_t key[MC_BOOT_KEY_BYTES], const struct mc_boot_auth *a,
                                bool is_accepted, uint8_t out[MC_BOOT_VERDICT_BYTES]);
/* ncclSuccess: accepted and the server proved the secret; ncclInvalidUsage:
 * the server rejected our proof; ncclRemoteError: malformed, or a server
 * that does not know the secret. why says which. Logs nothing. */
ncclResult_t mc_boot_auth_verdict_parse(const uint8_t key[MC_BOOT_KEY_BYTES],
                                        const struct mc_boot_auth *a, const uint8_t *buf,
                                        size_t bytes, char *why, size_t why_bytes);

/* ---------- control messages (boot_proto.c) ---------- */

/* Messages of the control connection (one fixed-size framed struct). */
enum mc_boot_ctl_kind {
  MC_BOOT_CTL_REGISTER = 1, /* rank -> root: rank, n_ranks, ring address, host, pid */
  MC_BOOT_CTL_NEXT = 2,     /* root -> rank: the next rank and its ring address */
  MC_BOOT_CTL_FAIL = 3,     /* either way: code and text; the job's init failed */
  MC_BOOT_CTL_DONE = 4,     /* rank -> root: init completed */
  /* rank -> the previous root (several roots): the first rank of a root's
   * group gives the previous root its ring address, for that root's last
   * rank; the connection then carries FAIL both ways and DONE, as a
   * registration's does. */
  MC_BOOT_CTL_NEIGHBOR = 5
};

struct mc_boot_ctl {
  uint32_t kind;
  uint32_t version; /* NCCL_VERSION_CODE of the sender */
  int32_t rank;
  int32_t n_ranks;
  int32_t code;
  int32_t pid;
  int32_t n_roots; /* REGISTER, NEIGHBOR: the job's roots (nId); 1 with one root */
  int32_t root;    /* REGISTER, NEIGHBOR: which of them the sender takes this root for */
  union mc_sockaddr addr;
  union mc_sockaddr p2p; /* REGISTER: the rank's p2p listener (for the address table) */
  /* NEXT: the bytes of the address table the root sends right after it
   * (n_ranks struct mc_boot_peer, framed by a uint32 length), or 0: the
   * ranks then allgather the table over the ring, as NCCL's do. */
  uint32_t table_bytes;
  char host[MC_BOOT_HOST_BYTES];
  char text[MC_BOOT_TEXT_BYTES];
};

/* One rank's entry of the bootstrap's address table: what every rank knows of
 * every other after mc_boot_init (from the root's table or the ring allgather). */
struct mc_boot_peer {
  union mc_sockaddr p2p;
  int32_t pid;
  char host[MC_BOOT_HOST_BYTES];
};

/* A framed control message: uint32 length (sizeof(struct mc_boot_ctl)), then the struct. */
#define MC_BOOT_CTL_FRAME_BYTES (sizeof(uint32_t) + sizeof(struct mc_boot_ctl))

/* A control message being received in pieces; the buffer exists only while
 * a message is incomplete. Zero-initialise. */
struct mc_boot_rx {
  uint8_t *buf;
  size_t got;
};

/* Bytes the message being received still lacks (read no more than that). */
size_t mc_boot_rx_want(const struct mc_boot_rx *rx);
/*
 * Adds n bytes (n <= mc_boot_rx_want) of a framed message. Returns 1 when
 * the message is complete (msg_out filled, rx ready for the next one), 0
 * when more is needed, -1 when the length is not that of a control message
 * or memory ran out (why says which; rx is reset).
 */
int mc_boot_rx_feed(struct mc_boot_rx *rx, const void *data, size_t n, struct mc_boot_ctl *msg_out,
                    char *why, size_t why_bytes);
void mc_boot_rx_free(struct mc_boot_rx *rx);

/* A usable IPv4 or IPv6 address with a port. */
bool mc_boot_addr_check(const union mc_sockaddr *a, char *why, size_t why_bytes);
/* Validators of received messages; they terminate host and text, and
 * return false with why when the message must not be used. */
/* rank -> root, first message: a REGISTER or NEIGHBOR with 0 <= rank < n_ranks <=
 * MC_BOOT_MAX_RANKS, 1 <= n_roots <= n_ranks, 0 <= root < n_roots, a usable
 * ring address, and for a REGISTER a usable p2p address. */
bool mc_boot_ctl_check_register(struct mc_boot_ctl *m, char *why, size_t why_bytes);
/* rank -> root after the registration: DONE, or FAIL with a failure code. */
bool mc_boot_ctl_check_from_rank(struct mc_boot_ctl *m, char *why, size_t why_bytes);
/* root -> rank: NEXT naming rank + 1 of n_ranks with a usable ring address
 * and table_bytes 0 or n_ranks entries (only when is_next_ok), or FAIL with a
 * failure code (a FAIL whose code is ncclSuccess is refused). */
bool mc_boot_ctl_check_from_root(struct mc_boot_ctl *m, int rank, int n_ranks, bool is_next_ok,
                                 char *why, size_t why_bytes);

/* ---------- ring and p2p headers (boot_proto.c) ---------- */

/* First bytes of a p2p connection: who sends, with which tag, how many bytes. */
struct mc_boot_p2p_header {
  int32_t rank;
  int32_t tag;
  uint32_t bytes; /* MC_BOOT_STREAM_BYTES: a dedicated connection (allgather_sub);
                   * MC_BOOT_BYE_BYTES: the sender closed its bootstrap */
};

#define MC_BOOT_STREAM_BYTES UINT32_MAX
/* The last header on a message connection whose sender's bootstrap closed
 * (its communicator destroyed or aborted): no payload, no message follows.
 * A connection closed to make room (MC_BOOT_OUT_CONNS_MAX) ends without it. */
#define MC_BOOT_BYE_BYTES (UINT32_MAX - 1)

/* rank < n_ranks, bytes <= MC_BOOT_MAX_MSG_BYTES, MC_BOOT_STREAM_BYTES or
 * MC_BOOT_BYE_BYTES. */
bool mc_boot_p2p_header_check(const struct mc_boot_p2p_header *h, int n_ranks, char *why,
                              size_t why_bytes);
/* The int32 rank a ring connection starts with must be prev. */
bool mc_boot_ring_hello_check(int32_t from, int prev, int n_ranks, char *why, size_t why_bytes);
/* The allgather header {sequence, slice bytes} must announce `slice` bytes. */
bool mc_boot_ag_header_check(const uint32_t hdr[2], size_t slice, char *why, size_t why_bytes);

/* ---------- authenticating acceptor and connect (boot_accept.c) ---------- */

/* A connection accepted whose authentication is not complete (or that is
 * authenticated and waits to be taken). */
struct mc_boot_pending {
  int fd;
  int state; /* boot_accept.c: hello, proof, ready */
  union mc_sockaddr peer;
  uint64_t since_ns;
  size_t got;
  uint8_t buf[MC_BOOT_HELLO_BYTES];
  struct mc_boot_auth auth;
};

/*
 * A listening socket whose connections are authenticated without ever
 * blocking on one of them: pending connections are polled together with the
 * listening socket; at most max_pend unauthenticated ones are kept (the
 * oldest is evicted for a newcomer), each must authenticate within the
 * window, and at most max_ready authenticated ones wait to be taken (then
 * new connections wait in the kernel's backlog). Dropped connections are
 * closed and logged with their address (INFO; the first failed proof
 * WARNs). EMFILE/ENFILE from accept WARNs once naming RLIMIT_NOFILE and
 * pauses accepting for a moment (no busy loop).
 */
struct mc_boot_acceptor {
  struct mc_listener listener; /* the listening socket (its own pending list is unused) */
  uint8_t key[MC_BOOT_KEY_BYTES];
  char what[64];                /* "bootstrap root", "rank 3 ring listener": for logs */
  struct mc_boot_pending *pend; /* cap entries, n_pend used (grows as needed) */
  int n_pend;
  int cap;
  int n_unauth; /* pending entries that did not authenticate yet */
  int max_pend;
  int max_ready;
  struct pollfd *pfd; /* 1 + cap: the acceptor's own polls */
  uint64_t window_ns;
  uint64_t paused_until_ns;
  bool is_limit_warned;
  bool is_proof_warned;
  int fd_limit_errno; /* EMFILE or ENFILE from the first accept that hit it, else 0 (atomic) */
  uint64_t n_dropped;
  uint64_t n_evicted;
};

/*
 * Listens on local (port 0: ephemeral). On failure the listener's err says
 * why and the result is mc_sock_listen's (ncclInvalidUsage: address in
 * use); nothing is logged and nothing is left open.
 */
ncclResult_t mc_boot_acceptor_open(struct mc_boot_acceptor *a, const union mc_sockaddr *local,
                                   uint64_t magic, uint32_t type,
                                   const uint8_t key[MC_BOOT_KEY_BYTES], int max_pend,
                                   int max_ready, const char *what);
/* Closes the listening socket and every connection not taken. Accepts closed ones. */
void mc_boot_acceptor_close(struct mc_boot_acceptor *a);
/* Entries mc_boot_acceptor_pollfds fills now (0 once closed). */
int mc_boot_acceptor_n_fds(const struct mc_boot_acceptor *a);
/* Fills pfd (room for mc_boot_acceptor_n_fds entries) with the listening
 * socket (fd -1 while accepting is paused or the set is full of
 * authenticated connections) and the pending connections; returns the count. */
int mc_boot_acceptor_pollfds(const struct mc_boot_acceptor *a, struct pollfd *pfd);
/* Moves every connection on after a poll over the entries pollfds filled
 * (pfd == NULL: polls them itself, without waiting): accepts, reads,
 * answers, expires. Never blocks. */
void mc_boot_acceptor_progress(struct mc_boot_acceptor *a, const struct pollfd *pfd, int n_pfd);
/* True while something of the acceptor ends with time (a connection's
 * window, a pause): its driver must not sleep without a timeout. */
bool mc_boot_acceptor_is_timed(const struct mc_boot_acceptor *a);
/* True when an authenticated connection waits to be taken. */
bool mc_boot_acceptor_has_ready(const struct mc_boot_acceptor *a);
/*
 * When accept() failed for lack of file descriptors (EMFILE, ENFILE), the
 * cause for the init to fail with at once: "accept on <what> <addr>: Too many
 * open files; this process reached its limit ..." into why, and true. The
 * acceptor goes on retrying (after a pause), so that once its owner has
 * closed connections it can still tell late ranks why. Any thread.
 */
bool mc_boot_acceptor_fd_error(const struct mc_boot_acceptor *a, char *why, size_t why_bytes);
/* Takes an authenticated connection (oldest first): true and *conn_out
 * (owned by the caller) when there was one. */
bool mc_boot_acceptor_take(struct mc_boot_acceptor *a, struct mc_sock *conn_out);
/* Gives an authenticated bootstrap connection TCP keepalive and
 * TCP_USER_TIMEOUT (1.5 x MESHCCL_NET_TIMEOUT, as the socket net's), so that
 * a peer host or link that went silent fails the connection's next wait
 * instead of leaving it to the deadline (the ring stays open for the
 * communicator's life). Every connection the acceptor hands out and every
 * one mc_boot_auth_connect returns has them; a failure to set them WARNs
 * once and leaves the connection as it is. */
void mc_boot_sock_liveness(struct mc_sock *s);

/* Lifts the soft limit of open files to the hard one (NCCL's setFilesLimit,
 * bootstrap.cc): a root holds a connection per rank, and a rank one per peer
 * it exchanges messages with (the first rank of a tree gather, every other).
 * Returns the soft limit then (0 when it cannot be read). */
uint64_t mc_boot_fd_limit_raise(void);
/* Connections a listener that every rank of a job may dial at once (the
 * root's, a rank's p2p listener) lets authenticate together: 1024, or fewer
 * when the fd limit is low (the process is a rank that needs fds of its
 * own). Lifts the soft fd limit first (mc_boot_fd_limit_raise). With fewer
 * than the ranks that dial at once (the first rank of a tree gather on a
 * loaded host), the listener evicts connections whose dialer has not yet
 * been scheduled to authenticate, and each evicted dialer pauses and dials
 * again. */
int mc_boot_max_pending(void);
/* Waits for the next authenticated connection (the wait's deadline, abort
 * flag and check), moving the others on meanwhile; for an acceptor that
 * only this thread uses. On failure the listener's sock.err and sock.end
 * say why. */
ncclResult_t mc_boot_acceptor_accept(struct mc_boot_acceptor *a, const struct mc_wait *w,
                                     struct mc_sock *conn_out);

/*
 * Connects to `to` (NCCL's retries of refused connects, through the
 * non-blocking mc_sock_connect_start/poll), then authenticates both ways
 * with key; the server must be answering meanwhile (the root's thread, a
 * rank's listener service). A connection closed before the verdict (a
 * server evicting it under a flood of connections) is retried within the
 * wait. On failure conn_out->err and ->end say why and nothing is open:
 * ncclInvalidUsage when the server rejected our proof (another secret),
 * ncclRemoteError when the server did not prove the secret or broke the
 * protocol (*is_auth_failure_out is then true; it may be NULL), else the
 * connect's codes. Logs nothing.
 */
ncclResult_t mc_boot_auth_connect(const union mc_sockaddr *to, uint64_t magic, uint32_t type,
                                  const uint8_t key[MC_BOOT_KEY_BYTES], const struct mc_wait *w,
                                  struct mc_sock *conn_out, bool *is_auth_failure_out);

/* ---------- root (boot_root.c) ---------- */

/* Starts a root listening on addr (port 0: ephemeral) in a thread of this
 * process, accepting ranks that prove they know secret; bound_out gets the
 * real address. */
ncclResult_t mc_boot_root_create(const union mc_sockaddr *addr, uint64_t magic,
                                 const uint8_t secret[MC_BOOT_SECRET_BYTES],
                                 union mc_sockaddr *bound_out);

#endif /* MC_BOOTSTRAP_INT_H */
