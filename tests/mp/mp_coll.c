/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Correctness of every collective, through the public API, on every rank:
 * allreduce, broadcast, reduce, allgather, reducescatter, and grouped
 * send/recv (ring, alltoall including self, gather, scatter) × types × ops
 * × in/out of place × sizes. Integers must match exactly; floats within
 * NCCL's test tolerance of the value computed in double.
 *
 *   mp_coll [--types t,t] [--ops o,o] [--sizes n,n] [--colls c,c] [--iters N]
 *           [--threads N | --group N]
 * Without --threads/--group: one rank per process from the launcher's
 * environment (meshcclCommInitFromEnv). --threads N: ncclCommInitAll, one
 * thread per rank. --group N: ncclCommInitAll, one thread drives every rank
 * inside ncclGroupStart/End (nccl-tests' single-process mode).
 * --scalable NID: the communicator under test comes from
 * ncclCommInitRankScalable with NID roots, the ids made by ranks 0..NID-1
 * (ncclGetUniqueId, one each) and exchanged over the launcher's communicator.
 * --grow NOLD: ranks 0..NOLD-1 split off a parent, parent rank 0 makes the
 * id (ncclCommGetUniqueId) and the parent grows with the other ranks
 * (ncclCommGrow: existing ranks pass the parent and rank -1, only the id's
 * owner passes the id; new ranks pass NULL, the id and their rank); after
 * the cases on the grown communicator, the parent must still all-reduce.
 * --symmetric 1: every buffer comes from ncclMemAlloc and is registered as
 * a NCCL_WIN_COLL_SYMMETRIC window of the rank's communicator for its case
 * (nccl-tests -R 2): the all-reduces take the symmetric algorithm. --symmetric
 * 2: rank 0 only (a misuse the others must report).
 * --same-bits 1: every all-reduce's result must also be the same bits on
 * every rank (an all-reduce of its hash, max of h and of ~h, says so).
 * --offset B: every malloc'd buffer starts B bytes past malloc's pointer
 * (B odd: no element is aligned; the in-place cases keep their overlap).
 * Prints "ok <n> checks" on success; exits 1 with the first mismatch.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meshccl.h"
#include "nccl.h"

#define MAX_LIST  32
#define MAX_RANKS 128 /* --threads/--group: more than a 64-bit mask */

static const char *const type_names[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                                         "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
static const char *const op_names[] = {"sum", "prod", "max", "min", "avg", "premulsum"};
static const char *const coll_names[] = {
    "allreduce", "broadcast", "reduce",       "allgather",  "reducescatter", "sendrecv", "alltoall",
    "gather",    "scatter",   "ncclalltoall", "ncclgather", "ncclscatter",   "recvsend"};
/* C_A2A, C_GATHER, C_SCATTER are written with grouped ncclSend/ncclRecv;
 * C_RECV_FIRST is sendrecv with the receive posted first in the group (every
 * rank's first connection at first use is then a receive);
 * C_API_A2A, C_API_GATHER, C_API_SCATTER call ncclAlltoAll, ncclGather,
 * ncclScatter (not in the default list: --colls names them). */
enum {
  C_AR,
  C_BC,
  C_RED,
  C_AG,
  C_RS,
  C_SR,
  C_A2A,
  C_GATHER,
  C_SCATTER,
  C_API_A2A,
  C_API_GATHER,
  C_API_SCATTER,
  C_RECV_FIRST,
  N_COLLS
};
#define OP_PREMUL 5

struct cfg {
  int types[MAX_LIST], n_types;
  int ops[MAX_LIST], n_ops;
  size_t sizes[MAX_LIST];
  int n_sizes;
  int colls[MAX_LIST], n_colls;
  int iters;
  int threads;
  int group;
  int scalable;
  int grow;
  int symmetric; /* buffers from ncclMemAlloc in NCCL_WIN_COLL_SYMMETRIC windows */
  int same_bits; /* all-reduce results: the same bits on every rank */
  int offset;    /* malloc'd buffers start this many bytes in */
};

static struct cfg g_cfg;

/* ------------------------------------------------------------ conversions */

static float half_to_float(uint16_t h)
{
  uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
  float f;
  if (e == 0) {
    f = ldexpf((float)m, -24);
    return s ? -f : f;
  }
  bits = (e == 31) ? (s | 0x7f800000u | (m << 13)) : (s | ((e + 112) << 23) | (m << 13));
  memcpy(&f, &bits, 4);
  return f;
}

static uint16_t float_to_half(float f)
{
  /* Exact for the small integers and simple fractions the tests use. */
  uint32_t b, s, e, m;
  memcpy(&b, &f, 4);
  s = (b >> 16) & 0x8000;
  e = (b >> 23) & 0xff;
  m = b & 0x7fffff;
  if (e == 0)
    return (uint16_t)s;
  if (e < 113) { /* subnormal half */
    uint32_t mm = (m | 0x800000) >> (126 - e);
    return (uint16_t)(s | ((mm + 0x1000 + ((mm >> 13) & 1) - 1) >> 13));
  }
  {
    uint32_t r = ((e - 112) << 10) | (m >> 13);
    uint32_t rest = m & 0x1fff;
    if ((rest > 0x1000) || ((rest == 0x1000) && (r & 1)))
      r++;
    return (uint16_t)(s | r);
  }
}

static float bf16_to_float(uint16_t h)
{
  uint32_t b = (uint32_t)h << 16;
  float f;
  memcpy(&f, &b, 4);
  return f;
}

static uint16_t float_to_bf16(float f)
{
  uint32_t b;
  memcpy(&b, &f, 4);
  b += 0x7fff + ((b >> 16) & 1);
  return (uint16_t)(b >> 16);
}

static size_t tsize(int t)
{
  static const size_t sz[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
  return sz[t];
}

static bool is_float(int t)
{
  return (t >= ncclFloat16) && (t != ncclInt8);
}

static void store(int t, void *buf, size_t i, double v)
{
  char *p = (char *)buf + i * tsize(t);
  switch (t) {
  case ncclInt8: {
    int8_t x = (int8_t)(int64_t)v;
    memcpy(p, &x, 1);
  } break;
  case ncclUint8: {
    uint8_t x = (uint8_t)(int64_t)v;
    memcpy(p, &x, 1);
  } break;
  case ncclInt32: {
    int32_t x = (int32_t)(int64_t)v;
    memcpy(p, &x, 4);
  } break;
  case ncclUint32: {
    uint32_t x = (uint32_t)(int64_t)v;
    memcpy(p, &x, 4);
  } break;
  case ncclInt64: {
    int64_t x = (int64_t)v;
    memcpy(p, &x, 8);
  } break;
  case ncclUint64: {
    uint64_t x = (uint64_t)(int64_t)v;
    memcpy(p, &x, 8);
  } break;
  case ncclFloat16: {
    uint16_t x = float_to_half((float)v);
    memcpy(p, &x, 2);
  } break;
  case ncclFloat32: {
    float x = (float)v;
    memcpy(p, &x, 4);
  } break;
  case ncclFloat64:
    memcpy(p, &v, 8);
    break;
  case ncclBfloat16: {
    uint16_t x = float_to_bf16((float)v);
    memcpy(p, &x, 2);
  } break;
  default:
    break;
  }
}

static double load(int t, const void *buf, size_t i)
{
  const char *p = (const char *)buf + i * tsize(t);
  switch (t) {
  case ncclInt8: {
    int8_t x;
    memcpy(&x, p, 1);
    return x;
  }
  case ncclUint8: {
    uint8_t x;
    memcpy(&x, p, 1);
    return x;
  }
  case ncclInt32: {
    int32_t x;
    memcpy(&x, p, 4);
    return x;
  }
  case ncclUint32: {
    uint32_t x;
    memcpy(&x, p, 4);
    return x;
  }
  case ncclInt64: {
    int64_t x;
    memcpy(&x, p, 8);
    return (double)x;
  }
  case ncclUint64: {
    uint64_t x;
    memcpy(&x, p, 8);
    return (double)x;
  }
  case ncclFloat16: {
    uint16_t x;
    memcpy(&x, p, 2);
    return half_to_float(x);
  }
  case ncclFloat32: {
    float x;
    memcpy(&x, p, 4);
    return x;
  }
  case ncclFloat64: {
    double x;
    memcpy(&x, p, 8);
    return x;
  }
  case ncclBfloat16: {
    uint16_t x;
    memcpy(&x, p, 2);
    return bf16_to_float(x);
  }
  default:
    return 0;
  }
}

/* The value rank r contributes at element i, small enough to stay exact. */
static double value(int t, int op, int r, size_t i, int seed)
{
  bool uns = (t == ncclUint8) || (t == ncclUint32) || (t == ncclUint64);
  long h = (long)((i * 2654435761u + (size_t)r * 40503u + (size_t)seed * 97u) % 9973u);
  if (op == ncclProd)
    return (double)(1 + (h % 2));
  if ((op == ncclMax) || (op == ncclMin))
    return uns ? (double)(h % 100) : (double)(h % 100 - 50);
  return uns ? (double)(h % 9) : (double)(h % 17 - 8);
}

/* Each rank multiplies its own input by its own scalar (as nccl-tests does). */
static double premul_scalar(int t, int r)
{
  return is_float(t) ? 0.5 * (double)(1 + r % 2) : (double)(1 + r % 3);
}

static double wrap(int t, double v)
{
  /* Integer results wrap as in the type (prod of up to 64 twos can wrap). */
  char tmp[8];
  store(t, tmp, 0, v);
  return load(t, tmp, 0);
}

/* The reduction of element i over n ranks. */
static double expected(int t, int op, int n, size_t i, int seed)
{
  double acc = 0;
  bool fl = is_float(t);
  for (int r = 0; r < n; r++) {
    double v = value(t, op, r, i, seed);
    if (op == OP_PREMUL)
      v *= premul_scalar(t, r);
    if ((op == ncclAvg) && fl)
      v /= n;
    if (r == 0)
      acc = v;
    else if (op == ncclProd)
      acc *= v;
    else if (op == ncclMax)
      acc = (v > acc) ? v : acc;
    else if (op == ncclMin)
      acc = (v < acc) ? v : acc;
    else
      acc += v;
  }
  if ((op == ncclAvg) && !fl)
    acc = (double)((int64_t)acc / n);
  return fl ? acc : wrap(t, acc);
}

static bool close_enough(int t, double got, double want)
{
  double tol;
  if (!is_float(t))
    return got == want;
  tol = (t == ncclFloat64) ? 1e-12 : (t == ncclFloat32) ? 1e-5 : (t == ncclFloat16) ? 1e-2 : 2e-2;
  return fabs(got - want) <= tol * fmax(1.0, fabs(want));
}

/* ------------------------------------------------------------------ runs */

struct rank_ctx {
  ncclComm_t comm;
  int rank;
  int n;
  long checks;
  int failed;
  char msg[512];
};

struct op_bufs {
  char *in;
  char *out;
  char *expect_in; /* ring/alltoall */
};

static int fail(struct rank_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct rank_ctx *c, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->msg, sizeof(c->msg), fmt, ap);
  va_end(ap);
  c->failed = 1;
  return 1;
}

struct tcase {
  int coll, type, op, inplace, root, seed;
  size_t count;
};

struct rank_state {
  struct rank_ctx *c;
  char *in;
  char *out;
  ncclWindow_t win_in, win_out; /* --symmetric 1 */
  size_t in_elems, out_elems;
  ncclRedOp_t red;
  uint64_t hash[2]; /* --same-bits: the result's hash and its complement */
  uint64_t most[2]; /* their maximum over the ranks */
};

#define CHECK_NCCL(_c, _call)                                                                      \
  do {                                                                                             \
    ncclResult_t _r = (_call);                                                                     \
    if (_r != ncclSuccess)                                                                         \
      return fail((_c), "%s:%d: %s failed: %d %s (%s)", __FILE__, __LINE__, #_call, (int)_r,       \
                  ncclGetErrorString(_r), ncclGetLastError((_c)->comm));                           \
  } while (0)

/* Does this rank use symmetric windows: --symmetric 1 every rank, 2 rank 0
 * only (a misuse: the others must report it, not hang). */
static bool sym_rank(const struct rank_ctx *c)
{
  return (g_cfg.symmetric == 1) || ((g_cfg.symmetric == 2) && (c->rank == 0));
}

/* A buffer of bytes: malloc, or with --symmetric 1 ncclMemAlloc memory in a
 * symmetric window of the rank's communicator (as nccl-tests -R 2). */
static int buf_alloc(struct rank_state *s, size_t bytes, char **p, ncclWindow_t *w)
{
  *w = NULL;
  if (!sym_rank(s->c)) {
    *p = malloc(bytes + (size_t)g_cfg.offset);
    if (*p == NULL)
      return fail(s->c, "out of memory");
    *p += g_cfg.offset;
    return 0;
  }
  CHECK_NCCL(s->c, ncclMemAlloc((void **)p, bytes));
  CHECK_NCCL(s->c, ncclCommWindowRegister(s->c->comm, *p, bytes, w, NCCL_WIN_COLL_SYMMETRIC));
  return 0;
}

static int buf_free(struct rank_state *s, char **p, ncclWindow_t *w)
{
  char *b = *p;

  *p = NULL;
  if ((b == NULL) || !sym_rank(s->c)) {
    free((b == NULL) ? NULL : b - g_cfg.offset);
    return 0;
  }
  CHECK_NCCL(s->c, ncclCommWindowDeregister(s->c->comm, *w));
  CHECK_NCCL(s->c, ncclMemFree(b));
  *w = NULL;
  return 0;
}

/* The grouped send/recv form of an API collective: same buffers and results. */
static int base_coll(int coll)
{
  return (coll == C_API_A2A)       ? C_A2A
         : (coll == C_API_GATHER)  ? C_GATHER
         : (coll == C_API_SCATTER) ? C_SCATTER
                                   : coll;
}

static int prepare(struct rank_state *s, const struct tcase *k0)
{
  struct tcase kb = *k0;
  const struct tcase *k = &kb;
  struct rank_ctx *c = s->c;
  int n = c->n, r = c->rank, t = k->type;
  size_t cnt = k->count, es = tsize(t);
  double sc = premul_scalar(t, r);
  char scal[8];

  kb.coll = base_coll(k0->coll);
  s->in_elems =
      (k->coll == C_RS || k->coll == C_A2A || k->coll == C_SCATTER) ? cnt * (size_t)n : cnt;
  s->out_elems =
      (k->coll == C_AG || k->coll == C_A2A || k->coll == C_GATHER) ? cnt * (size_t)n : cnt;
  if ((buf_alloc(s, s->in_elems * es + 64, &s->in, &s->win_in) != 0) ||
      (buf_alloc(s, s->out_elems * es + 64, &s->out, &s->win_out) != 0))
    return -1;
  memset(s->out, 0xa5, s->out_elems * es);
  for (size_t i = 0; i < s->in_elems; i++)
    store(t, s->in, i, value(t, k->op, r, i, k->seed));
  if (k->inplace) {
    /* The input sits where NCCL's in-place variant expects it. */
    size_t at = ((k->coll == C_AG) || (k->coll == C_GATHER)) ? (size_t)r * cnt : 0;
    if (k->coll == C_SCATTER) {
      /* in place at the root: recvbuff is block root of sendbuff (nothing to copy) */
    } else if (k->coll == C_RS) {
      if (buf_free(s, &s->out, &s->win_out) != 0)
        return -1;
    } else {
      memcpy(s->out + at * es, s->in, cnt * es);
    }
  }
  s->red = (k->op == OP_PREMUL) ? ncclSum : (ncclRedOp_t)k->op;
  if (k->op == OP_PREMUL) {
    store(t, scal, 0, sc);
    CHECK_NCCL(c, ncclRedOpCreatePreMulSum(&s->red, scal, (ncclDataType_t)t,
                                           ncclScalarHostImmediate, c->comm));
  }
  return 0;
}

static int issue(struct rank_state *s, const struct tcase *k)
{
  struct rank_ctx *c = s->c;
  int n = c->n, r = c->rank;
  ncclDataType_t t = (ncclDataType_t)k->type;
  size_t cnt = k->count, es = tsize(k->type);
  char *in = s->in, *out = s->out;

  if (k->inplace) {
    if (k->coll == C_AG)
      in = out + (size_t)r * cnt * es;
    else if (k->coll == C_RS)
      out = in + (size_t)r * cnt * es;
    else if (k->coll == C_API_GATHER)
      in = out + (size_t)r * cnt * es; /* at the root (others: their own block of out) */
    else if ((k->coll == C_API_SCATTER) && (r == k->root))
      out = in + (size_t)r * cnt * es;
    else if ((k->coll != C_SR) && (k->coll != C_RECV_FIRST) && (k->coll != C_A2A) &&
             (k->coll != C_GATHER) && (k->coll != C_SCATTER) && (k->coll != C_API_SCATTER))
      in = out;
  }
  switch (k->coll) {
  case C_AR:
    CHECK_NCCL(c, ncclAllReduce(in, out, cnt, t, s->red, c->comm, NULL));
    break;
  case C_BC:
    CHECK_NCCL(c, ncclBroadcast(in, out, cnt, t, k->root, c->comm, NULL));
    break;
  case C_RED:
    CHECK_NCCL(c, ncclReduce(in, out, cnt, t, s->red, k->root, c->comm, NULL));
    break;
  case C_AG:
    CHECK_NCCL(c, ncclAllGather(in, out, cnt, t, c->comm, NULL));
    break;
  case C_RS:
    CHECK_NCCL(c, ncclReduceScatter(in, out, cnt, t, s->red, c->comm, NULL));
    break;
  case C_SR:
    CHECK_NCCL(c, ncclGroupStart());
    CHECK_NCCL(c, ncclSend(in, cnt, t, (r + 1) % n, c->comm, NULL));
    CHECK_NCCL(c, ncclRecv(out, cnt, t, (r + n - 1) % n, c->comm, NULL));
    CHECK_NCCL(c, ncclGroupEnd());
    break;
  case C_RECV_FIRST:
    CHECK_NCCL(c, ncclGroupStart());
    CHECK_NCCL(c, ncclRecv(out, cnt, t, (r + n - 1) % n, c->comm, NULL));
    CHECK_NCCL(c, ncclSend(in, cnt, t, (r + 1) % n, c->comm, NULL));
    CHECK_NCCL(c, ncclGroupEnd());
    break;
  case C_GATHER: /* grouped send/recv: every rank sends to the root, which receives from all */
    CHECK_NCCL(c, ncclGroupStart());
    CHECK_NCCL(c, ncclSend(in, cnt, t, k->root, c->comm, NULL));
    if (r == k->root)
      for (int p = 0; p < n; p++)
        CHECK_NCCL(c, ncclRecv(out + (size_t)p * cnt * es, cnt, t, p, c->comm, NULL));
    CHECK_NCCL(c, ncclGroupEnd());
    break;
  case C_SCATTER: /* the root sends block p to rank p */
    CHECK_NCCL(c, ncclGroupStart());
    if (r == k->root)
      for (int p = 0; p < n; p++)
        CHECK_NCCL(c, ncclSend(in + (size_t)p * cnt * es, cnt, t, p, c->comm, NULL));
    CHECK_NCCL(c, ncclRecv(out, cnt, t, k->root, c->comm, NULL));
    CHECK_NCCL(c, ncclGroupEnd());
    break;
  case C_API_A2A:
    CHECK_NCCL(c, ncclAlltoAll(in, out, cnt, t, c->comm, NULL));
    break;
  case C_API_GATHER:
    CHECK_NCCL(c, ncclGather(in, (r == k->root) ? out : NULL, cnt, t, k->root, c->comm, NULL));
    break;
  case C_API_SCATTER:
    CHECK_NCCL(c, ncclScatter((r == k->root) ? in : NULL, out, cnt, t, k->root, c->comm, NULL));
    break;
  case C_A2A:
    CHECK_NCCL(c, ncclGroupStart());
    for (int p = 0; p < n; p++) {
      CHECK_NCCL(c, ncclSend(in + (size_t)p * cnt * es, cnt, t, p, c->comm, NULL));
      CHECK_NCCL(c, ncclRecv(out + (size_t)p * cnt * es, cnt, t, p, c->comm, NULL));
    }
    CHECK_NCCL(c, ncclGroupEnd());
    break;
  }
  return 0;
}

static int verify(struct rank_state *s, const struct tcase *k0)
{
  struct tcase kb = *k0;
  const struct tcase *k = &kb;
  struct rank_ctx *c = s->c;
  int n = c->n, r = c->rank, t = k->type;
  size_t cnt = k->count, es = tsize(t);
  const char *res;

  kb.coll = base_coll(k0->coll);
  res = (k->coll == C_RS && k->inplace)                            ? s->in + (size_t)r * cnt * es
        : ((k->coll == C_SCATTER) && k->inplace && (r == k->root)) ? s->in + (size_t)r * cnt * es
                                                                   : s->out;
  size_t m = (k->coll == C_AG || k->coll == C_A2A || k->coll == C_GATHER) ? cnt * (size_t)n : cnt;

  if (((k->coll == C_RED) || (k->coll == C_GATHER)) && (r != k->root))
    m = 0;
  for (size_t i = 0; i < m; i++) {
    double want, got = load(t, res, i);
    switch (k->coll) {
    case C_AR:
    case C_RED:
      want = expected(t, k->op, n, i, k->seed);
      break;
    case C_RS:
      want = expected(t, k->op, n, (size_t)r * cnt + i, k->seed);
      break;
    case C_BC:
      want = value(t, k->op, k->root, i, k->seed);
      break;
    case C_AG:
      want = value(t, k->op, (int)(i / cnt), i % cnt, k->seed);
      break;
    case C_SR:
    case C_RECV_FIRST:
      want = value(t, k->op, (r + n - 1) % n, i, k->seed);
      break;
    case C_GATHER:
      want = value(t, k->op, (int)(i / cnt), i % cnt, k->seed);
      break;
    case C_SCATTER:
      want = value(t, k->op, k->root, (size_t)r * cnt + i, k->seed);
      break;
    default: /* alltoall: block p of rank r came from block r of rank p */
      want = value(t, k->op, (int)(i / cnt), (size_t)r * cnt + i % cnt, k->seed);
      break;
    }
    if (!close_enough(t, got, want))
      return fail(c, "rank %d: %s %s %s count %zu %s root %d: element %zu is %.17g, expected %.17g",
                  r, coll_names[k0->coll], type_names[t], op_names[k->op], cnt,
                  k->inplace ? "in-place" : "out-of-place", k->root, i, got, want);
    c->checks++;
  }
  if (g_cfg.same_bits && (k->coll == C_AR)) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < cnt * es; i++)
      h = (h ^ (uint8_t)res[i]) * 1099511628211ull;
    s->hash[0] = h;
    s->hash[1] = ~h;
  }
  if (k->op == OP_PREMUL)
    CHECK_NCCL(c, ncclRedOpDestroy(s->red, c->comm));
  if ((buf_free(s, &s->in, &s->win_in) != 0) || (buf_free(s, &s->out, &s->win_out) != 0))
    return -1;
  return 0;
}

