/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Point-to-point messages between the ranks of a bootstrap: mc_boot_send and
 * mc_boot_recv, and the queue of messages that arrive before they are asked
 * for. Mirrors NCCL's bootstrapSend, bootstrapRecv and its unexpected-message
 * queue (unexpectedEnqueue / unexpectedDequeue, bootstrap.cc). Unlike NCCL,
 * which opens a connection per message, messages travel on connections kept
 * open between two ranks (at most MC_BOOT_OUT_CONNS_MAX per rank, the least
 * recently used closed first): an authenticated connection per message cost
 * about 300 us of CPU over the two ranks. The listener service of
 * boot_rank.c authenticates the incoming connections; mc_boot_p2p_wait reads them.
 * A stream (mc_boot_allgather_sub's ring) is a dedicated connection announced
 * by a header with MC_BOOT_STREAM_BYTES.
 */
#include "bootstrap.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bootstrap_int.h"
#include "boot_rank_int.h"
#include "check.h"
#include "log.h"
#include "utils.h"

/* A rank's goodbye fails a wait for its message this long after it came:
 * a message it sent before, on a connection it closed to make room, may
 * still be on its way on that other connection. */
#define BYE_GRACE_MS 100

/* A new authenticated connection to peer's p2p listener. */
static ncclResult_t p2p_dial(struct mc_boot *b, int peer, struct mc_sock *s)
{
  struct mc_wait w = mc_boot_rank_wait(b);
  ncclResult_t res;

  if ((peer < 0) || (peer >= b->n_ranks))
    return MC_FAIL(ncclInvalidArgument, "Bootstrap: rank %d: send to rank %d of %d", b->rank, peer,
                   b->n_ranks);
  res = mc_boot_rank_connect(b, &b->peers[peer].p2p, b->magic, MC_SOCK_TYPE_BOOTSTRAP, &w, s, NULL);
  if (res != ncclSuccess) {
    res = mc_boot_rank_fail(b, res, s, peer, "sending a bootstrap message");
    mc_sock_close(s);
  }
  return res;
}

/* A dedicated connection to peer announcing a stream with tag (allgather_sub). */
ncclResult_t mc_boot_p2p_stream_connect(struct mc_boot *b, int peer, int tag, struct mc_sock *s)
{
  struct mc_boot_p2p_header hdr = {.rank = b->rank, .tag = tag, .bytes = MC_BOOT_STREAM_BYTES};
  struct mc_wait w;
  ncclResult_t res;

  MC_CHECK(p2p_dial(b, peer, s));
  w = mc_boot_rank_wait(b);
  res = mc_sock_send_all(s, &hdr, sizeof(hdr), &w);
  if (res != ncclSuccess) {
    res = mc_boot_rank_fail(b, res, s, peer, "sending a bootstrap message");
    mc_sock_close(s);
  }
  return res;
}

/* The open connection to peer, dialled when there is none; when MC_BOOT_OUT_CONNS_MAX
 * are open, the least recently used is closed first (its receiver reads the
 * end of the stream after the last message and forgets it). */
static ncclResult_t out_conn_get(struct mc_boot *b, int peer, struct mc_boot_out_conn **oc_out)
{
  struct mc_boot_out_conn *oc = NULL;
  ncclResult_t res_fail;

  for (int i = 0; i < b->n_out; i++) {
    if (b->out[i].peer == peer) {
      oc = &b->out[i];
      break;
    }
  }
  if (oc == NULL) {
    if (b->n_out == MC_BOOT_OUT_CONNS_MAX) {
      oc = &b->out[0];
      for (int i = 1; i < b->n_out; i++) {
        if (b->out[i].used < oc->used)
          oc = &b->out[i];
      }
      mc_sock_close(&oc->s);
    } else {
      oc = &b->out[b->n_out++];
    }
    oc->peer = peer;
    MC_CHECK_GOTO(p2p_dial(b, peer, &oc->s), res_fail, gone);
  }
  oc->used = ++b->use_seq;
  *oc_out = oc;
  return ncclSuccess;

gone:
  *oc = b->out[--b->n_out];
  return res_fail;
}

static void out_conn_drop(struct mc_boot *b, struct mc_boot_out_conn *oc)
{
  mc_sock_close(&oc->s);
  *oc = b->out[--b->n_out];
}

ncclResult_t mc_boot_send(struct mc_boot *b, int peer, int tag, const void *data, size_t bytes)
{
  struct mc_boot_p2p_header hdr = {.rank = b->rank, .tag = tag, .bytes = (uint32_t)bytes};
  uint8_t small[512];
  struct mc_boot_out_conn *oc;
  struct mc_wait w;
  ncclResult_t res;

  if (bytes > MC_BOOT_MAX_MSG_BYTES)
    return MC_FAIL(ncclInvalidArgument, "Bootstrap: message of %zu bytes is too large", bytes);
  MC_CHECK(out_conn_get(b, peer, &oc));
  w = mc_boot_rank_wait(b);
  if (sizeof(hdr) + bytes <= sizeof(small)) { /* one segment: one wake-up of the receiver */
    memcpy(small, &hdr, sizeof(hdr));
    if (bytes > 0)
      memcpy(small + sizeof(hdr), data, bytes);
    res = mc_sock_send_all(&oc->s, small, sizeof(hdr) + bytes, &w);
  } else {
    res = mc_sock_send_all(&oc->s, &hdr, sizeof(hdr), &w);
    if (res == ncclSuccess)
      res = mc_sock_send_all(&oc->s, data, bytes, &w);
  }
  if (res != ncclSuccess) {
    res = mc_boot_rank_fail(b, res, &oc->s, peer, "sending a bootstrap message");
    out_conn_drop(b, oc);
  }
  return res;
}

/* Adds the connections the service has authenticated to the incoming ones. */
ncclResult_t mc_boot_p2p_in_take(struct mc_boot *b)
{
  uint64_t n;
  struct mc_sock s;

  if (read(b->ready_fd, &n, sizeof(n)) < 0) /* EAGAIN: nothing signalled */
    n = 0;
  for (;;) {
    bool got;
    if (b->n_in == b->cap_in) {
      int cap = (b->cap_in > 0) ? 2 * b->cap_in : 16;
      struct mc_boot_in_conn *in = realloc(b->in, (size_t)cap * sizeof(*in));
      struct pollfd *pfd;
      if (in == NULL)
        return MC_FAIL(ncclSystemError, "Bootstrap: rank %d: out of memory", b->rank);
      b->in = in;
      pfd = realloc(b->in_pfd, (size_t)(cap + 1) * sizeof(*pfd));
      if (pfd == NULL)
        return MC_FAIL(ncclSystemError, "Bootstrap: rank %d: out of memory", b->rank);
      b->in_pfd = pfd;
      b->cap_in = cap;
    }
    pthread_mutex_lock(&b->svc_lock);
    got = mc_boot_acceptor_take(&b->p2p_listen, &s);
    pthread_mutex_unlock(&b->svc_lock);
    if (!got)
      return ncclSuccess;
    b->in[b->n_in].rank = -1;
    b->in[b->n_in].s = s;
    b->n_in++;
  }
}

static void in_conn_remove(struct mc_boot *b, int i, bool is_close)
{
  if (is_close)
    mc_sock_close(&b->in[i].s);
  b->in[i] = b->in[--b->n_in];
}

ncclResult_t mc_boot_p2p_unexp_add(struct mc_boot *b, const struct mc_boot_p2p_header *hdr,
                                   struct mc_sock *stream, void *data)
{
  struct mc_boot_unexpected **pp;
  struct mc_boot_unexpected *u = NULL;

  if ((b->n_unexp >= MC_BOOT_MAX_UNEXPECTED) || (mc_calloc(&u, 1) != ncclSuccess)) {
    if (stream != NULL)
      mc_sock_close(stream);
    free(data);
    return MC_FAIL(ncclInternalError, "Bootstrap: rank %d: more than %d unexpected messages",
                   b->rank, MC_BOOT_MAX_UNEXPECTED);
  }
  u->hdr = *hdr;
  mc_sock_init(&u->sock);
  if (stream != NULL)
    u->sock = *stream;
  u->data = data;
  for (pp = &b->unexp; *pp != NULL; pp = &(*pp)->next)
    ;
  *pp = u;
  b->n_unexp++;
  return ncclSuccess;
}

/* A message that is (peer, tag) but not what was asked (size, or a stream
 * where a message was asked or the reverse): the ranks disagree. */
static ncclResult_t want_mismatch(const struct mc_boot *b, const struct mc_boot_p2p_want *wt,
                                  const struct mc_boot_p2p_header *hdr)
{
  if ((hdr->bytes == MC_BOOT_STREAM_BYTES) != (wt->stream != NULL))
    return MC_FAIL(ncclInvalidUsage,
                   "Bootstrap: rank %d: rank %d sent %s with tag %d where %s was expected", b->rank,
                   wt->peer, (wt->stream != NULL) ? "a message" : "an allgather", wt->tag,
                   (wt->stream != NULL) ? "an allgather" : "a message");
  return MC_FAIL(ncclInvalidUsage,
                 "Bootstrap: rank %d: rank %d sent %u bytes with tag %d, expected %zu", b->rank,
                 wt->peer, hdr->bytes, wt->tag, wt->bytes);
}

static bool want_fits(const struct mc_boot_p2p_want *wt, const struct mc_boot_p2p_header *hdr)
{
  if (wt->stream != NULL)
    return hdr->bytes == MC_BOOT_STREAM_BYTES;
  return hdr->bytes == wt->bytes;
}

/* The expected message from the unexpected queue: 1 found, 0 not there. */
int mc_boot_p2p_unexp_take(struct mc_boot *b, const struct mc_boot_p2p_want *wt, ncclResult_t *res)
{
  for (struct mc_boot_unexpected **pp = &b->unexp; *pp != NULL; pp = &(*pp)->next) {
    struct mc_boot_unexpected *u = *pp;
    if (((wt->peer >= 0) && (u->hdr.rank != wt->peer)) || (u->hdr.tag != wt->tag))
      continue;
    *pp = u->next;
    b->n_unexp--;
    *res = ncclSuccess;
    if (!want_fits(wt, &u->hdr)) {
      *res = want_mismatch(b, wt, &u->hdr);
      mc_sock_close(&u->sock);
    } else if (wt->stream != NULL) {
      *wt->stream = u->sock;
    } else if (wt->bytes > 0) {
      memcpy(wt->data, u->data, wt->bytes);
    }
    free(u->data);
    free(u);
    return 1;
  }
  return 0;
}

/* A header read on incoming connection c: valid (mc_boot_p2p_header_check),
 * of the rank its earlier messages came from, and a stream (allgather_sub's
 * dedicated connection) only as the connection's first header. */
static bool in_header_check(const struct mc_boot_in_conn *c, const struct mc_boot_p2p_header *hdr,
                            int n_ranks, char *why, size_t why_bytes)
{
  if (!mc_boot_p2p_header_check(hdr, n_ranks, why, why_bytes))
    return false;
  if (c->rank < 0)
    return true;
  if (hdr->rank != c->rank) {
    snprintf(why, why_bytes, "a message of rank %d on a connection of rank %d", hdr->rank, c->rank);
    return false;
  }
  if (hdr->bytes == MC_BOOT_STREAM_BYTES) {
    snprintf(why, why_bytes, "an allgather announced after messages");
    return false;
  }
  return true;
}

/* Rank's goodbye came on incoming connection i: the connection ends, and
 * waits for that rank's messages fail (mc_boot_p2p_wait). 0, or -1 with *res
 * when out of memory. */
static int bye_take(struct mc_boot *b, int i, int rank, ncclResult_t *res)
{
  in_conn_remove(b, i, true);
  if ((b->bye_ns == NULL) && (mc_calloc(&b->bye_ns, (size_t)b->n_ranks) != ncclSuccess)) {
    *res = MC_FAIL(ncclSystemError, "Bootstrap: rank %d: out of memory", b->rank);
    return -1;
  }
  if (b->bye_ns[rank] == 0)
    b->bye_ns[rank] = mc_time_ns();
  MC_INFO(MC_SUB_BOOTSTRAP, "Bootstrap: rank %d: rank %d closed its bootstrap", b->rank, rank);
  return 0;
}

/* The wait for peer's message fails: peer said goodbye BYE_GRACE_MS ago. */
static bool bye_ends_wait(const struct mc_boot *b, const struct mc_boot_p2p_want *wt,
                          ncclResult_t *res)
{
  if ((wt->peer < 0) || (b->bye_ns == NULL) || (b->bye_ns[wt->peer] == 0) ||
      (mc_time_ns() - b->bye_ns[wt->peer] < BYE_GRACE_MS * 1000000ull))
    return false;
  *res = MC_FAIL(ncclRemoteError,
                 "Bootstrap: rank %d: rank %d (host %s pid %d) closed its bootstrap (its "
                 "communicator was destroyed or aborted) while this rank waited for its message "
                 "(tag %d)",
                 b->rank, wt->peer, b->peers[wt->peer].host, b->peers[wt->peer].pid, wt->tag);
  return true;
}

/*
 * Reads the next message off incoming connection i (it is readable): 1 when
 * it was the expected one (delivered, or *res says how it did not fit), 0
 * when it went to the unexpected queue or the connection ended (its sender
 * closed it after its last message, or broke it: the sender reports its
 * own failure), -1 when the wait ended (*res).
 */
int mc_boot_p2p_in_read(struct mc_boot *b, int i, const struct mc_boot_p2p_want *wt,
                        const struct mc_wait *w, ncclResult_t *res)
{
  struct mc_boot_in_conn *c = &b->in[i];
  struct mc_boot_p2p_header hdr;
  char a[MC_SOCKADDR_STRLEN];
  char why[128];
  bool is_mine;
  void *buf = NULL;
  ssize_t n;

  /* The end of the stream where a header would start is a close, not an error. */
  n = recv(c->s.fd, &hdr, sizeof(hdr), MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) {
    in_conn_remove(b, i, true);
    return 0;
  }
  if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)))
    return 0;
  *res = mc_sock_recv_all(&c->s, &hdr, sizeof(hdr), w);
  if (*res != ncclSuccess) {
    if ((c->s.end == MC_SOCK_END_CHECK) || (c->s.end == MC_SOCK_END_ABORT) ||
        (c->s.end == MC_SOCK_END_TIMEOUT))
      return -1;
    MC_INFO(MC_SUB_BOOTSTRAP, "Bootstrap: rank %d: dropped a message connection: %s", b->rank,
            c->s.err);
    in_conn_remove(b, i, true);
    return 0;
  }
  if (!in_header_check(c, &hdr, b->n_ranks, why, sizeof(why))) {
    /* It proved the secret, so it is one of ours, and broken: say so, and
     * let it not stop this receive. */
    MC_WARN("Bootstrap: rank %d: dropped a message connection from %s: protocol error: %s", b->rank,
            mc_sockaddr_str(&c->s.addr, a, sizeof(a)), why);
    in_conn_remove(b, i, true);
    return 0;
  }
  c->rank = hdr.rank;
  if (hdr.bytes == MC_BOOT_BYE_BYTES)
    return bye_take(b, i, hdr.rank, res);
  is_mine = ((wt->peer < 0) || (hdr.rank == wt->peer)) && (hdr.tag == wt->tag);
  if (hdr.bytes == MC_BOOT_STREAM_BYTES) { /* a dedicated connection: it leaves the list */
    struct mc_sock stream = c->s;
    in_conn_remove(b, i, false);
    if (!is_mine) {
      *res = mc_boot_p2p_unexp_add(b, &hdr, &stream, NULL);
      return (*res == ncclSuccess) ? 0 : 1;
    }
    if (wt->stream == NULL) {
      mc_sock_close(&stream);
      *res = want_mismatch(b, wt, &hdr);
    } else {
      *wt->stream = stream;
    }
    return 1;
  }
  if (is_mine && want_fits(wt, &hdr)) {
    *res = mc_sock_recv_all(&c->s, wt->data, hdr.bytes, w);
  } else {
    if ((hdr.bytes > 0) && ((buf = malloc(hdr.bytes)) == NULL)) {
      *res = MC_FAIL(ncclSystemError, "Bootstrap: rank %d: out of memory for a message of %u bytes",
                     b->rank, hdr.bytes);
      return 1;
    }
    *res = mc_sock_recv_all(&c->s, buf, hdr.bytes, w);
  }
  if (*res != ncclSuccess) {
    free(buf);
    *res = mc_boot_rank_fail(b, *res, &c->s, hdr.rank, "receiving a bootstrap message");
    in_conn_remove(b, i, true);
    return 1;
  }
  if (is_mine && (buf == NULL))
    return 1;
  if (is_mine) {
    free(buf);
    *res = want_mismatch(b, wt, &hdr);
    return 1;
  }
  *res = mc_boot_p2p_unexp_add(b, &hdr, NULL, buf);
  return (*res == ncclSuccess) ? 0 : 1;
}

