/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NET transport and the rank's proxy thread (NCCL's transport/net.cc and
 * proxy.cc, host edition). Both ends keep MC_STEPS local slots. The proxy
 * thread moves them through the net:
 *   send: a step the rank committed (tail) is isend'ed from its slot; when
 *         the net reports it done, head advances and the slot is free again;
 *   recv: an irecv is posted into every free slot (step < head + MC_STEPS)
 *         that a running operation will consume (step < want);
 *         when one completes its size is recorded and tail advances.
 * A step's header (transport.h) travels in front of its data, in the same
 * message: each slot has MC_CONN_HDR_ROOM bytes of room before its data on
 * the sending side (a step the rank published as a pointer is copied into
 * its slot first: only the first step of an operation per connection has a
 * header), and the receive of the announced step (ctrl->hdr_step) takes the
 * header off into the control words, its data following it in the slot.
 * A net error marks the connection failed (ctrl->error), which the rank's
 * collective reports; the proxy then leaves that connection alone.
 * The progress watchdog (NCCL has none; docs/design/datapath.md, "Waits on the
 * wire") fails a connection in the same way when a collective waits on it
 * (a committed step the net has not taken, a posted receive not yet
 * filled) and nothing moved on it for MESHCCL_NET_TIMEOUT: no request
 * completed and, when the net can tell (get_progress), no byte moved.
 * The proxy sleeps on a condition variable while no collective runs
 * (mc_proxy_activity), so an idle communicator costs no CPU.
 * A plugin's call may block in the proxy thread (nccl-fastsocket's first
 * test() of a send waits until its connection was accepted, forever when
 * the peer never accepts it): the watchdog, which runs in that thread,
 * cannot fail anything then. So plugin calls are guarded (call_seq, odd
 * while one runs): the rank, while its collective waits, abandons the proxy
 * once it has been inside one call for MESHCCL_NET_TIMEOUT
 * (mc_proxy_wedged_check); the thread, should the call ever return, then
 * exits touching nothing, and the proxy, its connections' plugin comms and
 * slots and the net context are left to it (never freed): the rank moves
 * them into the proxy's `left` list and `left_net_ctx`, which nothing
 * reads; they keep that memory reachable from the thread, for a leak
 * checker and a debugger, instead of lost. A net whose calls never block
 * (calls_never_block: the built-in nets) is not guarded.
 */
#include "transport/tp_int.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "params.h"
#include "utils.h"

#define PROXY_SPINS     64         /* empty rounds before yielding the CPU (to the net's threads) */
#define LINK_TEXT_BYTES 168        /* a link as get_progress names it: two addresses and " -> " */
#define PROXY_WEDGED    UINT64_MAX /* call_seq once the rank abandoned the proxy */

/* What every net promises (net.h, NCCL's NCCL_NET_MAX_REQUESTS; v6 plugins
 * only 8): one connection is one comm with at most MC_STEPS requests
 * outstanding, and every irecv has n = 1 (<= any max_recvs). */
_Static_assert(MC_STEPS <= 8, "a comm may have at most 8 outstanding requests (v6 plugins)");
_Static_assert(MC_STEPS <= MC_NET_MAX_REQUESTS, "a comm may have at most 32 outstanding requests");

struct mc_net_conn {
  const struct mc_net_ops *net;
  void *listen_comm;
  void *comm; /* send or recv comm */
  void *mhandle;
  void *reqs[MC_STEPS];
  bool hdr[MC_STEPS]; /* receive: the request posted in that slot brings a header */
  uint64_t posted;    /* steps handed to the net */
  uint64_t done;      /* steps the net completed */
  bool failed;
  int dev;
  char how[80]; /* "<net>/<dev>", what the connection's log line shows */
  char handle[MC_NET_HANDLE_BYTES];
  /* The watchdog: since when nothing moved while waited on (0: not waited
   * on), the net's byte count then, whether a request completed since. */
  uint64_t wd_since_ns;
  uint64_t wd_bytes;
  bool wd_moved;
  uint64_t wd_timeout_ns;
  bool guarded; /* a plugin's calls, which may block (module comment) */
};

