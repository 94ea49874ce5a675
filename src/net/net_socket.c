/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The built-in socket net ("Socket"): devices, properties and connection
 * set-up; the data path is in net_socket_io.c. Mirrors NCCL's
 * transport/net_socket.cc: the devices are the interfaces NCCL's socket
 * rules select (NCCL_SOCKET_IFNAME, else ib*, then anything but
 * docker/lo/virbr, then docker, lo, virbr; all of the first class that has
 * any), a connection is one control socket plus n_socks data sockets, every
 * socket passes the 12-byte handshake (magic NCCL_SOCKET_MAGIC, type NET).
 *
 * Unlike NCCL's, every socket is then authenticated (net_auth.h, the
 * socket net's domain): the listener sends a challenge, the connector
 * answers with which connection and index the socket is, bound by an
 * HMAC under a key derived from the communicator's secret (which only its
 * ranks know: it comes from the unique id, src/init/init_net.c) and the
 * listener's random id from the handle, and the listener confirms with its
 * own HMAC. A process that does not know the secret can neither deliver a
 * byte to a receive comm nor pose as a listener; the connection id lets
 * several connectors share a listener (NCCL sends a 1-byte index and relies
 * on one connector per listener).
 *
 * connect and accept never block: each call moves the set-up as far as the
 * kernel allows and returns *comm == NULL until the connection is complete.
 * connect keeps its unfinished state in the context, keyed by the handle's
 * address and contents (the handle is const): call it again with the same
 * handle buffer; a socket that the listener closes before confirming it
 * (evicted under a flood of strangers, say) is connected again, up to
 * CONNECT_RESTARTS times. accept keeps the sockets that have not
 * authenticated yet in the listen comm, at most MAX_HELLO_PENDING: a newcomer
 * evicts the oldest of them, never one that has authenticated; a socket that
 * sends a bad handshake or response, closes, or does not answer within
 * HELLO_WINDOW_MS is closed and counted, never waited for. Authenticated
 * sockets wait in their connection's group (at most MAX_GROUPS connections
 * being set up at once, only ranks of the communicator can take a group)
 * until the connection is whole.
 */
#include "net.h"
#include "net_auth.h"
#include "net_socket_int.h"

#include "check.h"
#include "log.h"
#include "params.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define HELLO_WINDOW_MS    30000 /* a socket that does not say who it is is dropped */
#define GROUP_WINDOW_MS    30000 /* an incomplete connection is dropped */
#define MAX_HELLO_PENDING  128
#define MAX_GROUPS         32
#define CONNECT_RESTARTS   3    /* new TCP connections for a socket the listener closed */
#define LIVENESS_PER_MILLE 1500 /* TCP_USER_TIMEOUT in ms per second of MESHCCL_NET_TIMEOUT */

_Static_assert(sizeof(struct mc_net_sock_handle) <= MC_NET_HANDLE_BYTES,
               "the socket net's handle must fit NCCL's 128 bytes");

/* ---------- devices ---------- */

/* NCCL's automatic interface classes, in order: the first with any match wins. */
static const char *const auto_classes[] = {"ib", "^docker,lo,virbr", "docker", "lo", "virbr"};

static int collect(const struct mc_ifc *ifs, int n_ifs, const struct mc_if_pattern *pat,
                   struct mc_ifc *out, int max_out)
{
  int n = 0;

  for (int i = 0; (i < n_ifs) && (n < max_out); i++) {
    if (mc_if_pattern_match(pat, ifs[i].name))
      out[n++] = ifs[i];
  }
  return n;
}

static ncclResult_t find_devs(struct mc_net_sock_ctx *ctx)
{
  struct mc_ifc ifs[MC_MAX_IFS];
  struct mc_if_pattern pat;
  const char *spec = mc_param_str(MC_P_SOCKET_IFNAME);
  char names[512];
  size_t used = 0;
  int n_ifs = 0;

  MC_CHECK(mc_if_list(mc_if_family_param(), ifs, MC_MAX_IFS, &n_ifs));
  if ((spec != NULL) && (strlen(spec) <= 1))
    spec = NULL; /* NCCL ignores "^" and "=" alone */
  ctx->n_devs = 0;
  if (spec != NULL) {
    MC_CHECK(mc_if_pattern_parse(spec, "NCCL_SOCKET_IFNAME", &pat));
    ctx->n_devs = collect(ifs, n_ifs, &pat, ctx->devs, MC_NET_SOCK_MAX_DEVS);
  } else {
    for (size_t c = 0; (c < sizeof(auto_classes) / sizeof(auto_classes[0])) && (ctx->n_devs == 0);
         c++) {
      MC_CHECK(mc_if_pattern_parse(auto_classes[c], "NET/Socket interface class", &pat));
      ctx->n_devs = collect(ifs, n_ifs, &pat, ctx->devs, MC_NET_SOCK_MAX_DEVS);
    }
  }
  names[0] = '\0';
  for (int i = 0; i < n_ifs; i++)
    mc_str_appendf(names, sizeof(names), &used, "%s%s", (i > 0) ? " " : "", ifs[i].name);
  if (ctx->n_devs == 0)
    return MC_FAIL(
        ncclInvalidUsage,
        "NET/Socket: no usable interface (NCCL_SOCKET_IFNAME=%s, NCCL_SOCKET_FAMILY=%s); "
        "interfaces up: %s",
        (spec != NULL) ? spec : "unset",
        (mc_param_str(MC_P_SOCKET_FAMILY) != NULL) ? mc_param_str(MC_P_SOCKET_FAMILY) : "unset",
        (n_ifs > 0) ? names : "none");
  return ncclSuccess;
}

