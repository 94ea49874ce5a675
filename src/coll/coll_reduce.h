/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Element-wise reduction kernels on host memory, for every NCCL data type
 * and reduction (NCCL 2.30's semantics). Pure functions: no state, no
 * allocation, no logging. Vectorised, with the instruction set chosen once
 * at run time (mc_reduce_isa tells which).
 *
 * NCCL's reductions, as the collectives use them:
 *   sum, prod, max, min     element-wise; integers wrap (two's complement)
 *   premulsum (scalar s)    every rank's input is multiplied by s once, when
 *                           it enters the reduction ("pre"), then summed
 *   avg                     floating types: premulsum with s = 1/nranks;
 *                           integer types: sum, then divided by nranks once,
 *                           on the final result ("post", truncating as C does)
 * float16 and bfloat16 reduce through float32 and round to nearest even
 * after every operation; the fp8 types (e4m3, e5m2) likewise, saturating to
 * the largest finite value as NCCL's conversions do; NaN propagates in
 * max/min as NCCL's fmaxf/fminf-based device code does.
 */
#ifndef MC_COLL_REDUCE_H
#define MC_COLL_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

enum mc_red_kind {
  MC_RED_SUM = 0,
  MC_RED_PROD,
  MC_RED_MAX,
  MC_RED_MIN,
  MC_RED_PREMULSUM, /* pre: x * scalar */
  MC_RED_SUMPOSTDIV /* post: x / n_ranks (integer avg) */
};

/* One resolved reduction (what a collective carries). */
struct mc_redop {
  ncclDataType_t type;
  enum mc_red_kind kind;
  /* premulsum: the scalar as a value of `type`, in its own encoding (an
   * int32 for ncclInt32, a half's 16 bits for ncclFloat16, ...), in the low
   * bytes of this field. */
  uint64_t scalar;
  int n_ranks; /* sumpostdiv: the divisor */
};

/* Size of one element of type in bytes; 0 for an invalid type. */
size_t mc_type_size(ncclDataType_t type);
/* NCCL's name of a type ("float", "half", "bfloat16", "int8", ...). */
const char *mc_type_name(ncclDataType_t type);

/*
 * Resolves a built-in op (ncclSum..ncclAvg) for n_ranks into *out.
 * Returns ncclInvalidArgument for a type or op out of range.
 */
ncclResult_t mc_redop_builtin(ncclDataType_t type, ncclRedOp_t op, int n_ranks,
                              struct mc_redop *out);

/* A premulsum reduction; scalar points to one value of type. */
ncclResult_t mc_redop_premulsum(ncclDataType_t type, const void *scalar, struct mc_redop *out);

/* Flags of mc_reduce. */
#define MC_REDUCE_PRE_A 0x1u /* apply the op's pre (premulsum) to a */
#define MC_REDUCE_PRE_B 0x2u /* apply the op's pre to b */
#define MC_REDUCE_POST  0x4u /* apply the op's post (postdiv) to the result */

/*
 * dst[i] = pre?(a[i]) OP pre?(b[i]), then post? — for count elements.
 * a == NULL means a copy: dst[i] = post?(pre?(b[i])) (so the first input
 * of a reduction can enter it). dst may equal a or b (in place); other
 * overlaps are not allowed. Pre/post flags are ignored by ops without them.
 */
void mc_reduce(const struct mc_redop *op, void *dst, const void *a, const void *b, size_t count,
               unsigned flags);

/*
 * dst[i] = pre(src[0][i]) OP pre(src[1][i]) OP ... OP pre(src[n-1][i]),
 * then post — the reduction of n inputs in index order, rounding after every
 * operation as a chain of mc_reduce calls would (identical results).
 * n >= 1; dst may equal one of the sources.
 */
void mc_reduce_multi(const struct mc_redop *op, void *dst, const void *const *src, int n,
                     size_t count, unsigned flags);

/* Instruction set the kernels run with ("avx512", "avx2", "sse2", "neon", "generic"). */
const char *mc_reduce_isa(void);

#endif /* MC_COLL_REDUCE_H */
