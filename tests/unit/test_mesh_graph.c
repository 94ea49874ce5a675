/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mesh graph (src/net/mesh/mesh_graph.c) without sockets: lanes by
 * speed, links found by subnet (IPv4 and IPv6, parallel cables, addresses
 * that link nothing), the canonical host order, the shape of every test
 * cabling, links going down and up, input errors and their messages, and the
 * printed text, identical whatever the order of the input hosts.
 */
#include "mc_test.h"

#include "mc_mesh_fixture.h"
#include "net/mesh/mesh_graph.h"

#include <stdlib.h>
#include <string.h>

static void lanes_by_speed(void)
{
  MC_T_EQ_INT(mc_mesh_lane_of(10000, 40000), MC_MESH_LANE_MGMT);
  MC_T_EQ_INT(mc_mesh_lane_of(25000, 40000), MC_MESH_LANE_MGMT);
  MC_T_EQ_INT(mc_mesh_lane_of(100000, 40000), MC_MESH_LANE_FAST);
  MC_T_EQ_INT(mc_mesh_lane_of(200000, 40000), MC_MESH_LANE_FAST);
  MC_T_EQ_INT(mc_mesh_lane_of(50000, 40000), MC_MESH_LANE_FAST);
  MC_T_EQ_INT(mc_mesh_lane_of(0, 40000), MC_MESH_LANE_UNKNOWN);
  MC_T_EQ_INT(mc_mesh_lane_of(-1, 40000), MC_MESH_LANE_UNKNOWN);
  /* the threshold is inclusive; 0 means the default; the caller may move it */
  MC_T_EQ_INT(mc_mesh_lane_of(40000, 40000), MC_MESH_LANE_FAST);
  MC_T_EQ_INT(mc_mesh_lane_of(39999, 40000), MC_MESH_LANE_MGMT);
  MC_T_EQ_INT(mc_mesh_lane_of(40000, 0), MC_MESH_LANE_FAST);
  MC_T_EQ_INT(mc_mesh_lane_of(39999, 0), MC_MESH_LANE_MGMT);
  MC_T_EQ_INT(mc_mesh_lane_of(50000, 100000), MC_MESH_LANE_MGMT);
  MC_T_EQ_INT(MC_MESH_FAST_THRESHOLD_MBPS, 40000);
  MC_T_EQ_STR(mc_mesh_lane_str(MC_MESH_LANE_UNKNOWN), "unknown");
  MC_T_EQ_STR(mc_mesh_lane_str(MC_MESH_LANE_MGMT), "mgmt");
  MC_T_EQ_STR(mc_mesh_lane_str(MC_MESH_LANE_FAST), "fast");
}

static void shape_names(void)
{
  MC_T_EQ_STR(mc_mesh_shape_str(MC_MESH_SHAPE_SINGLE), "single");
  MC_T_EQ_STR(mc_mesh_shape_str(MC_MESH_SHAPE_FULL), "full");
  MC_T_EQ_STR(mc_mesh_shape_str(MC_MESH_SHAPE_RING), "ring");
  MC_T_EQ_STR(mc_mesh_shape_str(MC_MESH_SHAPE_LINE), "line");
  MC_T_EQ_STR(mc_mesh_shape_str(MC_MESH_SHAPE_STAR), "star");
  MC_T_EQ_STR(mc_mesh_shape_str(MC_MESH_SHAPE_PARTIAL), "partial");
  MC_T_EQ_STR(mc_mesh_shape_str(MC_MESH_SHAPE_DISCONNECTED), "disconnected");
}

static void check_link(const struct mc_mesh_graph *g, int l, int a, int addr_a, int b, int addr_b,
                       const char *subnet)
{
  struct mc_mesh_addr net;
  char text[64];

  MC_T_EQ_INT(g->links[l].host[0], a);
  MC_T_EQ_INT(g->links[l].addr[0], addr_a);
  MC_T_EQ_INT(g->links[l].host[1], b);
  MC_T_EQ_INT(g->links[l].addr[1], addr_b);
  memset(&net, 0, sizeof(net));
  net.family = g->links[l].family;
  net.prefix_len = g->links[l].prefix_len;
  memcpy(net.bytes, g->links[l].subnet, sizeof(net.bytes));
  mc_mesh_addr_str(&net, text, sizeof(text));
  MC_T_EQ_STR(text, subnet);
  MC_T_TRUE(g->links[l].is_up);
}

