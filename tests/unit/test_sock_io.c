/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sockets with bounded waits (src/socket/sock_io.c), over 127.0.0.1 only:
 * the magic/type handshake and hostile clients, framed messages, the ways a
 * wait ends (peer close, deadline, abort), connect retries, and a two-way
 * transfer larger than any socket buffer.
 */
#include "core/params.h"
#include "socket/socket.h"

#include "mc_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAGIC     0x1122334455667788ull
#define TYPE      MC_SOCK_TYPE_BOOTSTRAP
#define LONG_WAIT 10000 /* ms: only reached when the code under test is broken */

/* ---------- helpers ---------- */

static union mc_sockaddr loopback(int port)
{
  union mc_sockaddr a;

  memset(&a, 0, sizeof(a));
  a.sin.sin_family = AF_INET;
  a.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin.sin_port = htons((uint16_t)port);
  return a;
}

static struct mc_wait wait_ms(int64_t ms, const volatile uint32_t *abort_flag)
{
  struct mc_wait w;

  memset(&w, 0, sizeof(w));
  w.dl = mc_deadline_in_ms(ms);
  w.abort_flag = abort_flag;
  return w;
}

static void listen_lo(struct mc_listener *l)
{
  union mc_sockaddr any = loopback(0);

  MC_T_OK(mc_sock_listen(&any, MAGIC, TYPE, l));
  MC_T_TRUE(l->sock.fd >= 0);
  MC_T_TRUE(mc_sockaddr_port(&l->sock.addr) != 0);
  MC_T_EQ_INT(l->n_pending, 0);
  MC_T_EQ_INT(l->n_rejected, 0);
}

/* A connected pair: client (connect side) and server (accept side). */
static void connect_pair(struct mc_listener *l, struct mc_sock *client, struct mc_sock *server)
{
  struct mc_wait w = wait_ms(LONG_WAIT, NULL);

  MC_T_OK(mc_sock_connect(&l->sock.addr, MAGIC, TYPE, &w, client));
  MC_T_OK(mc_sock_accept(l, &w, server));
}

/* A plain blocking TCP connection to the listener (no handshake sent). */
static int raw_connect(const struct mc_listener *l)
{
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  MC_T_TRUE(fd >= 0);
  if (connect(fd, &l->sock.addr.sa, mc_sockaddr_len(&l->sock.addr)) != 0) {
    close(fd);
    MC_T_FAIL("connect: %s", strerror(errno));
  }
  return fd;
}

static void raw_send(int fd, const void *buf, size_t bytes)
{
  MC_T_EQ_INT(send(fd, buf, bytes, MSG_NOSIGNAL), (long long)bytes);
}

static void raw_handshake(int fd, uint64_t magic, uint32_t type)
{
  uint8_t hs[12];

  memcpy(hs, &magic, sizeof(magic));
  memcpy(hs + sizeof(magic), &type, sizeof(type));
  raw_send(fd, hs, sizeof(hs));
}

static int local_port(int fd)
{
  union mc_sockaddr a;
  socklen_t len = sizeof(a);

  MC_T_EQ_INT(getsockname(fd, &a.sa, &len), 0);
  return mc_sockaddr_port(&a);
}

/* A port nobody listens on (bound then released). */
static int closed_port(void)
{
  struct mc_listener l;
  int port;

  listen_lo(&l);
  port = mc_sockaddr_port(&l.sock.addr);
  mc_listener_close(&l);
  return port;
}

/* ---------- cases ---------- */

