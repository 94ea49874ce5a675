/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Mesh net ("Mesh", NCCL_NET=Mesh): NCCL's net interface (NCCL
 * src/include/net.h, ncclNet_t) over hosts cabled directly to each other,
 * every link its own subnet. Each peer is reached through the local NIC on
 * the subnet it shares with us, so the NIC is chosen per connection, from
 * the listener's handle, not per device:
 *
 *   - one device ("mesh0") stands for all mesh NICs: on a triangle every
 *     channel sends on one link and receives on another, so a device tied
 *     to one NIC would be wrong for half of its connections; its speed is
 *     the fastest data NIC's, its PCI path empty (no single NIC to place);
 *   - listen registers a listen comm id and writes every mesh address of
 *     the host (with the handshake port of each) into the handle; the
 *     handshake thread (mesh_handshake.c) accepts and authenticates, accept
 *     only collects finished connections;
 *   - connect picks the local NIC on the peer's subnet (fast lane first,
 *     round-robin among equals), binds its sockets to that address and
 *     connects to the peer's address on that subnet; without a common
 *     subnet the connection is relayed by the hosts on the route, which
 *     discovery (mesh_discover.c) learns over the links;
 *   - the data path is the socket net's (net_socket_io.c) under the
 *     reliability layer (mesh_reliable.c: acknowledgements, and a new route
 *     when a link goes down), built from the
 *     authenticated sockets with mc_net_sock_comm_create, with its helper
 *     threads and data sockets set by NCCL_SOCKET_NTHREADS and
 *     NCCL_NSOCKS_PERTHREAD (same meaning, same automatic values: the data
 *     path and its measured defaults are the same, so are its knobs).
 *
 * connect and accept never block, like NCCL's socket net: connect keeps its
 * state in the context, keyed by the handle's address and contents.
 */
#include "mesh_int.h"

#include "check.h"
#include "log.h"
#include "net/net_socket_int.h"
#include "params.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_RETRY_MS 1000
#define LINGER_MS    10000 /* finalize waits this long at most for relayed pipes */
#define DISC_LABEL   "meshccl mesh discovery"

_Static_assert(MC_NET_MESH_HDR_BYTES + MC_NET_MESH_ADDR_BYTES == MC_NET_HANDLE_BYTES,
               "the mesh handle is exactly NCCL's 128 bytes");

static bool is_aborted(const struct mc_net_mesh_ctx *ctx)
{
  return (ctx->abort_flag != NULL) && (__atomic_load_n(ctx->abort_flag, __ATOMIC_ACQUIRE) != 0);
}

/* ---------- init, devices ---------- */

/* key = HMAC(secret, "meshccl mesh key" | comm id) (net_auth.h): the
 * communicator's secret, else MESHCCL_SECRET, else none (integrity only). */
static void derive_key(struct mc_net_mesh_ctx *ctx, const struct mc_net_init_args *args)
{
  uint64_t id = (args != NULL) ? args->comm_id : 0;
  const void *secret;
  size_t secret_bytes;

  mc_net_sock_secret(args, &secret, &secret_bytes);
  mc_net_auth_key(&mc_net_mesh_auth, secret, secret_bytes, id, ctx->key);
  ctx->is_authenticated = (secret != NULL);
  if (secret != NULL) {
    mc_hmac_sha256(secret, secret_bytes, DISC_LABEL, strlen(DISC_LABEL), ctx->disc_key);
  } else {
    /* No secret: discovery and relay requests are checked under a fixed
     * label key, which any meshccl knows (integrity, not authentication). */
    mc_hmac_sha256(DISC_LABEL, strlen(DISC_LABEL), DISC_LABEL, strlen(DISC_LABEL), ctx->disc_key);
    MC_INFO(MC_SUB_INIT | MC_SUB_NET,
            "NET/Mesh: no secret from the communicator and MESHCCL_SECRET unset: connections, "
            "discovery and relay requests are checked for integrity but not authenticated");
  }
}

