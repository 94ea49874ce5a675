/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bootstrap's collectives: the allgather over all ranks along the ring
 * of boot_rank.c, the barrier, and the allgather of a subset of the ranks
 * over a ring of dedicated connections. Mirrors NCCL's bootstrapAllGather
 * (socketRingAllGather, bidirectional since NCCL 2.28), bootstrapBarrier and
 * bootstrapIntraNodeAllGather (bootstrap.cc). After init, a rank that leaves
 * an allgather over all ranks on a failure tells the others (notices_send),
 * so that they fail with the cause instead of at their timeout.
 */
#include "bootstrap.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap_int.h"
#include "boot_rank_int.h"
#include "check.h"
#include "log.h"
#include "utils.h"

/* ---------- collectives over bootstrap sockets ---------- */

/*
 * After init nobody watches the root any more. A rank that leaves a ring
 * allgather on a failure it saw itself (a neighbour closed its connection:
 * killed, say) tells every other rank with a FAIL_TAG message carrying its
 * error, so that a rank whose own neighbours are alive but gone from the
 * allgather fails at once with the cause rather than after
 * MESHCCL_BOOTSTRAP_TIMEOUT, blaming a live neighbour; the ranks that stay
 * can then shrink the communicator without the failed one (ncclCommShrink).
 * A notice counts for the allgather it names; later ones drop it.
 */
#define FAIL_TAG (1 << 26)

struct fail_notice {
  uint32_t seq; /* the allgather (ag_seq) the sender left */
  int32_t rank;
  int32_t code;
  char text[MC_BOOT_TEXT_BYTES];
};

static void notices_send(struct mc_boot *b, uint32_t seq, ncclResult_t code, int skip);
static ncclResult_t notice_check(void *arg);

/* Runs ops; on failure names the neighbour whose socket failed and, after
 * init in an allgather over all ranks (is_world), tells the other ranks
 * (notices_send) unless the failure was their notice or an abort. */
static ncclResult_t ring_io(struct mc_boot *b, struct mc_sock_op *ops, int n_ops,
                            const struct mc_wait *w, const struct mc_sock *snd, int next, int prev,
                            bool is_world)
{
  ncclResult_t res = mc_sock_io_multi(ops, n_ops, w);
  const struct mc_sock *s = snd;
  int peer = next;

  if (res == ncclSuccess)
    return ncclSuccess;
  for (int i = 0; i < n_ops; i++) {
    if (ops[i].failed) {
      s = ops[i].sock;
      peer = (ops[i].sock == snd) ? next : prev;
      break;
    }
  }
  res = mc_boot_rank_fail(b, res, s, peer, "in a bootstrap allgather");
  if (is_world && (b->ctl.fd < 0) && (s->end != MC_SOCK_END_CHECK) && (s->end != MC_SOCK_END_ABORT))
    notices_send(b, b->world_seq, res, peer);
  return res;
}

/*
 * Bidirectional ring allgather (NCCL 2.28+'s socketRingAllGather): each TCP
 * ring connection carries data both ways, so ceil((n-1)/2) steps instead of
 * n-1. Step s sends slice idx-s forward and slice idx+s backward, and
 * receives idx-s-1 from prev and idx+s+1 from next; when n-1 is odd the last
 * step only goes forward. A header first checks that all agree on the size.
 */