/* The key every socket of a connection proves it knows (net_auth.h): from
 * the communicator's secret, else MESHCCL_SECRET, else none (integrity
 * only, said at INFO). */
static void derive_key(struct mc_net_sock_ctx *ctx, const struct mc_net_init_args *args)
{
  uint64_t id = (args != NULL) ? args->comm_id : 0;
  const void *secret;
  size_t secret_bytes;

  mc_net_sock_secret(args, &secret, &secret_bytes);
  mc_net_auth_key(&mc_net_auth_socket, secret, secret_bytes, id, ctx->key);
  if (secret == NULL) {
    MC_INFO(MC_SUB_INIT | MC_SUB_NET,
            "NET/Socket: no secret from the communicator and MESHCCL_SECRET unset: connections "
            "are checked for integrity but not authenticated");
  }
}

static ncclResult_t sock_init(const struct mc_net_init_args *args, void **ctx_out)
{
  struct mc_net_sock_ctx *ctx = NULL;
  ncclResult_t res;
  char line[1024];
  size_t used = 0;

  MC_CHECK(mc_calloc(&ctx, 1));
  ctx->abort_flag = (args != NULL) ? args->abort_flag : NULL;
  res = find_devs(ctx);
  if (res != ncclSuccess) {
    free(ctx);
    return res;
  }
  mc_net_sock_threads("NET/Socket", &ctx->n_threads, &ctx->n_socks);
  ctx->inline_bytes = (uint32_t)mc_param_int(MC_P_SOCKET_INLINE);
  ctx->min_task_bytes = (uint32_t)mc_param_int(MC_P_SOCKET_MIN_TASKSIZE);
  ctx->magic = (uint64_t)mc_param_int(MC_P_SOCKET_MAGIC);
  /* The kernel's bound on a dead link (TCP_USER_TIMEOUT, keepalive) is
   * looser than the NET transport's watchdog (MESHCCL_NET_TIMEOUT), which
   * names the stalled connection first while a collective waits on it. */
  ctx->liveness_ms = mc_param_int(MC_P_NET_TIMEOUT) * LIVENESS_PER_MILLE;
  derive_key(ctx, args);
  pthread_mutex_init(&ctx->mu, NULL);
  line[0] = '\0';
  for (int i = 0; i < ctx->n_devs; i++) {
    char a[MC_SOCKADDR_STRLEN];

    mc_if_speed(ctx->devs[i].name, &ctx->speeds[i]);
    mc_str_appendf(line, sizeof(line), &used, " [%d]%s:%s", i, ctx->devs[i].name,
                   mc_sockaddr_str(&ctx->devs[i].addr, a, sizeof(a)));
    if (ctx->speeds[i].shaped_mbps > 0)
      MC_INFO(MC_SUB_INIT | MC_SUB_NET, "NET/Socket : %s is shaped: tbf %d Mb/s, link %d Mb/s",
              ctx->devs[i].name, ctx->speeds[i].shaped_mbps, ctx->speeds[i].link_mbps);
  }
  /* NCCL's line (ncclNetSocketInit), then meshccl's choices on their own. */
  MC_INFO(MC_SUB_INIT | MC_SUB_NET, "NET/Socket : Using%s", line);
  MC_INFO(MC_SUB_INIT | MC_SUB_NET,
          "NET/Socket : %d helper threads, %d data sockets per connection%s", ctx->n_threads,
          ctx->n_socks, (mc_param_int(MC_P_SOCKET_NTHREADS) < 0) ? " (automatic)" : "");
  *ctx_out = ctx;
  return ncclSuccess;
}

static ncclResult_t sock_devices(void *vctx, int *ndev)
{
  struct mc_net_sock_ctx *ctx = vctx;

  *ndev = ctx->n_devs;
  return ncclSuccess;
}

static void if_pci_path(const char *if_name, char *out, size_t out_bytes)
{
  const char *root = mc_param_str(MC_P_SYSFS_ROOT);
  char path[PATH_MAX];
  char real[PATH_MAX];

  out[0] = '\0';
  snprintf(path, sizeof(path), "%s/sys/class/net/%s/device", (root != NULL) ? root : "", if_name);
  if ((realpath(path, real) != NULL) && (strlen(real) < out_bytes))
    memcpy(out, real, strlen(real) + 1);
}

