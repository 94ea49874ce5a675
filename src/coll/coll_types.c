/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL's data types: sizes, names (NCCL's ncclDatatypeToString words without
 * the prefix, as its INFO lines print them), and the scalar conversions of
 * the narrow float types to and from float32. The conversions follow CUDA's
 * __float2half_rn, __float2bfloat16_rn and __nv_cvt_float_to_fp8(...,
 * __NV_SATFINITE, ...): round to nearest even, canonical NaN, fp8 saturating
 * to the largest finite value. The vector kernels (coll_reduce_kernels.h)
 * compute the same bits another way; the unit test checks both against a
 * third, straightforward reference.
 */
#include "coll/coll_reduce.h"
#include "coll/coll_reduce_int.h"

#include <string.h>

static const struct {
  const char *name;
  size_t bytes;
} type_info[ncclNumTypes] = {
    [ncclInt8] = {"int8", 1},           [ncclUint8] = {"uint8", 1},
    [ncclInt32] = {"int32", 4},         [ncclUint32] = {"uint32", 4},
    [ncclInt64] = {"int64", 8},         [ncclUint64] = {"uint64", 8},
    [ncclFloat16] = {"half", 2},        [ncclFloat32] = {"float", 4},
    [ncclFloat64] = {"double", 8},      [ncclBfloat16] = {"bfloat16", 2},
    [ncclFloat8e4m3] = {"fp8_e4m3", 1}, [ncclFloat8e5m2] = {"fp8_e5m2", 1},
};

size_t mc_type_size(ncclDataType_t type)
{
  if (((int)type < 0) || ((int)type >= ncclNumTypes))
    return 0;
  return type_info[type].bytes;
}

const char *mc_type_name(ncclDataType_t type)
{
  if (((int)type < 0) || ((int)type >= ncclNumTypes))
    return "unknown";
  return type_info[type].name;
}

static uint32_t f32_bits(float f)
{
  uint32_t u;

  memcpy(&u, &f, sizeof(u));
  return u;
}

static float f32_from_bits(uint32_t u)
{
  float f;

  memcpy(&f, &u, sizeof(f));
  return f;
}

/* Rounds t (0 <= t < 2^24, so every float step is exact) to the nearest
 * integer, ties to even, whatever the FPU rounding mode. */
static uint32_t round_half_even(float t)
{
  uint32_t q = (uint32_t)t;
  float frac = t - (float)q;

  if ((frac > 0.5f) || ((frac == 0.5f) && ((q & 1u) != 0)))
    q++;
  return q;
}

/* Drops the low `drop` bits of a significand held in `bits`, rounding to
 * nearest even; a carry runs into the exponent field, as it should. */
static uint32_t drop_bits_rne(uint32_t bits, unsigned drop)
{
  uint32_t half = 1u << (drop - 1);
  uint32_t rem = bits & ((1u << drop) - 1u);
  uint32_t q = bits >> drop;

  if ((rem > half) || ((rem == half) && ((q & 1u) != 0)))
    q++;
  return q;
}

float mc_type_f16_to_f32(uint16_t h)
{
  uint32_t sign = ((uint32_t)h & 0x8000u) << 16;
  uint32_t e = ((uint32_t)h >> 10) & 0x1fu;
  uint32_t m = (uint32_t)h & 0x3ffu;
  float f;

  if (e == 0) {
    f = (float)m * 0x1p-24f; /* zero or subnormal: m units of 2^-24 */
    return (sign != 0) ? -f : f;
  }
  if (e == 0x1fu)
    return f32_from_bits(sign | 0x7f800000u | (m << 13));
  return f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t mc_type_f32_to_f16(float f)
{
  uint32_t u = f32_bits(f);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7fffffffu;

  if (a > 0x7f800000u)
    return 0x7fff;
  if (a >= 0x477ff000u) /* 65520 and above round to inf */
    return (uint16_t)(sign | 0x7c00u);
  if (a < 0x38800000u) /* below 2^-14: a subnormal half, in units of 2^-24 */
    return (uint16_t)(sign | round_half_even(f32_from_bits(a) * 0x1p24f));
  return (uint16_t)(sign | drop_bits_rne(a - (112u << 23), 13));
}

float mc_type_bf16_to_f32(uint16_t h)
{
  return f32_from_bits((uint32_t)h << 16);
}

uint16_t mc_type_f32_to_bf16(float f)
{
  uint32_t u = f32_bits(f);

  if ((u & 0x7fffffffu) > 0x7f800000u)
    return 0x7fff;
  return (uint16_t)drop_bits_rne(u, 16);
}

/* fp8 with `mbits` mantissa bits and exponent bias `bias`; max_code is the
 * largest finite magnitude (0x7e for e4m3, 0x7b for e5m2). */
static uint8_t f32_to_fp8(float f, unsigned mbits, unsigned bias, uint32_t max_code)
{
  uint32_t u = f32_bits(f);
  uint32_t sign = (u >> 24) & 0x80u;
  uint32_t a = u & 0x7fffffffu;
  uint32_t min_normal = (127u + 1u - bias) << 23;
  uint32_t q;

  if (a > 0x7f800000u)
    return 0x7f;
  if (a >= 0x7f800000u) {
    q = max_code; /* satfinite: inf saturates too */
  } else if (a < min_normal) {
    /* subnormal: units of 2^(1 - bias - mbits) */
    q = round_half_even(f32_from_bits(a) * f32_from_bits((127u + bias - 1u + mbits) << 23));
  } else {
    q = drop_bits_rne(a - ((127u - bias) << 23), 23 - mbits);
  }
  if (q > max_code)
    q = max_code;
  return (uint8_t)(sign | q);
}

uint8_t mc_type_f32_to_e4m3(float f)
{
  return f32_to_fp8(f, 3, 7, 0x7e);
}

uint8_t mc_type_f32_to_e5m2(float f)
{
  return f32_to_fp8(f, 2, 15, 0x7b);
}

float mc_type_e4m3_to_f32(uint8_t b)
{
  uint32_t sign = ((uint32_t)b & 0x80u) << 24;
  uint32_t e = ((uint32_t)b >> 3) & 0xfu;
  uint32_t m = (uint32_t)b & 0x7u;
  float f;

  if ((b & 0x7fu) == 0x7fu)
    return f32_from_bits(0x7fc00000u); /* e4m3 has no inf: S.1111.111 is NaN */
  if (e == 0) {
    f = (float)m * 0x1p-9f;
    return (sign != 0) ? -f : f;
  }
  return f32_from_bits(sign | ((e + 120u) << 23) | (m << 20));
}

float mc_type_e5m2_to_f32(uint8_t b)
{
  return mc_type_f16_to_f32((uint16_t)((uint16_t)b << 8)); /* e5m2 is a half's top byte */
}
