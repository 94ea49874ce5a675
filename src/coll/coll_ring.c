/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The "Ring" algorithm: NCCL's ring algorithms (src/device/all_reduce.h
 * runRing, all_gather.h, reduce_scatter.h, and the ring chains of
 * broadcast.h and reduce.h of NCCL 2.30, rewritten as step generators). A
 * task is one operation's part on one channel; its data is walked in loops,
 * each loop a fixed sequence of primitives that every rank derives
 * identically, so that the streams of both ends of each connection match
 * step for step (zero-sized steps included).
 *
 * Ring positions come from the channel's ring order, never from rank
 * numbers (channels may order the ranks differently): ring[i] is the rank i
 * hops downstream; ring_ix is this rank's position counted from rank 0
 * (NCCL's ring->index); chunk c of an all-reduce loop belongs to the rank at
 * position c; all-gather and reduce-scatter move the block of the rank
 * ring[n - j] / ring[n - 1 - j] at step j (NCCL's ring->userRanks[]); the
 * broadcast and reduce chains run along the ring from the root.
 *
 * A chain's first rank only sends, so nothing would tell it that a peer
 * made another call (another root, another count): the chain's last rank,
 * once it has checked the signature of its first step (coll_sig.c), sends
 * one empty step back to the first over the ring edge that closes the
 * chain (meshccl's; NCCL has no signature to check), and the first rank
 * takes it after its data. A channel's chain costs one empty step.
 */
#include "coll/coll.h"

#include <string.h>

#include "check.h"

static size_t divup(size_t a, size_t b)
{
  return (a + b - 1) / b;
}

static size_t min_sz(size_t a, size_t b)
{
  return (a < b) ? a : b;
}

static void ring_task_init(struct mc_task *t)
{
  int n = t->n_ranks;

  t->off = 0;
  t->j = 0;
  switch (t->op->kind) {
  case MC_COLL_ALLREDUCE:
    t->n_steps = 2 * n - 1;
    break;
  case MC_COLL_ALLGATHER:
  case MC_COLL_REDUCESCATTER:
    t->n_steps = n;
    break;
  default:
    t->n_steps = 1;
    break;
  }
  if (t->op->kind == MC_COLL_ALLREDUCE)
    t->real = min_sz(t->chunk, divup(t->len, (size_t)n));
}

/* Elements of chunk c in the current all-reduce loop. */
static void ar_chunk(const struct mc_task *t, int c, size_t *off, size_t *nelem)
{
  size_t start = t->off + (size_t)c * t->real;
  *off = t->base + start;
  *nelem = (start >= t->len) ? 0 : min_sz(t->real, t->len - start);
}

static bool allreduce_prim(const struct mc_task *t, struct mc_prim *p)
{
  int n = t->n_ranks;
  int r = t->ring_ix;
  int j = t->j;
  int c;

  if (j == 0) {
    p->kind = MC_PRIM_SEND;
    c = (r + n - 1) % n;
  } else if (j < n - 1) {
    p->kind = MC_PRIM_RECV_REDUCE_SEND;
    c = (r + n - 1 - j) % n;
  } else if (j == n - 1) {
    p->kind = MC_PRIM_RECV_REDUCE_COPY_SEND;
    c = r;
  } else if (j < 2 * n - 2) {
    p->kind = MC_PRIM_RECV_COPY_SEND;
    c = (r + n - (j - n + 1)) % n;
  } else {
    p->kind = MC_PRIM_RECV;
    c = (r + 1) % n;
  }
  ar_chunk(t, c, &p->in_off, &p->n);
  p->out_off = p->in_off;
  return true;
}

static bool allgather_prim(const struct mc_task *t, struct mc_prim *p)
{
  int n = t->n_ranks;
  int j = t->j;
  int block = t->ring[(n - j) % n]; /* whose data moves at step j */
  size_t count = t->op->count;

  p->n = min_sz(t->chunk, t->len - t->off);
  p->in_off = t->base + t->off;
  p->out_off = (size_t)block * count + t->base + t->off;
  if (j == 0)
    p->kind = MC_PRIM_COPY_SEND;
  else if (j < n - 1)
    p->kind = MC_PRIM_RECV_COPY_SEND;
  else
    p->kind = MC_PRIM_RECV;
  return true;
}

static bool reducescatter_prim(const struct mc_task *t, struct mc_prim *p)
{
  int n = t->n_ranks;
  int j = t->j;
  int block = t->ring[n - 1 - j];
  size_t count = t->op->count;

  p->n = min_sz(t->chunk, t->len - t->off);
  p->in_off = (size_t)block * count + t->base + t->off;
  p->out_off = t->base + t->off;
  if (j == 0)
    p->kind = MC_PRIM_SEND;
  else if (j < n - 1)
    p->kind = MC_PRIM_RECV_REDUCE_SEND;
  else
    p->kind = MC_PRIM_RECV_REDUCE_COPY;
  return true;
}

/* Position in the chain: 0 its first rank (the broadcast root, the rank
 * after the reduce root), n - 1 its last. t->role is this rank's distance
 * downstream from the root. */
static int chain_pos(const struct mc_task *t)
{
  int n = t->n_ranks;

  return (t->op->kind == MC_COLL_BROADCAST) ? t->role : (t->role - 1 + n) % n;
}

/* The last rank's empty step to the first (after its first chunk), taken
 * by the first after its data. */
static bool chain_verdict(const struct mc_task *t, struct mc_prim *p)
{
  int pos = chain_pos(t);

  p->n = 0;
  p->in_off = t->base;
  p->out_off = t->base;
  if ((t->off >= t->len) && (pos == 0) && (t->j == 0)) {
    p->kind = MC_PRIM_RECV;
    return true;
  }
  if ((t->off == 0) && (pos == t->n_ranks - 1) && (t->j == 1)) {
    p->kind = MC_PRIM_SEND;
    return true;
  }
  return false;
}

static bool chain_prim(const struct mc_task *t, struct mc_prim *p)
{
  int n = t->n_ranks;
  int pos;

  if ((t->off >= t->len) || (t->j == 1))
    return chain_verdict(t, p);
  p->n = min_sz(t->chunk, t->len - t->off);
  p->in_off = t->base + t->off;
  p->out_off = p->in_off;
  if (t->op->kind == MC_COLL_BROADCAST) {
    pos = t->role; /* 0: the root, n-1: the end of the chain */
    p->kind = (pos == 0)       ? MC_PRIM_COPY_SEND
              : (pos == n - 1) ? MC_PRIM_RECV
                               : MC_PRIM_RECV_COPY_SEND;
  } else {
    pos = (t->role - 1 + n) % n; /* 0: after the root, n-1: the root */
    p->kind = (pos == 0)       ? MC_PRIM_SEND
              : (pos == n - 1) ? MC_PRIM_RECV_REDUCE_COPY
                               : MC_PRIM_RECV_REDUCE_SEND;
  }
  return true;
}

static bool ring_task_prim(const struct mc_task *t, struct mc_prim *p)
{
  if ((t->op->kind == MC_COLL_BROADCAST) || (t->op->kind == MC_COLL_REDUCE))
    return (t->len > 0) && chain_prim(t, p);
  if ((t->off >= t->len) || (t->len == 0))
    return false;
  switch (t->op->kind) {
  case MC_COLL_ALLREDUCE:
    return allreduce_prim(t, p);
  case MC_COLL_ALLGATHER:
    return allgather_prim(t, p);
  case MC_COLL_REDUCESCATTER:
    return reducescatter_prim(t, p);
  case MC_COLL_BROADCAST:
  case MC_COLL_REDUCE:
    return chain_prim(t, p);
  default:
    return false;
  }
}

static void chain_next(struct mc_task *t)
{
  bool last = (chain_pos(t) == t->n_ranks - 1);

  if ((t->off >= t->len) || (last && (t->off == 0) && (t->j == 0))) {
    t->j = 1; /* the verdict comes next (last rank), or was taken (first) */
    return;
  }
  t->j = 0;
  t->off += t->chunk;
}

static void ring_task_next(struct mc_task *t)
{
  if ((t->op->kind == MC_COLL_BROADCAST) || (t->op->kind == MC_COLL_REDUCE)) {
    chain_next(t);
    return;
  }
  if (++t->j < t->n_steps)
    return;
  t->j = 0;
  if (t->op->kind == MC_COLL_ALLREDUCE) {
    t->off += (size_t)t->n_ranks * t->real;
    if (t->off < t->len)
      t->real = min_sz(t->chunk, divup(t->len - t->off, (size_t)t->n_ranks));
  } else {
    t->off += t->chunk;
  }
}

/* Position of rank in the ring that starts at this rank: ring[i] == rank. */
static int ring_find(const int *ring, int n, int rank)
{
  for (int i = 0; i < n; i++)
    if (ring[i] == rank)
      return i;
  return 0;
}

static bool ring_supports(const struct mc_op *op)
{
  return (op->kind != MC_COLL_SEND) && (op->kind != MC_COLL_RECV);
}

/* One task per channel, each on a contiguous part of the data. */
static ncclResult_t ring_plan(struct mc_op *op, struct mc_coll_plan *pl)
{
  struct ncclComm *comm = op->comm;
  int n = comm->n_ranks;
  int n_ch = mc_coll_op_channels(op);

  for (int c = 0; c < n_ch; c++) {
    struct mc_channel *ch = &comm->data.channels[c];
    struct mc_task t;
    size_t base;
    size_t len;

    if (!mc_coll_channel_part(op, n_ch, c, &base, &len))
      break;
    mc_coll_task_init(&t, op, &mc_coll_ring_ops);
    t.base = base;
    t.len = len;
    t.chunk = mc_coll_chunk_elems(comm, op->esize);
    t.send[0] = &ch->send;
    t.recv[0] = &ch->recv;
    t.n_send = 1;
    t.n_recv = 1;
    t.bounce = comm->data.scratch + (size_t)c * comm->data.tp.slot_bytes;
    t.ring = ch->ring;
    t.ring_ix = (n - ring_find(ch->ring, n, 0)) % n;
    t.role = (n - ring_find(ch->ring, n, op->root)) % n; /* chains: hops from the root */
    ring_task_init(&t);
    MC_CHECK(mc_coll_plan_add(pl, &t));
  }
  return ncclSuccess;
}

/* A ring that crosses hosts earns a channel with half a slot: its channels'
 * sockets carry a step's data side by side (measurements:
 * docs/design/datapath.md, "Algorithms and tuning"). */
static int ring_channels_for(const struct ncclComm *comm, size_t bytes)
{
  size_t per = comm->data.tp.slot_bytes;

  if ((comm->nodes.n_nodes > 1) && (per > 1))
    per /= 2;
  return mc_coll_channels_for_slots(comm, bytes, per);
}

const struct mc_coll_algo_ops mc_coll_ring_ops = {
    .name = "Ring",
    .id = MC_ALGO_RING,
    .supports = ring_supports,
    .choice = MC_CHOICE_MODEL,
    .is_default = true,
    .est_us = mc_coll_nccl_model_time,
    .plan = ring_plan,
    .task_prim = ring_task_prim,
    .task_next = ring_task_next,
    .channels_for = ring_channels_for,
    .local_on_one_rank = true,
};
