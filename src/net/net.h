/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The internal net interface: one const table of functions per net, in the
 * shape of NCCL's ncclNet_t (v11/v12: per-communicator context, devices,
 * properties, listen / connect / accept, memory registration, isend / irecv /
 * test, close, finalize), so that the NET transport drives the built-in
 * socket net, the mesh net and external NCCL net plugins (through one adapter
 * per plugin ABI version, src/net/external/) the same way. Semantics are NCCL's
 * (NCCL src/include/net.h, ncclNet_t, and its calls in src/transport/net.cc):
 *   - nothing blocks: connect/accept return ncclSuccess with *comm == NULL
 *     until the connection is ready; isend/irecv return ncclSuccess with
 *     *request == NULL when the request cannot be posted yet;
 *   - sends and receives of one connection match in posting order; a
 *     receive may be posted larger than the matching send (test reports the
 *     sent size), a smaller one is an error ("message truncated");
 *   - every comm supports MC_NET_MAX_REQUESTS outstanding requests;
 *   - after test() reports done the request is never touched again;
 *   - data passed to isend/irecv lies inside a region registered with
 *     reg_mr on that comm, and the mhandle passed is that registration's.
 * Errors: ncclSystemError (local failure) or ncclRemoteError (the peer
 * closed or broke the connection), each with a message naming the peer's
 * address, through the logging of src/core (MC_FAIL).
 *
 * Registry (net_registry.c): which nets exist and which one a communicator
 * uses (NCCL_NET by name, NCCL_NET_PLUGIN, the built-in order).
 */
#ifndef MC_NET_NET_H
#define MC_NET_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

#define MC_NET_OPS_ABI      3   /* bump when a member of struct mc_net_ops changes */
#define MC_NET_HANDLE_BYTES 128 /* NCCL_NET_HANDLE_MAXSIZE */
#define MC_NET_MAX_REQUESTS 32  /* NCCL_NET_MAX_REQUESTS */
#define MC_NET_PTR_HOST     0x1 /* NCCL_PTR_HOST */
#define MC_NET_MAX_VDEVS    8   /* NCCL_NET_MAX_DEVS_PER_NIC (v12) */
#define MC_NET_SECRET_BYTES 32
/* What test() reports for a transfer whose size the net cannot tell (a
 * plugin that never fills test's sizes): the receiver then goes by the size
 * it expects, as NCCL's proxy does with such plugins. */
#define MC_NET_SIZE_UNKNOWN ((size_t)-1)

/* A virtual device made of several physical ones (NCCL's ncclNetVDeviceProps). */
struct mc_net_vprops {
  int n_devs;
  int devs[MC_NET_MAX_VDEVS];
};

struct mc_net_props {
  char name[64];      /* interface or device name ("eth0") */
  char pci_path[256]; /* sysfs PCI path; "" for virtual devices */
  uint64_t guid;
  int ptr_support;    /* MC_NET_PTR_HOST */
  bool reg_is_global; /* a registration is valid on every comm of the context */
  bool force_flush;
  int speed; /* Mb/s */
  int port;
  float latency; /* us */
  int max_comms;
  int max_recvs;                  /* largest n of irecv */
  struct mc_net_vprops vprops;    /* the physical devices this one is made of */
  size_t max_p2p_bytes;           /* largest single isend/irecv */
  size_t max_coll_bytes;          /* 0: not a CollNet device */
  size_t max_multi_request_bytes; /* v11+; 0 when the net does not say */
  int rail_id;                    /* v12; -1 when undefined */
  int plane_id;                   /* v12; -1 when undefined */
};

/* A host of the communicator, as messages name it: "host 2 (h2, ranks 4-5)". */
#define MC_NET_HOST_RANKS_BYTES 64
struct mc_net_host_name {
  uint64_t host_hash;                  /* mc_host_hash() of that host */
  int index;                           /* its node index (NCCL's numbering: by first rank) */
  char ranks[MC_NET_HOST_RANKS_BYTES]; /* "ranks 4-5", "rank 3", "ranks 0,2,4-5" */
};