static ncclResult_t sock_get_properties(void *vctx, int dev, struct mc_net_props *props)
{
  struct mc_net_sock_ctx *ctx = vctx;

  if ((dev < 0) || (dev >= ctx->n_devs))
    return MC_FAIL(ncclInvalidArgument, "NET/Socket: device %d does not exist (%d devices)", dev,
                   ctx->n_devs);
  mc_net_sock_props_init(dev, props);
  snprintf(props->name, sizeof(props->name), "%s", ctx->devs[dev].name);
  if_pci_path(ctx->devs[dev].name, props->pci_path, sizeof(props->pci_path));
  props->guid = (uint64_t)dev;
  props->speed = ctx->speeds[dev].mbps;
  return ncclSuccess;
}

static ncclResult_t sock_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
  (void)comm;
  (void)data;
  (void)size;
  return mc_net_sock_reg_host("NET/Socket", type, mhandle);
}

/* ---------- listen / accept ---------- */

enum pend_state {
  PEND_CHALLENGE, /* sending our challenge */
  PEND_RESPONSE,  /* reading the connector's response */
  PEND_CONFIRM    /* authenticated; sending our confirm */
};

/* An accepted socket that has not yet proven it knows the key. */
struct hello_pending {
  struct mc_sock sock;
  enum pend_state state;
  uint8_t nonce_a[MC_NET_AUTH_NONCE_BYTES];
  struct mc_net_auth_response resp;
  uint8_t buf[MC_NET_AUTH_RESPONSE_BYTES];
  size_t done;
  uint64_t since_ns;
};

/* The authenticated sockets of one connection, until all have arrived. */
struct conn_group {
  bool used;
  uint64_t conn_id;
  int n_got;
  uint64_t since_ns;
  struct mc_sock *socks; /* [n_socks + 1], fd -1 until that index arrived */
};

struct mc_net_sock_listen {
  const volatile uint32_t *abort_flag;
  int64_t liveness_ms;
  int n_socks;
  int n_threads;
  uint32_t inline_bytes;
  uint32_t min_task_bytes;
  uint64_t listen_id;
  uint8_t key[MC_SHA256_BYTES];
  bool has_warned_mac;
  struct mc_listener listener;
  struct hello_pending pend[MAX_HELLO_PENDING];
  int n_pend;
  struct conn_group groups[MAX_GROUPS];
};

static void group_free(struct mc_net_sock_listen *l, struct conn_group *g)
{
  for (int i = 0; (g->socks != NULL) && (i <= l->n_socks); i++)
    mc_sock_close(&g->socks[i]);
  free(g->socks);
  memset(g, 0, sizeof(*g));
}

static void drop_sock(struct mc_net_sock_listen *l, struct mc_sock *s, const char *why)
{
  char a[MC_SOCKADDR_STRLEN];
  char b[MC_SOCKADDR_STRLEN];

  MC_INFO(MC_SUB_NET, "NET/Socket: dropped connection from %s to %s: %s",
          mc_sockaddr_str(&s->addr, a, sizeof(a)),
          mc_sockaddr_str(&l->listener.sock.addr, b, sizeof(b)), why);
  mc_sock_close(s);
  l->listener.n_rejected++;
}

static ncclResult_t sock_listen(void *vctx, int dev, void *handle, void **listen_comm)
{
  struct mc_net_sock_ctx *ctx = vctx;
  struct mc_net_sock_listen *l = NULL;
  struct mc_net_sock_handle h;
  union mc_sockaddr local;
  ncclResult_t res;

  if ((dev < 0) || (dev >= ctx->n_devs))
    return MC_FAIL(ncclInvalidArgument, "NET/Socket: listen on device %d: %d devices", dev,
                   ctx->n_devs);
  MC_CHECK(mc_calloc(&l, 1));
  res = mc_random_bytes(&l->listen_id, sizeof(l->listen_id));
  if (res != ncclSuccess) {
    free(l);
    return res;
  }
  local = ctx->devs[dev].addr;
  mc_sockaddr_set_port(&local, 0);
  res = mc_sock_listen(&local, ctx->magic, MC_SOCK_TYPE_NET, &l->listener);
  if (res != ncclSuccess) {
    res = MC_FAIL(res, "NET/Socket: cannot listen on %s: %s", ctx->devs[dev].name,
                  l->listener.sock.err);
    free(l);
    return res;
  }
  l->abort_flag = ctx->abort_flag;
  l->liveness_ms = ctx->liveness_ms;
  l->n_socks = ctx->n_socks;
  l->n_threads = ctx->n_threads;
  l->inline_bytes = ctx->inline_bytes;
  l->min_task_bytes = ctx->min_task_bytes;
  memcpy(l->key, ctx->key, sizeof(l->key));
  memset(&h, 0, sizeof(h));
  h.addr = l->listener.sock.addr;
  h.magic = ctx->magic;
  h.listen_id = l->listen_id;
  h.n_socks = l->n_socks;
  h.n_threads = l->n_threads;
  h.inline_bytes = l->inline_bytes;
  h.min_task_bytes = l->min_task_bytes;
  memset(handle, 0, MC_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof(h));
  *listen_comm = l;
  return ncclSuccess;
}

