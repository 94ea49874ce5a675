/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mesh graph: hosts in canonical order (ascending host hash, the way
 * NCCL orders nodes by hostHash so that every rank numbers them alike), the
 * links found by matching subnets between hosts, the degrees and the shape
 * of the cabling, lanes by link speed, and the text form of the whole (graph,
 * routes, rings) that tools and logs print. Inputs are the hosts' announced
 * addresses; nothing here touches a socket or a NIC.
 */
#include "net/mesh/mesh_graph.h"

#include "check.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

enum mc_mesh_lane mc_mesh_lane_of(int speed_mbps, int fast_threshold_mbps)
{
  if (fast_threshold_mbps <= 0)
    fast_threshold_mbps = MC_MESH_FAST_THRESHOLD_MBPS;
  if (speed_mbps <= 0)
    return MC_MESH_LANE_UNKNOWN;
  return (speed_mbps < fast_threshold_mbps) ? MC_MESH_LANE_MGMT : MC_MESH_LANE_FAST;
}

const char *mc_mesh_lane_str(enum mc_mesh_lane lane)
{
  switch (lane) {
  case MC_MESH_LANE_UNKNOWN:
    return "unknown";
  case MC_MESH_LANE_MGMT:
    return "mgmt";
  case MC_MESH_LANE_FAST:
    return "fast";
  }
  return "?";
}

const char *mc_mesh_shape_str(enum mc_mesh_shape shape)
{
  switch (shape) {
  case MC_MESH_SHAPE_SINGLE:
    return "single";
  case MC_MESH_SHAPE_FULL:
    return "full";
  case MC_MESH_SHAPE_RING:
    return "ring";
  case MC_MESH_SHAPE_LINE:
    return "line";
  case MC_MESH_SHAPE_STAR:
    return "star";
  case MC_MESH_SHAPE_PARTIAL:
    return "partial";
  case MC_MESH_SHAPE_DISCONNECTED:
    return "disconnected";
  }
  return "?";
}

static int family_bytes(int family)
{
  if (family == AF_INET)
    return 4;
  if (family == AF_INET6)
    return 16;
  return 0;
}

void mc_mesh_addr_str(const struct mc_mesh_addr *addr, char *buf, size_t buf_bytes)
{
  char ip[INET6_ADDRSTRLEN];

  if ((family_bytes(addr->family) == 0) ||
      (inet_ntop(addr->family, addr->bytes, ip, sizeof(ip)) == NULL)) {
    snprintf(buf, buf_bytes, "?");
    return;
  }
  snprintf(buf, buf_bytes, "%s/%d", ip, addr->prefix_len);
}

/* The first prefix_len bits of an address (the rest zero) into net. */
static void network_part(const struct mc_mesh_addr *addr, uint8_t net[16])
{
  int n_bytes = family_bytes(addr->family);
  int full = addr->prefix_len / 8;
  int rem = addr->prefix_len % 8;

  memset(net, 0, 16);
  memcpy(net, addr->bytes, (size_t)full);
  if ((rem != 0) && (full < n_bytes))
    net[full] = (uint8_t)(addr->bytes[full] & (0xffu << (8 - rem)));
}

/* Same family, prefix and network part, different addresses. */
static bool same_subnet(const struct mc_mesh_addr *a, const struct mc_mesh_addr *b)
{
  uint8_t net_a[16];
  uint8_t net_b[16];

  if ((a->family != b->family) || (a->prefix_len != b->prefix_len))
    return false;
  network_part(a, net_a);
  network_part(b, net_b);
  if (memcmp(net_a, net_b, sizeof(net_a)) != 0)
    return false;
  return memcmp(a->bytes, b->bytes, (size_t)family_bytes(a->family)) != 0;
}

static const char *name_or_dash(const struct mc_mesh_host *h)
{
  return (h->name[0] != '\0') ? h->name : "-";
}

