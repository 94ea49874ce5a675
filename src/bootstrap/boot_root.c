/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bootstrap root. Mirrors NCCL's bootstrapRoot (bootstrap.cc): ranks
 * register with the root, which tells each rank the ring address of the next
 * one as soon as both have arrived. Unlike NCCL's short-lived connections,
 * each rank's connection stays open until that rank's init completes, so the
 * root can tell everybody at once when a rank dies, fails, registers twice,
 * disagrees on nranks, or never arrives before the deadline.
 *
 * One thread per root, a state machine driven by poll(): the authenticating
 * acceptor (boot_accept.c: only connections proving the id's secret get
 * through), authenticated connections that have not registered yet (each
 * with a deadline), and the registered ranks. Every read takes what the
 * socket holds and keeps partial messages (struct mc_boot_rx), so a peer
 * that sends half a message, or a stream of half handshakes, delays nobody.
 * It ends when every rank is done, on failure once every rank has been told,
 * or at the deadline.
 *
 * Several roots (ncclCommInitRankScalable, nId > 1) mirror NCCL's
 * bootstrapRoot: root i serves the contiguous group of ranks
 * mc_boot_root_of_rank maps to it, and the first rank of group i + 1 (of
 * group 0 for the last root) registers with root i too, as its "neighbor"
 * (MC_BOOT_CTL_NEIGHBOR). The root's entries are then its own ranks plus
 * that neighbor, in ring order, so the NEXT of its last rank is the
 * neighbor's ring address and the ring closes across the groups with no
 * root talking to another. The neighbor's connection stays open like a
 * registration: a failure seen by either root crosses to the next group
 * through the rank that holds both connections, so every group learns it.
 *
 * Length: the root's one state machine (NCCL's bootstrapRoot), whose handlers share its tables.
 */
#include "bootstrap.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "bootstrap_int.h"
#include "check.h"
#include "log.h"
#include "params.h"
#include "utils.h"

#define ROOT_TICK_MS        10
#define ROOT_MSG_WAIT_MS    2000 /* sending a notice to a rank */
#define ROOT_REG_WINDOW_MS  5000 /* an authenticated connection has this long to register */
#define ROOT_MAX_UNREG      4096 /* authenticated connections that did not register yet */
#define ROOT_MAX_READY      64   /* authenticated, not yet moved to the unregistered ones */
#define ROOT_PORT_BUSY_MS   1000 /* how long rank 0 waits for a stale root of its own to go */
#define ROOT_MULTI_GRACE_MS 1500 /* several roots: extra join wait (root_setup_ranks) */

/* An authenticated connection that has not registered yet. */
struct root_conn {
  struct mc_sock sock;
  struct mc_boot_rx rx;
  uint64_t since_ns;
};

/* A registered rank (kept small: the root holds one per rank). */
struct root_rank {
  int fd; /* -1 once done, dead or told */
  bool is_registered;
  bool is_done;
  struct mc_boot_rx rx;
  union mc_sockaddr peer;
  union mc_sockaddr ring_addr;
  union mc_sockaddr p2p;
  char host[MC_BOOT_HOST_BYTES];
  int pid;
  size_t table_sent; /* bytes of the table frame sent to this rank */
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
  struct mc_boot_acceptor acc;
  bool is_listening;
  int n_ranks; /* the job's, -1 until the first registration */
  int n_roots; /* the job's roots (1: this one) */
  int root_idx;
  int first;     /* global rank of entry 0 */
  int n_local;   /* ranks registering with this root */
  int n_entries; /* ranks[] entries: n_local, plus the neighbor with several roots */
  int n_registered;
  int n_done;
  /* One root of at most table_max_ranks ranks sends every rank the address
   * table (a uint32 length, then n_ranks struct mc_boot_peer) after its
   * NEXT, once all have registered (see send_all_next). */
  int table_max_ranks;
  uint8_t *table;
  size_t table_frame_bytes;
  struct root_rank *ranks;
  struct root_conn *unreg;
  int n_unreg;
  struct pollfd *pfd; /* pfd_cap entries: acceptor, unregistered, ranks */
  int *owner;         /* per pfd entry: -1 acceptor, -2 - i unreg[i], i ranks[i] */
  size_t pfd_cap;
  bool is_failed;
  /* An NCCL_COMM_ID root: its fixed port is freed once every rank joined,
   * for the next communicator on it. A root of ncclGetUniqueId's random port
   * listens until it ends, so that a rank that took it for another root (a
   * different nId or nranks) still reaches it and is told. */
  bool frees_port;
  struct mc_boot_ctl fail_msg;
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

/* A registered rank's connection as a socket, for sending and closing. */
static struct mc_sock rank_sock(const struct root_rank *rr, uint64_t magic)
{
  struct mc_sock s;

