/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rings that follow the cables: the Mesh net's node_orders op (net.h;
 * meshccl's extension of the graph stage). On three hosts or more NCCL's
 * Postset would cross the hosts in node index order (rank order), so on a
 * mesh a ring hop could join two hosts with no cable between them and every
 * byte of that hop would be relayed. Instead every rank describes its host's
 * mesh NICs, the descriptions are allgathered (through the communicator's
 * bootstrap, args->allgather), and every rank builds the same mesh graph
 * (mesh_graph.h) and the same rings over it (mc_mesh_rings_compute: cycles
 * over direct links when the cabling has one, a triangle's two directions,
 * a ring of cables and its reverse). Those host orders become Postset's
 * node orders (struct mc_topo_connect_opts, through init_net.c), channel c
 * taking ring c % n_rings.
 *
 * Input: the rank, its host, Postset's nodes by host. Output: the node
 * orders, or none (NCCL's order) when the mesh cannot say anything (then
 * one INFO line says why).
 */
#include "mesh_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "log.h"
#include "net/mesh/mesh.h"
#include "params.h"
#include "utils.h"

/* Names every host of g as the Mesh net's lines do: "host K (name, ranks R)",
 * K its node index in the communicator. */
static void label_hosts(const struct mc_net_orders_args *args, struct mc_mesh_graph *g)
{
  for (int k = 0; k < args->n_hosts; k++) {
    const struct mc_net_host_name *hn = &args->hosts[k];
    char label[MC_MESH_LABEL_BYTES];

    for (int h = 0; h < g->n_hosts; h++) {
      if (g->hosts[h].host_hash != hn->host_hash)
        continue;
      snprintf(label, sizeof(label), "host %d (%.64s, %s)", hn->index, g->hosts[h].name, hn->ranks);
      mc_mesh_graph_set_label(g, h, label);
    }
  }
}

static void log_rings(int rank, const struct mc_mesh_graph *g, const struct mc_mesh_rings *rings)
{
  char *text = NULL;
  size_t bytes = 0;
  FILE *f;

  if ((rank != 0) || !mc_log_enabled(MC_LOG_INFO, MC_SUB_NET))
    return;
  f = open_memstream(&text, &bytes);
  if (f == NULL)
    return;
  (void)mc_mesh_graph_print(g, f);
  fclose(f);
  for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n"))
    MC_INFO(MC_SUB_NET, "Mesh: %s", line);
  free(text);
  for (int i = 0; i < rings->n_rings; i++) {
    const struct mc_mesh_ring *ring = &rings->rings[i];
    char line[1024];
    size_t used = 0;
    int links[MC_MESH_MAX_HOSTS];

    line[0] = '\0';
    if (mc_mesh_ring_links(g, rings, i, links) != ncclSuccess)
      continue;
    for (int h = 0; h < rings->n_hosts; h++) {
      char name[MC_MESH_HOST_NAME_BYTES + 32];
      const struct mc_mesh_link *l = (links[h] >= 0) ? &g->links[links[h]] : NULL;
      int from = ring->hosts[h];

      mc_mesh_graph_host_str(g, from, name, sizeof(name));
      if (l == NULL)
        mc_str_appendf(line, sizeof(line), &used, "%s =relay=> ", name);
      else
        mc_str_appendf(line, sizeof(line), &used, "%s -%s-> ", name,
                       g->hosts[from].addrs[l->addr[(l->host[0] == from) ? 0 : 1]].if_name);
    }
    MC_INFO(MC_SUB_NET | MC_SUB_GRAPH, "Mesh ring %d (%s, %d relayed hops): %s(back to start)", i,
            mc_mesh_rings_kind_str(rings->kind), ring->n_relayed, line);
  }
}

ncclResult_t mc_net_mesh_node_orders(const struct mc_net_orders_args *args, int *n_orders_out,
                                     int **orders_out)
{
  struct mc_mesh_host *hosts = NULL;
  struct mc_mesh_host *uniq = NULL;
  struct mc_mesh_graph *g = NULL;
  struct mc_mesh_rings rings;
  int *order = NULL;
  int *orders = NULL;
  int n_uniq = 0;
  int n_nodes = args->n_nodes;
  ncclResult_t res = ncclSuccess;

  *n_orders_out = 0;
  *orders_out = NULL;
  MC_CHECK_GOTO(mc_calloc(&hosts, (size_t)args->n_ranks), res, out);
  MC_CHECK_GOTO(
      mc_net_mesh_local_host(args->host_hash, args->host, args->mgmt_ifname, &hosts[args->rank]),
      res, out);
  MC_CHECK_GOTO(args->allgather(args->allgather_arg, hosts, sizeof(*hosts)), res, out);
  /* One description per host: its first rank's. */
  MC_CHECK_GOTO(mc_calloc(&uniq, (size_t)args->n_ranks), res, out);
  n_uniq = mc_net_mesh_hosts_unique(hosts, args->n_ranks, uniq);
  if (n_uniq != n_nodes) {
    MC_INFO(MC_SUB_NET | MC_SUB_GRAPH,
            "Mesh: %d hosts describe their NICs but the rings have %d nodes: NCCL's ring order",
            n_uniq, n_nodes);
    goto out;
  }
  res = mc_mesh_graph_create(uniq, n_uniq, (int)mc_param_int(MC_P_MESH_FAST_MBPS), &g);
  if (res != ncclSuccess)
    goto out;
  MC_CHECK_GOTO(mc_calloc(&order, (size_t)n_nodes), res, out);
  for (int k = 0; k < n_nodes; k++)
    MC_CHECK_GOTO(mc_mesh_graph_host_find(g, args->node_host_hash[k], &order[k]), res, out);
  label_hosts(args, g);
  res = mc_mesh_rings_compute(g, order, n_nodes, MC_MESH_MAX_RINGS, &rings);
  if (res != ncclSuccess)
    goto out;
  log_rings(args->rank, g, &rings);
  MC_CHECK_GOTO(mc_calloc(&orders, (size_t)rings.n_rings * (size_t)n_nodes), res, out);
  for (int i = 0; i < rings.n_rings; i++) {
    for (int p = 0; p < n_nodes; p++) {
      int node = 0;
      while ((node < n_nodes) && (order[node] != rings.rings[i].hosts[p]))
        node++;
      orders[i * n_nodes + p] = node;
    }
  }
  *n_orders_out = rings.n_rings;
  *orders_out = orders;
  orders = NULL;
out:
  mc_mesh_graph_destroy(g);
  free(orders);
  free(order);
  free(uniq);
  free(hosts);
  return res;
}
