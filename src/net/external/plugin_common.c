/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What every net plugin adapter shares: the logger handed to plugins, the
 * conversion of the properties every ABI version has, the per-communicator
 * context (and the once-per-process init of plugins older than v11, as
 * NCCL's src/plugin/net/net_v10.cc keeps a reference count), and the
 * wrapped comms with their request pools, which let test() report posted
 * sizes when a plugin does not fill them.
 */
#include "plugin_int.h"

#include "check.h"
#include "log.h"
#include "utils.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *mc_plugin_res_str(ncclResult_t res)
{
  static const char *const names[] = {
      "ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
      "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
      "ncclRemoteError",   "ncclInProgress",         "ncclTimeout"};

  if (((int)res >= 0) && ((size_t)res < sizeof(names) / sizeof(names[0])))
    return names[res];
  return "an unknown result code";
}

void mc_plugin_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
                      const char *fmt, ...)
{
  enum mc_log_level lvl;
  unsigned long sub = (flags != 0) ? flags : (unsigned long)MC_SUB_NET;
  const char *base = "plugin";
  va_list ap;

  switch (level) {
  case NCCL_LOG_VERSION:
    lvl = MC_LOG_VERSION;
    break;
  case NCCL_LOG_WARN:
  case NCCL_LOG_ABORT: /* a plugin's ABORT is a WARN here: meshccl decides whether to abort */
    lvl = MC_LOG_WARN;
    sub = MC_SUB_ALL;
    break;
  case NCCL_LOG_INFO:
    lvl = MC_LOG_INFO;
    break;
  case NCCL_LOG_TRACE:
    lvl = MC_LOG_TRACE;
    break;
  default:
    return;
  }
  if (!mc_log_enabled(lvl, sub) || (fmt == NULL))
    return;
  if (file != NULL)
    base = (strrchr(file, '/') != NULL) ? strrchr(file, '/') + 1 : file;
  va_start(ap, fmt);
  mc_log_v(lvl, sub, base, line, "plugin", fmt, ap);
  va_end(ap);
}

void mc_plugin_props_base(struct mc_net_props *props, int dev, const char *name, const char *pci,
                          uint64_t guid, int ptr_support, int speed, int port, float latency,
                          int max_comms, int max_recvs)
{
  memset(props, 0, sizeof(*props));
  snprintf(props->name, sizeof(props->name), "%s", (name != NULL) ? name : "");
  snprintf(props->pci_path, sizeof(props->pci_path), "%s", (pci != NULL) ? pci : "");
  props->guid = guid;
  props->ptr_support = ptr_support;
  props->speed = speed;
  props->port = port;
  props->latency = latency;
  props->max_comms = max_comms;
  /* NCCL treats a maxRecvs below 1 as 1 (one receive per irecv). */
  props->max_recvs = (max_recvs < 1) ? 1 : max_recvs;
  props->vprops.n_devs = 1;
  props->vprops.devs[0] = dev;
  props->max_p2p_bytes = (size_t)MAX_NET_SIZE;
  props->max_coll_bytes = 0;
  props->max_multi_request_bytes = 0;
  props->rail_id = -1;
  props->plane_id = -1;
}

ncclResult_t mc_plugin_props_vdevs(const struct mc_net_plugin *p, struct mc_net_props *props,
                                   int ndevs, const int *devs, int max_devs)
{
  if ((ndevs < 0) || (ndevs > max_devs) || (ndevs > MC_NET_MAX_VDEVS))
    return MC_FAIL(ncclInvalidUsage,
                   "NET/Plugin: %s (v%d, %s): getProperties reports a device made of %d devices "
                   "(at most %d)",
                   p->name, p->version, p->path, ndevs, max_devs);
  /* A physical device of a plugin that leaves vProps empty is itself. */
  if (ndevs == 0)
    return ncclSuccess;
  props->vprops.n_devs = ndevs;
  for (int i = 0; i < ndevs; i++)
    props->vprops.devs[i] = devs[i];
  return ncclSuccess;
}

ncclResult_t mc_plugin_ctx_create(struct mc_net_plugin *p, struct mc_plugin_ctx **ctx_out)
{
  struct mc_plugin_ctx *ctx = NULL;

  MC_CHECK(mc_calloc(&ctx, 1));
  ctx->plugin = p;
  ctx->config.trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF;
  *ctx_out = ctx;
  return ncclSuccess;
}

