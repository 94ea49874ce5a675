/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bootstrap against strangers (src/bootstrap/boot_accept.c, boot_root.c,
 * boot_proto.c): each case reproduces an attack on a job whose ranks run as
 * threads of this process over loopback, with raw sockets for the attacker:
 * registering or failing the job without the id's secret, a root that does
 * not know the secret, a root that answers FAIL with code 0, half messages
 * and half handshakes, a flood of silent connections, a squatted
 * NCCL_COMM_ID port, a process out of file descriptors; and the liveness
 * options (keepalive, TCP_USER_TIMEOUT) of both ends of a bootstrap
 * connection. The job must
 * succeed (or fail with the exact error), and the attacker must be logged
 * with its address, never blamed on a rank.
 *
 * Assertions run on the main thread only: rank threads record what they saw.
 */
#include "bootstrap/bootstrap.h"
#include "bootstrap/bootstrap_int.h"
#include "core/crypto.h"
#include "core/log.h"
#include "core/params.h"
#include "core/utils.h"
#include "init/comm.h"
#include "init/init_net.h"

#include "mc_boot_fixture.h"
#include "mc_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS  4
#define TIMEOUT_MS 20000

struct rank {
  struct mc_boot_config cfg;
  uint32_t abort_flag;
  pthread_t th;
  ncclResult_t init_res;
  ncclResult_t op_res;
  char err[1024];
  int gathered[MAX_RANKS];
};

static struct rank ranks[MAX_RANKS];

/* ---------- log capture ---------- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_buf[1 << 16];
static size_t log_used;

static void log_sink(void *arg, enum mc_log_level level, unsigned long sub, const char *file,
                     int line, const char *func, const char *msg)
{
  (void)arg, (void)sub, (void)file, (void)line, (void)func;
  pthread_mutex_lock(&log_lock);
  mc_str_appendf(log_buf, sizeof(log_buf), &log_used, "%s %s\n",
                 (level == MC_LOG_WARN) ? "WARN" : "INFO", msg);
  pthread_mutex_unlock(&log_lock);
}

static void log_start(void)
{
  pthread_mutex_lock(&log_lock);
  log_used = 0;
  log_buf[0] = '\0';
  pthread_mutex_unlock(&log_lock);
  mc_log_set_sink(log_sink, NULL);
}

static void log_stop(void)
{
  mc_log_set_sink(NULL, NULL);
}

/* The captured log (a copy: threads may still write). */
static const char *log_text(void)
{
  static char copy[sizeof(log_buf)];

  pthread_mutex_lock(&log_lock);
  memcpy(copy, log_buf, sizeof(copy));
  pthread_mutex_unlock(&log_lock);
  return copy;
}

static int log_count(const char *needle)
{
  const char *p = log_text();
  int n = 0;

  while ((p = strstr(p, needle)) != NULL) {
    n++;
    p += strlen(needle);
  }
  return n;
}

/* Waits up to ms for needle to be logged. */
static bool log_wait_for(const char *needle, int ms)
{
  struct mc_deadline dl = mc_deadline_in_ms(ms);

  while (strstr(log_text(), needle) == NULL) {
    if (mc_deadline_passed(dl))
      return false;
    mc_sleep_ms_abortable(10, NULL);
  }
  return true;
}

/* ---------- ranks as threads ---------- */

static void *rank_main(void *arg)
{
  struct rank *r = arg;
  struct mc_boot *b = NULL;
  int data[MAX_RANKS];

  r->init_res = bt_init(&r->cfg, &b, r->err, sizeof(r->err));
  if (r->init_res != ncclSuccess)
    return NULL;
  memset(data, 0, sizeof(data));
  data[r->cfg.rank] = 100 + r->cfg.rank;
  r->op_res = mc_boot_allgather(b, data, sizeof(int));
  if (r->op_res == ncclSuccess)
    r->op_res = mc_boot_barrier(b, NULL, 0, 0, 10);
  if (r->op_res != ncclSuccess)
    snprintf(r->err, sizeof(r->err), "%s", mc_error_last());
  memcpy(r->gathered, data, sizeof(data));
  mc_boot_init_done(b);
  mc_boot_destroy(b);
  return NULL;
}

static void rank_start(int rank, int n_ranks, const ncclUniqueId *id, int64_t timeout_ms)
{
  struct rank *r = &ranks[rank];

  memset(r, 0, sizeof(*r));
  bt_config(&r->cfg, rank, n_ranks, id, &r->abort_flag, timeout_ms);
  r->init_res = ncclInternalError;
  MC_T_EQ_INT(pthread_create(&r->th, NULL, rank_main, r), 0);
}

static void rank_join(int rank)
{
  MC_T_EQ_INT(pthread_join(ranks[rank].th, NULL), 0);
}

static void check_rank_ok(int rank, int n_ranks)
{
  struct rank *r = &ranks[rank];

  if ((r->init_res != ncclSuccess) || (r->op_res != ncclSuccess))
    MC_T_FAIL("rank %d: %d/%d: %s", rank, r->init_res, r->op_res, r->err);
  for (int k = 0; k < n_ranks; k++)
    MC_T_EQ_INT(r->gathered[k], 100 + k);
}

/* Runs ranks 0..n-1 of id to the end and checks each succeeded. */
static void run_ranks_ok(const ncclUniqueId *id, int n)
{
  for (int i = 0; i < n; i++)
    rank_start(i, n, id, TIMEOUT_MS);
  for (int i = 0; i < n; i++)
    rank_join(i);
  for (int i = 0; i < n; i++)
    check_rank_ok(i, n);
}

static struct mc_boot_root *new_job(ncclUniqueId *id, struct mc_boot_handle *h_out)
{
  struct mc_boot_root *root = bt_job_new(id);

  memcpy(h_out, id->internal, sizeof(*h_out));
  return root;
}

/* ---------- raw sockets (the attacker) ---------- */

