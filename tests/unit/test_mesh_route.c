/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Mesh routing (src/net/mesh/mesh_route.c) from a graph, without sockets:
 * hop counts in links and full paths on every test cabling, the choice of one
 * of two equal paths per connection on a ring, parallel cables, a link going
 * down and the routes around it, unreachable pairs and their text.
 */
#include "mc_test.h"

#include "mc_mesh_fixture.h"
#include "net/mesh/mesh_graph.h"

#include <string.h>

#define A 0
#define B 1
#define C 2
#define D 3

static struct mc_mesh_route_table *table_of(const struct mc_mesh_graph *g)
{
  struct mc_mesh_route_table *t = NULL;

  MC_T_OK(mc_mesh_route_table_create(g, &t));
  return t;
}

/* The path's hosts as "0 1 2". */
static const char *path_str(const struct mc_mesh_path *p)
{
  static char buf[512];
  size_t used = 0;

  buf[0] = '\0';
  for (int i = 0; i <= p->n_hops; i++)
    used +=
        (size_t)snprintf(buf + used, sizeof(buf) - used, "%s%d", (i == 0) ? "" : " ", p->hosts[i]);
  return buf;
}

static const char *route_str(const struct mc_mesh_route_table *t, int s, int d, uint64_t conn)
{
  struct mc_mesh_path p;

  MC_T_OK(mc_mesh_route_pick(t, s, d, conn, &p));
  return path_str(&p);
}

static void check_hop_matrix(const struct mc_mesh_route_table *t, int n, const int *expected)
{
  for (int s = 0; s < n; s++) {
    for (int d = 0; d < n; d++) {
      if (mc_mesh_route_hops(t, s, d) != expected[s * n + d])
        MC_T_FAIL("hops %d -> %d: %d, expected %d", s, d, mc_mesh_route_hops(t, s, d),
                  expected[s * n + d]);
    }
  }
}

static void triangle_routes_are_direct(void)
{
  struct mc_mesh_host h[3];
  struct mc_mesh_graph *g = mt_graph(h, mt_triangle(h));
  struct mc_mesh_route_table *t = table_of(g);
  static const int hops[9] = {0, 1, 1, 1, 0, 1, 1, 1, 0};
  struct mc_mesh_path p;
  int s = -1;
  int d = -1;

  check_hop_matrix(t, 3, hops);
  for (int a = 0; a < 3; a++) {
    for (int b = 0; b < 3; b++) {
      if (a == b)
        continue;
      MC_T_EQ_INT(mc_mesh_route_next_hop(t, a, b), b);
      MC_T_OK(mc_mesh_route_path(t, a, b, &p));
      MC_T_EQ_INT(p.n_hops, 1);
      MC_T_EQ_INT(p.n_choices, 1);
      MC_T_EQ_INT(p.links[0], mt_link(g, a, b));
    }
  }
  /* A-B is 192.168.101.0/24: A's eth1 and B's eth1 */
  MC_T_OK(mc_mesh_route_path(t, A, B, &p));
  MC_T_EQ_INT(g->links[p.links[0]].addr[0], 0);
  MC_T_EQ_INT(g->links[p.links[0]].addr[1], 0);
  MC_T_TRUE(!mc_mesh_route_find_unreachable(t, &s, &d));
  MC_T_EQ_INT(s, -1);
  mc_mesh_route_table_destroy(t);
  mc_mesh_graph_destroy(g);
}

static void ring4_hops_and_equal_paths(void)
{
  struct mc_mesh_host h[4];
  struct mc_mesh_graph *g = mt_graph(h, mt_ring4(h));
  struct mc_mesh_route_table *t = table_of(g);
  static const int hops[16] = {0, 1, 2, 1, 1, 0, 1, 2, 2, 1, 0, 1, 1, 2, 1, 0};
  struct mc_mesh_path p;
  struct mc_mesh_path again;

  check_hop_matrix(t, 4, hops);
  MC_T_EQ_INT(mc_mesh_route_hops(t, A, B), 1);
  MC_T_EQ_INT(mc_mesh_route_hops(t, A, C), 2);
  MC_T_EQ_INT(mc_mesh_route_hops(t, B, D), 2);
  /* A -> C: via B or via D, by the parity of the connection id */
  MC_T_EQ_INT(mc_mesh_route_next_hop(t, A, C), B);
  MC_T_EQ_STR(route_str(t, A, C, 0), "0 1 2");
  MC_T_EQ_STR(route_str(t, A, C, 1), "0 3 2");
  MC_T_EQ_STR(route_str(t, A, C, 2), "0 1 2");
  MC_T_EQ_STR(route_str(t, A, C, 7), "0 3 2");
  MC_T_EQ_STR(route_str(t, B, D, 0), "1 0 3");
  MC_T_EQ_STR(route_str(t, B, D, 1), "1 2 3");
  MC_T_EQ_STR(route_str(t, D, B, 1), "3 2 1");
  /* one connection always gets the same path, links included */
  MC_T_OK(mc_mesh_route_pick(t, A, C, 12345, &p));
  MC_T_EQ_INT(p.n_choices, 2);
  for (int i = 0; i < 10; i++) {
    MC_T_OK(mc_mesh_route_pick(t, A, C, 12345, &again));
    MC_T_TRUE(memcmp(&p, &again, sizeof(p)) == 0);
  }
  MC_T_EQ_STR(path_str(&p), "0 3 2"); /* odd */
  MC_T_EQ_INT(p.links[0], mt_link(g, A, D));
  MC_T_EQ_INT(p.links[1], mt_link(g, D, C));
  /* neighbours have one shortest path whatever the connection */
  MC_T_EQ_STR(route_str(t, A, B, 1), "0 1");
  MC_T_EQ_STR(route_str(t, A, D, 0), "0 3");
  mc_mesh_route_table_destroy(t);
  mc_mesh_graph_destroy(g);
}

