/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Non-blocking TCP sockets with bounded waits. Mirrors NCCL's misc/socket.cc:
 * the connector sends magic (8 bytes) and type (4 bytes) first and the
 * acceptor drops any connection that does not present the listener's pair;
 * refused or unreachable connects are retried with linear back-off. Unlike
 * NCCL, a connection whose handshake is incomplete never stalls the accept
 * loop: pending handshakes are polled together with the listening socket.
 *
 * Failures are described in sock->err and returned without logging; the
 * caller, which knows the peer's rank and role, records them.
 */
#include "socket.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "params.h"

#define HANDSHAKE_BYTES 12
/* A connection that has not sent its handshake is dropped after this, or
 * sooner when MC_SOCK_MAX_PENDING newer ones arrive (the oldest is evicted).
 * Long enough for TCP to retransmit a lost first segment several times on a
 * lossy link (its timer starts at 1 s, 3 s after a lost SYN, and doubles):
 * a legitimate connection dropped here is lost for good, because its sender
 * counts it complete once the bytes left its host. */
#define HANDSHAKE_WINDOW_MS  30000
#define LISTEN_BACKLOG       16384
#define MAX_RETRY_SLEEP_MS   1000
#define FIRST_RETRY_SLEEP_MS 5
#define MAX_MSG_BYTES        (1u << 30)

