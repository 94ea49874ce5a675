/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The socket net (src/net/net_socket*.c) over 127.0.0.1 only, in one
 * process: non-blocking listen/connect/accept (polled from one thread, and
 * from two threads), exact bytes for sizes around the inline and task
 * limits up to 100 MiB, posting-order matching with 32 outstanding
 * requests, receives larger and smaller than the send, a peer closing in
 * the middle of a message, garbage connections to the listener, strangers
 * without the communicator's secret on either end of a connection, floods
 * of silent and forged sockets, the abort
 * flag, and fds/threads back to their counts after close and finalize; with
 * 0, 1 and 4 helper threads and 1, 2 and 8 sockets per thread.
 */
#include "core/params.h"
#include "net/net.h"
#include "net/net_auth.h"
#include "net/net_socket_int.h"
#include "socket/socket.h"

#include "mc_net_pair.h"
#include "mc_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#define MIB (1024 * 1024)

static const struct mc_net_ops *const net = &mc_net_socket_ops;

static const int thread_counts[] = {0, 1, 4};
static const int sock_counts[] = {1, 2, 8};

/* ---------- helpers ---------- */

static void set_int(enum mc_param_id id, int v)
{
  char buf[32];

  snprintf(buf, sizeof(buf), "%d", v);
  mc_param_set_for_tests(id, buf);
}

static void use_loopback(int n_threads, int n_socks)
{
  mc_param_set_for_tests(MC_P_SOCKET_IFNAME, "=lo");
  mc_param_set_for_tests(MC_P_SOCKET_FAMILY, "AF_INET");
  set_int(MC_P_SOCKET_NTHREADS, n_threads);
  set_int(MC_P_NSOCKS_PERTHREAD, n_socks);
}

static void ctx_open(struct np_pair *p, const volatile uint32_t *abort_flag)
{
  np_open(p, net, &(struct mc_net_init_args){.abort_flag = abort_flag});
}

static void pair_open(struct np_pair *p, int n_threads, int n_socks)
{
  use_loopback(n_threads, n_socks);
  ctx_open(p, NULL);
  np_connect(p);
}

/* Tests both requests (either may be NULL = already done) until both are done. */
static void wait_both(void *sreq, void *rreq, size_t *rbytes_out)
{
  void *reqs[2] = {sreq, rreq};
  size_t sizes[2] = {0, 0};

  np_wait(net, reqs, sizes, 2);
  if ((rreq != NULL) && (rbytes_out != NULL))
    *rbytes_out = sizes[1];
}

static struct np_counts counts_now(void)
{
  struct np_counts c = {mc_count_fds(), mc_count_threads()};
  return c;
}

/* ---------- cases ---------- */

static void devices_and_properties(void)
{
  struct mc_net_props props;
  void *ctx = NULL;
  int ndev = 0;

  use_loopback(-2, -2);
  MC_T_OK(net->init(&(struct mc_net_init_args){.abort_flag = NULL}, &ctx));
  MC_T_EQ_STR(net->name, "Socket");
  MC_T_OK(net->devices(ctx, &ndev));
  MC_T_EQ_INT(ndev, 1);
  MC_T_OK(net->get_properties(ctx, 0, &props));
  MC_T_EQ_STR(props.name, "lo");
  MC_T_EQ_STR(props.pci_path, ""); /* virtual */
  MC_T_EQ_INT(props.guid, 0);
  MC_T_EQ_INT(props.ptr_support, MC_NET_PTR_HOST);
  MC_T_EQ_INT(props.speed, 10000); /* lo has no speed: NCCL's default */
  MC_T_EQ_INT(props.max_recvs, 1);
  MC_T_EQ_INT(props.max_comms, 65536);
  MC_T_EQ_INT(props.max_p2p_bytes, 1ull << 30);
  MC_T_TRUE(props.latency == 0);
  MC_T_EQ_INT(net->get_properties(ctx, 1, &props), ncclInvalidArgument);
  MC_T_OK(net->finalize(ctx));

  /* A pattern that matches nothing names the variable and what exists. */
  mc_param_set_for_tests(MC_P_SOCKET_IFNAME, "=nosuchif0");
  MC_T_EQ_INT(net->init(&(struct mc_net_init_args){.abort_flag = NULL}, &ctx), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "NCCL_SOCKET_IFNAME=");
  MC_T_CONTAINS(mc_t_last_error(), "lo");
  mc_param_reset_for_tests();
}

struct accept_arg {
  void *listen;
  void *recv;
  ncclResult_t res;
};

static void *accept_thread(void *arg)
{
  struct accept_arg *a = arg;
  struct mc_deadline dl = mc_deadline_in_ms(NP_LONG_WAIT);

  a->res = ncclSuccess;
  while ((a->recv == NULL) && (a->res == ncclSuccess) && !mc_deadline_passed(dl)) {
    a->res = net->accept(a->listen, &a->recv);
    if (a->recv == NULL)
      usleep(100);
  }
  return NULL;
}

static void connect_accept_two_threads(void)
{
  struct np_counts before = counts_now();
  struct accept_arg a;
  struct np_pair p;
  pthread_t t;

  use_loopback(2, 2);
  ctx_open(&p, NULL);
  memset(&a, 0, sizeof(a));
  a.listen = p.listen;
  MC_T_EQ_INT(pthread_create(&t, NULL, accept_thread, &a), 0);
  {
    struct mc_deadline dl = mc_deadline_in_ms(NP_LONG_WAIT);
    while ((p.send == NULL) && !mc_deadline_passed(dl))
      MC_T_OK(net->connect(p.ctx, 0, p.handle, &p.send));
  }
  pthread_join(t, NULL);
  MC_T_OK(a.res);
  MC_T_TRUE(p.send != NULL);
  MC_T_TRUE(a.recv != NULL);
  p.recv = a.recv;
  np_check_xfer(&p, 1000, 0, 1);
  np_check_xfer(&p, 3 * MIB + 1, 7, 2);
  np_close(&p);
  np_counts_back(before);
}

