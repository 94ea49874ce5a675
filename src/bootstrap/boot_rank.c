/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rank side of the bootstrap. Mirrors NCCL's bootstrapInit,
 * bootstrapAllGather, bootstrapSend/Recv, bootstrapBarrier and
 * bootstrapIntraNodeAllGather (bootstrap.cc):
 *   listeners (ring, p2p) -> stagger -> register with the root -> next rank's
 *   address -> ring connect -> ring allgather of {p2p address, host, pid}.
 * Unlike NCCL, one root of at most MESHCCL_BOOT_TABLE_MAX_RANKS ranks sends
 * every rank that table after the next rank's address (boot_root.c,
 * send_all_next), and the ring allgather is skipped. Point-to-point
 * messages travel on connections kept open between two ranks (NCCL opens one
 * per message): see mc_boot_send and p2p_wait.
 * During init every wait also watches the control connection to the root,
 * which reports failures of other ranks; see boot_root.c. Every connection
 * (to the root, along the ring, peer to peer) authenticates both ways with
 * the id's secret (boot_accept.c), and what arrives is checked
 * (boot_proto.c) before a rank number, length or address in it is used.
 */
#include "bootstrap.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "bootstrap_int.h"
#include "check.h"
#include "log.h"
#include "params.h"
#include "utils.h"

_Static_assert(sizeof(struct mc_boot_handle) <= NCCL_UNIQUE_ID_BYTES, "handle fits the id");
_Static_assert(offsetof(struct mc_boot_handle, addr) == 8, "NCCL's handle layout");
_Static_assert(offsetof(struct mc_boot_handle, n_ranks) == 36, "NCCL's handle layout");
_Static_assert(sizeof(union mc_sockaddr) == 28, "NCCL's ncclSocketAddress size");

#define ROOT_EXPLAIN_WAIT_MS 1000 /* after a peer error, how long to wait for the root's reason */
#define MAX_UNEXPECTED       4096
#define OUT_CONNS_MAX        64 /* message connections a rank keeps open to its peers */
#define RING_MAX_PENDING     64 /* connections authenticating at the ring listener */
#define ACCEPT_TICK_MS       10
#define WAIT_TICK_MAX_MS     80  /* p2p_wait's tick after quiet ticks (10, 20, 40, 80) */
#define SERVICE_IDLE_MS      100 /* the listener service's sleep while a connection may expire */
/* With several roots, a rank that cannot reach a root gives up this long
 * before init's deadline, so that its notice crosses to the other groups
 * (through the previous root) before their ranks give up on their own. */
#define ROOT_REACH_MARGIN_MS 3000
/* The first rank of a group whose own root failed the job while it joins the
 * previous group's root: how much longer it tries, to pass the cause on. */
#define ROOT_PASS_ON_MS 2000

/* A message that arrived before this rank asked for it: its payload, or for
 * a stream (allgather_sub) its dedicated connection. */
struct unexpected {
  struct mc_boot_p2p_header hdr;
  struct mc_sock sock; /* streams only (fd -1 otherwise) */
  void *data;          /* messages: hdr.bytes, read off the connection */
  struct unexpected *next;
};

/* An outgoing message connection kept open to a peer. */
struct out_conn {
  int peer;
  uint64_t used; /* b->use_seq at its last message: the least recent is closed first */
  struct mc_sock s;
};

/* An incoming message connection: messages of one sender, one after another,
 * until the sender closes it. */
struct in_conn {
  int rank; /* the sender, -1 until its first header */
  struct mc_sock s;
};

struct mc_boot {
  int rank;
  int n_ranks;
  uint64_t magic;
  uint8_t key[MC_BOOT_KEY_BYTES]; /* authentication key of the id's secret */
  const volatile uint32_t *abort_flag;
  struct mc_ifc ifc;
  struct mc_sock ctl; /* to the root, open until init ends */
  union mc_sockaddr root_addr;
  int n_roots;  /* 1, or nId of ncclCommInitRankScalable */
  int root_idx; /* which of them this rank registers with */
  /* With several roots, the first rank of a group: its connection to the
   * previous group's root (MC_BOOT_CTL_NEIGHBOR), open until init ends. */
  struct mc_sock nbr;
  union mc_sockaddr nbr_addr;
  /* The own root's answer (NEXT), once received: by boot_register, or by
   * own_link_check when it came while this rank was still joining the
   * previous group's root or explaining a failure of that join. */
  struct mc_boot_ctl next_msg;
  bool has_next;
  /* The own root's failure notice when it came during that join: the join
   * goes on until own_fail_dl, so that the previous group learns it too. */
  struct mc_boot_ctl own_fail;
  bool has_own_fail;
  struct mc_deadline own_fail_dl;
  struct mc_boot_acceptor ring_listen; /* ring_listen and p2p_listen: under svc_lock */
  struct mc_boot_acceptor p2p_listen;
  pthread_mutex_t svc_lock;
  pthread_cond_t svc_cond; /* a connection was authenticated */
  pthread_t svc_thread;
  bool is_svc_started;
  bool svc_stop;
  int svc_wake_fd;
  struct mc_sock ring_send; /* to rank + 1 */
  struct mc_sock ring_recv; /* from rank - 1 */
  struct mc_boot_peer *peers;
  struct unexpected *unexp;
  int n_unexp;
  /* Point-to-point messages (mc_boot_send/recv) travel on connections kept
   * open: an authenticated connection per message cost about 300 us of CPU
   * over the two ranks (six wake-ups), and init sends the same peers many. */
  struct out_conn out[OUT_CONNS_MAX];
  int n_out;
  uint64_t use_seq;
  struct in_conn *in;
  int n_in;
  int cap_in;
  struct pollfd *in_pfd; /* cap_in + 1 */
  int ready_fd;          /* eventfd: the service has an authenticated connection ready */
  struct mc_boot_timings t;
  char host[MC_BOOT_HOST_BYTES];
  int pid;
  uint32_t ag_seq;
  uint32_t world_seq; /* allgathers over all ranks (mc_boot_allgather): the one running */
  struct mc_deadline init_dl;
};

/* ---------- waits and errors ---------- */

/* ---------- listener service ---------- */

/*
 * The listener service: a thread per struct mc_boot that answers the
 * authentication of connections to this rank's ring and p2p listeners, so
 * that a peer's send completes whatever this rank's thread is doing (NCCL's
 * sends complete into the kernel's buffers; a thread driving several
 * communicators, as ncclCommInitAll's group does, sends to each before it
 * receives on any). Authenticated connections wait in the acceptors until
 * this rank's thread takes them. The service only touches the acceptors,
 * under svc_lock.
 */
