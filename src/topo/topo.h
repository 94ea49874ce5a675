/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The system graph and its paths (mirrors NCCL 2.30's src/graph/topo.cc,
 * topo.h and paths.cc): nodes (GPU, PCI, NVS, CPU, NIC, NET,
 * DEV, ...) and typed links built from a topology XML tree, BFS paths with
 * NCCL's path types and bottleneck bandwidths, the P2P / NET / GDR checks that
 * rewrite them, trim of unreachable GPUs, and NCCL's ncclTopoPrint lines.
 *
 * Where NCCL versions differ this follows 2.30: a DEV node per physical GPU
 * (GPU <-> DEV over LOC links), the type-first BFS update rule, P2C/PXN
 * numbering (LOC 0 ... DIS 11), NICs kept on single-node systems.
 *
 * Bandwidths are float GB/s and are compared exactly, as NCCL does.
 * Pure logic: no sysfs, no NVML. A system is used by one thread at a time.
 */
#ifndef MC_TOPO_H
#define MC_TOPO_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "nccl.h"
#include "topo/topo_xml.h"

/* Node types; values are NCCL's (they index paths[] and print order). */
enum mc_topo_node_type {
  MC_TOPO_GPU = 0,
  MC_TOPO_PCI = 1,
  MC_TOPO_NVS = 2,
  MC_TOPO_CPU = 3, /* a NUMA domain */
  MC_TOPO_NIC = 4,
  MC_TOPO_NET = 5,
  MC_TOPO_GIN = 6, /* reserved: not built yet */
  MC_TOPO_RMA = 7, /* reserved: not built yet */
  MC_TOPO_DEV = 8, /* one per physical GPU (per MLOPart partition) */
  MC_TOPO_CXB = 9, /* C2C bridge shared by two MLOPart DEVs */
  MC_TOPO_NODE_TYPES = 10
};

/* Link types; values match the path types they start (NCCL's LINK_*). */
enum mc_topo_link_type {
  MC_TOPO_LINK_LOC = 0,
  MC_TOPO_LINK_NVL = 1,
  MC_TOPO_LINK_C2C = 3,
  MC_TOPO_LINK_PCI = 4,
  MC_TOPO_LINK_SYS = 9,
  MC_TOPO_LINK_NET = 10
};

/* Path types, NCCL 2.30 values (src/include/graph.h PATH_*). */
enum mc_path_type {
  MC_PATH_LOC = 0,
  MC_PATH_NVL = 1,
  MC_PATH_NVB = 2,
  MC_PATH_C2C = 3,
  MC_PATH_PIX = 4,
  MC_PATH_PXB = 5,
  MC_PATH_P2C = 6,
  MC_PATH_PXN = 7,
  MC_PATH_PHB = 8,
  MC_PATH_SYS = 9,
  MC_PATH_NET = 10,
  MC_PATH_DIS = 11
};

/* CPU attributes as NCCL encodes them (printed by mc_topo_print). */
#define MC_TOPO_UNDEF               (-1)
#define MC_TOPO_CPU_ARCH_X86        1
#define MC_TOPO_CPU_ARCH_POWER      2
#define MC_TOPO_CPU_ARCH_ARM        3
#define MC_TOPO_CPU_VENDOR_INTEL    1
#define MC_TOPO_CPU_VENDOR_AMD      2
#define MC_TOPO_CPU_VENDOR_ZHAOXIN  3
#define MC_TOPO_CPU_MODEL_INTEL_BDW 1
#define MC_TOPO_CPU_MODEL_INTEL_SKL 2
#define MC_TOPO_CPU_MODEL_INTEL_SRP 3
#define MC_TOPO_CPU_MODEL_INTEL_ERP 4
#define MC_TOPO_CPU_MODEL_YONGFENG  1

