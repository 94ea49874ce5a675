/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mesh relay service (src/net/mesh/mesh_relay.c) alone, over loopback
 * TCP connections and AF_UNIX socket pairs: exact bytes both ways under
 * back-pressure, cut-through forwarding, chained relays with many pipes,
 * half-close, resets, destroy and abort, the read/write path, the pipe
 * limit. Every blocking call of the test has a deadline (SO_RCVTIMEO /
 * SO_SNDTIMEO, or a condition waited for with a deadline).
 */
#include "mc_test.h"
#include "net/mesh/mesh_relay.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define IO_TIMEOUT_S 30 /* any single blocking call of the test */
#define WAIT_MS      30000

enum kind { KIND_TCP, KIND_UNIX };

/* ---------- data: a reproducible byte stream per seed ---------- */

static uint64_t mix64(uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Bytes [off, off + n) of the stream of seed. */
static void stream_fill(uint64_t seed, size_t off, unsigned char *buf, size_t n)
{
  size_t i = 0;

  while (i < n) {
    size_t pos = off + i;
    uint64_t w = mix64(seed * 0x100000001b3ull + pos / 8);

    for (size_t b = pos % 8; (b < 8) && (i < n); b++, i++)
      buf[i] = (unsigned char)(w >> (8 * b));
  }
}

/* ---------- sockets ---------- */

static void set_timeouts(int fd)
{
  struct timeval tv = {IO_TIMEOUT_S, 0};

  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* A connected pair: loopback TCP, or socketpair(AF_UNIX). */
static void sock_pair(enum kind kind, int *x_out, int *y_out)
{
  int fds[2];

  if (kind == KIND_UNIX) {
    MC_T_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  } else {
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    MC_T_TRUE(lfd >= 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    MC_T_EQ_INT(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    MC_T_EQ_INT(listen(lfd, 4), 0);
    MC_T_EQ_INT(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
    fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    MC_T_TRUE(fds[0] >= 0);
    MC_T_EQ_INT(connect(fds[0], (struct sockaddr *)&sa, sizeof(sa)), 0);
    fds[1] = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    MC_T_TRUE(fds[1] >= 0);
    close(lfd);
  }
  set_timeouts(fds[0]);
  set_timeouts(fds[1]);
  *x_out = fds[0];
  *y_out = fds[1];
}

/* end_a <-> relay(s) <-> end_c; n_relays 0 is a direct connection. */
static void relay_path(enum kind kind, struct mc_mesh_relay **relays, int n_relays,
                       const char *label, int *end_a, int *end_c)
{
  int left;
  int right;

  sock_pair(kind, end_a, &left);
  for (int r = 0; r < n_relays; r++) {
    int next;

    sock_pair(kind, &right, &next);
    MC_T_OK(mc_mesh_relay_add(relays[r], left, right, label));
    left = next;
  }
  *end_c = left;
}

static void wait_stats(struct mc_mesh_relay *relay, uint64_t finished, uint64_t failed,
                       uint64_t closed)
{
  struct mc_mesh_relay_stats st;
  double end = mc_clock_sec(CLOCK_MONOTONIC) + WAIT_MS / 1000.0;

  for (;;) {
    mc_mesh_relay_stats(relay, &st);
    if (((st.n_finished == finished) && (st.n_failed == failed) && (st.n_closed == closed)) ||
        (mc_clock_sec(CLOCK_MONOTONIC) > end))
      break;
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  MC_T_EQ_INT(st.n_finished, finished);
  MC_T_EQ_INT(st.n_failed, failed);
  MC_T_EQ_INT(st.n_closed, closed);
  MC_T_EQ_INT(st.n_active, 0);
}

/* ---------- stream threads (one direction of one end) ---------- */

struct flow {
  int fd;
  uint64_t seed;
  size_t bytes;
  size_t piece;      /* largest send or recv */
  size_t slow_bytes; /* receiver: read the first slow_bytes in pieces of 1 KiB, pausing */
  bool is_shut_wr;   /* sender: shutdown(SHUT_WR) after the last byte */
  bool expect_eof;   /* receiver: then expect end-of-file */
  /* Cut-through gate: the sender stops before its last gate_tail bytes until
   * the receiver has seen its first byte (or IO_TIMEOUT_S passes). */
  size_t gate_tail;
  pthread_mutex_t *mu;
  pthread_cond_t *cv;
  bool *got_first;
  bool *sent_all;
  bool saw_first_before_sent_all;
  /* results */
  size_t done;
  char err[160];
};

static void *sender_main(void *arg)
{
  struct flow *f = arg;
  unsigned char *buf = malloc(f->piece);

  while ((buf != NULL) && (f->done < f->bytes)) {
    size_t n = f->bytes - f->done;
    ssize_t w;

    if (n > f->piece)
      n = f->piece;
    if ((f->gate_tail != 0) && (f->done + n > f->bytes - f->gate_tail) &&
        (f->done <= f->bytes - f->gate_tail)) {
      struct timespec dl;

      n = f->bytes - f->gate_tail - f->done;
      if (n == 0) {
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_sec += IO_TIMEOUT_S;
        pthread_mutex_lock(f->mu);
        while (!*f->got_first) {
          if (pthread_cond_timedwait(f->cv, f->mu, &dl) != 0)
            break;
        }
        bool ok = *f->got_first;
        pthread_mutex_unlock(f->mu);
        if (!ok) {
          snprintf(f->err, sizeof(f->err),
                   "sender: no byte reached the receiver after %zu of %zu bytes were sent", f->done,
                   f->bytes);
          break;
        }
        f->gate_tail = 0;
        continue;
      }
    }
    stream_fill(f->seed, f->done, buf, n);
    w = send(f->fd, buf, n, MSG_NOSIGNAL);
    if (w <= 0) {
      if ((w < 0) && (errno == EINTR))
        continue;
      snprintf(f->err, sizeof(f->err), "sender: send at %zu: %s", f->done,
               (w < 0) ? strerror(errno) : "0");
      break;
    }
    f->done += (size_t)w;
  }
  if (f->sent_all != NULL) {
    pthread_mutex_lock(f->mu);
    *f->sent_all = true;
    pthread_mutex_unlock(f->mu);
  }
  if ((f->err[0] == '\0') && f->is_shut_wr)
    shutdown(f->fd, SHUT_WR);
  free(buf);
  return NULL;
}

static void *receiver_main(void *arg)
{
  struct flow *f = arg;
  unsigned char *buf = malloc(f->piece);
  unsigned char *want = malloc(f->piece);

  while ((buf != NULL) && (want != NULL) && (f->done < f->bytes)) {
    size_t n = f->bytes - f->done;
    ssize_t r;

    if (f->done < f->slow_bytes) {
      struct timespec pause = {0, 200 * 1000};

      nanosleep(&pause, NULL); /* a slow reader, so that back-pressure builds up */
      if (n > 1024)
        n = 1024;
    }
    if (n > f->piece)
      n = f->piece;
    r = recv(f->fd, buf, n, 0);
    if (r <= 0) {
      if ((r < 0) && (errno == EINTR))
        continue;
      snprintf(f->err, sizeof(f->err), "receiver: recv at %zu of %zu: %s", f->done, f->bytes,
               (r < 0) ? strerror(errno) : "end-of-file");
      break;
    }
    stream_fill(f->seed, f->done, want, (size_t)r);
    if (memcmp(buf, want, (size_t)r) != 0) {
      snprintf(f->err, sizeof(f->err), "receiver: wrong data within bytes %zu..%zu", f->done,
               f->done + (size_t)r);
      break;
    }
    if ((f->done == 0) && (f->got_first != NULL)) {
      pthread_mutex_lock(f->mu);
      f->saw_first_before_sent_all = !*f->sent_all;
      *f->got_first = true;
      pthread_cond_broadcast(f->cv);
      pthread_mutex_unlock(f->mu);
    }
    f->done += (size_t)r;
  }
  if ((f->err[0] == '\0') && f->expect_eof) {
    ssize_t r = recv(f->fd, buf, 1, 0);

    if (r != 0)
      snprintf(f->err, sizeof(f->err), "receiver: expected end-of-file, got %zd (%s)", r,
               (r < 0) ? strerror(errno) : "data");
  }
  free(buf);
  free(want);
  return NULL;
}

static void flow_init(struct flow *f, int fd, uint64_t seed, size_t bytes)
{
  memset(f, 0, sizeof(*f));
  f->fd = fd;
  f->seed = seed;
  f->bytes = bytes;
  f->piece = 256 << 10;
  f->is_shut_wr = true;
  f->expect_eof = true;
}

/* bytes each way at once between end_a and end_c, with slow readers for the
 * first slow_bytes; checks every byte and the end-of-file after them. */
static void exchange(int end_a, int end_c, size_t bytes, size_t slow_bytes)
{
  struct flow f[4];
  pthread_t th[4];

  flow_init(&f[0], end_a, 11, bytes); /* a -> c */
  flow_init(&f[1], end_c, 11, bytes);
  flow_init(&f[2], end_c, 22, bytes); /* c -> a */
  flow_init(&f[3], end_a, 22, bytes);
  f[1].slow_bytes = slow_bytes;
  f[3].slow_bytes = slow_bytes;
  for (int i = 0; i < 4; i++)
    MC_T_EQ_INT(pthread_create(&th[i], NULL, (i % 2 == 0) ? sender_main : receiver_main, &f[i]), 0);
  for (int i = 0; i < 4; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < 4; i++) {
    if (f[i].err[0] != '\0')
      MC_T_FAIL("flow %d: %s", i, f[i].err);
    MC_T_EQ_INT(f[i].done, bytes);
  }
}

/* ---------- cases ---------- */

/* 1: 64 MiB each way at once through one pipe, slow readers at first; the
 * relay never holds more than its bound for a direction. */
static void exact_both_ways_with_back_pressure(void)
{
  const size_t bound = 192 << 10; /* not a pipe size: the relay's own count must hold */
  const size_t bytes = 64 << 20;
  struct mc_mesh_relay_opts opts = {.name = "relay-t1", .dir_bytes = bound};
  struct mc_mesh_relay *relay = NULL;
  struct mc_mesh_relay_stats st;
  int a;
  int c;

  MC_T_OK(mc_mesh_relay_create(&opts, NULL, &relay));
  relay_path(KIND_TCP, &relay, 1, "t1", &a, &c);
  exchange(a, c, bytes, 4 << 20);
  close(a);
  close(c);
  wait_stats(relay, 1, 0, 0);
  mc_mesh_relay_stats(relay, &st);
  MC_T_EQ_INT(st.bytes_a_to_b, bytes);
  MC_T_EQ_INT(st.bytes_b_to_a, bytes);
  MC_T_EQ_INT(st.dir_limit_bytes, bound);
  MC_T_EQ_INT(st.n_copy_dirs, 0);
  MC_T_TRUE(st.peak_dir_bytes > 0);
  if (st.peak_dir_bytes > bound)
    MC_T_FAIL("the relay held %zu bytes for one direction, bound %zu", st.peak_dir_bytes, bound);
  mc_mesh_relay_destroy(relay);
}

/* 2: the receiver gets the first bytes of a 16 MiB message while its sender
 * still holds back the last 1 MiB, waiting for that very event: a relay
 * that stored the message before forwarding it would leave the sender
 * waiting until its deadline. */
static void forwards_cut_through(void)
{
  const size_t bytes = 16 << 20;
  struct mc_mesh_relay *relay = NULL;
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
  bool got_first = false;
  bool sent_all = false;
  struct flow s;
  struct flow r;
  pthread_t ts;
  pthread_t tr;
  int a;
  int c;

  MC_T_OK(mc_mesh_relay_create(NULL, NULL, &relay));
  relay_path(KIND_TCP, &relay, 1, "t2", &a, &c);
  flow_init(&s, a, 33, bytes);
  flow_init(&r, c, 33, bytes);
  s.gate_tail = 1 << 20;
  s.mu = r.mu = &mu;
  s.cv = r.cv = &cv;
  s.got_first = r.got_first = &got_first;
  s.sent_all = r.sent_all = &sent_all;
  MC_T_EQ_INT(pthread_create(&tr, NULL, receiver_main, &r), 0);
  MC_T_EQ_INT(pthread_create(&ts, NULL, sender_main, &s), 0);
  pthread_join(ts, NULL);
  pthread_join(tr, NULL);
  MC_T_EQ_STR(s.err, "");
  MC_T_EQ_STR(r.err, "");
  MC_T_TRUE(got_first);
  MC_T_TRUE(r.saw_first_before_sent_all);
  MC_T_EQ_INT(r.done, bytes);
  shutdown(c, SHUT_WR);
  close(a);
  close(c);
  wait_stats(relay, 1, 0, 0);
  mc_mesh_relay_destroy(relay);
}

/* 3: A -> R1 -> R2 -> C for 100 pipes at once; one thread drives every end
 * with non-blocking sends and receives of uneven sizes, so the pipes'
 * traffic interleaves in both relays. */
#define T3_PIPES 100
#define T3_BYTES (384u << 10)

struct t3_end {
  int fd;
  uint64_t send_seed;
  uint64_t recv_seed;
  size_t sent;
  size_t got;
  bool is_shut;
  bool has_eof;
};

static bool t3_step(struct t3_end *e, short revents, unsigned char *buf, unsigned char *want,
                    uint64_t *rng, char *err, size_t err_bytes)
{
  if (((revents & POLLOUT) != 0) && (e->sent < T3_BYTES)) {
    size_t n = 1 + (size_t)(mix64((*rng)++) % (24 << 10));
    ssize_t w;

    if (n > T3_BYTES - e->sent)
      n = T3_BYTES - e->sent;
    stream_fill(e->send_seed, e->sent, buf, n);
    w = send(e->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0)
      e->sent += (size_t)w;
    else if ((w < 0) && (errno != EAGAIN)) {
      snprintf(err, err_bytes, "send: %s", strerror(errno));
      return false;
    }
  }
  if ((e->sent == T3_BYTES) && !e->is_shut) {
    shutdown(e->fd, SHUT_WR);
    e->is_shut = true;
  }
  if ((revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
    ssize_t r = recv(e->fd, buf, 32 << 10, MSG_DONTWAIT);

    if (r > 0) {
      if (e->got + (size_t)r > T3_BYTES) {
        snprintf(err, err_bytes, "more than %u bytes", T3_BYTES);
        return false;
      }
      stream_fill(e->recv_seed, e->got, want, (size_t)r);
      if (memcmp(buf, want, (size_t)r) != 0) {
        snprintf(err, err_bytes, "wrong data within bytes %zu..%zu", e->got, e->got + (size_t)r);
        return false;
      }
      e->got += (size_t)r;
    } else if (r == 0) {
      if (e->got != T3_BYTES) {
        snprintf(err, err_bytes, "end-of-file after %zu bytes", e->got);
        return false;
      }
      e->has_eof = true;
    } else if (errno != EAGAIN) {
      snprintf(err, err_bytes, "recv: %s", strerror(errno));
      return false;
    }
  }
  return true;
}

static void chained_relays_many_pipes(void)
{
  struct mc_mesh_relay_opts opts = {.dir_bytes = 64 << 10};
  struct mc_mesh_relay *relays[2] = {NULL, NULL};
  struct t3_end *ends = calloc(2 * T3_PIPES, sizeof(*ends));
  struct pollfd *pfds = calloc(2 * T3_PIPES, sizeof(*pfds));
  unsigned char *buf = malloc(32 << 10);
  unsigned char *want = malloc(32 << 10);
  struct rlimit rl;
  uint64_t rng = 1;
  double end_time;
  int n_done = 0;

  MC_T_TRUE((ends != NULL) && (pfds != NULL) && (buf != NULL) && (want != NULL));
  /* 100 pipes: 600 sockets and 800 kernel pipe ends. */
  if ((getrlimit(RLIMIT_NOFILE, &rl) == 0) && (rl.rlim_cur < 4096) && (rl.rlim_max >= 4096)) {
    rl.rlim_cur = 4096;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  opts.name = "relay-t3-r1";
  MC_T_OK(mc_mesh_relay_create(&opts, NULL, &relays[0]));
  opts.name = "relay-t3-r2";
  MC_T_OK(mc_mesh_relay_create(&opts, NULL, &relays[1]));
  for (int i = 0; i < T3_PIPES; i++) {
    char label[32];

    snprintf(label, sizeof(label), "t3 pipe %d", i);
    relay_path((i % 4 == 3) ? KIND_UNIX : KIND_TCP, relays, 2, label, &ends[2 * i].fd,
               &ends[2 * i + 1].fd);
    ends[2 * i].send_seed = ends[2 * i + 1].recv_seed = 1000 + 2 * (uint64_t)i;
    ends[2 * i + 1].send_seed = ends[2 * i].recv_seed = 1001 + 2 * (uint64_t)i;
  }
  end_time = mc_clock_sec(CLOCK_MONOTONIC) + WAIT_MS / 1000.0;
  while ((n_done < 2 * T3_PIPES) && (mc_clock_sec(CLOCK_MONOTONIC) < end_time)) {
    int n_poll = 0;

    for (int i = 0; i < 2 * T3_PIPES; i++) {
      if (ends[i].has_eof && ends[i].is_shut)
        continue;
      pfds[n_poll].fd = ends[i].fd;
      pfds[n_poll].events = POLLIN | ((ends[i].sent < T3_BYTES) ? POLLOUT : 0);
      pfds[n_poll].revents = 0;
      n_poll++;
    }
    MC_T_TRUE(poll(pfds, (nfds_t)n_poll, 1000) >= 0);
    n_done = 0;
    for (int i = 0, k = 0; i < 2 * T3_PIPES; i++) {
      char err[128];

      if (ends[i].has_eof && ends[i].is_shut) {
        n_done++;
        continue;
      }
      if (!t3_step(&ends[i], pfds[k++].revents, buf, want, &rng, err, sizeof(err)))
        MC_T_FAIL("pipe %d end %c: %s", i / 2, (i % 2 == 0) ? 'a' : 'c', err);
    }
  }
  MC_T_EQ_INT(n_done, 2 * T3_PIPES);
  for (int i = 0; i < 2 * T3_PIPES; i++)
    close(ends[i].fd);
  for (int r = 0; r < 2; r++) {
    struct mc_mesh_relay_stats st;

    wait_stats(relays[r], T3_PIPES, 0, 0);
    mc_mesh_relay_stats(relays[r], &st);
    MC_T_EQ_INT(st.bytes_a_to_b, (uint64_t)T3_PIPES * T3_BYTES);
    MC_T_EQ_INT(st.bytes_b_to_a, (uint64_t)T3_PIPES * T3_BYTES);
    MC_T_TRUE(st.peak_dir_bytes <= (64 << 10));
    mc_mesh_relay_destroy(relays[r]);
  }
  free(ends);
  free(pfds);
  free(buf);
  free(want);
}

static void recv_exact(int fd, const char *want)
{
  char buf[64];
  size_t n = strlen(want);
  size_t got = 0;

  while (got < n) {
    ssize_t r = recv(fd, buf + got, n - got, 0);

    if (r <= 0)
      MC_T_FAIL("recv after %zu of %zu bytes: %s", got, n, (r < 0) ? strerror(errno) : "EOF");
    got += (size_t)r;
  }
  MC_T_TRUE(memcmp(buf, want, n) == 0);
}

static void expect_eof(int fd)
{
  char c;

  MC_T_EQ_INT(recv(fd, &c, 1, 0), 0);
}

/* 4: shutdown(SHUT_WR) at one end is end-of-file at the other, after the
 * data before it; the other direction goes on; then the pipe finishes. */
static void half_close_propagates(void)
{
  for (int k = 0; k < 2; k++) {
    struct mc_mesh_relay *relay = NULL;
    int a;
    int c;

    MC_T_OK(mc_mesh_relay_create(NULL, NULL, &relay));
    relay_path((k == 0) ? KIND_TCP : KIND_UNIX, &relay, 1, "t4", &a, &c);
    MC_T_EQ_INT(send(a, "ping", 4, MSG_NOSIGNAL), 4);
    MC_T_EQ_INT(shutdown(a, SHUT_WR), 0);
    recv_exact(c, "ping");
    expect_eof(c);
    MC_T_EQ_INT(send(c, "pong-after-eof", 14, MSG_NOSIGNAL), 14);
    recv_exact(a, "pong-after-eof");
    MC_T_EQ_INT(send(c, "more", 4, MSG_NOSIGNAL), 4);
    recv_exact(a, "more");
    MC_T_EQ_INT(shutdown(c, SHUT_WR), 0);
    expect_eof(a);
    wait_stats(relay, 1, 0, 0);
    close(a);
    close(c);
    mc_mesh_relay_destroy(relay);
  }
}

/* 5: a reset at one end closes the pipe at once: the other end sees a reset
 * or end-of-file within its receive deadline, and the pipe counts as
 * failed. */
static void reset_closes_both_sides(void)
{
  struct mc_mesh_relay *relay = NULL;
  struct linger lg = {.l_onoff = 1, .l_linger = 0};
  char buf[16];
  ssize_t r;
  int a;
  int c;

  MC_T_OK(mc_mesh_relay_create(NULL, NULL, &relay));
  relay_path(KIND_TCP, &relay, 1, "t5", &a, &c);
  MC_T_EQ_INT(send(a, "x", 1, MSG_NOSIGNAL), 1);
  recv_exact(c, "x");
  MC_T_EQ_INT(setsockopt(a, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
  close(a);
  r = recv(c, buf, sizeof(buf), 0);
  if ((r != 0) && !((r < 0) && (errno == ECONNRESET)))
    MC_T_FAIL("recv on the far end: %zd (%s), expected a reset or end-of-file", r,
              (r < 0) ? strerror(errno) : "data");
  wait_stats(relay, 0, 1, 0);
  close(c);
  mc_mesh_relay_destroy(relay);
}

/* 5b: the interface of an address goes down (mc_mesh_relay_fail_local): the
 * pipes with a socket bound to that address are reset at once, both ends
 * learn it; a request for another address, and a pipe on no such socket
 * (AF_UNIX), are left alone. */
static void interface_down_resets_its_pipes(void)
{
  struct mc_mesh_relay *relay = NULL;
  struct sockaddr_in lo;
  struct sockaddr_in other;
  char buf[16];
  ssize_t r;
  int a;
  int c;
  int ua;
  int uc;

  memset(&lo, 0, sizeof(lo));
  lo.sin_family = AF_INET;
  lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  other = lo;
  other.sin_addr.s_addr = htonl(INADDR_LOOPBACK + 1);
  MC_T_OK(mc_mesh_relay_create(NULL, NULL, &relay));
  relay_path(KIND_TCP, &relay, 1, "t5b", &a, &c);
  relay_path(KIND_UNIX, &relay, 1, "t5b-unix", &ua, &uc);
  MC_T_EQ_INT(send(a, "x", 1, MSG_NOSIGNAL), 1);
  recv_exact(c, "x");
  mc_mesh_relay_fail_local(relay, (const struct sockaddr *)&other, "the interface");
  MC_T_EQ_INT(send(a, "y", 1, MSG_NOSIGNAL), 1);
  recv_exact(c, "y");
  mc_mesh_relay_fail_local(relay, (const struct sockaddr *)&lo, "the interface");
  r = recv(c, buf, sizeof(buf), 0);
  if (!((r < 0) && (errno == ECONNRESET)))
    MC_T_FAIL("recv on the far end: %zd (%s), expected a reset", r,
              (r < 0) ? strerror(errno) : "data or end-of-file");
  r = recv(a, buf, sizeof(buf), 0);
  if (!((r < 0) && (errno == ECONNRESET)))
    MC_T_FAIL("recv on the near end: %zd (%s), expected a reset", r,
              (r < 0) ? strerror(errno) : "data or end-of-file");
  MC_T_EQ_INT(send(ua, "u", 1, MSG_NOSIGNAL), 1);
  recv_exact(uc, "u");
  close(ua);
  close(uc);
  wait_stats(relay, 1, 1, 0);
  close(a);
  close(c);
  mc_mesh_relay_destroy(relay);
  mc_mesh_relay_fail_local(NULL, (const struct sockaddr *)&lo, "nothing"); /* no relay: no-op */
}

/* 6: pipes busy and back-pressured (the receivers do not read), then the
 * abort flag: the relay closes them, refuses new ones, and destroy leaves
 * no descriptor and no thread. Then the same without the abort flag. */
static void abort_and_destroy_leave_nothing(void)
{
  for (int k = 0; k < 2; k++) {
    const int n_pipes = 8;
    volatile uint32_t abort_flag = 0;
    struct mc_mesh_relay_opts opts = {.poll_ms = 20};
    struct mc_mesh_relay *relay = NULL;
    struct mc_mesh_relay_stats st;
    int fds0 = mc_count_fds();
    int threads0 = mc_count_threads_stable();
    int a[8];
    int c[8];
    unsigned char *junk = calloc(1, 1 << 20);
    double t0;

    MC_T_OK(mc_mesh_relay_create(&opts, &abort_flag, &relay));
    MC_T_EQ_INT(mc_count_threads(), threads0 + 1);
    for (int i = 0; i < n_pipes; i++) {
      int fl;

      relay_path(KIND_TCP, &relay, 1, "t6", &a[i], &c[i]);
      fl = fcntl(a[i], F_GETFL);
      fcntl(a[i], F_SETFL, fl | O_NONBLOCK);
      /* Fill everything up to the relay's bound: nobody reads at c. */
      while (send(a[i], junk, 1 << 20, MSG_NOSIGNAL) > 0) {
      }
    }
    mc_mesh_relay_stats(relay, &st);
    MC_T_EQ_INT(st.n_active, n_pipes);
    t0 = mc_clock_sec(CLOCK_MONOTONIC);
    if (k == 0) {
      int x;
      int y;

      abort_flag = 1;
      wait_stats(relay, 0, 0, (uint64_t)n_pipes);
      sock_pair(KIND_TCP, &x, &y);
      MC_T_EQ_INT(mc_mesh_relay_add(relay, x, y, "after abort"), ncclInternalError);
      close(x); /* refused: still ours */
      close(y);
    }
    mc_mesh_relay_destroy(relay);
    /* Bounded: a few poll periods, far below the test deadline. */
    MC_T_TRUE(mc_clock_sec(CLOCK_MONOTONIC) - t0 < 10.0);
    for (int i = 0; i < n_pipes; i++) {
      char b;
      ssize_t r = recv(c[i], &b, 1, MSG_DONTWAIT);

      (void)r; /* data, EOF or reset: the relay's side is gone either way */
      close(a[i]);
      close(c[i]);
    }
    free(junk);
    MC_T_EQ_INT(mc_count_fds(), fds0);
    MC_T_EQ_INT(mc_count_threads_settled(threads0, 5000), threads0);
  }
}

/* 7: the read/write path (forced), over TCP and AF_UNIX, as exact as splice. */
static void copy_path_is_exact(void)
{
  for (int k = 0; k < 2; k++) {
    const size_t bound = 100000;
    const size_t bytes = 24 << 20;
    struct mc_mesh_relay_opts opts = {.name = "relay-t7", .dir_bytes = bound, .force_copy = true};
    struct mc_mesh_relay *relay = NULL;
    struct mc_mesh_relay_stats st;
    int a;
    int c;

    MC_T_OK(mc_mesh_relay_create(&opts, NULL, &relay));
    relay_path((k == 0) ? KIND_TCP : KIND_UNIX, &relay, 1, "t7", &a, &c);
    exchange(a, c, bytes, 2 << 20);
    close(a);
    close(c);
    wait_stats(relay, 1, 0, 0);
    mc_mesh_relay_stats(relay, &st);
    MC_T_EQ_INT(st.n_copy_dirs, 2);
    MC_T_EQ_INT(st.bytes_a_to_b, bytes);
    MC_T_EQ_INT(st.bytes_b_to_a, bytes);
    MC_T_TRUE((st.peak_dir_bytes > 0) && (st.peak_dir_bytes <= bound));
    mc_mesh_relay_destroy(relay);
  }
}

/* max_pipes: the pipe past the limit is refused with ncclSystemError naming
 * the limit, and its sockets stay the caller's; bad descriptors are
 * ncclInvalidArgument; destroy(NULL) is a no-op. */
static void limits_and_arguments(void)
{
  struct mc_mesh_relay_opts opts = {.max_pipes = 2};
  struct mc_mesh_relay *relay = NULL;
  int a[3];
  int c[3];
  int x;
  int y;

  mc_mesh_relay_destroy(NULL);
  MC_T_OK(mc_mesh_relay_create(&opts, NULL, &relay));
  for (int i = 0; i < 2; i++)
    relay_path(KIND_UNIX, &relay, 1, "t8", &a[i], &c[i]);
  sock_pair(KIND_UNIX, &a[2], &x);
  sock_pair(KIND_UNIX, &y, &c[2]);
  MC_T_EQ_INT(mc_mesh_relay_add(relay, x, y, "third"), ncclSystemError);
  MC_T_CONTAINS(mc_t_last_error(), "max_pipes 2");
  /* Still ours and still connected. */
  MC_T_EQ_INT(send(a[2], "k", 1, MSG_NOSIGNAL), 1);
  recv_exact(x, "k");
  MC_T_EQ_INT(mc_mesh_relay_add(relay, -1, y, "bad"), ncclInvalidArgument);
  MC_T_EQ_INT(mc_mesh_relay_add(relay, y, y, "same"), ncclInvalidArgument);
  close(x);
  close(y);
  close(a[2]);
  close(c[2]);
  for (int i = 0; i < 2; i++) {
    MC_T_EQ_INT(send(a[i], "z", 1, MSG_NOSIGNAL), 1);
    recv_exact(c[i], "z");
    close(a[i]);
    close(c[i]);
  }
  wait_stats(relay, 2, 0, 0);
  mc_mesh_relay_destroy(relay);
}

MC_T_MAIN(exact_both_ways_with_back_pressure, forwards_cut_through, chained_relays_many_pipes,
          half_close_propagates, reset_closes_both_sides, interface_down_resets_its_pipes,
          abort_and_destroy_leave_nothing, copy_path_is_exact, limits_and_arguments)