/* Checks a complete response; NULL when it proves the key, else why not. */
static const char *response_check(struct mc_net_sock_listen *l, struct hello_pending *p, char *why,
                                  size_t why_bytes)
{
  uint8_t mac[MC_SHA256_BYTES];
  char a[MC_SOCKADDR_STRLEN];

  if (!mc_net_auth_response_decode(&mc_net_auth_socket, p->buf, &p->resp))
    return "not a socket-net response (wrong magic or version)";
  if (p->resp.listen_id != l->listen_id)
    return "its response is for another listener";
  mc_net_auth_mac(&mc_net_auth_socket, l->key, 'C', p->nonce_a, &p->resp, mac);
  if (!mc_crypto_equal(mac, p->resp.mac, sizeof(mac))) {
    if (!l->has_warned_mac) {
      l->has_warned_mac = true;
      MC_WARN("NET/Socket: a connection from %s failed authentication (its MAC does not verify): "
              "a process that does not know this communicator's secret, or ranks with "
              "different MESHCCL_SECRET or unique ids; dropped",
              mc_sockaddr_str(&p->sock.addr, a, sizeof(a)));
    }
    return "failed authentication (its MAC does not verify)";
  }
  if ((p->resp.n_socks != (uint32_t)l->n_socks) || (p->resp.index > (uint32_t)l->n_socks)) {
    snprintf(why, why_bytes,
             "bad hello (socket %u of %u data sockets; this listener expects %d data sockets)",
             p->resp.index, p->resp.n_socks, l->n_socks);
    return why;
  }
  return NULL;
}

/* The group an authenticated socket of conn_id joins (a new one when it is
 * the connection's first), or NULL with *why set. */
static struct conn_group *group_find(struct mc_net_sock_listen *l, const struct hello_pending *p,
                                     uint64_t now, const char **why)
{
  struct conn_group *empty = NULL;

  for (int k = 0; k < MAX_GROUPS; k++) {
    struct conn_group *g = &l->groups[k];

    if (g->used && (g->conn_id == p->resp.conn_id)) {
      if (g->socks[p->resp.index].fd >= 0) {
        *why = "duplicate socket index";
        return NULL;
      }
      return g;
    }
    if (!g->used && (empty == NULL))
      empty = g;
  }
  if (empty != NULL) {
    empty->socks = calloc((size_t)l->n_socks + 1, sizeof(*empty->socks));
    if (empty->socks != NULL) {
      for (int k = 0; k <= l->n_socks; k++)
        mc_sock_init(&empty->socks[k]);
      empty->used = true;
      empty->conn_id = p->resp.conn_id;
      empty->since_ns = now;
      return empty;
    }
  }
  *why = "too many connections being set up at once";
  return NULL;
}

/* Moves one pending socket's handshake on. Returns true when the socket
 * left the pending list's care (joined its group, or dropped with *why). */
static bool pend_progress(struct mc_net_sock_listen *l, struct hello_pending *p, uint64_t now,
                          const char **why, char *buf, size_t buf_bytes)
{
  int r = 0;

  if (p->state == PEND_CHALLENGE) {
    r = mc_net_auth_io(p->sock.fd, true, p->buf, MC_NET_AUTH_CHALLENGE_BYTES, &p->done);
    if (r > 0) {
      p->state = PEND_RESPONSE;
      p->done = 0;
    }
  }
  if (p->state == PEND_RESPONSE) {
    r = mc_net_auth_io(p->sock.fd, false, p->buf, MC_NET_AUTH_RESPONSE_BYTES, &p->done);
    if (r > 0) {
      uint8_t mac[MC_SHA256_BYTES];
      struct conn_group *g;

      *why = response_check(l, p, buf, buf_bytes);
      if (*why != NULL)
        return true;
      /* Only a socket that can join is confirmed: a connector that is
       * confirmed counts on its socket. */
      g = group_find(l, p, now, why);
      if (g == NULL)
        return true;
      mc_net_auth_mac(&mc_net_auth_socket, l->key, 'A', p->nonce_a, &p->resp, mac);
      mc_net_auth_confirm_encode(&mc_net_auth_socket, mac, p->buf);
      p->state = PEND_CONFIRM;
      p->done = 0;
    }
  }
  if (p->state == PEND_CONFIRM) {
    r = mc_net_auth_io(p->sock.fd, true, p->buf, MC_NET_AUTH_CONFIRM_BYTES, &p->done);
    if (r > 0) {
      struct conn_group *g = group_find(l, p, now, why);

      if (g == NULL)
        return true;
      g->socks[p->resp.index] = p->sock;
      g->n_got++;
      mc_sock_init(&p->sock);
      return true;
    }
  }
  if (r < 0) {
    if (errno != 0)
      *why = strerror(errno);
    else
      *why = (p->state == PEND_RESPONSE) ? "closed before answering the challenge"
                                         : "closed during the handshake";
    return true;
  }
  if ((p->state != PEND_CONFIRM) && (now - p->since_ns > (uint64_t)HELLO_WINDOW_MS * 1000000ull)) {
    *why = "did not answer the challenge within 30 s";
    return true;
  }
  return false;
}

