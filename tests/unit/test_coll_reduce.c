/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reduction kernels (src/coll/coll_reduce*.c) against a straightforward
 * scalar reference written here: every type x op x flag shape, odd lengths
 * and pointers one element off alignment (every vector tail), in place,
 * copies with pre/post, n-input chains, integer wrap-around and avg
 * truncation, premulsum scalars of every type, the narrow-float rounding
 * corner cases bit for bit, and every instruction set this CPU has giving
 * identical bytes.
 *
 * The narrow-float reference does not share code or method with the
 * library: it rounds a double to the nearest entry of a table of every
 * finite value of the type (ties to the even code), and rounds fp8 results
 * through half first, literally as NCCL's sm_90 code (__hadd, then
 * __nv_cvt_halfraw_to_fp8 satfinite).
 */
#include "coll/coll_reduce.h"
#include "coll/coll_reduce_int.h"

#include "mc_test.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#define MAX_ELEMS 4200

static const char *const all_isas[] = {"avx512", "avx2", "sse2", "neon", "generic"};
#define N_ISAS ((int)(sizeof(all_isas) / sizeof(all_isas[0])))

/* ---------- small helpers ---------- */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd64(void)
{
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

static double pow2(int k)
{
  double v = 1.0;

  for (; k > 0; k--)
    v *= 2.0;
  for (; k < 0; k++)
    v *= 0.5;
  return v;
}

static float f32_of(uint32_t u)
{
  float f;

  memcpy(&f, &u, sizeof(f));
  return f;
}

static uint32_t bits_f32(float f)
{
  uint32_t u;

  memcpy(&u, &f, sizeof(u));
  return u;
}

static double f64_of(uint64_t u)
{
  double d;

  memcpy(&d, &u, sizeof(d));
  return d;
}

static uint64_t bits_f64(double d)
{
  uint64_t u;

  memcpy(&u, &d, sizeof(u));
  return u;
}

static bool is_int(ncclDataType_t t)
{
  return (t <= ncclUint64);
}

static bool is_signed_int(ncclDataType_t t)
{
  return (t == ncclInt8) || (t == ncclInt32) || (t == ncclInt64);
}

/* ---------- narrow float reference: tables of every finite value ---------- */

struct fmt {
  ncclDataType_t type;
  int n_codes;     /* finite non-negative codes 0 .. n_codes-1 */
  uint32_t sign;   /* sign bit */
  uint32_t nan;    /* canonical NaN */
  bool saturates;  /* fp8 satfinite; otherwise overflow gives inf = code n_codes */
  double next_inf; /* IEEE types: the value the inf code stands in for when rounding */
  double *val;     /* val[c]: the value of code c, 0 <= c <= n_codes */
  double (*val_of)(uint32_t c);
};

static double half_val(uint32_t c)
{
  uint32_t e = (c >> 10) & 0x1f, m = c & 0x3ff;

  return (e == 0) ? m * pow2(-24) : (1024 + m) * pow2((int)e - 25);
}

static double bf16_val(uint32_t c)
{
  return (double)f32_of(c << 16);
}

static double e4m3_val(uint32_t c)
{
  uint32_t e = (c >> 3) & 0xf, m = c & 7;

  return (e == 0) ? m * pow2(-9) : (8 + m) * pow2((int)e - 10);
}

static double e5m2_val(uint32_t c)
{
  return half_val(c << 8);
}

static double val_half[0x7c01], val_bf16[0x7f81], val_e4m3[0x80], val_e5m2[0x7d];

static struct fmt fmt_half = {ncclFloat16, 0x7c00,  0x8000,   0x7fff,
                              false,       65536.0, val_half, half_val};
static struct fmt fmt_bf16 = {ncclBfloat16, 0x7f80, 0x8000, 0x7fff, false, 0, val_bf16, bf16_val};
static struct fmt fmt_e4m3 = {ncclFloat8e4m3, 0x7f, 0x80, 0x7f, true, 0, val_e4m3, e4m3_val};
static struct fmt fmt_e5m2 = {ncclFloat8e5m2, 0x7c, 0x80, 0x7f, true, 0, val_e5m2, e5m2_val};

/* Fills the value table at the first use. */
static struct fmt *fmt_ready(struct fmt *f)
{
  if (f->val[1] == 0) {
    for (int c = 0; c < f->n_codes; c++)
      f->val[c] = f->val_of((uint32_t)c);
    f->val[f->n_codes] = (f->type == ncclBfloat16) ? pow2(128) : f->next_inf;
  }
  return f;
}

static struct fmt *fmt_of(ncclDataType_t t)
{
  switch (t) {
  case ncclFloat16:
    return fmt_ready(&fmt_half);
  case ncclBfloat16:
    return fmt_ready(&fmt_bf16);
  case ncclFloat8e4m3:
    return fmt_ready(&fmt_e4m3);
  default:
    return fmt_ready(&fmt_e5m2);
  }
}

/* The nearest code to v, ties to the even code. */
static uint32_t round_direct(const struct fmt *f, double v)
{
  bool neg = (bits_f64(v) >> 63) != 0;
  double a = neg ? -v : v;
  int max = f->n_codes - 1;
  int lo = 0, hi;
  uint32_t c;

  if (v != v)
    return f->nan;
  if (f->saturates && (a >= f->val[max])) {
    c = (uint32_t)max;
  } else if (!f->saturates && (a >= f->val[max + 1])) {
    c = (uint32_t)max + 1; /* inf */
  } else {
    hi = f->saturates ? max : max + 1;
    while (hi - lo > 1) { /* val[lo] <= a < val[hi] */
      int mid = (lo + hi) / 2;
      if (f->val[mid] <= a)
        lo = mid;
      else
        hi = mid;
    }
    if (f->val[lo] == a)
      c = (uint32_t)lo;
    else if (a - f->val[lo] < f->val[hi] - a)
      c = (uint32_t)lo;
    else if (a - f->val[lo] > f->val[hi] - a)
      c = (uint32_t)hi;
    else
      c = ((lo & 1) == 0) ? (uint32_t)lo : (uint32_t)hi;
  }
  return neg ? (c | f->sign) : c;
}

static double decode(ncclDataType_t t, uint32_t c)
{
  const struct fmt *f = fmt_of(t);
  uint32_t mag = c & ~f->sign;
  double v;

  if (t == ncclFloat16 || t == ncclFloat8e5m2) {
    uint32_t h = (t == ncclFloat16) ? c : (c << 8);
    if ((h & 0x7c00) == 0x7c00)
      return ((h & 0x3ff) != 0) ? f64_of(0x7ff8000000000000ull)
                                : (((h & 0x8000) != 0) ? -INFINITY : INFINITY);
  }
  if ((t == ncclBfloat16) && ((c & 0x7f80) == 0x7f80))
    return (double)f32_of(c << 16);
  if ((t == ncclFloat8e4m3) && (mag == 0x7f))
    return f64_of(0x7ff8000000000000ull);
  v = f->val[mag];
  return ((c & f->sign) != 0) ? -v : v;
}

/* NCCL's rounding of an exact result to type: fp8 through half first. */
static uint32_t round_nccl(ncclDataType_t t, double v)
{
  if ((t == ncclFloat8e4m3) || (t == ncclFloat8e5m2))
    v = decode(ncclFloat16, round_direct(fmt_of(ncclFloat16), v));
  return round_direct(fmt_of(t), v);
}

/* ---------- the scalar reference of one element ---------- */

struct shape {
  bool has_a, pre_a, pre_b, post;
};

static uint64_t width_mask(size_t es)
{
  return (es == 8) ? ~0ull : ((1ull << (8 * es)) - 1);
}

static int64_t sext(uint64_t x, size_t es)
{
  if (es == 8)
    return (int64_t)x;
  if ((x >> (8 * es - 1)) & 1)
    return (int64_t)(x | ~width_mask(es));
  return (int64_t)x;
}

static int base_kind(enum mc_red_kind k)
{
  return ((k == MC_RED_PREMULSUM) || (k == MC_RED_SUMPOSTDIV)) ? MC_RED_SUM : (int)k;
}

/* maximumNumber / minimumNumber on doubles; returns which input wins:
 * 0 = x, 1 = y, 2 = canonical NaN */
static int pick_minmax(double x, double y, bool is_min)
{
  bool xn = (x != x), yn = (y != y);

  if (xn && yn)
    return 2;
  if (xn)
    return 1;
  if (yn)
    return 0;
  if (x == y) { /* +-0: max prefers the +0, min the -0 */
    bool xneg = (bits_f64(x) >> 63) != 0;
    return (xneg == is_min) ? 0 : 1;
  }
  if (is_min)
    return (x < y) ? 0 : 1;
  return (x > y) ? 0 : 1;
}

static uint64_t ref_int(const struct mc_redop *op, struct shape s, uint64_t x, uint64_t y)
{
  size_t es = mc_type_size(op->type);
  uint64_t m = width_mask(es);
  bool sgn = is_signed_int(op->type);
  uint64_t r;

  if (s.pre_b)
    y = (y * op->scalar) & m;
  r = y;
  if (s.has_a) {
    if (s.pre_a)
      x = (x * op->scalar) & m;
    switch (base_kind(op->kind)) {
    case MC_RED_PROD:
      r = (x * y) & m;
      break;
    case MC_RED_MAX:
      r = (sgn ? (sext(x, es) > sext(y, es)) : (x > y)) ? x : y;
      break;
    case MC_RED_MIN:
      r = (sgn ? (sext(x, es) < sext(y, es)) : (x < y)) ? x : y;
      break;
    default:
      r = (x + y) & m;
      break;
    }
  }
  if (s.post)
    r = sgn ? ((uint64_t)(sext(r, es) / op->n_ranks) & m) : (r / (uint64_t)op->n_ranks);
  return r;
}

static uint64_t ref_f32(const struct mc_redop *op, struct shape s, uint64_t xb, uint64_t yb)
{
  float x = f32_of((uint32_t)xb), y = f32_of((uint32_t)yb), sc = f32_of((uint32_t)op->scalar);
  float r;

  if (s.pre_b)
    y = y * sc;
  r = y;
  if (s.has_a) {
    if (s.pre_a)
      x = x * sc;
    switch (base_kind(op->kind)) {
    case MC_RED_PROD:
      r = x * y;
      break;
    case MC_RED_MAX:
    case MC_RED_MIN: {
      int p = pick_minmax(x, y, op->kind == MC_RED_MIN);
      return (p == 2) ? 0x7fffffffu : bits_f32((p == 0) ? x : y);
    }
    default:
      r = x + y;
      break;
    }
  }
  if (s.post)
    r = r / (float)op->n_ranks;
  if (!s.has_a && !s.pre_b && !s.post)
    return yb; /* a plain copy keeps the bits */
  return (r != r) ? 0x7fffffffu : bits_f32(r);
}

static uint64_t ref_f64(const struct mc_redop *op, struct shape s, uint64_t xb, uint64_t yb)
{
  double x = f64_of(xb), y = f64_of(yb), sc = f64_of(op->scalar);
  double r;

  if (s.pre_b)
    y = y * sc;
  r = y;
  if (s.has_a) {
    if (s.pre_a)
      x = x * sc;
    switch (base_kind(op->kind)) {
    case MC_RED_PROD:
      r = x * y;
      break;
    case MC_RED_MAX:
    case MC_RED_MIN: {
      int p = pick_minmax(x, y, op->kind == MC_RED_MIN);
      return (p == 2) ? 0x7fffffffffffffffull : bits_f64((p == 0) ? x : y);
    }
    default:
      r = x + y;
      break;
    }
  }
  if (s.post)
    r = r / (double)op->n_ranks;
  if (!s.has_a && !s.pre_b && !s.post)
    return yb;
  return (r != r) ? 0x7fffffffffffffffull : bits_f64(r);
}

/* Narrow floats: exact values in double (a sum or product of two narrow
 * values is exact, or rounds harmlessly: 53 >= 2p+2), one NCCL rounding per
 * operation. */
static uint64_t ref_narrow(const struct mc_redop *op, struct shape s, uint64_t xb, uint64_t yb)
{
  ncclDataType_t t = op->type;
  double x = decode(t, (uint32_t)xb), y = decode(t, (uint32_t)yb);
  double sc = decode(t, (uint32_t)op->scalar);
  uint32_t r;

  if (!s.has_a && !s.pre_b && !s.post)
    return yb; /* a plain copy keeps the bits (an e5m2 inf stays inf) */
  if (s.pre_b)
    y = decode(t, round_nccl(t, y * sc));
  r = round_nccl(t, y);
  if (s.has_a) {
    if (s.pre_a)
      x = decode(t, round_nccl(t, x * sc));
    switch (base_kind(op->kind)) {
    case MC_RED_PROD:
      r = round_nccl(t, x * y);
      break;
    case MC_RED_MAX:
    case MC_RED_MIN: {
      int p = pick_minmax(x, y, op->kind == MC_RED_MIN);
      r = round_nccl(t, (p == 2) ? x + y : ((p == 0) ? x : y));
      break;
    }
    default:
      r = round_nccl(t, x + y);
      break;
    }
  }
  if (s.post) /* not an NCCL path (float avg is premulsum): one direct rounding */
    r = round_direct(fmt_of(t), decode(t, r) / (double)op->n_ranks);
  return r;
}

static uint64_t ref_elem(const struct mc_redop *op, struct shape s, uint64_t x, uint64_t y)
{
  if (is_int(op->type))
    return ref_int(op, s, x, y);
  if (op->type == ncclFloat32)
    return ref_f32(op, s, x, y);
  if (op->type == ncclFloat64)
    return ref_f64(op, s, x, y);
  return ref_narrow(op, s, x, y);
}

static uint64_t get_elem(const void *buf, size_t i, size_t es)
{
  uint64_t v = 0;
  uint8_t b8;
  uint16_t b16;
  uint32_t b32;

  switch (es) {
  case 1:
    memcpy(&b8, (const char *)buf + i, 1);
    v = b8;
    break;
  case 2:
    memcpy(&b16, (const char *)buf + 2 * i, 2);
    v = b16;
    break;
  case 4:
    memcpy(&b32, (const char *)buf + 4 * i, 4);
    v = b32;
    break;
  default:
    memcpy(&v, (const char *)buf + 8 * i, 8);
    break;
  }
  return v;
}

static void put_elem(void *buf, size_t i, size_t es, uint64_t v)
{
  uint8_t b8 = (uint8_t)v;
  uint16_t b16 = (uint16_t)v;
  uint32_t b32 = (uint32_t)v;

  switch (es) {
  case 1:
    memcpy((char *)buf + i, &b8, 1);
    break;
  case 2:
    memcpy((char *)buf + 2 * i, &b16, 2);
    break;
  case 4:
    memcpy((char *)buf + 4 * i, &b32, 4);
    break;
  default:
    memcpy((char *)buf + 8 * i, &v, 8);
    break;
  }
}

/* Bit for bit, every type (computed NaNs are canonical). */
static bool same_elem(uint64_t got, uint64_t want)
{
  return got == want;
}

/* Interesting values: zeros, ones, extremes, infinities, NaNs, subnormals,
 * and values next to rounding boundaries, plus random bits. */
static uint64_t pick_value(ncclDataType_t t)
{
  static const uint32_t f32_special[] = {0x00000000u, 0x80000000u, 0x3f800000u, 0xbf800000u,
                                         0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u,
                                         0x00000001u, 0x807fffffu, 0x7f7fffffu, 0xff7fffffu,
                                         0x40000000u, 0x3f000000u, 0x33800000u, 0x4b000000u};
  static const uint64_t f64_special[] = {0,
                                         0x8000000000000000ull,
                                         0x3ff0000000000000ull,
                                         0x7ff0000000000000ull,
                                         0xfff0000000000000ull,
                                         0x7ff8000000000000ull,
                                         0x0000000000000001ull,
                                         0x7fefffffffffffffull,
                                         0x3ca0000000000000ull};
  uint64_t r = rnd64();
  size_t es = mc_type_size(t);

  if (t == ncclFloat32) {
    if ((r & 3) == 0)
      return f32_special[(r >> 8) % (sizeof(f32_special) / sizeof(f32_special[0]))];
    if ((r & 3) == 1) /* moderate exponent so sums interact */
      return ((r >> 8) & 0x807fffffu) | ((uint32_t)(120 + ((r >> 40) % 16)) << 23);
    return (uint32_t)(r >> 16);
  }
  if (t == ncclFloat64) {
    if ((r & 3) == 0)
      return f64_special[(r >> 8) % (sizeof(f64_special) / sizeof(f64_special[0]))];
    if ((r & 3) == 1)
      return (rnd64() & 0x800fffffffffffffull) | ((uint64_t)(1016 + ((r >> 40) % 16)) << 52);
    return rnd64();
  }
  if (is_int(t) && ((r & 7) == 0)) { /* extremes for wrap-around */
    uint64_t m = width_mask(es);
    uint64_t ext[] = {0, 1, m, m >> 1, (m >> 1) + 1, 2, m - 1};
    return ext[(r >> 8) % 7];
  }
  if (t == ncclFloat16 && ((r & 3) == 0)) /* normal range: sums and products land in range */
    return ((r >> 8) & 0x83ffu) | ((uint32_t)(10 + ((r >> 32) % 10)) << 10);
  if (t == ncclBfloat16 && ((r & 3) == 0))
    return ((r >> 8) & 0x807fu) | ((uint32_t)(120 + ((r >> 32) % 14)) << 7);
  return (r >> 24) & width_mask(es);
}

static ncclDataType_t type_at(int i)
{
  return (ncclDataType_t)i;
}

/* Buffers with room for a one-element offset. */
struct bufs {
  uint64_t a[MAX_ELEMS + 2], b[MAX_ELEMS + 2], d[MAX_ELEMS + 2], want[MAX_ELEMS + 2];
};

static struct bufs g_bufs;

static uint64_t pick_scalar(ncclDataType_t t)
{
  uint64_t v;

  do {
    v = pick_value(t);
  } while (!is_int(t) && (t != ncclFloat64) && (t != ncclFloat32) &&
           (decode(t, (uint32_t)v) != decode(t, (uint32_t)v)));
  return v;
}

/* Runs one reduction shape at count and offset (elements) and compares. */
static void check_shape(const struct mc_redop *op, struct shape s, size_t count, size_t offset,
                        int in_place)
{
  size_t es = mc_type_size(op->type);
  char *a = (char *)g_bufs.a + offset * es;
  char *b = (char *)g_bufs.b + offset * es;
  char *d = (char *)g_bufs.d + offset * es;
  unsigned flags = (s.pre_a ? MC_REDUCE_PRE_A : 0) | (s.pre_b ? MC_REDUCE_PRE_B : 0) |
                   (s.post ? MC_REDUCE_POST : 0);
  char *dst = (in_place == 1) ? a : ((in_place == 2) ? b : d);

  for (size_t i = 0; i < count; i++) {
    put_elem(a, i, es, pick_value(op->type));
    put_elem(b, i, es, pick_value(op->type));
  }
  /* guard elements around dst */
  put_elem(d, count, es, 0x5a5a5a5a5a5a5a5aull & width_mask(es));
  for (size_t i = 0; i < count; i++) {
    struct shape rs = s;
    if (!s.has_a) /* a copy: pre from either flag */
      rs.pre_b = s.pre_a || s.pre_b;
    put_elem(g_bufs.want, i, es,
             ref_elem(op, rs, s.has_a ? get_elem(a, i, es) : 0, get_elem(b, i, es)));
  }
  mc_reduce(op, dst, s.has_a ? a : NULL, b, count, flags);
  for (size_t i = 0; i < count; i++) {
    uint64_t got = get_elem(dst, i, es), want = get_elem(g_bufs.want, i, es);
    if (!same_elem(got, want)) {
      MC_T_FAIL("%s %s kind %d shape a%d pa%d pb%d post%d count %zu off %zu inplace %d: "
                "[%zu] x=0x%llx y=0x%llx s=0x%llx got 0x%llx want 0x%llx",
                mc_reduce_isa(), mc_type_name(op->type), (int)op->kind, s.has_a, s.pre_a, s.pre_b,
                s.post, count, offset, in_place, i,
                s.has_a ? (unsigned long long)get_elem(a, i, es) : 0ull,
                (unsigned long long)(in_place == 2 ? 0 : get_elem(b, i, es)),
                (unsigned long long)op->scalar, (unsigned long long)got, (unsigned long long)want);
    }
  }
  if (in_place == 0)
    MC_T_EQ_INT(get_elem(d, count, es), 0x5a5a5a5a5a5a5a5aull & width_mask(es));
}

static const size_t counts[] = {1,  2,  3,   5,   7,   15,  17,   31,  33,
                                63, 65, 127, 129, 255, 257, 1023, 4099};
#define N_COUNTS ((int)(sizeof(counts) / sizeof(counts[0])))

static void all_shapes_one_isa(void)
{
  for (int t = 0; t < ncclNumTypes; t++) {
    for (int k = MC_RED_SUM; k <= MC_RED_SUMPOSTDIV; k++) {
      struct mc_redop op = {.type = type_at(t), .kind = (enum mc_red_kind)k, .n_ranks = 1};
      for (int shape = 0; shape < 8; shape++) {
        struct shape s = {.has_a = (shape & 1) == 0};
        if (k == MC_RED_PREMULSUM) {
          s.pre_a = (shape & 2) != 0;
          s.pre_b = (shape & 4) != 0;
        } else if (k == MC_RED_SUMPOSTDIV) {
          if ((shape & 4) != 0)
            continue;
          s.post = (shape & 2) != 0;
        } else if (shape >= 2) {
          continue;
        }
        for (int c = 0; c < N_COUNTS; c++) {
          op.scalar = pick_scalar(op.type);
          op.n_ranks = 1 + (int)(rnd64() % 300);
          check_shape(&op, s, counts[c], (size_t)c & 1, 0);
        }
        /* in place, both ways, unaligned */
        check_shape(&op, s, 1001, 1, 2);
        if (s.has_a)
          check_shape(&op, s, 1001, 1, 1);
      }
    }
  }
}

static void every_type_every_op(void)
{
  for (int i = 0; i < N_ISAS; i++) {
    if (mc_reduce_force_isa(all_isas[i]) != ncclSuccess)
      continue;
    printf("# isa %s\n", mc_reduce_isa());
    all_shapes_one_isa();
  }
  MC_T_OK(mc_reduce_force_isa(NULL));
}

/* ---------- conversions ---------- */

static void conversions_exact(void)
{
  for (uint32_t c = 0; c < 0x10000; c++) {
    double want = decode(ncclFloat16, c);
    float got = mc_type_f16_to_f32((uint16_t)c);
    if (!(((double)got == want) || ((got != got) && (want != want))) ||
        ((want == 0) && (bits_f32(got) >> 31) != (c >> 15)))
      MC_T_FAIL("half 0x%04x decodes to %a, want %a", c, (double)got, want);
    if (mc_type_bf16_to_f32((uint16_t)c) != f32_of(c << 16) && ((c & 0x7f80) != 0x7f80))
      MC_T_FAIL("bf16 0x%04x", c);
  }
  for (uint32_t c = 0; c < 0x100; c++) {
    float g4 = mc_type_e4m3_to_f32((uint8_t)c), g5 = mc_type_e5m2_to_f32((uint8_t)c);
    double w4 = decode(ncclFloat8e4m3, c), w5 = decode(ncclFloat8e5m2, c);
    if (!(((double)g4 == w4) || ((g4 != g4) && (w4 != w4))))
      MC_T_FAIL("e4m3 0x%02x decodes to %a, want %a", c, (double)g4, w4);
    if (!(((double)g5 == w5) || ((g5 != g5) && (w5 != w5))))
      MC_T_FAIL("e5m2 0x%02x decodes to %a, want %a", c, (double)g5, w5);
  }
  /* encodes: every float near every half/bf16/fp8 value and midpoint, and random bits */
  for (int i = 0; i < 400000; i++) {
    uint32_t u = (uint32_t)rnd64();
    float f;
    if ((i & 1) == 0) { /* a midpoint of two half values, nudged by 0 or +-1 ulp */
      uint32_t h = (uint32_t)(rnd64() % 0x7c00);
      float mid = (float)((half_val(h) + half_val(h + 1)) / 2);
      u = bits_f32(mid) + (uint32_t)(rnd64() % 3) - 1u;
      u |= (uint32_t)(rnd64() & 1) << 31;
    }
    f = f32_of(u);
    MC_T_EQ_INT(mc_type_f32_to_f16(f), round_direct(fmt_of(ncclFloat16), f));
    MC_T_EQ_INT(mc_type_f32_to_bf16(f), round_direct(fmt_of(ncclBfloat16), f));
    MC_T_EQ_INT(mc_type_f32_to_e4m3(f), round_direct(fmt_of(ncclFloat8e4m3), f));
    MC_T_EQ_INT(mc_type_f32_to_e5m2(f), round_direct(fmt_of(ncclFloat8e5m2), f));
  }
  /* the corners by name */
  MC_T_EQ_INT(mc_type_f32_to_f16(65520.0f), 0x7c00);   /* tie above max: to inf */
  MC_T_EQ_INT(mc_type_f32_to_f16(65519.996f), 0x7bff); /* just below: max */
  MC_T_EQ_INT(mc_type_f32_to_f16(-0.0f), 0x8000);
  MC_T_EQ_INT(mc_type_f32_to_f16(0x1p-25f), 0x0000);             /* tie: to even 0 */
  MC_T_EQ_INT(mc_type_f32_to_f16(0x1.8p-24f), 0x0002);           /* tie: to even 2 */
  MC_T_EQ_INT(mc_type_f32_to_f16(f32_of(0xffc00001u)), 0x7fff);  /* NaN canonical */
  MC_T_EQ_INT(mc_type_f32_to_bf16(f32_of(0x3f808000u)), 0x3f80); /* tie: to even */
  MC_T_EQ_INT(mc_type_f32_to_bf16(f32_of(0x3f818000u)), 0x3f82); /* tie: up to even */
  MC_T_EQ_INT(mc_type_f32_to_bf16(f32_of(0x7f7fffffu)), 0x7f80); /* overflow to inf */
  MC_T_EQ_INT(mc_type_f32_to_e4m3(448.0f), 0x7e);
  MC_T_EQ_INT(mc_type_f32_to_e4m3(1e9f), 0x7e);                 /* saturates */
  MC_T_EQ_INT(mc_type_f32_to_e4m3(-f32_of(0x7f800000u)), 0xfe); /* -inf saturates */
  MC_T_EQ_INT(mc_type_f32_to_e4m3(f32_of(0xffc00000u)), 0x7f);  /* NaN, sign dropped */
  MC_T_EQ_INT(mc_type_f32_to_e4m3(0x1p-10f), 0x00);             /* half the min: to 0 */
  MC_T_EQ_INT(mc_type_f32_to_e4m3(-0x1.8p-9f), 0x82);           /* tie: to even 2 */
  MC_T_EQ_INT(mc_type_f32_to_e5m2(f32_of(0x7f800000u)), 0x7b);  /* inf saturates */
  MC_T_EQ_INT(mc_type_f32_to_e5m2(57344.0f), 0x7b);
  MC_T_EQ_INT(mc_type_f32_to_e5m2(-0x1p-17f), 0x80); /* -0 kept */
}

/* ---------- named corner cases through the kernels ---------- */

static uint64_t reduce2(ncclDataType_t t, enum mc_red_kind k, uint64_t x, uint64_t y)
{
  struct mc_redop op = {.type = t, .kind = k, .n_ranks = 1};
  uint64_t a[8] = {0}, b[8] = {0}, d[8] = {0};
  size_t es = mc_type_size(t);

  /* 3 elements so the value goes through a vector tail, at index 1 */
  put_elem(a, 1, es, x);
  put_elem(b, 1, es, y);
  mc_reduce(&op, d, a, b, 3, 0);
  return get_elem(d, 1, es);
}

static void corner_cases(void)
{
  /* half: ties to even, overflow to inf, NaN canonical */
  MC_T_EQ_INT(reduce2(ncclFloat16, MC_RED_SUM, 0x3c00, 0x1000), 0x3c00); /* 1 + 2^-11 */
  MC_T_EQ_INT(reduce2(ncclFloat16, MC_RED_SUM, 0x3c01, 0x1000), 0x3c02);
  MC_T_EQ_INT(reduce2(ncclFloat16, MC_RED_SUM, 0x7bff, 0x4c00), 0x7c00);  /* 65504 + 16 */
  MC_T_EQ_INT(reduce2(ncclFloat16, MC_RED_SUM, 0x7c00, 0xfc00), 0x7fff);  /* inf - inf */
  MC_T_EQ_INT(reduce2(ncclFloat16, MC_RED_SUM, 0x8000, 0x8000), 0x8000);  /* -0 + -0 */
  MC_T_EQ_INT(reduce2(ncclFloat16, MC_RED_SUM, 0x0001, 0x0001), 0x0002);  /* subnormals */
  MC_T_EQ_INT(reduce2(ncclFloat16, MC_RED_PROD, 0x0001, 0x3800), 0x0000); /* 2^-25: tie to 0 */
  MC_T_EQ_INT(reduce2(ncclFloat16, MC_RED_PROD, 0x0003, 0x3800), 0x0002); /* 1.5: tie to 2 */
  /* max/min: a NaN loses, +0 > -0 */
  MC_T_EQ_INT(reduce2(ncclFloat16, MC_RED_MAX, 0x7e00, 0x3c00), 0x3c00);
  MC_T_EQ_INT(reduce2(ncclFloat16, MC_RED_MIN, 0x3c00, 0xfe01), 0x3c00);
  MC_T_EQ_INT(reduce2(ncclFloat16, MC_RED_MAX, 0x7e00, 0xfe01), 0x7fff);
  MC_T_EQ_INT(reduce2(ncclFloat16, MC_RED_MAX, 0x8000, 0x0000), 0x0000);
  MC_T_EQ_INT(reduce2(ncclFloat16, MC_RED_MIN, 0x0000, 0x8000), 0x8000);
  MC_T_EQ_INT(reduce2(ncclFloat32, MC_RED_MAX, 0x7fc00000u, 0xbf800000u), 0xbf800000u);
  MC_T_EQ_INT(reduce2(ncclFloat32, MC_RED_SUM, 0xffc00001u, 0x7fc00002u), 0x7fffffffu);
  MC_T_EQ_INT(reduce2(ncclFloat32, MC_RED_SUM, 0x7f800000u, 0xff800000u), 0x7fffffffu);
  MC_T_EQ_INT(reduce2(ncclFloat64, MC_RED_PROD, 0xfff8000000000001ull, 0), 0x7fffffffffffffffull);
  MC_T_EQ_INT(reduce2(ncclFloat32, MC_RED_MAX, 0xbf800000u, 0x7fc00000u), 0xbf800000u);
  MC_T_EQ_INT(reduce2(ncclFloat32, MC_RED_MIN, 0x00000000u, 0x80000000u), 0x80000000u);
  MC_T_EQ_INT(reduce2(ncclFloat32, MC_RED_MAX, 0x80000000u, 0x00000000u), 0x00000000u);
  MC_T_EQ_INT(reduce2(ncclFloat64, MC_RED_MAX, 0x7ff8000000000000ull, 0x3ff0000000000000ull),
              0x3ff0000000000000ull);
  MC_T_EQ_INT(reduce2(ncclFloat64, MC_RED_MIN, 0x7ff8000000000000ull, 0xfff8000000000000ull),
              0x7fffffffffffffffull);
  /* premulsum by -0.0: the scalar's sign survives the broadcast */
  {
    struct mc_redop op;
    float s = -0.0f, x[3] = {1, 2, 3}, y[3] = {-0.0f, -0.0f, -0.0f}, d[3];
    MC_T_OK(mc_redop_premulsum(ncclFloat32, &s, &op));
    mc_reduce(&op, d, x, y, 3, MC_REDUCE_PRE_A);
    MC_T_EQ_INT(bits_f32(d[1]), 0x80000000u);
  }
  /* bfloat16 */
  MC_T_EQ_INT(reduce2(ncclBfloat16, MC_RED_SUM, 0x3f80, 0x3b80), 0x3f80); /* 1 + 2^-8: tie */
  MC_T_EQ_INT(reduce2(ncclBfloat16, MC_RED_SUM, 0x7f7f, 0x7f7f), 0x7f80); /* to inf */
  /* fp8: saturation instead of inf, NaN 0x7f */
  MC_T_EQ_INT(reduce2(ncclFloat8e4m3, MC_RED_SUM, 0x7e, 0x7e), 0x7e); /* 448 + 448 */
  MC_T_EQ_INT(reduce2(ncclFloat8e4m3, MC_RED_SUM, 0xfe, 0xfe), 0xfe);
  MC_T_EQ_INT(reduce2(ncclFloat8e4m3, MC_RED_SUM, 0x7f, 0x38), 0x7f);
  MC_T_EQ_INT(reduce2(ncclFloat8e4m3, MC_RED_MAX, 0xff, 0x38), 0x38);
  MC_T_EQ_INT(reduce2(ncclFloat8e4m3, MC_RED_SUM, 0x38, 0x18), 0x38);  /* 1 + 1/16: tie */
  MC_T_EQ_INT(reduce2(ncclFloat8e5m2, MC_RED_SUM, 0x7c, 0x3c), 0x7b);  /* inf + 1 saturates */
  MC_T_EQ_INT(reduce2(ncclFloat8e5m2, MC_RED_MAX, 0x7c, 0x3c), 0x7b);  /* even max */
  MC_T_EQ_INT(reduce2(ncclFloat8e5m2, MC_RED_SUM, 0x7c, 0xfc), 0x7f);  /* inf - inf */
  MC_T_EQ_INT(reduce2(ncclFloat8e5m2, MC_RED_PROD, 0x01, 0x3e), 0x02); /* 2^-16 * 1.5: tie */
}

/* ---------- integers ---------- */

static void integer_wrap_and_avg(void)
{
  struct mc_redop op;
  int32_t a32[5] = {INT32_MAX, INT32_MIN, -7, 7, -1}, b32[5] = {1, -1, 0, 0, 0}, d32[5];
  uint8_t a8[3] = {200, 16, 255}, b8[3] = {100, 16, 255}, d8[3];
  int8_t s8[3] = {-128, 127, -100}, t8[3] = {-1, 1, -100}, e8[3];
  int64_t a64[2] = {INT64_MAX, INT64_MIN}, b64[2] = {2, -1}, d64[2];

  MC_T_OK(mc_redop_builtin(ncclInt32, ncclSum, 2, &op));
  mc_reduce(&op, d32, a32, b32, 5, 0);
  MC_T_EQ_INT(d32[0], INT32_MIN);
  MC_T_EQ_INT(d32[1], INT32_MAX);
  MC_T_OK(mc_redop_builtin(ncclUint8, ncclSum, 2, &op));
  mc_reduce(&op, d8, a8, b8, 3, 0);
  MC_T_EQ_INT(d8[0], 44);
  MC_T_EQ_INT(d8[2], 254);
  MC_T_OK(mc_redop_builtin(ncclUint8, ncclProd, 2, &op));
  mc_reduce(&op, d8, a8, b8, 3, 0);
  MC_T_EQ_INT(d8[0], (200 * 100) & 0xff);
  MC_T_EQ_INT(d8[1], 0);
  MC_T_OK(mc_redop_builtin(ncclInt8, ncclProd, 2, &op));
  mc_reduce(&op, e8, s8, t8, 3, 0);
  MC_T_EQ_INT(e8[0], -128); /* -128 * -1 wraps */
  MC_T_EQ_INT(e8[2], 16);   /* 10000 & 0xff */
  MC_T_OK(mc_redop_builtin(ncclInt64, ncclProd, 2, &op));
  mc_reduce(&op, d64, a64, b64, 2, 0);
  MC_T_EQ_INT(d64[0], -2);
  MC_T_EQ_INT(d64[1], INT64_MIN);
  MC_T_OK(mc_redop_builtin(ncclInt8, ncclMax, 2, &op));
  mc_reduce(&op, e8, s8, t8, 3, 0);
  MC_T_EQ_INT(e8[0], -1);
  MC_T_EQ_INT(e8[1], 127);
  MC_T_OK(mc_redop_builtin(ncclUint8, ncclMin, 2, &op));
  mc_reduce(&op, d8, a8, b8, 3, 0);
  MC_T_EQ_INT(d8[0], 100);

  /* avg: sum (wrapping), then one truncating division at the end */
  MC_T_OK(mc_redop_builtin(ncclInt32, ncclAvg, 3, &op));
  MC_T_EQ_INT(op.kind, MC_RED_SUMPOSTDIV);
  MC_T_EQ_INT(op.n_ranks, 3);
  mc_reduce(&op, d32, a32, b32, 5, MC_REDUCE_POST);
  MC_T_EQ_INT(d32[0], INT32_MIN / 3);
  MC_T_EQ_INT(d32[2], -2); /* -7/3 truncates toward zero */
  MC_T_EQ_INT(d32[3], 2);
  MC_T_EQ_INT(d32[4], 0);
  mc_reduce(&op, d32, a32, b32, 5, 0); /* without POST: the plain sum */
  MC_T_EQ_INT(d32[2], -7);
  MC_T_OK(mc_redop_builtin(ncclInt8, ncclAvg, 200, &op)); /* divisor beyond int8 */
  mc_reduce(&op, e8, s8, t8, 3, MC_REDUCE_POST);
  MC_T_EQ_INT(e8[0], 127 / 200);                   /* -129 wraps to 127 */
  MC_T_EQ_INT(e8[2], (int8_t)(-200 & 0xff) / 200); /* -200 wraps to 56 */
  MC_T_OK(mc_redop_builtin(ncclUint64, ncclAvg, 2, &op));
  {
    uint64_t ua[1] = {UINT64_MAX}, ub[1] = {UINT64_MAX}, ud[1];
    mc_reduce(&op, ud, ua, ub, 1, MC_REDUCE_POST);
    MC_T_EQ_INT(ud[0] == (UINT64_MAX - 1) / 2, 1);
  }
}

/* ---------- ops, scalars, errors ---------- */

static void builtin_ops_and_scalars(void)
{
  struct mc_redop op;
  float f = 0.25f;
  double d = -3.5;
  uint16_t h = 0x3555;
  int8_t i8 = -3;
  uint64_t u64 = 0x8000000000000001ull;

  MC_T_OK(mc_redop_builtin(ncclFloat32, ncclAvg, 3, &op));
  MC_T_EQ_INT(op.kind, MC_RED_PREMULSUM);
  MC_T_EQ_INT(op.scalar, 0x3eaaaaabu); /* float(1.0/3) */
  MC_T_OK(mc_redop_builtin(ncclFloat64, ncclAvg, 3, &op));
  MC_T_EQ_INT(op.scalar, 0x3fd5555555555555ull);
  MC_T_OK(mc_redop_builtin(ncclFloat16, ncclAvg, 3, &op));
  MC_T_EQ_INT(op.scalar, 0x3555);
  MC_T_OK(mc_redop_builtin(ncclBfloat16, ncclAvg, 3, &op));
  MC_T_EQ_INT(op.scalar, 0x3eab);
  MC_T_OK(mc_redop_builtin(ncclFloat8e4m3, ncclAvg, 3, &op));
  MC_T_EQ_INT(op.scalar, 0x2b); /* 0.34375 */
  MC_T_OK(mc_redop_builtin(ncclFloat8e5m2, ncclAvg, 3, &op));
  MC_T_EQ_INT(op.scalar, 0x35); /* 0.3125 */
  MC_T_OK(mc_redop_builtin(ncclFloat8e4m3, ncclAvg, 1000, &op));
  MC_T_EQ_INT(op.scalar, 0x01); /* 0.001: the smallest subnormal, 2^-9 */
  MC_T_OK(mc_redop_builtin(ncclFloat8e4m3, ncclAvg, 2000, &op));
  MC_T_EQ_INT(op.scalar, 0x00); /* 0.0005 < 2^-10: e4m3 avg over 2000 ranks is all zeros */
  MC_T_OK(mc_redop_builtin(ncclBfloat16, ncclMax, 4, &op));
  MC_T_EQ_INT(op.kind, MC_RED_MAX);

  MC_T_OK(mc_redop_premulsum(ncclFloat32, &f, &op));
  MC_T_EQ_INT(op.scalar, 0x3e800000u);
  MC_T_OK(mc_redop_premulsum(ncclFloat64, &d, &op));
  MC_T_EQ_INT(op.scalar, bits_f64(-3.5));
  MC_T_OK(mc_redop_premulsum(ncclFloat16, &h, &op));
  MC_T_EQ_INT(op.scalar, 0x3555);
  MC_T_OK(mc_redop_premulsum(ncclInt8, &i8, &op));
  MC_T_EQ_INT(op.scalar, 0xfd);
  MC_T_OK(mc_redop_premulsum(ncclUint64, &u64, &op));
  MC_T_EQ_INT(op.scalar == u64, 1);
  MC_T_EQ_INT(op.kind, MC_RED_PREMULSUM);

  MC_T_EQ_INT(mc_redop_builtin((ncclDataType_t)12, ncclSum, 2, &op), ncclInvalidArgument);
  MC_T_EQ_INT(mc_redop_builtin((ncclDataType_t)-1, ncclSum, 2, &op), ncclInvalidArgument);
  MC_T_EQ_INT(mc_redop_builtin(ncclInt32, (ncclRedOp_t)5, 2, &op), ncclInvalidArgument);
  MC_T_EQ_INT(mc_redop_builtin(ncclInt32, ncclAvg, 0, &op), ncclInvalidArgument);
  MC_T_EQ_INT(mc_redop_premulsum(ncclInt32, NULL, &op), ncclInvalidArgument);

  MC_T_EQ_INT(mc_type_size(ncclFloat8e5m2), 1);
  MC_T_EQ_INT(mc_type_size(ncclBfloat16), 2);
  MC_T_EQ_INT(mc_type_size(ncclUint64), 8);
  MC_T_EQ_INT(mc_type_size((ncclDataType_t)12), 0);
  MC_T_EQ_STR(mc_type_name(ncclFloat16), "half");
  MC_T_EQ_STR(mc_type_name(ncclFloat32), "float");
  MC_T_EQ_STR(mc_type_name(ncclBfloat16), "bfloat16");
  MC_T_EQ_STR(mc_type_name(ncclInt8), "int8");
}

/* Premulsum with a scalar of every type, through the builtin avg too. */
static void premulsum_every_type(void)
{
  for (int t = 0; t < ncclNumTypes; t++) {
    uint64_t raw = pick_scalar(type_at(t));
    struct mc_redop op;
    unsigned char sbytes[8];
    struct shape s = {.has_a = true, .pre_a = true, .pre_b = true};

    put_elem(sbytes, 0, mc_type_size(type_at(t)), raw);
    MC_T_OK(mc_redop_premulsum(type_at(t), sbytes, &op));
    MC_T_EQ_INT(op.scalar == raw, 1);
    check_shape(&op, s, 517, 1, 0);
    if (!is_int(type_at(t))) {
      MC_T_OK(mc_redop_builtin(type_at(t), ncclAvg, 7, &op));
      check_shape(&op, s, 517, 0, 0);
    }
  }
}

/* ---------- n inputs ---------- */

static void multi_equals_chain(void)
{
  enum { N = 5, COUNT = 5003 };
  static uint64_t src[N][COUNT], got[COUNT], want[COUNT], work[N][COUNT];

  for (int t = 0; t < ncclNumTypes; t++) {
    size_t es = mc_type_size(type_at(t));
    for (int k = MC_RED_SUM; k <= MC_RED_SUMPOSTDIV; k++) {
      struct mc_redop op = {.type = type_at(t), .kind = (enum mc_red_kind)k, .n_ranks = 3};
      op.scalar = pick_scalar(op.type);
      for (int n = 1; n <= N; n++) {
        for (int alias = -1; alias < n; alias++) {
          unsigned flags = MC_REDUCE_PRE_A | MC_REDUCE_PRE_B | MC_REDUCE_POST;
          const void *ptrs[N];
          for (int i = 0; i < n; i++)
            for (size_t j = 0; j < COUNT; j++)
              put_elem(src[i], j, es, pick_value(op.type));
          /* the chain of mc_reduce calls */
          if (n == 1) {
            mc_reduce(&op, want, NULL, src[0], COUNT, MC_REDUCE_PRE_B | MC_REDUCE_POST);
          } else {
            mc_reduce(&op, want, src[0], src[1], COUNT,
                      MC_REDUCE_PRE_A | MC_REDUCE_PRE_B | ((n == 2) ? MC_REDUCE_POST : 0));
            for (int i = 2; i < n; i++)
              mc_reduce(&op, want, want, src[i], COUNT,
                        MC_REDUCE_PRE_B | ((i == n - 1) ? MC_REDUCE_POST : 0));
          }
          for (int i = 0; i < n; i++) {
            memcpy(work[i], src[i], sizeof(src[i]));
            ptrs[i] = work[i];
          }
          mc_reduce_multi(&op, (alias >= 0) ? work[alias] : (void *)got, ptrs, n, COUNT, flags);
          if (memcmp((alias >= 0) ? work[alias] : got, want, COUNT * es) != 0)
            MC_T_FAIL("multi %s kind %d n %d alias %d differs from the chain",
                      mc_type_name(op.type), k, n, alias);
        }
      }
    }
  }
}

/* ---------- instruction sets agree byte for byte ---------- */

static void isas_identical(void)
{
  enum { COUNT = 3001 };
  static uint64_t a[COUNT + 1], b[COUNT + 1], ref[COUNT + 1], out[COUNT + 1];
  int n_isas = 0;

  for (int t = 0; t < ncclNumTypes; t++) {
    size_t es = mc_type_size(type_at(t));
    for (size_t j = 0; j < COUNT + 1; j++) {
      put_elem(a, j, es, pick_value(type_at(t)));
      put_elem(b, j, es, pick_value(type_at(t)));
    }
    for (int k = MC_RED_SUM; k <= MC_RED_SUMPOSTDIV; k++) {
      struct mc_redop op = {.type = type_at(t), .kind = (enum mc_red_kind)k, .n_ranks = 7};
      op.scalar = pick_scalar(op.type);
      for (unsigned flags = 0; flags < 8; flags++) {
        for (int copy = 0; copy < 2; copy++) {
          bool have_ref = false;
          n_isas = 0;
          for (int i = 0; i < N_ISAS; i++) {
            if (mc_reduce_force_isa(all_isas[i]) != ncclSuccess)
              continue;
            n_isas++;
            memset(out, 0, sizeof(out));
            mc_reduce(&op, (char *)out + es, copy ? NULL : (char *)a + es, (char *)b + es, COUNT,
                      flags);
            if (!have_ref) {
              memcpy(ref, out, sizeof(ref));
              have_ref = true;
            } else if (memcmp(ref, out, sizeof(out)) != 0) {
              MC_T_FAIL("%s differs from the first isa: %s kind %d flags %u copy %d", all_isas[i],
                        mc_type_name(op.type), k, flags, copy);
            }
          }
        }
      }
    }
  }
  MC_T_OK(mc_reduce_force_isa(NULL));
  printf("# %d instruction sets compared, automatic choice %s\n", n_isas, mc_reduce_isa());
  MC_T_EQ_INT(mc_reduce_force_isa("no-such-isa"), ncclInvalidArgument);
  MC_T_TRUE(n_isas >= 1);
}

MC_T_MAIN(conversions_exact, corner_cases, integer_wrap_and_avg, builtin_ops_and_scalars,
          premulsum_every_type, every_type_every_op, multi_equals_chain, isas_identical)