/* Several connections through one listener, set up at the same time. */
static void one_listener_many_connections(void)
{
  struct np_counts before = counts_now();
  struct np_pair p;
  void *send[3] = {NULL, NULL, NULL};
  void *recv[3] = {NULL, NULL, NULL};
  char handles[3][MC_NET_HANDLE_BYTES];
  struct mc_deadline dl = mc_deadline_in_ms(NP_LONG_WAIT);
  int n_recv = 0;

  use_loopback(1, 2);
  ctx_open(&p, NULL);
  for (int i = 0; i < 3; i++)
    memcpy(handles[i], p.handle, sizeof(p.handle));
  while (n_recv < 3) {
    for (int i = 0; i < 3; i++) {
      if (send[i] == NULL)
        MC_T_OK(net->connect(p.ctx, 0, handles[i], &send[i]));
    }
    MC_T_OK(net->accept(p.listen, &recv[n_recv]));
    if (recv[n_recv] != NULL)
      n_recv++;
    MC_T_TRUE(!mc_deadline_passed(dl));
  }
  while ((send[0] == NULL) || (send[1] == NULL) || (send[2] == NULL)) {
    for (int i = 0; i < 3; i++) {
      if (send[i] == NULL)
        MC_T_OK(net->connect(p.ctx, 0, handles[i], &send[i]));
    }
    MC_T_TRUE(!mc_deadline_passed(dl));
  }
  /* Each send reaches exactly one receive comm: send i's size is i + 1 MiB. */
  {
    unsigned char *buf[3];
    unsigned char *rbuf[3];
    void *sreq[3];
    void *rreq[3];
    int seen[3] = {0, 0, 0};

    for (int i = 0; i < 3; i++) {
      size_t b = (size_t)(i + 1) * MIB;
      buf[i] = malloc(b);
      rbuf[i] = malloc(4 * MIB);
      MC_T_TRUE((buf[i] != NULL) && (rbuf[i] != NULL));
      np_fill(buf[i], b, (unsigned)i + 10);
      MC_T_OK(net->isend(send[i], buf[i], b, 0, NULL, &sreq[i]));
      MC_T_TRUE(sreq[i] != NULL);
      {
        void *d = rbuf[i];
        size_t sz = 4 * MIB;
        int tag = 0;
        MC_T_OK(net->irecv(recv[i], 1, &d, &sz, &tag, NULL, &rreq[i]));
      }
    }
    void *reqs[6] = {sreq[0], rreq[0], sreq[1], rreq[1], sreq[2], rreq[2]};
    size_t got[6] = {0, 0, 0, 0, 0, 0}; /* got[2 * i + 1]: receive i */

    /* Every side must be tested: a receiver reads sizes only in its calls. */
    np_wait(net, reqs, got, 6);
    for (int i = 0; i < 3; i++) {
      size_t bytes = got[2 * i + 1];
      int k = (int)(bytes / MIB) - 1;
      MC_T_TRUE((k >= 0) && (k < 3) && (bytes == (size_t)(k + 1) * MIB));
      MC_T_EQ_INT(memcmp(rbuf[i], buf[k], bytes), 0);
      seen[k]++;
    }
    MC_T_EQ_INT(seen[0] + seen[1] + seen[2], 3);
    MC_T_TRUE((seen[0] == 1) && (seen[1] == 1) && (seen[2] == 1));
    for (int i = 0; i < 3; i++) {
      free(buf[i]);
      free(rbuf[i]);
    }
  }
  for (int i = 0; i < 3; i++) {
    MC_T_OK(net->close_send(send[i]));
    MC_T_OK(net->close_recv(recv[i]));
  }
  MC_T_OK(net->close_listen(p.listen));
  MC_T_OK(net->finalize(p.ctx));
  np_counts_back(before);
}

static void exact_bytes_every_config(void)
{
  static const size_t sizes[] = {
      0, 1, 127, 128, 129, 64 * 1024 - 1, 64 * 1024, 64 * 1024 + 1, 4 * MIB + 3, 100 * MIB};

  for (size_t t = 0; t < sizeof(thread_counts) / sizeof(thread_counts[0]); t++) {
    for (size_t s = 0; s < sizeof(sock_counts) / sizeof(sock_counts[0]); s++) {
      struct np_counts before = counts_now();
      struct np_pair p;

      pair_open(&p, thread_counts[t], sock_counts[s]);
      if (thread_counts[t] > 0)
        MC_T_EQ_INT(mc_count_threads(), before.threads + 2 * thread_counts[t]);
      for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        np_check_xfer(&p, sizes[i], 0, (unsigned)i);
        np_check_xfer(&p, sizes[i], 1 + i * 1000, (unsigned)i + 100);
      }
      np_close(&p);
      np_counts_back(before);
    }
  }
}

/* The payload on the control socket only (no data sockets). */
static void no_data_sockets(void)
{
  struct np_counts before = counts_now();
  struct np_pair p;

  pair_open(&p, 0, 0);
  np_check_xfer(&p, 0, 0, 1);
  np_check_xfer(&p, 129, 0, 2);
  np_check_xfer(&p, 5 * MIB + 1, 3, 3);
  np_close(&p);
  /* threads asked but no sockets: no threads */
  pair_open(&p, 4, 0);
  MC_T_EQ_INT(mc_count_threads(), before.threads);
  np_check_xfer(&p, 1 * MIB, 0, 4);
  np_close(&p);
  np_counts_back(before);
}

