/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to the Mesh net (src/net/mesh/): hosts cabled directly to each
 * other, every link its own subnet, no switch and no forwarding, so that no
 * single address of a host reaches every peer.
 *
 *   mesh_nic.c        the mesh NICs: which interfaces and addresses, speed,
 *                     lane (fast / management), which carry data;
 *   mesh_handle.c     the 128-byte handle and the handshake messages, as
 *                     explicit big-endian byte layouts;
 *   mesh_handshake.c  the per-context handshake thread: listening sockets on
 *                     every mesh address, challenge-response authentication
 *                     of every accepted socket, connections filed under
 *                     their listen comm;
 *   mesh_connect.c    connect: the local NIC on the peer's subnet, the
 *                     non-blocking connect and the connector's handshake;
 *   mesh_discover.c   discovery: announcements over the links themselves
 *                     (UDP, MESHCCL_MESH_PORT), the table of hosts, the
 *                     graph and routing table rebuilt from it (a snapshot
 *                     readers share), the mesh logged once stable;
 *   mesh_reliable.c   the comm NCCL drives: sequence numbers and
 *                     acknowledgements over the socket net's comm
 *                     (net_socket_int.h), replaced by a new route when a
 *                     link goes down, without losing or repeating a byte;
 *   mesh_net.c        the ops table: devices, listen / accept;
 *   mesh_orders.c     the node_orders op: channel rings along the cables.
 *
 * Relay: a connector without a common subnet with the listener sends a
 * relay request to the next host of its route (on that host's handshake
 * port, after reading its challenge); that host checks it, connects onward
 * (to the listener, or with a relay request to its own next hop) and hands
 * both sockets to its relay service (mesh_relay.h). The connector's
 * handshake then runs end to end through the relays, untouched.
 *
 * Authentication: every socket of a connection (control and data) proves,
 * in both directions, that its end knows the communicator's key:
 *   acceptor  -> connector  CHALLENGE  magic, version, nonce_a
 *   connector -> acceptor   RESPONSE   magic, version, listen id, conn id,
 *                                      connector host, socket index, n_socks,
 *                                      nonce_c, MAC_c
 *   acceptor  -> connector  CONFIRM    magic, MAC_a
 * MAC_x = HMAC-SHA256(key, "mesh" | role x | nonce_a | nonce_c | listen id |
 * conn id | connector host | index | n_socks), the role byte ('C' or 'A')
 * keeping either MAC from being replayed as the other. key =
 * HMAC-SHA256(secret, "meshccl mesh key" | comm id): the communicator's
 * secret, else MESHCCL_SECRET, else empty (integrity only, said at INFO).
 */
#ifndef MC_NET_MESH_INT_H
#define MC_NET_MESH_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/crypto.h"
#include "mesh_graph.h"
#include "mesh_relay.h"
#include "net/net.h"
#include "net/net_auth.h"
#include "socket/socket.h"

#define MC_NET_MESH_MAX_NICS 16

enum mc_net_mesh_lane { MC_NET_MESH_LANE_MGMT = 0, MC_NET_MESH_LANE_FAST = 1 };

/* One address of one interface (an interface with two addresses is two NICs). */
struct mc_net_mesh_nic {
  char name[MC_IF_NAME_BYTES];
  union mc_sockaddr addr; /* port 0 */
  int prefix_len;
  int if_index;
  int speed_mbps;  /* the speed reported: link speed, or a lower tbf rate */
  int shaped_mbps; /* rate of the interface's root tbf qdisc; 0 when none */
  enum mc_net_mesh_lane lane;
  bool carries_data; /* fast lane, or management lane on a host without fast NICs */
};

/* ---------- mesh_nic.c ---------- */

/* What the NIC rules need to know, so that they can be tested without the
 * host's interfaces: spec strings may be NULL (unset). */
struct mc_net_mesh_nic_rules {
  const char *mesh_ifname; /* MESHCCL_MESH_IFNAME */
  const char *mgmt_ifname; /* NCCL_SOCKET_IFNAME */
  const char *lanes;       /* MESHCCL_MESH_LANES */
  int fast_mbps;           /* MESHCCL_MESH_FAST_MBPS */
};

/*
 * Chooses the mesh NICs among candidates (every address of every interface
 * that is up, speeds filled in): the interfaces MESHCCL_MESH_IFNAME selects,
 * else every interface but loopback, docker*, virbr* and those
 * NCCL_SOCKET_IFNAME selects, else those too, else loopback; IPv6
 * link-local addresses only when nothing else is left. Sets lanes and
 * carries_data. `why_out` receives one line saying which rule chose.
 * ncclInvalidUsage naming the variables and the interfaces that exist when
 * nothing is chosen or MESHCCL_MESH_LANES is malformed. Pure.
 */