static ncclResult_t check_host(const struct mc_mesh_host *h, int index)
{
  if ((h->n_addrs < 0) || (h->n_addrs > MC_MESH_MAX_ADDRS))
    return MC_FAIL(ncclInvalidArgument,
                   "mesh: host %d (%016llx/%s) has %d addresses, at most %d are supported", index,
                   (unsigned long long)h->host_hash, name_or_dash(h), h->n_addrs,
                   MC_MESH_MAX_ADDRS);
  for (int i = 0; i < h->n_addrs; i++) {
    const struct mc_mesh_addr *a = &h->addrs[i];
    int n_bytes = family_bytes(a->family);

    if (n_bytes == 0)
      return MC_FAIL(ncclInvalidArgument,
                     "mesh: host %d (%016llx/%s) address %d (%.*s) has family %d, expected "
                     "AF_INET (%d) or AF_INET6 (%d)",
                     index, (unsigned long long)h->host_hash, name_or_dash(h), i,
                     MC_MESH_IFNAME_BYTES, a->if_name, a->family, AF_INET, AF_INET6);
    if ((a->prefix_len < 0) || (a->prefix_len > 8 * n_bytes))
      return MC_FAIL(ncclInvalidArgument,
                     "mesh: host %d (%016llx/%s) address %d (%.*s) has prefix length %d, "
                     "expected 0..%d",
                     index, (unsigned long long)h->host_hash, name_or_dash(h), i,
                     MC_MESH_IFNAME_BYTES, a->if_name, a->prefix_len, 8 * n_bytes);
  }
  return ncclSuccess;
}

/* Input positions sorted by host hash; equal hashes are an error. */
static ncclResult_t canonical_order(const struct mc_mesh_host *hosts, int n_hosts,
                                    int order[MC_MESH_MAX_HOSTS])
{
  for (int i = 0; i < n_hosts; i++) {
    int j = i;

    while ((j > 0) && (hosts[order[j - 1]].host_hash > hosts[i].host_hash)) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = i;
  }
  for (int i = 1; i < n_hosts; i++) {
    const struct mc_mesh_host *a = &hosts[order[i - 1]];
    const struct mc_mesh_host *b = &hosts[order[i]];
    int ia = (order[i - 1] < order[i]) ? order[i - 1] : order[i];
    int ib = (order[i - 1] < order[i]) ? order[i] : order[i - 1];

    if (a->host_hash == b->host_hash)
      return MC_FAIL(ncclInvalidUsage,
                     "mesh: hosts %d (%s) and %d (%s) report the same host hash %016llx; "
                     "give each host its own NCCL_HOSTID, or unset it",
                     ia, name_or_dash(&hosts[ia]), ib, name_or_dash(&hosts[ib]),
                     (unsigned long long)a->host_hash);
  }
  return ncclSuccess;
}

static ncclResult_t find_links(struct mc_mesh_graph *g)
{
  for (int a = 0; a < g->n_hosts; a++) {
    for (int b = a + 1; b < g->n_hosts; b++) {
      const struct mc_mesh_host *ha = &g->hosts[a];
      const struct mc_mesh_host *hb = &g->hosts[b];

      for (int i = 0; i < ha->n_addrs; i++) {
        for (int j = 0; j < hb->n_addrs; j++) {
          struct mc_mesh_link *l;
          int speed;

          if (!same_subnet(&ha->addrs[i], &hb->addrs[j]))
            continue;
          if (g->n_links == MC_MESH_MAX_LINKS) {
            char addr[64];

            mc_mesh_addr_str(&ha->addrs[i], addr, sizeof(addr));
            return MC_FAIL(ncclInvalidUsage,
                           "mesh: more than %d links among %d hosts (the last at %s, shared by "
                           "many hosts?); a mesh subnet should join the two ends of one cable",
                           MC_MESH_MAX_LINKS, g->n_hosts, addr);
          }
          l = &g->links[g->n_links++];
          l->host[0] = a;
          l->host[1] = b;
          l->addr[0] = i;
          l->addr[1] = j;
          l->family = ha->addrs[i].family;
          l->prefix_len = ha->addrs[i].prefix_len;
          network_part(&ha->addrs[i], l->subnet);
          speed = (ha->addrs[i].speed_mbps < hb->addrs[j].speed_mbps) ? ha->addrs[i].speed_mbps
                                                                      : hb->addrs[j].speed_mbps;
          l->speed_mbps = (speed > 0) ? speed : 0;
          l->lane = mc_mesh_lane_of(l->speed_mbps, g->fast_threshold_mbps);
          l->is_up = true;
        }
      }
    }
  }
  return ncclSuccess;
}