static ncclResult_t set_err(struct mc_sock *s, int end, ncclResult_t res, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static ncclResult_t set_err(struct mc_sock *s, int end, ncclResult_t res, const char *fmt, ...)
{
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(s->err, sizeof(s->err), fmt, ap);
  va_end(ap);
  s->end = end;
  return res;
}

void mc_sock_init(struct mc_sock *s)
{
  memset(s, 0, sizeof(*s));
  s->fd = -1;
}

/* Checks abort, the probe and the deadline; ncclSuccess means keep waiting. */
static ncclResult_t wait_check(struct mc_sock *s, const struct mc_wait *w, const char *doing)
{
  char peer[MC_SOCKADDR_STRLEN];

  if ((w->abort_flag != NULL) && (__atomic_load_n(w->abort_flag, __ATOMIC_ACQUIRE) != 0))
    return set_err(s, MC_SOCK_END_ABORT, ncclInternalError, "aborted while %s %s", doing,
                   mc_sockaddr_str(&s->addr, peer, sizeof(peer)));
  if (w->check != NULL) {
    ncclResult_t res = w->check(w->check_arg);
    if (res != ncclSuccess)
      return set_err(s, MC_SOCK_END_CHECK, res, "%s %s interrupted", doing,
                     mc_sockaddr_str(&s->addr, peer, sizeof(peer)));
  }
  if (mc_deadline_passed(w->dl))
    return set_err(s, MC_SOCK_END_TIMEOUT, ncclTimeout, "timed out after %lld ms %s %s",
                   (long long)w->dl.span_ms, doing, mc_sockaddr_str(&s->addr, peer, sizeof(peer)));
  return ncclSuccess;
}

static int poll_one(int fd, short events, int cap_ms, const struct mc_wait *w)
{
  struct pollfd p = {.fd = fd, .events = events, .revents = 0};
  int ms = mc_deadline_left_ms(w->dl, cap_ms);

  return poll(&p, 1, ms);
}

static ncclResult_t set_opts(struct mc_sock *s, int fd)
{
  int one = 1;
  int fl = fcntl(fd, F_GETFL);

  if ((fl == -1) || (fcntl(fd, F_SETFL, fl | O_NONBLOCK) == -1))
    return set_err(s, MC_SOCK_END_ERROR, ncclSystemError, "fcntl(O_NONBLOCK): %s", strerror(errno));
  if (s->addr.sa.sa_family != AF_UNIX)
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  mc_sock_set_buf_sizes(fd);
  return ncclSuccess;
}

ncclResult_t mc_sock_listen(const union mc_sockaddr *local, uint64_t magic, uint32_t type,
                            struct mc_listener *listener)
{
  struct mc_sock *s = &listener->sock;
  union mc_sockaddr bound = *local;
  socklen_t len = mc_sockaddr_len(local);
  char a[MC_SOCKADDR_STRLEN];
  char hint[MC_FD_HINT_BYTES];
  int one = 1;
  int fd;

  memset(listener, 0, sizeof(*listener));
  mc_sock_init(s);
  s->magic = magic;
  s->type = type;
  s->addr = *local;
  if (len == 0)
    return set_err(s, MC_SOCK_END_ERROR, ncclInvalidArgument, "cannot listen on address family %d",
                   (int)local->sa.sa_family);
  fd = socket(local->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd == -1)
    return set_err(s, MC_SOCK_END_ERROR, ncclSystemError, "socket(): %s%s", strerror(errno),
                   mc_fd_limit_hint(errno, hint, sizeof(hint)));
  /* A fixed port (NCCL_COMM_ID) is reused by successive communicators. No
   * SO_REUSEPORT: two live roots on one port would share its connections. */
  if (mc_sockaddr_port(local) != 0)
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if ((bind(fd, &local->sa, len) != 0) || (listen(fd, LISTEN_BACKLOG) != 0)) {
    int e = errno;
    close(fd);
    return set_err(s, MC_SOCK_END_ERROR, (e == EADDRINUSE) ? ncclInvalidUsage : ncclSystemError,
                   "cannot listen on %s: %s", mc_sockaddr_str(local, a, sizeof(a)), strerror(e));
  }
  if (getsockname(fd, &bound.sa, &len) != 0) {
    int e = errno;
    close(fd);
    return set_err(s, MC_SOCK_END_ERROR, ncclSystemError, "getsockname: %s", strerror(e));
  }
  s->fd = fd;
  s->addr = bound;
  return ncclSuccess;
}

static void drop_pending(struct mc_listener *l, int i, const char *why)
{
  char from[MC_SOCKADDR_STRLEN];
  char to[MC_SOCKADDR_STRLEN];

  MC_INFO(MC_SUB_NET | MC_SUB_INIT | MC_SUB_BOOTSTRAP,
          "Socket: dropped connection from %s to %s: %s",
          mc_sockaddr_str(&l->pending[i].peer, from, sizeof(from)),
          mc_sockaddr_str(&l->sock.addr, to, sizeof(to)), why);
  close(l->pending[i].fd);
  l->pending[i] = l->pending[l->n_pending - 1];
  l->n_pending--;
  l->n_rejected++;
}

/* Reads what a pending connection sent. Returns 1 when its handshake is
 * complete and valid, 0 to keep waiting, -1 when it was dropped. */
static int progress_pending(struct mc_listener *l, int i)
{
  struct mc_sock_pending *p = &l->pending[i];
  uint64_t magic;
  uint32_t type;
  ssize_t n;
  char why[128];

  n = recv(p->fd, p->hs + p->hs_got, HANDSHAKE_BYTES - p->hs_got, MSG_DONTWAIT);
  if (n == 0) {
    snprintf(why, sizeof(why), "closed after %zu of %d handshake bytes", p->hs_got,
             HANDSHAKE_BYTES);
    drop_pending(l, i, why);
    return -1;
  }
  if (n < 0) {
    if ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR))
      return 0;
    snprintf(why, sizeof(why), "recv: %s", strerror(errno));
    drop_pending(l, i, why);
    return -1;
  }
  p->hs_got += (size_t)n;
  if (p->hs_got < HANDSHAKE_BYTES)
    return 0;
  memcpy(&magic, p->hs, sizeof(magic));
  memcpy(&type, p->hs + sizeof(magic), sizeof(type));
  if (magic != l->sock.magic) {
    snprintf(why, sizeof(why), "socket magic mismatch (0x%llx, expected 0x%llx)",
             (unsigned long long)magic, (unsigned long long)l->sock.magic);
    drop_pending(l, i, why);
    return -1;
  }
  if (type != l->sock.type) {
    snprintf(why, sizeof(why),
             "wrong socket type %u (expected %u): peer connected to the wrong "
             "socket",
             type, l->sock.type);
    drop_pending(l, i, why);
    return -1;
  }
  return 1;
}

/* Moves connections from the kernel's backlog to the pending list, as many
 * as it holds. */
static void accept_new(struct mc_listener *l)
{
  while (l->n_pending < MC_SOCK_MAX_PENDING) {
    struct mc_sock_pending *p;
    union mc_sockaddr peer;
    socklen_t len = sizeof(peer);
    int fd = accept4(l->sock.fd, &peer.sa, &len, SOCK_CLOEXEC | SOCK_NONBLOCK);

    if (fd == -1)
      return; /* EAGAIN, or a transient error (ECONNABORTED...): poll again */
    p = &l->pending[l->n_pending++];
    memset(p, 0, sizeof(*p));
    p->fd = fd;
    p->peer = peer;
    p->since_ns = mc_time_ns();
  }
}

