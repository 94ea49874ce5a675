/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The built-in socket net ("Socket"): devices, properties and connection
 * set-up; the data path is in net_socket_io.c. Mirrors NCCL's
 * transport/net_socket.cc: the devices are the interfaces NCCL's socket
 * rules select (NCCL_SOCKET_IFNAME, else ib*, then anything but
 * docker/lo/virbr, then docker, lo, virbr; all of the first class that has
 * any), a connection is one control socket plus n_socks data sockets, every
 * socket passes the 12-byte handshake (magic NCCL_SOCKET_MAGIC, type NET) and
 * then says which connection and which index it is (struct
 * mc_net_sock_hello; NCCL sends a 1-byte index and relies on one connector
 * per listener, the connection id lets several connectors share a listener).
 *
 * connect and accept never block: each call moves the set-up as far as the
 * kernel allows and returns *comm == NULL until the connection is complete.
 * connect keeps its unfinished state in the context, keyed by the handle's
 * address and contents (the handle is const): call it again with the same
 * handle buffer. accept keeps the sockets of unfinished connections in the
 * listen comm; a socket that sends a bad handshake or hello, closes, or says
 * nothing for HELLO_WINDOW_MS is closed and counted, never waited for, and
 * when MAX_HELLO_PENDING sockets are waiting a newcomer evicts the oldest.
 * The window is long because a dropped socket is lost for good: its
 * connector counts it complete once its bytes left the host, and on a lossy
 * link TCP may retransmit them for several seconds.
 */
#include "net.h"
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

/* Automatic NCCL_SOCKET_NTHREADS / NCCL_NSOCKS_PERTHREAD (-2): NCCL's (no
 * helper threads off AWS/GCP). With the NET transport's proxy thread driving
 * test() and yielding while idle, 0 threads measured fastest on veth pairs
 * between namespaces (2.9 vs 1.8 GB/s all-reduce busbw with 2 threads; on 2
 * cores the extra threads compete with the proxy and the rank). */
#define AUTO_NTHREADS 0
#define AUTO_NSOCKS   1

#define MAX_COMMS          65536
#define HELLO_WINDOW_MS    30000 /* a socket that does not say who it is is dropped */
#define GROUP_WINDOW_MS    30000 /* an incomplete connection is dropped */
#define MAX_HELLO_PENDING  128
#define MAX_GROUPS         32
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

/* NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD, automatic values resolved. */
static void resolve_threads(struct mc_net_sock_ctx *ctx)
{
  int nt = (int)mc_param_int(MC_P_SOCKET_NTHREADS);
  int ns = (int)mc_param_int(MC_P_NSOCKS_PERTHREAD);

  if (nt < 0)
    nt = AUTO_NTHREADS;
  if (ns < 0)
    ns = AUTO_NSOCKS;
  if ((nt > 0) && (nt * ns > MC_NET_SOCK_MAX_SOCKS)) {
    MC_WARN_ONCE("NET/Socket: NCCL_SOCKET_NTHREADS=%d x NCCL_NSOCKS_PERTHREAD=%d exceeds %d "
                 "sockets; using %d sockets per thread",
                 nt, ns, MC_NET_SOCK_MAX_SOCKS, MC_NET_SOCK_MAX_SOCKS / nt);
    ns = MC_NET_SOCK_MAX_SOCKS / nt;
  }
  if (ns == 0)
    nt = 0; /* no data sockets: nothing for threads to do */
  ctx->n_threads = nt;
  ctx->n_socks = (nt > 0) ? nt * ns : ns;
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
  resolve_threads(ctx);
  ctx->inline_bytes = (uint32_t)mc_param_int(MC_P_SOCKET_INLINE);
  ctx->min_task_bytes = (uint32_t)mc_param_int(MC_P_SOCKET_MIN_TASKSIZE);
  ctx->magic = (uint64_t)mc_param_int(MC_P_SOCKET_MAGIC);
  /* The kernel's bound on a dead link (TCP_USER_TIMEOUT, keepalive) is
   * looser than the NET transport's watchdog (MESHCCL_NET_TIMEOUT), which
   * names the stalled connection first while a collective waits on it. */
  ctx->liveness_ms = mc_param_int(MC_P_NET_TIMEOUT) * LIVENESS_PER_MILLE;
  pthread_mutex_init(&ctx->mu, NULL);
  line[0] = '\0';
  for (int i = 0; i < ctx->n_devs; i++) {
    char a[MC_SOCKADDR_STRLEN];

    mc_if_speed(ctx->devs[i].name, &ctx->speeds[i]);
    mc_str_appendf(line, sizeof(line), &used, " [%d]%s:%s", i, ctx->devs[i].name,
                   mc_sockaddr_str(&ctx->devs[i].addr, a, sizeof(a)));
    if (ctx->speeds[i].shaped_mbps > 0)
      mc_str_appendf(line, sizeof(line), &used, "(tbf %dMb/s, link %dMb/s)",
                     ctx->speeds[i].shaped_mbps, ctx->speeds[i].link_mbps);
  }
  MC_INFO(MC_SUB_INIT | MC_SUB_NET,
          "NET/Socket: using%s; %d helper threads, %d data sockets per connection%s", line,
          ctx->n_threads, ctx->n_socks,
          (mc_param_int(MC_P_SOCKET_NTHREADS) < 0) ? " (automatic)" : "");
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
  memset(props, 0, sizeof(*props));
  snprintf(props->name, sizeof(props->name), "%s", ctx->devs[dev].name);
  if_pci_path(ctx->devs[dev].name, props->pci_path, sizeof(props->pci_path));
  props->guid = (uint64_t)dev;
  props->ptr_support = MC_NET_PTR_HOST;
  props->speed = ctx->speeds[dev].mbps;
  props->port = 0;
  props->latency = 0;
  props->max_comms = MAX_COMMS;
  props->max_recvs = 1;
  props->vprops.n_devs = 1;
  props->vprops.devs[0] = dev;
  props->max_p2p_bytes = MC_NET_SOCK_MAX_BYTES;
  props->rail_id = -1;
  props->plane_id = -1;
  return ncclSuccess;
}

static ncclResult_t sock_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
  (void)comm;
  (void)data;
  (void)size;
  if (type != MC_NET_PTR_HOST)
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Socket: cannot register memory of type %d (host memory only)", type);
  *mhandle = NULL;
  return ncclSuccess;
}

static ncclResult_t sock_dereg_mr(void *comm, void *mhandle)
{
  (void)comm;
  (void)mhandle;
  return ncclSuccess;
}

/* ---------- listen / accept ---------- */

struct hello_pending {
  struct mc_sock sock;
  struct mc_net_sock_hello hello;
  size_t got;
  uint64_t since_ns;
};

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
  memset(&h, 0, sizeof(h));
  h.addr = l->listener.sock.addr;
  h.magic = ctx->magic;
  h.n_socks = l->n_socks;
  h.n_threads = l->n_threads;
  h.inline_bytes = l->inline_bytes;
  h.min_task_bytes = l->min_task_bytes;
  memset(handle, 0, MC_NET_HANDLE_BYTES);
  memcpy(handle, &h, sizeof(h));
  *listen_comm = l;
  return ncclSuccess;
}