ncclResult_t mc_net_mesh_nics_select(const struct mc_net_mesh_nic *cands, int n_cands,
                                     const struct mc_net_mesh_nic_rules *rules,
                                     struct mc_net_mesh_nic *nics, int max_nics, int *n_nics_out,
                                     char *why_out, size_t why_bytes);

/* The same choice without logging, with mgmt_ifname (may be NULL) taken as
 * the management interface when NCCL_SOCKET_IFNAME is unset: what a host
 * would offer the mesh, for the communicator's decisions. */
ncclResult_t mc_net_mesh_nics_probe(const char *mgmt_ifname, struct mc_net_mesh_nic *nics,
                                    int max_nics, int *n_nics_out);

/* The host's mesh NICs (getifaddrs, /sys/class/net/<if>/speed below
 * MESHCCL_SYSFS_ROOT, the parameters), logged in one INFO line; mgmt_ifname
 * (may be NULL) is the management interface when NCCL_SOCKET_IFNAME is
 * unset (the bootstrap's). */
ncclResult_t mc_net_mesh_nics_find(const char *mgmt_ifname, struct mc_net_mesh_nic *nics,
                                   int max_nics, int *n_nics_out);

const char *mc_net_mesh_lane_str(enum mc_net_mesh_lane lane);
/* "10.1.12.0/24" (the network of addr under prefix_len). Returns buf. */
const char *mc_net_mesh_subnet_str(const union mc_sockaddr *addr, int prefix_len, char *buf,
                                   size_t buf_bytes);
/* True when a (prefix a_len) and b (prefix b_len) are on one subnet: same
 * family, same prefix length and same network. */
bool mc_net_mesh_same_subnet(const union mc_sockaddr *a, int a_len, const union mc_sockaddr *b,
                             int b_len);

/* ---------- mesh_handle.c ---------- */

#define MC_NET_MESH_MAGIC      0x4d455348u /* "MESH" */
#define MC_NET_MESH_VERSION    1
#define MC_NET_MESH_HDR_BYTES  32 /* fixed part of the handle */
#define MC_NET_MESH_ADDR_BYTES (MC_NET_HANDLE_BYTES - MC_NET_MESH_HDR_BYTES)
/* An address entry: family, prefix, lane, port (2), then 4 or 16 bytes. */
#define MC_NET_MESH_ENTRY4_BYTES 9
#define MC_NET_MESH_ENTRY6_BYTES 21
#define MC_NET_MESH_MAX_ADDRS    (MC_NET_MESH_ADDR_BYTES / MC_NET_MESH_ENTRY4_BYTES)

struct mc_net_mesh_addr {
  union mc_sockaddr addr; /* with the handshake port */
  int prefix_len;
  enum mc_net_mesh_lane lane;
};

/* What listen writes into the handle (decoded form). */
struct mc_net_mesh_handle {
  uint64_t host_hash; /* the listener's host (mc_host_hash) */
  uint64_t listen_id; /* the listen comm, within that host's context */
  int n_socks;        /* data sockets per connection (the connector adopts them) */
  int n_threads;
  uint32_t inline_bytes;
  uint32_t min_task_bytes;
  int n_addrs; /* at most MC_NET_MESH_MAX_ADDRS fit the wire; more is an encode error */
  struct mc_net_mesh_addr addrs[MC_NET_MESH_MAX_NICS];
};

/* Bytes the addresses take in a handle. */
size_t mc_net_mesh_handle_addr_bytes(const struct mc_net_mesh_addr *addrs, int n_addrs);
/* Writes MC_NET_HANDLE_BYTES bytes. ncclInvalidUsage naming MESHCCL_MESH_IFNAME
 * when the addresses do not fit. */
ncclResult_t mc_net_mesh_handle_encode(const struct mc_net_mesh_handle *h, void *buf);
/* Reads a handle; ncclInvalidArgument saying what is wrong (magic, version,
 * an address entry) when it is not a mesh handle. */
ncclResult_t mc_net_mesh_handle_decode(const void *buf, struct mc_net_mesh_handle *h_out);

/* The handshake of every mesh socket is net_auth.h's, in the Mesh net's
 * domain (mc_net_mesh_auth: "MSHC", "MSHR", "MSHA"; MACs under "mesh"). */
#define MC_NET_MESH_NONCE_BYTES     MC_NET_AUTH_NONCE_BYTES
#define MC_NET_MESH_CHALLENGE_BYTES MC_NET_AUTH_CHALLENGE_BYTES
#define MC_NET_MESH_RESPONSE_BYTES  MC_NET_AUTH_RESPONSE_BYTES
#define MC_NET_MESH_CONFIRM_BYTES   MC_NET_AUTH_CONFIRM_BYTES

extern const struct mc_net_auth_domain mc_net_mesh_auth;

/* ---------- relay request (mesh_handle.c) ---------- */

