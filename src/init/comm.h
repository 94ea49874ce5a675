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
#include "topo/topo_graph.h"
#include "topo/topo_algo.h"
#include "topo/topo_tuning.h"
#include "transport/transport.h"

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

#define MC_TREE_MAX_ARITY 3 /* NCCL_MAX_TREE_ARITY */

/* One channel (NCCL's ncclChannel): its ring (the order, this rank's place
 * in it, two connections) and its tree (NCCL's ncclTree: parent and up to
 * three children, -1 = none, and a connection each way with each). The
 * ring and tree orders may differ from channel to channel; the collectives
 * take positions from them, never from rank numbers. Tree connections are
 * made at the first collective that runs on the tree (runtime connect). */
struct mc_channel {
  int id;
  int prev;  /* rank this rank receives from */
  int next;  /* rank this rank sends to */
  int *ring; /* [n_ranks] ring order starting at this rank: ring[0] == rank */
  struct mc_conn send;
  struct mc_conn recv;
  int tree_up;                                      /* parent, -1 at the root */
  int tree_down[MC_TREE_MAX_ARITY];                 /* children, -1 = none */
  struct mc_conn tree_send_up;                      /* to tree_up */
  struct mc_conn tree_recv_up;                      /* from tree_up */
  struct mc_conn tree_send_down[MC_TREE_MAX_ARITY]; /* to tree_down[i] */
  struct mc_conn tree_recv_down[MC_TREE_MAX_ARITY]; /* from tree_down[i] */
};

/* Most channels a communicator runs (NCCL's MAXCHANNELS). */
#define MC_MAX_CHANNELS MC_TOPO_MAX_CHANNELS

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

/* Whether a handle is a live communicator is the registry's to say
 * (core/registry.h: mc_comm_check), never the object's: a destroyed one is freed. */
