/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one-shot all-reduce (meshccl's; NCCL has no host counterpart, its
 * closest relative is the one-shot all-reduce of NVLS / symmetric memory
 * kernels, src/device/symmetric/): for small sizes with every rank on one
 * host, each rank copies its input to every other rank over a connection of
 * its own per peer (made at first use), then reduces the n inputs in rank
 * order, so that all ranks compute bitwise the same result with one hop of
 * latency. It runs its task itself (task_progress) instead of a stream of
 * primitives. Nothing here depends on a limit on the number of ranks.
 * Each copy is the first step of the operation on its connection: it
 * carries the signature (coll_sig.c), which the receiver checks before it
 * reduces anything.
 */
#include "coll/coll.h"

#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "log.h"
#include "params.h"

/* Its state on a communicator: a send and a receive connection with every
 * peer ([n_ranks], made at the first one-shot or symmetric collective), and
 * the inputs of one reduction (tasks of one communicator run one at a time). */
struct os_state {
  int n_ranks;
  struct mc_conn **send;
  struct mc_conn **recv;
  const void **srcs;
};

static struct os_state *os_state(const struct ncclComm *comm)
{
  return mc_coll_algo_state(comm, &mc_coll_oneshot_ops);
}

struct mc_conn *mc_coll_os_send(const struct ncclComm *comm, int peer)
{
  return os_state(comm)->send[peer];
}

struct mc_conn *mc_coll_os_recv(const struct ncclComm *comm, int peer)
{
  return os_state(comm)->recv[peer];
}

const void **mc_coll_os_srcs(const struct ncclComm *comm)
{
  return os_state(comm)->srcs;
}

static void os_state_free(struct ncclComm *comm, void *state, bool aborted)
{
  struct os_state *st = state;

  for (int r = 0; r < st->n_ranks; r++) {
    if (aborted) {
      mc_conn_post_abort(st->send[r], comm->rank);
      mc_conn_post_abort(st->recv[r], comm->rank);
    }
    mc_conn_free(st->send[r]);
    free(st->send[r]);
    mc_conn_free(st->recv[r]);
    free(st->recv[r]);
  }
  free(st->send);
  free(st->recv);
  free(st->srcs);
  free(st);
}

static ncclResult_t os_state_new(struct ncclComm *comm, void **state_out)
{
  struct os_state *st = NULL;
  ncclResult_t res = ncclSuccess;

  MC_CHECK(mc_calloc(&st, 1));
  st->n_ranks = comm->n_ranks;
  MC_CHECK_GOTO(mc_calloc(&st->send, (size_t)comm->n_ranks), res, fail);
  MC_CHECK_GOTO(mc_calloc(&st->recv, (size_t)comm->n_ranks), res, fail);
  MC_CHECK_GOTO(mc_calloc(&st->srcs, (size_t)comm->n_ranks), res, fail);
  *state_out = st;
  return ncclSuccess;
fail:
  os_state_free(comm, st, false);
  return res;
}

/* Connections 2p and 2p + 1: the send to and the receive from rank p. */
static int os_n_conns(const struct ncclComm *comm)
{
  return 2 * comm->n_ranks;
}

static struct mc_conn *os_conn(struct ncclComm *comm, int i)
{
  struct os_state *st = os_state(comm);

  return (i % 2 == 0) ? st->send[i / 2] : st->recv[i / 2];
}

/*
 * One-shot all-reduce (small sizes, one host): every rank copies its input
 * to every other rank, then reduces the n inputs in rank order, so that all
 * ranks compute bitwise the same result with one hop of latency.
 */
