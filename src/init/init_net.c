/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Init stage "net": the communicator's net, chosen and initialised before the
 * topology stage, as NCCL 2.30's commAlloc calls ncclNetInit (src/init.cc,
 * src/plugin/net.cc) before ncclTopoGetSystem imports the net's devices. The
 * NET transport uses this net and this context (tp_init); the context is
 * finalized once, when the communicator is freed (destroy or abort, after a
 * failed init too).
 *
 * Every communicator initialises its net, single-host ones included, as in
 * NCCL, where a net that cannot initialise fails ncclNetInit ("Failed to
 * initialize any NET plugin") and with it the communicator's init. Net
 * plugins are probed when loaded (net/external/), so a plugin that cannot
 * initialise is passed over there, as NCCL passes to the next net; a net
 * chosen here that then fails (the socket net without a usable interface,
 * a plugin whose per-communicator init fails) fails the init with the net's
 * reason. meshccl runs this stage after the peer exchange rather than
 * before the bootstrap so that the failure reaches every rank at once
 * through the bootstrap instead of as a timeout.
 *
 * Also the graph stage's call into the net for Postset's node orders
 * (mc_comm_net_node_orders): the net's node_orders op, given Postset's nodes
 * and the bootstrap's allgather.
 */
#include "init_net.h"

#include "comm.h"

#include "check.h"
#include "crypto.h"
#include "log.h"
#include "net/mesh/mesh.h"
#include "net/net.h"
#include "params.h"
#include "utils.h"

#include <stdlib.h>

#define NET_SECRET_LABEL "meshccl net secret v1"

_Static_assert(sizeof(((struct ncclComm *)0)->net.secret) == MC_NET_SECRET_BYTES,
               "the net secret is MC_NET_SECRET_BYTES long");
_Static_assert(MC_NET_SECRET_BYTES == MC_SHA256_BYTES, "the net secret is one HMAC-SHA256");

/* meshccl's automatic choice of the Mesh net (MESHCCL_MESH_AUTO): when the
 * default choice is a fallback net (is_fallback: the socket net) and the hosts are cabled as a
 * direct-connect mesh, the socket net cannot reach every peer through one
 * interface, so the Mesh net takes over. Collective over the bootstrap:
 * every rank takes part and reaches the same answer from the same data. */
static ncclResult_t auto_mesh(struct ncclComm *comm, const struct mc_net_ops **net)
{
  struct mc_mesh_host *hosts = NULL;
  struct mc_mesh_host *uniq = NULL;
  int n_uniq = 0;
  char why[256];
  ncclResult_t res;

  if (!(*net)->is_fallback || (mc_param_str(MC_P_NET) != NULL) ||
      (mc_param_int(MC_P_MESH_AUTO) == 0) || (comm->nodes.n_nodes < 3))
    return ncclSuccess;
  MC_CHECK(mc_calloc(&hosts, (size_t)comm->n_ranks));
  MC_CHECK_GOTO(mc_calloc(&uniq, (size_t)comm->n_ranks), res, out);
  /* A host whose NICs cannot be listed offers none: the others decide. */
  if (mc_net_mesh_local_host(comm->peers[comm->rank].host_hash, comm->peers[comm->rank].host,
                             comm->peers[comm->rank].if_name, &hosts[comm->rank]) != ncclSuccess)
    hosts[comm->rank] = (struct mc_mesh_host){.host_hash = comm->peers[comm->rank].host_hash};
  MC_CHECK_GOTO(mc_boot_allgather(comm->bootstrap.boot, hosts, sizeof(*hosts)), res, out);
  n_uniq = mc_net_mesh_hosts_unique(hosts, comm->n_ranks, uniq);
  if (mc_net_mesh_is_direct(uniq, n_uniq, why, sizeof(why))) {
    MC_CHECK_GOTO(mc_net_find_builtin("Mesh", net), res, out);
    MC_INFO(MC_SUB_INIT | MC_SUB_NET,
            "NET: %s: using network Mesh (MESHCCL_MESH_AUTO=0 or NCCL_NET=Socket to override)",
            why);
  } else {
    MC_INFO(MC_SUB_NET, "NET: not a direct-connect mesh (%s): network Socket", why);
  }
  res = ncclSuccess;
out:
  free(uniq);
  free(hosts);
  return res;
}

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

/* The communicator's hosts as the net's messages name them: host_hash is
 * the peer info's less `less` (the net's own host hash is the peer info's
 * without the communicator's hash; the mesh graph's node orders use the
 * peer info's, less 0). */
static ncclResult_t host_names(const struct ncclComm *comm, uint64_t less,
                               struct mc_net_host_name **names_out)
{
  struct mc_net_host_name *names = NULL;

  MC_CHECK(mc_calloc(&names, (size_t)comm->nodes.n_nodes));
  for (int k = 0; k < comm->nodes.n_nodes; k++) {
    names[k].host_hash = comm->peers[comm->nodes.node_first_rank[k]].host_hash - less;
    names[k].index = k;
    mc_comm_node_ranks_str(comm, k, names[k].ranks, sizeof(names[k].ranks));
  }
  *names_out = names;
  return ncclSuccess;
}

static ncclResult_t orders_allgather(void *arg, void *data, size_t bytes)
{
  struct ncclComm *comm = arg;

  return mc_boot_allgather(comm->bootstrap.boot, data, bytes);
}

ncclResult_t mc_comm_net_node_orders(struct ncclComm *comm, const struct mc_topo_ranks *all,
                                     int *n_orders_out, int **orders_out)
{
  const char *hostid = mc_param_str(MC_P_HOSTID);
  /* Named as the Mesh net's discovery names it: NCCL_HOSTID, else the host name. */
  struct mc_net_orders_args args = {
      .rank = comm->rank,
      .n_ranks = comm->n_ranks,
      .host_hash = comm->peers[comm->rank].host_hash,
      .host = ((hostid != NULL) && (hostid[0] != '\0')) ? hostid : comm->peers[comm->rank].host,
      .mgmt_ifname = comm->peers[comm->rank].if_name,
      .allgather = orders_allgather,
      .allgather_arg = comm};
  struct mc_net_host_name *names = NULL;
  uint64_t *node_host_hash = NULL;
  int *node_first = NULL;
  ncclResult_t res = ncclSuccess;

  *n_orders_out = 0;
  *orders_out = NULL;
  MC_CHECK(mc_calloc(&node_first, (size_t)comm->n_ranks));
  args.n_nodes = postset_nodes(all, comm->n_ranks, node_first);
  /* Two hosts: every order is the same ring. */
  if (args.n_nodes < 3)
    goto out;
  MC_CHECK_GOTO(mc_calloc(&node_host_hash, (size_t)args.n_nodes), res, out);
  for (int k = 0; k < args.n_nodes; k++)
    node_host_hash[k] = comm->peers[node_first[k]].host_hash;
  args.node_host_hash = node_host_hash;
  MC_CHECK_GOTO(host_names(comm, 0, &names), res, out);
  args.hosts = names;
  args.n_hosts = comm->nodes.n_nodes;
  res = comm->net.ops->node_orders(&args, n_orders_out, orders_out);
out:
  free(names);
  free(node_host_hash);
  free(node_first);
  return res;
}

void mc_comm_net_secret(const ncclUniqueId *id, uint8_t secret_out[MC_NET_SECRET_BYTES])
{
  /* The nets authenticate connections with a secret only the ranks know:
   * an HMAC keyed with the whole unique id, so it depends on the id's
   * bootstrap secret (random for ncclGetUniqueId; from MESHCCL_SECRET with
   * NCCL_COMM_ID, or, without it, from the address that anyone who knows it
   * can derive too; src/bootstrap/boot_uid.c). */
  mc_hmac_sha256(id, sizeof(*id), NET_SECRET_LABEL, sizeof(NET_SECRET_LABEL) - 1, secret_out);
}

void mc_comm_node_ranks_str(const struct ncclComm *comm, int k, char *buf, size_t bytes)
{
  size_t used = 0;
  int n = comm->nodes.node_n_ranks[k];
  int first = -1;
  int prev = -2;

  buf[0] = '\0';
  mc_str_appendf(buf, bytes, &used, "%s ", (n == 1) ? "rank" : "ranks");
  for (int r = 0; r <= comm->n_ranks; r++) {
    bool in = (r < comm->n_ranks) && (comm->nodes.rank_to_node[r] == k);

    if (in && (r == prev + 1)) {
      prev = r;
      continue;
    }
    if (first >= 0)
      mc_str_appendf(buf, bytes, &used, "%s%d", (buf[used - 1] == ' ') ? "" : ",", first);
    if ((first >= 0) && (prev > first))
      mc_str_appendf(buf, bytes, &used, "-%d", prev);
    first = in ? r : -1;
    prev = in ? r : -2;
  }
}

ncclResult_t mc_comm_stage_net(struct ncclComm *comm)
{
  const struct mc_net_ops *net = NULL;
  void *ctx = NULL;
  int n_devs = 0;
  ncclResult_t res;
  struct mc_net_init_args args = {.comm_id = comm->comm_hash,
                                  .secret = comm->net.secret,
                                  .abort_flag = &comm->life.abort_flag,
                                  .mgmt_ifname = comm->peers[comm->rank].if_name};

  struct mc_net_host_name *names = NULL;

  mc_comm_net_secret(&comm->id, comm->net.secret);
  MC_CHECK(mc_net_select(&net));
  MC_CHECK(auto_mesh(comm, &net));
  MC_CHECK(host_names(comm, comm->comm_hash, &names));
  args.hosts = names;
  args.n_hosts = comm->nodes.n_nodes;
  /* The net says what failed (the adapters name the plugin and its file). */
  res = net->init(&args, &ctx);
  free(names);
  if (res != ncclSuccess)
    return res;
  res = net->devices(ctx, &n_devs);
  if ((res == ncclSuccess) && (n_devs <= 0))
    res = MC_FAIL(ncclSystemError, "NET/%s: no network device", net->name);
  if (res != ncclSuccess) {
    (void)net->finalize(ctx);
    return res;
  }
  comm->net.ops = net;
  comm->net.ctx = ctx;
  comm->net.ndev = n_devs;
  return ncclSuccess;
}

void mc_comm_net_fini(struct ncclComm *comm)
{
  /* A proxy thread abandoned inside a plugin call may still use the
   * context (tp_net.c): it is left to it. */
  if ((comm->net.ops != NULL) && (comm->net.ctx != NULL) && !comm->data.tp.proxy_abandoned)
    (void)comm->net.ops->finalize(comm->net.ctx);
  comm->net.ctx = NULL;
  comm->net.ops = NULL;
  comm->net.ndev = 0;
}
