/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libnccl-net-mesh.so's shared part: the mesh contexts (one per NCCL
 * communicator context for v11+, one per process for v8..v10), the secret
 * each context authenticates its connections with, the bridge from
 * meshccl's logging to the logger NCCL passes to init, the device
 * properties every version reports, and the calls whose prototype is the
 * same in every exported version. The tables are made by
 * mesh_plugin_table.inc, once per mesh_plugin_v<N>.c.
 *
 * Secret (NCCL gives a plugin none): MESHCCL_SECRET when set (the mesh net
 * reads it itself), else, for v11+, HMAC-SHA256 of NCCL's commId (a hash of
 * the job's unique id, so it keeps apart jobs, not attackers that know the
 * id), else none: the mesh then checks its handshakes for integrity only,
 * which is said once.
 */
#include "mesh_plugin_int.h"

#include "check.h"
#include "crypto.h"
#include "log.h"
#include "net/net.h"
#include "params.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define COMM_ID_LABEL "meshccl net plugin: secret of commId"

static pthread_mutex_t ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mc_mesh_plugin_ctx *ctxs;   /* every live context; guarded by ctx_mu */
static struct mc_mesh_plugin_ctx *global; /* v8..v10's; guarded by ctx_mu */
static struct mc_net_props dev_props;     /* from the first context; guarded by ctx_mu */
static bool has_dev_props;
static char dev_name[sizeof(dev_props.name)]; /* getProperties' name: lives as long as we do */

/* A request of iflush: host memory needs no flush, so it is done at once. */
static char flush_done;

/* ---------- logging through NCCL's logger ---------- */

static pthread_mutex_t logger_mu = PTHREAD_MUTEX_INITIALIZER;
static ncclDebugLogger_t nccl_logger; /* guarded by logger_mu */
static __thread bool in_init;         /* lines logged inside init() also carry NCCL_INIT */

/* Every meshccl line, as NCCL's own plugins log: WARN with NCCL_ALL (NCCL's
 * WARN macro), the others with their subsystems plus NCCL_NET; TRACE names
 * the function, the others the file (NCCL src/debug.cc, ncclDebugLog). */
static void nccl_sink(void *arg, enum mc_log_level level, unsigned long sub, const char *file,
                      int line, const char *func, const char *msg)
{
  ncclDebugLogger_t logger;
  unsigned long flags;
  ncclDebugLogLevel nccl_level;

  (void)arg;
  pthread_mutex_lock(&logger_mu);
  logger = nccl_logger;
  pthread_mutex_unlock(&logger_mu);
  if (logger == NULL)
    return;
  flags = (sub == (unsigned long)MC_SUB_ALL) ? (unsigned long)NCCL_ALL : (sub | NCCL_NET);
  if (in_init)
    flags |= NCCL_INIT;
  if (level == MC_LOG_WARN)
    nccl_level = NCCL_LOG_WARN;
  else if (level == MC_LOG_TRACE)
    nccl_level = NCCL_LOG_TRACE;
  else
    nccl_level = NCCL_LOG_INFO;
  logger(nccl_level, flags, (level == MC_LOG_TRACE) ? func : file, line, "%s", msg);
}

/* The latest non-NULL logger takes every line of the process (NCCL passes
 * the same one to every init); without any, meshccl prints as usual. */
static void logger_install(ncclDebugLogger_t logger)
{
  if (logger == NULL)
    return;
  pthread_mutex_lock(&logger_mu);
  nccl_logger = logger;
  pthread_mutex_unlock(&logger_mu);
  mc_log_set_sink(nccl_sink, NULL);
}

/* ---------- contexts ---------- */

static void secret_from_comm_id(uint64_t comm_id, uint8_t secret[MC_SHA256_BYTES])
{
  struct mc_hmac_sha256 h;
  uint8_t id[8];

  for (int i = 0; i < 8; i++)
    id[i] = (uint8_t)(comm_id >> (56 - 8 * i));
  mc_hmac_sha256_init(&h, COMM_ID_LABEL, strlen(COMM_ID_LABEL));
  mc_hmac_sha256_update(&h, id, sizeof(id));
  mc_hmac_sha256_final(&h, secret);
}

