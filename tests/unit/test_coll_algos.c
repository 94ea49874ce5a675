/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The collective algorithms without sockets: n fake communicators in this
 * process, their connections in-memory FIFOs (struct mc_conn with a shared
 * control block and slots), rings in arbitrary orders per channel and trees
 * relabelled by arbitrary permutations. Checks that
 *   - NCCL's binary and double binary trees (mc_topo_btree/dtree) are
 *     NCCL's (src/graph/trees.cc), and are trees over all ranks;
 *   - for every algorithm (Ring, Tree, P2P) and collective, both ends of
 *     every connection produce the same stream of steps (sizes and offsets,
 *     in the same order), from each rank's own plan;
 *   - running every rank's operations in one batch through the executor
 *     gives NCCL's exact integer results for every ring order and tree;
 *   - NCCL_ALGO / NCCL_PROTO parse as NCCL's syntax says.
 */
#include "coll/coll.h"
#include "topo/topo_graph.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* up, down0, down1 of both trees of NCCL's double binary tree. */
static void dtree3(int n, int r, int t0[3], int t1[3])
{
  int ct0 = 0;
  int ct1 = 0;

  mc_topo_dtree(n, r, &t0[0], &t0[1], &t0[2], &ct0, &t1[0], &t1[1], &t1[2], &ct1);
}

#include "mc_test.h"

#define MAX_N       9
#define MAX_CH      3
#define SLOT_BYTES  256 /* small slots: many steps per operation */
#define MAX_LINKS   1024
#define MAX_RECORDS 4096

/* ------------------------------------------------------------ the fake world */

struct rec {
  size_t n;
  size_t off;
};

struct link {
  struct mc_conn_ctrl *ctrl;
  char *slots;
  struct rec sent[MAX_RECORDS];
  struct rec recvd[MAX_RECORDS];
  int n_sent;
  int n_recvd;
};

struct world {
  int n;
  int n_ch;
  struct ncclComm *comms[MAX_N];
  struct link *links[MAX_LINKS];
  int n_links;
};

static void link_conns(struct world *w, struct mc_conn *s, int s_rank, struct mc_conn *r,
                       int r_rank, int channel, bool ptrs)
{
  struct link *l = calloc(1, sizeof(*l));

  MC_T_TRUE((l != NULL) && (w->n_links < MAX_LINKS));
  l->ctrl = aligned_alloc(64, sizeof(*l->ctrl));
  l->slots = malloc((size_t)MC_STEPS * SLOT_BYTES);
  memset(l->ctrl, 0, sizeof(*l->ctrl));
  w->links[w->n_links++] = l;
  *s = (struct mc_conn){.kind = MC_TOPO_TRANSPORT_P2P,
                        .is_send = true,
                        .peer = r_rank,
                        .channel = channel,
                        .can_send_ptr = ptrs,
                        .ctrl = l->ctrl,
                        .slots = l->slots,
                        .slot_bytes = SLOT_BYTES};
  *r = (struct mc_conn){.kind = MC_TOPO_TRANSPORT_P2P,
                        .is_send = false,
                        .peer = s_rank,
                        .channel = channel,
                        .ctrl = l->ctrl,
                        .slots = l->slots,
                        .slot_bytes = SLOT_BYTES};
}

static int child_index(const struct mc_channel *ch, int rank)
{
  for (int i = 0; i < MC_TREE_MAX_ARITY; i++)
    if (ch->tree_down[i] == rank)
      return i;
  return -1;
}

/* n ranks; channel c's ring visits rings[c][0..n-1]; channel c's tree is
 * NCCL's double binary tree (c % 2) with rank i of it played by
 * relabel[c][i]. ptrs: senders publish pointers (P2P in one process). */
