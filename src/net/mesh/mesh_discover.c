/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Mesh net's discovery: each context learns the mesh over the links
 * themselves, with no bootstrap (the net also ships as an NCCL plugin,
 * which gets none), and rebuilds the graph and the routing table
 * (mesh_graph.h) whenever what it knows changes.
 *
 * Every context announces, on each of its mesh NICs, its own record (host,
 * context id, host name, every mesh address with its handshake port, speed
 * and lane) and every record it holds of other contexts: link-state
 * flooding, each record carrying a version its context raises at every
 * announcement, so that a newer version wins and a record reaches hosts
 * several links away within one announcement period per link. Announcements
 * are UDP datagrams to MESHCCL_MESH_PORT: IPv4 to the link's broadcast
 * address, IPv6 to the all-nodes group of the interface; the receiving
 * socket is bound to the wildcard address with SO_REUSEADDR, so that every
 * process of a host receives every announcement, and drops what arrives on
 * an interface that is not a mesh NIC. UDP rather than TCP to neighbours:
 * a host does not know its neighbours' addresses before this, and a
 * datagram per link and period needs no connection state.
 *
 * Each datagram is authenticated with HMAC-SHA256 under the discovery key
 * (from the secret; contexts without one use a fixed label key and say so
 * once): a datagram that is truncated, oversized, of another magic,
 * version or secret is dropped and counted, never trusted. Records not
 * refreshed for EXPIRE_MS are dropped (a finished context).
 *
 * All of it runs on the handshake thread (mesh_handshake.c), from its poll
 * loop: no thread of its own. The graph and the routing table live in an
 * immutable, reference-counted view; the thread builds a new one without
 * any lock and swaps the pointer under view_mu, readers (connect, the
 * relay) take a reference under view_mu and read without it.
 *
 * Length: discovery's one protocol (announce, learn, withdraw, the view and its host names) over
 * one context.
 */
#include "mesh_int.h"

#include "check.h"
#include "core/byteorder.h"
#include "log.h"
#include "params.h"

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define ANNOUNCE_FAST_MS 250   /* period while the mesh changes */
#define ANNOUNCE_SLOW_MS 1000  /* period once it is stable */
#define STABLE_MS        1500  /* no change for this long: stable, logged */
#define EXPIRE_MS        15000 /* a record not refreshed for this long is dropped */
#define RECV_BURST       64    /* datagrams read per socket per tick */
/* A link whose neighbour was heard and then is not for this long (at least;
 * MESHCCL_MESH_LINK_TIMEOUT_MS if longer) while its records still come over
 * other links is down: three slow announcements lost in a row. */
#define SILENT_MIN_MS MC_NET_MESH_SILENT_MIN_MS

struct mc_net_mesh_disc {
  int fd4; /* -1 when the host has no IPv4 mesh NIC */
  int fd6;
  int port;
  struct mc_net_mesh_table table; /* e[0]: this context */
  uint64_t next_announce_ns;
  uint64_t changed_ns;    /* last change of contents */
  bool is_changed;        /* since the last view */
  uint64_t logged_serial; /* view last logged */
  uint64_t serial;
  int n_logged_drops;
  /* Per NIC: the last datagram from another host, and that host. */
  uint64_t nic_heard_ns[MC_NET_MESH_MAX_NICS];
  uint64_t nic_peer_host[MC_NET_MESH_MAX_NICS];
  bool nic_is_silent[MC_NET_MESH_MAX_NICS];
  bool nic_no_carrier[MC_NET_MESH_MAX_NICS];
};

/* ---------- codec ---------- */

static size_t rec_bytes(const struct mc_net_mesh_rec *r)
{
  size_t n = 26 + strnlen(r->name, MC_MESH_HOST_NAME_BYTES - 1);

  for (int i = 0; i < r->n_addrs; i++)
    n += 10 + strnlen(r->addrs[i].if_name, MC_IF_NAME_BYTES - 1) +
         ((r->addrs[i].addr.sa.sa_family == AF_INET) ? 4 : 16);
  return n;
}

static size_t rec_encode(const struct mc_net_mesh_rec *r, uint8_t *p)
{
  size_t name_len = strnlen(r->name, MC_MESH_HOST_NAME_BYTES - 1);
  size_t off;

  mc_be_put64(p, r->host_hash);
  mc_be_put64(p + 8, r->ctx_id);
  mc_be_put64(p + 16, r->version);
  p[24] = (uint8_t)name_len;
  p[25] = (uint8_t)r->n_addrs;
  memcpy(p + 26, r->name, name_len);
  off = 26 + name_len;
  for (int i = 0; i < r->n_addrs; i++) {
    const struct mc_net_mesh_rec_addr *a = &r->addrs[i];
    size_t if_len = strnlen(a->if_name, MC_IF_NAME_BYTES - 1);
    bool is4 = (a->addr.sa.sa_family == AF_INET);

    p[off] = is4 ? 4 : 6;
    p[off + 1] = (uint8_t)a->prefix_len;
    p[off + 2] = (uint8_t)a->lane;
    mc_be_put16(p + off + 3, (uint32_t)mc_sockaddr_port(&a->addr));
    mc_be_put32(p + off + 5, (uint32_t)((a->speed_mbps > 0) ? a->speed_mbps : 0));
    p[off + 9] = (uint8_t)if_len;
    memcpy(p + off + 10, a->if_name, if_len);
    off += 10 + if_len;
    if (is4)
      memcpy(p + off, &a->addr.sin.sin_addr, 4);
    else
      memcpy(p + off, a->addr.sin6.sin6_addr.s6_addr, 16);
    off += is4 ? 4 : 16;
  }
  return off;
}

