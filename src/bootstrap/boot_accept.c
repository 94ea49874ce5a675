/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Authenticated bootstrap connections: the acceptor that the root and every
 * rank's ring and p2p listeners use, and the connecting side. NCCL's
 * bootstrap (bootstrap.cc, misc/socket.cc ncclSocketAccept) accepts whoever
 * presents the socket magic, and reads each connection to completion before
 * the next; here a connection counts only once it proved, by HMAC-SHA256
 * over nonces of both sides, that it knows the secret of the unique id
 * (bootstrap_int.h gives the exchange), and the acceptor never waits on one
 * connection: the listening socket and every pending connection are polled
 * together, each pending connection has a deadline, and their number is
 * bounded (the oldest unauthenticated one makes room for a newcomer). A
 * stranger is closed and logged with its address; it never reaches the
 * caller, so it can neither count as a rank nor be blamed on one.
 */
#include "bootstrap_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "params.h"
#include "utils.h"

#define AUTH_WINDOW_MS     5000 /* a connection must authenticate within this */
#define ACCEPT_BATCH       64   /* connections taken from the backlog per progress call */
#define LIMIT_PAUSE_MS     100  /* no accept() for this long after EMFILE/ENFILE/ENOBUFS */
#define MAX_DROP_LOGS      20   /* dropped connections logged one by one, then one line in 1000 */
#define RETRY_FIRST_MS     5
#define RETRY_MAX_PAUSE_MS 500
#define MAX_PENDING        1024 /* mc_boot_max_pending: fewer under a low fd limit */
#define MIN_PENDING        16

/* TCP_USER_TIMEOUT of bootstrap connections, in ms per second of
 * MESHCCL_NET_TIMEOUT: the socket net's rule (net_socket.c), so that one
 * bound says when a silent peer host counts as down. */
#define LIVENESS_PER_MILLE 1500

enum pend_state { PEND_HELLO, PEND_PROOF, PEND_READY };

static const char *addr_str(const union mc_sockaddr *a, char *buf)
{
  return mc_sockaddr_str(a, buf, MC_SOCKADDR_STRLEN);
}

/* ---------- acceptor ---------- */

/* Room for one more connection; false when the set may not grow. */
static bool make_room(struct mc_boot_acceptor *a)
{
  int cap = (a->cap == 0) ? 16 : 2 * a->cap;
  struct mc_boot_pending *pend;
  struct pollfd *pfd;

  if (a->n_pend < a->cap)
    return true;
  if (cap > a->max_pend + a->max_ready)
    cap = a->max_pend + a->max_ready;
  if (cap <= a->cap)
    return false;
  pend = realloc(a->pend, (size_t)cap * sizeof(*pend));
  if (pend == NULL)
    return false;
  a->pend = pend;
  pfd = realloc(a->pfd, (size_t)(cap + 1) * sizeof(*pfd));
  if (pfd == NULL)
    return false;
  a->pfd = pfd;
  a->cap = cap;
  return true;
}

ncclResult_t mc_boot_acceptor_open(struct mc_boot_acceptor *a, const union mc_sockaddr *local,
                                   uint64_t magic, uint32_t type,
                                   const uint8_t key[MC_BOOT_KEY_BYTES], int max_pend,
                                   int max_ready, const char *what)
{
  ncclResult_t res;

  memset(a, 0, sizeof(*a));
  mc_sock_init(&a->listener.sock);
  res = mc_sock_listen(local, magic, type, &a->listener);
  if (res != ncclSuccess)
    return res;
  a->max_pend = max_pend;
  a->max_ready = max_ready;
  if (!make_room(a)) {
    mc_boot_acceptor_close(a);
    snprintf(a->listener.sock.err, sizeof(a->listener.sock.err),
             "out of memory for pending connections");
    return ncclSystemError;
  }
  memcpy(a->key, key, sizeof(a->key));
  snprintf(a->what, sizeof(a->what), "%s", what);
  a->window_ns = (uint64_t)AUTH_WINDOW_MS * 1000000ull;
  return ncclSuccess;
}

int mc_boot_acceptor_n_fds(const struct mc_boot_acceptor *a)
{
  return (a->listener.sock.fd >= 0) ? 1 + a->n_pend : 0;
}