static void world_make(struct world *w, int n, int n_ch, int rings[][MAX_N], int relabel[][MAX_N],
                       bool ptrs, uint32_t algos)
{
  memset(w, 0, sizeof(*w));
  w->n = n;
  w->n_ch = n_ch;
  for (int r = 0; r < n; r++) {
    struct ncclComm *comm = calloc(1, sizeof(*comm));
    MC_T_TRUE(comm != NULL);
    comm->rank = r;
    comm->n_ranks = n;
    comm->data.n_channels = n_ch;
    comm->data.tp.slot_bytes = SLOT_BYTES;
    comm->nodes.n_nodes = 1;
    comm->data.spin_passes = 2;
    comm->coll.algo_env_ready = true;
    for (int k = 0; k < MC_COLL_KINDS; k++) {
      comm->coll.algo_allowed[k] = algos;
      comm->coll.algo_protos[k] = MC_ALGO_MASK_ALL;
    }
    comm->peers = calloc((size_t)n, sizeof(*comm->peers));
    for (int p = 0; p < n; p++)
      comm->peers[p].pid = getpid();
    comm->data.scratch = aligned_alloc(64, (size_t)(n_ch + 1) * SLOT_BYTES);
    comm->data.channels = calloc((size_t)n_ch, sizeof(*comm->data.channels));
    comm->coll.p2p_send = calloc((size_t)n, sizeof(*comm->coll.p2p_send));
    comm->coll.p2p_recv = calloc((size_t)n, sizeof(*comm->coll.p2p_recv));
    for (int c = 0; c < n_ch; c++) {
      struct mc_channel *ch = &comm->data.channels[c];
      int pos = 0;
      int t0[3];
      int t1[3];
      int me = 0; /* r's label in the tree */
      const int *t;
      for (int i = 0; i < n; i++) {
        if (rings[c][i] == r)
          pos = i;
        if (relabel[c][i] == r)
          me = i;
      }
      ch->id = c;
      ch->ring = calloc((size_t)n, sizeof(int));
      for (int i = 0; i < n; i++)
        ch->ring[i] = rings[c][(pos + i) % n];
      ch->next = ch->ring[(n > 1) ? 1 : 0];
      ch->prev = ch->ring[n - 1];
      dtree3(n, me, t0, t1);
      t = ((c % 2) == 0) ? t0 : t1;
      ch->tree_up = (t[0] < 0) ? -1 : relabel[c][t[0]];
      ch->tree_down[0] = (t[1] < 0) ? -1 : relabel[c][t[1]];
      ch->tree_down[1] = (t[2] < 0) ? -1 : relabel[c][t[2]];
      ch->tree_down[2] = -1;
    }
    w->comms[r] = comm;
  }
  for (int r = 0; r < n; r++) {
    struct ncclComm *comm = w->comms[r];
    for (int c = 0; (c < n_ch) && (n > 1); c++) {
      struct mc_channel *ch = &comm->data.channels[c];
      struct mc_channel *nx = &w->comms[ch->next]->data.channels[c];
      link_conns(w, &ch->send, r, &nx->recv, ch->next, c, ptrs);
      if (ch->tree_up >= 0) {
        struct mc_channel *up = &w->comms[ch->tree_up]->data.channels[c];
        int i = child_index(up, r);
        MC_T_TRUE(i >= 0);
        if (i < 0)
          continue;
        link_conns(w, &ch->tree_send_up, r, &up->tree_recv_down[i], ch->tree_up, c, ptrs);
        link_conns(w, &up->tree_send_down[i], ch->tree_up, &ch->tree_recv_up, r, c, ptrs);
      }
    }
    for (int p = 0; p < n; p++) {
      if (p == r)
        continue;
      comm->coll.p2p_send[p] = calloc(1, sizeof(struct mc_conn));
      w->comms[p]->coll.p2p_recv[r] = calloc(1, sizeof(struct mc_conn));
      link_conns(w, comm->coll.p2p_send[p], r, w->comms[p]->coll.p2p_recv[r], p, 0, ptrs);
    }
  }
}

static void world_free(struct world *w)
{
  for (int r = 0; r < w->n; r++) {
    struct ncclComm *comm = w->comms[r];
    for (int c = 0; c < w->n_ch; c++)
      free(comm->data.channels[c].ring);
    for (int p = 0; p < w->n; p++) {
      free(comm->coll.p2p_send[p]);
      free(comm->coll.p2p_recv[p]);
    }
    free(comm->coll.p2p_send);
    free(comm->coll.p2p_recv);
    free(comm->coll.p2p_seq);
    if (comm->coll.algo_states_free != NULL)
      comm->coll.algo_states_free(comm, false);
    free(comm->data.channels);
    free(comm->data.scratch);
    free(comm->peers);
    free(comm);
  }
  for (int i = 0; i < w->n_links; i++) {
    free(w->links[i]->ctrl);
    free(w->links[i]->slots);
    free(w->links[i]);
  }
}

static struct link *find_link(struct world *w, const struct mc_conn *c)
{
  for (int i = 0; i < w->n_links; i++)
    if (w->links[i]->ctrl == c->ctrl)
      return w->links[i];
  return NULL;
}