/*
 * RELAY REQUEST, connector (or relay) -> next hop, after reading the next
 * hop's challenge (whose nonce it binds), 192 bytes:
 *   magic "MRLY" (4), version (1), hops left (1), 0 (2), conn id (8),
 *   origin host (8), 0 (8), the listener's 128-byte handle, MAC (32)
 * MAC = HMAC-SHA256(discovery key, "mrly" | nonce of the next hop's
 * challenge | the 160 bytes before the MAC).
 * REFUSAL, relay -> connector instead of the final challenge, 24 bytes:
 *   magic "MRNO" (4), version (1), reason (1), 0 (2), relay host (8), 0 (8)
 */
#define MC_NET_MESH_RELAY_MAGIC     0x4d524c59u /* "MRLY" */
#define MC_NET_MESH_REFUSAL_MAGIC   0x4d524e4fu /* "MRNO" */
#define MC_NET_MESH_RELAY_HDR_BYTES 32
#define MC_NET_MESH_RELAY_REQ_BYTES                                                                \
  (MC_NET_MESH_RELAY_HDR_BYTES + MC_NET_HANDLE_BYTES + MC_SHA256_BYTES)
#define MC_NET_MESH_REFUSAL_BYTES MC_NET_MESH_CHALLENGE_BYTES
#define MC_NET_MESH_MAX_HOPS      16

struct mc_net_mesh_relay_req {
  int hops_left; /* links the request may still cross after the host receiving it */
  uint64_t conn_id;
  uint64_t origin_host;
  uint8_t handle[MC_NET_HANDLE_BYTES]; /* the listener's, verbatim */
};

enum mc_net_mesh_refusal {
  MC_NET_MESH_REFUSE_NONE = 0,
  MC_NET_MESH_REFUSE_BAD_MAC,      /* not of this mesh (secret) */
  MC_NET_MESH_REFUSE_MALFORMED,    /* bad handle or fields */
  MC_NET_MESH_REFUSE_UNKNOWN_DEST, /* destination not in the relay's table (yet) */
  MC_NET_MESH_REFUSE_HOP_LIMIT,    /* more hops needed than left: a loop or stale routes */
  MC_NET_MESH_REFUSE_NO_ADDR,      /* no announced handshake address to go on to */
  MC_NET_MESH_REFUSE_SELF,         /* the destination is the relay host itself */
  MC_NET_MESH_REFUSE_ONWARD,       /* connecting onward failed */
  MC_NET_MESH_REFUSE_BUSY,         /* the relay service is full or stopped */
  MC_NET_MESH_REFUSE_COUNT
};

const char *mc_net_mesh_refusal_str(int reason);
/* True for reasons that may go away once discovery has converged. */
bool mc_net_mesh_refusal_is_transient(int reason);
void mc_net_mesh_relay_req_encode(const struct mc_net_mesh_relay_req *r,
                                  const uint8_t key[MC_SHA256_BYTES],
                                  const uint8_t nonce[MC_NET_MESH_NONCE_BYTES], uint8_t *buf);
/* MC_NET_MESH_REFUSE_NONE when valid; MALFORMED for a wrong magic, version
 * or hop count, BAD_MAC when the MAC does not verify. Pure, never logs. */
enum mc_net_mesh_refusal mc_net_mesh_relay_req_decode(const uint8_t *buf,
                                                      const uint8_t key[MC_SHA256_BYTES],
                                                      const uint8_t nonce[MC_NET_MESH_NONCE_BYTES],
                                                      struct mc_net_mesh_relay_req *r_out);
bool mc_net_mesh_relay_req_is_one(const uint8_t *buf, size_t bytes);
void mc_net_mesh_refusal_encode(enum mc_net_mesh_refusal reason, uint64_t relay_host, uint8_t *buf);
bool mc_net_mesh_refusal_decode(const uint8_t *buf, int *reason_out, uint64_t *relay_host_out);

/* ---------- discovery (mesh_discover.c) ---------- */

/*
 * DATAGRAM (UDP to MESHCCL_MESH_PORT, at most MC_NET_MESH_DISC_MAX_BYTES):
 *   magic "MDSC" (4), version (1), number of records (1), 0 (2),
 *   sender host (8), sender context (8), records..., MAC (32)
 * RECORD (one context of one host, as it announced itself):
 *   host (8), context (8), version (8), name length (1), number of
 *   addresses (1), name, then per address: family 4|6 (1), prefix (1),
 *   lane (1), handshake port (2), speed Mb/s (4), interface name length
 *   (1), interface name, address (4 or 16)
 * MAC = HMAC-SHA256(discovery key, every byte before it). Integers are big
 * endian. A record's version grows with every announcement of its context;
 * a receiver keeps the newest version of each (host, context).
 */
