/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Channel rings that follow the cables. NCCL builds its rings from the
 * communicator's rank order (src/graph/rings.cc, ncclBuildRings, over the
 * orders of src/graph/connect.cc); on a mesh that order may put hosts next to
 * each other that no cable joins, and every such hop would be relayed. Here
 * the ring is a Hamiltonian cycle of the link graph over the communicator's
 * hosts, found by backtracking with a step budget and deterministic
 * neighbour orders (the communicator's own, then fewest onward links first),
 * so every host computes the same rings; a set of cycles that share no cable
 * is searched as a whole (a first cycle that leaves no second one is
 * replaced), and every cycle is run in both directions. Without a cycle, a Hamiltonian path
 * closed by one relayed hop; without a path, the communicator's order. The links of each ring hop
 * are spread over parallel cables.
 */
#include "net/mesh/mesh_graph.h"

#include "check.h"

#include <string.h>

/* Steps left to a search and whether they ran out; shared by the nested
 * searches of one set of cycles. */
struct search_budget {
  long steps_left;
  bool is_cut;
};

struct cycles_search;

/* Backtracking state; hosts are communicator positions 0..n-1. */
struct ring_search {
  int n;
  uint64_t nb[MC_MESH_MAX_HOSTS]; /* neighbours over links not yet taken */
  struct search_budget *budget;
  struct cycles_search *multi; /* NULL: stop at the first walk found */
  bool is_fewest_first;        /* try neighbours with the fewest onward ways first */
  int path[MC_MESH_MAX_HOSTS];
};

/*
 * A set of cable-disjoint cycles: every cycle found at one level takes its
 * links out of cap and the next level searches what is left; when a level
 * finds nothing, the level above goes on to its next cycle. So a first cycle
 * that leaves no second one is replaced by one that does (a 3x4 torus), where
 * a greedy search would stop at one.
 */
struct cycles_search {
  int n;
  int target; /* stop once this many are held */
  int n_held;
  int n_best;
  uint8_t cap[MC_MESH_MAX_HOSTS][MC_MESH_MAX_HOSTS];
  int held[MC_MESH_MAX_RINGS][MC_MESH_MAX_HOSTS];
  int best[MC_MESH_MAX_RINGS][MC_MESH_MAX_HOSTS];
};

static uint64_t bit(int p)
{
  return (uint64_t)1 << p;
}

static int popcount64(uint64_t v)
{
  return __builtin_popcountll(v);
}

/*
 * False when the hosts left cannot complete the walk. Every one needs two
 * ways in and out (for a cycle) among the hosts left, the current end and the
 * start, or one (for a path), and at most one of them (the final end) may
 * have only one; and all of them must be reachable from the current end
 * through hosts left, or the walk could not visit them in one piece.
 * In a cycle a host left with exactly two ways must use both: when one leads
 * to the current end, the walk must go there next (*forced_out; at the start
 * two such hosts may exist, one for each way); when one leads to the start,
 * it is the start's last free way, so only one such host may exist once the
 * walk has left the start.
 */
static bool can_finish(const struct ring_search *s, uint64_t visited, int cur, bool is_cycle,
                       int *forced_out)
{
  uint64_t left = ~visited & ((s->n == 64) ? ~(uint64_t)0 : (bit(s->n) - 1));
  uint64_t open = left | bit(cur) | (is_cycle ? bit(s->path[0]) : 0);
  uint64_t seen = 0;
  uint64_t frontier = s->nb[cur] & left;
  bool is_at_start = (cur == s->path[0]);
  int n_single = 0;
  int n_to_cur = 0;
  int n_to_start = 0;

  *forced_out = -1;
  for (uint64_t rest = left; rest != 0; rest &= rest - 1) {
    int v = __builtin_ctzll(rest);
    int ways = popcount64(s->nb[v] & open);

    if ((ways == 0) || (is_cycle && (ways < 2)))
      return false;
    if ((ways == 1) && (++n_single > 1))
      return false;
    if (!is_cycle || (ways != 2))
      continue;
    if ((s->nb[v] & bit(cur)) != 0) {
      *forced_out = v;
      n_to_cur++;
    }
    if (!is_at_start && ((s->nb[v] & bit(s->path[0])) != 0))
      n_to_start++;
  }
  if ((n_to_cur > (is_at_start ? 2 : 1)) || (n_to_start > 1))
    return false;
  if (is_at_start)
    *forced_out = -1; /* such a host may as well close the cycle: the order decides */
  while (frontier != 0) {
    uint64_t next = 0;

    seen |= frontier;
    for (uint64_t f = frontier; f != 0; f &= f - 1)
      next |= s->nb[__builtin_ctzll(f)];
    frontier = next & left & ~seen;
  }
  return seen == left;
}

/* The next hosts to try from cur, in the order the search tries them: by
 * communicator position, or by fewest onward ways (Warnsdorff's rule for
 * knight's tours, which walks grids without cutting them) and position. */
static int candidates(const struct ring_search *s, int cur, uint64_t visited,
                      int out[MC_MESH_MAX_HOSTS])
{
  int key[MC_MESH_MAX_HOSTS];
  int n = 0;

  for (uint64_t c = s->nb[cur] & ~visited; c != 0; c &= c - 1) {
    int v = __builtin_ctzll(c);
    int k = s->is_fewest_first ? popcount64(s->nb[v] & ~visited) : 0;
    int j = n++;

    while ((j > 0) && (key[j - 1] > k)) {
      key[j] = key[j - 1];
      out[j] = out[j - 1];
      j--;
    }
    key[j] = k;
    out[j] = v;
  }
  return n;
}

static bool cycle_found(struct ring_search *s);

/* Extends s->path[0..depth-1] to every host; true when it did (with multi:
 * when the set of cycles reached its target). */
static bool extend(struct ring_search *s, int depth, uint64_t visited, bool is_cycle)
{
  int cur = s->path[depth - 1];
  int forced = -1;
  int next[MC_MESH_MAX_HOSTS];
  int n_next;

  if (depth == s->n) {
    if (is_cycle && ((s->nb[cur] & bit(s->path[0])) == 0))
      return false;
    return (s->multi == NULL) || cycle_found(s);
  }
  if (s->budget->steps_left <= 0) {
    s->budget->is_cut = true;
    return false;
  }
  s->budget->steps_left--;
  if ((s->n >= 3) && !can_finish(s, visited, cur, is_cycle, &forced))
    return false;
  if (forced >= 0) {
    next[0] = forced;
    n_next = 1;
  } else {
    n_next = candidates(s, cur, visited, next);
  }
  for (int i = 0; i < n_next; i++) {
    s->path[depth] = next[i];
    if (extend(s, depth + 1, visited | bit(next[i]), is_cycle))
      return true;
    if (s->budget->is_cut)
      return false;
  }
  return false;
}

static void search_init(struct ring_search *s, int n, uint8_t cap[][MC_MESH_MAX_HOSTS],
                        struct search_budget *budget)
{
  memset(s, 0, sizeof(*s));
  s->n = n;
  s->budget = budget;
  for (int p = 0; p < n; p++) {
    for (int q = 0; q < n; q++) {
      if (cap[p][q] > 0)
        s->nb[p] |= bit(q);
    }
  }
}

/*
 * A cycle from position 0, or a path from any position (tried in order),
 * through every host, into s->path. The first pass tries neighbours in the
 * communicator's order, so that an order that follows the cables is kept;
 * when it runs out of half the budget, a second pass tries the fewest-ways
 * order with the other half. A pass that ends within its budget has tried
 * everything: there is no such walk. s->budget->is_cut tells whether both passes ran
 * out.
 */
static bool search(struct ring_search *s, bool is_cycle)
{
  int n_starts = is_cycle ? 1 : s->n;

  for (int pass = 0; pass < 2; pass++) {
    s->is_fewest_first = (pass == 1);
    s->budget->steps_left = MC_MESH_RING_SEARCH_BUDGET / 2;
    s->budget->is_cut = false;
    for (int start = 0; (start < n_starts) && !s->budget->is_cut; start++) {
      s->path[0] = start;
      if (extend(s, 1, bit(start), is_cycle))
        return true;
    }
    if (!s->budget->is_cut)
      return false;
  }
  return false;
}

/* s->path closes a cycle: hold it, take its links and search the next
 * cycle on what is left (in the same neighbour order, on the same budget).
 * True once the set reached its target; the links are given back either
 * way, the best set so far is kept in multi->best. */
static bool cycle_found(struct ring_search *s)
{
  struct cycles_search *m = s->multi;
  int n = s->n;
  bool is_done;

  for (int i = 0; i < n; i++) {
    int a = s->path[i];
    int b = s->path[(i + 1) % n];

    m->cap[a][b]--;
    m->cap[b][a]--;
  }
  memcpy(m->held[m->n_held++], s->path, sizeof(s->path));
  if (m->n_held > m->n_best) {
    memcpy(m->best, m->held, sizeof(m->held));
    m->n_best = m->n_held;
  }
  is_done = (m->n_held >= m->target);
  if (!is_done) {
    struct ring_search next;

    search_init(&next, n, m->cap, s->budget);
    next.multi = m;
    next.is_fewest_first = s->is_fewest_first;
    next.path[0] = 0;
    is_done = extend(&next, 1, bit(0), true);
  }
  m->n_held--;
  for (int i = 0; i < n; i++) {
    int a = s->path[i];
    int b = s->path[(i + 1) % n];

    m->cap[a][b]++;
    m->cap[b][a]++;
  }
  return is_done;
}

const char *mc_mesh_rings_kind_str(enum mc_mesh_rings_kind kind)
{
  switch (kind) {
  case MC_MESH_RINGS_CYCLE:
    return "cycle";
  case MC_MESH_RINGS_PATH:
    return "path";
  case MC_MESH_RINGS_ORDER:
    return "order";
  }
  return "?";
}

static ncclResult_t check_order(const struct mc_mesh_graph *graph, const int *order, int n_order,
                                int max_rings)
{
  uint64_t seen = 0;

  if ((n_order < 1) || (n_order > graph->n_hosts))
    return MC_FAIL(ncclInvalidArgument, "mesh rings: %d hosts given, the mesh has %d", n_order,
                   graph->n_hosts);
  if ((max_rings < 1) || (max_rings > MC_MESH_MAX_RINGS))
    return MC_FAIL(ncclInvalidArgument, "mesh rings: %d rings asked, 1 to %d are possible",
                   max_rings, MC_MESH_MAX_RINGS);
  for (int p = 0; p < n_order; p++) {
    if ((order[p] < 0) || (order[p] >= graph->n_hosts))
      return MC_FAIL(ncclInvalidArgument, "mesh rings: host %d at position %d is not in 0..%d",
                     order[p], p, graph->n_hosts - 1);
    if ((seen & bit(order[p])) != 0)
      return MC_FAIL(ncclInvalidArgument, "mesh rings: host %d appears twice in the order",
                     order[p]);
    seen |= bit(order[p]);
  }
  return ncclSuccess;
}

/* ring = positions pos[0..n-1] as canonical hosts, optionally reversed (the
 * start stays first). */
static void set_ring(struct mc_mesh_ring *ring, const int *order, const int *pos, int n,
                     bool reverse)
{
  memset(ring, 0, sizeof(*ring));
  ring->hosts[0] = order[pos[0]];
  for (int i = 1; i < n; i++)
    ring->hosts[i] = order[pos[reverse ? n - i : i]];
}

/* Fills rings from up to n_cycles cycles of positions: C1, reverse C1, C2... */
static void rings_from_cycles(struct mc_mesh_rings *out, const int *order, int n,
                              int cycles[][MC_MESH_MAX_HOSTS], int n_cycles, int max_rings)
{
  out->n_rings = 0;
  for (int c = 0; (c < n_cycles) && (out->n_rings < max_rings); c++) {
    set_ring(&out->rings[out->n_rings++], order, cycles[c], n, false);
    if ((n >= 3) && (out->n_rings < max_rings))
      set_ring(&out->rings[out->n_rings++], order, cycles[c], n, true);
  }
}

/* Relayed hops of every ring and the links they cross. */
static void count_relays(const struct mc_mesh_graph *graph, struct mc_mesh_rings *out)
{
  int n = out->n_hosts;
  int links[MC_MESH_MAX_PAIR_LINKS];
  int hops[MC_MESH_MAX_HOSTS];

  if (n < 2)
    return;
  for (int r = 0; r < out->n_rings; r++) {
    struct mc_mesh_ring *ring = &out->rings[r];

    for (int i = 0; i < n; i++) {
      int a = ring->hosts[i];
      int b = ring->hosts[(i + 1) % n];

      if (mc_mesh_graph_usable_links(graph, a, b, links) > 0)
        continue;
      mc_mesh_graph_hops_from(graph, a, hops);
      ring->n_relayed++;
      ring->relay_edges += hops[b];
    }
  }
}

/* Usable links between the communicator's hosts, by position. */
static void pair_capacity(const struct mc_mesh_graph *graph, const int *order, int n,
                          uint8_t cap[][MC_MESH_MAX_HOSTS])
{
  int links[MC_MESH_MAX_PAIR_LINKS];

  for (int p = 0; p < n; p++) {
    for (int q = 0; q < n; q++)
      cap[p][q] = (uint8_t)mc_mesh_graph_usable_links(graph, order[p], order[q], links);
  }
}

/* Up to max_cycles cable-disjoint cycles through every host (n >= 3); returns
 * how many were found. No more are searched than the host with the fewest
 * links allows (each cycle takes two of every host's links), so a set that
 * cannot grow does not spend the budget. The first pass tries neighbours in
 * the communicator's order, the second (only when the first ran out of its
 * half of the budget short of the target) the fewest-ways order; the larger
 * set wins, the first on a tie. */
static int find_cycles(int n, uint8_t cap[][MC_MESH_MAX_HOSTS], int max_cycles,
                       int cycles[][MC_MESH_MAX_HOSTS], bool *is_cut_out)
{
  struct cycles_search m;
  struct search_budget budget = {0};
  struct ring_search s;
  int n_found = 0;
  int target = max_cycles;

  for (int p = 0; p < n; p++) {
    int links = 0;

    for (int q = 0; q < n; q++)
      links += cap[p][q];
    target = (links / 2 < target) ? links / 2 : target;
  }
  *is_cut_out = false;
  if (target < 1)
    return 0;
  for (int pass = 0; pass < 2; pass++) {
    memset(&m, 0, sizeof(m));
    m.n = n;
    m.target = target;
    memcpy(m.cap, cap, sizeof(m.cap));
    search_init(&s, n, m.cap, &budget);
    s.multi = &m;
    s.is_fewest_first = (pass == 1);
    budget.steps_left = MC_MESH_RING_SEARCH_BUDGET / 2;
    budget.is_cut = false;
    s.path[0] = 0;
    (void)extend(&s, 1, bit(0), true);
    if (m.n_best > n_found) {
      memcpy(cycles, m.best, sizeof(m.best[0]) * (size_t)m.n_best);
      n_found = m.n_best;
    }
    *is_cut_out = budget.is_cut && (n_found < target);
    if (!budget.is_cut || (n_found >= target))
      break;
  }
  return n_found;
}

/* Without a cycle: a path through every host closed by one relayed hop and
 * turned to start at position 0 (PATH), else the order as given (ORDER). */
static enum mc_mesh_rings_kind fallback_order(int n, uint8_t cap[][MC_MESH_MAX_HOSTS],
                                              int pos[MC_MESH_MAX_HOSTS], bool *is_cut_out)
{
  bool found = false;
  int at = 0;
  struct ring_search s;
  struct search_budget budget = {0};

  search_init(&s, n, cap, &budget);
  found = search(&s, false);
  *is_cut_out = budget.is_cut;
  for (int i = 0; i < n; i++)
    pos[i] = i;
  if (!found)
    return MC_MESH_RINGS_ORDER;
  while (s.path[at] != 0)
    at++;
  for (int i = 0; i < n; i++)
    pos[i] = s.path[(at + i) % n];
  return MC_MESH_RINGS_PATH;
}

ncclResult_t mc_mesh_rings_compute(const struct mc_mesh_graph *graph, const int *order, int n_order,
                                   int max_rings, struct mc_mesh_rings *rings_out)
{
  int pos[MC_MESH_MAX_HOSTS] = {0};
  bool is_cut = false;
  int n_cycles = 0;
  int n = n_order;
  struct mc_mesh_rings out;
  uint8_t cap[MC_MESH_MAX_HOSTS][MC_MESH_MAX_HOSTS];
  int cycles[MC_MESH_MAX_RINGS][MC_MESH_MAX_HOSTS];
  int hops[MC_MESH_MAX_HOSTS];

  if ((graph == NULL) || (order == NULL) || (rings_out == NULL))
    return MC_FAIL(ncclInvalidArgument, "mesh rings: NULL %s",
                   (graph == NULL) ? "graph" : ((order == NULL) ? "order" : "output"));
  MC_CHECK(check_order(graph, order, n_order, max_rings));
  mc_mesh_graph_hops_from(graph, order[0], hops);
  for (int p = 1; p < n; p++) {
    if (hops[order[p]] < 0) {
      char why[512];

      mc_mesh_route_unreachable_str(graph, order[0], order[p], why, sizeof(why));
      return MC_FAIL(ncclInvalidUsage, "mesh rings: %s", why);
    }
  }

  memset(&out, 0, sizeof(out));
  out.n_hosts = n;
  pair_capacity(graph, order, n, cap);
  if (n == 1) {
    cycles[0][0] = 0;
    n_cycles = 1;
  } else if (n == 2) {
    /* The pair is its own reverse: one ring per parallel link. */
    n_cycles = (cap[0][1] < max_rings) ? cap[0][1] : max_rings;
    for (int c = 0; c < n_cycles; c++) {
      cycles[c][0] = 0;
      cycles[c][1] = 1;
    }
  } else {
    n_cycles = find_cycles(n, cap, (max_rings + 1) / 2, cycles, &is_cut);
  }

  if (n_cycles > 0) {
    out.kind = MC_MESH_RINGS_CYCLE;
    out.n_cycles = n_cycles;
    rings_from_cycles(&out, order, n, cycles, n_cycles, max_rings);
  } else {
    bool is_path_cut = false;

    pair_capacity(graph, order, n, cap);
    out.kind = fallback_order(n, cap, pos, &is_path_cut);
    is_cut = is_cut || is_path_cut;
    set_ring(&out.rings[out.n_rings++], order, pos, n, false);
    if ((n >= 3) && (max_rings >= 2))
      set_ring(&out.rings[out.n_rings++], order, pos, n, true);
  }
  out.is_search_cut = is_cut;
  count_relays(graph, &out);
  *rings_out = out;
  return ncclSuccess;
}

ncclResult_t mc_mesh_ring_links(const struct mc_mesh_graph *graph,
                                const struct mc_mesh_rings *rings, int ring,
                                int links_out[MC_MESH_MAX_HOSTS])
{
  uint16_t dir_load[MC_MESH_MAX_LINKS][2];
  uint16_t total_load[MC_MESH_MAX_LINKS];
  int links[MC_MESH_MAX_PAIR_LINKS];
  int out[MC_MESH_MAX_HOSTS];
  int n;

  if ((graph == NULL) || (rings == NULL) || (links_out == NULL))
    return MC_FAIL(ncclInvalidArgument, "mesh rings: ring_links called with a NULL argument");
  if ((ring < 0) || (ring >= rings->n_rings))
    return MC_FAIL(ncclInvalidArgument, "mesh rings: no ring %d (%d rings)", ring, rings->n_rings);
  n = rings->n_hosts;
  memset(dir_load, 0, sizeof(dir_load));
  memset(total_load, 0, sizeof(total_load));
  /* Replay the choice of every earlier ring: the result for ring r does not
   * depend on whether the caller asked for the others. */
  for (int r = 0; r <= ring; r++) {
    const struct mc_mesh_ring *rg = &rings->rings[r];

    for (int i = 0; (n >= 2) && (i < n); i++) {
      int a = rg->hosts[i];
      int b = rg->hosts[(i + 1) % n];
      int count = mc_mesh_graph_usable_links(graph, a, b, links);
      int best = -1;
      int dir = 0;

      for (int k = 0; k < count; k++) {
        int l = links[k];
        int d = (graph->links[l].host[0] == a) ? 0 : 1;

        if ((best < 0) || (dir_load[l][d] < dir_load[best][dir]) ||
            ((dir_load[l][d] == dir_load[best][dir]) && (total_load[l] < total_load[best]))) {
          best = l;
          dir = d;
        }
      }
      if (best >= 0) {
        dir_load[best][dir]++;
        total_load[best]++;
      }
      out[i] = best;
    }
  }
  memcpy(links_out, out, sizeof(int) * (size_t)((n >= 2) ? n : 0));
  return ncclSuccess;
}
