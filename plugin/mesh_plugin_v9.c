/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclNetPlugin_v9 (NCCL 2.24, NCCL src/include/plugin/net/net_v9.h): the
 * mesh net for NCCL's v9 ABI. No context per communicator: the first
 * init(logger) makes the process-wide mesh context (mesh_plugin_int.h says
 * why it lives until the library is unloaded). isend/irecv sizes are
 * size_t, test's are int, so a request is refused above INT_MAX. Properties
 * of 104 bytes: forceFlush, vProps (up to 4 devices), maxP2pBytes,
 * maxCollBytes.
 */
#include "mesh_plugin_int.h"

#include "check.h"
#include "net/net.h"

#include <string.h>

#define VERSION 9

static ncclResult_t v9_init(ncclDebugLogger_t logger)
{
  return mc_mesh_plugin_global_init(VERSION, logger);
}

static ncclResult_t v9_get_properties(int dev, ncclNetProperties_v9_t *props)
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
  return ncclSuccess;
}

static ncclResult_t v9_listen(int dev, void *handle, void **listen_comm)
{
  void *mesh = NULL;

  MC_CHECK(mc_mesh_plugin_global_mesh("listen", &mesh));
  return mc_net_mesh_ops.listen(mesh, dev, handle, listen_comm);
}

static ncclResult_t v9_connect(int dev, void *handle, void **send_comm,
                               ncclNetDeviceHandle_v9_t **send_dev_comm)
{
  void *mesh = NULL;

  MC_CHECK(mc_mesh_plugin_global_mesh("connect", &mesh));
  if (send_dev_comm != NULL)
    *send_dev_comm = NULL;
  return mc_net_mesh_ops.connect(mesh, dev, handle, send_comm);
}

static ncclResult_t v9_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                             void **request)
{
  return mc_mesh_plugin_isend(VERSION, send_comm, data, size, tag, mhandle, request);
}

static ncclResult_t v9_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                             void **mhandles, void **request)
{
  return mc_mesh_plugin_irecv(VERSION, recv_comm, n, data, sizes, tags, mhandles, request);
}

__attribute__((visibility("default"))) const ncclNet_v9_t ncclNetPlugin_v9 = {
    .name = MC_MESH_PLUGIN_NAME,
    .init = v9_init,
    .devices = mc_mesh_plugin_devices,
    .getProperties = v9_get_properties,
    .listen = v9_listen,
    .connect = v9_connect,
    .accept = mc_mesh_plugin_accept,
    .regMr = mc_mesh_plugin_reg_mr,
    .regMrDmaBuf = mc_mesh_plugin_reg_mr_dmabuf,
    .deregMr = mc_mesh_plugin_dereg_mr,
    .isend = v9_isend,
    .irecv = v9_irecv,
    .iflush = mc_mesh_plugin_iflush,
    .test = mc_mesh_plugin_test,
    .closeSend = mc_mesh_plugin_close_send,
    .closeRecv = mc_mesh_plugin_close_recv,
    .closeListen = mc_mesh_plugin_close_listen,
    .getDeviceMr = NULL,   /* host memory: no device-side registration */
    .irecvConsumed = NULL, /* no device offload */
    .makeVDevice = NULL,   /* NCCL keeps the physical device (NCCL src/graph/topo.cc) */
};

/* The table is of the header's type (whose layout test_nccl_net_abi.c pins to NCCL's). */
_Static_assert(_Generic(&ncclNetPlugin_v9, const ncclNet_v9_t * : 1, default : 0),
               "ncclNetPlugin_v9 is an ncclNet_v9_t");