void mc_boot_acceptor_close(struct mc_boot_acceptor *a)
{
  char at[MC_SOCKADDR_STRLEN];

  if (a == NULL)
    return;
  for (int i = 0; i < a->n_pend; i++)
    close(a->pend[i].fd);
  if (a->n_dropped > MAX_DROP_LOGS)
    MC_INFO(MC_SUB_BOOTSTRAP, "Bootstrap: %s %s: %llu connections dropped in all (%llu evicted)",
            a->what, addr_str(&a->listener.sock.addr, at), (unsigned long long)a->n_dropped,
            (unsigned long long)a->n_evicted);
  a->n_pend = 0;
  a->n_unauth = 0;
  a->n_dropped = 0;
  a->cap = 0;
  free(a->pend);
  a->pend = NULL;
  free(a->pfd);
  a->pfd = NULL;
  mc_crypto_wipe(a->key, sizeof(a->key));
  mc_listener_close(&a->listener);
}

/* Closes pending connection i, says why (rate-limited: a flood must not
 * flood the log too), and fills its slot with the last one. */
static void drop(struct mc_boot_acceptor *a, int i, bool is_warn, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void drop(struct mc_boot_acceptor *a, int i, bool is_warn, const char *fmt, ...)
{
  struct mc_boot_pending *p = &a->pend[i];
  char from[MC_SOCKADDR_STRLEN];
  char at[MC_SOCKADDR_STRLEN];
  char why[256];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  a->n_dropped++;
  addr_str(&p->peer, from);
  addr_str(&a->listener.sock.addr, at);
  if (is_warn && !a->is_proof_warned) {
    a->is_proof_warned = true;
    MC_WARN("Bootstrap: %s %s: dropped connection from %s: %s", a->what, at, from, why);
  } else if ((a->n_dropped <= MAX_DROP_LOGS) || (a->n_dropped % 1000 == 0)) {
    MC_INFO(MC_SUB_BOOTSTRAP | MC_SUB_INIT, "Bootstrap: %s %s: dropped connection from %s: %s%s",
            a->what, at, from, why,
            (a->n_dropped == MAX_DROP_LOGS) ? " (further drops: one line per 1000)" : "");
  }
  if (p->state != PEND_READY)
    a->n_unauth--;
  close(p->fd);
  a->pend[i] = a->pend[a->n_pend - 1];
  a->n_pend--;
}

/* Sends a whole small message on a fresh connection without waiting: its
 * socket buffer is empty, so anything short of all of it is a failure. */
static bool send_now(int fd, const void *buf, size_t bytes)
{
  return send(fd, buf, bytes, MSG_DONTWAIT | MSG_NOSIGNAL) == (ssize_t)bytes;
}

static void hello_complete(struct mc_boot_acceptor *a, int i)
{
  struct mc_boot_pending *p = &a->pend[i];
  uint8_t challenge[MC_BOOT_CHALLENGE_BYTES];

  if (mc_random_bytes(p->auth.ns, sizeof(p->auth.ns)) != ncclSuccess) {
    drop(a, i, false, "no random bytes for a challenge");
    return;
  }
  mc_boot_auth_challenge_build(&p->auth, challenge);
  if (!send_now(p->fd, challenge, sizeof(challenge))) {
    drop(a, i, false, "cannot send the challenge: %s", strerror(errno));
    return;
  }
  p->state = PEND_PROOF;
  p->got = 0;
}

static void proof_complete(struct mc_boot_acceptor *a, int i)
{
  struct mc_boot_pending *p = &a->pend[i];
  uint8_t verdict[MC_BOOT_VERDICT_BYTES];
  bool ok = mc_boot_auth_proof_check(a->key, &p->auth, p->buf, p->got);

  mc_boot_auth_verdict_build(a->key, &p->auth, ok, verdict);
  if (!ok) {
    /* Said to the client too, so that a rank given another secret fails
     * at once with a clear message instead of retrying. */
    (void)send_now(p->fd, verdict, sizeof(verdict));
    drop(a, i, true,
         "wrong proof of the job's secret: a process outside the job, or a rank given another "
         "MESHCCL_SECRET or unique id");
    return;
  }
  if (!send_now(p->fd, verdict, sizeof(verdict))) {
    drop(a, i, false, "cannot send the verdict: %s", strerror(errno));
    return;
  }
  p->state = PEND_READY;
  a->n_unauth--;
}

/* Reads what pending connection i sent (never more than its current step
 * needs: what follows belongs to the caller) and moves it on. */
static void progress_one(struct mc_boot_acceptor *a, int i)
{
  struct mc_boot_pending *p = &a->pend[i];
  size_t want = ((p->state == PEND_HELLO) ? MC_BOOT_HELLO_BYTES : MC_BOOT_PROOF_BYTES) - p->got;
  char why[256];
  ssize_t n;
  int st;

  if (p->state == PEND_READY)
    return;
  n = recv(p->fd, p->buf + p->got, want, MSG_DONTWAIT);
  if (n == 0) {
    drop(a, i, false, "closed after %zu bytes of its %s", p->got,
         (p->state == PEND_HELLO) ? "hello" : "proof");
    return;
  }
  if (n < 0) {
    if ((errno != EAGAIN) && (errno != EWOULDBLOCK) && (errno != EINTR))
      drop(a, i, false, "recv: %s", strerror(errno));
    return;
  }
  p->got += (size_t)n;
  if (p->state == PEND_PROOF) {
    if (p->got == MC_BOOT_PROOF_BYTES)
      proof_complete(a, i);
    return;
  }
  st = mc_boot_auth_hello_parse(&p->auth, p->buf, p->got, why, sizeof(why));
  if (st < 0)
    drop(a, i, false, "%s", why);
  else if (st > 0)
    hello_complete(a, i);
}

/* Index of the oldest connection that has not authenticated, or -1. */
static int oldest_unauthenticated(const struct mc_boot_acceptor *a)
{
  int best = -1;

  for (int i = 0; i < a->n_pend; i++) {
    if ((a->pend[i].state != PEND_READY) &&
        ((best < 0) || (a->pend[i].since_ns < a->pend[best].since_ns)))
      best = i;
  }
  return best;
}

static void warn_fd_limit(struct mc_boot_acceptor *a, int e)
{
  char why[MC_BOOT_TEXT_BYTES];

  if (a->is_limit_warned)
    return;
  a->is_limit_warned = true;
  __atomic_store_n(&a->fd_limit_errno, e, __ATOMIC_RELEASE);
  (void)mc_boot_acceptor_fd_error(a, why, sizeof(why));
  MC_WARN("Bootstrap: %s; init fails", why);
}

bool mc_boot_acceptor_fd_error(const struct mc_boot_acceptor *a, char *why, size_t why_bytes)
{
  int e = __atomic_load_n(&a->fd_limit_errno, __ATOMIC_ACQUIRE);
  char at[MC_SOCKADDR_STRLEN];
  char hint[MC_FD_HINT_BYTES];

  if (e == 0)
    return false;
  snprintf(why, why_bytes, "%s %s cannot accept connections: accept: %s%s", a->what,
           addr_str(&a->listener.sock.addr, at), strerror(e),
           mc_fd_limit_hint(e, hint, sizeof(hint)));
  return true;
}

/* Handles a failed accept4; returns true when accepting may go on now. */
static bool accept_failed(struct mc_boot_acceptor *a, int e)
{
  char at[MC_SOCKADDR_STRLEN];

  switch (e) {
  case EAGAIN:
#if EWOULDBLOCK != EAGAIN
  case EWOULDBLOCK:
#endif
    return false;
  case EINTR:
  case ECONNABORTED:
  case EPROTO:
  case EPERM:
  case ENETDOWN:
  case ENOPROTOOPT:
  case EHOSTDOWN:
  case ENONET:
  case EHOSTUNREACH:
  case EOPNOTSUPP:
  case ENETUNREACH:
    return true; /* that connection is gone (accept(2): treat like EAGAIN, retry) */
  case EMFILE:
  case ENFILE:
    warn_fd_limit(a, e);
    break;
  default:
    MC_INFO(MC_SUB_BOOTSTRAP, "Bootstrap: %s %s: accept: %s: pausing %d ms", a->what,
            addr_str(&a->listener.sock.addr, at), strerror(e), LIMIT_PAUSE_MS);
    break;
  }
  /* The listening socket stays readable: without a pause the caller's
   * poll would return at once, forever. */
  a->paused_until_ns = mc_time_ns() + (uint64_t)LIMIT_PAUSE_MS * 1000000ull;
  return false;
}

static void accept_new(struct mc_boot_acceptor *a)
{
  for (int k = 0; k < ACCEPT_BATCH; k++) {
    struct mc_boot_pending *p;
    union mc_sockaddr peer;
    socklen_t len = sizeof(peer);
    int victim = -1;
    int fd;

    if (mc_time_ns() < a->paused_until_ns)
      return;
    if (a->n_unauth == a->max_pend) {
      victim = oldest_unauthenticated(a);
    } else if (!make_room(a)) {
      /* Full of authenticated connections (the caller takes them first),
       * or out of memory: new ones wait in the backlog. */
      if (a->n_pend < a->max_pend + a->max_ready)
        a->paused_until_ns = mc_time_ns() + (uint64_t)LIMIT_PAUSE_MS * 1000000ull;
      return;
    }
    memset(&peer, 0, sizeof(peer));
    fd = accept4(a->listener.sock.fd, &peer.sa, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd == -1) {
      if (accept_failed(a, errno))
        continue;
      return;
    }
    if (victim >= 0) {
      a->n_evicted++;
      drop(a, victim, false,
           "evicted: %d connections pending and a newer one arrived before it authenticated",
           a->max_pend);
    }
    a->n_unauth++;
    p = &a->pend[a->n_pend++];
    memset(p, 0, sizeof(*p));
    p->fd = fd;
    p->peer = peer;
    p->state = PEND_HELLO;
    p->since_ns = mc_time_ns();
    p->auth.magic = a->listener.sock.magic;
    p->auth.type = a->listener.sock.type;
  }
}

int mc_boot_acceptor_pollfds(const struct mc_boot_acceptor *a, struct pollfd *pfd)
{
  bool can_accept = (mc_time_ns() >= a->paused_until_ns) &&
                    ((a->n_unauth == a->max_pend) || (a->n_pend < a->max_pend + a->max_ready));

  pfd[0].fd = can_accept ? a->listener.sock.fd : -1;
  pfd[0].events = POLLIN;
  pfd[0].revents = 0;
  for (int i = 0; i < a->n_pend; i++) {
    /* Authenticated connections wait for the caller: their data is its. */
    pfd[1 + i].fd = (a->pend[i].state == PEND_READY) ? -1 : a->pend[i].fd;
    pfd[1 + i].events = POLLIN;
    pfd[1 + i].revents = 0;
  }
  return 1 + a->n_pend;
}

void mc_boot_acceptor_progress(struct mc_boot_acceptor *a, const struct pollfd *pfd, int n_pfd)
{
  uint64_t now;

  if (a->listener.sock.fd < 0)
    return;
  if (pfd == NULL) {
    /* Look first: accept() fails with EMFILE when the process is out of
     * fds even if nobody is connecting, and would warn for nothing. */
    n_pfd = mc_boot_acceptor_pollfds(a, a->pfd);
    if (poll(a->pfd, (nfds_t)n_pfd, 0) <= 0)
      n_pfd = 0;
    pfd = a->pfd;
  }
  /* Highest index first: a dropped connection's slot gets the last one,
   * which has been seen already. */
  for (int i = a->n_pend - 1; i >= 0; i--) {
    if ((1 + i < n_pfd) && (pfd[1 + i].revents != 0))
      progress_one(a, i);
  }
  now = mc_time_ns();
  for (int i = a->n_pend - 1; i >= 0; i--) {
    struct mc_boot_pending *p = &a->pend[i];
    if ((p->state != PEND_READY) && (now > p->since_ns) && (now - p->since_ns > a->window_ns))
      drop(a, i, false, "did not authenticate within %d ms (%zu bytes of its %s received)",
           AUTH_WINDOW_MS, p->got, (p->state == PEND_HELLO) ? "hello" : "proof");
  }
  if ((n_pfd > 0) && (pfd[0].revents != 0))
    accept_new(a);
}

bool mc_boot_acceptor_is_timed(const struct mc_boot_acceptor *a)
{
  return (a->n_unauth > 0) || (mc_time_ns() < a->paused_until_ns);
}

bool mc_boot_acceptor_has_ready(const struct mc_boot_acceptor *a)
{
  return a->n_pend > a->n_unauth;
}

bool mc_boot_acceptor_take(struct mc_boot_acceptor *a, struct mc_sock *conn_out)
{
  int best = -1;
  struct mc_boot_pending p;

  for (int i = 0; i < a->n_pend; i++) {
    if ((a->pend[i].state == PEND_READY) &&
        ((best < 0) || (a->pend[i].since_ns < a->pend[best].since_ns)))
      best = i;
  }
  if (best < 0)
    return false;
  p = a->pend[best];
  a->pend[best] = a->pend[a->n_pend - 1];
  a->n_pend--;
  mc_sock_adopt(conn_out, p.fd, &p.peer, a->listener.sock.magic, a->listener.sock.type);
  mc_boot_sock_liveness(conn_out);
  return true;
}

ncclResult_t mc_boot_acceptor_accept(struct mc_boot_acceptor *a, const struct mc_wait *w,
                                     struct mc_sock *conn_out)
{
  for (int tick = MC_WAIT_TICK_MS;;) {
    ncclResult_t res;
    int n;

    if (mc_boot_acceptor_take(a, conn_out))
      return ncclSuccess;
    res = mc_sock_wait_check(&a->listener.sock, w, "waiting for a connection on");
    if (res != ncclSuccess)
      return res;
    n = mc_boot_acceptor_pollfds(a, a->pfd);
    tick = mc_wait_tick_next(tick, poll(a->pfd, (nfds_t)n, mc_deadline_left_ms(w->dl, tick)) != 0);
    mc_boot_acceptor_progress(a, a->pfd, n);
  }
}

void mc_boot_sock_liveness(struct mc_sock *s)
{
  char at[MC_SOCKADDR_STRLEN];

  if (mc_sock_set_liveness(s, mc_param_int(MC_P_NET_TIMEOUT) * LIVENESS_PER_MILLE) == ncclSuccess)
    return;
  /* The connection itself is fine: its waits keep their deadlines. */
  MC_WARN_ONCE("Bootstrap: %s on the connection with %s: a dead peer host is found at the "
               "bootstrap's deadlines only (MESHCCL_INIT_TIMEOUT, MESHCCL_BOOTSTRAP_TIMEOUT)",
               s->err, addr_str(&s->addr, at));
  s->err[0] = '\0';
  s->end = MC_SOCK_END_NONE;
}

/* ---------- connecting side ---------- */

enum dial_state { DIAL_TCP, DIAL_CHALLENGE, DIAL_VERDICT, DIAL_DONE };

/* One connection attempt, moved on without waiting. */
struct dial {
  struct mc_sock_async c; /* TCP connect (NCCL's retries) and the 12-byte handshake */
  int state;
  struct mc_boot_auth auth;
  uint8_t buf[MC_BOOT_VERDICT_BYTES];
  size_t got;
  bool is_auth_failure;
};

static ncclResult_t dial_err(struct dial *d, int end, ncclResult_t res, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ncclResult_t dial_err(struct dial *d, int end, ncclResult_t res, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(d->c.sock.err, sizeof(d->c.sock.err), fmt, ap);
  va_end(ap);
  d->c.sock.end = end;
  return res;
}

static ncclResult_t dial_start(struct dial *d, const union mc_sockaddr *to, uint64_t magic,
                               uint32_t type)
{
  memset(d, 0, sizeof(*d));
  d->state = DIAL_TCP;
  d->auth.magic = magic;
  d->auth.type = type;
  if (mc_random_bytes(d->auth.nc, sizeof(d->auth.nc)) != ncclSuccess) {
    mc_sock_init(&d->c.sock);
    d->c.sock.addr = *to;
    return dial_err(d, MC_SOCK_END_ERROR, ncclSystemError, "no random bytes for a nonce");
  }
  return mc_sock_connect_start(to, magic, type, &d->c);
}

/* Reads what the current step expects (want bytes in all); true once complete. */
static ncclResult_t dial_read(struct dial *d, size_t want, bool *is_complete)
{
  char a[MC_SOCKADDR_STRLEN];
  ssize_t n = recv(d->c.sock.fd, d->buf + d->got, want - d->got, MSG_DONTWAIT);

  *is_complete = false;
  if (n == 0)
    return dial_err(d, MC_SOCK_END_CLOSED, ncclRemoteError,
                    "%s closed the connection during authentication", addr_str(&d->c.sock.addr, a));
  if (n < 0) {
    if ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR))
      return ncclSuccess;
    return dial_err(d, (errno == ECONNRESET) ? MC_SOCK_END_CLOSED : MC_SOCK_END_ERROR,
                    ncclRemoteError, "recv from %s during authentication: %s",
                    addr_str(&d->c.sock.addr, a), strerror(errno));
  }
  d->got += (size_t)n;
  *is_complete = (d->got == want);
  return ncclSuccess;
}

