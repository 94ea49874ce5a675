/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reduction kernel throughput (src/coll/coll_reduce*.c): GB/s of
 * dst = a OP b for float32 sum, bfloat16 sum and int32 max at 64 KiB, 1 MiB
 * and 64 MiB per input, for every instruction set this CPU runs. GB/s counts
 * the bytes moved (two inputs read, one output written). Not a test: timings
 * belong here, not in the tests. Usage: reduce_bench [min-seconds-per-point]
 */
#include "coll/coll_reduce.h"
#include "coll/coll_reduce_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *const isas[] = {"avx512", "avx2", "sse2", "neon", "generic"};

static double now_s(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Best GB/s of several timed rounds, each at least min_s long. */
static double measure(const struct mc_redop *op, void *d, const void *a, const void *b,
                      size_t count, double min_s)
{
  size_t bytes = count * mc_type_size(op->type);
  double best = 0;

  mc_reduce(op, d, a, b, count, 0); /* warm up: page faults, caches */
  for (int round = 0; round < 3; round++) {
    long iters = 0;
    double t0 = now_s(), t;
    do {
      mc_reduce(op, d, a, b, count, 0);
      iters++;
      t = now_s() - t0;
    } while (t < min_s);
    double gbs = 3.0 * (double)bytes * (double)iters / t / 1e9;
    if (gbs > best)
      best = gbs;
  }
  return best;
}

int main(int argc, char **argv)
{
  static const size_t sizes[] = {64u << 10, 1u << 20, 64u << 20};
  static const struct {
    const char *name;
    ncclDataType_t type;
    ncclRedOp_t op;
  } cases[] = {
      {"float32 sum", ncclFloat32, ncclSum},
      {"bfloat16 sum", ncclBfloat16, ncclSum},
      {"int32 max", ncclInt32, ncclMax},
  };
  double min_s = (argc > 1) ? atof(argv[1]) : 0.2;
  size_t max_bytes = sizes[2];
  unsigned char *a = malloc(max_bytes), *b = malloc(max_bytes), *d = malloc(max_bytes);

  if ((a == NULL) || (b == NULL) || (d == NULL)) {
    fprintf(stderr, "reduce_bench: cannot allocate 3 x %zu bytes\n", max_bytes);
    return 1;
  }
  /* finite, varied values for every type: small positive bytes */
  for (size_t i = 0; i < max_bytes; i++) {
    a[i] = (unsigned char)(0x20 + (i * 7) % 31);
    b[i] = (unsigned char)(0x20 + (i * 13) % 29);
  }
  memset(d, 0, max_bytes);

  printf("%-8s %-14s %12s %12s %12s   (GB/s = 3 x bytes per input / time)\n", "isa", "op", "64 KiB",
         "1 MiB", "64 MiB");
  for (size_t i = 0; i < sizeof(isas) / sizeof(isas[0]); i++) {
    if (mc_reduce_force_isa(isas[i]) != ncclSuccess)
      continue;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
      struct mc_redop op;
      if (mc_redop_builtin(cases[c].type, cases[c].op, 2, &op) != ncclSuccess)
        return 1;
      printf("%-8s %-14s", mc_reduce_isa(), cases[c].name);
      for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t count = sizes[s] / mc_type_size(op.type);
        printf(" %12.1f", measure(&op, d, a, b, count, min_s));
        fflush(stdout);
      }
      printf("\n");
    }
  }
  mc_reduce_force_isa(NULL);
  free(a);
  free(b);
  free(d);
  return 0;
}
