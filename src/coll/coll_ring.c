/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL's ring algorithms (device/all_reduce.h, all_gather.h,
 * reduce_scatter.h, broadcast.h, reduce.h of NCCL 2.30, rewritten as step
 * generators), and point-to-point transfers. A task is one operation's part
 * on one channel; its data is walked in loops, each loop a fixed sequence of
 * primitives that every rank derives identically, so that the streams of
 * both ends of each connection match step for step (zero-sized steps
 * included).
 *
 * Ring positions: ring[i] is the rank i hops downstream; chunk c of a loop
 * belongs to the rank at ring position c relative to rank 0, i.e. to rank c
 * while the ring is rank order.
 */
#include "coll/coll.h"

static size_t divup(size_t a, size_t b)
{
  return (a + b - 1) / b;
}

static size_t min_sz(size_t a, size_t b)
{
  return (a < b) ? a : b;
}

void mc_ring_task_init(struct mc_task *t)
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
  int r = t->rank;
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
  int r = t->rank;
  int j = t->j;
  int block = (r - j + n) % n; /* whose data moves at step j */
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
  int r = t->rank;
  int j = t->j;
  int block = (r + n - 1 - j) % n;
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

static bool chain_prim(const struct mc_task *t, struct mc_prim *p)
{
  int n = t->n_ranks;
  int root = t->op->root;
  int pos;

  p->n = min_sz(t->chunk, t->len - t->off);
  p->in_off = t->base + t->off;
  p->out_off = p->in_off;
  if (t->op->kind == MC_COLL_BROADCAST) {
    pos = (t->rank - root + n) % n; /* 0: the root, n-1: the end of the chain */
    p->kind = (pos == 0)       ? MC_PRIM_COPY_SEND
              : (pos == n - 1) ? MC_PRIM_RECV
                               : MC_PRIM_RECV_COPY_SEND;
  } else {
    pos = (t->rank - root - 1 + 2 * n) % n; /* 0: after the root, n-1: the root */
    p->kind = (pos == 0)       ? MC_PRIM_SEND
              : (pos == n - 1) ? MC_PRIM_RECV_REDUCE_COPY
                               : MC_PRIM_RECV_REDUCE_SEND;
  }
  return true;
}

bool mc_ring_task_prim(struct mc_task *t, struct mc_prim *p)
{
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
  case MC_COLL_SEND:
  case MC_COLL_RECV:
    p->kind = (t->op->kind == MC_COLL_SEND) ? MC_PRIM_SEND : MC_PRIM_RECV;
    p->n = min_sz(t->chunk, t->len - t->off);
    p->in_off = p->out_off = t->base + t->off;
    return true;
  }
  return false;
}

void mc_ring_task_next(struct mc_task *t)
{
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
