/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclNetPlugin_v8 (NCCL 2.20, NCCL src/include/plugin/net/net_v8.h): the
 * mesh net for NCCL's v8 ABI. No context per communicator: the first
 * init(logger) makes the process-wide mesh context (mesh_plugin_int.h says
 * why it lives until the library is unloaded). isend/irecv/test sizes are
 * int (regMr's is size_t): a negative size is refused. Properties of 64
 * bytes: regIsGlobal after ptrSupport, no forceFlush, vProps or
 * maxP2pBytes (NCCL assumes MAX_NET_SIZE, 1 GiB, for v8).
 */
#include "mesh_plugin_int.h"

#include "check.h"
#include "net/net.h"

#include <string.h>

#define VERSION 8

static ncclResult_t v8_init(ncclDebugLogger_t logger)
{
  return mc_mesh_plugin_global_init(VERSION, logger);
}

static ncclResult_t v8_get_properties(int dev, ncclNetProperties_v8_t *props)
{
  struct mc_mesh_plugin_dev d;

  MC_CHECK(mc_mesh_plugin_dev_get(dev, &d));
  memset(props, 0, sizeof(*props));
  props->name = d.name;
  props->pciPath = NULL; /* the NIC is chosen per connection: no single PCI place */
  props->guid = d.guid;
  props->ptrSupport = NCCL_PTR_HOST;
  props->regIsGlobal = 0;
  props->speed = d.speed;
  props->port = 0;
  props->latency = 0;
  props->maxComms = d.max_comms;
  props->maxRecvs = MC_MESH_PLUGIN_MAX_RECVS;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = 0; /* NCCL_NET_DEVICE_INVALID_VERSION: no device offload */
  return ncclSuccess;
}

static ncclResult_t v8_listen(int dev, void *handle, void **listen_comm)
{
  void *mesh = NULL;

  MC_CHECK(mc_mesh_plugin_global_mesh("listen", &mesh));
  return mc_net_mesh_ops.listen(mesh, dev, handle, listen_comm);
}

static ncclResult_t v8_connect(int dev, void *handle, void **send_comm,
                               ncclNetDeviceHandle_v8_t **send_dev_comm)
{
  void *mesh = NULL;

  MC_CHECK(mc_mesh_plugin_global_mesh("connect", &mesh));
  if (send_dev_comm != NULL)
    *send_dev_comm = NULL;
  return mc_net_mesh_ops.connect(mesh, dev, handle, send_comm);
}

static ncclResult_t v8_isend(void *send_comm, void *data, int size, int tag, void *mhandle,
                             void **request)
{
  if (size < 0)
    return MC_FAIL(ncclInvalidArgument, "NET/Mesh: plugin v8 isend of %d bytes", size);
  return mc_mesh_plugin_isend(VERSION, send_comm, data, (size_t)size, tag, mhandle, request);
}

static ncclResult_t v8_irecv(void *recv_comm, int n, void **data, int *sizes, int *tags,
                             void **mhandles, void **request)
{
  size_t sizes_z[MC_MESH_PLUGIN_MAX_RECVS];

  if ((n < 1) || (n > MC_MESH_PLUGIN_MAX_RECVS))
    return MC_FAIL(ncclInvalidArgument, "NET/Mesh: plugin v8 irecv of %d buffers (maxRecvs is %d)",
                   n, MC_MESH_PLUGIN_MAX_RECVS);
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0)
      return MC_FAIL(ncclInvalidArgument, "NET/Mesh: plugin v8 irecv of %d bytes", sizes[i]);
    sizes_z[i] = (size_t)sizes[i];
  }
  return mc_mesh_plugin_irecv(VERSION, recv_comm, n, data, sizes_z, tags, mhandles, request);
}

__attribute__((visibility("default"))) const ncclNet_v8_t ncclNetPlugin_v8 = {
    .name = MC_MESH_PLUGIN_NAME,
    .init = v8_init,
    .devices = mc_mesh_plugin_devices,
    .getProperties = v8_get_properties,
    .listen = v8_listen,
    .connect = v8_connect,
    .accept = mc_mesh_plugin_accept,
    .regMr = mc_mesh_plugin_reg_mr,
    .regMrDmaBuf = mc_mesh_plugin_reg_mr_dmabuf,
    .deregMr = mc_mesh_plugin_dereg_mr,
    .isend = v8_isend,
    .irecv = v8_irecv,
    .iflush = mc_mesh_plugin_iflush,
    .test = mc_mesh_plugin_test,
    .closeSend = mc_mesh_plugin_close_send,
    .closeRecv = mc_mesh_plugin_close_recv,
    .closeListen = mc_mesh_plugin_close_listen,
    .getDeviceMr = NULL,   /* host memory: no device-side registration */
    .irecvConsumed = NULL, /* no device offload */
};

/* The table is of the header's type (whose layout test_nccl_net_abi.c pins to NCCL's). */
_Static_assert(_Generic(&ncclNetPlugin_v8, const ncclNet_v8_t * : 1, default : 0),
               "ncclNetPlugin_v8 is an ncclNet_v8_t");
