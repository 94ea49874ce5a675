/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-perf's data check (-c): deterministic inputs per rank, the
 * expected result of each collective computed on the host, and the count of
 * wrong elements. Plays the role of nccl-tests' verifiable/ kernels, with
 * a simpler design: every input is a small non-negative integer, exact in
 * every NCCL type (fp8 included), so integer results are compared exactly
 * and floating results within a relative tolerance per type.
 *
 * Elements are read and written in their own encoding: float16, bfloat16
 * and the two fp8 types by integer bit manipulation (no libm), rounding to
 * nearest even; fp8 saturates to its largest finite value, as NCCL's
 * conversions do.
 */
#include "perf.h"

#include <math.h> /* INFINITY and NAN: macros, no libm */
#include <string.h>

/* A minifloat format: float16, bfloat16, f8e4m3, f8e5m2. */
struct minifloat {
  int ebits;
  int mbits;
  int bias;
  bool has_inf;  /* e4m3 has no infinity: all-ones exponent is still finite */
  bool saturate; /* overflow gives the largest finite value instead of inf */
};

static const struct minifloat mf_half = {.ebits = 5, .mbits = 10, .bias = 15, .has_inf = true};
static const struct minifloat mf_bf16 = {.ebits = 8, .mbits = 7, .bias = 127, .has_inf = true};
static const struct minifloat mf_e4m3 = {
    .ebits = 4, .mbits = 3, .bias = 7, .has_inf = false, .saturate = true};
static const struct minifloat mf_e5m2 = {
    .ebits = 5, .mbits = 2, .bias = 15, .has_inf = true, .saturate = true};

static double pow2(int k)
{
  double v = 1.0;

  for (; k > 0; k--)
    v *= 2.0;
  for (; k < 0; k++)
    v *= 0.5;
  return v;
}

static double abs_double(double v)
{
  return (v < 0) ? -v : v;
}

static uint32_t mf_max_finite(const struct minifloat *mf)
{
  uint32_t emax = (1u << mf->ebits) - 1;

  if (mf->has_inf)
    return ((emax - 1) << mf->mbits) | ((1u << mf->mbits) - 1);
  return (emax << mf->mbits) | ((1u << mf->mbits) - 2); /* all ones is NaN */
}

static uint32_t mf_encode(const struct minifloat *mf, double value)
{
  float f = (float)value;
  uint32_t fb;
  uint32_t sign;
  uint32_t fman;
  uint32_t emax = (1u << mf->ebits) - 1;
  uint32_t inf = emax << mf->mbits;
  uint32_t nan = (emax << mf->mbits) | ((1u << mf->mbits) - 1);
  uint32_t enc;
  int fexp;

  memcpy(&fb, &f, sizeof(fb));
  sign = fb >> 31;
  fexp = (int)((fb >> 23) & 0xff);
  fman = fb & 0x7fffff;
  if (fexp == 0xff) {
    enc = (fman != 0) ? nan : (mf->has_inf ? inf : mf_max_finite(mf));
  } else if (fexp == 0) {
    enc = 0; /* zero, and float denormals: below every target's range */
  } else {
    uint32_t full = fman | 0x800000u;
    int e = fexp - 127 + mf->bias;
    int shift = 23 - mf->mbits;
    uint32_t q;

    if (e <= 0) { /* subnormal in the target: shift further, exponent field 0 */
      shift += 1 - e;
      e = 1;
    }
    if (shift > 31) {
      q = 0;
    } else {
      uint32_t rem = full & ((1u << shift) - 1);
      uint32_t half = 1u << (shift - 1);

      q = full >> shift;
      if ((rem > half) || ((rem == half) && ((q & 1) != 0)))
        q++;
    }
    /* q carries the implicit bit for normals; a carry out bumps the exponent. */
    enc = ((uint32_t)(e - 1) << mf->mbits) + q;
    if (mf->has_inf && !mf->saturate && (enc >= inf))
      enc = inf;
    else if (enc > mf_max_finite(mf))
      enc = mf_max_finite(mf);
  }
  return (sign << (mf->ebits + mf->mbits)) | enc;
}

