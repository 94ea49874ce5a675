/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Init stage "connect": the transports' view of every rank, the channels
 * (NCCL's ring and tree connect, src/graph/connect.cc; until the graph
 * search lands the ring is rank order, which keeps the ranks of a host
 * together when the launcher numbers them by host, and the trees are NCCL's
 * double binary tree over ranks: channels_default_trees), and one send and
 * one receive ring connection per channel, each over P2P, SHM or NET as the
 * receiving rank chooses. Tree and point-to-point connections are made at
 * first use (mc_comm_tree_conn_reqs gives the tree's).
 */
#include "comm.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "log.h"
#include "net/net.h"
#include "params.h"

static ncclResult_t tp_init(struct ncclComm *comm)
{
  struct mc_tp_comm *tc = &comm->tp;

  MC_CHECK(mc_calloc(&comm->tp_peers, (size_t)comm->n_ranks));
  for (int r = 0; r < comm->n_ranks; r++) {
    const struct mc_peer_info *p = &comm->peers[r];
    comm->tp_peers[r] = (struct mc_tp_peer){.pid = p->pid,
                                            .host_hash = p->host_hash,
                                            .pid_hash = p->pid_hash,
                                            .shm_dev = p->shm_dev,
                                            .canary = p->comm_ptr};
  }
  memset(tc, 0, sizeof(*tc));
  tc->boot = comm->boot;
  tc->rank = comm->rank;
  tc->n_ranks = comm->n_ranks;
  tc->peers = comm->tp_peers;
  tc->topo = comm->topo;
  tc->comm_hash = comm->comm_hash;
  tc->abort_flag = &comm->abort_flag;
  tc->slot_bytes = (size_t)mc_param_int(MC_P_BUFFSIZE) / MC_STEPS;
  tc->slot_bytes &= ~(size_t)63;
  tc->net = mc_net_default();
  MC_CHECK(mc_calloc(&comm->p2p_send, (size_t)comm->n_ranks));
  MC_CHECK(mc_calloc(&comm->p2p_recv, (size_t)comm->n_ranks));
  MC_CHECK(mc_calloc(&comm->os_send, (size_t)comm->n_ranks));
  MC_CHECK(mc_calloc(&comm->os_recv, (size_t)comm->n_ranks));
  MC_CHECK(mc_calloc(&comm->os_srcs, (size_t)comm->n_ranks));
  return ncclSuccess;
}

/* Waiting ranks spin while every rank of the host has a CPU; otherwise they
 * yield at once so that the rank they wait for can run. */
static int spin_passes(const struct ncclComm *comm)
{
  cpu_set_t set;
  int cpus = 0;

  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    cpus = CPU_COUNT(&set);
  return ((cpus > 0) && (comm->nodes.local_ranks > cpus)) ? 8 : 2000;
}

static int channel_count(void)
{
  int lo = (int)mc_param_int(MC_P_MIN_NCHANNELS);
  int hi = (int)mc_param_int(MC_P_MAX_NCHANNELS);
  return (lo > hi) ? hi : lo;
}

/*
 * PLACEHOLDER until the graph search provides per-channel trees (NCCL's
 * connectTrees): the first half of the channels (c < n_channels / 2) gets
 * NCCL's double binary "tree 0" over rank numbers, the other half "tree 1",
 * so that each tree carries half of a tree all-reduce's data. With one
 * channel that channel takes tree 1. Replace this call, nothing else: the
 * collectives read only tree_up / tree_down[] of each channel.
 */
static void channels_default_trees(struct ncclComm *comm)
{
  for (int c = 0; c < comm->n_channels; c++) {
    struct mc_channel *ch = &comm->channels[c];
    int t0[3];
    int t1[3];
    const int *t;
    mc_comm_tree_dtree(comm->n_ranks, comm->rank, t0, t1);
    t = (c < comm->n_channels / 2) ? t0 : t1;
    ch->tree_up = t[0];
    ch->tree_down[0] = t[1];
    ch->tree_down[1] = t[2];
    ch->tree_down[2] = -1;
  }
}

/* NCCL's "Trees [0] 1/-1/-1->0->-1 [1] ..." line: children->rank->parent per channel. */
static void log_trees(const struct ncclComm *comm)
{
  char line[1024];
  size_t at = 0;

  line[0] = '\0';
  for (int c = 0; (c < comm->n_channels) && (at < sizeof(line)); c++) {
    const struct mc_channel *ch = &comm->channels[c];
    int w = snprintf(line + at, sizeof(line) - at, " [%d] %d/%d/%d->%d->%d", c, ch->tree_down[0],
                     ch->tree_down[1], ch->tree_down[2], comm->rank, ch->tree_up);
    if (w < 0)
      break;
    at += (size_t)w;
  }
  MC_INFO(MC_SUB_INIT | MC_SUB_GRAPH, "Trees%s", line);
}

int mc_comm_tree_conn_reqs(struct ncclComm *comm, struct mc_conn_req *reqs)
{
  int n = 0;

  for (int c = 0; c < comm->n_channels; c++) {
    struct mc_channel *ch = &comm->channels[c];
    for (int i = -1; i < MC_TREE_MAX_ARITY; i++) {
      int peer = (i < 0) ? ch->tree_up : ch->tree_down[i];
      struct mc_conn *sc = (i < 0) ? &ch->tree_send_up : &ch->tree_send_down[i];
      struct mc_conn *rc = (i < 0) ? &ch->tree_recv_up : &ch->tree_recv_down[i];
      if (peer < 0)
        continue;
      if (reqs != NULL) {
        reqs[n] = (struct mc_conn_req){
            .peer = peer, .is_send = true, .channel = c, .conn_index = MC_CONN_TREE, .conn = sc};
        reqs[n + 1] = (struct mc_conn_req){
            .peer = peer, .is_send = false, .channel = c, .conn_index = MC_CONN_TREE, .conn = rc};
      }
      n += 2;
    }
  }
  return n;
}

ncclResult_t mc_comm_stage_connect(struct ncclComm *comm)
{
  struct mc_conn_req *reqs = NULL;
  int n = comm->n_ranks;
  int n_reqs = 0;
  ncclResult_t res;

  MC_CHECK(tp_init(comm));
  if (comm->nodes.local_rank == 0)
    mc_tp_collect_orphans();
  comm->spin_passes = spin_passes(comm);
  comm->n_channels = channel_count();
  MC_CHECK(mc_calloc(&comm->channels, (size_t)comm->n_channels));
  for (int c = 0; c < comm->n_channels; c++) {
    struct mc_channel *ch = &comm->channels[c];
    ch->id = c;
    ch->prev = (comm->rank + n - 1) % n;
    ch->next = (comm->rank + 1) % n;
    MC_CHECK(mc_calloc(&ch->ring, (size_t)n));
    for (int i = 0; i < n; i++)
      ch->ring[i] = (comm->rank + i) % n;
  }
  channels_default_trees(comm);
  log_trees(comm);
  comm->scratch = aligned_alloc(4096, (size_t)(comm->n_channels + 1) * comm->tp.slot_bytes);
  if (comm->scratch == NULL)
    return MC_FAIL(ncclSystemError, "connect: allocating %zu bytes of scratch",
                   (size_t)(comm->n_channels + 1) * comm->tp.slot_bytes);
  if (n == 1)
    return ncclSuccess;
  MC_CHECK(mc_calloc(&reqs, (size_t)comm->n_channels * 2));
  for (int c = 0; c < comm->n_channels; c++) {
    struct mc_channel *ch = &comm->channels[c];
    reqs[n_reqs++] = (struct mc_conn_req){.peer = ch->next,
                                          .is_send = true,
                                          .channel = c,
                                          .conn_index = MC_CONN_RING,
                                          .conn = &ch->send};
    reqs[n_reqs++] = (struct mc_conn_req){.peer = ch->prev,
                                          .is_send = false,
                                          .channel = c,
                                          .conn_index = MC_CONN_RING,
                                          .conn = &ch->recv};
  }
  res = mc_transport_connect(&comm->tp, reqs, n_reqs);
  free(reqs);
  if (res == ncclSuccess)
    MC_INFO(MC_SUB_INIT, "Connected all rings, use ring PXN 0 GDR 0");
  return res;
}

void mc_comm_free_connections(struct ncclComm *comm)
{
  mc_tp_proxy_stop(&comm->tp);
  for (int c = 0; (comm->channels != NULL) && (c < comm->n_channels); c++) {
    mc_conn_free(&comm->channels[c].send);
    mc_conn_free(&comm->channels[c].recv);
    mc_conn_free(&comm->channels[c].tree_send_up);
    mc_conn_free(&comm->channels[c].tree_recv_up);
    for (int i = 0; i < MC_TREE_MAX_ARITY; i++) {
      mc_conn_free(&comm->channels[c].tree_send_down[i]);
      mc_conn_free(&comm->channels[c].tree_recv_down[i]);
    }
    free(comm->channels[c].ring);
  }
  free(comm->channels);
  comm->channels = NULL;
  comm->trees_connected = false;
  for (int r = 0; r < comm->n_ranks; r++) {
    if (comm->p2p_send != NULL) {
      mc_conn_free(comm->p2p_send[r]);
      free(comm->p2p_send[r]);
    }
    if (comm->p2p_recv != NULL) {
      mc_conn_free(comm->p2p_recv[r]);
      free(comm->p2p_recv[r]);
    }
  }
  free(comm->p2p_send);
  free(comm->p2p_recv);
  comm->p2p_send = comm->p2p_recv = NULL;
  for (int r = 0; (comm->os_send != NULL) && (r < comm->n_ranks); r++) {
    mc_conn_free(comm->os_send[r]);
    free(comm->os_send[r]);
    mc_conn_free(comm->os_recv[r]);
    free(comm->os_recv[r]);
  }
  free(comm->os_send);
  free(comm->os_recv);
  comm->os_send = comm->os_recv = NULL;
  free(comm->os_srcs);
  comm->os_srcs = NULL;
  mc_tp_comm_free(&comm->tp);
  free(comm->tp_peers);
  comm->tp_peers = NULL;
  free(comm->scratch);
  comm->scratch = NULL;
}
