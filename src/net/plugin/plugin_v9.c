/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Adapter for ncclNet_v9_t plugins (NCCL 2.24; NCCL's
 * src/plugin/net/net_v9.cc): size_t isend/irecv sizes, int test sizes,
 * makeVDevice (NULL in the plugin -> mc_net_no_make_vdevice), properties
 * with regIsGlobal, forceFlush, vProps (at most 4 devices), maxP2pBytes and
 * maxCollBytes; no maxMultiRequestSize, rail or plane (0, -1, -1).
 * init(logger) runs once per process; connect/accept get a NULL device
 * handle (no offload).
 */
#include "plugin_int.h"

#include "check.h"
#include "log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct mc_net_plugin *bound;

static const ncclNet_v9_t *net(void)
{
  return bound->table;
}

static ncclResult_t init_plugin(const struct mc_net_plugin *p)
{
  return ((const ncclNet_v9_t *)p->table)->init(mc_plugin_logger);
}

static ncclResult_t v9_init(const struct mc_net_init_args *args, void **ctx_out)
{
  struct mc_plugin_ctx *ctx = NULL;
  ncclResult_t res;

  (void)args;
  MC_CHECK(mc_plugin_init_once(bound, init_plugin));
  res = mc_plugin_ctx_create(bound, &ctx);
  if (res != ncclSuccess) {
    mc_plugin_fini_once(bound);
    return res;
  }
  *ctx_out = ctx;
  return ncclSuccess;
}

static ncclResult_t v9_finalize(void *ctx)
{
  mc_plugin_fini_once(bound);
  free(ctx);
  return ncclSuccess;
}

static ncclResult_t v9_devices(void *ctx, int *n_devs_out)
{
  ncclResult_t res;

  (void)ctx;
  res = net()->devices(n_devs_out);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "devices");
}

static ncclResult_t v9_get_properties(void *ctx, int dev, struct mc_net_props *props_out)
{
  ncclNetProperties_v9_t p;
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
                                 NCCL_NET_MAX_DEVS_PER_NIC_V11));
  if (p.maxP2pBytes != 0)
    props.max_p2p_bytes = p.maxP2pBytes;
  props.max_coll_bytes = p.maxCollBytes;
  *props_out = props;
  return ncclSuccess;
}

static ncclResult_t v9_make_vdevice(void *ctx, const struct mc_net_vprops *vprops, int *dev_out)
{
  ncclNetVDeviceProps_v9_t vp;
  ncclResult_t res;

  (void)ctx;
  if ((vprops->n_devs < 1) || (vprops->n_devs > NCCL_NET_MAX_DEVS_PER_NIC_V11))
    return MC_FAIL(
        ncclInvalidArgument,
        "NET/Plugin: %s (v9): a virtual device of %d devices (the v9 ABI allows 1 to %d)",
        bound->name, vprops->n_devs, NCCL_NET_MAX_DEVS_PER_NIC_V11);
  memset(&vp, 0, sizeof(vp));
  vp.ndevs = vprops->n_devs;
  for (int i = 0; i < vp.ndevs; i++)
    vp.devs[i] = vprops->devs[i];
  res = net()->makeVDevice(dev_out, &vp);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "makeVDevice");
}

static ncclResult_t v9_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
  ncclResult_t res;

  (void)ctx;
  res = net()->listen(dev, handle, listen_comm);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "listen");
}

static ncclResult_t v9_connect(void *ctx, int dev, const void *handle, void **send_comm)
{
  ncclNetDeviceHandle_v9_t *dev_handle = NULL;
  struct mc_plugin_comm *c = NULL;
  void *comm = NULL;
  ncclResult_t res;

  (void)ctx;
  /* Not const in NCCL: plugins may keep their connect stage in the handle (NCCL's IB does);
   * the NET transport passes the same writable buffer on every call. */
  res = net()->connect(dev, (void *)(uintptr_t)handle, &comm, &dev_handle);
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

static ncclResult_t v9_accept(void *listen_comm, void **recv_comm)
{
  ncclNetDeviceHandle_v9_t *dev_handle = NULL;
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

static ncclResult_t v9_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
  struct mc_plugin_comm *c = comm;
  ncclResult_t res;

  res = net()->regMr(c->comm, data, size, type, mhandle);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "regMr");
}

