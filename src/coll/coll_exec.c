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

#define SPIN_PASSES   2000 /* idle passes before yielding */
#define YIELD_PASSES  2000 /* idle passes of yielding before sleeping */
#define IDLE_SLEEP_NS 20000
#define CHECK_EVERY   128 /* idle passes between liveness checks */
#define CHECK_MS      5   /* at most one liveness check per this many ms */

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

/* 1: done; 0: a connection is not ready; -1: failed (*res). */
static int prim_run(struct mc_task *t, const struct mc_prim *p, ncclResult_t *res)
{
  const struct mc_op *op = t->op;
  struct mc_conn *sc = t->send;
  struct mc_conn *rc = t->recv;
  size_t bytes = p->n * op->esize;
  const char *in = op->in + p->in_off * op->esize;
  char *out = op->out + p->out_off * op->esize;
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
      memcpy(out, src, bytes);
    break;
  case MC_PRIM_RECV_COPY_SEND:
    if (src != out)
      memcpy(out, src, bytes);
    send_data(sc, &op->redop, out, p->n, bytes, true, 0);
    break;
  case MC_PRIM_RECV_REDUCE_SEND:
    mc_reduce(&op->redop, mc_conn_send_slot(sc), src, in, p->n, pre);
    mc_conn_send_commit(sc, NULL, bytes);
    break;
  case MC_PRIM_RECV_REDUCE_COPY_SEND:
    mc_reduce(&op->redop, out, src, in, p->n, pre | MC_REDUCE_POST);
    send_data(sc, &op->redop, out, p->n, bytes, true, 0);
    break;
  case MC_PRIM_RECV_REDUCE_COPY:
    mc_reduce(&op->redop, out, src, in, p->n, pre | MC_REDUCE_POST);
    break;
  }
  if (src != NULL)
    mc_conn_recv_release(rc);
  return 1;
}

/* Runs t's primitives while its connections are ready. 1 when something moved. */
static int task_progress(struct mc_task *t, ncclResult_t *res)
{
  int moved = 0;

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

struct batch {
  struct mc_op *ops;
  int n_ops;
  struct mc_task *tasks;
  int n_tasks;
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
  if (b->n_tasks == *cap) {
    int ncap = (*cap == 0) ? 16 : 2 * *cap;
    struct mc_task *n = realloc(b->tasks, (size_t)ncap * sizeof(*n));
    if (n == NULL)
      return MC_FAIL(ncclSystemError, "collective: out of memory for %d tasks", ncap);
    b->tasks = n;
    *cap = ncap;
  }
  b->tasks[b->n_tasks++] = *t;
  return ncclSuccess;
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

  MC_CHECK(mc_calloc(&sets, (size_t)b->n_ops));
  MC_CHECK_GOTO(mc_calloc(&reqs, (size_t)b->n_ops), res, out);
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
      reqs[n_reqs++] = (struct mc_conn_req){
          .peer = op->peer, .is_send = is_send, .channel = 0, .conn_index = 1, .conn = *slot};
      set->n++;
    }
  }
  res = (n_sets > 0) ? mc_transport_connect_sets(sets, n_sets) : ncclSuccess;
out:
  if (res != ncclSuccess) {
    /* Connections not made are forgotten (the next call tries again). */
    for (int i = 0; i < b->n_ops; i++) {
      struct ncclComm *comm = b->ops[i].comm;
      for (int q = 0; q < n_reqs; q++) {
        struct mc_conn **slot =
            reqs[q].is_send ? &comm->p2p_send[reqs[q].peer] : &comm->p2p_recv[reqs[q].peer];
        if ((*slot != NULL) && (*slot == reqs[q].conn)) {
          free(*slot);
          *slot = NULL;
        }
      }
    }
  }
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

/* A failure seen on t's connections or peers, or the communicator's abort. */
static ncclResult_t task_health(const struct mc_task *t)
{
  struct ncclComm *comm = t->op->comm;
  struct mc_conn *cs[2] = {t->send, t->recv};

  if (__atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE))
    return MC_FAIL(ncclInvalidUsage, "%s: communicator %p was aborted", mc_coll_name(t->op->kind),
                   (void *)comm);
  for (int i = 0; i < 2; i++) {
    struct mc_conn *c = cs[i];
    uint32_t e;
    const struct mc_peer_info *p;
    if (c == NULL)
      continue;
    p = &comm->peers[c->peer];
    e = mc_conn_error(c);
    if (e != 0)
      return MC_FAIL((c->kind == MC_TP_NET) ? (ncclResult_t)e : ncclRemoteError,
                     "%s: rank %d: the %s connection %s rank %d (%s, pid %d) failed",
                     mc_coll_name(t->op->kind), comm->rank, mc_tp_name(c->kind),
                     c->is_send ? "to" : "from", c->peer, p->host, p->pid);
    if ((c->kind != MC_TP_NET) && pid_gone(p->pid))
      return MC_FAIL(ncclRemoteError, "%s: rank %d: peer rank %d (pid %d on %s) exited",
                     mc_coll_name(t->op->kind), comm->rank, c->peer, p->pid, p->host);
  }
  return ncclSuccess;
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

static ncclResult_t run_tasks(struct batch *b, struct mc_task **failed)
{
  unsigned idle = 0;
  int left = b->n_tasks;
  double last_check = mc_time_sec();
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
    idle++;
    if ((idle % CHECK_EVERY) == 0) {
      double now = mc_time_sec();
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
    if (idle > SPIN_PASSES + YIELD_PASSES) {
      struct timespec ts = {0, IDLE_SLEEP_NS};
      nanosleep(&ts, NULL);
    } else if (idle > SPIN_PASSES) {
      sched_yield();
    }
  }
  return ncclSuccess;
}

ncclResult_t mc_coll_run(struct mc_op *ops, int n)
{
  struct batch b = {.ops = ops, .n_ops = n};
  struct mc_task *failed = NULL;
  ncclResult_t res;

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
  free(b.tasks);
  return res;
}