struct mc_proxy {
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  struct mc_conn **conns;
  int n_conns;
  int cap_conns;
  int active; /* collectives running (mc_proxy_activity) */
  bool stop;
  const volatile uint32_t *abort_flag;
  /* Guarded calls: call_seq is odd while the proxy thread is inside one (of
   * call_conn, call_what), PROXY_WEDGED once the rank abandoned the thread;
   * seen_seq / seen_ns are the rank's last look at it. */
  uint64_t call_seq;
  const struct mc_conn *call_conn;
  const char *call_what;
  uint64_t seen_seq;
  uint64_t seen_ns;
  bool guarded;      /* it has a plugin's connections: the rank does not help */
  uint64_t wedge_ns; /* MESHCCL_NET_TIMEOUT: how long one guarded call may last */
  /* Once abandoned: what was left to the thread (module comment), written
   * by the rank only. */
  struct mc_proxy_left *left;
  void *left_net_ctx;
};

/* A connection freed while its proxy was abandoned: its fields as they were. */
struct mc_proxy_left {
  struct mc_proxy_left *next;
  struct mc_conn conn;
};

/* ----------------------------------------------------------------- setup */

static ncclResult_t net_ready(struct mc_tp_comm *tc)
{
  if ((tc->net == NULL) || (tc->net_ctx == NULL) || (tc->net_ndev <= 0))
    return MC_FAIL(
        ncclInternalError, "NET%s%s: no initialised network for ranks on other hosts (%d devices)",
        (tc->net != NULL) ? "/" : "", (tc->net != NULL) ? tc->net->name : "", tc->net_ndev);
  return ncclSuccess;
}

static bool net_can_connect(struct mc_tp_comm *tc, const struct mc_tp_select *sel)
{
  (void)tc;
  (void)sel;
  return true; /* the last resort, as in NCCL */
}

/* How long a waited-on connection may move nothing: MESHCCL_NET_TIMEOUT;
 * a net's own failover (the Mesh net's new route after a link broke:
 * MESHCCL_MESH_LINK_TIMEOUT_MS + MESHCCL_MESH_ROUTE_TIMEOUT_MS) may take
 * its failover_ms, which the watchdog always leaves it. */
uint64_t mc_tp_net_timeout_ns(const struct mc_tp_comm *tc)
{
  int64_t ms = mc_param_int(MC_P_NET_TIMEOUT) * 1000;

  if ((tc->net != NULL) && (tc->net->failover_ms != NULL)) {
    int64_t failover_ms = tc->net->failover_ms();
    if (ms < failover_ms)
      ms = failover_ms;
  }
  return (uint64_t)ms * 1000000ull;
}

/* The device of the topology's choice when the net has it, else by channel. */
static int net_dev_of(const struct mc_tp_comm *tc, const struct mc_conn_req *q)
{
  if (q->has_net_dev && (q->net_dev >= 0) && (q->net_dev < tc->net_ndev))
    return q->net_dev;
  return q->channel % tc->net_ndev;
}

/* The slots' allocation: whole pages (aligned_alloc takes a multiple of its
 * alignment, and a slot with its header's room is not one). */
static size_t slots_alloc_bytes(const struct mc_conn *c)
{
  return (MC_STEPS * c->slot_bytes + 4095) & ~(size_t)4095;
}

/* The NET state of q's connection, on the device the topology chose. */
static ncclResult_t net_conn_new(struct mc_tp_comm *tc, struct mc_conn_req *q,
                                 struct mc_net_conn **nc_out)
{
  struct mc_net_conn *nc;

  MC_CHECK(net_ready(tc));
  MC_CHECK(mc_calloc(&nc, 1));
  q->conn->net = nc;
  nc->net = tc->net;
  nc->dev = net_dev_of(tc, q);
  nc->wd_timeout_ns = mc_tp_net_timeout_ns(tc);
  nc->guarded = !tc->net->calls_never_block;
  snprintf(nc->how, sizeof(nc->how), "%s/%d", tc->net->name, nc->dev);
  *nc_out = nc;
  return ncclSuccess;
}

static ncclResult_t net_recv_setup(struct mc_tp_comm *tc, struct mc_conn_req *q,
                                   struct mc_blob_r1 *r1)
{
  struct mc_conn *c = q->conn;
  struct mc_net_conn *nc;

