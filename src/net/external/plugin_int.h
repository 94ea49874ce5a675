/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to src/net/external/: what the loader and the per-version adapters
 * share. An adapter (plugin_vN.c) turns one plugin's ncclNet_vN_t into a
 * struct mc_net_ops whose functions reach the plugin through the file's
 * bound record (one plugin per ABI version per process, as NCCL's own
 * adapters src/plugin/net/net_vN.cc keep one table per version).
 *
 * Wrapping (plugin_common.c): the adapter's send and receive comms are a
 * struct mc_plugin_comm around the plugin's comm, with a pool of
 * MC_NET_MAX_REQUESTS requests; a request remembers the sizes it was posted
 * with, so that test() can report them when the plugin leaves its sizes
 * untouched (the sentinel MC_PLUGIN_SIZE_UNSET is written before every
 * call). Listen comms and memory handles are the plugin's own.
 */
#ifndef MC_NET_EXTERNAL_PLUGIN_INT_H
#define MC_NET_EXTERNAL_PLUGIN_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "nccl_net.h"
#include "net/net.h"

#define MC_PLUGIN_MAX_RECVS  8  /* largest n of irecv the adapters pass (NCCL's IB maxRecvs) */
#define MC_PLUGIN_SIZE_UNSET -1 /* test()'s sizes before the call */
#define MC_PLUGIN_NAME_BYTES 64

/* One loaded plugin library (process-wide, never freed). */
struct mc_net_plugin {
  int version;       /* 6..12 */
  const void *table; /* its ncclNet_vN_t */
  void *dl;
  char path[PATH_MAX];             /* resolved library path */
  char symbol[32];                 /* "ncclNetPlugin_v9" */
  char name[MC_PLUGIN_NAME_BYTES]; /* the table's name */
  struct mc_net_ops ops;           /* the adapter's table, named after the plugin */
  pthread_mutex_t init_lock;       /* v6..v10: the plugin is initialised once */
  int init_refs;
  int sizes_unreported; /* test() left sizes unset once (logged once) */
};

struct mc_net_plugin_adapter {
  int version;
  const char *symbol;
  const struct mc_net_ops *ops; /* name is replaced by the plugin's */
  /* Makes this plugin the one the adapter's functions call. ncclInvalidUsage
   * when another library of the same version is already bound. */
  ncclResult_t (*bind)(struct mc_net_plugin *plugin);
};

extern const struct mc_net_plugin_adapter mc_net_plugin_v6;
extern const struct mc_net_plugin_adapter mc_net_plugin_v7;
extern const struct mc_net_plugin_adapter mc_net_plugin_v8;
extern const struct mc_net_plugin_adapter mc_net_plugin_v9;
extern const struct mc_net_plugin_adapter mc_net_plugin_v10;
extern const struct mc_net_plugin_adapter mc_net_plugin_v11;
extern const struct mc_net_plugin_adapter mc_net_plugin_v12;

/* Per-communicator state of an adapter (ops->init's *ctx_out). */
struct mc_plugin_ctx {
  struct mc_net_plugin *plugin;
  void *plugin_ctx;               /* v11+: the plugin's per-communicator context */
  ncclNetCommConfig_v10_t config; /* v10: passed to every connect */
};

struct mc_plugin_req {
  void *req; /* the plugin's request; NULL: slot free */
  bool is_recv;
  int n;
  size_t posted[MC_PLUGIN_MAX_RECVS];
};

struct mc_plugin_comm {
  void *comm; /* the plugin's send or receive comm */
  struct mc_net_plugin *plugin;
  struct mc_plugin_req reqs[MC_NET_MAX_REQUESTS];
};

/* The logger every plugin's init receives: NCCL's levels and subsystem bits
 * to mc_log's (equal values), the plugin's file and line; flags 0 count as
 * NET (NCCL drops such lines); a WARN always prints. */
void mc_plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* "ncclSystemError" for a result code ("result 42" when unknown; static or thread-local text). */
const char *mc_plugin_res_str(ncclResult_t res);

/* A plugin call failed: records "NET/Plugin: <name> (vN): <call> failed: <code>". */
#define MC_PLUGIN_FAIL(_p, _res, _call)                                                            \
  MC_FAIL((_res), "NET/Plugin: %s (v%d, %s): %s failed: %s", (_p)->name, (_p)->version,            \
          (_p)->path, (_call), mc_plugin_res_str(_res))