static bool reduces(int coll)
{
  return (coll == C_AR) || (coll == C_RED) || (coll == C_RS);
}

/* --same-bits: the all-reduce's result hashes alike on every rank (the
 * maximum of h and of ~h over the ranks are this rank's). */
static int same_bits(struct rank_state *st, int nr, const struct tcase *k)
{
  if (nr > 1)
    CHECK_NCCL(st[0].c, ncclGroupStart());
  for (int i = 0; i < nr; i++)
    CHECK_NCCL(st[i].c,
               ncclAllReduce(st[i].hash, st[i].most, 2, ncclUint64, ncclMax, st[i].c->comm, NULL));
  if (nr > 1)
    CHECK_NCCL(st[0].c, ncclGroupEnd());
  for (int i = 0; i < nr; i++) {
    if ((st[i].most[0] != st[i].hash[0]) || (st[i].most[1] != st[i].hash[1]))
      return fail(st[i].c,
                  "rank %d: allreduce %s %s count %zu %s: the result's bits differ "
                  "between the ranks",
                  st[i].c->rank, type_names[k->type], op_names[k->op], k->count,
                  k->inplace ? "in-place" : "out-of-place");
    st[i].c->checks++;
  }
  return 0;
}

/* Runs every case on the ranks ctx[0..nr-1] this thread drives (nr > 1: in one group). */
static int run_cases(struct rank_ctx *ctx, int nr)
{
  struct rank_state st[MAX_RANKS];
  const struct cfg *g = &g_cfg;
  int seed = 0;

  for (int it = 0; it < g->iters; it++)
    for (int ci = 0; ci < g->n_colls; ci++)
      for (int ti = 0; ti < g->n_types; ti++)
        for (int oi = 0; oi < (reduces(g->colls[ci]) ? g->n_ops : 1); oi++)
          for (int si = 0; si < g->n_sizes; si++)
            for (int ip = 0; ip < 2; ip++) {
              int n = ctx[0].n;
              int my_seed = ++seed;
              struct tcase k = {.coll = g->colls[ci],
                                .type = g->types[ti],
                                .op = reduces(g->colls[ci]) ? g->ops[oi] : ncclSum,
                                .inplace = ip,
                                .root = (my_seed % n),
                                .seed = my_seed,
                                .count = g->sizes[si]};
              /* In place: NCCL's variants of the API collectives (not AlltoAll). */
              if (ip && ((k.coll == C_SR) || (k.coll == C_RECV_FIRST) || (k.coll == C_A2A) ||
                         (k.coll == C_GATHER) || (k.coll == C_SCATTER) || (k.coll == C_API_A2A)))
                continue;
              for (int i = 0; i < nr; i++) {
                memset(&st[i], 0, sizeof(st[i]));
                st[i].c = &ctx[i];
                if (prepare(&st[i], &k))
                  return 1;
              }
              if (nr > 1)
                CHECK_NCCL(&ctx[0], ncclGroupStart());
              for (int i = 0; i < nr; i++)
                if (issue(&st[i], &k))
                  return 1;
              if (nr > 1)
                CHECK_NCCL(&ctx[0], ncclGroupEnd());
              for (int i = 0; i < nr; i++)
                if (verify(&st[i], &k))
                  return 1;
              if (g->same_bits && (k.coll == C_AR) && same_bits(st, nr, &k))
                return 1;
            }
  return 0;
}