/* Decodes one record of at most `avail` bytes; returns its bytes, 0 when malformed. */
static size_t rec_decode(const uint8_t *p, size_t avail, struct mc_net_mesh_rec *r)
{
  size_t off;

  if (avail < 26)
    return 0;
  memset(r, 0, sizeof(*r));
  r->host_hash = mc_be_get64(p);
  r->ctx_id = mc_be_get64(p + 8);
  r->version = mc_be_get64(p + 16);
  if ((p[24] >= MC_MESH_HOST_NAME_BYTES) || (p[25] > MC_MESH_MAX_ADDRS) || (26u + p[24] > avail))
    return 0;
  memcpy(r->name, p + 26, p[24]);
  r->n_addrs = p[25];
  off = 26 + p[24];
  for (int i = 0; i < r->n_addrs; i++) {
    struct mc_net_mesh_rec_addr *a = &r->addrs[i];
    size_t alen;

    if (off + 10 > avail)
      return 0;
    if (((p[off] != 4) && (p[off] != 6)) || (p[off + 1] > ((p[off] == 4) ? 32 : 128)) ||
        (p[off + 2] > MC_NET_MESH_LANE_FAST) || (p[off + 9] >= MC_IF_NAME_BYTES))
      return 0;
    alen = (p[off] == 4) ? 4 : 16;
    if (off + 10 + p[off + 9] + alen > avail)
      return 0;
    a->prefix_len = p[off + 1];
    a->lane = (enum mc_net_mesh_lane)p[off + 2];
    a->speed_mbps = (int)(mc_be_get32(p + off + 5) & 0x7fffffffu);
    memcpy(a->if_name, p + off + 10, p[off + 9]);
    if (p[off] == 4) {
      a->addr.sin.sin_family = AF_INET;
      memcpy(&a->addr.sin.sin_addr, p + off + 10 + p[off + 9], 4);
    } else {
      a->addr.sin6.sin6_family = AF_INET6;
      memcpy(a->addr.sin6.sin6_addr.s6_addr, p + off + 10 + p[off + 9], 16);
    }
    mc_sockaddr_set_port(&a->addr, (int)mc_be_get16(p + off + 3));
    off += 10 + p[off + 9] + alen;
  }
  return off;
}

size_t mc_net_mesh_disc_encode(const uint8_t key[MC_SHA256_BYTES], uint64_t sender_host,
                               uint64_t sender_ctx, const struct mc_net_mesh_rec *recs, int n_recs,
                               int *n_taken_out, uint8_t *buf, size_t buf_bytes)
{
  size_t off = MC_NET_MESH_DISC_HDR_BYTES;
  int n = 0;

  if (buf_bytes > MC_NET_MESH_DISC_MAX_BYTES)
    buf_bytes = MC_NET_MESH_DISC_MAX_BYTES;
  while ((n < n_recs) && (n < MC_NET_MESH_MAX_RECS) &&
         (off + rec_bytes(&recs[n]) + MC_SHA256_BYTES <= buf_bytes)) {
    off += rec_encode(&recs[n], buf + off);
    n++;
  }
  *n_taken_out = n;
  if (n == 0)
    return 0;
  mc_be_put32(buf, MC_NET_MESH_DISC_MAGIC);
  buf[4] = MC_NET_MESH_DISC_VERSION;
  buf[5] = (uint8_t)n;
  buf[6] = buf[7] = 0;
  mc_be_put64(buf + 8, sender_host);
  mc_be_put64(buf + 16, sender_ctx);
  mc_hmac_sha256(key, MC_SHA256_BYTES, buf, off, buf + off);
  return off + MC_SHA256_BYTES;
}

enum mc_net_mesh_disc_err mc_net_mesh_disc_decode(const uint8_t *buf, size_t bytes,
                                                  const uint8_t key[MC_SHA256_BYTES],
                                                  uint64_t *sender_ctx_out,
                                                  struct mc_net_mesh_rec *recs, int *n_recs_out)
{
  uint8_t mac[MC_SHA256_BYTES];
  size_t end;
  size_t off = MC_NET_MESH_DISC_HDR_BYTES;
  int n;

  if (bytes > MC_NET_MESH_DISC_MAX_BYTES)
    return MC_NET_MESH_DISC_OVERSIZED;
  if (bytes < 4)
    return MC_NET_MESH_DISC_SHORT;
  if (mc_be_get32(buf) != MC_NET_MESH_DISC_MAGIC)
    return MC_NET_MESH_DISC_MAGIC_BAD;
  if (bytes < MC_NET_MESH_DISC_HDR_BYTES + MC_SHA256_BYTES)
    return MC_NET_MESH_DISC_SHORT;
  if (buf[4] != MC_NET_MESH_DISC_VERSION)
    return MC_NET_MESH_DISC_VERSION_BAD;
  end = bytes - MC_SHA256_BYTES;
  mc_hmac_sha256(key, MC_SHA256_BYTES, buf, end, mac);
  if (!mc_crypto_equal(mac, buf + end, sizeof(mac)))
    return MC_NET_MESH_DISC_MAC_BAD;
  n = buf[5];
  if ((n == 0) || (n > MC_NET_MESH_MAX_RECS))
    return MC_NET_MESH_DISC_MALFORMED;
  for (int i = 0; i < n; i++) {
    size_t used = rec_decode(buf + off, end - off, &recs[i]);

    if (used == 0)
      return MC_NET_MESH_DISC_MALFORMED;
    off += used;
  }
  if (off != end)
    return MC_NET_MESH_DISC_MALFORMED;
  *sender_ctx_out = mc_be_get64(buf + 16);
  *n_recs_out = n;
  return MC_NET_MESH_DISC_OK;
}

const char *mc_net_mesh_disc_err_str(enum mc_net_mesh_disc_err e)
{
  switch (e) {
  case MC_NET_MESH_DISC_OK:
    return "ok";
  case MC_NET_MESH_DISC_SHORT:
    return "truncated";
  case MC_NET_MESH_DISC_MAGIC_BAD:
    return "not a Mesh discovery datagram";
  case MC_NET_MESH_DISC_VERSION_BAD:
    return "another protocol version";
  case MC_NET_MESH_DISC_MAC_BAD:
    return "MAC does not verify (another secret?)";
  case MC_NET_MESH_DISC_MALFORMED:
    return "malformed records";
  case MC_NET_MESH_DISC_OVERSIZED:
    return "oversized";
  }
  return "?";
}

