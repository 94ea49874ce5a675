/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Routing over the mesh: hop counts (links crossed) and next hops for every
 * pair of hosts by breadth-first search, the full path of a pair as the chain
 * of next hops, and the choice of one route per connection among equal
 * shortest ones. Ties go to the lowest canonical index, so every host derives
 * the same table from the same graph; a connection keeps one route, because
 * NCCL matches a connection's messages in posting order and relaying them
 * over two paths could reorder them.
 */
#include "net/mesh/mesh_graph.h"

#include "check.h"
#include "utils.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

struct mc_mesh_route_table {
  int n_hosts;
  uint64_t host_hash[MC_MESH_MAX_HOSTS]; /* for messages */
  char host_name[MC_MESH_MAX_HOSTS][MC_MESH_HOST_NAME_BYTES];
  int8_t hops[MC_MESH_MAX_HOSTS][MC_MESH_MAX_HOSTS]; /* -1: unreachable */
  int8_t next[MC_MESH_MAX_HOSTS][MC_MESH_MAX_HOSTS]; /* -1: self or unreachable */
  /* The usable links of each pair (mc_mesh_graph_usable_links when the table
   * was computed): pair_links[pair_first[a][b] .. + pair_count[a][b]). */
  uint16_t pair_first[MC_MESH_MAX_HOSTS][MC_MESH_MAX_HOSTS];
  uint8_t pair_count[MC_MESH_MAX_HOSTS][MC_MESH_MAX_HOSTS];
  int16_t pair_links[MC_MESH_MAX_LINKS];
};

ncclResult_t mc_mesh_route_table_create(const struct mc_mesh_graph *graph,
                                        struct mc_mesh_route_table **table_out)
{
  struct mc_mesh_route_table *t = NULL;

  if ((graph == NULL) || (table_out == NULL))
    return MC_FAIL(ncclInvalidArgument, "mesh: route_table_create called with a NULL %s",
                   (graph == NULL) ? "graph" : "output");
  MC_CHECK(mc_calloc(&t, 1));
  mc_mesh_route_table_compute(t, graph);
  *table_out = t;
  return ncclSuccess;
}

void mc_mesh_route_table_destroy(struct mc_mesh_route_table *table)
{
  free(table);
}

void mc_mesh_route_table_compute(struct mc_mesh_route_table *table,
                                 const struct mc_mesh_graph *graph)
{
  int n = graph->n_hosts;
  int used = 0;
  int hops[MC_MESH_MAX_HOSTS];
  int links[MC_MESH_MAX_PAIR_LINKS];

  memset(table, 0, sizeof(*table));
  table->n_hosts = n;
  for (int h = 0; h < n; h++) {
    table->host_hash[h] = graph->hosts[h].host_hash;
    memcpy(table->host_name[h], graph->hosts[h].name, MC_MESH_HOST_NAME_BYTES);
  }
  for (int a = 0; a < n; a++) {
    for (int b = a + 1; b < n; b++) {
      int count = mc_mesh_graph_usable_links(graph, a, b, links);

      table->pair_first[a][b] = table->pair_first[b][a] = (uint16_t)used;
      table->pair_count[a][b] = table->pair_count[b][a] = (uint8_t)count;
      for (int i = 0; i < count; i++)
        table->pair_links[used++] = (int16_t)links[i];
    }
  }
  for (int s = 0; s < n; s++) {
    mc_mesh_graph_hops_from(graph, s, hops);
    for (int d = 0; d < n; d++)
      table->hops[s][d] = (int8_t)hops[d];
  }
  /* The next hop is the lowest-indexed neighbour one hop closer: every host
   * picks the same one, and a relay's own next hop continues the path. */
  for (int s = 0; s < n; s++) {
    for (int d = 0; d < n; d++) {
      table->next[s][d] = -1;
      if (table->hops[s][d] <= 0)
        continue;
      for (int u = 0; u < n; u++) {
        if ((table->pair_count[s][u] > 0) && (table->hops[u][d] == table->hops[s][d] - 1)) {
          table->next[s][d] = (int8_t)u;
          break;
        }
      }
    }
  }
}

static bool valid_pair(const struct mc_mesh_route_table *table, int src, int dst)
{
  return (table != NULL) && (src >= 0) && (src < table->n_hosts) && (dst >= 0) &&
         (dst < table->n_hosts);
}

int mc_mesh_route_hops(const struct mc_mesh_route_table *table, int src, int dst)
{
  return valid_pair(table, src, dst) ? table->hops[src][dst] : -1;
}