static ncclResult_t v9_dereg_mr(void *comm, void *mhandle)
{
  struct mc_plugin_comm *c = comm;
  ncclResult_t res;

  res = net()->deregMr(c->comm, mhandle);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "deregMr");
}

static ncclResult_t v9_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                             void **request)
{
  struct mc_plugin_comm *c = send_comm;
  struct mc_plugin_req *r = NULL;
  void *req = NULL;
  ncclResult_t res;

  MC_CHECK(mc_plugin_req_claim(c, &r));
  res = net()->isend(c->comm, data, size, tag, mhandle, &req);
  if (res != ncclSuccess)
    return MC_PLUGIN_FAIL(bound, res, "isend");
  if (req != NULL)
    mc_plugin_req_post(r, req, 1, &size);
  *request = (req != NULL) ? r : NULL;
  return ncclSuccess;
}

static ncclResult_t v9_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                             void **mhandles, void **request)
{
  struct mc_plugin_comm *c = recv_comm;
  struct mc_plugin_req *r = NULL;
  void *req = NULL;
  ncclResult_t res;

  MC_CHECK(mc_plugin_recv_sizes(bound, n, sizes, NULL));
  MC_CHECK(mc_plugin_req_claim(c, &r));
  res = net()->irecv(c->comm, n, data, sizes, tags, mhandles, &req);
  if (res != ncclSuccess)
    return MC_PLUGIN_FAIL(bound, res, "irecv");
  if (req != NULL)
    mc_plugin_req_post(r, req, n, sizes);
  *request = (req != NULL) ? r : NULL;
  return ncclSuccess;
}

static ncclResult_t v9_test(void *request, int *done, size_t *sizes)
{
  return mc_plugin_test(bound, net()->test, request, done, sizes);
}

static ncclResult_t v9_close_send(void *send_comm)
{
  struct mc_plugin_comm *c = send_comm;
  ncclResult_t res;

  if (c == NULL)
    return ncclSuccess;
  res = net()->closeSend(c->comm);
  free(c);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "closeSend");
}

static ncclResult_t v9_close_recv(void *recv_comm)
{
  struct mc_plugin_comm *c = recv_comm;
  ncclResult_t res;

  if (c == NULL)
    return ncclSuccess;
  res = net()->closeRecv(c->comm);
  free(c);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "closeRecv");
}

static ncclResult_t v9_close_listen(void *listen_comm)
{
  ncclResult_t res;

  if (listen_comm == NULL)
    return ncclSuccess;
  res = net()->closeListen(listen_comm);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "closeListen");
}

static const struct mc_net_ops v9_ops = {
    .abi = MC_NET_OPS_ABI,
    .name = "NCCL net plugin v9",
    .init = v9_init,
    .devices = v9_devices,
    .get_properties = v9_get_properties,
    .make_vdevice = v9_make_vdevice,
    .listen = v9_listen,
    .connect = v9_connect,
    .accept = v9_accept,
    .reg_mr = v9_reg_mr,
    .dereg_mr = v9_dereg_mr,
    .isend = v9_isend,
    .irecv = v9_irecv,
    .test = v9_test,
    .close_send = v9_close_send,
    .close_recv = v9_close_recv,
    .close_listen = v9_close_listen,
    .finalize = v9_finalize,
};

static ncclResult_t v9_bind(struct mc_net_plugin *p)
{
  const ncclNet_v9_t *t = p->table;

  if ((bound != NULL) && (bound->table != p->table))
    return MC_FAIL(ncclInvalidUsage,
                   "NET/Plugin: %s: another v9 plugin (%s) is already loaded; one plugin per ABI "
                   "version per process",
                   p->path, bound->path);
  MC_PLUGIN_REQUIRE(p, t);
  if (t->makeVDevice == NULL)
    p->ops.make_vdevice = mc_net_no_make_vdevice;
  bound = p;
  return ncclSuccess;
}

const struct mc_net_plugin_adapter mc_net_plugin_v9 = {
    .version = 9, .symbol = "ncclNetPlugin_v9", .ops = &v9_ops, .bind = v9_bind};
