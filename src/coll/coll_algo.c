/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The algorithm of each operation (NCCL's ncclGetAlgoInfo / topoGetAlgoInfo,
 * src/enqueue.cc and src/graph/tuning.cc, without its cost model yet): the
 * algorithms NCCL_ALGO allows for the collective, that support the
 * operation on its communicator, in meshccl's order of preference; a
 * collective no allowed algorithm supports (NCCL_ALGO=Tree for a broadcast)
 * falls back to Ring, as NCCL 2.30 runs broadcast and reduce on rings only.
 * mc_coll_algo_choose is where a tuning model plugs in. Every choice is
 * logged at INFO TUNING in NCCL's words ("AllReduce: 1048576 Bytes -> Algo 1
 * proto 2 time ...").
 */
#include "coll/coll.h"

#include "check.h"
#include "log.h"
#include "params.h"

/* Without a cost model: the one-shot for small single-host all-reduces,
 * then Ring, then Tree (chosen when NCCL_ALGO leaves it alone). */
static const struct mc_coll_algo_ops *const preference[] = {
    &mc_coll_oneshot_ops,
    &mc_coll_ring_ops,
    &mc_coll_tree_ops,
};

static ncclResult_t env_ready(struct ncclComm *comm)
{
  struct mc_coll_algo_env env;

  if (comm->algo_env_ready)
    return ncclSuccess;
  MC_CHECK(mc_coll_algo_env_parse(mc_param_str(MC_P_ALGO), mc_param_str(MC_P_PROTO), &env));
  for (int k = 0; k <= MC_COLL_RECV; k++) {
    comm->algo_allowed[k] = env.allowed[k];
    comm->algo_protos[k] = env.protos[k];
  }
  comm->algo_env_ready = true;
  return ncclSuccess;
}

ncclResult_t mc_coll_algo_choose(struct mc_op *op)
{
  struct ncclComm *comm = op->comm;
  const struct mc_coll_algo_ops *algo = NULL;
  const char *why = "default choice";
  uint32_t allowed;

  if ((op->kind == MC_COLL_SEND) || (op->kind == MC_COLL_RECV)) {
    op->algo = &mc_coll_p2p_ops;
    return ncclSuccess;
  }
  MC_CHECK(env_ready(comm));
  allowed = comm->algo_allowed[op->kind];
  for (size_t i = 0; (i < sizeof(preference) / sizeof(preference[0])) && (algo == NULL); i++)
    if (((allowed >> preference[i]->id) & 1u) && preference[i]->supports(op))
      algo = preference[i];
  if (algo == NULL) {
    algo = &mc_coll_ring_ops;
    why = "fallback: no algorithm NCCL_ALGO allows supports this collective";
  } else if (allowed != MC_ALGO_MASK_ALL) {
    why = "NCCL_ALGO";
  }
  if (((comm->algo_protos[op->kind] >> MC_PROTO_SIMPLE) & 1u) == 0)
    MC_WARN_ONCE("NCCL_PROTO excludes Simple, the only protocol meshccl implements: using Simple");
  op->algo = algo;
  if ((op->count > 0) && (comm->n_ranks > 1))
    MC_INFO(MC_SUB_TUNING, "%s: %zu Bytes -> Algo %d proto %d time %f (%s: %s)",
            mc_coll_name(op->kind), op->count * op->esize, (int)algo->id, MC_PROTO_SIMPLE, -1.0,
            algo->name, why);
  return ncclSuccess;
}
