/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rank object of the bootstrap: its creation, its listeners and their
 * service thread, registration with the root(s), the ring, and its end.
 * Mirrors NCCL's bootstrapInit and bootstrapClose/bootstrapAbort
 * (bootstrap.cc):
 *   listeners (ring, p2p) -> stagger -> register with the root -> next rank's
 *   address -> ring connect -> ring allgather of {p2p address, host, pid}.
 * Unlike NCCL, one root of at most MESHCCL_BOOT_TABLE_MAX_RANKS ranks sends
 * every rank that table after the next rank's address (boot_root.c,
 * send_all_next), and the ring allgather is skipped. Point-to-point messages
 * are boot_p2p.c's, the collectives over the ring boot_coll.c's; what the
 * three share is boot_rank_int.h.
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
#include "boot_rank_int.h"
#include "check.h"
#include "log.h"
#include "params.h"
#include "utils.h"

_Static_assert(sizeof(struct mc_boot_handle) <= NCCL_UNIQUE_ID_BYTES, "handle fits the id");
_Static_assert(offsetof(struct mc_boot_handle, addr) == 8, "NCCL's handle layout");
_Static_assert(offsetof(struct mc_boot_handle, n_ranks) == 36, "NCCL's handle layout");
_Static_assert(sizeof(union mc_sockaddr) == 28, "NCCL's ncclSocketAddress size");

#define RING_MAX_PENDING 64  /* connections authenticating at the ring listener */
#define SERVICE_IDLE_MS  100 /* the listener service's sleep while a connection may expire */
/* With several roots, a rank that cannot reach a root gives up this long
 * before init's deadline, so that its notice crosses to the other groups
 * (through the previous root) before their ranks give up on their own. */
#define ROOT_REACH_MARGIN_MS 3000
/* The first rank of a group whose own root failed the job while it joins the
 * previous group's root: how much longer it tries, to pass the cause on. */
#define ROOT_PASS_ON_MS 2000

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
  for (int tick = MC_WAIT_TICK_MS;;) {
    struct timespec until;
    bool got;
    ncclResult_t res;
    int woke = 1;

    pthread_mutex_lock(&b->svc_lock);
    got = mc_boot_acceptor_take(acc, conn_out);
    pthread_mutex_unlock(&b->svc_lock);
    if (got)
      return ncclSuccess;
    res = mc_sock_wait_check(waiter, w, "waiting for a connection on");
    if (res != ncclSuccess)
      return res;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += (long)mc_deadline_left_ms(w->dl, tick) * 1000000L;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    pthread_mutex_lock(&b->svc_lock);
    if (!mc_boot_acceptor_has_ready(acc))
      woke = (pthread_cond_timedwait(&b->svc_cond, &b->svc_lock, &until) == 0);
    pthread_mutex_unlock(&b->svc_lock);
    tick = mc_wait_tick_next(tick, woke);
  }
}

/* Connects and authenticates to a peer (or the root). */
ncclResult_t mc_boot_rank_connect(struct mc_boot *b, const union mc_sockaddr *to, uint64_t magic,
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
  struct mc_wait w = mc_boot_wait_make(MC_BOOT_EXPLAIN_WAIT_MS, b->abort_flag);
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

struct mc_wait mc_boot_rank_wait(struct mc_boot *b)
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
ncclResult_t mc_boot_rank_fail(struct mc_boot *b, ncclResult_t res, const struct mc_sock *s,
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
    struct mc_deadline dl = mc_deadline_in_ms(MC_BOOT_EXPLAIN_WAIT_MS);
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
                            RING_MAX_PENDING, MC_BOOT_MAX_UNEXPECTED, what) != ncclSuccess)
    return MC_FAIL(ncclSystemError, "Bootstrap: rank %d: ring listener on %s: %s", b->rank,
                   b->ifc.name, b->ring_listen.listener.sock.err);
  snprintf(what, sizeof(what), "rank %d p2p listener", b->rank);
  if (mc_boot_acceptor_open(&b->p2p_listen, &local, b->magic, MC_SOCK_TYPE_BOOTSTRAP, b->key,
                            mc_boot_max_pending(), MC_BOOT_MAX_UNEXPECTED, what) != ncclSuccess)
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
    return mc_boot_rank_fail(b, res, s, -1, "registering with the bootstrap root");
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
  struct mc_wait w = mc_boot_rank_wait(b);
  int next = (b->rank + 1) % b->n_ranks;
  int prev = (b->rank + b->n_ranks - 1) % b->n_ranks;
  int32_t me = b->rank;
  int32_t from = -1;
  struct mc_sock waiter;
  char why[128];
  char a[MC_SOCKADDR_STRLEN];
  ncclResult_t res;

  res =
      mc_boot_rank_connect(b, next_addr, b->magic, MC_SOCK_TYPE_BOOTSTRAP, &w, &b->ring_send, NULL);
  if (res == ncclSuccess)
    res = mc_sock_send_all(&b->ring_send, &me, sizeof(me), &w);
  if (res != ncclSuccess)
    return mc_boot_rank_fail(b, res, &b->ring_send, next, "connecting the bootstrap ring");
  res = boot_accept(b, &b->ring_listen, &w, &waiter, &b->ring_recv);
  if (res != ncclSuccess)
    return mc_boot_rank_fail(b, res, &waiter, prev, "waiting for the previous ring rank");
  res = mc_sock_recv_all(&b->ring_recv, &from, sizeof(from), &w);
  if (res != ncclSuccess)
    return mc_boot_rank_fail(b, res, &b->ring_recv, prev, "connecting the bootstrap ring");
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
  struct mc_wait w = mc_boot_wait_make(MC_BOOT_EXPLAIN_WAIT_MS, NULL);
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

void mc_boot_destroy(struct mc_boot *b)
{
  if (b == NULL)
    return;
  mc_boot_p2p_close(b);
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
  free(b->bye_ns);
  free(b);
}
