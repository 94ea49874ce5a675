/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL's runtime connect (src/enqueue.cc, ncclPrepareTasks and the
 * transports' connect at first use): the connections a batch's algorithms
 * still need, asked from each algorithm's table (first_use), made together
 * for every communicator of the batch after the batch's probe (coll_check.c),
 * none kept when one fails.
 */
#include "coll/coll_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "params.h"
#include "utils.h"

bool mc_coll_op_needs_first_use(const struct mc_op *op, bool all_peers)
{
  int n = 0;

  if (!mc_coll_op_runs(op) || (op->algo->first_use == NULL) ||
      (all_peers && !op->algo->first_use_all_peers))
    return false;
  return (op->algo->first_use((struct mc_op *)op, NULL, NULL, &n) == ncclSuccess) && (n > 0);
}

/* Whether op k of b on comm is the first of its connection group there
 * (connections with every peer are asked once per group). */
static bool first_of_group(const struct mc_coll_batch *b, int k)
{
  const struct mc_op *op = &b->ops[k];

  for (int j = 0; j < k; j++)
    if ((b->ops[j].comm == op->comm) &&
        (mc_coll_conn_group(b->ops[j].algo) == mc_coll_conn_group(op->algo)) &&
        mc_coll_op_runs(&b->ops[j]))
      return false;
  return true;
}

/* The connections the batch's operations ask for at first use (their
 * tables' first_use), made together for every communicator of the batch
 * (NCCL's runtime connect); then each algorithm that asked hears they are
 * made (first_use_done). On failure none of them is kept. */
ncclResult_t mc_coll_runtime_connect(struct mc_coll_batch *b, struct ncclComm **failed)
{
  struct mc_tp_set *sets = NULL;
  struct mc_conn_req *reqs = NULL;
  struct mc_conn ***holders = NULL;  /* heap connections to forget on failure */
  const struct mc_op **asked = NULL; /* ops whose algorithm has a first_use_done */
  int n_sets = 0;
  int n_reqs = 0;
  int n_asked = 0;
  size_t cap = 0;
  ncclResult_t res = ncclSuccess;

  for (int i = 0; i < b->n_ops; i++) {
    struct mc_op *op = &b->ops[i];
    int n = 0;
    if (mc_coll_op_runs(op) && (op->algo->first_use != NULL))
      MC_CHECK(op->algo->first_use(op, NULL, NULL, &n));
    cap += (size_t)n;
  }
  if (cap == 0)
    return ncclSuccess; /* the common case: nothing to connect, nothing allocated */
  MC_CHECK(mc_coll_batch_probe(b, failed));
  MC_CHECK(mc_calloc(&sets, (size_t)b->n_ops));
  MC_CHECK_GOTO(mc_calloc(&reqs, cap), res, out);
  MC_CHECK_GOTO(mc_calloc(&holders, cap), res, out);
  MC_CHECK_GOTO(mc_calloc(&asked, (size_t)b->n_ops), res, out);
  for (int i = 0; i < b->n_ops; i++) {
    struct ncclComm *comm = b->ops[i].comm;
    struct mc_tp_set *set = &sets[n_sets];
    if (!mc_coll_batch_comm_first(b, i))
      continue;
    *set = (struct mc_tp_set){.tc = &comm->data.tp, .reqs = &reqs[n_reqs], .n = 0};
    for (int k = i; k < b->n_ops; k++) {
      struct mc_op *op = &b->ops[k];
      const struct mc_coll_algo_ops *a = op->algo;
      int n = 0;
      if ((op->comm != comm) || !mc_coll_op_runs(op) || (a->first_use == NULL) ||
          (a->first_use_all_peers && !first_of_group(b, k)))
        continue;
      MC_CHECK_GOTO(a->first_use(op, NULL, NULL, &n), res, out);
      if ((n == 0) || ((size_t)(n_reqs + n) > cap))
        continue;
      /* On failure part-way its connections so far are in holders[]. */
      res = a->first_use(op, &reqs[n_reqs], &holders[n_reqs], &n);
      n_reqs += n;
      set->n += n;
      if (res != ncclSuccess)
        goto out;
      if ((n > 0) && (a->first_use_done != NULL))
        asked[n_asked++] = op;
    }
    if (set->n > 0)
      n_sets++;
  }
  res = (n_sets > 0) ? mc_transport_connect_sets(sets, n_sets) : ncclSuccess;
  if (res == ncclSuccess)
    for (int q = 0; q < n_asked; q++)
      asked[q]->algo->first_use_done(asked[q]->comm);
out:
  if (res != ncclSuccess) {
    /* Connections not made are forgotten (the next call tries again). */
    for (int q = 0; (holders != NULL) && (q < n_reqs); q++) {
      if (holders[q] != NULL) {
        free(*holders[q]);
        *holders[q] = NULL;
      }
    }
  }
  free(asked);
  free(holders);
  free(reqs);
  free(sets);
  return res;
}