/* A full pending list whose handshakes are all incomplete, with a newcomer
 * in the backlog: the oldest pending connection makes room. A flood of silent
 * connections thus delays a good one by at most MC_SOCK_MAX_PENDING arrivals,
 * never by the handshake window. True when one was evicted. */
static bool evict_for_newcomer(struct mc_listener *l)
{
  struct pollfd pfd = {.fd = l->sock.fd, .events = POLLIN};
  int oldest = 0;

  if ((l->n_pending < MC_SOCK_MAX_PENDING) || (poll(&pfd, 1, 0) != 1))
    return false;
  for (int i = 1; i < l->n_pending; i++) {
    if (l->pending[i].since_ns < l->pending[oldest].since_ns)
      oldest = i;
  }
  drop_pending(l, oldest,
               "evicted: the pending list is full and a newer connection arrived before this "
               "one sent its handshake");
  return true;
}

ncclResult_t mc_sock_accept(struct mc_listener *l, const struct mc_wait *w,
                            struct mc_sock *conn_out)
{
  struct pollfd pfd[MC_SOCK_MAX_PENDING + 1];

  for (int tick = MC_WAIT_TICK_MS;;) {
    ncclResult_t res;
    uint64_t now = mc_time_ns();
    bool evicted;
    int n;

    /* Take what the backlog holds, then complete handshakes: their bytes may
     * already be buffered. */
    accept_new(l);
    for (int i = 0; i < l->n_pending;) {
      int st = progress_pending(l, i);
      if (st == 1) {
        struct mc_sock_pending p = l->pending[i];
        l->pending[i] = l->pending[l->n_pending - 1];
        l->n_pending--;
        mc_sock_init(conn_out);
        conn_out->fd = p.fd;
        conn_out->addr = p.peer;
        conn_out->magic = l->sock.magic;
        conn_out->type = l->sock.type;
        (void)set_opts(conn_out, p.fd);
        return ncclSuccess;
      }
      if (st == 0) {
        if ((now > l->pending[i].since_ns) &&
            (now - l->pending[i].since_ns > (uint64_t)HANDSHAKE_WINDOW_MS * 1000000ull))
          drop_pending(l, i, "no handshake within 30 s");
        else
          i++;
      }
    }
    /* One eviction per pass, before the deadline check: a call with no time
     * left still makes room for the next one, and a flood cannot keep a
     * call past its deadline. */
    evicted = evict_for_newcomer(l);
    res = wait_check(&l->sock, w, "waiting for a connection on");
    if (res != ncclSuccess)
      return res;
    if (evicted)
      continue;
    /* A full pending list leaves the backlog alone: polling the listener
     * then would report it readable at once, every tick (a busy loop). */
    pfd[0].fd = (l->n_pending < MC_SOCK_MAX_PENDING) ? l->sock.fd : -1;
    pfd[0].events = POLLIN;
    for (int i = 0; i < l->n_pending; i++) {
      pfd[i + 1].fd = l->pending[i].fd;
      pfd[i + 1].events = POLLIN;
    }
    n = poll(pfd, (nfds_t)l->n_pending + 1, mc_deadline_left_ms(w->dl, tick));
    tick = mc_wait_tick_next(tick, n != 0);
  }
}

static bool retryable_connect_errno(int e)
{
  return (e == ECONNREFUSED) || (e == ETIMEDOUT) || (e == EHOSTUNREACH) || (e == ENETUNREACH) ||
         (e == EAGAIN) || (e == EINTR) || (e == ECONNRESET) || (e == ECONNABORTED);
}

bool mc_sock_connect_stale(uint64_t sent_ns)
{
  return mc_time_ns() - sent_ns >= (uint64_t)MC_SOCK_CONNECT_ANSWER_MS * 1000000ull;
}

/* One TCP connect attempt: 0 connected, >0 errno of the failure, -1 when
 * the wait ended (*wait_res says how, s->err why). A connect() unanswered
 * for MC_SOCK_CONNECT_ANSWER_MS is made again on a fresh socket, within the
 * same attempt. */
