/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Mesh net's handshake thread, one per context (init .. finalize). It
 * owns a listening socket bound to every mesh address (never INADDR_ANY: a
 * management or public interface must not take mesh connections), accepts
 * on all of them, authenticates every accepted socket (mesh_int.h: challenge,
 * response, confirm) and files the finished sockets under their listen comm,
 * where accept() picks up complete connections without ever waiting.
 *
 * The thread never blocks on one peer: every socket is non-blocking, all
 * handshakes in flight (at most MC_NET_MESH_MAX_PENDING, the oldest evicted
 * when a new one arrives) progress together from one poll() that lasts at
 * most TICK_MS, so that the abort flag and the stop request are seen within
 * that time. A socket that sends garbage, a wrong magic or MAC, closes, or
 * stays silent for MESHCCL_MESH_HANDSHAKE_TIMEOUT_MS is closed, counted and
 * logged once at INFO with its peer address (the first MAC failure of a
 * context also WARNs: it usually means ranks with different secrets).
 *
 * NCCL's socket net accepts in the caller's accept() instead (its
 * transport/net_socket.cc); a thread is needed here because one listening
 * socket per address serves every listen comm of the context.
 */
#include "mesh_int.h"

#include "check.h"
#include "log.h"
#include "net/net_socket_int.h"
#include "params.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TICK_MS         100   /* longest poll: abort and stop are seen this fast */
#define GROUP_WINDOW_MS 30000 /* an incomplete connection is dropped after this */
#define ACCEPT_BURST    64    /* accepts per listening socket per tick */

enum hs_state {
  HS_CHALLENGE,
  HS_RESPONSE,
  HS_CONFIRM,
  HS_RELAY_REQ,        /* the rest of a relay request */
  HS_ONWARD_CONNECT,   /* relaying: TCP connect to the next host */
  HS_ONWARD_CHALLENGE, /* relaying through another relay: its challenge */
  HS_ONWARD_REQ        /* relaying through another relay: our request to it */
};

struct hs_pending {
  int fd;
  union mc_sockaddr peer;
  int nic;
  uint64_t since_ns;
  enum hs_state state;
  uint8_t nonce_a[MC_NET_MESH_NONCE_BYTES];
  uint8_t out[MC_NET_MESH_CHALLENGE_BYTES + MC_NET_MESH_CONFIRM_BYTES];
  size_t out_bytes;
  size_t out_done;
  uint8_t in[MC_NET_MESH_RELAY_REQ_BYTES]; /* a response, or a relay request */
  size_t in_got;
  size_t in_want;
  struct mc_net_auth_response resp;
  /* Relaying: the socket to the next host and what is said on it. */
  int fd2;
  bool is_via_relay; /* the next host relays further */
  union mc_sockaddr onward;
  struct mc_net_mesh_relay_req req;
  uint64_t dest_host;
  uint8_t out2[MC_NET_MESH_RELAY_REQ_BYTES];
  size_t out2_done;
  uint8_t in2[MC_NET_MESH_CHALLENGE_BYTES];
  size_t in2_got;
};

struct mc_net_mesh_hs_thread {
  pthread_t thread;
  bool is_started;
  int wake[2]; /* pipe: finalize writes one byte */
  int stop;    /* atomic */
  struct hs_pending pend[MC_NET_MESH_MAX_PENDING];
  int n_pend;
};

void mc_net_mesh_sock_opts(int fd)
{
  int one = 1;
  int timeout_ms = (int)mc_param_int(MC_P_MESH_LINK_TIMEOUT_MS);
  /* Idle sockets (a receiver waiting, a relay between messages) probe the
   * peer after a third of the timeout, every third: at most the timeout
   * passes before a dead link shows as an error on the socket. */
  int idle_s = (timeout_ms / 3000 > 0) ? timeout_ms / 3000 : 1;
  int cnt = 3;

  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle_s, sizeof(idle_s));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timeout_ms, sizeof(timeout_ms));
  mc_sock_set_buf_sizes(fd);
}

void mc_net_mesh_group_free(struct mc_net_mesh_group *g)
{
  if (g == NULL)
    return;
  for (int i = 0; (g->socks != NULL) && (i <= g->n_socks); i++)
    mc_sock_close(&g->socks[i]);
  free(g->socks);
  free(g);
}

static bool is_aborted(const struct mc_net_mesh_ctx *ctx)
{
  return (ctx->abort_flag != NULL) && (__atomic_load_n(ctx->abort_flag, __ATOMIC_ACQUIRE) != 0);
}

/* ---------- refusing ---------- */

