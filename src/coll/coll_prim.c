/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The executor's primitives (the host edition of NCCL's device primitives,
 * src/device/prims_simple.h): a primitive of a task receives from, reduces
 * with, copies to and sends to its connections (several peers: a tree
 * node's children), one slot-sized step at a time when all of them are
 * ready; mc_coll_task_progress runs a task's primitives while they can
 * move, checking the signatures of the first steps it receives
 * (coll_check.c) before the first primitive that receives.
 */
#include "coll/coll_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "params.h"
#include "utils.h"

void mc_coll_copy_out(const struct mc_op *op, void *dst, const void *src, size_t bytes)
{
  size_t limit = op->comm->data.tp.stream_out_bytes;

  if ((op->in != op->out) && (limit > 0) && (op->count * op->esize >= limit) && (bytes >= 65536))
    mc_copy_stream(dst, src, bytes);
  else
    memcpy(dst, src, bytes);
}

#define FUSE_BLOCK 32768 /* bytes per block of a fused pass (fits in L1) */

/* The next slot of sc = reduce(a, b) (a NULL: b with flags applied). When
 * the connection streams its slot writes, through an L1 block: the
 * reduction kernels write with plain stores. */
static void reduce_to_slot(struct mc_conn *sc, const struct mc_redop *op, const char *a,
                           const char *b, size_t n, size_t esize, unsigned flags)
{
  char *slot = mc_conn_send_slot(sc);
  size_t per = FUSE_BLOCK / esize;
  _Alignas(64) char block[FUSE_BLOCK];

  if (!sc->stream.on) {
    mc_reduce(op, slot, a, b, n, flags);
    return;
  }
  if ((a == NULL) && (flags == 0)) {
    mc_conn_slot_copy(sc, slot, b, n * esize);
    return;
  }
  if (per == 0)
    per = 1;
  for (size_t i = 0; i < n; i += per) {
    size_t m = (n - i < per) ? n - i : per;
    size_t off = i * esize;
    mc_reduce(op, block, (a != NULL) ? a + off : NULL, b + off, m, flags);
    mc_conn_slot_copy(sc, slot + off, block, m * esize);
  }
}

/* Publishes bytes at src (stable until the op ends when stable) to the next rank. */
static void send_data(struct mc_conn *sc, const struct mc_redop *op, const char *src, size_t n,
                      size_t bytes, bool stable, unsigned pre)
{
  if (bytes == 0) { /* src may be NULL (a chain's empty step) */
    mc_conn_send_commit(sc, NULL, 0);
    return;
  }
  if (stable && mc_conn_send_ptr_ok(sc, bytes) && (pre == 0)) {
    mc_conn_send_commit(sc, src, bytes);
    return;
  }
  if (pre != 0)
    reduce_to_slot(sc, op, NULL, src, n, bytes / n, pre);
  else
    mc_conn_slot_copy(sc, mc_conn_send_slot(sc), src, bytes);
  mc_conn_send_commit(sc, NULL, bytes);
}

/* dst1 = dst2 = reduce(a, b) (a NULL: copy of b), block by block, so that the
 * second write reads from L1 instead of memory. */
static void reduce2(const struct mc_conn *sc, const struct mc_redop *op, char *dst1, char *dst2,
                    const char *a, const char *b, size_t n, size_t esize, unsigned flags)
{
  size_t per = FUSE_BLOCK / esize;

  if (per == 0)
    per = 1;
  for (size_t i = 0; i < n; i += per) {
    size_t m = (n - i < per) ? n - i : per;
    size_t off = i * esize;
    if ((a == NULL) && (flags == 0)) {
      if (dst1 != b + off)
        memcpy(dst1 + off, b + off, m * esize);
    } else {
      mc_reduce(op, dst1 + off, (a != NULL) ? a + off : NULL, b + off, m, flags);
    }
    mc_conn_slot_copy(sc, dst2 + off, dst1 + off, m * esize);
  }
}

/* The first step t sends (on every connection of the primitive) carries its signature. */
static void stage_sig(struct mc_task *t, struct mc_conn *const *conns, int n)
{
  if (t->sent_any)
    return;
  for (int i = 0; i < n; i++)
    mc_conn_send_hdr(conns[i], &t->op->sig);
  t->sent_any = true;
}

static ncclResult_t size_mismatch(struct mc_task *t, const struct mc_conn *c, const char *src,
                                  size_t got, size_t bytes)
{
  ncclResult_t res;

  if (mc_coll_notice_recv(t, c, src, got, &res))
    return res;
  return MC_FAIL(ncclInvalidUsage,
                 "%s: rank %d received %zu bytes from rank %d where it expected %zu: the ranks "
                 "called different operations, counts or types",
                 mc_coll_name(t->op->kind), t->rank, got, c->peer, bytes);
}

static int prim_run_one(struct mc_task *t, const struct mc_prim *p, ncclResult_t *res)
{
  const struct mc_op *op = t->op;
  struct mc_conn *sc = t->send[0];
  struct mc_conn *rc = t->recv[0];
  size_t bytes = p->n * op->esize;
  const char *in = (op->in != NULL) ? op->in + p->in_off * op->esize : NULL;
  char *out = (op->out != NULL) ? op->out + p->out_off * op->esize : NULL;
  const char *src = NULL;
  size_t got = 0;
  unsigned pre = (op->redop.kind == MC_RED_PREMULSUM) ? MC_REDUCE_PRE_B : 0;

  if (mc_prim_recvs(p->kind)) {
    if (!mc_conn_recv_ready(rc))
      return 0;
    src = mc_conn_recv_data(rc, &got);
    /* (size_t)-1: the net cannot tell sizes (a plugin): go by ours. */
    if ((got != bytes) && (got != (size_t)-1)) {
      if (!mc_conn_recv_pin(rc)) /* the notice it may be is read in place */
        return 0;
      *res = size_mismatch(t, rc, src, got, bytes);
      return -1;
    }
  }
  if (mc_prim_sends(p->kind) && !mc_conn_send_ready_sampled(sc))
    return 0;
  /* A step read in place is pinned while this call uses it (until its release). */
  if ((src != NULL) && !mc_conn_recv_pin(rc))
    return 0;
  if (mc_prim_sends(p->kind))
    stage_sig(t, &sc, 1);
  /* Data that lives in another process comes over first (one copy). */
  if ((src != NULL) && mc_conn_recv_remote(rc) && (bytes > 0)) {
    bool to_out = (p->kind == MC_PRIM_RECV) || (p->kind == MC_PRIM_RECV_COPY_SEND);
    char *dst = to_out ? out : t->bounce;
    if ((*res = mc_conn_read(rc, dst, src, bytes)) != ncclSuccess)
      return -1;
    src = dst;
  }
  switch (p->kind) {
  case MC_PRIM_SEND:
    send_data(sc, &op->redop, in, p->n, bytes, true, pre);
    break;
  case MC_PRIM_COPY_SEND:
    if (out != in)
      memcpy(out, in, bytes);
    send_data(sc, &op->redop, out, p->n, bytes, true, 0);
    break;
  case MC_PRIM_RECV:
    if ((src != out) && (bytes > 0)) /* out may be NULL for an empty step */
      mc_coll_copy_out(op, out, src, bytes);
    break;
  case MC_PRIM_RECV_COPY_SEND:
    if (mc_conn_send_ptr_ok(sc, bytes)) {
      if (src != out)
        memcpy(out, src, bytes);
      mc_conn_send_commit(sc, out, bytes);
    } else {
      reduce2(sc, &op->redop, out, mc_conn_send_slot(sc), NULL, src, p->n, op->esize, 0);
      mc_conn_send_commit(sc, NULL, bytes);
    }
    break;
  case MC_PRIM_RECV_REDUCE_SEND:
    reduce_to_slot(sc, &op->redop, src, in, p->n, op->esize, pre);
    mc_conn_send_commit(sc, NULL, bytes);
    break;
  case MC_PRIM_RECV_REDUCE_COPY_SEND:
    if (mc_conn_send_ptr_ok(sc, bytes)) {
      mc_reduce(&op->redop, out, src, in, p->n, pre | MC_REDUCE_POST);
      mc_conn_send_commit(sc, out, bytes);
    } else {
      reduce2(sc, &op->redop, out, mc_conn_send_slot(sc), src, in, p->n, op->esize,
              pre | MC_REDUCE_POST);
      mc_conn_send_commit(sc, NULL, bytes);
    }
    break;
  case MC_PRIM_RECV_REDUCE_COPY:
    mc_reduce(&op->redop, out, src, in, p->n, pre | MC_REDUCE_POST);
    break;
  }
  if (src != NULL)
    mc_conn_recv_release(rc);
  return 1;
}

/* Sends the out range [out, out + bytes) (final data, stable until the
 * operation ends) to every send connection of t. */
static void send_out_all(struct mc_task *t, const char *out, size_t bytes)
{
  for (int i = 0; i < t->n_send; i++) {
    struct mc_conn *sc = t->send[i];
    if (mc_conn_send_ptr_ok(sc, bytes)) {
      mc_conn_send_commit(sc, out, bytes);
    } else {
      mc_conn_slot_copy(sc, mc_conn_send_slot(sc), out, bytes);
      mc_conn_send_commit(sc, NULL, bytes);
    }
  }
}

/* A primitive with several receive or send connections (a tree node): the
 * received inputs are reduced one after another (each read across processes
 * into the bounce buffer first), the result goes to every send connection. */
static int prim_run_multi(struct mc_task *t, const struct mc_prim *p, ncclResult_t *res)
{
  const struct mc_op *op = t->op;
  size_t bytes = p->n * op->esize;
  const char *in = (op->in != NULL) ? op->in + p->in_off * op->esize : NULL;
  char *out = (op->out != NULL) ? op->out + p->out_off * op->esize : NULL;
  const char *srcs[MC_TASK_MAX_PEERS];
  unsigned pre = (op->redop.kind == MC_RED_PREMULSUM) ? MC_REDUCE_PRE_B : 0;
  int n_recv = mc_prim_recvs(p->kind) ? t->n_recv : 0;
  int n_send = mc_prim_sends(p->kind) ? t->n_send : 0;
  char *dst;

  for (int i = 0; i < n_recv; i++)
    if (!mc_conn_recv_ready(t->recv[i]))
      return 0;
  for (int i = 0; i < n_send; i++)
    if (!mc_conn_send_ready_sampled(t->send[i]))
      return 0;
  for (int i = 0; i < n_recv; i++) {
    if (!mc_conn_recv_pin(t->recv[i])) {
      while (i-- > 0)
        mc_conn_recv_unpin(t->recv[i]);
      return 0;
    }
  }
  for (int i = 0; i < n_recv; i++) {
    size_t got = 0;
    srcs[i] = mc_conn_recv_data(t->recv[i], &got);
    if ((got != bytes) && (got != (size_t)-1)) {
      *res = size_mismatch(t, t->recv[i], srcs[i], got, bytes);
      return -1;
    }
  }
  if (n_send > 0)
    stage_sig(t, t->send, n_send);
  switch (p->kind) {
  case MC_PRIM_SEND:
  case MC_PRIM_COPY_SEND:
    /* Data this rank owns: a copy (premulsum: multiplied) into every slot. */
    if ((p->kind == MC_PRIM_COPY_SEND) && (out != in))
      memcpy(out, in, bytes);
    for (int i = 0; i < n_send; i++) {
      reduce_to_slot(t->send[i], &op->redop, NULL, in, p->n, op->esize,
                     (p->kind == MC_PRIM_SEND) ? pre : 0);
      mc_conn_send_commit(t->send[i], NULL, bytes);
    }
    break;
  case MC_PRIM_RECV:
  case MC_PRIM_RECV_COPY_SEND:
    if (mc_conn_recv_remote(t->recv[0]) && (bytes > 0)) {
      if ((*res = mc_conn_read(t->recv[0], out, srcs[0], bytes)) != ncclSuccess)
        return -1;
    } else if (srcs[0] != out) {
      memcpy(out, srcs[0], bytes);
    }
    if (p->kind == MC_PRIM_RECV_COPY_SEND)
      send_out_all(t, out, bytes);
    break;
  default: /* the reductions */
    dst = (p->kind == MC_PRIM_RECV_REDUCE_SEND) ? mc_conn_send_slot(t->send[0]) : out;
    for (int i = 0; i < n_recv; i++) {
      const char *src = srcs[i];
      unsigned post =
          ((i == n_recv - 1) && (p->kind != MC_PRIM_RECV_REDUCE_SEND)) ? MC_REDUCE_POST : 0;
      if (mc_conn_recv_remote(t->recv[i]) && (bytes > 0)) {
        if ((*res = mc_conn_read(t->recv[i], t->bounce, src, bytes)) != ncclSuccess)
          return -1;
        src = t->bounce;
      }
      if (i == 0)
        mc_reduce(&op->redop, dst, src, in, p->n, pre | post);
      else
        mc_reduce(&op->redop, dst, src, dst, p->n, post);
    }
    if (p->kind == MC_PRIM_RECV_REDUCE_SEND)
      mc_conn_send_commit(t->send[0], NULL, bytes);
    else if (p->kind == MC_PRIM_RECV_REDUCE_COPY_SEND)
      send_out_all(t, out, bytes);
    break;
  }
  for (int i = 0; i < n_recv; i++)
    mc_conn_recv_release(t->recv[i]);
  return 1;
}

/* 1: done; 0: a connection is not ready; -1: failed (*res). */
static int prim_run(struct mc_task *t, const struct mc_prim *p, ncclResult_t *res)
{
  if ((t->n_send <= 1) && (t->n_recv <= 1))
    return prim_run_one(t, p, res);
  return prim_run_multi(t, p, res);
}

/* How many steps t will receive from each of its receive connections
 * (walks its primitives on a copy). */
static uint64_t recv_steps(const struct mc_task *t)
{
  struct mc_task copy = *t;
  struct mc_prim p;
  uint64_t n = 0;

  while (t->algo->task_prim(&copy, &p)) {
    n += mc_prim_recvs(p.kind) ? 1 : 0;
    t->algo->task_next(&copy);
  }
  return n;
}

/* Announces the task's receive steps to the proxy (NET connections). */
static void task_start(struct mc_task *t)
{
  uint64_t n = 0;
  bool counted = false;

  t->started = true;
  if (t->algo->task_start != NULL) {
    t->algo->task_start(t);
    return;
  }
  for (int i = 0; i < t->n_recv; i++) {
    if (t->recv[i]->kind != MC_TOPO_TRANSPORT_NET)
      continue;
    if (!counted)
      n = recv_steps(t);
    counted = true;
    mc_conn_recv_expect(t->recv[i], n);
  }
}

static bool task_drained(const struct mc_task *t)
{
  for (int i = 0; i < t->n_send; i++)
    if (!mc_conn_send_drained(t->send[i]))
      return false;
  return true;
}

/* Before t's first receiving primitive: the signatures of the first steps
 * from each of its receive connections (a primitive receives from all of
 * them at once). A receive takes no more than its sender sent (NCCL's
 * rule: a larger receive is allowed). 1 checked, 0 waiting, -1 failed. */
static int task_check_first(struct mc_task *t, ncclResult_t *res)
{
  for (int i = 0; i < t->n_recv; i++)
    if (!mc_conn_recv_ready(t->recv[i]))
      return 0;
  for (int i = 0; i < t->n_recv; i++) {
    size_t sent = 0;
    if (mc_coll_recv_check(t, t->recv[i], &sent, res) < 0)
      return -1;
    if ((t->op->kind == MC_COLL_RECV) && (sent < t->len))
      t->len = sent; /* send/recv run in bytes (mc_coll_run) */
  }
  t->checked = true;
  return 1;
}

/* Runs t's primitives while its connections are ready. 1 when something moved. */
int mc_coll_task_progress(struct mc_task *t, ncclResult_t *res)
{
  int moved = 0;

  if (!t->started)
    task_start(t);
  if (t->algo->task_progress != NULL)
    return t->algo->task_progress(t, res);

  for (int budget = 0; budget < 64; budget++) {
    struct mc_prim p;
    int r;
    if (!t->algo->task_prim(t, &p)) {
      t->recv_done = true;
      /* Pointers published to the peers must have been read before the
       * user's buffers are handed back. */
      if (!task_drained(t))
        return moved;
      t->done = true;
      return 1;
    }
    if (!t->checked && mc_prim_recvs(p.kind)) {
      r = task_check_first(t, res);
      if (r <= 0)
        return (r < 0) ? -1 : moved;
      moved = 1;
      continue; /* the primitive again: a receive may have become shorter */
    }
    r = prim_run(t, &p, res);
    if (r < 0)
      return -1;
    if (r == 0)
      return moved;
    t->algo->task_next(t);
    moved = 1;
  }
  return moved;
}
