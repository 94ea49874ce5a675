/* SPDX-License-Identifier: Apache-2.0 */
/*
 * membw: one core's memcpy bandwidth at 1 MiB (cache), 16 MiB (last-level
 * cache on most hosts) and 256 MiB (DRAM): the ceiling a host-memory
 * collective's copy and reduce loops run against. Reports the bytes copied
 * per second (each byte is read once and written once, so the memory traffic
 * is twice that), best of several timed runs of at least 0.2 s.
 *
 *   build/bench/membw [sizes in MiB...]     (default: 1 16 256)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIN_RUN_SEC 0.2
#define N_RUNS      5

static double now_sec(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Copies per second at `bytes`, best of N_RUNS runs of at least MIN_RUN_SEC. */
static double copy_gbps(char *dst, const char *src, size_t bytes)
{
  double best = 0;

  for (int run = 0; run < N_RUNS; run++) {
    size_t reps = 0;
    double t0 = now_sec();
    double dt;

    do {
      memcpy(dst, src, bytes);
      /* Keep the compiler from dropping copies whose result is never read. */
      __asm__ __volatile__("" : : "r"(dst) : "memory");
      reps++;
      dt = now_sec() - t0;
    } while (dt < MIN_RUN_SEC);
    if ((double)bytes * (double)reps / dt / 1e9 > best)
      best = (double)bytes * (double)reps / dt / 1e9;
  }
  return best;
}

int main(int argc, char **argv)
{
  static const size_t default_mib[] = {1, 16, 256};
  size_t n_sizes = (argc > 1) ? (size_t)(argc - 1) : sizeof(default_mib) / sizeof(default_mib[0]);

  printf("# membw: memcpy on one core, best of %d runs of >= %.1f s\n", N_RUNS, MIN_RUN_SEC);
  printf("# %10s  %10s\n", "size (B)", "copy GB/s");
  for (size_t i = 0; i < n_sizes; i++) {
    size_t mib = (argc > 1) ? strtoul(argv[i + 1], NULL, 0) : default_mib[i];
    size_t bytes = mib << 20;
    char *src = malloc(bytes);
    char *dst = malloc(bytes);

    if ((mib == 0) || (src == NULL) || (dst == NULL)) {
      fprintf(stderr, "membw: cannot test %zu MiB (bad size or out of memory)\n", mib);
      free(src);
      free(dst);
      return 1;
    }
    memset(src, 1, bytes); /* fault the pages in before timing */
    memset(dst, 0, bytes);
    printf("  %10zu  %10.2f\n", bytes, copy_gbps(dst, src, bytes));
    fflush(stdout);
    free(src);
    free(dst);
  }
  return 0;
}