#define MC_NET_MESH_DISC_MAGIC     0x4d445343u /* "MDSC" */
#define MC_NET_MESH_DISC_VERSION   1
#define MC_NET_MESH_DISC_HDR_BYTES 24
#define MC_NET_MESH_DISC_MAX_BYTES 1400 /* one Ethernet frame, no fragments */
#define MC_NET_MESH_MAX_ENTRIES    128  /* contexts a table holds */
#define MC_NET_MESH_MAX_RECS       16   /* records one datagram may carry */

struct mc_net_mesh_rec_addr {
  union mc_sockaddr addr; /* with the context's handshake port */
  int prefix_len;
  enum mc_net_mesh_lane lane;
  int speed_mbps;
  char if_name[MC_IF_NAME_BYTES];
};

struct mc_net_mesh_rec {
  uint64_t host_hash;
  uint64_t ctx_id;
  uint64_t version;
  char name[MC_MESH_HOST_NAME_BYTES];
  int n_addrs; /* 0..MC_MESH_MAX_ADDRS */
  struct mc_net_mesh_rec_addr addrs[MC_MESH_MAX_ADDRS];
};

enum mc_net_mesh_disc_err {
  MC_NET_MESH_DISC_OK = 0,
  MC_NET_MESH_DISC_SHORT,     /* truncated */
  MC_NET_MESH_DISC_MAGIC_BAD, /* not a discovery datagram */
  MC_NET_MESH_DISC_VERSION_BAD,
  MC_NET_MESH_DISC_MAC_BAD, /* another secret, or tampered */
  MC_NET_MESH_DISC_MALFORMED,
  MC_NET_MESH_DISC_OVERSIZED
};

/* Encodes as many of recs (from the first) as fit buf_bytes (at most
 * MC_NET_MESH_DISC_MAX_BYTES) into one datagram; *n_taken_out receives how
 * many. Returns the datagram's bytes (0 when not even one record fits). */
size_t mc_net_mesh_disc_encode(const uint8_t key[MC_SHA256_BYTES], uint64_t sender_host,
                               uint64_t sender_ctx, const struct mc_net_mesh_rec *recs, int n_recs,
                               int *n_taken_out, uint8_t *buf, size_t buf_bytes);
/* Checks and decodes a datagram. Pure, never logs; outputs written only on
 * MC_NET_MESH_DISC_OK. recs has room for MC_NET_MESH_MAX_RECS. */
enum mc_net_mesh_disc_err mc_net_mesh_disc_decode(const uint8_t *buf, size_t bytes,
                                                  const uint8_t key[MC_SHA256_BYTES],
                                                  uint64_t *sender_ctx_out,
                                                  struct mc_net_mesh_rec *recs, int *n_recs_out);
const char *mc_net_mesh_disc_err_str(enum mc_net_mesh_disc_err e);

struct mc_net_mesh_entry {
  struct mc_net_mesh_rec rec;
  uint64_t heard_ns; /* when a newer version last arrived */
};

/* Every (host, context) known, the context's own first. */
struct mc_net_mesh_table {
  int n;
  struct mc_net_mesh_entry e[MC_NET_MESH_MAX_ENTRIES];
};

enum mc_net_mesh_update {
  MC_NET_MESH_UPD_STALE = 0, /* same or older version: ignored */
  MC_NET_MESH_UPD_REFRESH,   /* newer version, same contents */
  MC_NET_MESH_UPD_CHANGED,   /* newer version, other contents */
  MC_NET_MESH_UPD_NEW,       /* a context not known before */
  MC_NET_MESH_UPD_FULL       /* new, but the table is full: dropped */
};

/* Merges one record: a newer version of a known (host, context) replaces
 * it, a new one is appended while there is room. Pure. */
enum mc_net_mesh_update mc_net_mesh_table_update(struct mc_net_mesh_table *t,
                                                 const struct mc_net_mesh_rec *r, uint64_t now_ns);
/* Drops entries (never the first, the context's own) not heard of for
 * max_age_ns; returns how many. */
int mc_net_mesh_table_expire(struct mc_net_mesh_table *t, uint64_t now_ns, uint64_t max_age_ns);

/* What the context knows of the mesh at one moment: immutable, shared by
 * reference count (mc_net_mesh_view_get / _put). */
struct mc_net_mesh_view {
  int refs;        /* atomic */
  uint64_t serial; /* grows with every rebuild */
  int self;        /* this host's canonical index in graph */
  struct mc_net_mesh_table table;
  struct mc_mesh_graph *graph;
  struct mc_mesh_route_table *routes;
};

struct mc_net_mesh_ctx;
/* The current view, referenced (NULL before discovery started). */
struct mc_net_mesh_view *mc_net_mesh_view_get(struct mc_net_mesh_ctx *ctx);
void mc_net_mesh_view_put(struct mc_net_mesh_view *v);
/* The freshest table entry of host_hash with an address on the subnet of
 * one of the context's NICs, preferring data NICs: its address (with the
 * handshake port) and the local NIC. false when none. */
