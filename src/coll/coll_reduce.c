/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reductions: resolving NCCL's built-in ops (mirrors hostToDevRedOp in NCCL
 * 2.30's src/enqueue.cc: avg is premulsum by 1/n for floats, sum then
 * division for integers), the instruction-set dispatch of the kernels
 * (coll_reduce_isa_*.c, chosen once from the CPU's features), and the
 * n-input reduction as a blocked chain of two-input ones.
 */
#include "coll/coll_reduce.h"
#include "coll/coll_reduce_int.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

/* mc_reduce_multi works on blocks of this many bytes per input so that the
 * accumulator stays in L1 between the steps of the chain. */
#define MULTI_BLOCK_BYTES 16384

/* The kernel table in use: a cache of a pure function of the CPU (or of the
 * test hook), so racing first calls store the same value. */
static _Atomic(const struct mc_reduce_kernels *) active_kernels;

#if defined(__x86_64__)
static bool cpu_has_f16c(void)
{
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;

  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0)
    return false;
  return (ecx & bit_F16C) != 0;
}

static bool cpu_has_avx2(void)
{
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && cpu_has_f16c();
}

static bool cpu_has_avx512(void)
{
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") && cpu_has_f16c();
}
#endif

/* The table named isa when this CPU can run it, else NULL. */
static const struct mc_reduce_kernels *kernels_named(const char *isa)
{
#if defined(__x86_64__)
  if ((strcmp(isa, mc_reduce_kernels_avx512.isa) == 0) && cpu_has_avx512())
    return &mc_reduce_kernels_avx512;
  if ((strcmp(isa, mc_reduce_kernels_avx2.isa) == 0) && cpu_has_avx2())
    return &mc_reduce_kernels_avx2;
#endif
  if (strcmp(isa, mc_reduce_kernels_generic.isa) == 0)
    return &mc_reduce_kernels_generic;
  return NULL;
}

static const struct mc_reduce_kernels *kernels_best(void)
{
#if defined(__x86_64__)
  if (cpu_has_avx512())
    return &mc_reduce_kernels_avx512;
  if (cpu_has_avx2())
    return &mc_reduce_kernels_avx2;
#endif
  return &mc_reduce_kernels_generic;
}

static const struct mc_reduce_kernels *kernels(void)
{
  const struct mc_reduce_kernels *k = atomic_load_explicit(&active_kernels, memory_order_relaxed);

  if (k == NULL) {
    k = kernels_best();
    atomic_store_explicit(&active_kernels, k, memory_order_relaxed);
  }
  return k;
}

const char *mc_reduce_isa(void)
{
  return kernels()->isa;
}

ncclResult_t mc_reduce_force_isa(const char *isa)
{
  const struct mc_reduce_kernels *k = (isa == NULL) ? kernels_best() : kernels_named(isa);

  if (k == NULL)
    return ncclInvalidArgument;
  atomic_store_explicit(&active_kernels, k, memory_order_relaxed);
  return ncclSuccess;
}

static bool type_is_integer(ncclDataType_t type)
{
  return (type == ncclInt8) || (type == ncclUint8) || (type == ncclInt32) || (type == ncclUint32) ||
         (type == ncclInt64) || (type == ncclUint64);
}

/* 1/n as NCCL computes it, float(1.0/n), in type's encoding. */
static uint64_t avg_scalar(ncclDataType_t type, int n_ranks)
{
  double inv = 1.0 / (double)n_ranks;
  float f = (float)inv;
  uint32_t u32;
  uint64_t u64;

  switch (type) {
  case ncclFloat16:
    return mc_type_f32_to_f16(f);
  case ncclBfloat16:
    return mc_type_f32_to_bf16(f);
  case ncclFloat8e4m3:
    return mc_type_f32_to_e4m3(f);
  case ncclFloat8e5m2:
    return mc_type_f32_to_e5m2(f);
  case ncclFloat64:
    memcpy(&u64, &inv, sizeof(u64));
    return u64;
  default: /* ncclFloat32 */
    memcpy(&u32, &f, sizeof(u32));
    return u32;
  }
}

ncclResult_t mc_redop_builtin(ncclDataType_t type, ncclRedOp_t op, int n_ranks,
                              struct mc_redop *out)
{
  struct mc_redop r = {.type = type, .kind = MC_RED_SUM, .scalar = 0, .n_ranks = n_ranks};

