/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a Mesh failure report blames (src/net/mesh/mesh_blame.c), from views
 * built by hand, without sockets: a relayed route's cables described while
 * up, the cable the link state no longer has named (not the first hop), a
 * direct connection's own cable among parallel ones, and hosts named as the
 * communicator numbers them.
 */
#include "mc_test.h"

#include "core/check.h"
#include "mc_mesh_fixture.h"
#include "net/mesh/mesh_int.h"
#include "net/net.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

/* A view of hosts h[0..n) (no discovery table: hosts are named by hash, or
 * by the communicator's names in ctx), and one with the link a-b down. */
static struct mc_net_mesh_view *view_of(const struct mc_mesh_host *h, int n, int down_a, int down_b)
{
  struct mc_net_mesh_view *v = NULL;

  MC_T_OK(mc_calloc(&v, 1));
  v->graph = mt_graph(h, n);
  if (down_a >= 0)
    MC_T_OK(mc_mesh_graph_link_set_down(v->graph, mt_link(v->graph, down_a, down_b)));
  MC_T_OK(mc_mesh_route_table_create(v->graph, &v->routes));
  v->self = 0;
  return v;
}

static void view_free(struct mc_net_mesh_view *v)
{
  mc_mesh_route_table_destroy(v->routes);
  mc_mesh_graph_destroy(v->graph);
  free(v);
}

/* Line A-B-C-D, a connection from A to D: relayed over three cables. The
 * B-C cable goes down: that one is blamed, not A's own cable to B. */
static void relayed_route_blames_the_cable_that_failed(void)
{
  struct mc_mesh_host h[4];
  int n = mt_line4(h);
  struct mc_net_mesh_ctx *ctx = NULL;
  struct mc_net_mesh_view *before;
  struct mc_net_mesh_view *after;
  struct mc_net_mesh_route_desc *d = NULL;

  MC_T_OK(mc_calloc(&ctx, 1));
  MC_T_OK(mc_calloc(&d, 1));
  before = view_of(h, n, -1, -1);
  after = view_of(h, n, 1, 2);
  MC_T_TRUE(mc_net_mesh_route_describe(ctx, before, h[0].host_hash, h[3].host_hash, 7, NULL, d));
  MC_T_EQ_INT(d->n_hops, 3);
  MC_T_EQ_STR(d->cables[0], "host 00000000000000a0 eth1 192.168.100.1 - host 00000000000000b1 "
                            "eth1 192.168.100.2 (subnet 192.168.100.0/24)");
  MC_T_EQ_STR(d->cables[1], "host 00000000000000b1 eth2 192.168.101.1 - host 00000000000000c2 "
                            "eth1 192.168.101.2 (subnet 192.168.101.0/24)");
  MC_T_EQ_INT(mc_net_mesh_route_broken_hop(before, d), -1);
  MC_T_EQ_INT(mc_net_mesh_route_broken_hop(after, d), 1);
  /* The other way round, as the receiving end describes it. */
  MC_T_TRUE(mc_net_mesh_route_describe(ctx, before, h[3].host_hash, h[0].host_hash, 7, NULL, d));
  MC_T_EQ_INT(mc_net_mesh_route_broken_hop(after, d), 1);
  MC_T_CONTAINS(d->cables[1], "host 00000000000000c2 eth1 192.168.101.2 - host 00000000000000b1");
  /* No route on a view that no longer joins them. */
  MC_T_TRUE(!mc_net_mesh_route_describe(ctx, after, h[0].host_hash, h[3].host_hash, 7, NULL, d));
  MC_T_TRUE(!mc_net_mesh_route_describe(ctx, NULL, h[0].host_hash, h[3].host_hash, 7, NULL, d));
  view_free(before);
  view_free(after);
  free(d);
  free(ctx);
}

/* With the communicator's hosts, a host is "host K (name, ranks R)"; a host
 * the view lost entirely is a broken hop too. */
