/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sockets: addresses (IPv4 and IPv6), interface choice, and non-blocking TCP
 * sockets whose every wait honours a deadline, an abort flag and an optional
 * fail-fast check. Mirrors NCCL's misc/socket.cc: the 12-byte handshake (magic
 * + type) that every accepted connection must pass, connect retries with
 * linear back-off, NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY rules.
 *
 * Error convention: functions taking a struct mc_sock leave a description of
 * a failure in sock->err and do NOT log; the caller, which knows the rank and
 * the role of the socket, records the error (MC_FAIL) with that text.
 * Functions without a socket (parsing, interface choice) record errors
 * themselves.
 */
#ifndef MC_SOCKET_H
#define MC_SOCKET_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "nccl.h"
#include "utils.h"

/* NCCL's union ncclSocketAddress: 28 bytes. */
union mc_sockaddr {
  struct sockaddr sa;
  struct sockaddr_in sin;
  struct sockaddr_in6 sin6;
};

#define MC_SOCKADDR_STRLEN 80 /* "[ffff:...:ffff%ifname]<65535>" fits */
#define MC_IF_NAME_BYTES   16
#define MC_MAX_IFS         64

/* ---------- addresses (sock_addr.c) ---------- */

/* Formats NCCL's way: "10.0.0.1<5000>", "fe80::1%eth0<5000>"; an unknown family
 * prints "(family N)". Cut to fit buf_bytes. Returns buf. */
const char *mc_sockaddr_str(const union mc_sockaddr *a, char *buf, size_t buf_bytes);
/* Length to pass to bind/connect for this family (0 for an unknown family). */
socklen_t mc_sockaddr_len(const union mc_sockaddr *a);
int mc_sockaddr_port(const union mc_sockaddr *a);
void mc_sockaddr_set_port(union mc_sockaddr *a, int port);
/* Same family, address and port (IPv6 scope ids count only when both are set). */
bool mc_sockaddr_equal(const union mc_sockaddr *a, const union mc_sockaddr *b);
/* Loopback (127/8, ::1, or ::ffff:127.x.y.z). */
bool mc_sockaddr_is_loopback(const union mc_sockaddr *a);

/*
 * Parses NCCL_COMM_ID syntax: "ipv4:port", "hostname:port", "[ipv6]:port",
 * "[ipv6%ifname]:port". `what` names the source in the error
 * ("NCCL_COMM_ID"). ncclInvalidArgument with a message naming the string and
 * the accepted forms on bad input.
 */
ncclResult_t mc_sockaddr_parse(const char *str, const char *what, union mc_sockaddr *addr_out);

/* ---------- interfaces (sock_ifaces.c) ---------- */

struct mc_ifc {
  char name[MC_IF_NAME_BYTES];
  union mc_sockaddr addr; /* port 0 */
  union mc_sockaddr mask;
  int index; /* if_nametoindex */
};

/* NCCL_SOCKET_IFNAME syntax: "eth,ib" prefixes, "^docker,lo" excludes, "=eth0" exact
 * names, "^=docker0" exact excludes; ":port" suffixes are accepted and ignored.
 * More than MC_IF_PATTERN_MAX_NAMES names is an error (NCCL silently keeps 16). */
#define MC_IF_PATTERN_MAX_NAMES 16
struct mc_if_pattern {
  bool exclude;
  bool exact;
  int n;
  char names[MC_IF_PATTERN_MAX_NAMES][MC_IF_NAME_BYTES * 4];
};

/* Parses a pattern; ncclInvalidUsage naming `what` and the value when empty or too long. */
ncclResult_t mc_if_pattern_parse(const char *spec, const char *what,
                                 struct mc_if_pattern *pattern_out);
/* True when the interface name passes the pattern. */
bool mc_if_pattern_match(const struct mc_if_pattern *pattern, const char *if_name);

/* Every running IPv4/IPv6 interface (IPv6 loopback skipped), the first address of
 * each name, in getifaddrs order. family: AF_UNSPEC, AF_INET or AF_INET6. */
ncclResult_t mc_if_list(int family, struct mc_ifc *ifs, int max_ifs, int *n_ifs_out);

/* Family requested by NCCL_SOCKET_FAMILY (AF_UNSPEC when unset or not recognised). */
int mc_if_family_param(void);

