/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The algorithm of each operation (NCCL's ncclGetAlgoInfo / topoGetAlgoInfo,
 * src/enqueue.cc, with the model of src/topo/topo_tuning.c): among the
 * algorithms NCCL_ALGO allows for the collective and that support the
 * operation, meshccl's one-shot for small single-host all-reduces, else the
 * fastest of Tree and Ring in the model (NCCL's scan order, strict <); a
 * collective no allowed algorithm supports (NCCL_ALGO=Tree for a broadcast)
 * falls back to Ring, as NCCL 2.30 runs broadcast and reduce on rings only.
 * The channel count is chosen with the algorithm. Every choice is logged at
 * INFO TUNING in NCCL's words ("AllReduce: 1048576 Bytes -> Algo 1 proto 2
 * time ...").
 */
#include "coll/coll.h"

#include "check.h"
#include "log.h"
#include "params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Without a model (no graph stage): the one-shot for small single-host
 * all-reduces, then Ring, then Tree. */
static const struct mc_coll_algo_ops *const preference[] = {
    &mc_coll_oneshot_ops,
    &mc_coll_ring_ops,
    &mc_coll_tree_ops,
};

/* The algorithms the model times, in NCCL's order (NCCL_ALGO_TREE 0, RING 1). */
static const struct mc_coll_algo_ops *const modelled[] = {
    &mc_coll_tree_ops,
    &mc_coll_ring_ops,
};

/* The tuning model of this communicator (NCCL's ncclTopoTuneModel at the end
 * of init; here at the first collective): from the channels of the graph
 * stage, or nothing when the communicator has none (unit tests). */
static void tune_ready(struct ncclComm *comm)
{
  const struct mc_topo_channels *g = &comm->topo.graph;
  struct mc_tune_consts consts;
  struct mc_tune_in in;
  int ppn = 0;

  if (comm->tune_ready)
    return;
  comm->tune_ready = true;
  memset(&comm->tune, 0, sizeof(comm->tune));
  if ((g->n_ranks != comm->n_ranks) || (g->rank_to_node == NULL))
    return;
  for (int k = 0; k < g->n_nodes; k++) {
    int count = 0;
    for (int r = 0; r < g->n_ranks; r++)
      count += (g->rank_to_node[r] == k) ? 1 : 0;
    ppn = (count > ppn) ? count : ppn;
  }
  in = (struct mc_tune_in){.n_ranks = comm->n_ranks,
                           .n_nodes = g->n_nodes,
                           .ppn = ppn,
                           .n_channels = g->n_channels,
                           .max_tree_pattern = g->max_tree_pattern,
                           .ring_bw_intra = g->ring.bw_intra,
                           .ring_bw_inter = g->ring.bw_inter,
                           .tree_bw_intra = g->tree.bw_intra,
                           .tree_bw_inter = g->tree.bw_inter,
                           .latency_inter = comm->topo.ring_graph.latency_inter,
                           .ring_same_channels = g->ring.same_channels};
  mc_tune_consts_default(&consts);
  mc_tune_model(&in, &consts, &comm->tune);
  if ((comm->rank == 0) && mc_log_enabled(MC_LOG_INFO, MC_SUB_TUNING)) {
    char *buf = NULL;
    size_t bytes = 0;
    FILE *f = open_memstream(&buf, &bytes);
    if (f != NULL) {
      mc_tune_print(&comm->tune, f);
      fclose(f);
      for (char *line = strtok(buf, "\n"); line != NULL; line = strtok(NULL, "\n"))
        MC_INFO(MC_SUB_TUNING, "%s", line);
      free(buf);
    }
  }
}

static int tune_func(enum mc_coll_kind kind)
{
  switch (kind) {
  case MC_COLL_BROADCAST:
    return MC_TUNE_BROADCAST;
  case MC_COLL_REDUCE:
    return MC_TUNE_REDUCE;
  case MC_COLL_ALLGATHER:
    return MC_TUNE_ALLGATHER;
  case MC_COLL_REDUCESCATTER:
    return MC_TUNE_REDUCESCATTER;
  default:
    return MC_TUNE_ALLREDUCE;
  }
}

/* NCCL reduces the channels of small operations (enqueue.cc: fewer channels
 * while nBytes < nc x threads x threshold); on hosts a channel earns its
 * place with at least per bytes of data (an algorithm's channels_for says
 * how much). */
int mc_coll_channels_for_slots(const struct ncclComm *comm, size_t bytes, size_t per)
{
  int nc = comm->data.n_channels;

  if (per == 0)
    per = 1;
  while ((nc > 1) && (bytes < (size_t)nc * per))
    nc--;
  return (nc > 0) ? nc : 1;
}

ncclResult_t mc_coll_algo_choose(struct mc_op *op)
{
  struct ncclComm *comm = op->comm;
  const struct mc_coll_algo_ops *algo = NULL;
  const char *why = "default choice";
  uint32_t allowed;
  size_t bytes = op->count * op->esize;
  float time = -1.0f;

  if ((op->kind == MC_COLL_SEND) || (op->kind == MC_COLL_RECV)) {
    op->algo = &mc_coll_p2p_ops;
    op->est_us = 0.0f; /* NCCL's model has no point-to-point entry either */
    return ncclSuccess;
  }
  MC_CHECK(mc_comm_algo_env_load(comm));
  tune_ready(comm);
  if ((op->kind == MC_COLL_ALLGATHER) || (op->kind == MC_COLL_REDUCESCATTER))
    bytes *= (size_t)comm->n_ranks;
  allowed = comm->algo_allowed[op->kind];
  if (((allowed >> MC_ALGO_ONESHOT) & 1u) && mc_coll_oneshot_ops.supports(op)) {
    algo = &mc_coll_oneshot_ops;
    why = "small all-reduce on one host";
  } else if (((allowed >> MC_ALGO_SYMMETRIC) & 1u) && mc_coll_sym_ops.supports(op)) {
    algo = &mc_coll_sym_ops;
    why = "both buffers in symmetric windows, one host";
  }
  /* The model's fastest of the algorithms allowed (NCCL's scan: Tree, then Ring, strict <). */
  for (size_t i = 0; (algo == NULL) && (i < sizeof(modelled) / sizeof(modelled[0])); i++) {
    const struct mc_coll_algo_ops *a = modelled[i];
    float t;
    if ((((allowed >> a->id) & 1u) == 0) || !a->supports(op))
      continue;
    t = mc_tune_time(&comm->tune, tune_func(op->kind), (int)a->id, MC_TUNE_SIMPLE, bytes);
    if ((t >= 0) && ((time < 0) || (t < time))) {
      time = t;
      op->algo = a;
      why = (allowed != MC_ALGO_MASK_ALL) ? "NCCL_ALGO and the model" : "fastest in the model";
    }
  }
  if ((algo == NULL) && (time >= 0))
    algo = op->algo;
  for (size_t i = 0; (i < sizeof(preference) / sizeof(preference[0])) && (algo == NULL); i++)
    if (((allowed >> preference[i]->id) & 1u) && preference[i]->supports(op))
      algo = preference[i];
  if (algo == NULL) {
    algo = &mc_coll_ring_ops;
    why = "fallback: no algorithm NCCL_ALGO allows supports this collective";
  } else if ((time < 0) && (allowed != MC_ALGO_MASK_ALL)) {
    why = "NCCL_ALGO";
  }
  op->algo = algo;
  /* Algorithms outside the model (one-shot) are estimated as the ring. */
  op->est_us = (time >= 0) ? time
                           : mc_tune_time(&comm->tune, tune_func(op->kind), (int)MC_ALGO_RING,
                                          MC_TUNE_SIMPLE, bytes);
  if (op->est_us < 0)
    op->est_us = 0.0f;
  op->n_channels = (algo->channels_for != NULL) ? algo->channels_for(comm, bytes) : 0;
  if ((op->count > 0) && (comm->n_ranks > 1))
    MC_INFO(MC_SUB_TUNING, "%s: %zu Bytes -> Algo %d proto %d time %f nchannels %d (%s: %s)",
            mc_coll_name(op->kind), bytes, (int)algo->id, MC_PROTO_SIMPLE, (double)time,
            op->n_channels, algo->name, why);
  return ncclSuccess;
}