static double mf_decode(const struct minifloat *mf, uint32_t bits)
{
  uint32_t emax = (1u << mf->ebits) - 1;
  uint32_t mmask = (1u << mf->mbits) - 1;
  uint32_t e = (bits >> mf->mbits) & emax;
  uint32_t m = bits & mmask;
  bool negative = ((bits >> (mf->ebits + mf->mbits)) & 1) != 0;
  double v;

  if (mf->has_inf && (e == emax)) {
    v = (m == 0) ? INFINITY : NAN;
  } else if (!mf->has_inf && (e == emax) && (m == mmask)) {
    v = NAN;
  } else if (e == 0) {
    v = (double)m * pow2(1 - mf->bias - mf->mbits);
  } else {
    v = (double)((1u << mf->mbits) + m) * pow2((int)e - mf->bias - mf->mbits);
  }
  return negative ? -v : v;
}

static const struct minifloat *minifloat_of(int datatype)
{
  switch (datatype) {
  case ncclFloat16:
    return &mf_half;
  case ncclBfloat16:
    return &mf_bf16;
  case ncclFloat8e4m3:
    return &mf_e4m3;
  case ncclFloat8e5m2:
    return &mf_e5m2;
  default:
    return NULL;
  }
}

static bool is_integer(int datatype)
{
  return (datatype == ncclInt8) || (datatype == ncclUint8) || (datatype == ncclInt32) ||
         (datatype == ncclUint32) || (datatype == ncclInt64) || (datatype == ncclUint64);
}

static bool is_signed(int datatype)
{
  return (datatype == ncclInt8) || (datatype == ncclInt32) || (datatype == ncclInt64);
}

/* Integer element as 64 bits: sign-extended for signed types, zero-extended otherwise. */
static uint64_t load_int(int datatype, const void *buf, size_t index)
{
  switch (datatype) {
  case ncclInt8:
    return (uint64_t)(int64_t)((const int8_t *)buf)[index];
  case ncclUint8:
    return ((const uint8_t *)buf)[index];
  case ncclInt32:
    return (uint64_t)(int64_t)((const int32_t *)buf)[index];
  case ncclUint32:
    return ((const uint32_t *)buf)[index];
  case ncclInt64:
    return (uint64_t)((const int64_t *)buf)[index];
  default:
    return ((const uint64_t *)buf)[index];
  }
}

/* Stores the low bits of v (two's complement wrap, as NCCL's integer reductions). */
static void store_int(int datatype, void *buf, size_t index, uint64_t v)
{
  switch (datatype) {
  case ncclInt8:
  case ncclUint8:
    ((uint8_t *)buf)[index] = (uint8_t)v;
    break;
  case ncclInt32:
  case ncclUint32:
    ((uint32_t *)buf)[index] = (uint32_t)v;
    break;
  default:
    ((uint64_t *)buf)[index] = v;
    break;
  }
}

void mc_perf_store(int datatype, void *buf, size_t index, double value)
{
  const struct minifloat *mf = minifloat_of(datatype);

  if (mf != NULL) {
    uint32_t bits = mf_encode(mf, value);
    if (mc_perf_type_size(datatype) == 1)
      ((uint8_t *)buf)[index] = (uint8_t)bits;
    else
      ((uint16_t *)buf)[index] = (uint16_t)bits;
  } else if (datatype == ncclFloat32) {
    ((float *)buf)[index] = (float)value;
  } else if (datatype == ncclFloat64) {
    ((double *)buf)[index] = value;
  } else if (is_signed(datatype)) {
    store_int(datatype, buf, index, (uint64_t)(int64_t)value);
  } else {
    store_int(datatype, buf, index, (uint64_t)value);
  }
}

