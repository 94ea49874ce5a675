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

enum hs_state { HS_CHALLENGE, HS_RESPONSE, HS_CONFIRM };

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
  uint8_t in[MC_NET_MESH_RESPONSE_BYTES];
  size_t in_got;
  struct mc_net_mesh_response resp;
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
  int64_t sndbuf = mc_param_int(MC_P_SOCKET_SNDBUF);
  int64_t rcvbuf = mc_param_int(MC_P_SOCKET_RCVBUF);

  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (sndbuf > 0) {
    int v = (int)sndbuf;
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
  }
  if (rcvbuf > 0) {
    int v = (int)rcvbuf;
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
  }
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
    p->peer = peer;
    p->nic = nic;
    p->since_ns = mc_time_ns();
    p->state = HS_CHALLENGE;
    if (mc_random_bytes(p->nonce_a, sizeof(p->nonce_a)) != ncclSuccess) {
      close(fd);
      return;
    }
    mc_net_mesh_sock_opts(fd);
    mc_net_mesh_challenge_encode(p->nonce_a, p->out);
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

  if (!mc_net_mesh_response_decode(p->in, &p->resp)) {
    refuse(ctx, p, REFUSE_PROTOCOL, "not a Mesh handshake (wrong magic or version)");
    return false;
  }
  mc_net_mesh_mac(ctx->key, 'C', p->nonce_a, &p->resp, mac);
  if (!mc_crypto_equal(mac, p->resp.mac, sizeof(mac))) {
    refuse(ctx, p, REFUSE_MAC, "authentication failed (the connector's MAC does not verify)");
    return false;
  }
  if ((p->resp.n_socks > MC_NET_SOCK_MAX_SOCKS) || (p->resp.index > p->resp.n_socks)) {
    snprintf(why, sizeof(why), "socket %u of %u data sockets (at most %d)", p->resp.index,
             p->resp.n_socks, MC_NET_SOCK_MAX_SOCKS);
    refuse(ctx, p, REFUSE_PROTOCOL, why);
    return false;
  }
  pthread_mutex_lock(&ctx->mu);
  has_listen = (find_listen(ctx, p->resp.listen_id) != NULL);
  pthread_mutex_unlock(&ctx->mu);
  if (!has_listen) {
    snprintf(why, sizeof(why), "listen comm %016llx is not open here (closed already?)",
             (unsigned long long)p->resp.listen_id);
    refuse(ctx, p, REFUSE_PROTOCOL, why);
    return false;
  }
  mc_net_mesh_mac(ctx->key, 'A', p->nonce_a, &p->resp, mac);
  mc_net_mesh_confirm_encode(mac, p->out);
  p->out_bytes = MC_NET_MESH_CONFIRM_BYTES;
  p->out_done = 0;
  p->state = HS_CONFIRM;
  return true;
}

/* Moves one handshake on. Returns false when the socket left the pending
 * set (refused, or filed under its listen comm). */
static bool progress(struct mc_net_mesh_ctx *ctx, struct hs_pending *p)
{
  for (;;) {
    ssize_t n;

    if (p->out_done < p->out_bytes) {
      n = send(p->fd, p->out + p->out_done, p->out_bytes - p->out_done,
               MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        p->out_done += (size_t)n;
        continue;
      }
      if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)))
        return true;
      refuse(ctx, p, REFUSE_PROTOCOL, (n < 0) ? strerror(errno) : "closed");
      return false;
    }
    if (p->state == HS_CHALLENGE) {
      p->state = HS_RESPONSE;
      continue;
    }
    if (p->state == HS_CONFIRM) {
      const char *why;

      pthread_mutex_lock(&ctx->mu);
      why = file_sock(ctx, p);
      pthread_mutex_unlock(&ctx->mu);
      if (why != NULL) {
        refuse(ctx, p, REFUSE_PROTOCOL, why);
        return false;
      }
      __atomic_add_fetch(&ctx->stats.n_accepted_socks, 1, __ATOMIC_RELAXED);
      return false;
    }
    /* HS_RESPONSE: read exactly the response, nothing of what may follow. */
    n = recv(p->fd, p->in + p->in_got, sizeof(p->in) - p->in_got, MSG_DONTWAIT);
    if (n > 0) {
      p->in_got += (size_t)n;
      if ((p->in_got == sizeof(p->in)) && !verify(ctx, p))
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

      if ((now < g->since_ns) || (now - g->since_ns <= (uint64_t)GROUP_WINDOW_MS * 1000000ull)) {
        link = &g->next;
        continue;
      }
      MC_INFO(MC_SUB_NET,
              "NET/Mesh: dropped an incomplete connection from host %016llx on %s (%d of %d "
              "sockets within %d s)",
              (unsigned long long)g->peer_host, ctx->nics[g->nic].name, g->n_got, g->n_socks + 1,
              GROUP_WINDOW_MS / 1000);
      __atomic_add_fetch(&ctx->stats.n_refused, 1, __ATOMIC_RELAXED);
      *link = g->next;
      l->n_groups--;
      mc_net_mesh_group_free(g);
    }
  }
}

static void tick(struct mc_net_mesh_ctx *ctx, struct mc_net_mesh_hs_thread *t)
{
  struct pollfd pfd[1 + MC_NET_MESH_MAX_NICS + MC_NET_MESH_MAX_PENDING];
  uint64_t window_ns = (uint64_t)ctx->handshake_ms * 1000000ull;
  uint64_t now;
  int n = 0;

  pfd[n++] = (struct pollfd){.fd = t->wake[0], .events = POLLIN, .revents = 0};
  for (int i = 0; i < ctx->n_nics; i++)
    pfd[n++] = (struct pollfd){.fd = ctx->listen_fds[i], .events = POLLIN, .revents = 0};
  for (int i = 0; i < t->n_pend; i++) {
    short ev = (t->pend[i].out_done < t->pend[i].out_bytes) ? POLLOUT : POLLIN;
    pfd[n++] = (struct pollfd){.fd = t->pend[i].fd, .events = ev, .revents = 0};
  }
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
  pthread_mutex_unlock(&ctx->mu);
}

static void *hs_main(void *arg)
{
  struct mc_net_mesh_ctx *ctx = arg;
  struct mc_net_mesh_hs_thread *t = ctx->hs;

  mc_thread_set_name("NCCL MeshHs");
  while ((__atomic_load_n(&t->stop, __ATOMIC_ACQUIRE) == 0) && !is_aborted(ctx))
    tick(ctx, t);
  for (int i = 0; i < t->n_pend; i++)
    close(t->pend[i].fd);
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
  free(t);
  ctx->hs = NULL;
}