/* ------------------------------------------------------------ permutations */

static unsigned lcg(unsigned *s)
{
  *s = *s * 1103515245u + 12345u;
  return (*s >> 8) & 0xffffff;
}

/* kind 0: identity; 1: 0 n-1 n-2 ... 1 (NCCL's reversed ring); 2: shuffled. */
static void perm(int *p, int n, int kind, unsigned seed)
{
  for (int i = 0; i < n; i++)
    p[i] = (kind == 1) ? (n - i) % n : i;
  if (kind == 2) {
    for (int i = n - 1; i > 0; i--) {
      int k = (int)(lcg(&seed) % (unsigned)(i + 1));
      int x = p[i];
      p[i] = p[k];
      p[k] = x;
    }
  }
}

/* ---------------------------------------------------------------- tree shape */

static void btree_matches_nccl(void)
{
  /* n = 4, from NCCL's ncclGetDtree: {up, down0, down1} per rank and tree. */
  static const int want[4][2][3] = {
      {{-1, -1, 2}, {1, -1, -1}},
      {{2, -1, -1}, {3, 2, 0}},
      {{0, 1, 3}, {1, -1, -1}},
      {{2, -1, -1}, {-1, -1, 1}},
  };
  for (int r = 0; r < 4; r++) {
    int t0[3];
    int t1[3];
    dtree3(4, r, t0, t1);
    for (int i = 0; i < 3; i++) {
      MC_T_EQ_INT(t0[i], want[r][0][i]);
      MC_T_EQ_INT(t1[i], want[r][1][i]);
    }
  }
}

/* For n = 1..70, both trees: one root, every parent lists the rank as a
 * child, every rank reaches the root. */
static void dtrees_are_trees(void)
{
  for (int n = 1; n <= 70; n++) {
    for (int tree = 0; tree < 2; tree++) {
      int up[70];
      int down[70][3];
      int roots = 0;
      for (int r = 0; r < n; r++) {
        int t0[3];
        int t1[3];
        const int *t;
        dtree3(n, r, t0, t1);
        t = (tree == 0) ? t0 : t1;
        up[r] = t[0];
        down[r][0] = t[1];
        down[r][1] = t[2];
        roots += (t[0] < 0) ? 1 : 0;
      }
      MC_T_EQ_INT(roots, 1);
      for (int r = 0; r < n; r++) {
        int hops = 0;
        if (up[r] >= 0)
          MC_T_TRUE((down[up[r]][0] == r) || (down[up[r]][1] == r));
        for (int i = 0; i < 2; i++)
          if (down[r][i] >= 0)
            MC_T_EQ_INT(up[down[r][i]], r);
        for (int x = r; (x >= 0) && (hops <= n); x = up[x])
          hops++;
        MC_T_TRUE(hops <= n);
      }
    }
  }
}

/* ------------------------------------------------------------- step streams */

static const enum mc_coll_kind colls[] = {MC_COLL_ALLREDUCE, MC_COLL_BROADCAST, MC_COLL_REDUCE,
                                          MC_COLL_ALLGATHER, MC_COLL_REDUCESCATTER};

/* Where a primitive's data sits in the collective's global layout. */
static size_t global_off(const struct mc_op *op, const struct mc_prim *p)
{
  if (op->kind == MC_COLL_ALLGATHER)
    return p->out_off;
  return p->in_off;
}

static void record(struct world *w, struct mc_conn *c, bool send, const struct mc_op *op,
                   const struct mc_prim *p)
{
  struct link *l = find_link(w, c);
  struct rec x = {.n = p->n, .off = global_off(op, p)};

  MC_T_TRUE(l != NULL);
  if (l == NULL)
    return;
  if (send && (l->n_sent < MAX_RECORDS))
    l->sent[l->n_sent++] = x;
  if (!send && (l->n_recvd < MAX_RECORDS))
    l->recvd[l->n_recvd++] = x;
}

static bool prim_recvs(enum mc_prim_kind k)
{
  return (k != MC_PRIM_SEND) && (k != MC_PRIM_COPY_SEND);
}

static bool prim_sends(enum mc_prim_kind k)
{
  return (k != MC_PRIM_RECV) && (k != MC_PRIM_RECV_REDUCE_COPY);
}

/* Every rank plans op with algo alone; each link's two streams must match. */
static void streams_match(struct world *w, const struct mc_coll_algo_ops *algo,
                          enum mc_coll_kind kind, size_t count, int root)
{
  struct mc_op ops[MAX_N];
  char what[128];