static int connect_once(struct mc_sock *s, const struct mc_wait *w, ncclResult_t *wait_res)
{
  int err = 0;
  socklen_t len = sizeof(err);
  int fd = -1;

  while (fd < 0) {
    uint64_t sent_ns = mc_time_ns();

    fd = socket(s->addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd == -1)
      return errno;
    if (connect(fd, &s->addr.sa, mc_sockaddr_len(&s->addr)) == 0) {
      s->fd = fd;
      return 0;
    }
    if (errno != EINPROGRESS) {
      err = errno;
      close(fd);
      return err;
    }
    for (;;) {
      int n = poll_one(fd, POLLOUT, MC_WAIT_TICK_MS, w);
      if (n > 0)
        break;
      if ((n < 0) && (errno != EINTR)) {
        err = errno;
        close(fd);
        return err;
      }
      *wait_res = wait_check(s, w, "connecting to");
      if (*wait_res != ncclSuccess) {
        close(fd);
        return -1;
      }
      if (mc_sock_connect_stale(sent_ns)) {
        close(fd);
        fd = -1;
        break;
      }
    }
  }
  if ((getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) || (err != 0)) {
    if (err == 0)
      err = errno;
    close(fd);
    return err;
  }
  s->fd = fd;
  return 0;
}

ncclResult_t mc_sock_connect(const union mc_sockaddr *to, uint64_t magic, uint32_t type,
                             const struct mc_wait *w, struct mc_sock *conn_out)
{
  struct mc_sock s;
  int retry_max = (int)mc_param_int(MC_P_SOCKET_RETRY_CNT);
  int sleep_unit = (int)mc_param_int(MC_P_SOCKET_RETRY_SLEEP_MSEC);
  uint8_t hs[HANDSHAKE_BYTES];
  char a[MC_SOCKADDR_STRLEN];
  char hint[MC_FD_HINT_BYTES];
  ncclResult_t res;

  mc_sock_init(&s);
  s.addr = *to;
  s.magic = magic;
  s.type = type;
  if (mc_sockaddr_len(to) == 0) {
    *conn_out = s;
    return set_err(conn_out, MC_SOCK_END_ERROR, ncclInvalidArgument,
                   "cannot connect to address family %d", (int)to->sa.sa_family);
  }
  for (int attempt = 1;; attempt++) {
    ncclResult_t wait_res = ncclSuccess;
    int e = connect_once(&s, w, &wait_res);
    int pause;

    if (e == 0)
      break;
    if (e < 0) {
      *conn_out = s;
      return wait_res;
    }
    if (!retryable_connect_errno(e)) {
      *conn_out = s;
      return set_err(conn_out, MC_SOCK_END_ERROR, ncclSystemError, "connect to %s: %s%s",
                     mc_sockaddr_str(to, a, sizeof(a)), strerror(e),
                     mc_fd_limit_hint(e, hint, sizeof(hint)));
    }
    if (attempt > retry_max) {
      *conn_out = s;
      return set_err(conn_out, MC_SOCK_END_ERROR, ncclRemoteError,
                     "connect to %s failed %d times (last: %s)", mc_sockaddr_str(to, a, sizeof(a)),
                     attempt, strerror(e));
    }
    /* NCCL's linear back-off (attempt x unit), but starting at 5 ms and doubling
     * until it meets the linear schedule: a root that is just starting (the
     * usual refusal at init) is reached within milliseconds. */
    pause = attempt * sleep_unit;
    if ((attempt < 16) && ((FIRST_RETRY_SLEEP_MS << (attempt - 1)) < pause))
      pause = FIRST_RETRY_SLEEP_MS << (attempt - 1);
    if (pause > MAX_RETRY_SLEEP_MS)
      pause = MAX_RETRY_SLEEP_MS;
    MC_TRACE(MC_SUB_NET, "connect to %s: %s, retry %d in %d ms", mc_sockaddr_str(to, a, sizeof(a)),
             strerror(e), attempt, pause);
    mc_sleep_ms_abortable(mc_deadline_left_ms(w->dl, pause), w->abort_flag);
    res = wait_check(&s, w, "connecting to");
    if (res != ncclSuccess) {
      if (s.end == MC_SOCK_END_TIMEOUT)
        snprintf(s.err, sizeof(s.err),
                 "could not connect to %s within %lld ms (%d attempts, last: "
                 "%s)",
                 mc_sockaddr_str(to, a, sizeof(a)), (long long)w->dl.span_ms, attempt, strerror(e));
      *conn_out = s;
      return res;
    }
  }
  (void)set_opts(&s, s.fd);
  memcpy(hs, &magic, sizeof(magic));
  memcpy(hs + sizeof(magic), &type, sizeof(type));
  res = mc_sock_send_all(&s, hs, sizeof(hs), w);
  if (res != ncclSuccess) {
    close(s.fd);
    s.fd = -1;
  }
  *conn_out = s;
  return res;
}

