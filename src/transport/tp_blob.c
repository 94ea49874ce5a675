/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The connect messages of transport set-up (NCCL's connectInfo of
 * ncclTransportP2pSetup, src/transport.cc), checked against this rank's own
 * knowledge before anything in them is used. A message comes from another
 * process, possibly another host, through the bootstrap; without these
 * checks a crafted one could make this rank write through a pointer of its
 * choosing (the "same process" P2P counters), map or unlink any /dev/shm
 * object it may open, or size its slots differently from what its
 * collectives write into them. What a rank knows of a peer comes from the
 * bootstrap allgather and its own process (pid, host hash); what a message
 * may say is then fixed:
 *   P2P, same process   only when the peer's pid, pid namespace and host
 *                       hash are this process's and its communicator is a
 *                       live one of this process (mc_tp_peer_is_this_process):
 *                       the counters' address, non-NULL, aligned;
 *   P2P, other process  same host; the counters page's /dev/shm name this
 *                       rank would give it (creator: the peer's pid);
 *   SHM                 same host; the segment's name as above, and its size
 *                       for this rank's slot size;
 *   NET                 the slot size; the net handle is the net's to check
 *                       (net_socket_handle.c, mesh_handle.c).
 * Pure (no sockets, no allocation; a registry lookup), so that tests/fuzz/fuzz_tp_blob.c feeds
 * it arbitrary bytes.
 */
#include "transport/tp_int.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "registry.h"
#include "utils.h"

#define CTRL_ALIGN 64 /* struct mc_conn_ctrl's alignment */

size_t mc_tp_ctrl_bytes(void)
{
  return (sizeof(struct mc_conn_ctrl) + 4095) & ~(size_t)4095;
}

void mc_shm_name(char *out, uint64_t comm_hash, const char *what, int recv_rank, int send_rank,
                 int channel, int conn_index, int creator_pid)
{
  snprintf(out, MC_SHM_NAME_BYTES, "/meshccl-%s-%016llx-%d-%d-%d-%d-%d", what,
           (unsigned long long)comm_hash, send_rank, recv_rank, channel, conn_index, creator_pid);
}

/* Whether peer's process is this one: this process's own pid and pid
 * namespace, not what the allgather says of this rank (equal pids in two
 * pid namespaces, containers, or on two hosts given one NCCL_HOSTID, are
 * different processes). */
static bool peer_pid_is_mine(const struct mc_tp_comm *tc, int peer)
{
  const struct mc_tp_peer *p = &tc->peers[peer];

  return (p->host_hash == tc->peers[tc->rank].host_hash) && (p->pid == (int)getpid()) &&
         (p->pid_hash == mc_pid_hash() + tc->comm_hash);
}

/* peer's communicator, in this process, is one it created and has not freed. */
static bool peer_comm_live(const struct mc_tp_comm *tc, int peer)
{
  return mc_registry_state((const void *)(uintptr_t)tc->peers[peer].canary) == MC_HANDLE_LIVE;
}

bool mc_tp_peer_is_this_process(const struct mc_tp_comm *tc, int peer)
{
  return peer_pid_is_mine(tc, peer) && peer_comm_live(tc, peer);
}

void mc_tp_blob_view_make(const struct mc_tp_comm *tc, const struct mc_conn_req *q,
                          struct mc_tp_blob_view *v_out)
{
  const struct mc_tp_peer *me = &tc->peers[tc->rank];
  const struct mc_tp_peer *p = &tc->peers[q->peer];

  memset(v_out, 0, sizeof(*v_out));
  v_out->rank = tc->rank;
  v_out->peer = q->peer;
  v_out->channel = q->channel;
  v_out->conn_index = q->conn_index;
  v_out->comm_hash = tc->comm_hash;
  v_out->peer_pid = p->pid;
  v_out->same_host = (p->host_hash == me->host_hash);
  v_out->same_process = mc_tp_peer_is_this_process(tc, q->peer);
  v_out->peer_freed = peer_pid_is_mine(tc, q->peer) && !v_out->same_process;
  v_out->slot_bytes = (q->slot_bytes != 0) ? q->slot_bytes : tc->slot_bytes;
}

/* The transport's name: mc_topo_transport_str's words, written again
 * because this file is also built alone into the connect-message fuzzer
 * (tests/fuzz/fuzz_tp_blob.c), which links no topology module. */
static const char *kind_name(uint32_t kind)
{
  switch (kind) {
  case MC_TOPO_TRANSPORT_P2P:
    return "P2P";
  case MC_TOPO_TRANSPORT_SHM:
    return "SHM";
  case MC_TOPO_TRANSPORT_NET:
    return "NET";
  default:
    return "transport";
  }
}

/* The /dev/shm name of a message (within MC_SHM_NAME_BYTES, NUL-terminated)
 * is the one the peer, creating it, had to give it. */
static bool name_is(const char *got, const struct mc_tp_blob_view *v, const char *what)
{
  char want[MC_SHM_NAME_BYTES];

  mc_shm_name(want, v->comm_hash, what, v->peer, v->rank, v->channel, v->conn_index, v->peer_pid);
  return (memchr(got, '\0', MC_SHM_NAME_BYTES) != NULL) && (strcmp(got, want) == 0);
}

static ncclResult_t bad_r1(const struct mc_tp_blob_view *v, const char *transport, const char *why)
{
  return MC_FAIL(ncclRemoteError,
                 "transport: rank %d: refusing the %s connect message of rank %d (channel %d, "
                 "connection %d): %s",
                 v->rank, transport, v->peer, v->channel, v->conn_index, why);
}

ncclResult_t mc_tp_blob_r1_check(const struct mc_tp_blob_view *v, const struct mc_blob_r1 *r1)
{
  char why[256];
  size_t shm_bytes = mc_tp_ctrl_bytes() + (size_t)MC_STEPS * v->slot_bytes;

  if ((r1->kind != MC_TOPO_TRANSPORT_P2P) && (r1->kind != MC_TOPO_TRANSPORT_SHM) &&
      (r1->kind != MC_TOPO_TRANSPORT_NET)) {
    snprintf(why, sizeof(why), "unknown transport %u", r1->kind);
    return bad_r1(v, "transport", why);
  }
  if (r1->same_process > 1) {
    snprintf(why, sizeof(why), "same-process flag %u", r1->same_process);
    return bad_r1(v, kind_name(r1->kind), why);
  }
  if ((r1->kind != MC_TOPO_TRANSPORT_NET) && !v->same_host)
    return bad_r1(v, kind_name(r1->kind),
                  "it chose a same-host transport, but its host hash is not this host's");
  switch (r1->kind) {
  case MC_TOPO_TRANSPORT_P2P:
    if (r1->bytes != v->slot_bytes) {
      snprintf(why, sizeof(why),
               "%llu-byte slots announced, this rank uses %zu (is NCCL_BUFFSIZE the same on "
               "every rank?)",
               (unsigned long long)r1->bytes, v->slot_bytes);
      return bad_r1(v, "P2P", why);
    }
    if ((r1->same_process != 0) && !v->same_process && v->peer_freed)
      return bad_r1(v, "P2P",
                    "its communicator in this process was destroyed or aborted (ncclCommAbort) "
                    "since it sent it");
    if ((r1->same_process != 0) != v->same_process) {
      snprintf(why, sizeof(why),
               "it %s this process (pid %d), but the bootstrap says it is pid %d %s this host",
               (r1->same_process != 0) ? "claims to share" : "denies sharing", (int)getpid(),
               v->peer_pid, v->same_host ? "on" : "off");
      return bad_r1(v, "P2P", why);
    }
    if ((r1->same_process != 0) && ((r1->addr == 0) || (r1->addr % CTRL_ALIGN != 0))) {
      snprintf(why, sizeof(why), "counters at 0x%llx", (unsigned long long)r1->addr);
      return bad_r1(v, "P2P", why);
    }
    if ((r1->same_process == 0) && ((r1->addr != 0) || !name_is(r1->shm_name, v, "p2p")))
      return bad_r1(v, "P2P",
                    "its counters page is not the /dev/shm segment it had to create for this "
                    "connection");
    return ncclSuccess;
  case MC_TOPO_TRANSPORT_SHM:
    if (r1->bytes != shm_bytes) {
      snprintf(why, sizeof(why),
               "a %llu-byte segment announced, %zu-byte slots make %zu (is NCCL_BUFFSIZE the "
               "same on every rank?)",
               (unsigned long long)r1->bytes, v->slot_bytes, shm_bytes);
      return bad_r1(v, "SHM", why);
    }
    if ((r1->addr != 0) || !name_is(r1->shm_name, v, "shm"))
      return bad_r1(v, "SHM",
                    "its segment is not the /dev/shm segment it had to create for this connection");
    return ncclSuccess;
  default: /* NET: the receiver's slots hold a step header in front of the data */
    if (r1->bytes != v->slot_bytes + MC_CONN_HDR_ROOM) {
      snprintf(why, sizeof(why),
               "%llu-byte slots announced, this rank uses %zu (is NCCL_BUFFSIZE the same on "
               "every rank?)",
               (unsigned long long)r1->bytes, v->slot_bytes + MC_CONN_HDR_ROOM);
      return bad_r1(v, "NET", why);
    }
    if (r1->addr != 0)
      return bad_r1(v, "NET", "an address where none belongs");
    return ncclSuccess;
  }
}

ncclResult_t mc_tp_blob_r2_check(const struct mc_tp_blob_view *v, uint32_t kind,
                                 const struct mc_blob_r2 *r2)
{
  const char *name = kind_name(kind);

  if ((r2->kind != kind) || (r2->ok != 1))
    return MC_FAIL(ncclRemoteError,
                   "transport: rank %d did not accept the %s connection (channel %d, connection "
                   "%d)",
                   v->peer, name, v->channel, v->conn_index);
  if ((kind == MC_TOPO_TRANSPORT_P2P) ? ((r2->slots == 0) || (r2->slots % CTRL_ALIGN != 0))
                                      : (r2->slots != 0))
    return MC_FAIL(ncclRemoteError,
                   "transport: rank %d: refusing the %s answer of rank %d (channel %d, connection "
                   "%d): slots at 0x%llx",
                   v->rank, name, v->peer, v->channel, v->conn_index,
                   (unsigned long long)r2->slots);
  return ncclSuccess;
}