  mc_sock_init(&s);
  s.fd = rr->fd;
  s.addr = rr->peer;
  s.magic = magic;
  s.type = MC_SOCK_TYPE_ROOT;
  return s;
}

static void rank_close(struct mc_boot_root *r, struct root_rank *rr)
{
  struct mc_sock s = rank_sock(rr, r->magic);

  mc_sock_close(&s); /* reads unread input first: no reset that could eat a notice */
  rr->fd = -1;
  mc_boot_rx_free(&rr->rx);
}

static void rank_send(struct mc_boot_root *r, struct root_rank *rr, const struct mc_boot_ctl *msg)
{
  struct mc_sock s = rank_sock(rr, r->magic);

  send_ctl(&s, msg);
}

static void unreg_remove(struct mc_boot_root *r, int i)
{
  mc_boot_rx_free(&r->unreg[i].rx);
  r->unreg[i] = r->unreg[--r->n_unreg];
}

/* Whether the rest of the address table is still to go to rr: every rank is
 * sent its NEXT as soon as the table exists (send_all_next). */
static bool table_due(const struct mc_boot_root *r, const struct root_rank *rr)
{
  return (r->table != NULL) && (rr->table_sent < r->table_frame_bytes);
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
  for (int i = 0; (r->ranks != NULL) && (i < r->n_entries); i++) {
    struct root_rank *rr = &r->ranks[i];
    if (rr->fd < 0)
      continue;
    if (i != skip_rank) {
      /* A table half sent is finished first: the notice must start a frame. */
      if (table_due(r, rr)) {
        struct mc_sock s = rank_sock(rr, r->magic);
        struct mc_wait w = {.dl = mc_deadline_in_ms(ROOT_MSG_WAIT_MS)};
        size_t from = rr->table_sent;
        rr->table_sent = r->table_frame_bytes;
        if (mc_sock_send_all(&s, r->table + from, r->table_frame_bytes - from, &w) != ncclSuccess) {
          rank_close(r, rr);
          continue;
        }
      }
      rank_send(r, rr, &r->fail_msg);
    }
    rank_close(r, rr);
  }
  /* Connections that proved the secret but did not register yet are ranks
   * of this job on their way: tell them too. Which ranks they are is not
   * known (one may be a rank that disagrees on the job's shape and belongs
   * to no entry), so they do not count as told: the root stays until every
   * entry has registered and been told, or until the deadline. */
  while (r->n_unreg > 0) {
    send_ctl(&r->unreg[r->n_unreg - 1].sock, &r->fail_msg);
    mc_sock_close(&r->unreg[r->n_unreg - 1].sock);
    unreg_remove(r, r->n_unreg - 1);
  }
  __atomic_store_n(&r->accepting, 0, __ATOMIC_RELEASE);
  __atomic_store_n(&r->failed, 1, __ATOMIC_RELEASE);
  /* Late ranks are told until the deadline; the port is then free again. */
  if (!mc_deadline_passed(r->end_dl))
    r->end_dl = mc_deadline_min(r->end_dl, mc_deadline_in_ms(r->timeout_ms));
}

/* The global rank of entry i (the neighbor's is the first rank after this group). */
static int entry_rank(const struct mc_boot_root *r, int i)
{
  return (r->first + i) % r->n_ranks;
}

/* Tells entry i (one of this root's own ranks) the ring address of the next entry. */
static void send_next(struct mc_boot_root *r, int i)
{
  int next = (r->n_roots > 1) ? i + 1 : (i + 1) % r->n_entries;
  struct mc_boot_ctl msg;

  memset(&msg, 0, sizeof(msg));
  msg.kind = MC_BOOT_CTL_NEXT;
  msg.version = NCCL_VERSION_CODE;
  msg.rank = entry_rank(r, next);
  msg.n_ranks = r->n_ranks;
  msg.n_roots = r->n_roots;
  msg.root = r->root_idx;
  msg.addr = r->ranks[next].ring_addr;
  if (r->table != NULL)
    msg.table_bytes = (uint32_t)(r->table_frame_bytes - sizeof(uint32_t));
  rank_send(r, &r->ranks[i], &msg);
}

/* Whether this root hands out the address table (one root, few enough ranks). */
static bool root_has_table(const struct mc_boot_root *r)
{
  return (r->n_roots == 1) && (r->n_ranks <= r->table_max_ranks);
}

/*
 * Every rank is here and this root hands out the table: it is built once,
 * and each rank gets its NEXT followed by the table, which goes out as the
 * rank's socket takes it (root_send_table), so that a slow reader holds up
 * nobody. Instead of n - 1 ring steps through every rank (n * (n - 1)
 * messages, a wake-up each), n messages.
 */
static void send_all_next(struct mc_boot_root *r)
{
  struct mc_boot_peer *e;
  uint32_t bytes = (uint32_t)((size_t)r->n_entries * sizeof(struct mc_boot_peer));
  char a[MC_SOCKADDR_STRLEN];

  r->table_frame_bytes = sizeof(uint32_t) + bytes;
  r->table = calloc(1, r->table_frame_bytes);
  if (r->table == NULL) {
    root_fail(r, -1, ncclSystemError, "bootstrap root at %s is out of memory for %d ranks' table",
              addr_str(&r->addr, a), r->n_entries);
    return;
  }
  memcpy(r->table, &bytes, sizeof(bytes));
  e = (struct mc_boot_peer *)(r->table + sizeof(uint32_t));
  for (int i = 0; i < r->n_entries; i++) {
    e[i].p2p = r->ranks[i].p2p;
    e[i].pid = r->ranks[i].pid;
    memcpy(e[i].host, r->ranks[i].host, sizeof(e[i].host));
  }
  MC_INFO(MC_SUB_BOOTSTRAP, "Bootstrap root %s: sending every rank the address table (%u bytes)",
          addr_str(&r->addr, a), bytes);
  for (int i = 0; i < r->n_entries; i++)
    send_next(r, i);
}

/* Sends rank i what its socket takes of the table now; a broken connection is
 * left to the read that follows (root_read_rank sees it closed). */
static void root_send_table(struct mc_boot_root *r, int i)
{
  struct root_rank *rr = &r->ranks[i];
  ssize_t n;

  while (table_due(r, rr) && (rr->fd >= 0)) {
    n = send(rr->fd, r->table + rr->table_sent, r->table_frame_bytes - rr->table_sent,
             MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno != EINTR)
        return;
      continue;
    }
    rr->table_sent += (size_t)n;
  }
}

