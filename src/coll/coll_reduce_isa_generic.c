/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reduction kernels for the baseline instruction set of the build target
 * (16-byte vectors: SSE2 on x86-64, NEON on aarch64, plain C elsewhere).
 * Always available; the fallback of coll_reduce.c's dispatch.
 */
#include "coll/coll_reduce_int.h"

#define MC_RK_VB    16
#define MC_RK_TABLE mc_reduce_kernels_generic
#if defined(__x86_64__)
#define MC_RK_ISA "sse2"
#elif defined(__aarch64__) && defined(__ARM_NEON)
#define MC_RK_ISA "neon"
#else
#define MC_RK_ISA "generic"
#endif

#include "coll/coll_reduce_kernels.h"