struct ncclComm {
  int rank;
  int n_ranks;
  int dev;           /* device index used by this rank */
  int dev_requested; /* -1: automatic */
  enum mc_comm_init_kind init_kind;
  ncclUniqueId id;
  uint64_t comm_hash;
  /* Known to the communicator's ranks only: HMAC-SHA256 keyed by the unique
   * id, handed to the nets to authenticate their connections. */
  uint8_t net_secret[32];
  /* Stage "net" (init_net.c): the net this communicator uses and its
   * context, finalized when the communicator is freed. */
  const struct mc_net_ops *net;
  void *net_ctx;
  int net_ndev;        /* devices the net had at init (physical) */
  ncclConfig_t config; /* resolved: blocking is 0 or 1 */
  uint32_t abort_flag; /* set by ncclCommAbort or a failed sibling of a group */
  int async_result;    /* ncclResult_t, read/written atomically */
  bool has_init_thread;
  pthread_t init_thread;
  bool is_finalized;
  struct mc_boot *boot;
  struct mc_boot_root *root; /* when this process hosts the root of this comm */
  /* ncclCommInitRankScalable with nId > 1: the ids of the roots (id is then
   * mc_boot_job_id's), and a reference on each root this process hosts. */
  int n_ids;
  ncclUniqueId *ids;
  struct mc_boot_root **id_roots;
  struct mc_peer_info *peers;
  struct mc_comm_nodes nodes;
  /* Every rank of this rank's host is in one PID namespace (the same on
   * every local rank: from the gathered peer infos). Otherwise no
   * symmetric collective (coll_sym.c) and no shared paths (init_topo.c). */
  bool local_one_pidns;
  struct mc_comm_timings t;
  double t_start;
  char last_error[MC_LAST_ERROR_BYTES];
  struct mc_comm_group *group; /* siblings launched together (abort propagation) */
  struct mc_topo_system *topo; /* this rank's final (trimmed) system, with paths */
  /* Local rank 0 with MESHCCL_PATHS_SHARE: the memfd of its paths, which the
   * other local ranks open through /proc, closed once every local rank has
   * passed init (or init failed); -1 when none. */
  int paths_fd;
  /* Stage "graphs": the searched graphs of this rank's node and its channels. */
  struct mc_topo_graph ring_graph;
  struct mc_topo_graph tree_graph;
  struct mc_topo_channels graph;
  /* Data path (stage "connect", src/transport; used by src/coll). */
  struct mc_tp_peer *tp_peers;
  struct mc_tp_comm tp;
  int n_channels;
  struct mc_channel *channels; /* [n_channels] */
  struct mc_conn **p2p_send;   /* [n_ranks], connected at first use */
  struct mc_conn **p2p_recv;
  struct mc_mem_peers *mem_peers; /* peers' ncclMemAlloc memory mapped here (init_mem.c) */
  char *scratch;                  /* n_channels + 1 slot-sized bounce buffers */
  /* Each algorithm's state on this communicator (its connections made at
   * first use, ...), indexed by enum mc_coll_algo: src/coll's, opaque here,
   * made and freed through the algorithm's table; NULL until its first
   * collective. algo_states_free, set by src/coll with the first state,
   * frees them all (aborted: the peers are told first); init calls it when
   * it frees the connections. */
  void *algo_state[MC_ALGO_IDS];
  void (*algo_states_free)(struct ncclComm *comm, bool aborted);
  /* NCCL_ALGO / NCCL_PROTO as init read them (mc_comm_algo_env_load). */
  bool algo_env_ready;
  bool tune_ready;
  struct mc_tune tune;                  /* the tuning model, built at the first collective */
  uint32_t algo_allowed[MC_COLL_KINDS]; /* per enum mc_coll_kind: bit per algorithm */
  uint32_t algo_protos[MC_COLL_KINDS];
  struct mc_user_redop *redops;
  int n_redops;
  pthread_mutex_t redop_lock;
  int coll_result; /* ncclResult_t of a failed collective: the comm is then unusable */
  /* Signatures (src/coll/coll_sig.c): the number of the last collective,
   * and per peer of the last send to it [2 * peer] and receive from it
   * [2 * peer + 1] (allocated at the first). */
  uint64_t coll_seq;
  uint64_t *p2p_seq;
  /* NCCL's comm->opCount: operations or groups launched on this communicator
   * (logged by every call at NCCL_DEBUG_SUBSYS=COLL); the driving thread's. */
  uint64_t op_count;
  uint64_t op_count_launch; /* src/coll's number of the batch that last advanced op_count */
  int colls_running;        /* threads inside a collective on this comm (revoke waits for them) */
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
  int spin_passes; /* idle polls before yielding: few when the host's ranks outnumber its CPUs */
  /* Host meaning of NCCL's registration and lifecycle calls (init_mem.c, init_api.c). */
  pthread_mutex_t reg_lock;          /* guards regs and windows */
  struct mc_comm_reg *regs;          /* ncclCommRegister handles, freed at destroy */
  struct ncclWindow_vidmem *windows; /* ncclCommWindowRegister windows, freed at destroy */
  int is_suspended;                  /* ncclCommSuspend .. ncclCommResume; atomic */
  int is_revoked;                    /* ncclCommRevoke: collectives fail; atomic */
  bool has_grow_id;                  /* an id from ncclCommGetUniqueId not consumed yet */
  ncclUniqueId grow_id;              /* that id (its n_ranks: this communicator's size) */
  struct mc_boot_root *grow_root;    /* its root (in this process), stopped at destroy */
};

/* Frees every registration and window of comm (destroy). */
void mc_comm_regs_free(struct ncclComm *comm);

/* Where [p, p + bytes) lies in an ncclMemAlloc allocation of this process
 * (init_mem.c): what a peer on this host needs to map it
 * (/proc/<pid>/fd/<fd>, id naming the allocation for its cache). */
