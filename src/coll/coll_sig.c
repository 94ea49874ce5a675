/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Operation signatures (meshccl's; NCCL has no such check: mismatched calls
 * hang or give ranks different data). Every operation carries a compact
 * signature, struct mc_coll_sig: its number in the communicator's sequence
 * of collectives (or in the pair's sequence of sends and receives), its
 * kind, count, datatype, reduction, root, algorithm and channel count. The
 * executor sends it as the header of the first step of the operation on
 * each connection (transport.h: a side field of the FIFO's control words on
 * P2P and SHM, in front of the data on NET), and the receiver compares it
 * with its own call before it uses the step. This file builds, compares and
 * names signatures, and reads the failure notices a rank that found a
 * mismatch sends on (docs/design/lifecycle.md, "Errors").
 */
#include "coll/coll.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

_Static_assert(sizeof(struct mc_coll_sig) == MC_CONN_HDR_BYTES, "a signature is a step's header");
_Static_assert(sizeof(struct mc_coll_notice) <= MC_CONN_ERR_INFO_BYTES,
               "a notice fits in a connection's failure detail");

static bool is_p2p(enum mc_coll_kind kind)
{
  return (kind == MC_COLL_SEND) || (kind == MC_COLL_RECV);
}

static bool has_op(enum mc_coll_kind kind)
{
  return (kind == MC_COLL_ALLREDUCE) || (kind == MC_COLL_REDUCE) || (kind == MC_COLL_REDUCESCATTER);
}

static bool has_root(enum mc_coll_kind kind)
{
  return (kind == MC_COLL_BROADCAST) || (kind == MC_COLL_REDUCE);
}

void mc_coll_sig_make(const struct mc_op *op, uint64_t seq, struct mc_coll_sig *out)
{
  *out = (struct mc_coll_sig){
      .magic = MC_SIG_MAGIC,
      .kind = (uint8_t)op->kind,
      .type = (uint8_t)op->redop.type,
      .op = has_op(op->kind) ? (uint8_t)op->user_op : MC_SIG_OP_NONE,
      .algo = (op->algo != NULL) ? (uint8_t)op->algo->id : 0xff,
      .n_channels = (uint8_t)op->n_channels,
      .flags = 0,
      .root = is_p2p(op->kind) ? op->peer : (has_root(op->kind) ? op->root : -1),
      .rank = op->comm->rank,
      .seq = seq,
      .count = op->user_count,
  };
}

static const char *op_name(uint8_t op)
{
  static const char *const names[] = {"sum", "prod", "max", "min", "avg"};

  if (op < sizeof(names) / sizeof(names[0]))
    return names[op];
  return (op == MC_SIG_OP_PREMULSUM) ? "premulsum" : "?";
}

static size_t sig_bytes(const struct mc_coll_sig *s)
{
  return (size_t)s->count * mc_type_size((ncclDataType_t)s->type);
}

void mc_coll_sig_str(const struct mc_coll_sig *s, char *buf, size_t bytes)
{
  enum mc_coll_kind kind = (enum mc_coll_kind)s->kind;
  const char *type = mc_type_name((ncclDataType_t)s->type);
  size_t used = 0;

  mc_str_appendf(buf, bytes, &used, "%s(count %" PRIu64 ", %s", mc_coll_name(kind), s->count, type);
  if (has_op(kind))
    mc_str_appendf(buf, bytes, &used, ", %s", op_name(s->op));
  if (has_root(kind))
    mc_str_appendf(buf, bytes, &used, ", root %d", s->root);
  if (kind == MC_COLL_SEND)
    mc_str_appendf(buf, bytes, &used, ", to rank %d", s->root);
  if (kind == MC_COLL_RECV)
    mc_str_appendf(buf, bytes, &used, ", from rank %d", s->root);
  mc_str_appendf(buf, bytes, &used, ")");
}

bool mc_coll_sig_valid(const struct mc_coll_sig *s)
{
  return (s != NULL) && (s->magic == MC_SIG_MAGIC) && (s->kind <= MC_COLL_RECV) &&
         (mc_type_size((ncclDataType_t)s->type) != 0);
}

/* The same call: what the user passed (algorithm and channels aside). */
static bool same_call(const struct mc_coll_sig *a, const struct mc_coll_sig *b)
{
  return (a->seq == b->seq) && (a->kind == b->kind) && (a->type == b->type) && (a->op == b->op) &&
         (a->root == b->root) && (a->count == b->count);
}

/* A receive of the send's number, smaller than the send: why they do not match. */
static const char *p2p_why(const struct mc_coll_sig *a, const struct mc_coll_sig *b, char *buf,
                           size_t bytes)
{
  const struct mc_coll_sig *recv = (a->kind == MC_COLL_RECV) ? a : b;
  const struct mc_coll_sig *send = (a->kind == MC_COLL_RECV) ? b : a;

  buf[0] = '\0';
  if ((recv->kind == MC_COLL_RECV) && (send->kind == MC_COLL_SEND) && (recv->seq == send->seq) &&
      (sig_bytes(recv) < sig_bytes(send)))
    snprintf(buf, bytes, ": the receive (%zu bytes) is smaller than the send (%zu bytes)",
             sig_bytes(recv), sig_bytes(send));
  return buf;
}

/* "rank A called X where rank B called Y", with the operation numbers when
 * they differ (and why a send and a receive do not match). */
static ncclResult_t fail_calls(const struct mc_coll_sig *mine, const struct mc_coll_sig *theirs,
                               const char *what)
{
  char a[160];
  char b[160];
  char why[128];

  mc_coll_sig_str(mine, a, sizeof(a));
  mc_coll_sig_str(theirs, b, sizeof(b));
  p2p_why(mine, theirs, why, sizeof(why));
  if (mine->seq != theirs->seq)
    return MC_FAIL(ncclInvalidUsage,
                   "Mismatched %s: rank %d called %s as its operation %" PRIu64
                   " where rank %d called %s as its operation %" PRIu64 "%s",
                   what, mine->rank, a, mine->seq, theirs->rank, b, theirs->seq, why);
  return MC_FAIL(ncclInvalidUsage, "Mismatched %s: rank %d called %s where rank %d called %s%s",
                 what, mine->rank, a, theirs->rank, b, why);
}

/* The table of number id (a peer's signature says it), or NULL. */
static const struct mc_coll_algo_ops *algo_table(uint8_t id)
{
  for (int i = 0; i < mc_coll_n_algos; i++)
    if (mc_coll_algos[i]->id == (enum mc_coll_algo)id)
      return mc_coll_algos[i];
  return NULL;
}

static const char *algo_name(uint8_t id)
{
  const struct mc_coll_algo_ops *a = algo_table(id);

  return (a != NULL) ? a->name : "?";
}

/* What the table of id says about a rank running it where another does not. */
static const char *algo_mismatch_why(uint8_t id)
{
  const struct mc_coll_algo_ops *a = algo_table(id);

  return (a != NULL) ? a->mismatch_why : NULL;
}

/* A receive checks the sender's send. */
static ncclResult_t check_p2p(const struct mc_coll_sig *mine, const struct mc_coll_sig *theirs,
                              size_t *sent_bytes_out)
{
  if ((theirs->kind != MC_COLL_SEND) || (theirs->seq != mine->seq) ||
      (sig_bytes(theirs) > sig_bytes(mine)))
    return fail_calls(mine, theirs, "send/recv");
  *sent_bytes_out = sig_bytes(theirs);
  return ncclSuccess;
}

static bool same_run(const struct mc_coll_sig *a, const struct mc_coll_sig *b)
{
  return (a->algo == b->algo) && (a->n_channels == b->n_channels);
}

/* The same call, run another way: the ranks' settings differ (or, one of
 * them symmetric, their buffers: in symmetric windows on some ranks only). */
static ncclResult_t fail_runs(const struct mc_coll_sig *mine, const struct mc_coll_sig *theirs)
{
  char call[160];

  const char *why = algo_mismatch_why(mine->algo);

  mc_coll_sig_str(mine, call, sizeof(call));
  if (why == NULL)
    why = algo_mismatch_why(theirs->algo);
  if (why != NULL)
    return MC_FAIL(ncclInvalidUsage,
                   "Mismatched collectives: rank %d runs %s with %s where rank %d runs it with "
                   "%s: %s",
                   mine->rank, call, algo_name(mine->algo), theirs->rank, algo_name(theirs->algo),
                   why);
  return MC_FAIL(ncclInvalidUsage,
                 "Mismatched collectives: rank %d runs %s with %s on %d channels where rank %d "
                 "runs it with %s on %d channels: NCCL_ALGO, NCCL_PROTO, NCCL_MIN_NCHANNELS, "
                 "NCCL_MAX_NCHANNELS or MESHCCL_ALLREDUCE_ONESHOT_BYTES differ between the ranks",
                 mine->rank, call, algo_name(mine->algo), mine->n_channels, theirs->rank,
                 algo_name(theirs->algo), theirs->n_channels);
}

ncclResult_t mc_coll_sig_check(const struct mc_coll_sig *mine, const struct mc_coll_sig *theirs,
                               size_t *sent_bytes_out)
{
  if (mine->kind == MC_COLL_RECV)
    return check_p2p(mine, theirs, sent_bytes_out);
  if (!same_call(mine, theirs) || is_p2p((enum mc_coll_kind)theirs->kind))
    return fail_calls(mine, theirs, "collectives");
  if (!same_run(mine, theirs))
    return fail_runs(mine, theirs);
  *sent_bytes_out = sig_bytes(theirs);
  return ncclSuccess;
}

ncclResult_t mc_coll_sig_missing(const struct mc_coll_sig *mine, int peer)
{
  char a[160];

  mc_coll_sig_str(mine, a, sizeof(a));
  return MC_FAIL(ncclInvalidUsage,
                 "Mismatched %s: rank %d called %s, and the step it received from rank %d does "
                 "not start an operation: the ranks' calls are out of step",
                 is_p2p((enum mc_coll_kind)mine->kind) ? "send/recv" : "collectives", mine->rank, a,
                 peer);
}

bool mc_coll_notice_parse(const void *data, size_t bytes, struct mc_coll_notice *out)
{
  struct mc_coll_notice n;

  if ((bytes != MC_NOTICE_BYTES) && (bytes != MC_NOTICE_BYTES_ALT))
    return false;
  memcpy(&n, data, sizeof(n));
  if (!mc_coll_sig_valid(&n.failed) || ((n.failed.flags & MC_SIG_FAILED) == 0) ||
      !mc_coll_sig_valid(&n.other))
    return false;
  *out = n;
  return true;
}

static const char *what_of(const struct mc_coll_sig *a, const struct mc_coll_sig *b)
{
  return (is_p2p((enum mc_coll_kind)a->kind) || is_p2p((enum mc_coll_kind)b->kind)) ? "send/recv"
                                                                                    : "collectives";
}

/*
 * A rank learns of a mismatch from a notice: `failed` is the call of the
 * rank that sent it, `other` the call that rank named as the mismatch. The
 * text is this rank's call against the first of the two that differs from
 * it, so that a rank names the same mismatch whichever neighbour told it;
 * when the other call is an earlier one of this rank (a send that returned
 * before its receiver checked it), the notice's pair as its sender saw it.
 */
ncclResult_t mc_coll_notice_fail(const struct mc_coll_sig *mine, const struct mc_coll_notice *n,
                                 struct mc_coll_sig *named_out)
{
  struct mc_coll_sig failed = n->failed;
  struct mc_coll_sig other = n->other;
  struct mc_coll_sig t;

  failed.flags = 0;
  other.flags = 0;
  t = (same_call(mine, &failed) && same_run(mine, &failed)) ? other : failed;
  *named_out = t;
  if ((other.rank == mine->rank) && !same_call(mine, &other))
    return fail_calls(&failed, &other, what_of(&failed, &other));
  if (same_call(mine, &t) && !same_run(mine, &t))
    return fail_runs(mine, &t);
  if (same_call(mine, &t)) /* the mismatch was between two other ranks */
    return MC_FAIL(ncclInvalidUsage,
                   "Mismatched %s: rank %d stopped: the calls of its peers do not match (rank %d "
                   "reported it)",
                   what_of(mine, &t), mine->rank, failed.rank);
  return fail_calls(mine, &t, what_of(mine, &t));
}