/* Sizes the poll arrays for n_ranks registered connections. */
static bool root_grow_pfd(struct mc_boot_root *r, size_t n_ranks)
{
  size_t cap = 1 + (size_t)r->acc.max_pend + ROOT_MAX_READY + ROOT_MAX_UNREG + n_ranks;
  struct pollfd *pfd = realloc(r->pfd, cap * sizeof(*pfd));
  int *owner;

  if (pfd == NULL)
    return false;
  r->pfd = pfd;
  owner = realloc(r->owner, cap * sizeof(*owner));
  if (owner == NULL)
    return false;
  r->owner = owner;
  r->pfd_cap = cap;
  return true;
}

/* The job's shape from the first registration (validated by mc_boot_ctl_check_register). */
static bool root_setup_ranks(struct mc_boot_root *r, const struct mc_boot_ctl *m)
{
  int first = mc_boot_root_first_rank(m->root, m->n_ranks, m->n_roots);
  int n_local = mc_boot_root_first_rank(m->root + 1, m->n_ranks, m->n_roots) - first;
  int n_entries = n_local + ((m->n_roots > 1) ? 1 : 0);

  if (!root_grow_pfd(r, (size_t)n_entries))
    return false;
  r->ranks = calloc((size_t)n_entries, sizeof(*r->ranks));
  if (r->ranks == NULL)
    return false;
  for (int i = 0; i < n_entries; i++)
    r->ranks[i].fd = -1;
  r->n_ranks = m->n_ranks;
  r->n_roots = m->n_roots;
  r->root_idx = m->root;
  r->first = first;
  r->n_local = n_local;
  r->n_entries = n_entries;
  /* With several roots, a rank that cannot reach one gives up at the init
   * timeout and says so to the roots it reached; waiting a little longer
   * lets that cause, not "never joined", reach every group. */
  r->join_dl = mc_deadline_in_ms(r->timeout_ms + ((m->n_roots > 1) ? ROOT_MULTI_GRACE_MS : 0));
  r->end_dl = mc_deadline_in_ms(2 * r->timeout_ms + 10000);
  return true;
}

/* Closes the listening socket: every rank is here, or the root is ending. */
static void root_stop_listening(struct mc_boot_root *r)
{
  if (!r->is_listening)
    return;
  mc_boot_acceptor_close(&r->acc);
  r->is_listening = false;
  __atomic_store_n(&r->accepting, 0, __ATOMIC_RELEASE);
}