enum refusal { REFUSE_PROTOCOL, REFUSE_MAC, REFUSE_TIMEOUT };

static void refuse(struct mc_net_mesh_ctx *ctx, struct hs_pending *p, enum refusal kind,
                   const char *why)
{
  char a[MC_SOCKADDR_STRLEN];
  char b[MC_SOCKADDR_STRLEN];
  struct mc_net_mesh_nic *nic = &ctx->nics[p->nic];
  int n_mac = 0;

  mc_sockaddr_str(&p->peer, a, sizeof(a));
  mc_sockaddr_str(&nic->addr, b, sizeof(b));
  __atomic_add_fetch(&ctx->stats.n_refused, 1, __ATOMIC_RELAXED);
  if (kind == REFUSE_MAC)
    n_mac = __atomic_add_fetch(&ctx->stats.n_bad_mac, 1, __ATOMIC_RELAXED);
  if (kind == REFUSE_TIMEOUT)
    __atomic_add_fetch(&ctx->stats.n_timeouts, 1, __ATOMIC_RELAXED);
  if (n_mac == 1)
    MC_WARN("NET/Mesh: refused connection from %s on %s %s: %s (do all ranks share one "
            "communicator and MESHCCL_SECRET?)",
            a, nic->name, b, why);
  else
    MC_INFO(MC_SUB_NET, "NET/Mesh: refused connection from %s on %s %s: %s", a, nic->name, b, why);
  close(p->fd);
  p->fd = -1;
  if (p->fd2 >= 0)
    close(p->fd2);
  p->fd2 = -1;
}

static void pend_remove(struct mc_net_mesh_hs_thread *t, int i)
{
  t->pend[i] = t->pend[--t->n_pend];
}

/* ---------- accepting ---------- */

static void accept_new(struct mc_net_mesh_ctx *ctx, struct mc_net_mesh_hs_thread *t, int nic)
{
  for (int k = 0; k < ACCEPT_BURST; k++) {
    struct hs_pending *p;
    union mc_sockaddr peer;
    socklen_t len = sizeof(peer);
    int fd;

    memset(&peer, 0, sizeof(peer));
    fd = accept4(ctx->listen_fds[nic], &peer.sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if ((errno != EAGAIN) && (errno != EWOULDBLOCK) && (errno != EINTR) &&
          (errno != ECONNABORTED))
        MC_WARN_ONCE("NET/Mesh: accept on %s failed: %s", ctx->nics[nic].name, strerror(errno));
      return;
    }
    if (t->n_pend == MC_NET_MESH_MAX_PENDING) {
      int oldest = 0;
      char why[96];

      for (int i = 1; i < t->n_pend; i++) {
        if (t->pend[i].since_ns < t->pend[oldest].since_ns)
          oldest = i;
      }
      snprintf(why, sizeof(why), "evicted: %d handshakes in flight, this one the oldest",
               MC_NET_MESH_MAX_PENDING);
      refuse(ctx, &t->pend[oldest], REFUSE_PROTOCOL, why);
      pend_remove(t, oldest);
    }
    p = &t->pend[t->n_pend];
    memset(p, 0, sizeof(*p));
    p->fd = fd;
    p->fd2 = -1;
    p->in_want = MC_NET_MESH_RESPONSE_BYTES;
    p->peer = peer;
    p->nic = nic;
    p->since_ns = mc_time_ns();
    p->state = HS_CHALLENGE;
    if (mc_random_bytes(p->nonce_a, sizeof(p->nonce_a)) != ncclSuccess) {
      close(fd);
      return;
    }
    mc_net_mesh_sock_opts(fd);
    mc_net_auth_challenge_encode(&mc_net_mesh_auth, p->nonce_a, p->out);
    p->out_bytes = MC_NET_MESH_CHALLENGE_BYTES;
    t->n_pend++;
  }
}

/* ---------- filing ---------- */

static struct mc_net_mesh_listen *find_listen(struct mc_net_mesh_ctx *ctx, uint64_t id)
{
  for (struct mc_net_mesh_listen *l = ctx->listens; l != NULL; l = l->next) {
    if (l->id == id)
      return l;
  }
  return NULL;
}

/* Files an authenticated socket under its listen comm (ctx->mu held).
 * Returns NULL when filed, else why not. */