static ncclResult_t mesh_init(const struct mc_net_init_args *args, void **ctx_out)
{
  struct mc_net_mesh_ctx *ctx = NULL;
  ncclResult_t res;

  struct mc_mesh_relay_opts relay_opts = {.name = "NET/Mesh relay"};
  char self[MC_NET_MESH_HOST_TEXT_BYTES];

  MC_CHECK(mc_calloc(&ctx, 1));
  pthread_mutex_init(&ctx->mu, NULL);
  pthread_mutex_init(&ctx->connect_mu, NULL);
  pthread_mutex_init(&ctx->view_mu, NULL);
  ctx->abort_flag = (args != NULL) ? args->abort_flag : NULL;
  ctx->host_hash = mc_host_hash();
  MC_CHECK_GOTO(mc_random_bytes(&ctx->ctx_id, sizeof(ctx->ctx_id)), res, err);
  MC_CHECK_GOTO(mc_net_mesh_nics_find((args != NULL) ? args->mgmt_ifname : NULL, ctx->nics,
                                      MC_NET_MESH_MAX_NICS, &ctx->n_nics),
                res, err);
  derive_key(ctx, args);
  mc_net_sock_threads("NET/Mesh", &ctx->n_threads, &ctx->n_socks);
  ctx->inline_bytes = (uint32_t)mc_param_int(MC_P_SOCKET_INLINE);
  ctx->min_task_bytes = (uint32_t)mc_param_int(MC_P_SOCKET_MIN_TASKSIZE);
  ctx->handshake_ms = (int)mc_param_int(MC_P_MESH_HANDSHAKE_TIMEOUT_MS);
  ctx->route_timeout_ms = (int)mc_param_int(MC_P_MESH_ROUTE_TIMEOUT_MS);
  if ((args != NULL) && (args->hosts != NULL) && (args->n_hosts > 0)) {
    MC_CHECK_GOTO(mc_calloc(&ctx->host_names, (size_t)args->n_hosts), res, err);
    memcpy(ctx->host_names, args->hosts, sizeof(*args->hosts) * (size_t)args->n_hosts);
    ctx->n_host_names = args->n_hosts;
  }
  MC_CHECK_GOTO(mc_mesh_relay_create(&relay_opts, ctx->abort_flag, &ctx->relay), res, err);
  MC_CHECK_GOTO(mc_net_mesh_hs_start(ctx), res, err);
  mc_net_mesh_host_str(ctx, ctx->host_hash, self, sizeof(self));
  MC_INFO(MC_SUB_INIT | MC_SUB_NET,
          "NET/Mesh: this is %s (host hash %016llx), %d helper threads and %d data sockets per "
          "connection%s, %s",
          self, (unsigned long long)ctx->host_hash, ctx->n_threads, ctx->n_socks,
          (mc_param_int(MC_P_SOCKET_NTHREADS) < 0) ? " (automatic)" : "",
          ctx->is_authenticated ? "authenticated" : "unauthenticated");
  *ctx_out = ctx;
  return ncclSuccess;

err:
  mc_mesh_relay_destroy(ctx->relay);
  mc_crypto_wipe(ctx->key, sizeof(ctx->key));
  mc_crypto_wipe(ctx->disc_key, sizeof(ctx->disc_key));
  pthread_mutex_destroy(&ctx->mu);
  pthread_mutex_destroy(&ctx->connect_mu);
  pthread_mutex_destroy(&ctx->view_mu);
  free(ctx);
  return res;
}

static ncclResult_t mesh_devices(void *vctx, int *n_devs_out)
{
  (void)vctx;
  *n_devs_out = 1;
  return ncclSuccess;
}

static ncclResult_t mesh_get_properties(void *vctx, int dev, struct mc_net_props *props)
{
  struct mc_net_mesh_ctx *ctx = vctx;
  int speed = 0;

  if (dev != 0)
    return MC_FAIL(ncclInvalidArgument, "NET/Mesh: device %d does not exist (1 device)", dev);
  for (int i = 0; i < ctx->n_nics; i++) {
    if (ctx->nics[i].carries_data && (ctx->nics[i].speed_mbps > speed))
      speed = ctx->nics[i].speed_mbps;
  }
  mc_net_sock_props_init(0, props);
  snprintf(props->name, sizeof(props->name), "mesh0");
  /* pci_path stays "": the NIC is chosen per connection, no single PCI place */
  props->guid = ctx->host_hash;
  props->speed = speed;
  return ncclSuccess;
}

static ncclResult_t mesh_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
  (void)comm;
  (void)data;
  (void)size;
  return mc_net_sock_reg_host("NET/Mesh", type, mhandle);
}

void mc_net_mesh_stats_get(void *vctx, struct mc_net_mesh_stats *stats_out)
{
  struct mc_net_mesh_ctx *ctx = vctx;

  stats_out->n_accepted_socks = __atomic_load_n(&ctx->stats.n_accepted_socks, __ATOMIC_RELAXED);
  stats_out->n_refused = __atomic_load_n(&ctx->stats.n_refused, __ATOMIC_RELAXED);
  stats_out->n_bad_mac = __atomic_load_n(&ctx->stats.n_bad_mac, __ATOMIC_RELAXED);
  stats_out->n_timeouts = __atomic_load_n(&ctx->stats.n_timeouts, __ATOMIC_RELAXED);
  stats_out->n_relayed = __atomic_load_n(&ctx->stats.n_relayed, __ATOMIC_RELAXED);
  stats_out->n_relay_refused = __atomic_load_n(&ctx->stats.n_relay_refused, __ATOMIC_RELAXED);
  stats_out->n_disc_received = __atomic_load_n(&ctx->stats.n_disc_received, __ATOMIC_RELAXED);
  stats_out->n_disc_dropped = __atomic_load_n(&ctx->stats.n_disc_dropped, __ATOMIC_RELAXED);
  stats_out->n_breaks = __atomic_load_n(&ctx->stats.n_breaks, __ATOMIC_RELAXED);
  stats_out->n_resumed = __atomic_load_n(&ctx->stats.n_resumed, __ATOMIC_RELAXED);
  stats_out->n_moved_back = __atomic_load_n(&ctx->stats.n_moved_back, __ATOMIC_RELAXED);
  stats_out->n_lost = __atomic_load_n(&ctx->stats.n_lost, __ATOMIC_RELAXED);
}

