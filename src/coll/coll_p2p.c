/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Point-to-point transfers (ncclSend / ncclRecv) as an algorithm: one task
 * per call, on the pair's own connection (made at first use by the
 * executor's runtime connect), moving the buffer in slot-sized steps in
 * order. Mirrors NCCL's send/recv work (src/device/sendrecv.h, runSend /
 * runRecv) with one channel per peer.
 */
#include "coll/coll_int.h"

#include <string.h>

#include "check.h"

static bool p2p_supports(const struct mc_op *op)
{
  return (op->kind == MC_COLL_SEND) || (op->kind == MC_COLL_RECV);
}

static ncclResult_t p2p_plan(struct mc_op *op, struct mc_coll_plan *pl)
{
  struct ncclComm *comm = op->comm;
  struct mc_task t;

  mc_coll_task_init(&t, op, &mc_coll_p2p_ops);
  t.chunk = mc_coll_chunk_elems(comm, op->esize);
  t.n_steps = 1;
  if (op->kind == MC_COLL_SEND) {
    t.send[0] = comm->coll.p2p_send[op->peer];
    t.n_send = 1;
  } else {
    t.recv[0] = comm->coll.p2p_recv[op->peer];
    t.n_recv = 1;
  }
  t.bounce = comm->data.scratch + (size_t)comm->data.n_channels * comm->data.tp.slot_bytes;
  return mc_coll_plan_add(pl, &t);
}

static bool p2p_task_prim(const struct mc_task *t, struct mc_prim *p)
{
  if (t->off >= t->len)
    return false;
  p->kind = (t->op->kind == MC_COLL_SEND) ? MC_PRIM_SEND : MC_PRIM_RECV;
  p->n = (t->len - t->off < t->chunk) ? t->len - t->off : t->chunk;
  p->in_off = p->out_off = t->off;
  return true;
}

static void p2p_task_next(struct mc_task *t)
{
  t->off += t->chunk;
}

/* One connection per peer and direction, made at the first send to (receive
 * from) that peer. */
static ncclResult_t p2p_first_use(struct mc_op *op, struct mc_conn_req *reqs,
                                  struct mc_conn ***holders, int *n_out)
{
  struct ncclComm *comm = op->comm;
  struct mc_conn **slot =
      (op->kind == MC_COLL_SEND) ? &comm->coll.p2p_send[op->peer] : &comm->coll.p2p_recv[op->peer];

  *n_out = 0;
  if (*slot != NULL)
    return ncclSuccess;
  *n_out = 1;
  if (reqs == NULL)
    return ncclSuccess;
  MC_CHECK(mc_calloc(slot, 1));
  holders[0] = slot;
  reqs[0] = (struct mc_conn_req){.peer = op->peer,
                                 .is_send = (op->kind == MC_COLL_SEND),
                                 .channel = 0,
                                 .conn_index = MC_CONN_P2P,
                                 .conn = *slot};
  return ncclSuccess;
}

/* Connections 2p and 2p + 1: the send to and the receive from rank p
 * (the communicator's point-to-point ones). */
static int p2p_n_conns(const struct ncclComm *comm)
{
  return (comm->coll.p2p_send != NULL) ? 2 * comm->n_ranks : 0;
}

static struct mc_conn *p2p_conn(struct ncclComm *comm, int i)
{
  return (i % 2 == 0) ? comm->coll.p2p_send[i / 2] : comm->coll.p2p_recv[i / 2];
}

const struct mc_coll_algo_ops mc_coll_p2p_ops = {
    .name = "P2P",
    .id = MC_ALGO_P2P,
    .supports = p2p_supports,
    .choice = MC_CHOICE_ONLY,
    .plan = p2p_plan,
    .task_prim = p2p_task_prim,
    .task_next = p2p_task_next,
    .n_conns = p2p_n_conns,
    .conn = p2p_conn,
    .first_use = p2p_first_use,
    .local_on_one_rank = false, /* send/recv to self: matched before planning */
};

/* Self send/recv pairs: the k-th send to self matches the k-th receive. */
ncclResult_t mc_coll_p2p_self(struct mc_coll_batch *b)
{
  for (int i = 0; i < b->n_ops; i++) {
    struct mc_op *s = &b->ops[i];
    bool matched = false;
    if ((s->kind != MC_COLL_SEND) || (s->peer != s->comm->rank) || (s->count == 0))
      continue;
    for (int k = 0; (k < b->n_ops) && !matched; k++) {
      struct mc_op *r = &b->ops[k];
      if ((r->kind == MC_COLL_RECV) && (r->comm == s->comm) && (r->peer == r->comm->rank) &&
          (r->count != 0) && (r->in == NULL)) {
        if (r->count * r->esize != s->count * s->esize)
          return MC_FAIL(ncclInvalidUsage,
                         "Send/Recv to self on rank %d: %zu bytes sent, %zu bytes received",
                         s->comm->rank, s->count * s->esize, r->count * r->esize);
        memmove(r->out, s->in, s->count * s->esize);
        r->in = r->out; /* marks it matched */
        matched = true;
      }
    }
    if (!matched)
      return MC_FAIL(ncclInvalidUsage,
                     "Send to self on rank %d has no matching ncclRecv in the group",
                     s->comm->rank);
    s->count = 0;
  }
  for (int i = 0; i < b->n_ops; i++) {
    struct mc_op *r = &b->ops[i];
    if ((r->kind == MC_COLL_RECV) && (r->peer == r->comm->rank) && (r->count != 0)) {
      if (r->in == NULL)
        return MC_FAIL(ncclInvalidUsage,
                       "Recv from self on rank %d has no matching ncclSend in the group",
                       r->comm->rank);
      r->count = 0;
    }
  }
  return ncclSuccess;
}