  MC_CHECK(net_conn_new(tc, q, &nc));
  MC_CHECK(mc_tp_ctrl_alloc(c));
  c->ctrl->hdr_step = UINT64_MAX;
  /* Both ends' slots are a header's room larger than the data they hold. */
  c->slot_bytes += MC_CONN_HDR_ROOM;
  r1->bytes = c->slot_bytes;
  c->own_slots = aligned_alloc(4096, slots_alloc_bytes(c));
  if (c->own_slots == NULL)
    return MC_FAIL(ncclSystemError, "NET: allocating %zu bytes of receive slots",
                   MC_STEPS * c->slot_bytes);
  c->slots = c->own_slots;
  MC_CHECK(tc->net->listen(tc->net_ctx, nc->dev, r1->handle, &nc->listen_comm));
  r1->net_dev = nc->dev;
  return ncclSuccess;
}

static ncclResult_t net_send_setup(struct mc_tp_comm *tc, struct mc_conn_req *q,
                                   const struct mc_blob_r1 *r1, struct mc_blob_r2 *r2)
{
  struct mc_conn *c = q->conn;
  struct mc_net_conn *nc;

  (void)r2;
  MC_CHECK(net_conn_new(tc, q, &nc));
  memcpy(nc->handle, r1->handle, sizeof(nc->handle));
  c->slot_bytes = (size_t)r1->bytes;
  if (c->slot_bytes <= MC_CONN_HDR_ROOM)
    return MC_FAIL(ncclRemoteError, "NET: rank %d offered slots of %zu bytes", q->peer,
                   c->slot_bytes);
  MC_CHECK(mc_tp_ctrl_alloc(c));
  c->own_slots = aligned_alloc(4096, slots_alloc_bytes(c));
  if (c->own_slots == NULL)
    return MC_FAIL(ncclSystemError, "NET: allocating %zu bytes of send slots",
                   MC_STEPS * c->slot_bytes);
  /* The data of slot s starts MC_CONN_HDR_ROOM into its stride, after its
   * header's room: slot s spans [own + s * stride, own + (s + 1) * stride). */
  c->slots = (char *)c->own_slots + MC_CONN_HDR_ROOM;
  /* The rank may publish its own buffers instead of copying into a slot
   * only where registration is a no-op (a net that says can_send_user_ptr:
   * the socket and mesh nets, whose data path is the socket net's); the step completes
   * once the net sent it. Any other net (a plugin) sees only the slots,
   * registered once per connection: as NCCL, which copies user buffers into
   * its registered FIFO unless the user registered them. A cache of user
   * registrations keyed by address could not see free() and a new malloc()
   * at the same address, and a pinned RDMA registration would then send
   * stale pages. */
  c->can_send_ptr = tc->net->can_send_user_ptr;
  return ncclSuccess;
}

static ncclResult_t net_recv_connect(struct mc_conn_req *q, const struct mc_blob_r2 *r2)
{
  (void)q;
  (void)r2;
  return ncclSuccess;
}

static ncclResult_t net_progress(struct mc_tp_comm *tc, struct mc_conn *c, bool *done)
{
  struct mc_net_conn *nc = c->net;

  if (nc->comm == NULL) {
    if (c->is_send)
      MC_CHECK(tc->net->connect(tc->net_ctx, nc->dev, nc->handle, &nc->comm));
    else
      MC_CHECK(tc->net->accept(nc->listen_comm, &nc->comm));
  }
  *done = (nc->comm != NULL);
  if (*done && (nc->mhandle == NULL)) {
    MC_CHECK(tc->net->reg_mr(nc->comm, c->own_slots, MC_STEPS * c->slot_bytes, MC_NET_PTR_HOST,
                             &nc->mhandle));
    if (nc->listen_comm != NULL) {
      (void)tc->net->close_listen(nc->listen_comm);
      nc->listen_comm = NULL;
    }
  }
  return ncclSuccess;
}

static void net_free(struct mc_conn *c)
{
  struct mc_net_conn *nc = c->net;

  if (nc == NULL)
    return;
  if ((nc->mhandle != NULL) && (nc->comm != NULL))
    (void)nc->net->dereg_mr(nc->comm, nc->mhandle);
  if (nc->comm != NULL)
    (void)(c->is_send ? nc->net->close_send(nc->comm) : nc->net->close_recv(nc->comm));
  if (nc->listen_comm != NULL)
    (void)nc->net->close_listen(nc->listen_comm);
  free(nc);
  c->net = NULL;
}

