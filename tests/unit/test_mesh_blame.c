/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a Mesh failure report blames (src/net/mesh/mesh_blame.c), from views
 * built by hand, without sockets: a relayed route's cables described while
 * up, the cable the link state no longer has named (not the first hop), a
 * direct connection's own cable among parallel ones, or from the connection's
 * own ends before discovery describes it, which cable a lost connection's
 * report blames, and hosts named as the communicator numbers them.
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

/* Line A-B-C-D with every cable up (before) and with hosts down_a-down_b's
 * cable down (after), a context and a route description to fill. */
struct line4_case {
  struct mc_mesh_host h[4];
  struct mc_net_mesh_ctx *ctx;
  struct mc_net_mesh_view *before;
  struct mc_net_mesh_view *after;
  struct mc_net_mesh_route_desc *d;
};

static void line4_case_make(struct line4_case *c, int down_a, int down_b)
{
  int n = mt_line4(c->h);

  c->ctx = NULL;
  c->d = NULL;
  MC_T_OK(mc_calloc(&c->ctx, 1));
  MC_T_OK(mc_calloc(&c->d, 1));
  c->before = view_of(c->h, n, -1, -1);
  c->after = view_of(c->h, n, down_a, down_b);
}

static void line4_case_free(struct line4_case *c)
{
  view_free(c->before);
  view_free(c->after);
  free(c->d);
  free(c->ctx);
}

/* Line A-B-C-D, a connection from A to D: relayed over three cables. The
 * B-C cable goes down: that one is blamed, not A's own cable to B. */