static void die(const char *what, ncclResult_t res)
{
  fprintf(stderr, "mp_coll: %s failed: %d %s (%s)\n", what, (int)res, ncclGetErrorString(res),
          ncclGetLastError(NULL));
  exit(1);
}

/* ncclCommInitRankScalable over n_ids roots; world (the launcher's) carries the ids. */
static ncclComm_t scalable_comm(ncclComm_t world, int n_ids)
{
  ncclUniqueId *all;
  ncclUniqueId mine;
  ncclComm_t comm = NULL;
  ncclResult_t res;
  int rank = -1;
  int n = 0;

  ncclCommUserRank(world, &rank);
  ncclCommCount(world, &n);
  if ((n_ids < 1) || (n_ids > n))
    die("--scalable (nId out of 1..nranks)", ncclInvalidArgument);
  all = calloc((size_t)n, sizeof(*all));
  memset(&mine, 0, sizeof(mine));
  if (rank < n_ids) {
    res = ncclGetUniqueId(&mine);
    if (res != ncclSuccess)
      die("ncclGetUniqueId", res);
  }
  res = ncclAllGather(&mine, all, sizeof(mine), ncclUint8, world, NULL);
  if (res != ncclSuccess)
    die("ncclAllGather of the ids", res);
  res = ncclCommInitRankScalable(&comm, n, rank, n_ids, all, NULL);
  if (res != ncclSuccess)
    die("ncclCommInitRankScalable", res);
  free(all);
  return comm;
}