static void *service_main(void *arg)
{
  struct mc_boot *b = arg;
  struct pollfd *pfd = NULL;
  size_t cap = 0;

  mc_thread_set_name("NCCL BootstrapS");
  for (;;) {
    size_t need;
    int n = 0;
    int timeout_ms;
    bool is_ready;

    pthread_mutex_lock(&b->svc_lock);
    if (b->svc_stop) {
      pthread_mutex_unlock(&b->svc_lock);
      break;
    }
    need = 1 + (size_t)mc_boot_acceptor_n_fds(&b->ring_listen) +
           (size_t)mc_boot_acceptor_n_fds(&b->p2p_listen);
    if (need > cap) {
      struct pollfd *p = realloc(pfd, need * sizeof(*p));
      if (p != NULL) {
        pfd = p;
        cap = need;
      }
    }
    if (pfd != NULL) {
      pfd[n].fd = b->svc_wake_fd;
      pfd[n].events = POLLIN;
      n++;
      if (1 + (size_t)mc_boot_acceptor_n_fds(&b->ring_listen) <= cap)
        n += mc_boot_acceptor_pollfds(&b->ring_listen, pfd + n);
      if ((size_t)n + (size_t)mc_boot_acceptor_n_fds(&b->p2p_listen) <= cap)
        n += mc_boot_acceptor_pollfds(&b->p2p_listen, pfd + n);
    }
    /* Idle (nothing to expire, no pause to end): sleep until a connection or the stop. */
    timeout_ms =
        (mc_boot_acceptor_is_timed(&b->ring_listen) || mc_boot_acceptor_is_timed(&b->p2p_listen))
            ? SERVICE_IDLE_MS
            : -1;
    pthread_mutex_unlock(&b->svc_lock);
    /* Sleep until something arrives; the acceptors look again themselves
     * (a connection may have been taken meanwhile). The timeout expires
     * connections that stay silent. */
    if (pfd != NULL)
      (void)poll(pfd, (nfds_t)n, timeout_ms);
    else
      mc_sleep_ms_abortable(SERVICE_IDLE_MS, NULL);
    pthread_mutex_lock(&b->svc_lock);
    mc_boot_acceptor_progress(&b->ring_listen, NULL, 0);
    mc_boot_acceptor_progress(&b->p2p_listen, NULL, 0);
    is_ready =
        mc_boot_acceptor_has_ready(&b->ring_listen) || mc_boot_acceptor_has_ready(&b->p2p_listen);
    if (is_ready) {
      uint64_t one = 1;
      pthread_cond_broadcast(&b->svc_cond);
      if (write(b->ready_fd, &one, sizeof(one)) < 0) /* EAGAIN: already signalled */
        MC_TRACE(MC_SUB_BOOTSTRAP, "Bootstrap: eventfd write: %s", strerror(errno));
    }
    pthread_mutex_unlock(&b->svc_lock);
  }
  free(pfd);
  return NULL;
}

/* The lock and condition of the service (the condition on the monotonic
 * clock, like every deadline). */
static void service_sync_init(struct mc_boot *b)
{
  pthread_condattr_t ca;

  pthread_mutex_init(&b->svc_lock, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&b->svc_cond, &ca);
  pthread_condattr_destroy(&ca);
}

static ncclResult_t service_start(struct mc_boot *b)
{
  char hint[MC_FD_HINT_BYTES];
  int rc;

  b->svc_wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (b->svc_wake_fd >= 0)
    b->ready_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if ((b->svc_wake_fd < 0) || (b->ready_fd < 0))
    return MC_FAIL(ncclSystemError, "Bootstrap: rank %d: eventfd: %s%s", b->rank, strerror(errno),
                   mc_fd_limit_hint(errno, hint, sizeof(hint)));
  rc = pthread_create(&b->svc_thread, NULL, service_main, b);
  if (rc != 0)
    return MC_FAIL(ncclSystemError, "Bootstrap: rank %d: pthread_create: %s", b->rank,
                   strerror(rc));
  b->is_svc_started = true;
  return ncclSuccess;
}

static void service_stop(struct mc_boot *b)
{
  uint64_t one = 1;

  if (b->is_svc_started) {
    pthread_mutex_lock(&b->svc_lock);
    b->svc_stop = true;
    pthread_mutex_unlock(&b->svc_lock);
    if (write(b->svc_wake_fd, &one, sizeof(one)) < 0)
      MC_TRACE(MC_SUB_BOOTSTRAP, "Bootstrap: eventfd write: %s", strerror(errno));
    pthread_join(b->svc_thread, NULL);
    b->is_svc_started = false;
  }
  if (b->svc_wake_fd >= 0)
    close(b->svc_wake_fd);
  b->svc_wake_fd = -1;
  if (b->ready_fd >= 0)
    close(b->ready_fd);
  b->ready_fd = -1;
}

/*
 * Waits for the next authenticated connection to acc (the wait's deadline,
 * abort flag and check); on failure *waiter (the listener's address) says
 * why, as a socket does.
 */
static ncclResult_t boot_accept(struct mc_boot *b, struct mc_boot_acceptor *acc,
                                const struct mc_wait *w, struct mc_sock *waiter,
                                struct mc_sock *conn_out)
{
  mc_sock_init(waiter);
  waiter->addr = acc->listener.sock.addr;
  for (;;) {
    struct timespec until;
    bool got;
    ncclResult_t res;

    pthread_mutex_lock(&b->svc_lock);
    got = mc_boot_acceptor_take(acc, conn_out);
    pthread_mutex_unlock(&b->svc_lock);
    if (got)
      return ncclSuccess;
    res = mc_sock_wait_check(waiter, w, "waiting for a connection on");
    if (res != ncclSuccess)
      return res;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += ACCEPT_TICK_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&b->svc_lock);
    if (!mc_boot_acceptor_has_ready(acc))
      (void)pthread_cond_timedwait(&b->svc_cond, &b->svc_lock, &until);
    pthread_mutex_unlock(&b->svc_lock);
  }
}

/* Connects and authenticates to a peer (or the root). */
static ncclResult_t boot_connect(struct mc_boot *b, const union mc_sockaddr *to, uint64_t magic,
                                 uint32_t type, const struct mc_wait *w, struct mc_sock *s_out,
                                 bool *is_auth_failure_out)
{
  return mc_boot_auth_connect(to, magic, type, b->key, w, s_out, is_auth_failure_out);
}

/*
 * Reads what a root sent on one of this rank's connections to it (its own
 * root's, or the previous root's as its neighbor): a failure notice becomes
 * this rank's error. With next_out, the own root's answer (NEXT) is kept
 * there and the connection stays open; with fail_out, a failure notice is
 * kept there instead of becoming the error.
 */
static ncclResult_t link_check(struct mc_boot *b, struct mc_sock *s, const union mc_sockaddr *at,
                               int root_idx, bool is_neighbor, struct mc_boot_ctl *next_out,
                               struct mc_boot_ctl *fail_out)
{
  struct mc_wait w = mc_boot_wait_make(ROOT_EXPLAIN_WAIT_MS, b->abort_flag);
  struct mc_boot_ctl m;
  char a[MC_SOCKADDR_STRLEN];
  char which[96] = "";
  char why[256];
  bool readable = false;
  size_t n = 0;