static void posting_order_32_outstanding(void)
{
  enum { N = MC_NET_MAX_REQUESTS };

  for (size_t t = 0; t < sizeof(thread_counts) / sizeof(thread_counts[0]); t++) {
    struct np_counts before = counts_now();
    struct np_pair p;
    unsigned char *sbuf[N];
    unsigned char *rbuf[N];
    size_t bytes[N];
    void *sreq[N];
    void *rreq[N];
    void *extra = NULL;
    int n_left = 2 * N;
    struct mc_deadline dl = mc_deadline_in_ms(NP_LONG_WAIT);

    pair_open(&p, thread_counts[t], 2);
    for (int i = 0; i < N; i++) {
      /* inline, single task, several tasks, empty: mixed */
      static const size_t base[] = {0, 5, 128, 129, 70000, 300000, 2 * MIB + 17};
      bytes[i] = base[i % 7] + (size_t)i;
      sbuf[i] = malloc(bytes[i] + 1);
      rbuf[i] = malloc(bytes[i] + 64);
      MC_T_TRUE((sbuf[i] != NULL) && (rbuf[i] != NULL));
      np_fill(sbuf[i], bytes[i], (unsigned)i);
      memset(rbuf[i], 0, bytes[i] + 64);
    }
    for (int i = 0; i < N; i++) {
      void *d = rbuf[i];
      size_t sz = bytes[i] + 64;
      int tag = 0;
      MC_T_OK(net->irecv(p.recv, 1, &d, &sz, &tag, NULL, &rreq[i]));
      MC_T_TRUE(rreq[i] != NULL);
      MC_T_OK(net->isend(p.send, sbuf[i], bytes[i], 0, NULL, &sreq[i]));
      MC_T_TRUE(sreq[i] != NULL);
    }
    /* A 33rd request waits for a free slot. */
    MC_T_OK(net->isend(p.send, sbuf[0], 1, 0, NULL, &extra));
    MC_T_NULL(extra);
    /* Test in reverse order: completion order is free, matching is posting order. */
    while (n_left > 0) {
      for (int i = N - 1; i >= 0; i--) {
        int done = 0;
        size_t got = 0;
        if (sreq[i] != NULL) {
          MC_T_OK(net->test(sreq[i], &done, NULL));
          if (done) {
            sreq[i] = NULL;
            n_left--;
          }
        }
        if (rreq[i] != NULL) {
          MC_T_OK(net->test(rreq[i], &done, &got));
          if (done) {
            rreq[i] = NULL;
            n_left--;
            MC_T_EQ_INT(got, bytes[i]);
            MC_T_EQ_INT(memcmp(sbuf[i], rbuf[i], bytes[i]), 0);
          }
        }
      }
      MC_T_TRUE(!mc_deadline_passed(dl));
    }
    for (int i = 0; i < N; i++) {
      free(sbuf[i]);
      free(rbuf[i]);
    }
    np_check_xfer(&p, 77, 0, 9); /* still in step */
    np_close(&p);
    np_counts_back(before);
  }
}

static void send_larger_than_recv_fails(void)
{
  static const size_t sizes[][2] = {{100, 99}, {1000, 500}, {4 * MIB, 64 * 1024}};

  for (size_t t = 0; t < sizeof(thread_counts) / sizeof(thread_counts[0]); t++) {
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
      struct np_counts before = counts_now();
      struct np_pair p;
      char *s = calloc(1, sizes[k][0]);
      char *r = calloc(1, sizes[k][1]);
      void *sreq;
      void *rreq;
      ncclResult_t res = ncclSuccess;
      int done = 0;
      struct mc_deadline dl = mc_deadline_in_ms(NP_LONG_WAIT);
      char expect[128];

      MC_T_TRUE((s != NULL) && (r != NULL));
      pair_open(&p, thread_counts[t], 2);
      rreq = np_post_recv(&p, r, sizes[k][1]);
      sreq = np_post_send(&p, s, sizes[k][0]);
      while ((res == ncclSuccess) && !done && !mc_deadline_passed(dl)) {
        int sdone = 0;
        (void)net->test(sreq, &sdone, NULL);
        res = net->test(rreq, &done, NULL);
      }
      MC_T_EQ_INT(res, ncclInvalidUsage);
      MC_T_EQ_INT(done, 0);
      MC_T_CONTAINS(mc_t_last_error(), "message truncated");
      snprintf(expect, sizeof(expect), "sent %zu bytes", sizes[k][0]);
      MC_T_CONTAINS(mc_t_last_error(), expect);
      snprintf(expect, sizeof(expect), "posted for %zu bytes", sizes[k][1]);
      MC_T_CONTAINS(mc_t_last_error(), expect);
      MC_T_CONTAINS(mc_t_last_error(), "127.0.0.1<");
      /* The comm stays failed. */
      MC_T_EQ_INT(net->test(rreq, &done, NULL), ncclInvalidUsage);
      np_close(&p);
      free(s);
      free(r);
      np_counts_back(before);
    }
  }
}

/* Closes one side in the middle of a 64 MiB message: the other side fails
 * with ncclRemoteError naming the peer, in bounded time. With helper
 * threads the message moves on while this thread is not scheduled (a
 * loaded host, a sanitizer build), and it may be whole before the close: then
 * the survivor's request completes, which is right, and the case runs
 * again (MID_MESSAGE_TRIES in all). */