static enum mc_mesh_shape classify(const struct mc_mesh_graph *g)
{
  int n = g->n_hosts;
  int n_deg[MC_MESH_MAX_HOSTS + 1] = {0};
  int hops[MC_MESH_MAX_HOSTS];

  if (n == 1)
    return MC_MESH_SHAPE_SINGLE;
  mc_mesh_graph_hops_from(g, 0, hops);
  for (int h = 0; h < n; h++) {
    if (hops[h] < 0)
      return MC_MESH_SHAPE_DISCONNECTED;
    n_deg[g->degree[h]]++;
  }
  if (n_deg[n - 1] == n)
    return MC_MESH_SHAPE_FULL;
  if ((n >= 4) && (n_deg[2] == n))
    return MC_MESH_SHAPE_RING; /* connected and 2-regular: one cycle */
  if ((n >= 3) && (n_deg[1] == 2) && (n_deg[2] == n - 2))
    return MC_MESH_SHAPE_LINE;
  if ((n >= 4) && (n_deg[n - 1] == 1) && (n_deg[1] == n - 1))
    return MC_MESH_SHAPE_STAR;
  return MC_MESH_SHAPE_PARTIAL;
}

/* Adjacency, degrees and shape from the links that are up. */
static void update_adjacency(struct mc_mesh_graph *g)
{
  memset(g->n_up_between, 0, sizeof(g->n_up_between));
  for (int i = 0; i < g->n_links; i++) {
    const struct mc_mesh_link *l = &g->links[i];

    if (!l->is_up)
      continue;
    g->n_up_between[l->host[0]][l->host[1]]++;
    g->n_up_between[l->host[1]][l->host[0]]++;
  }
  for (int a = 0; a < g->n_hosts; a++) {
    g->degree[a] = 0;
    for (int b = 0; b < g->n_hosts; b++)
      g->degree[a] += (g->n_up_between[a][b] > 0) ? 1 : 0;
  }
  g->shape = classify(g);
}

ncclResult_t mc_mesh_graph_create(const struct mc_mesh_host *hosts, int n_hosts,
                                  int fast_threshold_mbps, struct mc_mesh_graph **graph_out)
{
  ncclResult_t res = ncclSuccess;
  struct mc_mesh_graph *g = NULL;
  int order[MC_MESH_MAX_HOSTS];

  if ((hosts == NULL) || (graph_out == NULL))
    return MC_FAIL(ncclInvalidArgument, "mesh: graph_create called with a NULL %s",
                   (hosts == NULL) ? "hosts array" : "output");
  if ((n_hosts < 1) || (n_hosts > MC_MESH_MAX_HOSTS))
    return MC_FAIL(ncclInvalidArgument, "mesh: %d hosts given, a mesh has 1 to %d hosts", n_hosts,
                   MC_MESH_MAX_HOSTS);
  for (int i = 0; i < n_hosts; i++)
    MC_CHECK(check_host(&hosts[i], i));
  MC_CHECK(canonical_order(hosts, n_hosts, order));

  MC_CHECK(mc_calloc(&g, 1));
  g->n_hosts = n_hosts;
  g->fast_threshold_mbps =
      (fast_threshold_mbps > 0) ? fast_threshold_mbps : MC_MESH_FAST_THRESHOLD_MBPS;
  for (int h = 0; h < n_hosts; h++) {
    g->hosts[h] = hosts[order[h]];
    g->hosts[h].name[MC_MESH_HOST_NAME_BYTES - 1] = '\0';
    for (int i = 0; i < g->hosts[h].n_addrs; i++)
      g->hosts[h].addrs[i].if_name[MC_MESH_IFNAME_BYTES - 1] = '\0';
    g->input_index[h] = order[h];
  }
  MC_CHECK_GOTO(find_links(g), res, err_free);
  update_adjacency(g);

  *graph_out = g;
  return ncclSuccess;

err_free:
  free(g);
  return res;
}

