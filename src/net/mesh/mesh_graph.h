/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mesh net's pure logic: hosts cabled directly to each other, one IP
 * subnet per cable (a triangle of three hosts, a ring or a line of four, a
 * star, a partial mesh), no switch and no IP forwarding. Traffic between two
 * hosts without a cable between them is relayed by the hosts on its route.
 *
 * From every host's identity and mesh addresses (as the hosts exchange them
 * at init) this module derives, identically on every host:
 *   - the graph: hosts in a canonical order (sorted by host hash), the links
 *     (two addresses of two hosts on one subnet), the shape of the cabling;
 *   - the routing table: hops counted in links (a direct neighbour is 1 hop),
 *     next hop and full path for every pair, and the choice of one of several
 *     equal shortest paths per connection (mesh_route.c);
 *   - the host orders of channel rings that follow the cables, and the link
 *     every ring hop uses (mesh_rings.c).
 * Host numbers in every function are canonical indices (0 .. n_hosts-1 in
 * host-hash order), never a caller's array positions, so that they mean the
 * same thing on every host.
 *
 * Thread-safety: every function is a pure function over caller-owned data,
 * with no global state. A graph or a routing table may be read by several
 * threads at once while nobody modifies it; mc_mesh_graph_link_set_down/up
 * and mc_mesh_route_table_compute modify their first argument and need
 * exclusive access to it. Nothing blocks. Errors are recorded with MC_FAIL
 * (one WARN at the point of detection, text kept for ncclGetLastError).
 */
#ifndef MC_NET_MESH_GRAPH_H
#define MC_NET_MESH_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nccl.h"

/* Hosts in one mesh; bounds every per-host array and every path. */
#define MC_MESH_MAX_HOSTS 64
/* Mesh addresses of one host (one per cable end, parallel cables included). */
#define MC_MESH_MAX_ADDRS 8
/* Links of one mesh. A cable gives one link, so 64 hosts with 8 cable ends
 * each give at most 256; the bound also admits one subnet shared by all 64
 * hosts (2016 links between them). */
#define MC_MESH_MAX_LINKS 2048
/* Links between one pair of hosts: every address of one against every
 * address of the other. */
#define MC_MESH_MAX_PAIR_LINKS (MC_MESH_MAX_ADDRS * MC_MESH_MAX_ADDRS)
/* Channel rings computed at most (each with its own direction or links): 8
 * cable-disjoint cycles, each both ways; every ring becomes a channel, and
 * NCCL's MAXCHANNELS (64) is far above it. */
#define MC_MESH_MAX_RINGS 16
/* IFNAMSIZ, with the terminating NUL. */
#define MC_MESH_IFNAME_BYTES 16
/* Host names as NCCL prints them (up to the first '.'), with the NUL. */
#define MC_MESH_HOST_NAME_BYTES 64
/*
 * Default speed (Mb/s) from which a link is a fast (data) lane. Direct-cabled
 * clusters carry collectives over 40, 50, 100, 200 or 400 Gb/s NICs, while
 * 1, 10 and 25 Gb/s ports are management networks; 40000 separates the two
 * groups with 40G on the data side.
 */
#define MC_MESH_FAST_THRESHOLD_MBPS 40000
/* Extension steps allowed to one ring search (a count, not a time, so that
 * every host stops at the same point and gets the same result). */
#define MC_MESH_RING_SEARCH_BUDGET 200000

/* ------------------------------------------------------------------ lanes */

enum mc_mesh_lane {
  MC_MESH_LANE_UNKNOWN = 0, /* speed not reported (<= 0), e.g. virtual NICs */
  MC_MESH_LANE_MGMT = 1,    /* below the fast threshold: management traffic */
  MC_MESH_LANE_FAST = 2     /* at or above the fast threshold: collectives */
};

/* The lane of a link of speed_mbps Mb/s: UNKNOWN when speed_mbps <= 0, MGMT
 * below fast_threshold_mbps, FAST from it on (inclusive).
 * fast_threshold_mbps <= 0 means MC_MESH_FAST_THRESHOLD_MBPS. */
enum mc_mesh_lane mc_mesh_lane_of(int speed_mbps, int fast_threshold_mbps);