#define MID_MESSAGE_TRIES 5
static void peer_closes_mid_message(void)
{
  const size_t bytes = 64 * MIB;
  char *s = malloc(bytes);
  char *r = malloc(bytes);

  MC_T_TRUE((s != NULL) && (r != NULL));
  memset(s, 1, bytes);
  for (size_t t = 0; t < sizeof(thread_counts) / sizeof(thread_counts[0]); t++) {
    for (int closer_is_sender = 0; closer_is_sender < 2; closer_is_sender++) {
      int tries = 0;
      ncclResult_t res = ncclSuccess;

      while (res == ncclSuccess) {
        struct np_counts before = counts_now();
        struct np_pair p;
        void *sreq;
        void *rreq;
        void **survivor_req;
        int done = 0;
        double t0;

        if (++tries > MID_MESSAGE_TRIES)
          MC_T_FAIL("%d threads, %s closes: the message was whole before the close %d times",
                    thread_counts[t], closer_is_sender ? "sender" : "receiver", MID_MESSAGE_TRIES);
        pair_open(&p, thread_counts[t], 2);
        rreq = np_post_recv(&p, r, bytes);
        sreq = np_post_send(&p, s, bytes);
        /* Move some bytes, not all. */
        for (int i = 0; i < 3; i++) {
          MC_T_OK(net->test(sreq, &done, NULL));
          MC_T_OK(net->test(rreq, &done, NULL));
        }
        MC_T_EQ_INT(done, 0);
        if (closer_is_sender) {
          MC_T_OK(net->close_send(p.send));
          p.send = NULL;
          survivor_req = &rreq;
        } else {
          MC_T_OK(net->close_recv(p.recv));
          p.recv = NULL;
          survivor_req = &sreq;
        }
        t0 = mc_clock_sec(CLOCK_MONOTONIC);
        done = 0;
        while ((res == ncclSuccess) && !done && (mc_clock_sec(CLOCK_MONOTONIC) - t0 < 10))
          res = net->test(*survivor_req, &done, NULL);
        if ((res == ncclSuccess) && !done)
          MC_T_FAIL("%d threads, %s closes: the survivor saw nothing in 10 s", thread_counts[t],
                    closer_is_sender ? "sender" : "receiver");
        if (res != ncclSuccess) {
          MC_T_EQ_INT(res, ncclRemoteError);
          MC_T_CONTAINS(mc_t_last_error(), "127.0.0.1<");
          MC_T_CONTAINS(mc_t_last_error(), "closed the connection");
        }
        np_close(&p);
        np_counts_back(before);
      }
    }
  }
  free(s);
  free(r);
}

/* The sender sends a message on the data sockets and a small one inline,
 * then closes; the receiver posts three receives only then. The two
 * messages arrive whole (the close shows in the control stream before the
 * first one's data is read), the third receive fails naming the close: a
 * peer's last words (a failure notice) are never lost to its close. */
static void peer_closes_after_its_messages(void)
{
  const size_t big = 96 * 1024;
  const size_t posted = 256 * 1024;
  unsigned char small[64];
  unsigned char *s = malloc(big);
  unsigned char *r[3] = {malloc(posted), malloc(posted), malloc(posted)};

  MC_T_TRUE((s != NULL) && (r[0] != NULL) && (r[1] != NULL) && (r[2] != NULL));
  np_fill(s, big, 7);
  np_fill(small, sizeof(small), 8);
  for (size_t t = 0; t < sizeof(thread_counts) / sizeof(thread_counts[0]); t++) {
    struct np_counts before = counts_now();
    struct np_pair p;
    void *rreq[3];
    size_t got[2] = {0, 0};
    ncclResult_t res = ncclSuccess;
    int done = 0;
    struct mc_deadline dl = mc_deadline_in_ms(NP_LONG_WAIT);

    pair_open(&p, thread_counts[t], 2);
    wait_both(np_post_send(&p, s, big), NULL, NULL);
    wait_both(np_post_send(&p, small, sizeof(small)), NULL, NULL);
    MC_T_OK(net->close_send(p.send));
    p.send = NULL;
    for (int i = 0; i < 3; i++)
      rreq[i] = np_post_recv(&p, r[i], posted);
    for (int i = 0; i < 2; i++)
      wait_both(NULL, rreq[i], &got[i]);
    MC_T_EQ_INT(got[0], big);
    MC_T_EQ_INT(memcmp(r[0], s, big), 0);
    MC_T_EQ_INT(got[1], sizeof(small));
    MC_T_EQ_INT(memcmp(r[1], small, sizeof(small)), 0);
    while ((res == ncclSuccess) && !done && !mc_deadline_passed(dl))
      res = net->test(rreq[2], &done, NULL);
    MC_T_EQ_INT(res, ncclRemoteError);
    MC_T_CONTAINS(mc_t_last_error(), "closed the connection (control socket, received 0 of 262144");
    np_close(&p);
    np_counts_back(before);
  }
  free(s);
  for (int i = 0; i < 3; i++)
    free(r[i]);
}

static int raw_connect(const void *handle)
{
  union mc_sockaddr a;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  memcpy(&a, handle, sizeof(a)); /* the handle starts with the listener's address */
  MC_T_TRUE(fd >= 0);
  MC_T_EQ_INT(connect(fd, &a.sa, mc_sockaddr_len(&a)), 0);
  return fd;
}