/* ---------- the table ---------- */

static bool same_contents(const struct mc_net_mesh_rec *a, const struct mc_net_mesh_rec *b)
{
  if ((strcmp(a->name, b->name) != 0) || (a->n_addrs != b->n_addrs))
    return false;
  for (int i = 0; i < a->n_addrs; i++) {
    const struct mc_net_mesh_rec_addr *x = &a->addrs[i];
    const struct mc_net_mesh_rec_addr *y = &b->addrs[i];

    if (!mc_sockaddr_equal(&x->addr, &y->addr) ||
        (mc_sockaddr_port(&x->addr) != mc_sockaddr_port(&y->addr)) ||
        (x->prefix_len != y->prefix_len) || (x->lane != y->lane) ||
        (x->speed_mbps != y->speed_mbps) || (strcmp(x->if_name, y->if_name) != 0))
      return false;
  }
  return true;
}

enum mc_net_mesh_update mc_net_mesh_table_update(struct mc_net_mesh_table *t,
                                                 const struct mc_net_mesh_rec *r, uint64_t now_ns)
{
  for (int i = 0; i < t->n; i++) {
    struct mc_net_mesh_entry *e = &t->e[i];
    bool is_same;

    if ((e->rec.host_hash != r->host_hash) || (e->rec.ctx_id != r->ctx_id))
      continue;
    if (r->version <= e->rec.version)
      return MC_NET_MESH_UPD_STALE;
    is_same = same_contents(&e->rec, r);
    e->rec = *r;
    e->heard_ns = now_ns;
    return is_same ? MC_NET_MESH_UPD_REFRESH : MC_NET_MESH_UPD_CHANGED;
  }
  if (t->n >= MC_NET_MESH_MAX_ENTRIES)
    return MC_NET_MESH_UPD_FULL;
  t->e[t->n].rec = *r;
  t->e[t->n].heard_ns = now_ns;
  t->n++;
  return MC_NET_MESH_UPD_NEW;
}

int mc_net_mesh_table_expire(struct mc_net_mesh_table *t, uint64_t now_ns, uint64_t max_age_ns)
{
  int n_gone = 0;

  for (int i = 1; i < t->n;) {
    if ((now_ns > t->e[i].heard_ns) && (now_ns - t->e[i].heard_ns > max_age_ns)) {
      t->e[i] = t->e[--t->n];
      n_gone++;
      continue;
    }
    i++;
  }
  return n_gone;
}

/* ---------- views ---------- */

struct mc_net_mesh_view *mc_net_mesh_view_get(struct mc_net_mesh_ctx *ctx)
{
  struct mc_net_mesh_view *v;

  pthread_mutex_lock(&ctx->view_mu);
  v = ctx->view;
  if (v != NULL)
    __atomic_add_fetch(&v->refs, 1, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&ctx->view_mu);
  return v;
}

void mc_net_mesh_view_put(struct mc_net_mesh_view *v)
{
  if ((v == NULL) || (__atomic_sub_fetch(&v->refs, 1, __ATOMIC_ACQ_REL) != 0))
    return;
  mc_mesh_route_table_destroy(v->routes);
  mc_mesh_graph_destroy(v->graph);
  free(v);
}

/* One graph host per host hash: the addresses of its freshest record. */
static ncclResult_t view_build(const struct mc_net_mesh_ctx *ctx, const struct mc_net_mesh_table *t,
                               uint64_t self_host, uint64_t serial, struct mc_net_mesh_view **v_out)
{
  struct mc_net_mesh_view *v = NULL;
  struct mc_mesh_host *hosts = NULL;
  int best[MC_NET_MESH_MAX_ENTRIES];
  int n = 0;
  ncclResult_t res = ncclSuccess;

  for (int i = 0; i < t->n; i++) {
    int j;

    for (j = 0; j < n; j++) {
      if (t->e[best[j]].rec.host_hash == t->e[i].rec.host_hash)
        break;
    }
    if (j == n) {
      if (n == MC_MESH_MAX_HOSTS)
        continue; /* more hosts than a graph holds: the rest stay unknown */
      best[n++] = i;
    } else if (t->e[i].heard_ns > t->e[best[j]].heard_ns) {
      best[j] = i;
    }
  }
  MC_CHECK(mc_calloc(&v, 1));
  MC_CHECK_GOTO(mc_calloc(&hosts, (size_t)n), res, err);
  for (int j = 0; j < n; j++) {
    const struct mc_net_mesh_rec *r = &t->e[best[j]].rec;
    struct mc_mesh_host *h = &hosts[j];

    h->host_hash = r->host_hash;
    snprintf(h->name, sizeof(h->name), "%s", r->name);
    h->n_addrs = r->n_addrs;
    for (int k = 0; k < r->n_addrs; k++) {
      struct mc_mesh_addr *a = &h->addrs[k];
      const union mc_sockaddr *s = &r->addrs[k].addr;

      a->family = s->sa.sa_family;
      if (a->family == AF_INET)
        memcpy(a->bytes, &s->sin.sin_addr, 4);
      else
        memcpy(a->bytes, s->sin6.sin6_addr.s6_addr, 16);
      a->prefix_len = r->addrs[k].prefix_len;
      a->speed_mbps = r->addrs[k].speed_mbps;
      snprintf(a->if_name, sizeof(a->if_name), "%s", r->addrs[k].if_name);
    }
  }
  MC_CHECK_GOTO(mc_mesh_graph_create(hosts, n, (int)mc_param_int(MC_P_MESH_FAST_MBPS), &v->graph),
                res, err);
  MC_CHECK_GOTO(mc_mesh_route_table_create(v->graph, &v->routes), res, err);
  MC_CHECK_GOTO(mc_mesh_graph_host_find(v->graph, self_host, &v->self), res, err);
  v->table = *t;
  v->serial = serial;
  v->refs = 1;
  for (int h = 0; h < v->graph->n_hosts; h++) {
    char label[MC_NET_MESH_HOST_TEXT_BYTES];

    mc_net_mesh_host_label(ctx, v, v->graph->hosts[h].host_hash, label, sizeof(label));
    mc_mesh_graph_set_label(v->graph, h, label);
  }
  free(hosts);
  *v_out = v;
  return ncclSuccess;

err:
  free(hosts);
  v->refs = 1;
  mc_net_mesh_view_put(v);
  return res;
}