/* "unknown", "mgmt", "fast"; "?" for a value outside the enum. Static text. */
const char *mc_mesh_lane_str(enum mc_mesh_lane lane);

/* ------------------------------------------------------------------ input */

/* One mesh address of a host: one end of a cable. */
struct mc_mesh_addr {
  int family;                         /* AF_INET or AF_INET6 */
  uint8_t bytes[16];                  /* network byte order; AF_INET uses the first 4 */
  int prefix_len;                     /* 0..32 (AF_INET) or 0..128 (AF_INET6) */
  int speed_mbps;                     /* link speed the NIC reports; <= 0 when unknown */
  char if_name[MC_MESH_IFNAME_BYTES]; /* "eth1"; for messages only */
};

/* One host as it announces itself to the others. */
struct mc_mesh_host {
  uint64_t host_hash;                 /* NCCL's hostHash: unique per host */
  char name[MC_MESH_HOST_NAME_BYTES]; /* host name for messages; may be "" */
  int n_addrs;                        /* 0..MC_MESH_MAX_ADDRS */
  struct mc_mesh_addr addrs[MC_MESH_MAX_ADDRS];
};

/* "192.168.100.1/24" or "fd00:1::2/64" into buf (always NUL-terminated;
 * "?" for an unknown family). */
void mc_mesh_addr_str(const struct mc_mesh_addr *addr, char *buf, size_t buf_bytes);

/* ------------------------------------------------------------------ graph */

/* Two addresses of two different hosts on the same subnet: same family, same
 * prefix length, equal network part, different addresses. */
struct mc_mesh_link {
  int host[2];        /* canonical host indices, host[0] < host[1] */
  int addr[2];        /* index of the link's address in each host's addrs[] */
  int family;         /* AF_INET or AF_INET6 */
  uint8_t subnet[16]; /* network part of the addresses, host bits zero */
  int prefix_len;
  int speed_mbps;         /* slower end's speed; 0 when either end is unknown */
  enum mc_mesh_lane lane; /* lane of speed_mbps against the graph's threshold */
  bool is_up;             /* false after mc_mesh_graph_link_set_down */
};

enum mc_mesh_shape {
  MC_MESH_SHAPE_SINGLE = 0,   /* one host */
  MC_MESH_SHAPE_FULL,         /* every pair linked (two hosts, the triangle...) */
  MC_MESH_SHAPE_RING,         /* n >= 4, one cycle through every host */
  MC_MESH_SHAPE_LINE,         /* n >= 3, a chain: two ends of degree 1, others 2 */
  MC_MESH_SHAPE_STAR,         /* n >= 4, one hub linked to all, others only to it */
  MC_MESH_SHAPE_PARTIAL,      /* connected, none of the above */
  MC_MESH_SHAPE_DISCONNECTED, /* some host cannot reach another */
};

/* "single", "full", "ring", "line", "star", "partial", "disconnected"; "?"
 * for a value outside the enum. Static text. */
const char *mc_mesh_shape_str(enum mc_mesh_shape shape);

/*
 * The mesh. Every field is computed by mc_mesh_graph_create and kept
 * consistent by the link_set_down/up calls; callers read it and never write
 * it. Degrees, adjacency and shape count only links that are up; a degree
 * counts distinct neighbour hosts, not parallel links.
 */
#define MC_MESH_LABEL_BYTES 160

struct mc_mesh_graph {
  int n_hosts;
  /* How messages name each host ("host 2 (h2, ranks 4-5)": the user's
   * numbering), set by mc_mesh_graph_set_label; "" names it by its index here,
   * hash and name. */
  char labels[MC_MESH_MAX_HOSTS][MC_MESH_LABEL_BYTES];
  struct mc_mesh_host hosts[MC_MESH_MAX_HOSTS]; /* canonical order: ascending host_hash */
  int input_index[MC_MESH_MAX_HOSTS]; /* position of each host in the create call's array */
  int fast_threshold_mbps;
  int n_links;
  /* Ordered by (host[0], host[1], addr[0], addr[1]): a link's index is the
   * same on every host. */
  struct mc_mesh_link links[MC_MESH_MAX_LINKS];
  uint8_t n_up_between[MC_MESH_MAX_HOSTS][MC_MESH_MAX_HOSTS]; /* up links per pair */
  int degree[MC_MESH_MAX_HOSTS];
  enum mc_mesh_shape shape;
};