/* True once the listener closed fd (EOF or reset), polling accept meanwhile. */
static bool closed_by_listener(int fd, void *listen)
{
  struct mc_deadline dl = mc_deadline_in_ms(NP_LONG_WAIT);
  void *comm = NULL;

  while (!mc_deadline_passed(dl)) {
    struct pollfd pf = {.fd = fd, .events = POLLIN, .revents = 0};
    char c;

    MC_T_OK(net->accept(listen, &comm));
    MC_T_NULL(comm);
    if (poll(&pf, 1, 1) > 0) {
      ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
      if ((n == 0) || ((n < 0) && (errno == ECONNRESET)))
        return true;
    }
  }
  return false;
}

/* The 12-byte handshake (NCCL_SOCKET_MAGIC, type NET) every socket starts with. */
static void raw_handshake(int fd)
{
  uint64_t magic = (uint64_t)mc_param_int(MC_P_SOCKET_MAGIC);
  uint32_t type = MC_SOCK_TYPE_NET;
  unsigned char hs[12];

  memcpy(hs, &magic, 8);
  memcpy(hs + 8, &type, 4);
  MC_T_EQ_INT(send(fd, hs, sizeof(hs), MSG_NOSIGNAL), (long long)sizeof(hs));
}

/* Reads exactly `bytes` from fd, calling accept on listen meanwhile (the
 * listener moves its handshakes only in accept; it must return no comm).
 * False when fd was closed first. */
static bool raw_read(int fd, void *listen, void *buf, size_t bytes)
{
  struct mc_deadline dl = mc_deadline_in_ms(NP_LONG_WAIT);
  size_t got = 0;

  while ((got < bytes) && !mc_deadline_passed(dl)) {
    ssize_t n;

    if (listen != NULL) {
      void *comm = NULL;
      MC_T_OK(net->accept(listen, &comm));
      MC_T_NULL(comm);
    }
    n = recv(fd, (char *)buf + got, bytes - got, MSG_DONTWAIT);
    if (n > 0)
      got += (size_t)n;
    else if ((n == 0) || ((errno != EAGAIN) && (errno != EWOULDBLOCK)))
      return false;
    else
      usleep(1000);
  }
  MC_T_EQ_INT(got, bytes);
  return true;
}

/* The listen id a handle carries. */
static uint64_t handle_listen_id(const void *handle)
{
  struct mc_net_sock_handle h;

  MC_T_OK(mc_net_sock_handle_parse(handle, (uint64_t)mc_param_int(MC_P_SOCKET_MAGIC), &h));
  return h.listen_id;
}

/* Plays a connector's socket by hand: handshake, the listener's challenge,
 * then a response for socket `index` of connection conn_id with n_socks
 * data sockets, MAC'd under key. */
static void raw_respond(int fd, void *listen, const uint8_t key[MC_SHA256_BYTES],
                        uint64_t listen_id, uint64_t conn_id, uint32_t index, uint32_t n_socks)
{
  uint8_t chal[MC_NET_AUTH_CHALLENGE_BYTES];
  uint8_t nonce_a[MC_NET_AUTH_NONCE_BYTES];
  uint8_t buf[MC_NET_AUTH_RESPONSE_BYTES];
  struct mc_net_auth_response r;

  raw_handshake(fd);
  MC_T_TRUE(raw_read(fd, listen, chal, sizeof(chal)));
  MC_T_TRUE(mc_net_auth_challenge_decode(&mc_net_auth_socket, chal, nonce_a));
  memset(&r, 0, sizeof(r));
  r.listen_id = listen_id;
  r.conn_id = conn_id;
  r.index = index;
  r.n_socks = n_socks;
  r.nonce_c[0] = 1;
  mc_net_auth_mac(&mc_net_auth_socket, key, 'C', nonce_a, &r, r.mac);
  mc_net_auth_response_encode(&mc_net_auth_socket, &r, buf);
  MC_T_EQ_INT(send(fd, buf, sizeof(buf), MSG_NOSIGNAL), (long long)sizeof(buf));
}

/* The key of a context opened without a secret (and MESHCCL_SECRET unset):
 * integrity only, and what these tests' stranger would need. */
static void no_secret_key(uint8_t key_out[MC_SHA256_BYTES])
{
  mc_net_auth_key(&mc_net_auth_socket, NULL, 0, 0, key_out);
}

static void garbage_connections_rejected(void)
{
  struct np_counts before = counts_now();
  struct np_pair p;
  uint8_t junk[MC_NET_AUTH_RESPONSE_BYTES];
  uint8_t chal[MC_NET_AUTH_CHALLENGE_BYTES];
  uint8_t key[MC_SHA256_BYTES];
  int fd;

  use_loopback(1, 2);
  ctx_open(&p, NULL);
  no_secret_key(key);
  /* wrong magic */
  fd = raw_connect(p.handle);
  MC_T_EQ_INT(send(fd, "GET / HTTP/1.0\r\n\r\n", 18, MSG_NOSIGNAL), 18);
  MC_T_TRUE(closed_by_listener(fd, p.listen));
  close(fd);
  /* right handshake, then a response that is not one */
  fd = raw_connect(p.handle);
  raw_handshake(fd);
  MC_T_TRUE(raw_read(fd, p.listen, chal, sizeof(chal)));
  memset(junk, 0x5a, sizeof(junk));
  MC_T_EQ_INT(send(fd, junk, sizeof(junk), MSG_NOSIGNAL), (long long)sizeof(junk));
  MC_T_TRUE(closed_by_listener(fd, p.listen));
  close(fd);
  /* a valid response for another shape of connection */
  fd = raw_connect(p.handle);
  raw_respond(fd, p.listen, key, handle_listen_id(p.handle), 42, 0, 7);
  MC_T_TRUE(closed_by_listener(fd, p.listen));
  close(fd);
  /* a valid response for another listener */
  fd = raw_connect(p.handle);
  raw_respond(fd, p.listen, key, handle_listen_id(p.handle) + 1, 42, 0, 2);
  MC_T_TRUE(closed_by_listener(fd, p.listen));
  close(fd);
  /* right handshake, then it goes away */
  fd = raw_connect(p.handle);
  raw_handshake(fd);
  close(fd);
  /* connect and close at once */
  fd = raw_connect(p.handle);
  close(fd);
  /* A real connection is still accepted and works. */
  np_connect(&p);
  np_check_xfer(&p, 200000, 0, 5);
  np_close(&p);
  np_counts_back(before);
}