static void line4_paths(void)
{
  struct mc_mesh_host h[4];
  struct mc_mesh_graph *g = mt_graph(h, mt_line4(h));
  struct mc_mesh_route_table *t = table_of(g);
  static const int hops[16] = {0, 1, 2, 3, 1, 0, 1, 2, 2, 1, 0, 1, 3, 2, 1, 0};
  struct mc_mesh_path p;

  check_hop_matrix(t, 4, hops);
  MC_T_EQ_STR(route_str(t, A, C, 0), "0 1 2");
  MC_T_EQ_STR(route_str(t, A, D, 0), "0 1 2 3");
  MC_T_EQ_STR(route_str(t, B, D, 0), "1 2 3");
  MC_T_EQ_STR(route_str(t, D, A, 0), "3 2 1 0");
  MC_T_EQ_STR(route_str(t, D, A, 1), "3 2 1 0"); /* one way only */
  MC_T_EQ_INT(mc_mesh_route_next_hop(t, A, D), B);
  MC_T_EQ_INT(mc_mesh_route_next_hop(t, D, A), C);
  MC_T_EQ_INT(mc_mesh_route_next_hop(t, B, A), A);
  MC_T_OK(mc_mesh_route_path(t, A, D, &p));
  MC_T_EQ_INT(p.n_hops, 3);
  MC_T_EQ_INT(p.links[0], mt_link(g, A, B));
  MC_T_EQ_INT(p.links[1], mt_link(g, B, C));
  MC_T_EQ_INT(p.links[2], mt_link(g, C, D));
  mc_mesh_route_table_destroy(t);
  mc_mesh_graph_destroy(g);
}

/* From one end of a 10-host line to the other: 9 hops, first to the
 * neighbour, through every host in line order (whatever the hash order). */
static void line10_end_to_end(void)
{
  struct mc_mesh_host h[10];
  struct mc_mesh_graph *g = mt_graph(h, mt_line(h, 10));
  struct mc_mesh_route_table *t = table_of(g);
  struct mc_mesh_path p;
  int at[10];

  for (int i = 0; i < 10; i++)
    MC_T_OK(mc_mesh_graph_host_find(g, mt_line_hash(i, 10), &at[i]));
  MC_T_TRUE(at[1] != 1); /* canonical indices are not line positions */
  MC_T_EQ_INT(mc_mesh_route_hops(t, at[0], at[9]), 9);
  MC_T_EQ_INT(mc_mesh_route_next_hop(t, at[0], at[9]), at[1]);
  MC_T_OK(mc_mesh_route_pick(t, at[0], at[9], 1, &p));
  MC_T_EQ_INT(p.n_hops, 9);
  MC_T_EQ_INT(p.n_choices, 1);
  for (int i = 0; i < 10; i++)
    MC_T_EQ_INT(p.hosts[i], at[i]);
  for (int i = 0; i < 10; i++) {
    for (int j = 0; j < 10; j++)
      MC_T_EQ_INT(mc_mesh_route_hops(t, at[i], at[j]), (i < j) ? j - i : i - j);
  }
  mc_mesh_route_table_destroy(t);
  mc_mesh_graph_destroy(g);
}

static void star_leaves_through_the_hub(void)
{
  struct mc_mesh_host h[5];
  struct mc_mesh_graph *g = mt_graph(h, mt_star5(h));
  struct mc_mesh_route_table *t = table_of(g);

  for (int a = 1; a < 5; a++) {
    MC_T_EQ_INT(mc_mesh_route_hops(t, 0, a), 1);
    for (int b = 1; b < 5; b++) {
      char want[16];

      if (a == b)
        continue;
      snprintf(want, sizeof(want), "%d 0 %d", a, b);
      MC_T_EQ_INT(mc_mesh_route_hops(t, a, b), 2);
      MC_T_EQ_STR(route_str(t, a, b, 1), want);
    }
  }
  mc_mesh_route_table_destroy(t);
  mc_mesh_graph_destroy(g);
}