struct mc_mem_ref {
  int pid;
  int fd;
  uint64_t id;
  uint64_t ino; /* the memfd's st_ino and st_dev, checked by the peer that opens it */
  uint64_t dev;
  size_t alloc_bytes;
  size_t offset;
};
bool mc_mem_lookup(const void *p, size_t bytes, struct mc_mem_ref *out);
/* ncclMemFree in this process: how many so far (*gen_out) and the ids of
 * the last MC_MEM_FREED_IDS freed, the latest first (0 past gen). */
#define MC_MEM_FREED_IDS 8
void mc_mem_frees(uint64_t *gen_out, uint64_t freed_out[MC_MEM_FREED_IDS]);
/* A new operation maps peers' memory (mc_mem_peer_map): the mappings it
 * uses stay until it ends. Drops the others past MESHCCL_SYM_MAP_BYTES. */
ncclResult_t mc_mem_peers_op(struct ncclComm *comm);
/* Rank peer said (mc_mem_frees of its process) that it freed gen
 * allocations so far, the last of them freed: drops this communicator's
 * mappings of those (of all of peer's not used by this operation when more
 * were freed since it last said). */
void mc_mem_peer_frees(struct ncclComm *comm, int peer, uint64_t gen,
                       const uint64_t freed[MC_MEM_FREED_IDS]);
/* Bytes and mappings of peers' memory held by comm now. */
size_t mc_mem_peers_held(const struct ncclComm *comm, int *n_out);
/* The operation's peer buffers: [n_ranks] inputs and outputs (the caller's). */
const char **mc_mem_peers_in(struct ncclComm *comm);
const char **mc_mem_peers_out(struct ncclComm *comm);
/* Where the memory ref (of rank peer, on this host, in this PID namespace)
 * is mapped here: *out (read-only). ncclSystemError naming the path when it
 * cannot be opened; ncclRemoteError naming the peer when what it opens is
 * not the memfd ref says (inode, device) or is smaller than alloc_bytes:
 * nothing is mapped then (a mapping past the file's end is a SIGBUS). */
ncclResult_t mc_mem_peer_map(struct ncclComm *comm, int peer, const struct mc_mem_ref *ref,
                             const char **out);
/* [p, p + bytes) lies in a NCCL_WIN_COLL_SYMMETRIC window of comm. */
bool mc_comm_sym_window(struct ncclComm *comm, const void *p, size_t bytes);
/* ncclInvalidUsage naming call when comm is suspended or revoked. */
ncclResult_t mc_comm_usable(const struct ncclComm *comm, const char *call);

struct mc_topo_system;

/* Stage "net" (init_net.c): the net secret, the net (mc_net_select) and its
 * per-communicator context (NCCL's ncclNetInit). Sets comm->net.ops, net_ctx. */
ncclResult_t mc_comm_stage_net(struct ncclComm *comm);
/* The secret the nets authenticate the communicator's connections with
 * (MC_NET_SECRET_BYTES): derived from the unique id, its bootstrap secret
 * included. */
void mc_comm_net_secret(const ncclUniqueId *id, uint8_t secret_out[32]);
/* Finalizes the net context (once; nothing when there is none). */
void mc_comm_net_fini(struct ncclComm *comm);

/* Steps of an init stage timed for one INFO line (INIT|PROFILE; init_steps.c):
 * wall time and this thread's CPU time per step, so that a host with more
 * ranks than cores still shows what each step costs. */
#define MC_COMM_MAX_STEPS 12
struct mc_comm_steps {
  int n;
  uint64_t wall0_ns; /* start of the running step */
  uint64_t cpu0_ns;
  const char *name[MC_COMM_MAX_STEPS];
  double wall_ms[MC_COMM_MAX_STEPS];
  double cpu_ms[MC_COMM_MAX_STEPS];
};

/* Starts the first step. */
void mc_comm_steps_start(struct mc_comm_steps *st);
/* Ends the running step as `name` (a string literal) and starts the next; steps past
 * MC_COMM_MAX_STEPS are added to the last one. */
