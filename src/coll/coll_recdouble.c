/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Recursive-doubling all-reduce ("RecDouble" in NCCL_ALGO: meshccl's own
 * algorithm and name; NCCL has none, MPI libraries use it for small
 * all-reduces, e.g. MPICH's MPIR_Allreduce_intra_recursive_doubling). With
 * p the largest power of two not above n and rem = n - p, ranks 0 .. 2 rem - 1
 * pair up first: the even rank of each pair sends its input to the odd one
 * and waits ("extra" ranks); the odd rank and the ranks from 2 rem on, p
 * ranks numbered v = 0 .. p - 1 in rank order, exchange their whole partial
 * result with v ^ 2^k in step k = 0 .. log2(p) - 1; each odd rank then
 * sends the result to its extra rank. log2(p) steps (+2 when n is not a
 * power of two), each moving the whole buffer one hop.
 *
 * Every rank gets the same bits: after step k a rank holds the reduction of
 * the 2^(k+1) consecutive ranks of its block, and every combination puts the
 * lower block first (lower op higher; the extra rank's input before its odd
 * partner's), so partners compute the same operation on the same operands
 * and the result is one fixed bracketing of ranks 0 .. n - 1 in order.
 * Premulsum (float avg) multiplies each rank's own input once as it enters;
 * an integer avg's division is applied once, by the last step's combination.
 *
 * Its connections are its own (conn_index MC_CONN_ALGO + its number, the
 * channel numbering the stage: 0 the pairing, k + 1 step k), made at its
 * first collective on every rank at once. An operation moves in chunks of a
 * slot: every stage of a chunk before the next chunk; each connection's first
 * step of the operation carries its signature. It runs its task itself
 * (task_progress).
 */
#include "coll/coll_int.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"

#define RD_MAX_STAGES 34 /* the pairing (twice) and 32 steps */

/* What a stage does with what it receives. */
enum rd_take {
  RD_TAKE_NONE = 0,
  RD_TAKE_COPY,   /* an extra rank: the result */
  RD_TAKE_COMBINE /* acc = lower block op higher block */
};

struct rd_stage {
  int peer;
  int ch;       /* its connections: send[ch], recv[ch] */
  bool do_send; /* sends acc (before it takes what it receives) */
  enum rd_take take;
  bool peer_lower; /* COMBINE: the peer's block comes first */
  bool last;       /* COMBINE: the last one (the op's post applies) */
};

/* Its state on a communicator: this rank's stages and their connections. */
struct rd_state {
  int n_stages;
  struct rd_stage stages[RD_MAX_STAGES];
  struct mc_conn *send[RD_MAX_STAGES]; /* by channel */
  struct mc_conn *recv[RD_MAX_STAGES];
  char *bounce; /* a slot: a step read from a peer's memory (remote_read) */
};

static struct rd_state *rd_state(const struct ncclComm *comm)
{
  return mc_coll_algo_state(comm, &mc_coll_recdouble_ops);
}

/* The rank of the v-th of the p ranks that exchange. */
static int rd_rank_of(int v, int rem)
{
  return (v < rem) ? 2 * v + 1 : v + rem;
}

static void rd_stages(struct rd_state *st, int rank, int n)
{
  int p = 1;
  int rem;
  int v;
  int k = 0;

  while (2 * p <= n)
    p *= 2;
  rem = n - p;
  st->n_stages = 0;
  if ((rank < 2 * rem) && (rank % 2 == 0)) {
    st->stages[st->n_stages++] = (struct rd_stage){.peer = rank + 1, .ch = 0, .do_send = true};
    st->stages[st->n_stages++] = (struct rd_stage){.peer = rank + 1, .ch = 0, .take = RD_TAKE_COPY};
    return;
  }
  v = (rank < 2 * rem) ? rank / 2 : rank - rem;
  if (rank < 2 * rem)
    st->stages[st->n_stages++] =
        (struct rd_stage){.peer = rank - 1, .ch = 0, .take = RD_TAKE_COMBINE, .peer_lower = true};
  for (int d = 1; d < p; d *= 2, k++)
    st->stages[st->n_stages++] = (struct rd_stage){.peer = rd_rank_of(v ^ d, rem),
                                                   .ch = k + 1,
                                                   .do_send = true,
                                                   .take = RD_TAKE_COMBINE,
                                                   .peer_lower = ((v ^ d) < v),
                                                   .last = (2 * d >= p)};
  if (rank < 2 * rem)
    st->stages[st->n_stages++] = (struct rd_stage){.peer = rank - 1, .ch = 0, .do_send = true};
}

static void rd_state_free(struct ncclComm *comm, void *state, bool aborted)
{
  struct rd_state *st = state;

  for (int c = 0; c < RD_MAX_STAGES; c++) {
    struct mc_conn *conns[2] = {st->send[c], st->recv[c]};
    for (int i = 0; i < 2; i++) {
      if (aborted)
        mc_conn_post_abort(conns[i], comm->rank);
      mc_conn_free(conns[i]);
      free(conns[i]);
    }
  }
  free(st->bounce);
  free(st);
}

static ncclResult_t rd_state_new(struct ncclComm *comm, void **state_out)
{
  struct rd_state *st = NULL;

  MC_CHECK(mc_calloc(&st, 1));
  rd_stages(st, comm->rank, comm->n_ranks);
  *state_out = st;
  return ncclSuccess;
}

/* Connections 2c and 2c + 1: the send and the receive one of channel c. */
static int rd_n_conns(const struct ncclComm *comm)
{
  (void)comm;
  return 2 * RD_MAX_STAGES;
}

static struct mc_conn *rd_conn(struct ncclComm *comm, int i)
{
  struct rd_state *st = rd_state(comm);

  return (i % 2 == 0) ? st->send[i / 2] : st->recv[i / 2];
}

/* The connections of this rank's stages, made at the first RecDouble collective. */
static ncclResult_t rd_first_use(struct mc_op *op, struct mc_conn_req *reqs,
                                 struct mc_conn ***holders, int *n_out)
{
  struct ncclComm *comm = op->comm;
  struct rd_state *st = rd_state(comm);
  int n = 0;

  *n_out = 0;
  for (int s = 0; s < st->n_stages; s++) {
    const struct rd_stage *g = &st->stages[s];
    struct mc_conn **slots[2] = {g->do_send ? &st->send[g->ch] : NULL,
                                 (g->take != RD_TAKE_NONE) ? &st->recv[g->ch] : NULL};
    for (int dir = 0; dir < 2; dir++) {
      if ((slots[dir] == NULL) || (*slots[dir] != NULL))
        continue;
      if (reqs != NULL) {
        MC_CHECK(mc_calloc(slots[dir], 1));
        holders[n] = slots[dir];
        reqs[n] = (struct mc_conn_req){.peer = g->peer,
                                       .is_send = (dir == 0),
                                       .channel = g->ch,
                                       .conn_index = MC_CONN_ALGO + MC_ALGO_RECDOUBLE,
                                       .conn = *slots[dir]};
        *n_out = n + 1;
      }
      n++;
    }
  }
  *n_out = n;
  if ((reqs != NULL) && (n > 0) && (st->bounce == NULL))
    MC_CHECK(mc_calloc(&st->bounce, comm->data.tp.slot_bytes));
  return ncclSuccess;
}

static bool rd_supports(const struct mc_op *op)
{
  return op->kind == MC_COLL_ALLREDUCE;
}

/* The model's time: log2(p) steps (+2 for the pairing) each moving the
 * whole buffer one hop, after a collective call's base cost. */
static float rd_est_us(const struct mc_coll_algo_ops *a, const struct mc_op *op, size_t bytes)
{
  const struct mc_tune *t = &op->comm->coll.tune;
  int n = op->comm->n_ranks;
  int p = 1;
  int steps = 0;

  (void)a;
  if ((t->pair_bw <= 0) || (n < 2))
    return -1.0f;
  while (2 * p <= n) {
    p *= 2;
    steps++;
  }
  if (p < n)
    steps += 2;
  return t->call_lat +
         (float)steps * (t->pair_lat + (float)((double)bytes / (1000.0 * t->pair_bw)));
}

static ncclResult_t rd_plan(struct mc_op *op, struct mc_coll_plan *pl)
{
  struct ncclComm *comm = op->comm;
  struct mc_task t;

  mc_coll_task_init(&t, op, &mc_coll_recdouble_ops);
  t.chunk = mc_coll_chunk_elems(comm, op->esize);
  t.n_steps = rd_state(comm)->n_stages;
  return mc_coll_plan_add(pl, &t);
}

/* Announces one receive step per chunk on each receive connection (NET). */
static void rd_task_start(struct mc_task *t)
{
  struct rd_state *st = rd_state(t->op->comm);
  uint64_t chunks = (t->len + t->chunk - 1) / t->chunk;

  for (int s = 0; s < st->n_stages; s++) {
    struct mc_conn *rc = st->recv[st->stages[s].ch];
    if ((st->stages[s].take != RD_TAKE_NONE) && (rc->kind == MC_TOPO_TRANSPORT_NET))
      mc_conn_recv_expect(rc, chunks);
  }
}

/* Its sends, and the receives of the stages still to come: in the last
 * chunk a stage already taken needs nothing more of its peer, which may have
 * finished and gone (4 ranks: rank 0 returns after stage 1 while rank 1,
 * in its stage 1 with rank 3, no longer needs rank 0). */
static ncclResult_t rd_task_health(const struct mc_task *t)
{
  struct rd_state *st = rd_state(t->op->comm);
  bool last_chunk = (t->len - t->off <= t->chunk);
  bool needed[RD_MAX_STAGES] = {false};

  for (int s = 0; s < st->n_stages; s++)
    if ((st->stages[s].take != RD_TAKE_NONE) && (!last_chunk || (s >= t->j)))
      needed[st->stages[s].ch] = true;
  for (int c = 0; c < RD_MAX_STAGES; c++) {
    MC_CHECK(mc_coll_conn_health(t, st->send[c]));
    if (needed[c])
      MC_CHECK(mc_coll_conn_health(t, st->recv[c]));
  }
  return ncclSuccess;
}

static bool rd_receives_from(const struct mc_task *t, const struct mc_conn *c)
{
  const struct rd_state *st = rd_state(t->op->comm);

  for (int ch = 0; (st != NULL) && (ch < RD_MAX_STAGES); ch++)
    if (st->recv[ch] == c)
      return true;
  return false;
}

/* Takes the step of stage g (arrived) into acc (n elements): 1 done, -1 failed. */
static int rd_take(struct mc_task *t, struct rd_state *st, const struct rd_stage *g, char *acc,
                   size_t n, ncclResult_t *res)
{
  struct mc_op *op = t->op;
  struct mc_conn *rc = st->recv[g->ch];
  size_t bytes = n * op->esize;
  size_t got = 0;
  size_t sent = 0;
  const void *hdr = mc_conn_recv_hdr(rc);
  const char *data;

  if ((t->off == 0) && ((hdr == NULL) || !mc_coll_sig_same(&op->sig, hdr)) &&
      (mc_coll_recv_check(t, rc, &sent, res) < 0))
    return -1;
  data = mc_conn_recv_data(rc, &got);
  /* (size_t)-1: the net cannot tell sizes (a plugin): go by ours. */
  if ((got != bytes) && (got != (size_t)-1)) {
    if (!mc_coll_notice_recv(t, rc, data, got, res))
      *res = MC_FAIL(ncclInvalidUsage,
                     "AllReduce (RecDouble): rank %d received %zu bytes from rank %d where it "
                     "expected %zu: the ranks called different operations, counts or types",
                     t->rank, got, g->peer, bytes);
    return -1;
  }
  if (rc->remote_read) {
    char *dst = (g->take == RD_TAKE_COPY) ? acc : st->bounce;
    if ((*res = mc_conn_read(rc, dst, data, bytes)) != ncclSuccess)
      return -1;
    data = dst;
  }
  if (g->take == RD_TAKE_COPY) {
    if (data != acc)
      memcpy(acc, data, bytes);
  } else if (g->peer_lower) {
    mc_reduce(&op->redop, acc, data, acc, n, g->last ? MC_REDUCE_POST : 0);
  } else {
    mc_reduce(&op->redop, acc, acc, data, n, g->last ? MC_REDUCE_POST : 0);
  }
  mc_conn_recv_release(rc);
  return 1;
}

/* t->off: the chunk's first element; t->j: its stage; t->os_sent: bit 0 the
 * chunk is in acc (the output), bit 1 the stage's send went out. */
static int rd_task_progress(struct mc_task *t, ncclResult_t *res)
{
  struct mc_op *op = t->op;
  struct rd_state *st = rd_state(op->comm);
  int moved = 0;

  while (t->off < t->len) {
    size_t n = (t->len - t->off < t->chunk) ? t->len - t->off : t->chunk;
    char *acc = op->out + t->off * op->esize;
    const struct rd_stage *g = &st->stages[t->j];
    if ((t->os_sent & 1) == 0) {
      /* The rank's own input enters once, multiplied (premulsum). */
      mc_reduce(&op->redop, acc, NULL, op->in + t->off * op->esize, n, MC_REDUCE_PRE_B);
      t->os_sent = 1;
      moved = 1;
    }
    if (g->do_send && ((t->os_sent & 2) == 0)) {
      struct mc_conn *sc = st->send[g->ch];
      if (!mc_conn_send_ready(sc))
        return moved;
      if (t->off == 0)
        mc_conn_send_hdr(sc, &op->sig);
      memcpy(mc_conn_send_slot(sc), acc, n * op->esize);
      mc_conn_send_commit(sc, NULL, n * op->esize);
      t->os_sent |= 2;
      moved = 1;
    }
    if (g->take != RD_TAKE_NONE) {
      if (!mc_conn_recv_ready(st->recv[g->ch]))
        return moved;
      if (rd_take(t, st, g, acc, n, res) < 0)
        return -1;
    }
    moved = 1;
    t->os_sent &= 1;
    if (++t->j == t->n_steps) {
      t->j = 0;
      t->os_sent = 0;
      t->off += n;
    }
  }
  t->recv_done = true;
  for (int c = 0; c < RD_MAX_STAGES; c++)
    if ((st->send[c] != NULL) && !mc_conn_send_drained(st->send[c]))
      return moved;
  t->done = true;
  return 1;
}

const struct mc_coll_algo_ops mc_coll_recdouble_ops = {
    .name = "RecDouble",
    .id = MC_ALGO_RECDOUBLE,
    .supports = rd_supports,
    .choice = MC_CHOICE_MODEL,
    .est_us = rd_est_us,
    .plan = rd_plan,
    .task_progress = rd_task_progress,
    .task_start = rd_task_start,
    .task_health = rd_task_health,
    .task_receives_from = rd_receives_from,
    .state_new = rd_state_new,
    .state_free = rd_state_free,
    .n_conns = rd_n_conns,
    .conn = rd_conn,
    .conns_stray_checked = true,
    .first_use = rd_first_use,
    .first_use_all_peers = true,
    .local_on_one_rank = true,
};