/* Moves every pending handshake on; an authenticated socket joins its
 * connection's group. */
static void hellos_progress(struct mc_net_sock_listen *l)
{
  uint64_t now = mc_time_ns();

  for (int i = 0; i < l->n_pend;) {
    struct hello_pending *p = &l->pend[i];
    const char *why = NULL;
    char buf[160];

    if (!pend_progress(l, p, now, &why, buf, sizeof(buf))) {
      i++;
      continue;
    }
    if (why != NULL)
      drop_sock(l, &p->sock, why);
    l->pend[i] = l->pend[--l->n_pend];
  }
  for (int k = 0; k < MAX_GROUPS; k++) {
    struct conn_group *g = &l->groups[k];
    if (g->used && (g->n_got <= l->n_socks) &&
        (now - g->since_ns > (uint64_t)GROUP_WINDOW_MS * 1000000ull)) {
      MC_INFO(MC_SUB_NET, "NET/Socket: dropped an incomplete connection (%d of %d sockets in %d s)",
              g->n_got, l->n_socks + 1, GROUP_WINDOW_MS / 1000);
      l->listener.n_rejected++;
      group_free(l, g);
    }
  }
}

/* Room for a newcomer when MAX_HELLO_PENDING sockets are waiting: the
 * oldest that has not authenticated is evicted (never one that has). False
 * when every waiting socket has authenticated. */
static bool pend_make_room(struct mc_net_sock_listen *l)
{
  int oldest = -1;

  for (int i = 0; i < l->n_pend; i++) {
    if ((l->pend[i].state != PEND_CONFIRM) &&
        ((oldest < 0) || (l->pend[i].since_ns < l->pend[oldest].since_ns)))
      oldest = i;
  }
  if (oldest < 0)
    return false;
  drop_sock(l, &l->pend[oldest].sock,
            "evicted: too many sockets waiting to authenticate at this listener");
  l->pend[oldest] = l->pend[--l->n_pend];
  return true;
}

static ncclResult_t pend_add(struct mc_net_sock_listen *l, struct mc_sock *s)
{
  struct hello_pending *p;

  if ((l->n_pend == MAX_HELLO_PENDING) && !pend_make_room(l)) {
    drop_sock(l, s, "too many sockets authenticating at this listener");
    return ncclSuccess;
  }
  p = &l->pend[l->n_pend];
  memset(p, 0, sizeof(*p));
  MC_CHECK(mc_random_bytes(p->nonce_a, sizeof(p->nonce_a)));
  mc_net_auth_challenge_encode(&mc_net_auth_socket, p->nonce_a, p->buf);
  p->sock = *s;
  p->state = PEND_CHALLENGE;
  p->since_ns = mc_time_ns();
  l->n_pend++;
  return ncclSuccess;
}

static ncclResult_t sock_accept(void *listen_comm, void **recv_comm)
{
  struct mc_net_sock_listen *l = listen_comm;
  struct mc_wait w;
  ncclResult_t res;

  *recv_comm = NULL;
  if ((l->abort_flag != NULL) && (__atomic_load_n(l->abort_flag, __ATOMIC_ACQUIRE) != 0))
    return ncclInternalError; /* aborted by the user: no WARN */
  memset(&w, 0, sizeof(w));
  w.dl = mc_deadline_in_ms(0); /* take what is there, never wait */
  hellos_progress(l);          /* first: a response already buffered is never evicted */
  for (;;) {
    struct mc_sock s;

    res = mc_sock_accept(&l->listener, &w, &s);
    if (res != ncclSuccess) {
      if (l->listener.sock.end == MC_SOCK_END_TIMEOUT)
        break;
      return MC_FAIL(res, "NET/Socket: accept: %s", l->listener.sock.err);
    }
    res = pend_add(l, &s);
    if (res != ncclSuccess) {
      mc_sock_close(&s);
      return res;
    }
  }
  hellos_progress(l);
  for (int k = 0; k < MAX_GROUPS; k++) {
    struct conn_group *g = &l->groups[k];
    struct mc_net_sock_comm *comm = NULL;

    if (!g->used || (g->n_got != l->n_socks + 1))
      continue;
    res = mc_net_sock_comm_create(false, l->abort_flag, g->socks, l->n_socks, l->n_threads,
                                  l->inline_bytes, l->min_task_bytes, &comm);
    group_free(l, g);
    if (res != ncclSuccess)
      return res;
    res = mc_net_sock_comm_set_liveness(comm, l->liveness_ms);
    if (res != ncclSuccess) {
      mc_net_sock_comm_destroy(comm);
      return res;
    }
    *recv_comm = comm;
    return ncclSuccess;
  }
  return ncclSuccess;
}

