/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The algorithm of each operation (NCCL's ncclGetAlgoInfo / topoGetAlgoInfo,
 * src/enqueue.cc, with the model of src/topo/topo_tuning.c), asked of the
 * tables of MC_ALGO_LIST: among those NCCL_ALGO allows for the collective and
 * that support the operation, the first that runs whenever it may
 * (MC_CHOICE_FIRST: meshccl's one-shot for small single-host all-reduces,
 * the symmetric one), else the fastest in the model (MC_CHOICE_MODEL, list
 * order, strict <: NCCL's scan, Tree before Ring); without a model the
 * default table (Ring), else the first allowed; a collective no allowed
 * algorithm supports (NCCL_ALGO=Tree for a broadcast) falls back to the
 * default, as NCCL 2.30 runs broadcast and reduce on rings only. Send and
 * receive take the table that is the only one for them. The channel count
 * is chosen with the algorithm. Every choice is logged at INFO TUNING in
 * NCCL's words ("AllReduce: 1048576 Bytes -> Algo 1 proto 2 time ...").
 * Also here: the tables' states on a communicator.
 */
#include "coll/coll.h"

#include "check.h"
#include "log.h"
#include "params.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The table list (topo/topo_algo.h), in its order. */
#define TABLE_X(_id, _name, _num, _ops, _env) &_ops,
const struct mc_coll_algo_ops *const mc_coll_algos[] = {MC_ALGO_LIST(TABLE_X)};
#undef TABLE_X
const int mc_coll_n_algos = (int)(sizeof(mc_coll_algos) / sizeof(mc_coll_algos[0]));

/* Numbers fit the per-algorithm arrays, and no two tables share one (a
 * duplicate case label does not compile). */
#define NUM_X(_id, _name, _num, _ops, _env)                                                        \
  _Static_assert((_num) >= 0 && (_num) < MC_ALGO_IDS, #_name ": number out of range");
MC_ALGO_LIST(NUM_X)
#undef NUM_X
#define CASE_X(_id, _name, _num, _ops, _env)                                                       \
  case _num:                                                                                       \
    return true;
static bool algo_known(int num)
{
  switch (num) {
    MC_ALGO_LIST(CASE_X)
  default:
    return false;
  }
}
#undef CASE_X

/* ---------------------------------------------------------------- states */

static void states_free(struct ncclComm *comm, bool aborted)
{
  for (int i = 0; i < mc_coll_n_algos; i++) {
    const struct mc_coll_algo_ops *a = mc_coll_algos[i];
    void *st = comm->coll.algo_state[a->id];
    if ((st == NULL) || (a->state_free == NULL))
      continue;
    comm->coll.algo_state[a->id] = NULL;
    a->state_free(comm, st, aborted);
  }
}

ncclResult_t mc_coll_algo_states_new(struct ncclComm *comm)
{
  for (int i = 0; i < mc_coll_n_algos; i++) {
    const struct mc_coll_algo_ops *a = mc_coll_algos[i];
    if ((a->state_new == NULL) || (comm->coll.algo_state[a->id] != NULL) || !algo_known((int)a->id))
      continue;
    comm->coll.algo_states_free = states_free;
    MC_CHECK(a->state_new(comm, &comm->coll.algo_state[a->id]));
  }
  return ncclSuccess;
}

/* The tuning model of this communicator (NCCL's ncclTopoTuneModel at the end
 * of init; here at the first collective): from the channels of the graph
 * stage, or nothing when the communicator has none (unit tests). */
static void tune_ready(struct ncclComm *comm)
{
  const struct mc_topo_channels *g = &comm->topo.graph;
  struct mc_tune_consts consts;
  struct mc_tune_in in;
  int ppn = 0;

  if (comm->coll.tune_ready)
    return;
  comm->coll.tune_ready = true;
  memset(&comm->coll.tune, 0, sizeof(comm->coll.tune));
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
  mc_tune_model(&in, &consts, &comm->coll.tune);
  if ((comm->rank == 0) && mc_log_enabled(MC_LOG_INFO, MC_SUB_TUNING)) {
    char *buf = NULL;
    size_t bytes = 0;
    FILE *f = open_memstream(&buf, &bytes);
    if (f != NULL) {
      mc_tune_print(&comm->coll.tune, f);
      fclose(f);
      for (char *line = strtok(buf, "\n"); line != NULL; line = strtok(NULL, "\n"))
        MC_INFO(MC_SUB_TUNING, "%s", line);
      free(buf);
    }
  }
}

int mc_coll_tune_func(enum mc_coll_kind kind)
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

float mc_coll_nccl_model_time(const struct mc_coll_algo_ops *a, const struct mc_op *op,
                              size_t bytes)
{
  return mc_tune_time(&op->comm->coll.tune, mc_coll_tune_func(op->kind), (int)a->id, MC_TUNE_SIMPLE,
                      bytes);
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

static bool allowed_for(const struct mc_coll_algo_ops *a, uint32_t allowed, const struct mc_op *op)
{
  return (((allowed >> a->id) & 1u) != 0) && a->supports(op);
}

/* The fastest in the model of the tables allowed (*time_out: its time; -1 none). */
static const struct mc_coll_algo_ops *model_fastest(const struct mc_op *op, uint32_t allowed,
                                                    size_t bytes, float *time_out)
{
  const struct mc_coll_algo_ops *best = NULL;

  *time_out = -1.0f;
  for (int i = 0; i < mc_coll_n_algos; i++) {
    const struct mc_coll_algo_ops *a = mc_coll_algos[i];
    float t;
    if ((a->choice != MC_CHOICE_MODEL) || (a->est_us == NULL) || !allowed_for(a, allowed, op))
      continue;
    t = a->est_us(a, op, bytes);
    if ((t >= 0) && ((*time_out < 0) || (t < *time_out))) {
      *time_out = t;
      best = a;
    }
  }
  return best;
}

static const struct mc_coll_algo_ops *default_table(void)
{
  for (int i = 0; i < mc_coll_n_algos; i++)
    if (mc_coll_algos[i]->is_default)
      return mc_coll_algos[i];
  return mc_coll_algos[0];
}

ncclResult_t mc_coll_algo_choose(struct mc_op *op)
{
  struct ncclComm *comm = op->comm;
  const struct mc_coll_algo_ops *algo = NULL;
  const struct mc_coll_algo_ops *dflt = default_table();
  const char *why = "default choice";
  uint32_t allowed;
  size_t bytes = op->count * op->esize;
  float time = -1.0f;

  MC_CHECK(mc_coll_algo_states_new(comm));
  for (int i = 0; i < mc_coll_n_algos; i++) {
    const struct mc_coll_algo_ops *a = mc_coll_algos[i];
    if ((a->choice == MC_CHOICE_ONLY) && a->supports(op)) {
      op->algo = a;
      op->est_us = 0.0f; /* NCCL's model has no point-to-point entry either */
      return ncclSuccess;
    }
  }
  MC_CHECK(mc_comm_algo_env_load(comm));
  tune_ready(comm);
  if ((op->kind == MC_COLL_ALLGATHER) || (op->kind == MC_COLL_REDUCESCATTER))
    bytes *= (size_t)comm->n_ranks;
  allowed = comm->coll.algo_allowed[op->kind];
  for (int i = 0; (i < mc_coll_n_algos) && (algo == NULL); i++)
    if ((mc_coll_algos[i]->choice == MC_CHOICE_FIRST) && allowed_for(mc_coll_algos[i], allowed, op))
      algo = mc_coll_algos[i];
  if (algo != NULL) {
    why = (algo->choice_why != NULL) ? algo->choice_why : "runs first where it applies";
  } else if ((algo = model_fastest(op, allowed, bytes, &time)) != NULL) {
    why = (allowed != MC_ALGO_MASK_ALL) ? "NCCL_ALGO and the model" : "fastest in the model";
  } else if (allowed_for(dflt, allowed, op)) {
    algo = dflt;
  } else {
    for (int i = 0; (i < mc_coll_n_algos) && (algo == NULL); i++)
      if ((mc_coll_algos[i]->choice == MC_CHOICE_MODEL) &&
          allowed_for(mc_coll_algos[i], allowed, op))
        algo = mc_coll_algos[i];
  }
  if (algo == NULL) {
    algo = dflt;
    why = "fallback: no algorithm NCCL_ALGO allows supports this collective";
  } else if ((time < 0) && (allowed != MC_ALGO_MASK_ALL) && (algo->choice != MC_CHOICE_FIRST)) {
    why = "NCCL_ALGO";
  }
  op->algo = algo;
  /* Algorithms outside the model (one-shot) are estimated as the default. */
  op->est_us = (time >= 0) ? time : (dflt->est_us != NULL) ? dflt->est_us(dflt, op, bytes) : 0.0f;
  if (op->est_us < 0)
    op->est_us = 0.0f;
  op->n_channels = (algo->channels_for != NULL) ? algo->channels_for(comm, bytes) : 0;
  if ((op->count > 0) && (comm->n_ranks > 1))
    MC_INFO(MC_SUB_TUNING, "%s: %zu Bytes -> Algo %d proto %d time %f nchannels %d (%s: %s)",
            mc_coll_name(op->kind), bytes, (int)algo->id, MC_PROTO_SIMPLE, (double)time,
            op->n_channels, algo->name, why);
  return ncclSuccess;
}