  for (int i = 0; i < w->n_links; i++)
    w->links[i]->n_sent = w->links[i]->n_recvd = 0;
  for (int r = 0; r < w->n; r++) {
    struct mc_coll_plan pl;
    ops[r] =
        (struct mc_op){.kind = kind,
                       .algo = algo,
                       .comm = w->comms[r],
                       .count = count,
                       .esize = 4,
                       .root = root,
                       .peer = (kind == MC_COLL_SEND) ? (r + 1) % w->n : (r + w->n - 1) % w->n};
    if (!algo->supports(&ops[r]))
      return;
    mc_coll_plan_init(&pl);
    MC_T_OK(algo->plan(&ops[r], &pl));
    for (int k = 0; k < pl.n_tasks; k++) {
      struct mc_task t = pl.tasks[k];
      struct mc_prim p;
      while (algo->task_prim(&t, &p)) {
        for (int i = 0; prim_recvs(p.kind) && (i < t.n_recv); i++)
          record(w, t.recv[i], false, &ops[r], &p);
        for (int i = 0; prim_sends(p.kind) && (i < t.n_send); i++)
          record(w, t.send[i], true, &ops[r], &p);
        algo->task_next(&t);
      }
    }
    mc_coll_plan_fini(&pl);
  }
  snprintf(what, sizeof(what), "%s %s n %d channels %d count %zu root %d", algo->name,
           mc_coll_name(kind), w->n, w->n_ch, count, root);
  for (int i = 0; i < w->n_links; i++) {
    struct link *l = w->links[i];
    if (l->n_sent != l->n_recvd) {
      MC_T_FAIL("%s: link %d: %d steps sent, %d received", what, i, l->n_sent, l->n_recvd);
      continue;
    }
    for (int s = 0; s < l->n_sent; s++) {
      if ((l->sent[s].n != l->recvd[s].n) || (l->sent[s].off != l->recvd[s].off)) {
        MC_T_FAIL("%s: link %d step %d: sent %zu at %zu, received %zu at %zu", what, i, s,
                  l->sent[s].n, l->sent[s].off, l->recvd[s].n, l->recvd[s].off);
        break;
      }
    }
  }
}

static void make_orders(int n, int n_ch, int rings[][MAX_N], int relabel[][MAX_N], int variant)
{
  for (int c = 0; c < n_ch; c++) {
    perm(rings[c], n, (variant + c) % 3, (unsigned)(n * 31 + c + variant));
    perm(relabel[c], n, (variant + 2 * c) % 3, (unsigned)(n * 17 + c + 7 * variant));
  }
}

static void step_streams_match_for_any_order(void)
{
  static const size_t counts[] = {0, 1, 7, 100, 1000};
  int rings[MAX_CH][MAX_N];
  int relabel[MAX_CH][MAX_N];
  struct world w;

  for (int n = 2; n <= MAX_N; n++) {
    for (int variant = 0; variant < 3; variant++) {
      int n_ch = 1 + (variant % MAX_CH);
      make_orders(n, n_ch, rings, relabel, variant);
      world_make(&w, n, n_ch, rings, relabel, true, MC_ALGO_MASK_ALL);
      for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        for (size_t ci = 0; ci < sizeof(colls) / sizeof(colls[0]); ci++)
          streams_match(&w, &mc_coll_ring_ops, colls[ci], counts[k], (int)(k % (size_t)n));
        streams_match(&w, &mc_coll_tree_ops, MC_COLL_ALLREDUCE, counts[k], 0);
      }
      world_free(&w);
    }
  }
}

