/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The executor's scheduler: runs a batch of operations on the calling thread
 * (the host edition of NCCL's kernels and of its enqueue step,
 * src/enqueue.cc). Each operation gets an algorithm (mc_coll_algo_choose),
 * the connections that algorithm needs are made at first use
 * (coll_connect.c), and the algorithm cuts it into tasks (struct
 * mc_coll_algo_ops.plan), whose primitives coll_prim.c runs; a task runs
 * after the previous task on any of the same connections; all runnable tasks
 * advance round-robin, one primitive at a time when all its connections are
 * ready (a primitive may receive from and send to several peers: a tree
 * node's children), so grouped send/recv patterns and several communicators
 * driven by one thread never deadlock.
 *
 * Waiting: spin, then yield, then short sleeps. Every few milliseconds of
 * waiting it checks liveness (coll_live.c): a dead, stopped or failed peer
 * becomes ncclRemoteError on this rank, which then poisons its own
 * connections and closes its network connections so that its other peers
 * learn it too, within milliseconds.
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
/* Idle passes between two looks at the clock for the liveness check, while
 * the rank spins. Once it yields or sleeps it looks every pass (a vDSO
 * clock read costs far less than the yield or sleep): a pass there can take
 * a scheduler slice on a loaded machine (10 ms and more with other
 * processes on every core), and counting passes would then put seconds
 * between two checks, and between a connection's failure and its report. */
#define CHECK_EVERY 1024
#define CHECK_MS    5 /* at most one liveness check per this many ms */
/* Once a wait passed MESHCCL_NET_TIMEOUT, same-host peers are looked at
 * (/proc/<pid>/stat: stopped or not) at most this often. */
#define STOPPED_CHECK_MS 100
const char *mc_coll_name(enum mc_coll_kind kind)
{
  static const char *const names[] = {"AllReduce",     "Broadcast", "Reduce", "AllGather",
                                      "ReduceScatter", "Send",      "Recv"};
  return ((unsigned)kind < sizeof(names) / sizeof(names[0])) ? names[kind] : "?";
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

void mc_coll_task_init(struct mc_task *t, struct mc_op *op, const struct mc_coll_algo_ops *algo)
{
  memset(t, 0, sizeof(*t));
  t->op = op;
  t->algo = algo;
  t->n_ranks = op->comm->n_ranks;
  t->rank = op->comm->rank;
  t->len = op->count;
}

int mc_coll_op_channels(const struct mc_op *op)
{
  int n = op->comm->data.n_channels;

  return ((op->n_channels > 0) && (op->n_channels < n)) ? op->n_channels : n;
}

bool mc_coll_channel_part(const struct mc_op *op, int n_ch, int c, size_t *base_out,
                          size_t *len_out)
{
  size_t per = (op->count + (size_t)n_ch - 1) / (size_t)n_ch;
  size_t base = (size_t)c * per;

  if (base >= op->count)
    return false;
  *base_out = base;
  *len_out = (op->count - base < per) ? op->count - base : per;
  return true;
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
  size_t c = comm->data.tp.slot_bytes / esize;
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

void mc_coll_plan_link(struct mc_coll_plan *pl)
{
  /* A task waits for the last earlier task on any of the same connections;
   * tasks that drive their own connections wait for the last earlier one of
   * their connection group on their communicator (one-shot and symmetric
   * share the one-shot connections). */
  for (int i = 0; i < pl->n_tasks; i++) {
    struct mc_task *t = &pl->tasks[i];
    t->after = NULL;
    for (int k = i - 1; k >= 0; k--) {
      struct mc_task *u = &pl->tasks[k];
      bool own_t = (t->algo->task_progress != NULL);
      bool own_u = (u->algo->task_progress != NULL);
      if (own_t || own_u) {
        if ((mc_coll_conn_group(t->algo) == mc_coll_conn_group(u->algo)) &&
            (t->op->comm == u->op->comm)) {
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
}

static ncclResult_t plan(struct mc_coll_batch *b)
{
  struct mc_coll_plan *pl = &b->pl;

  for (int i = 0; i < b->n_ops; i++) {
    struct mc_op *op = &b->ops[i];
    if (op->count == 0)
      continue;
    if ((op->comm->n_ranks == 1) && op->algo->local_on_one_rank) {
      run_local(op);
      continue;
    }
    if (!mc_coll_op_runs(op))
      continue;
    MC_CHECK(op->algo->plan(op, pl));
  }
  mc_coll_plan_link(pl);
  return ncclSuccess;
}

/* ------------------------------------------------------------------ run */

bool mc_coll_batch_comm_first(const struct mc_coll_batch *b, int i)
{
  for (int k = 0; k < i; k++)
    if (b->ops[k].comm == b->ops[i].comm)
      return false;
  return true;
}

struct mc_conn *mc_coll_batch_conn_next(struct mc_coll_batch *b, struct mc_coll_batch_it *it)
{
  for (; it->op < b->n_ops; it->op++, it->conn = 0) {
    it->comm = b->ops[it->op].comm;
    if (!mc_coll_batch_comm_first(b, it->op))
      continue;
    while (it->conn < mc_coll_comm_conns(it->comm)) {
      struct mc_conn *c = mc_coll_comm_conn(it->comm, it->conn++);
      if (c != NULL)
        return c;
    }
  }
  return NULL;
}

void mc_coll_batch_proxies(struct mc_coll_batch *b, int delta)
{
  for (int i = 0; i < b->n_ops; i++)
    if (mc_coll_batch_comm_first(b, i))
      mc_proxy_activity(b->ops[i].comm->data.tp.proxy, delta);
}

static unsigned proxies_help(struct mc_coll_batch *b)
{
  unsigned moved = 0;
  for (int i = 0; i < b->n_ops; i++)
    moved |= mc_proxy_help(b->ops[i].comm->data.tp.proxy);
  return moved;
}

/* Does t use a NET connection: in send[]/recv[], or, driving its own, one
 * its table's state holds? */
static bool task_net(const struct mc_task *t)
{
  const struct mc_coll_algo_ops *g = mc_coll_conn_group(t->algo);
  struct ncclComm *comm = t->op->comm;
  int n = (t->algo->task_progress != NULL) ? mc_coll_algo_n_conns(comm, g) : 0;

  for (int k = 0; k < t->n_send; k++)
    if (t->send[k]->kind == MC_TOPO_TRANSPORT_NET)
      return true;
  for (int k = 0; k < t->n_recv; k++)
    if (t->recv[k]->kind == MC_TOPO_TRANSPORT_NET)
      return true;
  for (int i = 0; i < n; i++) {
    const struct mc_conn *c = g->conn(comm, i);
    if ((c != NULL) && (c->ctrl != NULL) && (c->kind == MC_TOPO_TRANSPORT_NET))
      return true;
  }
  return false;
}

bool mc_coll_plan_net(const struct mc_coll_plan *pl)
{
  for (int i = 0; i < pl->n_tasks; i++)
    if (task_net(&pl->tasks[i]))
      return true;
  return false;
}

/* The liveness checks of mc_coll_tasks_loop (now; waited_s of nothing
 * moving), one thread of a shared batch at a time, none once it failed. */
static ncclResult_t loop_health(struct mc_coll_batch *b, struct mc_coll_plan *pl,
                                const struct mc_coll_plan *all, struct mc_coll_share *sh, bool net,
                                double now, double waited_s, bool check_stopped,
                                double *net_down_at, double *down_waited, struct ncclComm **failed)
{
  double stalled_s = (double)mc_param_int(MC_P_NET_TIMEOUT);
  ncclResult_t res = ncclSuccess;

  if (sh != NULL) {
    pthread_mutex_lock(&sh->lock);
    if (__atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE)) {
      pthread_mutex_unlock(&sh->lock);
      return ncclSuccess;
    }
  }
  if (net)
    res = mc_coll_proxies_wedged(b, (uint64_t)(stalled_s * 1e9), failed);
  if (res == ncclSuccess)
    res =
        mc_coll_health(b, pl, all, now, waited_s, check_stopped, net_down_at, down_waited, failed);
  if ((sh != NULL) && (res != ncclSuccess))
    mc_coll_share_fail(sh, res, *failed);
  if (sh != NULL)
    pthread_mutex_unlock(&sh->lock);
  return res;
}

ncclResult_t mc_coll_tasks_loop(struct mc_coll_batch *b, struct mc_coll_plan *pl,
                                const struct mc_coll_plan *all, struct mc_coll_share *sh,
                                struct ncclComm **failed)
{
  unsigned idle = 0;
  unsigned spin = (unsigned)b->ops[0].comm->data.spin_passes;

  bool net = false;

  /* Over the network the proxy thread does the work: the rank yields the
   * CPU to it, or does that work itself while it waits (mc_proxy_help: no
   * thread hand-off per step; 5-10% more bandwidth over a veth). */
  for (int i = 0; i < pl->n_tasks; i++)
    net = net || task_net(&pl->tasks[i]);
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
    unsigned helped;
    if ((sh != NULL) && __atomic_load_n(&sh->stop, __ATOMIC_ACQUIRE))
      return ncclSuccess; /* another thread of the batch failed it */
    for (int i = 0; i < pl->n_tasks; i++) {
      struct mc_task *t = &pl->tasks[i];
      int r;
      if (t->done || ((t->after != NULL) && !t->after->done))
        continue;
      r = mc_coll_task_progress(t, &res);
      if (r < 0) {
        *failed = t->op->comm;
        if (sh != NULL)
          mc_coll_share_fail(sh, res, *failed);
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
    helped = net ? proxies_help(b) : 0;
    if (helped != 0) {
      /* Only a completed step is a peer moving: a receive posted here (the
       * stray check's, after STRAY_NET_MS of waiting) restarting the clock
       * would make a NET failure seen next look recent, and wait
       * NOTICE_WAIT_MS more for a notice (coll_live.c). */
      idle = 0;
      if ((helped & MC_PROXY_DONE) != 0)
        wait_start = 0;
      continue;
    }
    idle++;
    if ((idle > spin) || ((idle % CHECK_EVERY) == 0)) {
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
        res = loop_health(b, pl, all, sh, net, now, now - wait_start, check_stopped, &net_down_at,
                          &down_waited, failed);
        if (res != ncclSuccess)
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

ncclResult_t mc_coll_tasks_run(struct mc_coll_batch *b, struct mc_coll_plan *pl,
                               struct ncclComm **failed)
{
  struct ncclComm *comm = b->ops[0].comm;
  int k = comm->data.n_threads;

  /* Several threads for one communicator's channels; a batch over several
   * communicators (a group), or one that uses a NET connection (the proxy
   * hand-off, the notice scan), stays on the calling thread. */
  if ((k > 1) && (pl->n_tasks > 1) && (b->n_ops > 0)) {
    bool one_comm = true;
    for (int i = 1; i < b->n_ops; i++)
      one_comm = one_comm && (b->ops[i].comm == comm);
    if (one_comm && !mc_coll_plan_net(pl))
      return mc_coll_workers_run(b, pl, k, failed);
  }
  return mc_coll_tasks_loop(b, pl, pl, NULL, failed);
}

/* The batch failed (res; on comm failed when it is known): every
 * communicator involved is failed, except, on a mismatch, the others. A
 * communicator that stopped on a mismatch tells its peers which first. */
static void batch_fail(struct mc_coll_batch *b, ncclResult_t res, const struct ncclComm *failed)
{
  char why[MC_LAST_ERROR_BYTES];
  struct mc_coll_batch_it it = {0};
  struct mc_conn *c;

  /* An aborted communicator (ncclCommAbort; not a revoke, which also sets
   * the abort flag) fails the batch's others too: their tasks (with its
   * ranks, in one process) may have moved some steps already. */
  if ((failed != NULL) && __atomic_load_n(&failed->life.is_aborted, __ATOMIC_ACQUIRE))
    failed = NULL;

  mc_error_last_copy(why, sizeof(why));
  /* No task of the batch reads a step any more: a sender of this process
   * failing below waits for no reader of this batch (mc_conn_send_withdraw). */
  while ((c = mc_coll_batch_conn_next(b, &it)) != NULL)
    if (!c->is_send)
      mc_conn_recv_unpin(c);
  for (int i = 0; i < b->n_ops; i++) {
    struct ncclComm *comm = b->ops[i].comm;
    if ((failed != NULL) && (comm != failed) && (res == ncclInvalidUsage))
      continue; /* a mismatch on one communicator leaves the others alone */
    if ((b->ops[i].notice != NULL) && (res == ncclInvalidUsage) &&
        (__atomic_load_n(&comm->coll.result, __ATOMIC_ACQUIRE) == ncclSuccess))
      mc_coll_notices_send(&b->pl, comm, b->ops[i].notice);
  }
  for (int i = 0; i < b->n_ops; i++) {
    struct ncclComm *comm = b->ops[i].comm;
    if ((failed != NULL) && (comm != failed) && (res == ncclInvalidUsage))
      continue;
    snprintf(comm->last_error, sizeof(comm->last_error), "%s", why);
    mc_coll_comm_fail(comm, (res == ncclInvalidUsage) ? ncclInvalidUsage : res);
  }
}

/* A wait that an abort of one of the batch's communicators ended (a socket's
 * or a net's: ncclInternalError, as in NCCL) fails the call as the abort,
 * like the executor's own check (ncclInvalidUsage naming the communicator). */
static ncclResult_t abort_result(const struct mc_coll_batch *b, ncclResult_t res)
{
  if (res != ncclInternalError)
    return res;
  for (int i = 0; i < b->n_ops; i++) {
    const struct mc_op *op = &b->ops[i];
    if (__atomic_load_n(&op->comm->life.is_aborted, __ATOMIC_ACQUIRE))
      return MC_FAIL(ncclInvalidUsage, "%s: communicator %p was aborted (ncclCommAbort)",
                     mc_coll_name(op->kind), (void *)op->comm);
  }
  return res;
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
  res = mc_coll_p2p_self(&b);
  for (int i = 0; (i < n) && (res == ncclSuccess); i++)
    res = mc_coll_algo_choose(&ops[i]);
  if (res == ncclSuccess)
    res = mc_coll_batch_sign(&b);
  if (res == ncclSuccess)
    res = mc_coll_runtime_connect(&b, &failed);
  if (res == ncclSuccess)
    res = plan(&b);
  if ((res == ncclSuccess) && (b.pl.n_tasks > 0)) {
    mc_coll_batch_proxies(&b, +1);
    res = mc_coll_tasks_run(&b, &b.pl, &failed);
    mc_coll_batch_proxies(&b, -1);
  }
  if (res != ncclSuccess) {
    res = abort_result(&b, res);
    batch_fail(&b, res, failed);
  }
  for (int i = 0; i < n; i++) {
    free(ops[i].notice);
    ops[i].notice = NULL;
  }
  mc_coll_plan_fini(&b.pl);
  return res;
}
