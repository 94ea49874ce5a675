/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connection setup (NCCL's ncclTransportP2pSetup, host edition) and the P2P
 * and SHM transports.
 *
 * Two rounds over the bootstrap, each a batch of non-blocking sends followed
 * by the receives, so that any set of connections between any ranks is made
 * without deadlock:
 *   R1  receiver -> sender: the receiver chooses the transport (P2P ▸ SHM ▸
 *       NET, topo's mc_topo_transport_select on its own system), creates what
 *       lives on its side (SHM segment, P2P counters, NET listener) and
 *       describes it;
 *   R2  sender -> receiver: the sender has mapped / allocated / started
 *       connecting; P2P sends the address of its slots. The receiver then
 *       unlinks the SHM segment.
 * NET connections then finish their connect/accept and go to the proxy,
 * within the set-up deadline (the communicator's init deadline, or the
 * bootstrap's operation timeout after init), and only while the bootstrap
 * root has not announced that another rank failed: NCCL's
 * ncclTransportP2pSetup waits for them with no bound. After init (a
 * collective's connections at first use) they also fail once none
 * completed for MESHCCL_NET_TIMEOUT, as the collective's other waits on
 * another host do.
 */
#include "transport/tp_int.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "check.h"
#include "log.h"
#include "params.h"
#include "topo/topo.h"
#include "utils.h"

#define CONNECT_WAIT_US 100 /* sleep between rounds of NET connect progress */
#define NOTICE_EVERY_MS 10  /* how often those rounds look for the root's failure notice */

#define MC_LAST_ERROR_BYTES_TP 1024

_Static_assert(sizeof(struct mc_blob_r1) <= MC_CONN_INFO_BYTES, "connect blob too large");

ncclResult_t mc_conn_read(const struct mc_conn *c, void *dst, const char *src, size_t bytes)
{
  if (!mc_conn_recv_remote(c)) {
    memcpy(dst, src, bytes);
    return ncclSuccess;
  }
  while (bytes > 0) {
    struct iovec local = {.iov_base = dst, .iov_len = bytes};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)src, .iov_len = bytes};
    ssize_t got = process_vm_readv(c->peer_pid, &local, 1, &remote, 1, 0);
    if (got <= 0) {
      if ((got < 0) && (errno == EINTR))
        continue;
      return MC_FAIL(ncclRemoteError,
                     "P2P/CMA: reading %zu bytes of rank %d (pid %d) failed: %s (the process "
                     "exited?)",
                     bytes, c->peer, c->peer_pid, (got < 0) ? strerror(errno) : "nothing read");
    }
    dst = (char *)dst + got;
    src += got;
    bytes -= (size_t)got;
  }
  return ncclSuccess;
}

/* NCCL's order: the first transport that can carry the connection. */
static const struct mc_transport *const transports[] = {&mc_tp_p2p, &mc_tp_shm, &mc_tp_net};

ncclResult_t mc_tp_ctrl_alloc(struct mc_conn *c)
{
  struct mc_conn_ctrl *ctrl = aligned_alloc(_Alignof(struct mc_conn_ctrl), sizeof(*ctrl));

  if (ctrl == NULL)
    return MC_FAIL(ncclSystemError, "transport: allocating %zu bytes of counters for rank %d",
                   sizeof(*ctrl), c->peer);
  memset(ctrl, 0, sizeof(*ctrl));
  c->own_ctrl = ctrl;
  c->ctrl = ctrl;
  return ncclSuccess;
}

struct mc_tp_shared {
  int refs;    /* ends that hold it (atomic) */
  void *slots; /* the sender's, freed with the counters */
  struct mc_conn_ctrl ctrl;
};

ncclResult_t mc_tp_shared_alloc(struct mc_conn *c)
{
  struct mc_tp_shared *sh = aligned_alloc(_Alignof(struct mc_tp_shared), sizeof(*sh));

  if (sh == NULL)
    return MC_FAIL(ncclSystemError, "transport: allocating %zu bytes of counters for rank %d",
                   sizeof(*sh), c->peer);
  memset(sh, 0, sizeof(*sh));
  sh->refs = 1;
  c->shared = sh;
  c->ctrl = &sh->ctrl;
  return ncclSuccess;
}

void mc_tp_shared_join(struct mc_conn *c, struct mc_conn_ctrl *ctrl)
{
  struct mc_tp_shared *sh =
      (struct mc_tp_shared *)(void *)((char *)ctrl - offsetof(struct mc_tp_shared, ctrl));

  __atomic_add_fetch(&sh->refs, 1, __ATOMIC_ACQ_REL);
  sh->slots = c->own_slots; /* before the receiver learns of them (connect's next round) */
  c->own_slots = NULL;
  c->shared = sh;
  c->ctrl = ctrl;
}

/* This end is gone: the other one, still polling, must not wait for it. */
static void shared_put(struct mc_conn *c)
{
  struct mc_tp_shared *sh = c->shared;

  if (mc_conn_error(c) == 0)
    mc_conn_set_error(c, ncclRemoteError);
  if (__atomic_sub_fetch(&sh->refs, 1, __ATOMIC_ACQ_REL) == 0) {
    free(sh->slots);
    free(sh);
  }
}

void mc_conn_send_withdraw(struct mc_conn *c)
{
  struct mc_deadline dl;

  if ((c == NULL) || (c->ctrl == NULL) || !c->is_send || (c->kind != MC_TOPO_TRANSPORT_P2P) ||
      !c->can_send_ptr || (c->peer_pid != 0) || mc_conn_send_drained(c))
    return;
  __atomic_store_n(&c->ctrl->withdrawn, 1, __ATOMIC_SEQ_CST);
  dl = mc_deadline_in_ms(MC_WITHDRAW_WAIT_MS);
  while (__atomic_load_n(&c->ctrl->reader, __ATOMIC_SEQ_CST) != 0) {
    if (mc_deadline_passed(dl)) {
      MC_WARN("P2P: rank %d of this process still reads a buffer of this rank (channel %d) %d ms "
              "after this rank's collective failed: freeing that buffer now may crash it",
              c->peer, c->channel, MC_WITHDRAW_WAIT_MS);
      return;
    }
    sched_yield();
  }
}

/* An abort notice in a connection's error detail. */
#define ABORT_MAGIC "meshccl abort"
struct abort_notice {
  char magic[16];
  int32_t rank;
};

void mc_conn_post_abort(struct mc_conn *c, int rank)
{
  struct abort_notice n;

  if ((c == NULL) || (c->ctrl == NULL) || (c->kind == MC_TOPO_TRANSPORT_NET))
    return;
  memset(&n, 0, sizeof(n));
  snprintf(n.magic, sizeof(n.magic), "%s", ABORT_MAGIC);
  n.rank = rank;
  mc_conn_set_error_info(c, ncclRemoteError, &n, sizeof(n));
}

int mc_conn_abort_rank(const struct mc_conn *c)
{
  struct abort_notice n;
  char info[MC_CONN_ERR_INFO_BYTES];

  if (mc_conn_error_info(c, info) != sizeof(n))
    return -1;
  memcpy(&n, info, sizeof(n));
  if (strncmp(n.magic, ABORT_MAGIC, sizeof(n.magic)) != 0)
    return -1;
  return n.rank;
}

/* What the receiver knows when it chooses: topo's decision (with its reason)
 * and where the peer runs. */
static void select_for(struct mc_tp_comm *tc, int peer, struct mc_tp_select *sel,
                       struct mc_topo_transport_choice *ch)
{
  const struct mc_tp_peer *me = &tc->peers[tc->rank];
  const struct mc_tp_peer *p = &tc->peers[peer];

  memset(sel, 0, sizeof(*sel));
  memset(ch, 0, sizeof(*ch));
  sel->peer = peer;
  sel->same_host = (p->host_hash == me->host_hash);
  sel->same_process = mc_tp_peer_is_this_process(tc, peer);
  sel->topo_choice = MC_TOPO_TRANSPORT_NET;
  ch->transport = MC_TOPO_TRANSPORT_NET;
  snprintf(ch->reason, sizeof(ch->reason), "NET: %s",
           sel->same_host ? "no topology" : "different host");
  if (sel->same_host && (tc->topo != NULL)) {
    struct mc_topo_paths_opts opts;
    mc_topo_paths_opts_from_params(&opts);
    if (mc_topo_transport_select(tc->topo, &opts, tc->rank, peer, true, p->shm_dev == me->shm_dev,
                                 ch) == ncclSuccess)
      sel->topo_choice = ch->transport;
  }
}

/* The receiver's choice for a connection from peer (topo's decision, then
 * each transport's own conditions). */
static const struct mc_transport *choose(struct mc_tp_comm *tc, int peer)
{
  struct mc_tp_select sel;
  struct mc_topo_transport_choice ch;

  select_for(tc, peer, &sel, &ch);
  for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
    if (transports[i]->can_connect(tc, &sel))
      return transports[i];
  return &mc_tp_net;
}

static const struct mc_transport *by_kind(uint32_t kind)
{
  for (size_t i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
    if ((uint32_t)transports[i]->kind == kind)
      return transports[i];
  return NULL;
}

/* --------------------------------------------------------------- round 1 */

static ncclResult_t recv_setup(struct mc_tp_comm *tc, struct mc_conn_req *q, struct mc_blob_r1 *r1)
{
  struct mc_conn *c = q->conn;

  memset(r1, 0, sizeof(*r1));
  c->tp = choose(tc, q->peer);
  c->kind = c->tp->kind;
  c->slot_bytes = (q->slot_bytes != 0) ? q->slot_bytes : tc->slot_bytes;
  r1->kind = (uint32_t)c->kind;
  r1->bytes = c->slot_bytes;
  r1->same_process = mc_tp_peer_is_this_process(tc, q->peer);
  return c->tp->recv_setup(tc, q, r1);
}

/* --------------------------------------------------------------- round 2 */

static ncclResult_t send_setup(struct mc_tp_comm *tc, struct mc_conn_req *q,
                               const struct mc_blob_r1 *r1, struct mc_blob_r2 *r2)
{
  struct mc_conn *c = q->conn;
  struct mc_tp_blob_view v;

  memset(r2, 0, sizeof(*r2));
  mc_tp_blob_view_make(tc, q, &v);
  MC_CHECK(mc_tp_blob_r1_check(&v, r1));
  c->tp = by_kind(r1->kind);
  if (c->tp == NULL)
    return MC_FAIL(ncclInternalError, "transport: no table for transport %u", r1->kind);
  c->kind = c->tp->kind;
  r2->kind = r1->kind;
  MC_CHECK(c->tp->send_setup(tc, q, r1, r2));
  r2->ok = 1;
  return ncclSuccess;
}

static ncclResult_t recv_finish(struct mc_tp_comm *tc, struct mc_conn_req *q,
                                const struct mc_blob_r2 *r2)
{
  struct mc_conn *c = q->conn;
  struct mc_tp_blob_view v;

  mc_tp_blob_view_make(tc, q, &v);
  MC_CHECK(mc_tp_blob_r2_check(&v, (uint32_t)c->kind, r2));
  MC_CHECK(c->tp->recv_connect(q, r2));
  /* Both sides have it mapped: nothing is left in /dev/shm from here on. */
  mc_shm_unlink(c->shm_name);
  c->shm_name[0] = '\0';
  return ncclSuccess;
}

/*
 * The connection's line, in the shape of NCCL's (p2p.cc p2pSendSetup, shm.cc
 * shmSendSetup, net.cc sendSetup / recvSetup), naming the transport the
 * connection really uses: P2P and SHM are logged by the sender, NET by both
 * ends ("[send]", "[receive]"), so each connection has one line per end that
 * sets it up. SHM's line carries the connection index too (NCCL's has none),
 * so that the ring's and the point-to-point connection of a channel are told
 * apart. The device in brackets is the rank's, as meshccl has no GPU.
 */
static void log_conn(const struct mc_tp_comm *tc, const struct mc_conn_req *q)
{
  const struct mc_conn *c = q->conn;
  const char *how = c->tp->how(tc, c);

  if (c->kind == MC_TOPO_TRANSPORT_NET) {
    if (q->is_send)
      MC_INFO(MC_SUB_INIT | MC_SUB_NET, "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s",
              q->channel, q->conn_index, tc->rank, tc->rank, q->peer, q->peer, how);
    else
      MC_INFO(MC_SUB_INIT | MC_SUB_NET, "Channel %02d/%d : %d[%d] -> %d[%d] [receive] via NET/%s",
              q->channel, q->conn_index, q->peer, q->peer, tc->rank, tc->rank, how);
    return;
  }
  if (!q->is_send)
    return;
  MC_INFO(MC_SUB_INIT | ((c->kind == MC_TOPO_TRANSPORT_SHM) ? MC_SUB_SHM : MC_SUB_P2P),
          "Channel %02d/%d : %d[%d] -> %d[%d] via %s/%s", q->channel, q->conn_index, tc->rank,
          tc->rank, q->peer, q->peer, c->tp->name, how);
}

/*
 * Why the receiver chose the transport of a connection from a peer: one
 * line per peer (for its first connection, channel 0's ring or tree one),
 * saying the transport really used, the topology's reason (NCCL's
 * selectTransport order, topo_transport.c) and, when the transport itself
 * declined what the topology allowed, why.
 */
static const char *decline_why(struct mc_tp_comm *tc, const struct mc_tp_select *sel,
                               const struct mc_topo_transport_choice *ch)
{
  struct mc_cma_figures f;
  const char *why = NULL;

  if ((ch->transport != MC_TOPO_TRANSPORT_P2P) || sel->same_process ||
      !tc->peers[sel->peer].same_pidns)
    return "the transport declined it";
  if (mc_param_int(MC_P_P2P_CMA) == 0)
    return "P2P between processes needs MESHCCL_P2P_CMA=1";
  if (!mc_tp_cma_by_probe())
    return "the transport declined it";
  mc_tp_cma_probe(tc->slot_bytes, &f, &why);
  if (why != NULL)
    return "P2P between processes: cross-memory attach could not be measured "
           "(NCCL_DEBUG_SUBSYS=TUNING says why)";
  if (mc_tp_decide_cma(&f, tc->slot_bytes) == MC_CMA_NEVER)
    return "P2P between processes: this host's probe found the FIFO faster than cross-memory "
           "attach at every step size (NCCL_DEBUG_SUBSYS=TUNING; MESHCCL_P2P_CMA=1 forces it)";
  return "the transport declined it";
}

static void log_choice(struct mc_tp_comm *tc, const struct mc_conn_req *q)
{
  struct mc_tp_select sel;
  struct mc_topo_transport_choice ch;
  const char *used = q->conn->tp->name;
  const char *colon;

  if ((q->is_send) || (q->channel != 0) || (q->conn_index != 0) ||
      !MC_INFO_ON(MC_SUB_INIT | MC_SUB_P2P | MC_SUB_SHM | MC_SUB_NET))
    return;
  select_for(tc, q->peer, &sel, &ch);
  colon = strstr(ch.reason, ": ");
  if (ch.transport == q->conn->kind) {
    MC_INFO(MC_SUB_INIT | MC_SUB_P2P | MC_SUB_SHM | MC_SUB_NET,
            "Transport: rank %d -> rank %d uses %s (rank %d decides: %s)", q->peer, tc->rank, used,
            tc->rank, (colon != NULL) ? colon + 2 : ch.reason);
    return;
  }
  MC_INFO(MC_SUB_INIT | MC_SUB_P2P | MC_SUB_SHM | MC_SUB_NET,
          "Transport: rank %d -> rank %d uses %s (rank %d decides: the topology allows %s, %s; "
          "%s%s)",
          q->peer, tc->rank, used, tc->rank, mc_topo_transport_str(ch.transport),
          (colon != NULL) ? colon + 2 : ch.reason, decline_why(tc, &sel, &ch),
          ((q->conn->kind == MC_TOPO_TRANSPORT_NET) && mc_param_int(MC_P_SHM_DISABLE))
              ? ", and NCCL_SHM_DISABLE=1 rules out SHM"
              : "");
}

/*
 * The rounds. A local setup failure does not stop this rank's part of the
 * protocol: it still sends its blobs (marked failed), so that no peer waits
 * for them and every rank learns of the failure through its connections;
 * bootstrap failures (a peer died: the bootstrap names it) end the rounds at
 * once. The first local failure is returned once the rounds are over.
 */
struct round_state {
  ncclResult_t local; /* first local setup failure */
  char why[MC_LAST_ERROR_BYTES_TP];
};

static void note_local(struct round_state *st, ncclResult_t res)
{
  if (st->local == ncclSuccess) {
    st->local = res;
    mc_error_last_copy(st->why, sizeof(st->why));
  }
}

typedef ncclResult_t (*round_fn)(struct mc_tp_comm *tc, struct mc_conn_req *q,
                                 struct round_state *st);

static ncclResult_t r1_post(struct mc_tp_comm *tc, struct mc_conn_req *q, struct round_state *st)
{
  struct mc_blob_r1 r1;
  ncclResult_t res = recv_setup(tc, q, &r1);

  if (res != ncclSuccess) {
    note_local(st, res);
    memset(&r1, 0, sizeof(r1));
    r1.kind = MC_TP_BLOB_FAILED;
  }
  return mc_boot_send(tc->boot, q->peer, MC_TP_TAG_R1(q->channel, q->conn_index), &r1, sizeof(r1));
}

static ncclResult_t r2_post(struct mc_tp_comm *tc, struct mc_conn_req *q, struct round_state *st)
{
  struct mc_blob_r1 r1;
  struct mc_blob_r2 r2;
  ncclResult_t res;

  MC_CHECK(
      mc_boot_recv(tc->boot, q->peer, MC_TP_TAG_R1(q->channel, q->conn_index), &r1, sizeof(r1)));
  if (r1.kind == MC_TP_BLOB_FAILED) {
    res = MC_FAIL(ncclRemoteError, "transport: rank %d could not set up its end of the connection",
                  q->peer);
  } else {
    res = send_setup(tc, q, &r1, &r2);
  }
  if (res != ncclSuccess) {
    note_local(st, res);
    memset(&r2, 0, sizeof(r2));
    r2.kind = MC_TP_BLOB_FAILED;
  }
  return mc_boot_send(tc->boot, q->peer, MC_TP_TAG_R2(q->channel, q->conn_index), &r2, sizeof(r2));
}

static ncclResult_t r2_take(struct mc_tp_comm *tc, struct mc_conn_req *q, struct round_state *st)
{
  struct mc_blob_r2 r2;
  ncclResult_t res;

  MC_CHECK(
      mc_boot_recv(tc->boot, q->peer, MC_TP_TAG_R2(q->channel, q->conn_index), &r2, sizeof(r2)));
  if (st->local != ncclSuccess)
    return ncclSuccess; /* failing anyway: the conn is freed below */
  if ((res = recv_finish(tc, q, &r2)) != ncclSuccess)
    note_local(st, res);
  return ncclSuccess;
}

static ncclResult_t run_round(struct mc_tp_set *sets, int n_sets, bool sends, round_fn fn,
                              struct round_state *st)
{
  for (int s = 0; s < n_sets; s++)
    for (int i = 0; i < sets[s].n; i++)
      if (sets[s].reqs[i].is_send == sends)
        MC_CHECK(fn(sets[s].tc, &sets[s].reqs[i], st));
  return ncclSuccess;
}

/* The set-up deadline of the sets: the earliest their communicators have. */
static struct mc_deadline setup_deadline(const struct mc_tp_set *sets, int n_sets)
{
  struct mc_deadline dl = mc_deadline_in_ms(mc_boot_op_timeout_ms());

  for (int s = 0; s < n_sets; s++)
    if (sets[s].tc->has_setup_dl)
      dl = mc_deadline_min(dl, sets[s].tc->setup_dl);
  return dl;
}

/* The deadline passed with n_pending connections unfinished, q the first. */
static ncclResult_t finish_timeout(const struct mc_tp_comm *tc, const struct mc_conn_req *q,
                                   struct mc_deadline dl, int n_pending)
{
  return MC_FAIL(ncclTimeout,
                 "transport: rank %d: the %s connection %s rank %d (channel %d) was not "
                 "established within %lld ms (%d connection%s pending; %s): rank %d is "
                 "unreachable from this rank, hangs, or failed without telling the bootstrap root "
                 "(docs/TROUBLESHOOTING.md#setup-timeout)",
                 tc->rank, mc_topo_transport_str(q->conn->kind), q->is_send ? "to" : "from",
                 q->peer, q->channel, (long long)dl.span_ms, n_pending, (n_pending == 1) ? "" : "s",
                 tc->has_setup_dl ? "MESHCCL_INIT_TIMEOUT" : "MESHCCL_BOOTSTRAP_TIMEOUT", q->peer);
}

/* Connections a collective makes at first use (after init: no set-up
 * deadline) belong to that call, whose waits on another host are bounded by
 * MESHCCL_NET_TIMEOUT. Their peer's end may complete first (it only needs
 * its own bytes to leave; this end needs them to arrive), and the peer then
 * runs the collective and fails after that long (tp_net.c's watchdog): this
 * end never completes, and nothing else would end its wait before the
 * bootstrap's timeout. So no connection completing for that long fails the
 * call too. Returns the bound (the longest of the sets'), 0 for init's. */
static uint64_t stall_limit_ns(const struct mc_tp_set *sets, int n_sets)
{
  uint64_t limit = 0;

  for (int s = 0; s < n_sets; s++) {
    uint64_t ns;
    if (sets[s].tc->has_setup_dl)
      return 0;
    ns = mc_tp_net_timeout_ns(sets[s].tc);
    limit = (ns > limit) ? ns : limit;
  }
  return limit;
}

/* No connection completed for stalled_ns with n_pending still pending, q
 * the first: a collective's failure, as the watchdog reports a stalled one. */
static ncclResult_t finish_stalled(const struct mc_tp_comm *tc, const struct mc_conn_req *q,
                                   uint64_t stalled_ns, int n_pending)
{
  return MC_FAIL(ncclRemoteError,
                 "transport: rank %d: the %s connection %s rank %d (channel %d) failed: not "
                 "established after %.1f s while a collective waited on it (%d connection%s "
                 "pending; MESHCCL_NET_TIMEOUT=%lld s): rank %d is unreachable from this rank, "
                 "hangs, or completed its end of the connection and failed since; "
                 "docs/TROUBLESHOOTING.md#net-timeout",
                 tc->rank, mc_topo_transport_str(q->conn->kind), q->is_send ? "to" : "from",
                 q->peer, q->channel, (double)stalled_ns * 1e-9, n_pending,
                 (n_pending == 1) ? "" : "s", (long long)mc_param_int(MC_P_NET_TIMEOUT), q->peer);
}

static ncclResult_t finish(struct mc_tp_set *sets, int n_sets)
{
  struct mc_deadline dl = setup_deadline(sets, n_sets);
  uint64_t stall_ns = stall_limit_ns(sets, n_sets);
  uint64_t moved_ns = mc_time_ns(); /* when a connection last completed */
  int last_pending = -1;
  uint64_t next_notice_ns = 0;
  bool pending = true;

  while (pending) {
    const struct mc_tp_comm *first_tc = NULL;
    const struct mc_conn_req *first = NULL;
    int n_pending = 0;
    pending = false;
    /* Every send's connect before any receive's accept (NCCL's
     * ncclTransportP2pSetup connects its sends first too): a plugin's accept
     * may block until the peer has called connect (nccl-fastsocket's does),
     * and the peer may be blocked in its own accept. */
    for (int dir = 0; dir < 2; dir++) {
      for (int s = 0; s < n_sets; s++) {
        for (int i = 0; i < sets[s].n; i++) {
          bool done = true;
          struct mc_conn *c = sets[s].reqs[i].conn;
          if ((c->tp->progress == NULL) || (sets[s].reqs[i].is_send != (dir == 0)))
            continue;
          MC_CHECK(c->tp->progress(sets[s].tc, c, &done));
          if (!done && (first == NULL)) {
            first_tc = sets[s].tc;
            first = &sets[s].reqs[i];
          }
          pending = pending || !done;
          n_pending += !done;
        }
      }
    }
    if (!pending)
      break;
    for (int s = 0; s < n_sets; s++) {
      const volatile uint32_t *abort_flag = sets[s].tc->abort_flag;
      if ((abort_flag != NULL) && __atomic_load_n(abort_flag, __ATOMIC_ACQUIRE))
        return MC_FAIL(ncclInvalidUsage, "transport: connection setup aborted");
    }
    /* A peer whose own set-up failed told the root, which tells every rank
     * (during init; after it the bootstrap has no root and this is a no-op). */
    if (mc_time_ns() >= next_notice_ns) {
      next_notice_ns = mc_time_ns() + NOTICE_EVERY_MS * 1000000ull;
      for (int s = 0; s < n_sets; s++)
        MC_CHECK(mc_boot_root_reason(sets[s].tc->boot, 0));
    }
    if (mc_deadline_passed(dl))
      return finish_timeout(first_tc, first, dl, n_pending);
    if (n_pending != last_pending) {
      last_pending = n_pending;
      moved_ns = mc_time_ns();
    } else if ((stall_ns != 0) && (mc_time_ns() - moved_ns >= stall_ns)) {
      return finish_stalled(first_tc, first, mc_time_ns() - moved_ns, n_pending);
    }
    usleep(CONNECT_WAIT_US);
  }
  for (int s = 0; s < n_sets; s++) {
    for (int i = 0; i < sets[s].n; i++) {
      struct mc_conn *c = sets[s].reqs[i].conn;
      if (c->tp->start != NULL)
        MC_CHECK(c->tp->start(sets[s].tc, c));
      log_conn(sets[s].tc, &sets[s].reqs[i]);
      log_choice(sets[s].tc, &sets[s].reqs[i]);
    }
  }
  return ncclSuccess;
}

/* After a failed set-up, the sender of q removes the /dev/shm names its
 * same-host peer may have created for the connection (P2P counters, SHM
 * segment) and that it would have unlinked once mapped: a peer killed after
 * its round-1 message leaves them otherwise until the next init on the host
 * finds their creator gone. Names are exact (creator pid included), so
 * nothing else is touched; a name that does not exist is nothing. */
static void unlink_peer_segments(const struct mc_tp_comm *tc, const struct mc_conn_req *q)
{
  static const char *const kinds[] = {"p2p", "shm"};
  const struct mc_tp_peer *p = &tc->peers[q->peer];
  char name[MC_SHM_NAME_BYTES];

  if ((p->host_hash != tc->peers[tc->rank].host_hash) || mc_tp_peer_is_this_process(tc, q->peer))
    return;
  for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
    mc_shm_name(name, tc->comm_hash, kinds[k], q->peer, tc->rank, q->channel, q->conn_index,
                p->pid);
    mc_shm_unlink(name);
  }
}

ncclResult_t mc_transport_connect_sets(struct mc_tp_set *sets, int n_sets)
{
  struct round_state st = {.local = ncclSuccess};
  ncclResult_t res;

  for (int s = 0; s < n_sets; s++) {
    for (int i = 0; i < sets[s].n; i++) {
      struct mc_conn_req *q = &sets[s].reqs[i];
      memset(q->conn, 0, sizeof(*q->conn));
      q->conn->peer = q->peer;
      q->conn->is_send = q->is_send;
      q->conn->channel = q->channel;
      if ((q->channel < 0) || (q->channel > 0xffff) || (q->conn_index < 0) ||
          (q->conn_index > 0xff))
        return MC_FAIL(ncclInternalError, "transport: channel %d / connection %d out of range",
                       q->channel, q->conn_index);
    }
  }
  /* Each round is a batch of non-blocking sends, then the receives. */
  MC_CHECK_GOTO(run_round(sets, n_sets, false, r1_post, &st), res, fail);
  mc_fault_point("connect");
  MC_CHECK_GOTO(run_round(sets, n_sets, true, r2_post, &st), res, fail);
  MC_CHECK_GOTO(run_round(sets, n_sets, false, r2_take, &st), res, fail);
  if (st.local != ncclSuccess) {
    res = MC_FAIL(st.local, "%s", st.why);
    goto fail;
  }
  MC_CHECK_GOTO(finish(sets, n_sets), res, fail);
  return ncclSuccess;
fail:
  for (int s = 0; s < n_sets; s++) {
    for (int i = 0; i < sets[s].n; i++) {
      mc_conn_free(sets[s].reqs[i].conn);
      if (sets[s].reqs[i].is_send)
        unlink_peer_segments(sets[s].tc, &sets[s].reqs[i]);
    }
  }
  return res;
}

ncclResult_t mc_transport_connect(struct mc_tp_comm *tc, struct mc_conn_req *reqs, int n)
{
  struct mc_tp_set set = {.tc = tc, .reqs = reqs, .n = n};
  return mc_transport_connect_sets(&set, 1);
}

void mc_conn_free(struct mc_conn *c)
{
  if (c == NULL)
    return;
  if (mc_proxy_wedged(c->proxy)) {
    /* Its proxy thread was abandoned inside a plugin call that may still
     * use the connection's plugin comms, slots and counters: left to it. */
    mc_proxy_leave_conn(c->proxy, c);
    memset(c, 0, sizeof(*c));
    return;
  }
  if (c->proxy != NULL)
    mc_proxy_remove(c->proxy, c);
  if (c->tp != NULL)
    c->tp->free(c);
  mc_shm_unlink(c->shm_name);
  if (c->map != NULL)
    munmap(c->map, c->map_bytes);
  if (c->shared != NULL)
    shared_put(c);
  free(c->own_ctrl);
  free(c->own_slots);
  memset(c, 0, sizeof(*c));
}

void mc_tp_proxy_stop(struct mc_tp_comm *tc)
{
  if (mc_proxy_stop(tc->proxy, tc->net_ctx))
    tc->proxy_abandoned = true;
  tc->proxy = NULL;
}

void mc_tp_comm_free(struct mc_tp_comm *tc)
{
  if (tc == NULL)
    return;
  /* The net context is the communicator's (finalized when it is freed). */
  tc->net_ctx = NULL;
}
