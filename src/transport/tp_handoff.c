/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a step between two cores of this host costs, measured once per
 * process (transport.h mc_tp_handoff_probe) for the one-shot all-reduce's
 * model (tp_decide.h mc_tp_decide_oneshot): two threads of this process,
 * pinned to the CPU the caller runs on and to the next CPU of its affinity
 * mask (the next online one when the mask has one), pass a flag back and
 * forth (the hand-off: a cache-line round trip) and then a 16 KiB block
 * (one thread copies it into a shared buffer, the other copies it out, as a
 * FIFO hop does): the best batch of each. At most MC_HANDOFF_PROBE_MS of
 * wall time (a partner that does not run in time, on a host with more
 * ranks than CPUs, gives no figures and the model's floor), typically
 * 0.3-1 ms, of which thread creation is a good part.
 */
#include "transport/tp_int.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "utils.h"

#define MC_HANDOFF_PROBE_MS 2
#define BLOCK_BYTES         16384
#define ROUNDS              32 /* round trips per batch */
#define BATCHES             5
#define BLOCK_BIT           0x80000000u /* in a ping: copy the block */

struct pp_shared {
  _Alignas(64) atomic_uint ping;
  _Alignas(64) atomic_uint pong;
  _Alignas(64) atomic_int stop;
  char *block;     /* BLOCK_BYTES, written by the driver, read by the partner */
  char *src;       /* the driver's data */
  char *dst;       /* the partner's copy */
  uint64_t end_ns; /* the probe's deadline */
  double flag_ns;  /* best batch: ns per flag round trip */
  double block_ns; /* ... per block round trip */
  bool ok;
};

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static bool probe_done;
static struct mc_handoff_figures probe_figs;
static struct mc_handoff_info probe_info;

/* Waits until *a == want; false when the deadline passed or stop was set. */
static bool wait_for(atomic_uint *a, unsigned want, struct pp_shared *s)
{
  for (unsigned spins = 0;; spins++) {
    if (atomic_load_explicit(a, memory_order_acquire) == want)
      return true;
    if (((spins & 1023u) == 1023u) &&
        ((atomic_load_explicit(&s->stop, memory_order_relaxed) != 0) || (mc_time_ns() > s->end_ns)))
      return false;
  }
}

static void *partner_main(void *arg)
{
  struct pp_shared *s = arg;
  unsigned last = 0;

  for (;;) {
    unsigned v;
    unsigned spins = 0;
    while ((v = atomic_load_explicit(&s->ping, memory_order_acquire)) == last) {
      if (((++spins & 1023u) == 0) &&
          ((atomic_load_explicit(&s->stop, memory_order_relaxed) != 0) ||
           (mc_time_ns() > s->end_ns)))
        return NULL;
    }
    if ((v & BLOCK_BIT) != 0) /* block phase: copy the block out */
      memcpy(s->dst, s->block, BLOCK_BYTES);
    atomic_store_explicit(&s->pong, v, memory_order_release);
    last = v;
  }
}

/* Best batch average of ROUNDS round trips, ns; 0 on timeout. *seq carries
 * the sequence numbers on (the partner answers each ping in turn). */
static double rounds(struct pp_shared *s, unsigned *seq, bool block)
{
  double best = 0;

  for (int b = 0; b < BATCHES; b++) {
    uint64_t t0 = mc_time_ns();
    for (int r = 0; r < ROUNDS; r++) {
      unsigned i = ++*seq;
      if (block)
        memcpy(s->block, s->src, BLOCK_BYTES);
      atomic_store_explicit(&s->ping, i, memory_order_release);
      if (!wait_for(&s->pong, i, s))
        return 0;
    }
    double ns = (double)(mc_time_ns() - t0) / ROUNDS;
    best = ((best == 0) || (ns < best)) ? ns : best;
  }
  return best;
}

static void *driver_main(void *arg)
{
  struct pp_shared *s = arg;
  unsigned seq = 0;

  (void)rounds(s, &seq, false); /* warm-up: both threads running, lines in place */
  s->flag_ns = rounds(s, &seq, false);
  seq |= BLOCK_BIT;
  s->block_ns = (s->flag_ns > 0) ? rounds(s, &seq, true) : 0;
  s->ok = (s->flag_ns > 0) && (s->block_ns > s->flag_ns);
  atomic_store_explicit(&s->stop, 1, memory_order_relaxed);
  return NULL;
}

/* CPU a: the one the caller runs on; b: the next of its affinity mask,
 * else the next online CPU; false when the host has one CPU. */
static bool pick_cpus(int *a_out, int *b_out)
{
  cpu_set_t set;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  int a = sched_getcpu();

  if (online < 2)
    return false;
  if (a < 0)
    a = 0;
  *a_out = a;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int k = 1; k < CPU_SETSIZE; k++) {
      int c = (a + k) % CPU_SETSIZE;
      if (CPU_ISSET(c, &set) && (c != a)) {
        *b_out = c;
        return true;
      }
    }
  }
  *b_out = (int)((a + 1) % online);
  return true;
}

