/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Communicator init. Mirrors NCCL's ncclCommInitRankFunc and the first part
 * of initTransportsRank (init.cc):
 *   alloc -> bootstrap -> allgather of peer infos -> checks -> nodes and
 *   local ranks -> net -> topo -> graphs -> connect -> intra-node barrier ->
 *   "Init COMPLETE" with the timings.
 * Topology, channel search and transport connection plug in between the
 * peer-info stage and the final barrier (later stages keep the timers
 * topo, graphs and connections that NCCL reports).
 */
#include "comm.h"
#include "init_net.h"
#include "init_gather.h"
#include "init_topo.h"
#include "init_graphs.h"
#include "init_connect.h"
#include "init_group.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "crypto.h"
#include "topo/topo.h"
#include "log.h"
#include "params.h"
#include "registry.h"
#include "utils.h"

/* The allgather of peer infos (and TAG_PEERS + 1). */
#define TAG_PEERS (MC_BOOT_TAG_INTRANODE | 0x100)
/* Init's last barrier among the host's ranks (and TAG_HOST_BARRIER + 1). */
#define TAG_HOST_BARRIER (MC_BOOT_TAG_INTRANODE | 0x118)

ncclResult_t mc_comm_config_resolve(const ncclConfig_t *user, ncclConfig_t *resolved_out)
{
  ncclConfig_t def = NCCL_CONFIG_INITIALIZER;
  ncclConfig_t c = def;
  int64_t env_blocking = mc_param_int(MC_P_COMM_BLOCKING);

  if (user != NULL) {
    size_t bytes = user->size;
    if ((user->magic != NCCL_API_MAGIC) || (bytes < offsetof(ncclConfig_t, blocking)))
      return MC_FAIL(ncclInvalidArgument,
                     "ncclConfig_t argument not initialized via "
                     "NCCL_CONFIG_INITIALIZER (magic 0x%x, size %zu)",
                     user->magic, bytes);
    if (bytes > sizeof(c))
      bytes = sizeof(c);
    memcpy(&c, user, bytes);
    c.size = sizeof(c);
  }
  if (c.blocking == NCCL_CONFIG_UNDEF_INT)
    c.blocking = 1;
  if ((c.blocking != 0) && (c.blocking != 1))
    return MC_FAIL(ncclInvalidArgument, "ncclConfig_t.blocking is %d: must be 0 or 1", c.blocking);
  if (env_blocking != INT32_MIN)
    c.blocking = (int)env_blocking;
  if ((c.splitShare != NCCL_CONFIG_UNDEF_INT) && (c.splitShare != 0) && (c.splitShare != 1))
    return MC_FAIL(ncclInvalidArgument, "ncclConfig_t.splitShare is %d: must be 0 or 1",
                   c.splitShare);
  *resolved_out = c;
  return ncclSuccess;
}

ncclResult_t mc_comm_alloc(int n_ranks, const ncclUniqueId *id, int rank, int dev_requested,
                           const ncclConfig_t *config, enum mc_comm_init_kind kind,
                           struct ncclComm **comm_out)
{
  struct ncclComm *comm = NULL;

  MC_CHECK(mc_calloc(&comm, 1));
  comm->topo.paths_fd = -1;
  if (mc_registry_add(comm) != ncclSuccess) {
    free(comm);
    return ncclSystemError;
  }
  pthread_mutex_init(&comm->coll.redop_lock, NULL);
  pthread_mutex_init(&comm->mem.reg_lock, NULL);
  comm->rank = rank;
  comm->n_ranks = n_ranks;
  comm->dev = (dev_requested >= 0) ? dev_requested : 0;
  comm->dev_requested = dev_requested;
  comm->init_kind = kind;
  comm->id = *id;
  comm->comm_hash = mc_hash64(id->internal, sizeof(id->internal));
  comm->config = *config;
  comm->life.async_result = ncclInProgress;
  comm->t_start = mc_time_sec();
  *comm_out = comm;
  return ncclSuccess;
}