static ncclResult_t ring_allgather(struct mc_boot *b, struct mc_sock *snd, struct mc_sock *rcv,
                                   int n, int idx, const int *ranks, char *data, size_t slice)
{
  int next = (ranks != NULL) ? ranks[(idx + 1) % n] : (idx + 1) % n;
  int prev = (ranks != NULL) ? ranks[(idx + n - 1) % n] : (idx + n - 1) % n;
  uint32_t hdr_out[2] = {b->ag_seq, (uint32_t)slice};
  uint32_t hdr_prev[2] = {0, 0};
  uint32_t hdr_next[2] = {0, 0};
  struct mc_wait w = mc_boot_rank_wait(b);
  int n_full = (n - 1) / 2;
  struct mc_sock_op hops[4] = {
      {.sock = snd, .is_send = true, .buf = hdr_out, .bytes = sizeof(hdr_out)},
      {.sock = rcv, .is_send = true, .buf = hdr_out, .bytes = sizeof(hdr_out)},
      {.sock = rcv, .is_send = false, .buf = hdr_prev, .bytes = sizeof(hdr_prev)},
      {.sock = snd, .is_send = false, .buf = hdr_next, .bytes = sizeof(hdr_next)},
  };

  b->ag_seq++;
  if ((b->ctl.fd < 0) && (ranks == NULL)) { /* after init: the others' notices */
    w.check = notice_check;
    w.check_arg = b;
  }
  MC_CHECK(ring_io(b, hops, 4, &w, snd, next, prev, ranks == NULL));
  if (!mc_boot_ag_header_check(hdr_prev, slice, NULL, 0) ||
      !mc_boot_ag_header_check(hdr_next, slice, NULL, 0))
    return MC_FAIL(ncclInvalidUsage,
                   "Bootstrap: rank %d: allgather slices of %u (rank %d) and %u (rank %d) bytes, "
                   "expected %zu: the ranks disagree on what they exchange (mixed versions?)",
                   b->rank, hdr_prev[1], prev, hdr_next[1], next, slice);
  for (int s = 0; s <= n_full; s++) {
    bool is_half = (s == n_full);
    struct mc_sock_op ops[4] = {
        {.sock = snd, .is_send = true, .buf = data + (size_t)((idx - s + n) % n) * slice},
        {.sock = rcv, .is_send = false, .buf = data + (size_t)((idx - s - 1 + n) % n) * slice},
        {.sock = rcv, .is_send = true, .buf = data + (size_t)((idx + s) % n) * slice},
        {.sock = snd, .is_send = false, .buf = data + (size_t)((idx + s + 1) % n) * slice},
    };
    if (is_half && ((n - 1) % 2 == 0))
      break;
    for (int i = 0; i < 4; i++)
      ops[i].bytes = slice;
    MC_CHECK(ring_io(b, ops, is_half ? 2 : 4, &w, snd, next, prev, ranks == NULL));
  }
  return ncclSuccess;
}

ncclResult_t mc_boot_allgather(struct mc_boot *b, void *data, size_t slice_bytes)
{
  if (b->n_ranks == 1)
    return ncclSuccess;
  if (slice_bytes > MC_BOOT_MAX_MSG_BYTES / (size_t)b->n_ranks)
    return MC_FAIL(ncclInvalidArgument, "Bootstrap: allgather of %zu bytes per rank is too large",
                   slice_bytes);
  b->world_seq++;
  return ring_allgather(b, &b->ring_send, &b->ring_recv, b->n_ranks, b->rank, NULL, data,
                        slice_bytes);
}

/* Tells every rank but this one and skip (the one it blames) that this rank
 * left allgather seq with code (the recorded error as text). One second at
 * most per rank: a dead one refuses or never answers. */
static void notices_send(struct mc_boot *b, uint32_t seq, ncclResult_t code, int skip)
{
  struct {
    struct mc_boot_p2p_header hdr;
    struct fail_notice n;
  } m;

  memset(&m, 0, sizeof(m));
  m.hdr.rank = b->rank;
  m.hdr.tag = FAIL_TAG;
  m.hdr.bytes = (uint32_t)sizeof(m.n);
  m.n.seq = seq;
  m.n.rank = b->rank;
  m.n.code = (int32_t)code;
  mc_error_last_copy(m.n.text, sizeof(m.n.text));
  for (int r = 0; r < b->n_ranks; r++) {
    struct mc_wait w = mc_boot_wait_make(MC_BOOT_EXPLAIN_WAIT_MS, NULL);
    struct mc_sock s;
    if ((r == b->rank) || (r == skip))
      continue;
    mc_sock_init(&s);
    if (mc_boot_rank_connect(b, &b->peers[r].p2p, b->magic, MC_SOCK_TYPE_BOOTSTRAP, &w, &s, NULL) ==
        ncclSuccess)
      (void)mc_sock_send_all(&s, &m, sizeof(m), &w);
    MC_INFO(MC_SUB_BOOTSTRAP, "Bootstrap: rank %d: %s rank %d that it left allgather %u: %s",
            b->rank, (s.err[0] == '\0') ? "told" : "could not tell", r, seq,
            (s.err[0] == '\0') ? m.n.text : s.err);
    mc_sock_close(&s);
  }
}