static ncclResult_t dial_send(struct dial *d, const void *buf, size_t bytes)
{
  char a[MC_SOCKADDR_STRLEN];

  if (send_now(d->c.sock.fd, buf, bytes))
    return ncclSuccess;
  return dial_err(
      d, ((errno == EPIPE) || (errno == ECONNRESET)) ? MC_SOCK_END_CLOSED : MC_SOCK_END_ERROR,
      ncclRemoteError, "send to %s during authentication: %s", addr_str(&d->c.sock.addr, a),
      strerror(errno));
}

static ncclResult_t dial_verdict(struct dial *d, const uint8_t key[MC_BOOT_KEY_BYTES])
{
  char a[MC_SOCKADDR_STRLEN];
  char why[160];
  ncclResult_t res = mc_boot_auth_verdict_parse(key, &d->auth, d->buf, d->got, why, sizeof(why));

  if (res == ncclSuccess) {
    d->state = DIAL_DONE;
    return ncclSuccess;
  }
  d->is_auth_failure = true;
  if (res == ncclInvalidUsage)
    return dial_err(d, MC_SOCK_END_ERROR, res,
                    "authentication with %s failed: %s: the ranks were not given the same secret "
                    "(different MESHCCL_SECRET values, or different unique ids)",
                    addr_str(&d->c.sock.addr, a), why);
  return dial_err(d, MC_SOCK_END_ERROR, res,
                  "authentication with %s failed: %s: the process listening there is not part of "
                  "this job (or runs with another MESHCCL_SECRET)",
                  addr_str(&d->c.sock.addr, a), why);
}

