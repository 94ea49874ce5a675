/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Streamed slot writes over SHM (struct mc_conn_stream, transport.h).
 *
 * Plain stores leave a slot's lines dirty in the sender's cache; the
 * receiver's reads pull them across, one cache-to-cache transfer a line,
 * and the sender's next writes to them invalidate the receiver's copies.
 * Streaming (non-temporal) stores write whole lines to memory instead, and
 * the receiver reads them from there. Which is faster is the host's matter:
 * near cores (one shared cache) move a line faster than memory delivers it,
 * far ones may not, and on a VM the placement changes. A latency bound
 * measured on one machine picked the slower mode on another (a 16-core Xeon
 * VM whose every pair of cores is "far": plain stores 2.6-3.85 GB/s,
 * streaming 2.6-2.9 at 2 ranks), so in auto mode the sender measures the
 * rate itself:
 *
 *   - the first calibration starts after MC_STREAM_WARMUP_STEPS large
 *     steps with plain stores (a calibration's length): one that starts at
 *     once times the ranks' warm-up (their buffers' first touch, the peer
 *     not yet in step). On the 2-core VM such a first calibration read
 *     every window at 2-6 GB/s where the ranks later moved 14, and a median
 *     30% ahead picked streaming stores, which halve the 1-4 MiB all-reduce
 *     there (7.5 against 14-15 GB/s) until the next calibration;
 *   - a calibration alternates windows of 2 * MC_STEPS large steps (at
 *     least half a slot each) between plain and streaming writes; the first
 *     MC_STEPS steps of a window only flush the FIFO of the previous mode's
 *     lines, the next MC_STEPS are timed;
 *   - a step's cycle runs from the previous commit to its own, within one
 *     operation (the first step of an operation, the one that carries its
 *     signature, is not timed: the time between operations is the
 *     caller's): the write, the wait for the receiver to free the slot
 *     (where the receiver's reads show) and whatever else paces the ring;
 *     a window's rate is its timed bytes over their cycles;
 *   - after MC_STREAM_SAMPLES windows of each mode the mode in use (plain
 *     at first) is kept unless the other's windows are clearly faster
 *     (mc_tp_decide_stream: its median by a margin, and its lower quartile
 *     too), and the next calibration comes after MC_STREAM_RECHECK_BYTES more
 *     large-step bytes, so that a rank that migrated to other cores adapts.
 *     When the two modes' windows overlap (mc_tp_stream_separated) the
 *     TUNING line says that the mode in use stayed.
 * Steps outside a calibration take no time stamp.
 */
#include "transport/transport.h"

#include <string.h>
#include <time.h>

#include "log.h"
#include "params.h"
#include "transport/tp_decide.h"

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#define STREAM_MIN_BYTES 1024 /* smaller slot writes stay plain */

static uint64_t mono_ns(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void calibration_start(struct mc_conn_stream *st)
{
  st->calibrating = true;
  st->on = false;
  st->win_steps = 0;
  st->win_ns = 0;
  st->win_bytes = 0;
  st->n_samples[0] = 0;
  st->n_samples[1] = 0;
  st->commit_ns = 0;
}

void mc_conn_stream_init(struct mc_conn *c)
{
  memset(&c->stream, 0, sizeof(c->stream));
  if (mc_param_source(MC_P_SHM_STREAM_NS) != MC_PARAM_SRC_DEFAULT)
    MC_WARN_ONCE("MESHCCL_SHM_STREAM_NS is deprecated and ignored: with MESHCCL_SHM_STREAM=-1 a "
                 "SHM sender measures the rate of plain and of streaming stores and keeps the "
                 "faster (docs/design/datapath.md, Data path)");
#if defined(__x86_64__)
  c->stream.mode = (int8_t)mc_param_int(MC_P_SHM_STREAM);
  c->stream.on = (c->stream.mode == 1);
#else
  c->stream.mode = 0; /* no streaming stores to use */
#endif
}

bool mc_conn_stream_step(struct mc_conn_stream *st, size_t slot_bytes, size_t bytes,
                         uint64_t cycle_ns)
{
  size_t large = (slot_bytes / 2 > 0) ? slot_bytes / 2 : 1;
  int m = st->on ? 1 : 0;

  if (bytes < large)
    return false;
  if ((st->n_decide == 0) && !st->calibrating) { /* warming up */
    if (++st->warm_steps >= MC_STREAM_WARMUP_STEPS)
      calibration_start(st);
    return false;
  }
  if (!st->calibrating) {
    st->run_bytes += bytes;
    if (st->run_bytes >= MC_STREAM_RECHECK_BYTES)
      calibration_start(st);
    return false;
  }
  st->win_steps++;
  if ((st->win_steps > MC_STEPS) && (cycle_ns > 0)) {
    st->win_ns += cycle_ns;
    st->win_bytes += bytes;
  }
  if (st->win_steps < 2 * MC_STEPS)
    return false;
  if (st->win_ns > 0)
    st->mbps[m][st->n_samples[m]++] = (float)((double)st->win_bytes * 1000.0 / (double)st->win_ns);
  st->win_steps = 0;
  st->win_ns = 0;
  st->win_bytes = 0;
  if (st->n_samples[1 - m] < MC_STREAM_SAMPLES) {
    st->on = (m == 0);
    return false;
  }
  if (st->n_samples[m] < MC_STREAM_SAMPLES)
    return false;
  st->on = mc_tp_decide_stream(st->mbps[0], st->n_samples[0], st->mbps[1], st->n_samples[1],
                               st->kept, &st->med[0], &st->med[1]);
  if ((st->n_decide > 0) && (st->on != st->kept))
    st->n_flip++;
  st->n_decide++;
  st->kept = st->on;
  st->calibrating = false;
  st->unsure =
      !mc_tp_stream_separated(st->mbps[0], st->n_samples[0], st->mbps[1], st->n_samples[1]);
  st->run_bytes = 0;
  return true;
}

static void samples_text(char *buf, size_t size, const float *v, int n)
{
  size_t len = 0;

  buf[0] = '\0';
  for (int i = 0; (i < n) && (len < size); i++)
    len += (size_t)snprintf(buf + len, size - len, "%s%.2f", (i > 0) ? " " : "", v[i] / 1000.0);
}

void mc_conn_stream_commit(struct mc_conn *c, size_t bytes, bool is_first)
{
  struct mc_conn_stream *st = &c->stream;
  uint64_t cycle = 0;
  uint32_t n_flip = st->n_flip;
  char plain[96];
  char stream[96];
  char again[80];

  if (st->calibrating) {
    uint64_t now = mono_ns();
    if (!is_first && (st->commit_ns != 0))
      cycle = now - st->commit_ns;
    st->commit_ns = now;
  }
  if (!mc_conn_stream_step(st, c->slot_bytes, bytes, cycle))
    return;
  /* said when first decided and when it flips, not at every re-check */
  if ((st->n_decide > 1) && (st->n_flip == n_flip))
    return;
  if (!MC_INFO_ON(MC_SUB_TUNING))
    return;
  again[0] = '\0';
  if (st->unsure)
    snprintf(again, sizeof(again), "; the windows overlap: the mode in use stays");
  samples_text(plain, sizeof(plain), st->mbps[0], st->n_samples[0]);
  samples_text(stream, sizeof(stream), st->mbps[1], st->n_samples[1]);
  MC_INFO(MC_SUB_TUNING,
          "SHM: send to rank %d channel %d: %s stores %s: median rate plain %.2f GB/s, streaming "
          "%.2f GB/s (windows of %d steps of %zu bytes, GB/s: plain %s; streaming %s)%s",
          c->peer, c->channel, st->on ? "streaming" : "plain",
          (st->n_decide == 1) ? "decided" : "now (flipped)", st->med[0] / 1000.0,
          st->med[1] / 1000.0, MC_STEPS, c->slot_bytes, plain, stream, again);
}

void mc_copy_stream(void *dst, const void *src, size_t bytes)
{
#if defined(__x86_64__)
  size_t head = (16 - ((uintptr_t)dst & 15)) & 15;

  if (bytes >= head + 64) {
    /* The bytes up to dst's first 16-byte boundary with plain stores. */
    memcpy(dst, src, head);
    dst = (char *)dst + head;
    src = (const char *)src + head;
    bytes -= head;
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
