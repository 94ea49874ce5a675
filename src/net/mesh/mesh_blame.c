/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the Mesh net blames when a connection fails (mesh_reliable.c's
 * reports): the cables of a connection's route, described while they were
 * up (from the view of that moment), and which of them the current view no
 * longer has. A relay that loses its onward cable only resets its sockets;
 * the route's ends learn which cable it was from the mesh's link state, which
 * discovery floods to every host (an interface that goes down or silent is
 * withdrawn from its host's record at once). A direct connection's cable is
 * also known from the connection's own two ends, before discovery has
 * described the route. Pure functions of a view.
 */
#include "mesh_int.h"

#include "utils.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <string.h>

/* The graph's index of host_hash, else -1 (quietly: a host may be gone). */
static int find_host(const struct mc_mesh_graph *g, uint64_t host_hash)
{
  for (int h = 0; h < g->n_hosts; h++) {
    if (g->hosts[h].host_hash == host_hash)
      return h;
  }
  return -1;
}

/* Whether a graph address is the IP address of sa. */
static bool same_ip(const struct mc_mesh_addr *x, const union mc_sockaddr *sa)
{
  if ((x->family == AF_INET) && (sa->sa.sa_family == AF_INET))
    return memcmp(x->bytes, &sa->sin.sin_addr, 4) == 0;
  if ((x->family == AF_INET6) && (sa->sa.sa_family == AF_INET6))
    return memcmp(x->bytes, &sa->sin6.sin6_addr, 16) == 0;
  return false;
}

/* "host 1 (h2, rank 1) mcl3 10.1.23.2 - host 2 (h3, rank 2) mcl2 10.1.23.3
 * (subnet 10.1.23.0/24)": the link, from host a's end. */
static void cable_str(const struct mc_net_mesh_ctx *ctx, const struct mc_net_mesh_view *v, int link,
                      int a, char *buf, size_t bytes)
{
  const struct mc_mesh_graph *g = v->graph;
  const struct mc_mesh_link *l = &g->links[link];
  int ea = (l->host[0] == a) ? 0 : 1;
  int eb = 1 - ea;
  const struct mc_mesh_addr *xa = &g->hosts[l->host[ea]].addrs[l->addr[ea]];
  const struct mc_mesh_addr *xb = &g->hosts[l->host[eb]].addrs[l->addr[eb]];
  struct mc_mesh_addr sub = *xa;
  char na[MC_NET_MESH_HOST_TEXT_BYTES];
  char nb[MC_NET_MESH_HOST_TEXT_BYTES];
  char ia[64];
  char ib[64];
  char s[64];
  char *slash;

  memcpy(sub.bytes, l->subnet, sizeof(sub.bytes));
  mc_net_mesh_host_label(ctx, v, g->hosts[l->host[ea]].host_hash, na, sizeof(na));
  mc_net_mesh_host_label(ctx, v, g->hosts[l->host[eb]].host_hash, nb, sizeof(nb));
  mc_mesh_addr_str(xa, ia, sizeof(ia));
  mc_mesh_addr_str(xb, ib, sizeof(ib));
  mc_mesh_addr_str(&sub, s, sizeof(s));
  /* The addresses without their prefix length: the subnet says it. */
  if ((slash = strchr(ia, '/')) != NULL)
    *slash = '\0';
  if ((slash = strchr(ib, '/')) != NULL)
    *slash = '\0';
  snprintf(buf, bytes, "%s %s %s - %s %s %s (subnet %s)", na, xa->if_name, ia, nb, xb->if_name, ib,
           s);
}

bool mc_net_mesh_route_describe(const struct mc_net_mesh_ctx *ctx, const struct mc_net_mesh_view *v,
                                uint64_t src_host, uint64_t dst_host, uint64_t conn_id,
                                const union mc_sockaddr *local_addr,
                                struct mc_net_mesh_route_desc *d_out)
{
  struct mc_mesh_path path;
  int src = -1;
  int dst = -1;
  size_t used = 0;

  if (v == NULL)
    return false;
  src = find_host(v->graph, src_host);
  dst = find_host(v->graph, dst_host);
  /* Unreachable: said here, quietly (mc_mesh_route_pick would WARN). */
  if ((src < 0) || (dst < 0) || (src == dst) || (mc_mesh_route_hops(v->routes, src, dst) < 1) ||
      (mc_mesh_route_pick(v->routes, src, dst, conn_id, &path) != ncclSuccess) ||
      (path.n_hops < 1) || (path.n_hops > MC_NET_MESH_MAX_HOPS))
    return false;
  if ((path.n_hops == 1) && (local_addr != NULL)) {
    /* A direct connection: the cable it was made on, among parallel ones. */
    int links[MC_MESH_MAX_PAIR_LINKS];
    int n = mc_mesh_graph_usable_links(v->graph, src, dst, links);

    for (int i = 0; i < n; i++) {
      const struct mc_mesh_link *l = &v->graph->links[links[i]];
      const struct mc_mesh_addr *x0 = &v->graph->hosts[l->host[0]].addrs[l->addr[0]];
      const struct mc_mesh_addr *x1 = &v->graph->hosts[l->host[1]].addrs[l->addr[1]];

      if (same_ip(x0, local_addr) || same_ip(x1, local_addr))
        path.links[0] = links[i];
    }
  }
  d_out->n_hops = path.n_hops;
  d_out->path[0] = '\0';
  for (int i = 0; i <= path.n_hops; i++) {
    char name[MC_NET_MESH_HOST_TEXT_BYTES];

    d_out->hosts[i] = v->graph->hosts[path.hosts[i]].host_hash;
    mc_net_mesh_host_label(ctx, v, d_out->hosts[i], name, sizeof(name));
    mc_str_appendf(d_out->path, sizeof(d_out->path), &used, "%s%s", (i > 0) ? " > " : "", name);
  }
  for (int i = 0; i < path.n_hops; i++)
    cable_str(ctx, v, path.links[i], path.hosts[i], d_out->cables[i], sizeof(d_out->cables[i]));
  return true;
}

/* "10.1.23.2": an address without port or prefix length. */
static void ip_str(const union mc_sockaddr *a, char *buf, size_t bytes)
{
  const void *src = (a->sa.sa_family == AF_INET6) ? (const void *)&a->sin6.sin6_addr
                                                  : (const void *)&a->sin.sin_addr;

  if (((a->sa.sa_family != AF_INET) && (a->sa.sa_family != AF_INET6)) ||
      (inet_ntop(a->sa.sa_family, src, buf, (socklen_t)bytes) == NULL))
    snprintf(buf, bytes, "?");
}

/* The interface of host_hash that has address a, from v's table ("" when
 * v has no record of that host, or none with that address). */
static const char *peer_if_name(const struct mc_net_mesh_view *v, uint64_t host_hash,
                                const union mc_sockaddr *a)
{
  for (int i = 0; (v != NULL) && (i < v->table.n); i++) {
    const struct mc_net_mesh_rec *r = &v->table.e[i].rec;

    if (r->host_hash != host_hash)
      continue;
    for (int k = 0; k < r->n_addrs; k++) {
      const union mc_sockaddr *x = &r->addrs[k].addr;
      bool same =
          (x->sa.sa_family == a->sa.sa_family) &&
          (((a->sa.sa_family == AF_INET) && (memcmp(&x->sin.sin_addr, &a->sin.sin_addr, 4) == 0)) ||
           ((a->sa.sa_family == AF_INET6) &&
            (memcmp(&x->sin6.sin6_addr, &a->sin6.sin6_addr, 16) == 0)));

      if (same)
        return r->addrs[k].if_name;
    }
  }
  return "";
}

void mc_net_mesh_route_direct(const struct mc_net_mesh_ctx *ctx, const struct mc_net_mesh_view *v,
                              uint64_t src_host, uint64_t dst_host,
                              const struct mc_net_mesh_nic *local, const union mc_sockaddr *remote,
                              struct mc_net_mesh_route_desc *d_out)
{
  char sub[MC_SOCKADDR_STRLEN];
  size_t used = 0;
  size_t c_used = 0;
  int me = (src_host == ctx->host_hash) ? 0 : 1;

  memset(d_out, 0, sizeof(*d_out));
  d_out->n_hops = 1;
  d_out->hosts[0] = src_host;
  d_out->hosts[1] = dst_host;
  for (int i = 0; i < 2; i++) {
    char name[MC_NET_MESH_HOST_TEXT_BYTES];
    char ip[MC_SOCKADDR_STRLEN];
    const char *ifn = (i == me) ? local->name : peer_if_name(v, d_out->hosts[i], remote);

    if (d_out->hosts[i] != 0)
      mc_net_mesh_host_label(ctx, v, d_out->hosts[i], name, sizeof(name));
    else
      snprintf(name, sizeof(name), "the host at");
    ip_str((i == me) ? &local->addr : remote, ip, sizeof(ip));
    mc_str_appendf(d_out->cables[0], sizeof(d_out->cables[0]), &c_used, "%s%s%s%s %s",
                   (i > 0) ? " - " : "", name, (ifn[0] != '\0') ? " " : "", ifn, ip);
    mc_str_appendf(d_out->path, sizeof(d_out->path), &used, "%s%s", (i > 0) ? " > " : "", name);
  }
  mc_net_mesh_subnet_str(&local->addr, local->prefix_len, sub, sizeof(sub));
  mc_str_appendf(d_out->cables[0], sizeof(d_out->cables[0]), &c_used, " (subnet %s)", sub);
}

int mc_net_mesh_route_broken_hop(const struct mc_net_mesh_view *v,
                                 const struct mc_net_mesh_route_desc *d)
{
  if ((v == NULL) || (v->graph == NULL))
    return -1;
  for (int i = 0; i < d->n_hops; i++) {
    int a = find_host(v->graph, d->hosts[i]);
    int b = find_host(v->graph, d->hosts[i + 1]);

    if ((a < 0) || (b < 0) || (v->graph->n_up_between[a][b] == 0))
      return i;
  }
  return -1;
}

int mc_net_mesh_route_blame(const struct mc_net_mesh_view *v,
                            const struct mc_net_mesh_route_desc *d, bool is_peer_closed)
{
  if (is_peer_closed || (d->n_hops < 1))
    return -1;
  if (d->n_hops == 1)
    return 0;
  return mc_net_mesh_route_broken_hop(v, d);
}