bool mc_net_mesh_view_addr(const struct mc_net_mesh_ctx *ctx, const struct mc_net_mesh_view *v,
                           uint64_t host_hash, union mc_sockaddr *to_out, int *nic_out);
/* "3 hosts (a/00..01, b/..), ring" for messages. */
void mc_net_mesh_view_str(const struct mc_net_mesh_ctx *ctx, const struct mc_net_mesh_view *v,
                          char *buf, size_t bytes);

struct mc_net_mesh_disc;
struct pollfd;
/* Opens the discovery sockets and the first view (the host alone); close
 * frees them. Called by the handshake thread's start / stop. */
ncclResult_t mc_net_mesh_disc_open(struct mc_net_mesh_ctx *ctx);
void mc_net_mesh_disc_close(struct mc_net_mesh_ctx *ctx);
/* Adds the discovery sockets to a poll set; returns how many. */
int mc_net_mesh_disc_pollfds(struct mc_net_mesh_ctx *ctx, struct pollfd *pfd);
/* Receives, merges, announces when due, rebuilds and logs (handshake thread). */
void mc_net_mesh_disc_tick(struct mc_net_mesh_ctx *ctx, const struct pollfd *pfd, int n_pfd);

/* ---------- the reliability layer (mesh_reliable.c) ---------- */

/*
 * Messages of a connection are numbered from 0 in posting order at both
 * ends (the n-th isend matches the n-th irecv), so a sequence number never
 * travels with a message: within one set of TCP sockets nothing is lost or
 * reordered, and across a break both ends agree on where to restart through
 * the receiver's cumulative acknowledgement:
 *   ACK, receiver -> sender on the control socket's unused reverse
 *   direction, 8 bytes: the number of messages completely received (the
 *   next sequence number expected), big endian.
 * The first ACK on a resumed connection is sent at once, even if unchanged:
 * the sender waits for it and resends from there.
 * A resumed connection's handshake is the first one's, with the RESPONSE's
 * index field carrying MC_NET_MESH_RESUME_FLAG and the attempt number (under
 * the MAC like every field): the acceptor files its sockets under the
 * receive comm of that connection id instead of a listen comm.
 */
#define MC_NET_MESH_ACK_BYTES     8
#define MC_NET_MESH_RESUME_FLAG   0x80000000u
#define MC_NET_MESH_ATTEMPT_SHIFT 16
#define MC_NET_MESH_ATTEMPT_MASK  0x7fffu
#define MC_NET_MESH_INDEX_MASK    0xffffu

/* Per-slot flags of the bookkeeping (slot = seq % MC_NET_MAX_REQUESTS). */
#define MC_NET_MESH_SLOT_USED   0x1 /* posted by the caller, not yet released */
#define MC_NET_MESH_SLOT_POSTED 0x2 /* handed to the current socket comm */
#define MC_NET_MESH_SLOT_MOVED  0x4 /* the socket comm finished with it */

/* Sequence and acknowledgement bookkeeping of one connection end. Pure:
 * no sockets, no logging; the unit tests drive it alone. */
struct mc_net_mesh_rel {
  bool is_send;
  uint64_t next_seq; /* of the next message posted */
  uint64_t tail;     /* oldest message not yet released */
  /* The receiver's next expected message: every message below it is
   * completely received (send: as acknowledged; recv: as completed). */
  uint64_t acked;
  uint8_t slot[MC_NET_MAX_REQUESTS];
};

void mc_net_mesh_rel_init(struct mc_net_mesh_rel *r, bool is_send);
/* A new message: false when MC_NET_MAX_REQUESTS are held (try later). */
bool mc_net_mesh_rel_post(struct mc_net_mesh_rel *r, uint64_t *seq_out);
void mc_net_mesh_rel_posted(struct mc_net_mesh_rel *r, uint64_t seq);
/* The socket comm finished with seq (recv: received whole; the expected
 * number advances over every message finished in order). */
void mc_net_mesh_rel_moved(struct mc_net_mesh_rel *r, uint64_t seq);
/* An acknowledgement (send): false when it acknowledges a message never
 * sent (a protocol error); one not above the last is a duplicate, ignored. */
bool mc_net_mesh_rel_ack(struct mc_net_mesh_rel *r, uint64_t ack);
/* May the caller be told seq is done? send: acknowledged and out of the
 * socket comm's hands; recv: it and every earlier message received. */
bool mc_net_mesh_rel_is_done(const struct mc_net_mesh_rel *r, uint64_t seq);
void mc_net_mesh_rel_release(struct mc_net_mesh_rel *r, uint64_t seq);
/* A new connection replaces a broken one; expected is the receiver's next
 * expected message (its first ACK; a receiver passes its own). Messages
 * below it are complete; every message from it on is to be posted again
 * (send: resent from the caller's buffer; recv: received again, what came
 * of it before is overwritten). false when expected is impossible
 * (before an earlier acknowledgement or after the last message sent). */