  if (mc_type_size(type) == 0)
    return ncclInvalidArgument;
  switch ((int)op) {
  case ncclSum:
    r.kind = MC_RED_SUM;
    break;
  case ncclProd:
    r.kind = MC_RED_PROD;
    break;
  case ncclMax:
    r.kind = MC_RED_MAX;
    break;
  case ncclMin:
    r.kind = MC_RED_MIN;
    break;
  case ncclAvg:
    if (n_ranks < 1)
      return ncclInvalidArgument;
    if (type_is_integer(type)) {
      r.kind = MC_RED_SUMPOSTDIV;
    } else {
      r.kind = MC_RED_PREMULSUM;
      r.scalar = avg_scalar(type, n_ranks);
    }
    break;
  default:
    return ncclInvalidArgument;
  }
  *out = r;
  return ncclSuccess;
}

ncclResult_t mc_redop_premulsum(ncclDataType_t type, const void *scalar, struct mc_redop *out)
{
  struct mc_redop r = {.type = type, .kind = MC_RED_PREMULSUM, .scalar = 0, .n_ranks = 1};
  size_t bytes = mc_type_size(type);
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;

  if ((bytes == 0) || (scalar == NULL))
    return ncclInvalidArgument;
  /* the value's own bits, as an integer: "low bytes" whatever the byte order */
  switch (bytes) {
  case 1:
    memcpy(&u8, scalar, 1);
    r.scalar = u8;
    break;
  case 2:
    memcpy(&u16, scalar, 2);
    r.scalar = u16;
    break;
  case 4:
    memcpy(&u32, scalar, 4);
    r.scalar = u32;
    break;
  default:
    memcpy(&u64, scalar, 8);
    r.scalar = u64;
    break;
  }
  *out = r;
  return ncclSuccess;
}

/* Keeps the flags the op has (pre for premulsum, post for sumpostdiv); a
 * copy takes its pre from either PRE flag, as PRE_B. */
static unsigned flags_normalize(enum mc_red_kind kind, unsigned flags, bool is_copy)
{
  unsigned f = flags & (MC_REDUCE_PRE_A | MC_REDUCE_PRE_B | MC_REDUCE_POST);

  if (kind != MC_RED_PREMULSUM)
    f &= ~(MC_REDUCE_PRE_A | MC_REDUCE_PRE_B);
  if (kind != MC_RED_SUMPOSTDIV)
    f &= ~MC_REDUCE_POST;
  if (is_copy && ((f & MC_REDUCE_PRE_A) != 0))
    f = (f & ~MC_REDUCE_PRE_A) | MC_REDUCE_PRE_B;
  return f;
}

void mc_reduce(const struct mc_redop *op, void *dst, const void *a, const void *b, size_t count,
               unsigned flags)
{
  if (count == 0)
    return;
  assert(mc_type_size(op->type) != 0);
  if (mc_type_size(op->type) == 0)
    return;
  kernels()->fn[op->type](op, dst, a, b, count, flags_normalize(op->kind, flags, a == NULL));
}

void mc_reduce_multi(const struct mc_redop *op, void *dst, const void *const *src, int n,
                     size_t count, unsigned flags)
{
  size_t esz = mc_type_size(op->type);
  unsigned pre_first = flags & (MC_REDUCE_PRE_A | MC_REDUCE_PRE_B);
  unsigned post = flags & MC_REDUCE_POST;
  bool alias = false;
  size_t block;

  assert((n >= 1) && (esz != 0));
  if ((n < 1) || (esz == 0) || (count == 0))
    return;
  if (n == 1) {
    mc_reduce(op, dst, NULL, src[0], count,
              (((flags & MC_REDUCE_PRE_A) != 0) ? MC_REDUCE_PRE_B : 0) | post);
    return;
  }
  if (n == 2) {
    mc_reduce(op, dst, src[0], src[1], count, flags);
    return;
  }
  /* dst may be a later input: accumulate on the stack, then copy out */
  for (int i = 2; i < n; i++)
    alias = alias || (src[i] == dst);

  block = MULTI_BLOCK_BYTES / esz;
  for (size_t off = 0; off < count; off += block) {
    unsigned char tmp[MULTI_BLOCK_BYTES];
    size_t len = (count - off < block) ? count - off : block;
    size_t boff = off * esz;
    void *acc = alias ? (void *)tmp : (void *)((char *)dst + boff);

    mc_reduce(op, acc, (const char *)src[0] + boff, (const char *)src[1] + boff, len, pre_first);
    for (int i = 2; i < n; i++) {
      mc_reduce(op, acc, acc, (const char *)src[i] + boff, len,
                (flags & MC_REDUCE_PRE_B) | ((i == n - 1) ? post : 0));
    }
    if (alias)
      memcpy((char *)dst + boff, tmp, len * esz);
  }
}