static void p2p_streams_match(void)
{
  int rings[MAX_CH][MAX_N];
  int relabel[MAX_CH][MAX_N];
  struct world w;
  struct mc_op ops[2 * MAX_N];
  int n = 5;

  make_orders(n, 1, rings, relabel, 0);
  world_make(&w, n, 1, rings, relabel, true, MC_ALGO_MASK_ALL);
  for (int r = 0; r < n; r++) {
    for (int dir = 0; dir < 2; dir++) {
      struct mc_coll_plan pl;
      struct mc_op *op = &ops[2 * r + dir];
      *op = (struct mc_op){.kind = dir ? MC_COLL_SEND : MC_COLL_RECV,
                           .algo = &mc_coll_p2p_ops,
                           .comm = w.comms[r],
                           .count = 1000,
                           .esize = 4,
                           .peer = dir ? (r + 1) % n : (r + n - 1) % n};
      mc_coll_plan_init(&pl);
      MC_T_OK(mc_coll_p2p_ops.plan(op, &pl));
      for (int k = 0; k < pl.n_tasks; k++) {
        struct mc_task t = pl.tasks[k];
        struct mc_prim p;
        while (mc_coll_p2p_ops.task_prim(&t, &p)) {
          if (t.n_send > 0)
            record(&w, t.send[0], true, op, &p);
          if (t.n_recv > 0)
            record(&w, t.recv[0], false, op, &p);
          mc_coll_p2p_ops.task_next(&t);
        }
      }
      mc_coll_plan_fini(&pl);
    }
  }
  for (int i = 0; i < w.n_links; i++) {
    MC_T_EQ_INT(w.links[i]->n_sent, w.links[i]->n_recvd);
    for (int s = 0; s < w.links[i]->n_sent; s++)
      MC_T_TRUE((w.links[i]->sent[s].n == w.links[i]->recvd[s].n) &&
                (w.links[i]->sent[s].off == w.links[i]->recvd[s].off));
  }
  world_free(&w);
}

/* ----------------------------------------------------------------- results */

static int32_t value(int r, size_t i)
{
  return (int32_t)((i * 7 + (size_t)r * 13) % 101) - 50;
}

/* Runs kind on every rank in one batch and checks every rank's result. */
static void run_and_check(struct world *w, enum mc_coll_kind kind, size_t count, int root,
                          const char *algo_name)
{
  struct mc_op ops[2 * MAX_N];
  int32_t *in[MAX_N];
  int32_t *out[MAX_N];
  int n = w->n;
  int n_ops = 0;
  size_t in_elems = (kind == MC_COLL_REDUCESCATTER) ? count * (size_t)n : count;
  size_t out_elems = (kind == MC_COLL_ALLGATHER) ? count * (size_t)n : count;
  int bad = 0;

  for (int r = 0; r < n; r++) {
    struct mc_redop redop;
    in[r] = malloc(in_elems * 4 + 4);
    out[r] = malloc(out_elems * 4 + 4);
    for (size_t i = 0; i < in_elems; i++)
      in[r][i] = value(r, i);
    memset(out[r], 0x5a, out_elems * 4);
    MC_T_OK(mc_redop_builtin(ncclInt32, ncclSum, n, &redop));
    if (kind == MC_COLL_SEND) {
      ops[n_ops++] = (struct mc_op){.kind = MC_COLL_SEND,
                                    .comm = w->comms[r],
                                    .in = (const char *)in[r],
                                    .count = count,
                                    .esize = 4,
                                    .redop = redop,
                                    .peer = (r + 1) % n};
      ops[n_ops++] = (struct mc_op){.kind = MC_COLL_RECV,
                                    .comm = w->comms[r],
                                    .out = (char *)out[r],
                                    .count = count,
                                    .esize = 4,
                                    .redop = redop,
                                    .peer = (r + n - 1) % n};
      continue;
    }
    ops[n_ops++] = (struct mc_op){.kind = kind,
                                  .comm = w->comms[r],
                                  .in = (const char *)in[r],
                                  .out = (char *)out[r],
                                  .count = count,
                                  .esize = 4,
                                  .redop = redop,
                                  .root = root};
  }
  MC_T_OK(mc_coll_run(ops, n_ops));
  for (int r = 0; (r < n) && (bad == 0); r++) {
    for (size_t i = 0; (i < out_elems) && (bad == 0); i++) {
      int64_t want = 0;
      switch (kind) {
      case MC_COLL_ALLREDUCE:
      case MC_COLL_REDUCE:
        for (int q = 0; q < n; q++)
          want += value(q, i);
        if ((kind == MC_COLL_REDUCE) && (r != root))
          continue;
        break;
      case MC_COLL_REDUCESCATTER:
        for (int q = 0; q < n; q++)
          want += value(q, (size_t)r * count + i);
        break;
      case MC_COLL_BROADCAST:
        want = value(root, i);
        break;
      case MC_COLL_ALLGATHER:
        want = value((int)(i / count), i % count);
        break;
      default:
        want = value((r + n - 1) % n, i);
        break;
      }
      if (out[r][i] != (int32_t)want) {
        MC_T_FAIL("%s %s n %d channels %d count %zu root %d: rank %d element %zu is %d, "
                  "expected %lld",
                  algo_name, mc_coll_name(kind), n, w->n_ch, count, root, r, i, (int)out[r][i],
                  (long long)want);
        bad = 1;
      }
    }
  }
  for (int r = 0; r < n; r++) {
    free(in[r]);
    free(out[r]);
  }
}

