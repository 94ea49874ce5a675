/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Channel rings over the mesh (src/net/mesh/mesh_rings.c): the host orders
 * found on every test cabling (cycles and their reverse, link-disjoint
 * cycles, a chain closed by a relay, the communicator's order), rank orders
 * that cross the cables, the link of every ring hop over parallel cables,
 * communicators on part of the mesh, and bad arguments.
 */
#include "mc_test.h"

#include "mc_mesh_fixture.h"
#include "net/mesh/mesh_graph.h"

#include <string.h>

static const int identity[MC_MESH_MAX_HOSTS] = {
    0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
    22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
    44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63};

static const char *ring_str(const struct mc_mesh_rings *rings, int r)
{
  static char buf[512];
  size_t used = 0;

  buf[0] = '\0';
  for (int i = 0; i < rings->n_hosts; i++)
    used += (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%d", (i == 0) ? "" : " ",
                             rings->rings[r].hosts[i]);
  return buf;
}

static struct mc_mesh_rings rings_of(const struct mc_mesh_graph *g, const int *order, int n,
                                     int max_rings)
{
  struct mc_mesh_rings rings;

  memset(&rings, 0, sizeof(rings));
  MC_T_OK(mc_mesh_rings_compute(g, order, n, max_rings, &rings));
  MC_T_TRUE(!rings.is_search_cut);
  return rings;
}

static void check_no_relay(const struct mc_mesh_rings *rings)
{
  for (int r = 0; r < rings->n_rings; r++) {
    MC_T_EQ_INT(rings->rings[r].n_relayed, 0);
    MC_T_EQ_INT(rings->rings[r].relay_edges, 0);
  }
}

/* The cycles (rings 0, 2, 4 ...; ring 2c+1 is ring 2c reversed) share no
 * cable, and together they use every cable that the hosts' link counts allow:
 * each host's links are used once per cycle, twice per host. */
static void check_disjoint_cycles(const struct mc_mesh_graph *g, const struct mc_mesh_rings *rings)
{
  int used[MC_MESH_MAX_LINKS];
  int links[MC_MESH_MAX_HOSTS];
  int n = rings->n_hosts;

  memset(used, 0, sizeof(used));
  MC_T_EQ_INT(rings->n_rings, 2 * rings->n_cycles);
  for (int c = 0; c < rings->n_cycles; c++) {
    MC_T_OK(mc_mesh_ring_links(g, rings, 2 * c, links));
    for (int i = 0; i < n; i++) {
      MC_T_TRUE(links[i] >= 0);
      used[links[i]]++;
      MC_T_EQ_INT(used[links[i]], 1);
    }
    /* the reverse ring runs the same cycle the other way */
    for (int i = 1; i < n; i++)
      MC_T_EQ_INT(rings->rings[2 * c + 1].hosts[i], rings->rings[2 * c].hosts[n - i]);
  }
}

static void triangle_two_directions(void)
{
  struct mc_mesh_host h[3];
  struct mc_mesh_graph *g = mt_graph(h, mt_triangle(h));
  struct mc_mesh_rings rings = rings_of(g, identity, 3, MC_MESH_MAX_RINGS);
  int links0[MC_MESH_MAX_HOSTS];
  int links1[MC_MESH_MAX_HOSTS];

  MC_T_EQ_INT(rings.kind, MC_MESH_RINGS_CYCLE);
  MC_T_EQ_INT(rings.n_cycles, 1);
  MC_T_EQ_INT(rings.n_rings, 2);
  MC_T_EQ_STR(ring_str(&rings, 0), "0 1 2");
  MC_T_EQ_STR(ring_str(&rings, 1), "0 2 1");
  check_no_relay(&rings);
  MC_T_OK(mc_mesh_ring_links(g, &rings, 0, links0));
  MC_T_OK(mc_mesh_ring_links(g, &rings, 1, links1));
  MC_T_EQ_INT(links0[0], mt_link(g, 0, 1));
  MC_T_EQ_INT(links0[1], mt_link(g, 1, 2));
  MC_T_EQ_INT(links0[2], mt_link(g, 2, 0));
  MC_T_EQ_INT(links1[0], mt_link(g, 0, 2));
  MC_T_EQ_INT(links1[1], mt_link(g, 2, 1));
  MC_T_EQ_INT(links1[2], mt_link(g, 1, 0));
  /* every host sends through one NIC in ring 0 and through the other in
   * ring 1: ring 0's host i sends on links0[i], ring 1's host on links1[pos] */
  for (int host = 0; host < 3; host++) {
    int pos1 = (host == 0) ? 0 : 3 - host; /* ring 1 is 0 2 1 */

    MC_T_TRUE(links0[host] != links1[pos1]);
  }
  MC_T_EQ_STR(mc_mesh_rings_kind_str(MC_MESH_RINGS_CYCLE), "cycle");
  MC_T_EQ_STR(mc_mesh_rings_kind_str(MC_MESH_RINGS_PATH), "path");
  MC_T_EQ_STR(mc_mesh_rings_kind_str(MC_MESH_RINGS_ORDER), "order");
  mc_mesh_graph_destroy(g);
}

/* Triangle with two cables per pair: the two rings use all six cables, four
 * rings use each cable once in each direction. */
static void triangle_parallel_cables_round_robin(void)
{
  struct mc_mesh_host h[3];
  struct mc_mesh_graph *g;
  struct mc_mesh_rings rings;
  int links[MC_MESH_MAX_HOSTS];
  int used[MC_MESH_MAX_LINKS][2];
  int n_used = 0;

  mt_triangle(h);
  mt_addr(&h[0], "eth3", "192.168.111.2", 24, MT_FAST); /* second A-B */
  mt_addr(&h[1], "eth3", "192.168.111.3", 24, MT_FAST);
  mt_addr(&h[0], "eth4", "192.168.110.2", 24, MT_FAST); /* second A-C */
  mt_addr(&h[2], "eth3", "192.168.110.3", 24, MT_FAST);
  mt_addr(&h[1], "eth4", "192.168.112.2", 24, MT_FAST); /* second B-C */
  mt_addr(&h[2], "eth4", "192.168.112.3", 24, MT_FAST);
  g = mt_graph(h, 3);
  MC_T_EQ_INT(g->n_links, 6);

  rings = rings_of(g, identity, 3, 2);
  MC_T_EQ_INT(rings.n_rings, 2);
  MC_T_EQ_INT(rings.n_cycles, 1);
  memset(used, 0, sizeof(used));
  for (int r = 0; r < 2; r++) {
    MC_T_OK(mc_mesh_ring_links(g, &rings, r, links));
    for (int i = 0; i < 3; i++) {
      MC_T_TRUE(links[i] >= 0);
      n_used += (used[links[i]][0]++ == 0) ? 1 : 0;
    }
  }
  MC_T_EQ_INT(n_used, 6);

  rings = rings_of(g, identity, 3, 4);
  MC_T_EQ_INT(rings.n_rings, 4);
  MC_T_EQ_INT(rings.n_cycles, 2);
  MC_T_EQ_STR(ring_str(&rings, 0), "0 1 2");
  MC_T_EQ_STR(ring_str(&rings, 1), "0 2 1");
  MC_T_EQ_STR(ring_str(&rings, 2), "0 1 2");
  MC_T_EQ_STR(ring_str(&rings, 3), "0 2 1");
  memset(used, 0, sizeof(used));
  for (int r = 0; r < 4; r++) {
    MC_T_OK(mc_mesh_ring_links(g, &rings, r, links));
    for (int i = 0; i < 3; i++) {
      int from = rings.rings[r].hosts[i];

      used[links[i]][(g->links[links[i]].host[0] == from) ? 0 : 1]++;
    }
  }
  for (int l = 0; l < 6; l++) {
    MC_T_EQ_INT(used[l][0], 1);
    MC_T_EQ_INT(used[l][1], 1);
  }
  mc_mesh_graph_destroy(g);
}

static void ring4_cycle_and_reverse(void)
{
  struct mc_mesh_host h[4];
  struct mc_mesh_graph *g = mt_graph(h, mt_ring4(h));
  struct mc_mesh_rings rings = rings_of(g, identity, 4, MC_MESH_MAX_RINGS);
  int links[MC_MESH_MAX_HOSTS];

  MC_T_EQ_INT(rings.kind, MC_MESH_RINGS_CYCLE);
  MC_T_EQ_INT(rings.n_rings, 2);
  MC_T_EQ_STR(ring_str(&rings, 0), "0 1 2 3");
  MC_T_EQ_STR(ring_str(&rings, 1), "0 3 2 1");
  MC_T_EQ_INT(rings.n_cycles, 1);
  check_no_relay(&rings);
  check_disjoint_cycles(g, &rings);
  MC_T_OK(mc_mesh_ring_links(g, &rings, 1, links));
  MC_T_EQ_INT(links[0], mt_link(g, 0, 3));
  MC_T_EQ_INT(links[3], mt_link(g, 1, 0));
  rings = rings_of(g, identity, 4, 1);
  MC_T_EQ_INT(rings.n_rings, 1);
  MC_T_EQ_STR(ring_str(&rings, 0), "0 1 2 3");
  mc_mesh_graph_destroy(g);
}

/* Ranks number the hosts 0,2,1,3 around the cables (A, C, B, D in rank
 * order, hosts given in that order too): the rings still follow the cables. */
static void ring4_rank_order_against_the_cables(void)
{
  struct mc_mesh_host base[4];
  struct mc_mesh_host h[4];
  struct mc_mesh_graph *g;
  struct mc_mesh_rings rings;
  static const int order[4] = {0, 2, 1, 3};
  static const int order_b[4] = {1, 3, 0, 2};

  mt_ring4(base);
  for (int i = 0; i < 4; i++)
    h[i] = base[order[i]];
  g = mt_graph(h, 4);
  rings = rings_of(g, order, 4, MC_MESH_MAX_RINGS);
  MC_T_EQ_INT(rings.kind, MC_MESH_RINGS_CYCLE);
  MC_T_EQ_INT(rings.n_rings, 2);
  MC_T_EQ_STR(ring_str(&rings, 0), "0 1 2 3");
  MC_T_EQ_STR(ring_str(&rings, 1), "0 3 2 1");
  check_no_relay(&rings);
  /* starting at B (rank order B, D, A, C) */
  rings = rings_of(g, order_b, 4, MC_MESH_MAX_RINGS);
  MC_T_EQ_STR(ring_str(&rings, 0), "1 0 3 2");
  MC_T_EQ_STR(ring_str(&rings, 1), "1 2 3 0");
  check_no_relay(&rings);
  mc_mesh_graph_destroy(g);
}

/* A line has no cycle: the chain A-B-C-D closed by the relayed D -> A. */
static void line4_closing_hop_relayed(void)
{
  struct mc_mesh_host h[4];
  struct mc_mesh_graph *g = mt_graph(h, mt_line4(h));
  struct mc_mesh_rings rings = rings_of(g, identity, 4, MC_MESH_MAX_RINGS);
  static const int order_b[4] = {1, 0, 2, 3};
  int links[MC_MESH_MAX_HOSTS];

  MC_T_EQ_INT(rings.kind, MC_MESH_RINGS_PATH);
  MC_T_EQ_INT(rings.n_cycles, 0);
  MC_T_EQ_INT(rings.n_rings, 2);
  MC_T_EQ_STR(ring_str(&rings, 0), "0 1 2 3");
  MC_T_EQ_INT(rings.rings[0].n_relayed, 1);
  MC_T_EQ_INT(rings.rings[0].relay_edges, 3);
  MC_T_EQ_STR(ring_str(&rings, 1), "0 3 2 1");
  MC_T_EQ_INT(rings.rings[1].n_relayed, 1);
  MC_T_EQ_INT(rings.rings[1].relay_edges, 3);
  MC_T_OK(mc_mesh_ring_links(g, &rings, 0, links));
  MC_T_EQ_INT(links[0], mt_link(g, 0, 1));
  MC_T_EQ_INT(links[1], mt_link(g, 1, 2));
  MC_T_EQ_INT(links[2], mt_link(g, 2, 3));
  MC_T_EQ_INT(links[3], -1);
  MC_T_OK(mc_mesh_ring_links(g, &rings, 1, links));
  MC_T_EQ_INT(links[0], -1);

  /* rank order B, A, C, D: the chain starts at an end, turned to start at B */
  rings = rings_of(g, order_b, 4, MC_MESH_MAX_RINGS);
  MC_T_EQ_INT(rings.kind, MC_MESH_RINGS_PATH);
  MC_T_EQ_STR(ring_str(&rings, 0), "1 2 3 0");
  MC_T_EQ_INT(rings.rings[0].n_relayed, 1);
  MC_T_EQ_INT(rings.rings[0].relay_edges, 3);
  mc_mesh_graph_destroy(g);
}

static void line10_follows_the_line(void)
{
  struct mc_mesh_host h[10];
  struct mc_mesh_graph *g = mt_graph(h, mt_line(h, 10));
  struct mc_mesh_rings rings;
  int at[10];

  for (int i = 0; i < 10; i++)
    MC_T_OK(mc_mesh_graph_host_find(g, mt_line_hash(i, 10), &at[i]));
  rings = rings_of(g, identity, 10, 2);
  MC_T_EQ_INT(rings.kind, MC_MESH_RINGS_PATH);
  MC_T_EQ_INT(rings.rings[0].n_relayed, 1);
  MC_T_EQ_INT(rings.rings[0].relay_edges, 9);
  /* the ring starts at canonical host 0 and walks the line one way, jumps
   * from one end to the other, and walks on */
  for (int i = 0; i < 10; i++) {
    int a = rings.rings[0].hosts[i];
    int b = rings.rings[0].hosts[(i + 1) % 10];
    int pa = 0;
    int pb = 0;

    while (at[pa] != a)
      pa++;
    while (at[pb] != b)
      pb++;
    MC_T_TRUE((pb == pa + 1) || ((pa == 9) && (pb == 0)));
  }
  mc_mesh_graph_destroy(g);
}

/* Full mesh of four: any two cycles share two links, so one cycle and its
 * reverse. Full mesh of five: two link-disjoint cycles, every link used. */
static void full_meshes_disjoint_cycles(void)
{
  struct mc_mesh_host h[5];
  struct mc_mesh_graph *g = mt_graph(h, mt_full(h, 4));
  struct mc_mesh_rings rings = rings_of(g, identity, 4, MC_MESH_MAX_RINGS);
  int links[MC_MESH_MAX_HOSTS];
  int used[16] = {0};

  MC_T_EQ_INT(rings.n_cycles, 1);
  MC_T_EQ_INT(rings.n_rings, 2);
  MC_T_EQ_STR(ring_str(&rings, 0), "0 1 2 3");
  MC_T_EQ_STR(ring_str(&rings, 1), "0 3 2 1");
  mc_mesh_graph_destroy(g);

  g = mt_graph(h, mt_full(h, 5));
  rings = rings_of(g, identity, 5, MC_MESH_MAX_RINGS);
  MC_T_EQ_INT(rings.kind, MC_MESH_RINGS_CYCLE);
  MC_T_EQ_INT(rings.n_cycles, 2);
  MC_T_EQ_INT(rings.n_rings, 4);
  MC_T_EQ_STR(ring_str(&rings, 0), "0 1 2 3 4");
  MC_T_EQ_STR(ring_str(&rings, 1), "0 4 3 2 1");
  MC_T_EQ_STR(ring_str(&rings, 2), "0 2 4 1 3");
  MC_T_EQ_STR(ring_str(&rings, 3), "0 3 1 4 2");
  check_no_relay(&rings);
  check_disjoint_cycles(g, &rings);
  for (int r = 0; r < 4; r += 2) {
    MC_T_OK(mc_mesh_ring_links(g, &rings, r, links));
    for (int i = 0; i < 5; i++)
      used[links[i]]++;
  }
  MC_T_EQ_INT(g->n_links, 10);
  for (int l = 0; l < 10; l++)
    MC_T_EQ_INT(used[l], 1);
  mc_mesh_graph_destroy(g);
}

static void star_keeps_the_rank_order(void)
{
  struct mc_mesh_host h[5];
  struct mc_mesh_graph *g = mt_graph(h, mt_star5(h));
  struct mc_mesh_rings rings = rings_of(g, identity, 5, MC_MESH_MAX_RINGS);

  MC_T_EQ_INT(rings.kind, MC_MESH_RINGS_ORDER);
  MC_T_EQ_INT(rings.n_rings, 2);
  MC_T_EQ_STR(ring_str(&rings, 0), "0 1 2 3 4");
  MC_T_EQ_STR(ring_str(&rings, 1), "0 4 3 2 1");
  /* hub-leaf hops are direct, the three leaf-leaf hops go through the hub */
  MC_T_EQ_INT(rings.rings[0].n_relayed, 3);
  MC_T_EQ_INT(rings.rings[0].relay_edges, 6);
  mc_mesh_graph_destroy(g);
}

static void partial_meshes_find_their_cycle(void)
{
  struct mc_mesh_host h[6];
  struct mc_mesh_graph *g = mt_graph(h, mt_ring5_chord(h));
  struct mc_mesh_rings rings = rings_of(g, identity, 5, MC_MESH_MAX_RINGS);

  MC_T_EQ_INT(rings.n_cycles, 1); /* the chord alone is left */
  MC_T_EQ_STR(ring_str(&rings, 0), "0 1 2 3 4");
  MC_T_EQ_STR(ring_str(&rings, 1), "0 4 3 2 1");
  check_no_relay(&rings);
  mc_mesh_graph_destroy(g);

  g = mt_graph(h, mt_ladder6(h));
  rings = rings_of(g, identity, 6, MC_MESH_MAX_RINGS);
  MC_T_EQ_INT(rings.n_cycles, 1);
  MC_T_EQ_STR(ring_str(&rings, 0), "0 1 2 5 4 3");
  MC_T_EQ_STR(ring_str(&rings, 1), "0 3 4 5 2 1");
  check_no_relay(&rings);
  mc_mesh_graph_destroy(g);
}

/* One host, two hosts with one or two cables, two hosts without a cable. */
static void small_communicators(void)
{
  struct mc_mesh_host h[4];
  struct mc_mesh_graph *g = mt_graph(h, mt_ring4(h));
  struct mc_mesh_rings rings = rings_of(g, identity + 2, 1, MC_MESH_MAX_RINGS);
  static const int ac[2] = {0, 2};
  static const int ba[2] = {1, 0};
  int links[MC_MESH_MAX_HOSTS];

  MC_T_EQ_INT(rings.n_rings, 1);
  MC_T_EQ_STR(ring_str(&rings, 0), "2");
  MC_T_OK(mc_mesh_ring_links(g, &rings, 0, links));

  rings = rings_of(g, ba, 2, MC_MESH_MAX_RINGS);
  MC_T_EQ_INT(rings.kind, MC_MESH_RINGS_CYCLE);
  MC_T_EQ_INT(rings.n_rings, 1);
  MC_T_EQ_STR(ring_str(&rings, 0), "1 0");
  MC_T_OK(mc_mesh_ring_links(g, &rings, 0, links));
  MC_T_EQ_INT(links[0], mt_link(g, 0, 1));
  MC_T_EQ_INT(links[1], mt_link(g, 0, 1));

  /* A and C have no cable: both hops relayed through B (or D) */
  rings = rings_of(g, ac, 2, MC_MESH_MAX_RINGS);
  MC_T_EQ_INT(rings.kind, MC_MESH_RINGS_ORDER);
  MC_T_EQ_INT(rings.n_rings, 1);
  MC_T_EQ_STR(ring_str(&rings, 0), "0 2");
  MC_T_EQ_INT(rings.rings[0].n_relayed, 2);
  MC_T_EQ_INT(rings.rings[0].relay_edges, 4);
  mc_mesh_graph_destroy(g);

  mt_pair2(h);
  g = mt_graph(h, 2);
  rings = rings_of(g, identity, 2, MC_MESH_MAX_RINGS);
  MC_T_EQ_INT(rings.n_rings, 2);
  MC_T_EQ_INT(rings.n_cycles, 2);
  mc_mesh_graph_destroy(g);
}

/* A communicator on three hosts of the 4-ring (A, B, D): the cables make
 * the chain B-A-D, turned to start at A and closed by the relayed D -> B. */
static void communicator_on_part_of_the_mesh(void)
{
  struct mc_mesh_host h[4];
  struct mc_mesh_graph *g = mt_graph(h, mt_ring4(h));
  static const int abd[3] = {0, 1, 3};
  struct mc_mesh_rings rings = rings_of(g, abd, 3, MC_MESH_MAX_RINGS);

  MC_T_EQ_INT(rings.kind, MC_MESH_RINGS_PATH);
  MC_T_EQ_STR(ring_str(&rings, 0), "0 3 1");
  MC_T_EQ_INT(rings.rings[0].n_relayed, 1);
  MC_T_EQ_INT(rings.rings[0].relay_edges, 2);
  mc_mesh_graph_destroy(g);
}

/* 64 hosts cabled in a ring, numbered in a scrambled rank order: the cycle
 * is found within the budget. */
static void ring64_in_scrambled_order(void)
{
  static struct mc_mesh_host h[64];
  struct mc_mesh_graph *g;
  struct mc_mesh_rings rings;
  int order[64];

  for (int i = 0; i < 64; i++) {
    char name[16];
    char ip[32];

    snprintf(name, sizeof(name), "r%d", i);
    mt_host(&h[i], 0x5000 + (uint64_t)i, name);
    snprintf(ip, sizeof(ip), "10.2.%d.1", i);
    mt_addr(&h[i], "eth1", ip, 24, MT_FAST);
    snprintf(ip, sizeof(ip), "10.2.%d.2", (i + 63) % 64);
    mt_addr(&h[i], "eth2", ip, 24, MT_FAST);
  }
  g = mt_graph(h, 64);
  MC_T_EQ_INT(g->shape, MC_MESH_SHAPE_RING);
  for (int i = 0; i < 64; i++)
    order[i] = (i * 37) % 64;
  rings = rings_of(g, order, 64, MC_MESH_MAX_RINGS);
  MC_T_EQ_INT(rings.kind, MC_MESH_RINGS_CYCLE);
  MC_T_EQ_INT(rings.n_rings, 2);
  MC_T_EQ_INT(rings.rings[0].hosts[0], 0);
  check_no_relay(&rings);
  mc_mesh_graph_destroy(g);
}

/* The cycles found on tori (host r * cols + c at row r, column c): two that
 * share no cable, so every host's four cables carry a ring each way. */
#define TORUS44_C1 "0 1 2 3 7 4 5 6 10 11 8 9 13 14 15 12"
#define TORUS44_C2 "0 3 15 11 7 6 2 14 10 9 5 1 13 12 8 4"
#define TORUS34_C1 "0 1 2 6 5 9 10 11 3 7 4 8"
#define TORUS34_C2 "0 3 2 10 6 7 11 8 9 1 5 4"

/* A 4x4 and a 3x4 torus (four cables per host) have two cable-disjoint
 * cycles, a 6x10 grid one; on an 8x8 grid the search runs out of budget
 * before it finds one and falls back to a chain closed by one relayed hop,
 * the same on every host. */
static void grids_and_tori(void)
{
  static struct mc_mesh_host h[64];
  struct mc_mesh_graph *g = mt_graph(h, mt_grid(h, 4, 4, true));
  struct mc_mesh_rings rings = rings_of(g, identity, 16, MC_MESH_MAX_RINGS);
  struct mc_mesh_rings again;

  MC_T_EQ_INT(g->shape, MC_MESH_SHAPE_PARTIAL);
  MC_T_EQ_INT(rings.kind, MC_MESH_RINGS_CYCLE);
  MC_T_EQ_INT(rings.n_cycles, 2);
  MC_T_EQ_INT(rings.n_rings, 4);
  MC_T_EQ_STR(ring_str(&rings, 0), TORUS44_C1);
  MC_T_EQ_STR(ring_str(&rings, 2), TORUS44_C2);
  check_no_relay(&rings);
  check_disjoint_cycles(g, &rings);
  mc_mesh_graph_destroy(g);

  /* 3x4 torus: the first cycle of the neighbour order leaves no second one;
   * the search replaces it by one that does. */
  g = mt_graph(h, mt_grid(h, 3, 4, true));
  rings = rings_of(g, identity, 12, MC_MESH_MAX_RINGS);
  MC_T_EQ_INT(rings.kind, MC_MESH_RINGS_CYCLE);
  MC_T_EQ_INT(rings.n_cycles, 2);
  MC_T_EQ_INT(rings.n_rings, 4);
  MC_T_EQ_STR(ring_str(&rings, 0), TORUS34_C1);
  MC_T_EQ_STR(ring_str(&rings, 2), TORUS34_C2);
  check_no_relay(&rings);
  check_disjoint_cycles(g, &rings);
  /* two rings asked: one cycle and its reverse */
  rings = rings_of(g, identity, 12, 2);
  MC_T_EQ_INT(rings.n_cycles, 1);
  MC_T_EQ_INT(rings.n_rings, 2);
  mc_mesh_graph_destroy(g);

  g = mt_graph(h, mt_grid(h, 6, 10, false));
  rings = rings_of(g, identity, 60, MC_MESH_MAX_RINGS);
  MC_T_EQ_INT(rings.kind, MC_MESH_RINGS_CYCLE);
  check_no_relay(&rings);
  mc_mesh_graph_destroy(g);

  g = mt_graph(h, mt_grid(h, 8, 8, false));
  MC_T_OK(mc_mesh_rings_compute(g, identity, 64, 2, &rings));
  MC_T_EQ_INT(rings.kind, MC_MESH_RINGS_PATH);
  MC_T_TRUE(rings.is_search_cut);
  MC_T_EQ_INT(rings.rings[0].n_relayed, 1);
  MC_T_OK(mc_mesh_rings_compute(g, identity, 64, 2, &again));
  MC_T_TRUE(memcmp(&rings, &again, sizeof(rings)) == 0);
  mc_mesh_graph_destroy(g);
}

static void bad_arguments(void)
{
  struct mc_mesh_host h[6];
  struct mc_mesh_graph *g = mt_graph(h, mt_ring4(h));
  struct mc_mesh_rings rings;
  static const int twice[3] = {0, 1, 0};
  static const int out_of_range[2] = {0, 4};
  int links[MC_MESH_MAX_HOSTS];

  memset(&rings, 0, sizeof(rings));
  MC_T_EQ_INT(mc_mesh_rings_compute(g, twice, 3, 2, &rings), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "host 0 appears twice");
  MC_T_EQ_INT(mc_mesh_rings_compute(g, out_of_range, 2, 2, &rings), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "host 4 at position 1 is not in 0..3");
  MC_T_EQ_INT(mc_mesh_rings_compute(g, identity, 5, 2, &rings), ncclInvalidArgument);
  MC_T_EQ_INT(mc_mesh_rings_compute(g, identity, 0, 2, &rings), ncclInvalidArgument);
  MC_T_EQ_INT(mc_mesh_rings_compute(g, identity, 4, 0, &rings), ncclInvalidArgument);
  MC_T_EQ_INT(mc_mesh_rings_compute(g, identity, 4, MC_MESH_MAX_RINGS + 1, &rings),
              ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "17 rings asked, 1 to 16 are possible");
  MC_T_EQ_INT(mc_mesh_rings_compute(g, NULL, 4, 2, &rings), ncclInvalidArgument);
  MC_T_EQ_INT(rings.n_rings, 0); /* untouched */
  rings = rings_of(g, identity, 4, 2);
  MC_T_EQ_INT(mc_mesh_ring_links(g, &rings, 2, links), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "no ring 2 (2 rings)");
  mc_mesh_graph_destroy(g);

  g = mt_graph(h, mt_two_triangles(h));
  MC_T_EQ_INT(mc_mesh_rings_compute(g, identity, 6, 2, &rings), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "host 0 (00000000000000a0/hostA) cannot reach host 1");
  /* one of the triangles alone is fine */
  {
    static const int ace[3] = {0, 2, 4};

    rings = rings_of(g, ace, 3, 2);
    MC_T_EQ_STR(ring_str(&rings, 0), "0 2 4");
    MC_T_EQ_STR(ring_str(&rings, 1), "0 4 2");
  }
  mc_mesh_graph_destroy(g);
}

MC_T_MAIN(triangle_two_directions, triangle_parallel_cables_round_robin, ring4_cycle_and_reverse,
          ring4_rank_order_against_the_cables, line4_closing_hop_relayed, line10_follows_the_line,
          full_meshes_disjoint_cycles, star_keeps_the_rank_order, partial_meshes_find_their_cycle,
          small_communicators, communicator_on_part_of_the_mesh, ring64_in_scrambled_order,
          grids_and_tori, bad_arguments)
