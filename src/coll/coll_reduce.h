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
 *
 * In detail (NCCL 2.30's src/device/reduce_kernel.h on sm_90, where unclear):
 *   - no fused multiply-add: a premulsum product is rounded to the type
 *     before it is summed; a sumpostdiv sum is rounded before the division.
 *   - half/bfloat16 results equal NCCL's native __hadd/__hmul (float32 holds
 *     every two-operand result closely enough that one more rounding is
 *     harmless). fp8 ops run in half on the GPU and are converted with
 *     __NV_SATFINITE; for two-operand sums and products that equals rounding
 *     the float32 result straight to fp8, which the kernels do.
 *   - fp8 conversion: nearest even; |x| above the largest finite value,
 *     including +-inf (so an e5m2 inf in any computed result), saturates to
 *     +-max (e4m3 0x7e = 448, e5m2 0x7b = 57344); tiny values keep their
 *     sign (0x80).
 *   - NaN: any NaN a computation produces is the type's canonical NaN:
 *     0x7fffffff, 0x7fffffffffffffff, 0x7fff (half, bfloat16), 0x7f (fp8),
 *     as the GPU writes them. A plain copy keeps the bits.
 *   - max/min are IEEE 754-2019 maximumNumber/minimumNumber, as CUDA's
 *     fmaxf/fminf/__hmax/__hmin: a NaN operand loses to a number (so NaN
 *     "propagates" only when both are NaN, as canonical NaN), and
 *     max(+0, -0) = +0, min(+0, -0) = -0.
 *   - integers: sum and prod wrap (two's complement), max/min compare signed
 *     or unsigned by type; avg divides the wrapped sum by n_ranks once,
 *     truncating toward zero (NCCL's FuncSumPostDiv).
 *   - avg scalar: float(1.0 / n_ranks) converted to the type (for half,
 *     bfloat16 and fp8 rounded to nearest even, fp8 saturating), as
 *     hostToDevRedOp does. NCCL releases after 2.30 may post-multiply
 *     floats instead; this module keeps the 2.30 premulsum.
 *   - sumpostdiv on a floating type (never produced by mc_redop_builtin):
 *     the post divides in float32 (float64) and rounds once to the type.
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
 * Returns ncclInvalidArgument for a type or op out of range, or ncclAvg with
 * n_ranks < 1; *out is written only on success. Pure: does not log (the
 * caller, which knows the communicator and the argument, reports).
 */
ncclResult_t mc_redop_builtin(ncclDataType_t type, ncclRedOp_t op, int n_ranks,
                              struct mc_redop *out);

/* A premulsum reduction; scalar points to one value of type (host memory,
 * read once here). ncclInvalidArgument for a bad type or a NULL scalar. */
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
 * In a copy either PRE flag applies the pre to b. Any length and any
 * alignment of the pointers (element-aligned or not); results do not depend
 * on them nor on the instruction set. Thread-safe, no allocation, no locks.
 */
void mc_reduce(const struct mc_redop *op, void *dst, const void *a, const void *b, size_t count,
               unsigned flags);

/*
 * dst[i] = pre(src[0][i]) OP pre(src[1][i]) OP ... OP pre(src[n-1][i]),
 * then post — the reduction of n inputs in index order, rounding after every
 * operation as a chain of mc_reduce calls would (identical results).
 * n >= 1; dst may equal one of the sources.
 * flags: MC_REDUCE_PRE_A applies the pre to src[0], MC_REDUCE_PRE_B to
 * src[1..n-1], MC_REDUCE_POST to the result; the chain is
 *   mc_reduce(dst, src[0], src[1], PRE_A|PRE_B of flags [| POST if n == 2]),
 *   mc_reduce(dst, dst, src[i], PRE_B of flags [| POST if i == n-1]) ...
 * (n == 1: mc_reduce(dst, NULL, src[0], PRE_B if PRE_A | POST)). Works in
 * blocks that stay in L1, with the sources read as they were on entry even
 * when dst is one of them; uses 16 KiB of stack, no allocation.
 */
void mc_reduce_multi(const struct mc_redop *op, void *dst, const void *const *src, int n,
                     size_t count, unsigned flags);

/* Instruction set the kernels run with ("avx512", "avx2", "sse2", "neon", "generic"):
 * the widest this CPU and OS support, chosen at the first call. */
const char *mc_reduce_isa(void);

#endif /* MC_COLL_REDUCE_H */