static void accept_after_handshake(void)
{
  struct mc_listener l;
  struct mc_sock client;
  struct mc_sock server;
  struct mc_wait w = wait_ms(LONG_WAIT, NULL);

  listen_lo(&l);
  MC_T_OK(mc_sock_connect(&l.sock.addr, MAGIC, TYPE, &w, &client));
  MC_T_TRUE(client.fd >= 0);
  MC_T_EQ_INT(client.end, MC_SOCK_END_NONE);
  MC_T_TRUE(mc_sockaddr_equal(&client.addr, &l.sock.addr));
  MC_T_OK(mc_sock_accept(&l, &w, &server));
  MC_T_TRUE(server.fd >= 0);
  MC_T_TRUE(server.magic == MAGIC);
  MC_T_EQ_INT(server.type, TYPE);
  MC_T_EQ_INT(server.end, MC_SOCK_END_NONE);
  /* server.addr is the client's end */
  MC_T_EQ_INT(mc_sockaddr_port(&server.addr), local_port(client.fd));
  MC_T_EQ_INT(l.n_pending, 0);
  MC_T_EQ_INT(l.n_rejected, 0);
  mc_sock_close(&client);
  mc_sock_close(&server);
  MC_T_EQ_INT(client.fd, -1);
  mc_sock_close(&client); /* twice is fine */
  mc_sock_close(NULL);
  mc_listener_close(&l);
  MC_T_EQ_INT(l.sock.fd, -1);
  mc_listener_close(&l);
  mc_listener_close(NULL);
}

static void listen_errors(void)
{
  struct mc_listener l;
  struct mc_listener l2;
  union mc_sockaddr taken;
  union mc_sockaddr bad;
  char expect[MC_SOCKADDR_STRLEN + 32];
  char a[MC_SOCKADDR_STRLEN];

  listen_lo(&l);
  taken = l.sock.addr;
  MC_T_EQ_INT(mc_sock_listen(&taken, MAGIC, TYPE, &l2), ncclInvalidUsage);
  MC_T_EQ_INT(l2.sock.fd, -1);
  MC_T_EQ_INT(l2.sock.end, MC_SOCK_END_ERROR);
  snprintf(expect, sizeof(expect), "cannot listen on %s", mc_sockaddr_str(&taken, a, sizeof(a)));
  MC_T_CONTAINS(l2.sock.err, expect);
  mc_listener_close(&l2);
  mc_listener_close(&l);

  memset(&bad, 0, sizeof(bad));
  MC_T_EQ_INT(mc_sock_listen(&bad, MAGIC, TYPE, &l2), ncclInvalidArgument);
  MC_T_CONTAINS(l2.sock.err, "address family 0");
  mc_listener_close(&l2);
}

static void msg_round_trip(void)
{
  struct mc_listener l;
  struct mc_sock c;
  struct mc_sock s;
  struct mc_wait w = wait_ms(LONG_WAIT, NULL);
  char buf[64];
  size_t n = 999;

  listen_lo(&l);
  connect_pair(&l, &c, &s);
  MC_T_OK(mc_sock_send_msg(&c, "hello", 6, &w));
  MC_T_OK(mc_sock_send_msg(&c, NULL, 0, &w)); /* empty messages exist */
  MC_T_OK(mc_sock_send_msg(&s, "back", 5, &w));
  memset(buf, 0, sizeof(buf));
  MC_T_OK(mc_sock_recv_msg(&s, buf, sizeof(buf), &n, &w));
  MC_T_EQ_INT(n, 6);
  MC_T_EQ_STR(buf, "hello");
  MC_T_OK(mc_sock_recv_msg(&s, buf, sizeof(buf), &n, &w));
  MC_T_EQ_INT(n, 0);
  /* an exact fit */
  MC_T_OK(mc_sock_recv_msg(&c, buf, 5, &n, &w));
  MC_T_EQ_INT(n, 5);
  MC_T_EQ_STR(buf, "back");
  /* bytes_out is optional */
  MC_T_OK(mc_sock_send_msg(&c, "x", 2, &w));
  MC_T_OK(mc_sock_recv_msg(&s, buf, sizeof(buf), NULL, &w));
  MC_T_EQ_STR(buf, "x");
  /* exact-length I/O */
  MC_T_OK(mc_sock_send_all(&s, "0123456789", 10, &w));
  memset(buf, 0, sizeof(buf));
  MC_T_OK(mc_sock_recv_all(&c, buf, 10, &w));
  MC_T_EQ_STR(buf, "0123456789");
  mc_sock_close(&c);
  mc_sock_close(&s);
  mc_listener_close(&l);
}

