/* SPDX-License-Identifier: Apache-2.0 */
/* Scalar reductions (placeholder until the vectorised kernels land). */
#include "coll/coll_reduce.h"

#include <math.h>
#include <string.h>

size_t mc_type_size(ncclDataType_t t)
{
  static const size_t sz[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return ((unsigned)t < 12) ? sz[t] : 0;
}

const char *mc_type_name(ncclDataType_t t)
{
  static const char *const n[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                                  "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return ((unsigned)t < 12) ? n[t] : "invalid";
}

ncclResult_t mc_redop_builtin(ncclDataType_t type, ncclRedOp_t op, int n, struct mc_redop *out)
{
  if ((mc_type_size(type) == 0) || ((int)op < 0) || (op >= ncclNumOps))
    return ncclInvalidArgument;
  memset(out, 0, sizeof(*out));
  out->type = type;
  out->n_ranks = n;
  out->kind = (op == ncclAvg) ? MC_RED_SUMPOSTDIV : (enum mc_red_kind)op;
  if ((op == ncclAvg) && ((type == ncclFloat32) || (type == ncclFloat64))) {
    out->kind = MC_RED_PREMULSUM;
    if (type == ncclFloat32) {
      float f = 1.0f / (float)n;
      memcpy(&out->scalar, &f, 4);
    } else {
      double d = 1.0 / (double)n;
      memcpy(&out->scalar, &d, 8);
    }
  }
  return ncclSuccess;
}

ncclResult_t mc_redop_premulsum(ncclDataType_t type, const void *scalar, struct mc_redop *out)
{
  if (mc_type_size(type) == 0)
    return ncclInvalidArgument;
  memset(out, 0, sizeof(*out));
  out->type = type;
  out->kind = MC_RED_PREMULSUM;
  memcpy(&out->scalar, scalar, mc_type_size(type));
  return ncclSuccess;
}

#define KERNEL(T, NAME)                                                                            \
  static void NAME(const struct mc_redop *op, T *d, const T *a, const T *b, size_t n, unsigned fl) \
  {                                                                                                \
    T s;                                                                                           \
    memcpy(&s, &op->scalar, sizeof(T));                                                            \
    for (size_t i = 0; i < n; i++) {                                                               \
      T y = b[i], r;                                                                               \
      if ((fl & MC_REDUCE_PRE_B) && op->kind == MC_RED_PREMULSUM)                                  \
        y = (T)(y * s);                                                                            \
      if (a == NULL) {                                                                             \
        r = y;                                                                                     \
      } else {                                                                                     \
        T x = a[i];                                                                                \
        switch (op->kind) {                                                                        \
        case MC_RED_PROD:                                                                          \
          r = (T)(x * y);                                                                          \
          break;                                                                                   \
        case MC_RED_MAX:                                                                           \
          r = (x > y) ? x : y;                                                                     \
          break;                                                                                   \
        case MC_RED_MIN:                                                                           \
          r = (x < y) ? x : y;                                                                     \
          break;                                                                                   \
        default:                                                                                   \
          r = (T)(x + y);                                                                          \
          break;                                                                                   \
        }                                                                                          \
      }                                                                                            \
      if ((fl & MC_REDUCE_POST) && op->kind == MC_RED_SUMPOSTDIV)                                  \
        r = (T)(r / (T)op->n_ranks);                                                               \
      d[i] = r;                                                                                    \
    }                                                                                              \
  }
KERNEL(float, k_f32)
KERNEL(double, k_f64)
KERNEL(int32_t, k_i32)
KERNEL(uint32_t, k_u32)
KERNEL(int64_t, k_i64)
KERNEL(uint64_t, k_u64)
KERNEL(int8_t, k_i8)
KERNEL(uint8_t, k_u8)

void mc_reduce(const struct mc_redop *op, void *dst, const void *a, const void *b, size_t n,
               unsigned fl)
{
  switch (op->type) {
  case ncclFloat32:
    k_f32(op, dst, a, b, n, fl);
    break;
  case ncclFloat64:
    k_f64(op, dst, a, b, n, fl);
    break;
  case ncclInt32:
    k_i32(op, dst, a, b, n, fl);
    break;
  case ncclUint32:
    k_u32(op, dst, a, b, n, fl);
    break;
  case ncclInt64:
    k_i64(op, dst, a, b, n, fl);
    break;
  case ncclUint64:
    k_u64(op, dst, a, b, n, fl);
    break;
  case ncclInt8:
    k_i8(op, dst, a, b, n, fl);
    break;
  case ncclUint8:
    k_u8(op, dst, a, b, n, fl);
    break;
  default:
    if (a == NULL)
      memmove(dst, b, n * mc_type_size(op->type));
    break;
  }
}

void mc_reduce_multi(const struct mc_redop *op, void *dst, const void *const *src, int n,
                     size_t count, unsigned flags)
{
  mc_reduce(op, dst, NULL, src[0], count, flags & MC_REDUCE_PRE_B);
  for (int i = 1; i < n; i++)
    mc_reduce(op, dst, dst, src[i], count,
              (flags & MC_REDUCE_PRE_B) | ((i == n - 1) ? (flags & MC_REDUCE_POST) : 0));
}

const char *mc_reduce_isa(void)
{
  return "generic";
}
