/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Mesh net's connect: which local NIC reaches the listener (the one on a
 * subnet the listener's handle also lists), and the non-blocking set-up of
 * the connection's sockets (control + n_socks data), each bound to that
 * NIC's address, connected to the listener's address on that subnet and
 * taken through the connector's half of the handshake (mesh_int.h). Like
 * NCCL's socket net (transport/net_socket.cc), connect returns NULL until
 * every socket is ready and keeps its state between calls, keyed by the
 * handle's address and contents; then it builds the socket net's comm.
 *
 * Without a common subnet, the connection is relayed: discovery's routing
 * table (mesh_discover.c) gives the route (mc_mesh_route_pick with the
 * connection id, so that all sockets of a connection take one path and
 * connections spread over equal paths); every socket connects to the next
 * host's handshake port, reads its challenge, sends a relay request
 * (mesh_int.h) and then runs the ordinary handshake, which the relays pass
 * through untouched to the listener: authentication stays end to end.
 * While no route is known, connect keeps returning NULL, for at most
 * MESHCCL_MESH_ROUTE_TIMEOUT_MS.
 */
#include "mesh_int.h"

#include "check.h"
#include "log.h"
#include "net/net_socket_int.h"
#include "params.h"

#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define FIRST_RETRY_MS 5
#define MAX_RETRY_MS   1000

enum cs_state {
  CS_CONNECT,
  CS_RELAY_CHALLENGE, /* relayed: the first relay's challenge */
  CS_RELAY_REQ,       /* relayed: our relay request */
  CS_CHALLENGE,
  CS_RESPONSE,
  CS_CONFIRM,
  CS_DONE
};

struct csock {
  struct mc_sock sock; /* addr: the listener's */
  enum cs_state state;
  bool is_connecting;
  int attempt;
  uint64_t retry_at_ns;
  uint64_t sent_ns; /* the connect() in progress was made (MC_SOCK_CONNECT_ANSWER_MS) */
  uint64_t up_ns;   /* TCP connected: the handshake window starts */
  uint8_t nonce_a[MC_NET_MESH_NONCE_BYTES];
  uint8_t buf[MC_NET_MESH_RELAY_REQ_BYTES];
  size_t done;
  struct mc_net_auth_response resp;
};

struct mc_net_mesh_connect {
  struct mc_net_mesh_connect *next;
  const void *handle_ptr;
  uint8_t handle_bytes[MC_NET_HANDLE_BYTES];
  struct mc_net_mesh_handle h;
  int nic;                /* local NIC */
  union mc_sockaddr to;   /* the listener's address on that NIC's subnet */
  union mc_sockaddr from; /* the NIC's address, port 0 */
  uint64_t conn_id;
  int n; /* 1 + n_socks */
  struct csock *socks;
  /* Relayed: no common subnet with the listener. */
  bool is_relayed;
  bool has_route;
  int hops; /* links of the route */
  uint64_t route_deadline_ns;
  /* A resume (mesh_reliable.c): failures are said at INFO into why, the
   * attempt is retried by the caller; index_flags go into every RESPONSE. */
  bool is_quiet;
  char why[512];
  uint32_t index_flags;
  char link[384];           /* the route, for messages */
  uint64_t tcp_deadline_ns; /* a resume's TCP connections (0: none yet) */
};