/* Once per process: NCCL_PROTO asks for a protocol meshccl does not have. */
static void say_protocols(const struct mc_algo_env *env)
{
  static int is_said;
  char text[320];

  if (!mc_algo_env_wants_gpu_proto(env) ||
      (__atomic_exchange_n(&is_said, 1, __ATOMIC_RELAXED) != 0))
    return;
  snprintf(text, sizeof(text),
           "NCCL_PROTO=%s: meshccl implements only Simple (LL and LL128 are GPU protocols): "
           "every collective uses Simple",
           mc_param_str(MC_P_PROTO));
  if (mc_log_enabled(MC_LOG_WARN, MC_SUB_ENV))
    MC_WARN("%s", text);
  else
    fprintf(stderr, "meshccl WARN ENV: %s\n", text);
}

ncclResult_t mc_comm_algo_env_load(struct ncclComm *comm)
{
  struct mc_algo_env env;

  if (comm->coll.algo_env_ready)
    return ncclSuccess;
  MC_CHECK(mc_algo_env_parse(mc_param_str(MC_P_ALGO), mc_param_str(MC_P_PROTO), &env));
  for (int k = 0; k < MC_COLL_KINDS; k++) {
    comm->coll.algo_allowed[k] = env.allowed[k];
    comm->coll.algo_protos[k] = env.protos[k];
  }
  say_protocols(&env);
  comm->coll.algo_env_ready = true;
  return ncclSuccess;
}

static const char *init_kind_name(enum mc_comm_init_kind kind)
{
  switch (kind) {
  case MC_INIT_ALL:
    return "ncclCommInitAll";
  case MC_INIT_SPLIT:
    return "ncclCommSplit";
  case MC_INIT_GROW:
    return "ncclCommGrow";
  default:
    return "ncclCommInitRank";
  }
}

static uint64_t shm_dev_id(void)
{
  struct stat st;

  return (stat("/dev/shm", &st) == 0) ? (uint64_t)st.st_dev : 0;
}

/* Stage: bootstrap network of this communicator. */
static ncclResult_t stage_bootstrap(struct ncclComm *comm)
{
  struct mc_boot_config cfg;
  struct mc_wait w =
      mc_boot_wait_make(mc_param_int(MC_P_INIT_TIMEOUT) * 1000, &comm->life.abort_flag);

  /* This process may host the root: ncclGetUniqueId here, or rank 0 with
   * NCCL_COMM_ID. ncclCommGrow hands over the reference of the parent's grow
   * id; with several roots, each one hosted here is held. */
  if (comm->bootstrap.n_ids > 1) {
    MC_CHECK(mc_calloc(&comm->bootstrap.id_roots, (size_t)comm->bootstrap.n_ids));
    for (int i = 0; i < comm->bootstrap.n_ids; i++)
      comm->bootstrap.id_roots[i] = mc_boot_root_claim(&comm->bootstrap.ids[i]);
  } else if (comm->bootstrap.root == NULL) {
    comm->bootstrap.root = mc_boot_root_claim(&comm->id);
  }
  mc_boot_id_say_open(&comm->id);
  if ((comm->bootstrap.n_ids <= 1) && (comm->bootstrap.root == NULL) && (comm->rank == 0) &&
      mc_boot_id_is_comm_id(&comm->id)) {
    MC_CHECK(mc_boot_root_start_comm_id(&comm->id, &w));
    comm->bootstrap.root = mc_boot_root_claim(&comm->id);
  }
  memset(&cfg, 0, sizeof(cfg));
  cfg.rank = comm->rank;
  cfg.n_ranks = comm->n_ranks;
  cfg.id = comm->id;
  cfg.n_ids = (comm->bootstrap.n_ids > 1) ? comm->bootstrap.n_ids : 1;
  cfg.ids = comm->bootstrap.ids;
  cfg.abort_flag = &comm->life.abort_flag;
  /* The root names missing ranks at MESHCCL_INIT_TIMEOUT; ranks wait a little
   * longer so that its report, not their own timeout, is what they return. */
  cfg.timeout_ms = mc_param_int(MC_P_INIT_TIMEOUT) * 1000 + 3000;
  return mc_boot_init(&cfg, &comm->bootstrap.boot);
}

bool mc_peer_same_pidns(const struct mc_peer_info *a, const struct mc_peer_info *b)
{
  return (a->host_hash == b->host_hash) && (a->pidns_ino != 0) && (a->pidns_ino == b->pidns_ino) &&
         (a->pidns_dev == b->pidns_dev);
}

/* comm->local_one_pidns, and one INFO line per local peer whose pid means
 * nothing here. */
