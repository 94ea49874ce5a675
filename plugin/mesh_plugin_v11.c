/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclNetPlugin_v11 (NCCL 2.28, NCCL src/include/plugin/net/net_v11.h): the
 * mesh net for NCCL's v11 ABI, the first with a context per NCCL
 * communicator: init(ctx, commId, config, logger, profiler) makes one mesh
 * context each (the commId keys it), finalize(ctx) frees it. Properties of
 * 112 bytes: up to 4 devices per virtual device, maxMultiRequestSize; no
 * railId or planeId. config's trafficClass and the profiler are not used.
 */
#include "mesh_plugin_int.h"

#include "check.h"
#include "net/net.h"

#include <string.h>

#define VERSION 11

static ncclResult_t v11_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config,
                             ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
  struct mc_mesh_plugin_ctx *c = NULL;

  (void)config;
  (void)prof;
  MC_CHECK(mc_mesh_plugin_ctx_create(VERSION, comm_id, logger, &c));
  *ctx = c;
  return ncclSuccess;
}

static ncclResult_t v11_get_properties(int dev, ncclNetProperties_v11_t *props)
{
  struct mc_mesh_plugin_dev d;

  MC_CHECK(mc_mesh_plugin_dev_get(dev, &d));
  memset(props, 0, sizeof(*props));
  props->name = d.name;
  props->pciPath = NULL; /* the NIC is chosen per connection: no single PCI place */
  props->guid = d.guid;
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speed = d.speed;
  props->port = 0;
  props->latency = 0;
  props->maxComms = d.max_comms;
  props->maxRecvs = MC_MESH_PLUGIN_MAX_RECVS;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = 0; /* NCCL_NET_DEVICE_INVALID_VERSION: no device offload */
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = d.max_p2p_bytes;
  props->maxCollBytes = MAX_COLLNET_SIZE; /* no CollNet; NCCL wants a value in (0, 1 TiB] */
  props->maxMultiRequestSize = 1;
  return ncclSuccess;
}

static ncclResult_t v11_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
  void *mesh = NULL;

  MC_CHECK(mc_mesh_plugin_ctx_mesh(ctx, "listen", &mesh));
  return mc_net_mesh_ops.listen(mesh, dev, handle, listen_comm);
}

static ncclResult_t v11_connect(void *ctx, int dev, void *handle, void **send_comm,
                                ncclNetDeviceHandle_v11_t **send_dev_comm)
{
  void *mesh = NULL;

  MC_CHECK(mc_mesh_plugin_ctx_mesh(ctx, "connect", &mesh));
  if (send_dev_comm != NULL)
    *send_dev_comm = NULL;
  return mc_net_mesh_ops.connect(mesh, dev, handle, send_comm);
}

static ncclResult_t v11_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                              void *phandle, void **request)
{
  (void)phandle;
  return mc_mesh_plugin_isend(VERSION, send_comm, data, size, tag, mhandle, request);
}

static ncclResult_t v11_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                              void **mhandles, void **phandles, void **request)
{
  (void)phandles;
  return mc_mesh_plugin_irecv(VERSION, recv_comm, n, data, sizes, tags, mhandles, request);
}

static ncclResult_t v11_finalize(void *ctx)
{
  return mc_mesh_plugin_ctx_destroy(ctx);
}

static ncclResult_t v11_set_net_attr(void *ctx, ncclNetAttr_v11_t *attr)
{
  (void)ctx;
  (void)attr; /* traffic hints: the mesh has nothing to tune per operation */
  return ncclSuccess;
}

__attribute__((visibility("default"))) const ncclNet_v11_t ncclNetPlugin_v11 = {
    .name = MC_MESH_PLUGIN_NAME,
    .init = v11_init,
    .devices = mc_mesh_plugin_devices,
    .getProperties = v11_get_properties,
    .listen = v11_listen,
    .connect = v11_connect,
    .accept = mc_mesh_plugin_accept,
    .regMr = mc_mesh_plugin_reg_mr,
    .regMrDmaBuf = mc_mesh_plugin_reg_mr_dmabuf,
    .deregMr = mc_mesh_plugin_dereg_mr,
    .isend = v11_isend,
    .irecv = v11_irecv,
    .iflush = mc_mesh_plugin_iflush,
    .test = mc_mesh_plugin_test,
    .closeSend = mc_mesh_plugin_close_send,
    .closeRecv = mc_mesh_plugin_close_recv,
    .closeListen = mc_mesh_plugin_close_listen,
    .getDeviceMr = NULL,   /* host memory: no device-side registration */
    .irecvConsumed = NULL, /* no device offload */
    .makeVDevice = NULL,   /* NCCL keeps the physical device (NCCL src/graph/topo.cc) */
    .finalize = v11_finalize,
    .setNetAttr = v11_set_net_attr,
};

/* The table is of the header's type (whose layout test_nccl_net_abi.c pins to NCCL's). */
_Static_assert(_Generic(&ncclNetPlugin_v11, const ncclNet_v11_t * : 1, default : 0),
               "ncclNetPlugin_v11 is an ncclNet_v11_t");
