/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reduction kernels with 32-byte vectors, AVX2 and F16C (this file is
 * compiled with -mavx2 -mf16c, see CMakeLists.txt; coll_reduce.c runs it only
 * when the CPU has both). Empty on other architectures.
 */
#include "coll/coll_reduce_int.h"

#if defined(__x86_64__)
#define MC_RK_VB    32
#define MC_RK_F16C  256
#define MC_RK_TABLE mc_reduce_kernels_avx2
#define MC_RK_ISA   "avx2"

#include "coll/coll_reduce_kernels.h"
#endif