/* 127.0.0.1, port 0 (any). */
static void loopback_any(union mc_sockaddr *a)
{
  memset(a, 0, sizeof(*a));
  a->sin.sin_family = AF_INET;
  a->sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

static int raw_connect(const union mc_sockaddr *to)
{
  int fd = socket(to->sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

  MC_T_TRUE(fd >= 0);
  if (connect(fd, &to->sa, mc_sockaddr_len(to)) != 0) {
    close(fd);
    MC_T_FAIL("connect: %s", strerror(errno));
  }
  return fd;
}

static void raw_send(int fd, const void *buf, size_t bytes)
{
  MC_T_EQ_INT(send(fd, buf, bytes, MSG_NOSIGNAL), (long long)bytes);
}

/* An attacker's send: the root may already have closed the connection. */
static void raw_send_any(int fd, const void *buf, size_t bytes)
{
  (void)send(fd, buf, bytes, MSG_NOSIGNAL);
}

/* Receives up to bytes within 5 s; returns what arrived before EOF or the deadline. */
static size_t raw_recv(int fd, void *buf, size_t bytes)
{
  struct mc_deadline dl = mc_deadline_in_ms(5000);
  size_t got = 0;

  while ((got < bytes) && !mc_deadline_passed(dl)) {
    struct pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
    ssize_t n;
    if (poll(&p, 1, 50) <= 0)
      continue;
    n = recv(fd, (char *)buf + got, bytes - got, 0);
    if (n <= 0)
      break;
    got += (size_t)n;
  }
  return got;
}

/* True when the peer closes the connection within 5 s (after any bytes). */
static bool raw_sees_close(int fd)
{
  char sink[256];
  struct mc_deadline dl = mc_deadline_in_ms(5000);

  while (!mc_deadline_passed(dl)) {
    struct pollfd p = {.fd = fd, .events = POLLIN, .revents = 0};
    if (poll(&p, 1, 50) <= 0)
      continue;
    if (recv(fd, sink, sizeof(sink), 0) <= 0)
      return true;
  }
  return false;
}

static void frame_send(int fd, const struct mc_boot_ctl *m)
{
  uint32_t len = sizeof(*m);

  raw_send_any(fd, &len, sizeof(len));
  raw_send_any(fd, m, sizeof(*m));
}

/* Authenticates to a root or listener with `secret` as a client, up to the
 * verdict; returns the verdict's status. */
static uint32_t raw_authenticate(int fd, uint64_t magic, uint32_t type, const uint8_t *secret)
{
  struct mc_boot_auth a;
  uint8_t key[MC_BOOT_KEY_BYTES];
  uint8_t hello[MC_BOOT_HELLO_BYTES];
  uint8_t challenge[MC_BOOT_CHALLENGE_BYTES];
  uint8_t proof[MC_BOOT_PROOF_BYTES];
  uint8_t verdict[MC_BOOT_VERDICT_BYTES];
  uint32_t status = 0;

  memset(&a, 0, sizeof(a));
  a.magic = magic;
  a.type = type;
  MC_T_OK(mc_random_bytes(a.nc, sizeof(a.nc)));
  mc_boot_auth_key(secret, key);
  mc_boot_auth_hello_build(&a, hello);
  raw_send(fd, hello, sizeof(hello));
  MC_T_EQ_INT(raw_recv(fd, challenge, sizeof(challenge)), sizeof(challenge));
  MC_T_TRUE(mc_boot_auth_challenge_parse(&a, challenge, sizeof(challenge), NULL, 0));
  mc_boot_auth_proof_build(key, &a, proof);
  raw_send(fd, proof, sizeof(proof));
  MC_T_EQ_INT(raw_recv(fd, verdict, sizeof(verdict)), sizeof(verdict));
  memcpy(&status, verdict, sizeof(status));
  if (status == MC_BOOT_VERDICT_ACCEPT)
    MC_T_OK(mc_boot_auth_verdict_parse(key, &a, verdict, sizeof(verdict), NULL, 0));
  return status;
}

static struct mc_boot_ctl make_register(int rank, int n_ranks)
{
  struct mc_boot_ctl m;

  memset(&m, 0, sizeof(m));
  m.kind = MC_BOOT_CTL_REGISTER;
  m.rank = rank;
  m.n_ranks = n_ranks;
  m.n_roots = 1;
  m.pid = 4242;
  MC_T_OK(mc_sockaddr_parse("127.0.0.1:9", "test", &m.addr));
  MC_T_OK(mc_sockaddr_parse("127.0.0.1:10", "test", &m.p2p));
  snprintf(m.host, sizeof(m.host), "attacker");
  return m;
}

/* ---------- cases ---------- */

/*
 * Without the secret, a process that reaches the root can neither register
 * (as rank 1 of 3, before the real rank 1) nor fail the job with a text of
 * its choosing, with the old protocol or the new one; each attempt is
 * closed and logged with its address.
 */
static void strangers_cannot_register_or_fail_the_job(void)
{
  ncclUniqueId id;
  struct mc_boot_handle h;
  struct mc_boot_root *root;
  struct mc_boot_ctl reg = make_register(1, 3);
  struct mc_boot_ctl fail = make_register(1, 3);
  uint8_t wrong[MC_BOOT_SECRET_BYTES];
  uint8_t hs[MC_BOOT_HS_BYTES];
  uint32_t type = MC_SOCK_TYPE_ROOT;
  int fd_old;
  int fd_new;
  int fds0;

  bt_setup();
  fds0 = mc_count_fds();
  log_start();
  root = new_job(&id, &h);
  fail.kind = MC_BOOT_CTL_FAIL;
  fail.code = ncclInvalidUsage;
  snprintf(fail.text, sizeof(fail.text), "ATTACKER TEXT");

  /* NCCL's handshake (the magic is in the id), then a registration and a failure */
  fd_old = raw_connect(&h.addr);
  memcpy(hs, &h.magic, sizeof(h.magic));
  memcpy(hs + 8, &type, sizeof(type));
  raw_send(fd_old, hs, sizeof(hs));
  frame_send(fd_old, &reg);
  frame_send(fd_old, &fail);
  MC_T_TRUE(raw_sees_close(fd_old));
  /* the authentication, with another secret: rejected, then closed */
  fd_new = raw_connect(&h.addr);
  MC_T_OK(mc_random_bytes(wrong, sizeof(wrong)));
  MC_T_EQ_INT(raw_authenticate(fd_new, h.magic, MC_SOCK_TYPE_ROOT, wrong), MC_BOOT_VERDICT_REJECT);
  frame_send(fd_new, &reg);
  MC_T_TRUE(raw_sees_close(fd_new));
  close(fd_old);
  close(fd_new);

  run_ranks_ok(&id, 3);
  mc_boot_root_release(root, 2000);
  log_stop();
  for (int i = 0; i < 3; i++)
    MC_T_TRUE(strstr(ranks[i].err, "ATTACKER") == NULL);
  MC_T_CONTAINS(log_text(), "bootstrap root 127.0.0.1<");
  MC_T_CONTAINS(log_text(), "dropped connection from 127.0.0.1<");
  {
    /* NCCL's old protocol sends the frame length where the hello has its version */
    char hello_why[64];
    snprintf(hello_why, sizeof(hello_why), "not an authentication hello (version field %zu",
             sizeof(struct mc_boot_ctl));
    MC_T_CONTAINS(log_text(), hello_why);
  }
  MC_T_CONTAINS(log_text(), "WARN Bootstrap: bootstrap root");
  MC_T_CONTAINS(log_text(), "wrong proof of the job's secret");
  MC_T_EQ_INT(log_count("joined twice"), 0);
  MC_T_EQ_INT(mc_count_fds(), fds0);
}

/* ---------- the acceptor of ring and p2p connections ---------- */

/* What getsockopt says of a connected socket's liveness options. */
struct sock_liveness {
  int keepalive;
  int idle_s;
  int interval_s;
  int count;
  unsigned int user_timeout_ms;
};

static void liveness_read(int fd, struct sock_liveness *l)
{
  socklen_t len = sizeof(int);

  memset(l, 0, sizeof(*l));
  MC_T_EQ_INT(getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &l->keepalive, &len), 0);
  MC_T_EQ_INT(getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &l->idle_s, &len), 0);
  MC_T_EQ_INT(getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &l->interval_s, &len), 0);
  MC_T_EQ_INT(getsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &l->count, &len), 0);
  len = sizeof(l->user_timeout_ms);
  MC_T_EQ_INT(getsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &l->user_timeout_ms, &len), 0);
}