/* ---------- non-blocking connect ---------- */

/* Back-off before attempt `attempt` + 1 (mc_sock_connect's schedule). */
static int retry_pause_ms(int attempt)
{
  int pause = attempt * (int)mc_param_int(MC_P_SOCKET_RETRY_SLEEP_MSEC);

  if ((attempt < 16) && ((FIRST_RETRY_SLEEP_MS << (attempt - 1)) < pause))
    pause = FIRST_RETRY_SLEEP_MS << (attempt - 1);
  return (pause > MAX_RETRY_SLEEP_MS) ? MAX_RETRY_SLEEP_MS : pause;
}

static ncclResult_t async_fail(struct mc_sock_async *c, int end, ncclResult_t res, int e)
{
  char a[MC_SOCKADDR_STRLEN];
  char hint[MC_FD_HINT_BYTES];

  if (c->sock.fd >= 0)
    close(c->sock.fd);
  c->sock.fd = -1;
  c->is_connecting = false;
  if (res == ncclRemoteError)
    set_err(&c->sock, end, res, "connect to %s failed %d times (last: %s)",
            mc_sockaddr_str(&c->sock.addr, a, sizeof(a)), c->attempt, strerror(e));
  else
    set_err(&c->sock, end, res, "connect to %s: %s%s", mc_sockaddr_str(&c->sock.addr, a, sizeof(a)),
            strerror(e), mc_fd_limit_hint(e, hint, sizeof(hint)));
  c->failed = res;
  return res;
}

/* A refused or unreachable attempt: schedule the next one or give up. */
static ncclResult_t async_retry(struct mc_sock_async *c, int e)
{
  if (c->sock.fd >= 0)
    close(c->sock.fd);
  c->sock.fd = -1;
  c->is_connecting = false;
  if (!retryable_connect_errno(e))
    return async_fail(c, MC_SOCK_END_ERROR, ncclSystemError, e);
  if (c->attempt > (int)mc_param_int(MC_P_SOCKET_RETRY_CNT))
    return async_fail(c, MC_SOCK_END_ERROR, ncclRemoteError, e);
  c->retry_at_ns = mc_time_ns() + (uint64_t)retry_pause_ms(c->attempt) * 1000000ull;
  return ncclSuccess;
}

bool mc_sock_connect_over(int fd, int *err_out)
{
  struct pollfd p = {.fd = fd, .events = POLLOUT, .revents = 0};
  int err = 0;
  socklen_t len = sizeof(err);

  if (poll(&p, 1, 0) <= 0)
    return false;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
    err = errno;
  *err_out = err;
  return true;
}

ncclResult_t mc_sock_connect_start(const union mc_sockaddr *to, uint64_t magic, uint32_t type,
                                   struct mc_sock_async *c)
{
  bool done = false;

  memset(c, 0, sizeof(*c));
  mc_sock_init(&c->sock);
  c->sock.addr = *to;
  c->sock.magic = magic;
  c->sock.type = type;
  memcpy(c->hs, &magic, sizeof(magic));
  memcpy(c->hs + sizeof(magic), &type, sizeof(type));
  if (mc_sockaddr_len(to) == 0) {
    c->failed = set_err(&c->sock, MC_SOCK_END_ERROR, ncclInvalidArgument,
                        "cannot connect to address family %d", (int)to->sa.sa_family);
    return c->failed;
  }
  return mc_sock_connect_poll(c, &done);
}