static int oneshot_task_progress(struct mc_task *t, ncclResult_t *res)
{
  struct mc_op *op = t->op;
  struct ncclComm *comm = op->comm;
  int n = t->n_ranks;
  size_t bytes = op->count * op->esize;
  struct os_state *st = os_state(comm);
  const void **srcs = st->srcs; /* [n_ranks]: one-shot tasks of a comm run one at a time */
  size_t bounce_off = 0;
  int moved = 0;
  bool all = true;
  unsigned flags = MC_REDUCE_POST; /* the inputs arrive multiplied (premulsum) */

  if (t->j == 0) {
    /* Peers in the order rank+1, rank+2, ...: os_sent counts those posted. */
    while (t->os_sent < n - 1) {
      int p = (t->rank + 1 + t->os_sent) % n;
      struct mc_conn *sc = st->send[p];
      if (!mc_conn_send_ready(sc))
        break;
      /* A copy, never a pointer: in place, the output overwrites the input.
       * Premulsum: each rank's input is multiplied by its own scalar. */
      mc_conn_send_hdr(sc, &op->sig);
      if (op->redop.kind == MC_RED_PREMULSUM)
        mc_reduce(&op->redop, mc_conn_send_slot(sc), NULL, op->in, op->count, MC_REDUCE_PRE_B);
      else
        memcpy(mc_conn_send_slot(sc), op->in, bytes);
      mc_conn_send_commit(sc, NULL, bytes);
      t->os_sent++;
      moved = 1;
    }
    if (t->os_sent < n - 1)
      return moved;
    /* Each arrived copy's signature at once (a peer's notice must not wait
     * for a peer that will never send). */
    for (int p = 0; p < n; p++) {
      struct mc_conn *rc = st->recv[p];
      const void *hdr;
      size_t sent = 0;
      if (p == t->rank)
        continue;
      if (!mc_conn_recv_ready(rc)) {
        all = false;
        continue;
      }
      hdr = mc_conn_recv_hdr(rc);
      if (((hdr == NULL) || !mc_coll_sig_same(&op->sig, hdr)) &&
          (mc_coll_recv_check(t, rc, &sent, res) < 0))
        return -1;
    }
    if (!all)
      return moved;
    for (int p = 0; p < n; p++) {
      struct mc_conn *rc = st->recv[p];
      size_t got = 0;
      const char *data;
      if (p == t->rank) {
        srcs[p] = op->in;
        if (op->redop.kind == MC_RED_PREMULSUM) {
          char *own = t->bounce + bounce_off;
          mc_reduce(&op->redop, own, NULL, op->in, op->count, MC_REDUCE_PRE_B);
          bounce_off += (bytes + 63) & ~(size_t)63;
          srcs[p] = own;
        }
        continue;
      }
      data = mc_conn_recv_data(rc, &got);
      /* (size_t)-1: the net cannot tell sizes (a plugin): go by ours. */
      if ((got != bytes) && (got != (size_t)-1)) {
        *res = MC_FAIL(ncclInvalidUsage,
                       "AllReduce: rank %d received %zu bytes from rank %d where it expected %zu: "
                       "the ranks called different operations, counts or types",
                       t->rank, got, p, bytes);
        return -1;
      }
      if (rc->remote_read) {
        char *dst = t->bounce + bounce_off;
        if ((*res = mc_conn_read(rc, dst, data, bytes)) != ncclSuccess)
          return -1;
        data = dst;
        bounce_off += (bytes + 63) & ~(size_t)63;
      }
      srcs[p] = data;
    }
    mc_reduce_multi(&op->redop, op->out, srcs, n, op->count, flags);
    for (int p = 0; p < n; p++)
      if (p != t->rank)
        mc_conn_recv_release(st->recv[p]);
    t->j = 1;
    t->recv_done = true;
    moved = 1;
  }
  for (int p = 0; p < n; p++)
    if ((p != t->rank) && !mc_conn_send_drained(st->send[p]))
      return moved;
  t->done = true;
  return 1;
}

static bool oneshot_supports(const struct mc_op *op)
{
  const struct ncclComm *comm = op->comm;
  size_t limit = comm->data.tp.oneshot_bytes;
  size_t bytes = op->count * op->esize;

  return (op->kind == MC_COLL_ALLREDUCE) && (comm->nodes.n_nodes == 1) && (comm->n_ranks > 1) &&
         (bytes <= limit) &&
         ((size_t)comm->n_ranks * ((bytes + 63) & ~(size_t)63) <= comm->data.tp.slot_bytes);
}

