/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The collective API of nccl.h: NCCL's argument checks (ArgsCheck in
 * enqueue.cc) with its error codes and a message naming the argument, then
 * either the operation runs at once or, inside ncclGroupStart/End, it is
 * queued and the whole group runs at the outermost ncclGroupEnd (after the
 * communicator inits of the group). The stream argument is accepted and not
 * used: host memory, completed when the call (or the group) returns.
 *
 * With NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL every call that passed its
 * checks logs NCCL's line (enqueue.cc, ncclEnqueueCheck): name, opCount,
 * buffers, count, datatype, op, root (the peer for Send/Recv), comm, nranks
 * and stream, with NCCL's values (Send logs its buffer as recvbuff, as NCCL
 * does). opCount advances once per launched operation or group, as NCCL's
 * comm->opCount (proxy.cc, ncclProxyStart).
 */
#include "coll/coll.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "log.h"

/* Numbers the batches run_and_release runs, process-wide (atomic). */
static uint64_t launch_seq;

/* Operations queued by this thread's open group. */
static __thread struct mc_op *group_ops;
static __thread int group_n_ops;
static __thread int group_cap_ops;
static __thread ncclResult_t group_coll_error;
static __thread uint64_t group_destroyed; /* mc_comm_destroyed_count at the outer ncclGroupStart */

/* --------------------------------------------------------------- redops */

static ncclResult_t resolve_op(struct ncclComm *comm, ncclDataType_t type, ncclRedOp_t op,
                               const char *call, struct mc_redop *out)
{
  int idx = (int)op - (int)ncclNumOps;

  if ((int)op >= 0 && op < ncclNumOps)
    return mc_redop_builtin(type, op, comm->n_ranks, out);
  pthread_mutex_lock(&comm->coll.redop_lock);
  if ((idx < 0) || (idx >= comm->coll.n_redops) || !comm->coll.redops[idx].used) {
    pthread_mutex_unlock(&comm->coll.redop_lock);
    return MC_FAIL(ncclInvalidArgument, "%s : invalid reduction operation %d", call, (int)op);
  }
  if (comm->coll.redops[idx].type != type) {
    ncclDataType_t t = comm->coll.redops[idx].type;
    pthread_mutex_unlock(&comm->coll.redop_lock);
    return MC_FAIL(ncclInvalidArgument,
                   "%s : reduction operation %d was created for type %s, used with %s", call,
                   (int)op, mc_type_name(t), mc_type_name(type));
  }
  *out = (struct mc_redop){
      .type = type, .kind = MC_RED_PREMULSUM, .scalar = comm->coll.redops[idx].scalar};
  pthread_mutex_unlock(&comm->coll.redop_lock);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t *op, void *scalar,
         ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm)
{
  struct mc_redop r;
  int idx = -1;

  mc_api_enter();
  MC_CHECK(mc_comm_ready(comm, "ncclRedOpCreatePreMulSum"));
  if ((op == NULL) || (scalar == NULL))
    return MC_FAIL(ncclInvalidArgument, "ncclRedOpCreatePreMulSum : %s argument is NULL",
                   (op == NULL) ? "op" : "scalar");
  if ((residence != ncclScalarDevice) && (residence != ncclScalarHostImmediate))
    return MC_FAIL(ncclInvalidArgument, "ncclRedOpCreatePreMulSum : invalid residence %d",
                   (int)residence);
  if (mc_redop_premulsum(datatype, scalar, &r) != ncclSuccess)
    return MC_FAIL(ncclInvalidArgument, "ncclRedOpCreatePreMulSum : invalid type %d",
                   (int)datatype);
  pthread_mutex_lock(&comm->coll.redop_lock);
  for (int i = 0; (i < comm->coll.n_redops) && (idx < 0); i++)
    if (!comm->coll.redops[i].used)
      idx = i;
  if (idx < 0) {
    struct mc_user_redop *n =
        realloc(comm->coll.redops, (size_t)(comm->coll.n_redops + 8) * sizeof(*comm->coll.redops));
    if (n == NULL) {
      pthread_mutex_unlock(&comm->coll.redop_lock);
      return MC_FAIL(ncclSystemError, "ncclRedOpCreatePreMulSum : out of memory");
    }
    memset(n + comm->coll.n_redops, 0, 8 * sizeof(*n));
    comm->coll.redops = n;
    idx = comm->coll.n_redops;
    comm->coll.n_redops += 8;
  }
  comm->coll.redops[idx] =
      (struct mc_user_redop){.used = true, .type = datatype, .scalar = r.scalar};
  pthread_mutex_unlock(&comm->coll.redop_lock);
  *op = (ncclRedOp_t)((int)ncclNumOps + idx);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm);
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm)
{
  int idx = (int)op - (int)ncclNumOps;

  mc_api_enter();
  MC_CHECK(mc_comm_check(comm, "ncclRedOpDestroy"));
  if ((int)op >= 0 && op < ncclNumOps)
    return MC_FAIL(ncclInvalidArgument, "ncclRedOpDestroy : operation %d is a built-in operation",
                   (int)op);
  pthread_mutex_lock(&comm->coll.redop_lock);
  if ((idx < 0) || (idx >= comm->coll.n_redops) || !comm->coll.redops[idx].used) {
    pthread_mutex_unlock(&comm->coll.redop_lock);
    return MC_FAIL(ncclInvalidArgument,
                   "ncclRedOpDestroy : operation %d was not created on this communicator", (int)op);
  }
  comm->coll.redops[idx].used = false;
  pthread_mutex_unlock(&comm->coll.redop_lock);
  return ncclSuccess;
}