static void partial_meshes_hop_matrices(void)
{
  struct mc_mesh_host h[6];
  struct mc_mesh_graph *g = mt_graph(h, mt_ring5_chord(h));
  struct mc_mesh_route_table *t = table_of(g);
  static const int ring5[25] = {
      0, 1, 1, 2, 1, /* A: B, C (chord), E direct */
      1, 0, 1, 2, 2, /* B */
      1, 1, 0, 1, 2, /* C */
      2, 2, 1, 0, 1, /* D */
      1, 2, 2, 1, 0, /* E */
  };
  static const int ladder[36] = {
      0, 1, 2, 1, 2, 3, /* A-B-C over D-E-F */
      1, 0, 1, 2, 1, 2, /* */
      2, 1, 0, 3, 2, 1, /* */
      1, 2, 3, 0, 1, 2, /* */
      2, 1, 2, 1, 0, 1, /* */
      3, 2, 1, 2, 1, 0, /* */
  };
  struct mc_mesh_path p;

  check_hop_matrix(t, 5, ring5);
  MC_T_EQ_STR(route_str(t, 0, 3, 0), "0 2 3"); /* over the chord */
  MC_T_EQ_STR(route_str(t, 0, 3, 1), "0 4 3");
  MC_T_EQ_STR(route_str(t, 1, 4, 1), "1 0 4");
  mc_mesh_route_table_destroy(t);
  mc_mesh_graph_destroy(g);

  g = mt_graph(h, mt_ladder6(h));
  t = table_of(g);
  check_hop_matrix(t, 6, ladder);
  MC_T_OK(mc_mesh_route_path(t, 0, 5, &p));
  MC_T_EQ_STR(path_str(&p), "0 1 2 5");
  MC_T_EQ_INT(p.n_choices, 2);
  MC_T_EQ_STR(route_str(t, 0, 5, 1), "0 3 4 5");
  MC_T_EQ_STR(route_str(t, 5, 0, 0), "5 2 1 0");
  MC_T_EQ_STR(route_str(t, 5, 0, 1), "5 4 1 0");
  mc_mesh_route_table_destroy(t);
  mc_mesh_graph_destroy(g);
}

static void disconnected_pair_is_named(void)
{
  struct mc_mesh_host h[6];
  struct mc_mesh_graph *g = mt_graph(h, mt_two_triangles(h));
  struct mc_mesh_route_table *t = table_of(g);
  struct mc_mesh_path p;
  char text[512];
  int s = -1;
  int d = -1;

  MC_T_EQ_INT(g->shape, MC_MESH_SHAPE_DISCONNECTED);
  MC_T_EQ_INT(mc_mesh_route_hops(t, 0, 1), -1);
  MC_T_EQ_INT(mc_mesh_route_next_hop(t, 0, 1), -1);
  MC_T_EQ_INT(mc_mesh_route_hops(t, 0, 4), 1);
  MC_T_EQ_INT(mc_mesh_route_hops(t, 1, 5), 1);
  MC_T_TRUE(mc_mesh_route_find_unreachable(t, &s, &d));
  MC_T_EQ_INT(s, 0);
  MC_T_EQ_INT(d, 1);
  mc_mesh_route_unreachable_str(g, s, d, text, sizeof(text));
  MC_T_CONTAINS(text, "host 0 (00000000000000a0/hostA) cannot reach host 1 "
                      "(00000000000000b1/hostB): host 0 reaches hosts 0,2,4 only");
  memset(&p, 0x5a, sizeof(p));
  MC_T_EQ_INT(mc_mesh_route_pick(t, 3, 2, 0, &p), ncclRemoteError);
  MC_T_CONTAINS(mc_t_last_error(), "host 3 (00000000000000d3/hostD) cannot reach host 2");
  MC_T_EQ_INT(p.n_hops, 0x5a5a5a5a); /* untouched */
  mc_mesh_route_table_destroy(t);
  mc_mesh_graph_destroy(g);
}