static void view_set(struct mc_net_mesh_ctx *ctx, struct mc_net_mesh_view *v)
{
  struct mc_net_mesh_view *old;

  pthread_mutex_lock(&ctx->view_mu);
  old = ctx->view;
  ctx->view = v;
  pthread_mutex_unlock(&ctx->view_mu);
  mc_net_mesh_view_put(old);
}

bool mc_net_mesh_view_addr(const struct mc_net_mesh_ctx *ctx, const struct mc_net_mesh_view *v,
                           uint64_t host_hash, union mc_sockaddr *to_out, int *nic_out)
{
  int best_e = -1;
  int best_a = -1;
  int best_nic = -1;
  int best_score = 4;

  for (int i = 0; i < v->table.n; i++) {
    const struct mc_net_mesh_entry *e = &v->table.e[i];

    if (e->rec.host_hash != host_hash)
      continue;
    for (int k = 0; k < e->rec.n_addrs; k++) {
      for (int m = 0; m < ctx->n_nics; m++) {
        const struct mc_net_mesh_nic *nic = &ctx->nics[m];
        int score;

        if (__atomic_load_n(&ctx->nic_down[m], __ATOMIC_ACQUIRE) != 0)
          continue;
        if (!mc_net_mesh_same_subnet(&nic->addr, nic->prefix_len, &e->rec.addrs[k].addr,
                                     e->rec.addrs[k].prefix_len))
          continue;
        score =
            (nic->carries_data ? 0 : 2) + ((e->rec.addrs[k].lane == MC_NET_MESH_LANE_FAST) ? 0 : 1);
        if ((score < best_score) ||
            ((score == best_score) && (e->heard_ns > v->table.e[best_e].heard_ns))) {
          best_score = score;
          best_e = i;
          best_a = k;
          best_nic = m;
        }
      }
    }
  }
  if (best_e < 0)
    return false;
  *to_out = v->table.e[best_e].rec.addrs[best_a].addr;
  if ((to_out->sa.sa_family == AF_INET6) && IN6_IS_ADDR_LINKLOCAL(&to_out->sin6.sin6_addr))
    to_out->sin6.sin6_scope_id = (uint32_t)ctx->nics[best_nic].if_index;
  *nic_out = best_nic;
  return true;
}

void mc_net_mesh_view_str(const struct mc_net_mesh_ctx *ctx, const struct mc_net_mesh_view *v,
                          char *buf, size_t bytes)
{
  char host[MC_NET_MESH_HOST_TEXT_BYTES];

  size_t used = 0;

  buf[0] = '\0';
  if (v == NULL) {
    mc_str_appendf(buf, bytes, &used, "nothing yet");
    return;
  }
  mc_str_appendf(buf, bytes, &used, "%d hosts (", v->graph->n_hosts);
  for (int i = 0; i < v->graph->n_hosts; i++) {
    mc_net_mesh_host_label(ctx, v, v->graph->hosts[i].host_hash, host, sizeof(host));
    mc_str_appendf(buf, bytes, &used, "%s%s", (i > 0) ? "; " : "", host);
  }
  mc_str_appendf(buf, bytes, &used, "), %d links, shape %s", v->graph->n_links,
                 mc_mesh_shape_str(v->graph->shape));
}

/* ---------- sockets ---------- */