void mc_mesh_graph_destroy(struct mc_mesh_graph *graph)
{
  free(graph);
}

ncclResult_t mc_mesh_graph_host_find(const struct mc_mesh_graph *graph, uint64_t host_hash,
                                     int *host_out)
{
  for (int h = 0; h < graph->n_hosts; h++) {
    if (graph->hosts[h].host_hash == host_hash) {
      *host_out = h;
      return ncclSuccess;
    }
  }
  return MC_FAIL(ncclInvalidArgument, "mesh: no host with host hash %016llx among the %d hosts",
                 (unsigned long long)host_hash, graph->n_hosts);
}

void mc_mesh_graph_host_str(const struct mc_mesh_graph *graph, int host, char *buf,
                            size_t buf_bytes)
{
  const struct mc_mesh_host *h = &graph->hosts[host];

  if (graph->labels[host][0] != '\0')
    snprintf(buf, buf_bytes, "%s", graph->labels[host]);
  else if (h->name[0] != '\0')
    snprintf(buf, buf_bytes, "host %d (%016llx/%s)", host, (unsigned long long)h->host_hash,
             h->name);
  else
    snprintf(buf, buf_bytes, "host %d (%016llx)", host, (unsigned long long)h->host_hash);
}

void mc_mesh_graph_set_label(struct mc_mesh_graph *graph, int host, const char *label)
{
  if ((host >= 0) && (host < graph->n_hosts))
    snprintf(graph->labels[host], sizeof(graph->labels[host]), "%s", label);
}

/* Preference among parallel links: fast, then unknown speed, then management. */
static int lane_rank(enum mc_mesh_lane lane)
{
  switch (lane) {
  case MC_MESH_LANE_FAST:
    return 2;
  case MC_MESH_LANE_UNKNOWN:
    return 1;
  case MC_MESH_LANE_MGMT:
    return 0;
  }
  return 0;
}

int mc_mesh_graph_usable_links(const struct mc_mesh_graph *graph, int a, int b,
                               int links_out[MC_MESH_MAX_PAIR_LINKS])
{
  int lo = (a < b) ? a : b;
  int hi = (a < b) ? b : a;
  int best = -1;
  int n = 0;

  if ((lo < 0) || (hi >= graph->n_hosts) || (lo == hi) || (graph->n_up_between[lo][hi] == 0))
    return 0;
  for (int i = 0; i < graph->n_links; i++) {
    const struct mc_mesh_link *l = &graph->links[i];

    if ((l->host[0] == lo) && (l->host[1] == hi) && l->is_up && (lane_rank(l->lane) > best))
      best = lane_rank(l->lane);
  }
  for (int i = 0; i < graph->n_links; i++) {
    const struct mc_mesh_link *l = &graph->links[i];

    if ((l->host[0] == lo) && (l->host[1] == hi) && l->is_up && (lane_rank(l->lane) == best) &&
        (n < MC_MESH_MAX_PAIR_LINKS))
      links_out[n++] = i;
  }
  return n;
}

