/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Collectives, algorithms and protocols as the tuning model and NCCL_ALGO /
 * NCCL_PROTO name them (NCCL: ncclFunc_t, NCCL_ALGO_*, NCCL_PROTO_* and the
 * parsing of src/graph/tuning.cc, ncclTopoTuneModel): below src/coll, so that
 * init reads the two variables at init as NCCL does (init_comm.c) and sizes
 * the communicator's per-collective masks, while src/coll's algorithm tables
 * (coll.h) carry these ids.
 */
#ifndef MC_TOPO_ALGO_H
#define MC_TOPO_ALGO_H

#include <stdbool.h>
#include <stdint.h>

#include "nccl.h"

enum mc_coll_kind {
  MC_COLL_ALLREDUCE = 0,
  MC_COLL_BROADCAST,
  MC_COLL_REDUCE,
  MC_COLL_ALLGATHER,
  MC_COLL_REDUCESCATTER,
  MC_COLL_SEND,
  MC_COLL_RECV
};
#define MC_COLL_KINDS (MC_COLL_RECV + 1)

/* NCCL's algorithm numbers (NCCL_ALGO_*), for logs; meshccl's own after them. */
enum mc_coll_algo {
  MC_ALGO_TREE = 0,
  MC_ALGO_RING = 1,
  MC_ALGO_ONESHOT = 7,  /* meshccl's small single-host all-reduce */
  MC_ALGO_P2P = 8,      /* send/recv (NCCL runs them outside the algorithm choice) */
  MC_ALGO_SYMMETRIC = 9 /* meshccl's all-reduce on symmetric windows (coll_sym.c) */
};
#define MC_PROTO_SIMPLE 2 /* NCCL_PROTO_SIMPLE: the only protocol here */

/* Which algorithms each collective may use (topo_algo_env.c), NCCL's syntax:
 * "Ring,Tree", "^Tree" (all but), case-insensitive, and the per-collective
 * form "allreduce:tree;broadcast:ring" (collectives not named: all). */
#define MC_ALGO_MASK_ALL 0xffffffffu
struct mc_algo_env {
  uint32_t allowed[MC_COLL_KINDS]; /* bit (1 << enum mc_coll_algo) per collective */
  uint32_t protos[MC_COLL_KINDS];  /* bit (1 << NCCL_PROTO_*) per collective */
  uint32_t protos_named;           /* protocols NCCL_PROTO names in a list without '^' */
};

/* Parses NCCL_ALGO (algo, NULL: unset) and NCCL_PROTO (proto) into *out.
 * ncclInvalidUsage naming the variable and the token for an unknown name. */
ncclResult_t mc_algo_env_parse(const char *algo, const char *proto, struct mc_algo_env *out);

/* Whether env asks for a protocol meshccl does not implement (LL, LL128:
 * GPU protocols), by name or by excluding Simple. */
bool mc_algo_env_wants_gpu_proto(const struct mc_algo_env *env);

#endif /* MC_TOPO_ALGO_H */