static void msg_too_large(void)
{
  struct mc_listener l;
  struct mc_sock c;
  struct mc_sock s;
  struct mc_wait w = wait_ms(LONG_WAIT, NULL);
  uint32_t huge = UINT32_MAX;
  char big[100];
  char buf[16];
  size_t n = 12345;

  listen_lo(&l);
  connect_pair(&l, &c, &s);
  memset(big, 'b', sizeof(big));
  memset(buf, 'z', sizeof(buf));
  MC_T_OK(mc_sock_send_msg(&c, big, sizeof(big), &w));
  MC_T_EQ_INT(mc_sock_recv_msg(&s, buf, 10, &n, &w), ncclRemoteError);
  MC_T_EQ_INT(s.end, MC_SOCK_END_ERROR);
  MC_T_CONTAINS(s.err, "127.0.0.1<");
  MC_T_CONTAINS(s.err, "sent a message of 100 bytes where at most 10 are expected");
  /* nothing was written: not the length, not the buffer */
  MC_T_EQ_INT(n, 12345);
  for (size_t i = 0; i < sizeof(buf); i++)
    MC_T_EQ_INT(buf[i], 'z');

  /* a length no buffer could hold, in the other direction */
  MC_T_OK(mc_sock_send_all(&s, &huge, sizeof(huge), &w));
  MC_T_EQ_INT(mc_sock_recv_msg(&c, buf, sizeof(buf), &n, &w), ncclRemoteError);
  MC_T_CONTAINS(c.err, "sent a message of 4294967295 bytes where at most 16 are expected");
  MC_T_EQ_INT(n, 12345);
  mc_sock_close(&c);
  mc_sock_close(&s);
  mc_listener_close(&l);
}

/* Hostile or broken clients never stall the accept loop and never reach the caller. */
static void hostile_clients_dropped(void)
{
  struct mc_listener l;
  struct mc_sock c;
  struct mc_sock s;
  struct mc_sock extra;
  struct mc_wait w = wait_ms(LONG_WAIT, NULL);
  struct mc_deadline dl;
  uint8_t junk[5];
  char buf[8];
  int fd_magic;
  int fd_type;
  int fd_junk;
  int fd_silent;

  listen_lo(&l);
  fd_silent = raw_connect(&l); /* connects and says nothing */
  fd_magic = raw_connect(&l);
  raw_handshake(fd_magic, MAGIC ^ 1, TYPE);
  fd_type = raw_connect(&l);
  raw_handshake(fd_type, MAGIC, MC_SOCK_TYPE_PROXY);
  fd_junk = raw_connect(&l);
  MC_T_OK(mc_random_bytes(junk, sizeof(junk)));
  raw_send(fd_junk, junk, sizeof(junk));
  close(fd_junk);
  MC_T_OK(mc_sock_connect(&l.sock.addr, MAGIC, TYPE, &w, &c));

  /* the good client is the one accepted, despite the silent one before it */
  MC_T_OK(mc_sock_accept(&l, &w, &s));
  MC_T_EQ_INT(mc_sockaddr_port(&s.addr), local_port(c.fd));
  MC_T_OK(mc_sock_send_msg(&c, "ok", 3, &w));
  MC_T_OK(mc_sock_recv_msg(&s, buf, sizeof(buf), NULL, &w));
  MC_T_EQ_STR(buf, "ok");

  /* the three that finished are counted as they are seen; the silent one waits */
  dl = mc_deadline_in_ms(LONG_WAIT);
  while ((l.n_rejected < 3) && !mc_deadline_passed(dl)) {
    struct mc_wait w_short = wait_ms(20, NULL);
    MC_T_EQ_INT(mc_sock_accept(&l, &w_short, &extra), ncclTimeout);
    MC_T_EQ_INT(l.sock.end, MC_SOCK_END_TIMEOUT);
  }
  MC_T_EQ_INT(l.n_rejected, 3);
  MC_T_EQ_INT(l.n_pending, 1);
  MC_T_EQ_INT(l.pending[0].peer.sin.sin_port, htons((uint16_t)local_port(fd_silent)));

  close(fd_magic);
  close(fd_type);
  close(fd_silent);
  mc_sock_close(&c);
  mc_sock_close(&s);
  mc_listener_close(&l); /* closes the pending one too */
  MC_T_EQ_INT(l.n_pending, 0);
}

/* More silent connections than the listener tracks: the oldest are evicted
 * for newcomers, exactly as many as make room, so the good one is accepted
 * without waiting out the handshake window (30 s). A full list with nothing
 * new in the backlog then waits in poll() rather than spinning. */