/*
 * Builds the graph of n_hosts hosts given in any order: sorts them by host
 * hash, finds every link (parallel cables between two hosts are kept as
 * separate links; an address alone on its subnet and an address equal to
 * another host's link nothing), classifies the shape. All links start up.
 * hosts: in, not retained. fast_threshold_mbps: see mc_mesh_lane_of.
 * *graph_out: receives a graph owned by the caller (mc_mesh_graph_destroy);
 * untouched on failure. The result depends only on the set of hosts, not on
 * their order in the array.
 * Errors: ncclInvalidArgument for NULL pointers, n_hosts outside
 * 1..MC_MESH_MAX_HOSTS, a host with more than MC_MESH_MAX_ADDRS addresses or
 * an address with a bad family or prefix (each naming the host and the
 * count or value); ncclInvalidUsage when two hosts report the same host hash
 * or the mesh has more than MC_MESH_MAX_LINKS links; ncclSystemError when out
 * of memory.
 */
ncclResult_t mc_mesh_graph_create(const struct mc_mesh_host *hosts, int n_hosts,
                                  int fast_threshold_mbps, struct mc_mesh_graph **graph_out);

/* Frees a graph of mc_mesh_graph_create; NULL is a no-op. */
void mc_mesh_graph_destroy(struct mc_mesh_graph *graph);

/* The canonical index of the host with host_hash into *host_out.
 * Errors: ncclInvalidArgument when no host has that hash (*host_out untouched). */
ncclResult_t mc_mesh_graph_host_find(const struct mc_mesh_graph *graph, uint64_t host_hash,
                                     int *host_out);

/* The host's label when one was set, else "host 2 (00000000000000c3/nodec)"
 * (or "host 2 (00000000000000c3)" without a name) into buf, always
 * NUL-terminated. host must be a valid index. */
void mc_mesh_graph_host_str(const struct mc_mesh_graph *graph, int host, char *buf,
                            size_t buf_bytes);

/* Sets how messages name host (an index; label copied, truncated to
 * MC_MESH_LABEL_BYTES - 1). */
void mc_mesh_graph_set_label(struct mc_mesh_graph *graph, int host, const char *label);

/*
 * The links traffic between hosts a and b should use: those that are up, of
 * the best lane among them (fast, then unknown, then management), in index
 * order, into links_out; returns their count (0 when the hosts are not
 * linked, are the same host or an index is out of range).
 */
int mc_mesh_graph_usable_links(const struct mc_mesh_graph *graph, int a, int b,
                               int links_out[MC_MESH_MAX_PAIR_LINKS]);

/* Hops (links crossed) from src to every host over links that are up, into
 * hops_out[0..n_hosts-1]: 0 for src itself, -1 for a host src cannot reach.
 * src must be a valid index. */
void mc_mesh_graph_hops_from(const struct mc_mesh_graph *graph, int src,
                             int hops_out[MC_MESH_MAX_HOSTS]);

/*
 * Marks link `link` down (a failed cable or NIC) or up again, and updates the
 * degrees, adjacency and shape. Routing tables computed before keep their
 * routes until mc_mesh_route_table_compute is run again on the graph.
 * Errors: ncclInvalidArgument when link is not in 0..n_links-1.
 */
ncclResult_t mc_mesh_graph_link_set_down(struct mc_mesh_graph *graph, int link);
ncclResult_t mc_mesh_graph_link_set_up(struct mc_mesh_graph *graph, int link);

/*
 * Writes the graph for tools and logs, in plain text that depends only on
 * the graph: the hosts with their addresses, the links (both ends'
 * interfaces and addresses, speed, lane, down), the shape, the route of
 * every ordered pair (hops and path), and the rings of mesh_rings.c for the
 * canonical host order with the link of every hop.
 * Errors: ncclSystemError when out of memory (the routing table is
 * allocated), ncclInvalidArgument for NULL pointers.
 */
ncclResult_t mc_mesh_graph_print(const struct mc_mesh_graph *graph, FILE *out);

/* ---------------------------------------------------------------- routing */

