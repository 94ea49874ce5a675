/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the Mesh net sees from this host (meshccl-topo --mesh): it runs the
 * net for a while so that discovery hears the neighbours, then prints the
 * mesh NICs with their lanes, and the hosts, links, shape and routes that
 * discovery learned (mesh_graph.h's text).
 */
#include "net/mesh/mesh.h"
#include "mesh_int.h"

#include "check.h"
#include "log.h"
#include "utils.h"

#include <stdio.h>
#include <time.h>

#define EXPLAIN_POLL_MS 50

ncclResult_t mc_net_mesh_explain(FILE *out, int wait_ms)
{
  struct mc_net_init_args args = {0};
  struct mc_net_mesh_ctx *ctx = NULL;
  struct mc_net_mesh_view *v = NULL;
  struct mc_deadline dl = mc_deadline_in_ms(wait_ms);
  ncclResult_t res;

  MC_CHECK(mc_net_mesh_ops.init(&args, (void **)&ctx));
  fprintf(out, "mesh NICs of this host (%s):\n",
          ctx->is_authenticated ? "MESHCCL_SECRET set: neighbours of this job only"
                                : "no MESHCCL_SECRET: neighbours running without one");
  for (int i = 0; i < ctx->n_nics; i++) {
    char a[MC_SOCKADDR_STRLEN];
    char s[MC_SOCKADDR_STRLEN];
    const struct mc_net_mesh_nic *n = &ctx->nics[i];

    fprintf(out, "  %-12s %-28s subnet %-20s %6d Mb/s  lane %-4s%s\n", n->name,
            mc_sockaddr_str(&n->addr, a, sizeof(a)),
            mc_net_mesh_subnet_str(&n->addr, n->prefix_len, s, sizeof(s)), n->speed_mbps,
            mc_net_mesh_lane_str(n->lane), n->carries_data ? "" : "  (no collective data)");
  }
  /* Discovery runs in the net's handshake thread; give it the time asked. */
  while (!mc_deadline_passed(dl)) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = EXPLAIN_POLL_MS * 1000000L};
    nanosleep(&ts, NULL);
  }
  v = mc_net_mesh_view_get(ctx);
  if ((v == NULL) || (v->graph == NULL)) {
    fprintf(out, "no mesh learned in %d ms\n", wait_ms);
    res = ncclSuccess;
  } else {
    fprintf(out, "what discovery learned in %d ms:\n", wait_ms);
    res = mc_mesh_graph_print(v->graph, out);
  }
  mc_net_mesh_view_put(v);
  (void)mc_net_mesh_ops.finalize(ctx);
  return res;
}