static void triangle_links_and_shape(void)
{
  struct mc_mesh_host h[3];
  struct mc_mesh_graph *g = mt_graph(h, mt_triangle(h));

  MC_T_EQ_INT(g->n_hosts, 3);
  MC_T_EQ_INT(g->n_links, 3);
  check_link(g, 0, 0, 0, 1, 0, "192.168.101.0/24");
  check_link(g, 1, 0, 1, 2, 0, "192.168.100.0/24");
  check_link(g, 2, 1, 1, 2, 1, "192.168.102.0/24");
  MC_T_EQ_INT(g->links[0].speed_mbps, MT_FAST);
  MC_T_EQ_INT(g->links[0].lane, MC_MESH_LANE_FAST);
  for (int i = 0; i < 3; i++)
    MC_T_EQ_INT(g->degree[i], 2);
  MC_T_EQ_INT(g->shape, MC_MESH_SHAPE_FULL);
  mc_mesh_graph_destroy(g);
}

static enum mc_mesh_shape shape_of(const struct mc_mesh_host *h, int n)
{
  struct mc_mesh_graph *g = mt_graph(h, n);
  enum mc_mesh_shape shape = g->shape;

  mc_mesh_graph_destroy(g);
  return shape;
}

static void shapes_of_the_test_cablings(void)
{
  struct mc_mesh_host h[64];
  static const char *const pair[] = {"AB"};
  static const char *const chain3[] = {"AB", "BC"};
  static const char *const alone2[] = {"AB", "CD"};

  MC_T_EQ_INT(shape_of(h, mt_ring4(h)), MC_MESH_SHAPE_RING);
  MC_T_EQ_INT(shape_of(h, mt_line4(h)), MC_MESH_SHAPE_LINE);
  MC_T_EQ_INT(shape_of(h, mt_line(h, 10)), MC_MESH_SHAPE_LINE);
  MC_T_EQ_INT(shape_of(h, mt_star5(h)), MC_MESH_SHAPE_STAR);
  MC_T_EQ_INT(shape_of(h, mt_ring5_chord(h)), MC_MESH_SHAPE_PARTIAL);
  MC_T_EQ_INT(shape_of(h, mt_ladder6(h)), MC_MESH_SHAPE_PARTIAL);
  MC_T_EQ_INT(shape_of(h, mt_two_triangles(h)), MC_MESH_SHAPE_DISCONNECTED);
  MC_T_EQ_INT(shape_of(h, mt_full(h, 4)), MC_MESH_SHAPE_FULL);
  MC_T_EQ_INT(shape_of(h, mt_full(h, 5)), MC_MESH_SHAPE_FULL);
  /* two hosts: linked is full, unlinked is disconnected; three in a chain
   * are a line (a star needs four) */
  MC_T_EQ_INT(shape_of(h, mt_pairs(h, 2, pair, 1)), MC_MESH_SHAPE_FULL);
  MC_T_EQ_INT(shape_of(h, mt_pairs(h, 2, pair, 0)), MC_MESH_SHAPE_DISCONNECTED);
  MC_T_EQ_INT(shape_of(h, mt_pairs(h, 3, chain3, 2)), MC_MESH_SHAPE_LINE);
  MC_T_EQ_INT(shape_of(h, mt_pairs(h, 4, alone2, 2)), MC_MESH_SHAPE_DISCONNECTED);
  MC_T_EQ_INT(shape_of(h, mt_pairs(h, 1, pair, 0)), MC_MESH_SHAPE_SINGLE);
}