void mc_mesh_graph_hops_from(const struct mc_mesh_graph *graph, int src,
                             int hops_out[MC_MESH_MAX_HOSTS])
{
  int queue[MC_MESH_MAX_HOSTS];
  int head = 0;
  int tail = 0;

  for (int h = 0; h < graph->n_hosts; h++)
    hops_out[h] = -1;
  hops_out[src] = 0;
  queue[tail++] = src;
  while (head < tail) {
    int cur = queue[head++];

    for (int v = 0; v < graph->n_hosts; v++) {
      if ((graph->n_up_between[cur][v] > 0) && (hops_out[v] < 0)) {
        hops_out[v] = hops_out[cur] + 1;
        queue[tail++] = v;
      }
    }
  }
}

static ncclResult_t link_set(struct mc_mesh_graph *graph, int link, bool is_up)
{
  if ((graph == NULL) || (link < 0) || (link >= graph->n_links))
    return MC_FAIL(ncclInvalidArgument, "mesh: no link %d (the mesh has %d links)", link,
                   (graph != NULL) ? graph->n_links : 0);
  graph->links[link].is_up = is_up;
  update_adjacency(graph);
  return ncclSuccess;
}

ncclResult_t mc_mesh_graph_link_set_down(struct mc_mesh_graph *graph, int link)
{
  return link_set(graph, link, false);
}

ncclResult_t mc_mesh_graph_link_set_up(struct mc_mesh_graph *graph, int link)
{
  return link_set(graph, link, true);
}

/* --------------------------------------------------------------- printing */

static void print_hosts(const struct mc_mesh_graph *g, FILE *out)
{
  for (int h = 0; h < g->n_hosts; h++) {
    const struct mc_mesh_host *host = &g->hosts[h];
    char label[MC_MESH_LABEL_BYTES + 32];

    mc_mesh_graph_host_str(g, h, label, sizeof(label));
    /* A label is the user's name for the host; the routes below use h. */
    if (g->labels[h][0] != '\0')
      fprintf(out, "mesh host %d is %s:", h, label);
    else
      fprintf(out, "%s:", label);
    if (host->n_addrs == 0)
      fprintf(out, " no mesh address");
    for (int i = 0; i < host->n_addrs; i++) {
      const struct mc_mesh_addr *a = &host->addrs[i];
      char addr[64];

      mc_mesh_addr_str(a, addr, sizeof(addr));
      fprintf(out, "%s %s %s", (i == 0) ? "" : ",", a->if_name, addr);
      if (a->speed_mbps > 0)
        fprintf(out, " %d Mb/s", a->speed_mbps);
      else
        fprintf(out, " speed unknown");
    }
    fprintf(out, "\n");
  }
}

static void print_links(const struct mc_mesh_graph *g, FILE *out)
{
  for (int i = 0; i < g->n_links; i++) {
    const struct mc_mesh_link *l = &g->links[i];
    const struct mc_mesh_addr *a = &g->hosts[l->host[0]].addrs[l->addr[0]];
    const struct mc_mesh_addr *b = &g->hosts[l->host[1]].addrs[l->addr[1]];
    char sa[64];
    char sb[64];

    mc_mesh_addr_str(a, sa, sizeof(sa));
    mc_mesh_addr_str(b, sb, sizeof(sb));
    fprintf(out, "link %d: host %d %s %s <-> host %d %s %s", i, l->host[0], a->if_name, sa,
            l->host[1], b->if_name, sb);
    if (l->speed_mbps > 0)
      fprintf(out, " %d Mb/s %s", l->speed_mbps, mc_mesh_lane_str(l->lane));
    else
      fprintf(out, " speed unknown");
    fprintf(out, "%s\n", l->is_up ? "" : " down");
  }
}