/* The first registered entry, for messages (n_entries when none). */
static int first_registered(const struct mc_boot_root *r)
{
  int first = 0;

  while ((first < r->n_entries) && !r->ranks[first].is_registered)
    first++;
  return first;
}

/*
 * Fails the job when m disagrees with what the first registration said
 * (nranks, nId, which root this is); returns false then. The message names
 * both ranks, so that every rank of every group reads who differs.
 */
static bool root_shape_matches(struct mc_boot_root *r, struct mc_sock *s,
                               const struct mc_boot_ctl *m)
{
  char a[MC_SOCKADDR_STRLEN];
  int first = first_registered(r);
  int frank = (first < r->n_entries) ? entry_rank(r, first) : -1;
  const char *fhost = (first < r->n_entries) ? r->ranks[first].host : "?";
  int fpid = (first < r->n_entries) ? r->ranks[first].pid : -1;

  if (m->n_ranks != r->n_ranks) {
    root_fail(r, -1, ncclInvalidUsage,
              "rank %d (host %s pid %d) was started with nranks %d, but rank %d (host %s pid %d) "
              "with nranks %d: every rank must pass the same nranks",
              m->rank, m->host, m->pid, m->n_ranks, frank, fhost, fpid, r->n_ranks);
  } else if (m->n_roots != r->n_roots) {
    root_fail(r, -1, ncclInvalidUsage,
              "rank %d (host %s pid %d) passed nId %d, but rank %d (host %s pid %d) passed nId %d "
              "to the bootstrap root at %s: every rank must pass the same nId and the same "
              "commIds in the same order to ncclCommInitRankScalable",
              m->rank, m->host, m->pid, m->n_roots, frank, fhost, fpid, r->n_roots,
              addr_str(&r->addr, a));
  } else if (m->root != r->root_idx) {
    root_fail(r, -1, ncclInvalidUsage,
              "rank %d (host %s pid %d) took the bootstrap root at %s for commIds[%d], but rank "
              "%d (host %s pid %d) for commIds[%d]: every rank must pass the same commIds in the "
              "same order",
              m->rank, m->host, m->pid, addr_str(&r->addr, a), m->root, frank, fhost, fpid,
              r->root_idx);
  } else {
    return true;
  }
  send_ctl(s, &r->fail_msg);
  mc_sock_close(s);
  return false;
}

/*
 * A registration after the job failed: the rank is told at once; when it is
 * one of this root's entries (its shape matches), the entry counts as told,
 * so the root can end once every entry has been (root_finished).
 */
static void root_register_late(struct mc_boot_root *r, const struct mc_boot_ctl *m)
{
  int i;

  if ((r->ranks == NULL) || (m->n_ranks != r->n_ranks) || (m->n_roots != r->n_roots) ||
      (m->root != r->root_idx))
    return;
  i = (m->kind == MC_BOOT_CTL_NEIGHBOR) ? r->n_local : m->rank - r->first;
  if ((i < 0) || (i >= r->n_entries) || (entry_rank(r, i) != m->rank) || r->ranks[i].is_registered)
    return;
  r->ranks[i].is_registered = true;
  r->n_registered++;
}