/* Waits for the expected message, queueing every other one that comes first. */
ncclResult_t mc_boot_p2p_wait(struct mc_boot *b, const struct mc_boot_p2p_want *wt)
{
  struct mc_wait w;
  struct mc_sock waiter;
  ncclResult_t res = ncclSuccess;

  if (mc_boot_p2p_unexp_take(b, wt, &res))
    return res;
  /* One deadline for the whole receive, however many other messages arrive first. */
  w = mc_boot_rank_wait(b);
  mc_sock_init(&waiter);
  waiter.addr = b->p2p_listen.listener.sock.addr;
  for (int tick = MC_WAIT_TICK_MS;;) {
    int n;

    MC_CHECK(mc_boot_p2p_in_take(b));
    b->in_pfd[0].fd = b->ready_fd;
    b->in_pfd[0].events = POLLIN;
    b->in_pfd[0].revents = 0;
    for (int i = 0; i < b->n_in; i++) {
      b->in_pfd[i + 1].fd = b->in[i].s.fd;
      b->in_pfd[i + 1].events = POLLIN;
      b->in_pfd[i + 1].revents = 0;
    }
    n = poll(b->in_pfd, (nfds_t)b->n_in + 1, mc_deadline_left_ms(w.dl, tick));
    /* A quiet wait looks less often (the abort flag, the root's link). */
    tick = mc_wait_tick_next(tick, n != 0);
    /* Highest first: a removal moves the last connection into the hole. */
    for (int i = b->n_in - 1; (n > 0) && (i >= 0); i--) {
      int st;
      if (b->in_pfd[i + 1].revents == 0)
        continue;
      st = mc_boot_p2p_in_read(b, i, wt, &w, &res);
      if (st > 0)
        return res;
      if (st < 0)
        return mc_boot_rank_fail(b, res, &b->in[i].s, wt->peer, "waiting for a bootstrap message");
    }
    res = mc_sock_wait_check(&waiter, &w, "waiting for a connection on");
    if (res != ncclSuccess)
      return mc_boot_rank_fail(b, res, &waiter, wt->peer, "waiting for a bootstrap message");
    if (bye_ends_wait(b, wt, &res))
      return res;
  }
}