/* A stranger who knows the listener's address, the magic and even the whole
 * handle, but not the communicator's secret: its forged response and the
 * message after it never reach a receive comm, and the real connection,
 * set up afterwards, carries the real bytes. */
static void stranger_cannot_deliver(void)
{
  static const uint8_t secret[MC_NET_SECRET_BYTES] = {1, 2, 3};
  struct np_counts before = counts_now();
  struct mc_net_init_args args = {.comm_id = 77, .secret = secret};
  uint8_t wrong_key[MC_SHA256_BYTES];
  struct np_pair p;
  int ndev = 0;

  use_loopback(0, 0); /* one control socket: a forged one would be a whole connection */
  memset(&p, 0, sizeof(p));
  p.net = net;
  MC_T_OK(net->init(&args, &p.ctx));
  MC_T_OK(net->devices(p.ctx, &ndev));
  MC_T_OK(net->listen(p.ctx, 0, p.handle, &p.listen));
  /* the stranger's guesses: no secret, or the right comm id without it */
  for (int k = 0; k < 2; k++) {
    int fd = raw_connect(p.handle);
    uint32_t size = 5;

    mc_net_auth_key(&mc_net_auth_socket, NULL, 0, (k == 0) ? 0 : 77, wrong_key);
    raw_respond(fd, p.listen, wrong_key, handle_listen_id(p.handle), 99 + (uint64_t)k, 0, 0);
    (void)send(fd, &size, sizeof(size), MSG_NOSIGNAL); /* a forged send: size, then bytes */
    (void)send(fd, "EVIL!", 5, MSG_NOSIGNAL);
    MC_T_TRUE(closed_by_listener(fd, p.listen));
    close(fd);
  }
  np_connect(&p);
  np_check_xfer(&p, 5, 0, 9);
  np_close(&p);
  np_counts_back(before);
  mc_param_reset_for_tests();
}

/* Ranks of another communicator (another secret) cannot connect: the
 * listener refuses the connector's MAC, and the connector says so. */
static void other_secret_refused(void)
{
  static const uint8_t secret_a[MC_NET_SECRET_BYTES] = {1};
  static const uint8_t secret_b[MC_NET_SECRET_BYTES] = {2};
  struct np_counts before = counts_now();
  struct np_pair p;
  void *ctx_b = NULL;
  void *comm = NULL;
  ncclResult_t res = ncclSuccess;
  struct mc_deadline dl = mc_deadline_in_ms(NP_LONG_WAIT);

  use_loopback(0, 1);
  memset(&p, 0, sizeof(p));
  p.net = net;
  MC_T_OK(net->init(&(struct mc_net_init_args){.secret = secret_a}, &p.ctx));
  MC_T_OK(net->init(&(struct mc_net_init_args){.secret = secret_b}, &ctx_b));
  MC_T_OK(net->listen(p.ctx, 0, p.handle, &p.listen));
  while ((res == ncclSuccess) && !mc_deadline_passed(dl)) {
    res = net->connect(ctx_b, 0, p.handle, &comm);
    MC_T_NULL(comm);
    MC_T_OK(net->accept(p.listen, &comm));
    MC_T_NULL(comm);
  }
  MC_T_EQ_INT(res, ncclRemoteError);
  MC_T_CONTAINS(mc_t_last_error(), "during authentication");
  MC_T_CONTAINS(mc_t_last_error(), "refused our MAC");
  MC_T_OK(net->finalize(ctx_b));
  /* the listener's own ranks still connect */
  np_connect(&p);
  np_check_xfer(&p, 1000, 0, 4);
  np_close(&p);
  np_counts_back(before);
  mc_param_reset_for_tests();
}

struct fake_listener {
  int lfd;
  bool good_magic; /* false: a confirm with a wrong magic; true: a wrong MAC */
};

/* Answers one connection as a listener that does not know the key would. */
static void *fake_listener_thread(void *arg)
{
  struct fake_listener *f = arg;
  uint8_t buf[MC_NET_AUTH_RESPONSE_BYTES];
  uint8_t nonce[MC_NET_AUTH_NONCE_BYTES] = {3};
  uint8_t mac[MC_SHA256_BYTES] = {4};
  int fd = accept(f->lfd, NULL, NULL);

  if (fd < 0)
    return NULL;
  if (recv(fd, buf, 12, MSG_WAITALL) == 12) {
    mc_net_auth_challenge_encode(&mc_net_auth_socket, nonce, buf);
    (void)send(fd, buf, MC_NET_AUTH_CHALLENGE_BYTES, MSG_NOSIGNAL);
    if (recv(fd, buf, MC_NET_AUTH_RESPONSE_BYTES, MSG_WAITALL) == MC_NET_AUTH_RESPONSE_BYTES) {
      mc_net_auth_confirm_encode(&mc_net_auth_socket, mac, buf);
      if (!f->good_magic)
        buf[0] ^= 0xff;
      (void)send(fd, buf, MC_NET_AUTH_CONFIRM_BYTES, MSG_NOSIGNAL);
    }
  }
  usleep(200000);
  close(fd);
  return NULL;
}