/* Nodes of one type a system may hold: NCCL 2.30's NCCL_TOPO_MAX_NODES
 * (src/include/graph.h: 576 GPUs with headroom), so also the GPUs, and the
 * local ranks, of one host. */
#define MC_TOPO_MAX_NODES 640

/* Bandwidth constants, GB/s (src/graph/topo.h). */
#define MC_TOPO_LOC_BW         5000.0
#define MC_TOPO_MLOPART_LOC_BW 2618.0

/* Node ids: (systemId << 56) + localId, printed as TYPE/<sys hex>-<local hex>. */
#define MC_TOPO_ID(_sys, _local)                                                                   \
  ((int64_t)(((uint64_t)(_sys) << 56) + ((uint64_t)(_local)&0x00ffffffffffffffULL)))
#define MC_TOPO_ID_SYSTEM(_id) ((int64_t)((uint64_t)(_id) >> 56))
#define MC_TOPO_ID_LOCAL(_id)  ((int64_t)((uint64_t)(_id)&0x00ffffffffffffffULL))

struct mc_topo_node;

struct mc_topo_link {
  enum mc_topo_link_type type;
  float bw;
  struct mc_topo_node *rem;
};

/* One hop of a path: the link to follow (its number in the system's link
 * table) and the rest of the path (the next hop's number + 1 in the system's
 * hops; 0 after the last). Hops never change once made, so paths share them:
 * a path that NCCL builds as "this link, then a copy of that path's list"
 * (ncclTopoSetPaths, addInterStep) is here one new hop in front of the other
 * path's hops, and keeps the links, their order and their count exactly.
 * Numbers rather than pointers: another process with the same system can
 * use the paths of this one as they are (mc_topo_paths_export). */
struct mc_topo_hop {
  uint32_t link;
  uint32_t next;
};

/* A path from a node to a base node (NCCL's ncclTopoLinkList): its hops,
 * bottleneck bandwidth, hop count and type, in 12 bytes. Paths to a DEV node
 * keep their count but no hops (0): NCCL only reads their type, bandwidth
 * and count. */
struct mc_topo_path {
  uint32_t hops; /* the first hop's number + 1 in the system's hops; 0: none */
  float bw;
  int16_t count;
  uint8_t type; /* enum mc_path_type */
};

struct mc_topo_node {
  enum mc_topo_node_type type;
  int64_t id;
  struct {
    int dev; /* NVML index */
    int rank;
    int sm;
    int gdr;
    int mlopart;
    struct mc_topo_node *parent; /* DEV */
  } gpu;
  struct {
    uint64_t device; /* vendor<<48 | device<<32 | subsystem vendor<<16 | subsystem device */
    int dev;
    int sm;
    int n_gpus;
  } dev;
  struct {
    int dev; /* plugin device index */
    uint64_t asic;
    int port;
    float bw;
    float latency;
    int gdr;
    int coll;
    int max_channels;
    int local_gpu; /* GPU index, -1 when none (set by mc_topo_compute_paths) */
    int rail;
    int plane;
  } net;
  struct {
    int arch;
    int vendor;
    int model;
  } cpu;
  struct {
    uint64_t device;
  } pci;
  uint64_t used; /* GPUs: bit c set while channel c of a search goes through it */
  int index;     /* position in the system's node set of its type */
  unsigned mark; /* scratch of the path computation (BFS level it was queued for) */
  int link_base; /* number of links[0] in the system's link table (mc_topo_compute_paths) */
  int n_links;
  int cap_links;
  struct mc_topo_link *links; /* sorted: NVLink first, PCI down, PCI up, SYS */
  /* paths[t][i]: path from this node to node i of type t; NULL until computed. */
  struct mc_topo_path *paths[MC_TOPO_NODE_TYPES];
};

struct mc_topo_node_set {
  int count;
  int cap;
  struct mc_topo_node **nodes; /* index order = creation order (fused XML order) */
};

