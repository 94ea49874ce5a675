/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Adapter for ncclNet_v12_t plugins (NCCL 2.30; NCCL's
 * src/plugin/net/net_v12.cc): the v11 calls over v12's types; virtual
 * devices of up to 8 devices, railId and planeId (NCCL_NET_ID_UNDEF -> -1).
 */
#include "plugin_int.h"

#include "check.h"
#include "log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct mc_net_plugin *bound;

static const ncclNet_v12_t *net(void)
{
  return bound->table;
}

/* Every communicator initialises the plugin with its own id and config. */
static ncclResult_t v12_init(const struct mc_net_init_args *args, void **ctx_out)
{
  struct mc_plugin_ctx *ctx = NULL;
  ncclNetCommConfig_v12_t config;
  ncclResult_t res;

  MC_CHECK(mc_plugin_ctx_create(bound, &ctx));
  config.trafficClass = ctx->config.trafficClass;
  res = net()->init(&ctx->plugin_ctx, (args != NULL) ? args->comm_id : 0, &config, mc_plugin_logger,
                    NULL);
  if (res != ncclSuccess) {
    free(ctx);
    return MC_PLUGIN_FAIL(bound, res, "init");
  }
  *ctx_out = ctx;
  return ncclSuccess;
}

static ncclResult_t v12_finalize(void *ctx)
{
  struct mc_plugin_ctx *pc = ctx;
  ncclResult_t res;

  if (pc == NULL)
    return ncclSuccess;
  res = net()->finalize(pc->plugin_ctx);
  free(pc);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "finalize");
}

static ncclResult_t v12_devices(void *ctx, int *n_devs_out)
{
  ncclResult_t res;

  (void)ctx;
  res = net()->devices(n_devs_out);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "devices");
}

static ncclResult_t v12_get_properties(void *ctx, int dev, struct mc_net_props *props_out)
{
  ncclNetProperties_v12_t p;
  struct mc_net_props props;
  ncclResult_t res;

  (void)ctx;
  memset(&p, 0, sizeof(p));
  res = net()->getProperties(dev, &p);
  if (res != ncclSuccess)
    return MC_PLUGIN_FAIL(bound, res, "getProperties");
  mc_plugin_props_base(&props, dev, p.name, p.pciPath, p.guid, p.ptrSupport, p.speed, p.port,
                       p.latency, p.maxComms, p.maxRecvs);
  props.reg_is_global = (p.regIsGlobal != 0);
  props.force_flush = (p.forceFlush != 0);
  MC_CHECK(mc_plugin_props_vdevs(bound, &props, p.vProps.ndevs, p.vProps.devs,
                                 NCCL_NET_MAX_DEVS_PER_NIC_V12));
  if (p.maxP2pBytes != 0)
    props.max_p2p_bytes = p.maxP2pBytes;
  props.max_coll_bytes = p.maxCollBytes;
  props.max_multi_request_bytes = (p.maxMultiRequestSize > 0) ? (size_t)p.maxMultiRequestSize : 0;
  props.rail_id = (p.railId >= 0) ? p.railId : -1;
  props.plane_id = (p.planeId >= 0) ? p.planeId : -1;
  *props_out = props;
  return ncclSuccess;
}

static ncclResult_t v12_make_vdevice(void *ctx, const struct mc_net_vprops *vprops, int *dev_out)
{
  ncclNetVDeviceProps_v12_t vp;
  ncclResult_t res;

  (void)ctx;
  if ((vprops->n_devs < 1) || (vprops->n_devs > NCCL_NET_MAX_DEVS_PER_NIC_V12))
    return MC_FAIL(
        ncclInvalidArgument,
        "NET/Plugin: %s (v12): a virtual device of %d devices (the v12 ABI allows 1 to %d)",
        bound->name, vprops->n_devs, NCCL_NET_MAX_DEVS_PER_NIC_V12);
  memset(&vp, 0, sizeof(vp));
  vp.ndevs = vprops->n_devs;
  for (int i = 0; i < vp.ndevs; i++)
    vp.devs[i] = vprops->devs[i];
  res = net()->makeVDevice(dev_out, &vp);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "makeVDevice");
}

static ncclResult_t v12_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
  ncclResult_t res;

  res = net()->listen(((struct mc_plugin_ctx *)ctx)->plugin_ctx, dev, handle, listen_comm);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "listen");
}

static ncclResult_t v12_connect(void *ctx, int dev, const void *handle, void **send_comm)
{
  struct mc_plugin_ctx *pc = ctx;
  ncclNetDeviceHandle_v12_t *dev_handle = NULL;
  struct mc_plugin_comm *c = NULL;
  void *comm = NULL;
  ncclResult_t res;

  /* Not const in NCCL: plugins may keep their connect stage in the handle (NCCL's IB does);
   * the NET transport passes the same writable buffer on every call. */
  res = net()->connect(pc->plugin_ctx, dev, (void *)(uintptr_t)handle, &comm, &dev_handle);
  if (res != ncclSuccess)
    return MC_PLUGIN_FAIL(bound, res, "connect");
  res = mc_plugin_comm_wrap(bound, comm, &c);
  if (res != ncclSuccess) {
    (void)net()->closeSend(comm);
    return res;
  }
  *send_comm = c;
  return ncclSuccess;
}