static void degrees_of_the_star_and_ladder(void)
{
  struct mc_mesh_host h[6];
  struct mc_mesh_graph *g = mt_graph(h, mt_star5(h));
  static const int ladder[6] = {2, 3, 2, 2, 3, 2};

  MC_T_EQ_INT(g->degree[0], 4);
  for (int i = 1; i < 5; i++)
    MC_T_EQ_INT(g->degree[i], 1);
  mc_mesh_graph_destroy(g);
  g = mt_graph(h, mt_ladder6(h));
  for (int i = 0; i < 6; i++)
    MC_T_EQ_INT(g->degree[i], ladder[i]);
  mc_mesh_graph_destroy(g);
}

/* Hosts given in any order get the same canonical indices. */
static void canonical_order_by_host_hash(void)
{
  struct mc_mesh_host h[4];
  struct mc_mesh_host shuffled[4];
  struct mc_mesh_graph *g;
  int host = -1;

  mt_ring4(h);
  shuffled[0] = h[2];
  shuffled[1] = h[0];
  shuffled[2] = h[3];
  shuffled[3] = h[1];
  g = mt_graph(shuffled, 4);
  for (int i = 0; i < 4; i++)
    MC_T_EQ_INT(g->hosts[i].host_hash, h[i].host_hash);
  MC_T_EQ_INT(g->input_index[0], 1);
  MC_T_EQ_INT(g->input_index[1], 3);
  MC_T_EQ_INT(g->input_index[2], 0);
  MC_T_EQ_INT(g->input_index[3], 2);
  MC_T_OK(mc_mesh_graph_host_find(g, h[3].host_hash, &host));
  MC_T_EQ_INT(host, 3);
  MC_T_EQ_INT(mc_mesh_graph_host_find(g, 0x1234, &host), ncclInvalidArgument);
  MC_T_EQ_INT(host, 3);
  MC_T_CONTAINS(mc_t_last_error(), "no host with host hash 0000000000001234");
  mc_mesh_graph_destroy(g);
}

static void ipv6_links_like_ipv4(void)
{
  struct mc_mesh_host h[3];
  struct mc_mesh_graph *g;

  mt_letter(&h[0], 0);
  mt_letter(&h[1], 1);
  mt_letter(&h[2], 2);
  mt_addr(&h[0], "eth1", "fd00:1::1", 64, MT_FAST);
  mt_addr(&h[1], "eth1", "fd00:1::2", 64, MT_FAST);
  mt_addr(&h[1], "eth2", "fd00:2:0:0:8000::1", 65, MT_FAST);
  mt_addr(&h[2], "eth1", "fd00:2:0:0:8000::2", 65, MT_FAST);
  /* same first 64 bits, but bit 65 differs: another /65 subnet */
  mt_addr(&h[2], "eth2", "fd00:1::3", 65, MT_FAST);
  g = mt_graph(h, 3);
  MC_T_EQ_INT(g->n_links, 2);
  check_link(g, 0, 0, 0, 1, 0, "fd00:1::/64");
  check_link(g, 1, 1, 1, 2, 0, "fd00:2:0:0:8000::/65");
  MC_T_EQ_INT(g->shape, MC_MESH_SHAPE_LINE);
  mc_mesh_graph_destroy(g);
}

/* An address alone on its subnet, another prefix length, an address equal
 * to another host's and another family link nothing. */