ncclResult_t mc_plugin_init_once(struct mc_net_plugin *p,
                                 ncclResult_t (*init_fn)(const struct mc_net_plugin *p))
{
  ncclResult_t res = ncclSuccess;

  pthread_mutex_lock(&p->init_lock);
  if (p->init_refs == 0) {
    res = init_fn(p);
    if (res != ncclSuccess)
      res = MC_PLUGIN_FAIL(p, res, "init");
  }
  if (res == ncclSuccess)
    p->init_refs++;
  pthread_mutex_unlock(&p->init_lock);
  return res;
}

void mc_plugin_fini_once(struct mc_net_plugin *p)
{
  /* Plugins before v11 have no finalize: the count only says whether the
   * next communicator must call init again (it need not). */
  pthread_mutex_lock(&p->init_lock);
  if (p->init_refs > 1)
    p->init_refs--;
  pthread_mutex_unlock(&p->init_lock);
}

ncclResult_t mc_plugin_comm_wrap(struct mc_net_plugin *p, void *comm, struct mc_plugin_comm **out)
{
  struct mc_plugin_comm *c = NULL;

  if (comm == NULL) {
    *out = NULL;
    return ncclSuccess;
  }
  MC_CHECK(mc_calloc(&c, 1));
  c->comm = comm;
  c->plugin = p;
  *out = c;
  return ncclSuccess;
}

ncclResult_t mc_plugin_req_claim(struct mc_plugin_comm *c, struct mc_plugin_req **out)
{
  for (int i = 0; i < MC_NET_MAX_REQUESTS; i++) {
    if (c->reqs[i].req == NULL) {
      *out = &c->reqs[i];
      return ncclSuccess;
    }
  }
  return MC_FAIL(ncclInternalError,
                 "NET/Plugin: %s (v%d): more than %d requests outstanding on one comm",
                 c->plugin->name, c->plugin->version, MC_NET_MAX_REQUESTS);
}

void mc_plugin_req_post(struct mc_plugin_req *r, void *preq, bool is_recv, int n,
                        const size_t *sizes)
{
  r->req = preq;
  r->is_recv = is_recv;
  r->n = n;
  for (int i = 0; i < n; i++)
    r->posted[i] = sizes[i];
}

ncclResult_t mc_plugin_test(struct mc_net_plugin *p, ncclResult_t (*test_fn)(void *, int *, int *),
                            void *request, int *done, size_t *sizes)
{
  struct mc_plugin_req *r = request;
  int got[MC_PLUGIN_MAX_RECVS];
  ncclResult_t res;

  for (int i = 0; i < MC_PLUGIN_MAX_RECVS; i++)
    got[i] = MC_PLUGIN_SIZE_UNSET;
  *done = 0;
  res = test_fn(r->req, done, got);
  if (res != ncclSuccess)
    return MC_PLUGIN_FAIL(p, res, "test");
  if (!*done)
    return ncclSuccess;
  for (int i = 0; (sizes != NULL) && (i < r->n); i++) {
    if (got[i] == MC_PLUGIN_SIZE_UNSET) {
      if (__atomic_exchange_n(&p->sizes_unreported, 1, __ATOMIC_RELAXED) == 0)
        MC_INFO(MC_SUB_NET | MC_SUB_INIT,
                "NET/Plugin: %s (v%d) test() does not report sizes; receivers go by the sizes "
                "they expect",
                p->name, p->version);
      /* A send's size is what was posted; a receive's is not known. */
      sizes[i] = r->is_recv ? MC_NET_SIZE_UNKNOWN : r->posted[i];
    } else {
      sizes[i] = (size_t)got[i];
    }
  }
  r->req = NULL;
  return ncclSuccess;
}

ncclResult_t mc_plugin_int_size(const struct mc_net_plugin *p, size_t size, const char *call)
{
  if (size > (size_t)INT_MAX)
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Plugin: %s (v%d, %s): %s of %zu bytes: the v%d ABI carries sizes as int "
                   "(at most %d bytes)",
                   p->name, p->version, p->path, call, size, p->version, INT_MAX);
  return ncclSuccess;
}

ncclResult_t mc_plugin_recv_sizes(const struct mc_net_plugin *p, int n, const size_t *sizes,
                                  int *int_sizes)
{
  if ((n < 1) || (n > MC_PLUGIN_MAX_RECVS))
    return MC_FAIL(ncclInvalidArgument, "NET/Plugin: %s (v%d): irecv of %d buffers (1 to %d)",
                   p->name, p->version, n, MC_PLUGIN_MAX_RECVS);
  for (int i = 0; (int_sizes != NULL) && (i < n); i++) {
    MC_CHECK(mc_plugin_int_size(p, sizes[i], "irecv"));
    int_sizes[i] = (int)sizes[i];
  }
  return ncclSuccess;
}
