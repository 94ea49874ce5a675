/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Init stage "connect": the transports' view of every rank, the channels of
 * stage "graphs" (each channel's ring order from NCCL's connectRings and its
 * tree from connectTrees, src/graph/connect.cc), and one send and one
 * receive ring connection per channel, each over P2P, SHM or NET as the
 * receiving rank chooses. Tree and point-to-point connections are made at
 * first use (mc_comm_tree_conn_reqs gives the tree's). Init's connections
 * must be up by the init deadline (MESHCCL_INIT_TIMEOUT); a rank whose own
 * set-up failed is named by the bootstrap root's notice (transport.c).
 */
#include "init_connect.h"

#include "comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "init_gather.h"
#include "log.h"
#include "net/net.h"
#include "params.h"
#include "topo/topo_graph.h"
#include "transport/tp_decide.h"

/* The peer info of the host's first local rank, whose figures every local
 * rank decides from, so that all of them decide alike. */
static const struct mc_peer_info *host_first(const struct ncclComm *comm)
{
  return &comm->peers[comm->nodes.local_rank_to_rank[0]];
}

/* NCCL_BUFFSIZE when set; else NCCL's 4 MiB for a communicator that spans
 * hosts and, when every rank is on one host, mc_tp_decide_fifo's size for
 * the caches of the host's first local rank's CPU (struct mc_peer_info) and
 * the two connections per channel each rank keeps busy. There the FIFOs are
 * host memory beside the data, every byte crosses them, and FIFOs that stay
 * in the caches move more (docs/design/datapath.md, Data path). The ranks of
 * a communicator agree on it: they see the same hosts and the same first
 * local rank. */
static size_t fifo_bytes(const struct ncclComm *comm, char *why, size_t why_bytes)
{
  const struct mc_cache_facts *c = &host_first(comm)->cache;
  int hot = 2 * comm->topo.graph.n_channels;
  size_t bytes;

  if (mc_param_source(MC_P_BUFFSIZE) != MC_PARAM_SRC_DEFAULT) {
    snprintf(why, why_bytes, "NCCL_BUFFSIZE");
    return (size_t)mc_param_int(MC_P_BUFFSIZE);
  }
  if (comm->nodes.n_nodes > 1) {
    snprintf(why, why_bytes, "NCCL's, the ranks span %d hosts", comm->nodes.n_nodes);
    return (size_t)mc_param_int(MC_P_BUFFSIZE);
  }
  bytes = mc_tp_decide_fifo(c, hot);
  if (c->l2_kib <= 0)
    snprintf(why, why_bytes, "no L2 cache described for CPU %d of local rank 0", c->cpu);
  else
    snprintf(why, why_bytes,
             "L2 %d KiB per core (CPU %d of local rank 0: %d KiB shared by %d; last level L%d "
             "%d KiB shared by %d), 2 connections per channel x %d channels in %d x L2",
             c->l2_kib / ((c->l2_sharing > 0) ? c->l2_sharing : 1), c->cpu, c->l2_kib,
             c->l2_sharing, c->llc_level, c->llc_kib, c->llc_sharing, hot / 2, MC_FIFO_L2_SHARE);
  return bytes;
}

/* The largest all-reduce that goes one-shot (coll_oneshot.c): an explicit
 * MESHCCL_ALLREDUCE_ONESHOT_BYTES, else mc_tp_decide_oneshot's crossover
 * for the hand-off figures of the host's first local rank's process, up to
 * what the one-shot's slots take (n inputs in one ring slot). */
static size_t oneshot_bytes(const struct ncclComm *comm, size_t slot_bytes, char *why,
                            size_t why_bytes)
{
  const struct mc_handoff_figures *f = &host_first(comm)->handoff;
  int64_t set = mc_param_int(MC_P_ONESHOT_BYTES);
  size_t limit = (slot_bytes / (size_t)comm->n_ranks) & ~(size_t)63;

  if (set >= 0) {
    snprintf(why, why_bytes, "MESHCCL_ALLREDUCE_ONESHOT_BYTES");
    return (size_t)set;
  }
  if ((comm->nodes.n_nodes > 1) || (comm->n_ranks < 2)) {
    snprintf(why, why_bytes, "not one host of several ranks");
    return 0;
  }
  if (limit > MC_ONESHOT_MAX_BYTES)
    limit = MC_ONESHOT_MAX_BYTES;
  if (comm->n_ranks == 2)
    snprintf(why, why_bytes,
             "2 ranks: the ring's bytes with one hand-off instead of two, up to what its slots "
             "take: %zu (slots of %zu)",
             limit, slot_bytes);
  else if ((f->cpus > 0) && (comm->n_ranks > f->cpus))
    snprintf(why, why_bytes,
             "%d ranks on %d CPUs: every hand-off of the ring waits for the scheduler, the "
             "one-shot up to what its slots take: %zu (slots of %zu)",
             comm->n_ranks, f->cpus, limit, slot_bytes);
  else if ((f->handoff_ns <= 0) || (f->copy_gbps <= 0))
    snprintf(why, why_bytes, "local rank 0's hand-off probe gave no figures: the model's floor");
  else
    snprintf(why, why_bytes,
             "model for %d ranks: hand-off %.0f ns, copy %.1f GB/s (local rank 0's probe), at "
             "most %zu (slots of %zu)",
             comm->n_ranks, (double)f->handoff_ns, (double)f->copy_gbps, limit, slot_bytes);
  return mc_tp_decide_oneshot(comm->n_ranks, f, limit);
}

/* The output size from which out-of-place operations write what they receive
 * with streaming stores: MESHCCL_STREAM_OUT_BYTES, else one core's L2 (the
 * host's first local rank's CPU, as the FIFO's size). */
static size_t stream_out_bytes(const struct ncclComm *comm, char *why, size_t why_bytes)
{
  const struct mc_cache_facts *c = &host_first(comm)->cache;
  int64_t set = mc_param_int(MC_P_STREAM_OUT_BYTES);

  if (set >= 0) {
    snprintf(why, why_bytes, "MESHCCL_STREAM_OUT_BYTES");
    return (size_t)set;
  }
  if (c->l2_kib <= 0)
    snprintf(why, why_bytes, "no L2 cache described for CPU %d of local rank 0", c->cpu);
  else
    snprintf(why, why_bytes, "the L2 of one core");
  return mc_tp_decide_stream_out(c);
}

/* "1 MiB", "256 KiB", "1000 B" */
static void size_str(size_t b, char *buf, size_t len)
{
  if ((b >= (1u << 20)) && ((b & ((1u << 20) - 1)) == 0))
    snprintf(buf, len, "%zu MiB", b >> 20);
  else if ((b >= 1024) && ((b & 1023) == 0))
    snprintf(buf, len, "%zu KiB", b >> 10);
  else
    snprintf(buf, len, "%zu B", b);
}

/* The connections' slot size, the one-shot's threshold and the streamed
 * outputs', said once per rank at NCCL_DEBUG_SUBSYS=TUNING with what they
 * came from. */
static void tune(const struct ncclComm *comm, struct mc_tp_comm *tc)
{
  char fifo_why[256];
  char os_why[200];
  char so_why[96];
  char fifo_s[32];
  char os_s[32];
  char so_s[32];
  char sc_s[32];
  char probe[200] = "";
  struct mc_handoff_figures hf;
  struct mc_handoff_info hi;
  size_t fifo = fifo_bytes(comm, fifo_why, sizeof(fifo_why));

  tc->slot_bytes = (fifo / MC_STEPS) & ~(size_t)63;
  tc->oneshot_bytes = oneshot_bytes(comm, tc->slot_bytes, os_why, sizeof(os_why));
  tc->stream_out_bytes = stream_out_bytes(comm, so_why, sizeof(so_why));
  tc->sym_chunk_bytes = mc_tp_decide_sym_chunk(&host_first(comm)->cache, comm->nodes.local_ranks);
  size_str(fifo, fifo_s, sizeof(fifo_s));
  size_str(tc->oneshot_bytes, os_s, sizeof(os_s));
  size_str(tc->stream_out_bytes, so_s, sizeof(so_s));
  size_str(tc->sym_chunk_bytes, sc_s, sizeof(sc_s));
  if (mc_tp_handoff_probe_peek(&hf, &hi))
    snprintf(probe, sizeof(probe), "; this process's hand-off probe: %.2f ms on CPUs %d and %d%s%s",
             hi.ms, hi.cpu_a, hi.cpu_b, (hi.why[0] != '\0') ? ", no figures: " : "", hi.why);
  MC_INFO(MC_SUB_TUNING,
          "rank %d: FIFO %s per connection (%s); one-shot all-reduce up to %s (%s%s); "
          "out-of-place outputs %s%s written with streaming stores (%s); symmetric all-reduce "
          "in chunks of %s (one core's L2 / (%d ranks + 2), at least 32 KiB)",
          comm->rank, fifo_s, fifo_why, os_s, os_why, probe,
          (tc->stream_out_bytes > 0) ? "from " : "never", (tc->stream_out_bytes > 0) ? so_s : "",
          so_why, sc_s, comm->nodes.local_ranks);
}

static ncclResult_t tp_init(struct ncclComm *comm)
{
  struct mc_tp_comm *tc = &comm->data.tp;

  MC_CHECK(mc_calloc(&comm->data.tp_peers, (size_t)comm->n_ranks));
  for (int r = 0; r < comm->n_ranks; r++) {
    const struct mc_peer_info *p = &comm->peers[r];
    comm->data.tp_peers[r] =
        (struct mc_tp_peer){.pid = p->pid,
                            .host_hash = p->host_hash,
                            .pid_hash = p->pid_hash,
                            .shm_dev = p->shm_dev,
                            .canary = p->comm_ptr,
                            .same_pidns = mc_peer_same_pidns(&comm->peers[comm->rank], p)};
  }
  memset(tc, 0, sizeof(*tc));
  tc->boot = comm->bootstrap.boot;
  tc->rank = comm->rank;
  tc->n_ranks = comm->n_ranks;
  tc->peers = comm->data.tp_peers;
  tc->topo = comm->topo.system;
  tc->comm_hash = comm->comm_hash;
  tc->abort_flag = &comm->life.abort_flag;
  tune(comm, tc);
  /* The net and context of stage "net": the topology's NET devices are its own. */
  tc->net = comm->net.ops;
  tc->net_ctx = comm->net.ctx;
  /* Now with the virtual devices the topology stage fused, if any. */
  MC_CHECK(comm->net.ops->devices(comm->net.ctx, &tc->net_ndev));
  tc->net_secret = comm->net.secret;
  MC_CHECK(mc_calloc(&comm->coll.p2p_send, (size_t)comm->n_ranks));
  MC_CHECK(mc_calloc(&comm->coll.p2p_recv, (size_t)comm->n_ranks));
  return ncclSuccess;
}

/* Waiting ranks spin while every rank of the host has a CPU; otherwise they
 * yield at once so that the rank they wait for can run. The CPUs are the
 * host's online ones, or the container's cgroup quota when lower
 * (mc_tp_decide_spin): not this rank's affinity mask, which holds one CPU
 * for a rank pinned by mpirun --bind-to core or taskset while the host's
 * other cores run the other ranks. */
static int spin_passes(const struct ncclComm *comm, const struct mc_host_figures *f)
{
  int cpus = 0;
  int passes = mc_tp_decide_spin(f, &cpus);

  MC_INFO(MC_SUB_TUNING,
          "rank %d: waiting ranks %s (%d idle passes before yielding): %d local ranks on %d "
          "CPUs (online %d, cgroup quota %d, this rank's affinity %d)",
          comm->rank, (passes == MC_SPIN_PASSES_SPIN) ? "spin" : "yield", passes, f->local_ranks,
          cpus, f->online_cpus, f->quota_cpus, f->affinity_cpus);
  return passes;
}

int mc_comm_tree_conn_reqs(struct ncclComm *comm, struct mc_conn_req *reqs)
{
  int n = 0;

  for (int c = 0; c < comm->data.n_channels; c++) {
    struct mc_channel *ch = &comm->data.channels[c];
    for (int i = -1; i < MC_TREE_MAX_ARITY; i++) {
      int peer = (i < 0) ? ch->tree_up : ch->tree_down[i];
      struct mc_conn *sc = (i < 0) ? &ch->tree_send_up : &ch->tree_send_down[i];
      struct mc_conn *rc = (i < 0) ? &ch->tree_recv_up : &ch->tree_recv_down[i];
      if (peer < 0)
        continue;
      if (reqs != NULL) {
        int dev = -1;
        /* Between nodes, the NIC the tree search chose for this channel. */
        mc_topo_graph_net_dev(comm->topo.system, &comm->topo.tree_graph, comm->rank, c, &dev);
        reqs[n] = (struct mc_conn_req){.peer = peer,
                                       .is_send = true,
                                       .channel = c,
                                       .conn_index = MC_CONN_TREE,
                                       .conn = sc,
                                       .has_net_dev = (dev >= 0),
                                       .net_dev = dev};
        reqs[n + 1] = (struct mc_conn_req){.peer = peer,
                                           .is_send = false,
                                           .channel = c,
                                           .conn_index = MC_CONN_TREE,
                                           .conn = rc,
                                           .has_net_dev = (dev >= 0),
                                           .net_dev = dev};
      }
      n += 2;
    }
  }
  return n;
}

/* Threads that run this rank's channels (mc_tp_decide_threads): the host's
 * idle cores shared among its local ranks, at most the channels, unless
 * MESHCCL_NTHREADS says. */
static int n_threads(const struct ncclComm *comm, const struct mc_host_figures *f)
{
  int forced = (int)mc_param_int(MC_P_NTHREADS);
  int idle = 0;
  int k = mc_tp_decide_threads(f, comm->data.n_channels, forced, &idle);

  MC_INFO(MC_SUB_TUNING,
          "rank %d: %d thread(s) run its %d channel(s)%s: %d local ranks, %d idle CPUs (online "
          "%d, cgroup quota %d, this rank's affinity %d)",
          comm->rank, k, comm->data.n_channels, (forced >= 1) ? " (MESHCCL_NTHREADS)" : "",
          f->local_ranks, idle, f->online_cpus, f->quota_cpus, f->affinity_cpus);
  return k;
}

#define TAG_HOST_CMA (MC_BOOT_TAG_INTRANODE | 0x120)

/* What a host's first local rank sends the others: its P2P/CMA figures. */
struct host_cma_msg {
  int32_t measured; /* 0: not measured there (each rank measures its own when it needs them) */
  int32_t rank;
  struct mc_cma_figures f;
};

/*
 * The P2P/CMA probe's figures (tp_cma.c) are the host's: its first local rank
 * measures them, when its settings leave the choice to the probe, and sends
 * them down the host's tree; the others adopt them instead of measuring
 * (about 3 ms of CPU each; at 256 ranks on 2 cores, 0.85 s of the init's 3 s
 * and 0.4 s of its 1.55 s wall). Only where the local ranks are more than one
 * process: the ranks agree on that from the gathered pids.
 */
static ncclResult_t host_cma_share(struct ncclComm *comm)
{
  const struct mc_comm_nodes *nd = &comm->nodes;
  struct host_cma_msg msg;
  bool processes = false;

  for (int i = 1; i < nd->local_ranks; i++)
    if (comm->peers[nd->local_rank_to_rank[i]].pid != host_first(comm)->pid)
      processes = true;
  if (!processes)
    return ncclSuccess;
  memset(&msg, 0, sizeof(msg));
  if ((nd->local_rank == 0) && mc_tp_cma_by_probe() && (mc_param_int(MC_P_P2P_DISABLE) == 0)) {
    const char *why;
    mc_tp_cma_measure(&msg.f, &why);
    msg.measured = (why == NULL);
    msg.rank = comm->rank;
  }
  MC_CHECK(mc_comm_bcast_tree(comm, nd->local_rank_to_rank, nd->local_ranks, nd->local_rank, &msg,
                              sizeof(msg), TAG_HOST_CMA));
  if ((nd->local_rank == 0) || !msg.measured)
    return ncclSuccess;
  if ((msg.rank != nd->local_rank_to_rank[0]) || (msg.f.n_sizes < 0) ||
      (msg.f.n_sizes > MC_CMA_MAX_SIZES))
    return MC_FAIL(ncclRemoteError,
                   "connect: rank %d sent P2P/CMA figures of %d step sizes as rank %d (at most "
                   "%d)",
                   nd->local_rank_to_rank[0], (int)msg.f.n_sizes, (int)msg.rank, MC_CMA_MAX_SIZES);
  mc_tp_cma_adopt(&msg.f, msg.rank);
  return ncclSuccess;
}

ncclResult_t mc_comm_stage_connect(struct ncclComm *comm)
{
  struct mc_host_figures host;
  struct mc_conn_req *reqs = NULL;
  int n = comm->n_ranks;
  int n_reqs = 0;
  ncclResult_t res;

  MC_CHECK(host_cma_share(comm));
  MC_CHECK(tp_init(comm));
  /* The pid in a segment's name is its creator's in its own PID namespace:
   * only where every local rank shares this one does "no such pid" mean
   * that the creator is gone. */
  if ((comm->nodes.local_rank == 0) && comm->local_one_pidns)
    mc_tp_collect_orphans();
  /* The host's CPUs as spinning and threads per rank count them, read once. */
  mc_tp_host_figures_read("/sys/fs/cgroup", NULL, comm->nodes.local_ranks, &host);
  comm->data.spin_passes = spin_passes(comm, &host);
  /* The channels of stage_graphs: ring orders and NCCL's double binary tree. */
  comm->data.n_channels = comm->topo.graph.n_channels;
  if ((comm->data.n_channels < 1) || (comm->data.n_channels > MC_MAX_CHANNELS) ||
      (comm->topo.graph.n_ranks != n))
    return MC_FAIL(ncclInternalError, "connect: %d channels over %d ranks from the graph stage",
                   comm->data.n_channels, comm->topo.graph.n_ranks);
  comm->data.n_threads = n_threads(comm, &host);
  MC_CHECK(mc_calloc(&comm->data.channels, (size_t)comm->data.n_channels));
  for (int c = 0; c < comm->data.n_channels; c++) {
    struct mc_channel *ch = &comm->data.channels[c];
    const struct mc_topo_channel *g = &comm->topo.graph.channels[c];
    ch->id = c;
    ch->prev = g->ring_prev;
    ch->next = g->ring_next;
    MC_CHECK(mc_calloc(&ch->ring, (size_t)n));
    memcpy(ch->ring, comm->topo.graph.rings + (size_t)c * (size_t)n, (size_t)n * sizeof(int));
    ch->tree_up = g->tree_up;
    for (int i = 0; i < MC_TREE_MAX_ARITY; i++)
      ch->tree_down[i] = g->tree_down[i];
  }
  comm->data.scratch =
      aligned_alloc(4096, (size_t)(comm->data.n_channels + 1) * comm->data.tp.slot_bytes);
  if (comm->data.scratch == NULL)
    return MC_FAIL(ncclSystemError, "connect: allocating %zu bytes of scratch",
                   (size_t)(comm->data.n_channels + 1) * comm->data.tp.slot_bytes);
  if (n == 1)
    return ncclSuccess;
  MC_CHECK(mc_calloc(&reqs, (size_t)comm->data.n_channels * 2));
  for (int c = 0; c < comm->data.n_channels; c++) {
    struct mc_channel *ch = &comm->data.channels[c];
    int dev = -1;
    /* Between nodes, the NIC the ring search chose for this channel. */
    mc_topo_graph_net_dev(comm->topo.system, &comm->topo.ring_graph, comm->rank, c, &dev);
    reqs[n_reqs++] = (struct mc_conn_req){.peer = ch->next,
                                          .is_send = true,
                                          .channel = c,
                                          .conn_index = MC_CONN_RING,
                                          .conn = &ch->send,
                                          .has_net_dev = (dev >= 0),
                                          .net_dev = dev};
    reqs[n_reqs++] = (struct mc_conn_req){.peer = ch->prev,
                                          .is_send = false,
                                          .channel = c,
                                          .conn_index = MC_CONN_RING,
                                          .conn = &ch->recv,
                                          .has_net_dev = (dev >= 0),
                                          .net_dev = dev};
  }
  /* Init's connections are bounded by the init deadline (MESHCCL_INIT_TIMEOUT
   * from the start of init), not by a fresh timeout of their own. */
  comm->data.tp.setup_dl.span_ms = mc_param_int(MC_P_INIT_TIMEOUT) * 1000;
  comm->data.tp.setup_dl.at_ns =
      (uint64_t)(comm->t_start * 1e9) + (uint64_t)comm->data.tp.setup_dl.span_ms * 1000000ull;
  comm->data.tp.has_setup_dl = true;
  res = mc_transport_connect(&comm->data.tp, reqs, n_reqs);
  comm->data.tp.has_setup_dl = false; /* later connections: the bootstrap's operation timeout */
  free(reqs);
  if (res == ncclSuccess)
    MC_INFO(MC_SUB_INIT, "Connected all rings, use ring PXN 0 GDR 0");
  return res;
}

/* An aborted communicator tells the peers that share its connections'
 * control words (P2P, SHM) before it closes them. */
static void post_aborts(struct ncclComm *comm)
{
  for (int c = 0; (comm->data.channels != NULL) && (c < comm->data.n_channels); c++) {
    struct mc_channel *ch = &comm->data.channels[c];
    mc_conn_post_abort(&ch->send, comm->rank);
    mc_conn_post_abort(&ch->recv, comm->rank);
    mc_conn_post_abort(&ch->tree_send_up, comm->rank);
    mc_conn_post_abort(&ch->tree_recv_up, comm->rank);
    for (int i = 0; i < MC_TREE_MAX_ARITY; i++) {
      mc_conn_post_abort(&ch->tree_send_down[i], comm->rank);
      mc_conn_post_abort(&ch->tree_recv_down[i], comm->rank);
    }
  }
  for (int r = 0; r < comm->n_ranks; r++) {
    if (comm->coll.p2p_send != NULL)
      mc_conn_post_abort(comm->coll.p2p_send[r], comm->rank);
    if (comm->coll.p2p_recv != NULL)
      mc_conn_post_abort(comm->coll.p2p_recv[r], comm->rank);
  }
}

void mc_comm_free_connections(struct ncclComm *comm)
{
  bool aborted = __atomic_load_n(&comm->life.is_aborted, __ATOMIC_ACQUIRE);

  if (aborted)
    post_aborts(comm);
  if (comm->coll.workers_free != NULL)
    comm->coll.workers_free(comm);
  if (comm->coll.algo_states_free != NULL)
    comm->coll.algo_states_free(comm, aborted);
  mc_tp_proxy_stop(&comm->data.tp);
  for (int c = 0; (comm->data.channels != NULL) && (c < comm->data.n_channels); c++) {
    mc_conn_free(&comm->data.channels[c].send);
    mc_conn_free(&comm->data.channels[c].recv);
    mc_conn_free(&comm->data.channels[c].tree_send_up);
    mc_conn_free(&comm->data.channels[c].tree_recv_up);
    for (int i = 0; i < MC_TREE_MAX_ARITY; i++) {
      mc_conn_free(&comm->data.channels[c].tree_send_down[i]);
      mc_conn_free(&comm->data.channels[c].tree_recv_down[i]);
    }
    free(comm->data.channels[c].ring);
  }
  free(comm->data.channels);
  comm->data.channels = NULL;
  for (int r = 0; r < comm->n_ranks; r++) {
    if (comm->coll.p2p_send != NULL) {
      mc_conn_free(comm->coll.p2p_send[r]);
      free(comm->coll.p2p_send[r]);
    }
    if (comm->coll.p2p_recv != NULL) {
      mc_conn_free(comm->coll.p2p_recv[r]);
      free(comm->coll.p2p_recv[r]);
    }
  }
  free(comm->coll.p2p_send);
  free(comm->coll.p2p_recv);
  comm->coll.p2p_send = comm->coll.p2p_recv = NULL;
  mc_tp_comm_free(&comm->data.tp);
  free(comm->data.tp_peers);
  comm->data.tp_peers = NULL;
  free(comm->data.scratch);
  comm->data.scratch = NULL;
}