static void hosts_named_as_the_communicator_numbers_them(void)
{
  struct mc_mesh_host h[4];
  int n = mt_line4(h);
  struct mc_net_host_name names[4];
  struct mc_net_mesh_ctx *ctx = NULL;
  struct mc_net_mesh_view *v;
  struct mc_net_mesh_view *three;
  struct mc_net_mesh_route_desc *d = NULL;
  char buf[MC_NET_MESH_HOST_TEXT_BYTES];

  MC_T_OK(mc_calloc(&ctx, 1));
  MC_T_OK(mc_calloc(&d, 1));
  for (int i = 0; i < 4; i++) {
    names[i].host_hash = h[i].host_hash;
    names[i].index = 3 - i;
    snprintf(names[i].ranks, sizeof(names[i].ranks), "ranks %d-%d", 2 * (3 - i), 2 * (3 - i) + 1);
  }
  ctx->host_names = names;
  ctx->n_host_names = 4;
  v = view_of(h, n, -1, -1);
  mc_net_mesh_host_label(ctx, v, h[1].host_hash, buf, sizeof(buf));
  MC_T_EQ_STR(buf, "host 2 (00000000000000b1, ranks 4-5)");
  mc_net_mesh_host_label(ctx, v, 0x1234, buf, sizeof(buf));
  MC_T_EQ_STR(buf, "host 0000000000001234");
  MC_T_TRUE(mc_net_mesh_route_describe(ctx, v, h[0].host_hash, h[2].host_hash, 1, NULL, d));
  MC_T_EQ_STR(d->path, "host 3 (00000000000000a0, ranks 6-7) > host 2 (00000000000000b1, "
                       "ranks 4-5) > host 1 (00000000000000c2, ranks 2-3)");
  three = view_of(h, 2, -1, -1); /* C and D gone */
  MC_T_EQ_INT(mc_net_mesh_route_broken_hop(three, d), 1);
  view_free(v);
  view_free(three);
  free(d);
  ctx->host_names = NULL;
  free(ctx);
}

/* Two cables between A and B: a direct connection names the one its NIC is on. */
static void direct_connection_names_its_own_cable(void)
{
  struct mc_mesh_host h[2];
  struct mc_net_mesh_ctx *ctx = NULL;
  struct mc_net_mesh_view *v;
  struct mc_net_mesh_route_desc *d = NULL;
  union mc_sockaddr local;

  MC_T_OK(mc_calloc(&ctx, 1));
  MC_T_OK(mc_calloc(&d, 1));
  mt_letter(&h[0], 0);
  mt_letter(&h[1], 1);
  mt_addr(&h[0], "eth1", "10.0.1.1", 24, MT_FAST);
  mt_addr(&h[0], "eth2", "10.0.2.1", 24, MT_FAST);
  mt_addr(&h[1], "eth1", "10.0.1.2", 24, MT_FAST);
  mt_addr(&h[1], "eth2", "10.0.2.2", 24, MT_FAST);
  MC_T_OK(mc_calloc(&v, 1));
  v->graph = mt_graph(h, 2);
  MC_T_OK(mc_mesh_route_table_create(v->graph, &v->routes));
  memset(&local, 0, sizeof(local));
  local.sin.sin_family = AF_INET;
  MC_T_EQ_INT(inet_pton(AF_INET, "10.0.2.1", &local.sin.sin_addr), 1);
  MC_T_TRUE(mc_net_mesh_route_describe(ctx, v, h[1].host_hash, h[0].host_hash, 3, &local, d));
  MC_T_EQ_INT(d->n_hops, 1);
  MC_T_EQ_STR(d->cables[0], "host 00000000000000b1 eth2 10.0.2.2 - host 00000000000000a0 eth2 "
                            "10.0.2.1 (subnet 10.0.2.0/24)");
  view_free(v);
  free(d);
  free(ctx);
}

MC_T_MAIN(relayed_route_blames_the_cable_that_failed, hosts_named_as_the_communicator_numbers_them,
          direct_connection_names_its_own_cable)