static ncclResult_t sock_close_listen(void *listen_comm)
{
  struct mc_net_sock_listen *l = listen_comm;

  if (l == NULL)
    return ncclSuccess;
  for (int i = 0; i < l->n_pend; i++)
    mc_sock_close(&l->pend[i].sock);
  for (int k = 0; k < MAX_GROUPS; k++) {
    if (l->groups[k].used)
      group_free(l, &l->groups[k]);
  }
  mc_listener_close(&l->listener);
  mc_crypto_wipe(l->key, sizeof(l->key));
  free(l);
  return ncclSuccess;
}

/* ---------- connect ---------- */

enum conn_state {
  CONN_TCP,       /* TCP connect and the 12-byte handshake */
  CONN_CHALLENGE, /* reading the listener's challenge */
  CONN_RESPONSE,  /* sending our response */
  CONN_CONFIRM,   /* reading the listener's confirm */
  CONN_DONE
};

struct conn_sock {
  struct mc_sock_async a;
  enum conn_state state;
  int restarts; /* new TCP connections after the listener closed one */
  uint64_t since_ns;
  uint8_t nonce_a[MC_NET_AUTH_NONCE_BYTES];
  struct mc_net_auth_response resp;
  uint8_t buf[MC_NET_AUTH_RESPONSE_BYTES];
  size_t done;
};

struct mc_net_sock_connect {
  struct mc_net_sock_connect *next;
  const void *handle_ptr;
  struct mc_net_sock_handle handle;
  int dev;
  uint64_t conn_id;
  int n; /* sockets: 1 + n_socks */
  struct conn_sock *socks;
};

static void connect_free(struct mc_net_sock_connect *c)
{
  if (c == NULL)
    return;
  for (int i = 0; (c->socks != NULL) && (i < c->n); i++)
    mc_sock_close(&c->socks[i].a.sock);
  free(c->socks);
  free(c);
}

static ncclResult_t conn_sock_start(struct mc_net_sock_ctx *ctx, struct mc_net_sock_connect *c,
                                    int i)
{
  struct conn_sock *s = &c->socks[i];
  char a[MC_SOCKADDR_STRLEN];
  ncclResult_t res;

  s->state = CONN_TCP;
  s->done = 0;
  res = mc_sock_connect_start(&c->handle.addr, c->handle.magic, MC_SOCK_TYPE_NET, &s->a);
  if (res != ncclSuccess)
    return MC_FAIL(res, "NET/Socket: cannot connect to %s from %s: %s",
                   mc_sockaddr_str(&c->handle.addr, a, sizeof(a)), ctx->devs[c->dev].name,
                   s->a.sock.err);
  return ncclSuccess;
}

static ncclResult_t connect_new(struct mc_net_sock_ctx *ctx, int dev, const void *handle,
                                struct mc_net_sock_connect **c_out)
{
  ncclResult_t res = ncclSuccess;
  struct mc_net_sock_connect *c = NULL;
  struct mc_net_sock_handle h;

  MC_CHECK(mc_net_sock_handle_parse(handle, ctx->magic, &h));
  MC_CHECK(mc_calloc(&c, 1));
  c->handle_ptr = handle;
  c->handle = h;
  c->dev = dev;
  c->n = h.n_socks + 1;
  MC_CHECK_GOTO(mc_random_bytes(&c->conn_id, sizeof(c->conn_id)), res, err);
  MC_CHECK_GOTO(mc_calloc(&c->socks, (size_t)c->n), res, err);
  for (int i = 0; i < c->n; i++)
    mc_sock_init(&c->socks[i].a.sock);
  for (int i = 0; i < c->n; i++)
    MC_CHECK_GOTO(conn_sock_start(ctx, c, i), res, err);
  *c_out = c;
  return ncclSuccess;

err:
  connect_free(c);
  return res;
}

/* The listener closed socket i before confirming it: it refused our MAC, or
 * it evicted the socket while strangers flooded it. A few new connections
 * tell the two apart. */
static ncclResult_t conn_sock_closed(struct mc_net_sock_ctx *ctx, struct mc_net_sock_connect *c,
                                     int i, int err)
{
  struct conn_sock *s = &c->socks[i];
  char a[MC_SOCKADDR_STRLEN];

  if ((s->restarts < CONNECT_RESTARTS) && ((err == 0) || (err == ECONNRESET) || (err == EPIPE))) {
    s->restarts++;
    mc_sock_close(&s->a.sock);
    return conn_sock_start(ctx, c, i);
  }
  return MC_FAIL(ncclRemoteError,
                 "NET/Socket: %s closed socket %d of the connection from %s during "
                 "authentication (%s, %d times): it refused our MAC (ranks with different "
                 "secrets or unique ids?), or its listen comm is closed",
                 mc_sockaddr_str(&c->handle.addr, a, sizeof(a)), i, ctx->devs[c->dev].name,
                 (err != 0) ? strerror(err) : "closed", s->restarts + 1);
}