static void addresses_that_link_nothing(void)
{
  struct mc_mesh_host h[2];
  struct mc_mesh_graph *g;

  mt_letter(&h[0], 0);
  mt_letter(&h[1], 1);
  mt_addr(&h[0], "eth1", "10.9.9.1", 24, MT_FAST);    /* alone */
  mt_addr(&h[0], "eth2", "10.2.0.1", 24, MT_FAST);    /* B has 10.2.0.2/16 */
  mt_addr(&h[0], "docker0", "172.17.0.1", 16, 10000); /* B has the same */
  mt_addr(&h[0], "eth3", "10.3.0.1", 30, MT_FAST);    /* B has 10.3.0.5/30 */
  mt_addr(&h[1], "eth1", "10.2.0.2", 16, MT_FAST);
  mt_addr(&h[1], "docker0", "172.17.0.1", 16, 10000);
  mt_addr(&h[1], "eth2", "10.3.0.5", 30, MT_FAST);
  mt_addr(&h[1], "eth3", "::ffff:10.9.9.2", 120, MT_FAST);
  g = mt_graph(h, 2);
  MC_T_EQ_INT(g->n_links, 0);
  MC_T_EQ_INT(g->shape, MC_MESH_SHAPE_DISCONNECTED);
  mc_mesh_graph_destroy(g);

  /* /30: .1 and .2 share 10.3.0.0/30 */
  mt_addr(&h[1], "eth4", "10.3.0.2", 30, 0);
  g = mt_graph(h, 2);
  MC_T_EQ_INT(g->n_links, 1);
  check_link(g, 0, 0, 3, 1, 4, "10.3.0.0/30");
  MC_T_EQ_INT(g->links[0].speed_mbps, 0); /* one end unknown */
  MC_T_EQ_INT(g->links[0].lane, MC_MESH_LANE_UNKNOWN);
  mc_mesh_graph_destroy(g);
}

/* Two cables between two hosts: two links, one neighbour. */
static void parallel_cables_are_kept(void)
{
  struct mc_mesh_host h[2];
  struct mc_mesh_graph *g;
  int links[MC_MESH_MAX_PAIR_LINKS];

  mt_letter(&h[0], 0);
  mt_letter(&h[1], 1);
  mt_addr(&h[0], "eth1", "10.0.1.1", 24, 100000);
  mt_addr(&h[0], "eth2", "10.0.2.1", 24, 200000);
  mt_addr(&h[1], "eth1", "10.0.1.2", 24, 200000);
  mt_addr(&h[1], "eth2", "10.0.2.2", 24, 200000);
  g = mt_graph(h, 2);
  MC_T_EQ_INT(g->n_links, 2);
  MC_T_EQ_INT(g->links[0].speed_mbps, 100000); /* the slower end */
  MC_T_EQ_INT(g->links[1].speed_mbps, 200000);
  MC_T_EQ_INT(g->degree[0], 1);
  MC_T_EQ_INT(g->n_up_between[0][1], 2);
  MC_T_EQ_INT(g->shape, MC_MESH_SHAPE_FULL);
  MC_T_EQ_INT(mc_mesh_graph_usable_links(g, 1, 0, links), 2);
  MC_T_EQ_INT(links[0], 0);
  MC_T_EQ_INT(links[1], 1);
  MC_T_EQ_INT(mc_mesh_graph_usable_links(g, 0, 0, links), 0);
  MC_T_EQ_INT(mc_mesh_graph_usable_links(g, 0, 2, links), 0);
  mc_mesh_graph_destroy(g);
}

/* Between a fast and a management link of one pair, only the fast one is
 * used while it is up. */
static void usable_links_prefer_the_fast_lane(void)
{
  struct mc_mesh_host h[2];
  struct mc_mesh_graph *g;
  int links[MC_MESH_MAX_PAIR_LINKS];

  mt_letter(&h[0], 0);
  mt_letter(&h[1], 1);
  mt_addr(&h[0], "mgmt0", "10.0.0.1", 24, 10000);
  mt_addr(&h[0], "eth1", "10.0.1.1", 24, 100000);
  mt_addr(&h[1], "mgmt0", "10.0.0.2", 24, 10000);
  mt_addr(&h[1], "eth1", "10.0.1.2", 24, 100000);
  g = mt_graph(h, 2);
  MC_T_EQ_INT(g->links[0].lane, MC_MESH_LANE_MGMT);
  MC_T_EQ_INT(g->links[1].lane, MC_MESH_LANE_FAST);
  MC_T_EQ_INT(mc_mesh_graph_usable_links(g, 0, 1, links), 1);
  MC_T_EQ_INT(links[0], 1);
  MC_T_OK(mc_mesh_graph_link_set_down(g, 1));
  MC_T_EQ_INT(mc_mesh_graph_usable_links(g, 0, 1, links), 1);
  MC_T_EQ_INT(links[0], 0);
  MC_T_OK(mc_mesh_graph_link_set_down(g, 0));
  MC_T_EQ_INT(mc_mesh_graph_usable_links(g, 0, 1, links), 0);
  MC_T_EQ_INT(g->shape, MC_MESH_SHAPE_DISCONNECTED);
  mc_mesh_graph_destroy(g);

  /* a threshold above 100 Gb/s makes both management links */
  MC_T_OK(mc_mesh_graph_create(h, 2, 200000, &g));
  MC_T_EQ_INT(g->links[1].lane, MC_MESH_LANE_MGMT);
  MC_T_EQ_INT(mc_mesh_graph_usable_links(g, 0, 1, links), 2);
  mc_mesh_graph_destroy(g);
}