/* ncclCommGrow from a parent of ranks 0..n_old-1 to every rank of world. */
static ncclComm_t grown_comm(ncclComm_t world, int n_old, ncclComm_t *parent_out)
{
  ncclComm_t parent = NULL;
  ncclComm_t grown = NULL;
  ncclUniqueId id;
  ncclResult_t res;
  int rank = -1;
  int n = 0;
  int prank = -1;

  ncclCommUserRank(world, &rank);
  ncclCommCount(world, &n);
  if ((n_old < 1) || (n_old >= n))
    die("--grow (parent size out of 1..nranks-1)", ncclInvalidArgument);
  res = ncclCommSplit(world, (rank < n_old) ? 0 : NCCL_SPLIT_NOCOLOR, rank, &parent, NULL);
  if (res != ncclSuccess)
    die("ncclCommSplit", res);
  memset(&id, 0, sizeof(id));
  if (parent != NULL)
    ncclCommUserRank(parent, &prank);
  if (prank == 0) {
    res = ncclCommGetUniqueId(parent, &id);
    if (res != ncclSuccess)
      die("ncclCommGetUniqueId", res);
  }
  /* The id travels to the new ranks out of band (here: the launcher's communicator). */
  res = ncclBroadcast(&id, &id, sizeof(id), ncclUint8, 0, world, NULL);
  if (res != ncclSuccess)
    die("ncclBroadcast of the id", res);
  if (parent != NULL)
    res = ncclCommGrow(parent, n, (prank == 0) ? &id : NULL, -1, &grown, NULL);
  else
    res = ncclCommGrow(NULL, n, &id, rank, &grown, NULL);
  if (res != ncclSuccess)
    die("ncclCommGrow", res);
  *parent_out = parent;
  return grown;
}