/* ---------------------------------------------------------------- logging */

/* NCCL's op field for calls without a reduction. */
#define NO_OP ((int)ncclSum)

static void log_call_line(const char *name, const void *sendbuff, const void *recvbuff,
                          size_t count, ncclDataType_t type, int op, int root,
                          const struct ncclComm *comm, cudaStream_t stream)
{
  MC_INFO(MC_SUB_COLL,
          "%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p "
          "[nranks=%d] stream %p",
          name, (unsigned long)comm->coll.op_count, sendbuff, recvbuff, count, (int)type, op, root,
          (const void *)comm, comm->n_ranks, (void *)stream);
}

/* The line costs one branch when NCCL_DEBUG_SUBSYS leaves COLL out. */
#define LOG_CALL(...)                                                                              \
  do {                                                                                             \
    if (MC_INFO_ON(MC_SUB_COLL))                                                                   \
      log_call_line(__VA_ARGS__);                                                                  \
  } while (0)

/* ---------------------------------------------------------------- enqueue */

/* A failed check inside a group also fails the group's ncclGroupEnd. */
#define COLL_CHECK(_call)                                                                          \
  do {                                                                                             \
    ncclResult_t _r = (_call);                                                                     \
    if (_r != ncclSuccess) {                                                                       \
      if (mc_group_depth() > 0)                                                                    \
        group_coll_error = _r;                                                                     \
      return _r;                                                                                   \
    }                                                                                              \
  } while (0)

/* The end of a collective call that entered comm (mc_comm_enter): a failure
 * inside a group also fails the group's ncclGroupEnd. */
static ncclResult_t coll_leave(struct ncclComm *comm, ncclResult_t res)
{
  mc_comm_leave(comm);
  if ((res != ncclSuccess) && (mc_group_depth() > 0))
    group_coll_error = res;
  return res;
}

/* Runs ops (each held once by this thread, mc_comm_hold) and releases
 * them. coll.running drops last: ncclCommRevoke on another thread waits
 * for it (ncclCommAbort waits for the communicator's users, mc_comm_enter). */
static ncclResult_t run_and_release(struct mc_op *ops, int n)
{
  ncclResult_t res;
  uint64_t launch;

  for (int i = 0; i < n; i++)
    __atomic_add_fetch(&ops[i].comm->coll.running, 1, __ATOMIC_ACQ_REL);
  res = mc_coll_run(ops, n);
  /* One launch per communicator, as ncclProxyStart counts: each communicator
   * of the batch advances once (a process-wide launch number tells the
   * batch's first operation on it from the others). */
  launch = __atomic_add_fetch(&launch_seq, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < n; i++) {
    if (ops[i].comm->coll.op_count_launch != launch) {
      ops[i].comm->coll.op_count_launch = launch;
      ops[i].comm->coll.op_count++;
    }
  }
  for (int i = 0; i < n; i++)
    mc_comm_release(ops[i].comm);
  for (int i = 0; i < n; i++)
    __atomic_sub_fetch(&ops[i].comm->coll.running, 1, __ATOMIC_ACQ_REL);
  return res;
}