  if (s->fd < 0)
    return ncclSuccess;
  if ((mc_sock_poll_readable(s, 0, &readable) != ncclSuccess) || !readable)
    return ncclSuccess;
  if (b->n_roots > 1)
    snprintf(which, sizeof(which), " (commIds[%d] of %d%s)", root_idx, b->n_roots,
             is_neighbor ? ", the previous group's root" : "");
  if ((mc_sock_recv_msg(s, &m, sizeof(m), &n, &w) != ncclSuccess) || (n != sizeof(m))) {
    mc_sock_close(s);
    return MC_FAIL(ncclRemoteError,
                   "Bootstrap: rank %d lost its connection to the bootstrap root at %s%s (%s): the "
                   "process hosting the root (the one that called ncclGetUniqueId; rank 0 with "
                   "NCCL_COMM_ID) exited or was killed",
                   b->rank, mc_sockaddr_str(at, a, sizeof(a)), which,
                   (s->err[0] != '\0') ? s->err : "a message of the wrong size");
  }
  if (!mc_boot_ctl_check_from_root(&m, b->rank, b->n_ranks, next_out != NULL, why, sizeof(why))) {
    mc_sock_close(s);
    return MC_FAIL(ncclRemoteError,
                   "Bootstrap: rank %d: protocol error from the bootstrap root at %s%s: %s",
                   b->rank, mc_sockaddr_str(at, a, sizeof(a)), which, why);
  }
  if (m.kind == MC_BOOT_CTL_NEXT) {
    *next_out = m;
    return ncclSuccess;
  }
  mc_sock_close(s);
  if (fail_out != NULL) {
    *fail_out = m;
    return ncclSuccess;
  }
  return MC_FAIL((ncclResult_t)m.code, "Bootstrap: rank %d: %s", b->rank, m.text);
}

/*
 * Failure notices from this rank's own root. Before its answer was read,
 * the answer may come first (the first rank of a group joins the previous
 * group's root before it reads its own root's): it is kept for boot_register.
 */
static ncclResult_t own_link_check(struct mc_boot *b)
{
  struct mc_boot_ctl *keep = b->has_next ? NULL : &b->next_msg;

  MC_CHECK(link_check(b, &b->ctl, &b->root_addr, b->root_idx, false, keep, NULL));
  if ((keep != NULL) && (b->next_msg.kind == MC_BOOT_CTL_NEXT))
    b->has_next = true;
  return ncclSuccess;
}

/* This rank's listeners out of file descriptors: the init cannot complete
 * (a peer that cannot connect would wait until its timeout), so it fails now
 * and tells the root, which tells every rank. */
static ncclResult_t listeners_check(struct mc_boot *b)
{
  char why[MC_BOOT_TEXT_BYTES];

  if (mc_boot_acceptor_fd_error(&b->ring_listen, why, sizeof(why)) ||
      mc_boot_acceptor_fd_error(&b->p2p_listen, why, sizeof(why)))
    return MC_FAIL(ncclSystemError, "Bootstrap: rank %d (host %s pid %d): %s", b->rank, b->host,
                   b->pid, why);
  return ncclSuccess;
}

/* The wait check of init: this rank's listeners, and failure notices from
 * its roots. */
static ncclResult_t ctl_check(void *arg)
{
  struct mc_boot *b = arg;

  MC_CHECK(listeners_check(b));
  MC_CHECK(own_link_check(b));
  return link_check(b, &b->nbr, &b->nbr_addr, (b->root_idx + b->n_roots - 1) % b->n_roots, true,
                    NULL, NULL);
}

/* The same for the wait of the own root's answer: only the neighbor link. */
static ncclResult_t nbr_check(void *arg)
{
  struct mc_boot *b = arg;

  return link_check(b, &b->nbr, &b->nbr_addr, (b->root_idx + b->n_roots - 1) % b->n_roots, true,
                    NULL, NULL);
}

/* The own root's failure notice kept by own_root_check, as this rank's error. */
static ncclResult_t own_fail_error(struct mc_boot *b)
{
  return MC_FAIL((ncclResult_t)b->own_fail.code, "Bootstrap: rank %d: %s", b->rank,
                 b->own_fail.text);
}

/*
 * The wait check while the first rank of a group joins the previous group's
 * root. Its own root may already have failed the job: the join then goes on
 * for ROOT_PASS_ON_MS more, so that the failure reaches the previous group
 * (boot_register passes it on), and then ends with the own root's notice.
 * It must not wait longer: the previous root may be gone for that very
 * reason (this rank disagrees on nranks and takes the wrong root for its
 * previous one, say), and a connect would retry until the init timeout.
 */
static ncclResult_t own_root_check(void *arg)
{
  struct mc_boot *b = arg;
  struct mc_boot_ctl *keep = b->has_next ? NULL : &b->next_msg;

  if (b->has_own_fail)
    return mc_deadline_passed(b->own_fail_dl) ? own_fail_error(b) : ncclSuccess;
  MC_CHECK(link_check(b, &b->ctl, &b->root_addr, b->root_idx, false, keep, &b->own_fail));
  if ((keep != NULL) && (b->next_msg.kind == MC_BOOT_CTL_NEXT))
    b->has_next = true;
  if (b->own_fail.kind == MC_BOOT_CTL_FAIL) {
    b->has_own_fail = true;
    b->own_fail_dl = mc_deadline_in_ms(ROOT_PASS_ON_MS);
  }
  return ncclSuccess;
}

ncclResult_t mc_boot_root_reason(struct mc_boot *b, int64_t wait_ms)
{
  struct mc_deadline dl = mc_deadline_in_ms(wait_ms);

  while ((b != NULL) && (b->ctl.fd >= 0)) {
    ncclResult_t r = ctl_check(b);
    if (r != ncclSuccess)
      return r;
    if (mc_deadline_passed(dl))
      break;
    mc_sleep_ms_abortable(10, b->abort_flag);
  }
  return ncclSuccess;
}

static struct mc_wait boot_wait(struct mc_boot *b)
{
  struct mc_wait w;

  memset(&w, 0, sizeof(w));
  w.abort_flag = b->abort_flag;
  if (b->ctl.fd >= 0) {
    w.dl = b->init_dl;
    w.check = ctl_check;
    w.check_arg = b;
  } else {
    w.dl = mc_deadline_in_ms(mc_boot_op_timeout_ms());
  }
  return w;
}

static const char *peer_desc(const struct mc_boot *b, int rank, char *buf, size_t bytes)
{
  if ((b->peers != NULL) && (rank >= 0) && (rank < b->n_ranks))
    snprintf(buf, bytes, "rank %d (host %s pid %d)", rank, b->peers[rank].host, b->peers[rank].pid);
  else
    snprintf(buf, bytes, "rank %d", rank);
  return buf;
}

/*
 * Records a failure seen on socket s while talking to `peer`. When the wait
 * ended because the root reported a failure, that report is the error. When
 * the peer closed the connection during init, the root usually knows why:
 * give it a moment to say so before blaming the peer.
 */
static ncclResult_t boot_fail(struct mc_boot *b, ncclResult_t res, const struct mc_sock *s,
                              int peer, const char *doing)
{
  char who[160];

  if (s->end == MC_SOCK_END_CHECK)
    return res;
  if (s->end == MC_SOCK_END_ABORT) {
    MC_INFO(MC_SUB_BOOTSTRAP, "Bootstrap: rank %d: aborted while %s", b->rank, doing);
    return res;
  }
  if ((s->end == MC_SOCK_END_CLOSED) && (b->ctl.fd >= 0)) {
    struct mc_deadline dl = mc_deadline_in_ms(ROOT_EXPLAIN_WAIT_MS);
    while (!mc_deadline_passed(dl) && (b->ctl.fd >= 0)) {
      ncclResult_t r = ctl_check(b);
      if (r != ncclSuccess)
        return r;
      mc_sleep_ms_abortable(10, b->abort_flag);
    }
  }
  peer_desc(b, peer, who, sizeof(who));
  if (s->end == MC_SOCK_END_CLOSED)
    return MC_FAIL(res,
                   "Bootstrap: rank %d: %s closed the connection while %s (%s): it exited or "
                   "failed",
                   b->rank, who, doing, s->err);
  return MC_FAIL(res, "Bootstrap: rank %d: %s with %s: %s", b->rank, doing, who, s->err);
}