static void link_down_and_up_update_the_shape(void)
{
  struct mc_mesh_host h[4];
  struct mc_mesh_graph *g = mt_graph(h, mt_ring4(h));
  int ab = mt_link(g, 0, 1);

  MC_T_OK(mc_mesh_graph_link_set_down(g, ab));
  MC_T_TRUE(!g->links[ab].is_up);
  MC_T_EQ_INT(g->degree[0], 1);
  MC_T_EQ_INT(g->degree[1], 1);
  MC_T_EQ_INT(g->shape, MC_MESH_SHAPE_LINE);
  MC_T_OK(mc_mesh_graph_link_set_up(g, ab));
  MC_T_EQ_INT(g->shape, MC_MESH_SHAPE_RING);
  MC_T_EQ_INT(mc_mesh_graph_link_set_down(g, 4), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "no link 4 (the mesh has 4 links)");
  MC_T_EQ_INT(mc_mesh_graph_link_set_down(g, -1), ncclInvalidArgument);
  mc_mesh_graph_destroy(g);
}

static void duplicate_host_hash_is_named(void)
{
  struct mc_mesh_host h[4];
  struct mc_mesh_graph *g = NULL;

  mt_ring4(h);
  h[3].host_hash = h[1].host_hash;
  MC_T_EQ_INT(mc_mesh_graph_create(h, 4, 0, &g), ncclInvalidUsage);
  MC_T_NULL(g);
  MC_T_CONTAINS(mc_t_last_error(),
                "hosts 1 (hostB) and 3 (hostD) report the same host hash 00000000000000b1");
  MC_T_CONTAINS(mc_t_last_error(), "NCCL_HOSTID");
}

static void too_many_addresses_or_hosts(void)
{
  struct mc_mesh_host *h = calloc(MC_MESH_MAX_HOSTS + 1, sizeof(*h));
  struct mc_mesh_graph *g = NULL;

  MC_T_TRUE(h != NULL);
  mt_ring4(h);
  h[2].n_addrs = 9;
  MC_T_EQ_INT(mc_mesh_graph_create(h, 4, 0, &g), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "host 2 (00000000000000c2/hostC) has 9 addresses, at most 8");
  h[2].n_addrs = -1;
  MC_T_EQ_INT(mc_mesh_graph_create(h, 4, 0, &g), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "has -1 addresses");

  for (int i = 0; i < MC_MESH_MAX_HOSTS + 1; i++)
    mt_host(&h[i], 0x100 + (uint64_t)i, "");
  MC_T_EQ_INT(mc_mesh_graph_create(h, MC_MESH_MAX_HOSTS + 1, 0, &g), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "65 hosts given, a mesh has 1 to 64 hosts");
  MC_T_EQ_INT(mc_mesh_graph_create(h, 0, 0, &g), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "0 hosts given");
  MC_T_OK(mc_mesh_graph_create(h, MC_MESH_MAX_HOSTS, 0, &g));
  MC_T_EQ_INT(g->n_hosts, 64);
  MC_T_EQ_INT(g->n_links, 0);
  mc_mesh_graph_destroy(g);
  g = NULL;

  /* bad family and prefix */
  mt_ring4(h);
  h[1].addrs[0].family = 17;
  MC_T_EQ_INT(mc_mesh_graph_create(h, 4, 0, &g), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(),
                "host 1 (00000000000000b1/hostB) address 0 (eth1) has family 17");
  mt_ring4(h);
  h[0].addrs[1].prefix_len = 33;
  MC_T_EQ_INT(mc_mesh_graph_create(h, 4, 0, &g), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "address 1 (eth2) has prefix length 33, expected 0..32");
  MC_T_NULL(g);
  MC_T_EQ_INT(mc_mesh_graph_create(NULL, 4, 0, &g), ncclInvalidArgument);
  MC_T_EQ_INT(mc_mesh_graph_create(h, 4, 0, NULL), ncclInvalidArgument);
  mc_mesh_graph_destroy(NULL);
  free(h);
}