/* Queued operations whose communicator was aborted meanwhile (by another
 * thread) fail the group before anything runs (their use keeps the memory:
 * mc_comm_ref); while no communicator was destroyed since they were
 * checked, they are live. */
static ncclResult_t group_comms_live(const struct mc_op *ops, int n)
{
  if (mc_comm_destroyed_count() == group_destroyed)
    return ncclSuccess;
  for (int i = 0; i < n; i++)
    MC_CHECK(mc_comm_check(ops[i].comm, "ncclGroupEnd"));
  return ncclSuccess;
}

/* Releases the holds of queued operations. */
static void group_release(struct mc_op *ops, int n)
{
  for (int i = 0; i < n; i++)
    mc_comm_release(ops[i].comm);
}

/* Ends the uses the group's queued operations took (mc_comm_ref in enqueue),
 * after they ran or were dropped: the last use of an aborted communicator
 * frees it. */
static void group_leave(struct mc_op *ops, int n)
{
  for (int i = 0; i < n; i++)
    mc_comm_leave(ops[i].comm);
}

/* Runs op (of the API call `call`) now, or queues it in the open group
 * (where it holds its communicator until the group ends). */
static ncclResult_t enqueue(const struct mc_op *op, const char *call)
{
  ncclResult_t res = mc_comm_hold(op->comm, call);

  if (res != ncclSuccess) {
    if (mc_group_depth() > 0)
      group_coll_error = res;
    return res;
  }
  if (mc_group_depth() == 0) {
    struct mc_op one = *op;
    return run_and_release(&one, 1);
  }
  if (group_n_ops == group_cap_ops) {
    int cap = (group_cap_ops == 0) ? 16 : 2 * group_cap_ops;
    struct mc_op *n = realloc(group_ops, (size_t)cap * sizeof(*n));
    if (n == NULL) {
      mc_comm_release(op->comm);
      group_coll_error = ncclSystemError;
      return MC_FAIL(ncclSystemError, "%s : out of memory queuing the operation in the group",
                     mc_coll_name(op->kind));
    }
    group_ops = n;
    group_cap_ops = cap;
  }
  group_ops[group_n_ops++] = *op;
  mc_comm_ref(op->comm); /* until the group ends (group_leave) */
  return ncclSuccess;
}

/* NCCL's ArgsCheck. */
static ncclResult_t check(struct mc_op *op, ncclComm_t comm, ncclDataType_t type, const char *call,
                          bool needs_in, bool needs_out)
{
  ncclResult_t res;

  MC_CHECK(mc_comm_ready(comm, call));
  MC_CHECK(mc_comm_usable(comm, call));
  res = (ncclResult_t)__atomic_load_n(&comm->coll.result, __ATOMIC_ACQUIRE);
  if (res != ncclSuccess)
    return MC_FAIL(res, "%s : communicator %p failed earlier: %s", call, (void *)comm,
                   comm->last_error);
  op->comm = comm;
  if (((int)type < 0) || (type >= ncclNumTypes) || (mc_type_size(type) == 0))
    return MC_FAIL(ncclInvalidArgument, "%s : invalid type %d", call, (int)type);
  op->esize = mc_type_size(type);
  op->redop.type = type;
  if ((op->count > 0) && needs_in && (op->in == NULL))
    return MC_FAIL(ncclInvalidArgument, "%s : sendbuff argument is NULL", call);
  if ((op->count > 0) && needs_out && (op->out == NULL))
    return MC_FAIL(ncclInvalidArgument, "%s : recvbuff argument is NULL", call);
  if (op->count > (SIZE_MAX / 2) / op->esize / (size_t)comm->n_ranks)
    return MC_FAIL(ncclInvalidArgument, "%s : count %zu is too large", call, op->count);
  return ncclSuccess;
}