static ncclResult_t cfail(struct mc_net_mesh_connect *c, ncclResult_t res, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ncclResult_t cfail(struct mc_net_mesh_connect *c, ncclResult_t res, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(c->why, sizeof(c->why), fmt, ap);
  va_end(ap);
  if (c->is_quiet)
    return res;
  return MC_FAIL(res, "%s", c->why);
}

static bool is_aborted(const struct mc_net_mesh_ctx *ctx)
{
  return (ctx->abort_flag != NULL) && (__atomic_load_n(ctx->abort_flag, __ATOMIC_ACQUIRE) != 0);
}

static void connect_free(struct mc_net_mesh_connect *c)
{
  if (c == NULL)
    return;
  for (int i = 0; (c->socks != NULL) && (i < c->n); i++)
    mc_sock_close(&c->socks[i].sock);
  free(c->socks);
  free(c);
}

void mc_net_mesh_connects_free(struct mc_net_mesh_ctx *ctx)
{
  while (ctx->connects != NULL) {
    struct mc_net_mesh_connect *c = ctx->connects;
    ctx->connects = c->next;
    connect_free(c);
  }
}

/* ---------- choosing the NIC ---------- */

static void addrs_str(const struct mc_net_mesh_addr *addrs, int n, char *buf, size_t bytes)
{
  size_t used = 0;

  buf[0] = '\0';
  for (int i = 0; i < n; i++) {
    char s[MC_SOCKADDR_STRLEN];
    mc_str_appendf(buf, bytes, &used, "%s%s", (i > 0) ? " " : "",
                   mc_net_mesh_subnet_str(&addrs[i].addr, addrs[i].prefix_len, s, sizeof(s)));
  }
}

/*
 * No route to the listener's host within MESHCCL_MESH_ROUTE_TIMEOUT_MS:
 * discovery never heard of it, or heard of it but no chain of links leads
 * there. ncclRemoteError naming both hosts, their subnets and the mesh as
 * known here.
 */
static ncclResult_t route_fail(struct mc_net_mesh_ctx *ctx, struct mc_net_mesh_connect *c,
                               const struct mc_net_mesh_view *v)
{
  struct mc_net_mesh_addr mine[MC_NET_MESH_MAX_NICS];
  char peer[512];
  char local[512];
  char mesh[1024];
  char why[512] = "";
  char self[MC_NET_MESH_HOST_TEXT_BYTES];
  char dst[MC_NET_MESH_HOST_TEXT_BYTES];

  for (int i = 0; i < ctx->n_nics; i++) {
    mine[i].addr = ctx->nics[i].addr;
    mine[i].prefix_len = ctx->nics[i].prefix_len;
  }
  addrs_str(c->h.addrs, c->h.n_addrs, peer, sizeof(peer));
  addrs_str(mine, ctx->n_nics, local, sizeof(local));
  mc_net_mesh_view_str(ctx, v, mesh, sizeof(mesh));
  mc_net_mesh_host_label(ctx, v, ctx->host_hash, self, sizeof(self));
  mc_net_mesh_host_label(ctx, v, c->h.host_hash, dst, sizeof(dst));
  if (v != NULL) {
    for (int i = 0; i < v->graph->n_hosts; i++) {
      if (v->graph->hosts[i].host_hash == c->h.host_hash)
        mc_mesh_route_unreachable_str(v->graph, v->self, i, why, sizeof(why));
    }
  }
  return cfail(c, ncclRemoteError,
               "NET/Mesh: %s (subnets %s) shares no subnet with %s (subnets "
               "%s) and found no route to it within MESHCCL_MESH_ROUTE_TIMEOUT_MS=%d ms%s%s; "
               "the mesh known here: %s. Check the cabling between them, that every host runs "
               "NCCL_NET=Mesh with one MESHCCL_MESH_PORT, and MESHCCL_MESH_IFNAME",
               self, local, dst, peer, ctx->route_timeout_ms, (why[0] != '\0') ? ": " : "", why,
               mesh);
}

/* Looks the route up in the current view. Sets has_route, the local NIC and
 * the first relay's address, or leaves has_route false (try again later). */
static ncclResult_t route_find(struct mc_net_mesh_ctx *ctx, struct mc_net_mesh_connect *c)
{
  struct mc_net_mesh_view *v = mc_net_mesh_view_get(ctx);
  struct mc_mesh_path path;
  ncclResult_t res = ncclSuccess;
  int dst = -1;
  char route[1024];
  char dst_label[MC_NET_MESH_HOST_TEXT_BYTES];
  char a[MC_SOCKADDR_STRLEN];
  char b[MC_SOCKADDR_STRLEN];
  char sub[MC_SOCKADDR_STRLEN];
  size_t used = 0;

  if (v != NULL) {
    for (int i = 0; i < v->graph->n_hosts; i++) {
      if (v->graph->hosts[i].host_hash == c->h.host_hash)
        dst = i;
    }
  }
  if ((dst < 0) || (mc_mesh_route_hops(v->routes, v->self, dst) < 2) ||
      (mc_mesh_route_pick(v->routes, v->self, dst, c->conn_id, &path) != ncclSuccess) ||
      !mc_net_mesh_view_addr(ctx, v, v->graph->hosts[path.hosts[1]].host_hash, &c->to, &c->nic)) {
    if (mc_time_ns() > c->route_deadline_ns)
      res = route_fail(ctx, c, v);
    mc_net_mesh_view_put(v);
    return res;
  }
  c->hops = path.n_hops;
  c->from = ctx->nics[c->nic].addr;
  mc_sockaddr_set_port(&c->from, 0);
  if ((c->from.sa.sa_family == AF_INET6) && IN6_IS_ADDR_LINKLOCAL(&c->from.sin6.sin6_addr))
    c->from.sin6.sin6_scope_id = (uint32_t)ctx->nics[c->nic].if_index;
  for (int i = 0; i < c->n; i++)
    c->socks[i].sock.addr = c->to;
  route[0] = '\0';
  for (int i = 0; i <= path.n_hops; i++) {
    mc_net_mesh_host_label(ctx, v, v->graph->hosts[path.hosts[i]].host_hash, dst_label,
                           sizeof(dst_label));
    mc_str_appendf(route, sizeof(route), &used, "%s%s", (i > 0) ? " > " : "", dst_label);
  }
  mc_net_mesh_host_label(ctx, v, c->h.host_hash, dst_label, sizeof(dst_label));
  MC_INFO(MC_SUB_NET,
          "NET/Mesh: relayed connection %016llx to %s over %d hops (%s; %d equal "
          "routes) via %s %s -> %s (subnet %s)",
          (unsigned long long)c->conn_id, dst_label, path.n_hops, route, path.n_choices,
          ctx->nics[c->nic].name, mc_sockaddr_str(&ctx->nics[c->nic].addr, a, sizeof(a)),
          mc_sockaddr_str(&c->to, b, sizeof(b)),
          mc_net_mesh_subnet_str(&ctx->nics[c->nic].addr, ctx->nics[c->nic].prefix_len, sub,
                                 sizeof(sub)));
  snprintf(c->link, sizeof(c->link), "%s %s -> %s (subnet %s), relayed %s", ctx->nics[c->nic].name,
           mc_sockaddr_str(&ctx->nics[c->nic].addr, a, sizeof(a)),
           mc_sockaddr_str(&c->to, b, sizeof(b)),
           mc_net_mesh_subnet_str(&ctx->nics[c->nic].addr, ctx->nics[c->nic].prefix_len, sub,
                                  sizeof(sub)),
           route);
  c->has_route = true;
  mc_net_mesh_view_put(v);
  return ncclSuccess;
}

/* The (local NIC, peer address) pair of the connection: pairs on one subnet,
 * a NIC that carries data before one that does not, a fast-lane peer
 * address before a management one, round-robin among the best. */
static bool pick_link(struct mc_net_mesh_ctx *ctx, const struct mc_net_mesh_handle *h, int *nic_out,
                      union mc_sockaddr *to_out)
{
  int best_score = 4;
  int n_best = 0;
  int pick;
  int nics[MC_NET_MESH_MAX_NICS * MC_NET_MESH_MAX_ADDRS];
  int peers[MC_NET_MESH_MAX_NICS * MC_NET_MESH_MAX_ADDRS];

  for (int i = 0; i < ctx->n_nics; i++) {
    if (__atomic_load_n(&ctx->nic_down[i], __ATOMIC_ACQUIRE) != 0)
      continue; /* its link is down: relayed around it instead */
    for (int j = 0; j < h->n_addrs; j++) {
      int score;

      if (!mc_net_mesh_same_subnet(&ctx->nics[i].addr, ctx->nics[i].prefix_len, &h->addrs[j].addr,
                                   h->addrs[j].prefix_len))
        continue;
      score = (ctx->nics[i].carries_data ? 0 : 2) +
              ((h->addrs[j].lane == MC_NET_MESH_LANE_FAST) ? 0 : 1);
      if (score < best_score) {
        best_score = score;
        n_best = 0;
      }
      if (score == best_score) {
        nics[n_best] = i;
        peers[n_best] = j;
        n_best++;
      }
    }
  }
  if (n_best == 0)
    return false;
  pick = (int)(ctx->rr++ % (unsigned)n_best);
  *nic_out = nics[pick];
  *to_out = h->addrs[peers[pick]].addr;
  if ((to_out->sa.sa_family == AF_INET6) && IN6_IS_ADDR_LINKLOCAL(&to_out->sin6.sin6_addr))
    to_out->sin6.sin6_scope_id = (uint32_t)ctx->nics[nics[pick]].if_index;
  return true;
}

bool mc_net_mesh_nic_reaches(const struct mc_net_mesh_ctx *ctx, int nic, const uint8_t *handle)
{
  struct mc_net_mesh_handle h;

  if ((nic < 0) || (nic >= ctx->n_nics) || (mc_net_mesh_handle_decode(handle, &h) != ncclSuccess))
    return false;
  for (int j = 0; j < h.n_addrs; j++) {
    if (mc_net_mesh_same_subnet(&ctx->nics[nic].addr, ctx->nics[nic].prefix_len, &h.addrs[j].addr,
                                h.addrs[j].prefix_len))
      return true;
  }
  return false;
}

bool mc_net_mesh_direct_up(struct mc_net_mesh_ctx *ctx, const uint8_t *handle)
{
  struct mc_net_mesh_handle h;
  struct mc_net_mesh_view *v;
  int hops = -1;

  if (mc_net_mesh_handle_decode(handle, &h) != ncclSuccess)
    return false;
  v = mc_net_mesh_view_get(ctx);
  if (v == NULL)
    return false;
  for (int i = 0; i < v->graph->n_hosts; i++) {
    if (v->graph->hosts[i].host_hash == h.host_hash)
      hops = mc_mesh_route_hops(v->routes, v->self, i);
  }
  mc_net_mesh_view_put(v);
  if (hops != 1)
    return false;
  for (int i = 0; i < ctx->n_nics; i++) {
    if ((__atomic_load_n(&ctx->nic_down[i], __ATOMIC_ACQUIRE) == 0) &&
        mc_net_mesh_nic_reaches(ctx, i, handle))
      return true;
  }
  return false;
}

/* The control socket and c->h.n_socks data sockets, none open yet. */
static ncclResult_t socks_alloc(struct mc_net_mesh_connect *c)
{
  c->n = c->h.n_socks + 1;
  MC_CHECK(mc_calloc(&c->socks, (size_t)c->n));
  for (int i = 0; i < c->n; i++)
    mc_sock_init(&c->socks[i].sock);
  return ncclSuccess;
}

/* Every socket of c goes from nic (any port; a link-local IPv6 address
 * scoped to its interface) straight to c->to. */
static void aim_direct(struct mc_net_mesh_connect *c, const struct mc_net_mesh_nic *nic)
{
  c->from = nic->addr;
  mc_sockaddr_set_port(&c->from, 0);
  if ((c->from.sa.sa_family == AF_INET6) && IN6_IS_ADDR_LINKLOCAL(&c->from.sin6.sin6_addr))
    c->from.sin6.sin6_scope_id = (uint32_t)nic->if_index;
  for (int i = 0; i < c->n; i++)
    c->socks[i].sock.addr = c->to;
}

static ncclResult_t connect_new(struct mc_net_mesh_ctx *ctx, const void *handle,
                                struct mc_net_mesh_connect **c_out)
{
  ncclResult_t res = ncclSuccess;
  struct mc_net_mesh_connect *c = NULL;
  struct mc_net_mesh_nic *nic;
  char a[MC_SOCKADDR_STRLEN];
  char b[MC_SOCKADDR_STRLEN];
  char s[MC_SOCKADDR_STRLEN];
  char host[MC_NET_MESH_HOST_TEXT_BYTES];

  MC_CHECK(mc_calloc(&c, 1));
  c->handle_ptr = handle;
  memcpy(c->handle_bytes, handle, MC_NET_HANDLE_BYTES);
  MC_CHECK_GOTO(mc_net_mesh_handle_decode(handle, &c->h), res, err);
  if (c->h.n_socks > MC_NET_SOCK_MAX_SOCKS || (c->h.n_threads > MC_NET_SOCK_MAX_THREADS)) {
    res = MC_FAIL(ncclInvalidArgument,
                  "NET/Mesh: connect: the handle asks for %d data sockets and %d threads (at most "
                  "%d and %d)",
                  c->h.n_socks, c->h.n_threads, MC_NET_SOCK_MAX_SOCKS, MC_NET_SOCK_MAX_THREADS);
    goto err;
  }
  MC_CHECK_GOTO(mc_random_bytes(&c->conn_id, sizeof(c->conn_id)), res, err);
  MC_CHECK_GOTO(socks_alloc(c), res, err);
  if (!pick_link(ctx, &c->h, &c->nic, &c->to)) {
    /* No common subnet: relayed, once discovery knows a route. */
    c->is_relayed = true;
    c->route_deadline_ns = mc_time_ns() + (uint64_t)ctx->route_timeout_ms * 1000000ull;
    *c_out = c;
    return ncclSuccess;
  }
  nic = &ctx->nics[c->nic];
  aim_direct(c, nic);
  mc_net_mesh_host_str(ctx, c->h.host_hash, host, sizeof(host));
  MC_INFO(MC_SUB_NET, "NET/Mesh: connection %016llx to %s via %s %s -> %s (subnet %s, %s lane)",
          (unsigned long long)c->conn_id, host, nic->name,
          mc_sockaddr_str(&nic->addr, a, sizeof(a)), mc_sockaddr_str(&c->to, b, sizeof(b)),
          mc_net_mesh_subnet_str(&nic->addr, nic->prefix_len, s, sizeof(s)),
          mc_net_mesh_lane_str(nic->lane));
  snprintf(c->link, sizeof(c->link), "%s %s -> %s (subnet %s)", nic->name,
           mc_sockaddr_str(&nic->addr, a, sizeof(a)), mc_sockaddr_str(&c->to, b, sizeof(b)),
           mc_net_mesh_subnet_str(&nic->addr, nic->prefix_len, s, sizeof(s)));
  *c_out = c;
  return ncclSuccess;

err:
  connect_free(c);
  return res;
}

/* ---------- one socket ---------- */

static bool retryable(int e)
{
  return (e == ECONNREFUSED) || (e == ETIMEDOUT) || (e == EHOSTUNREACH) || (e == ENETUNREACH) ||
         (e == EAGAIN) || (e == EINTR) || (e == ECONNRESET) || (e == ECONNABORTED);
}

/* A failed TCP attempt: schedule the next one or give up (NCCL_SOCKET_RETRY_CNT). */
static ncclResult_t tcp_retry(struct mc_net_mesh_connect *c, struct csock *s, int e)
{
  char a[MC_SOCKADDR_STRLEN];
  char b[MC_SOCKADDR_STRLEN];
  int pause;

  mc_sock_close(&s->sock);
  s->is_connecting = false;
  if (!retryable(e) || (s->attempt > (int)mc_param_int(MC_P_SOCKET_RETRY_CNT)))
    return cfail(c, retryable(e) ? ncclRemoteError : ncclSystemError,
                 "NET/Mesh: cannot connect from %s to %s (%d attempts): %s",
                 mc_sockaddr_str(&c->from, a, sizeof(a)), mc_sockaddr_str(&c->to, b, sizeof(b)),
                 s->attempt, strerror(e));
  pause = s->attempt * (int)mc_param_int(MC_P_SOCKET_RETRY_SLEEP_MSEC);
  if ((s->attempt < 16) && ((FIRST_RETRY_MS << (s->attempt - 1)) < pause))
    pause = FIRST_RETRY_MS << (s->attempt - 1);
  if (pause > MAX_RETRY_MS)
    pause = MAX_RETRY_MS;
  s->retry_at_ns = mc_time_ns() + (uint64_t)pause * 1000000ull;
  return ncclSuccess;
}

/* TCP connect from c->from to c->to without waiting; CS_CHALLENGE once up. */
static ncclResult_t tcp_progress(struct mc_net_mesh_connect *c, struct csock *s)
{
  char a[MC_SOCKADDR_STRLEN];
  char b[MC_SOCKADDR_STRLEN];

  if ((s->sock.fd < 0) && !s->is_connecting) {
    int fd;

    if (mc_time_ns() < s->retry_at_ns)
      return ncclSuccess;
    fd = socket(c->to.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
      return cfail(c, ncclSystemError, "NET/Mesh: socket() to connect to %s failed: %s",
                   mc_sockaddr_str(&c->to, a, sizeof(a)), strerror(errno));
    s->sock.fd = fd;
    s->attempt++;
    s->sent_ns = mc_time_ns();
    if (bind(fd, &c->from.sa, mc_sockaddr_len(&c->from)) != 0) {
      int e = errno;
      mc_sock_close(&s->sock);
      return cfail(c, ncclSystemError, "NET/Mesh: cannot bind a socket to %s to reach %s: %s",
                   mc_sockaddr_str(&c->from, a, sizeof(a)), mc_sockaddr_str(&c->to, b, sizeof(b)),
                   strerror(e));
    }
    if (connect(fd, &c->to.sa, mc_sockaddr_len(&c->to)) != 0) {
      if (errno != EINPROGRESS)
        return tcp_retry(c, s, errno);
      s->is_connecting = true;
    } else {
      s->is_connecting = true; /* immediate: SO_ERROR below says 0 */
    }
  }
  if (s->is_connecting) {
    int err = 0;

    if (!mc_sock_connect_over(s->sock.fd, &err)) {
      if (mc_sock_connect_stale(s->sent_ns)) { /* again at the next call: the same attempt */
        mc_sock_close(&s->sock);
        s->is_connecting = false;
        s->attempt--;
      }
      return ncclSuccess;
    }
    if (err != 0)
      return tcp_retry(c, s, err);
    s->is_connecting = false;
    mc_net_mesh_sock_opts(s->sock.fd);
    s->up_ns = mc_time_ns();
    s->state = c->is_relayed ? CS_RELAY_CHALLENGE : CS_CHALLENGE;
    s->done = 0;
  }
  return ncclSuccess;
}

/* Moves bytes between s->buf[s->done..bytes) and the socket. 1: complete,
 * 0: would block, -1: closed or failed (errno, 0 for a close). */
static int io(struct csock *s, bool is_send, size_t bytes)
{
  return mc_net_auth_io(s->sock.fd, is_send, s->buf, bytes, &s->done);
}

static ncclResult_t hs_fail(struct mc_net_mesh_ctx *ctx, struct mc_net_mesh_connect *c, int index,
                            ncclResult_t res, const char *what)
{
  char a[MC_SOCKADDR_STRLEN];
  char b[MC_SOCKADDR_STRLEN];
  char host[MC_NET_MESH_HOST_TEXT_BYTES];

  mc_net_mesh_host_str(ctx, c->h.host_hash, host, sizeof(host));
  return cfail(c, res, "NET/Mesh: connection from %s to %s (%s), socket %d: %s",
               mc_sockaddr_str(&c->from, a, sizeof(a)), mc_sockaddr_str(&c->to, b, sizeof(b)), host,
               index, what);
}

/* Moves the current message of socket i (io): 1 when it is through, 0
 * while it is not, -1 when the socket failed or closed, *res_out then
 * hs_fail's (closed: what a close without an errno means). */
static int hs_io(struct mc_net_mesh_ctx *ctx, struct mc_net_mesh_connect *c, int i, bool is_send,
                 size_t bytes, const char *closed, ncclResult_t *res_out)
{
  int r = io(&c->socks[i], is_send, bytes);

  if (r < 0)
    *res_out = hs_fail(ctx, c, i, ncclRemoteError, (errno != 0) ? strerror(errno) : closed);
  return r;
}

/* The next message of s starts at its first byte. */
static void hs_next(struct csock *s, enum cs_state next)
{
  s->done = 0;
  s->state = next;
}

/* Sends the current message of socket i (hs_io); once it is through, the
 * next state's starts. */
static int hs_send(struct mc_net_mesh_ctx *ctx, struct mc_net_mesh_connect *c, int i, size_t bytes,
                   const char *closed, enum cs_state next, ncclResult_t *res_out)
{
  int r = hs_io(ctx, c, i, true, bytes, closed, res_out);

  if (r > 0)
    hs_next(&c->socks[i], next);
  return r;
}

/* The connector's half of the handshake on socket i. */
static ncclResult_t sock_progress(struct mc_net_mesh_ctx *ctx, struct mc_net_mesh_connect *c, int i)
{
  struct csock *s = &c->socks[i];
  uint8_t mac[MC_SHA256_BYTES];
  ncclResult_t res = ncclSuccess;
  char why[256];
  int r;

  if (s->state == CS_CONNECT)
    MC_CHECK(tcp_progress(c, s));
  if ((s->state == CS_CONNECT) && (c->tcp_deadline_ns != 0) &&
      (mc_time_ns() > c->tcp_deadline_ns)) {
    /* A resume over a link that drops everything silently: try the next
     * view rather than wait for the kernel's SYN retries. */
    char a[MC_SOCKADDR_STRLEN];
    char b[MC_SOCKADDR_STRLEN];

    return cfail(c, ncclRemoteError, "NET/Mesh: no TCP connection from %s to %s within %d ms",
                 mc_sockaddr_str(&c->from, a, sizeof(a)), mc_sockaddr_str(&c->to, b, sizeof(b)),
                 (int)mc_param_int(MC_P_MESH_LINK_TIMEOUT_MS));
  }
  if (s->state == CS_RELAY_CHALLENGE) {
    r = hs_io(ctx, c, i, false, MC_NET_MESH_CHALLENGE_BYTES,
              "the relay closed before its challenge", &res);
    if (r < 0)
      return res;
    if (r > 0) {
      struct mc_net_mesh_relay_req req;

      if (!mc_net_auth_challenge_decode(&mc_net_mesh_auth, s->buf, s->nonce_a))
        return hs_fail(ctx, c, i, ncclRemoteError, "the relay is not a Mesh net of this version");
      req.hops_left = c->hops - 1;
      req.conn_id = c->conn_id;
      req.origin_host = ctx->host_hash;
      memcpy(req.handle, c->handle_bytes, MC_NET_HANDLE_BYTES);
      mc_net_mesh_relay_req_encode(&req, ctx->disc_key, s->nonce_a, s->buf);
      hs_next(s, CS_RELAY_REQ);
    }
  }
  if (s->state == CS_RELAY_REQ) {
    if (hs_send(ctx, c, i, MC_NET_MESH_RELAY_REQ_BYTES, "relay closed", CS_CHALLENGE, &res) < 0)
      return res;
  }
  if (s->state == CS_CHALLENGE) {
    r = hs_io(ctx, c, i, false, MC_NET_MESH_CHALLENGE_BYTES, "closed before sending its challenge",
              &res);
    if (r < 0)
      return res;
    if (r > 0) {
      int reason;
      uint64_t relay_host;

      if (c->is_relayed && mc_net_mesh_refusal_decode(s->buf, &reason, &relay_host)) {
        if (mc_net_mesh_refusal_is_transient(reason) && (mc_time_ns() < c->route_deadline_ns)) {
          /* The relays have not learnt the route yet: again, a bit later. */
          mc_sock_close(&s->sock);
          s->state = CS_CONNECT;
          s->attempt = 0;
          s->retry_at_ns = mc_time_ns() + 200000000ull;
          return ncclSuccess;
        }
        char host[MC_NET_MESH_HOST_TEXT_BYTES];

        mc_net_mesh_host_str(ctx, relay_host, host, sizeof(host));
        snprintf(why, sizeof(why), "relay %s refused: %s", host, mc_net_mesh_refusal_str(reason));
        return hs_fail(ctx, c, i, ncclRemoteError, why);
      }
      if (!mc_net_auth_challenge_decode(&mc_net_mesh_auth, s->buf, s->nonce_a))
        return hs_fail(ctx, c, i, ncclRemoteError,
                       "the listener is not a Mesh net of this version (bad challenge)");
      memset(&s->resp, 0, sizeof(s->resp));
      s->resp.listen_id = c->h.listen_id;
      s->resp.conn_id = c->conn_id;
      s->resp.host_hash = ctx->host_hash;
      s->resp.index = (uint32_t)i | c->index_flags;
      s->resp.n_socks = (uint32_t)c->h.n_socks;
      MC_CHECK(mc_random_bytes(s->resp.nonce_c, sizeof(s->resp.nonce_c)));
      mc_net_auth_mac(&mc_net_mesh_auth, ctx->key, 'C', s->nonce_a, &s->resp, s->resp.mac);
      mc_net_auth_response_encode(&mc_net_mesh_auth, &s->resp, s->buf);
      hs_next(s, CS_RESPONSE);
    }
  }
  if (s->state == CS_RESPONSE) {
    if (hs_send(ctx, c, i, MC_NET_MESH_RESPONSE_BYTES, "closed", CS_CONFIRM, &res) < 0)
      return res;
  }
  if (s->state == CS_CONFIRM) {
    r = hs_io(ctx, c, i, false, MC_NET_MESH_CONFIRM_BYTES,
              "the listener closed the connection instead of confirming: "
              "it refused our MAC (ranks with different secrets or "
              "communicators?) or its listen comm is closed",
              &res);
    if (r < 0)
      return res;
    if (r > 0) {
      if (!mc_net_auth_confirm_decode(&mc_net_mesh_auth, s->buf, mac))
        return hs_fail(ctx, c, i, ncclRemoteError, "bad confirmation (wrong magic)");
      mc_net_auth_mac(&mc_net_mesh_auth, ctx->key, 'A', s->nonce_a, &s->resp, s->resp.mac);
      if (!mc_crypto_equal(mac, s->resp.mac, sizeof(mac)))
        return hs_fail(ctx, c, i, ncclRemoteError,
                       "the listener failed authentication (its MAC does not verify: a host "
                       "with another secret answers at this address)");
      s->state = CS_DONE;
    }
  }
  if ((s->state != CS_DONE) && (s->state != CS_CONNECT) &&
      (mc_time_ns() - s->up_ns > (uint64_t)ctx->handshake_ms * 1000000ull)) {
    snprintf(why, sizeof(why), "no complete handshake within %d ms of the TCP connection",
             ctx->handshake_ms);
    return hs_fail(ctx, c, i, ncclTimeout, why);
  }
  return ncclSuccess;
}

/* ---------- the op ---------- */

ncclResult_t mc_net_mesh_connect(void *vctx, int dev, const void *handle, void **send_comm)
{
  struct mc_net_mesh_ctx *ctx = vctx;
  struct mc_net_mesh_connect **link;
  struct mc_net_mesh_connect *c = NULL;
  struct mc_net_sock_comm *comm = NULL;
  struct mc_net_mesh_comm *mc = NULL;
  ncclResult_t res = ncclSuccess;
  int n_done = 0;

  *send_comm = NULL;
  if ((dev != 0) || (handle == NULL))
    return MC_FAIL(ncclInvalidArgument, "NET/Mesh: connect on device %d (1 device), handle %p", dev,
                   handle);
  pthread_mutex_lock(&ctx->connect_mu);
  for (link = &ctx->connects; *link != NULL; link = &(*link)->next) {
    if (((*link)->handle_ptr == handle) &&
        (memcmp((*link)->handle_bytes, handle, MC_NET_HANDLE_BYTES) == 0))
      break;
  }
  if (is_aborted(ctx)) {
    res = ncclInternalError; /* aborted by the user: no WARN */
    goto drop;
  }
  if (*link == NULL) {
    MC_CHECK_GOTO(connect_new(ctx, handle, &c), res, out);
    c->next = ctx->connects;
    ctx->connects = c;
    link = &ctx->connects;
  }
  c = *link;
  if (c->is_relayed && !c->has_route) {
    MC_CHECK_GOTO(route_find(ctx, c), res, drop);
    if (!c->has_route)
      goto out;
  }
  for (int i = 0; i < c->n; i++) {
    MC_CHECK_GOTO(sock_progress(ctx, c, i), res, drop);
    n_done += (c->socks[i].state == CS_DONE);
  }
  if (n_done < c->n)
    goto out;
  *link = c->next;
  {
    struct mc_sock socks[MC_NET_SOCK_MAX_SOCKS + 1];

    for (int i = 0; i < c->n; i++) {
      socks[i] = c->socks[i].sock;
      c->socks[i].sock.fd = -1;
    }
    res = mc_net_sock_comm_create(true, ctx->abort_flag, socks, c->h.n_socks, c->h.n_threads,
                                  c->h.inline_bytes, c->h.min_task_bytes, &comm);
    for (int i = 0; i < c->n; i++)
      mc_sock_close(&socks[i]); /* only those comm_create did not take */
  }
  if (res == ncclSuccess) {
    res = mc_net_mesh_comm_create(ctx, true, comm, c->conn_id, c->h.host_hash, c->handle_bytes,
                                  c->nic, c->link, &mc);
    if (res != ncclSuccess)
      mc_net_sock_comm_destroy(comm);
  }
  connect_free(c);
  if (res == ncclSuccess)
    *send_comm = mc;
  goto out;

drop:
  if (*link != NULL) {
    c = *link;
    *link = c->next;
    connect_free(c);
  }
out:
  pthread_mutex_unlock(&ctx->connect_mu);
  return res;
}

/* ---------- resuming a broken connection (mesh_reliable.c) ---------- */

ncclResult_t mc_net_mesh_resume_start(struct mc_net_mesh_ctx *ctx, const uint8_t *handle,
                                      uint64_t conn_id, unsigned attempt, uint64_t deadline_ns,
                                      struct mc_net_mesh_connect **c_out)
{
  ncclResult_t res = ncclSuccess;
  struct mc_net_mesh_connect *c = NULL;
  struct mc_net_mesh_view *v = NULL;
  char a[MC_SOCKADDR_STRLEN];
  char b[MC_SOCKADDR_STRLEN];
  char s[MC_SOCKADDR_STRLEN];
  int dst = -1;
  int hops = -1;

  MC_CHECK(mc_calloc(&c, 1));
  c->is_quiet = true;
  c->handle_ptr = NULL;
  memcpy(c->handle_bytes, handle, MC_NET_HANDLE_BYTES);
  MC_CHECK_GOTO(mc_net_mesh_handle_decode(handle, &c->h), res, err);
  c->conn_id = conn_id;
  c->index_flags =
      MC_NET_MESH_RESUME_FLAG | ((attempt & MC_NET_MESH_ATTEMPT_MASK) << MC_NET_MESH_ATTEMPT_SHIFT);
  c->route_deadline_ns = deadline_ns;
  MC_CHECK_GOTO(socks_alloc(c), res, err);
  /* The current view decides: a link still up to the listener's host is
   * used directly, else the shortest route around the broken one. */
  v = mc_net_mesh_view_get(ctx);
  if (v != NULL) {
    for (int i = 0; i < v->graph->n_hosts; i++) {
      if (v->graph->hosts[i].host_hash == c->h.host_hash)
        dst = i;
    }
    if (dst >= 0)
      hops = mc_mesh_route_hops(v->routes, v->self, dst);
  }
  mc_net_mesh_view_put(v);
  if ((hops <= 1) && pick_link(ctx, &c->h, &c->nic, &c->to)) {
    struct mc_net_mesh_nic *nic = &ctx->nics[c->nic];

    aim_direct(c, nic);
    snprintf(c->link, sizeof(c->link), "%s %s -> %s (subnet %s)", nic->name,
             mc_sockaddr_str(&nic->addr, a, sizeof(a)), mc_sockaddr_str(&c->to, b, sizeof(b)),
             mc_net_mesh_subnet_str(&nic->addr, nic->prefix_len, s, sizeof(s)));
  } else {
    c->is_relayed = true;
  }
  *c_out = c;
  return ncclSuccess;

err:
  connect_free(c);
  return res;
}

ncclResult_t mc_net_mesh_resume_progress(struct mc_net_mesh_ctx *ctx, struct mc_net_mesh_connect *c,
                                         struct mc_sock *socks, bool *done_out, int *nic_out,
                                         char *link_out, size_t link_bytes, char *why_out,
                                         size_t why_bytes)
{
  ncclResult_t res = ncclSuccess;
  int n_done = 0;

  *done_out = false;
  if (is_aborted(ctx))
    return ncclInternalError;
  if (c->is_relayed && !c->has_route) {
    MC_CHECK_GOTO(route_find(ctx, c), res, fail);
    if (!c->has_route)
      return ncclSuccess;
  }
  if (c->tcp_deadline_ns == 0)
    c->tcp_deadline_ns =
        mc_time_ns() + (uint64_t)mc_param_int(MC_P_MESH_LINK_TIMEOUT_MS) * 1000000ull;
  for (int i = 0; i < c->n; i++) {
    MC_CHECK_GOTO(sock_progress(ctx, c, i), res, fail);
    n_done += (c->socks[i].state == CS_DONE);
  }
  if (n_done < c->n)
    return ncclSuccess;
  for (int i = 0; i < c->n; i++) {
    socks[i] = c->socks[i].sock;
    c->socks[i].sock.fd = -1;
  }
  *nic_out = c->nic;
  snprintf(link_out, link_bytes, "%s", c->link);
  *done_out = true;
  return ncclSuccess;

fail:
  snprintf(why_out, why_bytes, "%s", c->why);
  return res;
}

void mc_net_mesh_resume_free(struct mc_net_mesh_connect *c)
{
  connect_free(c);
}
