/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Mesh shapes for the unit tests of src/net/mesh: hosts with the addresses
 * of a triangle, a ring and a line of four, a star, partial meshes, two
 * disjoint triangles and lines of any length, one subnet per cable. Host
 * hashes are chosen so that the canonical order is the order of the letters
 * (A=0, B=1, ...) unless a fixture says otherwise.
 */
#ifndef MC_MESH_FIXTURE_H
#define MC_MESH_FIXTURE_H

#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "mc_test.h"
#include "net/mesh/mesh_graph.h"

#define MT_FAST 100000 /* Mb/s of the test cables */

static inline void mt_host(struct mc_mesh_host *h, uint64_t hash, const char *name)
{
  memset(h, 0, sizeof(*h));
  h->host_hash = hash;
  snprintf(h->name, sizeof(h->name), "%s", name);
}

/* Adds "ip/prefix" (IPv6 when ip has a ':') on interface if_name. */
static inline void mt_addr(struct mc_mesh_host *h, const char *if_name, const char *ip, int prefix,
                           int speed_mbps)
{
  struct mc_mesh_addr *a = &h->addrs[h->n_addrs++];

  memset(a, 0, sizeof(*a));
  a->family = (strchr(ip, ':') != NULL) ? AF_INET6 : AF_INET;
  if (inet_pton(a->family, ip, a->bytes) != 1)
    MC_T_FAIL("bad test address %s", ip);
  a->prefix_len = prefix;
  a->speed_mbps = speed_mbps;
  snprintf(a->if_name, sizeof(a->if_name), "%s", if_name);
}

/* Host letter i (A=0) with its hash and name "hostA". */
static inline void mt_letter(struct mc_mesh_host *h, int i)
{
  char name[16];

  snprintf(name, sizeof(name), "host%c", 'A' + i);
  mt_host(h, 0xa0 + 0x11 * (uint64_t)i, name);
}

/* Two hosts with two parallel cables: A-B over 10.0.1.0/24 (eth1, A .1,
 * B .2) and 10.0.2.0/24 (eth2, A .1, B .2). */
static inline int mt_pair2(struct mc_mesh_host *h)
{
  mt_letter(&h[0], 0);
  mt_letter(&h[1], 1);
  mt_addr(&h[0], "eth1", "10.0.1.1", 24, MT_FAST);
  mt_addr(&h[0], "eth2", "10.0.2.1", 24, MT_FAST);
  mt_addr(&h[1], "eth1", "10.0.1.2", 24, MT_FAST);
  mt_addr(&h[1], "eth2", "10.0.2.2", 24, MT_FAST);
  return 2;
}

/* Triangle: A-B 192.168.101.0/24 (A .2, B .3), A-C 192.168.100.0/24 (A .2,
 * C .3), B-C 192.168.102.0/24 (B .2, C .3). */
static inline int mt_triangle(struct mc_mesh_host *h)
{
  for (int i = 0; i < 3; i++)
    mt_letter(&h[i], i);
  mt_addr(&h[0], "eth1", "192.168.101.2", 24, MT_FAST);
  mt_addr(&h[0], "eth2", "192.168.100.2", 24, MT_FAST);
  mt_addr(&h[1], "eth1", "192.168.101.3", 24, MT_FAST);
  mt_addr(&h[1], "eth2", "192.168.102.2", 24, MT_FAST);
  mt_addr(&h[2], "eth1", "192.168.100.3", 24, MT_FAST);
  mt_addr(&h[2], "eth2", "192.168.102.3", 24, MT_FAST);
  return 3;
}

/* Ring of four cables A-B-C-D-A: A {100.1, 103.1}, B {100.2, 101.1},
 * C {101.2, 102.1}, D {102.2, 103.2} under 192.168, all /24. */
