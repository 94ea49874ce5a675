/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to src/coll: the executor's batch of operations, shared by
 * coll_exec.c, which runs it, and coll_check.c, which checks its
 * signatures (first steps, notices, stray steps, the probe before a
 * runtime connect).
 */
#ifndef MC_COLL_COLL_INT_H
#define MC_COLL_COLL_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "coll/coll.h"

/* One call's operations, or a whole group's, and their tasks. */
struct mc_coll_batch {
  struct mc_op *ops;
  int n_ops;
  struct mc_coll_plan pl;
};

/* Does a primitive of kind k take a step from its receive connections? */
static inline bool mc_prim_recvs(enum mc_prim_kind k)
{
  return (k != MC_PRIM_SEND) && (k != MC_PRIM_COPY_SEND);
}

/* Does it give one to its send connections? */
static inline bool mc_prim_sends(enum mc_prim_kind k)
{
  return (k != MC_PRIM_RECV) && (k != MC_PRIM_RECV_REDUCE_COPY);
}

/* ------------------------------------------------------- coll_exec.c */

/* The operation moves data between ranks (the others run locally or not at all). */
bool mc_coll_op_runs(const struct mc_op *op);
/* Op i of b is the first of the batch on its communicator (per-communicator
 * work is done once). */
bool mc_coll_batch_comm_first(const struct mc_coll_batch *b, int i);
/* Walks the connections of the batch's communicators, each communicator
 * once: start with it = {0}; NULL after the last. it->comm is the
 * connection's communicator. */
struct mc_coll_batch_it {
  int op;
  int conn;
  struct ncclComm *comm;
};
struct mc_conn *mc_coll_batch_conn_next(struct mc_coll_batch *b, struct mc_coll_batch_it *it);
/* The NET proxies of the batch's communicators: a collective starts (+1) or ends (-1). */
void mc_coll_batch_proxies(struct mc_coll_batch *b, int delta);
/* Runs pl's tasks (of b's operations) to completion: spin, yield, sleep;
 * every few ms the connections' and the peers' health and stray steps.
 * On failure *failed_out is the communicator it happened on. On the calling
 * thread, or shared among the communicator's threads (coll_workers.c) when
 * it has several (comm->data.n_threads). */
ncclResult_t mc_coll_tasks_run(struct mc_coll_batch *b, struct mc_coll_plan *pl,
                               struct ncclComm **failed_out);
/* What the threads running one batch share (coll_workers.c): the first
 * failure (stop, atomic, then res, failed and why: written by the thread
 * that set stop, read once every thread is done), and a lock that makes
 * their liveness checks take turns, so that a failure they all see (a dead
 * peer, an abort) is reported by one. */
struct mc_coll_share {
  int stop;
  pthread_mutex_t lock;
  ncclResult_t res;
  struct ncclComm *failed;
  char why[MC_LAST_ERROR_BYTES];
};
/* Records res (on failed) as the batch's failure unless one is already:
 * sets stop, and copies the calling thread's last error. */
void mc_coll_share_fail(struct mc_coll_share *sh, ncclResult_t res, struct ncclComm *failed);

/* The scheduler loop of one thread over pl's tasks (mc_coll_tasks_run's):
 * all is the batch's whole plan, whose stray steps and notices this thread
 * watches (NULL: another thread does). sh (NULL: the batch runs on this
 * thread alone): its failure is recorded there, and once another thread
 * recorded one the loop ends at its next pass with ncclSuccess. */
ncclResult_t mc_coll_tasks_loop(struct mc_coll_batch *b, struct mc_coll_plan *pl,
                                const struct mc_coll_plan *all, struct mc_coll_share *sh,
                                struct ncclComm **failed_out);
/* Sets every task's after: the last earlier task on any of its connections
 * (or of its connection group, for tasks that drive their own). */
void mc_coll_plan_link(struct mc_coll_plan *pl);
/* A task of pl uses a NET connection. */
bool mc_coll_plan_net(const struct mc_coll_plan *pl);

/* ------------------------------------------------------- coll_workers.c */

/* Runs pl's tasks on k threads of b's one communicator: channel c's on
 * thread c % k (the calling thread is thread 0, with every task of no
 * channel: point-to-point, one-shot, symmetric), each the scheduler loop
 * over its own; returns when all are done. The first error fails the batch
 * (*failed_out, the calling thread's last error); the other threads stop at
 * their next pass. The workers are the communicator's, started at its
 * first such batch, parked between batches. */
ncclResult_t mc_coll_workers_run(struct mc_coll_batch *b, struct mc_coll_plan *pl, int k,
                                 struct ncclComm **failed_out);
/* Stops and joins comm's workers (comm->coll.workers_free; none running a batch). */
void mc_coll_workers_free(struct ncclComm *comm);

/* ------------------------------------------------------- coll_connect.c */

/* Its algorithm still has connections to make at first use (all_peers:
 * ones with every peer at once; the algorithm's table says which). */