/* A registration (validated by mc_boot_ctl_check_register); takes ownership of *s. */
static void root_register(struct mc_boot_root *r, struct mc_sock *s, const struct mc_boot_ctl *m)
{
  char a[MC_SOCKADDR_STRLEN];
  struct root_rank *rr;
  bool is_neighbor = (m->kind == MC_BOOT_CTL_NEIGHBOR);
  int i;

  if (r->is_failed) {
    root_register_late(r, m);
    send_ctl(s, &r->fail_msg);
    mc_sock_close(s);
    return;
  }
  if ((r->n_ranks < 0) && !root_setup_ranks(r, m)) {
    mc_sock_close(s);
    root_fail(r, -1, ncclSystemError, "bootstrap root at %s is out of memory for %d ranks",
              addr_str(&r->addr, a), m->n_ranks);
    return;
  }
  if (!root_shape_matches(r, s, m))
    return;
  /* Which entry: one of this root's ranks, or the first rank of the next group. */
  i = is_neighbor ? r->n_local : m->rank - r->first;
  if ((entry_rank(r, i) != m->rank) || (i < 0) || (i >= r->n_entries)) {
    root_fail(r, -1, ncclInvalidUsage,
              "rank %d (host %s pid %d) registered with the bootstrap root at %s (commIds[%d]) "
              "as %s, but that root serves ranks %d..%d%s: every rank must pass the same "
              "commIds in the same order",
              m->rank, m->host, m->pid, addr_str(&r->addr, a), r->root_idx,
              is_neighbor ? "the first rank of the next group" : "one of its ranks", r->first,
              r->first + r->n_local - 1, (r->n_roots > 1) ? " and the next group's first" : "");
    send_ctl(s, &r->fail_msg);
    mc_sock_close(s);
    return;
  }
  rr = &r->ranks[i];
  if (rr->is_registered) {
    root_fail(r, -1, ncclInvalidUsage,
              "rank %d joined twice: from host %s pid %d and from host %s pid %d: every process "
              "must pass a different rank",
              m->rank, rr->host, rr->pid, m->host, m->pid);
    send_ctl(s, &r->fail_msg);
    mc_sock_close(s);
    return;
  }
  rr->fd = s->fd;
  s->fd = -1;
  rr->peer = s->addr;
  rr->is_registered = true;
  rr->ring_addr = m->addr;
  rr->p2p = m->p2p;
  rr->pid = m->pid;
  snprintf(rr->host, sizeof(rr->host), "%s", m->host);
  r->n_registered++;
  if (r->n_registered == r->n_entries) {
    /* Everybody is here: free the port for the next communicator on the same
     * NCCL_COMM_ID. Before the last NEXT goes out: once it has, ranks may
     * finish this init and connect for the next one, and a connection left
     * in this listener's backlog would be reset when it closes. */
    if (r->frees_port)
      root_stop_listening(r);
    MC_INFO(MC_SUB_BOOTSTRAP, "Bootstrap root %s: all %d ranks joined in %.3f s",
            addr_str(&r->addr, a), r->n_entries, mc_time_sec() - r->t_start);
  }
  /* The entry before i learns i's address (the neighbor has no NEXT to get:
   * its own root tells it), and i learns the one after it; with the table,
   * every entry learns both once all are here. */
  if (root_has_table(r)) {
    if (r->n_registered == r->n_entries)
      send_all_next(r);
  } else if (r->n_roots == 1) {
    if (r->ranks[(i + r->n_entries - 1) % r->n_entries].is_registered)
      send_next(r, (i + r->n_entries - 1) % r->n_entries);
    if ((r->n_entries > 1) && r->ranks[(i + 1) % r->n_entries].is_registered)
      send_next(r, i);
  } else {
    if ((i > 0) && r->ranks[i - 1].is_registered)
      send_next(r, i - 1);
    if ((i < r->n_local) && r->ranks[i + 1].is_registered)
      send_next(r, i);
  }
}

static void root_missing_ranks(struct mc_boot_root *r)
{
  char missing[512];
  char joined[512];
  int *miss = calloc((size_t)r->n_entries, sizeof(int));
  int *got = calloc((size_t)r->n_entries, sizeof(int));
  char a[MC_SOCKADDR_STRLEN];
  char roots[96] = "";
  int n_miss = 0;
  int n_got = 0;

  if ((miss == NULL) || (got == NULL)) {
    free(miss);
    free(got);
    root_fail(r, -1, ncclTimeout, "ranks did not join the bootstrap root within %lld s",
              (long long)(r->timeout_ms / 1000));
    return;
  }
  for (int i = 0; i < r->n_entries; i++) {
    if (r->ranks[i].is_registered)
      got[n_got++] = entry_rank(r, i);
    else
      miss[n_miss++] = entry_rank(r, i);
  }
  mc_str_int_ranges(miss, n_miss, missing, sizeof(missing));
  mc_str_int_ranges(got, n_got, joined, sizeof(joined));
  if (r->n_roots > 1)
    snprintf(roots, sizeof(roots), " (commIds[%d] of %d, serving ranks %d..%d and rank %d)",
             r->root_idx, r->n_roots, r->first, r->first + r->n_local - 1,
             entry_rank(r, r->n_local));
  root_fail(r, -1, ncclTimeout,
            "rank%s %s of %d never joined the bootstrap root at %s%s within %lld s "
            "(MESHCCL_INIT_TIMEOUT); joined: %s",
            (n_miss > 1) ? "s" : "", missing, r->n_ranks, addr_str(&r->addr, a), roots,
            (long long)(r->timeout_ms / 1000), joined);
  free(miss);
  free(got);
}

/*
 * Reads what fd holds of the control message being received, never more
 * than that message: 1 complete (*m filled), 0 incomplete, -1 closed (or
 * reset), -2 not a control message (why says which).
 */