double mc_perf_load(int datatype, const void *buf, size_t index)
{
  const struct minifloat *mf = minifloat_of(datatype);

  if (mf != NULL) {
    uint32_t bits = (mc_perf_type_size(datatype) == 1) ? ((const uint8_t *)buf)[index]
                                                       : ((const uint16_t *)buf)[index];
    return mf_decode(mf, bits);
  }
  if (datatype == ncclFloat32)
    return ((const float *)buf)[index];
  if (datatype == ncclFloat64)
    return ((const double *)buf)[index];
  if (is_signed(datatype))
    return (double)(int64_t)load_int(datatype, buf, index);
  return (double)load_int(datatype, buf, index);
}

double mc_perf_tolerance(int datatype)
{
  switch (datatype) {
  case ncclFloat16:
    return 1e-2;
  case ncclBfloat16:
    return 2e-2;
  case ncclFloat8e4m3: /* 3 mantissa bits: the check catches misplaced data, not rounding */
    return 0.25;
  case ncclFloat8e5m2: /* 2 mantissa bits */
    return 0.5;
  case ncclFloat32:
    return 1e-5;
  case ncclFloat64:
    return 1e-12;
  default:
    return 0.0;
  }
}

double mc_perf_premul_scalar(int rank)
{
  return (double)(1 + (rank % 2));
}

double mc_perf_input_value(int op, int rank, size_t index, int rep)
{
  /* Products of 1s and 2s are exact powers of two in every type. */
  if (op == ncclProd)
    return (double)(1 + ((index + (size_t)rank + (size_t)rep) % 2));
  return (double)((index * 3 + (size_t)rank * 5 + (size_t)rep) % 8);
}

void mc_perf_fill_input(int datatype, int op, void *buf, size_t count, size_t first_index, int rank,
                        int rep)
{
  for (size_t i = 0; i < count; i++)
    mc_perf_store(datatype, buf, i, mc_perf_input_value(op, rank, first_index + i, rep));
}

/* The reduction across ranks of element `index`, stored at expected[out_index]. */
static void reduce_element(int datatype, int op, int n_ranks, size_t index, int rep, void *expected,
                           size_t out_index)
{
  if (is_integer(datatype)) {
    uint64_t acc = 0;
    uint8_t one[8];

    for (int r = 0; r < n_ranks; r++) {
      uint64_t x = (uint64_t)mc_perf_input_value(op, r, index, rep);
      int64_t sx;
      int64_t sacc;

      /* Round-trip through the type so that wrap and sign match the buffers. */
      store_int(datatype, one, 0, x);
      x = load_int(datatype, one, 0);
      if (op == MC_PERF_MULSUM)
        x *= (uint64_t)mc_perf_premul_scalar(r);
      sx = (int64_t)x;
      sacc = (int64_t)acc;
      if (r == 0) {
        acc = x;
      } else if ((op == ncclSum) || (op == ncclAvg) || (op == MC_PERF_MULSUM)) {
        acc += x;
      } else if (op == ncclProd) {
        acc *= x;
      } else if (op == ncclMax) {
        acc = is_signed(datatype) ? (uint64_t)((sx > sacc) ? sx : sacc) : ((x > acc) ? x : acc);
      } else {
        acc = is_signed(datatype) ? (uint64_t)((sx < sacc) ? sx : sacc) : ((x < acc) ? x : acc);
      }
      store_int(datatype, one, 0, acc); /* wrap after every step, as the type does */
      acc = load_int(datatype, one, 0);
    }
    if (op == ncclAvg) /* integer avg: sum, then one truncating division */
      acc = is_signed(datatype) ? (uint64_t)((int64_t)acc / n_ranks) : acc / (uint64_t)n_ranks;
    store_int(datatype, expected, out_index, acc);
  } else {
    double acc = 0;

    for (int r = 0; r < n_ranks; r++) {
      double x = mc_perf_input_value(op, r, index, rep);

      if (op == MC_PERF_MULSUM)
        x *= mc_perf_premul_scalar(r);
      else if (op == ncclAvg)
        x /= n_ranks;
      if (r == 0)
        acc = x;
      else if (op == ncclProd)
        acc *= x;
      else if (op == ncclMax)
        acc = (x > acc) ? x : acc;
      else if (op == ncclMin)
        acc = (x < acc) ? x : acc;
      else
        acc += x;
    }
    mc_perf_store(datatype, expected, out_index, acc);
  }
}