/* ---------- init ---------- */

static ncclResult_t boot_listen(struct mc_boot *b)
{
  union mc_sockaddr local = b->ifc.addr;
  char what[64];

  mc_sockaddr_set_port(&local, 0);
  snprintf(what, sizeof(what), "rank %d ring listener", b->rank);
  if (mc_boot_acceptor_open(&b->ring_listen, &local, b->magic, MC_SOCK_TYPE_BOOTSTRAP, b->key,
                            RING_MAX_PENDING, MAX_UNEXPECTED, what) != ncclSuccess)
    return MC_FAIL(ncclSystemError, "Bootstrap: rank %d: ring listener on %s: %s", b->rank,
                   b->ifc.name, b->ring_listen.listener.sock.err);
  snprintf(what, sizeof(what), "rank %d p2p listener", b->rank);
  if (mc_boot_acceptor_open(&b->p2p_listen, &local, b->magic, MC_SOCK_TYPE_BOOTSTRAP, b->key,
                            mc_boot_max_pending(), MAX_UNEXPECTED, what) != ncclSuccess)
    return MC_FAIL(ncclSystemError, "Bootstrap: rank %d: p2p listener on %s: %s", b->rank,
                   b->ifc.name, b->p2p_listen.listener.sock.err);
  return ncclSuccess;
}

/* " (commIds[i] of n)" with several roots, else "". */
static const char *root_which(const struct mc_boot *b, int root_idx, char *buf, size_t bytes)
{
  buf[0] = '\0';
  if (b->n_roots > 1)
    snprintf(buf, bytes, " (commIds[%d] of %d)", root_idx, b->n_roots);
  return buf;
}

/*
 * Connects to the root of h (proving h's secret, the root's own) and sends
 * this rank's registration of `kind` there: its own root (REGISTER) or the
 * previous group's (NEIGHBOR). *s is the open connection on success.
 */
/* A REGISTER or NEIGHBOR message of this rank for root root_idx. */
static void register_msg(const struct mc_boot *b, uint32_t kind, int root_idx,
                         struct mc_boot_ctl *m)
{
  memset(m, 0, sizeof(*m));
  m->kind = kind;
  m->version = NCCL_VERSION_CODE;
  m->rank = b->rank;
  m->n_ranks = b->n_ranks;
  m->n_roots = b->n_roots;
  m->root = root_idx;
  m->pid = b->pid;
  m->addr = b->ring_listen.listener.sock.addr;
  m->p2p = b->p2p_listen.listener.sock.addr;
  snprintf(m->host, sizeof(m->host), "%s", b->host);
}

static ncclResult_t root_join(struct mc_boot *b, const struct mc_boot_handle *h, uint32_t kind,
                              int root_idx, const struct mc_wait *w, struct mc_sock *s)
{
  uint8_t key[MC_BOOT_KEY_BYTES];
  struct mc_boot_ctl m;
  char a[MC_SOCKADDR_STRLEN];
  char which[64];
  bool is_auth_failure = false;
  ncclResult_t res;

  root_which(b, root_idx, which, sizeof(which));
  mc_boot_auth_key(h->secret, key);
  res = mc_boot_auth_connect(&h->addr, h->magic, MC_SOCK_TYPE_ROOT, key, w, s, &is_auth_failure);
  mc_crypto_wipe(key, sizeof(key));
  if (res != ncclSuccess) {
    if (s->end == MC_SOCK_END_ABORT)
      return res;
    if (s->end == MC_SOCK_END_CHECK)
      return res; /* a root's notice, recorded by the check */
    if (is_auth_failure)
      return MC_FAIL(res, "Bootstrap: rank %d: bootstrap root at %s%s: %s", b->rank,
                     mc_sockaddr_str(&h->addr, a, sizeof(a)), which, s->err);
    return MC_FAIL(res,
                   "Bootstrap: rank %d cannot reach the bootstrap root at %s%s from %s: %s "
                   "(is rank 0 / the process that created the unique id running, and is %s "
                   "reachable from interface %s?)",
                   b->rank, mc_sockaddr_str(&h->addr, a, sizeof(a)), which, b->ifc.name, s->err,
                   mc_sockaddr_str(&h->addr, a, sizeof(a)), b->ifc.name);
  }
  register_msg(b, kind, root_idx, &m);
  res = mc_sock_send_msg(s, &m, sizeof(m), w);
  if (res != ncclSuccess)
    return boot_fail(b, res, s, -1, "registering with the bootstrap root");
  return ncclSuccess;
}

/*
 * The first rank of a group whose own root failed it (or could not be
 * reached) joins the previous group's root all the same, quietly and for
 * ROOT_PASS_ON_MS at most: mc_boot_init's failure path then tells that root
 * why, and the previous group fails with the cause instead of waiting for
 * this rank until its timeout. Nothing is recorded: the own failure stays
 * this rank's error.
 */
static void pass_on_failure(struct mc_boot *b, const struct mc_boot_config *cfg)
{
  struct mc_wait w = mc_boot_wait_make(ROOT_PASS_ON_MS, b->abort_flag);
  int prev = (b->root_idx + b->n_roots - 1) % b->n_roots;
  struct mc_boot_handle h;
  struct mc_boot_ctl m;
  uint8_t key[MC_BOOT_KEY_BYTES];

  if ((b->n_roots < 2) || (b->nbr.fd >= 0) ||
      (b->rank != mc_boot_root_first_rank(b->root_idx, b->n_ranks, b->n_roots)))
    return;
  memcpy(&h, cfg->ids[prev].internal, sizeof(h));
  b->nbr_addr = h.addr;
  mc_boot_auth_key(h.secret, key);
  if (mc_boot_auth_connect(&h.addr, h.magic, MC_SOCK_TYPE_ROOT, key, &w, &b->nbr, NULL) ==
      ncclSuccess) {
    register_msg(b, MC_BOOT_CTL_NEIGHBOR, prev, &m);
    if (mc_sock_send_msg(&b->nbr, &m, sizeof(m), &w) != ncclSuccess)
      mc_sock_close(&b->nbr);
  }
  mc_crypto_wipe(key, sizeof(key));
  mc_crypto_wipe(&h, sizeof(h));
}

/*
 * The address table the root sends after NEXT (its size checked with NEXT):
 * this rank's own entry must be what it registered.
 */