/* The whole text of the triangle's graph. */
static void triangle_print(void)
{
  struct mc_mesh_host h[3];
  struct mc_mesh_graph *g = mt_graph(h, mt_triangle(h));
  static char text[8192];

  mt_print(g, text, sizeof(text));
  MC_T_EQ_STR(
      text,
      "mesh: 3 hosts, 3 links (3 up), shape full, fast lane from 40000 Mb/s\n"
      "host 0 (00000000000000a0/hostA): eth1 192.168.101.2/24 100000 Mb/s, eth2 192.168.100.2/24 "
      "100000 Mb/s\n"
      "host 1 (00000000000000b1/hostB): eth1 192.168.101.3/24 100000 Mb/s, eth2 192.168.102.2/24 "
      "100000 Mb/s\n"
      "host 2 (00000000000000c2/hostC): eth1 192.168.100.3/24 100000 Mb/s, eth2 192.168.102.3/24 "
      "100000 Mb/s\n"
      "link 0: host 0 eth1 192.168.101.2/24 <-> host 1 eth1 192.168.101.3/24 100000 Mb/s fast\n"
      "link 1: host 0 eth2 192.168.100.2/24 <-> host 2 eth1 192.168.100.3/24 100000 Mb/s fast\n"
      "link 2: host 1 eth2 192.168.102.2/24 <-> host 2 eth2 192.168.102.3/24 100000 Mb/s fast\n"
      "route 0 -> 1: 1 hop: 0 1\n"
      "route 0 -> 2: 1 hop: 0 2\n"
      "route 1 -> 0: 1 hop: 1 0\n"
      "route 1 -> 2: 1 hop: 1 2\n"
      "route 2 -> 0: 1 hop: 2 0\n"
      "route 2 -> 1: 1 hop: 2 1\n"
      "rings over the hosts in canonical order: 2 (cycle)\n"
      "ring 0: hosts 0 1 2; links 0 2 1; no relayed hop\n"
      "ring 1: hosts 0 2 1; links 1 2 0; no relayed hop\n");
  mc_mesh_graph_destroy(g);
}

/* The 4-ring with its A-B cable down and an end of unknown speed: a line,
 * routes around the failed cable, relayed ring hops. The intact ring's
 * routes to the opposite host have two equal first hops. */
