/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The communicator object and its lifecycle: allocation, the init job (a
 * sequence of stages, each a function with a clear input and output),
 * group-deferred and non-blocking execution, destruction. The public API
 * (init_api.c) is a thin layer over these functions.
 */
#ifndef MC_INIT_COMM_H
#define MC_INIT_COMM_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "nccl.h"
#include "bootstrap/bootstrap.h"
#include "net/net.h"
#include "topo/topo_graph.h"
#include "topo/topo_algo.h"
#include "topo/topo_tuning.h"
#include "transport/transport.h"
#include "transport/tp_decide.h"
#include "init/init_mem.h"

#define MC_HOST_BYTES        64
#define MC_LAST_ERROR_BYTES  1024
#define MC_COMM_ROOT_WAIT_MS 1000 /* destroy: how long the root may still serve others */
/* Abort: how long it waits for the threads using the communicator to leave
 * it before it leaves the free to the last of them. */
#define MC_COMM_ABORT_WAIT_MS 5000

/* What every rank publishes in the first allgather (NCCL's ncclPeerInfo, host edition). */
struct mc_peer_info {
  int32_t rank;
  int32_t dev;     /* device index; -1 = not chosen (auto) */
  int32_t version; /* NCCL_VERSION_CODE */
  int32_t pid;
  uint64_t host_hash; /* host identity + commHash */
  uint64_t pid_hash;  /* process identity + commHash */
  uint64_t shm_dev;   /* st_dev of /dev/shm */
  /* Its PID namespace (mc_pidns_id; 0 and 0: unknown). Its pid means the
   * same process here only when both are this rank's (mc_peer_same_pidns):
   * containers sharing /dev/shm, host name and boot id (docker --ipc=host
   * --net=host) are one host to the host hash, yet each has its own pids. */
  uint64_t pidns_ino;
  uint64_t pidns_dev;
  uint64_t comm_ptr; /* for ranks of one process */
  char host[MC_HOST_BYTES];
  char if_name[16]; /* bootstrap interface, for reports */
  char if_addr[48];
  double t_bootstrap; /* seconds this rank spent in its bootstrap */
  /* Its MESHCCL_PATHS_SHARE and MESHCCL_SEARCH_SHARE: every rank of a host
   * follows its first local rank's, so that all take part in the same
   * host-wide exchanges whatever their own environment says. */
  int32_t paths_share;
  int32_t search_share;
  /* The caches of the CPU it initialised on and its process's hand-off
   * figures: every rank of a host decides its connections' FIFO size and
   * the one-shot all-reduce's threshold from its first local rank's, so
   * that all cut operations alike (init_connect.c). */
  struct mc_cache_facts cache;
  struct mc_handoff_figures handoff;
};

/* Who is where, derived from the peer infos (mc_comm_nodes_compute). */
struct mc_comm_nodes {
  int n_nodes;
  int *rank_to_node;       /* [n_ranks] */
  int *rank_to_local_rank; /* [n_ranks] */
  int *node_first_rank;    /* [n_nodes] */
  int *node_n_ranks;       /* [n_nodes] */
  int *local_rank_to_rank; /* [local_ranks] of this rank's node */
  int local_rank;
  int local_ranks;
  int max_local_ranks;
  int *dev; /* [n_ranks] resolved device index */
};

/* A reduction created by ncclRedOpCreatePreMulSum (kept opaque here). */
struct mc_user_redop {
  bool used;
  ncclDataType_t type;
  uint64_t scalar; /* one value of type */
};

/* Init timings, NCCL's breakdown (seconds). */
struct mc_comm_timings {
  double total, kernels, alloc, bootstrap, allgathers, topo, graphs, connections, rest;
};

enum mc_comm_init_kind { MC_INIT_RANK, MC_INIT_ALL, MC_INIT_SPLIT, MC_INIT_GROW };

/* A communicator's lifecycle and threading (its part of struct ncclComm,
 * comm->life): its init (init_comm.c, init_group.c), its uses and the
 * thread that drives it, the states NCCL's calls put it in (init_api.c).
 * Fields marked atomic are read and written with __atomic builtins. */