static int read_ctl(int fd, struct mc_boot_rx *rx, struct mc_boot_ctl *m, char *why,
                    size_t why_bytes)
{
  uint8_t buf[MC_BOOT_CTL_FRAME_BYTES];
  ssize_t n = recv(fd, buf, mc_boot_rx_want(rx), MSG_DONTWAIT);
  int st;

  if (n == 0) {
    snprintf(why, why_bytes, "closed the connection%s",
             (rx->got > 0) ? " in the middle of a message" : "");
    return -1;
  }
  if (n < 0) {
    if ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR))
      return 0;
    snprintf(why, why_bytes, "recv: %s", strerror(errno));
    return -1;
  }
  st = mc_boot_rx_feed(rx, buf, (size_t)n, m, why, why_bytes);
  return (st < 0) ? -2 : st;
}

static void drop_unreg(struct mc_boot_root *r, int i, const char *why)
{
  char from[MC_SOCKADDR_STRLEN];
  char at[MC_SOCKADDR_STRLEN];

  MC_INFO(MC_SUB_BOOTSTRAP, "Bootstrap root %s: dropped connection from %s: %s",
          addr_str(&r->addr, at), addr_str(&r->unreg[i].sock.addr, from), why);
  mc_sock_close(&r->unreg[i].sock);
  unreg_remove(r, i);
}

/* Data from an authenticated connection that has not registered yet. */
static void root_read_unreg(struct mc_boot_root *r, int i)
{
  struct root_conn *c = &r->unreg[i];
  struct mc_boot_ctl m;
  struct mc_sock s;
  char why[256];
  int st = read_ctl(c->sock.fd, &c->rx, &m, why, sizeof(why));

  if (st == 0)
    return;
  if ((st < 0) || !mc_boot_ctl_check_register(&m, why, sizeof(why))) {
    drop_unreg(r, i, why);
    return;
  }
  s = c->sock;
  c->sock.fd = -1;
  unreg_remove(r, i);
  root_register(r, &s, &m);
}

/* A message (or EOF) from registered rank i. */
static void root_read_rank(struct mc_boot_root *r, int i)
{
  struct root_rank *rr = &r->ranks[i];
  struct mc_boot_ctl m;
  char why[256];
  int st = read_ctl(rr->fd, &rr->rx, &m, why, sizeof(why));

  if (st == 0)
    return;
  if (st < 0) {
    rank_close(r, rr);
    if (st == -1)
      root_fail(r, i, ncclRemoteError,
                "rank %d (host %s pid %d) left before its init completed: the process exited, "
                "was killed, or aborted its communicator",
                entry_rank(r, i), rr->host, rr->pid);
    else
      root_fail(r, i, ncclRemoteError, "rank %d (host %s pid %d) broke the bootstrap protocol: %s",
                entry_rank(r, i), rr->host, rr->pid, why);
    return;
  }
  if (!mc_boot_ctl_check_from_rank(&m, why, sizeof(why))) {
    rank_close(r, rr);
    root_fail(r, i, ncclRemoteError, "rank %d (host %s pid %d) broke the bootstrap protocol: %s",
              entry_rank(r, i), rr->host, rr->pid, why);
    return;
  }
  rank_close(r, rr);
  if (m.kind == MC_BOOT_CTL_DONE) {
    rr->is_done = true;
    r->n_done++;
  } else {
    root_fail(r, i, ncclRemoteError, "rank %d (host %s pid %d) failed: %s", entry_rank(r, i),
              rr->host, rr->pid, m.text);
  }
}

/* Authenticated connections from the acceptor, until the unregistered list is full. */
static void root_take_new(struct mc_boot_root *r)
{
  struct mc_sock s;

  while (r->is_listening && (r->n_unreg < ROOT_MAX_UNREG) && mc_boot_acceptor_take(&r->acc, &s)) {
    struct root_conn *c = &r->unreg[r->n_unreg++];
    memset(c, 0, sizeof(*c));
    c->sock = s;
    c->since_ns = mc_time_ns();
  }
}

static void root_expire_unreg(struct mc_boot_root *r)
{
  uint64_t now = mc_time_ns();
  char why[128];

  for (int i = r->n_unreg - 1; i >= 0; i--) {
    uint64_t since = r->unreg[i].since_ns;
    if ((now > since) && (now - since > (uint64_t)ROOT_REG_WINDOW_MS * 1000000ull)) {
      snprintf(why, sizeof(why), "no registration within %d ms of authenticating (%zu bytes)",
               ROOT_REG_WINDOW_MS, r->unreg[i].rx.got);
      drop_unreg(r, i, why);
    }
  }
}