static const char *file_sock(struct mc_net_mesh_ctx *ctx, struct hs_pending *p)
{
  struct mc_net_mesh_listen *l = find_listen(ctx, p->resp.listen_id);
  struct mc_net_mesh_group *g = NULL;
  struct mc_net_mesh_group **link;

  if (l == NULL)
    return "its listen comm is closed";
  for (g = l->groups; g != NULL; g = g->next) {
    if (g->conn_id == p->resp.conn_id)
      break;
  }
  if (g == NULL) {
    if (l->n_groups >= MC_NET_MESH_MAX_GROUPS)
      return "too many connections being set up at once on its listen comm";
    g = calloc(1, sizeof(*g));
    if (g != NULL)
      g->socks = calloc((size_t)p->resp.n_socks + 1, sizeof(*g->socks));
    if ((g == NULL) || (g->socks == NULL)) {
      free(g);
      return "out of memory";
    }
    g->conn_id = p->resp.conn_id;
    g->peer_host = p->resp.host_hash;
    g->n_socks = (int)p->resp.n_socks;
    g->since_ns = mc_time_ns();
    g->nic = p->nic;
    for (int i = 0; i <= g->n_socks; i++)
      mc_sock_init(&g->socks[i]);
    g->next = l->groups;
    l->groups = g;
    l->n_groups++;
  }
  if ((uint32_t)g->n_socks != p->resp.n_socks)
    return "its socket count differs from the other sockets of its connection";
  if (g->socks[p->resp.index].fd >= 0)
    return "duplicate socket index";
  g->socks[p->resp.index].fd = p->fd;
  g->socks[p->resp.index].addr = p->peer;
  p->fd = -1;
  if (++g->n_got < g->n_socks + 1)
    return NULL;
  /* Complete: move to the tail of the ready list. */
  for (link = &l->groups; *link != g; link = &(*link)->next)
    ;
  *link = g->next;
  l->n_groups--;
  g->next = NULL;
  for (link = &l->ready; *link != NULL; link = &(*link)->next)
    ;
  *link = g;
  __atomic_add_fetch(&l->n_ready, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* ---------- progress ---------- */

/* The whole response is in: checks it and queues the confirm. Returns false
 * when the socket was refused. */
static bool verify(struct mc_net_mesh_ctx *ctx, struct hs_pending *p)
{
  uint8_t mac[MC_SHA256_BYTES];
  char why[128];
  bool has_listen;

  if (!mc_net_auth_response_decode(&mc_net_mesh_auth, p->in, &p->resp)) {
    refuse(ctx, p, REFUSE_PROTOCOL, "not a Mesh handshake (wrong magic or version)");
    return false;
  }
  mc_net_auth_mac(&mc_net_mesh_auth, ctx->key, 'C', p->nonce_a, &p->resp, mac);
  if (!mc_crypto_equal(mac, p->resp.mac, sizeof(mac))) {
    refuse(ctx, p, REFUSE_MAC, "authentication failed (the connector's MAC does not verify)");
    return false;
  }
  if ((p->resp.n_socks > MC_NET_SOCK_MAX_SOCKS) ||
      ((p->resp.index & MC_NET_MESH_INDEX_MASK) > p->resp.n_socks) ||
      (((p->resp.index & MC_NET_MESH_RESUME_FLAG) == 0) &&
       (p->resp.index > MC_NET_MESH_INDEX_MASK))) {
    snprintf(why, sizeof(why), "socket %u of %u data sockets (at most %d)",
             p->resp.index & MC_NET_MESH_INDEX_MASK, p->resp.n_socks, MC_NET_SOCK_MAX_SOCKS);
    refuse(ctx, p, REFUSE_PROTOCOL, why);
    return false;
  }
  pthread_mutex_lock(&ctx->mu);
  if ((p->resp.index & MC_NET_MESH_RESUME_FLAG) != 0)
    has_listen = mc_net_mesh_resume_known(ctx, p->resp.conn_id, p->resp.host_hash);
  else
    has_listen = (find_listen(ctx, p->resp.listen_id) != NULL);
  pthread_mutex_unlock(&ctx->mu);
  if (!has_listen) {
    if ((p->resp.index & MC_NET_MESH_RESUME_FLAG) != 0)
      snprintf(why, sizeof(why), "resume of connection %016llx: no such receive comm here",
               (unsigned long long)p->resp.conn_id);
    else
      snprintf(why, sizeof(why), "listen comm %016llx is not open here (closed already?)",
               (unsigned long long)p->resp.listen_id);
    refuse(ctx, p, REFUSE_PROTOCOL, why);
    return false;
  }
  mc_net_auth_mac(&mc_net_mesh_auth, ctx->key, 'A', p->nonce_a, &p->resp, mac);
  mc_net_auth_confirm_encode(&mc_net_mesh_auth, mac, p->out);
  p->out_bytes = MC_NET_MESH_CONFIRM_BYTES;
  p->out_done = 0;
  p->state = HS_CONFIRM;
  return true;
}

/* ---------- relaying (this host is on the route of someone's connection) ---------- */

/* Answers a relay request with a refusal (best effort: 24 bytes into a
 * fresh socket's buffer) and closes it. */
static void relay_refuse(struct mc_net_mesh_ctx *ctx, struct hs_pending *p,
                         enum mc_net_mesh_refusal reason)
{
  uint8_t buf[MC_NET_MESH_REFUSAL_BYTES];
  char why[400];
  char host[MC_NET_MESH_HOST_TEXT_BYTES];

  mc_net_mesh_refusal_encode(reason, ctx->host_hash, buf);
  if (send(p->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
    /* the connector learns from the close */
  }
  __atomic_add_fetch(&ctx->stats.n_relay_refused, 1, __ATOMIC_RELAXED);
  mc_net_mesh_host_str(ctx, p->dest_host, host, sizeof(host));
  snprintf(why, sizeof(why), "relay request for connection %016llx to %s refused: %s",
           (unsigned long long)p->req.conn_id, host, mc_net_mesh_refusal_str(reason));
  refuse(ctx, p, (reason == MC_NET_MESH_REFUSE_BAD_MAC) ? REFUSE_MAC : REFUSE_PROTOCOL, why);
}

static int graph_host(const struct mc_mesh_graph *g, uint64_t host_hash)
{
  for (int i = 0; i < g->n_hosts; i++) {
    if (g->hosts[i].host_hash == host_hash)
      return i;
  }
  return -1;
}

/* True when addr (with its port) is a handshake address host_hash announced. */
static bool is_announced(const struct mc_net_mesh_view *v, uint64_t host_hash,
                         const union mc_sockaddr *addr)
{
  for (int i = 0; i < v->table.n; i++) {
    const struct mc_net_mesh_rec *r = &v->table.e[i].rec;

    if (r->host_hash != host_hash)
      continue;
    for (int k = 0; k < r->n_addrs; k++) {
      if (mc_sockaddr_equal(&r->addrs[k].addr, addr) &&
          (mc_sockaddr_port(&r->addrs[k].addr) == mc_sockaddr_port(addr)))
        return true;
    }
  }
  return false;
}

/* Where a checked request goes on: the listener itself, when this host
 * shares a subnet with one of its announced handshake addresses, else the
 * next host of this host's route to it. Only hosts in the table, only their
 * announced handshake addresses. */
static enum mc_net_mesh_refusal relay_route(struct mc_net_mesh_ctx *ctx, struct hs_pending *p,
                                            const struct mc_net_mesh_handle *h, int *nic_out)
{
  struct mc_net_mesh_view *v = mc_net_mesh_view_get(ctx);
  enum mc_net_mesh_refusal res = MC_NET_MESH_REFUSE_NONE;
  struct mc_mesh_path path;
  int dst;

  if (v == NULL)
    return MC_NET_MESH_REFUSE_BUSY;
  dst = graph_host(v->graph, h->host_hash);
  if (dst < 0) {
    res = MC_NET_MESH_REFUSE_UNKNOWN_DEST;
    goto out;
  }
  for (int j = 0; j < h->n_addrs; j++) {
    for (int m = 0; m < ctx->n_nics; m++) {
      if (!mc_net_mesh_same_subnet(&ctx->nics[m].addr, ctx->nics[m].prefix_len, &h->addrs[j].addr,
                                   h->addrs[j].prefix_len) ||
          !is_announced(v, h->host_hash, &h->addrs[j].addr))
        continue;
      if (p->req.hops_left < 1) {
        res = MC_NET_MESH_REFUSE_HOP_LIMIT;
        goto out;
      }
      p->onward = h->addrs[j].addr;
      if ((p->onward.sa.sa_family == AF_INET6) && IN6_IS_ADDR_LINKLOCAL(&p->onward.sin6.sin6_addr))
        p->onward.sin6.sin6_scope_id = (uint32_t)ctx->nics[m].if_index;
      p->is_via_relay = false;
      *nic_out = m;
      goto out;
    }
  }
  {
    int hops = mc_mesh_route_hops(v->routes, v->self, dst);

    if (hops < 0) {
      res = MC_NET_MESH_REFUSE_UNKNOWN_DEST;
      goto out;
    }
    if (hops > p->req.hops_left) {
      res = MC_NET_MESH_REFUSE_HOP_LIMIT;
      goto out;
    }
  }
  if ((mc_mesh_route_pick(v->routes, v->self, dst, p->req.conn_id, &path) != ncclSuccess) ||
      (path.n_hops < 2) ||
      !mc_net_mesh_view_addr(ctx, v, v->graph->hosts[path.hosts[1]].host_hash, &p->onward,
                             nic_out)) {
    res = MC_NET_MESH_REFUSE_NO_ADDR;
    goto out;
  }
  p->is_via_relay = true;
out:
  mc_net_mesh_view_put(v);
  return res;
}

/* A whole relay request is in: check it, choose where it goes on, start
 * connecting there. Returns false when the socket was refused. */
static bool relay_start(struct mc_net_mesh_ctx *ctx, struct hs_pending *p)
{
  struct mc_net_mesh_handle h;
  enum mc_net_mesh_refusal r;
  union mc_sockaddr from;
  int nic = -1;
  int fd;

  r = mc_net_mesh_relay_req_decode(p->in, ctx->disc_key, p->nonce_a, &p->req);
  if (r != MC_NET_MESH_REFUSE_NONE) {
    relay_refuse(ctx, p, r);
    return false;
  }
  if (mc_net_mesh_handle_decode(p->req.handle, &h) != ncclSuccess) {
    relay_refuse(ctx, p, MC_NET_MESH_REFUSE_MALFORMED);
    return false;
  }
  p->dest_host = h.host_hash;
  if (h.host_hash == ctx->host_hash) {
    relay_refuse(ctx, p, MC_NET_MESH_REFUSE_SELF);
    return false;
  }
  r = relay_route(ctx, p, &h, &nic);
  if (r != MC_NET_MESH_REFUSE_NONE) {
    relay_refuse(ctx, p, r);
    return false;
  }
  from = ctx->nics[nic].addr;
  mc_sockaddr_set_port(&from, 0);
  if ((from.sa.sa_family == AF_INET6) && IN6_IS_ADDR_LINKLOCAL(&from.sin6.sin6_addr))
    from.sin6.sin6_scope_id = (uint32_t)ctx->nics[nic].if_index;
  fd = socket(p->onward.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if ((fd < 0) || (bind(fd, &from.sa, mc_sockaddr_len(&from)) != 0) ||
      ((connect(fd, &p->onward.sa, mc_sockaddr_len(&p->onward)) != 0) && (errno != EINPROGRESS))) {
    if (fd >= 0)
      close(fd);
    relay_refuse(ctx, p, MC_NET_MESH_REFUSE_ONWARD);
    return false;
  }
  p->fd2 = fd;
  p->state = HS_ONWARD_CONNECT;
  return true;
}

/* Both sockets are ready: the relay service forwards from now on. */
static void relay_hand_over(struct mc_net_mesh_ctx *ctx, struct hs_pending *p)
{
  char label[MC_MESH_RELAY_LABEL_BYTES];
  char a[MC_SOCKADDR_STRLEN];
  char b[MC_SOCKADDR_STRLEN];
  char from[MC_NET_MESH_HOST_TEXT_BYTES];
  char to[MC_NET_MESH_HOST_TEXT_BYTES];

  mc_net_mesh_host_str(ctx, p->req.origin_host, from, sizeof(from));
  mc_net_mesh_host_str(ctx, p->dest_host, to, sizeof(to));
  snprintf(label, sizeof(label), "conn %016llx -> %s", (unsigned long long)p->req.conn_id, to);
  if (mc_mesh_relay_add(ctx->relay, p->fd, p->fd2, label) != ncclSuccess) {
    relay_refuse(ctx, p, MC_NET_MESH_REFUSE_BUSY);
    return;
  }
  __atomic_add_fetch(&ctx->stats.n_relayed, 1, __ATOMIC_RELAXED);
  MC_INFO(MC_SUB_NET,
          "NET/Mesh: relaying connection %016llx from %s (%s) to %s via %s "
          "(%s, %d hops left)",
          (unsigned long long)p->req.conn_id, from, mc_sockaddr_str(&p->peer, a, sizeof(a)), to,
          mc_sockaddr_str(&p->onward, b, sizeof(b)),
          p->is_via_relay ? "next relay" : "the listener", p->req.hops_left);
  p->fd = -1;
  p->fd2 = -1;
}

/* Moves a relay set-up on (the onward socket). Returns false when the
 * pending entry is done (handed over or refused). */
static bool relay_progress(struct mc_net_mesh_ctx *ctx, struct hs_pending *p)
{
  if (p->state == HS_ONWARD_CONNECT) {
    struct pollfd q = {.fd = p->fd2, .events = POLLOUT, .revents = 0};
    int err = 0;
    socklen_t len = sizeof(err);

    if (poll(&q, 1, 0) <= 0)
      return true;
    if ((getsockopt(p->fd2, SOL_SOCKET, SO_ERROR, &err, &len) != 0) || (err != 0)) {
      relay_refuse(ctx, p, MC_NET_MESH_REFUSE_ONWARD);
      return false;
    }
    mc_net_mesh_sock_opts(p->fd2);
    if (!p->is_via_relay) {
      relay_hand_over(ctx, p);
      return false;
    }
    p->state = HS_ONWARD_CHALLENGE;
    p->in2_got = 0;
  }
  if (p->state == HS_ONWARD_CHALLENGE) {
    uint8_t nonce[MC_NET_MESH_NONCE_BYTES];
    struct mc_net_mesh_relay_req next = p->req;
    int r = mc_net_auth_io(p->fd2, false, p->in2, sizeof(p->in2), &p->in2_got);

    if (r == 0)
      return true;
    if (r < 0) {
      relay_refuse(ctx, p, MC_NET_MESH_REFUSE_ONWARD);
      return false;
    }
    if (!mc_net_auth_challenge_decode(&mc_net_mesh_auth, p->in2, nonce)) {
      relay_refuse(ctx, p, MC_NET_MESH_REFUSE_ONWARD);
      return false;
    }
    next.hops_left = p->req.hops_left - 1;
    mc_net_mesh_relay_req_encode(&next, ctx->disc_key, nonce, p->out2);
    p->out2_done = 0;
    p->state = HS_ONWARD_REQ;
  }
  if (p->state == HS_ONWARD_REQ) {
    int r = mc_net_auth_io(p->fd2, true, p->out2, sizeof(p->out2), &p->out2_done);

    if (r == 0)
      return true;
    if (r < 0) {
      relay_refuse(ctx, p, MC_NET_MESH_REFUSE_ONWARD);
      return false;
    }
    relay_hand_over(ctx, p);
    return false;
  }
  return true;
}

/* Moves one handshake on. Returns false when the socket left the pending
 * set (refused, filed under its listen comm, or handed to the relay). */
static bool progress(struct mc_net_mesh_ctx *ctx, struct hs_pending *p)
{
  if (p->state >= HS_ONWARD_CONNECT)
    return relay_progress(ctx, p);
  for (;;) {
    ssize_t n;

    if (p->out_done < p->out_bytes) {
      int r = mc_net_auth_io(p->fd, true, p->out, p->out_bytes, &p->out_done);

      if (r == 0)
        return true;
      if (r < 0) {
        refuse(ctx, p, REFUSE_PROTOCOL, (errno != 0) ? strerror(errno) : "closed");
        return false;
      }
      continue;
    }
    if (p->state == HS_CHALLENGE) {
      p->state = HS_RESPONSE;
      continue;
    }
    if (p->state == HS_CONFIRM) {
      const char *why;

      pthread_mutex_lock(&ctx->mu);
      if ((p->resp.index & MC_NET_MESH_RESUME_FLAG) != 0) {
        why = mc_net_mesh_resume_file(ctx, p->resp.conn_id, p->resp.host_hash,
                                      (p->resp.index >> MC_NET_MESH_ATTEMPT_SHIFT) &
                                          MC_NET_MESH_ATTEMPT_MASK,
                                      (int)(p->resp.index & MC_NET_MESH_INDEX_MASK),
                                      (int)p->resp.n_socks, p->fd, &p->peer, p->nic);
        if (why == NULL)
          p->fd = -1;
      } else {
        why = file_sock(ctx, p);
      }
      pthread_mutex_unlock(&ctx->mu);
      if (why != NULL) {
        refuse(ctx, p, REFUSE_PROTOCOL, why);
        return false;
      }
      __atomic_add_fetch(&ctx->stats.n_accepted_socks, 1, __ATOMIC_RELAXED);
      return false;
    }
    /* HS_RESPONSE / HS_RELAY_REQ: read exactly the response (or relay
     * request), nothing of what may follow. */
    n = recv(p->fd, p->in + p->in_got, p->in_want - p->in_got, MSG_DONTWAIT);
    if (n > 0) {
      p->in_got += (size_t)n;
      if ((p->state == HS_RESPONSE) && mc_net_mesh_relay_req_is_one(p->in, p->in_got)) {
        p->state = HS_RELAY_REQ;
        p->in_want = MC_NET_MESH_RELAY_REQ_BYTES;
      }
      if (p->in_got < p->in_want)
        continue;
      if (p->state == HS_RELAY_REQ)
        return relay_start(ctx, p) && relay_progress(ctx, p);
      if (!verify(ctx, p))
        return false;
      continue;
    }
    if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)))
      return true;
    refuse(ctx, p, REFUSE_PROTOCOL,
           (n == 0) ? "closed before answering the challenge" : strerror(errno));
    return false;
  }
}

/* Drops incomplete connections older than GROUP_WINDOW_MS (ctx->mu held). */
static void expire_groups(struct mc_net_mesh_ctx *ctx, uint64_t now)
{
  for (struct mc_net_mesh_listen *l = ctx->listens; l != NULL; l = l->next) {
    struct mc_net_mesh_group **link = &l->groups;

    while (*link != NULL) {
      struct mc_net_mesh_group *g = *link;
      char host[MC_NET_MESH_HOST_TEXT_BYTES];

      if ((now < g->since_ns) || (now - g->since_ns <= (uint64_t)GROUP_WINDOW_MS * 1000000ull)) {
        link = &g->next;
        continue;
      }
      mc_net_mesh_host_str(ctx, g->peer_host, host, sizeof(host));
      MC_INFO(MC_SUB_NET,
              "NET/Mesh: dropped an incomplete connection from %s on %s (%d of %d "
              "sockets within %d s)",
              host, ctx->nics[g->nic].name, g->n_got, g->n_socks + 1, GROUP_WINDOW_MS / 1000);
      __atomic_add_fetch(&ctx->stats.n_refused, 1, __ATOMIC_RELAXED);
      *link = g->next;
      l->n_groups--;
      mc_net_mesh_group_free(g);
    }
  }
}

static void tick(struct mc_net_mesh_ctx *ctx, struct mc_net_mesh_hs_thread *t)
{
  struct pollfd pfd[1 + MC_NET_MESH_MAX_NICS + MC_NET_MESH_MAX_PENDING + 2];
  uint64_t window_ns = (uint64_t)ctx->handshake_ms * 1000000ull;
  uint64_t now;
  int n = 0;
  int disc0;
  int n_disc;

  pfd[n++] = (struct pollfd){.fd = t->wake[0], .events = POLLIN, .revents = 0};
  for (int i = 0; i < ctx->n_nics; i++)
    pfd[n++] = (struct pollfd){.fd = ctx->listen_fds[i], .events = POLLIN, .revents = 0};
  for (int i = 0; i < t->n_pend; i++) {
    const struct hs_pending *p = &t->pend[i];
    short ev = (p->out_done < p->out_bytes) ? POLLOUT : POLLIN;

    if ((p->state == HS_ONWARD_CONNECT) || (p->state == HS_ONWARD_REQ))
      pfd[n++] = (struct pollfd){.fd = p->fd2, .events = POLLOUT, .revents = 0};
    else if (p->state == HS_ONWARD_CHALLENGE)
      pfd[n++] = (struct pollfd){.fd = p->fd2, .events = POLLIN, .revents = 0};
    else
      pfd[n++] = (struct pollfd){.fd = p->fd, .events = ev, .revents = 0};
  }
  disc0 = n;
  n_disc = mc_net_mesh_disc_pollfds(ctx, pfd + n);
  n += n_disc;
  if ((poll(pfd, (nfds_t)n, TICK_MS) < 0) && (errno != EINTR))
    MC_WARN_ONCE("NET/Mesh: handshake thread: poll failed: %s", strerror(errno));
  if (pfd[0].revents != 0) {
    char drain[16];
    while (read(t->wake[0], drain, sizeof(drain)) > 0)
      ;
  }
  for (int i = 0; i < ctx->n_nics; i++) {
    if (pfd[1 + i].revents != 0)
      accept_new(ctx, t, i);
  }
  now = mc_time_ns();
  for (int i = 0; i < t->n_pend;) {
    struct hs_pending *p = &t->pend[i];
    char why[96];

    if (!progress(ctx, p)) {
      pend_remove(t, i);
      continue;
    }
    if ((now > p->since_ns) && (now - p->since_ns > window_ns)) {
      snprintf(why, sizeof(why), "no complete handshake within %d ms (%zu of %d bytes received)",
               ctx->handshake_ms, p->in_got, MC_NET_MESH_RESPONSE_BYTES);
      refuse(ctx, p, REFUSE_TIMEOUT, why);
      pend_remove(t, i);
      continue;
    }
    i++;
  }
  pthread_mutex_lock(&ctx->mu);
  expire_groups(ctx, mc_time_ns());
  mc_net_mesh_comms_tick(ctx);
  pthread_mutex_unlock(&ctx->mu);
  mc_net_mesh_disc_tick(ctx, pfd + disc0, n_disc);
}

static void *hs_main(void *arg)
{
  struct mc_net_mesh_ctx *ctx = arg;
  struct mc_net_mesh_hs_thread *t = ctx->hs;

  mc_thread_set_name("NCCL MeshHs");
  while ((__atomic_load_n(&t->stop, __ATOMIC_ACQUIRE) == 0) && !is_aborted(ctx))
    tick(ctx, t);
  for (int i = 0; i < t->n_pend; i++) {
    if (t->pend[i].fd >= 0)
      close(t->pend[i].fd);
    if (t->pend[i].fd2 >= 0)
      close(t->pend[i].fd2);
  }
  t->n_pend = 0;
  return NULL;
}

/* ---------- start / stop ---------- */

static ncclResult_t listen_on(struct mc_net_mesh_ctx *ctx, int i)
{
  struct mc_net_mesh_nic *nic = &ctx->nics[i];
  union mc_sockaddr a = nic->addr;
  socklen_t len = mc_sockaddr_len(&a);
  char s[MC_SOCKADDR_STRLEN];
  int one = 1;
  int fd;

  mc_sockaddr_set_port(&a, 0);
  if ((a.sa.sa_family == AF_INET6) && IN6_IS_ADDR_LINKLOCAL(&a.sin6.sin6_addr))
    a.sin6.sin6_scope_id = (uint32_t)nic->if_index;
  fd = socket(a.sa.sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return MC_FAIL(ncclSystemError, "NET/Mesh: socket() for %s %s failed: %s", nic->name,
                   mc_sockaddr_str(&a, s, sizeof(s)), strerror(errno));
  if (a.sa.sa_family == AF_INET6)
    (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
  if ((bind(fd, &a.sa, len) != 0) || (listen(fd, SOMAXCONN) != 0) ||
      (getsockname(fd, &a.sa, &len) != 0)) {
    int e = errno;
    close(fd);
    return MC_FAIL(ncclSystemError, "NET/Mesh: cannot listen on %s %s: %s", nic->name,
                   mc_sockaddr_str(&nic->addr, s, sizeof(s)), strerror(e));
  }
  ctx->listen_fds[i] = fd;
  ctx->listen_ports[i] = mc_sockaddr_port(&a);
  return ncclSuccess;
}

ncclResult_t mc_net_mesh_hs_start(struct mc_net_mesh_ctx *ctx)
{
  struct mc_net_mesh_hs_thread *t = NULL;
  ncclResult_t res = ncclSuccess;
  int e;

  for (int i = 0; i < MC_NET_MESH_MAX_NICS; i++)
    ctx->listen_fds[i] = -1;
  MC_CHECK(mc_calloc(&t, 1));
  t->wake[0] = t->wake[1] = -1;
  ctx->hs = t;
  for (int i = 0; i < ctx->n_nics; i++)
    MC_CHECK_GOTO(listen_on(ctx, i), res, err);
  MC_CHECK_GOTO(mc_net_mesh_disc_open(ctx), res, err);
  if (pipe2(t->wake, O_NONBLOCK | O_CLOEXEC) != 0) {
    res = MC_FAIL(ncclSystemError, "NET/Mesh: pipe2 for the handshake thread failed: %s",
                  strerror(errno));
    goto err;
  }
  e = pthread_create(&t->thread, NULL, hs_main, ctx);
  if (e != 0) {
    res = MC_FAIL(ncclSystemError, "NET/Mesh: cannot start the handshake thread: %s", strerror(e));
    goto err;
  }
  t->is_started = true;
  return ncclSuccess;

err:
  mc_net_mesh_hs_stop(ctx);
  return res;
}

void mc_net_mesh_hs_stop(struct mc_net_mesh_ctx *ctx)
{
  struct mc_net_mesh_hs_thread *t = ctx->hs;

  if (t == NULL)
    return;
  if (t->is_started) {
    __atomic_store_n(&t->stop, 1, __ATOMIC_RELEASE);
    if (write(t->wake[1], "x", 1) < 0) {
      /* the thread still sees stop within TICK_MS */
    }
    pthread_join(t->thread, NULL);
  }
  for (int i = 0; i < 2; i++) {
    if (t->wake[i] >= 0)
      close(t->wake[i]);
  }
  for (int i = 0; i < MC_NET_MESH_MAX_NICS; i++) {
    if (ctx->listen_fds[i] >= 0)
      close(ctx->listen_fds[i]);
    ctx->listen_fds[i] = -1;
  }
  mc_net_mesh_disc_close(ctx);
  free(t);
  ctx->hs = NULL;
}