/* Moves socket i of c through TCP connect, challenge, response and confirm. */
static ncclResult_t conn_sock_progress(struct mc_net_sock_ctx *ctx, struct mc_net_sock_connect *c,
                                       int i, uint64_t now)
{
  struct conn_sock *s = &c->socks[i];
  char a[MC_SOCKADDR_STRLEN];
  int r = 0;

  if (s->state == CONN_TCP) {
    bool up = false;
    ncclResult_t res = mc_sock_connect_poll(&s->a, &up);

    if (res != ncclSuccess)
      return MC_FAIL(res, "NET/Socket: cannot connect to %s from %s: %s",
                     mc_sockaddr_str(&c->handle.addr, a, sizeof(a)), ctx->devs[c->dev].name,
                     s->a.sock.err);
    if (!up)
      return ncclSuccess;
    s->state = CONN_CHALLENGE;
    s->done = 0;
    s->since_ns = now;
  }
  if (s->state == CONN_CHALLENGE) {
    r = mc_net_auth_io(s->a.sock.fd, false, s->buf, MC_NET_AUTH_CHALLENGE_BYTES, &s->done);
    if (r > 0) {
      if (!mc_net_auth_challenge_decode(&mc_net_auth_socket, s->buf, s->nonce_a))
        return MC_FAIL(ncclRemoteError,
                       "NET/Socket: %s is not a socket-net listener of this version (its "
                       "challenge has the wrong magic or version)",
                       mc_sockaddr_str(&c->handle.addr, a, sizeof(a)));
      memset(&s->resp, 0, sizeof(s->resp));
      s->resp.listen_id = c->handle.listen_id;
      s->resp.conn_id = c->conn_id;
      s->resp.index = (uint32_t)i;
      s->resp.n_socks = (uint32_t)c->handle.n_socks;
      MC_CHECK(mc_random_bytes(s->resp.nonce_c, sizeof(s->resp.nonce_c)));
      mc_net_auth_mac(&mc_net_auth_socket, ctx->key, 'C', s->nonce_a, &s->resp, s->resp.mac);
      mc_net_auth_response_encode(&mc_net_auth_socket, &s->resp, s->buf);
      s->state = CONN_RESPONSE;
      s->done = 0;
    }
  }
  if (s->state == CONN_RESPONSE) {
    r = mc_net_auth_io(s->a.sock.fd, true, s->buf, MC_NET_AUTH_RESPONSE_BYTES, &s->done);
    if (r > 0) {
      s->state = CONN_CONFIRM;
      s->done = 0;
    }
  }
  if (s->state == CONN_CONFIRM) {
    r = mc_net_auth_io(s->a.sock.fd, false, s->buf, MC_NET_AUTH_CONFIRM_BYTES, &s->done);
    if (r > 0) {
      uint8_t got[MC_SHA256_BYTES];
      uint8_t want[MC_SHA256_BYTES];

      if (!mc_net_auth_confirm_decode(&mc_net_auth_socket, s->buf, got))
        return MC_FAIL(ncclRemoteError, "NET/Socket: %s sent a bad confirmation (wrong magic)",
                       mc_sockaddr_str(&c->handle.addr, a, sizeof(a)));
      mc_net_auth_mac(&mc_net_auth_socket, ctx->key, 'A', s->nonce_a, &s->resp, want);
      if (!mc_crypto_equal(got, want, sizeof(got)))
        return MC_FAIL(ncclRemoteError,
                       "NET/Socket: the listener at %s failed authentication (its MAC does not "
                       "verify: a process that does not know this communicator's secret "
                       "answers at this address)",
                       mc_sockaddr_str(&c->handle.addr, a, sizeof(a)));
      s->state = CONN_DONE;
    }
  }
  if (r < 0)
    return conn_sock_closed(ctx, c, i, errno);
  if ((s->state != CONN_DONE) && (now - s->since_ns > (uint64_t)HELLO_WINDOW_MS * 1000000ull))
    return MC_FAIL(ncclTimeout,
                   "NET/Socket: %s did not %s within %d s (a listener that is not a meshccl "
                   "rank of this job, or a stalled one)",
                   mc_sockaddr_str(&c->handle.addr, a, sizeof(a)),
                   (s->state == CONN_CONFIRM) ? "confirm our response" : "send its challenge",
                   HELLO_WINDOW_MS / 1000);
  return ncclSuccess;
}