/* Fills the poll set; *n_acc_out gets the acceptor's share (at the start). */
static int root_poll(struct mc_boot_root *r, int *n_acc_out)
{
  int n = 0;

  if (r->is_listening)
    n = mc_boot_acceptor_pollfds(&r->acc, r->pfd);
  for (int i = 0; i < n; i++)
    r->owner[i] = -1;
  *n_acc_out = n;
  for (int i = 0; i < r->n_unreg; i++) {
    r->pfd[n].fd = r->unreg[i].sock.fd;
    r->pfd[n].events = POLLIN;
    r->pfd[n].revents = 0;
    r->owner[n++] = -2 - i;
  }
  for (int i = 0; (r->ranks != NULL) && (i < r->n_entries); i++) {
    if (r->ranks[i].fd < 0)
      continue;
    r->pfd[n].fd = r->ranks[i].fd;
    r->pfd[n].events = table_due(r, &r->ranks[i]) ? (POLLIN | POLLOUT) : POLLIN;
    r->pfd[n].revents = 0;
    r->owner[n++] = i;
  }
  return n;
}

static bool root_finished(struct mc_boot_root *r)
{
  if (mc_deadline_passed(r->end_dl))
    return true;
  if (r->is_failed) /* every entry registered was told (root_fail, root_register_late) */
    return (r->n_ranks > 0) && (r->n_registered == r->n_entries);
  return (r->n_ranks > 0) && (r->n_done == r->n_entries);
}

/* Reads what the rank connections polled (n entries, the acceptor's n_acc first) hold. */
static void root_read_polled(struct mc_boot_root *r, int n, int n_acc)
{
  /* Highest index first: a removal from unreg moves the last one into the
   * hole, and that one has been seen already. */
  for (int k = n - 1; k >= n_acc; k--) {
    int o = r->owner[k];
    if (r->pfd[k].revents == 0)
      continue;
    if (o >= 0) {
      if ((r->pfd[k].revents & POLLOUT) != 0)
        root_send_table(r, o);
      if (((r->pfd[k].revents & ~POLLOUT) != 0) && (r->ranks[o].fd >= 0))
        root_read_rank(r, o);
    } else if (-2 - o < r->n_unreg) {
      root_read_unreg(r, -2 - o);
    }
  }
}