/* ----------------------------------------------------------------- proxy */

/* Takes p->lock, or abandons the proxy thread instead (false): when it has
 * plugin connections, it may hold the lock inside a call that never
 * returns, and then the call is given up once it lasted MESHCCL_NET_TIMEOUT,
 * the communicator is aborted, or (stopping) the proxy is stopped. */
static bool proxy_lock(struct mc_proxy *p, bool stopping)
{
  uint64_t seen = 0;
  uint64_t since = 0;

  if (!__atomic_load_n(&p->guarded, __ATOMIC_RELAXED)) {
    pthread_mutex_lock(&p->lock);
    return true;
  }
  for (;;) {
    struct timespec ts;
    uint64_t seq;
    uint64_t now;
    bool aborted;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 10 * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    if (pthread_mutex_timedlock(&p->lock, &ts) == 0)
      return true;
    seq = __atomic_load_n(&p->call_seq, __ATOMIC_ACQUIRE);
    if (seq == PROXY_WEDGED)
      return false;
    if ((seq & 1u) == 0)
      continue; /* between calls: it lets go of the lock after its pass */
    now = mc_time_ns();
    if (seq != seen) {
      seen = seq;
      since = now;
    }
    aborted = (p->abort_flag != NULL) && __atomic_load_n(p->abort_flag, __ATOMIC_ACQUIRE);
    if ((stopping || aborted || (now - since >= p->wedge_ns)) &&
        __atomic_compare_exchange_n(&p->call_seq, &seq, PROXY_WEDGED, false, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE)) {
      MC_WARN("NET/%s: the proxy thread is blocked inside the plugin's %s() on the connection "
              "%s rank %d (%s): it is abandoned, and the communicator's connections are left "
              "to it",
              p->call_conn->net->net->name, p->call_what, p->call_conn->is_send ? "to" : "from",
              p->call_conn->peer,
              stopping ? "stopping the communicator"
                       : (aborted ? "aborted" : "MESHCCL_NET_TIMEOUT"));
      return false;
    }
  }
}

static void conn_fail(struct mc_conn *c, ncclResult_t res, const char *what)
{
  struct mc_net_conn *nc = c->net;

  nc->failed = true;
  mc_error_last_copy(c->error_text, sizeof(c->error_text));
  MC_WARN("NET/%s: %s %s rank %d failed: %s", nc->net->name, what, c->is_send ? "to" : "from",
          c->peer, c->error_text);
  mc_conn_set_error(c, res);
}

/* The watchdog's check after a pass over c that completed a step (moved:
 * a request posted is no sign of the peer) or not, with
 * the collective waiting on c (waiting). The clock is read only on passes
 * that moved nothing. Returns true when it failed the connection. */
static bool watchdog(struct mc_conn *c, bool moved, bool waiting)
{
  struct mc_net_conn *nc = c->net;
  uint64_t bytes = nc->wd_bytes;
  uint64_t now;
  char link[LINK_TEXT_BYTES];

  if (!waiting) {
    nc->wd_since_ns = 0;
    return false;
  }
  if (moved) {
    nc->wd_moved = true;
    return false;
  }
  now = mc_time_ns();
  if ((nc->net->get_progress != NULL) &&
      (nc->net->get_progress(nc->comm, &bytes, NULL, 0) != ncclSuccess))
    bytes = nc->wd_bytes;
  if ((nc->wd_since_ns == 0) || nc->wd_moved || (bytes != nc->wd_bytes)) {
    /* Waiting starts now, or something moved since the last look. */
    nc->wd_since_ns = now;
    nc->wd_bytes = bytes;
    nc->wd_moved = false;
    return false;
  }
  if (now - nc->wd_since_ns < nc->wd_timeout_ns)
    return false;
  link[0] = '\0';
  if (nc->net->get_progress != NULL)
    (void)nc->net->get_progress(nc->comm, &bytes, link, sizeof(link));
  nc->failed = true;
  snprintf(c->error_text, sizeof(c->error_text),
           "NET/%s: nothing moved %s rank %d%s%s%s for %.1f s while a collective waited on it "
           "(MESHCCL_NET_TIMEOUT=%lld s): the link or the host of rank %d is down, or rank %d "
           "stopped (it crashed, hangs, or has not called the collective); "
           "docs/TROUBLESHOOTING.md#net-timeout",
           nc->net->name, c->is_send ? "to" : "from", c->peer, (link[0] != '\0') ? " (link " : "",
           link, (link[0] != '\0') ? ")" : "", (double)(now - nc->wd_since_ns) * 1e-9,
           (long long)mc_param_int(MC_P_NET_TIMEOUT), c->peer, c->peer);
  MC_WARN("%s", c->error_text);
  mc_conn_set_error(c, ncclRemoteError);
  return true;
}

