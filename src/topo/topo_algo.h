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

/*
 * The algorithm table list: every algorithm src/coll runs, one line each:
 * _X(ID, Name, number, table, in_env). ID names its enum value MC_ALGO_ID;
 * Name is its NCCL_ALGO name (NCCL's for NCCL's algorithms, meshccl's own
 * otherwise); number is NCCL's NCCL_ALGO_* where NCCL has it, else
 * meshccl's own after NCCL's (the bit of the NCCL_ALGO masks, the number in
 * logs); table is its struct mc_coll_algo_ops (src/coll, one file each);
 * in_env: NCCL_ALGO may name it (send/recv run outside the choice). The
 * tables' files say what each is (OneShot: meshccl's small single-host
 * all-reduce; Symmetric: collectives on symmetric windows). Adding
 * an algorithm is its file plus one line here (docs/design/datapath.md,
 * "Adding an algorithm").
 */
#define MC_ALGO_LIST(_X)                                                                           \
  _X(TREE, Tree, 0, mc_coll_tree_ops, 1)                                                           \
  _X(RING, Ring, 1, mc_coll_ring_ops, 1)                                                           \
  _X(ONESHOT, OneShot, 7, mc_coll_oneshot_ops, 1)                                                  \
  _X(P2P, P2P, 8, mc_coll_p2p_ops, 0)                                                              \
  _X(SYMMETRIC, Symmetric, 9, mc_coll_sym_ops, 1)                                                  \
  _X(RECDOUBLE, RecDouble, 10, mc_coll_recdouble_ops, 1)

#define MC_ALGO_ENUM_X(_id, _name, _num, _ops, _env) MC_ALGO_##_id = _num,
enum mc_coll_algo { MC_ALGO_LIST(MC_ALGO_ENUM_X) };
#undef MC_ALGO_ENUM_X
/* Algorithm numbers are below this (the size of per-algorithm arrays; the
 * NCCL_ALGO masks have 32 bits). */
#define MC_ALGO_IDS     16
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