/* ---------- listen / accept ---------- */

static ncclResult_t mesh_listen(void *vctx, int dev, void *handle, void **listen_out)
{
  struct mc_net_mesh_ctx *ctx = vctx;
  struct mc_net_mesh_listen *l = NULL;
  struct mc_net_mesh_handle h;
  ncclResult_t res;

  if (dev != 0)
    return MC_FAIL(ncclInvalidArgument, "NET/Mesh: listen on device %d (1 device)", dev);
  if (is_aborted(ctx))
    return ncclInternalError; /* aborted by the user: no WARN */
  memset(&h, 0, sizeof(h));
  h.host_hash = ctx->host_hash;
  h.n_socks = ctx->n_socks;
  h.n_threads = ctx->n_threads;
  h.inline_bytes = ctx->inline_bytes;
  h.min_task_bytes = ctx->min_task_bytes;
  h.n_addrs = ctx->n_nics; /* more than fit: encode explains */
  for (int i = 0; i < h.n_addrs; i++) {
    h.addrs[i].addr = ctx->nics[i].addr;
    mc_sockaddr_set_port(&h.addrs[i].addr, ctx->listen_ports[i]);
    h.addrs[i].prefix_len = ctx->nics[i].prefix_len;
    h.addrs[i].lane = ctx->nics[i].lane;
  }
  MC_CHECK(mc_calloc(&l, 1));
  l->ctx = ctx;
  MC_CHECK_GOTO(mc_random_bytes(&l->id, sizeof(l->id)), res, err);
  h.listen_id = l->id;
  MC_CHECK_GOTO(mc_net_mesh_handle_encode(&h, handle), res, err);
  pthread_mutex_lock(&ctx->mu);
  l->next = ctx->listens;
  ctx->listens = l;
  pthread_mutex_unlock(&ctx->mu);
  *listen_out = l;
  return ncclSuccess;

err:
  free(l);
  return res;
}

