/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Signatures in the executor (meshccl's; coll_sig.c builds and compares
 * them, docs/design/lifecycle.md, "Errors", tells the protocol):
 *   - every operation of a batch gets its number and signature;
 *   - the first step from each connection an operation receives from is
 *     checked against it (mc_coll_recv_check, called by the executor and
 *     the one-shot);
 *   - a rank that stopped on a mismatch sends a notice on every connection,
 *     so that its peers name the same mismatch rather than a lost peer;
 *   - while it waits, a rank looks at the collective connections it does
 *     not expect data from: a first step there of an operation it has
 *     reached means that a peer runs another algorithm (made another call);
 *   - before the connections every rank makes at once at first use
 *     (one-shot, trees), the signatures go once around the ring (the probe),
 *     so that no rank waits in that connect for a peer that called
 *     something else.
 */
#include "coll/coll_int.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "log.h"
#include "utils.h"

/* ------------------------------------------------------- first steps */

/* The operation failed on a mismatch: what this rank tells its peers. */
void mc_coll_note_mismatch(struct mc_op *op, const struct mc_coll_sig *named)
{
  struct mc_coll_notice *n;
  struct mc_coll_notice *none = NULL;

  /* The first note of the operation stands: threads running its channels
   * (coll_workers.c) may each find the mismatch at once. Without memory the
   * peers learn of the failure without the pair. */
  if ((__atomic_load_n(&op->notice, __ATOMIC_ACQUIRE) != NULL) ||
      ((n = malloc(sizeof(*n))) == NULL))
    return;
  n->failed = op->sig;
  n->failed.flags = MC_SIG_FAILED;
  n->other = *named;
  if (!__atomic_compare_exchange_n(&op->notice, &none, n, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    free(n);
}

/* A step of got bytes at src from c is a peer's notice: *res names the mismatch. */
bool mc_coll_notice_recv(struct mc_task *t, const struct mc_conn *c, const char *src, size_t got,
                         ncclResult_t *res)
{
  char buf[MC_NOTICE_BYTES_ALT];
  struct mc_coll_notice n;
  struct mc_coll_sig named;

  if ((got != MC_NOTICE_BYTES) && (got != MC_NOTICE_BYTES_ALT))
    return false;
  if (c->remote_read) {
    if (mc_conn_read(c, buf, src, got) != ncclSuccess) {
      mc_error_clear_thread(); /* the caller reports the step as it is */
      return false;
    }
  } else {
    memcpy(buf, src, got);
  }
  if (!mc_coll_notice_parse(buf, got, &n))
    return false;
  *res = mc_coll_notice_fail(&t->op->sig, &n, &named);
  mc_coll_note_mismatch(t->op, &named);
  return true;
}

/* The call a notice at the start of an operation names: its data (32
 * bytes). One that cannot be read leaves the failed call alone: the
 * message then names the peer's call only. */
static struct mc_coll_sig notice_other(const struct mc_conn *c, const char *src, size_t got,
                                       const struct mc_coll_sig *failed)
{
  struct mc_coll_sig other;

  if ((got != sizeof(other)) && (got != (size_t)-1))
    return *failed;
  if (!c->remote_read)
    memcpy(&other, src, sizeof(other));
  else if (mc_conn_read(c, &other, src, sizeof(other)) != ncclSuccess)
    return *failed; /* the peer is gone: its notice was all it had to say */
  return mc_coll_sig_valid(&other) ? other : *failed;
}

/* The next step of c, about to be read as a notice on a failure: pinned
 * until the batch fails (mc_coll_run unpins); withdrawn, there is none. */
static void notice_pin(struct mc_conn *c, const char **src, size_t *got)
{
  if (!mc_conn_recv_pin(c)) {
    *src = NULL;
    *got = 0;
  }
}

int mc_coll_recv_check(struct mc_task *t, struct mc_conn *c, size_t *sent_bytes_out,
                       ncclResult_t *res)
{
  const struct mc_coll_sig *mine = &t->op->sig;
  const void *hdr = mc_conn_recv_hdr(c);
  size_t got = 0;
  const char *src;
  struct mc_coll_notice n;
  struct mc_coll_sig named;

  if ((hdr != NULL) && (mine->kind != MC_COLL_RECV) && mc_coll_sig_same(mine, hdr)) {
    *sent_bytes_out = t->op->count * t->op->esize;
    return 1;
  }
  src = mc_conn_recv_data(c, &got);
  if (hdr == NULL) {
    notice_pin(c, &src, &got);
    if (!mc_coll_notice_recv(t, c, src, got, res))
      *res = mc_coll_sig_missing(mine, c->peer);
    return -1;
  }
  memcpy(&n.failed, hdr, sizeof(n.failed));
  if (!mc_coll_sig_valid(&n.failed)) {
    *res = mc_coll_sig_missing(mine, c->peer);
    return -1;
  }
  if ((n.failed.flags & MC_SIG_FAILED) != 0) {
    notice_pin(c, &src, &got);
    n.other = notice_other(c, src, got, &n.failed);
    *res = mc_coll_notice_fail(mine, &n, &named);
    mc_coll_note_mismatch(t->op, &named);
    return -1;
  }
  *res = mc_coll_sig_check(mine, &n.failed, sent_bytes_out);
  if (*res != ncclSuccess) {
    n.failed.flags = 0;
    mc_coll_note_mismatch(t->op, &n.failed);
    return -1;
  }
  return 1;
}

/* ------------------------------------------------------------ notices */

/* Where c is in t's stream: true when t sent part of its steps on c and
 * more are to come (*next_bytes: the size of the next one); false at a
 * boundary between operations, where the receiver expects a signature. */
static bool mid_stream(const struct mc_task *t, const struct mc_conn *c, size_t *next_bytes)
{
  struct mc_task copy = *t;
  struct mc_prim p;
  bool uses = false;

  for (int i = 0; i < t->n_send; i++)
    uses = uses || (t->send[i] == c);
  if (!uses || !t->sent_any || t->done || (t->algo->task_prim == NULL))
    return false;
  while (t->algo->task_prim(&copy, &p)) {
    if (mc_prim_sends(p.kind)) {
      *next_bytes = p.n * t->op->esize;
      return true;
    }
    t->algo->task_next(&copy);
  }
  return false;
}

/* Sends notice n on c, if a slot is free: at a boundary as the next
 * operation's first step (its header the failed call, its data the other),
 * else as a step of a size the receiver does not expect. */
static bool notice_send(const struct mc_coll_plan *pl, struct mc_conn *c,
                        const struct mc_coll_notice *n)
{
  size_t next = 0;
  bool mid = false;
  char *slot;

  if ((c == NULL) || (c->ctrl == NULL) || (mc_conn_error(c) != 0) || !mc_conn_send_ready(c))
    return false;
  for (int i = 0; (i < pl->n_tasks) && !mid; i++)
    mid = mid_stream(&pl->tasks[i], c, &next);
  slot = mc_conn_send_slot(c);
  if (!mid) {
    mc_conn_send_hdr(c, &n->failed);
    memcpy(slot, &n->other, sizeof(n->other));
    mc_conn_send_commit(c, NULL, sizeof(n->other));
  } else {
    size_t bytes = (next == MC_NOTICE_BYTES) ? MC_NOTICE_BYTES_ALT : MC_NOTICE_BYTES;
    memset(slot, 0, MC_NOTICE_BYTES_ALT);
    memcpy(slot, n, sizeof(*n));
    mc_conn_send_commit(c, NULL, bytes);
  }
  return c->kind == MC_TOPO_TRANSPORT_NET;
}

/* The notice also goes beside the error code (P2P and SHM peers read it
 * there when the FIFO was full, or when they are the sender). */
static void notice_post(struct mc_conn *c, const struct mc_coll_notice *n)
{
  if ((c != NULL) && (c->ctrl != NULL) && (c->kind != MC_TOPO_TRANSPORT_NET))
    mc_conn_set_error_info(c, ncclInvalidUsage, n, sizeof(*n));
}

#define NOTICE_FLUSH_MS 1000 /* NET: at most this long for the notices to leave */

/* NET notices leave through the proxy: wait (bounded, abort flag) until the
 * net took them, before the connections close. */
static void notices_flush(struct ncclComm *comm, struct mc_conn **net, int n_net)
{
  struct mc_deadline dl = mc_deadline_in_ms(NOTICE_FLUSH_MS);
  bool left = true;

  while (left && !mc_deadline_passed(dl) &&
         !__atomic_load_n(&comm->life.abort_flag, __ATOMIC_ACQUIRE)) {
    left = false;
    for (int i = 0; i < n_net; i++)
      left = left || ((mc_conn_error(net[i]) == 0) && !mc_conn_send_drained(net[i]));
    if (left && (mc_proxy_help(comm->data.tp.proxy) == 0))
      sched_yield();
  }
}

/* comm stopped on a mismatch (n): every peer learns which, through every
 * connection (docs/design/lifecycle.md, "Errors"). */
void mc_coll_notices_send(const struct mc_coll_plan *pl, struct ncclComm *comm,
                          const struct mc_coll_notice *n)
{
  /* The NET connections whose notice is waited for: at most every send
   * connection (without memory, none is: the notices may then be lost). */
  int n_own = mc_coll_comm_conns(comm);
  int cap = comm->data.n_channels * (2 + MC_TREE_MAX_ARITY) + n_own + 1;
  struct mc_conn **net = calloc((size_t)cap, sizeof(*net));
  int n_net = 0;
  struct mc_conn *sends[2 + MC_TREE_MAX_ARITY];

  for (int c = 0; (comm->data.channels != NULL) && (c < comm->data.n_channels); c++) {
    struct mc_channel *ch = &comm->data.channels[c];
    sends[0] = &ch->send;
    sends[1] = &ch->tree_send_up;
    for (int i = 0; i < MC_TREE_MAX_ARITY; i++)
      sends[2 + i] = &ch->tree_send_down[i];
    for (int i = 0; i < 2 + MC_TREE_MAX_ARITY; i++)
      if (notice_send(pl, sends[i], n) && (net != NULL))
        net[n_net++] = sends[i];
  }
  /* Every connection, the algorithms' own included: the notice beside the
   * error code; their send connections: the notice as a step. */
  for (int i = 0; i < n_own; i++) {
    struct mc_conn *c = mc_coll_comm_conn(comm, i);
    if ((i >= mc_coll_comm_channel_conns(comm)) && (c != NULL) && c->is_send &&
        notice_send(pl, c, n) && (net != NULL) && (n_net < cap))
      net[n_net++] = c;
    notice_post(c, n);
  }
  notices_flush(comm, net, n_net);
  free(net);
}

/* ------------------------------------------------------ stray steps */

/* Does a task of pl receive from c (one-shot and symmetric tasks: from their
 * peers' own connections)? */
static bool plan_receives_from(const struct mc_coll_plan *pl, const struct ncclComm *comm,
                               const struct mc_conn *c)
{
  for (int i = 0; i < pl->n_tasks; i++) {
    const struct mc_task *t = &pl->tasks[i];
    if (t->op->comm != comm)
      continue;
    for (int k = 0; k < t->n_recv; k++)
      if (t->recv[k] == c)
        return true;
    if ((t->algo->task_receives_from != NULL) && t->algo->task_receives_from(t, c))
      return true;
  }
  return false;
}

/* The operation of the batch on comm that a peer's signature theirs
 * belongs to: its number, else the batch's first operation on comm. */
static struct mc_op *batch_op_for(struct mc_coll_batch *b, const struct ncclComm *comm,
                                  const struct mc_coll_sig *theirs)
{
  struct mc_op *first = NULL;

  for (int i = 0; i < b->n_ops; i++) {
    struct mc_op *op = &b->ops[i];
    bool coll = (op->kind != MC_COLL_SEND) && (op->kind != MC_COLL_RECV);
    if (op->comm != comm)
      continue;
    if (coll && (op->sig.seq == theirs->seq))
      return op;
    if (first == NULL)
      first = op;
  }
  return first;
}

/* One collective connection no task of pl receives from: a first step
 * there, of an operation this rank has reached (its number is not beyond
 * the communicator's last one), comes from a peer that made another call
 * (another algorithm, other connections). NET: the step is received only
 * once announced. 1 found (*res, *op_out), 0 nothing. */
static int stray_conn(struct mc_coll_batch *b, const struct mc_coll_plan *pl, struct ncclComm *comm,
                      struct mc_conn *c, bool net_too, ncclResult_t *res, struct mc_op **op_out)
{
  struct mc_coll_sig theirs;
  struct mc_op *op;
  struct mc_task probe;
  size_t sent = 0;
  const void *hdr;

  if ((c == NULL) || (c->ctrl == NULL) || plan_receives_from(pl, comm, c))
    return 0;
  if (c->kind == MC_TOPO_TRANSPORT_NET) {
    if (!net_too)
      return 0;
    mc_conn_recv_expect(c, 1);
  }
  if (!mc_conn_recv_ready(c) || ((hdr = mc_conn_recv_hdr(c)) == NULL))
    return 0;
  memcpy(&theirs, hdr, sizeof(theirs));
  if (!mc_coll_sig_valid(&theirs) || (theirs.kind == MC_COLL_SEND) ||
      (((theirs.flags & MC_SIG_FAILED) == 0) && (theirs.seq > comm->coll.seq)))
    return 0; /* an operation this rank has not reached yet */
  op = batch_op_for(b, comm, &theirs);
  if (op == NULL)
    return 0;
  /* Checked as the first step of that operation would be (it fails: the
   * connection is not one the operation uses). */
  memset(&probe, 0, sizeof(probe));
  probe.op = op;
  probe.rank = comm->rank;
  if (mc_coll_recv_check(&probe, c, &sent, res) >= 0)
    *res = MC_FAIL(ncclInvalidUsage,
                   "Mismatched collectives: rank %d runs %s on other connections than rank %d",
                   comm->rank, mc_coll_name(op->kind), c->peer);
  *op_out = op;
  return 1;
}

/* Every collective connection of the batch's communicators that pl does not use. */
int mc_coll_stray_check(struct mc_coll_batch *b, const struct mc_coll_plan *pl, bool net_too,
                        ncclResult_t *res, struct mc_op **op_out)
{
  for (int i = 0; i < b->n_ops; i++) {
    struct ncclComm *comm = b->ops[i].comm;
    if (!mc_coll_batch_comm_first(b, i) || (comm->n_ranks < 2))
      continue;
    for (int c = 0; (comm->data.channels != NULL) && (c < comm->data.n_channels); c++) {
      struct mc_channel *ch = &comm->data.channels[c];
      if (stray_conn(b, pl, comm, &ch->recv, net_too, res, op_out) ||
          stray_conn(b, pl, comm, &ch->tree_recv_up, net_too, res, op_out))
        return 1;
      for (int k = 0; k < MC_TREE_MAX_ARITY; k++)
        if (stray_conn(b, pl, comm, &ch->tree_recv_down[k], net_too, res, op_out))
          return 1;
    }
    for (int a = 0; a < mc_coll_n_algos; a++) {
      const struct mc_coll_algo_ops *t = mc_coll_algos[a];
      int n = t->conns_stray_checked ? mc_coll_algo_n_conns(comm, t) : 0;
      for (int k = 0; k < n; k++) {
        struct mc_conn *c = t->conn(comm, k);
        if ((c != NULL) && !c->is_send && stray_conn(b, pl, comm, c, net_too, res, op_out))
          return 1;
      }
    }
  }
  return 0;
}

/* ------------------------------------------------------ notices ahead */

/* Step k of c (arrived, not taken yet) is a peer's notice: *n. Sent at a
 * boundary it is a header (the failed call) with the other call as data;
 * sent mid-stream, 64 or 72 bytes of data. A receiver that expected a
 * header where the sender sent none takes the first 32 bytes as the header,
 * and one that expected none takes the header as data: both forms arrive in
 * either shape. */
static bool step_notice(const struct mc_conn *c, uint64_t k, struct mc_coll_notice *n)
{
  const void *hdr = mc_conn_recv_hdr_at(c, k);
  size_t bytes = 0;
  const char *data = mc_conn_recv_data_at(c, k, &bytes);

  if (hdr == NULL)
    return mc_coll_notice_parse(data, bytes, n);
  memcpy(&n->failed, hdr, sizeof(n->failed));
  if (!mc_coll_sig_valid(&n->failed) || ((n->failed.flags & MC_SIG_FAILED) == 0) ||
      (bytes == (size_t)-1) || (bytes < sizeof(n->other)))
    return false;
  memcpy(&n->other, data, sizeof(n->other));
  return mc_coll_sig_valid(&n->other);
}

int mc_coll_notice_scan(struct mc_coll_batch *b, ncclResult_t *res, struct mc_op **op_out)
{
  struct mc_coll_batch_it it = {0};
  struct mc_conn *c;

  while ((c = mc_coll_batch_conn_next(b, &it)) != NULL) {
    uint64_t end;
    if (c->is_send || (c->kind != MC_TOPO_TRANSPORT_NET))
      continue;
    end = mc_conn_recv_arrived(c);
    for (uint64_t k = c->step; k < end; k++) {
      struct mc_coll_notice n;
      struct mc_coll_sig named;
      struct mc_op *op;
      if (!step_notice(c, k, &n) || ((op = batch_op_for(b, it.comm, &n.failed)) == NULL))
        continue;
      *res = mc_coll_notice_fail(&op->sig, &n, &named);
      mc_coll_note_mismatch(op, &named);
      *op_out = op;
      return 1;
    }
  }
  return 0;
}

/* --------------------------------------------------------------- probe */

/*
 * Before the connections that every rank makes at once at first use
 * (one-shot, trees), the operation's signature goes around the ring of
 * channel 0 (n - 1 steps, each a header without data, passing on the one
 * received), and every rank checks every other rank's: a rank never enters
 * that connect, where it would wait for every peer, while a peer made
 * another call. Runs as a task (task_progress); t->fwd is the signature to
 * send next, t->os_sent whether this round's went out.
 */
static int probe_progress(struct mc_task *t, ncclResult_t *res)
{
  struct mc_conn *sc = t->send[0];
  struct mc_conn *rc = t->recv[0];
  int moved = 0;

  while (t->j < t->n_steps) {
    size_t sent = 0;
    if (t->os_sent == 0) {
      if (!mc_conn_send_ready(sc))
        return moved;
      mc_conn_send_hdr(sc, &t->fwd);
      mc_conn_send_commit(sc, NULL, 0);
      t->os_sent = 1;
      t->sent_any = true;
      moved = 1;
    }
    if (rc->kind == MC_TOPO_TRANSPORT_NET)
      mc_conn_recv_expect(rc, 1);
    if (!mc_conn_recv_ready(rc))
      return moved;
    if (mc_coll_recv_check(t, rc, &sent, res) < 0)
      return -1;
    memcpy(&t->fwd, mc_conn_recv_hdr(rc), sizeof(t->fwd));
    mc_conn_recv_release(rc);
    t->os_sent = 0;
    t->j++;
    moved = 1;
  }
  if (!mc_conn_send_drained(sc))
    return moved;
  t->done = true;
  return 1;
}

static void probe_start(struct mc_task *t)
{
  (void)t; /* each round announces its own step */
}

static const struct mc_coll_algo_ops probe_ops = {
    .name = "Probe", /* no number: never chosen, never in a signature */
    .supports = NULL,
    .plan = NULL,
    .task_progress = probe_progress,
    .task_start = probe_start,
};

/* ------------------------------------------------------------- batch */

/* Numbers and signs every operation of the batch that moves data (after
 * the algorithm choice: the signature names it): collectives per
 * communicator, send/recv per pair and direction. An empty one is no
 * operation, as in NCCL (enqueue.cc skips zero-byte collectives), and a
 * rank may make it alone. Then send/recv run in bytes, so that a receive
 * may take a shorter send. */
ncclResult_t mc_coll_batch_sign(struct mc_coll_batch *b)
{
  for (int i = 0; i < b->n_ops; i++) {
    struct mc_op *op = &b->ops[i];
    struct ncclComm *comm = op->comm;
    bool p2p = (op->kind == MC_COLL_SEND) || (op->kind == MC_COLL_RECV);
    uint64_t seq;
    if (!mc_coll_op_runs(op))
      continue;
    if (!p2p) {
      mc_coll_sig_make(op, ++comm->coll.seq, &op->sig);
      continue;
    }
    if (comm->coll.p2p_seq == NULL)
      MC_CHECK(mc_calloc(&comm->coll.p2p_seq, 2 * (size_t)comm->n_ranks));
    seq = ++comm->coll.p2p_seq[2 * op->peer + ((op->kind == MC_COLL_RECV) ? 1 : 0)];
    mc_coll_sig_make(op, seq, &op->sig);
    op->count *= op->esize;
    op->esize = 1;
  }
  return ncclSuccess;
}

/* The probe (above) of every communicator of the batch that is about to
 * make connections at first use with every peer. */
ncclResult_t mc_coll_batch_probe(struct mc_coll_batch *b, struct ncclComm **failed)
{
  struct mc_coll_plan pl;
  ncclResult_t res = ncclSuccess;

  mc_coll_plan_init(&pl);
  for (int i = 0; (i < b->n_ops) && (res == ncclSuccess); i++) {
    struct mc_op *op = &b->ops[i];
    struct ncclComm *comm = op->comm;
    struct mc_task t;
    bool first = true;
    if (!mc_coll_op_needs_first_use(op, true))
      continue;
    for (int k = 0; k < pl.n_tasks; k++)
      first = first && (pl.tasks[k].op->comm != comm);
    if (!first)
      continue;
    mc_coll_task_init(&t, op, &probe_ops);
    t.send[0] = &comm->data.channels[0].send;
    t.recv[0] = &comm->data.channels[0].recv;
    t.n_send = 1;
    t.n_recv = 1;
    t.n_steps = comm->n_ranks - 1;
    t.fwd = op->sig;
    res = mc_coll_plan_add(&pl, &t);
  }
  if ((res == ncclSuccess) && (pl.n_tasks > 0)) {
    mc_coll_batch_proxies(b, +1);
    res = mc_coll_tasks_run(b, &pl, failed);
    mc_coll_batch_proxies(b, -1);
  }
  mc_coll_plan_fini(&pl);
  return res;
}