static ncclResult_t check_root(int root, ncclComm_t comm, const char *call)
{
  if ((root < 0) || (root >= comm->n_ranks))
    return MC_FAIL(ncclInvalidArgument, "%s : invalid root %d (root should be in the 0..%d range)",
                   call, root, comm->n_ranks - 1);
  return ncclSuccess;
}

static ncclResult_t reduce_check(struct mc_op *op, ncclComm_t comm, ncclDataType_t type,
                                 ncclRedOp_t red, const char *call, bool needs_out)
{
  COLL_CHECK(check(op, comm, type, call, true, needs_out));
  op->user_op = (((int)red >= 0) && (red < ncclNumOps)) ? (int)red : (int)MC_SIG_OP_PREMULSUM;
  return resolve_op(comm, type, red, call, &op->redop);
}

static ncclResult_t check_peer(int peer, ncclComm_t comm, const char *call)
{
  if ((peer < 0) || (peer >= comm->n_ranks))
    return MC_FAIL(ncclInvalidArgument, "%s : invalid peer %d (peer should be in the 0..%d range)",
                   call, peer, comm->n_ranks - 1);
  return ncclSuccess;
}

/* How one collective call of the API checks its arguments and runs (coll_call). */
enum coll_target { TARGET_NONE, TARGET_ROOT, TARGET_PEER };
enum coll_at { AT_NONE, AT_ALL, AT_ROOT }; /* the ranks that pass the buffer */
enum lowered { LOWER_NONE, LOWER_ALLTOALL, LOWER_GATHER, LOWER_SCATTER };

struct coll_call {
  const char *name;        /* "AllReduce": NCCL's word in messages and the COLL line */
  enum coll_target target; /* o->root or o->peer, checked first */
  bool reduces;            /* takes an ncclRedOp_t */
  enum coll_at in_at;      /* sendbuff */
  enum coll_at out_at;     /* recvbuff */
  enum lowered lowered;    /* LOWER_NONE: one operation; else lower_to_p2p's transfers */
};

static ncclResult_t lower_to_p2p(const struct mc_op *tmpl, enum lowered what, int root,
                                 const char *call);

static bool passes_buf(enum coll_at at, const struct mc_op *o, const struct ncclComm *comm)
{
  return (at == AT_ALL) || ((at == AT_ROOT) && (comm->rank == o->root));
}

/* One call: NCCL's checks in its order (root or peer, then ArgsCheck), its
 * COLL line, then the operation runs or joins the open group. o holds the
 * kind, buffers, count and root or peer. */
static ncclResult_t coll_call(struct mc_op *o, ncclComm_t comm, ncclDataType_t type,
                              ncclRedOp_t red, const struct coll_call *call, cudaStream_t stream)
{
  const char *name = call->name;
  ncclResult_t res = ncclSuccess;

  mc_api_enter();
  COLL_CHECK(mc_comm_enter(comm, name));
  if (call->target == TARGET_ROOT)
    res = check_root(o->root, comm, name);
  else if (call->target == TARGET_PEER)
    res = check_peer(o->peer, comm, name);
  if ((res == ncclSuccess) && call->reduces)
    res = reduce_check(o, comm, type, red, name, passes_buf(call->out_at, o, comm));
  else if (res == ncclSuccess)
    res = check(o, comm, type, name, passes_buf(call->in_at, o, comm),
                passes_buf(call->out_at, o, comm));
  /* Block p goes out to rank p while block p from rank p lands on it: the
   * point-to-point lowering (NCCL's too) has no in-place variant. */
  if ((res == ncclSuccess) && (call->lowered == LOWER_ALLTOALL) && (o->count > 0) &&
      (comm->n_ranks > 1) && (o->in == (const char *)o->out))
    res = MC_FAIL(ncclInvalidArgument,
                  "AlltoAll : sendbuff and recvbuff are both %p: in-place AlltoAll is not "
                  "supported, use a separate recvbuff",
                  (void *)o->out);
  if (res != ncclSuccess)
    return coll_leave(comm, res);
  if (call->target == TARGET_PEER) /* Send's buffer too is logged as recvbuff, as NCCL does */
    LOG_CALL(name, NULL, (o->kind == MC_COLL_SEND) ? (const void *)o->in : (const void *)o->out,
             o->count, type, NO_OP, o->peer, comm, stream);
  else
    LOG_CALL(name, o->in, o->out, o->count, type, call->reduces ? (int)red : NO_OP, o->root, comm,
             stream);
  if (call->lowered == LOWER_NONE)
    res = enqueue(o, name);
  else
    res = lower_to_p2p(o, call->lowered, o->root, name);
  return coll_leave(comm, res);
}