/* True when addr lies in the subnet of ifc (IPv6 link-local: same scope too). */
bool mc_if_subnet_match(const struct mc_ifc *ifc, const union mc_sockaddr *addr);

/*
 * Chooses the bootstrap interface among `ifs` (pure logic, testable):
 * - comm_id != NULL (NCCL_COMM_ID set): the interface whose subnet holds
 *   that address, else the one that owns route_src (the local address the
 *   kernel routes to comm_id through; may be NULL);
 * - else if ifname_spec != NULL: the first interface matching it;
 * - else NCCL's order: ib*, anything but docker/lo/virbr, docker, lo, virbr.
 * `why_out` (may be NULL) receives one line explaining the choice and the
 * rejections ("eth0 10.0.0.1: first interface outside ^docker,lo,virbr;
 * rejected: lo (loopback: last resort)"). With comm_id set,
 * NCCL_SOCKET_IFNAME is ignored, as in NCCL. Only the first MC_MAX_IFS
 * interfaces are considered. Outputs are written only on success;
 * ncclInvalidUsage naming the pattern and the interfaces that exist when
 * nothing fits.
 */
ncclResult_t mc_if_choose(const struct mc_ifc *ifs, int n_ifs, const char *ifname_spec,
                          const union mc_sockaddr *comm_id, const union mc_sockaddr *route_src,
                          struct mc_ifc *chosen_out, char *why_out, size_t why_bytes);

/*
 * Finds this host's bootstrap interface with NCCL_SOCKET_IFNAME,
 * NCCL_SOCKET_FAMILY and (when comm_id is not NULL) the route to comm_id,
 * and logs the choice at INFO (BOOTSTRAP|NET).
 */
ncclResult_t mc_if_find_bootstrap(const union mc_sockaddr *comm_id, struct mc_ifc *chosen_out);

/* ---------- interface speed (sock_ifspeed.c) ---------- */

/* What a net reports as an interface's speed, and where it came from. */
struct mc_if_speed {
  int mbps;        /* the lesser of the two below: the speed the nets report */
  int link_mbps;   /* /sys/class/net/<if>/speed, 10000 when unreadable (NCCL's default) */
  int shaped_mbps; /* rate of a root tbf qdisc on the interface, 0 when none */
};

/* The speed of if_name. Never fails: what cannot be read is left at the
 * link speed (or NCCL's default); the qdisc is not read under
 * MESHCCL_SYSFS_ROOT (a fake machine). One bounded rtnetlink request. */
void mc_if_speed(const char *if_name, struct mc_if_speed *out);

/* ---------- sockets (sock_io.c) ---------- */

/* Socket types carried in the handshake (NCCL's numbers; meshccl's own from 0x100). */
enum mc_sock_type {
  MC_SOCK_TYPE_UNKNOWN = 0,
  MC_SOCK_TYPE_BOOTSTRAP = 1,
  MC_SOCK_TYPE_PROXY = 2,
  MC_SOCK_TYPE_NET = 3,
  MC_SOCK_TYPE_ROOT = 0x100 /* rank <-> bootstrap root control connection */
};

/* How long a wait may last and what ends it early. */
struct mc_wait {
  struct mc_deadline dl;
  const volatile uint32_t *abort_flag; /* may be NULL */
  /* Optional fail-fast probe, called between polls (every tick: 10 ms,
   * growing to 80 ms while nothing happens, mc_wait_tick_next); a failure
   * result ends the wait with that result. */
  ncclResult_t (*check)(void *arg);
  void *check_arg;
};

#define MC_SOCK_ERR_BYTES 256

struct mc_sock {
  int fd;
  union mc_sockaddr addr; /* peer for connected sockets, local for listeners */
  uint64_t magic;
  uint32_t type;
  /* Why the wait ended: MC_SOCK_END_* when a wait failed. */
  int end;
  char err[MC_SOCK_ERR_BYTES];
};

enum mc_sock_end {
  MC_SOCK_END_NONE = 0,
  MC_SOCK_END_ERROR,   /* system or peer error: err says which */
  MC_SOCK_END_CLOSED,  /* peer closed or reset the connection */
  MC_SOCK_END_TIMEOUT, /* deadline passed */
  MC_SOCK_END_ABORT,   /* abort flag */
  MC_SOCK_END_CHECK    /* the check probe failed (it reported the cause) */
};