static inline int mt_ring4(struct mc_mesh_host *h)
{
  for (int i = 0; i < 4; i++)
    mt_letter(&h[i], i);
  mt_addr(&h[0], "eth1", "192.168.100.1", 24, MT_FAST);
  mt_addr(&h[0], "eth2", "192.168.103.1", 24, MT_FAST);
  mt_addr(&h[1], "eth1", "192.168.100.2", 24, MT_FAST);
  mt_addr(&h[1], "eth2", "192.168.101.1", 24, MT_FAST);
  mt_addr(&h[2], "eth1", "192.168.101.2", 24, MT_FAST);
  mt_addr(&h[2], "eth2", "192.168.102.1", 24, MT_FAST);
  mt_addr(&h[3], "eth1", "192.168.102.2", 24, MT_FAST);
  mt_addr(&h[3], "eth2", "192.168.103.2", 24, MT_FAST);
  return 4;
}

/* Line A-B-C-D: A {100}, B {100, 101}, C {101, 102}, D {102}. */
static inline int mt_line4(struct mc_mesh_host *h)
{
  for (int i = 0; i < 4; i++)
    mt_letter(&h[i], i);
  mt_addr(&h[0], "eth1", "192.168.100.1", 24, MT_FAST);
  mt_addr(&h[1], "eth1", "192.168.100.2", 24, MT_FAST);
  mt_addr(&h[1], "eth2", "192.168.101.1", 24, MT_FAST);
  mt_addr(&h[2], "eth1", "192.168.101.2", 24, MT_FAST);
  mt_addr(&h[2], "eth2", "192.168.102.1", 24, MT_FAST);
  mt_addr(&h[3], "eth1", "192.168.102.2", 24, MT_FAST);
  return 4;
}

/* Links between letter hosts given as pairs "AB", "BC"...: pair k is subnet
 * 10.0.k.0/24, the first host .1, the second .2. */
static inline int mt_pairs(struct mc_mesh_host *h, int n, const char *const *pairs, int n_pairs)
{
  for (int i = 0; i < n; i++)
    mt_letter(&h[i], i);
  for (int k = 0; k < n_pairs; k++) {
    char ip[32];
    char ifn[16];
    struct mc_mesh_host *a = &h[pairs[k][0] - 'A'];
    struct mc_mesh_host *b = &h[pairs[k][1] - 'A'];

    snprintf(ifn, sizeof(ifn), "eth%d", a->n_addrs + 1);
    snprintf(ip, sizeof(ip), "10.0.%d.1", k);
    mt_addr(a, ifn, ip, 24, MT_FAST);
    snprintf(ifn, sizeof(ifn), "eth%d", b->n_addrs + 1);
    snprintf(ip, sizeof(ip), "10.0.%d.2", k);
    mt_addr(b, ifn, ip, 24, MT_FAST);
  }
  return n;
}

/* Star: hub A, leaves B..E. */
static inline int mt_star5(struct mc_mesh_host *h)
{
  static const char *const pairs[] = {"AB", "AC", "AD", "AE"};

  return mt_pairs(h, 5, pairs, 4);
}

/* Ring A-B-C-D-E-A with the chord A-C. */
static inline int mt_ring5_chord(struct mc_mesh_host *h)
{
  static const char *const pairs[] = {"AB", "BC", "CD", "DE", "EA", "AC"};

  return mt_pairs(h, 5, pairs, 6);
}

/* Ladder of six: A-B-C over D-E-F, rungs A-D, B-E, C-F. */
static inline int mt_ladder6(struct mc_mesh_host *h)
{
  static const char *const pairs[] = {"AB", "BC", "DE", "EF", "AD", "BE", "CF"};

  return mt_pairs(h, 6, pairs, 7);
}

/* Two triangles A-C-E and B-D-F, no link between them. */
static inline int mt_two_triangles(struct mc_mesh_host *h)
{
  static const char *const pairs[] = {"AC", "CE", "EA", "BD", "DF", "FB"};

  return mt_pairs(h, 6, pairs, 6);
}

/* Every pair of n hosts linked. */
static inline int mt_full(struct mc_mesh_host *h, int n)
{
  static const char *const pairs[] = {"AB", "AC", "AD", "AE", "BC", "BD", "BE", "CD", "CE", "DE"};
  const char *sel[10];
  int n_sel = 0;

  for (int k = 0; k < 10; k++) {
    if ((pairs[k][0] - 'A' < n) && (pairs[k][1] - 'A' < n))
      sel[n_sel++] = pairs[k];
  }
  return mt_pairs(h, n, sel, n_sel);
}