/* Moves the attempt on as far as it goes without waiting. */
static ncclResult_t dial_step(struct dial *d, const uint8_t key[MC_BOOT_KEY_BYTES])
{
  uint8_t hello[MC_BOOT_HELLO_BYTES];
  uint8_t proof[MC_BOOT_PROOF_BYTES];
  char a[MC_SOCKADDR_STRLEN];
  char why[160];
  bool is_complete = false;

  if (d->state == DIAL_TCP) {
    MC_CHECK(mc_sock_connect_poll(&d->c, &is_complete));
    if (!is_complete)
      return ncclSuccess;
    /* mc_sock_connect_poll sent the 12-byte handshake: the rest of the hello. */
    mc_boot_auth_hello_build(&d->auth, hello);
    MC_CHECK(dial_send(d, hello + MC_BOOT_HS_BYTES, sizeof(hello) - MC_BOOT_HS_BYTES));
    d->state = DIAL_CHALLENGE;
  }
  if (d->state == DIAL_CHALLENGE) {
    MC_CHECK(dial_read(d, MC_BOOT_CHALLENGE_BYTES, &is_complete));
    if (!is_complete)
      return ncclSuccess;
    if (!mc_boot_auth_challenge_parse(&d->auth, d->buf, d->got, why, sizeof(why))) {
      d->is_auth_failure = true;
      return dial_err(d, MC_SOCK_END_ERROR, ncclRemoteError, "authentication with %s failed: %s",
                      addr_str(&d->c.sock.addr, a), why);
    }
    mc_boot_auth_proof_build(key, &d->auth, proof);
    MC_CHECK(dial_send(d, proof, sizeof(proof)));
    d->state = DIAL_VERDICT;
    d->got = 0;
  }
  if (d->state == DIAL_VERDICT) {
    MC_CHECK(dial_read(d, MC_BOOT_VERDICT_BYTES, &is_complete));
    if (is_complete)
      return dial_verdict(d, key);
  }
  return ncclSuccess;
}