static int open_sock(int family, int port, char *err, size_t err_bytes)
{
  union mc_sockaddr a;
  int one = 1;
  int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

  if (fd < 0) {
    snprintf(err, err_bytes, "socket: %s", strerror(errno));
    return -1;
  }
  memset(&a, 0, sizeof(a));
  a.sa.sa_family = (sa_family_t)family;
  mc_sockaddr_set_port(&a, port);
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (family == AF_INET) {
    (void)setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, sizeof(one));
    (void)setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one));
  } else {
    int hops = 1;
    (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
    (void)setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof(one));
    (void)setsockopt(fd, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, &hops, sizeof(hops));
  }
  if (bind(fd, &a.sa, mc_sockaddr_len(&a)) != 0) {
    snprintf(err, err_bytes, "bind to port %d: %s", port, strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

static void self_record(struct mc_net_mesh_ctx *ctx, struct mc_net_mesh_rec *r)
{
  const char *id = mc_param_str(MC_P_HOSTID);

  memset(r, 0, sizeof(*r));
  r->host_hash = ctx->host_hash;
  r->ctx_id = ctx->ctx_id;
  r->version = 1;
  if ((id != NULL) && (id[0] != '\0'))
    snprintf(r->name, sizeof(r->name), "%s", id);
  else
    mc_host_name(r->name, sizeof(r->name));
  for (int i = 0; (i < ctx->n_nics) && (r->n_addrs < MC_MESH_MAX_ADDRS); i++) {
    struct mc_net_mesh_rec_addr *a;

    /* A link whose interface is down is withdrawn: every host's graph
     * loses it once this record floods, and routes go around it. */
    if (__atomic_load_n(&ctx->nic_down[i], __ATOMIC_ACQUIRE) != 0)
      continue;
    a = &r->addrs[r->n_addrs++];

    a->addr = ctx->nics[i].addr;
    a->addr.sin6.sin6_scope_id =
        (a->addr.sa.sa_family == AF_INET6) ? 0 : a->addr.sin6.sin6_scope_id;
    mc_sockaddr_set_port(&a->addr, ctx->listen_ports[i]);
    a->prefix_len = ctx->nics[i].prefix_len;
    a->lane = ctx->nics[i].lane;
    a->speed_mbps = ctx->nics[i].speed_mbps;
    snprintf(a->if_name, sizeof(a->if_name), "%s", ctx->nics[i].name);
  }
}

/* The discovery socket of family on port, opened where a NIC has an
 * address of that family (else *fd_out stays -1). */
static ncclResult_t open_family(const struct mc_net_mesh_ctx *ctx, int family, int port,
                                int *fd_out)
{
  bool is_used = false;
  char err[160];

  for (int i = 0; i < ctx->n_nics; i++)
    is_used |= (ctx->nics[i].addr.sa.sa_family == family);
  if (!is_used)
    return ncclSuccess;
  *fd_out = open_sock(family, port, err, sizeof(err));
  if (*fd_out < 0)
    return MC_FAIL(ncclSystemError,
                   "NET/Mesh: discovery: cannot open the %s UDP socket (%s); is "
                   "MESHCCL_MESH_PORT=%d taken by another program?",
                   (family == AF_INET) ? "IPv4" : "IPv6", err, port);
  return ncclSuccess;
}

ncclResult_t mc_net_mesh_disc_open(struct mc_net_mesh_ctx *ctx)
{
  struct mc_net_mesh_disc *d = NULL;
  struct mc_net_mesh_view *v = NULL;
  ncclResult_t res;

  MC_CHECK(mc_calloc(&d, 1));
  d->fd4 = d->fd6 = -1;
  d->port = (int)mc_param_int(MC_P_MESH_PORT);
  MC_CHECK_GOTO(open_family(ctx, AF_INET, d->port, &d->fd4), res, fail);
  MC_CHECK_GOTO(open_family(ctx, AF_INET6, d->port, &d->fd6), res, fail);
  self_record(ctx, &d->table.e[0].rec);
  d->table.e[0].heard_ns = mc_time_ns();
  d->table.n = 1;
  d->serial = 1;
  MC_CHECK_GOTO(view_build(ctx, &d->table, ctx->host_hash, d->serial, &v), res, fail);
  view_set(ctx, v);
  d->changed_ns = mc_time_ns();
  ctx->disc = d;
  return ncclSuccess;

fail:
  if (d->fd4 >= 0)
    close(d->fd4);
  if (d->fd6 >= 0)
    close(d->fd6);
  free(d);
  return res;
}

static void log_mesh(struct mc_net_mesh_ctx *ctx, const struct mc_net_mesh_view *v, bool at_close);

void mc_net_mesh_disc_close(struct mc_net_mesh_ctx *ctx)
{
  struct mc_net_mesh_disc *d = ctx->disc;

  if ((d != NULL) && (d->logged_serial != d->serial)) {
    struct mc_net_mesh_view *v = mc_net_mesh_view_get(ctx);
    if (v != NULL)
      log_mesh(ctx, v, true);
    mc_net_mesh_view_put(v);
  }
  view_set(ctx, NULL);
  if (d == NULL)
    return;
  if (d->fd4 >= 0)
    close(d->fd4);
  if (d->fd6 >= 0)
    close(d->fd6);
  free(d);
  ctx->disc = NULL;
}

int mc_net_mesh_disc_pollfds(struct mc_net_mesh_ctx *ctx, struct pollfd *pfd)
{
  struct mc_net_mesh_disc *d = ctx->disc;
  int n = 0;

  if (d == NULL)
    return 0;
  if (d->fd4 >= 0)
    pfd[n++] = (struct pollfd){.fd = d->fd4, .events = POLLIN, .revents = 0};
  if (d->fd6 >= 0)
    pfd[n++] = (struct pollfd){.fd = d->fd6, .events = POLLIN, .revents = 0};
  return n;
}

static int nic_of_ifindex(const struct mc_net_mesh_ctx *ctx, int if_index)
{
  for (int i = 0; i < ctx->n_nics; i++) {
    if (ctx->nics[i].if_index == if_index)
      return i;
  }
  return -1;
}

static void drop(struct mc_net_mesh_ctx *ctx, const union mc_sockaddr *from, const char *why)
{
  struct mc_net_mesh_disc *d = ctx->disc;
  char a[MC_SOCKADDR_STRLEN];

  __atomic_add_fetch(&ctx->stats.n_disc_dropped, 1, __ATOMIC_RELAXED);
  if (d->n_logged_drops < 8) { /* a stranger may send many: the first few are logged */
    d->n_logged_drops++;
    MC_INFO(MC_SUB_NET, "NET/Mesh: discovery: dropped a datagram from %s: %s%s",
            mc_sockaddr_str(from, a, sizeof(a)), why,
            (d->n_logged_drops == 8) ? " (further drops are only counted)" : "");
  }
}

static void recv_one(struct mc_net_mesh_ctx *ctx, int fd, uint64_t now, bool *again)
{
  struct mc_net_mesh_disc *d = ctx->disc;
  uint8_t buf[MC_NET_MESH_DISC_MAX_BYTES + 1];
  uint8_t cbuf[256];
  struct mc_net_mesh_rec recs[MC_NET_MESH_MAX_RECS];
  union mc_sockaddr from;
  struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
  struct msghdr mh;
  struct cmsghdr *cm;
  enum mc_net_mesh_disc_err e;
  uint64_t sender = 0;
  int if_index = -1;
  int n_recs = 0;
  ssize_t n;

  memset(&mh, 0, sizeof(mh));
  memset(&from, 0, sizeof(from));
  mh.msg_name = &from;
  mh.msg_namelen = sizeof(from);
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  mh.msg_controllen = sizeof(cbuf);
  n = recvmsg(fd, &mh, MSG_DONTWAIT);
  *again = (n >= 0);
  if (n < 0)
    return;
  for (cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
    if ((cm->cmsg_level == IPPROTO_IP) && (cm->cmsg_type == IP_PKTINFO)) {
      struct in_pktinfo pi;
      memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
      if_index = pi.ipi_ifindex;
    } else if ((cm->cmsg_level == IPPROTO_IPV6) && (cm->cmsg_type == IPV6_PKTINFO)) {
      struct in6_pktinfo pi;
      memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
      if_index = (int)pi.ipi6_ifindex;
    }
  }
  if ((mh.msg_flags & MSG_TRUNC) != 0) {
    drop(ctx, &from, "oversized");
    return;
  }
  if (nic_of_ifindex(ctx, if_index) < 0) {
    /* Not a mesh NIC (the management network, loopback): not ours to hear. */
    __atomic_add_fetch(&ctx->stats.n_disc_dropped, 1, __ATOMIC_RELAXED);
    return;
  }
  e = mc_net_mesh_disc_decode(buf, (size_t)n, ctx->disc_key, &sender, recs, &n_recs);
  if (e != MC_NET_MESH_DISC_OK) {
    drop(ctx, &from, mc_net_mesh_disc_err_str(e));
    return;
  }
  if (sender == ctx->ctx_id)
    return; /* our own broadcast, looped back */
  __atomic_add_fetch(&ctx->stats.n_disc_received, 1, __ATOMIC_RELAXED);
  if (mc_be_get64(buf + 8) != ctx->host_hash) {
    int nic = nic_of_ifindex(ctx, if_index);

    d->nic_heard_ns[nic] = now;
    d->nic_peer_host[nic] = mc_be_get64(buf + 8);
  }
  for (int i = 0; i < n_recs; i++) {
    enum mc_net_mesh_update u;

    if (recs[i].ctx_id == ctx->ctx_id)
      continue;
    u = mc_net_mesh_table_update(&d->table, &recs[i], now);
    if ((u == MC_NET_MESH_UPD_NEW) || (u == MC_NET_MESH_UPD_CHANGED)) {
      d->is_changed = true;
      d->changed_ns = now;
      d->next_announce_ns = now; /* flood news at once */
    } else if (u == MC_NET_MESH_UPD_FULL) {
      MC_WARN_ONCE("NET/Mesh: discovery: the mesh table is full (%d contexts); host %s "
                   "(%016llx) and later ones stay unknown",
                   MC_NET_MESH_MAX_ENTRIES, recs[i].name, (unsigned long long)recs[i].host_hash);
    }
  }
}

/* Fills cm with one control message (level, type, bytes of data); returns
 * the control length it takes. */
static size_t put_cmsg(struct cmsghdr *cm, int level, int type, const void *data, size_t bytes)
{
  cm->cmsg_level = level;
  cm->cmsg_type = type;
  cm->cmsg_len = CMSG_LEN(bytes);
  memcpy(CMSG_DATA(cm), data, bytes);
  return CMSG_SPACE(bytes);
}

static void send_on(struct mc_net_mesh_ctx *ctx, int nic, const uint8_t *buf, size_t bytes)
{
  struct mc_net_mesh_disc *d = ctx->disc;
  const struct mc_net_mesh_nic *n = &ctx->nics[nic];
  union mc_sockaddr to;
  uint8_t cbuf[CMSG_SPACE(sizeof(struct in6_pktinfo))];
  struct iovec iov = {.iov_base = (void *)buf, .iov_len = bytes};
  struct msghdr mh;
  struct cmsghdr *cm;
  int fd;

  memset(&to, 0, sizeof(to));
  memset(&mh, 0, sizeof(mh));
  memset(cbuf, 0, sizeof(cbuf));
  mh.msg_name = &to;
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cbuf;
  cm = (struct cmsghdr *)cbuf;
  if (n->addr.sa.sa_family == AF_INET) {
    struct in_pktinfo pi;
    uint32_t ip = ntohl(n->addr.sin.sin_addr.s_addr);
    uint32_t mask = (n->prefix_len == 0) ? 0 : (0xffffffffu << (32 - n->prefix_len));

    fd = d->fd4;
    to.sin.sin_family = AF_INET;
    /* The link's broadcast address; a /31 or /32 has none: the limited one. */
    to.sin.sin_addr.s_addr = htonl((n->prefix_len <= 30) ? (ip | ~mask) : 0xffffffffu);
    memset(&pi, 0, sizeof(pi));
    pi.ipi_ifindex = n->if_index;
    pi.ipi_spec_dst = n->addr.sin.sin_addr;
    mh.msg_controllen = put_cmsg(cm, IPPROTO_IP, IP_PKTINFO, &pi, sizeof(pi));
  } else {
    struct in6_pktinfo pi;

    fd = d->fd6;
    to.sin6.sin6_family = AF_INET6;
    (void)inet_pton(AF_INET6, "ff02::1", &to.sin6.sin6_addr);
    to.sin6.sin6_scope_id = (uint32_t)n->if_index;
    memset(&pi, 0, sizeof(pi));
    pi.ipi6_ifindex = (unsigned)n->if_index;
    pi.ipi6_addr = n->addr.sin6.sin6_addr;
    mh.msg_controllen = put_cmsg(cm, IPPROTO_IPV6, IPV6_PKTINFO, &pi, sizeof(pi));
  }
  mc_sockaddr_set_port(&to, d->port);
  mh.msg_namelen = mc_sockaddr_len(&to);
  if ((fd >= 0) && (sendmsg(fd, &mh, MSG_DONTWAIT) < 0) && (errno != EAGAIN) &&
      (errno != EWOULDBLOCK)) {
    char a[MC_SOCKADDR_STRLEN];
    MC_INFO(MC_SUB_NET, "NET/Mesh: discovery: cannot announce on %s to %s: %s", n->name,
            mc_sockaddr_str(&to, a, sizeof(a)), strerror(errno));
  }
}

/* Announces every record on every NIC, in as many datagrams as needed. */
static void announce(struct mc_net_mesh_ctx *ctx, uint64_t now)
{
  struct mc_net_mesh_disc *d = ctx->disc;
  uint8_t buf[MC_NET_MESH_DISC_MAX_BYTES];
  struct mc_net_mesh_rec recs[MC_NET_MESH_MAX_RECS];
  int i = 0;

  d->table.e[0].rec.version++;
  d->table.e[0].heard_ns = now;
  while (i < d->table.n) {
    int n_put = 0;
    int n_taken = 0;
    size_t bytes;

    while ((n_put < MC_NET_MESH_MAX_RECS) && (i + n_put < d->table.n)) {
      recs[n_put] = d->table.e[i + n_put].rec;
      n_put++;
    }
    bytes = mc_net_mesh_disc_encode(ctx->disc_key, ctx->host_hash, ctx->ctx_id, recs, n_put,
                                    &n_taken, buf, sizeof(buf));
    if (n_taken == 0) {
      i++; /* cannot happen with bounded records; never loop */
      continue;
    }
    for (int k = 0; k < ctx->n_nics; k++) {
      /* A silent link is still announced on: that is how it comes back. */
      if (!d->nic_no_carrier[k])
        send_on(ctx, k, buf, bytes);
    }
    i += n_taken;
  }
}

/* Logs the view: "stable" once it has not changed for STABLE_MS, or at
 * close when it never stayed that long (a short job still says what mesh it
 * ran on). */
static void log_mesh(struct mc_net_mesh_ctx *ctx, const struct mc_net_mesh_view *v, bool at_close)
{
  char *text = NULL;
  size_t text_bytes = 0;
  FILE *f;
  char line_buf[512];
  char s[1024];
  char self[MC_NET_MESH_HOST_TEXT_BYTES];

  if (!mc_log_enabled(MC_LOG_INFO, MC_SUB_NET))
    return;
  mc_net_mesh_view_str(ctx, v, s, sizeof(s));
  mc_net_mesh_host_label(ctx, v, ctx->host_hash, self, sizeof(self));
  if (at_close)
    MC_INFO(MC_SUB_NET,
            "NET/Mesh: mesh at close: %s (seen from %s; it changed less than %d ms "
            "before)",
            s, self, STABLE_MS);
  else
    MC_INFO(MC_SUB_NET, "NET/Mesh: mesh stable: %s (seen from %s)", s, self);
  f = open_memstream(&text, &text_bytes);
  if (f == NULL)
    return;
  (void)mc_mesh_graph_print(v->graph, f);
  fclose(f);
  for (char *p = text; (p != NULL) && (*p != '\0');) {
    char *nl = strchr(p, '\n');
    size_t len = (nl != NULL) ? (size_t)(nl - p) : strlen(p);

    if (len >= sizeof(line_buf))
      len = sizeof(line_buf) - 1;
    memcpy(line_buf, p, len);
    line_buf[len] = '\0';
    MC_INFO(MC_SUB_NET, "NET/Mesh: mesh: %s", line_buf);
    p = (nl != NULL) ? nl + 1 : NULL;
  }
  free(text);
}

void mc_net_mesh_disc_tick(struct mc_net_mesh_ctx *ctx, const struct pollfd *pfd, int n_pfd)
{
  struct mc_net_mesh_disc *d = ctx->disc;
  uint64_t now = mc_time_ns();
  struct mc_net_mesh_view *v;

  if (d == NULL)
    return;
  if (mc_net_mesh_nics_watch(ctx)) {
    uint64_t version = d->table.e[0].rec.version;

    self_record(ctx, &d->table.e[0].rec);
    d->table.e[0].rec.version = version;
    d->is_changed = true;
    d->changed_ns = now;
    d->next_announce_ns = now; /* tell the mesh at once */
  }
  for (int i = 0; i < n_pfd; i++) {
    bool again = (pfd[i].revents != 0);

    for (int k = 0; again && (k < RECV_BURST); k++)
      recv_one(ctx, pfd[i].fd, now, &again);
  }
  if (mc_net_mesh_table_expire(&d->table, now, (uint64_t)EXPIRE_MS * 1000000ull) > 0) {
    d->is_changed = true;
    d->changed_ns = now;
  }
  if (now >= d->next_announce_ns) {
    bool is_settled = (now - d->changed_ns > (uint64_t)STABLE_MS * 1000000ull);

    announce(ctx, now);
    d->next_announce_ns =
        now + (uint64_t)(is_settled ? ANNOUNCE_SLOW_MS : ANNOUNCE_FAST_MS) * 1000000ull;
  }
  if (d->is_changed) {
    d->is_changed = false;
    if (view_build(ctx, &d->table, ctx->host_hash, ++d->serial, &v) == ncclSuccess)
      view_set(ctx, v);
  }
  if ((now - d->changed_ns > (uint64_t)STABLE_MS * 1000000ull) && (d->logged_serial != d->serial)) {
    d->logged_serial = d->serial;
    v = mc_net_mesh_view_get(ctx);
    if (v != NULL)
      log_mesh(ctx, v, false);
    mc_net_mesh_view_put(v);
  }
}

/* ---------- link state ---------- */

/* Is the neighbour last heard on nic still alive, as records of it that
 * reach us over other links say? Then its silence on nic is the link's. */
static bool peer_alive_elsewhere(const struct mc_net_mesh_disc *d, uint64_t host, uint64_t now,
                                 uint64_t window_ns)
{
  for (int i = 1; i < d->table.n; i++) {
    if ((d->table.e[i].rec.host_hash == host) && (now - d->table.e[i].heard_ns < window_ns))
      return true;
  }
  return false;
}

bool mc_net_mesh_nics_watch(struct mc_net_mesh_ctx *ctx)
{
  struct mc_net_mesh_disc *d = ctx->disc;
  int fd = (d->fd4 >= 0) ? d->fd4 : d->fd6;
  bool is_changed = false;
  uint64_t now = mc_time_ns();
  uint64_t silent_ns = (uint64_t)mc_param_int(MC_P_MESH_LINK_TIMEOUT_MS) * 1000000ull;

  if (silent_ns < (uint64_t)SILENT_MIN_MS * 1000000ull)
    silent_ns = (uint64_t)SILENT_MIN_MS * 1000000ull;
  for (int i = 0; (fd >= 0) && (i < ctx->n_nics); i++) {
    struct ifreq ifr;
    int was_down = __atomic_load_n(&ctx->nic_down[i], __ATOMIC_ACQUIRE);
    bool no_carrier;
    bool is_silent = d->nic_is_silent[i];
    int is_down;
    char s[MC_SOCKADDR_STRLEN];
    char self[MC_NET_MESH_HOST_TEXT_BYTES];

    memset(&ifr, 0, sizeof(ifr));
    snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", ctx->nics[i].name);
    if (ioctl(fd, SIOCGIFFLAGS, &ifr) != 0)
      no_carrier = (errno == ENODEV) || (errno == ENXIO);
    else
      no_carrier = ((ifr.ifr_flags & IFF_UP) == 0) || ((ifr.ifr_flags & IFF_RUNNING) == 0);
    /* Silent: a neighbour host was heard on this NIC, has not been for
     * silent_ns, yet its records still arrive over other links. */
    if ((d->nic_peer_host[i] != 0) && (now - d->nic_heard_ns[i] > silent_ns))
      is_silent = peer_alive_elsewhere(d, d->nic_peer_host[i], now, silent_ns);
    else if (now - d->nic_heard_ns[i] <= silent_ns)
      is_silent = false;
    d->nic_no_carrier[i] = no_carrier;
    d->nic_is_silent[i] = is_silent;
    is_down = (no_carrier || is_silent) ? 1 : 0;
    if (is_down == was_down)
      continue;
    __atomic_store_n(&ctx->nic_down[i], is_down, __ATOMIC_RELEASE);
    is_changed = true;
    if (is_down)
      mc_mesh_relay_fail_local(ctx->relay, &ctx->nics[i].addr.sa, "the interface");
    mc_net_mesh_host_str(ctx, ctx->host_hash, self, sizeof(self));
    MC_INFO(MC_SUB_NET, "NET/Mesh: link %s on %s: interface %s %s (subnet %s)%s",
            is_down ? "down" : "up", self, ctx->nics[i].name,
            !is_down     ? "is up again"
            : no_carrier ? "lost its carrier or was set down"
                         : "hears its neighbour no more, though the neighbour is alive",
            mc_net_mesh_subnet_str(&ctx->nics[i].addr, ctx->nics[i].prefix_len, s, sizeof(s)),
            is_down ? "; its connections move to other routes" : "");
  }
  return is_changed;
}

uint64_t mc_net_mesh_nic_neighbour(const struct mc_net_mesh_ctx *ctx, int nic)
{
  if ((ctx->disc == NULL) || (nic < 0) || (nic >= ctx->n_nics))
    return 0;
  return __atomic_load_n(&ctx->disc->nic_peer_host[nic], __ATOMIC_RELAXED);
}

void mc_net_mesh_nic_str(const struct mc_net_mesh_ctx *ctx, int nic, char *buf, size_t bytes)
{
  char a[MC_SOCKADDR_STRLEN];
  char s[MC_SOCKADDR_STRLEN];

  if ((nic < 0) || (nic >= ctx->n_nics)) {
    snprintf(buf, bytes, "?");
    return;
  }
  snprintf(buf, bytes, "%s %s (subnet %s)", ctx->nics[nic].name,
           mc_sockaddr_str(&ctx->nics[nic].addr, a, sizeof(a)),
           mc_net_mesh_subnet_str(&ctx->nics[nic].addr, ctx->nics[nic].prefix_len, s, sizeof(s)));
}

void mc_net_mesh_host_label(const struct mc_net_mesh_ctx *ctx, const struct mc_net_mesh_view *v,
                            uint64_t host_hash, char *buf, size_t bytes)
{
  const char *name = NULL;
  char own[MC_MESH_HOST_NAME_BYTES];

  for (int i = 0; (v != NULL) && (i < v->table.n); i++) {
    if ((v->table.e[i].rec.host_hash == host_hash) && (v->table.e[i].rec.name[0] != '\0'))
      name = v->table.e[i].rec.name;
  }
  if ((name == NULL) && (host_hash == ctx->host_hash)) {
    struct mc_net_mesh_rec r;

    self_record((struct mc_net_mesh_ctx *)ctx, &r);
    snprintf(own, sizeof(own), "%s", r.name);
    name = own;
  }
  for (int k = 0; k < ctx->n_host_names; k++) {
    const struct mc_net_host_name *h = &ctx->host_names[k];

    if (h->host_hash != host_hash)
      continue;
    if (name != NULL)
      snprintf(buf, bytes, "host %d (%s, %s)", h->index, name, h->ranks);
    else
      snprintf(buf, bytes, "host %d (%016llx, %s)", h->index, (unsigned long long)host_hash,
               h->ranks);
    return;
  }
  if (name != NULL)
    snprintf(buf, bytes, "host %s (%016llx)", name, (unsigned long long)host_hash);
  else
    snprintf(buf, bytes, "host %016llx", (unsigned long long)host_hash);
}

void mc_net_mesh_host_str(struct mc_net_mesh_ctx *ctx, uint64_t host_hash, char *buf, size_t bytes)
{
  struct mc_net_mesh_view *v = mc_net_mesh_view_get(ctx);

  mc_net_mesh_host_label(ctx, v, host_hash, buf, bytes);
  mc_net_mesh_view_put(v);
}
