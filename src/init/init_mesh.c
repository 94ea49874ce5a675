/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rings that follow the cables (meshccl's extension of the graph stage).
 * When the communicator's net is the Mesh net and it spans three hosts or
 * more, NCCL's Postset would cross the hosts in node index order (rank
 * order), so on a mesh a ring hop could join two hosts with no cable
 * between them and every byte of that hop would be relayed. Instead every
 * rank describes its host's mesh NICs, the descriptions are allgathered over
 * the bootstrap, and every rank builds the same mesh graph (mesh_graph.h)
 * and the same rings over it (mc_mesh_rings_compute: cycles over direct
 * links when the cabling has one, a triangle's two directions, a ring of
 * cables and its reverse). Those host orders become Postset's node orders
 * (struct mc_topo_connect_opts), channel c taking ring c % n_rings.
 *
 * Input: comm (peers, bootstrap, net), Preset output of every rank (for
 * Postset's node numbering). Output: the node orders, or none (NCCL's
 * order) when the net is not the mesh, there are fewer than 3 nodes, or
 * the mesh cannot say anything (then one INFO line says why).
 */
#include "comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "log.h"
#include "net/mesh/mesh.h"
#include "params.h"
#include "utils.h"

/* Postset's node numbering (topo_connect.c find_nodes): nodes in the order
 * their rings' first ranks appear in rank order. node_first_out[k] is a
 * rank of node k. Returns the number of nodes. */
static int postset_nodes(const struct mc_topo_ranks *all, int n_ranks, int *node_first_out)
{
  int n_nodes = 0;

  for (int r = 0; r < n_ranks; r++) {
    int first = all[r].ring_recv[0];
    int k = 0;
    while ((k < n_nodes) && (node_first_out[k] != first))
      k++;
    if (k == n_nodes)
      node_first_out[n_nodes++] = first;
  }
  return n_nodes;
}

/* Names every host of g as the Mesh net's lines do: "host K (name, ranks R)",
 * K its node index in the communicator. */
static void label_hosts(const struct ncclComm *comm, struct mc_mesh_graph *g)
{
  for (int k = 0; k < comm->nodes.n_nodes; k++) {
    uint64_t hash = comm->peers[comm->nodes.node_first_rank[k]].host_hash;
    char ranks[64];
    char label[MC_MESH_LABEL_BYTES];

    for (int h = 0; h < g->n_hosts; h++) {
      if (g->hosts[h].host_hash != hash)
        continue;
      mc_comm_node_ranks_str(comm, k, ranks, sizeof(ranks));
      snprintf(label, sizeof(label), "host %d (%.64s, %s)", k, g->hosts[h].name, ranks);
      mc_mesh_graph_set_label(g, h, label);
    }
  }
}

static void log_rings(const struct ncclComm *comm, const struct mc_mesh_graph *g,
                      const struct mc_mesh_rings *rings)
{
  char *text = NULL;
  size_t bytes = 0;
  FILE *f;

  if ((comm->rank != 0) || !mc_log_enabled(MC_LOG_INFO, MC_SUB_NET))
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

ncclResult_t mc_comm_mesh_node_orders(struct ncclComm *comm, const struct mc_topo_ranks *all,
                                      int *n_orders_out, int **orders_out)
{
  struct mc_mesh_host *hosts = NULL;
  struct mc_mesh_host *uniq = NULL;
  struct mc_mesh_graph *g = NULL;
  struct mc_mesh_rings rings;
  int *node_first = NULL;
  int *order = NULL;
  int *orders = NULL;
  int n_uniq = 0;
  int n_nodes;
  ncclResult_t res = ncclSuccess;

  *n_orders_out = 0;
  *orders_out = NULL;
  MC_CHECK(mc_calloc(&node_first, (size_t)comm->n_ranks));
  n_nodes = postset_nodes(all, comm->n_ranks, node_first);
  /* Two hosts: every order is the same ring. */
  if (n_nodes < 3)
    goto out;
  MC_CHECK_GOTO(mc_calloc(&hosts, (size_t)comm->n_ranks), res, out);
  /* Named as the Mesh net's discovery names it: NCCL_HOSTID, else the host name. */
  MC_CHECK_GOTO(mc_net_mesh_local_host(
                    comm->peers[comm->rank].host_hash,
                    ((mc_param_str(MC_P_HOSTID) != NULL) && (mc_param_str(MC_P_HOSTID)[0] != '\0'))
                        ? mc_param_str(MC_P_HOSTID)
                        : comm->peers[comm->rank].host,
                    comm->peers[comm->rank].if_name, &hosts[comm->rank]),
                res, out);
  MC_CHECK_GOTO(mc_boot_allgather(comm->boot, hosts, sizeof(*hosts)), res, out);
  /* One description per host: its first rank's. */
  MC_CHECK_GOTO(mc_calloc(&uniq, (size_t)comm->n_ranks), res, out);
  for (int r = 0; r < comm->n_ranks; r++) {
    int u = 0;
    while ((u < n_uniq) && (uniq[u].host_hash != hosts[r].host_hash))
      u++;
    if (u == n_uniq)
      uniq[n_uniq++] = hosts[r];
  }
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
    MC_CHECK_GOTO(mc_mesh_graph_host_find(g, comm->peers[node_first[k]].host_hash, &order[k]), res,
                  out);
  label_hosts(comm, g);
  res = mc_mesh_rings_compute(g, order, n_nodes, MC_MESH_MAX_RINGS, &rings);
  if (res != ncclSuccess)
    goto out;
  log_rings(comm, g, &rings);
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
  free(node_first);
  return res;
}