void mc_comm_steps_mark(struct mc_comm_steps *st, const char *name);
/* "<stage> timings - rank R localRanks L (ms wall/cpu): step w/c, ..." at INFO (INIT|PROFILE). */
void mc_comm_steps_log(const struct mc_comm_steps *st, const struct ncclComm *comm,
                       const char *stage);

/* Allgather among ranks[0..n) (ranks NULL: all ranks; this rank is
 * index my_index): slice i of data is ranks[i]'s, the caller fills its own
 * first. A gather to index 0, then mc_comm_bcast_tree (init_gather.c): a
 * message up and one down per rank where the ring allgather passes n - 1
 * through each. Uses tags tag and tag + 1. Blocks; errors as mc_boot_send/recv. */
ncclResult_t mc_comm_allgather_tree(struct ncclComm *comm, const int *ranks, int n, int my_index,
                                    void *data, size_t slice_bytes, int tag);
/* Broadcast of bytes of data from index 0 of ranks[0..n) (NULL: all ranks)
 * down a binomial tree: each rank receives once and forwards to at most
 * log2(n) ranks. Blocks; errors as mc_boot_send/recv. */
ncclResult_t mc_comm_bcast_tree(struct ncclComm *comm, const int *ranks, int n, int my_index,
                                void *data, size_t bytes, int tag);

/* Stage "topo" (init_topo.c): NCCL_TOPO_FILE or detection (NICs: the
 * devices of comm->net.ops), intra-host
 * allgather and fusion of the XML, system, paths, trim; logs the transport
 * each local peer would use. Sets comm->topo. */
ncclResult_t mc_comm_stage_topo(struct ncclComm *comm);
/* Closes the memfd of the shared paths, if this rank made one (idempotent). */
void mc_comm_paths_close(struct ncclComm *comm);

/* Stage "graphs" (init_graphs.c): ring and tree search on comm->topo.system,
 * NCCL_GRAPH_DUMP_FILE, Preset, the gather of every rank's Preset output,
 * Postset. Sets comm->topo.ring_graph, tree_graph, graph. */
ncclResult_t mc_comm_stage_graphs(struct ncclComm *comm);

/* Rings that follow the cables (init_net.c): for a communicator whose net
 * offers node orders (its node_orders op, e.g. the Mesh net's) on 3 or
 * more hosts, the net's orders become Postset's node orders, Postset's
 * nodes numbered from `all` (the AllGather3 output; collective: every rank
 * calls it with the same `all`): *orders_out (*n_orders_out x nodes, caller
 * frees) or NULL and 0 (NCCL's order). */
ncclResult_t mc_comm_net_node_orders(struct ncclComm *comm, const struct mc_topo_ranks *all,
                                     int *n_orders_out, int **orders_out);

/* Stage "connect" (init_connect.c): transports for every peer, the ring
 * channels and their connections. Sets comm->data.tp, channels. */
ncclResult_t mc_comm_stage_connect(struct ncclComm *comm);
/* Connection indices (conn_index of struct mc_conn_req): which of a pair's
 * connections on a channel a request is. */
enum mc_conn_index {
  MC_CONN_RING = 0,
  MC_CONN_P2P = 1,
  MC_CONN_ONESHOT = 2,
  MC_CONN_TREE = 3, /* every tree connection: a pair is parent and child once per channel */
  MC_CONN_ALGO = 16 /* + an algorithm's number: connections it makes for itself */
};

/* The requests for every channel's tree connections (send and receive with
 * the parent and each child), for the runtime connect of the collectives.
 * Fills reqs when it is not NULL; returns how many there are. */
int mc_comm_tree_conn_reqs(struct ncclComm *comm, struct mc_conn_req *reqs);
/* Frees what stage_connect and later collectives made. */
void mc_comm_free_connections(struct ncclComm *comm);

/* Validates a config and resolves defaults and NCCL_COMM_BLOCKING. */
ncclResult_t mc_comm_config_resolve(const ncclConfig_t *user, ncclConfig_t *resolved_out);

