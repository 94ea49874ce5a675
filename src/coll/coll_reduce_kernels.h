/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reduction kernels, written once with GCC/clang vector extensions and
 * compiled once per instruction set: coll_reduce_isa_<isa>.c defines
 * MC_RK_VB (vector bytes: 16, 32, 64), MC_RK_TABLE (the table's name),
 * MC_RK_ISA (its name string) and, with F16C, MC_RK_F16C (256 or 512), then
 * includes this file, which defines that table. Included without MC_RK_VB
 * (e.g. by the header self-containment check) it declares nothing.
 *
 * Semantics (mirrors NCCL 2.30's src/device/reduce_kernel.h, see
 * coll_reduce.h): float16, bfloat16 and fp8 load into float32 lanes
 * (exact), every operation is one float32 operation rounded back to the type
 * (round to nearest even; for half and bfloat16 float32 holds every exact
 * sum or product well enough that this equals NCCL's native __hadd/__hmul;
 * for fp8 it equals NCCL's half-precision path, see coll_reduce.h), the
 * premulsum product is rounded to the type before the sum, the sumpostdiv
 * sum is rounded before the division. Integers compute in unsigned lanes
 * (wrap-around without undefined behaviour). max/min are IEEE 754-2019
 * maximumNumber/minimumNumber (CUDA's fmaxf/__hmax): a NaN loses to a
 * number, two NaNs give the canonical NaN, +0 > -0. Every computed NaN is
 * the type's canonical NaN (0x7fffffff, 0x7fff..., 0x7fff, 0x7f), as on the
 * GPU; a plain copy (a == NULL, no pre/post) keeps the bits.
 *
 * Every element goes through the same vector code: the tail is copied into
 * a zero-padded vector on the stack, so results never depend on length or
 * alignment. Loads and stores are memcpy of whole vectors (unaligned, no
 * aliasing or alignment UB).
 */
#ifndef MC_COLL_REDUCE_KERNELS_H
#define MC_COLL_REDUCE_KERNELS_H

#ifdef MC_RK_VB

#include "coll/coll_reduce_int.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#if defined(MC_RK_F16C)
#include <immintrin.h>
#endif

#define RK_INLINE static inline __attribute__((always_inline))

typedef float rk_vf __attribute__((vector_size(MC_RK_VB)));
typedef double rk_vd __attribute__((vector_size(MC_RK_VB)));
typedef int8_t rk_vi8 __attribute__((vector_size(MC_RK_VB)));
typedef uint8_t rk_vu8 __attribute__((vector_size(MC_RK_VB)));
typedef int32_t rk_vi32 __attribute__((vector_size(MC_RK_VB)));
typedef uint32_t rk_vu32 __attribute__((vector_size(MC_RK_VB)));
typedef int64_t rk_vi64 __attribute__((vector_size(MC_RK_VB)));
typedef uint64_t rk_vu64 __attribute__((vector_size(MC_RK_VB)));
/* As many 16-bit or 8-bit elements as a vector has float32 lanes. */
typedef uint16_t rk_vu16n __attribute__((vector_size(MC_RK_VB / 2)));
typedef uint8_t rk_vu8n __attribute__((vector_size(MC_RK_VB / 4)));

#define RK_LANES_F (MC_RK_VB / 4)

/* Loop shape (compile-time constants after inlining). */
#define RK_HAS_A 0x1 /* two inputs; without it a copy of b */
#define RK_PRE_A 0x2
#define RK_PRE_B 0x4
#define RK_POST  0x8

#define RK_SPLAT_U32(_x) ((rk_vu32){0} + (uint32_t)(_x))

/* Broadcasts by bits: (rk_vf){0} + f would turn -0 into +0. */
RK_INLINE rk_vf rk_splat_f(float f)
{
  uint32_t u;

  memcpy(&u, &f, sizeof(u));
  return (rk_vf)RK_SPLAT_U32(u);
}

RK_INLINE rk_vd rk_splat_d(double d)
{
  uint64_t u;

  memcpy(&u, &d, sizeof(u));
  return (rk_vd)((rk_vu64){0} + u);
}

RK_INLINE rk_vu32 rk_sel32(rk_vu32 m, rk_vu32 a, rk_vu32 b)
{
  return (m & a) | (~m & b);
}

RK_INLINE rk_vu64 rk_sel64(rk_vu64 m, rk_vu64 a, rk_vu64 b)
{
  return (m & a) | (~m & b);
}

/* ---------- float32 lanes: max/min ---------- */

/*
 * rk_minmax_<s> and rk_op_<s> on float lanes _VF (bits _VU, select _sel,
 * canonical NaN _nan): max/min as maximumNumber/minimumNumber; equal values
 * differ only for +-0, where max takes +0 (and) and min -0 (or).
 */
#define RK_DEFINE_FLOAT_OPS(_s, _VF, _VU, _sel, _nan)                                              \
  RK_INLINE _VF rk_minmax_##_s(_VF x, _VF y, bool is_min)                                          \
  {                                                                                                \
    _VU xi = (_VU)x;                                                                               \
    _VU yi = (_VU)y;                                                                               \
    _VU pick_x = is_min ? (_VU)(x < y) : (_VU)(x > y);                                             \
    _VU x_nan = (_VU)(x != x);                                                                     \
    _VU y_nan = (_VU)(y != y);                                                                     \
    _VU eq = (_VU)(x == y);                                                                        \
    _VU r = _sel(pick_x | y_nan, xi, yi);                                                          \
    r = _sel(eq, is_min ? (xi | yi) : (xi & yi), r);                                               \
    r = _sel(x_nan & y_nan, (_VU){0} + (_nan), r);                                                 \
    return (_VF)r;                                                                                 \
  }                                                                                                \
  RK_INLINE _VF rk_op_##_s(int kind, _VF x, _VF y)                                                 \
  {                                                                                                \
    switch (kind) {                                                                                \
    case MC_RED_PROD:                                                                              \
      return x * y;                                                                                \
    case MC_RED_MAX:                                                                               \
      return rk_minmax_##_s(x, y, false);                                                          \
    case MC_RED_MIN:                                                                               \
      return rk_minmax_##_s(x, y, true);                                                           \
    default:                                                                                       \
      return x + y;                                                                                \
    }                                                                                              \
  }

RK_DEFINE_FLOAT_OPS(f, rk_vf, rk_vu32, rk_sel32, 0x7fffffffu)
RK_DEFINE_FLOAT_OPS(d, rk_vd, rk_vu64, rk_sel64, 0x7fffffffffffffffull)

/* ---------- narrow float codecs on float32 lanes ---------- */

/* half bits (low 16 bits of each lane) -> float32, exact */
RK_INLINE rk_vf rk_f16_dec(rk_vu32 h)
{
  rk_vu32 sign = (h & 0x8000u) << 16;
  rk_vu32 m = h & 0x7fffu;
  /* normal and subnormal alike: the bits as a float scaled by 2^(127-15) */
  rk_vf f = (rk_vf)(m << 13) * 0x1p112f;
  rk_vu32 inf_nan = (rk_vu32)(m >= 0x7c00u);

  return (rk_vf)(rk_sel32(inf_nan, (m << 13) | 0x7f800000u, (rk_vu32)f) | sign);
}

/* float32 -> half bits, nearest even, canonical NaN 0x7fff */
RK_INLINE rk_vu32 rk_f16_enc(rk_vf r)
{
  rk_vu32 u = (rk_vu32)r;
  rk_vu32 sign = (u >> 16) & 0x8000u;
  rk_vu32 a = u & 0x7fffffffu;
  /* below 2^-14: adding 0.5 (ulp 2^-24) lets the FPU round to a subnormal */
  rk_vu32 sub = (rk_vu32)((rk_vf)a + 0.5f) - 0x3f000000u;
  /* normal: rebias by -112 exponents, round off 13 bits, ties to even */
  rk_vu32 nor = (a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
  rk_vu32 o = rk_sel32((rk_vu32)(a < 0x38800000u), sub, nor);

  o = rk_sel32((rk_vu32)(a >= 0x47800000u), RK_SPLAT_U32(0x7c00u), o);
  o |= sign;
  return rk_sel32((rk_vu32)(a > 0x7f800000u), RK_SPLAT_U32(0x7fffu), o);
}

RK_INLINE rk_vf rk_bf16_dec(rk_vu32 h)
{
  return (rk_vf)(h << 16);
}

RK_INLINE rk_vu32 rk_bf16_enc(rk_vf r)
{
  rk_vu32 u = (rk_vu32)r;
  rk_vu32 o = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;

  return rk_sel32((rk_vu32)((u & 0x7fffffffu) > 0x7f800000u), RK_SPLAT_U32(0x7fffu), o);
}

RK_INLINE rk_vf rk_e4m3_dec(rk_vu32 b)
{
  rk_vu32 sign = (b & 0x80u) << 24;
  rk_vu32 m = b & 0x7fu;
  rk_vf f = (rk_vf)(m << 20) * 0x1p120f;

  return (rk_vf)(rk_sel32((rk_vu32)(m == 0x7fu), RK_SPLAT_U32(0x7fc00000u), (rk_vu32)f) | sign);
}

/* float32 -> fp8 code, nearest even, satfinite, NaN 0x7f. min_normal_bits:
 * the float bits of the smallest normal; rebias: exponent difference << 23;
 * magic: a float whose ulp is the fp8 subnormal step. */
RK_INLINE rk_vu32 rk_fp8_enc(rk_vf r, unsigned mbits, uint32_t min_normal_bits, uint32_t rebias,
                             float magic, uint32_t max_code)
{
  rk_vu32 u = (rk_vu32)r;
  rk_vu32 sign = (u >> 24) & 0x80u;
  rk_vu32 a = u & 0x7fffffffu;
  unsigned drop = 23 - mbits;
  rk_vu32 sub = (rk_vu32)((rk_vf)a + magic) - (rk_vu32)((rk_vf){0} + magic);
  rk_vu32 nor = (a - rebias + ((1u << (drop - 1)) - 1u) + ((a >> drop) & 1u)) >> drop;
  rk_vu32 q = rk_sel32((rk_vu32)(a < min_normal_bits), sub, nor);

  q = rk_sel32((rk_vu32)(q > max_code), RK_SPLAT_U32(max_code), q);
  return rk_sel32((rk_vu32)(a > 0x7f800000u), RK_SPLAT_U32(0x7fu), sign | q);
}

RK_INLINE rk_vu32 rk_e4m3_enc(rk_vf r)
{
  return rk_fp8_enc(r, 3, 121u << 23, 120u << 23, 0x1p14f, 0x7e);
}

RK_INLINE rk_vu32 rk_e5m2_enc(rk_vf r)
{
  return rk_fp8_enc(r, 2, 113u << 23, 112u << 23, 0x1p7f, 0x7b);
}

/* e5m2 is the upper byte of a half */
RK_INLINE rk_vf rk_e5m2_dec(rk_vu32 b)
{
  return rk_f16_dec(b << 8);
}

/* ---------- loads and stores of float-domain formats ---------- */

/* 16-bit or 8-bit elements (_VN: as many as rk_vf has lanes) to and from
 * the low bits of 32-bit lanes. */
#define RK_DEFINE_NARROW(_bits, _VN)                                                               \
  RK_INLINE rk_vu32 rk_ld_w##_bits(const void *p)                                                  \
  {                                                                                                \
    _VN v;                                                                                         \
    memcpy(&v, p, sizeof(v));                                                                      \
    return __builtin_convertvector(v, rk_vu32);                                                    \
  }                                                                                                \
  RK_INLINE void rk_st_w##_bits(void *p, rk_vu32 v)                                                \
  {                                                                                                \
    _VN n = __builtin_convertvector(v, _VN);                                                       \
    memcpy(p, &n, sizeof(n));                                                                      \
  }

RK_DEFINE_NARROW(16, rk_vu16n)
RK_DEFINE_NARROW(8, rk_vu8n)

RK_INLINE rk_vf rk_ld_f32(const void *p)
{
  rk_vf v;

  memcpy(&v, p, sizeof(v));
  return v;
}

/* A computed NaN is the canonical one, as the GPU writes it (and unlike x86,
 * whose payload depends on operand order, which the compiler may swap). */
RK_INLINE void rk_st_f32(void *p, rk_vf v)
{
  v = (rk_vf)rk_sel32((rk_vu32)(v != v), RK_SPLAT_U32(0x7fffffffu), (rk_vu32)v);
  memcpy(p, &v, sizeof(v));
}

RK_INLINE rk_vf rk_rnd_f32(rk_vf v)
{
  return v;
}

/* Loads, stores and rounding of a narrow float format _fmt held in _bits-bit
 * elements, through its codec rk_<_fmt>_dec / rk_<_fmt>_enc. */
#define RK_DEFINE_CODEC_IO(_fmt, _bits)                                                            \
  RK_INLINE rk_vf rk_ld_##_fmt(const void *p)                                                      \
  {                                                                                                \
    return rk_##_fmt##_dec(rk_ld_w##_bits(p));                                                     \
  }                                                                                                \
  RK_INLINE void rk_st_##_fmt(void *p, rk_vf r)                                                    \
  {                                                                                                \
    rk_st_w##_bits(p, rk_##_fmt##_enc(r));                                                         \
  }                                                                                                \
  RK_INLINE rk_vf rk_rnd_##_fmt(rk_vf r)                                                           \
  {                                                                                                \
    return rk_##_fmt##_dec(rk_##_fmt##_enc(r));                                                    \
  }

#if defined(MC_RK_F16C)
/* F16C's conversions at the vector width: RK_PH, the half vector (as many
 * halves as rk_vf has lanes), RK_PS, the float vector. */
#if MC_RK_F16C == 512
#define RK_PH            __m256i
#define RK_PS            __m512
#define RK_CVTPH_PS(_h)  _mm512_cvtph_ps(_h)
#define RK_CVTPS_PH(_ps) _mm512_cvtps_ph((_ps), _MM_FROUND_TO_NEAREST_INT)
#else
#define RK_PH            __m128i
#define RK_PS            __m256
#define RK_CVTPH_PS(_h)  _mm256_cvtph_ps(_h)
#define RK_CVTPS_PH(_ps) _mm256_cvtps_ph((_ps), _MM_FROUND_TO_NEAREST_INT)
#endif

RK_INLINE rk_vf rk_ld_f16(const void *p)
{
  RK_PH h;

  memcpy(&h, p, sizeof(h));
  return (rk_vf)RK_CVTPH_PS(h);
}

RK_INLINE void rk_st_f16(void *p, rk_vf r)
{
  /* F16C keeps NaN payloads; NCCL writes the canonical 0x7fff */
  rk_vf canon = (rk_vf)RK_SPLAT_U32(0x7fffe000u);
  rk_vf c = (rk_vf)rk_sel32((rk_vu32)(r != r), (rk_vu32)canon, (rk_vu32)r);
  RK_PH h = RK_CVTPS_PH((RK_PS)c);

  memcpy(p, &h, sizeof(h));
}

RK_INLINE rk_vf rk_rnd_f16(rk_vf r)
{
  return (rk_vf)RK_CVTPH_PS(RK_CVTPS_PH((RK_PS)r));
}
#else
RK_DEFINE_CODEC_IO(f16, 16)
#endif

RK_DEFINE_CODEC_IO(bf16, 16)
RK_DEFINE_CODEC_IO(e4m3, 8)
RK_DEFINE_CODEC_IO(e5m2, 8)

/* ---------- the loop ---------- */

/*
 * Defines _name(kind, mode, dst, a, b, n, sv, div): n elements of _es bytes,
 * _lanes per vector of type _VT; _ld/_st load and store one vector, _pre
 * applies the premulsum scalar vector sv, _op the base op, _post divides by
 * div. Four vectors per iteration, then single vectors, then the tail
 * through a zero-padded stack vector.
 */
#define RK_DEFINE_LOOP(_name, _VT, _es, _lanes, _ld, _st, _pre, _op, _post)                        \
  RK_INLINE void _name##_vec(int kind, int mode, char *d, const char *pa, const char *pb, _VT sv,  \
                             int64_t div)                                                          \
  {                                                                                                \
    _VT r = _ld(pb);                                                                               \
    if ((mode & RK_PRE_B) != 0)                                                                    \
      r = _pre(r, sv);                                                                             \
    if ((mode & RK_HAS_A) != 0) {                                                                  \
      _VT x = _ld(pa);                                                                             \
      if ((mode & RK_PRE_A) != 0)                                                                  \
        x = _pre(x, sv);                                                                           \
      r = _op(kind, x, r);                                                                         \
    }                                                                                              \
    if ((mode & RK_POST) != 0)                                                                     \
      r = _post(r, div);                                                                           \
    _st(d, r);                                                                                     \
  }                                                                                                \
  RK_INLINE void _name(int kind, int mode, void *dst, const void *a, const void *b, size_t n,      \
                       _VT sv, int64_t div)                                                        \
  {                                                                                                \
    const size_t vl = (_lanes);                                                                    \
    char *d = (char *)dst;                                                                         \
    const char *pa = (const char *)a;                                                              \
    const char *pb = (const char *)b;                                                              \
    bool has_a = (mode & RK_HAS_A) != 0;                                                           \
    size_t i = 0;                                                                                  \
                                                                                                   \
    for (; i + 4 * vl <= n; i += 4 * vl) {                                                         \
      for (size_t u = 0; u < 4; u++) {                                                             \
        size_t off = (i + u * vl) * (_es);                                                         \
        _name##_vec(kind, mode, d + off, has_a ? pa + off : NULL, pb + off, sv, div);              \
      }                                                                                            \
    }                                                                                              \
    for (; i + vl <= n; i += vl) {                                                                 \
      size_t off = i * (_es);                                                                      \
      _name##_vec(kind, mode, d + off, has_a ? pa + off : NULL, pb + off, sv, div);                \
    }                                                                                              \
    if (i < n) {                                                                                   \
      unsigned char ta[MC_RK_VB] = {0};                                                            \
      unsigned char tb[MC_RK_VB] = {0};                                                            \
      unsigned char td[MC_RK_VB];                                                                  \
      size_t off = i * (_es);                                                                      \
      size_t rem = (n - i) * (_es);                                                                \
      memcpy(tb, pb + off, rem);                                                                   \
      if (has_a)                                                                                   \
        memcpy(ta, pa + off, rem);                                                                 \
      _name##_vec(kind, mode, (char *)td, (const char *)ta, (const char *)tb, sv, div);            \
      memcpy(d + off, td, rem);                                                                    \
    }                                                                                              \
  }

/*
 * Defines the kernel of one type from its loop: picks the loop shape from
 * the op and the (normalised) flags, so every loop body is specialised.
 */
#define RK_DEFINE_KERNEL(_kname, _loop, _VT, _es, _sv_expr)                                        \
  static void _kname(const struct mc_redop *op, void *dst, const void *a, const void *b, size_t n, \
                     unsigned flags)                                                               \
  {                                                                                                \
    _VT sv = _sv_expr;                                                                             \
    int64_t div = (op->n_ranks > 0) ? op->n_ranks : 1;                                             \
                                                                                                   \
    if (a == NULL) {                                                                               \
      switch (flags & (MC_REDUCE_PRE_B | MC_REDUCE_POST)) {                                        \
      case MC_REDUCE_PRE_B:                                                                        \
        _loop(MC_RED_SUM, RK_PRE_B, dst, a, b, n, sv, div);                                        \
        break;                                                                                     \
      case MC_REDUCE_POST:                                                                         \
        _loop(MC_RED_SUM, RK_POST, dst, a, b, n, sv, div);                                         \
        break;                                                                                     \
      case MC_REDUCE_PRE_B | MC_REDUCE_POST:                                                       \
        _loop(MC_RED_SUM, RK_PRE_B | RK_POST, dst, a, b, n, sv, div);                              \
        break;                                                                                     \
      default:                                                                                     \
        if (dst != b)                                                                              \
          memcpy(dst, b, n *(_es));                                                                \
        break;                                                                                     \
      }                                                                                            \
      return;                                                                                      \
    }                                                                                              \
    switch ((int)op->kind) {                                                                       \
    case MC_RED_PROD:                                                                              \
      _loop(MC_RED_PROD, RK_HAS_A, dst, a, b, n, sv, div);                                         \
      return;                                                                                      \
    case MC_RED_MAX:                                                                               \
      _loop(MC_RED_MAX, RK_HAS_A, dst, a, b, n, sv, div);                                          \
      return;                                                                                      \
    case MC_RED_MIN:                                                                               \
      _loop(MC_RED_MIN, RK_HAS_A, dst, a, b, n, sv, div);                                          \
      return;                                                                                      \
    default:                                                                                       \
      break;                                                                                       \
    }                                                                                              \
    switch (flags) {                                                                               \
    case MC_REDUCE_PRE_A:                                                                          \
      _loop(MC_RED_SUM, RK_HAS_A | RK_PRE_A, dst, a, b, n, sv, div);                               \
      break;                                                                                       \
    case MC_REDUCE_PRE_B:                                                                          \
      _loop(MC_RED_SUM, RK_HAS_A | RK_PRE_B, dst, a, b, n, sv, div);                               \
      break;                                                                                       \
    case MC_REDUCE_PRE_A | MC_REDUCE_PRE_B:                                                        \
      _loop(MC_RED_SUM, RK_HAS_A | RK_PRE_A | RK_PRE_B, dst, a, b, n, sv, div);                    \
      break;                                                                                       \
    case MC_REDUCE_POST:                                                                           \
      _loop(MC_RED_SUM, RK_HAS_A | RK_POST, dst, a, b, n, sv, div);                                \
      break;                                                                                       \
    default:                                                                                       \
      _loop(MC_RED_SUM, RK_HAS_A, dst, a, b, n, sv, div);                                          \
      break;                                                                                       \
    }                                                                                              \
  }

/* ---------- float-domain types ---------- */

#define RK_DEFINE_FLOAT_TYPE(_fmt, _es)                                                            \
  RK_INLINE rk_vf rk_pre_##_fmt(rk_vf x, rk_vf sv)                                                 \
  {                                                                                                \
    return rk_rnd_##_fmt(x * sv);                                                                  \
  }                                                                                                \
  RK_INLINE rk_vf rk_post_##_fmt(rk_vf x, int64_t div)                                             \
  {                                                                                                \
    return rk_rnd_##_fmt(x) / (float)div;                                                          \
  }                                                                                                \
  RK_DEFINE_LOOP(rk_loop_##_fmt, rk_vf, _es, RK_LANES_F, rk_ld_##_fmt, rk_st_##_fmt,               \
                 rk_pre_##_fmt, rk_op_f, rk_post_##_fmt)

RK_DEFINE_FLOAT_TYPE(f32, 4)
RK_DEFINE_FLOAT_TYPE(f16, 2)
RK_DEFINE_FLOAT_TYPE(bf16, 2)
RK_DEFINE_FLOAT_TYPE(e4m3, 1)
RK_DEFINE_FLOAT_TYPE(e5m2, 1)

static float rk_scalar_f32(uint64_t s)
{
  uint32_t u = (uint32_t)s;
  float f;

  memcpy(&f, &u, sizeof(f));
  return f;
}

RK_DEFINE_KERNEL(rk_kernel_f32, rk_loop_f32, rk_vf, 4, rk_splat_f(rk_scalar_f32(op->scalar)))
RK_DEFINE_KERNEL(rk_kernel_f16, rk_loop_f16, rk_vf, 2,
                 rk_splat_f(mc_type_f16_to_f32((uint16_t)op->scalar)))
RK_DEFINE_KERNEL(rk_kernel_bf16, rk_loop_bf16, rk_vf, 2,
                 rk_splat_f(mc_type_bf16_to_f32((uint16_t)op->scalar)))
RK_DEFINE_KERNEL(rk_kernel_e4m3, rk_loop_e4m3, rk_vf, 1,
                 rk_splat_f(mc_type_e4m3_to_f32((uint8_t)op->scalar)))
RK_DEFINE_KERNEL(rk_kernel_e5m2, rk_loop_e5m2, rk_vf, 1,
                 rk_splat_f(mc_type_e5m2_to_f32((uint8_t)op->scalar)))

/* ---------- float64 ---------- */

RK_INLINE rk_vd rk_ld_f64(const void *p)
{
  rk_vd v;

  memcpy(&v, p, sizeof(v));
  return v;
}

RK_INLINE void rk_st_f64(void *p, rk_vd v)
{
  v = (rk_vd)rk_sel64((rk_vu64)(v != v), (rk_vu64){0} + 0x7fffffffffffffffull, (rk_vu64)v);
  memcpy(p, &v, sizeof(v));
}

RK_INLINE rk_vd rk_pre_f64(rk_vd x, rk_vd sv)
{
  return x * sv;
}

RK_INLINE rk_vd rk_post_f64(rk_vd x, int64_t div)
{
  return x / (double)div;
}

static double rk_scalar_f64(uint64_t s)
{
  double d;

  memcpy(&d, &s, sizeof(d));
  return d;
}

RK_DEFINE_LOOP(rk_loop_f64, rk_vd, 8, MC_RK_VB / 8, rk_ld_f64, rk_st_f64, rk_pre_f64, rk_op_d,
               rk_post_f64)
RK_DEFINE_KERNEL(rk_kernel_f64, rk_loop_f64, rk_vd, 8, rk_splat_d(rk_scalar_f64(op->scalar)))

/* ---------- integers: unsigned lanes, signed compares and division ---------- */

#define RK_DEFINE_INT_TYPE(_t, _T, _W, _UT, _VS, _VU, _es)                                         \
  RK_INLINE _VU rk_ld_##_t(const void *p)                                                          \
  {                                                                                                \
    _VU v;                                                                                         \
    memcpy(&v, p, sizeof(v));                                                                      \
    return v;                                                                                      \
  }                                                                                                \
  RK_INLINE void rk_st_##_t(void *p, _VU v)                                                        \
  {                                                                                                \
    memcpy(p, &v, sizeof(v));                                                                      \
  }                                                                                                \
  RK_INLINE _VU rk_pre_##_t(_VU x, _VU sv)                                                         \
  {                                                                                                \
    return x * sv;                                                                                 \
  }                                                                                                \
  RK_INLINE _VU rk_op_##_t(int kind, _VU x, _VU y)                                                 \
  {                                                                                                \
    _VU m;                                                                                         \
    switch (kind) {                                                                                \
    case MC_RED_PROD:                                                                              \
      return x * y;                                                                                \
    case MC_RED_MAX:                                                                               \
      m = (_VU)((_VS)x > (_VS)y);                                                                  \
      return (m & x) | (~m & y);                                                                   \
    case MC_RED_MIN:                                                                               \
      m = (_VU)((_VS)x < (_VS)y);                                                                  \
      return (m & x) | (~m & y);                                                                   \
    default:                                                                                       \
      return x + y;                                                                                \
    }                                                                                              \
  }                                                                                                \
  /* integer avg: truncating division (C's), once, on the final sum */                             \
  RK_INLINE _VU rk_post_##_t(_VU x, int64_t div)                                                   \
  {                                                                                                \
    _T lane[sizeof(_VU) / (_es)];                                                                  \
    memcpy(lane, &x, sizeof(lane));                                                                \
    for (size_t k = 0; k < sizeof(_VU) / (_es); k++)                                               \
      lane[k] = (_T)((_W)lane[k] / (_W)div);                                                       \
    memcpy(&x, lane, sizeof(x));                                                                   \
    return x;                                                                                      \
  }                                                                                                \
  RK_DEFINE_LOOP(rk_loop_##_t, _VU, _es, MC_RK_VB / (_es), rk_ld_##_t, rk_st_##_t, rk_pre_##_t,    \
                 rk_op_##_t, rk_post_##_t)                                                         \
  RK_DEFINE_KERNEL(rk_kernel_##_t, rk_loop_##_t, _VU, _es, (_VU){0} + (_UT)op->scalar)

/* _W: the type the division happens in (the divisor, n_ranks, may not fit
 * the element type: int8 avg over 200 ranks) */
RK_DEFINE_INT_TYPE(i32, int32_t, int64_t, uint32_t, rk_vi32, rk_vu32, 4)
RK_DEFINE_INT_TYPE(u32, uint32_t, int64_t, uint32_t, rk_vu32, rk_vu32, 4)
RK_DEFINE_INT_TYPE(i64, int64_t, int64_t, uint64_t, rk_vi64, rk_vu64, 8)
RK_DEFINE_INT_TYPE(u64, uint64_t, uint64_t, uint64_t, rk_vu64, rk_vu64, 8)
RK_DEFINE_INT_TYPE(i8, int8_t, int64_t, uint8_t, rk_vi8, rk_vu8, 1)
RK_DEFINE_INT_TYPE(u8, uint8_t, int64_t, uint8_t, rk_vu8, rk_vu8, 1)

const struct mc_reduce_kernels MC_RK_TABLE = {
    .isa = MC_RK_ISA,
    .fn =
        {
            [ncclInt8] = rk_kernel_i8,
            [ncclUint8] = rk_kernel_u8,
            [ncclInt32] = rk_kernel_i32,
            [ncclUint32] = rk_kernel_u32,
            [ncclInt64] = rk_kernel_i64,
            [ncclUint64] = rk_kernel_u64,
            [ncclFloat16] = rk_kernel_f16,
            [ncclFloat32] = rk_kernel_f32,
            [ncclFloat64] = rk_kernel_f64,
            [ncclBfloat16] = rk_kernel_bf16,
            [ncclFloat8e4m3] = rk_kernel_e4m3,
            [ncclFloat8e5m2] = rk_kernel_e5m2,
        },
};

#endif /* MC_RK_VB */

#endif /* MC_COLL_REDUCE_KERNELS_H */
