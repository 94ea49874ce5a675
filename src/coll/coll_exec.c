/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The executor: runs a batch of operations on the calling thread (the host
 * edition of NCCL's kernels and of its enqueue/runtime-connect steps,
 * src/enqueue.cc). Each operation gets an algorithm (mc_coll_algo_choose),
 * the connections that algorithm needs are made at first use, and the
 * algorithm cuts it into tasks (struct mc_coll_algo_ops.plan); a task runs
 * after the previous task on any of the same connections; all runnable tasks
 * advance round-robin, one primitive at a time when all its connections are
 * ready (a primitive may receive from and send to several peers: a tree
 * node's children), so grouped send/recv patterns and several communicators
 * driven by one thread never deadlock.
 *
 * Waiting: spin, then yield, then short sleeps. Every few milliseconds of
 * waiting it checks the abort flag, errors posted on the connections (by the
 * proxy, or by a peer that failed) and whether the processes of same-host
 * peers still exist; a dead or failed peer becomes ncclRemoteError on this
 * rank, which then poisons its own connections and closes its network
 * connections so that its other peers learn it too, within milliseconds.
 * A same-host peer whose process is stopped (SIGSTOP, a debugger) while the
 * rank has waited MESHCCL_NET_TIMEOUT fails it the same way, as a stalled
 * NET peer does (tp_net.c's watchdog). Pids are looked at only for peers in
 * this rank's PID namespace (mc_peer_same_pidns): one in another (a
 * container sharing /dev/shm) fails it once nothing moved for
 * MESHCCL_NET_TIMEOUT, as a NET peer does.
 *
 * Signatures (coll_sig.c, coll_check.c): the first step a task sends on
 * each connection carries its operation's signature; before the first
 * primitive that receives, the task checks the signature of every
 * connection it receives from. A mismatch fails the operation with
 * ncclInvalidUsage naming both calls, and the rank tells its peers.
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

#define YIELD_PASSES  2000 /* idle passes of yielding before sleeping */
#define IDLE_SLEEP_NS 20000
#define CHECK_EVERY   1024 /* idle passes between liveness checks */
#define CHECK_MS      5    /* at most one liveness check per this many ms */
/* Waiting this long, a rank also receives first steps on NET connections it
 * does not use (stray steps): a receive posted there stays posted, and a
 * peer that closes the connection then makes its net report an error. */
#define STRAY_NET_MS 1000
/* Once a wait passed MESHCCL_NET_TIMEOUT, same-host peers are looked at
 * (/proc/<pid>/stat: stopped or not) at most this often. */
#define STOPPED_CHECK_MS 100
/* After a NET connection failed soon after its steps last moved, a rank looks
 * this long for a peer's mismatch notice before it reports the failure
 * (health). A failure seen after waiting longer than this (a net's own time
 * bound: MESHCCL_NET_TIMEOUT, MESHCCL_MESH_ROUTE_TIMEOUT_MS) is reported at
 * once, so that those bounds hold as documented. */
#define NOTICE_WAIT_MS 1000

const char *mc_coll_name(enum mc_coll_kind kind)
{
  static const char *const names[] = {"AllReduce",     "Broadcast", "Reduce", "AllGather",
                                      "ReduceScatter", "Send",      "Recv"};
  return ((unsigned)kind < sizeof(names) / sizeof(names[0])) ? names[kind] : "?";
}

/* ------------------------------------------------------------ primitives */

#define NT_MIN_OP_BYTES (1u << 20) /* out-of-place operations from this size */

/* The last copy of received data into an out-of-place output that is not in
 * this core's cache: streaming stores skip the read-for-ownership of every
 * line (out-of-place all-reduce of 2 ranks, 1-64 MiB: 4.5 -> 5.1 GB/s busbw).
 * In place the lines are cached already, and there it costs: memcpy then. */
static void copy_out(void *dst, const void *src, size_t bytes, bool stream)
{
  if (stream && (bytes >= 65536))
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
  if (stable && sc->can_send_ptr && (pre == 0)) {
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
      *res = size_mismatch(t, rc, src, got, bytes);
      return -1;
    }
  }
  if (mc_prim_sends(p->kind) && !mc_conn_send_ready_sampled(sc))
    return 0;
  if (mc_prim_sends(p->kind))
    stage_sig(t, &sc, 1);
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
    if ((src != out) && (bytes > 0)) /* out may be NULL for an empty step */
      copy_out(out, src, bytes, (op->in != op->out) && (op->count * op->esize >= NT_MIN_OP_BYTES));
    break;
  case MC_PRIM_RECV_COPY_SEND:
    if (sc->can_send_ptr) {
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
    if (sc->can_send_ptr) {
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
    if (sc->can_send_ptr) {
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
    if (t->recv[0]->remote_read && (bytes > 0)) {
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
      if (t->recv[i]->remote_read && (bytes > 0)) {
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
static int task_progress(struct mc_task *t, ncclResult_t *res)
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

/* ---------------------------------------------------------------- batch */

void mc_coll_plan_init(struct mc_coll_plan *pl)
{
  pl->tasks = pl->stack_tasks;
  pl->n_tasks = 0;
  pl->cap = MC_PLAN_STACK_TASKS;
}

void mc_coll_plan_fini(struct mc_coll_plan *pl)
{
  if (pl->tasks != pl->stack_tasks)
    free(pl->tasks);
  pl->tasks = pl->stack_tasks;
  pl->n_tasks = 0;
  pl->cap = MC_PLAN_STACK_TASKS;
}

ncclResult_t mc_coll_plan_add(struct mc_coll_plan *pl, const struct mc_task *t)
{
  if (pl->n_tasks == pl->cap) {
    int ncap = 2 * pl->cap;
    struct mc_task *n = malloc((size_t)ncap * sizeof(*n));
    if (n == NULL)
      return MC_FAIL(ncclSystemError, "collective: out of memory for %d tasks", ncap);
    memcpy(n, pl->tasks, (size_t)pl->n_tasks * sizeof(*n));
    if (pl->tasks != pl->stack_tasks)
      free(pl->tasks);
    pl->tasks = n;
    pl->cap = ncap;
  }
  pl->tasks[pl->n_tasks++] = *t;
  return ncclSuccess;
}

size_t mc_coll_chunk_elems(const struct ncclComm *comm, size_t esize)
{
  size_t c = comm->tp.slot_bytes / esize;
  return (c == 0) ? 1 : c;
}

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

bool mc_coll_op_runs(const struct mc_op *op)
{
  bool p2p = (op->kind == MC_COLL_SEND) || (op->kind == MC_COLL_RECV);
  return (op->count > 0) && (op->comm->n_ranks > 1) && (!p2p || (op->peer != op->comm->rank));
}

/* ------------------------------------------------------- runtime connect */

bool mc_coll_op_needs_oneshot(const struct mc_op *op)
{
  return mc_coll_op_runs(op) &&
         ((op->algo == &mc_coll_oneshot_ops) || (op->algo == &mc_coll_sym_ops)) &&
         !mc_coll_oneshot_connected(op->comm);
}

bool mc_coll_op_needs_trees(const struct mc_op *op)
{
  return mc_coll_op_runs(op) && (op->algo == &mc_coll_tree_ops) && !op->comm->trees_connected;
}

static struct mc_conn **p2p_holder(const struct mc_op *op)
{
  struct ncclComm *comm = op->comm;

  if (!mc_coll_op_runs(op) || (op->algo != &mc_coll_p2p_ops))
    return NULL;
  return (op->kind == MC_COLL_SEND) ? &comm->p2p_send[op->peer] : &comm->p2p_recv[op->peer];
}

/* The connections this batch's algorithms need (one-shot, trees, and
 * point-to-point), made together for every communicator of the batch
 * (NCCL's runtime connect). On failure none of them is kept. */
static ncclResult_t runtime_connect(struct mc_coll_batch *b, struct ncclComm **failed)
{
  struct mc_tp_set *sets = NULL;
  struct mc_conn_req *reqs = NULL;
  struct mc_conn ***holders = NULL; /* heap connections to forget on failure */
  struct ncclComm **tree_comms = NULL;
  int n_sets = 0;
  int n_reqs = 0;
  int n_tree_comms = 0;
  size_t cap = 0;
  ncclResult_t res;

  for (int i = 0; i < b->n_ops; i++) {
    const struct mc_op *op = &b->ops[i];
    struct mc_conn **h = p2p_holder(op);
    if (mc_coll_op_needs_oneshot(op))
      cap += 2 * (size_t)op->comm->n_ranks;
    if (mc_coll_op_needs_trees(op))
      cap += (size_t)mc_comm_tree_conn_reqs(op->comm, NULL);
    if ((h != NULL) && (*h == NULL))
      cap++;
  }
  if (cap == 0)
    return ncclSuccess; /* the common case: nothing to connect, nothing allocated */
  MC_CHECK(mc_coll_batch_probe(b, failed));
  MC_CHECK(mc_calloc(&sets, (size_t)b->n_ops));
  MC_CHECK_GOTO(mc_calloc(&reqs, cap), res, out);
  MC_CHECK_GOTO(mc_calloc(&holders, cap), res, out);
  MC_CHECK_GOTO(mc_calloc(&tree_comms, (size_t)b->n_ops), res, out);
  for (int i = 0; i < b->n_ops; i++) {
    struct ncclComm *comm = b->ops[i].comm;
    struct mc_tp_set *set = &sets[n_sets];
    bool os_done = false;
    bool trees_done = false;
    if (!mc_coll_batch_comm_first(b, i))
      continue;
    *set = (struct mc_tp_set){.tc = &comm->tp, .reqs = &reqs[n_reqs], .n = 0};
    for (int k = i; k < b->n_ops; k++) {
      struct mc_op *op = &b->ops[k];
      struct mc_conn **slot = p2p_holder(op);
      if (op->comm != comm)
        continue;
      if (mc_coll_op_needs_oneshot(op) && !os_done) {
        /* One-shot: a send and a receive connection with every peer. */
        os_done = true;
        for (int p = 0; p < comm->n_ranks; p++) {
          for (int dir = 0; (dir < 2) && (p != comm->rank); dir++) {
            struct mc_conn **os = dir ? &comm->os_send[p] : &comm->os_recv[p];
            MC_CHECK_GOTO(mc_calloc(os, 1), res, out);
            holders[n_reqs] = os;
            reqs[n_reqs++] = (struct mc_conn_req){.peer = p,
                                                  .is_send = dir,
                                                  .channel = 0,
                                                  .conn_index = MC_CONN_ONESHOT,
                                                  .slot_bytes = mc_coll_oneshot_slot_bytes(),
                                                  .conn = *os};
            set->n++;
          }
        }
      }
      if (mc_coll_op_needs_trees(op) && !trees_done) {
        int m = mc_comm_tree_conn_reqs(comm, &reqs[n_reqs]);
        trees_done = true;
        tree_comms[n_tree_comms++] = comm;
        n_reqs += m;
        set->n += m;
      }
      if ((slot == NULL) || (*slot != NULL))
        continue;
      MC_CHECK_GOTO(mc_calloc(slot, 1), res, out);
      holders[n_reqs] = slot;
      reqs[n_reqs++] = (struct mc_conn_req){.peer = op->peer,
                                            .is_send = (op->kind == MC_COLL_SEND),
                                            .channel = 0,
                                            .conn_index = MC_CONN_P2P,
                                            .conn = *slot};
      set->n++;
    }
    if (set->n > 0)
      n_sets++;
  }
  res = (n_sets > 0) ? mc_transport_connect_sets(sets, n_sets) : ncclSuccess;
  if (res == ncclSuccess)
    for (int c = 0; c < n_tree_comms; c++)
      tree_comms[c]->trees_connected = true;
out:
  if (res != ncclSuccess) {
    /* Connections not made are forgotten (the next call tries again). */
    for (int q = 0; q < n_reqs; q++) {
      if (holders[q] != NULL) {
        free(*holders[q]);
        *holders[q] = NULL;
      }
    }
  }
  free(tree_comms);
  free(holders);
  free(reqs);
  free(sets);
  return res;
}

/* Self send/recv pairs: the k-th send to self matches the k-th receive. */
static ncclResult_t p2p_self(struct mc_coll_batch *b)
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

/* The algorithm whose tasks t's must follow: the symmetric all-reduce
 * drives the one-shot connections too. */
static const struct mc_coll_algo_ops *os_algo(const struct mc_coll_algo_ops *a)
{
  return (a == &mc_coll_sym_ops) ? &mc_coll_oneshot_ops : a;
}

static bool share_conn(const struct mc_task *t, const struct mc_task *u)
{
  for (int i = 0; i < t->n_send; i++)
    for (int k = 0; k < u->n_send; k++)
      if (t->send[i] == u->send[k])
        return true;
  for (int i = 0; i < t->n_recv; i++)
    for (int k = 0; k < u->n_recv; k++)
      if (t->recv[i] == u->recv[k])
        return true;
  return false;
}

static ncclResult_t plan(struct mc_coll_batch *b)
{
  struct mc_coll_plan *pl = &b->pl;

  for (int i = 0; i < b->n_ops; i++) {
    struct mc_op *op = &b->ops[i];
    if (op->count == 0)
      continue;
    if ((op->comm->n_ranks == 1) && (op->algo != &mc_coll_p2p_ops)) {
      run_local(op);
      continue;
    }
    if (!mc_coll_op_runs(op))
      continue;
    MC_CHECK(op->algo->plan(op, pl));
  }
  /* A task waits for the last earlier task on any of the same connections;
   * tasks that drive their own connections wait for the last earlier one of
   * their algorithm on their communicator (one-shot and symmetric share the
   * one-shot connections: one algorithm here). */
  for (int i = 0; i < pl->n_tasks; i++) {
    struct mc_task *t = &pl->tasks[i];
    for (int k = i - 1; k >= 0; k--) {
      struct mc_task *u = &pl->tasks[k];
      bool own_t = (t->algo->task_progress != NULL);
      bool own_u = (u->algo->task_progress != NULL);
      if (own_t || own_u) {
        if ((os_algo(t->algo) == os_algo(u->algo)) && (t->op->comm == u->op->comm)) {
          t->after = u;
          break;
        }
        continue;
      }
      if (share_conn(t, u)) {
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

/* Nothing of c waits on its peer right now: a send whose every step the
 * receiver took, or a receive whose next step has arrived (in this process:
 * with cross-memory attach the data stays in the peer's). A peer that
 * exits then (it finished its part: a broadcast's last ranks return while
 * the root still waits for the chain's check over the network) fails
 * nothing; if the task needs more of that peer, the connection waits again
 * and the peer's exit counts. */
static bool peer_owes_nothing(const struct mc_conn *c)
{
  if (c->is_send)
    return __atomic_load_n(&c->ctrl->head, __ATOMIC_ACQUIRE) >= c->step;
  return !c->remote_read && mc_conn_recv_ready(c);
}

ncclResult_t mc_coll_conn_health(const struct mc_task *t, const struct mc_conn *c)
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
  if ((e != 0) && (c->kind != MC_TOPO_TRANSPORT_NET)) {
    /* A peer that stopped on a mismatch left a notice with the error. */
    char info[MC_CONN_ERR_INFO_BYTES];
    size_t n = mc_conn_error_info(c, info);
    struct mc_coll_notice notice;
    struct mc_coll_sig named;
    if ((n >= MC_NOTICE_BYTES) && mc_coll_notice_parse(info, MC_NOTICE_BYTES, &notice)) {
      ncclResult_t res = mc_coll_notice_fail(&t->op->sig, &notice, &named);
      mc_coll_note_mismatch(t->op, &named);
      return res;
    }
  }
  if ((e != 0) && (c->kind != MC_TOPO_TRANSPORT_NET) && (mc_conn_abort_rank(c) == c->peer))
    return MC_FAIL(ncclRemoteError,
                   "%s: rank %d: peer rank %d (pid %d on %s) aborted its communicator "
                   "(ncclCommAbort); the %s connection %s it is closed",
                   mc_coll_name(t->op->kind), comm->rank, c->peer, p->pid, p->host,
                   mc_topo_transport_str(c->kind), c->is_send ? "to" : "from");
  if (e != 0)
    return MC_FAIL((c->kind == MC_TOPO_TRANSPORT_NET) ? (ncclResult_t)e : ncclRemoteError,
                   "%s: rank %d: the %s connection %s rank %d (%s, pid %d) failed%s%s",
                   mc_coll_name(t->op->kind), comm->rank, mc_topo_transport_str(c->kind),
                   c->is_send ? "to" : "from", c->peer, p->host, p->pid,
                   (c->error_text[0] != '\0') ? ": " : "", c->error_text);
  /* Only a pid of this PID namespace is that process here (stage_peers). */
  if ((c->kind != MC_TOPO_TRANSPORT_NET) && !peer_owes_nothing(c) &&
      mc_peer_same_pidns(&comm->peers[comm->rank], p) && pid_gone(p->pid))
    return MC_FAIL(ncclRemoteError, "%s: rank %d: peer rank %d (pid %d on %s) exited",
                   mc_coll_name(t->op->kind), comm->rank, c->peer, p->pid, p->host);
  return ncclSuccess;
}

/* t's communicator was aborted (ncclCommAbort from another thread). */
static ncclResult_t task_aborted(const struct mc_task *t)
{
  struct ncclComm *comm = t->op->comm;

  if (__atomic_load_n(&comm->abort_flag, __ATOMIC_ACQUIRE))
    return MC_FAIL(ncclInvalidUsage, "%s: communicator %p was aborted", mc_coll_name(t->op->kind),
                   (void *)comm);
  return ncclSuccess;
}

/* A failure seen on t's connections or peers, or the communicator's abort. */
static ncclResult_t task_health(const struct mc_task *t)
{
  MC_CHECK(task_aborted(t));
  if (t->algo->task_health != NULL)
    return t->algo->task_health(t);
  for (int i = 0; i < t->n_send; i++)
    MC_CHECK(mc_coll_conn_health(t, t->send[i]));
  for (int i = 0; i < t->n_recv; i++)
    MC_CHECK(mc_coll_conn_health(t, t->recv[i]));
  return ncclSuccess;
}

#define CONNS_PER_CHANNEL (4 + 2 * MC_TREE_MAX_ARITY)
#define CONNS_PER_PEER    4

int mc_coll_comm_conns(const struct ncclComm *comm)
{
  return ((comm->channels != NULL) ? comm->n_channels * CONNS_PER_CHANNEL : 0) +
         comm->n_ranks * CONNS_PER_PEER;
}

struct mc_conn *mc_coll_comm_conn(struct ncclComm *comm, int i)
{
  int n_ch = (comm->channels != NULL) ? comm->n_channels * CONNS_PER_CHANNEL : 0;
  struct mc_conn *c = NULL;

  if (i < n_ch) {
    struct mc_channel *ch = &comm->channels[i / CONNS_PER_CHANNEL];
    int j = i % CONNS_PER_CHANNEL;
    struct mc_conn *fixed[4] = {&ch->send, &ch->recv, &ch->tree_send_up, &ch->tree_recv_up};
    if (j < 4)
      c = fixed[j];
    else
      c = ((j - 4) % 2 == 0) ? &ch->tree_send_down[(j - 4) / 2] : &ch->tree_recv_down[(j - 4) / 2];
  } else {
    int r = (i - n_ch) / CONNS_PER_PEER;
    struct mc_conn **per_peer[CONNS_PER_PEER] = {comm->p2p_send, comm->p2p_recv, comm->os_send,
                                                 comm->os_recv};
    struct mc_conn **arr = per_peer[(i - n_ch) % CONNS_PER_PEER];
    c = (arr != NULL) ? arr[r] : NULL;
  }
  return ((c != NULL) && (c->ctrl != NULL)) ? c : NULL;
}

static void poison_conn(struct ncclComm *comm, struct mc_conn *c)
{
  if ((c != NULL) && __atomic_load_n(&comm->is_aborted, __ATOMIC_ACQUIRE))
    mc_conn_post_abort(c, comm->rank);
  if ((c != NULL) && (mc_conn_error(c) == 0))
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
  for (int i = 0; i < mc_coll_comm_conns(comm); i++)
    poison_conn(comm, mc_coll_comm_conn(comm, i));
  mc_comm_free_connections(comm);
  __atomic_store_n(&comm->async_result, (int)res, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------------ run */

bool mc_coll_batch_comm_first(const struct mc_coll_batch *b, int i)
{
  for (int k = 0; k < i; k++)
    if (b->ops[k].comm == b->ops[i].comm)
      return false;
  return true;
}

void mc_coll_batch_proxies(struct mc_coll_batch *b, int delta)
{
  for (int i = 0; i < b->n_ops; i++)
    if (mc_coll_batch_comm_first(b, i))
      mc_proxy_activity(b->ops[i].comm->tp.proxy, delta);
}

static bool proxies_help(struct mc_coll_batch *b)
{
  bool moved = false;
  for (int i = 0; i < b->n_ops; i++)
    moved |= mc_proxy_help(b->ops[i].comm->tp.proxy);
  return moved;
}

/* A proxy thread of the batch blocked inside one plugin call for
 * MESHCCL_NET_TIMEOUT (limit_ns): the watchdog, which runs in that thread,
 * cannot fail the collective, so the rank does (tp_net.c). */
static ncclResult_t proxies_wedged(struct mc_coll_batch *b, uint64_t limit_ns,
                                   struct ncclComm **failed)
{
  char text[640] = "NET: the proxy thread was abandoned inside a plugin call (said before)";
  uint64_t now = mc_time_ns();

  for (int i = 0; i < b->n_ops; i++) {
    struct ncclComm *comm = b->ops[i].comm;
    if (!mc_coll_batch_comm_first(b, i) ||
        !mc_proxy_wedged_check(comm->tp.proxy, now, limit_ns, text, sizeof(text)))
      continue;
    *failed = comm;
    return MC_FAIL(ncclRemoteError, "%s", text);
  }
  return ncclSuccess;
}

/* Whether process pid (of this host) is stopped: state T (SIGSTOP) or t (a
 * tracer stopped it) in /proc/<pid>/stat. */
static bool pid_stopped(int pid)
{
  char path[64];
  char buf[512];
  const char *p;
  ssize_t n;
  int fd;

  if (pid <= 0)
    return false;
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return false;
  buf[n] = '\0';
  /* "pid (comm) S ...": the name may hold anything, the state follows the last ')' */
  p = strrchr(buf, ')');
  return (p != NULL) && (p[1] == ' ') && ((p[2] == 'T') || (p[2] == 't'));
}

static ncclResult_t stopped_fail(const struct mc_task *t, int peer, const char *how,
                                 double waited_s)
{
  struct ncclComm *comm = t->op->comm;
  const struct mc_peer_info *p = &comm->peers[peer];

  return MC_FAIL(ncclRemoteError,
                 "%s: rank %d: peer rank %d (pid %d on %s) is stopped (SIGSTOP, or a debugger) "
                 "and this rank waited %.1f s on %s (MESHCCL_NET_TIMEOUT=%lld s); "
                 "docs/TROUBLESHOOTING.md#net-timeout",
                 mc_coll_name(t->op->kind), comm->rank, peer, p->pid, p->host, waited_s, how,
                 (long long)mc_param_int(MC_P_NET_TIMEOUT));
}

/* A same-host peer in another PID namespace (containers sharing /dev/shm):
 * its process cannot be looked at, so once the rank waited waited_s (at
 * least MESHCCL_NET_TIMEOUT) with nothing moving, it counts as stalled, as a
 * NET peer does (tp_net.c's watchdog). */
static ncclResult_t foreign_fail(const struct mc_task *t, int peer, const char *how,
                                 double waited_s)
{
  struct ncclComm *comm = t->op->comm;
  const struct mc_peer_info *p = &comm->peers[peer];

  return MC_FAIL(ncclRemoteError,
                 "%s: rank %d: peer rank %d (pid %d on %s, in another PID namespace) moved "
                 "nothing while this rank waited %.1f s on %s (MESHCCL_NET_TIMEOUT=%lld s): it "
                 "exited, stopped, or has not called the collective; "
                 "docs/TROUBLESHOOTING.md#net-timeout",
                 mc_coll_name(t->op->kind), comm->rank, peer, p->pid, p->host, waited_s, how,
                 (long long)mc_param_int(MC_P_NET_TIMEOUT));
}

/* Whether same-host peer r has stalled t for waited_s: its process is
 * stopped (its pid is one of this PID namespace), or, in another PID
 * namespace, it just has not moved. how: what t waits on. */
static ncclResult_t peer_stalled(const struct mc_task *t, int r, const char *how, double waited_s)
{
  struct ncclComm *comm = t->op->comm;
  const struct mc_peer_info *me = &comm->peers[comm->rank];
  const struct mc_peer_info *p = &comm->peers[r];

  if (!mc_peer_same_pidns(me, p))
    return foreign_fail(t, r, how, waited_s);
  if ((p->pid != me->pid) && pid_stopped(p->pid))
    return stopped_fail(t, r, how, waited_s);
  return ncclSuccess;
}

/* A same-host peer of t that stalled it (peer_stalled), while the rank has
 * waited waited_s (at least MESHCCL_NET_TIMEOUT) for the batch: the peers of
 * t's P2P and SHM connections, or, for a task that keeps its connections
 * elsewhere (the one-shot: every rank of the host), every other rank of the
 * communicator on this host. */
static ncclResult_t task_stopped_peers(const struct mc_task *t, double waited_s)
{
  struct ncclComm *comm = t->op->comm;
  const struct mc_peer_info *me = &comm->peers[comm->rank];
  char how[64];

  for (int i = 0; i < t->n_send + t->n_recv; i++) {
    const struct mc_conn *c = (i < t->n_send) ? t->send[i] : t->recv[i - t->n_send];
    if ((c == NULL) || (c->kind == MC_TOPO_TRANSPORT_NET) || peer_owes_nothing(c))
      continue;
    snprintf(how, sizeof(how), "its %s connection %s it", mc_topo_transport_str(c->kind),
             c->is_send ? "to" : "from");
    MC_CHECK(peer_stalled(t, c->peer, how, waited_s));
  }
  if (t->n_send + t->n_recv > 0)
    return ncclSuccess;
  for (int r = 0; r < comm->n_ranks; r++)
    if ((r != comm->rank) && (comm->peers[r].host_hash == me->host_hash))
      MC_CHECK(peer_stalled(t, r, "it", waited_s));
  return ncclSuccess;
}

/* A NET connection of one of b's communicators failed. */
static bool batch_net_failed(struct mc_coll_batch *b)
{
  for (int i = 0; i < b->n_ops; i++) {
    struct ncclComm *comm = b->ops[i].comm;
    if (!mc_coll_batch_comm_first(b, i))
      continue;
    for (int j = 0; j < mc_coll_comm_conns(comm); j++) {
      const struct mc_conn *c = mc_coll_comm_conn(comm, j);
      if ((c != NULL) && (c->kind == MC_TOPO_TRANSPORT_NET) && (mc_conn_error(c) != 0))
        return true;
    }
  }
  return false;
}

/* Every few ms of waiting (now, waited_s of it): the tasks' connections,
 * then the others (NET ones after STRAY_NET_MS of waiting). A peer that
 * stopped on a mismatch closes its NET connections once its notices left:
 * this rank may see the close before the notice, which can also come
 * through another peer (one that heard of the mismatch first). So from the
 * first NET failure (*net_down_at) the rank keeps running for NOTICE_WAIT_MS,
 * looking for a notice among the steps that arrived (its tasks may be
 * blocked on a send), before it reports the failure; unless nothing had
 * moved for NOTICE_WAIT_MS already when that failure was seen
 * (*down_waited_s): notices are looked for from STRAY_NET_MS of waiting on,
 * and the peer's close comes after its notices, so they would be here; that
 * failure is then a net's time bound, which must not be exceeded. */
static ncclResult_t health(struct mc_coll_batch *b, struct mc_coll_plan *pl, double now,
                           double waited_s, bool check_stopped, double *net_down_at,
                           double *down_waited_s, struct ncclComm **failed)
{
  ncclResult_t res;
  struct mc_op *op = NULL;
  bool grace;

  if ((*net_down_at == 0) && batch_net_failed(b)) {
    *net_down_at = now;
    *down_waited_s = waited_s;
  }
  if (((*net_down_at != 0) || (waited_s * 1e3 >= STRAY_NET_MS)) &&
      mc_coll_notice_scan(b, &res, &op)) {
    *failed = op->comm;
    return res;
  }
  grace = (*net_down_at != 0) && (now - *net_down_at < NOTICE_WAIT_MS * 1e-3) &&
          (*down_waited_s < NOTICE_WAIT_MS * 1e-3);
  for (int i = 0; i < pl->n_tasks; i++) {
    struct mc_task *t = &pl->tasks[i];
    if (!t->done && ((res = grace ? task_aborted(t) : task_health(t)) != ncclSuccess)) {
      *failed = t->op->comm;
      return res;
    }
    if (!t->done && !grace && check_stopped &&
        ((res = task_stopped_peers(t, waited_s)) != ncclSuccess)) {
      *failed = t->op->comm;
      return res;
    }
  }
  if (mc_coll_stray_check(b, pl, waited_s * 1e3 >= STRAY_NET_MS, &res, &op)) {
    *failed = op->comm;
    return res;
  }
  return ncclSuccess;
}

ncclResult_t mc_coll_tasks_run(struct mc_coll_batch *b, struct mc_coll_plan *pl,
                               struct ncclComm **failed)
{
  unsigned idle = 0;
  unsigned spin = (unsigned)b->ops[0].comm->spin_passes;

  bool net = false;

  /* Over the network the proxy thread does the work: the rank yields the
   * CPU to it, or does that work itself while it waits (mc_proxy_help: no
   * thread hand-off per step; 5-10% more bandwidth over a veth). */
  for (int i = 0; i < pl->n_tasks; i++) {
    const struct mc_task *t = &pl->tasks[i];
    for (int k = 0; k < t->n_send; k++)
      net = net || (t->send[k]->kind == MC_TOPO_TRANSPORT_NET);
    for (int k = 0; k < t->n_recv; k++)
      net = net || (t->recv[k]->kind == MC_TOPO_TRANSPORT_NET);
  }
  if (net)
    spin = 8;
  int left = pl->n_tasks;
  double last_check = 0; /* the clock is read only once waiting starts */
  double wait_start = 0; /* when nothing moved any more (0: moving) */
  double last_stopped_check = 0;
  double stalled_s = (double)mc_param_int(MC_P_NET_TIMEOUT);
  double net_down_at = 0; /* when a NET connection's failure was first seen */
  double down_waited = 0; /* how long nothing had moved then */
  ncclResult_t res = ncclSuccess;

  while (left > 0) {
    int moved = 0;
    for (int i = 0; i < pl->n_tasks; i++) {
      struct mc_task *t = &pl->tasks[i];
      int r;
      if (t->done || ((t->after != NULL) && !t->after->done))
        continue;
      r = task_progress(t, &res);
      if (r < 0) {
        *failed = t->op->comm;
        return res;
      }
      moved |= r;
      if (t->done)
        left--;
    }
    if (moved) {
      idle = 0;
      wait_start = 0;
      continue;
    }
    if (net && proxies_help(b)) {
      idle = 0;
      wait_start = 0;
      continue;
    }
    idle++;
    if ((idle % CHECK_EVERY) == 0) {
      double now = mc_time_sec();
      if (last_check == 0)
        last_check = now;
      if (wait_start == 0)
        wait_start = now;
      if (now - last_check >= CHECK_MS * 1e-3) {
        bool check_stopped = (now - wait_start >= stalled_s) &&
                             (now - last_stopped_check >= STOPPED_CHECK_MS * 1e-3);
        last_check = now;
        if (check_stopped)
          last_stopped_check = now;
        if (net && ((res = proxies_wedged(b, (uint64_t)(stalled_s * 1e9), failed)) != ncclSuccess))
          return res;
        if ((res = health(b, pl, now, now - wait_start, check_stopped, &net_down_at, &down_waited,
                          failed)) != ncclSuccess)
          return res;
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

/* The batch failed (res; on comm failed when it is known): every
 * communicator involved is failed, except, on a mismatch, the others. A
 * communicator that stopped on a mismatch tells its peers which first. */
static void batch_fail(struct mc_coll_batch *b, ncclResult_t res, const struct ncclComm *failed)
{
  char why[MC_LAST_ERROR_BYTES];

  /* An aborted communicator (ncclCommAbort; not a revoke, which also sets
   * the abort flag) fails the batch's others too: their tasks (with its
   * ranks, in one process) may have moved some steps already. */
  if ((failed != NULL) && __atomic_load_n(&failed->is_aborted, __ATOMIC_ACQUIRE))
    failed = NULL;

  mc_error_last_copy(why, sizeof(why));
  for (int i = 0; i < b->n_ops; i++) {
    struct ncclComm *comm = b->ops[i].comm;
    if ((failed != NULL) && (comm != failed) && (res == ncclInvalidUsage))
      continue; /* a mismatch on one communicator leaves the others alone */
    if ((b->ops[i].notice != NULL) && (res == ncclInvalidUsage) &&
        (__atomic_load_n(&comm->coll_result, __ATOMIC_ACQUIRE) == ncclSuccess))
      mc_coll_notices_send(&b->pl, comm, b->ops[i].notice);
  }
  for (int i = 0; i < b->n_ops; i++) {
    struct ncclComm *comm = b->ops[i].comm;
    if ((failed != NULL) && (comm != failed) && (res == ncclInvalidUsage))
      continue;
    snprintf(comm->last_error, sizeof(comm->last_error), "%s", why);
    comm_fail(comm, (res == ncclInvalidUsage) ? ncclInvalidUsage : res);
  }
}

ncclResult_t mc_coll_run(struct mc_op *ops, int n)
{
  struct mc_coll_batch b;
  struct ncclComm *failed = NULL;
  ncclResult_t res;

  b.ops = ops;
  b.n_ops = n;
  mc_coll_plan_init(&b.pl);
  for (int i = 0; i < n; i++)
    ops[i].user_count = ops[i].count;
  res = p2p_self(&b);
  for (int i = 0; (i < n) && (res == ncclSuccess); i++)
    res = mc_coll_algo_choose(&ops[i]);
  if (res == ncclSuccess)
    res = mc_coll_batch_sign(&b);
  if (res == ncclSuccess)
    res = runtime_connect(&b, &failed);
  if (res == ncclSuccess)
    res = plan(&b);
  if ((res == ncclSuccess) && (b.pl.n_tasks > 0)) {
    mc_coll_batch_proxies(&b, +1);
    res = mc_coll_tasks_run(&b, &b.pl, &failed);
    mc_coll_batch_proxies(&b, -1);
  }
  if (res != ncclSuccess)
    batch_fail(&b, res, failed);
  for (int i = 0; i < n; i++) {
    free(ops[i].notice);
    ops[i].notice = NULL;
  }
  mc_coll_plan_fini(&b.pl);
  return res;
}