struct dialer {
  union mc_sockaddr to;
  uint64_t magic;
  uint8_t key[MC_BOOT_KEY_BYTES];
  ncclResult_t res;
  bool is_auth_failure;
  char err[MC_SOCK_ERR_BYTES];
  struct sock_liveness live;
  uint32_t is_done;
  pthread_t th;
};

static void *dialer_main(void *arg)
{
  struct dialer *d = arg;
  struct mc_wait w = mc_boot_wait_make(10000, NULL);
  struct mc_sock s;
  int32_t value = 42;

  d->res = mc_boot_auth_connect(&d->to, d->magic, MC_SOCK_TYPE_BOOTSTRAP, d->key, &w, &s,
                                &d->is_auth_failure);
  snprintf(d->err, sizeof(d->err), "%s", s.err);
  if (d->res == ncclSuccess) {
    liveness_read(s.fd, &d->live);
    d->res = mc_sock_send_all(&s, &value, sizeof(value), &w);
  }
  mc_sock_close(&s);
  __atomic_store_n(&d->is_done, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* A rank's listener hands over only connections that prove the secret; a
 * client with another key is told so, and a listener without the secret
 * never gets the client's data. */
static void listener_accepts_only_the_secret(void)
{
  struct mc_boot_acceptor acc;
  union mc_sockaddr local;
  uint8_t secret[MC_BOOT_SECRET_BYTES];
  uint8_t key[MC_BOOT_KEY_BYTES];
  struct mc_wait w = mc_boot_wait_make(10000, NULL);
  struct dialer good;
  struct dialer bad;
  struct mc_sock s;
  int32_t value = 0;

  bt_setup();
  log_start();
  loopback_any(&local);
  MC_T_OK(mc_random_bytes(secret, sizeof(secret)));
  mc_boot_auth_key(secret, key);
  MC_T_OK(mc_boot_acceptor_open(&acc, &local, 77, MC_SOCK_TYPE_BOOTSTRAP, key, 8, 8,
                                "rank 5 p2p listener"));
  memset(&bad, 0, sizeof(bad));
  bad.to = acc.listener.sock.addr;
  bad.magic = 77;
  MC_T_OK(mc_random_bytes(bad.key, sizeof(bad.key)));
  good = bad;
  memcpy(good.key, key, sizeof(key));
  MC_T_EQ_INT(pthread_create(&bad.th, NULL, dialer_main, &bad), 0);
  MC_T_EQ_INT(pthread_create(&good.th, NULL, dialer_main, &good), 0);
  MC_T_OK(mc_boot_acceptor_accept(&acc, &w, &s));
  MC_T_OK(mc_sock_recv_all(&s, &value, sizeof(value), &w));
  /* serve the other one to its verdict */
  while ((__atomic_load_n(&bad.is_done, __ATOMIC_ACQUIRE) == 0) && !mc_deadline_passed(w.dl)) {
    int n = mc_boot_acceptor_pollfds(&acc, acc.pfd);
    (void)poll(acc.pfd, (nfds_t)n, 10);
    mc_boot_acceptor_progress(&acc, acc.pfd, n);
  }
  MC_T_EQ_INT(pthread_join(good.th, NULL), 0);
  MC_T_EQ_INT(pthread_join(bad.th, NULL), 0);
  mc_sock_close(&s);
  mc_boot_acceptor_close(&acc);
  log_stop();
  MC_T_EQ_INT(bad.res, ncclInvalidUsage);
  MC_T_TRUE(bad.is_auth_failure);
  MC_T_CONTAINS(bad.err, "rejected this process's proof of the job's secret");
  MC_T_OK(good.res);
  MC_T_EQ_INT(value, 42);
  MC_T_CONTAINS(log_text(), "WARN Bootstrap: rank 5 p2p listener 127.0.0.1<");
  MC_T_CONTAINS(log_text(), "wrong proof of the job's secret");
}

/* Both ends of a bootstrap connection (the acceptor's, which the root, the
 * ring and the p2p listeners all use, and mc_boot_auth_connect's) carry TCP
 * keepalive and TCP_USER_TIMEOUT at 1.5 x MESHCCL_NET_TIMEOUT, as the socket
 * net's sockets do: a silent peer host fails an idle ring connection. */
static void connections_have_liveness_options(void)
{
  struct mc_boot_acceptor acc;
  union mc_sockaddr local;
  uint8_t secret[MC_BOOT_SECRET_BYTES];
  struct mc_wait w = mc_boot_wait_make(10000, NULL);
  struct dialer d;
  struct sock_liveness live;
  struct mc_sock s;
  int32_t value = 0;

  bt_setup();
  mc_param_set_for_tests(MC_P_NET_TIMEOUT, "4");
  loopback_any(&local);
  memset(&d, 0, sizeof(d));
  MC_T_OK(mc_random_bytes(secret, sizeof(secret)));
  mc_boot_auth_key(secret, d.key);
  MC_T_OK(mc_boot_acceptor_open(&acc, &local, 78, MC_SOCK_TYPE_BOOTSTRAP, d.key, 8, 8,
                                "rank 0 ring listener"));
  d.to = acc.listener.sock.addr;
  d.magic = 78;
  MC_T_EQ_INT(pthread_create(&d.th, NULL, dialer_main, &d), 0);
  MC_T_OK(mc_boot_acceptor_accept(&acc, &w, &s));
  liveness_read(s.fd, &live);
  MC_T_OK(mc_sock_recv_all(&s, &value, sizeof(value), &w));
  MC_T_EQ_INT(pthread_join(d.th, NULL), 0);
  mc_sock_close(&s);
  mc_boot_acceptor_close(&acc);
  mc_param_set_for_tests(MC_P_NET_TIMEOUT, NULL);
  MC_T_OK(d.res);
  MC_T_EQ_INT(value, 42);
  /* 4 s -> 6000 ms; probes after 2 s idle, then every 1 s (a tenth, at least 1 s) */
  MC_T_EQ_INT(live.keepalive, 1);
  MC_T_EQ_INT(live.idle_s, 2);
  MC_T_EQ_INT(live.interval_s, 1);
  MC_T_EQ_INT(live.count, 10);
  MC_T_EQ_INT((int)live.user_timeout_ms, 6000);
  MC_T_EQ_INT(d.live.keepalive, 1);
  MC_T_EQ_INT(d.live.idle_s, 2);
  MC_T_EQ_INT(d.live.interval_s, 1);
  MC_T_EQ_INT(d.live.count, 10);
  MC_T_EQ_INT((int)d.live.user_timeout_ms, 6000);
}

/* ---------- a fake root ---------- */

enum fake_mode {
  FAKE_NO_SECRET, /* accepts any proof and answers with a MAC it cannot compute */
  FAKE_FAIL_CODE0 /* knows the secret; answers a registration with FAIL, code ncclSuccess */
};

struct fake_root {
  enum fake_mode mode;
  int listen_fd;
  struct mc_boot_handle h;
  pthread_t th;
};

/* The server's half of the exchange, without the secret: reads the hello
 * and the proof, answers ACCEPT with a MAC of zeros. */
static void fake_no_secret(int fd)
{
  uint8_t buf[MC_BOOT_HELLO_BYTES];
  uint8_t challenge[MC_BOOT_CHALLENGE_BYTES];
  uint8_t verdict[MC_BOOT_VERDICT_BYTES];
  uint32_t version = MC_BOOT_AUTH_VERSION;
  uint32_t accept = MC_BOOT_VERDICT_ACCEPT;

  if (raw_recv(fd, buf, MC_BOOT_HELLO_BYTES) != MC_BOOT_HELLO_BYTES)
    return;
  memset(challenge, 7, sizeof(challenge));
  memcpy(challenge, &version, sizeof(version));
  (void)send(fd, challenge, sizeof(challenge), MSG_NOSIGNAL);
  if (raw_recv(fd, buf, MC_BOOT_PROOF_BYTES) != MC_BOOT_PROOF_BYTES)
    return;
  memset(verdict, 0, sizeof(verdict));
  memcpy(verdict, &accept, sizeof(accept));
  (void)send(fd, verdict, sizeof(verdict), MSG_NOSIGNAL);
  (void)raw_sees_close(fd);
}

static void fake_fail_code0(struct fake_root *f, int fd)
{
  uint8_t key[MC_BOOT_KEY_BYTES];
  uint8_t hello[MC_BOOT_HELLO_BYTES];
  uint8_t challenge[MC_BOOT_CHALLENGE_BYTES];
  uint8_t proof[MC_BOOT_PROOF_BYTES];
  uint8_t verdict[MC_BOOT_VERDICT_BYTES];
  uint8_t frame[MC_BOOT_CTL_FRAME_BYTES];
  struct mc_boot_auth a;
  struct mc_boot_ctl m;
  uint32_t len = sizeof(m);

  memset(&a, 0, sizeof(a));
  a.magic = f->h.magic;
  a.type = MC_SOCK_TYPE_ROOT;
  mc_boot_auth_key(f->h.secret, key);
  if ((raw_recv(fd, hello, sizeof(hello)) != sizeof(hello)) ||
      (mc_boot_auth_hello_parse(&a, hello, sizeof(hello), NULL, 0) != 1))
    return;
  memset(a.ns, 3, sizeof(a.ns));
  mc_boot_auth_challenge_build(&a, challenge);
  (void)send(fd, challenge, sizeof(challenge), MSG_NOSIGNAL);
  if (raw_recv(fd, proof, sizeof(proof)) != sizeof(proof))
    return;
  mc_boot_auth_verdict_build(key, &a, mc_boot_auth_proof_check(key, &a, proof, sizeof(proof)),
                             verdict);
  (void)send(fd, verdict, sizeof(verdict), MSG_NOSIGNAL);
  if (raw_recv(fd, frame, sizeof(frame)) != sizeof(frame))
    return;
  memset(&m, 0, sizeof(m));
  m.kind = MC_BOOT_CTL_FAIL;
  m.code = ncclSuccess;
  snprintf(m.text, sizeof(m.text), "all is well");
  (void)send(fd, &len, sizeof(len), MSG_NOSIGNAL);
  (void)send(fd, &m, sizeof(m), MSG_NOSIGNAL);
  (void)raw_sees_close(fd);
}

static void *fake_root_main(void *arg)
{
  struct fake_root *f = arg;
  struct pollfd p = {.fd = f->listen_fd, .events = POLLIN, .revents = 0};
  int fd;

  if (poll(&p, 1, 10000) <= 0)
    return NULL;
  fd = accept(f->listen_fd, NULL, NULL);
  if (fd < 0)
    return NULL;
  if (f->mode == FAKE_NO_SECRET)
    fake_no_secret(fd);
  else
    fake_fail_code0(f, fd);
  close(fd);
  return NULL;
}

/* Starts a fake root on an ephemeral loopback port; *id names it. */
static void fake_root_start(struct fake_root *f, enum fake_mode mode, ncclUniqueId *id)
{
  union mc_sockaddr a;
  socklen_t len = sizeof(a);

  memset(f, 0, sizeof(*f));
  f->mode = mode;
  loopback_any(&a);
  f->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  MC_T_TRUE(f->listen_fd >= 0);
  MC_T_EQ_INT(bind(f->listen_fd, &a.sa, mc_sockaddr_len(&a)), 0);
  MC_T_EQ_INT(listen(f->listen_fd, 16), 0);
  MC_T_EQ_INT(getsockname(f->listen_fd, &a.sa, &len), 0);
  f->h.magic = 0x1234567890abcdefull;
  f->h.addr = a;
  f->h.secret_source = MC_BOOT_SECRET_RANDOM;
  MC_T_OK(mc_random_bytes(f->h.secret, sizeof(f->h.secret)));
  memset(id, 0, sizeof(*id));
  memcpy(id->internal, &f->h, sizeof(f->h));
  MC_T_EQ_INT(pthread_create(&f->th, NULL, fake_root_main, f), 0);
}

static void fake_root_stop(struct fake_root *f)
{
  MC_T_EQ_INT(pthread_join(f->th, NULL), 0);
  close(f->listen_fd);
}

/* Mutual authentication: a rank refuses a root that cannot prove the secret. */
static void rank_refuses_root_without_the_secret(void)
{
  struct fake_root f;
  ncclUniqueId id;

  bt_setup();
  fake_root_start(&f, FAKE_NO_SECRET, &id);
  rank_start(0, 2, &id, TIMEOUT_MS);
  rank_join(0);
  fake_root_stop(&f);
  MC_T_EQ_INT(ranks[0].init_res, ncclRemoteError);
  MC_T_CONTAINS(ranks[0].err, "Bootstrap: rank 0: bootstrap root at 127.0.0.1<");
  MC_T_CONTAINS(ranks[0].err, "did not prove that it knows the job's secret");
}

/* A root reply FAIL whose code is ncclSuccess is a protocol error: it must
 * not let the registration "succeed" without a next-rank address. */
static void root_fail_with_code_zero_is_a_protocol_error(void)
{
  struct fake_root f;
  ncclUniqueId id;

  bt_setup();
  fake_root_start(&f, FAKE_FAIL_CODE0, &id);
  rank_start(0, 2, &id, TIMEOUT_MS);
  rank_join(0);
  fake_root_stop(&f);
  MC_T_EQ_INT(ranks[0].init_res, ncclRemoteError);
  MC_T_CONTAINS(ranks[0].err, "protocol error from the bootstrap root at 127.0.0.1<");
  MC_T_CONTAINS(ranks[0].err, "FAIL with code 0, which is not a failure");
}

/* ---------- the root cannot be stalled ---------- */

struct stream {
  union mc_sockaddr to;
  uint64_t magic;
  uint32_t stop;
  int n_opened;
};

/* Half handshakes, one after another, each kept open (up to 40 at once). */
static void *half_handshakes(void *arg)
{
  struct stream *st = arg;
  uint32_t type = MC_SOCK_TYPE_ROOT;
  uint32_t version = MC_BOOT_AUTH_VERSION;
  uint8_t half[20]; /* magic, type, version, and 4 of the nonce's 32 bytes */
  int fds[40];
  int n = 0;

  memcpy(half, &st->magic, sizeof(st->magic));
  memcpy(half + 8, &type, sizeof(type));
  memcpy(half + 12, &version, sizeof(version));
  memset(half + 16, 0, 4);
  while (__atomic_load_n(&st->stop, __ATOMIC_ACQUIRE) == 0) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (n == 40) {
      close(fds[0]);
      memmove(fds, fds + 1, sizeof(fds) - sizeof(fds[0]));
      n--;
    }
    if ((fd >= 0) && (connect(fd, &st->to.sa, mc_sockaddr_len(&st->to)) == 0) &&
        (send(fd, half, sizeof(half), MSG_NOSIGNAL) == (ssize_t)sizeof(half))) {
      fds[n++] = fd;
      st->n_opened++;
    } else if (fd >= 0) {
      close(fd);
    }
    mc_sleep_ms_abortable(5, NULL);
  }
  for (int i = 0; i < n; i++)
    close(fds[i]);
  return NULL;
}

/*
 * A stream of half handshakes, and a connection that proves the secret and
 * then sends half a registration, while the job joins: with reads that wait
 * for a whole message the root stalls on each and misses the join deadline
 * (MESHCCL_INIT_TIMEOUT, 10 s here), blaming real ranks; it must not.
 */
static void half_messages_do_not_stall_the_root(void)
{
  ncclUniqueId id;
  struct mc_boot_handle h;
  struct mc_boot_root *root;
  struct mc_boot_ctl reg = make_register(0, 3);
  uint32_t len = sizeof(reg);
  struct stream st;
  pthread_t th;
  int fd_half_reg;
  int fds0;
  int tasks0;

  bt_setup();
  fds0 = mc_count_fds();
  tasks0 = mc_count_threads_stable();
  mc_param_set_for_tests(MC_P_INIT_TIMEOUT, "10");
  root = new_job(&id, &h);
  mc_param_set_for_tests(MC_P_INIT_TIMEOUT, NULL);
  memset(&st, 0, sizeof(st));
  st.to = h.addr;
  st.magic = h.magic;
  MC_T_EQ_INT(pthread_create(&th, NULL, half_handshakes, &st), 0);
  /* an insider: authenticated, then half of a registration, then silence */
  fd_half_reg = raw_connect(&h.addr);
  MC_T_EQ_INT(raw_authenticate(fd_half_reg, h.magic, MC_SOCK_TYPE_ROOT, h.secret),
              MC_BOOT_VERDICT_ACCEPT);
  raw_send(fd_half_reg, &len, sizeof(len));
  raw_send(fd_half_reg, &reg, sizeof(reg) / 2);
  while (__atomic_load_n(&st.n_opened, __ATOMIC_RELAXED) < 20)
    mc_sleep_ms_abortable(5, NULL);

  run_ranks_ok(&id, 3);
  __atomic_store_n(&st.stop, 1, __ATOMIC_RELEASE);
  MC_T_EQ_INT(pthread_join(th, NULL), 0);
  close(fd_half_reg);
  mc_boot_root_release(root, 2000);
  MC_T_EQ_INT(mc_count_fds(), fds0);
  MC_T_EQ_INT(mc_count_threads_settled(tasks0, 5000), tasks0);
}

/*
 * Random bytes, a length no message has, a wrong magic, and more silent
 * connections than the root keeps (1024, or RLIMIT_NOFILE / 8): the oldest
 * unauthenticated ones are evicted for newcomers, and the ranks join
 * without waiting for the silent ones to time out.
 */
static void flood_of_silent_connections_is_evicted(void)
{
  enum { N_SILENT_MAX = 1100 };
  struct rlimit rl;
  int n_silent = N_SILENT_MAX;
  ncclUniqueId id;
  struct mc_boot_root *root;
  struct mc_boot_handle h;
  uint8_t buf[64];
  uint32_t type = MC_SOCK_TYPE_ROOT;
  uint32_t huge = UINT32_MAX;
  uint64_t bad_magic;
  int fd_junk;
  int fd_huge;
  int fd_magic;
  static int fd_silent[N_SILENT_MAX];
  int fds0;
  int tasks0;

  bt_setup();
  fds0 = mc_count_fds();
  tasks0 = mc_count_threads_stable();
  log_start();
  root = new_job(&id, &h); /* lifts the soft fd limit to the hard one */
  MC_T_EQ_INT(getrlimit(RLIMIT_NOFILE, &rl), 0);
  if (rl.rlim_cur / 4 < (rlim_t)n_silent)
    n_silent = (int)(rl.rlim_cur / 4);
  fd_junk = raw_connect(&h.addr);
  MC_T_OK(mc_random_bytes(buf, sizeof(buf)));
  raw_send(fd_junk, buf, sizeof(buf));
  fd_huge = raw_connect(&h.addr);
  memcpy(buf, &h.magic, sizeof(h.magic));
  memcpy(buf + 8, &type, sizeof(type));
  memcpy(buf + 12, &huge, sizeof(huge));
  raw_send(fd_huge, buf, 16);
  fd_magic = raw_connect(&h.addr);
  bad_magic = h.magic ^ 0x100;
  memcpy(buf, &bad_magic, sizeof(bad_magic));
  raw_send(fd_magic, buf, 12);
  for (int i = 0; i < n_silent; i++)
    fd_silent[i] = raw_connect(&h.addr);

  run_ranks_ok(&id, 3);
  mc_boot_root_release(root, 2000);
  log_stop();
  close(fd_junk);
  close(fd_huge);
  close(fd_magic);
  for (int i = 0; i < n_silent; i++)
    close(fd_silent[i]);
  MC_T_CONTAINS(log_text(), "socket magic mismatch");
  MC_T_CONTAINS(log_text(), "version field 4294967295");
  MC_T_CONTAINS(log_text(), "connections pending and a newer one arrived before it authenticated");
  MC_T_EQ_INT(mc_count_fds(), fds0);
  MC_T_EQ_INT(mc_count_threads_settled(tasks0, 5000), tasks0);
}

/* ---------- squatted port, secrets ---------- */

/* Another process (here: a plain socket) listens on NCCL_COMM_ID's port:
 * rank 0 fails at once naming the port, instead of registering with it. */
static void squatted_comm_id_port_fails_at_once(void)
{
  union mc_sockaddr a;
  socklen_t len = sizeof(a);
  struct mc_wait w = mc_boot_wait_make(10000, NULL);
  ncclUniqueId id;
  char want[64];
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  bt_setup();
  loopback_any(&a);
  MC_T_TRUE(fd >= 0);
  MC_T_EQ_INT(bind(fd, &a.sa, mc_sockaddr_len(&a)), 0);
  MC_T_EQ_INT(listen(fd, 4), 0);
  MC_T_EQ_INT(getsockname(fd, &a.sa, &len), 0);
  MC_T_OK(mc_boot_unique_id_at(&a, &id));
  mc_error_clear_thread();
  MC_T_EQ_INT(mc_boot_root_start_comm_id(&id, &w), ncclInvalidUsage);
  snprintf(want, sizeof(want), "port %d is already in use by another process",
           mc_sockaddr_port(&a));
  MC_T_CONTAINS(mc_error_last(), want);
  MC_T_CONTAINS(mc_error_last(), "rank 0 cannot start the bootstrap root on 127.0.0.1<");
  MC_T_CONTAINS(mc_error_last(), "Address already in use");
  MC_T_TRUE(mc_boot_root_claim(&id) == NULL);
  close(fd);
}

/* NCCL_COMM_ID ids: the secret comes from MESHCCL_SECRET and the address
 * (or the address alone); ids of ncclGetUniqueId carry a random one. */
static void comm_id_secrets(void)
{
  union mc_sockaddr a;
  union mc_sockaddr b;
  ncclUniqueId plain;
  ncclUniqueId plain_again;
  ncclUniqueId other_port;
  ncclUniqueId env1;
  ncclUniqueId env2;
  ncclUniqueId rnd1;
  ncclUniqueId rnd2;
  struct mc_boot_handle h;
  struct mc_boot_root *r1;
  struct mc_boot_root *r2;

  bt_setup();
  MC_T_OK(mc_sockaddr_parse("127.0.0.1:23456", "test", &a));
  MC_T_OK(mc_sockaddr_parse("127.0.0.1:23457", "test", &b));
  log_start();
  MC_T_OK(mc_boot_unique_id_at(&a, &plain));
  MC_T_OK(mc_boot_unique_id_at(&a, &plain_again));
  MC_T_OK(mc_boot_unique_id_at(&b, &other_port));
  mc_param_set_for_tests(MC_P_SECRET, "job-secret-1");
  MC_T_OK(mc_boot_unique_id_at(&a, &env1));
  mc_param_set_for_tests(MC_P_SECRET, "job-secret-2");
  MC_T_OK(mc_boot_unique_id_at(&a, &env2));
  mc_param_set_for_tests(MC_P_SECRET, NULL);
  log_stop();
  /* every rank computes the same id; the port, the env secret change it */
  MC_T_EQ_INT(memcmp(&plain, &plain_again, sizeof(plain)), 0);
  MC_T_TRUE(memcmp(&plain, &other_port, sizeof(plain)) != 0);
  MC_T_TRUE(memcmp(&plain, &env1, sizeof(plain)) != 0);
  MC_T_TRUE(memcmp(&env1, &env2, sizeof(plain)) != 0);
  memcpy(&h, plain.internal, sizeof(h));
  MC_T_EQ_INT(h.magic, MC_BOOT_COMM_ID_MAGIC);
  MC_T_EQ_INT(h.secret_source, MC_BOOT_SECRET_ADDRESS);
  memcpy(&h, env1.internal, sizeof(h));
  MC_T_EQ_INT(h.secret_source, MC_BOOT_SECRET_ENV);
  MC_T_CONTAINS(log_text(), "MESHCCL_SECRET is unset: the bootstrap secret of root 127.0.0.1<");
  MC_T_EQ_INT(log_count("MESHCCL_SECRET is unset"), 1);

  r1 = new_job(&rnd1, &h);
  MC_T_EQ_INT(h.secret_source, MC_BOOT_SECRET_RANDOM);
  r2 = new_job(&rnd2, &h);
  MC_T_TRUE(memcmp(rnd1.internal + 48, rnd2.internal + 48, MC_BOOT_SECRET_BYTES) != 0);
  mc_boot_root_release(r1, 0);
  mc_boot_root_release(r2, 0);
}

/* A published id (meshcclGetPublicUniqueId) carries a nonce and no secret;
 * MESHCCL_SECRET completes it alike on every rank, another value otherwise;
 * no init accepts it before; without MESHCCL_SECRET neither call works. */
static void published_ids(void)
{
  ncclUniqueId pub;
  ncclUniqueId done1;
  ncclUniqueId done2;
  ncclUniqueId other;
  ncclUniqueId plain;
  ncclComm_t comm = NULL;
  struct mc_boot_handle h;
  static const uint8_t zero[MC_BOOT_SECRET_BYTES];

  bt_setup();
  log_start();
  MC_T_EQ_INT(mc_boot_unique_id_public(&pub), ncclInvalidUsage);
  MC_T_CONTAINS(mc_error_last(), "MESHCCL_SECRET is unset");
  mc_param_set_for_tests(MC_P_SECRET, "job-secret-1");
  mc_param_set_for_tests(MC_P_COMM_ID, "127.0.0.1:23459");
  MC_T_OK(mc_boot_unique_id_public(&pub));
  memcpy(&h, pub.internal, sizeof(h));
  MC_T_EQ_INT(h.magic, MC_BOOT_COMM_ID_MAGIC);
  MC_T_EQ_INT(h.secret_source, MC_BOOT_SECRET_PUBLIC);
  MC_T_EQ_INT(memcmp(h.secret, zero, sizeof(zero)), 0);
  MC_T_TRUE(memcmp(h.nonce, zero, sizeof(h.nonce)) != 0);
  MC_T_TRUE(mc_boot_id_is_public(&pub));
  MC_T_EQ_INT(ncclCommInitRank(&comm, 2, pub, 1), ncclInvalidArgument);
  MC_T_CONTAINS(mc_error_last(), "call meshcclUniqueIdAddSecret on it first");
  done1 = pub;
  done2 = pub;
  MC_T_OK(mc_boot_id_add_secret(&done1));
  MC_T_OK(mc_boot_id_add_secret(&done2));
  MC_T_EQ_INT(memcmp(&done1, &done2, sizeof(done1)), 0);
  memcpy(&h, done1.internal, sizeof(h));
  MC_T_EQ_INT(h.secret_source, MC_BOOT_SECRET_NONCE);
  MC_T_TRUE(memcmp(h.secret, zero, sizeof(zero)) != 0);
  MC_T_TRUE(!mc_boot_id_is_public(&done1));
  MC_T_OK(mc_boot_id_add_secret(&done2)); /* a completed id stays as it is */
  MC_T_EQ_INT(memcmp(&done1, &done2, sizeof(done1)), 0);
  mc_param_set_for_tests(MC_P_SECRET, "job-secret-2");
  other = pub;
  MC_T_OK(mc_boot_id_add_secret(&other));
  MC_T_TRUE(memcmp(&done1, &other, sizeof(other)) != 0);
  mc_param_set_for_tests(MC_P_SECRET, NULL);
  other = pub;
  MC_T_EQ_INT(mc_boot_id_add_secret(&other), ncclInvalidUsage);
  MC_T_CONTAINS(mc_error_last(), "set MESHCCL_SECRET to the value rank 0 has");
  plain = done1;
  MC_T_OK(mc_boot_id_add_secret(&plain));
  MC_T_EQ_INT(memcmp(&done1, &plain, sizeof(plain)), 0);
  mc_param_set_for_tests(MC_P_COMM_ID, NULL);
  log_stop();
}

/* A rank given another secret (MESHCCL_SECRET differs) is refused by the
 * root and fails at once, saying so; it is not counted as a rank. */
static void rank_with_another_secret_fails_at_once(void)
{
  union mc_sockaddr a;
  socklen_t len = sizeof(a);
  struct mc_wait w = mc_boot_wait_make(10000, NULL);
  ncclUniqueId good;
  ncclUniqueId bad;
  struct mc_boot_root *root;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

  bt_setup();
  /* a free port: bind an ephemeral one, then release it for the root */
  loopback_any(&a);
  MC_T_EQ_INT(bind(fd, &a.sa, mc_sockaddr_len(&a)), 0);
  MC_T_EQ_INT(getsockname(fd, &a.sa, &len), 0);
  close(fd);
  log_start();
  mc_param_set_for_tests(MC_P_SECRET, "right");
  MC_T_OK(mc_boot_unique_id_at(&a, &good));
  mc_param_set_for_tests(MC_P_SECRET, "wrong");
  MC_T_OK(mc_boot_unique_id_at(&a, &bad));
  mc_param_set_for_tests(MC_P_SECRET, NULL);
  MC_T_OK(mc_boot_root_start_comm_id(&good, &w));
  root = mc_boot_root_claim(&good);
  MC_T_TRUE(root != NULL);
  rank_start(1, 2, &bad, TIMEOUT_MS);
  rank_join(1);
  MC_T_EQ_INT(ranks[1].init_res, ncclInvalidUsage);
  MC_T_CONTAINS(ranks[1].err, "rejected this process's proof of the job's secret");
  MC_T_CONTAINS(ranks[1].err, "different MESHCCL_SECRET values");
  /* the job itself is intact: ranks 0 and 1 with the right secret join */
  run_ranks_ok(&good, 2);
  mc_boot_root_release(root, 2000);
  log_stop();
  MC_T_CONTAINS(log_text(), "wrong proof of the job's secret");
}

/* The nets' secret is derived from the whole id: another bootstrap secret,
 * another net secret. */
static void net_secret_depends_on_the_bootstrap_secret(void)
{
  ncclUniqueId a;
  ncclUniqueId b;
  uint8_t sa[32];
  uint8_t sb[32];

  memset(&a, 0, sizeof(a));
  memset(&b, 0, sizeof(b));
  b.internal[48] = 1; /* first byte of the secret (struct mc_boot_handle) */
  mc_comm_net_secret(&a, sa);
  mc_comm_net_secret(&b, sb);
  MC_T_TRUE(memcmp(sa, sb, sizeof(sa)) != 0);
  MC_T_EQ_INT(offsetof(struct mc_boot_handle, secret), 48);
}

/* ---------- out of file descriptors ---------- */

static void fd_limit_child(void)
{
  struct rlimit rl = {.rlim_cur = 256, .rlim_max = 256};
  ncclUniqueId id;
  struct mc_boot_handle h;
  struct mc_boot_root *root;
  static int dups[512];
  int n_dups = 0;
  int null_fd;
  int fds0;
  int fd_late;
  double cpu0;
  double wall0;
  double cpu;
  double wall;

  MC_T_EQ_INT(setrlimit(RLIMIT_NOFILE, &rl), 0);
  /* the root's and every rank's p2p listener keep an eighth of the fds */
  MC_T_EQ_INT(mc_boot_max_pending(), 32);
  bt_setup();
  log_start();
  fds0 = mc_count_fds();
  root = new_job(&id, &h);
  /* Ranks 0 and 2 of 4 register; neither has its ring neighbour yet, so
   * neither needs another fd until ranks 1 and 3 come. Each holds two
   * listeners, its listener service's two eventfds (wake, ready) and its
   * root connection; the root one connection per rank (and its listener). */
  rank_start(0, 4, &id, TIMEOUT_MS);
  rank_start(2, 4, &id, TIMEOUT_MS);
  for (struct mc_deadline dl = mc_deadline_in_ms(10000); mc_count_fds() != fds0 + 1 + 12;) {
    if (mc_deadline_passed(dl))
      MC_T_FAIL("%d fds open, expected %d", mc_count_fds(), fds0 + 1 + 12);
    mc_sleep_ms_abortable(5, NULL);
  }
  /* Use every fd, then connect with the last one: the root's accept() has none. */
  null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  MC_T_TRUE(null_fd >= 0);
  for (int fd; (n_dups < 512) && ((fd = dup(null_fd)) >= 0);)
    dups[n_dups++] = fd;
  MC_T_EQ_INT(errno, EMFILE);
  MC_T_TRUE((n_dups > 0) && (n_dups < 512));
  close(dups[--n_dups]);
  fd_late = raw_connect(&h.addr);
  MC_T_TRUE(log_wait_for("cannot accept connections", 10000));
  cpu0 = mc_clock_sec(CLOCK_PROCESS_CPUTIME_ID);
  wall0 = mc_clock_sec(CLOCK_MONOTONIC);
  mc_sleep_ms_abortable(500, NULL);
  cpu = mc_clock_sec(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
  wall = mc_clock_sec(CLOCK_MONOTONIC) - wall0;
  while (n_dups > 0)
    close(dups[--n_dups]);
  close(null_fd);
  close(fd_late);
  /* The job fails at once: the registered ranks are told why, and so are
   * the ranks that come later (the root's fds are back). */
  rank_start(1, 4, &id, TIMEOUT_MS);
  rank_start(3, 4, &id, TIMEOUT_MS);
  for (int i = 0; i < 4; i++)
    rank_join(i);
  mc_boot_root_release(root, 2000);
  log_stop();
  for (int i = 0; i < 4; i++) {
    MC_T_EQ_INT(ranks[i].init_res, ncclSystemError);
    MC_T_CONTAINS(ranks[i].err, "bootstrap root 127.0.0.1<");
    MC_T_CONTAINS(ranks[i].err, "cannot accept connections: accept: Too many open files");
    MC_T_CONTAINS(ranks[i].err, "(RLIMIT_NOFILE 256, hard 256): raise `ulimit -n`");
  }
  MC_T_CONTAINS(log_text(), "WARN Bootstrap: bootstrap root 127.0.0.1<");
  MC_T_EQ_INT(log_count("raise `ulimit -n`; init fails"), 1); /* the acceptor's WARN, once */
  /* backing off, not spinning on a listener that stays readable */
  if (cpu > 0.5 * wall)
    MC_T_FAIL("%.2f s of CPU in %.2f s while out of fds (busy loop)", cpu, wall);
}

/* EMFILE from accept: one WARN naming the limit, no busy loop, and every
 * rank, registered or later, fails at once naming the cause (a rank that
 * cannot connect would wait until its timeout). In a child: the fd limit is
 * lowered for good. */
static void out_of_fds_at_the_root(void)
{
  mc_t_run_in_child(fd_limit_child);
}

/* A listener that every rank of a job may dial at once (the root's, a
 * rank's p2p listener: the first rank of a tree gather) lets 1024 connections
 * authenticate together, or an eighth of the fd limit when that is lower:
 * with 64, a loaded host of 256 ranks had the dialers that were not yet
 * scheduled evicted and dialing again. */
static void listeners_keep_a_job_of_dialers(void)
{
  struct rlimit rl;
  rlim_t eighth;

  bt_setup();
  (void)mc_boot_fd_limit_raise();
  MC_T_EQ_INT(getrlimit(RLIMIT_NOFILE, &rl), 0);
  eighth = rl.rlim_cur / 8;
  MC_T_EQ_INT(mc_boot_max_pending(), (eighth > 1024) ? 1024 : (eighth < 16) ? 16 : (int)eighth);
}

/* Reads one framed control message into *m; false unless it is one. */
static bool raw_recv_ctl(int fd, struct mc_boot_ctl *m)
{
  uint32_t len = 0;

  if ((raw_recv(fd, &len, sizeof(len)) != sizeof(len)) || (len != sizeof(*m)))
    return false;
  return raw_recv(fd, m, sizeof(*m)) == sizeof(*m);
}

/* Rank i's NEXT (ring address 30000 + i + 1) and the whole address table. */
static void read_next_and_table(int fd, int i, int n, struct mc_boot_peer *table)
{
  struct mc_boot_ctl m;
  uint32_t len = 0;

  MC_T_TRUE(raw_recv_ctl(fd, &m));
  MC_T_EQ_INT(m.kind, MC_BOOT_CTL_NEXT);
  MC_T_EQ_INT(m.rank, (i + 1) % n);
  MC_T_EQ_INT(ntohs(m.addr.sin.sin_port), 30000 + (i + 1) % n);
  MC_T_EQ_INT(m.table_bytes, n * (int)sizeof(struct mc_boot_peer));
  MC_T_EQ_INT(raw_recv(fd, &len, sizeof(len)), sizeof(len));
  MC_T_EQ_INT(len, m.table_bytes);
  memset(table, 0, len);
  MC_T_EQ_INT(raw_recv(fd, table, len), len);
  for (int k = 0; k < n; k++) {
    char host[MC_BOOT_HOST_BYTES];
    snprintf(host, sizeof(host), "h%d", k);
    MC_T_EQ_INT(table[k].pid, 1000 + k);
    MC_T_EQ_INT(ntohs(table[k].p2p.sin.sin_port), 20000 + k);
    MC_T_EQ_STR(table[k].host, host);
  }
}

/*
 * One root hands every rank the address table after its NEXT, once all have
 * registered, and sends it as each rank's socket takes it (never blocking on
 * one; on loopback the kernel takes a table of this size whole): with 300
 * ranks, rank 7 reading nothing holds up none of the others, each of which
 * reads its NEXT and the whole table (every rank's registered p2p address,
 * pid and host). Rank 7 then leaves; rank 8, which had read nothing either,
 * reads its NEXT and table before the failure notice, which names rank 7,
 * as every other rank does.
 */
static void table_goes_out_as_each_rank_reads(void)
{
  enum { N = 300, SILENT = 7, LATE = 8 };
  static int fd[N];
  static struct mc_boot_peer table[N];
  ncclUniqueId id;
  struct mc_boot_handle h;
  struct mc_boot_root *root;
  struct mc_boot_ctl m;
  int fds0;
  int tasks0;

  bt_setup();
  fds0 = mc_count_fds();
  tasks0 = mc_count_threads_stable();
  log_start();
  root = new_job(&id, &h);
  for (int i = 0; i < N; i++) {
    struct mc_boot_ctl reg = make_register(i, N);
    reg.pid = 1000 + i;
    reg.addr.sin.sin_port = htons((uint16_t)(30000 + i));
    reg.p2p.sin.sin_port = htons((uint16_t)(20000 + i));
    snprintf(reg.host, sizeof(reg.host), "h%d", i);
    fd[i] = raw_connect(&h.addr);
    MC_T_EQ_INT(raw_authenticate(fd[i], h.magic, MC_SOCK_TYPE_ROOT, h.secret),
                MC_BOOT_VERDICT_ACCEPT);
    frame_send(fd[i], &reg);
  }
  for (int i = 0; i < N; i++) {
    if ((i != SILENT) && (i != LATE))
      read_next_and_table(fd[i], i, N, table);
  }
  MC_T_EQ_INT(log_count("sending every rank the address table"), 1);
  close(fd[SILENT]);
  read_next_and_table(fd[LATE], LATE, N, table);
  for (int i = 0; i < N; i++) {
    if (i == SILENT)
      continue;
    MC_T_TRUE(raw_recv_ctl(fd[i], &m));
    MC_T_EQ_INT(m.kind, MC_BOOT_CTL_FAIL);
    MC_T_TRUE(strstr(m.text, "rank 7 (host h7 pid 1007) left before its init completed") != NULL);
    MC_T_TRUE(raw_sees_close(fd[i]));
    close(fd[i]);
  }
  mc_boot_root_release(root, 2000);
  log_stop();
  MC_T_EQ_INT(mc_count_fds(), fds0);
  MC_T_EQ_INT(mc_count_threads_settled(tasks0, 5000), tasks0);
}

/* comm_id_secrets first: it checks the once-per-process INFO that the
 * other NCCL_COMM_ID cases also trigger. */
MC_T_MAIN(comm_id_secrets, strangers_cannot_register_or_fail_the_job,
          listener_accepts_only_the_secret, connections_have_liveness_options,
          rank_refuses_root_without_the_secret, root_fail_with_code_zero_is_a_protocol_error,
          half_messages_do_not_stall_the_root, flood_of_silent_connections_is_evicted,
          squatted_comm_id_port_fails_at_once, published_ids,
          rank_with_another_secret_fails_at_once, net_secret_depends_on_the_bootstrap_secret,
          out_of_fds_at_the_root, table_goes_out_as_each_rank_reads,
          listeners_keep_a_job_of_dialers)