static void listener_full_of_silent_clients(void)
{
  enum { N_SILENT = MC_SOCK_MAX_PENDING + 6 };
  struct mc_listener l;
  struct mc_sock c;
  struct mc_sock s;
  struct mc_sock extra;
  struct mc_wait w = wait_ms(LONG_WAIT, NULL);
  struct mc_wait w_idle = wait_ms(300, NULL);
  int fds[N_SILENT];
  int fd_more;
  double cpu0;
  double wall0;
  double cpu;
  double wall;

  listen_lo(&l);
  for (int i = 0; i < N_SILENT; i++)
    fds[i] = raw_connect(&l);
  MC_T_OK(mc_sock_connect(&l.sock.addr, MAGIC, TYPE, &w, &c));
  MC_T_OK(mc_sock_accept(&l, &w, &s));
  MC_T_EQ_INT(mc_sockaddr_port(&s.addr), local_port(c.fd));
  /* the 7 oldest made room: 64 pending, then one per newcomer */
  MC_T_EQ_INT(l.n_rejected, N_SILENT + 1 - MC_SOCK_MAX_PENDING);
  MC_T_EQ_INT(l.n_pending, N_SILENT - l.n_rejected);
  for (int i = 0; i < l.n_pending; i++) {
    int port = ntohs(l.pending[i].peer.sin.sin_port);
    MC_T_TRUE(port != local_port(fds[0])); /* the oldest is gone */
  }
  /* one more silent newcomer fills the list again; then nothing arrives */
  fd_more = raw_connect(&l);
  cpu0 = mc_clock_sec(CLOCK_PROCESS_CPUTIME_ID);
  wall0 = mc_clock_sec(CLOCK_MONOTONIC);
  MC_T_EQ_INT(mc_sock_accept(&l, &w_idle, &extra), ncclTimeout);
  cpu = mc_clock_sec(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
  wall = mc_clock_sec(CLOCK_MONOTONIC) - wall0;
  /* a waiting accept must not burn a core: a generous bound (a busy loop
   * uses about as much CPU time as wall time) */
  if (cpu > 0.5 * wall)
    MC_T_FAIL("accept used %.2f s of CPU in %.2f s of waiting (busy loop)", cpu, wall);
  MC_T_EQ_INT(l.n_pending, MC_SOCK_MAX_PENDING);
  MC_T_EQ_INT(l.n_rejected, N_SILENT + 1 - MC_SOCK_MAX_PENDING);
  for (int i = 0; i < N_SILENT; i++)
    close(fds[i]);
  close(fd_more);
  mc_sock_close(&c);
  mc_sock_close(&s);
  mc_listener_close(&l);
}

static void peer_closed(void)
{
  struct mc_listener l;
  struct mc_sock c;
  struct mc_sock s;
  struct mc_wait w = wait_ms(LONG_WAIT, NULL);
  char expect[128];
  char a[MC_SOCKADDR_STRLEN];
  uint32_t x = 0;
  char *big;

  listen_lo(&l);
  connect_pair(&l, &c, &s);
  MC_T_OK(mc_sock_send_all(&c, "ab", 2, &w));
  mc_sock_close(&c);
  MC_T_EQ_INT(mc_sock_recv_all(&s, &x, sizeof(x), &w), ncclRemoteError);
  MC_T_EQ_INT(s.end, MC_SOCK_END_CLOSED);
  snprintf(expect, sizeof(expect), "%s closed the connection after 2 of 4 bytes",
           mc_sockaddr_str(&s.addr, a, sizeof(a)));
  MC_T_CONTAINS(s.err, expect);

  /* sending to a closed peer fails the same way (and raises no SIGPIPE) */
  big = malloc(1 << 20);
  MC_T_TRUE(big != NULL);
  memset(big, 1, 1 << 20);
  s.end = MC_SOCK_END_NONE;
  MC_T_EQ_INT(mc_sock_send_all(&s, big, 1 << 20, &w), ncclRemoteError);
  free(big);
  MC_T_EQ_INT(s.end, MC_SOCK_END_CLOSED);
  MC_T_CONTAINS(s.err, "closed the connection");
  mc_sock_close(&s);
  mc_listener_close(&l);
}

static void recv_deadline(void)
{
  struct mc_listener l;
  struct mc_sock c;
  struct mc_sock s;
  struct mc_wait w = wait_ms(50, NULL);
  char expect[128];
  char a[MC_SOCKADDR_STRLEN];
  bool readable = true;
  char buf[4];

  listen_lo(&l);
  connect_pair(&l, &c, &s);
  MC_T_OK(mc_sock_poll_readable(&s, 0, &readable));
  MC_T_TRUE(!readable);
  MC_T_EQ_INT(mc_sock_recv_all(&s, buf, sizeof(buf), &w), ncclTimeout);
  MC_T_EQ_INT(s.end, MC_SOCK_END_TIMEOUT);
  snprintf(expect, sizeof(expect), "timed out after 50 ms receiving from %s",
           mc_sockaddr_str(&s.addr, a, sizeof(a)));
  MC_T_CONTAINS(s.err, expect);
  /* the connection is still usable */
  w = wait_ms(LONG_WAIT, NULL);
  MC_T_OK(mc_sock_send_all(&c, "abcd", 4, &w));
  MC_T_OK(mc_sock_poll_readable(&s, LONG_WAIT, &readable));
  MC_T_TRUE(readable);
  MC_T_OK(mc_sock_recv_all(&s, buf, sizeof(buf), &w));
  MC_T_TRUE(memcmp(buf, "abcd", 4) == 0);
  mc_sock_close(&c);
  mc_sock_close(&s);
  mc_listener_close(&l);
}

static void *set_flag_soon(void *arg)
{
  mc_sleep_ms_abortable(100, NULL); /* lets the accept block first; not needed for the result */
  __atomic_store_n((uint32_t *)arg, 1, __ATOMIC_RELEASE);
  return NULL;
}

static void abort_ends_accept(void)
{
  struct mc_listener l;
  struct mc_sock s;
  uint32_t flag = 0;
  struct mc_wait w = wait_ms(LONG_WAIT, &flag);
  pthread_t th;

  listen_lo(&l);
  MC_T_EQ_INT(pthread_create(&th, NULL, set_flag_soon, &flag), 0);
  MC_T_EQ_INT(mc_sock_accept(&l, &w, &s), ncclInternalError);
  MC_T_EQ_INT(pthread_join(th, NULL), 0);
  MC_T_EQ_INT(l.sock.end, MC_SOCK_END_ABORT);
  MC_T_CONTAINS(l.sock.err, "aborted while waiting for a connection on 127.0.0.1<");
  mc_listener_close(&l);
}

static int check_calls;

static ncclResult_t failing_check(void *arg)
{
  (void)arg;
  return (++check_calls >= 3) ? ncclRemoteError : ncclSuccess;
}

/* The fail-fast probe ends a wait with its own result. */
static void check_probe_ends_wait(void)
{
  struct mc_listener l;
  struct mc_sock c;
  struct mc_sock s;
  struct mc_wait w = wait_ms(LONG_WAIT, NULL);
  char buf[4];

  listen_lo(&l);
  connect_pair(&l, &c, &s);
  w.check = failing_check;
  check_calls = 0;
  MC_T_EQ_INT(mc_sock_recv_all(&s, buf, sizeof(buf), &w), ncclRemoteError);
  MC_T_EQ_INT(check_calls, 3);
  MC_T_EQ_INT(s.end, MC_SOCK_END_CHECK);
  MC_T_CONTAINS(s.err, "receiving from 127.0.0.1<");
  mc_sock_close(&c);
  mc_sock_close(&s);
  mc_listener_close(&l);
}

/* A quiet wait's tick doubles up to its cap; anything happening brings it back. */
static void wait_ticks_back_off(void)
{
  const int quiet[] = {20, 40, 80, 80};
  int tick = MC_WAIT_TICK_MS;

  for (size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++) {
    tick = mc_wait_tick_next(tick, false);
    MC_T_EQ_INT(tick, quiet[i]);
  }
  MC_T_EQ_INT(mc_wait_tick_next(tick, true), MC_WAIT_TICK_MS);
  MC_T_EQ_INT(mc_wait_tick_next(0, false), MC_WAIT_TICK_MS);
  MC_T_EQ_INT(mc_wait_tick_next(70, false), MC_WAIT_TICK_MAX_MS);
  MC_T_EQ_INT(MC_WAIT_TICK_MAX_MS, 80);
}

static void connect_refused(void)
{
  union mc_sockaddr to = loopback(closed_port());
  struct mc_wait w = wait_ms(LONG_WAIT, NULL);
  struct mc_sock c;
  char expect[128];
  char a[MC_SOCKADDR_STRLEN];

  mc_param_set_for_tests(MC_P_SOCKET_RETRY_CNT, "2");
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_SLEEP_MSEC, "10");
  MC_T_EQ_INT(mc_sock_connect(&to, MAGIC, TYPE, &w, &c), ncclRemoteError);
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_CNT, NULL);
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_SLEEP_MSEC, NULL);
  MC_T_EQ_INT(c.fd, -1);
  MC_T_EQ_INT(c.end, MC_SOCK_END_ERROR);
  snprintf(expect, sizeof(expect), "connect to %s failed 3 times (last: %s)",
           mc_sockaddr_str(&to, a, sizeof(a)), strerror(ECONNREFUSED));
  MC_T_CONTAINS(c.err, expect);
}