static void pidns_note(struct ncclComm *comm)
{
  const struct mc_comm_nodes *nd = &comm->nodes;
  const struct mc_peer_info *me = &comm->peers[comm->rank];
  const struct mc_peer_info *first = &comm->peers[nd->local_rank_to_rank[0]];

  comm->local_one_pidns = true;
  for (int i = 0; i < nd->local_ranks; i++) {
    int r = nd->local_rank_to_rank[i];
    const struct mc_peer_info *p = &comm->peers[r];
    if (!mc_peer_same_pidns(first, p))
      comm->local_one_pidns = false;
    if ((r != comm->rank) && !mc_peer_same_pidns(me, p))
      MC_INFO(MC_SUB_INIT,
              "rank %d (pid %d) is in another PID namespace than rank %d (pid %d)%s: no CMA, no "
              "symmetric mapping, no pid liveness (a dead peer is found by its connections' "
              "errors and MESHCCL_NET_TIMEOUT)",
              r, p->pid, comm->rank, me->pid,
              ((p->pidns_ino == 0) || (me->pidns_ino == 0)) ? " or one of them is unknown" : "");
  }
}

/* What init_connect.c decides the FIFO size and the one-shot threshold from
 * (struct mc_peer_info): the caches of the CPU this thread runs on, read
 * under MESHCCL_SYSFS_ROOT as topology detection reads sysfs, the CPUs the
 * host gives its ranks (online, or the cgroup's quota when lower) and the
 * process's hand-off figures (measured once per process, about 2 ms at
 * most). The figures count only where the model decides: 3 or more ranks,
 * all on one host, no more than its CPUs (mc_tp_decide_oneshot), so that a
 * process of any other communicator (2 ranks, several hosts, ranks beyond
 * the CPUs: hundreds of ranks on a few cores) does not measure. */
static void peer_tuning_facts(const struct ncclComm *comm, struct mc_peer_info *me)
{
  const char *root = mc_param_str(MC_P_SYSFS_ROOT);
  int cpu = sched_getcpu();
  struct mc_host_figures host;

  mc_tp_cache_read((root != NULL) ? root : "/", (cpu >= 0) ? cpu : 0, &me->cache);
  mc_tp_host_figures_read("/sys/fs/cgroup", NULL, 0, &host);
  me->handoff.cpus = mc_tp_host_cpus(&host);
  if ((mc_param_int(MC_P_ONESHOT_BYTES) < 0) && (comm->n_ranks > 2) &&
      ((me->handoff.cpus == 0) || (comm->n_ranks <= me->handoff.cpus))) {
    int cpus = me->handoff.cpus;
    mc_tp_handoff_probe(&me->handoff, NULL);
    me->handoff.cpus = cpus;
  }
}

/* Stage: allgather of peer infos, checks, nodes and local ranks. */
static ncclResult_t stage_peers(struct ncclComm *comm)
{
  struct mc_peer_info *me;

  MC_CHECK(mc_calloc(&comm->peers, (size_t)comm->n_ranks));
  me = &comm->peers[comm->rank];
  me->rank = comm->rank;
  me->dev = comm->dev_requested;
  me->version = NCCL_VERSION_CODE;
  me->pid = (int32_t)getpid();
  me->host_hash = mc_host_hash() + comm->comm_hash;
  me->pid_hash = mc_pid_hash() + comm->comm_hash;
  me->shm_dev = shm_dev_id();
  mc_pidns_id(&me->pidns_ino, &me->pidns_dev);
  me->comm_ptr = (uint64_t)(uintptr_t)comm;
  mc_host_name(me->host, sizeof(me->host));
  snprintf(me->if_name, sizeof(me->if_name), "%s", mc_boot_ifc(comm->bootstrap.boot)->name);
  mc_sockaddr_str(&mc_boot_ifc(comm->bootstrap.boot)->addr, me->if_addr, sizeof(me->if_addr));
  me->if_addr[strcspn(me->if_addr, "<")] = '\0'; /* the interface's address, not a port */
  me->t_bootstrap = comm->t.bootstrap;
  me->paths_share = (int32_t)mc_param_int(MC_P_PATHS_SHARE);
  me->search_share = (int32_t)mc_param_int(MC_P_SEARCH_SHARE);
  peer_tuning_facts(comm, me);
  /* NCCL's bootstrapAllGather is the ring (mc_boot_allgather), whose n - 1
   * messages through every rank are most of the stage's time on a host with
   * many more ranks than cores (256 ranks on 2 cores: 65280 messages, about
   * 1 s); a gather to rank 0 and a binomial broadcast give every rank the same
   * array with 2 (n - 1) messages in all. */
  MC_CHECK(mc_comm_allgather_tree(comm, NULL, comm->n_ranks, comm->rank, comm->peers,
                                  sizeof(*comm->peers), TAG_PEERS));
  for (int i = 0; i < comm->n_ranks; i++) {
    comm->peers[i].host[MC_HOST_BYTES - 1] = '\0';
    comm->peers[i].if_name[sizeof(comm->peers[i].if_name) - 1] = '\0';
    comm->peers[i].if_addr[sizeof(comm->peers[i].if_addr) - 1] = '\0';
  }
  MC_CHECK(mc_comm_nodes_compute(comm->peers, comm->n_ranks, comm->rank, &comm->nodes));
  comm->dev = comm->nodes.dev[comm->rank];
  mc_log_set_thread_dev(comm->dev);
  MC_CHECK(mc_comm_peers_check(comm->peers, comm->nodes.dev, comm->n_ranks,
                               mc_param_int(MC_P_MULTI_RANK_GPU_ENABLE) != 0));
  pidns_note(comm);
  return ncclSuccess;
}

