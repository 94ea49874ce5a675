/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bootstrap root. Mirrors NCCL's bootstrapRoot (bootstrap.cc): ranks
 * register with the root, which tells each rank the ring address of the next
 * one as soon as both have arrived. Unlike NCCL's short-lived connections,
 * each rank's connection stays open until that rank's init completes, so the
 * root can tell everybody at once when a rank dies, fails, registers twice,
 * disagrees on nranks, or never arrives before the deadline. One thread per
 * root, driven by poll(); it ends when every rank is done, on failure once
 * every rank has been told, or at the deadline.
 */
#include "bootstrap.h"

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bootstrap_int.h"
#include "check.h"
#include "log.h"
#include "params.h"
#include "utils.h"

#define ROOT_TICK_MS      10
#define ROOT_MSG_WAIT_MS  2000 /* a registered peer has this long to finish a message */
#define ROOT_MAX_UNREG    4096 /* connections that passed the handshake but did not register */
#define ROOT_PORT_BUSY_MS 1000 /* how long rank 0 waits for an NCCL_COMM_ID port to free up */

struct root_rank {
  struct mc_sock sock; /* fd -1 once done, dead or told */
  bool is_registered;
  bool is_done;
  union mc_sockaddr ring_addr;
  char host[MC_BOOT_HOST_BYTES];
  int pid;
};

struct mc_boot_root {
  /* identity and lifetime (guarded by roots_lock) */
  uint64_t magic;
  union mc_sockaddr addr;
  int refs;
  bool is_joined;
  struct mc_boot_root *next;
  pthread_t thread;
  uint32_t stop;      /* set by release: stop now */
  uint32_t finished;  /* set by the thread at exit */
  uint32_t accepting; /* still takes registrations (claimable) */
  uint32_t failed;    /* the job's init failed: nothing left worth waiting for */

  /* thread state */
  struct mc_listener listener;
  bool is_listening;
  int n_ranks; /* -1 until the first registration */
  int n_registered;
  int n_done;
  struct root_rank *ranks;
  struct mc_sock *unreg;
  int n_unreg;
  bool is_failed;
  struct mc_boot_ctl fail_msg;
  int n_told;
  int64_t timeout_ms;
  struct mc_deadline join_dl; /* set at the first registration */
  struct mc_deadline end_dl;
  double t_start;
};

static pthread_mutex_t roots_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mc_boot_root *roots;

static const char *addr_str(const union mc_sockaddr *a, char *buf)
{
  return mc_sockaddr_str(a, buf, MC_SOCKADDR_STRLEN);
}

static void send_ctl(struct mc_sock *s, const struct mc_boot_ctl *msg)
{
  struct mc_wait w = {.dl = mc_deadline_in_ms(ROOT_MSG_WAIT_MS)};

  if (s->fd >= 0)
    (void)mc_sock_send_msg(s, msg, sizeof(*msg), &w);
}

/* Ends the job's init: every rank connected now, and every later one, is told why. */
static void root_fail(struct mc_boot_root *r, int skip_rank, ncclResult_t code, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));
static void root_fail(struct mc_boot_root *r, int skip_rank, ncclResult_t code, const char *fmt,
                      ...)
{
  va_list ap;

  if (r->is_failed)
    return;
  r->is_failed = true;
  memset(&r->fail_msg, 0, sizeof(r->fail_msg));
  r->fail_msg.kind = MC_BOOT_CTL_FAIL;
  r->fail_msg.version = NCCL_VERSION_CODE;
  r->fail_msg.code = code;
  va_start(ap, fmt);
  vsnprintf(r->fail_msg.text, sizeof(r->fail_msg.text), fmt, ap);
  va_end(ap);
  MC_INFO(MC_SUB_BOOTSTRAP, "Bootstrap root: init of the job failed, telling every rank: %s",
          r->fail_msg.text);
  for (int i = 0; (r->ranks != NULL) && (i < r->n_ranks); i++) {
    struct root_rank *rr = &r->ranks[i];
    if (rr->sock.fd < 0)
      continue;
    if (i != skip_rank)
      send_ctl(&rr->sock, &r->fail_msg);
    mc_sock_close(&rr->sock);
    r->n_told++;
  }
  for (int i = 0; i < r->n_unreg; i++) {
    send_ctl(&r->unreg[i], &r->fail_msg);
    mc_sock_close(&r->unreg[i]);
    r->n_told++;
  }
  r->n_unreg = 0;
  __atomic_store_n(&r->accepting, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&r->failed, 1, __ATOMIC_RELEASE);
  if (skip_rank >= 0)
    r->n_told++; /* the rank that failed or died knows */
  /* Late ranks are told until the deadline; the port is then free again. */
  if (!mc_deadline_passed(r->end_dl))
    r->end_dl = mc_deadline_min(r->end_dl, mc_deadline_in_ms(r->timeout_ms));
}