static void results_exact_for_any_order(void)
{
  static const size_t counts[] = {1, 7, 333, 1500};
  static const char *const names[] = {"Ring", "Tree"};
  int rings[MAX_CH][MAX_N];
  int relabel[MAX_CH][MAX_N];
  struct world w;

  for (int n = 1; n <= MAX_N; n++) {
    for (int variant = 0; variant < 3; variant++) {
      for (int a = 0; a < 2; a++) {
        int n_ch = 1 + ((variant + a) % MAX_CH);
        uint32_t mask = 1u << ((a == 0) ? MC_ALGO_RING : MC_ALGO_TREE);
        make_orders(n, n_ch, rings, relabel, variant);
        world_make(&w, n, n_ch, rings, relabel, (variant % 2) == 0, mask);
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
          for (size_t ci = 0; ci < sizeof(colls) / sizeof(colls[0]); ci++)
            run_and_check(&w, colls[ci], counts[k], (int)((k + (size_t)variant) % (size_t)n),
                          names[a]);
          run_and_check(&w, MC_COLL_SEND, counts[k], 0, names[a]);
        }
        world_free(&w);
      }
    }
  }
}

/* The choice: Tree only for all-reduce when asked; everything else Ring. */
static void choice_follows_nccl_algo(void)
{
  int rings[MAX_CH][MAX_N];
  int relabel[MAX_CH][MAX_N];
  struct world w;
  struct mc_op op;

  make_orders(4, 2, rings, relabel, 0);
  world_make(&w, 4, 2, rings, relabel, true, 1u << MC_ALGO_TREE);
  op = (struct mc_op){.kind = MC_COLL_ALLREDUCE, .comm = w.comms[1], .count = 1 << 20, .esize = 4};
  MC_T_OK(mc_coll_algo_choose(&op));
  MC_T_EQ_STR(op.algo->name, "Tree");
  op.kind = MC_COLL_BROADCAST;
  MC_T_OK(mc_coll_algo_choose(&op));
  MC_T_EQ_STR(op.algo->name, "Ring");
  for (int k = 0; k < MC_COLL_KINDS; k++)
    w.comms[1]->coll.algo_allowed[k] = MC_ALGO_MASK_ALL;
  op.kind = MC_COLL_ALLREDUCE;
  MC_T_OK(mc_coll_algo_choose(&op));
  MC_T_EQ_STR(op.algo->name, "Ring");
  op.kind = MC_COLL_SEND;
  MC_T_OK(mc_coll_algo_choose(&op));
  MC_T_EQ_STR(op.algo->name, "P2P");
  world_free(&w);
}

/* The time the model gives the recursive-doubling all-reduce, from the
 * constants (topo_tuning.c) as its table says: a call's base cost, then
 * log2(p) steps (+2 for the pairing when n is no power of two), each a ring
 * hop's latency (the NET's twice on top between hosts) and the whole buffer
 * at one connection's bandwidth. */
static float recdouble_time(const struct mc_tune_consts *c, const struct mc_tune_in *in,
                            size_t bytes)
{
  int hw = (in->n_nodes == 1) ? MC_TUNE_HW_HOST : MC_TUNE_HW_NET;
  float lat = c->hw_lat[hw][MC_TUNE_RING] + ((hw == MC_TUNE_HW_NET) ? 2.0f * in->latency_inter : 0);
  float graph = (in->n_nodes <= 2) ? in->ring_bw_intra : in->ring_bw_inter;
  float bw = (graph < c->per_ch_bw[hw][MC_TUNE_RING]) ? graph : c->per_ch_bw[hw][MC_TUNE_RING];
  int p = 1;
  int steps = 0;

  while (2 * p <= in->n_ranks) {
    p *= 2;
    steps++;
  }
  steps += (p < in->n_ranks) ? 2 : 0;
  return c->base_lat[MC_TUNE_RING] +
         (float)steps * (lat + (float)((double)bytes / (1000.0 * (double)bw)));
}

/* The choice is the model's, exactly: n ranks on n hosts, every size from 8
 * bytes to 16 MiB, the fastest of Tree, Ring and RecDouble (that order on a
 * tie); RecDouble wins the smallest on 2 and 4 hosts and loses the largest. NCCL_ALGO=RecDouble
 * forces it for all-reduces only; NCCL_ALGO=Ring,Tree keeps it out. */