/* bind's check of a plugin's own table: every member meshccl calls is set. */
#define MC_PLUGIN_REQUIRE_MEMBER(_p, _t, _m)                                                       \
  do {                                                                                             \
    if ((_t)->_m == NULL)                                                                          \
      return MC_FAIL(ncclInvalidUsage, "NET/Plugin: %s: %s has no '%s'", (_p)->path, (_p)->symbol, \
                     #_m);                                                                         \
  } while (0)
#define MC_PLUGIN_REQUIRE(_p, _t)                                                                  \
  do {                                                                                             \
    MC_PLUGIN_REQUIRE_MEMBER(_p, _t, init);                                                        \
    MC_PLUGIN_REQUIRE_MEMBER(_p, _t, devices);                                                     \
    MC_PLUGIN_REQUIRE_MEMBER(_p, _t, getProperties);                                               \
    MC_PLUGIN_REQUIRE_MEMBER(_p, _t, listen);                                                      \
    MC_PLUGIN_REQUIRE_MEMBER(_p, _t, connect);                                                     \
    MC_PLUGIN_REQUIRE_MEMBER(_p, _t, accept);                                                      \
    MC_PLUGIN_REQUIRE_MEMBER(_p, _t, regMr);                                                       \
    MC_PLUGIN_REQUIRE_MEMBER(_p, _t, deregMr);                                                     \
    MC_PLUGIN_REQUIRE_MEMBER(_p, _t, isend);                                                       \
    MC_PLUGIN_REQUIRE_MEMBER(_p, _t, irecv);                                                       \
    MC_PLUGIN_REQUIRE_MEMBER(_p, _t, test);                                                        \
    MC_PLUGIN_REQUIRE_MEMBER(_p, _t, closeSend);                                                   \
    MC_PLUGIN_REQUIRE_MEMBER(_p, _t, closeRecv);                                                   \
    MC_PLUGIN_REQUIRE_MEMBER(_p, _t, closeListen);                                                 \
  } while (0)

/* Properties common to every version; the rest get the defaults of an
 * older plugin (no vNIC: vprops {1, [dev]}, max_p2p_bytes MAX_NET_SIZE,
 * rail and plane -1). name/pci NULL become "". */
void mc_plugin_props_base(struct mc_net_props *props, int dev, const char *name, const char *pci,
                          uint64_t guid, int ptr_support, int speed, int port, float latency,
                          int max_comms, int max_recvs);
/* Copies a plugin's vProps (ndevs checked against max_devs). */
ncclResult_t mc_plugin_props_vdevs(const struct mc_net_plugin *p, struct mc_net_props *props,
                                   int ndevs, const int *devs, int max_devs);

/* Per-communicator context: allocation, and the once-per-process init of
 * v6..v10 plugins (init_fn called with the plugin's lock held when no other
 * communicator holds it). */
ncclResult_t mc_plugin_ctx_create(struct mc_net_plugin *p, struct mc_plugin_ctx **ctx_out);
ncclResult_t mc_plugin_init_once(struct mc_net_plugin *p,
                                 ncclResult_t (*init_fn)(const struct mc_net_plugin *p));
void mc_plugin_fini_once(struct mc_net_plugin *p);

/* Wraps a plugin comm (NULL stays NULL). */
ncclResult_t mc_plugin_comm_wrap(struct mc_net_plugin *p, void *comm, struct mc_plugin_comm **out);

/* A free request slot of c, or ncclInternalError when MC_NET_MAX_REQUESTS
 * are outstanding (the NET transport keeps fewer). */
ncclResult_t mc_plugin_req_claim(struct mc_plugin_comm *c, struct mc_plugin_req **out);
/* Records a posted request (preq != NULL) with its n sizes. */
void mc_plugin_req_post(struct mc_plugin_req *r, void *preq, bool is_recv, int n,
                        const size_t *sizes);

/* test() for every version (their test has the same signature). Sizes left
 * at the sentinel are reported as posted: the posted size of a send is what
 * was sent; for a receive it is the buffer's size, which may be more than
 * what arrived (documented in docs/design/net.md, "Net plugins"). */
ncclResult_t mc_plugin_test(struct mc_net_plugin *p, ncclResult_t (*test_fn)(void *, int *, int *),
                            void *request, int *done, size_t *sizes);

/* Refuses a size that an int-size ABI (v6..v8) cannot carry. */
ncclResult_t mc_plugin_int_size(const struct mc_net_plugin *p, size_t size, const char *call);

/* irecv argument checks and the int copy of the sizes for v6..v8. */
ncclResult_t mc_plugin_recv_sizes(const struct mc_net_plugin *p, int n, const size_t *sizes,
                                  int *int_sizes);

#endif /* MC_NET_EXTERNAL_PLUGIN_INT_H */