ncclResult_t mc_sock_connect_poll(struct mc_sock_async *c, bool *done_out)
{
  *done_out = false;
  if (c->failed != ncclSuccess)
    return c->failed;
  if ((c->sock.fd < 0) && !c->is_connecting) {
    int fd;

    if (mc_time_ns() < c->retry_at_ns)
      return ncclSuccess;
    fd = socket(c->sock.addr.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd == -1)
      return async_fail(c, MC_SOCK_END_ERROR, ncclSystemError, errno);
    c->attempt++;
    c->sock.fd = fd;
    c->sent_ns = mc_time_ns();
    if (connect(fd, &c->sock.addr.sa, mc_sockaddr_len(&c->sock.addr)) != 0) {
      if (errno != EINPROGRESS)
        return async_retry(c, errno);
      c->is_connecting = true;
    }
  }
  if (c->is_connecting) {
    int err = 0;

    if (!mc_sock_connect_over(c->sock.fd, &err)) {
      if (mc_sock_connect_stale(c->sent_ns)) { /* again at the next poll: the same attempt */
        close(c->sock.fd);
        c->sock.fd = -1;
        c->is_connecting = false;
        c->attempt--;
      }
      return ncclSuccess;
    }
    if (err != 0)
      return async_retry(c, err);
    c->is_connecting = false;
    (void)set_opts(&c->sock, c->sock.fd);
  }
  while (c->hs_sent < HANDSHAKE_BYTES) {
    ssize_t n = send(c->sock.fd, c->hs + c->hs_sent, HANDSHAKE_BYTES - c->hs_sent,
                     MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      c->hs_sent += (size_t)n;
      continue;
    }
    if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)))
      return ncclSuccess;
    return async_fail(c, MC_SOCK_END_CLOSED, ncclRemoteError, (n < 0) ? errno : EPIPE);
  }
  *done_out = true;
  return ncclSuccess;
}

/* Moves bytes in one direction; returns 1 when progress was made, 0 when it
 * would block, or an error through *res. */
static int io_step(struct mc_sock *s, bool is_send, char *buf, size_t bytes, size_t *done,
                   ncclResult_t *res)
{
  char a[MC_SOCKADDR_STRLEN];
  ssize_t n;

  if (*done == bytes)
    return 0;
  if (is_send)
    n = send(s->fd, buf + *done, bytes - *done, MSG_DONTWAIT | MSG_NOSIGNAL);
  else
    n = recv(s->fd, buf + *done, bytes - *done, MSG_DONTWAIT);
  if (n > 0) {
    *done += (size_t)n;
    return 1;
  }
  if ((n == 0) && !is_send) {
    *res = set_err(s, MC_SOCK_END_CLOSED, ncclRemoteError,
                   "%s closed the connection after %zu of %zu bytes",
                   mc_sockaddr_str(&s->addr, a, sizeof(a)), *done, bytes);
    return -1;
  }
  if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)))
    return 0;
  if ((errno == EPIPE) || (errno == ECONNRESET))
    *res = set_err(s, MC_SOCK_END_CLOSED, ncclRemoteError, "%s closed the connection (%s)",
                   mc_sockaddr_str(&s->addr, a, sizeof(a)), strerror(errno));
  else
    *res = set_err(s, MC_SOCK_END_ERROR, ncclRemoteError, "%s to %s failed: %s",
                   is_send ? "send" : "recv", mc_sockaddr_str(&s->addr, a, sizeof(a)),
                   strerror(errno));
  return -1;
}

ncclResult_t mc_sock_io_multi(struct mc_sock_op *ops, int n_ops, const struct mc_wait *w)
{
  struct pollfd p[MC_SOCK_MAX_OPS];
  ncclResult_t res = ncclSuccess;

  if (n_ops > MC_SOCK_MAX_OPS)
    return ncclInternalError;
  for (int tick = MC_WAIT_TICK_MS;;) {
    int np = 0;
    int moved = 0;
    struct mc_sock_op *waiting = NULL;

    for (int i = 0; i < n_ops; i++) {
      struct mc_sock_op *op = &ops[i];
      int st;
      if (op->done == op->bytes)
        continue;
      st = io_step(op->sock, op->is_send, op->buf, op->bytes, &op->done, &res);
      if (st < 0) {
        op->failed = true;
        return res;
      }
      moved += st;
    }
    if (moved > 0)
      continue;
    for (int i = 0; i < n_ops; i++) {
      if (ops[i].done == ops[i].bytes)
        continue;
      if ((waiting == NULL) || !ops[i].is_send)
        waiting = &ops[i]; /* name a receive in a timeout: that is what is missing */
      p[np].fd = ops[i].sock->fd;
      p[np].events = ops[i].is_send ? POLLOUT : POLLIN;
      np++;
    }
    if (np == 0)
      return ncclSuccess;
    res = wait_check(waiting->sock, w, waiting->is_send ? "sending to" : "receiving from");
    if (res != ncclSuccess) {
      waiting->failed = true;
      return res;
    }
    tick = mc_wait_tick_next(tick, poll(p, (nfds_t)np, mc_deadline_left_ms(w->dl, tick)) != 0);
  }
}