/* The parent of a grow keeps working: an all-reduce of its ranks. */
static void parent_still_works(ncclComm_t parent)
{
  int32_t x = 0;
  int rank = -1;
  int n = 0;
  ncclResult_t res;

  ncclCommUserRank(parent, &rank);
  ncclCommCount(parent, &n);
  x = rank + 1;
  res = ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, parent, NULL);
  if (res != ncclSuccess)
    die("ncclAllReduce on the parent after the grow", res);
  if (x != n * (n + 1) / 2) {
    fprintf(stderr, "mp_coll: all-reduce on the parent after the grow gave %d, expected %d\n",
            (int)x, n * (n + 1) / 2);
    exit(1);
  }
}

static void *thread_main(void *arg)
{
  struct rank_ctx *c = arg;
  (void)run_cases(c, 1);
  return NULL;
}

static int parse_list(const char *arg, const char *const *names, int n_names, int *out)
{
  char buf[512];
  int n = 0;
  snprintf(buf, sizeof(buf), "%s", arg);
  for (char *tok = strtok(buf, ","); tok != NULL && n < MAX_LIST; tok = strtok(NULL, ",")) {
    int k = -1;
    for (int i = 0; i < n_names; i++)
      if (strcmp(tok, names[i]) == 0)
        k = i;
    if (k < 0) {
      fprintf(stderr, "mp_coll: unknown name '%s'\n", tok);
      exit(2);
    }
    out[n++] = k;
  }
  return n;
}