static void connect_deadline_and_abort(void)
{
  union mc_sockaddr to = loopback(closed_port());
  struct mc_wait w = wait_ms(100, NULL);
  struct mc_sock c;
  uint32_t flag = 1;
  char expect[128];
  char a[MC_SOCKADDR_STRLEN];

  /* retries left, but the deadline ends them */
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_SLEEP_MSEC, "10");
  MC_T_EQ_INT(mc_sock_connect(&to, MAGIC, TYPE, &w, &c), ncclTimeout);
  MC_T_EQ_INT(c.fd, -1);
  MC_T_EQ_INT(c.end, MC_SOCK_END_TIMEOUT);
  snprintf(expect, sizeof(expect), "could not connect to %s within 100 ms",
           mc_sockaddr_str(&to, a, sizeof(a)));
  MC_T_CONTAINS(c.err, expect);

  /* an abort flag ends them too */
  w = wait_ms(LONG_WAIT, &flag);
  MC_T_EQ_INT(mc_sock_connect(&to, MAGIC, TYPE, &w, &c), ncclInternalError);
  mc_param_set_for_tests(MC_P_SOCKET_RETRY_SLEEP_MSEC, NULL);
  MC_T_EQ_INT(c.fd, -1);
  MC_T_EQ_INT(c.end, MC_SOCK_END_ABORT);

  /* an address of no family */
  memset(&to, 0, sizeof(to));
  MC_T_EQ_INT(mc_sock_connect(&to, MAGIC, TYPE, &w, &c), ncclInvalidArgument);
  MC_T_EQ_INT(c.fd, -1);
}