/* A connection accepted but whose handshake is still incomplete. */
struct mc_sock_pending {
  int fd;
  union mc_sockaddr peer;
  uint8_t hs[12];
  size_t hs_got;
  uint64_t since_ns;
};

#define MC_SOCK_MAX_PENDING 64

struct mc_listener {
  struct mc_sock sock;
  struct mc_sock_pending pending[MC_SOCK_MAX_PENDING];
  int n_pending;
  int n_rejected; /* connections dropped for a bad or missing handshake */
};

/* Sets fd -1 and clears the error. */
void mc_sock_init(struct mc_sock *s);

/*
 * Binds and listens on local (its port, or an ephemeral one when 0; a fixed
 * port gets SO_REUSEADDR). Accepted connections must present magic and type.
 * The bound address (with the real port) is in listener->sock.addr.
 */
ncclResult_t mc_sock_listen(const union mc_sockaddr *local, uint64_t magic, uint32_t type,
                            struct mc_listener *listener);

/*
 * Accepts the next connection that presents the listener's magic and type.
 * Connections with a wrong magic or type, that close before the handshake, or
 * that send nothing for the handshake window (30 s) are closed and logged at
 * INFO, and the wait continues; when MC_SOCK_MAX_PENDING connections wait for
 * their handshake, a newcomer evicts the oldest. Blocks until one arrives or
 * the wait ends.
 */
ncclResult_t mc_sock_accept(struct mc_listener *listener, const struct mc_wait *w,
                            struct mc_sock *conn_out);

/*
 * Connects to `to` and sends the handshake (magic, type). Refused, unreachable
 * and timed-out attempts are retried with linear back-off
 * (NCCL_SOCKET_RETRY_SLEEP_MSEC, NCCL_SOCKET_RETRY_CNT) within the wait.
 */
ncclResult_t mc_sock_connect(const union mc_sockaddr *to, uint64_t magic, uint32_t type,
                             const struct mc_wait *w, struct mc_sock *conn_out);

/*
 * Non-blocking connect, for callers that must never wait (the socket net's
 * connect): mc_sock_connect_start records the target and makes the first
 * attempt; each mc_sock_connect_poll call moves the connection on without
 * waiting and sets *done_out once the TCP connection is up and the 12-byte
 * handshake (magic, type) is sent. Refused, unreachable and timed-out
 * attempts are retried with mc_sock_connect's back-off (the pause is a
 * time stamp, not a sleep), up to NCCL_SOCKET_RETRY_CNT attempts. Failures
 * are described in c->sock.err (nothing is logged); the socket is then
 * closed. An attempt unanswered for MC_SOCK_CONNECT_ANSWER_MS is made again
 * on a fresh socket. On success c->sock is a connected, non-blocking socket that the
 * caller owns (close it with mc_sock_close).
 */
struct mc_sock_async {
  struct mc_sock sock;
  int attempt;          /* connect attempts made */
  bool is_connecting;   /* connect() in progress on sock.fd */
  uint64_t sent_ns;     /* when that connect() was made (mc_time_ns) */
  uint64_t retry_at_ns; /* next attempt not before this (mc_time_ns) */
  uint8_t hs[12];
  size_t hs_sent;
  ncclResult_t failed; /* first failure, kept: later polls return it again */
};

ncclResult_t mc_sock_connect_start(const union mc_sockaddr *to, uint64_t magic, uint32_t type,
                                   struct mc_sock_async *c);
ncclResult_t mc_sock_connect_poll(struct mc_sock_async *c, bool *done_out);
/* Whether the non-blocking connect() in progress on fd is over (polled, no
 * wait): false while it is not; else true and *err_out its outcome, 0 when
 * connected, else the errno it failed with. */
bool mc_sock_connect_over(int fd, int *err_out);

/*
 * A connect() still unanswered this long after it was made lost its SYN or
 * the SYN-ACK: the kernel would send the next SYN only 3 s after the first,
 * then 7, 15, 31 s (its timer starts at 1 s and doubles), so a few losses in
 * a row on a lossy link outlast init's timeout. Every connect of this
 * library (mc_sock_connect, mc_sock_connect_poll, the Mesh net's) then
 * closes that socket and connects again at once: one fresh SYN sequence a
 * CONNECT_ANSWER_MS. Not an attempt of NCCL_SOCKET_RETRY_CNT, which counts
 * refusals and errors; the caller's deadline still bounds the whole.
 */