static void copy_input(int datatype, int op, int from_rank, size_t index, int rep, void *expected,
                       size_t out_index)
{
  mc_perf_store(datatype, expected, out_index, mc_perf_input_value(op, from_rank, index, rep));
}

void mc_perf_fill_expected(enum mc_perf_coll coll, int datatype, int op, int root, int rank,
                           int n_ranks, const struct mc_perf_counts *c, int rep, void *expected)
{
  size_t chunk;

  switch (coll) {
  case MC_PERF_ALL_REDUCE:
  case MC_PERF_REDUCE:
    for (size_t i = 0; i < c->recv_count; i++)
      reduce_element(datatype, op, n_ranks, i, rep, expected, i);
    break;
  case MC_PERF_REDUCE_SCATTER: /* rank r gets block r of the reduction */
    for (size_t i = 0; i < c->recv_count; i++)
      reduce_element(datatype, op, n_ranks, (size_t)rank * c->recv_count + i, rep, expected, i);
    break;
  case MC_PERF_ALL_GATHER: /* block j is rank j's input */
  case MC_PERF_HYPERCUBE:
  case MC_PERF_GATHER: /* at the root; the others receive nothing and are not checked */
    chunk = c->send_count;
    for (size_t i = 0; i < c->recv_count; i++)
      copy_input(datatype, op, (int)(i / chunk), i % chunk, rep, expected, i);
    break;
  case MC_PERF_BROADCAST:
    for (size_t i = 0; i < c->recv_count; i++)
      copy_input(datatype, op, root, i, rep, expected, i);
    break;
  case MC_PERF_ALLTOALL: /* block p comes from rank p, its block `rank` */
    chunk = c->param_count;
    for (size_t i = 0; (chunk > 0) && (i < c->recv_count); i++)
      copy_input(datatype, op, (int)(i / chunk), (size_t)rank * chunk + i % chunk, rep, expected,
                 i);
    break;
  case MC_PERF_SCATTER: /* block `rank` of the root's input */
    for (size_t i = 0; i < c->recv_count; i++)
      copy_input(datatype, op, root, (size_t)rank * c->recv_count + i, rep, expected, i);
    break;
  case MC_PERF_ALLTOALLV: /* block p: rank p's count for us of its block `rank`, then zeros */
    chunk = c->param_count;
    for (size_t i = 0; (chunk > 0) && (i < c->recv_count); i++) {
      int from = (int)(i / chunk);
      size_t k = i % chunk;

      if (k < mc_perf_alltoallv_count(chunk, from, rank, n_ranks))
        copy_input(datatype, op, from, (size_t)rank * chunk + k, rep, expected, i);
      else
        mc_perf_store(datatype, expected, i, 0.0);
    }
    break;
  case MC_PERF_SENDRECV: /* from the previous rank of the ring */
    for (size_t i = 0; i < c->recv_count; i++)
      copy_input(datatype, op, (rank + n_ranks - 1) % n_ranks, i, rep, expected, i);
    break;
  default:
    break;
  }
}

int64_t mc_perf_count_wrong(int datatype, const void *got, const void *expected, size_t count)
{
  int64_t n_wrong = 0;
  size_t elem = mc_perf_type_size(datatype);
  double tol = mc_perf_tolerance(datatype);

  for (size_t i = 0; i < count; i++) {
    if (is_integer(datatype)) {
      if (memcmp((const char *)got + i * elem, (const char *)expected + i * elem, elem) != 0)
        n_wrong++;
    } else {
      double g = mc_perf_load(datatype, got, i);
      double e = mc_perf_load(datatype, expected, i);
      double scale = (abs_double(e) > 1.0) ? abs_double(e) : 1.0;

      if ((g != g) && (e != e))
        continue; /* both NaN */
      if (!(abs_double(g - e) <= tol * scale))
        n_wrong++;
    }
  }
  return n_wrong;
}