static ncclResult_t ctx_open(int version, bool has_comm_id, uint64_t comm_id,
                             struct mc_mesh_plugin_ctx **ctx_out)
{
  const char *env = mc_param_str(MC_P_SECRET);
  bool has_env = (env != NULL) && (env[0] != '\0');
  uint8_t secret[MC_SHA256_BYTES] = {0};
  struct mc_net_init_args args;
  struct mc_mesh_plugin_ctx *ctx = NULL;
  struct mc_net_props props;
  ncclResult_t res;

  _Static_assert(MC_SHA256_BYTES == MC_NET_SECRET_BYTES, "one HMAC is one secret");
  memset(&args, 0, sizeof(args));
  args.comm_id = comm_id;
  if (!has_env && has_comm_id) {
    secret_from_comm_id(comm_id, secret);
    args.secret = secret;
  }
  MC_CHECK(mc_calloc(&ctx, 1));
  ctx->comm_id = comm_id;
  res = mc_net_mesh_ops.init(&args, &ctx->mesh);
  mc_crypto_wipe(secret, sizeof(secret));
  if (res != ncclSuccess) {
    free(ctx);
    return res;
  }
  if (has_env)
    MC_INFO(MC_SUB_INIT | MC_SUB_NET,
            "NET/Mesh: plugin v%d, context %016llx: connections authenticated with MESHCCL_SECRET",
            version, (unsigned long long)comm_id);
  else if (has_comm_id)
    MC_INFO(MC_SUB_INIT | MC_SUB_NET,
            "NET/Mesh: plugin v%d, context %016llx: connections authenticated with a secret "
            "derived from NCCL's commId (known to whoever knows the job's unique id; set "
            "MESHCCL_SECRET for a secret of the job's own)",
            version, (unsigned long long)comm_id);
  else
    MC_WARN_ONCE("NET/Mesh: plugin v%d: MESHCCL_SECRET is unset and NCCL's v%d net ABI gives "
                 "the plugin no communicator id: mesh connections are not authenticated (any "
                 "host that reaches a mesh port may connect); set MESHCCL_SECRET to the same "
                 "value on every host of the job",
                 version, version);
  res = mc_net_mesh_ops.get_properties(ctx->mesh, 0, &props);
  if (res != ncclSuccess) {
    (void)mc_net_mesh_ops.finalize(ctx->mesh);
    free(ctx);
    return res;
  }
  pthread_mutex_lock(&ctx_mu);
  if (!has_dev_props) {
    dev_props = props;
    snprintf(dev_name, sizeof(dev_name), "%s", props.name);
    has_dev_props = true;
  }
  ctx->next = ctxs;
  ctxs = ctx;
  pthread_mutex_unlock(&ctx_mu);
  *ctx_out = ctx;
  return ncclSuccess;
}

ncclResult_t mc_mesh_plugin_ctx_create(int version, uint64_t comm_id, ncclDebugLogger_t logger,
                                       struct mc_mesh_plugin_ctx **ctx_out)
{
  ncclResult_t res;

  logger_install(logger);
  in_init = true;
  res = ctx_open(version, true, comm_id, ctx_out);
  in_init = false;
  return res;
}

ncclResult_t mc_mesh_plugin_ctx_destroy(struct mc_mesh_plugin_ctx *ctx)
{
  struct mc_mesh_plugin_ctx **link;
  ncclResult_t res;

  if (ctx == NULL)
    return ncclSuccess;
  pthread_mutex_lock(&ctx_mu);
  for (link = &ctxs; (*link != NULL) && (*link != ctx); link = &(*link)->next)
    ;
  if (*link == NULL) {
    pthread_mutex_unlock(&ctx_mu);
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Mesh: finalize of context %p, which is not live "
                   "(finalized twice?)",
                   (void *)ctx);
  }
  *link = ctx->next;
  pthread_mutex_unlock(&ctx_mu);
  res = mc_net_mesh_ops.finalize(ctx->mesh);
  free(ctx);
  return res;
}

