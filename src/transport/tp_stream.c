/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Streamed slot writes over SHM (struct mc_conn_stream, transport.h).
 *
 * Plain stores leave a slot's lines dirty in the sender's cache; the
 * receiver's reads pull them across, one cache-to-cache transfer a line,
 * and the sender's next writes to them invalidate the receiver's copies.
 * Streaming (non-temporal) stores write whole lines to memory instead, and
 * the receiver reads them from there. Near cores (one shared cache) move a
 * line faster than memory delivers it; far ones (another core complex or
 * socket) slower. On the 2-core VM of docs/ARCHITECTURE.md both happen to
 * one pair of processes within seconds.
 *
 * The measure: the receiver writes head at every slot it releases, so the
 * sender's first load of head after that is one transfer of a line from the
 * receiver's core. On every 8th step the sender times that load (TSC, fenced)
 * when it returns a new value, keeps the last 16 verdicts (slower than
 * MESHCCL_SHM_STREAM_NS or not) and streams while at least 8 were slower.
 * The TSC's rate is calibrated once per process against CLOCK_MONOTONIC,
 * from the first timed load on, over at least 2 ms: until then no verdict.
 */
#include "transport/transport.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "params.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#include <x86intrin.h>
#endif

#define STREAM_MIN_BYTES 1024    /* smaller slot writes stay plain */
#define CALIB_MIN_NS     2000000 /* TSC calibration window */
#define HIST_SLOW_MIN    8       /* of the last 16 transfers, slower ones to stream */

#if defined(__x86_64__)
/* The process's TSC calibration: the pair taken at the first timed load,
 * then the rate, in ticks per 2^20 ns (0: not yet). */
static pthread_once_t calib_once = PTHREAD_ONCE_INIT;
static uint64_t calib_tsc0;
static uint64_t calib_ns0;
static uint64_t calib_ticks_per_mns;

static uint64_t mono_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void calib_start(void)
{
  calib_ns0 = mono_ns();
  calib_tsc0 = __rdtsc();
}

/* Ticks per 2^20 ns once at least CALIB_MIN_NS have passed since the first
 * call (0 before). Threads may race to set the rate: each writes a valid
 * value from the same start pair. */
static uint64_t tsc_rate(void)
{
  uint64_t rate = __atomic_load_n(&calib_ticks_per_mns, __ATOMIC_RELAXED);
  uint64_t now;
  uint64_t tsc;

  if (rate != 0)
    return rate;
  (void)pthread_once(&calib_once, calib_start);
  now = mono_ns();
  tsc = __rdtsc();
  if ((now - calib_ns0 < CALIB_MIN_NS) || (tsc <= calib_tsc0))
    return 0;
  rate = (uint64_t)(((unsigned __int128)(tsc - calib_tsc0) << 20) / (now - calib_ns0));
  if (rate == 0)
    rate = 1;
  __atomic_store_n(&calib_ticks_per_mns, rate, __ATOMIC_RELAXED);
  return rate;
}
#endif

void mc_conn_stream_init(struct mc_conn *c)
{
  memset(&c->stream, 0, sizeof(c->stream));
#if defined(__x86_64__)
  c->stream.mode = (int8_t)mc_param_int(MC_P_SHM_STREAM);
  c->stream.on = (c->stream.mode == 1);
#else
  c->stream.mode = 0; /* no streaming stores to use */
#endif
}

void mc_conn_stream_note(struct mc_conn_stream *st, bool slow)
{
  st->hist = (uint16_t)((st->hist << 1) | (slow ? 1u : 0u));
  st->n_timed++;
  if ((__builtin_popcount(st->hist) >= HIST_SLOW_MIN) != st->on) {
    st->on = !st->on;
    st->n_switch++;
  }
}

bool mc_conn_send_ready_timed(struct mc_conn *c)
{
#if defined(__x86_64__)
  struct mc_conn_stream *st = &c->stream;
  uint64_t t0;
  uint64_t t1;
  uint64_t head;

  _mm_lfence();
  t0 = __rdtsc();
  _mm_lfence();
  head = __atomic_load_n(&c->ctrl->head, __ATOMIC_ACQUIRE);
  _mm_lfence();
  t1 = __rdtsc();
  if (head == st->seen_head)
    return head + MC_STEPS > c->step;
  st->seen_head = head;
  if (st->bound_ticks == 0) {
    uint64_t rate = tsc_rate();
    if (rate == 0)
      return head + MC_STEPS > c->step;
    st->bound_ticks = ((uint64_t)mc_param_int(MC_P_SHM_STREAM_NS) * rate) >> 20;
  }
  mc_conn_stream_note(st, t1 - t0 > st->bound_ticks);
  return head + MC_STEPS > c->step;
#else
  return mc_conn_send_ready(c);
#endif
}

void mc_copy_stream(void *dst, const void *src, size_t bytes)
{
#if defined(__x86_64__)
  if (((uintptr_t)dst & 15) == 0) {
    __m128i *d = dst;
    const char *s = src;
    size_t n = bytes / 16;
    for (size_t i = 0; i < n; i++) {
      __m128i v;
      memcpy(&v, s + 16 * i, 16);
      _mm_stream_si128(d + i, v);
    }
    memcpy((char *)dst + n * 16, s + n * 16, bytes - n * 16);
    _mm_sfence();
    return;
  }
#endif
  memcpy(dst, src, bytes);
}

void mc_conn_slot_copy(const struct mc_conn *c, void *slot, const void *src, size_t bytes)
{
  if (c->stream.on && (bytes >= STREAM_MIN_BYTES))
    mc_copy_stream(slot, src, bytes);
  else
    memcpy(slot, src, bytes);
}