/* A process that took a listener's address cannot pose as the listener:
 * the connector checks the confirm's MAC. */
static void fake_listener_refused(void)
{
  for (int k = 0; k < 2; k++) {
    struct np_counts before = counts_now();
    struct fake_listener f = {.lfd = -1, .good_magic = (k == 1)};
    struct mc_net_sock_handle h;
    union mc_sockaddr a;
    socklen_t len = sizeof(a);
    pthread_t t;
    struct np_pair p;
    void *comm = NULL;
    ncclResult_t res = ncclSuccess;
    struct mc_deadline dl = mc_deadline_in_ms(NP_LONG_WAIT);

    use_loopback(0, 0);
    ctx_open(&p, NULL);
    f.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&a, 0, sizeof(a));
    a.sin.sin_family = AF_INET;
    a.sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    MC_T_EQ_INT(bind(f.lfd, &a.sa, sizeof(a.sin)), 0);
    MC_T_EQ_INT(listen(f.lfd, 4), 0);
    MC_T_EQ_INT(getsockname(f.lfd, &a.sa, &len), 0);
    memcpy(&h, p.handle, sizeof(h)); /* the real handle, pointing at the fake listener */
    h.addr = a;
    memcpy(p.handle, &h, sizeof(h));
    MC_T_EQ_INT(pthread_create(&t, NULL, fake_listener_thread, &f), 0);
    while ((res == ncclSuccess) && (comm == NULL) && !mc_deadline_passed(dl))
      res = net->connect(p.ctx, 0, p.handle, &comm);
    MC_T_NULL(comm);
    MC_T_EQ_INT(res, ncclRemoteError);
    MC_T_CONTAINS(mc_t_last_error(), (k == 1) ? "failed authentication" : "bad confirmation");
    pthread_join(t, NULL);
    close(f.lfd);
    np_close(&p);
    np_counts_back(before);
  }
  mc_param_reset_for_tests();
}

/* How many of fds the listener closed (EOF or reset), after 200 ms. */
static int count_closed(const int *fds, int n)
{
  int closed = 0;

  usleep(200000);
  for (int i = 0; i < n; i++) {
    char c;
    ssize_t got = recv(fds[i], &c, 1, MSG_DONTWAIT);
    if ((got == 0) || ((got < 0) && (errno == ECONNRESET)))
      closed++;
  }
  return closed;
}

/* A response that comes 5.5 s after the challenge (TCP retransmitting on a
 * lossy link) still makes its connection. */
static void late_response_still_accepted(void)
{
  struct np_counts before = counts_now();
  struct mc_deadline dl;
  struct np_pair p;
  void *comm = NULL;
  uint8_t key[MC_SHA256_BYTES];
  uint8_t confirm[MC_NET_AUTH_CONFIRM_BYTES];
  uint8_t chal[MC_NET_AUTH_CHALLENGE_BYTES];
  uint8_t nonce_a[MC_NET_AUTH_NONCE_BYTES];
  uint8_t buf[MC_NET_AUTH_RESPONSE_BYTES];
  struct mc_net_auth_response r;
  int fd;

  use_loopback(0, 0); /* a connection is its control socket alone */
  ctx_open(&p, NULL);
  no_secret_key(key);
  fd = raw_connect(p.handle);
  raw_handshake(fd);
  MC_T_TRUE(raw_read(fd, p.listen, chal, sizeof(chal)));
  MC_T_TRUE(mc_net_auth_challenge_decode(&mc_net_auth_socket, chal, nonce_a));
  dl = mc_deadline_in_ms(5500);
  while (!mc_deadline_passed(dl)) {
    MC_T_OK(net->accept(p.listen, &comm));
    MC_T_NULL(comm);
    usleep(20000);
  }
  memset(&r, 0, sizeof(r));
  r.listen_id = handle_listen_id(p.handle);
  r.conn_id = 7;
  mc_net_auth_mac(&mc_net_auth_socket, key, 'C', nonce_a, &r, r.mac);
  mc_net_auth_response_encode(&mc_net_auth_socket, &r, buf);
  MC_T_EQ_INT(send(fd, buf, sizeof(buf), MSG_NOSIGNAL), (long long)sizeof(buf));
  dl = mc_deadline_in_ms(NP_LONG_WAIT);
  while ((comm == NULL) && !mc_deadline_passed(dl))
    MC_T_OK(net->accept(p.listen, &comm));
  MC_T_TRUE(comm != NULL);
  /* and the listener confirmed with its MAC */
  MC_T_TRUE(raw_read(fd, NULL, confirm, sizeof(confirm)));
  {
    uint8_t got[MC_SHA256_BYTES];
    uint8_t want[MC_SHA256_BYTES];
    MC_T_TRUE(mc_net_auth_confirm_decode(&mc_net_auth_socket, confirm, got));
    mc_net_auth_mac(&mc_net_auth_socket, key, 'A', nonce_a, &r, want);
    MC_T_EQ_INT(memcmp(got, want, sizeof(got)), 0);
  }
  p.recv = comm;
  close(fd);
  np_close(&p);
  np_counts_back(before);
  mc_param_reset_for_tests();
}

/* More strangers than the listener keeps waiting (128): some only shake
 * hands and say nothing, some answer the challenge with a forged MAC, each
 * as its own connection. The oldest silent ones are evicted for newcomers,
 * the forged ones dropped; no stranger takes one of the 32 slots of
 * connections being set up, and the real connection is set up at once, not
 * after the silent ones' 30 s window. */