bool mc_net_mesh_rel_resume(struct mc_net_mesh_rel *r, uint64_t expected);
/* The messages to hand to the socket comm, in order (at most max). */
int mc_net_mesh_rel_to_post(const struct mc_net_mesh_rel *r, uint64_t *seqs, int max);
void mc_net_mesh_ack_encode(uint64_t ack, uint8_t buf[MC_NET_MESH_ACK_BYTES]);
uint64_t mc_net_mesh_ack_decode(const uint8_t buf[MC_NET_MESH_ACK_BYTES]);

struct mc_net_mesh_comm;
struct mc_net_mesh_connect;
struct mc_net_sock_comm;
struct mc_net_mesh_ctx;
struct mc_net_mesh_group;

/* Wraps a connected socket comm (ownership moves) into a Mesh comm; a
 * receive comm registers under its connection id for resumes. link says
 * which link the connection uses, for messages. */
ncclResult_t mc_net_mesh_comm_create(struct mc_net_mesh_ctx *ctx, bool is_send,
                                     struct mc_net_sock_comm *sc, uint64_t conn_id,
                                     uint64_t peer_host, const uint8_t *handle, int nic,
                                     const char *link, struct mc_net_mesh_comm **comm_out);
ncclResult_t mc_net_mesh_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                               void **request);
ncclResult_t mc_net_mesh_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                               void **mhandles, void **request);
ncclResult_t mc_net_mesh_test(void *request, int *done, size_t *sizes);
ncclResult_t mc_net_mesh_comm_close(void *comm);
/* Handshake thread, ctx->mu held: is there a receive comm for this
 * connection from that host? / file one authenticated socket of a resume
 * (NULL when filed, else why not). */
bool mc_net_mesh_resume_known(struct mc_net_mesh_ctx *ctx, uint64_t conn_id, uint64_t peer_host);
/* Handshake thread, ctx->mu held, every tick: a receive comm whose caller
 * is idle (no receive posted, so no call) takes a resume that arrived and
 * sends its first acknowledgement, so that a sender waiting for it goes on. */
void mc_net_mesh_comms_tick(struct mc_net_mesh_ctx *ctx);
const char *mc_net_mesh_resume_file(struct mc_net_mesh_ctx *ctx, uint64_t conn_id,
                                    uint64_t peer_host, unsigned attempt, int index, int n_socks,
                                    int fd, const union mc_sockaddr *peer, int nic);

/* mesh_connect.c: a new route for a broken connection, without waiting:
 * resume_start prepares it, resume_progress moves it (ncclSuccess with
 * *done_out false: again later; an error: this attempt failed, said at
 * INFO only, the text in why_out), on success the 1 + n_socks sockets go
 * to socks (ownership moves) and link_out says which route. */
ncclResult_t mc_net_mesh_resume_start(struct mc_net_mesh_ctx *ctx, const uint8_t *handle,
                                      uint64_t conn_id, unsigned attempt, uint64_t deadline_ns,
                                      struct mc_net_mesh_connect **c_out);
ncclResult_t mc_net_mesh_resume_progress(struct mc_net_mesh_ctx *ctx, struct mc_net_mesh_connect *c,
                                         struct mc_sock *socks, bool *done_out, int *nic_out,
                                         char *link_out, size_t link_bytes, char *why_out,
                                         size_t why_bytes);
void mc_net_mesh_resume_free(struct mc_net_mesh_connect *c);
/* mesh_connect.c: NIC nic shares a subnet with one of the handle's
 * addresses (a connection leaving from it is direct, not relayed) / the
 * current view has a link up between this host and the handle's host and a
 * NIC of this host on it is up: a relayed connection to that host can move
 * back onto the cable (mesh_reliable.c). */
bool mc_net_mesh_nic_reaches(const struct mc_net_mesh_ctx *ctx, int nic, const uint8_t *handle);
bool mc_net_mesh_direct_up(struct mc_net_mesh_ctx *ctx, const uint8_t *handle);

/* mesh_discover.c: the interfaces whose carrier is down (hs thread);
 * true when anything changed. */
bool mc_net_mesh_nics_watch(struct mc_net_mesh_ctx *ctx);
/* A link is silent (mc_net_mesh_nics_watch) after MESHCCL_MESH_LINK_TIMEOUT_MS
 * without hearing its neighbour, and never before this many ms. */
#define MC_NET_MESH_SILENT_MIN_MS 3000
/* The host last heard on a NIC by discovery (0: none yet); any thread. */
uint64_t mc_net_mesh_nic_neighbour(const struct mc_net_mesh_ctx *ctx, int nic);
/* "mcl2 10.1.12.1 (subnet 10.1.12.0/24)" for messages. */
void mc_net_mesh_nic_str(const struct mc_net_mesh_ctx *ctx, int nic, char *buf, size_t bytes);
/* How every mesh line names a host: "host 2 (h2, ranks 4-5)" (node index and
 * ranks from the communicator, name from discovery: NCCL_HOSTID, else the
 * host name), "host h2 (3b29..)" when the communicator does not say (a
 * plugin), "host 3b29.." when discovery does not know it either. */
