/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to nccl_plugin/: what the exported tables of libnccl-net-mesh.so share
 * (mesh_plugin.c). Each mesh_plugin_v<N>.c defines one const ncclNet_v<N>_t
 * (NCCL's layout, include/nccl_net.h) by including the template
 * mesh_plugin_table.inc with its version; the members are thin wrappers over
 * mc_net_mesh_ops, and the calls whose prototype is the same in v8..v12 are
 * declared once here. NCCL's rules (NCCL src/include/plugin/nccl_net.h and
 * plugins/net/README.md) hold: nothing blocks, receives may be larger than
 * sends, test() reports the size transferred.
 *
 * Contexts:
 *   - v11/v12 init(ctx, commId, ...) once per NCCL communicator context:
 *     one mesh context each (mc_mesh_plugin_ctx_create), comm_id = commId,
 *     freed by finalize(ctx);
 *   - v8..v10 have no context: one mesh context for the process, created by
 *     the first init (mc_mesh_plugin_global_init), freed by the library's
 *     destructor (at NCCL's dlclose or at exit), because nothing else tells
 *     the plugin that NCCL is done and the mesh's handshake thread must stop
 *     before the code it runs is unmapped.
 */
#ifndef MC_PLUGIN_MESH_PLUGIN_INT_H
#define MC_PLUGIN_MESH_PLUGIN_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl_net.h"

/* The net's name in NCCL's logs and for NCCL_NET (the built-in net's). */
#define MC_MESH_PLUGIN_NAME "Mesh"
/* Largest n of irecv (maxRecvs): the mesh posts one buffer per request. */
#define MC_MESH_PLUGIN_MAX_RECVS 1

/* One mesh context and what the plugin keeps about it. */
struct mc_mesh_plugin_ctx {
  void *mesh;       /* the mesh net's context (mc_net_mesh_ops.init) */
  uint64_t comm_id; /* NCCL's commId (v11+), 0 for the process-wide one */
  struct mc_mesh_plugin_ctx *next;
};

/* What every version's getProperties says about device dev (only 0 exists). */
struct mc_mesh_plugin_dev {
  char *name; /* "mesh0", valid until the library is unloaded */
  uint64_t guid;
  int speed; /* Mb/s: the fastest mesh NIC's */
  int max_comms;
  size_t max_p2p_bytes;
};

/* v11+: a mesh context for NCCL's commId; logger (may be NULL) becomes the
 * sink of every line meshccl logs. *ctx_out is written on success only. */
ncclResult_t mc_mesh_plugin_ctx_create(int version, uint64_t comm_id, ncclDebugLogger_t logger,
                                       struct mc_mesh_plugin_ctx **ctx_out);
/* v11+ finalize: frees a context of mc_mesh_plugin_ctx_create (NULL: nothing). */
ncclResult_t mc_mesh_plugin_ctx_destroy(struct mc_mesh_plugin_ctx *ctx);
/* The mesh context of a v11+ ctx argument, or an ncclInvalidArgument WARN
 * naming call when ctx is NULL. */
ncclResult_t mc_mesh_plugin_ctx_mesh(void *ctx, const char *call, void **mesh_out);

/* v8..v10 init: creates the process-wide context the first time (later
 * calls only install logger). Thread-safe. */
ncclResult_t mc_mesh_plugin_global_init(int version, ncclDebugLogger_t logger);
/* The process-wide context's mesh context, or ncclInvalidUsage naming call
 * when init has not succeeded. */
ncclResult_t mc_mesh_plugin_global_mesh(const char *call, void **mesh_out);

/* devices(): 1 once a context exists, else ncclInvalidUsage. */
ncclResult_t mc_mesh_plugin_devices(int *ndev);
/* The device's properties as the first context found them. */
ncclResult_t mc_mesh_plugin_dev_get(int dev, struct mc_mesh_plugin_dev *dev_out);

/* ncclInvalidArgument naming the call and version when size does not fit the
 * int that test() (every version) or v8's isend/irecv report. */
ncclResult_t mc_mesh_plugin_size_check(int version, const char *call, size_t size);

/* The members whose prototypes are the same from v8 to v12. */
ncclResult_t mc_mesh_plugin_accept(void *listen_comm, void **recv_comm,
                                   ncclNetDeviceHandle_v8_t **recv_dev_comm);
ncclResult_t mc_mesh_plugin_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
ncclResult_t mc_mesh_plugin_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
                                          uint64_t offset, int fd, void **mhandle);
ncclResult_t mc_mesh_plugin_dereg_mr(void *comm, void *mhandle);
ncclResult_t mc_mesh_plugin_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                                   void **request);
ncclResult_t mc_mesh_plugin_test(void *request, int *done, int *sizes);
ncclResult_t mc_mesh_plugin_close_send(void *send_comm);
ncclResult_t mc_mesh_plugin_close_recv(void *recv_comm);
ncclResult_t mc_mesh_plugin_close_listen(void *listen_comm);
/* isend/irecv of every version once sizes are size_t and checked. */
ncclResult_t mc_mesh_plugin_isend(int version, void *send_comm, void *data, size_t size, int tag,
                                  void *mhandle, void **request);
ncclResult_t mc_mesh_plugin_irecv(int version, void *recv_comm, int n, void **data, size_t *sizes,
                                  int *tags, void **mhandles, void **request);

#endif /* MC_PLUGIN_MESH_PLUGIN_INT_H */