static void log_init_line(struct ncclComm *comm, const char *what)
{
  MC_INFO(MC_SUB_INIT,
          "%s comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId "
          "0x%llx - %s",
          init_kind_name(comm->init_kind), (void *)comm, comm->rank, comm->n_ranks, comm->dev,
          comm->dev, 0ul, (unsigned long long)comm->comm_hash, what);
}

static ncclResult_t init_stages(struct ncclComm *comm)
{
  const struct mc_comm_nodes *nd = &comm->nodes;
  double t0 = mc_time_sec();
  double sum;

  comm->t.alloc = t0 - comm->t_start;
  mc_fault_point("bootstrap");
  MC_CHECK(stage_bootstrap(comm));
  comm->t.bootstrap = mc_time_sec() - t0;
  t0 = mc_time_sec();
  mc_fault_point("peers");
  MC_CHECK(stage_peers(comm));
  comm->t.allgathers = mc_time_sec() - t0;
  if (comm->dev_requested < 0)
    log_init_line(comm, "Init START"); /* now that the device is known */
  /* After the bootstrap, so that a rank's bad value fails every rank's init
   * (the root's notice) instead of leaving them waiting for it. */
  MC_CHECK(mc_comm_algo_env_load(comm));
  MC_INFO(MC_SUB_INIT, "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d",
          (void *)comm, comm->rank, comm->n_ranks, nd->n_nodes, nd->local_ranks, nd->local_rank, 0);
  MC_INFO(MC_SUB_INIT | MC_SUB_BOOTSTRAP,
          "comm %p rank %d host %s device %d bootstrap interface "
          "%s",
          (void *)comm, comm->rank, comm->peers[comm->rank].host, comm->dev,
          mc_boot_ifc(comm->bootstrap.boot)->name);
  t0 = mc_time_sec();
  MC_CHECK(mc_comm_stage_net(comm));
  MC_CHECK(mc_comm_stage_topo(comm));
  comm->t.topo = mc_time_sec() - t0;
  t0 = mc_time_sec();
  MC_CHECK(mc_comm_stage_graphs(comm));
  comm->t.graphs = mc_time_sec() - t0;
  t0 = mc_time_sec();
  MC_CHECK(mc_comm_stage_connect(comm));
  comm->t.connections = mc_time_sec() - t0;
  MC_CHECK(mc_comm_barrier_tree(comm, nd->local_rank_to_rank, nd->local_ranks, nd->local_rank,
                                TAG_HOST_BARRIER));
  mc_comm_paths_close(comm); /* every local rank mapped the shared paths by now */
  comm->t.total = mc_time_sec() - comm->t_start;
  sum = comm->t.kernels + comm->t.alloc + comm->t.bootstrap + comm->t.allgathers + comm->t.topo +
        comm->t.graphs + comm->t.connections;
  comm->t.rest = comm->t.total - sum;
  return ncclSuccess;
}

/* After a local init failure, how long the root may take to say that another
 * rank failed first (its notice goes to every rank at once). */
#define ROOT_REASON_WAIT_MS 200