/* The A-B cable of the 4-ring fails: A reaches B the other way round. */
static void link_down_reroutes(void)
{
  struct mc_mesh_host h[4];
  struct mc_mesh_graph *g = mt_graph(h, mt_ring4(h));
  struct mc_mesh_route_table *t = table_of(g);
  int ab = mt_link(g, A, B);
  struct mc_mesh_path p;

  MC_T_OK(mc_mesh_graph_link_set_down(g, ab));
  MC_T_EQ_INT(mc_mesh_route_hops(t, A, B), 1); /* a snapshot until recomputed */
  mc_mesh_route_table_compute(t, g);
  MC_T_EQ_INT(mc_mesh_route_hops(t, A, B), 3);
  MC_T_OK(mc_mesh_route_path(t, A, B, &p));
  MC_T_EQ_STR(path_str(&p), "0 3 2 1");
  MC_T_EQ_INT(p.links[0], mt_link(g, A, D));
  MC_T_EQ_INT(p.links[1], mt_link(g, D, C));
  MC_T_EQ_INT(p.links[2], mt_link(g, C, B));
  /* A -> C has one shortest path left, whatever the connection */
  MC_T_EQ_STR(route_str(t, A, C, 0), "0 3 2");
  MC_T_EQ_STR(route_str(t, A, C, 1), "0 3 2");
  MC_T_EQ_STR(route_str(t, B, A, 0), "1 2 3 0");

  MC_T_OK(mc_mesh_graph_link_set_up(g, ab));
  mc_mesh_route_table_compute(t, g);
  MC_T_EQ_STR(route_str(t, A, B, 0), "0 1");
  MC_T_EQ_STR(route_str(t, A, C, 1), "0 3 2");
  mc_mesh_route_table_destroy(t);
  mc_mesh_graph_destroy(g);
}

/* Two cables between A and B: connections alternate between them; with two
 * equal directions, the cable choice is independent of the direction. */
static void parallel_cables_share_connections(void)
{
  struct mc_mesh_host h[4];
  struct mc_mesh_graph *g;
  struct mc_mesh_route_table *t;
  struct mc_mesh_path p;
  int seen[4] = {0};

  mt_pair2(h);
  g = mt_graph(h, 2);
  t = table_of(g);
  for (uint64_t conn = 0; conn < 4; conn++) {
    MC_T_OK(mc_mesh_route_pick(t, A, B, conn, &p));
    MC_T_EQ_INT(p.links[0], (int)(conn % 2));
  }
  mc_mesh_route_table_destroy(t);
  mc_mesh_graph_destroy(g);

  /* 4-ring with two cables on A-B: A -> C over (direction, cable) pairs */
  mt_ring4(h);
  mt_addr(&h[0], "eth3", "192.168.110.1", 24, MT_FAST);
  mt_addr(&h[1], "eth3", "192.168.110.2", 24, MT_FAST);
  g = mt_graph(h, 4);
  t = table_of(g);
  for (uint64_t conn = 0; conn < 4; conn++) {
    MC_T_OK(mc_mesh_route_pick(t, A, C, conn, &p));
    if (p.hosts[1] == B)
      seen[(g->links[p.links[0]].addr[0] == 0) ? 0 : 1]++;
    else
      seen[2]++;
  }
  MC_T_EQ_INT(seen[0], 1);
  MC_T_EQ_INT(seen[1], 1);
  MC_T_EQ_INT(seen[2], 2);
  mc_mesh_route_table_destroy(t);
  mc_mesh_graph_destroy(g);
}

static void bad_arguments(void)
{
  struct mc_mesh_host h[4];
  struct mc_mesh_graph *g = mt_graph(h, mt_ring4(h));
  struct mc_mesh_route_table *t = table_of(g);
  struct mc_mesh_route_table *none = NULL;
  struct mc_mesh_path p;

  MC_T_OK(mc_mesh_route_pick(t, C, C, 9, &p));
  MC_T_EQ_INT(p.n_hops, 0);
  MC_T_EQ_INT(p.hosts[0], C);
  MC_T_EQ_INT(mc_mesh_route_hops(t, C, C), 0);
  MC_T_EQ_INT(mc_mesh_route_next_hop(t, C, C), -1);
  MC_T_EQ_INT(mc_mesh_route_hops(t, 0, 4), -1);
  MC_T_EQ_INT(mc_mesh_route_next_hop(t, -1, 0), -1);
  MC_T_EQ_INT(mc_mesh_route_pick(t, 0, 4, 0, &p), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "no route for hosts 0 -> 4 (4 hosts)");
  MC_T_EQ_INT(mc_mesh_route_pick(t, 0, 1, 0, NULL), ncclInvalidArgument);
  MC_T_EQ_INT(mc_mesh_route_table_create(NULL, &none), ncclInvalidArgument);
  MC_T_NULL(none);
  mc_mesh_route_table_destroy(NULL);
  mc_mesh_route_table_destroy(t);
  mc_mesh_graph_destroy(g);
}

MC_T_MAIN(triangle_routes_are_direct, ring4_hops_and_equal_paths, line4_paths, line10_end_to_end,
          star_leaves_through_the_hub, partial_meshes_hop_matrices, disconnected_pair_is_named,
          link_down_reroutes, parallel_cables_share_connections, bad_arguments)