static void send_next(struct mc_boot_root *r, int rank)
{
  int next = (rank + 1) % r->n_ranks;
  struct mc_boot_ctl msg;

  memset(&msg, 0, sizeof(msg));
  msg.kind = MC_BOOT_CTL_NEXT;
  msg.version = NCCL_VERSION_CODE;
  msg.rank = next;
  msg.n_ranks = r->n_ranks;
  msg.addr = r->ranks[next].ring_addr;
  send_ctl(&r->ranks[rank].sock, &msg);
}

static bool root_setup_ranks(struct mc_boot_root *r, const struct mc_boot_ctl *m)
{
  r->ranks = calloc((size_t)m->n_ranks, sizeof(*r->ranks));
  if (r->ranks == NULL)
    return false;
  for (int i = 0; i < m->n_ranks; i++)
    mc_sock_init(&r->ranks[i].sock);
  r->n_ranks = m->n_ranks;
  r->join_dl = mc_deadline_in_ms(r->timeout_ms);
  r->end_dl = mc_deadline_in_ms(2 * r->timeout_ms + 10000);
  return true;
}

/* A registration; takes ownership of *s. */
static void root_register(struct mc_boot_root *r, struct mc_sock *s, const struct mc_boot_ctl *m)
{
  char a[MC_SOCKADDR_STRLEN];
  struct root_rank *rr;

  if (r->is_failed) {
    send_ctl(s, &r->fail_msg);
    mc_sock_close(s);
    r->n_told++;
    return;
  }
  if ((m->n_ranks < 1) || (m->rank < 0) || (m->rank >= m->n_ranks)) {
    mc_sock_close(s);
    return;
  }
  if ((r->n_ranks < 0) && !root_setup_ranks(r, m)) {
    mc_sock_close(s);
    root_fail(r, -1, ncclSystemError, "bootstrap root at %s is out of memory",
              addr_str(&r->addr, a));
    return;
  }
  if (m->n_ranks != r->n_ranks) {
    int first = 0;
    while ((first < r->n_ranks) && !r->ranks[first].is_registered)
      first++;
    root_fail(r, -1, ncclInvalidUsage,
              "rank %d (host %s pid %d) was started with nranks %d, but rank %d (host %s pid %d) "
              "with nranks %d: every rank must pass the same nranks",
              m->rank, m->host, m->pid, m->n_ranks, first,
              (first < r->n_ranks) ? r->ranks[first].host : "?",
              (first < r->n_ranks) ? r->ranks[first].pid : -1, r->n_ranks);
    send_ctl(s, &r->fail_msg);
    mc_sock_close(s);
    return;
  }
  rr = &r->ranks[m->rank];
  if (rr->is_registered) {
    root_fail(r, -1, ncclInvalidUsage,
              "rank %d joined twice: from host %s pid %d and from host %s pid %d: every process "
              "must pass a different rank",
              m->rank, rr->host, rr->pid, m->host, m->pid);
    send_ctl(s, &r->fail_msg);
    mc_sock_close(s);
    return;
  }
  rr->sock = *s;
  s->fd = -1;
  rr->is_registered = true;
  rr->ring_addr = m->addr;
  rr->pid = m->pid;
  snprintf(rr->host, sizeof(rr->host), "%s", m->host);
  r->n_registered++;
  if (r->n_registered == r->n_ranks) {
    /* Everybody is here: free the port for the next communicator on the same
     * NCCL_COMM_ID. Before the last NEXT goes out: once it has, ranks may
     * finish this init and connect for the next one, and a connection left
     * in this listener's backlog would be reset when it closes. */
    mc_listener_close(&r->listener);
    r->is_listening = false;
    __atomic_store_n(&r->accepting, 0, __ATOMIC_RELEASE);
    MC_INFO(MC_SUB_BOOTSTRAP, "Bootstrap root %s: all %d ranks joined in %.3f s",
            addr_str(&r->addr, a), r->n_ranks, mc_time_sec() - r->t_start);
  }
  if (r->ranks[(m->rank + r->n_ranks - 1) % r->n_ranks].is_registered)
    send_next(r, (m->rank + r->n_ranks - 1) % r->n_ranks);
  if ((r->n_ranks > 1) && r->ranks[(m->rank + 1) % r->n_ranks].is_registered)
    send_next(r, m->rank);
}