/* What a communicator tells the net at init. */
struct mc_net_init_args {
  /* NCCL's commId (v11+ plugins receive it): a hash of the unique id. */
  uint64_t comm_id;
  /* MC_NET_SECRET_BYTES bytes every rank of the communicator knows and
   * nobody else does (derived from the unique id), so that a net can refuse
   * connections from strangers; NULL when there is none. */
  const uint8_t *secret;
  /* The communicator's abort flag: once non-zero, every call may fail fast. */
  const volatile uint32_t *abort_flag;
  /* The interface the bootstrap uses (the management lane), or NULL: a net
   * that chooses among several interfaces keeps collective data off it. */
  const char *mgmt_ifname;
  /* The communicator's hosts (n_hosts, hosts may be NULL: a plugin's case),
   * so that the net's messages name a host as every other line does; the
   * net copies them. */
  const struct mc_net_host_name *hosts;
  int n_hosts;
};

/* What a net's node_orders op is given (struct mc_net_ops). */
struct mc_net_orders_args {
  int rank;
  int n_ranks;
  uint64_t host_hash;      /* this rank's host */
  const char *host;        /* its name, for messages; may be NULL */
  const char *mgmt_ifname; /* the bootstrap's interface, or NULL */
  int n_nodes;             /* the nodes of NCCL's Postset (hosts), 3 or more */
  /* [n_nodes]: the host of each node, in Postset's node numbering. */
  const uint64_t *node_host_hash;
  /* Collective over the communicator (every rank calls node_orders):
   * data holds n_ranks blocks of `bytes`, this rank's (at rank * bytes)
   * filled; on success every block is. */
  ncclResult_t (*allgather)(void *arg, void *data, size_t bytes);
  void *allgather_arg;
  /* [n_hosts] the communicator's hosts as messages name them (index: the
   * communicator's node numbering; host_hash as node_host_hash's). */
  const struct mc_net_host_name *hosts;
  int n_hosts;
};

struct mc_net_ops {
  uint32_t abi;     /* MC_NET_OPS_ABI */
  const char *name; /* "Socket", "Mesh", or the plugin's */
  /* Per communicator: *ctx_out receives the net's state for it. */
  ncclResult_t (*init)(const struct mc_net_init_args *args, void **ctx_out);
  ncclResult_t (*devices)(void *ctx, int *n_devs_out);
  ncclResult_t (*get_properties)(void *ctx, int dev, struct mc_net_props *props_out);
  /* Optional (mc_net_no_make_vdevice): fuse physical devices into one. */
  ncclResult_t (*make_vdevice)(void *ctx, const struct mc_net_vprops *vprops, int *dev_out);
  /* Writes at most MC_NET_HANDLE_BYTES into handle, for the peer's connect. */
  ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listen_comm);
  ncclResult_t (*connect)(void *ctx, int dev, const void *handle, void **send_comm);
  ncclResult_t (*accept)(void *listen_comm, void **recv_comm);
  /* type is MC_NET_PTR_HOST; comm is a send or a receive comm. */
  ncclResult_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
  ncclResult_t (*dereg_mr)(void *comm, void *mhandle);
  ncclResult_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                        void **request);
  ncclResult_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                        void **mhandles, void **request);
  /* sizes may be NULL; else receives the n sizes actually transferred
   * (MC_NET_SIZE_UNKNOWN for a receive when the net cannot tell). */
  ncclResult_t (*test)(void *request, int *done, size_t *sizes);
  ncclResult_t (*close_send)(void *send_comm);
  ncclResult_t (*close_recv)(void *recv_comm);
  ncclResult_t (*close_listen)(void *listen_comm);
  ncclResult_t (*finalize)(void *ctx);
  /* Optional (NULL: the net cannot tell; no NCCL equivalent): for the NET
   * transport's progress watchdog (MESHCCL_NET_TIMEOUT), *bytes_out receives
   * a count of the bytes comm (a send or receive comm) has moved on the wire
   * so far, which only grows, so that a slow transfer that still moves is
   * told from a stalled one; link (may be NULL) receives the connection's
   * two ends for messages ("10.0.0.1<41000> -> 10.0.0.2<39000>"). Never
   * blocks; called by the thread that drives comm. Without it the watchdog
   * goes by completed requests. */
  ncclResult_t (*get_progress)(void *comm, uint64_t *bytes_out, char *link, size_t link_bytes);

  /* Properties: what the layers above may assume of this net, so that a net
   * added later (an external plugin, an RDMA net) is treated by what it
   * declares, never by which table it is. A member a table leaves out is
   * false / NULL, the conservative value, which the adapter of external
   * plugins (src/net/external/) keeps. mc_net_ops_validate checks them. */

  /* Every call returns without waiting, as this header promises. false: a
   * call may block (nccl-fastsocket's first test() of a send waits for the
   * accept), so the NET transport guards each call and abandons a proxy
   * wedged in one (tp_net.c). */
  bool calls_never_block;
  /* isend accepts memory outside any reg_mr registration (registration is
   * a no-op), so a rank may publish its own buffers instead of copying them
   * into its connection's slots (tp_net.c). Requires calls_never_block: a
   * proxy abandoned inside a call would leave the net a pointer into memory
   * the user frees. */
  bool can_send_user_ptr;
  /* A last-resort net: when the default choice gave it (NCCL_NET unset), the
   * communicator may replace it by a net that suits the hosts' cabling
   * (MESHCCL_MESH_AUTO, init_net.c). An explicit choice is never replaced. */
  bool is_fallback;
  /* Optional (NULL: the net does not recover from a broken link itself):
   * the longest the net may take to move a connection's traffic off a
   * broken link (a new route), in ms; the NET transport's progress
   * watchdog always leaves it that long (mc_tp_net_timeout_ns). Pure. */
  uint32_t (*failover_ms)(void);
  /* Optional (NULL: NCCL's ring order): the orders in which the channel
   * rings cross the hosts so that each hop follows a cable (a direct-connect
   * mesh). Collective over the communicator (args->allgather): every rank
   * calls it with the same nodes. *orders_out receives *n_orders_out orders
   * of args->n_nodes node indices each (caller frees), or NULL and 0 when
   * the net has no order to offer (it logs why). */
  ncclResult_t (*node_orders)(const struct mc_net_orders_args *args, int *n_orders_out,
                              int **orders_out);
};