ncclResult_t mc_sock_sendrecv(struct mc_sock *out, const void *sbuf, size_t sbytes,
                              struct mc_sock *in, void *rbuf, size_t rbytes,
                              const struct mc_wait *w)
{
  struct mc_sock_op ops[2] = {
      {.sock = out, .is_send = true, .buf = (void *)(uintptr_t)sbuf, .bytes = sbytes},
      {.sock = in, .is_send = false, .buf = rbuf, .bytes = rbytes},
  };

  return mc_sock_io_multi(ops, 2, w);
}

ncclResult_t mc_sock_send_all(struct mc_sock *s, const void *buf, size_t bytes,
                              const struct mc_wait *w)
{
  return mc_sock_sendrecv(s, buf, bytes, s, NULL, 0, w);
}

ncclResult_t mc_sock_recv_all(struct mc_sock *s, void *buf, size_t bytes, const struct mc_wait *w)
{
  return mc_sock_sendrecv(s, NULL, 0, s, buf, bytes, w);
}

ncclResult_t mc_sock_send_msg(struct mc_sock *s, const void *buf, size_t bytes,
                              const struct mc_wait *w)
{
  uint32_t len = (uint32_t)bytes;

  if (bytes > MAX_MSG_BYTES)
    return set_err(s, MC_SOCK_END_ERROR, ncclInternalError, "message of %zu bytes is too large",
                   bytes);
  MC_CHECK(mc_sock_send_all(s, &len, sizeof(len), w));
  return mc_sock_send_all(s, buf, bytes, w);
}

ncclResult_t mc_sock_recv_msg(struct mc_sock *s, void *buf, size_t max_bytes, size_t *bytes_out,
                              const struct mc_wait *w)
{
  char a[MC_SOCKADDR_STRLEN];
  uint32_t len = 0;
  ncclResult_t res = mc_sock_recv_all(s, &len, sizeof(len), w);

  if (res != ncclSuccess)
    return res;
  if (len > max_bytes)
    return set_err(s, MC_SOCK_END_ERROR, ncclRemoteError,
                   "%s sent a message of %u bytes where at most %zu are expected",
                   mc_sockaddr_str(&s->addr, a, sizeof(a)), len, max_bytes);
  res = mc_sock_recv_all(s, buf, len, w);
  if ((res == ncclSuccess) && (bytes_out != NULL))
    *bytes_out = len;
  return res;
}

ncclResult_t mc_sock_poll_readable(struct mc_sock *s, int timeout_ms, bool *readable_out)
{
  struct pollfd p = {.fd = s->fd, .events = POLLIN, .revents = 0};
  int n = poll(&p, 1, timeout_ms);

  if ((n < 0) && (errno != EINTR))
    return set_err(s, MC_SOCK_END_ERROR, ncclSystemError, "poll: %s", strerror(errno));
  *readable_out = (n > 0) && (p.revents != 0);
  return ncclSuccess;
}

ncclResult_t mc_sock_wait_check(struct mc_sock *s, const struct mc_wait *w, const char *doing)
{
  return wait_check(s, w, doing);
}

void mc_sock_adopt(struct mc_sock *s, int fd, const union mc_sockaddr *peer, uint64_t magic,
                   uint32_t type)
{
  mc_sock_init(s);
  s->fd = fd;
  s->addr = *peer;
  s->magic = magic;
  s->type = type;
  (void)set_opts(s, fd);
}

void mc_sock_close(struct mc_sock *s)
{
  char sink[4096];

  if ((s == NULL) || (s->fd < 0))
    return;
  /* Unread input makes close() send a reset, and a reset can destroy what we
   * just sent (a failure notice) before the peer reads it: read it first. */
  for (int i = 0; i < 16; i++) {
    if (recv(s->fd, sink, sizeof(sink), MSG_DONTWAIT) <= 0)
      break;
  }
  (void)shutdown(s->fd, SHUT_RDWR);
  close(s->fd);
  s->fd = -1;
}

void mc_listener_close(struct mc_listener *l)
{
  if (l == NULL)
    return;
  for (int i = 0; i < l->n_pending; i++)
    close(l->pending[i].fd);
  l->n_pending = 0;
  mc_sock_close(&l->sock);
}
