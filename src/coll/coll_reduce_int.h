/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to the reduction kernels (src/coll/coll_reduce*.c): the per-ISA
 * kernel tables, the scalar conversions of the narrow float types, and the
 * test hook that forces one instruction set. Never included outside
 * src/coll/ except by the reduction unit test and bench/reduce_bench.c.
 */
#ifndef MC_COLL_REDUCE_INT_H
#define MC_COLL_REDUCE_INT_H

#include "coll/coll_reduce.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * One type's kernel: mc_reduce for op->type, after mc_reduce normalised the
 * flags (PRE_* only with premulsum, POST only with sumpostdiv, and with
 * a == NULL only PRE_B selects the pre).
 */
typedef void (*mc_reduce_kernel_fn)(const struct mc_redop *op, void *dst, const void *a,
                                    const void *b, size_t count, unsigned flags);

/* The kernels of one instruction set, indexed by ncclDataType_t. */
struct mc_reduce_kernels {
  const char *isa;
  mc_reduce_kernel_fn fn[ncclNumTypes];
};

extern const struct mc_reduce_kernels mc_reduce_kernels_generic;
#if defined(__x86_64__)
extern const struct mc_reduce_kernels mc_reduce_kernels_avx2;
extern const struct mc_reduce_kernels mc_reduce_kernels_avx512;
#endif

/*
 * Scalar conversions (coll_types.c), bit-exact with the vector kernels and
 * with CUDA's satfinite conversions: float -> narrow rounds to nearest even;
 * NaN becomes the canonical NaN (0x7fff for half and bfloat16, 0x7f for
 * both fp8 types); fp8 saturates to the largest finite value (also for
 * +-inf); narrow -> float is exact.
 */
float mc_type_f16_to_f32(uint16_t h);
uint16_t mc_type_f32_to_f16(float f);
float mc_type_bf16_to_f32(uint16_t h);
uint16_t mc_type_f32_to_bf16(float f);
float mc_type_e4m3_to_f32(uint8_t b);
uint8_t mc_type_f32_to_e4m3(float f);
float mc_type_e5m2_to_f32(uint8_t b);
uint8_t mc_type_f32_to_e5m2(float f);

/*
 * Test hook (tests and benchmarks only): runs the kernels of one
 * instruction set ("avx512", "avx2", "sse2", "neon", "generic") from now on,
 * or the automatic choice again with NULL. Returns ncclInvalidArgument when
 * that set is unknown or this CPU cannot run it. Not thread-safe with
 * concurrent reductions changing ISA mid-call (each call uses one table).
 */
ncclResult_t mc_reduce_force_isa(const char *isa);

#ifdef __cplusplus
}
#endif

#endif /* MC_COLL_REDUCE_INT_H */