/*
 * Shortest routes between every pair of hosts of a graph, by breadth-first
 * search over links that are up. Among equal shortest routes the default one
 * takes, at every host, the neighbour with the lowest canonical index, so
 * every host derives the same table; the full path of a pair is the chain of
 * next hops, so a relay that forwards by its own table follows the path the
 * source chose. The table is a snapshot: it does not refer to the graph.
 */
struct mc_mesh_route_table;

/* A route: the hosts it visits and the link of each hop. */
struct mc_mesh_path {
  int n_hops;                   /* links crossed; 0 when source and destination are the same host */
  int n_choices;                /* equal shortest first hops the route was chosen among */
  int hosts[MC_MESH_MAX_HOSTS]; /* n_hops + 1 canonical indices, source first */
  int links[MC_MESH_MAX_HOSTS - 1]; /* link index of hop i (hosts[i] -> hosts[i + 1]) */
};

/* Allocates a table and computes it for graph (in, not retained).
 * *table_out: owned by the caller (mc_mesh_route_table_destroy), untouched on
 * failure. Errors: ncclInvalidArgument for NULL pointers, ncclSystemError
 * when out of memory. */
ncclResult_t mc_mesh_route_table_create(const struct mc_mesh_graph *graph,
                                        struct mc_mesh_route_table **table_out);

/* Frees a table; NULL is a no-op. */
void mc_mesh_route_table_destroy(struct mc_mesh_route_table *table);

/* Recomputes table in place from graph (e.g. after a link went down). */
void mc_mesh_route_table_compute(struct mc_mesh_route_table *table,
                                 const struct mc_mesh_graph *graph);

/* Hops from src to dst: 0 for src == dst, -1 when dst is unreachable or an
 * index is out of range. */
int mc_mesh_route_hops(const struct mc_mesh_route_table *table, int src, int dst);

/* The first host after src on the default route to dst; -1 when src == dst,
 * dst is unreachable or an index is out of range. */
int mc_mesh_route_next_hop(const struct mc_mesh_route_table *table, int src, int dst);

/*
 * The route one connection from src to dst uses, into *path_out. Among the
 * neighbours of src that start a shortest route, the (conn_id mod count)-th
 * in canonical order is taken; from there the default route follows. So
 * consecutive connection ids alternate between the two directions to the
 * opposite host of a ring, while one connection always gets the same route
 * (its messages are never reordered) as long as the table is not recomputed.
 * Between two hosts with several usable links (mc_mesh_graph_usable_links)
 * each hop takes the ((conn_id / n_choices) mod count)-th. conn_id 0 gives
 * the default route.
 * Errors: ncclInvalidArgument for an index out of range or NULL pointers;
 * ncclRemoteError when dst is unreachable from src (naming both hosts).
 * *path_out is untouched on failure.
 */
ncclResult_t mc_mesh_route_pick(const struct mc_mesh_route_table *table, int src, int dst,
                                uint64_t conn_id, struct mc_mesh_path *path_out);

/* The default route from src to dst (mc_mesh_route_pick with conn_id 0). */
ncclResult_t mc_mesh_route_path(const struct mc_mesh_route_table *table, int src, int dst,
                                struct mc_mesh_path *path_out);

/* The first ordered pair (lowest src, then lowest dst) of hosts that cannot
 * reach each other: true and the pair in *src_out, *dst_out; false (outputs
 * untouched) when every host reaches every other. */
bool mc_mesh_route_find_unreachable(const struct mc_mesh_route_table *table, int *src_out,
                                    int *dst_out);

/* The text of an unreachable pair for the caller's error, into buf:
 * "host 0 (...) cannot reach host 3 (...): host 0 reaches hosts 0-2 only over
 * links that are up". */
void mc_mesh_route_unreachable_str(const struct mc_mesh_graph *graph, int src, int dst, char *buf,
                                   size_t buf_bytes);

/* ------------------------------------------------------------------ rings */

/* How the rings were found. */
enum mc_mesh_rings_kind {
  MC_MESH_RINGS_CYCLE = 0, /* cycles over direct links: nothing relayed */
  MC_MESH_RINGS_PATH,      /* a chain over direct links, closed by one relayed hop */
  MC_MESH_RINGS_ORDER      /* the communicator's order as given */
};

/* "cycle", "path", "order"; "?" outside the enum. Static text. */
const char *mc_mesh_rings_kind_str(enum mc_mesh_rings_kind kind);