static void root_missing_ranks(struct mc_boot_root *r)
{
  char missing[512];
  char joined[512];
  int *miss = calloc((size_t)r->n_ranks, sizeof(int));
  int *got = calloc((size_t)r->n_ranks, sizeof(int));
  char a[MC_SOCKADDR_STRLEN];
  int n_miss = 0;
  int n_got = 0;

  if ((miss == NULL) || (got == NULL)) {
    free(miss);
    free(got);
    root_fail(r, -1, ncclTimeout, "ranks did not join the bootstrap root within %lld s",
              (long long)(r->timeout_ms / 1000));
    return;
  }
  for (int i = 0; i < r->n_ranks; i++) {
    if (r->ranks[i].is_registered)
      got[n_got++] = i;
    else
      miss[n_miss++] = i;
  }
  mc_str_int_ranges(miss, n_miss, missing, sizeof(missing));
  mc_str_int_ranges(got, n_got, joined, sizeof(joined));
  root_fail(r, -1, ncclTimeout,
            "rank%s %s of %d never joined the bootstrap root at %s within %lld s "
            "(MESHCCL_INIT_TIMEOUT); joined: %s",
            (n_miss > 1) ? "s" : "", missing, r->n_ranks, addr_str(&r->addr, a),
            (long long)(r->timeout_ms / 1000), joined);
  free(miss);
  free(got);
}

static void root_accept(struct mc_boot_root *r)
{
  struct mc_wait w0 = {.dl = mc_deadline_in_ms(0)};

  while (r->is_listening) {
    struct mc_sock s;
    if (mc_sock_accept(&r->listener, &w0, &s) != ncclSuccess)
      return;
    if (r->n_unreg == ROOT_MAX_UNREG) {
      mc_sock_close(&s);
      continue;
    }
    r->unreg[r->n_unreg++] = s;
  }
}

/* A message from a connection that has not registered yet. */
static void root_read_unreg(struct mc_boot_root *r, int i)
{
  struct mc_wait w = {.dl = mc_deadline_in_ms(ROOT_MSG_WAIT_MS)};
  struct mc_boot_ctl m;
  struct mc_sock s = r->unreg[i];
  char a[MC_SOCKADDR_STRLEN];
  size_t n = 0;

  r->unreg[i] = r->unreg[--r->n_unreg];
  if ((mc_sock_recv_msg(&s, &m, sizeof(m), &n, &w) != ncclSuccess) || (n != sizeof(m)) ||
      (m.kind != MC_BOOT_CTL_REGISTER)) {
    MC_INFO(MC_SUB_BOOTSTRAP, "Bootstrap root: dropped connection from %s: %s",
            addr_str(&s.addr, a), (s.err[0] != '\0') ? s.err : "not a registration");
    mc_sock_close(&s);
    return;
  }
  m.host[sizeof(m.host) - 1] = '\0';
  root_register(r, &s, &m);
}

/* A message (or EOF) from registered rank i. */
static void root_read_rank(struct mc_boot_root *r, int i)
{
  struct mc_wait w = {.dl = mc_deadline_in_ms(ROOT_MSG_WAIT_MS)};
  struct root_rank *rr = &r->ranks[i];
  struct mc_boot_ctl m;
  size_t n = 0;

  if ((mc_sock_recv_msg(&rr->sock, &m, sizeof(m), &n, &w) != ncclSuccess) || (n != sizeof(m))) {
    mc_sock_close(&rr->sock);
    root_fail(r, i, ncclRemoteError,
              "rank %d (host %s pid %d) left before its init completed: the process exited, was "
              "killed, or aborted its communicator",
              i, rr->host, rr->pid);
    return;
  }
  m.text[sizeof(m.text) - 1] = '\0';
  if (m.kind == MC_BOOT_CTL_DONE) {
    rr->is_done = true;
    r->n_done++;
    mc_sock_close(&rr->sock);
  } else if (m.kind == MC_BOOT_CTL_FAIL) {
    mc_sock_close(&rr->sock);
    root_fail(r, i, ncclRemoteError, "rank %d (host %s pid %d) failed: %s", i, rr->host, rr->pid,
              m.text);
  }
}