int mc_mesh_route_next_hop(const struct mc_mesh_route_table *table, int src, int dst)
{
  return valid_pair(table, src, dst) ? table->next[src][dst] : -1;
}

static const char *name_or_dash(const struct mc_mesh_route_table *t, int h)
{
  return (t->host_name[h][0] != '\0') ? t->host_name[h] : "-";
}

ncclResult_t mc_mesh_route_pick(const struct mc_mesh_route_table *table, int src, int dst,
                                uint64_t conn_id, struct mc_mesh_path *path_out)
{
  int n_first = 0;
  struct mc_mesh_path p;
  int first[MC_MESH_MAX_HOSTS];
  int hops;
  uint64_t link_sel;

  if (!valid_pair(table, src, dst) || (path_out == NULL))
    return MC_FAIL(ncclInvalidArgument, "mesh: no route for hosts %d -> %d (%d hosts)%s", src, dst,
                   (table != NULL) ? table->n_hosts : 0, (path_out == NULL) ? ", NULL output" : "");
  hops = table->hops[src][dst];
  if (hops < 0)
    return MC_FAIL(ncclRemoteError,
                   "mesh: host %d (%016llx/%s) cannot reach host %d (%016llx/%s): no chain of "
                   "links that are up joins them",
                   src, (unsigned long long)table->host_hash[src], name_or_dash(table, src), dst,
                   (unsigned long long)table->host_hash[dst], name_or_dash(table, dst));

  memset(&p, 0, sizeof(p));
  p.hosts[0] = src;
  if (hops == 0) {
    *path_out = p;
    return ncclSuccess;
  }
  for (int u = 0; u < table->n_hosts; u++) {
    if ((table->pair_count[src][u] > 0) && (table->hops[u][dst] == hops - 1))
      first[n_first++] = u;
  }
  assert(n_first > 0);
  p.n_choices = n_first;
  p.n_hops = hops;
  p.hosts[1] = first[conn_id % (uint64_t)n_first];
  for (int i = 1; i < hops; i++)
    p.hosts[i + 1] = table->next[p.hosts[i]][dst];
  assert(p.hosts[hops] == dst);

  /* Parallel links: a selector independent of the first-hop choice, so that
   * connections that share a direction still spread over the cables. */
  link_sel = conn_id / (uint64_t)n_first;
  for (int i = 0; i < hops; i++) {
    int a = p.hosts[i];
    int b = p.hosts[i + 1];
    int count = table->pair_count[a][b];

    assert(count > 0);
    p.links[i] = table->pair_links[table->pair_first[a][b] + (int)(link_sel % (uint64_t)count)];
  }
  *path_out = p;
  return ncclSuccess;
}

ncclResult_t mc_mesh_route_path(const struct mc_mesh_route_table *table, int src, int dst,
                                struct mc_mesh_path *path_out)
{
  return mc_mesh_route_pick(table, src, dst, 0, path_out);
}

bool mc_mesh_route_find_unreachable(const struct mc_mesh_route_table *table, int *src_out,
                                    int *dst_out)
{
  for (int s = 0; s < table->n_hosts; s++) {
    for (int d = 0; d < table->n_hosts; d++) {
      if (table->hops[s][d] < 0) {
        *src_out = s;
        *dst_out = d;
        return true;
      }
    }
  }
  return false;
}

void mc_mesh_route_unreachable_str(const struct mc_mesh_graph *graph, int src, int dst, char *buf,
                                   size_t buf_bytes)
{
  int n_reached = 0;
  int hops[MC_MESH_MAX_HOSTS];
  int reached[MC_MESH_MAX_HOSTS];
  char a[128];
  char b[128];
  char set[256];

  mc_mesh_graph_hops_from(graph, src, hops);
  for (int h = 0; h < graph->n_hosts; h++) {
    if (hops[h] >= 0)
      reached[n_reached++] = h;
  }
  mc_mesh_graph_host_str(graph, src, a, sizeof(a));
  mc_mesh_graph_host_str(graph, dst, b, sizeof(b));
  mc_str_int_ranges(reached, n_reached, set, sizeof(set));
  snprintf(buf, buf_bytes,
           "%s cannot reach %s: host %d reaches host%s %s only over links that are up; check "
           "the cables and the addresses of each link's subnet",
           a, b, src, (n_reached == 1) ? "" : "s", set);
}
