/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Adapter for ncclNet_v6_t plugins (NCCL 2.12; NCCL's
 * src/plugin/net/net_v6.cc): int sizes everywhere but regMrDmaBuf,
 * connect and accept without device handles, properties without
 * regIsGlobal or offload fields (defaults as v8's). A v6 plugin promises
 * NCCL_NET_MAX_REQUESTS_V6 (8) requests per comm, which the NET transport's
 * 8 steps per connection respect.
 */
#include "plugin_int.h"

#include "check.h"
#include "log.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct mc_net_plugin *bound;

static const ncclNet_v6_t *net(void)
{
  return bound->table;
}

static ncclResult_t init_plugin(const struct mc_net_plugin *p)
{
  return ((const ncclNet_v6_t *)p->table)->init(mc_plugin_logger);
}

static ncclResult_t v6_init(const struct mc_net_init_args *args, void **ctx_out)
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

static ncclResult_t v6_finalize(void *ctx)
{
  mc_plugin_fini_once(bound);
  free(ctx);
  return ncclSuccess;
}

static ncclResult_t v6_devices(void *ctx, int *n_devs_out)
{
  ncclResult_t res;

  (void)ctx;
  res = net()->devices(n_devs_out);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "devices");
}

static ncclResult_t v6_get_properties(void *ctx, int dev, struct mc_net_props *props_out)
{
  ncclNetProperties_v6_t p;
  struct mc_net_props props;
  ncclResult_t res;

  (void)ctx;
  memset(&p, 0, sizeof(p));
  res = net()->getProperties(dev, &p);
  if (res != ncclSuccess)
    return MC_PLUGIN_FAIL(bound, res, "getProperties");
  mc_plugin_props_base(&props, dev, p.name, p.pciPath, p.guid, p.ptrSupport, p.speed, p.port,
                       p.latency, p.maxComms, p.maxRecvs);
  *props_out = props;
  return ncclSuccess;
}

static ncclResult_t v6_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
  ncclResult_t res;

  (void)ctx;
  res = net()->listen(dev, handle, listen_comm);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "listen");
}

static ncclResult_t v6_connect(void *ctx, int dev, const void *handle, void **send_comm)
{
  struct mc_plugin_comm *c = NULL;
  void *comm = NULL;
  ncclResult_t res;

  (void)ctx;
  /* Not const in NCCL: plugins may keep their connect stage in the handle (NCCL's IB does);
   * the NET transport passes the same writable buffer on every call. */
  res = net()->connect(dev, (void *)(uintptr_t)handle, &comm);
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

static ncclResult_t v6_accept(void *listen_comm, void **recv_comm)
{
  struct mc_plugin_comm *c = NULL;
  void *comm = NULL;
  ncclResult_t res;

  res = net()->accept(listen_comm, &comm);
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

static ncclResult_t v6_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
  struct mc_plugin_comm *c = comm;
  ncclResult_t res;

  MC_CHECK(mc_plugin_int_size(bound, size, "regMr"));
  res = net()->regMr(c->comm, data, (int)size, type, mhandle);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "regMr");
}

static ncclResult_t v6_dereg_mr(void *comm, void *mhandle)
{
  struct mc_plugin_comm *c = comm;
  ncclResult_t res;

  res = net()->deregMr(c->comm, mhandle);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "deregMr");
}

static ncclResult_t v6_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                             void **request)
{
  struct mc_plugin_comm *c = send_comm;
  struct mc_plugin_req *r = NULL;
  void *req = NULL;
  ncclResult_t res;

  MC_CHECK(mc_plugin_int_size(bound, size, "isend"));
  MC_CHECK(mc_plugin_req_claim(c, &r));
  res = net()->isend(c->comm, data, (int)size, tag, mhandle, &req);
  if (res != ncclSuccess)
    return MC_PLUGIN_FAIL(bound, res, "isend");
  if (req != NULL)
    mc_plugin_req_post(r, req, 1, &size);
  *request = (req != NULL) ? r : NULL;
  return ncclSuccess;
}

static ncclResult_t v6_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                             void **mhandles, void **request)
{
  struct mc_plugin_comm *c = recv_comm;
  struct mc_plugin_req *r = NULL;
  int int_sizes[MC_PLUGIN_MAX_RECVS];
  void *req = NULL;
  ncclResult_t res;

  MC_CHECK(mc_plugin_recv_sizes(bound, n, sizes, int_sizes));
  MC_CHECK(mc_plugin_req_claim(c, &r));
  res = net()->irecv(c->comm, n, data, int_sizes, tags, mhandles, &req);
  if (res != ncclSuccess)
    return MC_PLUGIN_FAIL(bound, res, "irecv");
  if (req != NULL)
    mc_plugin_req_post(r, req, n, sizes);
  *request = (req != NULL) ? r : NULL;
  return ncclSuccess;
}

static ncclResult_t v6_test(void *request, int *done, size_t *sizes)
{
  return mc_plugin_test(bound, net()->test, request, done, sizes);
}

static ncclResult_t v6_close_send(void *send_comm)
{
  struct mc_plugin_comm *c = send_comm;
  ncclResult_t res;

  if (c == NULL)
    return ncclSuccess;
  res = net()->closeSend(c->comm);
  free(c);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "closeSend");
}

static ncclResult_t v6_close_recv(void *recv_comm)
{
  struct mc_plugin_comm *c = recv_comm;
  ncclResult_t res;

  if (c == NULL)
    return ncclSuccess;
  res = net()->closeRecv(c->comm);
  free(c);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "closeRecv");
}

static ncclResult_t v6_close_listen(void *listen_comm)
{
  ncclResult_t res;

  if (listen_comm == NULL)
    return ncclSuccess;
  res = net()->closeListen(listen_comm);
  return (res == ncclSuccess) ? res : MC_PLUGIN_FAIL(bound, res, "closeListen");
}

static const struct mc_net_ops v6_ops = {
    .abi = MC_NET_OPS_ABI,
    .name = "NCCL net plugin v6",
    .init = v6_init,
    .devices = v6_devices,
    .get_properties = v6_get_properties,
    .make_vdevice = mc_net_no_make_vdevice,
    .listen = v6_listen,
    .connect = v6_connect,
    .accept = v6_accept,
    .reg_mr = v6_reg_mr,
    .dereg_mr = v6_dereg_mr,
    .isend = v6_isend,
    .irecv = v6_irecv,
    .test = v6_test,
    .close_send = v6_close_send,
    .close_recv = v6_close_recv,
    .close_listen = v6_close_listen,
    .finalize = v6_finalize,
};

static ncclResult_t v6_bind(struct mc_net_plugin *p)
{
  const ncclNet_v6_t *t = p->table;

  if ((bound != NULL) && (bound->table != p->table))
    return MC_FAIL(ncclInvalidUsage,
                   "NET/Plugin: %s: another v6 plugin (%s) is already loaded; one plugin per ABI "
                   "version per process",
                   p->path, bound->path);
  MC_PLUGIN_REQUIRE(p, t);
  bound = p;
  return ncclSuccess;
}

const struct mc_net_plugin_adapter mc_net_plugin_v6 = {
    .version = 6, .symbol = "ncclNetPlugin_v6", .ops = &v6_ops, .bind = v6_bind};