static ncclResult_t recv_table(struct mc_boot *b, const struct mc_wait *w, uint32_t bytes)
{
  struct mc_boot_peer *me;
  char a[MC_SOCKADDR_STRLEN];
  ncclResult_t res;
  size_t n = 0;

  MC_CHECK(mc_calloc(&b->peers, (size_t)b->n_ranks));
  res = mc_sock_recv_msg(&b->ctl, b->peers, bytes, &n, w);
  if ((res == ncclSuccess) && (n != bytes))
    return MC_FAIL(ncclRemoteError,
                   "Bootstrap: rank %d: protocol error from the bootstrap root at %s: an address "
                   "table of %zu bytes, announced %u",
                   b->rank, mc_sockaddr_str(&b->root_addr, a, sizeof(a)), n, bytes);
  if (res != ncclSuccess) {
    if ((b->ctl.end == MC_SOCK_END_ABORT) || (b->ctl.end == MC_SOCK_END_CHECK))
      return res;
    return MC_FAIL(res,
                   "Bootstrap: rank %d: receiving the address table from the bootstrap root at "
                   "%s: %s",
                   b->rank, mc_sockaddr_str(&b->root_addr, a, sizeof(a)), b->ctl.err);
  }
  me = &b->peers[b->rank];
  if ((me->pid != b->pid) ||
      (memcmp(&me->p2p, &b->p2p_listen.listener.sock.addr, sizeof(me->p2p)) != 0))
    return MC_FAIL(ncclRemoteError,
                   "Bootstrap: rank %d: protocol error from the bootstrap root at %s: the address "
                   "table gives this rank pid %d and p2p address %s, not what it registered",
                   b->rank, mc_sockaddr_str(&b->root_addr, a, sizeof(a)), me->pid,
                   mc_sockaddr_str(&me->p2p, a, sizeof(a)));
  return ncclSuccess;
}

/*
 * Registers with the root(s) and returns the next rank's ring address. With
 * several roots, the first rank of a group also registers with the previous
 * group's root (NCCL's bootstrapInit does the same) before it waits for its
 * own root's answer, so that no root's answer waits for a rank that waits
 * for an answer itself. Its own root comes first: a rank that cannot reach
 * the previous root can then say so to its own group.
 */
static ncclResult_t boot_register(struct mc_boot *b, const struct mc_boot_config *cfg,
                                  union mc_sockaddr *next_out)
{
  struct mc_wait w = mc_boot_wait_make(-1, b->abort_flag);
  struct mc_boot_handle h;
  struct mc_boot_ctl m;
  char a[MC_SOCKADDR_STRLEN];
  char which[64];
  char why[256];
  ncclResult_t res;
  size_t n = 0;
  double t0 = mc_time_sec();

  w.dl = b->init_dl;
  root_which(b, b->root_idx, which, sizeof(which));
  memcpy(&h, (b->n_roots > 1) ? cfg->ids[b->root_idx].internal : cfg->id.internal, sizeof(h));
  if ((b->n_roots > 1) && (cfg->timeout_ms > 2 * ROOT_REACH_MARGIN_MS)) {
    struct mc_wait wr = w;
    wr.dl = mc_deadline_min(w.dl, mc_deadline_in_ms(cfg->timeout_ms - ROOT_REACH_MARGIN_MS));
    res = root_join(b, &h, MC_BOOT_CTL_REGISTER, b->root_idx, &wr, &b->ctl);
  } else {
    res = root_join(b, &h, MC_BOOT_CTL_REGISTER, b->root_idx, &w, &b->ctl);
  }
  mc_crypto_wipe(&h, sizeof(h));
  if (res != ncclSuccess) {
    pass_on_failure(b, cfg);
    return res;
  }
  if ((b->n_roots > 1) &&
      (b->rank == mc_boot_root_first_rank(b->root_idx, b->n_ranks, b->n_roots))) {
    int prev = (b->root_idx + b->n_roots - 1) % b->n_roots;
    struct mc_wait wr = w;

    memcpy(&h, cfg->ids[prev].internal, sizeof(h));
    b->nbr_addr = h.addr;
    if (cfg->timeout_ms > 2 * ROOT_REACH_MARGIN_MS)
      wr.dl = mc_deadline_min(w.dl, mc_deadline_in_ms(cfg->timeout_ms - ROOT_REACH_MARGIN_MS));
    wr.check = own_root_check;
    wr.check_arg = b;
    res = root_join(b, &h, MC_BOOT_CTL_NEIGHBOR, prev, &wr, &b->nbr);
    mc_crypto_wipe(&h, sizeof(h));
    /* The own root's notice is the cause (mc_boot_init's failure path tells
     * the previous root, when the join got through). When the join ended
     * by own_root_check, the notice is this rank's error already. */
    if (b->has_own_fail)
      return ((res != ncclSuccess) && (b->nbr.end == MC_SOCK_END_CHECK)) ? res : own_fail_error(b);
    MC_CHECK(res);
    /* From here on, a failure the previous root reports ends every wait. */
    w.check = nbr_check;
    w.check_arg = b;
  }
  b->t.send = mc_time_sec() - t0;
  t0 = mc_time_sec();
  if (b->has_next) {
    m = b->next_msg; /* checked by link_check */
    n = sizeof(m);
    res = ncclSuccess;
  } else {
    res = mc_sock_recv_msg(&b->ctl, &m, sizeof(m), &n, &w);
  }
  if ((res == ncclSuccess) && (n != sizeof(m)))
    res = ncclRemoteError;
  if (res != ncclSuccess) {
    if ((b->ctl.end == MC_SOCK_END_ABORT) || (b->ctl.end == MC_SOCK_END_CHECK))
      return res;
    if (b->ctl.end == MC_SOCK_END_CLOSED)
      return MC_FAIL(ncclRemoteError,
                     "Bootstrap: rank %d: the bootstrap root at %s%s closed the "
                     "connection before answering (%s): the process hosting it (the one that "
                     "called ncclGetUniqueId; rank 0 with NCCL_COMM_ID) exited, was killed or "
                     "stopped it",
                     b->rank, mc_sockaddr_str(&b->root_addr, a, sizeof(a)), which, b->ctl.err);
    return MC_FAIL(res, "Bootstrap: rank %d: no answer from the bootstrap root at %s%s: %s",
                   b->rank, mc_sockaddr_str(&b->root_addr, a, sizeof(a)), which, b->ctl.err);
  }
  /* Nothing of the reply is used before it is checked: a FAIL must carry a
   * failure code (a FAIL with ncclSuccess would let this rank go on without
   * a next address), a NEXT must name rank + 1 and a usable address. */
  if (!mc_boot_ctl_check_from_root(&m, b->rank, b->n_ranks, true, why, sizeof(why))) {
    mc_sock_close(&b->ctl);
    return MC_FAIL(ncclRemoteError,
                   "Bootstrap: rank %d: protocol error from the bootstrap root at %s%s: %s",
                   b->rank, mc_sockaddr_str(&b->root_addr, a, sizeof(a)), which, why);
  }
  if (m.kind == MC_BOOT_CTL_FAIL) {
    mc_sock_close(&b->ctl);
    return MC_FAIL((ncclResult_t)m.code, "Bootstrap: rank %d: %s", b->rank, m.text);
  }
  b->has_next = true; /* from here on, a second NEXT is a protocol error */
  if (m.table_bytes != 0)
    MC_CHECK(recv_table(b, &w, m.table_bytes));
  b->t.recv = mc_time_sec() - t0;
  *next_out = m.addr;
  return ncclSuccess;
}