static ncclResult_t print_routes(const struct mc_mesh_graph *g, FILE *out)
{
  struct mc_mesh_route_table *table = NULL;
  struct mc_mesh_path path;

  MC_CHECK(mc_mesh_route_table_create(g, &table));
  for (int s = 0; s < g->n_hosts; s++) {
    for (int d = 0; d < g->n_hosts; d++) {
      int hops = mc_mesh_route_hops(table, s, d);

      if (s == d)
        continue;
      fprintf(out, "route %d -> %d: ", s, d);
      if (hops < 0) {
        fprintf(out, "unreachable\n");
        continue;
      }
      (void)mc_mesh_route_path(table, s, d, &path);
      fprintf(out, "%d hop%s:", hops, (hops == 1) ? "" : "s");
      for (int i = 0; i <= path.n_hops; i++)
        fprintf(out, " %d", path.hosts[i]);
      if (path.n_choices > 1)
        fprintf(out, " (%d equal first hops)", path.n_choices);
      fprintf(out, "\n");
    }
  }
  mc_mesh_route_table_destroy(table);
  return ncclSuccess;
}

static ncclResult_t print_rings(const struct mc_mesh_graph *g, FILE *out)
{
  int src = 0;
  int dst = 0;
  struct mc_mesh_rings rings;
  int order[MC_MESH_MAX_HOSTS];
  int links[MC_MESH_MAX_HOSTS];

  if (g->shape == MC_MESH_SHAPE_DISCONNECTED) {
    struct mc_mesh_route_table *table = NULL;
    char why[512];

    MC_CHECK(mc_mesh_route_table_create(g, &table));
    (void)mc_mesh_route_find_unreachable(table, &src, &dst);
    mc_mesh_route_table_destroy(table);
    mc_mesh_route_unreachable_str(g, src, dst, why, sizeof(why));
    fprintf(out, "rings: none: %s\n", why);
    return ncclSuccess;
  }
  for (int h = 0; h < g->n_hosts; h++)
    order[h] = h;
  MC_CHECK(mc_mesh_rings_compute(g, order, g->n_hosts, MC_MESH_MAX_RINGS, &rings));
  fprintf(out, "rings over the hosts in canonical order: %d (%s%s)\n", rings.n_rings,
          mc_mesh_rings_kind_str(rings.kind), rings.is_search_cut ? ", search budget spent" : "");
  for (int r = 0; r < rings.n_rings; r++) {
    const struct mc_mesh_ring *ring = &rings.rings[r];
    int n_hops = (rings.n_hosts > 1) ? rings.n_hosts : 0;

    MC_CHECK(mc_mesh_ring_links(g, &rings, r, links));
    fprintf(out, "ring %d: hosts", r);
    for (int i = 0; i < rings.n_hosts; i++)
      fprintf(out, " %d", ring->hosts[i]);
    fprintf(out, "; links");
    for (int i = 0; i < n_hops; i++) {
      if (links[i] >= 0)
        fprintf(out, " %d", links[i]);
      else
        fprintf(out, " relay");
    }
    if (ring->n_relayed == 0)
      fprintf(out, "; no relayed hop\n");
    else
      fprintf(out, "; %d relayed hop%s over %d links\n", ring->n_relayed,
              (ring->n_relayed == 1) ? "" : "s", ring->relay_edges);
  }
  return ncclSuccess;
}

ncclResult_t mc_mesh_graph_print(const struct mc_mesh_graph *graph, FILE *out)
{
  int n_up = 0;

  if ((graph == NULL) || (out == NULL))
    return MC_FAIL(ncclInvalidArgument, "mesh: graph_print called with a NULL %s",
                   (graph == NULL) ? "graph" : "stream");
  for (int i = 0; i < graph->n_links; i++)
    n_up += graph->links[i].is_up ? 1 : 0;
  fprintf(out, "mesh: %d host%s, %d link%s (%d up), shape %s, fast lane from %d Mb/s\n",
          graph->n_hosts, (graph->n_hosts == 1) ? "" : "s", graph->n_links,
          (graph->n_links == 1) ? "" : "s", n_up, mc_mesh_shape_str(graph->shape),
          graph->fast_threshold_mbps);
  print_hosts(graph, out);
  print_links(graph, out);
  MC_CHECK(print_routes(graph, out));
  MC_CHECK(print_rings(graph, out));
  return ncclSuccess;
}