struct mc_comm_life {
  uint32_t abort_flag; /* set by ncclCommAbort or a failed sibling of a group */
  int async_result;    /* ncclResult_t, read/written atomically */
  bool has_init_thread;
  pthread_t init_thread;
  struct mc_comm_group *group; /* siblings launched together (abort propagation) */
  bool is_finalized;
  /* Uses of the communicator (mc_comm_enter .. mc_comm_leave: a collective
   * call, and each operation queued in a group until its ncclGroupEnd);
   * atomic, changed under init_api.c's users lock with the flags below.
   * Abort waits for them to leave before it frees the communicator. */
  int users;
  bool is_closing;  /* ncclCommDestroy or ncclCommAbort began: mc_comm_enter refuses */
  bool is_aborted;  /* ... and it was ncclCommAbort: connections tell the peers so */
  bool is_orphaned; /* abort stopped waiting for users: the last one frees it */
  /* The one thread that drives the communicator (mc_comm_hold): its
   * pthread_self() while a collective runs or its operations wait in that
   * thread's open group, else 0; atomic. holds: that thread's nesting. */
  unsigned long holder;
  int holds;
  int is_suspended; /* ncclCommSuspend .. ncclCommResume; atomic */
  int is_revoked;   /* ncclCommRevoke: collectives fail; atomic */
};

/* The collectives' part of a communicator (comm->coll): src/coll's state,
 * declared here because init, below src/coll, allocates and frees the
 * communicator. Init only reads NCCL_ALGO / NCCL_PROTO into the masks
 * (mc_comm_algo_env_load), allocates the point-to-point arrays, and calls
 * algo_states_free when it frees the connections. */
struct ncclComm;
struct mc_comm_coll {
  struct mc_conn **p2p_send; /* [n_ranks], connected at first use */
  struct mc_conn **p2p_recv;
  /* Each algorithm's state on this communicator (its connections made at
   * first use, ...), indexed by enum mc_coll_algo: src/coll's, opaque here,
   * made and freed through the algorithm's table; NULL until its first
   * collective. algo_states_free, set by src/coll with the first state,
   * frees them all (aborted: the peers are told first); init calls it when
   * it frees the connections. */
  void *algo_state[MC_ALGO_IDS];
  void (*algo_states_free)(struct ncclComm *comm, bool aborted);
  /* The threads that run this rank's channels besides the calling one
   * (src/coll's, opaque here: coll_workers.c), started at the first
   * collective that uses them; workers_free, set then, stops and joins
   * them; init calls it when it frees the connections. */
  void *workers;
  void (*workers_free)(struct ncclComm *comm);
  /* NCCL_ALGO / NCCL_PROTO as init read them (mc_comm_algo_env_load). */
  bool algo_env_ready;
  bool tune_ready;
  struct mc_tune tune;                  /* the tuning model, built at the first collective */
  uint32_t algo_allowed[MC_COLL_KINDS]; /* per enum mc_coll_kind: bit per algorithm */
  uint32_t algo_protos[MC_COLL_KINDS];
  struct mc_user_redop *redops;
  int n_redops;
  pthread_mutex_t redop_lock;
  int result; /* ncclResult_t of a failed collective: the comm is then unusable */
  /* Signatures (src/coll/coll_sig.c): the number of the last collective,
   * and per peer of the last send to it [2 * peer] and receive from it
   * [2 * peer + 1] (allocated at the first). */
  uint64_t seq;
  uint64_t *p2p_seq;
  /* NCCL's comm->opCount: operations or groups launched on this communicator
   * (logged by every call at NCCL_DEBUG_SUBSYS=COLL); the driving thread's. */
  uint64_t op_count;
  uint64_t op_count_launch; /* src/coll's number of the batch that last advanced op_count */
  int running;              /* threads inside a collective on this comm (revoke waits for them) */
};