/* Reads hellos; a complete valid one joins its connection's group. */
static void hellos_progress(struct mc_net_sock_listen *l)
{
  uint64_t now = mc_time_ns();

  for (int i = 0; i < l->n_pend;) {
    struct hello_pending *p = &l->pend[i];
    ssize_t n = 0;
    const char *why = NULL;
    char buf[160];

    while (p->got < sizeof(p->hello)) {
      n = recv(p->sock.fd, (char *)&p->hello + p->got, sizeof(p->hello) - p->got, MSG_DONTWAIT);
      if (n <= 0)
        break;
      p->got += (size_t)n;
    }
    if (p->got < sizeof(p->hello)) {
      if (n == 0)
        why = "closed before saying which connection it belongs to";
      else if ((errno != EAGAIN) && (errno != EWOULDBLOCK) && (errno != EINTR))
        why = strerror(errno);
      else if (now - p->since_ns > (uint64_t)HELLO_WINDOW_MS * 1000000ull)
        why = "did not say which connection it belongs to within 30 s";
    } else if ((p->hello.n_socks != (uint32_t)l->n_socks) ||
               (p->hello.index > (uint32_t)l->n_socks)) {
      snprintf(buf, sizeof(buf),
               "bad hello (socket %u of %u data sockets; this listener expects %d data sockets)",
               p->hello.index, p->hello.n_socks, l->n_socks);
      why = buf;
    } else {
      struct conn_group *g = NULL;
      struct conn_group *empty = NULL;

      for (int k = 0; k < MAX_GROUPS; k++) {
        if (l->groups[k].used && (l->groups[k].conn_id == p->hello.conn_id))
          g = &l->groups[k];
        if (!l->groups[k].used && (empty == NULL))
          empty = &l->groups[k];
      }
      if ((g == NULL) && (empty != NULL)) {
        empty->socks = calloc((size_t)l->n_socks + 1, sizeof(*empty->socks));
        if (empty->socks != NULL) {
          for (int k = 0; k <= l->n_socks; k++)
            mc_sock_init(&empty->socks[k]);
          empty->used = true;
          empty->conn_id = p->hello.conn_id;
          empty->since_ns = now;
          g = empty;
        }
      }
      if (g == NULL)
        why = "too many connections being set up at once";
      else if (g->socks[p->hello.index].fd >= 0)
        why = "duplicate socket index";
      else {
        g->socks[p->hello.index] = p->sock;
        g->n_got++;
        l->pend[i] = l->pend[--l->n_pend];
        continue;
      }
    }
    if (why != NULL) {
      drop_sock(l, &p->sock, why);
      l->pend[i] = l->pend[--l->n_pend];
      continue;
    }
    i++;
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
  hellos_progress(l);          /* first: a hello already buffered is never evicted */
  for (;;) {
    struct hello_pending *p;
    struct mc_sock s;

    res = mc_sock_accept(&l->listener, &w, &s);
    if (res != ncclSuccess) {
      if (l->listener.sock.end == MC_SOCK_END_TIMEOUT)
        break;
      return MC_FAIL(res, "NET/Socket: accept: %s", l->listener.sock.err);
    }
    if (l->n_pend == MAX_HELLO_PENDING) {
      int oldest = 0;

      for (int i = 1; i < l->n_pend; i++) {
        if (l->pend[i].since_ns < l->pend[oldest].since_ns)
          oldest = i;
      }
      drop_sock(l, &l->pend[oldest].sock,
                "evicted: too many sockets waiting to say which connection they belong to");
      l->pend[oldest] = l->pend[--l->n_pend];
    }
    p = &l->pend[l->n_pend++];
    p->sock = s;
    p->got = 0;
    p->since_ns = mc_time_ns();
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
  free(l);
  return ncclSuccess;
}

/* ---------- connect ---------- */

struct mc_net_sock_connect {
  struct mc_net_sock_connect *next;
  const void *handle_ptr;
  struct mc_net_sock_handle handle;
  int dev;
  int n; /* sockets: 1 + n_socks */
  struct mc_sock_async *conns;
  struct mc_net_sock_hello *hellos;
  size_t *hello_sent;
};

static void connect_free(struct mc_net_sock_connect *c)
{
  if (c == NULL)
    return;
  for (int i = 0; (c->conns != NULL) && (i < c->n); i++)
    mc_sock_close(&c->conns[i].sock);
  free(c->conns);
  free(c->hellos);
  free(c->hello_sent);
  free(c);
}

static ncclResult_t connect_new(struct mc_net_sock_ctx *ctx, int dev, const void *handle,
                                struct mc_net_sock_connect **c_out)
{
  ncclResult_t res = ncclSuccess;
  struct mc_net_sock_connect *c = NULL;
  struct mc_net_sock_handle h;
  uint64_t conn_id = 0;
  char a[MC_SOCKADDR_STRLEN];

  MC_CHECK(mc_net_sock_handle_parse(handle, ctx->magic, &h));
  MC_CHECK(mc_random_bytes(&conn_id, sizeof(conn_id)));
  MC_CHECK(mc_calloc(&c, 1));
  c->handle_ptr = handle;
  c->handle = h;
  c->dev = dev;
  c->n = h.n_socks + 1;
  MC_CHECK_GOTO(mc_calloc(&c->conns, (size_t)c->n), res, err);
  MC_CHECK_GOTO(mc_calloc(&c->hellos, (size_t)c->n), res, err);
  MC_CHECK_GOTO(mc_calloc(&c->hello_sent, (size_t)c->n), res, err);
  for (int i = 0; i < c->n; i++)
    mc_sock_init(&c->conns[i].sock);
  for (int i = 0; i < c->n; i++) {
    c->hellos[i].conn_id = conn_id;
    c->hellos[i].index = (uint32_t)i;
    c->hellos[i].n_socks = (uint32_t)h.n_socks;
    res = mc_sock_connect_start(&h.addr, h.magic, MC_SOCK_TYPE_NET, &c->conns[i]);
    if (res != ncclSuccess) {
      res = MC_FAIL(res, "NET/Socket: cannot connect to %s from %s: %s",
                    mc_sockaddr_str(&h.addr, a, sizeof(a)), ctx->devs[dev].name,
                    c->conns[i].sock.err);
      goto err;
    }
  }
  *c_out = c;
  return ncclSuccess;

err:
  connect_free(c);
  return res;
}

/* Moves every socket of c on; *done_out once all are connected and introduced. */
static ncclResult_t connect_progress(struct mc_net_sock_ctx *ctx, struct mc_net_sock_connect *c,
                                     bool *done_out)
{
  char a[MC_SOCKADDR_STRLEN];
  int n_done = 0;

  for (int i = 0; i < c->n; i++) {
    struct mc_sock_async *s = &c->conns[i];
    bool up = false;
    ncclResult_t res = mc_sock_connect_poll(s, &up);

    if (res != ncclSuccess)
      return MC_FAIL(res, "NET/Socket: cannot connect to %s from %s: %s",
                     mc_sockaddr_str(&c->handle.addr, a, sizeof(a)), ctx->devs[c->dev].name,
                     s->sock.err);
    if (!up)
      continue;
    while (c->hello_sent[i] < sizeof(c->hellos[i])) {
      ssize_t n = send(s->sock.fd, (char *)&c->hellos[i] + c->hello_sent[i],
                       sizeof(c->hellos[i]) - c->hello_sent[i], MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        c->hello_sent[i] += (size_t)n;
        continue;
      }
      if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)))
        break;
      return MC_FAIL(ncclRemoteError, "NET/Socket: %s closed the connection during set-up (%s)",
                     mc_sockaddr_str(&c->handle.addr, a, sizeof(a)),
                     (n < 0) ? strerror(errno) : "closed");
    }
    if (c->hello_sent[i] == sizeof(c->hellos[i]))
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
      socks[i] = c->conns[i].sock;
      c->conns[i].sock.fd = -1;
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
    .dereg_mr = sock_dereg_mr,
    .isend = mc_net_sock_isend,
    .irecv = mc_net_sock_irecv,
    .test = mc_net_sock_test,
    .close_send = sock_close_comm,
    .close_recv = sock_close_comm,
    .close_listen = sock_close_listen,
    .finalize = sock_finalize,
    .get_progress = mc_net_sock_get_progress,
};