struct mc_mesh_ring {
  int hosts[MC_MESH_MAX_HOSTS]; /* n_hosts canonical indices; hop i is hosts[i] -> hosts[i+1],
                                   the last hop hosts[n-1] -> hosts[0] */
  int n_relayed;                /* hops whose hosts have no usable link between them */
  int relay_edges;              /* links those relayed hops cross along their shortest routes */
};

struct mc_mesh_rings {
  int n_hosts;  /* hosts of the communicator, as given */
  int n_rings;  /* 1..max_rings */
  int n_cycles; /* distinct link-disjoint cycles found (0 unless kind is CYCLE) */
  enum mc_mesh_rings_kind kind;
  bool is_search_cut; /* a search ran out of MC_MESH_RING_SEARCH_BUDGET */
  struct mc_mesh_ring rings[MC_MESH_MAX_RINGS];
};

/*
 * Host orders for channel rings over the communicator's hosts, such that
 * consecutive hosts (and the last and the first) are directly linked
 * whenever the cabling allows it. order[0..n_order-1] are the canonical
 * indices of the communicator's hosts in rank order; every ring starts at
 * order[0].
 *   - A cycle through every host over usable links is searched by
 *     backtracking, bounded by MC_MESH_RING_SEARCH_BUDGET steps: half of it
 *     trying neighbours in the communicator's order (so an order that
 *     already follows the cables is kept), then, if that half ran out, half
 *     trying the neighbours with the fewest onward links first (large grids
 *     may still run out: is_search_cut). Further cycles are searched on the
 *     links the previous ones left (a pair with k parallel usable links can
 *     carry k cycles), as many as the host with the fewest links allows
 *     (two of its links per cycle); when a level finds none, the level above
 *     tries its next cycle, so a first cycle that leaves no second one is
 *     replaced by one that does (a 3x4 torus has two, a 4x4 torus two, a
 *     full mesh of five two), within the same budget. Each cycle gives two rings,
 *     itself and its reverse, listed C1, reverse C1, C2, reverse C2 up to
 *     max_rings: the two directions send through different NICs of every
 *     host, so with full duplex links every cable is busy both ways. A
 *     triangle gets A-B-C and A-C-B, a ring of cables the cycle and its
 *     reverse; a full mesh of four also gets one cycle and its reverse,
 *     because any two of its cycles share two links (its two remaining links
 *     carry point-to-point traffic only); a full mesh of five gets two
 *     link-disjoint cycles.
 *   - Two hosts: the pair itself, once per usable parallel link.
 *   - Without a cycle: a chain through every host over direct links, closed
 *     by one relayed hop and turned to start at order[0] (a line gives
 *     A-B-C-D with D->A relayed), and its reverse.
 *   - Without a chain either (a star of four or more): the order as given,
 *     and its reverse.
 * max_rings: 1..MC_MESH_MAX_RINGS. *rings_out: written on success only.
 * Errors: ncclInvalidArgument for NULL pointers, n_order outside
 * 1..graph->n_hosts, an index out of range or repeated, max_rings out of
 * range; ncclInvalidUsage when two of the hosts cannot reach each other
 * (naming them, as mc_mesh_route_unreachable_str).
 */
ncclResult_t mc_mesh_rings_compute(const struct mc_mesh_graph *graph, const int *order, int n_order,
                                   int max_rings, struct mc_mesh_rings *rings_out);

/*
 * The link each hop of ring `ring` uses, into links_out[i] for hop i
 * (hosts[i] -> hosts[(i+1) % n]; n hops for n >= 2, none for one host): -1
 * for a relayed hop. Between two hosts with several usable links, hops are
 * spread over the rings 0..ring: each takes the link least used so far in
 * its direction, then least used in total, then of lowest index, so that a
 * triangle with two cables per pair uses all six in its two rings.
 * Errors: ncclInvalidArgument for NULL pointers or ring not in
 * 0..rings->n_rings-1.
 */
ncclResult_t mc_mesh_ring_links(const struct mc_mesh_graph *graph,
                                const struct mc_mesh_rings *rings, int ring,
                                int links_out[MC_MESH_MAX_HOSTS]);

#endif /* MC_NET_MESH_GRAPH_H */