/* A listener whose accept queue is full drops SYNs, as a lossy link loses
 * them: a non-blocking connect left unanswered for MC_SOCK_CONNECT_ANSWER_MS
 * makes a new connect() within the same attempt (not waiting for the
 * kernel's SYN retransmissions), and connects once the queue has room. */
static void connect_unanswered_again(void)
{
  union mc_sockaddr a = loopback(0);
  socklen_t len = sizeof(a);
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int first = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct mc_sock_async c;
  bool done = false;
  uint64_t first_sent;
  uint64_t t0;
  uint8_t hs[12];
  uint64_t magic;
  int afd;

  MC_T_TRUE((lfd >= 0) && (first >= 0));
  MC_T_TRUE(bind(lfd, &a.sa, sizeof(a.sin)) == 0);
  MC_T_TRUE(listen(lfd, 0) == 0); /* room for one connection */
  MC_T_TRUE(getsockname(lfd, &a.sa, &len) == 0);
  MC_T_TRUE(connect(first, &a.sa, sizeof(a.sin)) == 0); /* ... taken */

  MC_T_OK(mc_sock_connect_start(&a, MAGIC, TYPE, &c));
  first_sent = c.sent_ns;
  t0 = mc_time_ns();
  while (mc_time_ns() - t0 < (uint64_t)(MC_SOCK_CONNECT_ANSWER_MS + 500) * 1000000ull) {
    MC_T_OK(mc_sock_connect_poll(&c, &done));
    MC_T_TRUE(!done);
    mc_sleep_ms_abortable(10, NULL);
  }
  MC_T_TRUE(c.sent_ns - first_sent >= (uint64_t)MC_SOCK_CONNECT_ANSWER_MS * 1000000ull);
  MC_T_EQ_INT(c.attempt, 1);

  /* room again: the next connect() gets in */
  afd = accept(lfd, NULL, NULL);
  MC_T_TRUE(afd >= 0);
  close(afd);
  close(first);
  t0 = mc_time_ns();
  while (!done && (mc_time_ns() - t0 < (uint64_t)LONG_WAIT * 1000000ull)) {
    MC_T_OK(mc_sock_connect_poll(&c, &done));
    if (!done)
      mc_sleep_ms_abortable(10, NULL);
  }
  MC_T_TRUE(done);
  afd = accept(lfd, NULL, NULL);
  MC_T_TRUE(afd >= 0);
  MC_T_EQ_INT((int)recv(afd, hs, sizeof(hs), MSG_WAITALL), (int)sizeof(hs));
  memcpy(&magic, hs, sizeof(magic));
  MC_T_TRUE(magic == MAGIC);
  close(afd);
  mc_sock_close(&c.sock);
  close(lfd);
}

