/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the Mesh net sees from this host (meshccl-topo --mesh): it runs the
 * net for a while so that discovery hears the neighbours, then prints this
 * host, its mesh NICs with their lanes and the neighbour heard on each, and
 * the hosts, links, shape and routes that discovery learned (mesh_graph.h's
 * text, this host marked); when no neighbour was heard, what to do.
 */
#include "net/mesh/mesh.h"
#include "mesh_int.h"

#include "check.h"
#include "log.h"
#include "params.h"
#include "utils.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define EXPLAIN_POLL_MS 50

/* What to do when no neighbour was heard: discovery only hears hosts whose
 * Mesh net runs at the same time, over the cabled interfaces. */
static void explain_alone(FILE *out, const struct mc_net_mesh_ctx *ctx, int wait_ms)
{
  fprintf(out,
          "no neighbour heard on any mesh NIC in %d ms: discovery hears only hosts whose Mesh "
          "net runs at the same time. Run meshccl-topo --mesh (or the job) on the other hosts "
          "too, within %d ms of this one (or raise --mesh-wait); check that each cable's two "
          "ends are up and on one subnet (the NICs above), that UDP port %d "
          "(MESHCCL_MESH_PORT) is open on them, that MESHCCL_MESH_IFNAME selects the cabled "
          "interfaces on every host, and that every host has the same MESHCCL_SECRET, or "
          "none%s\n",
          wait_ms, wait_ms, (int)mc_param_int(MC_P_MESH_PORT),
          (ctx->n_nics == 0) ? " (this host has no mesh NIC)" : "");
}

ncclResult_t mc_net_mesh_explain(FILE *out, int wait_ms)
{
  struct mc_net_init_args args = {0};
  struct mc_net_mesh_ctx *ctx = NULL;
  struct mc_net_mesh_view *v = NULL;
  struct mc_mesh_graph *g = NULL;
  struct mc_deadline dl = mc_deadline_in_ms(wait_ms);
  char self[MC_NET_MESH_HOST_TEXT_BYTES];
  int n_heard = 0;
  ncclResult_t res = ncclSuccess;

  MC_CHECK(mc_net_mesh_ops.init(&args, (void **)&ctx));
  /* Discovery runs in the net's handshake thread; give it the time asked. */
  while (!mc_deadline_passed(dl)) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = EXPLAIN_POLL_MS * 1000000L};
    nanosleep(&ts, NULL);
  }
  v = mc_net_mesh_view_get(ctx);
  mc_net_mesh_host_label(ctx, v, ctx->host_hash, self, sizeof(self));
  fprintf(out, "this host: %s\n", self);
  fprintf(out, "mesh NICs of this host (%s):\n",
          ctx->is_authenticated ? "MESHCCL_SECRET set: neighbours of this job only"
                                : "no MESHCCL_SECRET: neighbours running without one");
  for (int i = 0; i < ctx->n_nics; i++) {
    char a[MC_SOCKADDR_STRLEN];
    char s[MC_SOCKADDR_STRLEN];
    char peer[MC_NET_MESH_HOST_TEXT_BYTES];
    const struct mc_net_mesh_nic *n = &ctx->nics[i];
    uint64_t heard = mc_net_mesh_nic_neighbour(ctx, i);

    if (heard != 0)
      mc_net_mesh_host_label(ctx, v, heard, peer, sizeof(peer));
    n_heard += (heard != 0);
    fprintf(out, "  %-12s %-28s subnet %-20s %6d Mb/s  lane %-4s%s  %s%s\n", n->name,
            mc_sockaddr_str(&n->addr, a, sizeof(a)),
            mc_net_mesh_subnet_str(&n->addr, n->prefix_len, s, sizeof(s)), n->speed_mbps,
            mc_net_mesh_lane_str(n->lane), n->carries_data ? "" : "  (no collective data)",
            (heard != 0) ? "neighbour " : "no neighbour heard", (heard != 0) ? peer : "");
  }
  if ((v == NULL) || (v->graph == NULL)) {
    fprintf(out, "no mesh learned in %d ms\n", wait_ms);
  } else {
    fprintf(out, "what discovery learned in %d ms:\n", wait_ms);
    /* A copy, so that this host can be marked without touching the shared view. */
    res = mc_calloc(&g, 1);
    if (res == ncclSuccess) {
      char mark[MC_MESH_LABEL_BYTES];

      *g = *v->graph;
      snprintf(mark, sizeof(mark), "%.140s <- this host", self);
      mc_mesh_graph_set_label(g, v->self, mark);
      res = mc_mesh_graph_print(g, out);
      free(g);
    }
  }
  if ((n_heard == 0) && ((v == NULL) || (v->graph == NULL) || (v->graph->n_hosts <= 1)))
    explain_alone(out, ctx, wait_ms);
  mc_net_mesh_view_put(v);
  (void)mc_net_mesh_ops.finalize(ctx);
  return res;
}