struct mc_topo_system {
  int system_id; /* index of the local host hash */
  int n_hosts;
  uint64_t host_hashes[64];
  struct mc_topo_node_set nodes[MC_TOPO_NODE_TYPES];
  float max_bw;   /* set by mc_topo_search_init */
  float total_bw; /* set by mc_topo_search_init */
  bool inter;     /* set by mc_topo_trim_system: GPUs of other nodes exist */
  /* What the paths say about the whole system, made with them (computed or
   * imported; gone with them): the two reads of every path between GPUs
   * that each rank makes after the paths (ncclTopoTrimSystem's domains,
   * ncclTopoSearchInit's largest path bandwidth), once per system so that a
   * rank that maps another's paths does not read them all. NULL: no paths. */
  int32_t *gpu_domain;  /* [GPU count]: the lowest GPU index joined below PATH_NET */
  float path_max_bw[2]; /* largest bandwidth of a path from a DEV to a DEV [0], a NET [1] */
  /* rank -> GPU index: rank_gpu[rank - rank_lo] (-1: none) for n_rank_slots
   * ranks; NULL when the ranks are too sparse for a table (then a scan). */
  int rank_lo;
  int n_rank_slots;
  int *rank_gpu;
  /* The hops of every path and the links they name (numbered node by node,
   * type by type), made by mc_topo_compute_paths and freed with the paths. */
  struct mc_topo_hop *hops;
  uint32_t n_hops;
  uint32_t cap_hops;
  struct mc_topo_link **link_table;
  int n_link_table;
  /* Paths taken from another process (mc_topo_paths_import): the read-only
   * mapping their arrays and hops live in; NULL when computed here. */
  void *paths_map;
  size_t paths_map_bytes;
  unsigned bfs_level; /* last BFS level number handed out (node marks) */
};

/* Hop ref of sys (a path's hops, a hop's next): NULL for 0. */
static inline const struct mc_topo_hop *mc_topo_hop_at(const struct mc_topo_system *sys,
                                                       uint32_t ref)
{
  return (ref == 0) ? NULL : &sys->hops[ref - 1];
}

/* The link hop h follows. */
static inline struct mc_topo_link *mc_topo_hop_link(const struct mc_topo_system *sys,
                                                    const struct mc_topo_hop *h)
{
  return sys->link_table[h->link];
}

/* Link of hop i (0 <= i < count) of a path: walks the hops, O(i). */
struct mc_topo_link *mc_topo_path_link(const struct mc_topo_system *sys,
                                       const struct mc_topo_path *path, int i);

/* Knobs of the path computation; NCCL reads them from the environment, here
 * the caller passes them (defaults from mc_topo_paths_opts_init). */
struct mc_topo_paths_opts {
  int p2p_level;          /* NCCL_P2P_LEVEL as a path type, -1 = NCCL's default */
  bool p2p_disable;       /* NCCL_P2P_DISABLE=1 (level LOC) */
  bool nvb_disable;       /* NCCL_NVB_DISABLE */
  bool pxn_disable;       /* NCCL_PXN_DISABLE (or a v4 net plugin) */
  bool pxn_c2c;           /* NCCL_PXN_C2C, default 1 */
  int net_gdr_level;      /* NCCL_NET_GDR_LEVEL as a path type, -1 = default */
  int net_gdr_read;       /* NCCL_NET_GDR_READ, default -2 */
  bool net_gdr_c2c;       /* NCCL_NET_GDR_C2C, default 1 */
  bool net_gdr_mlopart;   /* NCCL_NET_GDR_MLOPART, default 0 */
  bool net_disable_intra; /* NCCL_NET_DISABLE_INTRA */
  bool shm_disable;       /* NCCL_SHM_DISABLE */
  /* Apply the P2P/SHM transport canConnect step (NCCL does it when it has a
   * communicator): all GPUs of the system are taken to share the host and the
   * /dev/shm device; pairs neither can connect become MC_PATH_NET. */
  bool check_transports;
};