#define MC_NET_MESH_HOST_TEXT_BYTES 160
void mc_net_mesh_host_str(struct mc_net_mesh_ctx *ctx, uint64_t host_hash, char *buf, size_t bytes);
/* The same from a view already held (v may be NULL). */
void mc_net_mesh_host_label(const struct mc_net_mesh_ctx *ctx, const struct mc_net_mesh_view *v,
                            uint64_t host_hash, char *buf, size_t bytes);

/* ---------- failure reports (mesh_blame.c) ---------- */

#define MC_NET_MESH_CABLE_TEXT_BYTES 640

/* The cables of a connection's route, as they were when it was made. */
struct mc_net_mesh_route_desc {
  int n_hops; /* 0: not known */
  uint64_t hosts[MC_NET_MESH_MAX_HOPS + 1];
  /* hop i, from hosts[i]'s end, hosts named by mc_net_mesh_host_label:
   * "host 1 (h2, rank 1) mcl3 10.1.23.2 - host 2 (h3, rank 2) mcl2 10.1.23.3 (subnet 10.1.23.0/24)"
   */
  char cables[MC_NET_MESH_MAX_HOPS][MC_NET_MESH_CABLE_TEXT_BYTES];
  char path[768]; /* "host 3 (h4, rank 3) > host 0 (h1, rank 0) > ..." */
};

/* The route connection conn_id takes from src_host to dst_host on view v
 * (mc_mesh_route_pick, as connect and the relays choose it); for a direct
 * connection, the cable one of whose ends is at local_addr (this host's NIC;
 * may be NULL). false when v knows no route. Pure. */
bool mc_net_mesh_route_describe(const struct mc_net_mesh_ctx *ctx, const struct mc_net_mesh_view *v,
                                uint64_t src_host, uint64_t dst_host, uint64_t conn_id,
                                const union mc_sockaddr *local_addr,
                                struct mc_net_mesh_route_desc *d_out);
/* A direct connection's one cable from the connection's own ends, for when
 * v (may be NULL) does not know the route yet (discovery has not finished):
 * one hop from src_host to dst_host, this host's end on NIC local, the
 * peer's at address remote on the same subnet, its interface named when v's
 * table has the peer's record; a peer host 0 (not known) is "the host at"
 * its address. Pure. */
void mc_net_mesh_route_direct(const struct mc_net_mesh_ctx *ctx, const struct mc_net_mesh_view *v,
                              uint64_t src_host, uint64_t dst_host,
                              const struct mc_net_mesh_nic *local, const union mc_sockaddr *remote,
                              struct mc_net_mesh_route_desc *d_out);
/* The first hop of d whose hosts have no cable up between them on v (or one
 * of which v no longer knows), else -1. Pure. */
int mc_net_mesh_route_broken_hop(const struct mc_net_mesh_view *v,
                                 const struct mc_net_mesh_route_desc *d);
/* The hop a lost connection's report blames, -1 for none: none when its
 * peer's process closed it (is_peer_closed: the caller judged that, on a
 * relayed route from a view that still had every cable, so a view that
 * changed since does not turn it into a cable failure with the wrong time)
 * or d is not known; a direct route's one cable (nothing else was between
 * the two hosts, whether or not the link state says so yet: a silent cable,
 * discovery not finished); a relayed route's first broken hop on v
 * (mc_net_mesh_route_broken_hop). Pure. */
int mc_net_mesh_route_blame(const struct mc_net_mesh_view *v,
                            const struct mc_net_mesh_route_desc *d, bool is_peer_closed);

/* ---------- the context (mesh_net.c, mesh_handshake.c) ---------- */

#define MC_NET_MESH_MAX_PENDING 64 /* handshakes in flight; the oldest is evicted */
#define MC_NET_MESH_MAX_GROUPS  32 /* connections being assembled per listen comm */

/* Sockets of one connection, filed by the handshake thread. */
struct mc_net_mesh_group {
  struct mc_net_mesh_group *next;
  uint64_t conn_id;
  uint64_t peer_host;
  int n_socks;
  int n_got;
  uint64_t since_ns;
  int nic;               /* the local NIC the connection arrived on */
  struct mc_sock *socks; /* [n_socks + 1], fd -1 until that index arrived */
};

struct mc_net_mesh_listen {
  struct mc_net_mesh_listen *next;
  struct mc_net_mesh_ctx *ctx;
  uint64_t id;
  struct mc_net_mesh_group *groups; /* incomplete (ctx->mu) */
  int n_groups;
  struct mc_net_mesh_group *ready; /* complete, oldest first (ctx->mu) */
  /* Length of ready (atomic): accept looks at it before taking ctx->mu, so
   * that a caller polling accept never starves the handshake thread. */
  int n_ready;
};