int main(int argc, char **argv)
{
  struct cfg *g = &g_cfg;
  static const size_t default_sizes[] = {0, 1, 7, 1000, 4099, 262147};
  struct rank_ctx ctx[MAX_RANKS];
  ncclComm_t world = NULL;
  ncclComm_t parent = NULL;
  int nr = 1;
  long checks = 0;

  memset(g, 0, sizeof(*g));
  g->n_types = parse_list("int8,uint8,int32,uint32,int64,uint64,half,float,double,bfloat16",
                          type_names, 12, g->types);
  g->n_ops = parse_list("sum,prod,max,min,avg,premulsum", op_names, 6, g->ops);
  g->n_colls = parse_list(
      "allreduce,broadcast,reduce,allgather,reducescatter,sendrecv,alltoall,gather,scatter",
      coll_names, N_COLLS, g->colls);
  memcpy(g->sizes, default_sizes, sizeof(default_sizes));
  g->n_sizes = 6;
  g->iters = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--types") == 0) {
      g->n_types = parse_list(argv[i + 1], type_names, 12, g->types);
    } else if (strcmp(argv[i], "--ops") == 0) {
      g->n_ops = parse_list(argv[i + 1], op_names, 6, g->ops);
    } else if (strcmp(argv[i], "--colls") == 0) {
      g->n_colls = parse_list(argv[i + 1], coll_names, N_COLLS, g->colls);
    } else if (strcmp(argv[i], "--sizes") == 0) {
      char buf[512];
      g->n_sizes = 0;
      snprintf(buf, sizeof(buf), "%s", argv[i + 1]);
      for (char *tok = strtok(buf, ","); tok != NULL && g->n_sizes < MAX_LIST;
           tok = strtok(NULL, ","))
        g->sizes[g->n_sizes++] = strtoull(tok, NULL, 0);
    } else if (strcmp(argv[i], "--iters") == 0) {
      g->iters = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--threads") == 0) {
      g->threads = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--group") == 0) {
      g->group = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--scalable") == 0) {
      g->scalable = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--grow") == 0) {
      g->grow = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--symmetric") == 0) {
      g->symmetric = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--same-bits") == 0) {
      g->same_bits = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--offset") == 0) {
      g->offset = atoi(argv[i + 1]);
    } else {
      fprintf(stderr, "mp_coll: unknown option %s\n", argv[i]);
      return 2;
    }
  }
  memset(ctx, 0, sizeof(ctx));
  if ((g->threads > 0) || (g->group > 0)) {
    ncclComm_t comms[MAX_RANKS];
    nr = (g->threads > 0) ? g->threads : g->group;
    if ((nr > MAX_RANKS) || (ncclCommInitAll(comms, nr, NULL) != ncclSuccess)) {
      fprintf(stderr, "mp_coll: ncclCommInitAll(%d) failed: %s\n", nr, ncclGetLastError(NULL));
      return 1;
    }
    for (int i = 0; i < nr; i++)
      ctx[i] = (struct rank_ctx){.comm = comms[i], .rank = i, .n = nr};
    if (g->threads > 0) {
      pthread_t th[MAX_RANKS];
      for (int i = 0; i < nr; i++)
        pthread_create(&th[i], NULL, thread_main, &ctx[i]);
      for (int i = 0; i < nr; i++)
        pthread_join(th[i], NULL);
    } else {
      (void)run_cases(ctx, nr);
    }
  } else {
    /* With NCCL_COMM_ID set, ncclGetUniqueId returns that one id (as in
     * NCCL): the launcher's communicator then comes from MASTER_ADDR:PORT. */
    if (g->scalable > 0)
      unsetenv("NCCL_COMM_ID");
    if (meshcclCommInitFromEnv(&world, NULL) != ncclSuccess) {
      fprintf(stderr, "mp_coll: init failed: %s\n", ncclGetLastError(NULL));
      return 1;
    }
    if (g->scalable > 0)
      ctx[0].comm = scalable_comm(world, g->scalable);
    else if (g->grow > 0)
      ctx[0].comm = grown_comm(world, g->grow, &parent);
    else
      ctx[0].comm = world;
    ncclCommUserRank(ctx[0].comm, &ctx[0].rank);
    ncclCommCount(ctx[0].comm, &ctx[0].n);
    (void)run_cases(ctx, 1);
    if ((parent != NULL) && !ctx[0].failed)
      parent_still_works(parent);
  }
  for (int i = 0; i < nr; i++) {
    if (ctx[i].failed) {
      fprintf(stderr, "mp_coll: FAILED: %s\n", ctx[i].msg);
      return 1;
    }
    checks += ctx[i].checks;
  }
  for (int i = 0; i < nr; i++)
    ncclCommDestroy(ctx[i].comm);
  if (parent != NULL)
    ncclCommDestroy(parent);
  if ((world != NULL) && (world != ctx[0].comm))
    ncclCommDestroy(world);
  printf("ok %ld checks\n", checks);
  return 0;
}