ncclResult_t mc_mesh_plugin_ctx_mesh(void *ctx, const char *call, void **mesh_out)
{
  if (ctx == NULL)
    return MC_FAIL(ncclInvalidArgument, "NET/Mesh: %s with a NULL context (call init first)", call);
  *mesh_out = ((struct mc_mesh_plugin_ctx *)ctx)->mesh;
  return ncclSuccess;
}

ncclResult_t mc_mesh_plugin_global_init(int version, ncclDebugLogger_t logger)
{
  static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
  struct mc_mesh_plugin_ctx *ctx = NULL;
  ncclResult_t res = ncclSuccess;

  logger_install(logger);
  in_init = true;
  /* init_mu serializes the first inits; ctx_mu is not held across the mesh's init,
   * which logs. */
  pthread_mutex_lock(&init_mu);
  pthread_mutex_lock(&ctx_mu);
  ctx = global;
  pthread_mutex_unlock(&ctx_mu);
  if (ctx == NULL) {
    res = ctx_open(version, false, 0, &ctx);
    if (res == ncclSuccess) {
      pthread_mutex_lock(&ctx_mu);
      global = ctx;
      pthread_mutex_unlock(&ctx_mu);
    }
  }
  pthread_mutex_unlock(&init_mu);
  in_init = false;
  return res;
}

ncclResult_t mc_mesh_plugin_global_mesh(const char *call, void **mesh_out)
{
  struct mc_mesh_plugin_ctx *ctx;

  pthread_mutex_lock(&ctx_mu);
  ctx = global;
  pthread_mutex_unlock(&ctx_mu);
  if (ctx == NULL)
    return MC_FAIL(ncclInvalidUsage, "NET/Mesh: %s before a successful init", call);
  *mesh_out = ctx->mesh;
  return ncclSuccess;
}

/* At dlclose (NCCL unloads a plugin when its last user is finalized) and at
 * exit: v8..v10 never say they are done, and a v11+ caller may not have
 * finalized; every handshake thread stops here, before the code is unmapped.
 * Connections left open are the caller's; they only hold their own sockets. */
__attribute__((destructor)) static void mesh_plugin_unload(void)
{
  struct mc_mesh_plugin_ctx *list;

  pthread_mutex_lock(&ctx_mu);
  list = ctxs;
  ctxs = NULL;
  global = NULL;
  pthread_mutex_unlock(&ctx_mu);
  mc_log_set_sink(NULL, NULL);
  while (list != NULL) {
    struct mc_mesh_plugin_ctx *next = list->next;
    (void)mc_net_mesh_ops.finalize(list->mesh);
    free(list);
    list = next;
  }
  mc_param_unload(); /* its strings would outlive the unmapped library */
}

/* ---------- devices and properties ---------- */

ncclResult_t mc_mesh_plugin_devices(int *ndev)
{
  bool has;

  pthread_mutex_lock(&ctx_mu);
  has = has_dev_props;
  pthread_mutex_unlock(&ctx_mu);
  if (!has)
    return MC_FAIL(ncclInvalidUsage, "NET/Mesh: devices before a successful init");
  *ndev = 1;
  return ncclSuccess;
}

ncclResult_t mc_mesh_plugin_dev_get(int dev, struct mc_mesh_plugin_dev *dev_out)
{
  struct mc_net_props p;
  bool has;

  pthread_mutex_lock(&ctx_mu);
  has = has_dev_props;
  p = dev_props;
  pthread_mutex_unlock(&ctx_mu);
  if (!has)
    return MC_FAIL(ncclInvalidUsage, "NET/Mesh: getProperties before a successful init");
  if (dev != 0)
    return MC_FAIL(ncclInvalidArgument, "NET/Mesh: getProperties of device %d (1 device)", dev);
  dev_out->name = dev_name;
  dev_out->guid = p.guid;
  /* Unknown link speed (0): NCCL's socket net says 10 Gb/s then
   * (NCCL src/transport/net_socket.cc, ncclNetSocketGetSpeed). */
  dev_out->speed = (p.speed > 0) ? p.speed : 10000;
  dev_out->max_comms = p.max_comms;
  dev_out->max_p2p_bytes = p.max_p2p_bytes;
  return ncclSuccess;
}