ncclResult_t mc_comm_init_run(struct ncclComm *comm)
{
  ncclResult_t res;

  mc_log_set_thread_dev(comm->dev);
  mc_error_clear_thread();
  mc_param_report_once();
  /* NCCL's line names the rank's device (cudaGetDevice). An automatic device
   * is resolved from every rank's peer info (resolve_devices): its line
   * comes once the device is known, after the bootstrap's lines, so that
   * "Init START" and "Init COMPLETE" name the same device. */
  if (comm->dev_requested >= 0)
    log_init_line(comm, "Init START");
  res = init_stages(comm);
  if (res != ncclSuccess) {
    char why[MC_LAST_ERROR_BYTES];
    mc_comm_paths_close(comm);
    /* When another rank failed first, the root's notice is the cause. */
    ncclResult_t first = mc_boot_root_reason(comm->bootstrap.boot, ROOT_REASON_WAIT_MS);
    if (first != ncclSuccess)
      res = first;
    mc_error_last_copy(why, sizeof(why));
    if (why[0] == '\0')
      snprintf(why, sizeof(why), "%s (%d)", ncclGetErrorString(res), (int)res);
    snprintf(comm->last_error, sizeof(comm->last_error), "%s", why);
    mc_boot_init_failed(comm->bootstrap.boot, res, why);
    /* Free the sockets now: peers see the failure at once, nothing lingers
     * until the user destroys the communicator. */
    mc_boot_destroy(comm->bootstrap.boot);
    comm->bootstrap.boot = NULL;
    /* The root (if this process hosts it) stays until the communicator is
     * destroyed, telling late ranks why the job failed. */
    MC_INFO(MC_SUB_INIT, "%s comm %p rank %d nranks %d - Init FAILED: %s",
            init_kind_name(comm->init_kind), (void *)comm, comm->rank, comm->n_ranks, why);
    __atomic_store_n(&comm->life.async_result, (int)res, __ATOMIC_RELEASE);
    return res;
  }
  mc_boot_init_done(comm->bootstrap.boot);
  log_init_line(comm, "Init COMPLETE");
  MC_INFO(MC_SUB_INIT | MC_SUB_PROFILE,
          "Init timings - %s: rank %d nranks %d total %.2f "
          "(kernels %.2f, alloc %.2f, bootstrap %.2f, allgathers %.2f, topo %.2f, graphs %.2f, "
          "connections %.2f, rest %.2f)",
          init_kind_name(comm->init_kind), comm->rank, comm->n_ranks, comm->t.total,
          comm->t.kernels, comm->t.alloc, comm->t.bootstrap, comm->t.allgathers, comm->t.topo,
          comm->t.graphs, comm->t.connections, comm->t.rest);
  __atomic_store_n(&comm->life.async_result, (int)ncclSuccess, __ATOMIC_RELEASE);
  return ncclSuccess;
}

void mc_comm_join_init(struct ncclComm *comm)
{
  if ((comm != NULL) && comm->life.has_init_thread) {
    pthread_join(comm->life.init_thread, NULL);
    comm->life.has_init_thread = false;
  }
}

void mc_comm_free(struct ncclComm *comm, int root_wait_ms)
{
  if (comm == NULL)
    return;
  /* First: from here on every API call that is given comm says it was destroyed. */
  mc_registry_release(comm);
  mc_group_forget(comm);
  mc_comm_paths_close(comm);
  mc_comm_free_connections(comm);
  /* After every connection: they are the net context's. */
  mc_comm_net_fini(comm);
  /* Reduction ops live as long as the communicator: a failed collective
   * frees the connections, and ncclRedOpDestroy may still come after it. */
  free(comm->coll.redops);
  comm->coll.redops = NULL;
  comm->coll.n_redops = 0;
  pthread_mutex_destroy(&comm->coll.redop_lock);
  mc_comm_regs_free(comm);
  pthread_mutex_destroy(&comm->mem.reg_lock);
  mc_boot_destroy(comm->bootstrap.boot);
  mc_boot_root_release(comm->bootstrap.root, root_wait_ms);
  for (int i = 0; (comm->bootstrap.id_roots != NULL) && (i < comm->bootstrap.n_ids); i++)
    mc_boot_root_release(comm->bootstrap.id_roots[i], root_wait_ms);
  free(comm->bootstrap.id_roots);
  if (comm->bootstrap.ids != NULL)
    mc_crypto_wipe(comm->bootstrap.ids,
                   (size_t)comm->bootstrap.n_ids * sizeof(*comm->bootstrap.ids));
  free(comm->bootstrap.ids);
  mc_boot_root_release(comm->bootstrap.grow_root, 0); /* nobody grew with it: stop it now */
  mc_comm_nodes_free(&comm->nodes);
  mc_topo_system_destroy(comm->topo.system);
  mc_topo_graph_fini(&comm->topo.ring_graph);
  mc_topo_graph_fini(&comm->topo.tree_graph);
  mc_topo_channels_fini(&comm->topo.graph);
  free(comm->peers);
  free(comm->coll.p2p_seq);
  mc_crypto_wipe(comm->net.secret, sizeof(comm->net.secret));
  free(comm);
}

