/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The "Tree" algorithm: NCCL's tree all-reduce (src/device/all_reduce.h,
 * runTreeSplit, SIMPLE protocol) as step generators. Each channel has a tree
 * (struct mc_channel: tree_up, tree_down[]); the channels of a tree
 * all-reduce split the buffer, so with NCCL's double binary tree (half of the
 * channels on tree 0, half on tree 1) each tree carries half of the data.
 *
 * On a channel, a rank that is not the root runs two tasks at once, as
 * NCCL's split thread groups do: "up" reduces chunk after chunk towards the
 * root (receive from every child, add its own input, send to the parent; a
 * leaf only sends), "down" takes the result from the parent and passes it on
 * (receive, copy to the output, send to every child; a leaf only receives).
 * The root runs one task: receive from its children, reduce with its input
 * into the output, send the result back down. A chunk travels down while the
 * next ones travel up: the pipeline is as deep as a connection's FIFO.
 *
 * Broadcast and reduce stay on ring chains, as in NCCL 2.30 (whose tree
 * algorithm covers all-reduce only); asking for Tree gives them Ring.
 */
#include "coll/coll.h"

#include <string.h>

#include "check.h"

static bool channel_has_tree(const struct mc_channel *ch)
{
  if (ch->tree_up >= 0)
    return true;
  for (int i = 0; i < MC_TREE_MAX_ARITY; i++)
    if (ch->tree_down[i] >= 0)
      return true;
  return false;
}

static bool tree_supports(const struct mc_op *op)
{
  const struct ncclComm *comm = op->comm;

  if ((op->kind != MC_COLL_ALLREDUCE) || (comm->n_ranks < 2) || (comm->data.channels == NULL))
    return false;
  for (int c = 0; c < comm->data.n_channels; c++)
    if (!channel_has_tree(&comm->data.channels[c]))
      return false;
  return true;
}

static void add_children(struct mc_task *t, struct mc_channel *ch, bool recv, bool send)
{
  for (int i = 0; i < MC_TREE_MAX_ARITY; i++) {
    if (ch->tree_down[i] < 0)
      continue;
    if (recv)
      t->recv[t->n_recv++] = &ch->tree_recv_down[i];
    if (send)
      t->send[t->n_send++] = &ch->tree_send_down[i];
  }
}

static ncclResult_t tree_plan(struct mc_op *op, struct mc_coll_plan *pl)
{
  struct ncclComm *comm = op->comm;
  int n_ch = mc_coll_op_channels(op);

  for (int c = 0; c < n_ch; c++) {
    struct mc_channel *ch = &comm->data.channels[c];
    struct mc_task t;
    size_t base;
    size_t len;

    if (!mc_coll_channel_part(op, n_ch, c, &base, &len))
      break;
    mc_coll_task_init(&t, op, &mc_coll_tree_ops);
    t.base = base;
    t.len = len;
    /* A chunk is a FIFO slot. NCCL 2.30 halves a tree's chunk, down to
     * 32 KiB, while a channel's share holds few chunks per level of the tree
     * (enqueue.cc, calcCollChunking), to pipeline on GPUs; on hosts every
     * message costs a socket or FIFO hand-off, and between 4 namespace hosts
     * that rule (or its last step alone) made 128 KiB-1 MiB tree all-reduces
     * 1.04-2x slower (bench/algo_pair.c), so meshccl keeps whole slots. */
    t.chunk = mc_coll_chunk_elems(comm, op->esize);
    t.n_steps = 1;
    t.bounce = comm->data.scratch + (size_t)c * comm->data.tp.slot_bytes;
    if (ch->tree_up < 0) {
      t.role = MC_TREE_ROLE_ROOT;
      add_children(&t, ch, true, true);
      MC_CHECK(mc_coll_plan_add(pl, &t));
      continue;
    }
    t.role = MC_TREE_ROLE_UP;
    add_children(&t, ch, true, false);
    t.send[t.n_send++] = &ch->tree_send_up;
    MC_CHECK(mc_coll_plan_add(pl, &t));
    t.role = MC_TREE_ROLE_DOWN;
    t.n_send = 0;
    t.n_recv = 0;
    t.recv[t.n_recv++] = &ch->tree_recv_up;
    add_children(&t, ch, false, true);
    MC_CHECK(mc_coll_plan_add(pl, &t));
  }
  return ncclSuccess;
}

static bool tree_task_prim(const struct mc_task *t, struct mc_prim *p)
{
  if (t->off >= t->len)
    return false;
  p->n = (t->len - t->off < t->chunk) ? t->len - t->off : t->chunk;
  p->in_off = p->out_off = t->base + t->off;
  switch (t->role) {
  case MC_TREE_ROLE_ROOT:
    p->kind = MC_PRIM_RECV_REDUCE_COPY_SEND;
    break;
  case MC_TREE_ROLE_UP:
    p->kind = (t->n_recv > 0) ? MC_PRIM_RECV_REDUCE_SEND : MC_PRIM_SEND;
    break;
  default:
    p->kind = (t->n_send > 0) ? MC_PRIM_RECV_COPY_SEND : MC_PRIM_RECV;
    break;
  }
  return true;
}

static void tree_task_next(struct mc_task *t)
{
  t->off += t->chunk;
}

/* From this size a tree all-reduce runs on an even number of channels, so on
 * both trees of NCCL's double binary tree: on one tree a link carries data
 * up, then down, one way at a time, where the mirrored tree uses the other
 * way (measurements: docs/design/datapath.md, "Algorithms and tuning"). */
#define TREE_BOTH_BYTES (512u << 10)

static int tree_channels_for(const struct ncclComm *comm, size_t bytes)
{
  int nc = mc_coll_channels_for_slots(comm, bytes, comm->data.tp.slot_bytes);

  if ((bytes >= TREE_BOTH_BYTES) && (nc % 2 != 0) && (nc < comm->data.n_channels))
    nc++;
  return nc;
}

/* The channels' tree connections (init's channels', which init frees), made
 * at the first tree collective: all of them or, after a failed connect,
 * none (channel 0's tree links this rank to a parent or a child). */
static bool trees_connected(const struct ncclComm *comm)
{
  const struct mc_channel *ch = &comm->data.channels[0];

  if (ch->tree_up >= 0)
    return ch->tree_send_up.ctrl != NULL;
  for (int i = 0; i < MC_TREE_MAX_ARITY; i++)
    if (ch->tree_down[i] >= 0)
      return ch->tree_send_down[i].ctrl != NULL;
  return true;
}

static ncclResult_t tree_first_use(struct mc_op *op, struct mc_conn_req *reqs,
                                   struct mc_conn ***holders, int *n_out)
{
  *n_out = trees_connected(op->comm) ? 0 : mc_comm_tree_conn_reqs(op->comm, reqs);
  for (int i = 0; (reqs != NULL) && (i < *n_out); i++)
    holders[i] = NULL; /* init's channel connections: init frees them */
  return ncclSuccess;
}

const struct mc_coll_algo_ops mc_coll_tree_ops = {
    .name = "Tree",
    .id = MC_ALGO_TREE,
    .supports = tree_supports,
    .choice = MC_CHOICE_MODEL,
    .est_us = mc_coll_nccl_model_time,
    .plan = tree_plan,
    .task_prim = tree_task_prim,
    .task_next = tree_task_next,
    .first_use = tree_first_use,
    .first_use_all_peers = true,
    .channels_for = tree_channels_for,
    .local_on_one_rank = true,
};
