/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The P2P transport (NCCL's transport/p2p.cc, host edition): the slots live
 * on the sender's side and the receiver reads them, or any buffer of the
 * sender published in the FIFO, directly:
 *   one process     plain pointers ("P2P/direct pointer"); counters and the
 *                   sender's slots in one heap block both ends share, freed
 *                   by the last (a peer may be aborted while this end polls);
 *   two processes   "P2P/CMA": counters and slots in a /dev/shm segment the
 *                   receiver creates and the sender unlinks once mapped (as
 *                   SHM's); for steps of at least the host's single-copy
 *                   threshold the sender publishes its own buffer instead of
 *                   copying into a slot, and the receiver reads it with one
 *                   process_vm_readv (cross-memory attach: one copy where
 *                   the FIFO makes two). MESHCCL_P2P_CMA=-1 (default) takes
 *                   the threshold from what this process measured of both
 *                   ways (tp_cma.c, mc_tp_decide_cma) and declines P2P when
 *                   the FIFO wins at every step size (SHM carries the
 *                   connection: what the 2-core VMs we measure on get);
 *                   1 forces single copy for every stable step, 0 declines.
 * The kernel may refuse cross-memory attach (Yama ptrace scope, other user):
 * then P2P declines too, with one INFO line. So does it for a peer in
 * another PID namespace (containers sharing /dev/shm): its pid names another
 * process here, or none.
 */
#include "transport/tp_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "params.h"
#include "topo/topo.h"
#include "utils.h"

/* Can this process read the peer's memory? */
static bool cma_works(const struct mc_tp_peer *p)
{
  uint64_t v = 0;
  struct iovec local = {.iov_base = &v, .iov_len = sizeof(v)};
  struct iovec remote = {.iov_base = (void *)(uintptr_t)p->canary, .iov_len = sizeof(v)};
  return process_vm_readv(p->pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof(v);
}

/* Steps of at least this many bytes go by single copy on a P2P connection
 * between processes with slots of slot_bytes (MC_CMA_NEVER: none). */
static size_t cma_from_bytes(size_t slot_bytes)
{
  struct mc_cma_figures f;
  const char *why = NULL;
  int64_t mode = mc_param_int(MC_P_P2P_CMA);
  int64_t forced = mc_param_int(MC_P_P2P_CMA_BYTES);
  static int said; /* the forced threshold was logged (once per process) */

  if (mode == 0)
    return MC_CMA_NEVER;
  if (forced >= 0) {
    if (__atomic_exchange_n(&said, 1, __ATOMIC_ACQ_REL) == 0)
      MC_INFO(MC_SUB_TUNING | MC_SUB_P2P,
              "P2P/CMA: single copy for steps of %lld bytes and more, the FIFO below "
              "(MESHCCL_P2P_CMA_BYTES; no probe)",
              (long long)forced);
    return (size_t)forced;
  }
  if (mode == 1)
    return 0;
  mc_tp_cma_probe(slot_bytes, &f, &why);
  return (why != NULL) ? MC_CMA_NEVER : mc_tp_decide_cma(&f, slot_bytes);
}

static bool p2p_can_connect(struct mc_tp_comm *tc, const struct mc_tp_select *sel)
{
  const struct mc_tp_peer *p = &tc->peers[sel->peer];

  if (!sel->same_host || (sel->topo_choice != MC_TOPO_TRANSPORT_P2P))
    return false;
  if (sel->same_process)
    return true;
  /* A pid of another PID namespace is some other process here (or none):
   * never read it. stage_peers said so once (INFO). */
  if (!p->same_pidns || (cma_from_bytes(tc->slot_bytes) == MC_CMA_NEVER))
    return false;
  if (!cma_works(p)) {
    if (!tc->cma_warned) {
      MC_INFO(MC_SUB_INIT | MC_SUB_P2P,
              "P2P: the kernel refuses cross-memory attach to rank %d (pid %d): %s; using SHM "
              "between processes (ranks of other users or groups, or check "
              "/proc/sys/kernel/yama/ptrace_scope)",
              sel->peer, p->pid, strerror(errno));
      tc->cma_warned = true;
    }
    return false;
  }
  return true;
}

static ncclResult_t p2p_recv_setup(struct mc_tp_comm *tc, struct mc_conn_req *q,
                                   struct mc_blob_r1 *r1)
{
  struct mc_conn *c = q->conn;

  if (r1->same_process) {
    MC_CHECK(mc_tp_shared_alloc(c));
    r1->addr = (uint64_t)(uintptr_t)c->ctrl;
    return ncclSuccess;
  }
  c->map_bytes = mc_tp_ctrl_bytes() + (size_t)MC_STEPS * c->slot_bytes;
  mc_shm_name(c->shm_name, tc->comm_hash, "p2p", tc->rank, q->peer, q->channel, q->conn_index,
              (int)getpid());
  MC_CHECK(mc_shm_create(c->shm_name, c->map_bytes, &c->map));
  c->ctrl = c->map;
  c->slots = (char *)c->map + mc_tp_ctrl_bytes();
  snprintf(r1->shm_name, sizeof(r1->shm_name), "%s", c->shm_name);
  c->remote_read = true;
  c->peer_pid = tc->peers[q->peer].pid;
  return ncclSuccess;
}

static ncclResult_t p2p_send_setup(struct mc_tp_comm *tc, struct mc_conn_req *q,
                                   const struct mc_blob_r1 *r1, struct mc_blob_r2 *r2)
{
  struct mc_conn *c = q->conn;

  /* r1 passed mc_tp_blob_r1_check: a "same process" claim is this rank's
   * own view (the peer's pid and host hash are this process's), the slot
   * size is this rank's, the counters page is the peer's own segment. */
  c->slot_bytes = (size_t)r1->bytes;
  if (!r1->same_process)
    c->peer_pid = tc->peers[q->peer].pid; /* for the log line */
  if (!r1->same_process) {
    c->map_bytes = mc_tp_ctrl_bytes() + (size_t)MC_STEPS * c->slot_bytes;
    MC_CHECK(mc_shm_attach(r1->shm_name, c->map_bytes, &c->map));
    mc_shm_unlink(r1->shm_name); /* both ends have it mapped now */
    c->ctrl = c->map;
    c->slots = (char *)c->map + mc_tp_ctrl_bytes();
    c->ptr_min_bytes = cma_from_bytes(c->slot_bytes);
    c->can_send_ptr = (c->ptr_min_bytes != MC_CMA_NEVER);
    r2->slots = (uint64_t)(uintptr_t)c->slots; /* said, not used: the receiver maps them */
    return ncclSuccess;
  }
  c->own_slots = aligned_alloc(4096, MC_STEPS * c->slot_bytes);
  if (c->own_slots == NULL)
    return MC_FAIL(ncclSystemError, "P2P: allocating %zu bytes of slots for rank %d",
                   MC_STEPS * c->slot_bytes, q->peer);
  c->slots = c->own_slots;
  /* One process: the slots go with the counters, freed by the last end. */
  mc_tp_shared_join(c, (struct mc_conn_ctrl *)(uintptr_t)r1->addr);
  c->can_send_ptr = true;
  r2->slots = (uint64_t)(uintptr_t)c->slots;
  return ncclSuccess;
}

static ncclResult_t p2p_recv_connect(struct mc_conn_req *q, const struct mc_blob_r2 *r2)
{
  if (!q->conn->remote_read) /* one process: the sender's heap slots */
    q->conn->slots = (char *)(uintptr_t)r2->slots;
  return ncclSuccess;
}

static void p2p_free(struct mc_conn *c)
{
  (void)c; /* heap and mapping: mc_conn_free */
}

static const char *p2p_how(const struct mc_tp_comm *tc, const struct mc_conn *c)
{
  (void)tc;
  return (c->remote_read || (c->peer_pid != 0)) ? "CMA" : "direct pointer";
}

const struct mc_transport mc_tp_p2p = {
    .kind = MC_TOPO_TRANSPORT_P2P,
    .name = "P2P",
    .can_connect = p2p_can_connect,
    .recv_setup = p2p_recv_setup,
    .send_setup = p2p_send_setup,
    .recv_connect = p2p_recv_connect,
    .progress = NULL,
    .start = NULL,
    .free = p2p_free,
    .how = p2p_how,
};