/* Pause before retry `n` (1, 2, ...) after a connection closed during authentication. */
static int retry_pause_ms(int n)
{
  int pause = RETRY_FIRST_MS << ((n < 8) ? n - 1 : 7);

  return (pause > RETRY_MAX_PAUSE_MS) ? RETRY_MAX_PAUSE_MS : pause;
}

/* Waits (one tick at most) for the dial's socket. */
static void dial_wait(const struct dial *d, const struct mc_wait *w)
{
  struct pollfd p = {
      .fd = d->c.sock.fd, .events = (d->state == DIAL_TCP) ? POLLOUT : POLLIN, .revents = 0};

  (void)poll(&p, 1, mc_deadline_left_ms(w->dl, MC_WAIT_TICK_MS));
}

ncclResult_t mc_boot_auth_connect(const union mc_sockaddr *to, uint64_t magic, uint32_t type,
                                  const uint8_t key[MC_BOOT_KEY_BYTES], const struct mc_wait *w,
                                  struct mc_sock *conn_out, bool *is_auth_failure_out)
{
  int retry_max = (int)mc_param_int(MC_P_SOCKET_RETRY_CNT);
  char a[MC_SOCKADDR_STRLEN];
  ncclResult_t res;
  struct dial d;
  int n_closed = 0;