static void strangers_evicted_for_a_real_connection(void)
{
  enum { N_SILENT = 134, N_FORGED = 40 };
  struct np_counts before = counts_now();
  struct np_pair p;
  int fds[N_SILENT];
  uint8_t wrong_key[MC_SHA256_BYTES];

  use_loopback(0, 1);
  ctx_open(&p, NULL);
  mc_net_auth_key(&mc_net_auth_socket, "guess", 5, 0, wrong_key);
  for (int i = 0; i < N_FORGED; i++) {
    int fd = raw_connect(p.handle);
    raw_respond(fd, p.listen, wrong_key, handle_listen_id(p.handle), 500 + (uint64_t)i, 0, 1);
    MC_T_TRUE(closed_by_listener(fd, p.listen));
    close(fd);
  }
  for (int i = 0; i < N_SILENT; i++) {
    fds[i] = raw_connect(p.handle);
    raw_handshake(fds[i]);
  }
  np_connect(&p);
  np_check_xfer(&p, 4096, 0, 3);
  /* exactly as many as made room for the real connection's 2 sockets were
   * closed (sockets reach the net in no particular order, so which ones is
   * not checked) */
  MC_T_EQ_INT(count_closed(fds, N_SILENT), N_SILENT + 2 - 128);
  for (int i = 0; i < N_SILENT; i++)
    close(fds[i]);
  np_close(&p);
  np_counts_back(before);
  mc_param_reset_for_tests();
}

static void abort_flag_fails_fast(void)
{
  for (size_t t = 0; t < sizeof(thread_counts) / sizeof(thread_counts[0]); t++) {
    struct np_counts before = counts_now();
    volatile uint32_t abort_flag = 0;
    struct np_pair p;
    char buf[4096];
    char *big = malloc(64 * MIB);
    void *rreq;
    void *sreq;
    void *req = NULL;
    void *comm = NULL;
    int done = 0;
    double t0;

    MC_T_TRUE(big != NULL);
    use_loopback(thread_counts[t], 2);
    ctx_open(&p, &abort_flag);
    np_connect(&p);
    /* a receive never tested, a send larger than what the sockets can hold */
    rreq = np_post_recv(&p, buf, sizeof(buf));
    sreq = np_post_send(&p, big, 64 * MIB);
    MC_T_OK(net->test(sreq, &done, NULL));
    MC_T_EQ_INT(done, 0); /* more than the sockets buffer, and the receiver reads nothing */
    __atomic_store_n(&abort_flag, 1, __ATOMIC_RELEASE);
    t0 = mc_clock_sec(CLOCK_MONOTONIC);
    MC_T_EQ_INT(net->test(rreq, &done, NULL), ncclInternalError);
    MC_T_EQ_INT(net->test(sreq, &done, NULL), ncclInternalError);
    MC_T_EQ_INT(net->isend(p.send, buf, 1, 0, NULL, &req), ncclInternalError);
    MC_T_EQ_INT(net->accept(p.listen, &comm), ncclInternalError);
    MC_T_EQ_INT(net->connect(p.ctx, 0, p.handle, &comm), ncclInternalError);
    MC_T_NULL(comm);
    MC_T_TRUE(mc_clock_sec(CLOCK_MONOTONIC) - t0 < 1.0);
    np_close(&p); /* the helper threads end at once too */
    MC_T_TRUE(mc_clock_sec(CLOCK_MONOTONIC) - t0 < 2.0);
    free(big);
    np_counts_back(before);
  }
}

static void bad_arguments(void)
{
  struct np_counts before = counts_now();
  struct np_pair p;
  char buf[16];
  char bad_handle[MC_NET_HANDLE_BYTES];
  void *bufs[2] = {buf, buf};
  size_t sizes[2] = {16, 16};
  int tags[2] = {0, 0};
  void *req = NULL;
  void *comm = NULL;
  void *mh = (void *)1;

  pair_open(&p, 0, 1);
  MC_T_EQ_INT(net->irecv(p.recv, 2, bufs, sizes, tags, NULL, &req), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "max_recvs 1");
  MC_T_EQ_INT(net->isend(p.send, buf, (1ull << 30) + 1, 0, NULL, &req), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "max_p2p_bytes");
  memset(bad_handle, 0xff, sizeof(bad_handle));
  MC_T_EQ_INT(net->connect(p.ctx, 0, bad_handle, &comm), ncclInvalidArgument);
  MC_T_NULL(comm);
  MC_T_OK(net->reg_mr(p.send, buf, sizeof(buf), MC_NET_PTR_HOST, &mh));
  MC_T_OK(net->dereg_mr(p.send, mh));
  MC_T_EQ_INT(net->reg_mr(p.send, buf, sizeof(buf), 2 /* CUDA */, &mh), ncclInvalidArgument);
  np_check_xfer(&p, 16, 0, 1); /* still fine */
  np_close(&p);
  np_counts_back(before);
  mc_param_reset_for_tests();
}

MC_T_MAIN(devices_and_properties, connect_accept_two_threads, one_listener_many_connections,
          exact_bytes_every_config, no_data_sockets, posting_order_32_outstanding,
          send_larger_than_recv_fails, peer_closes_mid_message, peer_closes_after_its_messages,
          garbage_connections_rejected, stranger_cannot_deliver, other_secret_refused,
          fake_listener_refused, late_response_still_accepted,
          strangers_evicted_for_a_real_connection, abort_flag_fails_fast, bad_arguments)
