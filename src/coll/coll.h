/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Collectives on a communicator: one operation as the API received it
 * (checked), the algorithms, and the executor that runs a batch of
 * operations (one call, or a whole ncclGroupStart/End) to completion on the
 * calling thread.
 *
 * An algorithm (NCCL's ncclAlgo: Ring, Tree, ...) is a const table of
 * functions, struct mc_coll_algo_ops: it cuts an operation into tasks (one
 * per channel, or per direction of a tree channel) and generates each task's
 * primitives; the executor (coll_exec.c) drives every task of every
 * operation of the batch concurrently, each primitive when its connections
 * are ready, so that grouped operations never deadlock. The algorithms
 * are the tables of MC_ALGO_LIST (topo/topo_algo.h), one file each;
 * coll_algo.c chooses one per operation by asking them. Every
 * operation carries a signature (coll_sig.c) in the first step of each
 * connection it uses; the receiver checks it against its own call.
 */
#ifndef MC_COLL_COLL_H
#define MC_COLL_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "coll/coll_reduce.h"
#include "init/comm.h"
#include "init/init_api.h"
#include "init/init_connect.h"
#include "init/init_group.h"
#include "topo/topo_algo.h"
#include "nccl.h"

struct mc_coll_algo_ops;

/*
 * An operation's signature (coll_sig.c), MC_CONN_HDR_BYTES: the header of
 * its first step on every connection. seq numbers the communicator's
 * collectives (1, 2, ...), or a pair's sends (receives) in one direction.
 */
#define MC_SIG_MAGIC        0x5347u /* "GS" */
#define MC_SIG_FAILED       0x01u   /* flags: a notice: the sender stopped on a mismatch */
#define MC_SIG_OP_NONE      0xffu   /* op of a collective without a reduction */
#define MC_SIG_OP_PREMULSUM 0xfeu   /* op: one made by ncclRedOpCreatePreMulSum */
struct mc_coll_sig {
  uint16_t magic;
  uint8_t kind; /* enum mc_coll_kind */
  uint8_t type; /* ncclDataType_t */
  uint8_t op;   /* ncclRedOp_t of the call (sum .. avg), or MC_SIG_OP_* */
  uint8_t algo; /* enum mc_coll_algo */
  uint8_t n_channels;
  uint8_t flags;
  int32_t root; /* broadcast, reduce: the root; send, recv: the peer; else -1 */
  int32_t rank; /* the caller */
  uint64_t seq;
  uint64_t count; /* the call's count (elements of type) */
};

/* What a rank that stopped on a mismatch sends on (the first step of the
 * next operation on a connection, or a step of a size the receiver does not
 * expect): its own call, flagged MC_SIG_FAILED, and the call it found. */
struct mc_coll_notice {
  struct mc_coll_sig failed;
  struct mc_coll_sig other;
};
#define MC_NOTICE_BYTES     64 /* sizeof(struct mc_coll_notice) */
#define MC_NOTICE_BYTES_ALT 72 /* the same, padded, when the receiver expects 64 bytes */

struct mc_op {
  enum mc_coll_kind kind;
  const struct mc_coll_algo_ops *algo; /* chosen by mc_coll_algo_choose */
  struct ncclComm *comm;
  const char *in;
  char *out;
  size_t count; /* elements (per rank for all-gather and reduce-scatter) */
  size_t esize;
  struct mc_redop redop;
  int root;               /* broadcast, reduce */
  int peer;               /* send, recv */
  int n_channels;         /* channels the algorithm runs on, chosen with it (0: all) */
  float est_us;           /* the model's time for it (µs), set with algo; 0 for send/recv */
  int user_op;            /* the ncclRedOp_t of the call (reductions) */
  size_t user_count;      /* the call's count (send/recv run in bytes: count * esize, esize 1) */
  struct mc_coll_sig sig; /* set when the batch starts (mc_coll_run) */
  /* It stopped on a mismatch: what it tells its peers (allocated then,
   * freed with the batch; NULL otherwise, or when memory ran out). */
  struct mc_coll_notice *notice;
};

/* ---------------------------------------------------------- signatures */

/* The signature of op, number seq in its sequence. */
void mc_coll_sig_make(const struct mc_op *op, uint64_t seq, struct mc_coll_sig *out);
/* "AllReduce(count 10, float, sum)", "Broadcast(count 4, int8, root 1)",
 * "Send(count 3, float, to rank 2)". */
void mc_coll_sig_str(const struct mc_coll_sig *s, char *buf, size_t bytes);
/* s looks like a signature (magic, kind, type). */
bool mc_coll_sig_valid(const struct mc_coll_sig *s);
/* Compares theirs (received from its sender) with mine: ncclInvalidUsage
 * naming both calls when they differ; a receive accepts a send that is not
 * larger (NCCL's rule) and gives its size in *sent_bytes_out. */
ncclResult_t mc_coll_sig_check(const struct mc_coll_sig *mine, const struct mc_coll_sig *theirs,
                               size_t *sent_bytes_out);
/* The peer's signature hdr is mine but for the rank: a collective's
 * common case, which mc_coll_recv_check also finds (inline here for the
 * data path). */
static inline bool mc_coll_sig_same(const struct mc_coll_sig *mine, const void *hdr)
{
  struct mc_coll_sig theirs;

  memcpy(&theirs, hdr, sizeof(theirs));
  theirs.rank = mine->rank;
  return memcmp(&theirs, mine, sizeof(theirs)) == 0;
}

/* ncclInvalidUsage: the first step from peer carries no signature. */
ncclResult_t mc_coll_sig_missing(const struct mc_coll_sig *mine, int peer);
/* A received notice (MC_NOTICE_BYTES or _ALT of data), else false. */
bool mc_coll_notice_parse(const void *data, size_t bytes, struct mc_coll_notice *out);
/* ncclInvalidUsage naming mine against the call of the notice that differs
 * from it (which *named_out receives, for this rank's own notices). */
ncclResult_t mc_coll_notice_fail(const struct mc_coll_sig *mine, const struct mc_coll_notice *n,
                                 struct mc_coll_sig *named_out);

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

/* A task talks to at most this many peers in each direction (a tree node:
 * 1 parent + 3 children, NCCL_MAX_TREE_ARITY). */
#define MC_TASK_MAX_PEERS 4

/* One operation's share of one channel (or one direction of a tree channel,
 * or one point-to-point transfer). A primitive that receives takes one step
 * from every recv[] connection; one that sends gives one to every send[]. */
struct mc_task {
  struct mc_op *op;
  const struct mc_coll_algo_ops *algo;
  struct mc_conn *send[MC_TASK_MAX_PEERS];
  struct mc_conn *recv[MC_TASK_MAX_PEERS];
  int n_send;
  int n_recv;
  char *bounce; /* slot-sized buffer for reads across processes */
  int n_ranks;
  int rank;
  const int *ring; /* ring algorithms: the channel's ring order from this rank */
  int ring_ix;     /* ring algorithms: this rank's position counted from rank 0 */
  int role;        /* the algorithm's (tree: MC_TREE_ROLE_*) */
  size_t base;     /* this channel's part, elements */
  size_t len;
  size_t chunk; /* elements per step at most */
  size_t off;   /* loop offset within the part */
  size_t real;  /* this loop's chunk (all-reduce) */
  int j;        /* step within the loop */
  int n_steps;
  bool done;
  bool started;           /* its receive steps were announced (mc_conn_recv_expect) */
  bool sent_any;          /* a step went out (the first carried the signature) */
  bool checked;           /* the signatures of the first received steps matched */
  bool recv_done;         /* took every step it receives: its receive peers may go */
  int os_sent;            /* one-shot: peers whose send is posted */
  struct mc_coll_sig fwd; /* probe: the signature to pass on next */
  struct mc_task *after;  /* runs once that task is done (same connections) */
};

/* The tasks of a batch being planned. */
#define MC_PLAN_STACK_TASKS 16
struct mc_coll_plan {
  struct mc_task *tasks; /* stack_tasks until more are needed */
  int n_tasks;
  int cap;
  struct mc_task stack_tasks[MC_PLAN_STACK_TASKS];
};

void mc_coll_plan_init(struct mc_coll_plan *pl);
void mc_coll_plan_fini(struct mc_coll_plan *pl);
/* Appends a copy of t. */
ncclResult_t mc_coll_plan_add(struct mc_coll_plan *pl, const struct mc_task *t);
/* A task of op run by algo on op's communicator, all of op's elements, the
 * rest zero (a plan's start). */
void mc_coll_task_init(struct mc_task *t, struct mc_op *op, const struct mc_coll_algo_ops *algo);
/* The channels op runs on: its n_channels when set and below the
 * communicator's, else all of them. */
int mc_coll_op_channels(const struct mc_op *op);
/* Channel c's contiguous part of op's elements when they are cut into
 * n_ch equal parts (the last shorter): false when it holds none. */
bool mc_coll_channel_part(const struct mc_op *op, int n_ch, int c, size_t *base_out,
                          size_t *len_out);

/* How the algorithm choice (coll_algo.c) treats an algorithm. */
enum mc_coll_choice {
  MC_CHOICE_MODEL = 0, /* competes in the tuning model (est_us): the fastest allowed one runs */
  MC_CHOICE_FIRST,     /* runs whenever NCCL_ALGO allows it and it supports the operation */
  MC_CHOICE_ONLY       /* the only one for what it supports, whatever NCCL_ALGO says */
};

/*
 * An algorithm (libfabric's provider shape): the whole contract between it
 * and the executor, which names no algorithm. plan and task_prim/task_next
 * are mandatory unless task_progress is set; optional slots are NULL.
 * Adding one: a file with its table and one line in MC_ALGO_LIST
 * (topo/topo_algo.h); docs/design/datapath.md, "Adding an algorithm".
 */
struct mc_coll_algo_ops {
  const char *name; /* NCCL's name ("Ring", "Tree"); NCCL_ALGO matches it */
  enum mc_coll_algo id;
  /* Can it run op (its kind, its communicator's channels)? Same answer on every rank. */
  bool (*supports)(const struct mc_op *op);
  /* How the choice treats it; is_default: the one taken without a model
   * and when no algorithm NCCL_ALGO allows supports the collective (Ring). */
  enum mc_coll_choice choice;
  const char *choice_why; /* MC_CHOICE_FIRST: the reason the log gives */
  /* Optional: why one rank may run it where another runs something else
   * (the mismatch's message; without it: the settings that differ). */
  const char *mismatch_why;
  bool is_default;
  /* Optional (MC_CHOICE_MODEL): the model's time for op moving bytes (its
   * whole buffer, x n_ranks for all-gather / reduce-scatter) in µs, from
   * op->comm->coll.tune; -1 when the model has none. Same answer on every rank. */
  float (*est_us)(const struct mc_coll_algo_ops *a, const struct mc_op *op, size_t bytes);
  /* Cuts op into tasks appended to pl (connections must exist). */
  ncclResult_t (*plan)(struct mc_op *op, struct mc_coll_plan *pl);
  /* The primitive at the task's current (off, j); false when its loops are over. */
  bool (*task_prim)(const struct mc_task *t, struct mc_prim *p);
  /* Advances past the current primitive. */
  void (*task_next)(struct mc_task *t);
  /* Optional: runs the task itself instead of the executor's primitive
   * loop (1 moved, 0 waiting, -1 failed with *res). Such a task owns
   * connections outside send[]/recv[]: tasks of the same connection group
   * (conns_of) and communicator run one after another. */
  int (*task_progress)(struct mc_task *t, ncclResult_t *res);
  /* Optional with task_progress: announces receives (NET), checks connections. */
  void (*task_start)(struct mc_task *t);
  ncclResult_t (*task_health)(const struct mc_task *t);
  /* Optional with task_progress: whether t receives from c outside recv[]. */
  bool (*task_receives_from)(const struct mc_task *t, const struct mc_conn *c);
  /* Optional: the algorithm whose connections (and state) it runs on; NULL:
   * its own (the symmetric all-reduce drives the one-shot's). */
  const struct mc_coll_algo_ops *conns_of;
  /* Optional: its state on a communicator (comm->coll.algo_state[id]), made at
   * the communicator's first collective and freed with its connections
   * (destroy, abort, a failed collective). state_free gets what state_new
   * made (aborted: tell the peers through the connections first). */
  ncclResult_t (*state_new)(struct ncclComm *comm, void **state_out);
  void (*state_free)(struct ncclComm *comm, void *state, bool aborted);
  /* Optional: the connections its state holds, numbered 0 .. n_conns - 1
   * (conn: NULL where that one is not made), which the executor watches,
   * poisons on failure and sends notices on. conns_stray_checked: a first
   * step on one of its receive connections that no task of the batch takes
   * is a peer's other call (collectives numbered per communicator). */
  int (*n_conns)(const struct ncclComm *comm);
  struct mc_conn *(*conn)(struct ncclComm *comm, int i);
  bool conns_stray_checked;
  /* Optional: the connections op still needs, made at first use for the
   * whole batch (NCCL's runtime connect). reqs NULL: *n_out = at most how
   * many; else writes them, each with the heap connection to forget should
   * the batch's connect fail (holders[i], NULL for none), *n_out = how many.
   * first_use_all_peers: every rank makes them at once, asked once per
   * connection group and communicator (and the communicator is probed
   * first, coll_check.c). */
  ncclResult_t (*first_use)(struct mc_op *op, struct mc_conn_req *reqs, struct mc_conn ***holders,
                            int *n_out);
  bool first_use_all_peers;
  /* Optional: the connections first_use asked for on comm were all made. */
  void (*first_use_done)(struct ncclComm *comm);
  /* Optional: the channels an operation of bytes runs on (none: 0). */
  int (*channels_for)(const struct ncclComm *comm, size_t bytes);
  /* On a one-rank communicator an operation is the executor's local copy or
   * reduction (collectives; send/recv to self are matched before). */
  bool local_on_one_rank;
};

/* Every table (MC_ALGO_LIST order), declared here for their own files. */
#define MC_COLL_ALGO_EXTERN_X(_id, _name, _num, _ops, _env)                                        \
  extern const struct mc_coll_algo_ops _ops;
MC_ALGO_LIST(MC_COLL_ALGO_EXTERN_X)
#undef MC_COLL_ALGO_EXTERN_X
extern const struct mc_coll_algo_ops *const mc_coll_algos[];
extern const int mc_coll_n_algos;

/* The table whose connections and state a runs on (a->conns_of, else a). */
static inline const struct mc_coll_algo_ops *mc_coll_conn_group(const struct mc_coll_algo_ops *a)
{
  return (a->conns_of != NULL) ? a->conns_of : a;
}
/* a's state on comm (of its connection group): NULL before the
 * communicator's first collective or when the table has none. */
static inline void *mc_coll_algo_state(const struct ncclComm *comm,
                                       const struct mc_coll_algo_ops *a)
{
  return comm->coll.algo_state[mc_coll_conn_group(a)->id];
}
/* How many connections a's state on comm holds (its n_conns; 0 before its state is made). */
static inline int mc_coll_algo_n_conns(const struct ncclComm *comm,
                                       const struct mc_coll_algo_ops *a)
{
  if ((a->n_conns == NULL) || ((a->state_new != NULL) && (comm->coll.algo_state[a->id] == NULL)))
    return 0;
  return a->n_conns(comm);
}
/* Makes every table's state on comm that is not made yet (coll_algo.c). */
ncclResult_t mc_coll_algo_states_new(struct ncclComm *comm);
/* The tuning model's function for a collective (enum mc_tune_func), and
 * the est_us of the algorithms NCCL's own table times (Tree, Ring): that
 * table's time for op moving bytes, at a's number (NCCL's NCCL_ALGO_*). */
int mc_coll_tune_func(enum mc_coll_kind kind);
float mc_coll_nccl_model_time(const struct mc_coll_algo_ops *a, const struct mc_op *op,
                              size_t bytes);

/* The executor's view of a connection's health for t (coll_live.c): a
 * failure posted on it, or its peer's process gone (ncclRemoteError); a
 * peer that stopped on a mismatch and said so (ncclInvalidUsage naming it).
 * A receive connection of a task that took every step it receives
 * (t->recv_done) is healthy whatever its peer does: that peer finished. */
ncclResult_t mc_coll_conn_health(const struct mc_task *t, const struct mc_conn *c);
/* The first step of t's operation from c has arrived: checks the signature
 * in its header (or the notice it is) against t's operation. 1: it matches
 * (*sent_bytes_out: the size of the sender's call); -1: *res is the error
 * (ncclInvalidUsage naming both calls; the communicator records the pair). */
int mc_coll_recv_check(struct mc_task *t, struct mc_conn *c, size_t *sent_bytes_out,
                       ncclResult_t *res);

/* Chooses op->algo and sets op->est_us (coll_algo.c). The same answer on every rank: it
 * depends only on the call, the communicator and NCCL_ALGO / NCCL_PROTO.
 * Logs the choice at INFO TUNING. */
ncclResult_t mc_coll_algo_choose(struct mc_op *op);

/* One-shot all-reduce (coll_oneshot.c): its slot size, and its
 * connections (a send and a receive one with every peer, NULL before the
 * first one-shot collective), which the symmetric all-reduce shares: the
 * inputs of one reduction ([n_ranks]), its table's first_use and
 * task_receives_from, its announcements of receive steps from every peer
 * (NET connections) and its health check. */
size_t mc_coll_oneshot_slot_bytes(const struct ncclComm *comm);
struct mc_conn *mc_coll_os_send(const struct ncclComm *comm, int peer);
struct mc_conn *mc_coll_os_recv(const struct ncclComm *comm, int peer);
const void **mc_coll_os_srcs(const struct ncclComm *comm);
ncclResult_t mc_coll_oneshot_first_use(struct mc_op *op, struct mc_conn_req *reqs,
                                       struct mc_conn ***holders, int *n_out);
bool mc_coll_oneshot_receives_from(const struct mc_task *t, const struct mc_conn *c);
void mc_coll_os_expect(struct mc_task *t, uint64_t steps);
ncclResult_t mc_coll_os_health(const struct mc_task *t);
/* The channels an operation of bytes runs on when a channel earns its place
 * with per bytes (coll_algo.c; the algorithms' channels_for). */
int mc_coll_channels_for_slots(const struct ncclComm *comm, size_t bytes, size_t per);

/* Elements per step on comm's ring connections. */
size_t mc_coll_chunk_elems(const struct ncclComm *comm, size_t esize);

/* ---------------------------------------------------- NCCL_ALGO / NCCL_PROTO */

/* Tree shapes (NCCL's ncclGetBtree / ncclGetDtree) come from the topology's
 * connection stage: mc_topo_btree / mc_topo_dtree in topo/topo_graph.h. */
enum mc_tree_role {
  MC_TREE_ROLE_ROOT = 0, /* receives from the children, reduces, sends back down */
  MC_TREE_ROLE_UP,       /* reduce: children (if any) -> parent */
  MC_TREE_ROLE_DOWN      /* broadcast: parent -> children (if any) */
};

#endif /* MC_COLL_COLL_H */