/* Fills NCCL's defaults (no variable set) with check_transports = true. */
void mc_topo_paths_opts_init(struct mc_topo_paths_opts *opts);
/* The defaults, then the parameters (NCCL_P2P_LEVEL, NCCL_P2P_DISABLE,
 * NCCL_NVB_DISABLE, NCCL_PXN_DISABLE, NCCL_PXN_C2C, NCCL_NET_GDR_LEVEL,
 * NCCL_NET_GDR_READ, NCCL_NET_GDR_C2C, NCCL_NET_DISABLE_INTRA,
 * NCCL_SHM_DISABLE); an unparsable level WARNs and keeps the default. */
void mc_topo_paths_opts_from_params(struct mc_topo_paths_opts *opts);

/*
 * Builds the system graph from a (fused) topology XML, as
 * ncclTopoGetSystemFromXml: CPUs, PCI tree, DEV+GPU for every gpu with a
 * rank, NIC/NET for every net with a dev (and net != 0), NVLinks, C2C,
 * pcilinks, Broadcom switch flattening, inter-CPU links, link ordering.
 * local_host_hash selects the local system id (the cpu host_hash values).
 * Errors: ncclInvalidUsage for a wrong <system version> or missing/invalid
 * attributes (naming element, attribute and line); ncclInvalidArgument when
 * local_host_hash is not in the XML.
 */
ncclResult_t mc_topo_system_from_xml(const struct mc_xml *xml, uint64_t local_host_hash,
                                     struct mc_topo_system **sys_out);
/* Frees the system and its paths; accepts NULL. */
void mc_topo_system_destroy(struct mc_topo_system *sys);

/*
 * ncclTopoComputePaths: BFS from every CPU, DEV, GPU, NET and NVS, then the
 * P2P reroutes through the CPU, the transport check (opts->check_transports),
 * P2C, PXN and no-GDR reroutes, and each NET's local GPU.
 */
ncclResult_t mc_topo_compute_paths(struct mc_topo_system *sys,
                                   const struct mc_topo_paths_opts *opts);
/* Frees all paths (done before any change of nodes). */
void mc_topo_free_paths(struct mc_topo_system *sys);

/*
 * The paths of one process for another with the same system and path
 * options (mc_topo_paths_digest equal): mc_topo_paths_export writes every
 * path array and the hops, position-independent (hops and links are
 * numbers), into bytes (mc_topo_paths_export_bytes of them);
 * mc_topo_paths_import makes them the paths of sys where they lie, offset
 * bytes into the mapping map of map_bytes, which becomes sys's (read-only
 * from then on, unmapped with the paths); each NET's local GPU is set as
 * mc_topo_compute_paths sets it. Import checks the layout against sys
 * (ncclInternalError, map still the caller's, sys without paths, when it
 * does not fit).
 */
size_t mc_topo_paths_export_bytes(const struct mc_topo_system *sys);
ncclResult_t mc_topo_paths_export(const struct mc_topo_system *sys, void *buf, size_t bytes);
ncclResult_t mc_topo_paths_import(struct mc_topo_system *sys, void *map, size_t map_bytes,
                                  size_t offset);

/*
 * ncclTopoTrimSystem: removes the GPUs that are not in my_rank's domain
 * (pairs of type >= MC_PATH_NET split domains) and sets sys->inter = (GPU
 * count != n_ranks). When it removes a GPU it frees the paths (NCCL computes
 * them again: call mc_topo_compute_paths); when it removes none the paths are
 * kept, as computing them again would give the same paths. *removed_out (may
 * be NULL) says which.
 */
ncclResult_t mc_topo_trim_system(struct mc_topo_system *sys, int my_rank, int n_ranks,
                                 bool *removed_out);

/* ncclTopoSearchInit: sys->max_bw and sys->total_bw (paths computed). */
void mc_topo_search_init(struct mc_topo_system *sys);