/*
 * The communicator (NCCL's struct ncclComm). Its identity comes first; each
 * layer's state is a part embedded by value, declared in that layer's
 * header and named for it:
 *
 *   comm->bootstrap  struct mc_comm_bootstrap  bootstrap/bootstrap.h  bootstrap, roots
 *   comm->net        struct mc_comm_net        net/net.h              net, context, secret
 *   comm->topo       struct mc_comm_topo       topo/topo_graph.h      system, paths, graphs
 *   comm->data       struct mc_comm_data       transport/transport.h  transports, channels
 *   comm->mem        struct mc_comm_mem        init/init_mem.h        registrations, windows
 *   comm->life       struct mc_comm_life       (above)                init thread, uses, states
 *   comm->coll       struct mc_comm_coll       (above)                src/coll's state
 *
 * Whether a handle is a live
 * communicator is the registry's to say (core/registry.h: mc_comm_check),
 * never the object's: a destroyed one is freed.
 */
struct ncclComm {
  int rank;
  int n_ranks;
  int dev;           /* device index used by this rank */
  int dev_requested; /* -1: automatic */
  enum mc_comm_init_kind init_kind;
  ncclUniqueId id;
  uint64_t comm_hash;
  ncclConfig_t config; /* resolved: blocking is 0 or 1 */
  struct mc_peer_info *peers;
  struct mc_comm_nodes nodes;
  /* Every rank of this rank's host is in one PID namespace (the same on
   * every local rank: from the gathered peer infos). Otherwise no
   * symmetric collective (coll_sym.c) and no shared paths (init_topo.c). */
  bool local_one_pidns;
  struct mc_comm_timings t;
  double t_start;
  char last_error[MC_LAST_ERROR_BYTES];
  struct mc_comm_bootstrap bootstrap;
  struct mc_comm_net net;
  struct mc_comm_topo topo;
  struct mc_comm_data data;
  struct mc_comm_mem mem;
  struct mc_comm_life life;
  struct mc_comm_coll coll;
};

/* Validates a config and resolves defaults and NCCL_COMM_BLOCKING. */
ncclResult_t mc_comm_config_resolve(const ncclConfig_t *user, ncclConfig_t *resolved_out);

/* Allocates a communicator in state ncclInProgress (not yet initialised). */
ncclResult_t mc_comm_alloc(int n_ranks, const ncclUniqueId *id, int rank, int dev_requested,
                           const ncclConfig_t *config, enum mc_comm_init_kind kind,
                           struct ncclComm **comm_out);

/* Runs the whole init of comm on the calling thread; sets comm->async_result. */
ncclResult_t mc_comm_init_run(struct ncclComm *comm);

/* Reads NCCL_ALGO and NCCL_PROTO into comm's masks once (init does, as NCCL
 * parses them in ncclTopoTuneModel during init; a communicator built without
 * init's stages at its first collective): ncclInvalidUsage naming the
 * variable and the bad name. A protocol meshccl does not implement (LL,
 * LL128: GPU protocols), asked for by name or by excluding Simple, is said
 * once per process at WARN, on stderr even without NCCL_DEBUG, as an unknown
 * variable is. */
ncclResult_t mc_comm_algo_env_load(struct ncclComm *comm);

/* Frees every resource of comm (init must not be running). When this
 * process hosts the communicator's root, waits up to root_wait_ms for the
 * other ranks to finish with it (0: stop it now, as abort does). */
void mc_comm_free(struct ncclComm *comm, int root_wait_ms);

/* Waits for a running init thread (join). */
void mc_comm_join_init(struct ncclComm *comm);

/* Derives nodes and local ranks from peer infos (pure; tested alone).
 * Resolves devices: explicit ones stay, automatic ones take the smallest
 * index unused on their host, in local-rank order. */
ncclResult_t mc_comm_nodes_compute(const struct mc_peer_info *peers, int n_ranks, int my_rank,
                                   struct mc_comm_nodes *nodes_out);
void mc_comm_nodes_free(struct mc_comm_nodes *nodes);

/* a and b are on one host and in one PID namespace, both known: a pid of
 * one is a process of the other's namespace (/proc/<pid>, kill(pid, 0),
 * process_vm_readv mean that process). Pure. */
bool mc_peer_same_pidns(const struct mc_peer_info *a, const struct mc_peer_info *b);

/* Checks peer infos: version mismatch, a device used twice on one host. */
ncclResult_t mc_comm_peers_check(const struct mc_peer_info *peers, const int *devs, int n_ranks,
                                 bool allow_shared_dev);

#endif /* MC_INIT_COMM_H */