size_t mc_coll_oneshot_slot_bytes(const struct ncclComm *comm)
{
  size_t b = comm->data.tp.oneshot_bytes;

  /* whole pages: transports allocate the slots page-aligned (aligned_alloc
   * wants a multiple of the alignment) and a decided threshold need not be */
  return (b < 4096) ? 4096 : (b + 4095) & ~(size_t)4095;
}

/* A send and a receive connection with every peer (the state's). */
ncclResult_t mc_coll_oneshot_first_use(struct mc_op *op, struct mc_conn_req *reqs,
                                       struct mc_conn ***holders, int *n_out)
{
  struct ncclComm *comm = op->comm;
  struct os_state *st = os_state(comm);
  int n = 0;

  *n_out = 0;
  if (st->send[(comm->rank + 1) % comm->n_ranks] != NULL)
    return ncclSuccess;
  if (reqs == NULL) {
    *n_out = 2 * (comm->n_ranks - 1);
    return ncclSuccess;
  }
  for (int p = 0; p < comm->n_ranks; p++) {
    for (int dir = 0; (dir < 2) && (p != comm->rank); dir++) {
      struct mc_conn **os = dir ? &st->send[p] : &st->recv[p];
      MC_CHECK(mc_calloc(os, 1));
      holders[n] = os;
      reqs[n++] = (struct mc_conn_req){.peer = p,
                                       .is_send = dir,
                                       .channel = 0,
                                       .conn_index = MC_CONN_ONESHOT,
                                       .slot_bytes = mc_coll_oneshot_slot_bytes(comm),
                                       .conn = *os};
      *n_out = n;
    }
  }
  return ncclSuccess;
}

bool mc_coll_oneshot_receives_from(const struct mc_task *t, const struct mc_conn *c)
{
  const struct os_state *st = os_state(t->op->comm);

  return (st != NULL) && (st->recv[c->peer] == c);
}

static ncclResult_t oneshot_plan(struct mc_op *op, struct mc_coll_plan *pl)
{
  struct ncclComm *comm = op->comm;
  struct mc_task t;

  mc_coll_task_init(&t, op, &mc_coll_oneshot_ops);
  t.bounce = comm->data.scratch + (size_t)comm->data.n_channels * comm->data.tp.slot_bytes;
  return mc_coll_plan_add(pl, &t);
}

void mc_coll_os_expect(struct mc_task *t, uint64_t steps)
{
  struct os_state *st = os_state(t->op->comm);

  for (int p = 0; p < st->n_ranks; p++)
    if ((p != t->rank) && (st->recv[p]->kind == MC_TOPO_TRANSPORT_NET))
      mc_conn_recv_expect(st->recv[p], steps);
}

/* Announces one receive step per peer (NET connections). */
static void oneshot_task_start(struct mc_task *t)
{
  mc_coll_os_expect(t, 1);
}

ncclResult_t mc_coll_os_health(const struct mc_task *t)
{
  struct os_state *st = os_state(t->op->comm);

  for (int r = 0; r < st->n_ranks; r++) {
    MC_CHECK(mc_coll_conn_health(t, st->send[r]));
    MC_CHECK(mc_coll_conn_health(t, st->recv[r]));
  }
  return ncclSuccess;
}

const struct mc_coll_algo_ops mc_coll_oneshot_ops = {
    .name = "OneShot",
    .id = MC_ALGO_ONESHOT,
    .supports = oneshot_supports,
    .choice = MC_CHOICE_FIRST,
    .choice_why = "small all-reduce on one host",
    .plan = oneshot_plan,
    .task_progress = oneshot_task_progress,
    .task_start = oneshot_task_start,
    .task_health = mc_coll_os_health,
    .task_receives_from = mc_coll_oneshot_receives_from,
    .state_new = os_state_new,
    .state_free = os_state_free,
    .n_conns = os_n_conns,
    .conn = os_conn,
    .conns_stray_checked = true,
    .first_use = mc_coll_oneshot_first_use,
    .first_use_all_peers = true,
    .local_on_one_rank = true,
};