/* Path queries by node type and index; MC_PATH_DIS / 0 / -1 when the path
 * or index does not exist. */
enum mc_path_type mc_topo_path_type(const struct mc_topo_system *sys,
                                    enum mc_topo_node_type from_type, int from_idx,
                                    enum mc_topo_node_type to_type, int to_idx);
float mc_topo_path_bw(const struct mc_topo_system *sys, enum mc_topo_node_type from_type,
                      int from_idx, enum mc_topo_node_type to_type, int to_idx);
int mc_topo_path_hops(const struct mc_topo_system *sys, enum mc_topo_node_type from_type,
                      int from_idx, enum mc_topo_node_type to_type, int to_idx);
/* The path itself (NULL when absent). */
const struct mc_topo_path *mc_topo_path_get(const struct mc_topo_system *sys,
                                            enum mc_topo_node_type from_type, int from_idx,
                                            enum mc_topo_node_type to_type, int to_idx);

/* Index of the GPU driven by rank, -1 when absent. */
int mc_topo_rank_to_index(const struct mc_topo_system *sys, int rank);
/* Index of the node of that type with that id, -1 when absent. */
int mc_topo_id_to_index(const struct mc_topo_system *sys, enum mc_topo_node_type type, int64_t id);

/* ncclTopoCheckP2p (offline: NVML pair status taken as OK). p2p: path type
 * <= level; read: NVL between two sm80 GPUs; intermediate: rank of the GPU an
 * NVB path goes through, -1 when none. rank2 absent: p2p 0. */
ncclResult_t mc_topo_check_p2p(const struct mc_topo_system *sys,
                               const struct mc_topo_paths_opts *opts, int rank1, int rank2,
                               int *p2p_out, int *read_out, int *intermediate_out);
/* ncclTopoCheckNet: 1 when both GPUs reach a NET at <= PXB faster than their
 * GPU-GPU path (so P2P and SHM refuse); 0 when a rank is absent. */
int mc_topo_check_net(const struct mc_topo_system *sys, const struct mc_topo_paths_opts *opts,
                      int rank1, int rank2);

enum mc_topo_gdr_mode { MC_TOPO_GDR_DISABLED = 0, MC_TOPO_GDR_DEFAULT = 1, MC_TOPO_GDR_PCI = 2 };
/* ncclTopoCheckGdr for the GPU of rank and NET index net_idx. */
ncclResult_t mc_topo_check_gdr(const struct mc_topo_system *sys,
                               const struct mc_topo_paths_opts *opts, int rank, int net_idx,
                               int read, enum mc_topo_gdr_mode *mode_out);
/* ncclTopoGetIntermediateRank: the proxy GPU's rank of a PXN path, else rank. */
ncclResult_t mc_topo_intermediate_rank(const struct mc_topo_system *sys, int rank, int net_idx,
                                       int *rank_out);

/* ncclTopoGetLocal: the nodes of result_type with the best (bw, then type)
 * path from node (type, idx); fills locals (room for every node of
 * result_type), returns their count. */
int mc_topo_get_local(const struct mc_topo_system *sys, enum mc_topo_node_type type, int idx,
                      enum mc_topo_node_type result_type, int *locals);
/* ncclTopoGetLocalNet (2.30, policy AUTO): NET index for rank and channel. */
ncclResult_t mc_topo_get_local_net(const struct mc_topo_system *sys, int rank, int channel,
                                   int *net_idx_out);
/* ncclTopoGetLocalGpu: GPU index that uses NET net_idx first, -1 when none. */
ncclResult_t mc_topo_get_local_gpu(const struct mc_topo_system *sys, int net_idx, int *gpu_idx_out);
/* ncclGetLocalCpu: index of the CPU with the fewest hops from GPU gpu_idx. */
ncclResult_t mc_topo_local_cpu(const struct mc_topo_system *sys, int gpu_idx, int *cpu_idx_out);