#define BIG (8u << 20)

struct xfer {
  struct mc_sock *sock;
  uint8_t *sbuf;
  uint8_t *rbuf;
  ncclResult_t res;
};

static void *xfer_main(void *arg)
{
  struct xfer *x = arg;
  struct mc_wait w = wait_ms(LONG_WAIT * 3, NULL);

  x->res = mc_sock_sendrecv(x->sock, x->sbuf, BIG, x->sock, x->rbuf, BIG, &w);
  return NULL;
}

static uint8_t pattern(size_t i, unsigned seed)
{
  return (uint8_t)((i * 2654435761u + seed) >> 7);
}

/* 8 MiB each way at once: far more than the socket buffers, so a
 * send-then-receive implementation would deadlock. */
static void sendrecv_both_ways(void)
{
  struct mc_listener l;
  struct mc_sock c;
  struct mc_sock s;
  struct xfer xc = {.sock = &c, .res = ncclInternalError};
  struct xfer xs = {.sock = &s, .res = ncclInternalError};
  pthread_t th;
  size_t bad_c = 0;
  size_t bad_s = 0;

  listen_lo(&l);
  connect_pair(&l, &c, &s);
  xc.sbuf = malloc(BIG);
  xc.rbuf = malloc(BIG);
  xs.sbuf = malloc(BIG);
  xs.rbuf = malloc(BIG);
  MC_T_TRUE((xc.sbuf != NULL) && (xc.rbuf != NULL) && (xs.sbuf != NULL) && (xs.rbuf != NULL));
  for (size_t i = 0; i < BIG; i++) {
    xc.sbuf[i] = pattern(i, 1);
    xs.sbuf[i] = pattern(i, 2);
  }
  MC_T_EQ_INT(pthread_create(&th, NULL, xfer_main, &xc), 0);
  xfer_main(&xs);
  MC_T_EQ_INT(pthread_join(th, NULL), 0);
  for (size_t i = 0; i < BIG; i++) {
    bad_c += (xc.rbuf[i] != pattern(i, 2));
    bad_s += (xs.rbuf[i] != pattern(i, 1));
  }
  free(xc.sbuf);
  free(xc.rbuf);
  free(xs.sbuf);
  free(xs.rbuf);
  MC_T_OK(xc.res);
  MC_T_OK(xs.res);
  MC_T_EQ_INT(bad_c, 0);
  MC_T_EQ_INT(bad_s, 0);
  mc_sock_close(&c);
  mc_sock_close(&s);
  mc_listener_close(&l);
}

MC_T_MAIN(accept_after_handshake, listen_errors, msg_round_trip, msg_too_large,
          hostile_clients_dropped, listener_full_of_silent_clients, peer_closed, recv_deadline,
          abort_ends_accept, check_probe_ends_wait, connect_refused, connect_deadline_and_abort,
          connect_unanswered_again, sendrecv_both_ways, wait_ticks_back_off)