/* A guarded call of the proxy thread on c starts (call_seq becomes odd). */
static void call_enter(struct mc_proxy *p, const struct mc_conn *c, const char *what)
{
  if (!c->net->guarded)
    return;
  p->call_conn = c;
  p->call_what = what;
  /* Only this thread moves call_seq while it is even. */
  __atomic_store_n(&p->call_seq, __atomic_load_n(&p->call_seq, __ATOMIC_RELAXED) + 1,
                   __ATOMIC_RELEASE);
}

/* The call returned: unless the rank abandoned the thread meanwhile, in
 * which case nothing of the communicator may be touched any more. */
static void call_leave(struct mc_proxy *p, const struct mc_conn *c)
{
  uint64_t seq = __atomic_load_n(&p->call_seq, __ATOMIC_RELAXED);

  if (!c->net->guarded)
    return;
  if ((seq == PROXY_WEDGED) || !__atomic_compare_exchange_n(&p->call_seq, &seq, seq + 1, false,
                                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
    pthread_exit(NULL); /* p and the connections were left to this thread */
}

bool mc_proxy_wedged(const struct mc_proxy *p)
{
  return (p != NULL) && (__atomic_load_n(&p->call_seq, __ATOMIC_ACQUIRE) == PROXY_WEDGED);
}

bool mc_proxy_wedged_check(struct mc_proxy *p, uint64_t now_ns, uint64_t limit_ns, char *text,
                           size_t text_bytes)
{
  uint64_t seq;
  const struct mc_conn *c;

  if (p == NULL)
    return false;
  seq = __atomic_load_n(&p->call_seq, __ATOMIC_ACQUIRE);
  if (seq == PROXY_WEDGED)
    return true;
  if (((seq & 1u) == 0) || (seq != p->seen_seq)) {
    p->seen_seq = seq;
    p->seen_ns = now_ns;
    return false;
  }
  if ((now_ns - p->seen_ns < limit_ns) ||
      !__atomic_compare_exchange_n(&p->call_seq, &seq, PROXY_WEDGED, false, __ATOMIC_ACQ_REL,
                                   __ATOMIC_ACQUIRE))
    return false;
  c = p->call_conn;
  snprintf(text, text_bytes,
           "NET/%s: the proxy thread has been inside the plugin's %s() on the connection %s "
           "rank %d for %.1f s while a collective waited (MESHCCL_NET_TIMEOUT=%lld s): the "
           "plugin blocks (rank %d never accepted the connection, is down, or hangs); the "
           "thread is abandoned, and the communicator's connections are left to it; "
           "docs/TROUBLESHOOTING.md#net-timeout",
           c->net->net->name, p->call_what, c->is_send ? "to" : "from", c->peer,
           (double)(now_ns - p->seen_ns) * 1e-9, (long long)mc_param_int(MC_P_NET_TIMEOUT),
           c->peer);
  return true;
}

/* A receive completed in slot s with size bytes: its size, and its header
 * (in front of the data) when the step was announced with one. */
static void recv_done(struct mc_conn *c, unsigned s, size_t size)
{
  struct mc_net_conn *nc = c->net;
  char *slot = c->slots + (size_t)s * c->slot_bytes;
  bool known = (size != MC_NET_SIZE_UNKNOWN);

  c->ctrl->fifo[s].ptr = 0;
  c->ctrl->fifo[s].hdr_bytes = 0;
  c->ctrl->fifo[s].bytes = known ? size : UINT64_MAX;
  /* A message shorter than a header has none: the receiver reports the
   * missing signature. */
  if (!nc->hdr[s] || (known && (size < MC_CONN_HDR_BYTES)))
    return;
  memcpy(c->ctrl->fifo[s].hdr, slot, MC_CONN_HDR_BYTES);
  c->ctrl->fifo[s].hdr_bytes = MC_CONN_HDR_BYTES;
  c->ctrl->fifo[s].ptr = (uint64_t)(uintptr_t)(slot + MC_CONN_HDR_BYTES);
  if (known)
    c->ctrl->fifo[s].bytes = size - MC_CONN_HDR_BYTES;
}

/* The net call on c that returned res is over (call_leave); false when it
 * failed, the connection then failed doing `what` (send or receive). */
static bool call_ok(struct mc_proxy *p, struct mc_conn *c, ncclResult_t res, const char *what)
{
  call_leave(p, c);
  if (res != ncclSuccess) {
    conn_fail(c, res, what);
    return false;
  }
  return true;
}

/* Tests the request of step s (doing `what`): 1 when it is complete (the
 * step's request slot is free again; *bytes_out, unless NULL, what it
 * moved), 0 while it is not, -1 when the net failed (call_ok). */
static int test_step(struct mc_proxy *p, struct mc_conn *c, unsigned s, size_t *bytes_out,
                     const char *what)
{
  struct mc_net_conn *nc = c->net;
  ncclResult_t res;
  int done = 0;

  call_enter(p, c, "test");
  res = nc->net->test(nc->reqs[s], &done, bytes_out);
  if (!call_ok(p, c, res, what))
    return -1;
  if (!done)
    return 0;
  nc->reqs[s] = NULL;
  return 1;
}

/* One pass over a connection; returns MC_PROXY_* flags. */
static unsigned progress_send(struct mc_proxy *p, struct mc_conn *c)
{
  struct mc_net_conn *nc = c->net;
  uint64_t tail = __atomic_load_n(&c->ctrl->tail, __ATOMIC_ACQUIRE);
  unsigned moved = 0;
  ncclResult_t res;

  while ((nc->posted < tail) && (nc->posted < nc->done + MC_STEPS)) {
    unsigned s = (unsigned)(nc->posted % MC_STEPS);
    uint64_t ptr = c->ctrl->fifo[s].ptr;
    char *data = (ptr != 0) ? (char *)(uintptr_t)ptr : c->slots + (size_t)s * c->slot_bytes;
    size_t bytes = (size_t)c->ctrl->fifo[s].bytes;
    uint32_t hdr_bytes = c->ctrl->fifo[s].hdr_bytes;
    void *req = NULL;
    /* A published pointer (the rank's own buffer) goes out as it is; a step
     * with a header goes out from its slot, the header in front. */
    if (hdr_bytes != 0) {
      char *slot = c->slots + (size_t)s * c->slot_bytes;
      if (data != slot)
        memcpy(slot, data, bytes);
      data = slot - hdr_bytes;
      memcpy(data, c->ctrl->fifo[s].hdr, hdr_bytes);
      bytes += hdr_bytes;
    }
    call_enter(p, c, "isend");
    res = nc->net->isend(nc->comm, data, bytes, 0, nc->mhandle, &req);
    if (!call_ok(p, c, res, "send"))
      return 0; /* a failure is no progress: the rank's wait goes on (coll_exec.c) */
    if (req == NULL)
      break;
    nc->reqs[s] = req;
    nc->posted++;
    moved |= MC_PROXY_POSTED;
  }
  while (nc->done < nc->posted) {
    int r = test_step(p, c, (unsigned)(nc->done % MC_STEPS), NULL, "send");

    if (r < 0)
      return 0; /* a failure is no progress: the rank's wait goes on (coll_exec.c) */
    if (r == 0)
      break;
    nc->done++;
    __atomic_store_n(&c->ctrl->head, nc->done, __ATOMIC_RELEASE);
    moved |= MC_PROXY_DONE;
  }
  /* A failure the watchdog finds is no progress. */
  (void)watchdog(c, (moved & MC_PROXY_DONE) != 0, tail > nc->done);
  return moved;
}

static unsigned progress_recv(struct mc_proxy *p, struct mc_conn *c)
{
  struct mc_net_conn *nc = c->net;
  uint64_t head = __atomic_load_n(&c->ctrl->head, __ATOMIC_ACQUIRE);
  uint64_t want = __atomic_load_n(&c->ctrl->want, __ATOMIC_ACQUIRE);
  unsigned moved = 0;
  ncclResult_t res;

  while ((nc->posted < head + MC_STEPS) && (nc->posted < want)) {
    unsigned s = (unsigned)(nc->posted % MC_STEPS);
    void *data = c->slots + (size_t)s * c->slot_bytes;
    size_t size = c->slot_bytes;
    int tag = 0;
    void *req = NULL;
    call_enter(p, c, "irecv");
    res = nc->net->irecv(nc->comm, 1, &data, &size, &tag, &nc->mhandle, &req);
    if (!call_ok(p, c, res, "receive"))
      return 0; /* a failure is no progress: the rank's wait goes on (coll_exec.c) */
    if (req == NULL)
      break;
    nc->hdr[s] = (nc->posted == __atomic_load_n(&c->ctrl->hdr_step, __ATOMIC_RELAXED));
    nc->reqs[s] = req;
    nc->posted++;
    moved |= MC_PROXY_POSTED;
  }
  while (nc->done < nc->posted) {
    unsigned s = (unsigned)(nc->done % MC_STEPS);
    size_t size = 0;
    int r = test_step(p, c, s, &size, "receive");

    if (r < 0)
      return 0; /* a failure is no progress: the rank's wait goes on (coll_exec.c) */
    if (r == 0)
      break;
    recv_done(c, s, size);
    nc->done++;
    __atomic_store_n(&c->ctrl->tail, nc->done, __ATOMIC_RELEASE);
    moved |= MC_PROXY_DONE;
  }
  (void)watchdog(c, (moved & MC_PROXY_DONE) != 0, nc->posted > nc->done);
  return moved;
}

/* One pass over every connection; the caller holds the lock. */
static unsigned progress_all(struct mc_proxy *p)
{
  unsigned moved = 0;

  for (int i = 0; i < p->n_conns; i++) {
    struct mc_conn *c = p->conns[i];
    if (c->net->failed)
      continue;
    moved |= c->is_send ? progress_send(p, c) : progress_recv(p, c);
  }
  return moved;
}

unsigned mc_proxy_help(struct mc_proxy *p)
{
  unsigned moved;

  /* A plugin's call may block (module comment): only the proxy thread,
   * which the rank can abandon, makes them. */
  if ((p == NULL) || __atomic_load_n(&p->guarded, __ATOMIC_RELAXED) ||
      (pthread_mutex_trylock(&p->lock) != 0))
    return 0;
  moved = progress_all(p);
  pthread_mutex_unlock(&p->lock);
  return moved;
}

static void *proxy_main(void *arg)
{
  struct mc_proxy *p = arg;
  unsigned idle = 0;

  mc_thread_set_name("meshccl-proxy");
  pthread_mutex_lock(&p->lock);
  while (!p->stop) {
    unsigned moved = 0;
    if ((p->active == 0) || (p->n_conns == 0)) {
      idle = 0;
      pthread_cond_wait(&p->cond, &p->lock);
      continue;
    }
    moved = progress_all(p);
    if (moved) {
      idle = 0;
      pthread_mutex_unlock(&p->lock); /* let the rank add, remove or go idle */
      pthread_mutex_lock(&p->lock);
      continue;
    }
    /* While a collective runs the proxy never sleeps (a timer sleep costs
     * tens of microseconds per step); it yields, so that the rank and the
     * net's threads get the CPU they need. */
    idle++;
    pthread_mutex_unlock(&p->lock);
    if (idle > PROXY_SPINS)
      sched_yield();
    pthread_mutex_lock(&p->lock);
  }
  pthread_mutex_unlock(&p->lock);
  return NULL;
}

static ncclResult_t proxy_add(struct mc_tp_comm *tc, struct mc_conn *c)
{
  struct mc_proxy *p = tc->proxy;
  int err;

  if (p == NULL) {
    MC_CHECK(mc_calloc(&p, 1));
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->abort_flag = tc->abort_flag;
    p->wedge_ns = mc_tp_net_timeout_ns(tc);
    err = pthread_create(&p->thread, NULL, proxy_main, p);
    if (err != 0) {
      pthread_mutex_destroy(&p->lock);
      pthread_cond_destroy(&p->cond);
      free(p);
      return MC_FAIL(ncclSystemError, "NET: starting the proxy thread: %s", strerror(err));
    }
    tc->proxy = p;
  }
  if (mc_proxy_wedged(p) || !proxy_lock(p, false))
    return MC_FAIL(ncclRemoteError,
                   "NET: rank %d: the proxy thread was abandoned inside a plugin call (said "
                   "before); the communicator cannot make connections any more",
                   c->peer);
  if (p->n_conns == p->cap_conns) {
    int cap = (p->cap_conns == 0) ? 8 : 2 * p->cap_conns;
    struct mc_conn **n = realloc(p->conns, (size_t)cap * sizeof(*n));
    if (n == NULL) {
      pthread_mutex_unlock(&p->lock);
      return MC_FAIL(ncclSystemError, "NET: out of memory for the proxy's connections");
    }
    p->conns = n;
    p->cap_conns = cap;
  }
  p->conns[p->n_conns++] = c;
  if (c->net->guarded)
    __atomic_store_n(&p->guarded, true, __ATOMIC_RELAXED);
  c->proxy = p;
  pthread_mutex_unlock(&p->lock);
  return ncclSuccess;
}

void mc_proxy_remove(struct mc_proxy *p, struct mc_conn *c)
{
  if (mc_proxy_wedged(p) || !proxy_lock(p, false))
    return; /* its thread holds the lock inside a plugin call */
  for (int i = 0; i < p->n_conns; i++) {
    if (p->conns[i] == c) {
      p->conns[i] = p->conns[--p->n_conns];
      break;
    }
  }
  c->proxy = NULL;
  pthread_mutex_unlock(&p->lock);
}

void mc_proxy_activity(struct mc_proxy *p, int delta)
{
  if ((p == NULL) || mc_proxy_wedged(p) || !proxy_lock(p, false))
    return;
  p->active += delta;
  if (p->active > 0)
    pthread_cond_signal(&p->cond);
  pthread_mutex_unlock(&p->lock);
}

void mc_proxy_leave_conn(struct mc_proxy *p, const struct mc_conn *c)
{
  struct mc_proxy_left *l = malloc(sizeof(*l));

  if (l == NULL)
    return; /* then it is lost rather than left: it is never freed either way */
  l->conn = *c;
  l->next = p->left;
  p->left = l;
}

bool mc_proxy_stop(struct mc_proxy *p, void *net_ctx)
{
  if (p == NULL)
    return false;
  if (mc_proxy_wedged(p) || !proxy_lock(p, true)) {
    /* Blocked in a plugin call: it and what it may touch are never freed. */
    p->left_net_ctx = net_ctx;
    pthread_detach(p->thread);
    return true;
  }
  p->stop = true;
  pthread_cond_signal(&p->cond);
  pthread_mutex_unlock(&p->lock);
  pthread_join(p->thread, NULL);
  for (int i = 0; i < p->n_conns; i++)
    p->conns[i]->proxy = NULL;
  free(p->conns);
  pthread_mutex_destroy(&p->lock);
  pthread_cond_destroy(&p->cond);
  free(p);
  return false;
}

/* NCCL's "via NET/<net>/<dev>": the device is the one the topology chose. */
static const char *net_how(const struct mc_tp_comm *tc, const struct mc_conn *c)
{
  const struct mc_net_conn *nc = c->net;

  if ((nc != NULL) && (nc->how[0] != '\0'))
    return nc->how;
  return (tc->net != NULL) ? tc->net->name : "";
}

const struct mc_transport mc_tp_net = {
    .kind = MC_TOPO_TRANSPORT_NET,
    .name = "NET",
    .can_connect = net_can_connect,
    .recv_setup = net_recv_setup,
    .send_setup = net_send_setup,
    .recv_connect = net_recv_connect,
    .progress = net_progress,
    .start = proxy_add,
    .free = net_free,
    .how = net_how,
};