ncclResult_t mc_boot_recv(struct mc_boot *b, int peer, int tag, void *data, size_t bytes)
{
  struct mc_boot_p2p_want wt = {
      .peer = peer, .tag = tag, .data = data, .bytes = bytes, .stream = NULL};

  return mc_boot_p2p_wait(b, &wt);
}

void mc_boot_p2p_close(struct mc_boot *b)
{
  while (b->unexp != NULL) {
    struct mc_boot_unexpected *u = b->unexp;
    b->unexp = u->next;
    mc_sock_close(&u->sock);
    free(u->data);
    free(u);
  }
  while (b->n_out > 0) {
    struct mc_boot_out_conn *oc = &b->out[b->n_out - 1];
    struct mc_boot_p2p_header bye = {.rank = b->rank, .tag = 0, .bytes = MC_BOOT_BYE_BYTES};
    /* Best effort, never blocking: a peer that misses it waits as before. */
    if (oc->s.fd >= 0)
      (void)send(oc->s.fd, &bye, sizeof(bye), MSG_DONTWAIT | MSG_NOSIGNAL);
    out_conn_drop(b, oc);
  }
  while (b->n_in > 0)
    in_conn_remove(b, b->n_in - 1, true);
  free(b->in);
  free(b->in_pfd);
  b->in = NULL;
  b->in_pfd = NULL;
}