/* Hash of the host at position i of an n-host line: positions are scrambled
 * in hash order (i * 7 mod n, for n not a multiple of 7). */
static inline uint64_t mt_line_hash(int i, int n)
{
  return 0x1000 + (uint64_t)((i * 7) % n);
}

/* Line of n hosts (n <= 64), link i between positions i and i+1 on
 * 10.1.i.0/24, hashes from mt_line_hash. */
static inline int mt_line(struct mc_mesh_host *h, int n)
{
  for (int i = 0; i < n; i++) {
    char name[16];

    snprintf(name, sizeof(name), "line%d", i);
    mt_host(&h[i], mt_line_hash(i, n), name);
  }
  for (int i = 0; i + 1 < n; i++) {
    char ip[32];

    snprintf(ip, sizeof(ip), "10.1.%d.1", i);
    mt_addr(&h[i], "eth1", ip, 24, MT_FAST);
    snprintf(ip, sizeof(ip), "10.1.%d.2", i);
    mt_addr(&h[i + 1], "eth2", ip, 24, MT_FAST);
  }
  return n;
}

/* R x C hosts in a grid (wrap: a torus), host r*C+c, link k on
 * 10.3+k/256.k%256.0/24. */
static inline int mt_grid(struct mc_mesh_host *h, int rows, int cols, bool wrap)
{
  int k = 0;

  for (int i = 0; i < rows * cols; i++) {
    char name[16];

    snprintf(name, sizeof(name), "g%d", i);
    mt_host(&h[i], 0x7000 + (uint64_t)i, name);
  }
  for (int r = 0; r < rows; r++) {
    for (int c = 0; c < cols; c++) {
      int right = ((c + 1 < cols) || wrap) ? r * cols + (c + 1) % cols : -1;
      int down = ((r + 1 < rows) || wrap) ? ((r + 1) % rows) * cols + c : -1;
      int to[2] = {right, down};

      for (int i = 0; i < 2; i++) {
        char ip[32];

        if (to[i] < 0)
          continue;
        snprintf(ip, sizeof(ip), "10.%d.%d.1", 3 + k / 256, k % 256);
        mt_addr(&h[r * cols + c], "eth", ip, 24, MT_FAST);
        snprintf(ip, sizeof(ip), "10.%d.%d.2", 3 + k / 256, k % 256);
        mt_addr(&h[to[i]], "eth", ip, 24, MT_FAST);
        k++;
      }
    }
  }
  return rows * cols;
}

static inline struct mc_mesh_graph *mt_graph(const struct mc_mesh_host *h, int n)
{
  struct mc_mesh_graph *g = NULL;

  MC_T_OK(mc_mesh_graph_create(h, n, 0, &g));
  return g;
}

/* The graph's text (mc_mesh_graph_print) in buf. */
static inline void mt_print(const struct mc_mesh_graph *g, char *buf, size_t buf_bytes)
{
  char *text = NULL;
  size_t text_bytes = 0;
  FILE *f = open_memstream(&text, &text_bytes);

  MC_T_TRUE(f != NULL);
  MC_T_OK(mc_mesh_graph_print(g, f));
  fclose(f);
  snprintf(buf, buf_bytes, "%s", text);
  if (text_bytes >= buf_bytes)
    MC_T_FAIL("graph print of %zu bytes does not fit %zu", text_bytes, buf_bytes);
  free(text);
}

/* The one link between hosts a and b (fails the case when there is not
 * exactly one usable link). */
static inline int mt_link(const struct mc_mesh_graph *g, int a, int b)
{
  int links[MC_MESH_MAX_PAIR_LINKS];

  MC_T_EQ_INT(mc_mesh_graph_usable_links(g, a, b, links), 1);
  return links[0];
}

#endif /* MC_MESH_FIXTURE_H */