/* "LOC" ... "DIS"; "?" for an unknown value. */
const char *mc_topo_path_type_str(int type);
/* "GPU", "PCI", ... */
const char *mc_topo_node_type_str(int type);
/* "LOC", "NVL", "C2C", "PCI", "SYS", "NET". */
const char *mc_topo_link_type_str(int type);

/*
 * Parses a level as NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL accept it (ncclGetLevel):
 * exact names LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS, or a legacy number
 * 0..5 (LOC PIX PXB PHB SYS SYS; larger clamps to 5). -1 when not recognised.
 */
int mc_topo_level_parse(const char *str);

/*
 * Writes NCCL's ncclTopoPrint message lines (without the log prefix), one per
 * line: "=== System : maxBw .. totalBw .. ===", the tree under each CPU,
 * "==========================================", then the path line of every
 * GPU and NET (cut at 1023 characters as NCCL's 1024-byte buffer does).
 */
ncclResult_t mc_topo_print(const struct mc_topo_system *sys, FILE *out);

/*
 * Net devices imported into the topology XML (topo_net.c; mirrors NCCL 2.30's
 * ncclTopoProcessNet, ncclTopoPopulateNics, ncclTopoFillNet, ncclTopoMakeVNics
 * and ncclTopoTrimXml). XML-level: it runs before
 * mc_topo_system_from_xml, on one rank's XML (or on a fused XML in which the
 * GPUs to keep carry keep="1").
 */

/* ncclNet v12: at most 8 physical devices per virtual NIC. */
#define MC_TOPO_NET_MAX_DEVS_PER_NIC 8
/* Physical plus virtual devices of one plugin. */
#define MC_TOPO_NET_MAX_DEVS 128

/* What a plugin's getProperties reports (the fields the import uses). */
struct mc_topo_net_props {
  char name[MC_XML_MAX_STR];
  int speed; /* Mb/s */
  int port;
  float latency;
  uint64_t guid;
  int max_comms;
  int gdr;     /* ptrSupport has CUDA (or DMA-BUF with dmaBufSupport) */
  int rail;    /* MC_TOPO_UNDEF when undefined */
  int plane;   /* MC_TOPO_UNDEF when undefined */
  int n_vdevs; /* virtual device: its physical devices; 0 for a physical one */
  int vdevs[MC_TOPO_NET_MAX_DEVS_PER_NIC];
};

/*
 * A net's own fusion (NCCL's makeVDevice, then getProperties of the new
 * device): fuses devs[0..n_devs) into one virtual device, writes its index
 * and its properties (n_vdevs/vdevs: the physical devices it is made of).
 * The index must be the next one (the net's devices are physical first,
 * then virtual in the order they were made).
 */
typedef ncclResult_t (*mc_topo_make_vdevice_fn)(void *arg, const int *devs, int n_devs,
                                                struct mc_topo_net_props *props_out,
                                                int *index_out);

/* One net plugin family (NET; GIN/RMA/CollNet are not imported yet) as seen
 * by the topology: its devices in plugin order, physical first; the index
 * of a device here is its index in the net and its NET node's dev. */
struct mc_topo_net_plugin {
  char name[32];        /* "IB", "Socket", "OFI": NCCL's "NET/<name>" log prefix */
  bool can_merge;       /* the plugin implements makeVDevice */
  int max_devs_per_nic; /* <= MC_TOPO_NET_MAX_DEVS_PER_NIC */
  int n_phys;           /* physical devices */
  int n_devs;           /* physical + virtual devices */
  /* devs[n_phys..n_devs) were made by an earlier import (NCCL makes a net's
   * virtual devices once per process): they are filled, not made again. */
  bool has_vdevs;
  /* NULL: the IB plugin's makeVDevice as the golden harness emulates it
   * (topology files); else the net's own, called with make_vdevice_arg. */
  mc_topo_make_vdevice_fn make_vdevice;
  void *make_vdevice_arg;
  struct mc_topo_net_props devs[MC_TOPO_NET_MAX_DEVS];
};