static void ring4_link_down_print(void)
{
  struct mc_mesh_host h[4];
  struct mc_mesh_graph *g = mt_graph(h, mt_ring4(h));
  static char text[8192];

  mt_print(g, text, sizeof(text));
  MC_T_CONTAINS(text, "route 0 -> 2: 2 hops: 0 1 2 (2 equal first hops)\n");
  MC_T_CONTAINS(text, "route 3 -> 1: 2 hops: 3 0 1 (2 equal first hops)\n");
  MC_T_CONTAINS(text, "route 3 -> 2: 1 hop: 3 2\n");
  h[3].addrs[1].speed_mbps = 0;
  h[3].name[0] = '\0';
  mc_mesh_graph_destroy(g);
  g = mt_graph(h, 4);
  MC_T_OK(mc_mesh_graph_link_set_down(g, mt_link(g, 0, 1)));
  mt_print(g, text, sizeof(text));
  MC_T_EQ_STR(
      text,
      "mesh: 4 hosts, 4 links (3 up), shape line, fast lane from 40000 Mb/s\n"
      "host 0 (00000000000000a0/hostA): eth1 192.168.100.1/24 100000 Mb/s, eth2 192.168.103.1/24 "
      "100000 Mb/s\n"
      "host 1 (00000000000000b1/hostB): eth1 192.168.100.2/24 100000 Mb/s, eth2 192.168.101.1/24 "
      "100000 Mb/s\n"
      "host 2 (00000000000000c2/hostC): eth1 192.168.101.2/24 100000 Mb/s, eth2 192.168.102.1/24 "
      "100000 Mb/s\n"
      "host 3 (00000000000000d3): eth1 192.168.102.2/24 100000 Mb/s, eth2 192.168.103.2/24 speed "
      "unknown\n"
      "link 0: host 0 eth1 192.168.100.1/24 <-> host 1 eth1 192.168.100.2/24 100000 Mb/s fast "
      "down\n"
      "link 1: host 0 eth2 192.168.103.1/24 <-> host 3 eth2 192.168.103.2/24 speed unknown\n"
      "link 2: host 1 eth2 192.168.101.1/24 <-> host 2 eth1 192.168.101.2/24 100000 Mb/s fast\n"
      "link 3: host 2 eth2 192.168.102.1/24 <-> host 3 eth1 192.168.102.2/24 100000 Mb/s fast\n"
      "route 0 -> 1: 3 hops: 0 3 2 1\n"
      "route 0 -> 2: 2 hops: 0 3 2\n"
      "route 0 -> 3: 1 hop: 0 3\n"
      "route 1 -> 0: 3 hops: 1 2 3 0\n"
      "route 1 -> 2: 1 hop: 1 2\n"
      "route 1 -> 3: 2 hops: 1 2 3\n"
      "route 2 -> 0: 2 hops: 2 3 0\n"
      "route 2 -> 1: 1 hop: 2 1\n"
      "route 2 -> 3: 1 hop: 2 3\n"
      "route 3 -> 0: 1 hop: 3 0\n"
      "route 3 -> 1: 2 hops: 3 2 1\n"
      "route 3 -> 2: 1 hop: 3 2\n"
      "rings over the hosts in canonical order: 2 (path)\n"
      "ring 0: hosts 0 3 2 1; links 1 3 2 relay; 1 relayed hop over 3 links\n"
      "ring 1: hosts 0 1 2 3; links relay 2 3 1; 1 relayed hop over 3 links\n");
  mc_mesh_graph_destroy(g);
}

/* The same hosts in three orders print the same text. */
static void print_is_independent_of_input_order(void)
{
  static const int orders[3][6] = {{0, 1, 2, 3, 4, 5}, {5, 3, 1, 0, 2, 4}, {2, 4, 0, 5, 1, 3}};
  static char first[65536];
  static char text[65536];
  struct mc_mesh_host base[6];
  struct mc_mesh_host h[6];
  int (*fixtures[])(struct mc_mesh_host *) = {mt_ring4, mt_line4, mt_ladder6, mt_two_triangles};

  for (size_t f = 0; f < sizeof(fixtures) / sizeof(fixtures[0]); f++) {
    int n = fixtures[f](base);

    for (int o = 0; o < 3; o++) {
      struct mc_mesh_graph *g;
      int k = 0;

      for (int i = 0; i < 6; i++) {
        if (orders[o][i] < n)
          h[k++] = base[orders[o][i]];
      }
      g = mt_graph(h, n);
      mt_print(g, (o == 0) ? first : text, sizeof(text));
      if (o > 0)
        MC_T_EQ_STR(text, first);
      mc_mesh_graph_destroy(g);
    }
  }
}

MC_T_MAIN(lanes_by_speed, shape_names, triangle_links_and_shape, shapes_of_the_test_cablings,
          degrees_of_the_star_and_ladder, canonical_order_by_host_hash, ipv6_links_like_ipv4,
          addresses_that_link_nothing, parallel_cables_are_kept, usable_links_prefer_the_fast_lane,
          link_down_and_up_update_the_shape, duplicate_host_hash_is_named,
          too_many_addresses_or_hosts, triangle_print, ring4_link_down_print,
          print_is_independent_of_input_order)