static ncclResult_t v12_accept(void *listen_comm, void **recv_comm)
{
  ncclNetDeviceHandle_v12_t *dev_handle = NULL;
  struct mc_plugin_comm *c = NULL;
  void *comm = NULL;
  ncclResult_t res;

  res = net()->accept(listen_comm, &comm, &dev_handle);
  if (res != ncclSuccess)
    return MC_PLUGIN_FAIL(bound, res, "accept");
  res = mc_plugin_comm_wrap(bound, comm, &c);
  if (res != ncclSuccess) {
    (void)net()->closeRecv(comm);
    return res;
  }
  *recv_comm = c;
  return ncclSuccess;
}

static ncclResult_t v12_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
  struct mc_plugin_comm *c = comm;
  ncclResult_t res;

  res = net()->regMr(c->comm, data, size, type, mhandle);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "regMr");
}

static ncclResult_t v12_dereg_mr(void *comm, void *mhandle)
{
  struct mc_plugin_comm *c = comm;
  ncclResult_t res;

  res = net()->deregMr(c->comm, mhandle);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "deregMr");
}

static ncclResult_t v12_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                              void **request)
{
  struct mc_plugin_comm *c = send_comm;
  struct mc_plugin_req *r = NULL;
  void *req = NULL;
  ncclResult_t res;

  MC_CHECK(mc_plugin_req_claim(c, &r));
  res = net()->isend(c->comm, data, size, tag, mhandle, NULL, &req);
  if (res != ncclSuccess)
    return MC_PLUGIN_FAIL(bound, res, "isend");
  if (req != NULL)
    mc_plugin_req_post(r, req, 1, &size);
  *request = (req != NULL) ? r : NULL;
  return ncclSuccess;
}

static ncclResult_t v12_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                              void **mhandles, void **request)
{
  struct mc_plugin_comm *c = recv_comm;
  struct mc_plugin_req *r = NULL;
  void *phandles[MC_PLUGIN_MAX_RECVS] = {NULL};
  void *req = NULL;
  ncclResult_t res;

  MC_CHECK(mc_plugin_recv_sizes(bound, n, sizes, NULL));
  MC_CHECK(mc_plugin_req_claim(c, &r));
  res = net()->irecv(c->comm, n, data, sizes, tags, mhandles, phandles, &req);
  if (res != ncclSuccess)
    return MC_PLUGIN_FAIL(bound, res, "irecv");
  if (req != NULL)
    mc_plugin_req_post(r, req, n, sizes);
  *request = (req != NULL) ? r : NULL;
  return ncclSuccess;
}

static ncclResult_t v12_test(void *request, int *done, size_t *sizes)
{
  return mc_plugin_test(bound, net()->test, request, done, sizes);
}

static ncclResult_t v12_close_send(void *send_comm)
{
  struct mc_plugin_comm *c = send_comm;
  ncclResult_t res;

  if (c == NULL)
    return ncclSuccess;
  res = net()->closeSend(c->comm);
  free(c);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "closeSend");
}

static ncclResult_t v12_close_recv(void *recv_comm)
{
  struct mc_plugin_comm *c = recv_comm;
  ncclResult_t res;

  if (c == NULL)
    return ncclSuccess;
  res = net()->closeRecv(c->comm);
  free(c);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "closeRecv");
}

static ncclResult_t v12_close_listen(void *listen_comm)
{
  ncclResult_t res;

  if (listen_comm == NULL)
    return ncclSuccess;
  res = net()->closeListen(listen_comm);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "closeListen");
}

static const struct mc_net_ops v12_ops = {
    .abi = MC_NET_OPS_ABI,
    .name = "NCCL net plugin v12",
    .init = v12_init,
    .devices = v12_devices,
    .get_properties = v12_get_properties,
    .make_vdevice = v12_make_vdevice,
    .listen = v12_listen,
    .connect = v12_connect,
    .accept = v12_accept,
    .reg_mr = v12_reg_mr,
    .dereg_mr = v12_dereg_mr,
    .isend = v12_isend,
    .irecv = v12_irecv,
    .test = v12_test,
    .close_send = v12_close_send,
    .close_recv = v12_close_recv,
    .close_listen = v12_close_listen,
    .finalize = v12_finalize,
};

static ncclResult_t v12_bind(struct mc_net_plugin *p)
{
  const ncclNet_v12_t *t = p->table;

  if ((bound != NULL) && (bound->table != p->table))
    return MC_FAIL(ncclInvalidUsage,
                   "NET/Plugin: %s: another v12 plugin (%s) is already loaded; one plugin per ABI "
                   "version per process",
                   p->path, bound->path);
  MC_PLUGIN_REQUIRE(p, t);
  MC_PLUGIN_REQUIRE_MEMBER(p, t, finalize);
  if (t->makeVDevice == NULL)
    p->ops.make_vdevice = mc_net_no_make_vdevice;
  bound = p;
  return ncclSuccess;
}

const struct mc_net_plugin_adapter mc_net_plugin_v12 = {
    .version = 12, .symbol = "ncclNetPlugin_v12", .ops = &v12_ops, .bind = v12_bind};