/* NIC fusion knobs (NCCL_NET_MERGE_LEVEL, NCCL_NET_FORCE_MERGE, NCCL_NET_MERGE_POLICY). */
struct mc_topo_net_opts {
  int merge_level;         /* a path type; NCCL's default PORT (= MC_PATH_NVL's value 1) */
  bool merge_policy_rail;  /* NCCL_NET_MERGE_POLICY=RAIL: merge only equal defined rails */
  const char *force_merge; /* NCCL_NET_FORCE_MERGE groups, NULL for none (not owned) */
};

/* NCCL's defaults: merge level PORT, policy ALL, no forced groups. */
void mc_topo_net_opts_init(struct mc_topo_net_opts *opts);

/* The defaults, then NCCL_NET_MERGE_LEVEL, NCCL_NET_FORCE_MERGE and
 * NCCL_NET_MERGE_POLICY (topo_params.c); a value that is not a level or a
 * policy WARNs and keeps the default (NCCL falls back to LOC for an unknown
 * level, with an INFO line). */
void mc_topo_net_opts_from_params(struct mc_topo_net_opts *opts);

/*
 * NCCL_NET_MERGE_LEVEL's own table (NCCL's nicPathKvList): LOC, PORT, PIX,
 * PXB, P2C, PXN, PHB, SYS, matched as NCCL's kvConvertToInt does: the first
 * name the value starts with, case-sensitive ("PIXEL" is PIX). Returns the
 * path type (PORT is 1, NCCL's PATH_PORT), -1 when no name matches.
 */
int mc_topo_net_merge_level_parse(const char *str);

/*
 * The net plugin NCCL would see on the server a file describes (the one
 * tests/data/topo/golden/README.md documents),
 * from the net elements of a topology XML: one device per distinct net name,
 * ordered by dev when every net has one, else in document order; family by
 * the first name (mlx5_* / bnxt_re* IB with makeVDevice, rdmap* OFI, else
 * Socket); properties from the net attributes, else the family's defaults
 * (guid: the device index). ncclInvalidUsage when there are more than
 * MC_TOPO_NET_MAX_DEVS nets.
 */
ncclResult_t mc_topo_net_plugin_from_xml(const struct mc_xml *xml,
                                         struct mc_topo_net_plugin *plugin_out);

/*
 * ncclTopoProcessNet for the NET family: fills every physical device into the
 * XML (net found by name, else attached to the first cpu) with keep="1",
 * dev=<index> and the properties not already present; then, unless dumping
 * or the plugin cannot merge, fuses the groups of opts->force_merge
 * (NCCL_NET_FORCE_MERGE: "a,b;c,d:2", exact names, optional :port) and then
 * devices whose XML path is <= merge_level into virtual NICs ("Made vNic N";
 * appended to plugin->devs), sets net="0" keep="0" on the fused physical nets
 * and fills the virtual ones under their common parent (a new pci below a
 * bridge or cpu when needed). Fusion across NUMA domains is
 * ncclInvalidArgument; a forced group naming a device that does not exist
 * (or twice), or more devices than a NIC may fuse, is ncclInvalidUsage.
 */
ncclResult_t mc_topo_net_import(struct mc_xml *xml, struct mc_topo_net_plugin *plugin,
                                const struct mc_topo_net_opts *opts, bool dumping);

/* ncclTopoTrimXml: drops every pci/cpu/nic/net without a keep="1" element
 * in or under it, and removes the keep attributes. */
ncclResult_t mc_topo_xml_trim(struct mc_xml *xml);