static void choice_follows_the_model(void)
{
  static const int ranks[] = {2, 3, 4};
  int rings[MAX_CH][MAX_N];
  int relabel[MAX_CH][MAX_N];
  struct mc_tune_consts consts;
  struct world w;

  mc_tune_consts_default(&consts);
  for (size_t ni = 0; ni < sizeof(ranks) / sizeof(ranks[0]); ni++) {
    int n = ranks[ni];
    struct mc_tune_in in = {.n_ranks = n,
                            .n_nodes = n,
                            .ppn = 1,
                            .n_channels = 2,
                            .max_tree_pattern = 3,
                            .ring_bw_intra = 10.0f,
                            .ring_bw_inter = 10.0f,
                            .tree_bw_intra = 10.0f,
                            .tree_bw_inter = 10.0f,
                            .latency_inter = 2.0f,
                            .ring_same_channels = 1};
    const char *first = NULL;
    const char *last = NULL;
    size_t rd_upto = 0;

    make_orders(n, 2, rings, relabel, 0);
    world_make(&w, n, 2, rings, relabel, true, MC_ALGO_MASK_ALL);
    for (int r = 0; r < n; r++) {
      w.comms[r]->nodes.n_nodes = n;
      w.comms[r]->coll.tune_ready = true;
      mc_tune_model(&in, &consts, &w.comms[r]->coll.tune);
    }
    for (size_t bytes = 8; bytes <= (16u << 20); bytes *= 2) {
      struct mc_tune *t = &w.comms[0]->coll.tune;
      const char *names[] = {"Tree", "Ring", "RecDouble"};
      float times[3] = {mc_tune_time(t, MC_TUNE_ALLREDUCE, MC_TUNE_TREE, MC_TUNE_SIMPLE, bytes),
                        mc_tune_time(t, MC_TUNE_ALLREDUCE, MC_TUNE_RING, MC_TUNE_SIMPLE, bytes),
                        recdouble_time(&consts, &in, bytes)};
      int best = 0;
      struct mc_op op = {.kind = MC_COLL_ALLREDUCE, .comm = w.comms[0], .count = bytes, .esize = 1};
      for (int a = 1; a < 3; a++)
        best = (times[a] < times[best]) ? a : best;
      MC_T_OK(mc_coll_algo_choose(&op));
      MC_T_EQ_STR(op.algo->name, names[best]);
      MC_T_TRUE((op.est_us - times[best] <= 1e-4f * times[best]) &&
                (times[best] - op.est_us <= 1e-4f * times[best]));
      first = (first == NULL) ? op.algo->name : first;
      last = op.algo->name;
      rd_upto = (strcmp(last, "RecDouble") == 0) ? bytes : rd_upto;
      for (int r = 0; r < n; r++)
        w.comms[r]->coll.algo_allowed[MC_COLL_ALLREDUCE] = 1u << MC_ALGO_RECDOUBLE;
      MC_T_OK(mc_coll_algo_choose(&op));
      MC_T_EQ_STR(op.algo->name, "RecDouble");
      op.kind = MC_COLL_BROADCAST;
      for (int r = 0; r < n; r++)
        w.comms[r]->coll.algo_allowed[MC_COLL_BROADCAST] = 1u << MC_ALGO_RECDOUBLE;
      MC_T_OK(mc_coll_algo_choose(&op));
      MC_T_EQ_STR(op.algo->name, "Ring");
      op.kind = MC_COLL_ALLREDUCE;
      for (int r = 0; r < n; r++)
        w.comms[r]->coll.algo_allowed[MC_COLL_ALLREDUCE] =
            (1u << MC_ALGO_RING) | (1u << MC_ALGO_TREE);
      MC_T_OK(mc_coll_algo_choose(&op));
      MC_T_EQ_STR(op.algo->name, names[(times[0] < times[1]) ? 0 : 1]);
      for (int r = 0; r < n; r++)
        for (int k = 0; k < MC_COLL_KINDS; k++)
          w.comms[r]->coll.algo_allowed[k] = MC_ALGO_MASK_ALL;
    }
    /* Powers of two: log2(n) hops to the tree's 2 log2(n); 3 ranks pay the
     * pairing's two more and the tree stays ahead. */
    MC_T_EQ_STR(first, ((n & (n - 1)) == 0) ? "RecDouble" : "Tree");
    MC_T_TRUE(strcmp(last, "RecDouble") != 0);
    printf("# %d ranks on %d hosts: RecDouble chosen up to %zu bytes\n", n, n, rd_upto);
    world_free(&w);
  }
}

