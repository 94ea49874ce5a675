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
 * NET connections then finish their connect/accept and go to the proxy.
 */
#include "transport/tp_int.h"

#include <errno.h>
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

#define TAG_BASE        (1 << 27)
#define TAG_R1          (0 << 24)
#define TAG_R2          (1 << 24)
#define TAG(_r, _c, _i) (TAG_BASE | (_r) | ((_i) << 16) | (_c))
#define CONNECT_WAIT_MS 1 /* sleep between rounds of NET connect progress */

#define MC_LAST_ERROR_BYTES_TP 1024

_Static_assert(sizeof(struct mc_blob_r1) <= MC_CONN_INFO_BYTES, "connect blob too large");

const char *mc_tp_name(enum mc_tp_kind kind)
{
  switch (kind) {
  case MC_TP_P2P:
    return "P2P";
  case MC_TP_SHM:
    return "SHM";
  case MC_TP_NET:
    return "NET";
  }
  return "?";
}

ncclResult_t mc_conn_read(const struct mc_conn *c, void *dst, const char *src, size_t bytes)
{
  if (!c->remote_read) {
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

/* Can this process read the peer's memory (ptrace access mode, Yama)? */
static bool cma_works(const struct mc_tp_peer *p)
{
  uint64_t v = 0;
  struct iovec local = {.iov_base = &v, .iov_len = sizeof(v)};
  struct iovec remote = {.iov_base = (void *)(uintptr_t)p->canary, .iov_len = sizeof(v)};
  return process_vm_readv(p->pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof(v);
}

static enum mc_tp_kind choose(struct mc_tp_comm *tc, int peer)
{
  const struct mc_tp_peer *me = &tc->peers[tc->rank];
  const struct mc_tp_peer *p = &tc->peers[peer];
  struct mc_topo_paths_opts opts;
  struct mc_topo_transport_choice ch;

  if ((p->host_hash != me->host_hash) || (tc->topo == NULL))
    return MC_TP_NET;
  mc_topo_paths_opts_from_params(&opts);
  if (mc_topo_transport_select(tc->topo, &opts, tc->rank, peer, true, p->shm_dev == me->shm_dev,
                               &ch) != ncclSuccess)
    return MC_TP_NET;
  if ((ch.transport == MC_TOPO_TRANSPORT_P2P) && (p->pid != me->pid) && !mc_param_int(MC_P_P2P_CMA))
    return MC_TP_SHM; /* P2P through the shared FIFO (MESHCCL_P2P_CMA=0) */
  if ((ch.transport == MC_TOPO_TRANSPORT_P2P) && (p->pid != me->pid) && !cma_works(p)) {
    if (!tc->cma_warned) {
      MC_INFO(MC_SUB_INIT | MC_SUB_P2P,
              "P2P: the kernel refuses cross-memory attach to rank %d (pid %d): %s; using SHM "
              "between processes (check /proc/sys/kernel/yama/ptrace_scope)",
              peer, p->pid, strerror(errno));
      tc->cma_warned = true;
    }
    return MC_TP_SHM;
  }
  switch (ch.transport) {
  case MC_TOPO_TRANSPORT_P2P:
    return MC_TP_P2P;
  case MC_TOPO_TRANSPORT_SHM:
    return MC_TP_SHM;
  default:
    return MC_TP_NET;
  }
}

static bool same_process(const struct mc_tp_comm *tc, int peer)
{
  return (tc->peers[peer].pid == tc->peers[tc->rank].pid) &&
         (tc->peers[peer].host_hash == tc->peers[tc->rank].host_hash);
}

static size_t ctrl_bytes(void)
{
  return (sizeof(struct mc_conn_ctrl) + 4095) & ~(size_t)4095;
}

/* --------------------------------------------------------------- round 1 */

static ncclResult_t recv_setup(struct mc_tp_comm *tc, struct mc_conn_req *q, struct mc_blob_r1 *r1)
{
  struct mc_conn *c = q->conn;

  memset(r1, 0, sizeof(*r1));
  c->kind = choose(tc, q->peer);
  c->slot_bytes = tc->slot_bytes;
  r1->kind = (uint32_t)c->kind;
  r1->bytes = tc->slot_bytes;
  r1->same_process = same_process(tc, q->peer);
  switch (c->kind) {
  case MC_TP_SHM:
    c->map_bytes = ctrl_bytes() + MC_STEPS * c->slot_bytes;
    mc_shm_name(c->shm_name, tc, "shm", tc->rank, q->peer, q->channel, q->conn_index);
    MC_CHECK(mc_shm_create(c->shm_name, c->map_bytes, &c->map));
    c->ctrl = c->map;
    c->slots = (char *)c->map + ctrl_bytes();
    r1->bytes = c->map_bytes;
    snprintf(r1->shm_name, sizeof(r1->shm_name), "%s", c->shm_name);
    return ncclSuccess;
  case MC_TP_P2P:
    if (r1->same_process) {
      MC_CHECK(mc_calloc((struct mc_conn_ctrl **)&c->own_ctrl, 1));
      c->ctrl = c->own_ctrl;
      r1->addr = (uint64_t)(uintptr_t)c->ctrl;
    } else {
      c->map_bytes = ctrl_bytes();
      mc_shm_name(c->shm_name, tc, "p2p", tc->rank, q->peer, q->channel, q->conn_index);
      MC_CHECK(mc_shm_create(c->shm_name, c->map_bytes, &c->map));
      c->ctrl = c->map;
      snprintf(r1->shm_name, sizeof(r1->shm_name), "%s", c->shm_name);
      c->remote_read = true;
      c->peer_pid = tc->peers[q->peer].pid;
    }
    return ncclSuccess;
  case MC_TP_NET:
    return mc_net_recv_setup(tc, c, r1);
  }
  return MC_FAIL(ncclInternalError, "transport: unknown kind %d", (int)c->kind);
}

/* --------------------------------------------------------------- round 2 */

static ncclResult_t send_setup(struct mc_tp_comm *tc, struct mc_conn_req *q,
                               const struct mc_blob_r1 *r1, struct mc_blob_r2 *r2)
{
  struct mc_conn *c = q->conn;

  memset(r2, 0, sizeof(*r2));
  c->kind = (enum mc_tp_kind)r1->kind;
  r2->kind = r1->kind;
  switch (c->kind) {
  case MC_TP_SHM:
    c->map_bytes = (size_t)r1->bytes;
    if (c->map_bytes <= ctrl_bytes())
      return MC_FAIL(ncclRemoteError, "NCCL SHM: rank %d announced a segment of %zu bytes", q->peer,
                     c->map_bytes);
    MC_CHECK(mc_shm_attach(r1->shm_name, c->map_bytes, &c->map));
    mc_shm_unlink(r1->shm_name); /* both ends have it mapped now */
    c->ctrl = c->map;
    c->slots = (char *)c->map + ctrl_bytes();
    c->slot_bytes = (c->map_bytes - ctrl_bytes()) / MC_STEPS;
    break;
  case MC_TP_P2P:
    c->slot_bytes = (size_t)r1->bytes;
    if (r1->same_process) {
      c->ctrl = (struct mc_conn_ctrl *)(uintptr_t)r1->addr;
    } else {
      c->map_bytes = ctrl_bytes();
      MC_CHECK(mc_shm_attach(r1->shm_name, c->map_bytes, &c->map));
      mc_shm_unlink(r1->shm_name);
      c->ctrl = c->map;
    }
    c->own_slots = aligned_alloc(4096, MC_STEPS * c->slot_bytes);
    if (c->own_slots == NULL)
      return MC_FAIL(ncclSystemError, "P2P: allocating %zu bytes of slots for rank %d",
                     MC_STEPS * c->slot_bytes, q->peer);
    c->slots = c->own_slots;
    c->can_send_ptr = true;
    r2->slots = (uint64_t)(uintptr_t)c->slots;
    break;
  case MC_TP_NET:
    MC_CHECK(mc_net_send_setup(tc, c, r1));
    break;
  default:
    return MC_FAIL(ncclRemoteError, "transport: rank %d chose unknown transport %u", q->peer,
                   r1->kind);
  }
  r2->ok = 1;
  return ncclSuccess;
}

static ncclResult_t recv_finish(struct mc_conn_req *q, const struct mc_blob_r2 *r2)
{
  struct mc_conn *c = q->conn;

  if ((r2->kind != (uint32_t)c->kind) || (r2->ok != 1))
    return MC_FAIL(ncclRemoteError, "transport: rank %d did not accept the %s connection", q->peer,
                   mc_tp_name(c->kind));
  if (c->kind == MC_TP_P2P)
    c->slots = (char *)(uintptr_t)r2->slots;
  /* Both sides have it mapped: nothing is left in /dev/shm from here on. */
  mc_shm_unlink(c->shm_name);
  c->shm_name[0] = '\0';
  return ncclSuccess;
}

static void log_conn(const struct mc_tp_comm *tc, const struct mc_conn_req *q)
{
  const struct mc_conn *c = q->conn;
  const char *how = "";

  if (!q->is_send)
    return;
  if (c->kind == MC_TP_P2P)
    how = same_process(tc, q->peer) ? "/direct pointer" : "/CMA";
  else if (c->kind == MC_TP_SHM)
    how = "/direct/direct";
  else if (tc->net != NULL)
    how = tc->net->name;
  MC_INFO(MC_SUB_INIT | MC_SUB_P2P, "Channel %02d/%d : %d[%d] -> %d[%d] via %s%s%s", q->channel,
          q->conn_index, tc->rank, tc->rank, q->peer, q->peer, mc_tp_name(c->kind),
          (c->kind == MC_TP_NET) ? "/" : "", how);
}

/*
 * The rounds. A local setup failure does not stop this rank's part of the
 * protocol: it still sends its blobs (marked failed), so that no peer waits
 * for them and every rank learns of the failure through its connections;
 * bootstrap failures (a peer died: the bootstrap names it) end the rounds at
 * once. The first local failure is returned once the rounds are over.
 */
#define BLOB_FAILED 0xffu

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
    r1.kind = BLOB_FAILED;
  }
  return mc_boot_send(tc->boot, q->peer, TAG(TAG_R1, q->channel, q->conn_index), &r1, sizeof(r1));
}

static ncclResult_t r2_post(struct mc_tp_comm *tc, struct mc_conn_req *q, struct round_state *st)
{
  struct mc_blob_r1 r1;
  struct mc_blob_r2 r2;
  ncclResult_t res;

  MC_CHECK(
      mc_boot_recv(tc->boot, q->peer, TAG(TAG_R1, q->channel, q->conn_index), &r1, sizeof(r1)));
  if (r1.kind == BLOB_FAILED) {
    res = MC_FAIL(ncclRemoteError, "transport: rank %d could not set up its end of the connection",
                  q->peer);
  } else {
    res = send_setup(tc, q, &r1, &r2);
  }
  if (res != ncclSuccess) {
    note_local(st, res);
    memset(&r2, 0, sizeof(r2));
    r2.kind = BLOB_FAILED;
  }
  return mc_boot_send(tc->boot, q->peer, TAG(TAG_R2, q->channel, q->conn_index), &r2, sizeof(r2));
}

static ncclResult_t r2_take(struct mc_tp_comm *tc, struct mc_conn_req *q, struct round_state *st)
{
  struct mc_blob_r2 r2;
  ncclResult_t res;

  MC_CHECK(
      mc_boot_recv(tc->boot, q->peer, TAG(TAG_R2, q->channel, q->conn_index), &r2, sizeof(r2)));
  if (st->local != ncclSuccess)
    return ncclSuccess; /* failing anyway: the conn is freed below */
  if ((res = recv_finish(q, &r2)) != ncclSuccess)
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

static ncclResult_t net_finish(struct mc_tp_set *sets, int n_sets)
{
  bool pending = true;

  while (pending) {
    pending = false;
    for (int s = 0; s < n_sets; s++) {
      for (int i = 0; i < sets[s].n; i++) {
        bool done = true;
        if (sets[s].reqs[i].conn->kind != MC_TP_NET)
          continue;
        MC_CHECK(mc_net_progress_connect(sets[s].tc, sets[s].reqs[i].conn, &done));
        pending = pending || !done;
      }
    }
    for (int s = 0; pending && (s < n_sets); s++) {
      const volatile uint32_t *abort_flag = sets[s].tc->abort_flag;
      if ((abort_flag != NULL) && __atomic_load_n(abort_flag, __ATOMIC_ACQUIRE))
        return MC_FAIL(ncclInvalidUsage, "transport: connection setup aborted");
    }
    if (pending)
      usleep(CONNECT_WAIT_MS * 100);
  }
  for (int s = 0; s < n_sets; s++) {
    for (int i = 0; i < sets[s].n; i++) {
      if (sets[s].reqs[i].conn->kind == MC_TP_NET)
        MC_CHECK(mc_proxy_add(sets[s].tc, sets[s].reqs[i].conn));
      log_conn(sets[s].tc, &sets[s].reqs[i]);
    }
  }
  return ncclSuccess;
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
  MC_CHECK_GOTO(run_round(sets, n_sets, true, r2_post, &st), res, fail);
  MC_CHECK_GOTO(run_round(sets, n_sets, false, r2_take, &st), res, fail);
  if (st.local != ncclSuccess) {
    res = MC_FAIL(st.local, "%s", st.why);
    goto fail;
  }
  MC_CHECK_GOTO(net_finish(sets, n_sets), res, fail);
  return ncclSuccess;
fail:
  for (int s = 0; s < n_sets; s++)
    for (int i = 0; i < sets[s].n; i++)
      mc_conn_free(sets[s].reqs[i].conn);
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
  if (c->proxy != NULL)
    mc_proxy_remove(c->proxy, c);
  if (c->kind == MC_TP_NET)
    mc_net_conn_free(c);
  mc_shm_unlink(c->shm_name);
  if (c->map != NULL)
    munmap(c->map, c->map_bytes);
  free(c->own_ctrl);
  free(c->own_slots);
  memset(c, 0, sizeof(*c));
}

void mc_tp_proxy_stop(struct mc_tp_comm *tc)
{
  mc_proxy_stop(tc->proxy);
  tc->proxy = NULL;
}

void mc_tp_comm_free(struct mc_tp_comm *tc)
{
  if (tc == NULL)
    return;
  if ((tc->net != NULL) && (tc->net_ctx != NULL))
    (void)tc->net->finalize(tc->net_ctx);
  tc->net_ctx = NULL;
}