/* Queues notice n (of a later allgather) again, at the end of the queue. */
static ncclResult_t notice_keep(struct mc_boot *b, const struct fail_notice *n)
{
  struct mc_boot_p2p_header hdr = {.rank = n->rank, .tag = FAIL_TAG, .bytes = sizeof(*n)};
  struct fail_notice *copy = malloc(sizeof(*copy));

  if (copy == NULL)
    return MC_FAIL(ncclSystemError, "Bootstrap: rank %d: out of memory for a notice", b->rank);
  *copy = *n;
  return mc_boot_p2p_unexp_add(b, &hdr, NULL, copy);
}

/* The notice of another rank that left the running allgather over all
 * ranks, as this rank's error; notices of earlier ones are dropped. The
 * wait check of that allgather after init. */
static ncclResult_t notice_check(void *arg)
{
  struct mc_boot *b = arg;
  struct fail_notice n;
  struct mc_boot_p2p_want wt = {.peer = -1, .tag = FAIL_TAG, .data = &n, .bytes = sizeof(n)};
  struct mc_wait w = mc_boot_wait_make(MC_BOOT_EXPLAIN_WAIT_MS, b->abort_flag);
  ncclResult_t res = ncclSuccess;
  int left = b->n_unexp; /* each queued one looked at once */
  bool got = false;

  /* Queued ones first; one of a later allgather (its sender went on
   * before this rank) goes back for that allgather's wait. */
  while (!got && (left-- > 0) && mc_boot_p2p_unexp_take(b, &wt, &res)) {
    got = (res == ncclSuccess) && (n.seq == b->world_seq);
    if ((res == ncclSuccess) && (n.seq > b->world_seq))
      MC_CHECK(notice_keep(b, &n));
  }
  MC_CHECK(mc_boot_p2p_in_take(b));
  for (int i = b->n_in - 1; !got && (i >= 0); i--) {
    struct pollfd p = {.fd = b->in[i].s.fd, .events = POLLIN, .revents = 0};
    if ((poll(&p, 1, 0) <= 0) || (mc_boot_p2p_in_read(b, i, &wt, &w, &res) <= 0))
      continue;
    got = (res == ncclSuccess) && (n.seq == b->world_seq);
    if ((res == ncclSuccess) && (n.seq > b->world_seq))
      MC_CHECK(notice_keep(b, &n));
  }
  if (!got)
    return ncclSuccess;
  n.text[sizeof(n.text) - 1] = '\0';
  return MC_FAIL(((n.code > 0) && (n.code < ncclNumResults)) ? (ncclResult_t)n.code
                                                             : ncclRemoteError,
                 "Bootstrap: rank %d: rank %d left the bootstrap allgather after a failure: %s",
                 b->rank, n.rank, n.text);
}

ncclResult_t mc_boot_barrier(struct mc_boot *b, const int *ranks, int n, int my_index, int tag)
{
  uint8_t token = 0;

  if (ranks == NULL) {
    n = b->n_ranks;
    my_index = b->rank;
  }
  for (int mask = 1; mask < n; mask <<= 1) {
    int to = (my_index + mask) % n;
    int from = (my_index - mask % n + n) % n;
    MC_CHECK(mc_boot_send(b, (ranks != NULL) ? ranks[to] : to, tag, &token, sizeof(token)));
    MC_CHECK(mc_boot_recv(b, (ranks != NULL) ? ranks[from] : from, tag, &token, sizeof(token)));
  }
  return ncclSuccess;
}

ncclResult_t mc_boot_allgather_sub(struct mc_boot *b, const int *ranks, int n, int my_index,
                                   void *data, size_t slice_bytes, int tag)
{
  struct mc_sock snd;
  struct mc_sock rcv;
  struct mc_boot_p2p_want wt = {0};
  ncclResult_t res;
  int next = ranks[(my_index + 1) % n];
  int prev = ranks[(my_index + n - 1) % n];

  if (n == 1)
    return ncclSuccess;
  if (slice_bytes > MC_BOOT_MAX_MSG_BYTES / (size_t)n)
    return MC_FAIL(ncclInvalidArgument, "Bootstrap: allgather of %zu bytes per rank is too large",
                   slice_bytes);
  MC_CHECK(mc_boot_p2p_stream_connect(b, next, tag, &snd));
  mc_sock_init(&rcv);
  wt.peer = prev;
  wt.tag = tag;
  wt.stream = &rcv;
  res = mc_boot_p2p_wait(b, &wt);
  if (res == ncclSuccess)
    res = ring_allgather(b, &snd, &rcv, n, my_index, ranks, data, slice_bytes);
  mc_sock_close(&snd);
  mc_sock_close(&rcv);
  return res;
}