static void relayed_route_blames_the_cable_that_failed(void)
{
  struct line4_case c;
  struct mc_mesh_host *h = c.h;
  struct mc_net_mesh_ctx *ctx;
  struct mc_net_mesh_view *before;
  struct mc_net_mesh_view *after;
  struct mc_net_mesh_route_desc *d;

  line4_case_make(&c, 1, 2);
  ctx = c.ctx;
  before = c.before;
  after = c.after;
  d = c.d;
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
  line4_case_free(&c);
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
  mt_pair2(h);
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

static void set_ip4(union mc_sockaddr *a, const char *ip)
{
  memset(a, 0, sizeof(*a));
  a->sin.sin_family = AF_INET;
  MC_T_EQ_INT(inet_pton(AF_INET, ip, &a->sin.sin_addr), 1);
}

/* Before discovery describes the route (no view, or a view without the
 * peer), a direct connection's cable comes from its own ends: this host's
 * NIC and the peer's address; the peer's interface is named once a view's
 * table has its record. Both directions, from the sender's end. */
static void direct_cable_from_the_connection_ends(void)
{
  struct mc_net_mesh_ctx *ctx = NULL;
  struct mc_net_mesh_view *v = NULL;
  struct mc_net_mesh_route_desc *d = NULL;
  struct mc_net_host_name names[2];
  struct mc_net_mesh_nic nic;
  union mc_sockaddr remote;
  uint64_t self = 0xa0;
  uint64_t peer = 0xb1;

  MC_T_OK(mc_calloc(&ctx, 1));
  MC_T_OK(mc_calloc(&d, 1));
  MC_T_OK(mc_calloc(&v, 1));
  ctx->host_hash = self;
  names[0].host_hash = peer;
  names[0].index = 0;
  snprintf(names[0].ranks, sizeof(names[0].ranks), "rank 0");
  names[1].host_hash = self;
  names[1].index = 1;
  snprintf(names[1].ranks, sizeof(names[1].ranks), "rank 1");
  ctx->host_names = names;
  ctx->n_host_names = 2;
  memset(&nic, 0, sizeof(nic));
  snprintf(nic.name, sizeof(nic.name), "eth2");
  set_ip4(&nic.addr, "10.0.2.1");
  nic.prefix_len = 24;
  set_ip4(&remote, "10.0.2.2");
  /* Sending, no view at all. */
  mc_net_mesh_route_direct(ctx, NULL, self, peer, &nic, &remote, d);
  MC_T_EQ_INT(d->n_hops, 1);
  MC_T_TRUE(d->hosts[0] == self);
  MC_T_TRUE(d->hosts[1] == peer);
  MC_T_TRUE(strncmp(d->cables[0], "host 1 (", 8) == 0);
  MC_T_CONTAINS(d->cables[0], ", rank 1) eth2 10.0.2.1 - host 0 (00000000000000b1, rank 0) "
                              "10.0.2.2 (subnet 10.0.2.0/24)");
  MC_T_CONTAINS(d->path, " > host 0 (00000000000000b1, rank 0)");
  /* Receiving, with a view whose table has the peer's record (a graph
   * that does not join them yet is not looked at). */
  v->table.n = 1;
  v->table.e[0].rec.host_hash = peer;
  snprintf(v->table.e[0].rec.name, sizeof(v->table.e[0].rec.name), "hb");
  v->table.e[0].rec.n_addrs = 1;
  set_ip4(&v->table.e[0].rec.addrs[0].addr, "10.0.2.2");
  v->table.e[0].rec.addrs[0].prefix_len = 24;
  snprintf(v->table.e[0].rec.addrs[0].if_name, sizeof(v->table.e[0].rec.addrs[0].if_name), "eth7");
  mc_net_mesh_route_direct(ctx, v, peer, self, &nic, &remote, d);
  MC_T_TRUE(d->hosts[0] == peer);
  MC_T_TRUE(strncmp(d->cables[0], "host 0 (hb, rank 0) eth7 10.0.2.2 - host 1 (", 44) == 0);
  MC_T_CONTAINS(d->cables[0], ", rank 1) eth2 10.0.2.1 (subnet 10.0.2.0/24)");
  /* A far host not known (0) is named by its address. */
  mc_net_mesh_route_direct(ctx, NULL, self, 0, &nic, &remote, d);
  MC_T_CONTAINS(d->cables[0],
                ", rank 1) eth2 10.0.2.1 - the host at 10.0.2.2 (subnet 10.0.2.0/24)");
  mc_net_mesh_route_direct(ctx, v, peer, self, &nic, &remote, d);
  /* Blamed when the connection is lost: the direct cable, even with no
   * link state saying it is down, unless the peer's process closed it. */
  MC_T_EQ_INT(mc_net_mesh_route_blame(NULL, d, false), 0);
  MC_T_EQ_INT(mc_net_mesh_route_blame(v, d, false), 0);
  MC_T_EQ_INT(mc_net_mesh_route_blame(NULL, d, true), -1);
  d->n_hops = 0; /* a relayed route discovery never described */
  MC_T_EQ_INT(mc_net_mesh_route_blame(NULL, d, false), -1);
  ctx->host_names = NULL;
  free(v);
  free(d);
  free(ctx);
}

/* A relayed route blames only a cable the link state shows down: a reset
 * with every cable up is the peer's (or unknown), not its first hop; a close
 * judged the peer's stays the peer's when the view changes afterwards. */
static void relayed_route_blames_no_cable_that_is_up(void)
{
  struct line4_case c;

  line4_case_make(&c, 2, 3);
  MC_T_TRUE(mc_net_mesh_route_describe(c.ctx, c.before, c.h[0].host_hash, c.h[3].host_hash, 7, NULL,
                                       c.d));
  MC_T_EQ_INT(mc_net_mesh_route_blame(c.before, c.d, false), -1);
  MC_T_EQ_INT(mc_net_mesh_route_blame(c.before, c.d, true), -1);
  MC_T_EQ_INT(mc_net_mesh_route_blame(c.after, c.d, false), 2);
  MC_T_EQ_INT(mc_net_mesh_route_blame(c.after, c.d, true), -1);
  line4_case_free(&c);
}

MC_T_MAIN(relayed_route_blames_the_cable_that_failed, hosts_named_as_the_communicator_numbers_them,
          direct_connection_names_its_own_cable, direct_cable_from_the_connection_ends,
          relayed_route_blames_no_cable_that_is_up)
