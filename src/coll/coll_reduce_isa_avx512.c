/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reduction kernels with 64-byte vectors: AVX-512 F, BW, DQ, VL and F16C
 * (this file is compiled with those -m flags, see CMakeLists.txt;
 * coll_reduce.c runs it only when the CPU and the OS support them all).
 * Empty on other architectures.
 */
#include "coll/coll_reduce_int.h"

#if defined(__x86_64__)
#define MC_RK_VB    64
#define MC_RK_F16C  512
#define MC_RK_TABLE mc_reduce_kernels_avx512
#define MC_RK_ISA   "avx512"

#include "coll/coll_reduce_kernels.h"
#endif