static ncclResult_t boot_ring_connect(struct mc_boot *b, const union mc_sockaddr *next_addr)
{
  struct mc_wait w = boot_wait(b);
  int next = (b->rank + 1) % b->n_ranks;
  int prev = (b->rank + b->n_ranks - 1) % b->n_ranks;
  int32_t me = b->rank;
  int32_t from = -1;
  struct mc_sock waiter;
  char why[128];
  char a[MC_SOCKADDR_STRLEN];
  ncclResult_t res;

  res = boot_connect(b, next_addr, b->magic, MC_SOCK_TYPE_BOOTSTRAP, &w, &b->ring_send, NULL);
  if (res == ncclSuccess)
    res = mc_sock_send_all(&b->ring_send, &me, sizeof(me), &w);
  if (res != ncclSuccess)
    return boot_fail(b, res, &b->ring_send, next, "connecting the bootstrap ring");
  res = boot_accept(b, &b->ring_listen, &w, &waiter, &b->ring_recv);
  if (res != ncclSuccess)
    return boot_fail(b, res, &waiter, prev, "waiting for the previous ring rank");
  res = mc_sock_recv_all(&b->ring_recv, &from, sizeof(from), &w);
  if (res != ncclSuccess)
    return boot_fail(b, res, &b->ring_recv, prev, "connecting the bootstrap ring");
  if (!mc_boot_ring_hello_check(from, prev, b->n_ranks, why, sizeof(why)))
    return MC_FAIL(ncclRemoteError, "Bootstrap: rank %d: protocol error from %s: %s", b->rank,
                   mc_sockaddr_str(&b->ring_recv.addr, a, sizeof(a)), why);
  return ncclSuccess;
}

/* What the allgather brought: host names terminated, p2p addresses usable. */
static ncclResult_t check_peers(struct mc_boot *b)
{
  char why[128];

  for (int i = 0; i < b->n_ranks; i++) {
    b->peers[i].host[MC_BOOT_HOST_BYTES - 1] = '\0';
    if (!mc_boot_addr_check(&b->peers[i].p2p, why, sizeof(why)))
      return MC_FAIL(ncclRemoteError,
                     "Bootstrap: rank %d: rank %d (host %s) announced an unusable p2p address: %s",
                     b->rank, i, b->peers[i].host, why);
  }
  return ncclSuccess;
}

static void ctl_send(struct mc_boot *b, uint32_t kind, ncclResult_t code, const char *text);

ncclResult_t mc_boot_init(const struct mc_boot_config *cfg, struct mc_boot **boot_out)
{
  struct mc_boot *b = NULL;
  struct mc_boot_handle h;
  union mc_sockaddr next_addr;
  struct mc_boot_peer me;
  ncclResult_t res;
  double t_start = mc_time_sec();
  double t0;
  int64_t threshold = mc_param_int(MC_P_UID_STAGGER_THRESHOLD);
  int first;
  int n_local;

  if ((cfg->n_ids > 1) && ((cfg->ids == NULL) || (cfg->n_ids > cfg->n_ranks)))
    return MC_FAIL(ncclInternalError, "Bootstrap: rank %d: %d roots for %d ranks", cfg->rank,
                   cfg->n_ids, cfg->n_ranks);
  MC_CHECK(mc_calloc(&b, 1));
  memcpy(&h, cfg->id.internal, sizeof(h));
  b->rank = cfg->rank;
  b->n_ranks = cfg->n_ranks;
  b->magic = h.magic;
  b->n_roots = (cfg->n_ids > 1) ? cfg->n_ids : 1;
  b->root_idx = mc_boot_root_of_rank(b->rank, b->n_ranks, b->n_roots);
  if (b->n_roots > 1) {
    struct mc_boot_handle hr;
    memcpy(&hr, cfg->ids[b->root_idx].internal, sizeof(hr));
    b->root_addr = hr.addr;
    mc_crypto_wipe(&hr, sizeof(hr));
  } else {
    b->root_addr = h.addr;
  }
  b->abort_flag = cfg->abort_flag;
  b->pid = (int)getpid();
  b->init_dl = mc_deadline_in_ms(cfg->timeout_ms);
  mc_host_name(b->host, sizeof(b->host));
  mc_sock_init(&b->ctl);
  mc_sock_init(&b->nbr);
  mc_sock_init(&b->ring_send);
  mc_sock_init(&b->ring_recv);
  mc_sock_init(&b->ring_listen.listener.sock);
  mc_sock_init(&b->p2p_listen.listener.sock);
  b->svc_wake_fd = -1;
  b->ready_fd = -1;
  service_sync_init(b);
  mc_boot_auth_key(h.secret, b->key);
  mc_crypto_wipe(&h, sizeof(h));
  first = mc_boot_root_first_rank(b->root_idx, b->n_ranks, b->n_roots);
  n_local = mc_boot_root_first_rank(b->root_idx + 1, b->n_ranks, b->n_roots) - first;

  (void)mc_boot_fd_limit_raise();
  t0 = mc_time_sec();
  MC_CHECK_GOTO(mc_boot_net_init(NULL, &b->ifc), res, fail);
  MC_CHECK_GOTO(boot_listen(b), res, fail);
  MC_CHECK_GOTO(service_start(b), res, fail);
  b->t.create = mc_time_sec() - t0;
  if (n_local > threshold) {
    /* Spread the registrations with a root that serves many ranks over time
     * (NCCL_UID_STAGGER_*), by this rank's place among them as NCCL does. */
    t0 = mc_time_sec();
    mc_sleep_ms_abortable((int)((b->rank - first) * 1000 / mc_param_int(MC_P_UID_STAGGER_RATE)),
                          b->abort_flag);
    b->t.delay = mc_time_sec() - t0;
  }
  MC_CHECK_GOTO(boot_register(b, cfg, &next_addr), res, fail);
  t0 = mc_time_sec();
  MC_CHECK_GOTO(boot_ring_connect(b, &next_addr), res, fail);
  b->t.ring = mc_time_sec() - t0;

  if (b->peers == NULL) { /* no table from the root: NCCL's ring allgather */
    MC_CHECK_GOTO(mc_calloc(&b->peers, (size_t)b->n_ranks), res, fail);
    memset(&me, 0, sizeof(me));
    me.p2p = b->p2p_listen.listener.sock.addr;
    me.pid = b->pid;
    snprintf(me.host, sizeof(me.host), "%s", b->host);
    b->peers[b->rank] = me;
    MC_CHECK_GOTO(mc_boot_allgather(b, b->peers, sizeof(*b->peers)), res, fail);
  }
  MC_CHECK_GOTO(check_peers(b), res, fail);
  b->t.total = mc_time_sec() - t_start;
  MC_INFO(MC_SUB_BOOTSTRAP | MC_SUB_PROFILE,
          "Bootstrap timings total %f (create %f, send %f, recv %f, ring %f, delay %f)", b->t.total,
          b->t.create, b->t.send, b->t.recv, b->t.ring, b->t.delay);
  *boot_out = b;
  return ncclSuccess;

fail:
  /* With several roots, say why to the roots this rank reached: the groups
   * whose ranks wait for this one learn it now, not at their timeout. (One
   * root sees the closed connection: the single-root behaviour is kept,
   * except for a local failure of this process, out of file descriptors
   * say, which only this rank can name.) */
  if (((b->n_roots > 1) || (res == ncclSystemError)) &&
      ((b->abort_flag == NULL) || (*b->abort_flag == 0))) {
    char why[MC_BOOT_TEXT_BYTES];
    mc_error_last_copy(why, sizeof(why));
    ctl_send(b, MC_BOOT_CTL_FAIL, res, why);
  }
  mc_boot_destroy(b);
  return res;
}