/* The "not supported" stub for make_vdevice: WARNs once naming the call,
 * returns ncclInvalidUsage. */
ncclResult_t mc_net_no_make_vdevice(void *ctx, const struct mc_net_vprops *vprops, int *dev_out);

/* The built-in socket net (net_socket.c). */
extern const struct mc_net_ops mc_net_socket_ops;
/* The built-in mesh net (mesh/mesh_net.c). */
extern const struct mc_net_ops mc_net_mesh_ops;

/* Checks a table before use: the ABI number, every mandatory member, and
 * that its properties agree (can_send_user_ptr needs calls_never_block).
 * origin names where the table came from (a plugin's file) for the message.
 * Returns ncclInvalidUsage naming the first missing member or the
 * properties in conflict. Pure. */
ncclResult_t mc_net_ops_validate(const struct mc_net_ops *ops, const char *origin);

/* The net a communicator's NET transport uses, chosen as NCCL 2.30 does
 * (src/plugin/net.cc, ncclNetInit): the external plugins NCCL_NET_PLUGIN
 * names (default libnccl-net.so; "none" disables them) first, then the
 * built-in nets; NCCL_NET, when set, must name one of them (case-insensitive)
 * and no other is considered. One INFO line says which net was chosen and
 * why. Thread-safe. The table stays valid until the process exits.
 * Returns ncclInvalidUsage, naming NCCL_NET's value and the nets that
 * exist, when NCCL_NET names none of them. */
ncclResult_t mc_net_select(const struct mc_net_ops **ops_out);

/* The built-in net named `name` (case-insensitive), without NCCL_NET's
 * rules or logging; ncclInvalidArgument when there is none. */
ncclResult_t mc_net_find_builtin(const char *name, const struct mc_net_ops **ops_out);

/* A communicator's net (its part of struct ncclComm, comm->net): set by
 * init's net stage (init_net.c), the context finalized when the
 * communicator is freed. */
struct mc_comm_net {
  const struct mc_net_ops *ops; /* the net this communicator uses (mc_net_select) */
  void *ctx;                    /* its per-communicator context (ops->init) */
  int ndev;                     /* devices the net had at init (physical) */
  /* Known to the communicator's ranks only: HMAC-SHA256 keyed by the unique
   * id, handed to the net to authenticate its connections. */
  uint8_t secret[MC_NET_SECRET_BYTES];
};

#endif /* MC_NET_NET_H */