/* Allocates a communicator in state ncclInProgress (not yet initialised). */
ncclResult_t mc_comm_alloc(int n_ranks, const ncclUniqueId *id, int rank, int dev_requested,
                           const ncclConfig_t *config, enum mc_comm_init_kind kind,
                           struct ncclComm **comm_out);

/* Runs the whole init of comm on the calling thread; sets comm->life.async_result. */
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

/* "ranks 0,2,4-5" / "rank 3": the ranks of node k (comm->nodes), for
 * messages that name a host as "host k (name, ranks ...)". */
void mc_comm_node_ranks_str(const struct ncclComm *comm, int k, char *buf, size_t bytes);

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

/* ---------- groups (init_group.c) ---------- */

/* Queues an init job when inside a group, else runs it (blocking) or
 * starts it (non-blocking). Returns ncclInProgress for a started
 * non-blocking init. */
ncclResult_t mc_group_launch_init(struct ncclComm *comm);
/* True when the calling thread is inside ncclGroupStart/End. */
bool mc_group_active(void);
/* Forgets comm in its group (called when comm is freed). */
void mc_group_forget(struct ncclComm *comm);

ncclResult_t mc_group_start(void);
ncclResult_t mc_group_end(void);

/* The device meshcclSetDevice chose for this thread (-1 none). */
int mc_thread_device(void);
void mc_thread_set_device(int dev);

/* ---------- API helpers (init_api.c) ---------- */

/* Defines an exported NCCL function and its pnccl profiling alias. */
#define NCCL_API(_ret, _func, ...)                                                                 \
  __attribute__((visibility("default"))) __attribute__((alias(#_func)))                            \
  _ret p##_func(__VA_ARGS__);                                                                      \
  __attribute__((visibility("default"))) _ret _func(__VA_ARGS__)

/* Every API call starts with this: clears the thread's last error, logs the
 * version and the parameters once. */
void mc_api_enter(void);
/* comm is a live communicator: created by an init and not destroyed or
 * aborted since (the registry says so without reading *comm). Otherwise
 * ncclInvalidArgument naming call: "communicator 0x... was destroyed". */
ncclResult_t mc_comm_check(const struct ncclComm *comm, const char *call);
/* The same test, silent. */
bool mc_comm_is_live(const struct ncclComm *comm);
/* How many communicators were destroyed or aborted in this process so far
 * (a checked communicator needs no new check while this stays). */
uint64_t mc_comm_destroyed_count(void);
/* An API call starts using comm: live (mc_comm_check's errors) and not
 * being destroyed or aborted (ncclInvalidArgument). Until mc_comm_leave,
 * ncclCommAbort on another thread does not free comm (it sets the abort
 * flag and waits, a bounded time, for the call to leave). */
ncclResult_t mc_comm_enter(struct ncclComm *comm, const char *call);
/* One more use by a caller that holds one (an operation queued in a group). */
void mc_comm_ref(struct ncclComm *comm);
/* Ends one use; the last use of a communicator that abort stopped waiting
 * for frees it. */
void mc_comm_leave(struct ncclComm *comm);
/* The calling thread starts driving comm (a collective, or one queued in its
 * open group); nests on the same thread. NCCL's communicators are not
 * thread-safe (a second thread corrupts the FIFOs' steps), so another
 * thread's hold is refused: ncclInvalidUsage naming call, comm and that
 * thread, recorded only for the second caller. */
ncclResult_t mc_comm_hold(struct ncclComm *comm, const char *call);
/* Ends one hold of the calling thread. The caller's use of comm
 * (mc_comm_enter, mc_comm_ref) keeps it in memory, aborted or not. */
void mc_comm_release(struct ncclComm *comm);
/* ... whose init completed successfully (NCCL's ncclCommEnsureReady). */
ncclResult_t mc_comm_ready(const struct ncclComm *comm, const char *call);
/* Depth of ncclGroupStart nesting on this thread. */
int mc_group_depth(void);

#endif /* MC_INIT_COMM_H */