/* ---------- calls shared by every version ---------- */

ncclResult_t mc_mesh_plugin_size_check(int version, const char *call, size_t size)
{
  if (size > (size_t)INT_MAX)
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Mesh: plugin v%d %s of %zu bytes: NCCL's net ABI reports sizes as int, so "
                   "at most %d bytes per request (maxP2pBytes is %llu)",
                   version, call, size, INT_MAX, (unsigned long long)MAX_NET_SIZE);
  return ncclSuccess;
}

ncclResult_t mc_mesh_plugin_accept(void *listen_comm, void **recv_comm,
                                   ncclNetDeviceHandle_v8_t **recv_dev_comm)
{
  if (recv_dev_comm != NULL)
    *recv_dev_comm = NULL; /* host device: no offload handle */
  return mc_net_mesh_ops.accept(listen_comm, recv_comm);
}

ncclResult_t mc_mesh_plugin_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
  return mc_net_mesh_ops.reg_mr(comm, data, size, type, mhandle);
}

ncclResult_t mc_mesh_plugin_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
                                          uint64_t offset, int fd, void **mhandle)
{
  (void)comm;
  (void)data;
  (void)offset;
  (void)mhandle;
  return MC_FAIL(ncclInvalidUsage,
                 "NET/Mesh: regMrDmaBuf (%zu bytes, type %d, fd %d): DMA-BUF memory is not "
                 "supported, the mesh net moves host memory only (ptrSupport NCCL_PTR_HOST)",
                 size, type, fd);
}

ncclResult_t mc_mesh_plugin_dereg_mr(void *comm, void *mhandle)
{
  return mc_net_mesh_ops.dereg_mr(comm, mhandle);
}

ncclResult_t mc_mesh_plugin_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
                                   void **request)
{
  (void)recv_comm;
  (void)n;
  (void)data;
  (void)sizes;
  (void)mhandles;
  *request = &flush_done; /* host memory: nothing to flush */
  return ncclSuccess;
}

ncclResult_t mc_mesh_plugin_test(void *request, int *done, int *sizes)
{
  size_t got[MC_MESH_PLUGIN_MAX_RECVS] = {0};

  if (request == &flush_done) {
    *done = 1;
    return ncclSuccess;
  }
  MC_CHECK(mc_net_mesh_ops.test(request, done, (sizes != NULL) ? got : NULL));
  /* Sizes were checked against INT_MAX when posted; a request holds one buffer. */
  if ((*done != 0) && (sizes != NULL))
    sizes[0] = (int)got[0];
  return ncclSuccess;
}

ncclResult_t mc_mesh_plugin_close_send(void *send_comm)
{
  return mc_net_mesh_ops.close_send(send_comm);
}

ncclResult_t mc_mesh_plugin_close_recv(void *recv_comm)
{
  return mc_net_mesh_ops.close_recv(recv_comm);
}

ncclResult_t mc_mesh_plugin_close_listen(void *listen_comm)
{
  return mc_net_mesh_ops.close_listen(listen_comm);
}

ncclResult_t mc_mesh_plugin_isend(int version, void *send_comm, void *data, size_t size, int tag,
                                  void *mhandle, void **request)
{
  MC_CHECK(mc_mesh_plugin_size_check(version, "isend", size));
  return mc_net_mesh_ops.isend(send_comm, data, size, tag, mhandle, request);
}

ncclResult_t mc_mesh_plugin_irecv(int version, void *recv_comm, int n, void **data, size_t *sizes,
                                  int *tags, void **mhandles, void **request)
{
  if ((n < 1) || (n > MC_MESH_PLUGIN_MAX_RECVS))
    return MC_FAIL(ncclInvalidArgument, "NET/Mesh: plugin v%d irecv of %d buffers (maxRecvs is %d)",
                   version, n, MC_MESH_PLUGIN_MAX_RECVS);
  for (int i = 0; i < n; i++)
    MC_CHECK(mc_mesh_plugin_size_check(version, "irecv", sizes[i]));
  return mc_net_mesh_ops.irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}
