/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The symmetric collectives (the host counterpart of NCCL's symmetric
 * kernels, src/device/symmetric/, which run on buffers of
 * NCCL_WIN_COLL_SYMMETRIC windows): when both buffers of an all-reduce,
 * all-gather or reduce-scatter lie in symmetric windows (ncclCommWindowRegister
 * over ncclMemAlloc memory, init_mem.c) and every rank is on this host, each
 * rank maps its peers' buffers and moves the data itself, one copy, no FIFO.
 * All-reduce:
 *
 *   1. each rank tells every peer where its buffers are (a descriptor on its
 *      one-shot connection to it: the memfd behind the allocation, as
 *      /proc/<pid>/fd/<fd>, and the offsets), and waits for theirs;
 *   2. reduce-scatter: rank r reduces slice r of every rank's input, in rank
 *      order, into slice r of its own output, in chunks (one core's L2 over
 *      n + 2: mc_tp_decide_sym_chunk), telling every peer after each;
 *   3. all-gather, one chunk behind: once rank p said chunk k of slice p is
 *      done, rank r copies it from p's output into its own, while it is
 *      still in p's core's cache; after the last, r tells every peer so;
 *   4. once every peer said so, nobody reads r's buffers any more: done.
 *
 * All-gather and reduce-scatter skip 2-3: after 1, rank r copies every
 * rank's input into block p of its output, or reduces block r of every
 * input in rank order into its output; then 4.
 *
 * In place works too: a rank writes only parts of its own buffers that no
 * peer reads in that round. Every rank computes its slice from the same
 * inputs in the same order, so every output is the same bits. The choice is
 * local (the buffers of this rank's call are in windows), as in NCCL: a
 * symmetric window is registered by every rank, and a collective on it
 * passes window buffers on every rank; the signature carries the algorithm,
 * so a rank that does not is reported as a mismatch. Premulsum keeps the
 * FIFO path (each rank's scalar stays with it).
 *
 * Peers' allocations stay mapped (read-only) in the communicator's cache
 * (mc_mem_peer_map, init_mem.c), bounded by MESHCCL_SYM_MAP_BYTES; each
 * descriptor also says what its process freed, and the peer drops those.
 * A peer checks that the memfd it opened is the one described (inode,
 * device, size) before it maps it. Ranks of a host in several PID
 * namespaces (containers sharing /dev/shm) never take this path: a pid
 * there names another process, or none (comm->local_one_pidns).
 */
#include "coll/coll.h"

#include <string.h>

#include "check.h"
#include "coll/coll_int.h"
#include "log.h"
#include "params.h"

#define SYM_MAGIC 0x6d6373796d646531ull /* "mcsymde1" */

/* Where one buffer of a rank is: enough for a peer on this host to map it. */
struct sym_buf {
  int32_t pid;
  int32_t fd;
  uint64_t id;
  uint64_t ino; /* the memfd's inode and device: the peer checks what it opens */
  uint64_t dev;
  uint64_t alloc_bytes;
  uint64_t offset;
};

/* The first message of an operation to each peer: its buffers, and what its
 * process freed (mc_mem_frees), so that the peer drops those mappings. */
struct sym_desc {
  uint64_t magic;
  uint64_t bytes;
  struct sym_buf in;
  struct sym_buf out;
  uint64_t free_gen;
  uint64_t freed[MC_MEM_FREED_IDS];
};

/* The bytes of op's input and output (count is per rank for all-gather
 * and reduce-scatter). */
static void op_bytes(const struct mc_op *op, size_t *in_bytes, size_t *out_bytes)
{
  size_t b = op->count * op->esize;
  size_t all = b * (size_t)op->comm->n_ranks;

  *in_bytes = (op->kind == MC_COLL_REDUCESCATTER) ? all : b;
  *out_bytes = (op->kind == MC_COLL_ALLGATHER) ? all : b;
}

static bool sym_supports(const struct mc_op *op)
{
  struct ncclComm *comm = op->comm;
  size_t in_bytes;
  size_t out_bytes;

  if (((op->kind != MC_COLL_ALLREDUCE) && (op->kind != MC_COLL_ALLGATHER) &&
       (op->kind != MC_COLL_REDUCESCATTER)) ||
      (comm->nodes.n_nodes != 1) || !comm->local_one_pidns || (comm->n_ranks < 2) ||
      (op->count == 0) || (op->redop.kind == MC_RED_PREMULSUM) ||
      (mc_param_int(MC_P_SYMMETRIC) == 0))
    return false;
  op_bytes(op, &in_bytes, &out_bytes);
  return mc_comm_sym_window(comm, op->in, in_bytes) && mc_comm_sym_window(comm, op->out, out_bytes);
}

static void buf_of(const struct mc_mem_ref *r, struct sym_buf *b)
{
  *b = (struct sym_buf){.pid = r->pid,
                        .fd = r->fd,
                        .id = r->id,
                        .ino = r->ino,
                        .dev = r->dev,
                        .alloc_bytes = r->alloc_bytes,
                        .offset = r->offset};
}

/* Peer's buffer b (bytes from its offset), mapped here: *out. */
static ncclResult_t peer_map(struct ncclComm *comm, int peer, const struct sym_buf *b, size_t bytes,
                             const char **out)
{
  struct mc_mem_ref r = {.pid = b->pid,
                         .fd = b->fd,
                         .id = b->id,
                         .ino = b->ino,
                         .dev = b->dev,
                         .alloc_bytes = (size_t)b->alloc_bytes,
                         .offset = (size_t)b->offset};

  if ((b->offset > b->alloc_bytes) || (bytes > b->alloc_bytes - b->offset))
    return MC_FAIL(ncclInvalidUsage,
                   "rank %d: rank %d's symmetric buffer (offset %llu, %zu bytes) is not within "
                   "its allocation of %llu bytes",
                   comm->rank, peer, (unsigned long long)b->offset, bytes,
                   (unsigned long long)b->alloc_bytes);
  return mc_mem_peer_map(comm, peer, &r, out);
}

/* Elements [lo, hi) of count are rank r's slice of n. */
static void slice(size_t count, int n, int r, size_t *lo, size_t *hi)
{
  size_t q = count / (size_t)n;
  size_t extra = count % (size_t)n;

  *lo = q * (size_t)r + (((size_t)r < extra) ? (size_t)r : extra);
  *hi = *lo + q + (((size_t)r < extra) ? 1 : 0);
}

/* Posts this round's message to every peer not yet sent to (t->os_sent of
 * them, in the order rank+1, rank+2, ...); the first round's carries the
 * signature and the descriptor. 1: all posted. */
static int post_round(struct mc_task *t, const struct sym_desc *d, int *moved)
{
  struct ncclComm *comm = t->op->comm;
  int n = t->n_ranks;

  while (t->os_sent < n - 1) {
    int p = (t->rank + 1 + t->os_sent) % n;
    struct mc_conn *sc = mc_coll_os_send(comm, p);
    if (!mc_conn_send_ready(sc))
      return 0;
    if (d != NULL) {
      mc_conn_send_hdr(sc, &t->op->sig);
      memcpy(mc_conn_send_slot(sc), d, sizeof(*d));
      mc_conn_send_commit(sc, NULL, sizeof(*d));
    } else {
      mc_conn_send_commit(sc, NULL, 0);
    }
    t->os_sent++;
    *moved = 1;
  }
  return 1;
}

static bool all_arrived(const struct mc_task *t)
{
  struct ncclComm *comm = t->op->comm;

  for (int p = 0; p < t->n_ranks; p++)
    if ((p != t->rank) && !mc_conn_recv_ready(mc_coll_os_recv(comm, p)))
      return false;
  return true;
}

static void release_all(struct mc_task *t)
{
  struct ncclComm *comm = t->op->comm;

  for (int p = 0; p < t->n_ranks; p++)
    if (p != t->rank)
      mc_conn_recv_release(mc_coll_os_recv(comm, p));
}

/* Round 1 arrived from every peer: checks each signature, maps each
 * peer's buffers (mc_mem_peers_in/out). */
static int take_descs(struct mc_task *t, ncclResult_t *res)
{
  struct mc_op *op = t->op;
  struct ncclComm *comm = op->comm;
  const char **in = mc_mem_peers_in(comm);
  const char **out = mc_mem_peers_out(comm);
  size_t bytes = op->count * op->esize;
  size_t in_bytes;
  size_t out_bytes;

  op_bytes(op, &in_bytes, &out_bytes);
  for (int p = 0; p < t->n_ranks; p++) {
    struct mc_conn *rc = mc_coll_os_recv(comm, p);
    const void *hdr;
    const char *data;
    struct sym_desc d;
    size_t got = 0;
    size_t sent = 0;

    if (p == t->rank)
      continue;
    hdr = mc_conn_recv_hdr(rc);
    if (((hdr == NULL) || !mc_coll_sig_same(&op->sig, hdr)) &&
        (mc_coll_recv_check(t, rc, &sent, res) < 0))
      return -1;
    data = mc_conn_recv_data(rc, &got);
    /* (size_t)-1: the net cannot tell sizes (a plugin): go by ours. */
    if ((got != sizeof(d)) && (got != (size_t)-1)) {
      *res = MC_FAIL(ncclInvalidUsage,
                     "%s: rank %d received %zu bytes from rank %d where it expected the %zu of a "
                     "symmetric buffer's place: the ranks called it with buffers in symmetric "
                     "windows on some ranks only",
                     mc_coll_name(op->kind), t->rank, got, p, sizeof(d));
      return -1;
    }
    if (rc->remote_read) {
      if ((*res = mc_conn_read(rc, &d, data, sizeof(d))) != ncclSuccess)
        return -1;
    } else {
      memcpy(&d, data, sizeof(d));
    }
    if ((d.magic != SYM_MAGIC) || (d.bytes != bytes)) {
      *res = MC_FAIL(ncclInvalidUsage,
                     "%s: rank %d: rank %d's message is not a symmetric buffer's place for %zu "
                     "bytes: the ranks called it with buffers in symmetric windows on some ranks "
                     "only",
                     mc_coll_name(op->kind), t->rank, p, bytes);
      return -1;
    }
    mc_mem_peer_frees(comm, p, d.free_gen, d.freed);
    if (((*res = peer_map(comm, p, &d.in, in_bytes, &in[p])) != ncclSuccess) ||
        ((*res = peer_map(comm, p, &d.out, out_bytes, &out[p])) != ncclSuccess))
      return -1;
  }
  in[t->rank] = op->in;
  out[t->rank] = op->out;
  return 1;
}

/* The all-reduce's pipeline chunk, elements: each rank reduces its slice in
 * chunks and tells every peer after each, so that a peer copies a chunk
 * while it is still in the reducing core's cache (below). Every rank of the
 * host computes the same from the gathered cache facts (sym_chunk_bytes). */
static size_t chunk_elems(const struct mc_op *op)
{
  size_t ce = op->comm->data.tp.sym_chunk_bytes / op->esize;

  return (ce > 0) ? ce : 1;
}

/* The number of chunks of the largest slice: every rank sends as many
 * "done" messages, some for empty chunks of a shorter slice. */
static size_t n_chunks(const struct mc_op *op)
{
  size_t n = (size_t)op->comm->n_ranks;
  size_t largest = (op->count + n - 1) / n;
  size_t ce = chunk_elems(op);
  size_t k = (largest + ce - 1) / ce;

  return (k > 0) ? k : 1;
}

/* Elements [*lo, *hi) of chunk k of rank r's slice (empty past its end). */
static void chunk_of(const struct mc_op *op, int r, size_t k, size_t *lo, size_t *hi)
{
  size_t ce = chunk_elems(op);
  size_t s_lo;
  size_t s_hi;

  slice(op->count, op->comm->n_ranks, r, &s_lo, &s_hi);
  *lo = s_lo + k * ce;
  if (*lo > s_hi)
    *lo = s_hi;
  *hi = (s_hi - *lo > ce) ? *lo + ce : s_hi;
}

/* All-reduce: chunk k of this rank's slice, reduced from every rank's input
 * in rank order into its output. */
static void reduce_chunk(struct mc_task *t, const char **in, size_t k)
{
  struct mc_op *op = t->op;
  const void **srcs = mc_coll_os_srcs(op->comm);
  size_t es = op->esize;
  size_t lo;
  size_t hi;

  chunk_of(op, t->rank, k, &lo, &hi);
  if (hi == lo)
    return;
  for (int p = 0; p < t->n_ranks; p++)
    srcs[p] = in[p] + lo * es;
  mc_reduce_multi(&op->redop, op->out + lo * es, srcs, t->n_ranks, hi - lo, MC_REDUCE_POST);
}

/* All-reduce: chunk k of every peer's slice, from its output into mine. */
static void copy_chunk(struct mc_task *t, const char **out, size_t k)
{
  struct mc_op *op = t->op;
  size_t es = op->esize;
  size_t lo;
  size_t hi;

  for (int p = 0; p < t->n_ranks; p++) {
    if (p == t->rank)
      continue;
    chunk_of(op, p, k, &lo, &hi);
    if (hi > lo)
      mc_coll_copy_out(op, op->out + lo * es, out[p] + lo * es, (hi - lo) * es);
  }
}

/* The work once every peer's buffers are mapped (all-gather and
 * reduce-scatter): reduce-scatter, its block of every input; all-gather,
 * every peer's input into its block. */
static void first_pass(struct mc_task *t, const char **in)
{
  struct mc_op *op = t->op;
  const void **srcs = mc_coll_os_srcs(op->comm);
  int n = t->n_ranks;
  size_t es = op->esize;

  if (op->kind == MC_COLL_REDUCESCATTER) {
    for (int p = 0; p < n; p++)
      srcs[p] = in[p] + (size_t)t->rank * op->count * es;
    mc_reduce_multi(&op->redop, op->out, srcs, n, op->count, MC_REDUCE_POST);
    return;
  }
  /* all-gather; in place, this rank's block is its input */
  for (int p = 0; p < n; p++) {
    char *dst = op->out + (size_t)p * op->count * es;
    if (in[p] != dst)
      mc_coll_copy_out(op, dst, in[p], op->count * es);
  }
}

/* The task's phases (t->j). */
enum {
  SYM_WHERE_POST, /* send every peer where my buffers are */
  SYM_WHERE_WAIT, /* every peer's arrived: map them; all-gather and
                   * reduce-scatter do their one pass here */
  SYM_AR_REDUCE,  /* all-reduce: reduce chunk t->off of my slice */
  SYM_AR_DONE,    /* all-reduce: tell every peer chunk t->off is done */
  SYM_AR_COPY,    /* all-reduce: copy chunk t->real of every peer's slice */
  SYM_READ_POST,  /* tell every peer I read all I need of theirs */
  SYM_READ_WAIT,  /* every peer read mine */
  SYM_DRAIN,      /* my messages are out */
};

/* All-reduce on n ranks: rank r reduces slice r of every input into its
 * output, chunk by chunk (chunk_elems), and says so after each chunk; it
 * copies chunk k of peer p's slice from p's output once p said chunk k is
 * done, one chunk behind its own reductions, so that it rarely waits and
 * reads a chunk that p's core wrote a chunk ago, from that core's cache
 * rather than from memory. In place this is safe chunk by chunk: p's
 * "done k" also says that p no longer reads chunk k of slice p of my
 * input, which the copy overwrites. t->off counts the chunks reduced,
 * t->real the chunks copied. */
static int sym_task_progress(struct mc_task *t, ncclResult_t *res)
{
  struct mc_op *op = t->op;
  struct ncclComm *comm = op->comm;
  const char **in = mc_mem_peers_in(comm);
  const char **out = mc_mem_peers_out(comm);
  size_t k_all = (op->kind == MC_COLL_ALLREDUCE) ? n_chunks(op) : 0;
  int n = t->n_ranks;
  int moved = 0;

  for (;;) {
    switch (t->j) {
    case SYM_WHERE_POST: {
      struct sym_desc d = {.magic = SYM_MAGIC, .bytes = op->count * op->esize};
      struct mc_mem_ref ref_in;
      struct mc_mem_ref ref_out;
      size_t in_bytes;
      size_t out_bytes;
      op_bytes(op, &in_bytes, &out_bytes);
      if (!mc_mem_lookup(op->in, in_bytes, &ref_in) ||
          !mc_mem_lookup(op->out, out_bytes, &ref_out)) {
        *res = MC_FAIL(ncclInvalidUsage,
                       "%s: rank %d: a buffer of a symmetric window was freed (ncclMemFree) "
                       "while registered",
                       mc_coll_name(op->kind), t->rank);
        return -1;
      }
      buf_of(&ref_in, &d.in);
      buf_of(&ref_out, &d.out);
      mc_mem_frees(&d.free_gen, d.freed);
      if (!post_round(t, &d, &moved))
        return moved;
      /* From here the mappings this operation uses stay. */
      mc_mem_peers_op(comm);
      t->j = SYM_WHERE_WAIT;
      t->os_sent = 0;
      break;
    }
    case SYM_WHERE_WAIT:
      if (!all_arrived(t))
        return moved;
      if (take_descs(t, res) < 0)
        return -1;
      release_all(t);
      if (op->kind == MC_COLL_ALLREDUCE) {
        t->off = 0;
        t->real = 0;
        t->j = SYM_AR_REDUCE;
      } else {
        first_pass(t, in);
        t->j = SYM_READ_POST;
      }
      moved = 1;
      break;
    case SYM_AR_REDUCE:
      reduce_chunk(t, in, t->off);
      t->os_sent = 0;
      t->j = SYM_AR_DONE;
      moved = 1;
      break;
    case SYM_AR_DONE:
      if (!post_round(t, NULL, &moved))
        return moved;
      t->off++;
      t->j = SYM_AR_COPY;
      break;
    case SYM_AR_COPY:
      /* One chunk behind the reductions until they are all done. */
      if ((t->real + 1 < t->off) || ((t->off == k_all) && (t->real < k_all))) {
        if (!all_arrived(t))
          return moved;
        copy_chunk(t, out, t->real);
        release_all(t);
        t->real++;
        moved = 1;
        break;
      }
      t->os_sent = 0;
      t->j = (t->off < k_all) ? SYM_AR_REDUCE : SYM_READ_POST;
      break;
    case SYM_READ_POST:
      if (!post_round(t, NULL, &moved))
        return moved;
      t->os_sent = 0;
      t->j = SYM_READ_WAIT;
      break;
    case SYM_READ_WAIT:
      if (!all_arrived(t))
        return moved;
      release_all(t);
      t->j = SYM_DRAIN;
      t->recv_done = true;
      moved = 1;
      break;
    default:
      /* NET: the proxy may still be sending this rank's last messages. */
      for (int p = 0; p < n; p++)
        if ((p != t->rank) && !mc_conn_send_drained(mc_coll_os_send(comm, p)))
          return moved;
      t->done = true;
      return 1;
    }
  }
}

static ncclResult_t sym_plan(struct mc_op *op, struct mc_coll_plan *pl)
{
  struct ncclComm *comm = op->comm;
  struct mc_task t;

  MC_CHECK(mc_mem_peers_ready(comm)); /* progress cannot fail on it */
  mc_coll_task_init(&t, op, &mc_coll_sym_ops);
  return mc_coll_plan_add(pl, &t);
}

/* Announces the rounds' receive steps per peer (NET connections). */
static void sym_task_start(struct mc_task *t)
{
  const struct mc_op *op = t->op;

  /* where, a "done" per chunk (all-reduce), read */
  mc_coll_os_expect(t, (op->kind == MC_COLL_ALLREDUCE) ? n_chunks(op) + 2 : 2);
}

const struct mc_coll_algo_ops mc_coll_sym_ops = {
    .name = "Symmetric",
    .id = MC_ALGO_SYMMETRIC,
    .supports = sym_supports,
    .choice = MC_CHOICE_FIRST,
    .choice_why = "both buffers in symmetric windows, one host",
    .mismatch_why = "both buffers must be in NCCL_WIN_COLL_SYMMETRIC windows on every rank or on "
                    "none (or MESHCCL_SYMMETRIC, NCCL_ALGO differ between the ranks)",
    .plan = sym_plan,
    .task_progress = sym_task_progress,
    .task_start = sym_task_start,
    .task_health = mc_coll_os_health,
    .task_receives_from = mc_coll_oneshot_receives_from,
    .conns_of = &mc_coll_oneshot_ops,
    .first_use = mc_coll_oneshot_first_use,
    .first_use_all_peers = true,
    .local_on_one_rank = true,
};
