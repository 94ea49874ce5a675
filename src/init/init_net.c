/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Init stage "net": the communicator's net, chosen and initialised before the
 * topology stage, as NCCL 2.30's commAlloc calls ncclNetInit (src/init.cc,
 * src/plugin/net.cc) before ncclTopoGetSystem imports the net's devices. The
 * NET transport uses this net and this context (tp_init); the context is
 * finalized once, when the communicator is freed (destroy or abort, after a
 * failed init too).
 *
 * Every communicator initialises its net, single-host ones included, as in
 * NCCL, where a net that cannot initialise fails ncclNetInit ("Failed to
 * initialize any NET plugin") and with it the communicator's init. Net
 * plugins are probed when loaded (plugin/), so a plugin that cannot
 * initialise is passed over there, as NCCL passes to the next net; a net
 * chosen here that then fails (the socket net without a usable interface,
 * a plugin whose per-communicator init fails) fails the init with the net's
 * reason. meshccl runs this stage after the peer exchange rather than
 * before the bootstrap so that the failure reaches every rank at once
 * through the bootstrap instead of as a timeout.
 */
#include "comm.h"

#include "check.h"
#include "crypto.h"
#include "log.h"
#include "net/net.h"

#define NET_SECRET_LABEL "meshccl net secret v1"

_Static_assert(sizeof(((struct ncclComm *)0)->net_secret) == MC_NET_SECRET_BYTES,
               "the net secret is MC_NET_SECRET_BYTES long");
_Static_assert(MC_NET_SECRET_BYTES == MC_SHA256_BYTES, "the net secret is one HMAC-SHA256");

ncclResult_t mc_comm_stage_net(struct ncclComm *comm)
{
  const struct mc_net_ops *net = NULL;
  void *ctx = NULL;
  int n_devs = 0;
  ncclResult_t res;
  struct mc_net_init_args args = {
      .comm_id = comm->comm_hash, .secret = comm->net_secret, .abort_flag = &comm->abort_flag};

  /* The nets authenticate connections with a secret only the ranks know:
   * derived from the unique id, which travels only among them. (With
   * NCCL_COMM_ID the id is computed from the address and NCCL's fixed
   * magic, so anyone who knows the address can derive it too.) */
  mc_hmac_sha256(&comm->id, sizeof(comm->id), NET_SECRET_LABEL, sizeof(NET_SECRET_LABEL) - 1,
                 comm->net_secret);
  MC_CHECK(mc_net_select(&net));
  /* The net says what failed (the adapters name the plugin and its file). */
  MC_CHECK(net->init(&args, &ctx));
  res = net->devices(ctx, &n_devs);
  if ((res == ncclSuccess) && (n_devs <= 0))
    res = MC_FAIL(ncclSystemError, "NET/%s: no network device", net->name);
  if (res != ncclSuccess) {
    (void)net->finalize(ctx);
    return res;
  }
  comm->net = net;
  comm->net_ctx = ctx;
  comm->net_ndev = n_devs;
  return ncclSuccess;
}

void mc_comm_net_fini(struct ncclComm *comm)
{
  if ((comm->net != NULL) && (comm->net_ctx != NULL))
    (void)comm->net->finalize(comm->net_ctx);
  comm->net_ctx = NULL;
  comm->net = NULL;
  comm->net_ndev = 0;
}