bool mc_coll_op_needs_first_use(const struct mc_op *op, bool all_peers);
/* Makes the connections the batch's operations need at first use (NCCL's
 * runtime connect); none kept on failure (*failed: the communicator). */
ncclResult_t mc_coll_runtime_connect(struct mc_coll_batch *b, struct ncclComm **failed);

/* ------------------------------------------------------------ coll_p2p.c */

/* Sends to self matched with receives from self (the k-th with the k-th),
 * copied, and taken out of the batch; an unmatched one is ncclInvalidUsage. */
ncclResult_t mc_coll_p2p_self(struct mc_coll_batch *b);

/* ----------------------------------------------------------- coll_prim.c */

/* Copies bytes from src into dst, in op's output: with streaming stores when
 * op is out of place, its output is at least the communicator's
 * stream_out_bytes (the L2 of one core, mc_tp_decide_stream_out), so not in
 * this core's cache anyway, and the copy is at least 64 KiB; streaming
 * stores skip the read-for-ownership of every line (out-of-place all-reduce
 * of 2 ranks, 1-64 MiB: 4.5 -> 5.1 GB/s busbw). In place the lines are
 * cached already, and there it costs. */
void mc_coll_copy_out(const struct mc_op *op, void *dst, const void *src, size_t bytes);

/* Runs t's primitives while its connections are ready: 1 when something
 * moved, 0 when it waits, -1 when it failed (*res). */
int mc_coll_task_progress(struct mc_task *t, ncclResult_t *res);

/* ----------------------------------------------------------- coll_live.c */

/* Every few ms of a wait (now; waited_s of nothing moving): a failure of
 * pl's tasks, connections or peers (check_stopped: look at same-host
 * peers' processes too), a mismatch notice, a stray step; *net_down_at /
 * *down_waited_s keep when a NET connection's failure was first seen and how
 * long nothing had moved then. *failed: the communicator it concerns. The
 * notices and stray steps are looked for only with all (the batch's whole
 * plan: one thread of a batch run on several does). */
ncclResult_t mc_coll_health(struct mc_coll_batch *b, struct mc_coll_plan *pl,
                            const struct mc_coll_plan *all, double now, double waited_s,
                            bool check_stopped, double *net_down_at, double *down_waited_s,
                            struct ncclComm **failed);
/* A proxy thread of the batch has been inside one plugin call for limit_ns:
 * the rank abandons it and fails the collective (tp_net.c). */
ncclResult_t mc_coll_proxies_wedged(struct mc_coll_batch *b, uint64_t limit_ns,
                                    struct ncclComm **failed);
/* comm failed (res): its peers are told through every connection, its
 * network connections closed, further operations refused. */
void mc_coll_comm_fail(struct ncclComm *comm, ncclResult_t res);
/* The connections of comm, numbered 0 .. mc_coll_comm_conns(comm) - 1: each
 * channel's (ring, tree up, tree down; send before receive), then each
 * algorithm table's own (its n_conns / conn). mc_coll_comm_conn: NULL where that one
 * is not connected. */
int mc_coll_comm_conns(const struct ncclComm *comm);
struct mc_conn *mc_coll_comm_conn(struct ncclComm *comm, int i);
/* How many of those are the channels' (the algorithms' own follow). */
int mc_coll_comm_channel_conns(const struct ncclComm *comm);

/* ------------------------------------------------------ coll_check.c */

/* op stopped on a mismatch with the call named: what it tells its peers. */
void mc_coll_note_mismatch(struct mc_op *op, const struct mc_coll_sig *named);
/* A step of got bytes at src from c is a peer's notice: true, *res names the mismatch. */
bool mc_coll_notice_recv(struct mc_task *t, const struct mc_conn *c, const char *src, size_t got,
                         ncclResult_t *res);
/* Numbers and signs the batch's operations (after the algorithm choice);
 * send/recv then run in bytes. */
ncclResult_t mc_coll_batch_sign(struct mc_coll_batch *b);
/* The probe of every communicator of b about to connect with every peer at
 * first use (one-shot, trees). */
ncclResult_t mc_coll_batch_probe(struct mc_coll_batch *b, struct ncclComm **failed_out);
/* A first step of a running operation on a collective connection that pl
 * does not receive from (NET ones when net_too): 1 with *res and the
 * operation in *op_out, else 0. */
int mc_coll_stray_check(struct mc_coll_batch *b, const struct mc_coll_plan *pl, bool net_too,
                        ncclResult_t *res, struct mc_op **op_out);
/* A peer's notice among the steps that arrived on the NET receive
 * connections of b's communicators and that no task took yet (a task that
 * waits to send does not take them): 1 with *res naming the mismatch and
 * the operation in *op_out, else 0. */
int mc_coll_notice_scan(struct mc_coll_batch *b, ncclResult_t *res, struct mc_op **op_out);
/* comm stopped on the mismatch n: tells every peer through every connection. */
void mc_coll_notices_send(const struct mc_coll_plan *pl, struct ncclComm *comm,
                          const struct mc_coll_notice *n);

#endif /* MC_COLL_COLL_INT_H */