/* Counters for tests and logs (atomics). */
struct mc_net_mesh_stats {
  int n_accepted_socks; /* sockets that passed authentication */
  int n_refused;        /* sockets closed: bad magic, MAC, silence, garbage, eviction */
  int n_bad_mac;        /* of which a MAC that did not verify */
  int n_timeouts;       /* of which silence past the handshake window */
  int n_relayed;        /* connection sockets this host relays (as a relay host) */
  int n_relay_refused;  /* relay requests refused */
  int n_disc_received;  /* discovery datagrams accepted */
  int n_disc_dropped;   /* discovery datagrams dropped: garbage, bad MAC, wrong interface */
  int n_breaks;         /* connection ends whose link went down */
  int n_resumed;        /* of which moved to a new route */
  int n_moved_back;     /* relayed send ends moved back onto a cable that came back */
  int n_lost;           /* of which lost for good (no route in time) */
};

struct mc_net_mesh_hs_thread;
struct mc_net_mesh_connect;

struct mc_net_mesh_ctx {
  const volatile uint32_t *abort_flag;
  uint8_t key[MC_SHA256_BYTES];
  bool is_authenticated; /* false: no secret, the key only checks integrity */
  uint64_t host_hash;
  int n_nics;
  struct mc_net_mesh_nic nics[MC_NET_MESH_MAX_NICS];
  int listen_fds[MC_NET_MESH_MAX_NICS]; /* bound to each NIC's address */
  int listen_ports[MC_NET_MESH_MAX_NICS];
  int n_threads; /* data path: NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD */
  int n_socks;
  uint32_t inline_bytes;
  uint32_t min_task_bytes;
  int handshake_ms;
  /* mu guards the listen comms and is held only briefly, by the handshake
   * thread and by listen / accept / close_listen; connect_mu serialises
   * connect calls, which do socket work, so that a caller polling connect
   * never starves the handshake thread. */
  pthread_mutex_t mu;
  struct mc_net_mesh_listen *listens; /* registered listen comms (mu) */
  pthread_mutex_t connect_mu;
  struct mc_net_mesh_connect *connects; /* unfinished connects (connect_mu) */
  unsigned rr;                          /* round-robin among equal NIC choices (connect_mu) */
  struct mc_net_mesh_stats stats;
  struct mc_net_mesh_hs_thread *hs; /* the handshake thread */
  /* Discovery and relay. */
  uint64_t ctx_id;                   /* random: this context among the host's */
  uint8_t disc_key[MC_SHA256_BYTES]; /* discovery and relay requests */
  int route_timeout_ms;              /* MESHCCL_MESH_ROUTE_TIMEOUT_MS */
  struct mc_net_mesh_disc *disc;     /* the handshake thread's */
  pthread_mutex_t view_mu;           /* guards view (the pointer only) */
  struct mc_net_mesh_view *view;     /* current snapshot (view_mu) */
  struct mc_mesh_relay *relay;       /* forwards relayed sockets */
  /* Failover. */
  int nic_down[MC_NET_MESH_MAX_NICS];  /* atomic: carrier or admin state down */
  struct mc_net_mesh_comm *recv_comms; /* open receive comms, for resumes (mu) */
  /* The communicator's hosts (mc_net_init_args.hosts; none in a plugin). */
  int n_host_names;
  struct mc_net_host_name *host_names;
};

/* mesh_handshake.c: binds a listening socket to every NIC's address and
 * starts the thread / stops and joins it and closes everything it holds. */
ncclResult_t mc_net_mesh_hs_start(struct mc_net_mesh_ctx *ctx);
void mc_net_mesh_hs_stop(struct mc_net_mesh_ctx *ctx);
/* Frees a group and closes its sockets (accepts NULL). */
void mc_net_mesh_group_free(struct mc_net_mesh_group *g);

/* mesh_connect.c: the connect op, and freeing unfinished connects at finalize. */
ncclResult_t mc_net_mesh_connect(void *ctx, int dev, const void *handle, void **send_comm);
void mc_net_mesh_connects_free(struct mc_net_mesh_ctx *ctx);

/* mesh_orders.c: the node_orders op (net.h), rings along the cables. */
ncclResult_t mc_net_mesh_node_orders(const struct mc_net_orders_args *args, int *n_orders_out,
                                     int **orders_out);

/* The mesh net's counters (tests). */
void mc_net_mesh_stats_get(void *ctx, struct mc_net_mesh_stats *stats_out);

/* Sets TCP_NODELAY and NCCL_SOCKET_SNDBUF / RCVBUF on a connection socket. */
void mc_net_mesh_sock_opts(int fd);

#endif /* MC_NET_MESH_INT_H */