/* ---------- nodes and local ranks ---------- */

void mc_comm_nodes_free(struct mc_comm_nodes *nd)
{
  free(nd->rank_to_node);
  free(nd->rank_to_local_rank);
  free(nd->node_first_rank);
  free(nd->node_n_ranks);
  free(nd->local_rank_to_rank);
  free(nd->dev);
  memset(nd, 0, sizeof(*nd));
}

/* Devices: explicit ones stay; automatic ones take the smallest index not
 * explicitly used on their node, in local-rank order. Linear in the ranks:
 * a node of k ranks hands out indices below k only (its j-th automatic rank
 * gets the j-th index no explicit one holds), so k flags tell which are free. */
static ncclResult_t resolve_devices(const struct mc_peer_info *peers, int n_ranks,
                                    struct mc_comm_nodes *nd)
{
  int *order = NULL; /* ranks by node, each node's in rank order */
  int *start = NULL; /* [n_nodes + 1]: where each node's ranks begin in order */
  bool *used = NULL; /* [n_ranks]: explicit indices of the node being resolved */
  ncclResult_t res = ncclSuccess;

  MC_CHECK_GOTO(mc_calloc(&order, (size_t)n_ranks), res, out);
  MC_CHECK_GOTO(mc_calloc(&start, (size_t)nd->n_nodes + 1), res, out);
  MC_CHECK_GOTO(mc_calloc(&used, (size_t)n_ranks), res, out);
  for (int node = 0; node < nd->n_nodes; node++)
    start[node + 1] = start[node] + nd->node_n_ranks[node];
  for (int r = 0; r < n_ranks; r++)
    order[start[nd->rank_to_node[r]] + nd->rank_to_local_rank[r]] = r;
  for (int node = 0; node < nd->n_nodes; node++) {
    const int *ranks = order + start[node];
    int k = nd->node_n_ranks[node];
    int next_free = 0;

    for (int i = 0; i < k; i++) {
      if ((peers[ranks[i]].dev >= 0) && (peers[ranks[i]].dev < k))
        used[peers[ranks[i]].dev] = true;
    }
    for (int i = 0; i < k; i++) {
      int r = ranks[i];
      if (peers[r].dev >= 0) {
        nd->dev[r] = peers[r].dev;
        continue;
      }
      while (used[next_free])
        next_free++;
      nd->dev[r] = next_free++;
    }
    memset(used, 0, (size_t)k * sizeof(*used));
  }
out:
  free(order);
  free(start);
  free(used);
  return res;
}

ncclResult_t mc_comm_nodes_compute(const struct mc_peer_info *peers, int n_ranks, int my_rank,
                                   struct mc_comm_nodes *nodes_out)
{
  struct mc_comm_nodes nd;
  ncclResult_t res = ncclSuccess;

