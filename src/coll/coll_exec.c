/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The executor: runs a batch of operations on the calling thread (the host
 * edition of NCCL's kernels). Each operation is cut into tasks, one per
 * channel (or per point-to-point direction); a task runs after the previous
 * task on the same connections; all runnable tasks advance round-robin, one
 * primitive at a time when its connections are ready, so grouped send/recv
 * patterns and several communicators driven by one thread never deadlock.
 *
 * Waiting: spin, then yield, then short sleeps. Every few milliseconds of
 * waiting it checks the abort flag, errors posted on the connections (by the
 * proxy, or by a peer that failed) and whether the processes of same-host
 * peers still exist; a dead or failed peer becomes ncclRemoteError on this
 * rank, which then poisons its own connections and closes its network
 * connections so that its other peers learn it too, within milliseconds.
 */
#include "coll/coll.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "log.h"
#include "params.h"
#include "utils.h"

#define YIELD_PASSES  2000 /* idle passes of yielding before sleeping */
#define IDLE_SLEEP_NS 20000
#define CHECK_EVERY   1024 /* idle passes between liveness checks */
#define CHECK_MS      5    /* at most one liveness check per this many ms */

const char *mc_coll_name(enum mc_coll_kind kind)
{
  static const char *const names[] = {"AllReduce",     "Broadcast", "Reduce", "AllGather",
                                      "ReduceScatter", "Send",      "Recv"};
  return ((unsigned)kind < sizeof(names) / sizeof(names[0])) ? names[kind] : "?";
}

/* ------------------------------------------------------------ primitives */

static bool prim_recvs(enum mc_prim_kind k)
{
  return (k != MC_PRIM_SEND) && (k != MC_PRIM_COPY_SEND);
}

static bool prim_sends(enum mc_prim_kind k)
{
  return (k != MC_PRIM_RECV) && (k != MC_PRIM_RECV_REDUCE_COPY);
}

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#define NT_MIN_OP_BYTES (1u << 20) /* out-of-place operations from this size */

/* The last copy of received data into an out-of-place output that is not in
 * this core's cache: streaming stores skip the read-for-ownership of every
 * line (out-of-place all-reduce of 2 ranks, 1-64 MiB: 4.5 -> 5.1 GB/s busbw).
 * In place the lines are cached already, and there it costs: memcpy then. */
static void copy_out(void *dst, const void *src, size_t bytes, bool stream)
{
#if defined(__x86_64__)
  if (stream && (bytes >= 65536) && (((uintptr_t)dst & 15) == 0)) {
    __m128i *d = dst;
    const char *s = src;
    size_t n = bytes / 16;
    for (size_t i = 0; i < n; i++) {
      __m128i v;
      memcpy(&v, s + 16 * i, 16);
      _mm_stream_si128(d + i, v);
    }
    memcpy((char *)dst + n * 16, s + n * 16, bytes - n * 16);
    _mm_sfence();
    return;
  }
#else
  (void)stream;
#endif
  memcpy(dst, src, bytes);
}

/* Publishes bytes at src (stable until the op ends when stable) to the next rank. */
static void send_data(struct mc_conn *sc, const struct mc_redop *op, const char *src, size_t n,
                      size_t bytes, bool stable, unsigned pre)
{
  if (stable && sc->can_send_ptr && (pre == 0)) {
    mc_conn_send_commit(sc, src, bytes);
    return;
  }
  if (pre != 0)
    mc_reduce(op, mc_conn_send_slot(sc), NULL, src, n, pre);
  else
    memcpy(mc_conn_send_slot(sc), src, bytes);
  mc_conn_send_commit(sc, NULL, bytes);
}

#define FUSE_BLOCK 32768 /* bytes per block of a fused pass (fits in L1) */

/* dst1 = dst2 = reduce(a, b) (a NULL: copy of b), block by block, so that the
 * second write reads from L1 instead of memory. */
static void reduce2(const struct mc_redop *op, char *dst1, char *dst2, const char *a, const char *b,
                    size_t n, size_t esize, unsigned flags)
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
    memcpy(dst2 + off, dst1 + off, m * esize);
  }
}