/* Every table of the list has its mandatory slots: a name, supports, plan,
 * and either a primitive stream or its own progress (with start and
 * health); one in the model has its time; a number fits the masks. */
static void algo_tables_complete(void)
{
  for (int i = 0; i < mc_coll_n_algos; i++) {
    const struct mc_coll_algo_ops *a = mc_coll_algos[i];
    MC_T_TRUE((a->name != NULL) && (a->supports != NULL) && (a->plan != NULL));
    MC_T_TRUE(((int)a->id >= 0) && ((int)a->id < MC_ALGO_IDS));
    if (a->task_progress == NULL)
      MC_T_TRUE((a->task_prim != NULL) && (a->task_next != NULL));
    else
      MC_T_TRUE((a->task_start != NULL) && (a->task_health != NULL));
    if (a->choice == MC_CHOICE_MODEL)
      MC_T_TRUE(a->est_us != NULL);
    MC_T_TRUE((a->n_conns == NULL) == (a->conn == NULL));
  }
}

/* ------------------------------------------------------------- NCCL_ALGO */

static void algo_env_parses_nccl_syntax(void)
{
  struct mc_algo_env e;
  const uint32_t ring = 1u << MC_ALGO_RING;
  const uint32_t tree = 1u << MC_ALGO_TREE;

  MC_T_OK(mc_algo_env_parse(NULL, NULL, &e));
  MC_T_TRUE(e.allowed[MC_COLL_ALLREDUCE] == (uint32_t)(MC_ALGO_MASK_ALL));
  MC_T_OK(mc_algo_env_parse("Ring", "simple", &e));
  MC_T_TRUE(e.allowed[MC_COLL_ALLREDUCE] == (uint32_t)(ring));
  MC_T_TRUE(e.protos[MC_COLL_ALLREDUCE] == (uint32_t)(1 << MC_PROTO_SIMPLE));
  MC_T_OK(mc_algo_env_parse("tree, RING", NULL, &e));
  MC_T_TRUE(e.allowed[MC_COLL_BROADCAST] == (uint32_t)((ring | tree)));
  MC_T_OK(mc_algo_env_parse("^Tree", "^LL,LL128", &e));
  MC_T_TRUE(e.allowed[MC_COLL_ALLREDUCE] == (uint32_t)(~tree));
  MC_T_TRUE(e.protos[MC_COLL_REDUCE] == (uint32_t)(~3u));
  MC_T_OK(mc_algo_env_parse("allreduce:tree;broadcast:ring", NULL, &e));
  MC_T_TRUE(e.allowed[MC_COLL_ALLREDUCE] == (uint32_t)(tree));
  MC_T_TRUE(e.allowed[MC_COLL_BROADCAST] == (uint32_t)(ring));
  MC_T_TRUE(e.allowed[MC_COLL_ALLGATHER] == (uint32_t)(MC_ALGO_MASK_ALL));
  MC_T_OK(mc_algo_env_parse("ring;AllReduce:^ring", NULL, &e));
  MC_T_TRUE(e.allowed[MC_COLL_ALLREDUCE] == (uint32_t)(~ring));
  MC_T_TRUE(e.allowed[MC_COLL_REDUCE] == (uint32_t)(ring));
  MC_T_OK(mc_algo_env_parse("recdouble", NULL, &e));
  MC_T_TRUE(e.allowed[MC_COLL_ALLREDUCE] == (uint32_t)(1u << MC_ALGO_RECDOUBLE));
  MC_T_EQ_INT(mc_algo_env_parse("P2P", NULL, &e), ncclInvalidUsage);
  MC_T_EQ_INT(mc_algo_env_parse("Rung", NULL, &e), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "NCCL_ALGO: unknown name 'Rung'");
  MC_T_EQ_INT(mc_algo_env_parse("alltoall:ring", NULL, &e), ncclInvalidUsage);
  MC_T_EQ_INT(mc_algo_env_parse(NULL, "LL256", &e), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "NCCL_PROTO");
}

MC_T_MAIN(algo_tables_complete, btree_matches_nccl, dtrees_are_trees,
          step_streams_match_for_any_order, p2p_streams_match, results_exact_for_any_order,
          choice_follows_nccl_algo, choice_follows_the_model, algo_env_parses_nccl_syntax)