/* Moves every socket of c on; *done_out once all are authenticated. */
static ncclResult_t connect_progress(struct mc_net_sock_ctx *ctx, struct mc_net_sock_connect *c,
                                     bool *done_out)
{
  uint64_t now = mc_time_ns();
  int n_done = 0;

  for (int i = 0; i < c->n; i++) {
    MC_CHECK(conn_sock_progress(ctx, c, i, now));
    if (c->socks[i].state == CONN_DONE)
      n_done++;
  }
  *done_out = (n_done == c->n);
  return ncclSuccess;
}

static ncclResult_t sock_connect(void *vctx, int dev, const void *handle, void **send_comm)
{
  struct mc_net_sock_ctx *ctx = vctx;
  struct mc_net_sock_connect *c = NULL;
  struct mc_net_sock_connect **link;
  struct mc_net_sock_comm *comm = NULL;
  ncclResult_t res = ncclSuccess;
  bool done = false;

  *send_comm = NULL;
  if ((dev < 0) || (dev >= ctx->n_devs) || (handle == NULL))
    return MC_FAIL(ncclInvalidArgument, "NET/Socket: connect on device %d (%d devices), handle %p",
                   dev, ctx->n_devs, handle);
  pthread_mutex_lock(&ctx->mu);
  for (link = &ctx->connects; *link != NULL; link = &(*link)->next) {
    if (((*link)->handle_ptr == handle) && ((*link)->dev == dev) &&
        (memcmp(&(*link)->handle, handle, sizeof((*link)->handle)) == 0))
      break;
  }
  if ((ctx->abort_flag != NULL) && (__atomic_load_n(ctx->abort_flag, __ATOMIC_ACQUIRE) != 0)) {
    res = ncclInternalError; /* aborted by the user: no WARN */
    goto drop;
  }
  if (*link == NULL) {
    MC_CHECK_GOTO(connect_new(ctx, dev, handle, &c), res, out);
    c->next = ctx->connects;
    ctx->connects = c;
    link = &ctx->connects;
  }
  MC_CHECK_GOTO(connect_progress(ctx, *link, &done), res, drop);
  if (!done)
    goto out;
  c = *link;
  {
    struct mc_sock socks[MC_NET_SOCK_MAX_SOCKS + 1];
    for (int i = 0; i < c->n; i++) {
      socks[i] = c->socks[i].a.sock;
      c->socks[i].a.sock.fd = -1;
    }
    *link = c->next;
    res = mc_net_sock_comm_create(true, ctx->abort_flag, socks, c->handle.n_socks,
                                  c->handle.n_threads, c->handle.inline_bytes,
                                  c->handle.min_task_bytes, &comm);
    for (int i = 0; i < c->n; i++)
      mc_sock_close(&socks[i]); /* only those comm_create did not take */
    connect_free(c);
    if (res == ncclSuccess) {
      res = mc_net_sock_comm_set_liveness(comm, ctx->liveness_ms);
      if (res != ncclSuccess) {
        mc_net_sock_comm_destroy(comm);
        comm = NULL;
      }
    }
  }
  if (res == ncclSuccess)
    *send_comm = comm;
  goto out;

drop:
  if (*link != NULL) {
    c = *link;
    *link = c->next;
    connect_free(c);
  }
out:
  pthread_mutex_unlock(&ctx->mu);
  return res;
}

/* ---------- close, finalize ---------- */

static ncclResult_t sock_close_comm(void *comm)
{
  mc_net_sock_comm_destroy(comm);
  return ncclSuccess;
}

static ncclResult_t sock_finalize(void *vctx)
{
  struct mc_net_sock_ctx *ctx = vctx;

  if (ctx == NULL)
    return ncclSuccess;
  while (ctx->connects != NULL) {
    struct mc_net_sock_connect *c = ctx->connects;
    ctx->connects = c->next;
    connect_free(c);
  }
  pthread_mutex_destroy(&ctx->mu);
  mc_crypto_wipe(ctx->key, sizeof(ctx->key));
  free(ctx);
  return ncclSuccess;
}

const struct mc_net_ops mc_net_socket_ops = {
    .abi = MC_NET_OPS_ABI,
    .name = "Socket",
    .init = sock_init,
    .devices = sock_devices,
    .get_properties = sock_get_properties,
    .make_vdevice = mc_net_no_make_vdevice,
    .listen = sock_listen,
    .connect = sock_connect,
    .accept = sock_accept,
    .reg_mr = sock_reg_mr,
    .dereg_mr = mc_net_sock_dereg_mr,
    .isend = mc_net_sock_isend,
    .irecv = mc_net_sock_irecv,
    .test = mc_net_sock_test,
    .close_send = sock_close_comm,
    .close_recv = sock_close_comm,
    .close_listen = sock_close_listen,
    .finalize = sock_finalize,
    .get_progress = mc_net_sock_get_progress,
    .calls_never_block = true,
    .can_send_user_ptr = true, /* sock_reg_mr registers nothing */
    .is_fallback = true,       /* one interface for every peer: MESHCCL_MESH_AUTO may replace it */
};
