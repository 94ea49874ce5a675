/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The two-core probe both bench/core_pair.c (two processes) and bench/limit.c
 * (two threads) run: a cache line's round trip between two sides, and a FIFO
 * between them in shared memory shaped like the SHM transport's (PAIR_N_SLOTS
 * slots of PAIR_SLOT_BYTES; side 0 copies its private buffer into the slots,
 * side 1 copies them out; or two such FIFOs run both ways at once, each side
 * filling one and emptying the other, as every rank of a ring does).
 * Header-only: core_pair is built alone by `make
 * bench-mpi`, without the project's build.
 */
#ifndef MC_BENCH_PAIR_PROBE_H
#define MC_BENCH_PAIR_PROBE_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAIR_LINE_BYTES 64
#define PAIR_SLOT_BYTES (128u << 10)
#define PAIR_N_SLOTS    8

/* What the two sides share (a page of shared memory, or one process's). */
struct mc_pair {
  _Alignas(PAIR_LINE_BYTES) atomic_uint_fast64_t ping;
  _Alignas(PAIR_LINE_BYTES) atomic_uint_fast64_t pong;
  _Alignas(PAIR_LINE_BYTES) atomic_uint_fast64_t head; /* slots filled */
  _Alignas(PAIR_LINE_BYTES) atomic_uint_fast64_t tail; /* slots emptied */
  _Alignas(PAIR_LINE_BYTES) atomic_int failed;
  double rtt_ns; /* the figures, as the probe reports them */
  double gbps;
  _Alignas(4096) char slots[PAIR_N_SLOTS][PAIR_SLOT_BYTES];
};

static inline double pair_now_sec(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits until *v reaches want; 0 when the other side failed or t_end passed. */
static inline int pair_wait(struct mc_pair *sh, atomic_uint_fast64_t *v, uint64_t want,
                            double t_end)
{
  unsigned spins = 0;

  while (atomic_load_explicit(v, memory_order_acquire) < want) {
    if (((++spins & 0xffff) == 0) && ((atomic_load(&sh->failed) != 0) || (pair_now_sec() > t_end)))
      return 0;
  }
  return 1;
}

static inline int pair_cmp_double(const void *a, const void *b)
{
  double x = *(const double *)a;
  double y = *(const double *)b;

  return (x > y) - (x < y);
}

/* Side who's part of n_batches batches of trips round trips (side 0 pings,
 * side 1 answers; *n counts the trips on both sides): batch_ns[] the time of
 * one trip in each batch, sorted. 0 on failure. */
static inline int pair_rtt(struct mc_pair *sh, int who, int n_batches, int trips, double t_end,
                           uint64_t *n, double *batch_ns)
{
  for (int b = 0; b < n_batches; b++) {
    double tb = pair_now_sec();
    for (int i = 0; i < trips; i++) {
      ++*n;
      if (who == 0) {
        atomic_store_explicit(&sh->ping, *n, memory_order_release);
        if (!pair_wait(sh, &sh->pong, *n, t_end))
          return 0;
      } else {
        if (!pair_wait(sh, &sh->ping, *n, t_end))
          return 0;
        atomic_store_explicit(&sh->pong, *n, memory_order_release);
      }
    }
    batch_ns[b] = (pair_now_sec() - tb) * 1e9 / trips;
  }
  qsort(batch_ns, (size_t)n_batches, sizeof(batch_ns[0]), pair_cmp_double);
  return 1;
}

/* Side 1: waits for slot k of the FIFO to be filled; the slot, or NULL on
 * failure. pair_fifo_release() frees it once read. */
static inline char *pair_fifo_take(struct mc_pair *sh, uint64_t k, double t_end)
{
  if (!pair_wait(sh, &sh->head, k + 1, t_end))
    return NULL;
  return sh->slots[k % PAIR_N_SLOTS];
}

static inline void pair_fifo_release(struct mc_pair *sh, uint64_t k)
{
  atomic_store_explicit(&sh->tail, k + 1, memory_order_release);
}

/* Slot k of the FIFO: side 0 fills it from mine, side 1 empties it into
 * mine. 0 on failure. */
static inline int pair_fifo_step(struct mc_pair *sh, int who, uint64_t k, char *mine, double t_end)
{
  char *slot = sh->slots[k % PAIR_N_SLOTS];

  if (who == 0) {
    if (!pair_wait(sh, &sh->tail, (k >= PAIR_N_SLOTS) ? k - PAIR_N_SLOTS + 1 : 0, t_end))
      return 0;
    memcpy(slot, mine, PAIR_SLOT_BYTES);
    atomic_store_explicit(&sh->head, k + 1, memory_order_release);
  } else {
    if (pair_fifo_take(sh, k, t_end) == NULL)
      return 0;
    memcpy(mine, slot, PAIR_SLOT_BYTES);
    pair_fifo_release(sh, k);
  }
  return 1;
}

/* A step of two FIFOs run both ways at once: this side fills slot k_out of
 * `out` (as its side 0) from src, then empties slot k_in of `in` (as its
 * side 1) into dst; the other side does the same with the FIFOs swapped.
 * 0 on failure. */
static inline int pair_duplex_step(struct mc_pair *out, uint64_t k_out, struct mc_pair *in,
                                   uint64_t k_in, char *src, char *dst, double t_end)
{
  return pair_fifo_step(out, 0, k_out, src, t_end) && pair_fifo_step(in, 1, k_in, dst, t_end);
}

#endif /* MC_BENCH_PAIR_PROBE_H */