static void link_send(struct mc_boot *b, struct mc_sock *s, uint32_t kind, ncclResult_t code,
                      const char *text)
{
  struct mc_wait w = mc_boot_wait_make(ROOT_EXPLAIN_WAIT_MS, NULL);
  struct mc_boot_ctl m;

  if (s->fd < 0)
    return;
  memset(&m, 0, sizeof(m));
  m.kind = kind;
  m.version = NCCL_VERSION_CODE;
  m.rank = b->rank;
  m.n_ranks = b->n_ranks;
  m.code = code;
  m.pid = b->pid;
  snprintf(m.host, sizeof(m.host), "%s", b->host);
  snprintf(m.text, sizeof(m.text), "%s", (text != NULL) ? text : "");
  (void)mc_sock_send_msg(s, &m, sizeof(m), &w);
  mc_sock_close(s);
}

/* The end of init, to every root this rank is connected to: a failure
 * reported on both crosses from one group to the next (boot_root.c). */
static void ctl_send(struct mc_boot *b, uint32_t kind, ncclResult_t code, const char *text)
{
  link_send(b, &b->ctl, kind, code, text);
  link_send(b, &b->nbr, kind, code, text);
}

void mc_boot_init_done(struct mc_boot *b)
{
  if (b != NULL)
    ctl_send(b, MC_BOOT_CTL_DONE, ncclSuccess, NULL);
}

void mc_boot_init_failed(struct mc_boot *b, ncclResult_t res, const char *why)
{
  if (b != NULL)
    ctl_send(b, MC_BOOT_CTL_FAIL, res, why);
}

const struct mc_boot_timings *mc_boot_timings(const struct mc_boot *b)
{
  return &b->t;
}

const char *mc_boot_peer_host(const struct mc_boot *b, int rank)
{
  return b->peers[rank].host;
}

int mc_boot_peer_pid(const struct mc_boot *b, int rank)
{
  return b->peers[rank].pid;
}

const struct mc_ifc *mc_boot_ifc(const struct mc_boot *b)
{
  return &b->ifc;
}

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
  res = boot_fail(b, res, s, peer, "in a bootstrap allgather");
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
  struct mc_wait w = boot_wait(b);
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

/* A new authenticated connection to peer's p2p listener. */
static ncclResult_t p2p_dial(struct mc_boot *b, int peer, struct mc_sock *s)
{
  struct mc_wait w = boot_wait(b);
  ncclResult_t res;

  if ((peer < 0) || (peer >= b->n_ranks))
    return MC_FAIL(ncclInvalidArgument, "Bootstrap: rank %d: send to rank %d of %d", b->rank, peer,
                   b->n_ranks);
  res = boot_connect(b, &b->peers[peer].p2p, b->magic, MC_SOCK_TYPE_BOOTSTRAP, &w, s, NULL);
  if (res != ncclSuccess) {
    res = boot_fail(b, res, s, peer, "sending a bootstrap message");
    mc_sock_close(s);
  }
  return res;
}

/* A dedicated connection to peer announcing a stream with tag (allgather_sub). */
static ncclResult_t p2p_stream_connect(struct mc_boot *b, int peer, int tag, struct mc_sock *s)
{
  struct mc_boot_p2p_header hdr = {.rank = b->rank, .tag = tag, .bytes = MC_BOOT_STREAM_BYTES};
  struct mc_wait w;
  ncclResult_t res;

  MC_CHECK(p2p_dial(b, peer, s));
  w = boot_wait(b);
  res = mc_sock_send_all(s, &hdr, sizeof(hdr), &w);
  if (res != ncclSuccess) {
    res = boot_fail(b, res, s, peer, "sending a bootstrap message");
    mc_sock_close(s);
  }
  return res;
}

/* The open connection to peer, dialled when there is none; when OUT_CONNS_MAX
 * are open, the least recently used is closed first (its receiver reads the
 * end of the stream after the last message and forgets it). */