/*
 * A topology file treated as the host NCCL would run on (meshccl-topo --xml,
 * NCCL_TOPO_FILE): the file's nets are the net devices, with the properties
 * and virtual NIC fusion of NCCL's net import (tests/data/topo/golden/README.md; fusion knobs
 * from the parameters, mc_topo_net_opts_from_params); GPUs that carry a rank
 * are kept, then the XML is trimmed.
 */
ncclResult_t mc_topo_nets_from_file(struct mc_xml *xml);

/*
 * ncclTopoProcessNet for this host's net (NCCL's ncclTopoGetSystem on a
 * host without NCCL_TOPO_FILE): the NICs of xml (one rank's detected XML,
 * mc_topo_detect with skip_nics) are the net's devices. Each device's
 * properties (get_properties) are placed by its pci_path
 * (mc_topo_detect_net_nics; sysfs_root as there) and imported as
 * mc_topo_net_import does, fusion knobs from the parameters; when the net
 * implements make_vdevice (not mc_net_no_make_vdevice) and not dumping, the
 * fused NICs are made by the net's make_vdevice, once per process and net
 * (NCCL's setVirtDevCount): later calls fill the virtual devices the net
 * already has. Every NET node's dev is the net's device index. Then the XML
 * is trimmed (fused physical NICs leave it). Serialized process-wide (NCCL's
 * netMutex). Errors name the net and the device.
 */
struct mc_net_ops;
ncclResult_t mc_topo_nets_from_net(struct mc_xml *xml, const char *sysfs_root, uint64_t host_hash,
                                   const struct mc_net_ops *net, void *net_ctx, bool dumping);

/*
 * A static file whose GPUs are bare PCI leaves (class 0x03xxxx, no <gpu>
 * child: AWS's p4d/p4de files) is completed as NVML would on that server:
 * each such leaf gets <gpu dev sm="0" gdr="0">, dev in PCI bus-id order.
 * *n_added receives how many (0 when the file has <gpu> elements or no such
 * leaf).
 */
ncclResult_t mc_topo_gpus_from_file(struct mc_xml *xml, int *n_added);

/* ---------- transport choice (topo_transport.c) ---------- */

/* The transport of a connection (NCCL's P2P, SHM, NET transports), here
 * because topo decides it; transport/ and coll/ use the same enum for the
 * connections they set up (struct mc_conn's kind). */
enum mc_topo_transport {
  MC_TOPO_TRANSPORT_P2P = 0,
  MC_TOPO_TRANSPORT_SHM = 1,
  MC_TOPO_TRANSPORT_NET = 2
};

struct mc_topo_transport_choice {
  enum mc_topo_transport transport;
  int p2p; /* ncclTopoCheckP2p */
  int read;
  int inter;    /* intermediate rank, -1 none */
  int net;      /* ncclTopoCheckNet: a NIC is faster than the GPU-GPU path */
  bool in_topo; /* the peer is in this rank's (trimmed) system */
  char reason[256];
};

/* The P2P level in effect (NCCL_P2P_DISABLE, NCCL_P2P_LEVEL, or NCCL's
 * default: PXB, SYS on AMD x86 with at most 2 GPUs); *why_out says which. */
int mc_topo_p2p_level(const struct mc_topo_system *sys, const struct mc_topo_paths_opts *opts,
                      const char **why_out);

/*
 * Rank `rank`'s choice of transport to `peer`, decided on its own system:
 * P2P, else SHM (same host and /dev/shm, not NCCL_SHM_DISABLE), else NET
 * (NCCL's selectTransport order), with one line of reason.
 */
ncclResult_t mc_topo_transport_select(const struct mc_topo_system *sys,
                                      const struct mc_topo_paths_opts *opts, int rank, int peer,
                                      bool same_host, bool same_shm_dev,
                                      struct mc_topo_transport_choice *out);
/* Name of a transport: "P2P", "SHM", "NET" ("?" for no enumerator). */
const char *mc_topo_transport_str(enum mc_topo_transport t);

#endif /* MC_TOPO_H */