  memset(&nd, 0, sizeof(nd));
  MC_CHECK_GOTO(mc_calloc(&nd.rank_to_node, (size_t)n_ranks), res, fail);
  MC_CHECK_GOTO(mc_calloc(&nd.rank_to_local_rank, (size_t)n_ranks), res, fail);
  MC_CHECK_GOTO(mc_calloc(&nd.node_first_rank, (size_t)n_ranks), res, fail);
  MC_CHECK_GOTO(mc_calloc(&nd.node_n_ranks, (size_t)n_ranks), res, fail);
  MC_CHECK_GOTO(mc_calloc(&nd.dev, (size_t)n_ranks), res, fail);
  /* Nodes in order of their first rank (NCCL numbers them the same way). */
  for (int r = 0; r < n_ranks; r++) {
    int node = -1;
    for (int k = 0; k < nd.n_nodes; k++) {
      if (peers[nd.node_first_rank[k]].host_hash == peers[r].host_hash) {
        node = k;
        break;
      }
    }
    if (node < 0) {
      node = nd.n_nodes++;
      nd.node_first_rank[node] = r;
    }
    nd.rank_to_node[r] = node;
    nd.rank_to_local_rank[r] = nd.node_n_ranks[node]++;
    if (nd.node_n_ranks[node] > nd.max_local_ranks)
      nd.max_local_ranks = nd.node_n_ranks[node];
  }
  nd.local_rank = nd.rank_to_local_rank[my_rank];
  nd.local_ranks = nd.node_n_ranks[nd.rank_to_node[my_rank]];
  MC_CHECK_GOTO(mc_calloc(&nd.local_rank_to_rank, (size_t)nd.local_ranks), res, fail);
  for (int r = 0; r < n_ranks; r++) {
    if (nd.rank_to_node[r] == nd.rank_to_node[my_rank])
      nd.local_rank_to_rank[nd.rank_to_local_rank[r]] = r;
  }
  MC_CHECK_GOTO(resolve_devices(peers, n_ranks, &nd), res, fail);
  *nodes_out = nd;
  return ncclSuccess;

fail:
  mc_comm_nodes_free(&nd);
  return res;
}

struct host_dev {
  uint64_t host_hash;
  int dev;
  int rank;
};

static int host_dev_cmp(const void *a, const void *b)
{
  const struct host_dev *x = a;
  const struct host_dev *y = b;

  if (x->host_hash != y->host_hash)
    return (x->host_hash < y->host_hash) ? -1 : 1;
  if (x->dev != y->dev)
    return (x->dev < y->dev) ? -1 : 1;
  return (x->rank > y->rank) - (x->rank < y->rank);
}

/* No two ranks of a host on one device. Sorted by host, device and rank, the
 * ranks that share a device are neighbours, the lowest first; the pair
 * reported is the one a scan of every pair in rank order finds first: the
 * lowest rank that shares, with the next rank on its device (a later pair of
 * the same device starts at a higher rank, so it never replaces it). */
static ncclResult_t check_devices_unique(const struct mc_peer_info *peers, const int *devs,
                                         int n_ranks)
{
  struct host_dev *hd = NULL;
  int r = -1;
  int q = -1;

  MC_CHECK(mc_calloc(&hd, (size_t)n_ranks));
  for (int i = 0; i < n_ranks; i++)
    hd[i] = (struct host_dev){.host_hash = peers[i].host_hash, .dev = devs[i], .rank = i};
  qsort(hd, (size_t)n_ranks, sizeof(*hd), host_dev_cmp);
  for (int i = 1; i < n_ranks; i++) {
    if ((hd[i].host_hash == hd[i - 1].host_hash) && (hd[i].dev == hd[i - 1].dev) &&
        ((r < 0) || (hd[i - 1].rank < r))) {
      r = hd[i - 1].rank;
      q = hd[i].rank;
    }
  }
  free(hd);
  if (r < 0)
    return ncclSuccess;
  return MC_FAIL(ncclInvalidUsage,
                 "Multiple ranks are using the same device: rank %d "
                 "(pid %d) and rank %d (pid %d) on host %s both use device %d. Give each "
                 "rank its own device (ncclCommInitAll devlist, meshcclSetDevice, "
                 "MESHCCL_DEVICE) or set NCCL_MULTI_RANK_GPU_ENABLE=1",
                 r, peers[r].pid, q, peers[q].pid, peers[r].host, devs[r]);
}

ncclResult_t mc_comm_peers_check(const struct mc_peer_info *peers, const int *devs, int n_ranks,
                                 bool allow_shared_dev)
{
  for (int r = 0; r < n_ranks; r++) {
    if (peers[r].version != peers[0].version)
      return MC_FAIL(ncclInvalidUsage,
                     "Mismatched NCCL version detected : rank %d version %d rank "
                     "%d version %d (host %s pid %d runs a different libmeshccl)",
                     0, peers[0].version, r, peers[r].version, peers[r].host, peers[r].pid);
  }
  if (allow_shared_dev)
    return ncclSuccess;
  return check_devices_unique(peers, devs, n_ranks);
}