static ncclResult_t mesh_accept(void *listen_comm, void **recv_out)
{
  struct mc_net_mesh_listen *l = listen_comm;
  struct mc_net_mesh_ctx *ctx = l->ctx;
  struct mc_net_mesh_group *g;
  struct mc_net_sock_comm *comm = NULL;
  struct mc_net_mesh_comm *mc = NULL;
  char a[MC_SOCKADDR_STRLEN];
  char sub[MC_SOCKADDR_STRLEN];
  char host[MC_NET_MESH_HOST_TEXT_BYTES];
  ncclResult_t res;

  *recv_out = NULL;
  if (is_aborted(ctx))
    return ncclInternalError; /* aborted by the user: no WARN */
  if (__atomic_load_n(&l->n_ready, __ATOMIC_ACQUIRE) == 0)
    return ncclSuccess;
  pthread_mutex_lock(&ctx->mu);
  g = l->ready;
  if (g != NULL) {
    l->ready = g->next;
    __atomic_sub_fetch(&l->n_ready, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&ctx->mu);
  if (g == NULL)
    return ncclSuccess;
  mc_net_mesh_host_str(ctx, g->peer_host, host, sizeof(host));
  MC_INFO(MC_SUB_NET, "NET/Mesh: accepted connection %016llx from %s at %s on %s %s",
          (unsigned long long)g->conn_id, host, mc_sockaddr_str(&g->socks[0].addr, a, sizeof(a)),
          ctx->nics[g->nic].name,
          mc_net_mesh_subnet_str(&ctx->nics[g->nic].addr, ctx->nics[g->nic].prefix_len, sub,
                                 sizeof(sub)));
  res = mc_net_sock_comm_create(false, ctx->abort_flag, g->socks, g->n_socks, ctx->n_threads,
                                ctx->inline_bytes, ctx->min_task_bytes, &comm);
  if (res == ncclSuccess) {
    char link[MC_SOCKADDR_STRLEN * 2 + 160];

    mc_net_mesh_nic_str(ctx, g->nic, link, sizeof(link));
    snprintf(link + strlen(link), sizeof(link) - strlen(link), " from %s", a);
    res = mc_net_mesh_comm_create(ctx, false, comm, g->conn_id, g->peer_host, NULL, g->nic, link,
                                  &mc);
    if (res != ncclSuccess)
      mc_net_sock_comm_destroy(comm);
  }
  mc_net_mesh_group_free(g); /* closes only the sockets comm_create did not take */
  if (res != ncclSuccess)
    return res;
  *recv_out = mc;
  return ncclSuccess;
}

static ncclResult_t mesh_close_listen(void *listen_comm)
{
  struct mc_net_mesh_listen *l = listen_comm;
  struct mc_net_mesh_ctx *ctx;
  struct mc_net_mesh_listen **link;

  if (l == NULL)
    return ncclSuccess;
  ctx = l->ctx;
  pthread_mutex_lock(&ctx->mu);
  for (link = &ctx->listens; (*link != NULL) && (*link != l); link = &(*link)->next)
    ;
  if (*link != NULL)
    *link = l->next;
  pthread_mutex_unlock(&ctx->mu);
  while (l->groups != NULL) {
    struct mc_net_mesh_group *g = l->groups;
    l->groups = g->next;
    mc_net_mesh_group_free(g);
  }
  while (l->ready != NULL) {
    struct mc_net_mesh_group *g = l->ready;
    l->ready = g->next;
    mc_net_mesh_group_free(g);
  }
  free(l);
  return ncclSuccess;
}

/* A host that relays other hosts' connections does not cut them because its
 * own communicator ends first (ranks finish at different times): finalize
 * waits until those pipes end, for at most LINGER_MS, not when aborted. */
static void linger_for_relayed(struct mc_net_mesh_ctx *ctx)
{
  struct mc_mesh_relay_stats st;
  uint64_t end_ns = mc_time_ns() + (uint64_t)LINGER_MS * 1000000ull;
  bool is_said = false;

  for (;;) {
    mc_mesh_relay_stats(ctx->relay, &st);
    if ((st.n_active == 0) || is_aborted(ctx) || (mc_time_ns() > end_ns))
      break;
    if (!is_said)
      MC_INFO(MC_SUB_NET,
              "NET/Mesh: finalize: waiting up to %d ms for %d relayed connections of other hosts "
              "to end",
              LINGER_MS, st.n_active);
    is_said = true;
    (void)poll(NULL, 0, 10);
  }
}

static ncclResult_t mesh_finalize(void *vctx)
{
  struct mc_net_mesh_ctx *ctx = vctx;

  if (ctx == NULL)
    return ncclSuccess;
  linger_for_relayed(ctx);
  mc_net_mesh_hs_stop(ctx); /* also closes discovery and drops the view */
  mc_mesh_relay_destroy(ctx->relay);
  mc_net_mesh_connects_free(ctx);
  /* Listen comms still open are the caller's to close; they only hold memory. */
  mc_crypto_wipe(ctx->key, sizeof(ctx->key));
  mc_crypto_wipe(ctx->disc_key, sizeof(ctx->disc_key));
  pthread_mutex_destroy(&ctx->mu);
  pthread_mutex_destroy(&ctx->connect_mu);
  pthread_mutex_destroy(&ctx->view_mu);
  free(ctx->host_names);
  free(ctx);
  return ncclSuccess;
}

/* A broken link is declared down after MESHCCL_MESH_LINK_TIMEOUT_MS, and a
 * new route may take MESHCCL_MESH_ROUTE_TIMEOUT_MS more. */
static uint32_t mesh_failover_ms(void)
{
  return (uint32_t)(mc_param_int(MC_P_MESH_LINK_TIMEOUT_MS) +
                    mc_param_int(MC_P_MESH_ROUTE_TIMEOUT_MS));
}

const struct mc_net_ops mc_net_mesh_ops = {
    .abi = MC_NET_OPS_ABI,
    .name = "Mesh",
    .init = mesh_init,
    .devices = mesh_devices,
    .get_properties = mesh_get_properties,
    .make_vdevice = mc_net_no_make_vdevice,
    .listen = mesh_listen,
    .connect = mc_net_mesh_connect,
    .accept = mesh_accept,
    .reg_mr = mesh_reg_mr,
    .dereg_mr = mc_net_sock_dereg_mr,
    .isend = mc_net_mesh_isend,
    .irecv = mc_net_mesh_irecv,
    .test = mc_net_mesh_test,
    .close_send = mc_net_mesh_comm_close,
    .close_recv = mc_net_mesh_comm_close,
    .close_listen = mesh_close_listen,
    .finalize = mesh_finalize,
    .calls_never_block = true,
    .can_send_user_ptr = true, /* its data path is the socket net's: registration is a no-op */
    .failover_ms = mesh_failover_ms,
    .node_orders = mc_net_mesh_node_orders,
};
