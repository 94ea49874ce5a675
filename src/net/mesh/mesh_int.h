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
 *   mesh_net.c        the ops table: devices, listen / accept; the data
 *                     path is the socket net's (net_socket_int.h).
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
#include "net/net.h"
#include "socket/socket.h"

#define MC_NET_MESH_MAX_NICS 16

enum mc_net_mesh_lane { MC_NET_MESH_LANE_MGMT = 0, MC_NET_MESH_LANE_FAST = 1 };

/* One address of one interface (an interface with two addresses is two NICs). */
struct mc_net_mesh_nic {
  char name[MC_IF_NAME_BYTES];
  union mc_sockaddr addr; /* port 0 */
  int prefix_len;
  int if_index;
  int speed_mbps;
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

#define MC_NET_MESH_NONCE_BYTES     16
#define MC_NET_MESH_CHALLENGE_BYTES 24
#define MC_NET_MESH_RESPONSE_BYTES  88
#define MC_NET_MESH_CONFIRM_BYTES   40

struct mc_net_mesh_response {
  uint64_t listen_id;
  uint64_t conn_id;
  uint64_t host_hash; /* the connector's host */
  uint32_t index;     /* 0: control socket, 1..n_socks: data socket */
  uint32_t n_socks;
  uint8_t nonce_c[MC_NET_MESH_NONCE_BYTES];
  uint8_t mac[MC_SHA256_BYTES];
};

void mc_net_mesh_challenge_encode(const uint8_t nonce_a[MC_NET_MESH_NONCE_BYTES], uint8_t *buf);
/* false when magic or version is wrong. */
bool mc_net_mesh_challenge_decode(const uint8_t *buf, uint8_t nonce_a_out[MC_NET_MESH_NONCE_BYTES]);
void mc_net_mesh_response_encode(const struct mc_net_mesh_response *r, uint8_t *buf);
bool mc_net_mesh_response_decode(const uint8_t *buf, struct mc_net_mesh_response *r_out);
void mc_net_mesh_confirm_encode(const uint8_t mac[MC_SHA256_BYTES], uint8_t *buf);
bool mc_net_mesh_confirm_decode(const uint8_t *buf, uint8_t mac_out[MC_SHA256_BYTES]);

/* MAC of role 'C' (connector) or 'A' (acceptor) over the response's fields. */
void mc_net_mesh_mac(const uint8_t key[MC_SHA256_BYTES], char role,
                     const uint8_t nonce_a[MC_NET_MESH_NONCE_BYTES],
                     const struct mc_net_mesh_response *r, uint8_t mac_out[MC_SHA256_BYTES]);

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

/* The mesh net's counters (tests). */
void mc_net_mesh_stats_get(void *ctx, struct mc_net_mesh_stats *stats_out);

/* Sets TCP_NODELAY and NCCL_SOCKET_SNDBUF / RCVBUF on a connection socket. */
void mc_net_mesh_sock_opts(int fd);

#endif /* MC_NET_MESH_INT_H */