#define MC_SOCK_CONNECT_ANSWER_MS 2000

/* Whether a connect() made at sent_ns (mc_time_ns) and not over yet is to be
 * made again (MC_SOCK_CONNECT_ANSWER_MS). */
bool mc_sock_connect_stale(uint64_t sent_ns);

/* Exact-length I/O. A peer close is MC_SOCK_END_CLOSED / ncclRemoteError. */
ncclResult_t mc_sock_send_all(struct mc_sock *s, const void *buf, size_t bytes,
                              const struct mc_wait *w);
ncclResult_t mc_sock_recv_all(struct mc_sock *s, void *buf, size_t bytes, const struct mc_wait *w);

/* Framed messages: uint32 length then payload. recv bounds the length by
 * max_bytes before reading (a larger length is a protocol error). */
ncclResult_t mc_sock_send_msg(struct mc_sock *s, const void *buf, size_t bytes,
                              const struct mc_wait *w);
ncclResult_t mc_sock_recv_msg(struct mc_sock *s, void *buf, size_t max_bytes, size_t *bytes_out,
                              const struct mc_wait *w);

/* Sends on `out` and receives on `in` at the same time (ring steps: no
 * deadlock whatever the buffer sizes). `out` and `in` may be the same socket. */
ncclResult_t mc_sock_sendrecv(struct mc_sock *out, const void *sbuf, size_t sbytes,
                              struct mc_sock *in, void *rbuf, size_t rbytes,
                              const struct mc_wait *w);

/* One transfer of mc_sock_io_multi. */
struct mc_sock_op {
  struct mc_sock *sock;
  bool is_send;
  void *buf;
  size_t bytes;
  size_t done; /* in/out: bytes moved so far (start at 0) */
  bool failed; /* out: the transfer that ended the call with an error */
};

#define MC_SOCK_MAX_OPS 8

/* Runs up to MC_SOCK_MAX_OPS transfers at once (sockets may repeat, one
 * direction each): NCCL's ncclSocketMultiOp. */
ncclResult_t mc_sock_io_multi(struct mc_sock_op *ops, int n_ops, const struct mc_wait *w);

/* Non-blocking probe: ncclSuccess with *readable_out when data (or EOF) is waiting. */
ncclResult_t mc_sock_poll_readable(struct mc_sock *s, int timeout_ms, bool *readable_out);

/* The check every wait of this file makes between polls, for callers that
 * poll their own sockets: the abort flag (MC_SOCK_END_ABORT), the wait's
 * probe (MC_SOCK_END_CHECK), the deadline (MC_SOCK_END_TIMEOUT), each
 * described in s->err ("... <doing> <s->addr>"); ncclSuccess: keep waiting. */
ncclResult_t mc_sock_wait_check(struct mc_sock *s, const struct mc_wait *w, const char *doing);

/* Wraps a connected fd that the caller accepted itself (taking ownership)
 * into s, with the options of every other connection (non-blocking,
 * TCP_NODELAY, NCCL_SOCKET_SNDBUF/RCVBUF). */
void mc_sock_adopt(struct mc_sock *s, int fd, const union mc_sockaddr *peer, uint64_t magic,
                   uint32_t type);

/* Closes (accepts NULL and closed sockets). */
void mc_sock_close(struct mc_sock *s);
void mc_listener_close(struct mc_listener *l);

/* ---------- liveness options (sock_opts.c) ---------- */

/* Sets TCP keepalive (probes after timeout_ms / 3, then every timeout_ms /
 * 10, at least 1 s each) and TCP_USER_TIMEOUT = timeout_ms on a connected TCP socket,
 * so that a dead link or peer host fails the socket's next send or recv with
 * ETIMEDOUT within about timeout_ms, whether the connection is idle or
 * waiting for acknowledgements. Non-IP sockets are left alone. Describes a
 * failure in s->err (nothing is logged); ncclSystemError then. */
ncclResult_t mc_sock_set_liveness(struct mc_sock *s, int64_t timeout_ms);

/* Sets SO_SNDBUF / SO_RCVBUF on fd to NCCL_SOCKET_SNDBUF / NCCL_SOCKET_RCVBUF
 * where they are positive (else the kernel's default and autotuning stay);
 * best effort, as NCCL's misc/socket.cc. */
void mc_sock_set_buf_sizes(int fd);

#endif /* MC_SOCKET_H */