static int root_poll(struct mc_boot_root *r, struct pollfd *pfd, int *owner)
{
  int n = 0;

  if (r->is_listening) {
    /* A full pending list leaves the backlog alone (mc_sock_accept): polling
     * the listener then would wake this loop at once, every tick. */
    pfd[n].fd = (r->listener.n_pending < MC_SOCK_MAX_PENDING) ? r->listener.sock.fd : -1;
    pfd[n].events = POLLIN;
    owner[n++] = -1;
    for (int i = 0; i < r->listener.n_pending; i++) {
      pfd[n].fd = r->listener.pending[i].fd;
      pfd[n].events = POLLIN;
      owner[n++] = -1;
    }
  }
  for (int i = 0; i < r->n_unreg; i++) {
    pfd[n].fd = r->unreg[i].fd;
    pfd[n].events = POLLIN;
    owner[n++] = -2 - i;
  }
  for (int i = 0; (r->ranks != NULL) && (i < r->n_ranks); i++) {
    if (r->ranks[i].sock.fd < 0)
      continue;
    pfd[n].fd = r->ranks[i].sock.fd;
    pfd[n].events = POLLIN;
    owner[n++] = i;
  }
  return n;
}

static bool root_finished(struct mc_boot_root *r)
{
  if (mc_deadline_passed(r->end_dl))
    return true;
  if (r->is_failed)
    return (r->n_ranks > 0) && (r->n_told >= r->n_ranks);
  return (r->n_ranks > 0) && (r->n_done == r->n_ranks);
}

static void root_step(struct mc_boot_root *r, struct pollfd *pfd, int *owner)
{
  int n = root_poll(r, pfd, owner);

  (void)poll(pfd, (nfds_t)n, ROOT_TICK_MS);
  root_accept(r);
  /* Highest unregistered index first: root_read_unreg moves the last one into the hole. */
  for (int k = n - 1; k >= 0; k--) {
    if ((pfd[k].revents == 0) || (owner[k] == -1))
      continue;
    if (owner[k] >= 0) {
      if (r->ranks[owner[k]].sock.fd >= 0)
        root_read_rank(r, owner[k]);
    } else if (-2 - owner[k] < r->n_unreg) {
      root_read_unreg(r, -2 - owner[k]);
    }
  }
  if (!r->is_failed && (r->n_ranks > 0) && (r->n_registered < r->n_ranks) &&
      mc_deadline_passed(r->join_dl))
    root_missing_ranks(r);
  if (!r->is_failed && (__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE) != 0)) {
    char a[MC_SOCKADDR_STRLEN];
    root_fail(r, -1, ncclRemoteError,
              "the bootstrap root at %s was stopped before every rank finished init: the process "
              "hosting it (usually rank 0) destroyed or aborted its communicator",
              addr_str(&r->addr, a));
  }
}