static int start_pinned(pthread_t *t, int cpu, void *(*fn)(void *), void *arg)
{
  pthread_attr_t attr;
  cpu_set_t set;
  int rc;

  pthread_attr_init(&attr);
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_attr_setaffinity_np(&attr, sizeof(set), &set);
  rc = pthread_create(t, &attr, fn, arg);
  if (rc == EINVAL) /* the CPU is outside the cgroup's cpuset: unpinned */
    rc = pthread_create(t, NULL, fn, arg);
  pthread_attr_destroy(&attr);
  return rc;
}

static void probe_run(void)
{
  struct pp_shared *s = NULL;
  pthread_t tp;
  pthread_t td;
  uint64_t t0 = mc_time_ns();

  memset(&probe_figs, 0, sizeof(probe_figs));
  memset(&probe_info, 0, sizeof(probe_info));
  probe_info.cpu_a = -1;
  probe_info.cpu_b = -1;
  if (!pick_cpus(&probe_info.cpu_a, &probe_info.cpu_b)) {
    snprintf(probe_info.why, sizeof(probe_info.why), "one CPU online");
    goto out;
  }
  s = aligned_alloc(64, (sizeof(*s) + 63) & ~(size_t)63);
  if (s == NULL) {
    snprintf(probe_info.why, sizeof(probe_info.why), "no memory");
    goto out;
  }
  memset(s, 0, sizeof(*s));
  s->block = aligned_alloc(4096, 3 * BLOCK_BYTES);
  if (s->block == NULL) {
    snprintf(probe_info.why, sizeof(probe_info.why), "no memory");
    goto out;
  }
  s->src = s->block + BLOCK_BYTES;
  s->dst = s->block + 2 * BLOCK_BYTES;
  memset(s->block, 1, 3 * BLOCK_BYTES);
  s->end_ns = t0 + (uint64_t)MC_HANDOFF_PROBE_MS * 1000000u;
  if (start_pinned(&tp, probe_info.cpu_b, partner_main, s) != 0) {
    snprintf(probe_info.why, sizeof(probe_info.why), "no thread");
    goto out;
  }
  if (start_pinned(&td, probe_info.cpu_a, driver_main, s) != 0) {
    atomic_store(&s->stop, 1);
    pthread_join(tp, NULL);
    snprintf(probe_info.why, sizeof(probe_info.why), "no thread");
    goto out;
  }
  pthread_join(td, NULL);
  pthread_join(tp, NULL);
  if (!s->ok) {
    snprintf(probe_info.why, sizeof(probe_info.why),
             "the threads on CPUs %d and %d did not finish within %d ms", probe_info.cpu_a,
             probe_info.cpu_b, MC_HANDOFF_PROBE_MS);
    goto out;
  }
  probe_figs.handoff_ns = (float)s->flag_ns;
  /* A block round trip is a flag round trip plus the block copied in by
   * one core and out by the other: two copies of BLOCK_BYTES. */
  probe_figs.copy_gbps = (float)(2.0 * BLOCK_BYTES / (s->block_ns - s->flag_ns));
out:
  probe_info.ms = (double)(mc_time_ns() - t0) * 1e-6;
  if (s != NULL)
    free(s->block);
  free(s);
}

void mc_tp_handoff_probe(struct mc_handoff_figures *out, struct mc_handoff_info *info_out)
{
  pthread_mutex_lock(&probe_lock);
  if (!probe_done) {
    probe_run();
    probe_done = true;
  }
  *out = probe_figs;
  if (info_out != NULL)
    *info_out = probe_info;
  pthread_mutex_unlock(&probe_lock);
}

bool mc_tp_handoff_probe_peek(struct mc_handoff_figures *out, struct mc_handoff_info *info_out)
{
  bool done;

  pthread_mutex_lock(&probe_lock);
  done = probe_done;
  *out = probe_figs;
  *info_out = probe_info;
  if (!done)
    info_out->cpu_a = info_out->cpu_b = -1;
  pthread_mutex_unlock(&probe_lock);
  return done;
}