/* Gather's recvbuff is used at the root only (in place: sendbuff ==
 * recvbuff + root * count), Scatter's sendbuff likewise. */
#define ALL_BUFS .in_at = AT_ALL, .out_at = AT_ALL
static const struct coll_call call_allreduce = {.name = "AllReduce", .reduces = true, ALL_BUFS};
static const struct coll_call call_broadcast = {
    .name = "Broadcast", .target = TARGET_ROOT, .in_at = AT_ROOT, .out_at = AT_ALL};
static const struct coll_call call_reduce = {
    .name = "Reduce", .target = TARGET_ROOT, .reduces = true, .in_at = AT_ALL, .out_at = AT_ROOT};
static const struct coll_call call_allgather = {.name = "AllGather", ALL_BUFS};
static const struct coll_call call_reducescatter = {
    .name = "ReduceScatter", .reduces = true, ALL_BUFS};
static const struct coll_call call_send = {.name = "Send", .target = TARGET_PEER, .in_at = AT_ALL};
static const struct coll_call call_recv = {.name = "Recv", .target = TARGET_PEER, .out_at = AT_ALL};
static const struct coll_call call_alltoall = {
    .name = "AlltoAll", .lowered = LOWER_ALLTOALL, ALL_BUFS};
static const struct coll_call call_gather = {.name = "Gather",
                                             .target = TARGET_ROOT,
                                             .in_at = AT_ALL,
                                             .out_at = AT_ROOT,
                                             .lowered = LOWER_GATHER};
static const struct coll_call call_scatter = {.name = "Scatter",
                                              .target = TARGET_ROOT,
                                              .in_at = AT_ROOT,
                                              .out_at = AT_ALL,
                                              .lowered = LOWER_SCATTER};
#undef ALL_BUFS

NCCL_API(ncclResult_t, ncclAllReduce, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
  struct mc_op o = {.kind = MC_COLL_ALLREDUCE, .in = sendbuff, .out = recvbuff, .count = count};

  return coll_call(&o, comm, datatype, op, &call_allreduce, stream);
}

NCCL_API(ncclResult_t, ncclBroadcast, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
  struct mc_op o = {
      .kind = MC_COLL_BROADCAST, .in = sendbuff, .out = recvbuff, .count = count, .root = root};

  return coll_call(&o, comm, datatype, ncclSum, &call_broadcast, stream);
}

NCCL_API(ncclResult_t, ncclBcast, void *buff, size_t count, ncclDataType_t datatype, int root,
         ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream)
{
  return ncclBroadcast(buff, buff, count, datatype, root, comm, stream);
}

NCCL_API(ncclResult_t, ncclReduce, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
  struct mc_op o = {
      .kind = MC_COLL_REDUCE, .in = sendbuff, .out = recvbuff, .count = count, .root = root};

  return coll_call(&o, comm, datatype, op, &call_reduce, stream);
}

NCCL_API(ncclResult_t, ncclAllGather, const void *sendbuff, void *recvbuff, size_t sendcount,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
  struct mc_op o = {.kind = MC_COLL_ALLGATHER, .in = sendbuff, .out = recvbuff, .count = sendcount};

  return coll_call(&o, comm, datatype, ncclSum, &call_allgather, stream);
}

NCCL_API(ncclResult_t, ncclReduceScatter, const void *sendbuff, void *recvbuff, size_t recvcount,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
  struct mc_op o = {
      .kind = MC_COLL_REDUCESCATTER, .in = sendbuff, .out = recvbuff, .count = recvcount};

  return coll_call(&o, comm, datatype, op, &call_reducescatter, stream);
}

NCCL_API(ncclResult_t, ncclSend, const void *sendbuff, size_t count, ncclDataType_t datatype,
         int peer, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
  struct mc_op o = {.kind = MC_COLL_SEND, .in = sendbuff, .count = count, .peer = peer};

  return coll_call(&o, comm, datatype, ncclSum, &call_send, stream);
}

