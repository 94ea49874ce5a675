/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Collectives on a communicator: one operation as the API received it
 * (checked), and the executor that runs a batch of them (one call, or a
 * whole ncclGroupStart/End) to completion on the calling thread.
 *
 * The algorithm (coll_ring.c: NCCL's ring per channel, chains for
 * broadcast/reduce, point-to-point) turns an operation into a sequence of
 * primitives per channel; the executor (coll_exec.c) runs every channel of
 * every operation of the batch concurrently, each primitive when its
 * connections are ready, so that grouped operations never deadlock.
 */
#ifndef MC_COLL_COLL_H
#define MC_COLL_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/coll_reduce.h"
#include "init/comm.h"
#include "nccl.h"

enum mc_coll_kind {
  MC_COLL_ALLREDUCE = 0,
  MC_COLL_BROADCAST,
  MC_COLL_REDUCE,
  MC_COLL_ALLGATHER,
  MC_COLL_REDUCESCATTER,
  MC_COLL_SEND,
  MC_COLL_RECV
};

struct mc_op {
  enum mc_coll_kind kind;
  struct ncclComm *comm;
  const char *in;
  char *out;
  size_t count; /* elements (per rank for all-gather and reduce-scatter) */
  size_t esize;
  struct mc_redop redop;
  int root; /* broadcast, reduce */
  int peer; /* send, recv */
};

/* NCCL's name of an operation ("AllReduce", "Send", ...). */
const char *mc_coll_name(enum mc_coll_kind kind);

/* Runs ops[0..n-1] (one batch) to completion. On failure every
 * communicator involved is marked failed and its peers are told. */
ncclResult_t mc_coll_run(struct mc_op *ops, int n);

/* Primitives of the SIMPLE protocol (NCCL's prims). */
enum mc_prim_kind {
  MC_PRIM_SEND = 0,              /* in -> next */
  MC_PRIM_RECV,                  /* prev -> out */
  MC_PRIM_COPY_SEND,             /* in -> out, next */
  MC_PRIM_RECV_COPY_SEND,        /* prev -> out, next */
  MC_PRIM_RECV_REDUCE_SEND,      /* prev + in -> next */
  MC_PRIM_RECV_REDUCE_COPY_SEND, /* prev + in -> out, next (final) */
  MC_PRIM_RECV_REDUCE_COPY       /* prev + in -> out (final) */
};

struct mc_prim {
  enum mc_prim_kind kind;
  size_t in_off;  /* elements */
  size_t out_off; /* elements */
  size_t n;       /* elements */
};

/* One operation's share of one channel (or one point-to-point direction). */
struct mc_task {
  struct mc_op *op;
  struct mc_conn *send; /* NULL when the algorithm never sends */
  struct mc_conn *recv;
  char *bounce; /* slot-sized buffer for reads across processes */
  int n_ranks;
  int rank;
  size_t base; /* this channel's part, elements */
  size_t len;
  size_t chunk; /* elements per step at most */
  size_t off;   /* loop offset within the part */
  size_t real;  /* this loop's chunk (all-reduce) */
  int j;        /* step within the loop */
  int n_steps;
  bool done;
  bool oneshot;          /* all-reduce by one-shot exchange (coll_exec.c) */
  bool started;          /* its receive steps were announced (mc_conn_recv_expect) */
  int os_sent;           /* one-shot: peers whose send is posted */
  struct mc_task *after; /* runs once that task is done (same connections) */
};

/* The algorithm: fills t's loop geometry for its operation (coll_ring.c). */
void mc_ring_task_init(struct mc_task *t);
/* The primitive of the current (off, j); false when the task's loops are over. */
bool mc_ring_task_prim(struct mc_task *t, struct mc_prim *p);
/* Advances (off, j) past the current primitive. */
void mc_ring_task_next(struct mc_task *t);

#endif /* MC_COLL_COLL_H */