/* 1: done; 0: a connection is not ready; -1: failed (*res). */
static int prim_run(struct mc_task *t, const struct mc_prim *p, ncclResult_t *res)
{
  const struct mc_op *op = t->op;
  struct mc_conn *sc = t->send;
  struct mc_conn *rc = t->recv;
  size_t bytes = p->n * op->esize;
  const char *in = (op->in != NULL) ? op->in + p->in_off * op->esize : NULL;
  char *out = (op->out != NULL) ? op->out + p->out_off * op->esize : NULL;
  const char *src = NULL;
  size_t got = 0;
  unsigned pre = (op->redop.kind == MC_RED_PREMULSUM) ? MC_REDUCE_PRE_B : 0;

  if (prim_recvs(p->kind)) {
    if (!mc_conn_recv_ready(rc))
      return 0;
    src = mc_conn_recv_data(rc, &got);
    if (got != bytes) {
      *res = MC_FAIL(ncclInvalidUsage,
                     "%s: rank %d received %zu bytes from rank %d where it expected %zu: the "
                     "ranks called different operations, counts or types",
                     mc_coll_name(op->kind), t->rank, got, rc->peer, bytes);
      return -1;
    }
  }
  if (prim_sends(p->kind) && !mc_conn_send_ready(sc))
    return 0;
  /* Data that lives in another process comes over first (one copy). */
  if ((src != NULL) && rc->remote_read && (bytes > 0)) {
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
    if (src != out)
      copy_out(out, src, bytes, (op->in != op->out) && (op->count * op->esize >= NT_MIN_OP_BYTES));
    break;
  case MC_PRIM_RECV_COPY_SEND:
    if (sc->can_send_ptr) {
      if (src != out)
        memcpy(out, src, bytes);
      mc_conn_send_commit(sc, out, bytes);
    } else {
      reduce2(&op->redop, out, mc_conn_send_slot(sc), NULL, src, p->n, op->esize, 0);
      mc_conn_send_commit(sc, NULL, bytes);
    }
    break;
  case MC_PRIM_RECV_REDUCE_SEND:
    mc_reduce(&op->redop, mc_conn_send_slot(sc), src, in, p->n, pre);
    mc_conn_send_commit(sc, NULL, bytes);
    break;
  case MC_PRIM_RECV_REDUCE_COPY_SEND:
    if (sc->can_send_ptr) {
      mc_reduce(&op->redop, out, src, in, p->n, pre | MC_REDUCE_POST);
      mc_conn_send_commit(sc, out, bytes);
    } else {
      reduce2(&op->redop, out, mc_conn_send_slot(sc), src, in, p->n, op->esize,
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

/*
 * One-shot all-reduce (small sizes, one host): every rank copies its input
 * to every other rank, then reduces the n inputs in rank order, so that all
 * ranks compute bitwise the same result with one hop of latency.
 */
static int oneshot_progress(struct mc_task *t, ncclResult_t *res)
{
  struct mc_op *op = t->op;
  struct ncclComm *comm = op->comm;
  int n = t->n_ranks;
  size_t bytes = op->count * op->esize;
  const void **srcs = comm->os_srcs; /* [n_ranks]: one-shot tasks of a comm run one at a time */
  size_t bounce_off = 0;
  int moved = 0;
  unsigned flags = MC_REDUCE_POST; /* the inputs arrive multiplied (premulsum) */

  if (t->j == 0) {
    /* Peers in the order rank+1, rank+2, ...: os_sent counts those posted. */
    while (t->os_sent < n - 1) {
      int p = (t->rank + 1 + t->os_sent) % n;
      struct mc_conn *sc = comm->os_send[p];
      if (!mc_conn_send_ready(sc))
        break;
      /* A copy, never a pointer: in place, the output overwrites the input.
       * Premulsum: each rank's input is multiplied by its own scalar. */
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
    for (int p = 0; p < n; p++)
      if ((p != t->rank) && !mc_conn_recv_ready(comm->os_recv[p]))
        return moved;
    for (int p = 0; p < n; p++) {
      struct mc_conn *rc = comm->os_recv[p];
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
      if (got != bytes) {
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
        mc_conn_recv_release(comm->os_recv[p]);
    t->j = 1;
    moved = 1;
  }
  for (int p = 0; p < n; p++)
    if ((p != t->rank) && !mc_conn_send_drained(comm->os_send[p]))
      return moved;
  t->done = true;
  return 1;
}

/* How many steps t will receive (walks its primitives on a copy). */
static uint64_t recv_steps(const struct mc_task *t)
{
  struct mc_task copy = *t;
  struct mc_prim p;
  uint64_t n = 0;

  while (mc_ring_task_prim(&copy, &p)) {
    n += prim_recvs(p.kind) ? 1 : 0;
    mc_ring_task_next(&copy);
  }
  return n;
}

/* Announces the task's receive steps to the proxy (NET connections). */
static void task_start(struct mc_task *t)
{
  struct ncclComm *comm = t->op->comm;

  t->started = true;
  if (t->oneshot) {
    for (int p = 0; p < comm->n_ranks; p++)
      if ((p != t->rank) && (comm->os_recv[p]->kind == MC_TP_NET))
        mc_conn_recv_expect(comm->os_recv[p], 1);
    return;
  }
  if ((t->recv != NULL) && (t->recv->kind == MC_TP_NET))
    mc_conn_recv_expect(t->recv, recv_steps(t));
}

/* Runs t's primitives while its connections are ready. 1 when something moved. */
static int task_progress(struct mc_task *t, ncclResult_t *res)
{
  int moved = 0;

  if (!t->started)
    task_start(t);
  if (t->oneshot)
    return oneshot_progress(t, res);

  for (int budget = 0; budget < 64; budget++) {
    struct mc_prim p;
    int r;
    if (!mc_ring_task_prim(t, &p)) {
      /* Pointers published to the peer must have been read before the
       * user's buffers are handed back. */
      if ((t->send != NULL) && !mc_conn_send_drained(t->send))
        return moved;
      t->done = true;
      return 1;
    }
    r = prim_run(t, &p, res);
    if (r < 0)
      return -1;
    if (r == 0)
      return moved;
    mc_ring_task_next(t);
    moved = 1;
  }
  return moved;
}

/* ---------------------------------------------------------------- batch */

#define BATCH_STACK_TASKS 16

struct batch {
  struct mc_op *ops;
  int n_ops;
  struct mc_task *tasks; /* stack_tasks until more are needed */
  int n_tasks;
  struct mc_task stack_tasks[BATCH_STACK_TASKS];
};

/* The operation on one rank alone, or a send to itself: plain copies. */
static void run_local(struct mc_op *op)
{
  size_t bytes = op->count * op->esize;
  unsigned flags = MC_REDUCE_POST | ((op->redop.kind == MC_RED_PREMULSUM) ? MC_REDUCE_PRE_B : 0);

  switch (op->kind) {
  case MC_COLL_ALLREDUCE:
  case MC_COLL_REDUCE:
  case MC_COLL_REDUCESCATTER:
    mc_reduce(&op->redop, op->out, NULL, op->in, op->count, flags);
    break;
  default:
    if ((op->out != op->in) && (bytes > 0))
      memmove(op->out, op->in, bytes);
    break;
  }
}

static ncclResult_t add_task(struct batch *b, int *cap, const struct mc_task *t)
{
  if (*cap == 0) {
    b->tasks = b->stack_tasks;
    *cap = BATCH_STACK_TASKS;
  }
  if (b->n_tasks == *cap) {
    int ncap = 2 * *cap;
    struct mc_task *n = malloc((size_t)ncap * sizeof(*n));
    if (n == NULL)
      return MC_FAIL(ncclSystemError, "collective: out of memory for %d tasks", ncap);
    memcpy(n, b->tasks, (size_t)b->n_tasks * sizeof(*n));
    if (b->tasks != b->stack_tasks)
      free(b->tasks);
    b->tasks = n;
    *cap = ncap;
  }
  b->tasks[b->n_tasks++] = *t;
  return ncclSuccess;
}

/* The same answer on every rank: it depends only on the call and the comm. */
static bool oneshot_ok(const struct mc_op *op)
{
  const struct ncclComm *comm = op->comm;
  size_t limit = (size_t)mc_param_int(MC_P_ONESHOT_BYTES);
  size_t bytes = op->count * op->esize;

  return (op->kind == MC_COLL_ALLREDUCE) && (comm->nodes.n_nodes == 1) && (comm->n_ranks > 1) &&
         (bytes <= limit) &&
         ((size_t)comm->n_ranks * ((bytes + 63) & ~(size_t)63) <= comm->tp.slot_bytes);
}

static bool os_connected(const struct ncclComm *comm)
{
  return comm->os_send[(comm->rank + 1) % comm->n_ranks] != NULL;
}

static size_t oneshot_slot(void)
{
  size_t b = (size_t)mc_param_int(MC_P_ONESHOT_BYTES);
  return (b < 4096) ? 4096 : (b + 63) & ~(size_t)63;
}

static size_t chunk_elems(const struct ncclComm *comm, size_t esize)
{
  size_t c = comm->tp.slot_bytes / esize;
  return (c == 0) ? 1 : c;
}

/* Point-to-point connections this batch needs, made together for every
 * communicator of the batch (NCCL's runtime connect). */
static ncclResult_t p2p_connect(struct batch *b)
{
  struct mc_tp_set *sets = NULL;
  struct mc_conn_req *reqs = NULL;
  int n_sets = 0;
  int n_reqs = 0;
  ncclResult_t res;

  struct mc_conn ***holders = NULL;
  size_t cap = 0;

  for (int i = 0; i < b->n_ops; i++) {
    const struct mc_op *op = &b->ops[i];
    const struct ncclComm *comm = op->comm;
    if ((op->count > 0) && oneshot_ok(op) && !os_connected(comm))
      cap += 2 * (size_t)comm->n_ranks;
    if (((op->kind == MC_COLL_SEND) && (op->peer != comm->rank) &&
         (comm->p2p_send[op->peer] == NULL)) ||
        ((op->kind == MC_COLL_RECV) && (op->peer != comm->rank) &&
         (comm->p2p_recv[op->peer] == NULL)))
      cap++;
  }
  if (cap == 0)
    return ncclSuccess; /* the common case: nothing to connect, nothing allocated */
  MC_CHECK(mc_calloc(&sets, (size_t)b->n_ops));
  MC_CHECK_GOTO(mc_calloc(&reqs, cap), res, out);
  MC_CHECK_GOTO(mc_calloc(&holders, cap), res, out);
  for (int i = 0; i < b->n_ops; i++) {
    struct ncclComm *comm = b->ops[i].comm;
    struct mc_tp_set *set = NULL;
    bool first = true;
    for (int k = 0; k < i; k++)
      first = first && (b->ops[k].comm != comm);
    if (!first)
      continue;
    for (int k = i; k < b->n_ops; k++) {
      struct mc_op *op = &b->ops[k];
      bool is_send = (op->kind == MC_COLL_SEND);
      struct mc_conn **slot;
      if ((op->comm == comm) && (op->count > 0) && oneshot_ok(op) && !os_connected(comm)) {
        /* One-shot: a send and a receive connection with every peer. */
        for (int p = 0; p < comm->n_ranks; p++) {
          for (int dir = 0; (dir < 2) && (p != comm->rank); dir++) {
            struct mc_conn **os = dir ? &comm->os_send[p] : &comm->os_recv[p];
            MC_CHECK_GOTO(mc_calloc(os, 1), res, out);
            if (set == NULL) {
              set = &sets[n_sets++];
              *set = (struct mc_tp_set){.tc = &comm->tp, .reqs = &reqs[n_reqs], .n = 0};
            }
            holders[n_reqs] = os;
            reqs[n_reqs++] = (struct mc_conn_req){.peer = p,
                                                  .is_send = dir,
                                                  .channel = 0,
                                                  .conn_index = 2,
                                                  .slot_bytes = oneshot_slot(),
                                                  .conn = *os};
            set->n++;
          }
        }
        continue;
      }
      if ((op->comm != comm) || ((op->kind != MC_COLL_SEND) && (op->kind != MC_COLL_RECV)) ||
          (op->peer == comm->rank) || (op->count == 0))
        continue;
      slot = is_send ? &comm->p2p_send[op->peer] : &comm->p2p_recv[op->peer];
      if (*slot != NULL)
        continue;
      MC_CHECK_GOTO(mc_calloc(slot, 1), res, out);
      if (set == NULL) {
        set = &sets[n_sets++];
        *set = (struct mc_tp_set){.tc = &comm->tp, .reqs = &reqs[n_reqs], .n = 0};
      }
      holders[n_reqs] = slot;
      reqs[n_reqs++] = (struct mc_conn_req){
          .peer = op->peer, .is_send = is_send, .channel = 0, .conn_index = 1, .conn = *slot};
      set->n++;
    }
  }
  res = (n_sets > 0) ? mc_transport_connect_sets(sets, n_sets) : ncclSuccess;
out:
  if (res != ncclSuccess) {
    /* Connections not made are forgotten (the next call tries again). */
    for (int q = 0; q < n_reqs; q++) {
      free(*holders[q]);
      *holders[q] = NULL;
    }
  }
  free(holders);
  free(reqs);
  free(sets);
  return res;
}

/* Self send/recv pairs: the k-th send to self matches the k-th receive. */
static ncclResult_t p2p_self(struct batch *b)
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

static ncclResult_t plan(struct batch *b)
{
  int cap = 0;

  for (int i = 0; i < b->n_ops; i++) {
    struct mc_op *op = &b->ops[i];
    struct ncclComm *comm = op->comm;
    int n = comm->n_ranks;
    bool p2p = (op->kind == MC_COLL_SEND) || (op->kind == MC_COLL_RECV);
    int n_parts = p2p ? 1 : comm->n_channels;
    size_t per = 0;

    if (op->count == 0)
      continue;
    if ((n == 1) && !p2p) {
      run_local(op);
      continue;
    }
    if (oneshot_ok(op)) {
      struct mc_task t;
      memset(&t, 0, sizeof(t));
      t.op = op;
      t.n_ranks = n;
      t.rank = comm->rank;
      t.oneshot = true;
      t.bounce = comm->scratch + (size_t)comm->n_channels * comm->tp.slot_bytes;
      MC_CHECK(add_task(b, &cap, &t));
      continue;
    }
    per = (op->count + (size_t)n_parts - 1) / (size_t)n_parts;
    for (int c = 0; c < n_parts; c++) {
      struct mc_task t;
      size_t base = (size_t)c * per;
      memset(&t, 0, sizeof(t));
      if (base >= op->count)
        break;
      t.op = op;
      t.n_ranks = n;
      t.rank = comm->rank;
      t.base = base;
      t.len = (op->count - base < per) ? op->count - base : per;
      t.chunk = chunk_elems(comm, op->esize);
      if (p2p) {
        t.send = (op->kind == MC_COLL_SEND) ? comm->p2p_send[op->peer] : NULL;
        t.recv = (op->kind == MC_COLL_RECV) ? comm->p2p_recv[op->peer] : NULL;
        t.bounce = comm->scratch + (size_t)comm->n_channels * comm->tp.slot_bytes;
      } else {
        t.send = &comm->channels[c].send;
        t.recv = &comm->channels[c].recv;
        t.bounce = comm->scratch + (size_t)c * comm->tp.slot_bytes;
      }
      mc_ring_task_init(&t);
      MC_CHECK(add_task(b, &cap, &t));
    }
  }
  /* A task waits for the last earlier task on the same connections. */
  for (int i = 0; i < b->n_tasks; i++) {
    struct mc_task *t = &b->tasks[i];
    for (int k = i - 1; k >= 0; k--) {
      struct mc_task *u = &b->tasks[k];
      if (t->oneshot || u->oneshot) {
        /* One-shot tasks share only their own connections. */
        if (t->oneshot && u->oneshot && (t->op->comm == u->op->comm)) {
          t->after = u;
          break;
        }
        continue;
      }
      if (((t->send != NULL) && (t->send == u->send)) ||
          ((t->recv != NULL) && (t->recv == u->recv))) {
        t->after = u;
        break;
      }
    }
  }
  return ncclSuccess;
}

/* ---------------------------------------------------------------- errors */

static bool pid_gone(int pid)
{
  return (pid > 0) && (kill(pid, 0) != 0) && (errno == ESRCH);
}

static ncclResult_t conn_health(const struct mc_task *t, const struct mc_conn *c)
{
  struct ncclComm *comm = t->op->comm;
  const struct mc_peer_info *p;
  uint32_t e;

  if (c == NULL)
    return ncclSuccess;
  p = &comm->peers[c->peer];
  e = mc_conn_error(c);
  if ((e != 0) && !c->is_send && mc_conn_recv_ready(c))
    e = 0; /* what arrived is consumed first; the failure counts when it is needed */
  if (e != 0)
    return MC_FAIL((c->kind == MC_TP_NET) ? (ncclResult_t)e : ncclRemoteError,
                   "%s: rank %d: the %s connection %s rank %d (%s, pid %d) failed",
                   mc_coll_name(t->op->kind), comm->rank, mc_tp_name(c->kind),
                   c->is_send ? "to" : "from", c->peer, p->host, p->pid);
  if ((c->kind != MC_TP_NET) && pid_gone(p->pid))
    return MC_FAIL(ncclRemoteError, "%s: rank %d: peer rank %d (pid %d on %s) exited",
                   mc_coll_name(t->op->kind), comm->rank, c->peer, p->pid, p->host);
  return ncclSuccess;
}

/* A failure seen on t's connections or peers, or the communicator's abort. */
static ncclResult_t task_health(const struct mc_task *t)
{
  struct ncclComm *comm = t->op->comm;

  if (__atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE))
    return MC_FAIL(ncclInvalidUsage, "%s: communicator %p was aborted", mc_coll_name(t->op->kind),
                   (void *)comm);
  if (t->oneshot) {
    for (int r = 0; r < comm->n_ranks; r++) {
      MC_CHECK(conn_health(t, comm->os_send[r]));
      MC_CHECK(conn_health(t, comm->os_recv[r]));
    }
    return ncclSuccess;
  }
  MC_CHECK(conn_health(t, t->send));
  return conn_health(t, t->recv);
}

static void poison_conn(struct mc_conn *c)
{
  if ((c != NULL) && (c->ctrl != NULL) && (mc_conn_error(c) == 0))
    mc_conn_set_error(c, ncclRemoteError);
}

/* The communicator failed: tell every peer through every connection, close
 * its network connections, and refuse further operations. */
static void comm_fail(struct ncclComm *comm, ncclResult_t res)
{
  int expected = ncclSuccess;

  if (!__atomic_compare_exchange_n(&comm->coll_result, &expected, (int)res, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    return;
  for (int c = 0; (comm->channels != NULL) && (c < comm->n_channels); c++) {
    poison_conn(&comm->channels[c].send);
    poison_conn(&comm->channels[c].recv);
  }
  for (int r = 0; (comm->p2p_send != NULL) && (r < comm->n_ranks); r++) {
    poison_conn(comm->p2p_send[r]);
    poison_conn(comm->p2p_recv[r]);
    poison_conn(comm->os_send[r]);
    poison_conn(comm->os_recv[r]);
  }
  mc_comm_free_connections(comm);
  __atomic_store_n(&comm->async_result, (int)res, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ run */

static void proxies(struct batch *b, int delta)
{
  for (int i = 0; i < b->n_ops; i++) {
    bool first = true;
    for (int k = 0; k < i; k++)
      first = first && (b->ops[k].comm != b->ops[i].comm);
    if (first)
      mc_proxy_activity(b->ops[i].comm->tp.proxy, delta);
  }
}

static bool proxies_help(struct batch *b)
{
  bool moved = false;
  for (int i = 0; i < b->n_ops; i++)
    moved |= mc_proxy_help(b->ops[i].comm->tp.proxy);
  return moved;
}

static ncclResult_t run_tasks(struct batch *b, struct mc_task **failed)
{
  unsigned idle = 0;
  unsigned spin = (unsigned)b->ops[0].comm->spin_passes;

  bool net = false;

  /* Over the network the proxy thread does the work: the rank yields the
   * CPU to it, or does that work itself while it waits (mc_proxy_help: no
   * thread hand-off per step; 5-10% more bandwidth over a veth). */
  for (int i = 0; i < b->n_tasks; i++)
    if (((b->tasks[i].send != NULL) && (b->tasks[i].send->kind == MC_TP_NET)) ||
        ((b->tasks[i].recv != NULL) && (b->tasks[i].recv->kind == MC_TP_NET)))
      net = true;
  if (net)
    spin = 8;
  int left = b->n_tasks;
  double last_check = 0; /* the clock is read only once waiting starts */
  ncclResult_t res = ncclSuccess;

  while (left > 0) {
    int moved = 0;
    for (int i = 0; i < b->n_tasks; i++) {
      struct mc_task *t = &b->tasks[i];
      int r;
      if (t->done || ((t->after != NULL) && !t->after->done))
        continue;
      r = task_progress(t, &res);
      if (r < 0) {
        *failed = t;
        return res;
      }
      moved |= r;
      if (t->done)
        left--;
    }
    if (moved) {
      idle = 0;
      continue;
    }
    if (net && proxies_help(b)) {
      idle = 0;
      continue;
    }
    idle++;
    if ((idle % CHECK_EVERY) == 0) {
      double now = mc_time_sec();
      if (last_check == 0)
        last_check = now;
      if (now - last_check >= CHECK_MS * 1e-3) {
        last_check = now;
        for (int i = 0; i < b->n_tasks; i++) {
          struct mc_task *t = &b->tasks[i];
          if (!t->done && ((res = task_health(t)) != ncclSuccess)) {
            *failed = t;
            return res;
          }
        }
      }
    }
    if (idle > spin + YIELD_PASSES) {
      struct timespec ts = {0, IDLE_SLEEP_NS};
      nanosleep(&ts, NULL);
    } else if (idle > spin) {
      sched_yield();
    }
  }
  return ncclSuccess;
}

ncclResult_t mc_coll_run(struct mc_op *ops, int n)
{
  struct batch b;
  struct mc_task *failed = NULL;
  ncclResult_t res;

  b.ops = ops;
  b.n_ops = n;
  b.tasks = NULL;
  b.n_tasks = 0;
  res = p2p_self(&b);
  if (res == ncclSuccess)
    res = p2p_connect(&b);
  if (res == ncclSuccess)
    res = plan(&b);
  if ((res == ncclSuccess) && (b.n_tasks > 0)) {
    proxies(&b, +1);
    res = run_tasks(&b, &failed);
    proxies(&b, -1);
  }
  if (res != ncclSuccess) {
    char why[MC_LAST_ERROR_BYTES];
    mc_error_last_copy(why, sizeof(why));
    for (int i = 0; i < n; i++) {
      struct ncclComm *comm = ops[i].comm;
      if ((failed != NULL) && (comm != failed->op->comm) && (res == ncclInvalidUsage))
        continue; /* a mismatch on one communicator leaves the others alone */
      snprintf(comm->last_error, sizeof(comm->last_error), "%s", why);
      comm_fail(comm, (res == ncclInvalidUsage) ? ncclInvalidUsage : res);
    }
  }
  if (b.tasks != b.stack_tasks)
    free(b.tasks);
  return res;
}