NCCL_API(ncclResult_t, ncclRecv, void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
  struct mc_op o = {.kind = MC_COLL_RECV, .out = recvbuff, .count = count, .peer = peer};

  return coll_call(&o, comm, datatype, ncclSum, &call_recv, stream);
}

/* ------------------------------------------- alltoall, gather, scatter */

/*
 * NCCL 2.28's AlltoAll, Gather and Scatter are lowered to point-to-point
 * tasks (enqueue.cc, taskAppend: one send and one receive per peer for
 * AlltoAll; for Gather a send to the root and, at the root, a receive from
 * every rank; Scatter the other way round). The same here: the checked call
 * becomes grouped sends and receives, run at once as one batch, or queued
 * with the open group like any collective.
 */

static ncclResult_t enqueue_batch(struct mc_op *ops, int n, const char *call)
{
  if (n == 0)
    return ncclSuccess;
  if (mc_group_depth() == 0) {
    /* One hold per operation, as a group would take them. */
    for (int i = 0; i < n; i++) {
      ncclResult_t res = mc_comm_hold(ops[i].comm, call);
      if (res != ncclSuccess) {
        group_release(ops, i);
        return res;
      }
    }
    return run_and_release(ops, n);
  }
  for (int i = 0; i < n; i++)
    MC_CHECK(enqueue(&ops[i], call));
  return ncclSuccess;
}

/* Sends from `in` or receives into `out` (block `blk` of count elements) with peer. */
static struct mc_op p2p_op(const struct mc_op *tmpl, enum mc_coll_kind kind, int peer, size_t blk)
{
  struct mc_op o = *tmpl;
  size_t off = blk * tmpl->count * tmpl->esize;

  o.kind = kind;
  o.peer = peer;
  o.root = 0;
  o.in = (kind == MC_COLL_SEND) ? tmpl->in + off : NULL;
  o.out = (kind == MC_COLL_RECV) ? tmpl->out + off : NULL;
  return o;
}

/* Runs (or queues) the 1 + n_ranks (gather, scatter) or 2 * n_ranks (alltoall) transfers. */
static ncclResult_t lower_to_p2p(const struct mc_op *tmpl, enum lowered what, int root,
                                 const char *call)
{
  struct ncclComm *comm = tmpl->comm;
  int n = comm->n_ranks;
  struct mc_op *ops = NULL;
  int n_ops = 0;
  ncclResult_t res;

  if (tmpl->count == 0)
    return ncclSuccess;
  ops = calloc((size_t)(2 * n), sizeof(*ops));
  if (ops == NULL) {
    res = MC_FAIL(ncclSystemError, "%s : out of memory planning %d transfers", call, 2 * n);
    if (mc_group_depth() > 0)
      group_coll_error = res;
    return res;
  }
  for (int p = 0; p < n; p++) {
    bool gather = (what == LOWER_GATHER);
    bool scatter = (what == LOWER_SCATTER);
    bool is_root = (comm->rank == root);

    if (!gather || (p == 0)) /* gather: one send, to the root, of the whole input */
      if (!scatter || is_root)
        ops[n_ops++] = p2p_op(tmpl, MC_COLL_SEND, gather ? root : p, gather ? 0 : (size_t)p);
    if (!scatter || (p == 0)) /* scatter: one receive, from the root, into the output */
      if (!gather || is_root)
        ops[n_ops++] = p2p_op(tmpl, MC_COLL_RECV, scatter ? root : p, scatter ? 0 : (size_t)p);
  }
  res = enqueue_batch(ops, n_ops, call);
  free(ops);
  return res;
}

NCCL_API(ncclResult_t, ncclAlltoAll, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
  struct mc_op o = {.kind = MC_COLL_SEND, .in = sendbuff, .out = recvbuff, .count = count};

  return coll_call(&o, comm, datatype, ncclSum, &call_alltoall, stream);
}

NCCL_API(ncclResult_t, ncclGather, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream)
{
  struct mc_op o = {
      .kind = MC_COLL_SEND, .in = sendbuff, .out = recvbuff, .count = count, .root = root};

  return coll_call(&o, comm, datatype, ncclSum, &call_gather, stream);
}