  if (is_auth_failure_out != NULL)
    *is_auth_failure_out = false;
  res = dial_start(&d, to, magic, type);
  while (res == ncclSuccess) {
    res = dial_step(&d, key);
    if ((res == ncclSuccess) && (d.state == DIAL_DONE))
      break;
    if ((res != ncclSuccess) && (d.c.sock.end == MC_SOCK_END_CLOSED) && (++n_closed <= retry_max)) {
      /* Closed before the verdict: the server evicted this connection for
       * newer ones (a flood), or is restarting. Another attempt. */
      MC_TRACE(MC_SUB_BOOTSTRAP, "Bootstrap: %s, attempt %d", d.c.sock.err, n_closed);
      mc_sock_close(&d.c.sock);
      mc_sleep_ms_abortable(mc_deadline_left_ms(w->dl, retry_pause_ms(n_closed)), w->abort_flag);
      res = mc_sock_wait_check(&d.c.sock, w, "authenticating with");
      if (res == ncclSuccess)
        res = dial_start(&d, to, magic, type);
      continue;
    }
    if (res != ncclSuccess)
      break;
    res = mc_sock_wait_check(&d.c.sock, w, "connecting to");
    if (res == ncclSuccess)
      dial_wait(&d, w);
  }
  if (res != ncclSuccess) {
    mc_sock_close(&d.c.sock);
    if ((d.c.sock.end == MC_SOCK_END_CLOSED) && (n_closed > retry_max))
      snprintf(d.c.sock.err, sizeof(d.c.sock.err),
               "%s closed the connection during authentication %d times: it is flooded by other "
               "connections, or it is not a meshccl bootstrap socket",
               addr_str(to, a), n_closed);
    if (is_auth_failure_out != NULL)
      *is_auth_failure_out = d.is_auth_failure;
  }
  if (res == ncclSuccess)
    mc_boot_sock_liveness(&d.c.sock);
  *conn_out = d.c.sock;
  return res;
}

uint64_t mc_boot_fd_limit_raise(void)
{
  struct rlimit rl;

  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return 0;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    if ((setrlimit(RLIMIT_NOFILE, &rl) != 0) && (getrlimit(RLIMIT_NOFILE, &rl) != 0))
      return 0;
  }
  return (uint64_t)rl.rlim_cur;
}

int mc_boot_max_pending(void)
{
  uint64_t n = mc_boot_fd_limit_raise() / 8;

  if (n < MIN_PENDING)
    return MIN_PENDING;
  return (n > MAX_PENDING) ? MAX_PENDING : (int)n;
}