static void *root_main(void *arg)
{
  struct mc_boot_root *r = arg;
  size_t max_fds = 1 + MC_SOCK_MAX_PENDING + ROOT_MAX_UNREG + 65536;
  struct pollfd *pfd = calloc(max_fds, sizeof(*pfd));
  int *owner = calloc(max_fds, sizeof(*owner));
  struct rlimit rl;

  mc_thread_set_name("NCCL BootstrapR");
  /* One fd per rank: lift the soft limit to the hard one, as NCCL's root does. */
  if ((getrlimit(RLIMIT_NOFILE, &rl) == 0) && (rl.rlim_cur < rl.rlim_max)) {
    rl.rlim_cur = rl.rlim_max;
    (void)setrlimit(RLIMIT_NOFILE, &rl);
  }
  while ((pfd != NULL) && (owner != NULL) && !root_finished(r)) {
    root_step(r, pfd, owner);
    if (r->is_failed && (__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE) != 0))
      break;
  }
  if (!r->is_failed && (r->n_ranks > 0) && (r->n_done < r->n_ranks))
    root_fail(r, -1, ncclTimeout, "bootstrap root gave up waiting for the ranks to finish init");
  for (int i = 0; (r->ranks != NULL) && (i < r->n_ranks); i++)
    mc_sock_close(&r->ranks[i].sock);
  for (int i = 0; i < r->n_unreg; i++)
    mc_sock_close(&r->unreg[i]);
  mc_listener_close(&r->listener);
  free(pfd);
  free(owner);
  free(r->ranks);
  r->ranks = NULL;
  free(r->unreg);
  r->unreg = NULL;
  __atomic_store_n(&r->finished, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* Starts a root listening on addr (port 0: ephemeral) and records it. */
/* Starts a root listening on addr (port 0: ephemeral) and records it. With
 * busy_err, a port in use is not an error to report: ncclInvalidUsage is
 * returned silently with the reason in busy_err. */
static ncclResult_t root_start(const union mc_sockaddr *addr, uint64_t magic,
                               union mc_sockaddr *bound_out, char *busy_err, size_t busy_bytes)
{
  struct mc_boot_root *r = NULL;
  char a[MC_SOCKADDR_STRLEN];
  ncclResult_t res;
  int rc;

  MC_CHECK(mc_calloc(&r, 1));
  res = mc_calloc(&r->unreg, ROOT_MAX_UNREG);
  if (res != ncclSuccess) {
    free(r);
    return res;
  }
  res = mc_sock_listen(addr, magic, MC_SOCK_TYPE_ROOT, &r->listener);
  if ((res == ncclInvalidUsage) && (busy_err != NULL)) {
    snprintf(busy_err, busy_bytes, "%s", r->listener.sock.err);
    goto err_free;
  }
  if (res != ncclSuccess) {
    res = MC_FAIL(res, "bootstrap root: %s", r->listener.sock.err);
    goto err_free;
  }
  r->is_listening = true;
  r->accepting = 1;
  r->magic = magic;
  r->addr = r->listener.sock.addr;
  r->n_ranks = -1;
  r->timeout_ms = mc_param_int(MC_P_INIT_TIMEOUT) * 1000;
  r->join_dl = mc_deadline_in_ms(-1);
  /* A root whose id is never used ends after the init timeout plus margin. */
  r->end_dl = mc_deadline_in_ms(2 * r->timeout_ms + 10000);
  r->t_start = mc_time_sec();
  pthread_mutex_lock(&roots_lock);
  rc = pthread_create(&r->thread, NULL, root_main, r);
  if (rc == 0) {
    r->next = roots;
    roots = r;
  }
  pthread_mutex_unlock(&roots_lock);
  if (rc != 0) {
    res = MC_FAIL(ncclSystemError, "bootstrap root: pthread_create: %s", strerror(rc));
    goto err_close;
  }
  MC_INFO(MC_SUB_BOOTSTRAP, "Bootstrap root listening on %s", addr_str(&r->addr, a));
  *bound_out = r->addr;
  return ncclSuccess;

err_close:
  mc_listener_close(&r->listener);
err_free:
  free(r->unreg);
  free(r);
  return res;
}

/* Joins roots that finished and nobody references (called with roots_lock held). */
static void reap_finished_locked(void)
{
  struct mc_boot_root **pp = &roots;

  while (*pp != NULL) {
    struct mc_boot_root *r = *pp;
    if ((r->refs == 0) && (__atomic_load_n(&r->finished, __ATOMIC_ACQUIRE) != 0)) {
      *pp = r->next;
      pthread_join(r->thread, NULL);
      free(r);
      continue;
    }
    pp = &r->next;
  }
}

ncclResult_t mc_boot_root_create(const union mc_sockaddr *addr, uint64_t magic,
                                 union mc_sockaddr *bound_out)
{
  pthread_mutex_lock(&roots_lock);
  reap_finished_locked();
  pthread_mutex_unlock(&roots_lock);
  return root_start(addr, magic, bound_out, NULL, 0);
}

/* Stops roots of this process at addr that no longer take registrations
 * (a failed communicator's root telling late ranks): a new communicator on
 * the same NCCL_COMM_ID needs the port. Returns true when one was found. */
static bool stop_stale_roots_at(const union mc_sockaddr *addr)
{
  bool found = false;

  pthread_mutex_lock(&roots_lock);
  for (struct mc_boot_root *r = roots; r != NULL; r = r->next) {
    if (mc_sockaddr_equal(&r->addr, addr) &&
        (__atomic_load_n(&r->accepting, __ATOMIC_ACQUIRE) == 0) &&
        (__atomic_load_n(&r->finished, __ATOMIC_ACQUIRE) == 0)) {
      __atomic_store_n(&r->stop, 1, __ATOMIC_RELEASE);
      found = true;
    }
  }
  pthread_mutex_unlock(&roots_lock);
  return found;
}

ncclResult_t mc_boot_root_start_comm_id(const ncclUniqueId *id, const struct mc_wait *w)
{
  struct mc_boot_handle h;
  union mc_sockaddr bound;
  char a[MC_SOCKADDR_STRLEN];
  struct mc_deadline busy_dl = mc_deadline_in_ms(ROOT_PORT_BUSY_MS);

  memcpy(&h, id->internal, sizeof(h));
  for (;;) {
    char busy[MC_SOCK_ERR_BYTES] = "";
    ncclResult_t res;

    /* Listen directly: a probe socket opened and closed first would reset
     * the connections ranks make to the port in between. */
    pthread_mutex_lock(&roots_lock);
    reap_finished_locked();
    pthread_mutex_unlock(&roots_lock);
    res = root_start(&h.addr, h.magic, &bound, busy, sizeof(busy));
    if (res != ncclInvalidUsage)
      return res;
    if (!stop_stale_roots_at(&h.addr) && mc_deadline_passed(busy_dl)) {
      /* Someone else listens there: most often the root of another process
       * that also believes it is rank 0. Registering with it lets that root
       * report the duplicate to both; a foreign listener shows up as a root
       * that never answers. */
      MC_INFO(MC_SUB_BOOTSTRAP,
              "Bootstrap: NCCL_COMM_ID=%s is already in use (%s): registering "
              "with the root listening there instead of starting one",
              addr_str(&h.addr, a), busy);
      return ncclSuccess;
    }
    if ((w->abort_flag != NULL) && (*w->abort_flag != 0))
      return ncclInternalError;
    mc_sleep_ms_abortable(50, w->abort_flag);
  }
}

struct mc_boot_root *mc_boot_root_claim(const ncclUniqueId *id)
{
  struct mc_boot_handle h;
  struct mc_boot_root *found = NULL;

  memcpy(&h, id->internal, sizeof(h));
  pthread_mutex_lock(&roots_lock);
  for (struct mc_boot_root *r = roots; r != NULL; r = r->next) {
    if ((r->magic == h.magic) && mc_sockaddr_equal(&r->addr, &h.addr) &&
        (__atomic_load_n(&r->accepting, __ATOMIC_ACQUIRE) != 0) &&
        (__atomic_load_n(&r->finished, __ATOMIC_ACQUIRE) == 0)) {
      r->refs++;
      found = r;
      break;
    }
  }
  pthread_mutex_unlock(&roots_lock);
  return found;
}

void mc_boot_root_release(struct mc_boot_root *root, int wait_ms)
{
  struct mc_deadline dl = mc_deadline_in_ms(wait_ms);
  bool is_last;

  if (root == NULL)
    return;
  /* The last holder keeps its reference while it waits: a root with no
   * reference that finished is joined and freed by reap_finished_locked(). */
  pthread_mutex_lock(&roots_lock);
  is_last = (root->refs == 1);
  if (!is_last)
    root->refs--;
  pthread_mutex_unlock(&roots_lock);
  if (!is_last)
    return;
  while ((__atomic_load_n(&root->finished, __ATOMIC_ACQUIRE) == 0) &&
         (__atomic_load_n(&root->failed, __ATOMIC_ACQUIRE) == 0) && !mc_deadline_passed(dl))
    mc_sleep_ms_abortable(ROOT_TICK_MS, NULL);
  __atomic_store_n(&root->stop, 1, __ATOMIC_RELEASE);
  pthread_mutex_lock(&roots_lock);
  root->refs--;
  if (!root->is_joined && (root->refs == 0)) {
    struct mc_boot_root **pp = &roots;
    root->is_joined = true;
    while ((*pp != NULL) && (*pp != root))
      pp = &(*pp)->next;
    if (*pp == root)
      *pp = root->next;
    pthread_mutex_unlock(&roots_lock);
    pthread_join(root->thread, NULL);
    free(root);
    return;
  }
  pthread_mutex_unlock(&roots_lock);
}