NCCL_API(ncclResult_t, ncclScatter, const void *sendbuff, void *recvbuff, size_t count,
         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream)
{
  struct mc_op o = {
      .kind = MC_COLL_SEND, .in = sendbuff, .out = recvbuff, .count = count, .root = root};

  return coll_call(&o, comm, datatype, ncclSum, &call_scatter, stream);
}

/* ------------------------------------------------------------------ groups */

NCCL_API(ncclResult_t, ncclGroupStart, void);
ncclResult_t ncclGroupStart(void)
{
  ncclResult_t res;

  mc_api_enter();
  res = mc_group_start();
  /* Before any call of the group checks its communicator (group_comms_live). */
  if ((res == ncclSuccess) && (mc_group_depth() == 1))
    group_destroyed = mc_comm_destroyed_count();
  return res;
}

/* NCCL's estimate of a group (ncclGroupSimulateEnd): per communicator the
 * sum of its operations' model times, the group's time the slowest one's. */
static float group_estimate_us(struct mc_op *ops, int n, ncclResult_t *res_out)
{
  float worst = 0.0f;

  for (int i = 0; i < n; i++) {
    float sum = 0.0f;
    bool first = true;

    for (int j = 0; j < i; j++)
      first = first && (ops[j].comm != ops[i].comm);
    if (!first)
      continue;
    for (int j = i; j < n; j++) {
      if (ops[j].comm != ops[i].comm)
        continue;
      *res_out = mc_coll_algo_choose(&ops[j]);
      if (*res_out != ncclSuccess)
        return 0.0f;
      sum += ops[j].est_us;
    }
    worst = (sum > worst) ? sum : worst;
  }
  return worst;
}

NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t *simInfo);
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
  bool outer = (mc_group_depth() == 1);
  ncclResult_t res;
  float est = 0.0f;

  mc_api_enter();
  if (simInfo == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclGroupSimulateEnd : simInfo argument is NULL");
  if ((simInfo->magic != NCCL_SIM_INFO_MAGIC) || (simInfo->size < sizeof(*simInfo)))
    return MC_FAIL(ncclInvalidArgument,
                   "ncclGroupSimulateEnd : simInfo was not initialized with "
                   "NCCL_SIM_INFO_INITIALIZER (magic 0x%x, size %zu)",
                   simInfo->magic, simInfo->size);
  res = mc_group_end();
  if (!outer)
    return res;
  if ((res == ncclSuccess) && (group_coll_error != ncclSuccess))
    res = group_coll_error;
  if ((res == ncclSuccess) && (group_n_ops > 0))
    res = group_comms_live(group_ops, group_n_ops);
  if ((res == ncclSuccess) && (group_n_ops > 0))
    est = group_estimate_us(group_ops, group_n_ops, &res);
  /* Nothing of the group runs: its operations are dropped. */
  group_release(group_ops, group_n_ops);
  group_leave(group_ops, group_n_ops);
  free(group_ops);
  group_ops = NULL;
  group_n_ops = group_cap_ops = 0;
  group_coll_error = ncclSuccess;
  if (res == ncclSuccess)
    simInfo->estimatedTime = est;
  return res;
}

NCCL_API(ncclResult_t, ncclGroupEnd, void);
ncclResult_t ncclGroupEnd(void)
{
  bool outer = (mc_group_depth() == 1);
  ncclResult_t res;
  ncclResult_t coll_res = ncclSuccess;

  mc_api_enter();
  res = mc_group_end();
  if (!outer)
    return res;
  if ((res == ncclSuccess) && (group_coll_error != ncclSuccess))
    res = group_coll_error;
  if ((res == ncclSuccess) && (group_n_ops > 0))
    res = group_comms_live(group_ops, group_n_ops);
  if ((res == ncclSuccess) && (group_n_ops > 0))
    coll_res = run_and_release(group_ops, group_n_ops);
  else
    group_release(group_ops, group_n_ops);
  group_leave(group_ops, group_n_ops);
  free(group_ops);
  group_ops = NULL;
  group_n_ops = group_cap_ops = 0;
  group_coll_error = ncclSuccess;
  return (res != ncclSuccess) ? res : coll_res;
}