static void root_step(struct mc_boot_root *r)
{
  int n_acc = 0;
  int n = root_poll(r, &n_acc);

  (void)poll(r->pfd, (nfds_t)n, ROOT_TICK_MS);
  root_read_polled(r, n, n_acc);
  root_expire_unreg(r);
  if (r->is_listening) {
    char why[MC_BOOT_TEXT_BYTES];
    mc_boot_acceptor_progress(&r->acc, r->pfd, n_acc);
    root_take_new(r);
    /* Ranks that cannot connect would wait until their timeout: fail the
     * job now. Closing the registered ranks' connections gives the fds back,
     * so the ranks still in the backlog are accepted and told as well. */
    if (!r->is_failed && mc_boot_acceptor_fd_error(&r->acc, why, sizeof(why)))
      root_fail(r, -1, ncclSystemError, "%s (in pid %d, which hosts the root: usually rank 0)", why,
                (int)getpid());
  }
  if (!r->is_failed && (r->n_ranks > 0) && (r->n_registered < r->n_entries) &&
      mc_deadline_passed(r->join_dl))
    root_missing_ranks(r);
  if (!r->is_failed && (__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE) != 0)) {
    /* The hosting rank may have sent why it failed just before it stopped
     * the root: that reason, not the stop, is what the ranks must hear. */
    n = root_poll(r, &n_acc);
    (void)poll(r->pfd, (nfds_t)n, 0);
    root_read_polled(r, n, n_acc);
  }
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

  mc_thread_set_name("NCCL BootstrapR");
  while (!root_finished(r)) {
    root_step(r);
    if (r->is_failed && (__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE) != 0))
      break;
  }
  if (!r->is_failed && (r->n_ranks > 0) && (r->n_done < r->n_entries))
    root_fail(r, -1, ncclTimeout, "bootstrap root gave up waiting for the ranks to finish init");
  for (int i = 0; (r->ranks != NULL) && (i < r->n_entries); i++)
    rank_close(r, &r->ranks[i]);
  while (r->n_unreg > 0) {
    mc_sock_close(&r->unreg[r->n_unreg - 1].sock);
    unreg_remove(r, r->n_unreg - 1);
  }
  root_stop_listening(r);
  free(r->pfd);
  r->pfd = NULL;
  free(r->owner);
  r->owner = NULL;
  free(r->ranks);
  r->ranks = NULL;
  free(r->table);
  r->table = NULL;
  free(r->unreg);
  r->unreg = NULL;
  __atomic_store_n(&r->finished, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* Starts a root listening on addr (port 0: ephemeral) and records it. With
 * busy_err, a port in use is not an error to report: ncclInvalidUsage is
 * returned silently with the reason in busy_err. */
static ncclResult_t root_start(const union mc_sockaddr *addr, uint64_t magic,
                               const uint8_t secret[MC_BOOT_SECRET_BYTES],
                               union mc_sockaddr *bound_out, char *busy_err, size_t busy_bytes)
{
  struct mc_boot_root *r = NULL;
  uint8_t key[MC_BOOT_KEY_BYTES];
  char a[MC_SOCKADDR_STRLEN];
  ncclResult_t res;
  int rc;

  MC_CHECK(mc_calloc(&r, 1));
  res = mc_calloc(&r->unreg, ROOT_MAX_UNREG);
  if (res != ncclSuccess) {
    free(r);
    return res;
  }
  mc_boot_auth_key(secret, key);
  res = mc_boot_acceptor_open(&r->acc, addr, magic, MC_SOCK_TYPE_ROOT, key, mc_boot_max_pending(),
                              ROOT_MAX_READY, "bootstrap root");
  mc_crypto_wipe(key, sizeof(key));
  if ((res == ncclInvalidUsage) && (busy_err != NULL)) {
    snprintf(busy_err, busy_bytes, "%s", r->acc.listener.sock.err);
    goto err_free;
  }
  if (res != ncclSuccess) {
    res = MC_FAIL(res, "bootstrap root: %s", r->acc.listener.sock.err);
    goto err_free;
  }
  r->is_listening = true;
  r->frees_port = (busy_err != NULL); /* mc_boot_root_start_comm_id */
  if (!root_grow_pfd(r, 0)) {
    res = MC_FAIL(ncclSystemError, "bootstrap root: out of memory");
    goto err_close;
  }
  r->accepting = 1;
  r->magic = magic;
  r->addr = r->acc.listener.sock.addr;
  r->n_ranks = -1;
  r->timeout_ms = mc_param_int(MC_P_INIT_TIMEOUT) * 1000;
  r->table_max_ranks = (int)mc_param_int(MC_P_BOOT_TABLE_MAX_RANKS);
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
  MC_INFO(MC_SUB_BOOTSTRAP, "Bootstrap root listening on %s (up to %d connections authenticating)",
          addr_str(&r->addr, a), r->acc.max_pend);
  *bound_out = r->addr;
  return ncclSuccess;

err_close:
  mc_boot_acceptor_close(&r->acc);
err_free:
  free(r->pfd);
  free(r->owner);
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
                                 const uint8_t secret[MC_BOOT_SECRET_BYTES],
                                 union mc_sockaddr *bound_out)
{
  pthread_mutex_lock(&roots_lock);
  reap_finished_locked();
  pthread_mutex_unlock(&roots_lock);
  return root_start(addr, magic, secret, bound_out, NULL, 0);
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
  ncclResult_t res;

  memcpy(&h, id->internal, sizeof(h));
  for (;;) {
    char busy[MC_SOCK_ERR_BYTES] = "";
    bool is_ours;

    /* Listen directly: a probe socket opened and closed first would reset
     * the connections ranks make to the port in between. */
    pthread_mutex_lock(&roots_lock);
    reap_finished_locked();
    pthread_mutex_unlock(&roots_lock);
    res = root_start(&h.addr, h.magic, h.secret, &bound, busy, sizeof(busy));
    if (res != ncclInvalidUsage)
      break;
    is_ours = stop_stale_roots_at(&h.addr);
    if (!is_ours || mc_deadline_passed(busy_dl)) {
      /* Another process listens there (bind: EADDRINUSE; the port is bound
       * with SO_REUSEADDR, so a closed socket in TIME_WAIT does not count).
       * Registering with whatever listens there would hand this rank's
       * identity to a process that may not be the job's: fail now. */
      res = MC_FAIL(ncclInvalidUsage,
                    "Bootstrap: rank 0 cannot start the bootstrap root on %s (NCCL_COMM_ID): port "
                    "%d is %s (%s). Give NCCL_COMM_ID a free port (`ss -ltnp 'sport = :%d'` "
                    "shows who holds it); another process started as rank 0 of this job also "
                    "takes it",
                    addr_str(&h.addr, a), mc_sockaddr_port(&h.addr),
                    is_ours ? "still held by a failed communicator of this process"
                            : "already in use by another process",
                    busy, mc_sockaddr_port(&h.addr));
      break;
    }
    if ((w->abort_flag != NULL) && (*w->abort_flag != 0))
      return ncclInternalError;
    mc_sleep_ms_abortable(50, w->abort_flag);
  }
  return res;
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