static ncclResult_t out_conn_get(struct mc_boot *b, int peer, struct out_conn **oc_out)
{
  struct out_conn *oc = NULL;
  ncclResult_t res_fail;

  for (int i = 0; i < b->n_out; i++) {
    if (b->out[i].peer == peer) {
      oc = &b->out[i];
      break;
    }
  }
  if (oc == NULL) {
    if (b->n_out == OUT_CONNS_MAX) {
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

static void out_conn_drop(struct mc_boot *b, struct out_conn *oc)
{
  mc_sock_close(&oc->s);
  *oc = b->out[--b->n_out];
}

ncclResult_t mc_boot_send(struct mc_boot *b, int peer, int tag, const void *data, size_t bytes)
{
  struct mc_boot_p2p_header hdr = {.rank = b->rank, .tag = tag, .bytes = (uint32_t)bytes};
  uint8_t small[512];
  struct out_conn *oc;
  struct mc_wait w;
  ncclResult_t res;

  if (bytes > MC_BOOT_MAX_MSG_BYTES)
    return MC_FAIL(ncclInvalidArgument, "Bootstrap: message of %zu bytes is too large", bytes);
  MC_CHECK(out_conn_get(b, peer, &oc));
  w = boot_wait(b);
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
    res = boot_fail(b, res, &oc->s, peer, "sending a bootstrap message");
    out_conn_drop(b, oc);
  }
  return res;
}

/* Adds the connections the service has authenticated to the incoming ones. */
static ncclResult_t in_conns_take(struct mc_boot *b)
{
  uint64_t n;
  struct mc_sock s;

  if (read(b->ready_fd, &n, sizeof(n)) < 0) /* EAGAIN: nothing signalled */
    n = 0;
  for (;;) {
    bool got;
    if (b->n_in == b->cap_in) {
      int cap = (b->cap_in > 0) ? 2 * b->cap_in : 16;
      struct in_conn *in = realloc(b->in, (size_t)cap * sizeof(*in));
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

static ncclResult_t unexp_add(struct mc_boot *b, const struct mc_boot_p2p_header *hdr,
                              struct mc_sock *stream, void *data)
{
  struct unexpected **pp;
  struct unexpected *u = NULL;

  if ((b->n_unexp >= MAX_UNEXPECTED) || (mc_calloc(&u, 1) != ncclSuccess)) {
    if (stream != NULL)
      mc_sock_close(stream);
    free(data);
    return MC_FAIL(ncclInternalError, "Bootstrap: rank %d: more than %d unexpected messages",
                   b->rank, MAX_UNEXPECTED);
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

/* The expected message: a payload of `bytes` into data, or a stream's
 * connection into *stream (then data is NULL). */
struct p2p_want {
  int peer; /* -1: any rank */
  int tag;
  void *data;
  size_t bytes;
  struct mc_sock *stream;
};

/* A message that is (peer, tag) but not what was asked (size, or a stream
 * where a message was asked or the reverse): the ranks disagree. */
static ncclResult_t want_mismatch(const struct mc_boot *b, const struct p2p_want *wt,
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

static bool want_fits(const struct p2p_want *wt, const struct mc_boot_p2p_header *hdr)
{
  if (wt->stream != NULL)
    return hdr->bytes == MC_BOOT_STREAM_BYTES;
  return hdr->bytes == wt->bytes;
}

/* The expected message from the unexpected queue: 1 found, 0 not there. */
static int unexp_take(struct mc_boot *b, const struct p2p_want *wt, ncclResult_t *res)
{
  for (struct unexpected **pp = &b->unexp; *pp != NULL; pp = &(*pp)->next) {
    struct unexpected *u = *pp;
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
static bool in_header_check(const struct in_conn *c, const struct mc_boot_p2p_header *hdr,
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

/*
 * Reads the next message off incoming connection i (it is readable): 1 when
 * it was the expected one (delivered, or *res says how it did not fit), 0
 * when it went to the unexpected queue or the connection ended (its sender
 * closed it after its last message, or broke it: the sender reports its
 * own failure), -1 when the wait ended (*res).
 */
static int in_conn_read(struct mc_boot *b, int i, const struct p2p_want *wt,
                        const struct mc_wait *w, ncclResult_t *res)
{
  struct in_conn *c = &b->in[i];
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
  is_mine = ((wt->peer < 0) || (hdr.rank == wt->peer)) && (hdr.tag == wt->tag);
  if (hdr.bytes == MC_BOOT_STREAM_BYTES) { /* a dedicated connection: it leaves the list */
    struct mc_sock stream = c->s;
    in_conn_remove(b, i, false);
    if (!is_mine) {
      *res = unexp_add(b, &hdr, &stream, NULL);
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
    *res = boot_fail(b, *res, &c->s, hdr.rank, "receiving a bootstrap message");
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
  *res = unexp_add(b, &hdr, NULL, buf);
  return (*res == ncclSuccess) ? 0 : 1;
}

/* Waits for the expected message, queueing every other one that comes first. */
static ncclResult_t p2p_wait(struct mc_boot *b, const struct p2p_want *wt)
{
  struct mc_wait w;
  struct mc_sock waiter;
  ncclResult_t res = ncclSuccess;

  if (unexp_take(b, wt, &res))
    return res;
  /* One deadline for the whole receive, however many other messages arrive first. */
  w = boot_wait(b);
  mc_sock_init(&waiter);
  waiter.addr = b->p2p_listen.listener.sock.addr;
  for (int tick = ACCEPT_TICK_MS;;) {
    int n;

    MC_CHECK(in_conns_take(b));
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
    tick =
        (n != 0) ? ACCEPT_TICK_MS : ((2 * tick > WAIT_TICK_MAX_MS) ? WAIT_TICK_MAX_MS : 2 * tick);
    /* Highest first: a removal moves the last connection into the hole. */
    for (int i = b->n_in - 1; (n > 0) && (i >= 0); i--) {
      int st;
      if (b->in_pfd[i + 1].revents == 0)
        continue;
      st = in_conn_read(b, i, wt, &w, &res);
      if (st > 0)
        return res;
      if (st < 0)
        return boot_fail(b, res, &b->in[i].s, wt->peer, "waiting for a bootstrap message");
    }
    res = mc_sock_wait_check(&waiter, &w, "waiting for a connection on");
    if (res != ncclSuccess)
      return boot_fail(b, res, &waiter, wt->peer, "waiting for a bootstrap message");
  }
}

ncclResult_t mc_boot_recv(struct mc_boot *b, int peer, int tag, void *data, size_t bytes)
{
  struct p2p_want wt = {.peer = peer, .tag = tag, .data = data, .bytes = bytes, .stream = NULL};

  return p2p_wait(b, &wt);
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
    struct mc_wait w = mc_boot_wait_make(ROOT_EXPLAIN_WAIT_MS, NULL);
    struct mc_sock s;
    if ((r == b->rank) || (r == skip))
      continue;
    mc_sock_init(&s);
    if (boot_connect(b, &b->peers[r].p2p, b->magic, MC_SOCK_TYPE_BOOTSTRAP, &w, &s, NULL) ==
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
  return unexp_add(b, &hdr, NULL, copy);
}

/* The notice of another rank that left the running allgather over all
 * ranks, as this rank's error; notices of earlier ones are dropped. The
 * wait check of that allgather after init. */
static ncclResult_t notice_check(void *arg)
{
  struct mc_boot *b = arg;
  struct fail_notice n;
  struct p2p_want wt = {.peer = -1, .tag = FAIL_TAG, .data = &n, .bytes = sizeof(n)};
  struct mc_wait w = mc_boot_wait_make(ROOT_EXPLAIN_WAIT_MS, b->abort_flag);
  ncclResult_t res = ncclSuccess;
  int left = b->n_unexp; /* each queued one looked at once */
  bool got = false;

  /* Queued ones first; one of a later allgather (its sender went on
   * before this rank) goes back for that allgather's wait. */
  while (!got && (left-- > 0) && unexp_take(b, &wt, &res)) {
    got = (res == ncclSuccess) && (n.seq == b->world_seq);
    if ((res == ncclSuccess) && (n.seq > b->world_seq))
      MC_CHECK(notice_keep(b, &n));
  }
  MC_CHECK(in_conns_take(b));
  for (int i = b->n_in - 1; !got && (i >= 0); i--) {
    struct pollfd p = {.fd = b->in[i].s.fd, .events = POLLIN, .revents = 0};
    if ((poll(&p, 1, 0) <= 0) || (in_conn_read(b, i, &wt, &w, &res) <= 0))
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
  struct p2p_want wt = {0};
  ncclResult_t res;
  int next = ranks[(my_index + 1) % n];
  int prev = ranks[(my_index + n - 1) % n];

  if (n == 1)
    return ncclSuccess;
  if (slice_bytes > MC_BOOT_MAX_MSG_BYTES / (size_t)n)
    return MC_FAIL(ncclInvalidArgument, "Bootstrap: allgather of %zu bytes per rank is too large",
                   slice_bytes);
  MC_CHECK(p2p_stream_connect(b, next, tag, &snd));
  mc_sock_init(&rcv);
  wt.peer = prev;
  wt.tag = tag;
  wt.stream = &rcv;
  res = p2p_wait(b, &wt);
  if (res == ncclSuccess)
    res = ring_allgather(b, &snd, &rcv, n, my_index, ranks, data, slice_bytes);
  mc_sock_close(&snd);
  mc_sock_close(&rcv);
  return res;
}

void mc_boot_destroy(struct mc_boot *b)
{
  if (b == NULL)
    return;
  while (b->unexp != NULL) {
    struct unexpected *u = b->unexp;
    b->unexp = u->next;
    mc_sock_close(&u->sock);
    free(u->data);
    free(u);
  }
  while (b->n_out > 0)
    out_conn_drop(b, &b->out[b->n_out - 1]);
  while (b->n_in > 0)
    in_conn_remove(b, b->n_in - 1, true);
  free(b->in);
  free(b->in_pfd);
  service_stop(b);
  mc_sock_close(&b->ctl);
  mc_sock_close(&b->nbr);
  mc_sock_close(&b->ring_send);
  mc_sock_close(&b->ring_recv);
  mc_boot_acceptor_close(&b->ring_listen);
  mc_boot_acceptor_close(&b->p2p_listen);
  pthread_cond_destroy(&b->svc_cond);
  pthread_mutex_destroy(&b->svc_lock);
  mc_crypto_wipe(b->key, sizeof(b->key));
  free(b->peers);
  free(b);
}
