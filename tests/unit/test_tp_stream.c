/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Streamed slot writes over SHM (src/transport/tp_stream.c): the copy is
 * exact at every size and alignment, the calibration that alternates
 * plain and streaming windows and keeps the faster, the settings a SHM
 * sender takes from the environment, and a sender whose receiver checks and
 * releases slots from another thread (it calibrates, decides, and every
 * slot holds what was written in either mode).
 */
#include "transport/transport.h"

#include "core/params.h"

#include "mc_test.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#define BUF_BYTES 70000

static void setup(void)
{
  mc_param_reset_for_tests();
}

/* Every length to 300 and a few large ones, at every alignment of source
 * and destination within 16 bytes: the bytes written are the source's and
 * nothing around them changes. */
static void stream_copy_is_exact(void)
{
  static unsigned char src[BUF_BYTES + 64];
  static unsigned char dst[BUF_BYTES + 16 + 64];
  static const size_t big[] = {1024, 4096, 4099, 65536, 65541, BUF_BYTES};

  for (size_t i = 0; i < sizeof(src); i++)
    src[i] = (unsigned char)(i * 131 + 7);
  for (size_t d = 0; d < 16; d++) {
    for (size_t s = 0; s < 16; s += 5) {
      for (size_t len = 0; len < 300 + sizeof(big) / sizeof(big[0]); len++) {
        size_t bytes = (len < 300) ? len : big[len - 300];
        size_t end = d + bytes + 64; /* the guard checked past the copy */
        memset(dst, 0xa5, end);
        mc_copy_stream(dst + d, src + s, bytes);
        if (memcmp(dst + d, src + s, bytes) != 0)
          MC_T_FAIL("dst+%zu src+%zu: %zu bytes differ", d, s, bytes);
        for (size_t k = 0; k < d; k++)
          MC_T_EQ_INT(dst[k], 0xa5);
        for (size_t k = d + bytes; k < end; k++)
          if (dst[k] != 0xa5)
            MC_T_FAIL("dst+%zu, %zu bytes: byte %zu past the end written", d, bytes, k);
      }
    }
  }
}

/* Feeds n steps of bytes, each with slot cycle ns, to a calibration. */
static int feed(struct mc_conn_stream *st, size_t slot, size_t bytes, uint64_t ns, int n)
{
  int decided = 0;

  for (int i = 0; i < n; i++)
    decided += mc_conn_stream_step(st, slot, bytes, ns) ? 1 : 0;
  return decided;
}

/* A calibration: windows of 2 * MC_STEPS large steps alternate plain and
 * streaming (the first MC_STEPS of each not timed), steps under half a slot
 * do not count, and after MC_STREAM_SAMPLES windows of each the faster
 * mode is kept; MC_STREAM_RECHECK_BYTES later a new calibration may flip
 * it, and says so in n_flip. */
static void calibration_keeps_the_faster_mode(void)
{
  enum { SLOT = 131072 };
  struct mc_conn_stream st;

  memset(&st, 0, sizeof(st));
  st.mode = -1;
  st.calibrating = true;
  for (int w = 0; w < 2 * MC_STREAM_SAMPLES; w++) {
    bool want_on = (w & 1) != 0;
    MC_T_TRUE(st.on == want_on);
    MC_T_EQ_INT(feed(&st, SLOT, SLOT / 2 - 1, 1, 100), 0); /* small: not counted */
    /* plain: 34 us a slot (3.85 GB/s), streaming 45 us (2.9 GB/s); the
     * untimed warm-up steps' cycles do not count */
    MC_T_EQ_INT(feed(&st, SLOT, SLOT, 1000000, MC_STEPS), 0);
    MC_T_EQ_INT(feed(&st, SLOT, SLOT, want_on ? 45000 : 34000, MC_STEPS - 1), 0);
    MC_T_EQ_INT(feed(&st, SLOT, SLOT, want_on ? 45000 : 34000, 1),
                (w == 2 * MC_STREAM_SAMPLES - 1) ? 1 : 0);
  }
  MC_T_TRUE(!st.on);
  MC_T_TRUE(!st.calibrating);
  MC_T_EQ_INT((int)st.n_decide, 1);
  MC_T_EQ_INT((int)st.n_flip, 0);
  MC_T_EQ_INT((int)(st.med[0] + 0.5f), 3855); /* MB/s: 131072 B / 34 us */
  MC_T_EQ_INT((int)(st.med[1] + 0.5f), 2913);
  /* no time stamps until MC_STREAM_RECHECK_BYTES more large-step bytes */
  MC_T_EQ_INT(feed(&st, SLOT, SLOT, 0, MC_STREAM_RECHECK_BYTES / SLOT - 1), 0);
  MC_T_TRUE(!st.calibrating);
  MC_T_EQ_INT(feed(&st, SLOT, SLOT, 0, 1), 0);
  MC_T_TRUE(st.calibrating);
  /* the rank moved: streaming is faster now, by more than the margin */
  for (int w = 0; w < 2 * MC_STREAM_SAMPLES; w++) {
    bool want_on = (w & 1) != 0;
    MC_T_TRUE(st.on == want_on);
    MC_T_EQ_INT(feed(&st, SLOT, SLOT, 0, MC_STEPS), 0);
    feed(&st, SLOT, SLOT, want_on ? 30000 : 40000, MC_STEPS);
  }
  MC_T_TRUE(st.on);
  MC_T_EQ_INT((int)st.n_decide, 2);
  MC_T_EQ_INT((int)st.n_flip, 1);
}

/* Auto mode starts with plain stores and calibrates only after
 * MC_STREAM_WARMUP_STEPS large steps (small ones do not count); a
 * calibration whose windows overlap (both ranks still warming up: every
 * window slow and scattered) keeps the mode in use even where the other's
 * median is ahead by more than the margin, and says so in `unsure`. */
static void warm_up_then_a_clear_difference_only(void)
{
  enum { SLOT = 131072 };
  /* slot cycles (us) per window: plain 45, 66, 31, 39, 21; streaming 45, 49, 30, 22, 22 */
  static const uint64_t plain_us[MC_STREAM_SAMPLES] = {45, 66, 31, 39, 21};
  static const uint64_t stream_us[MC_STREAM_SAMPLES] = {45, 49, 30, 22, 22};
  struct mc_conn_stream st;

  memset(&st, 0, sizeof(st));
  st.mode = -1;
  MC_T_EQ_INT(feed(&st, SLOT, SLOT / 2 - 1, 1000, 2 * MC_STREAM_WARMUP_STEPS), 0);
  MC_T_EQ_INT(feed(&st, SLOT, SLOT, 1000, MC_STREAM_WARMUP_STEPS - 1), 0);
  MC_T_TRUE(!st.calibrating);
  MC_T_TRUE(!st.on);
  MC_T_EQ_INT(feed(&st, SLOT, SLOT, 1000, 1), 0);
  MC_T_TRUE(st.calibrating);
  for (int w = 0; w < 2 * MC_STREAM_SAMPLES; w++) {
    bool on = (w & 1) != 0;
    MC_T_TRUE(st.on == on);
    MC_T_EQ_INT(feed(&st, SLOT, SLOT, 0, MC_STEPS), 0);
    feed(&st, SLOT, SLOT, 1000 * (on ? stream_us[w / 2] : plain_us[w / 2]), MC_STEPS);
  }
  MC_T_TRUE(!st.calibrating);
  MC_T_EQ_INT((int)st.n_decide, 1);
  MC_T_TRUE(st.med[1] > st.med[0] * 1.1f); /* streaming's median more than 10% ahead */
  MC_T_TRUE(!st.on);                       /* but its windows are not clearly faster */
  MC_T_TRUE(st.unsure);
  /* the next calibration after MC_STREAM_RECHECK_BYTES, as after any */
  MC_T_EQ_INT(feed(&st, SLOT, SLOT, 0, MC_STREAM_RECHECK_BYTES / SLOT - 1), 0);
  MC_T_TRUE(!st.calibrating);
  MC_T_EQ_INT(feed(&st, SLOT, SLOT, 0, 1), 0);
  MC_T_TRUE(st.calibrating);
  /* steady windows, streaming clearly ahead: it wins */
  for (int w = 0; w < 2 * MC_STREAM_SAMPLES; w++) {
    bool on = (w & 1) != 0;
    MC_T_EQ_INT(feed(&st, SLOT, SLOT, 0, MC_STEPS), 0);
    feed(&st, SLOT, SLOT, on ? 9000 : 17000, MC_STEPS);
  }
  MC_T_TRUE(st.on);
  MC_T_TRUE(!st.unsure);
  MC_T_EQ_INT((int)st.n_flip, 1);
}

static void settings_from_the_environment(void)
{
  struct mc_conn c;

  setup();
  memset(&c, 0xff, sizeof(c));
  mc_conn_stream_init(&c);
#if defined(__x86_64__)
  MC_T_EQ_INT(c.stream.mode, -1);
#else
  MC_T_EQ_INT(c.stream.mode, 0);
#endif
  MC_T_TRUE(!c.stream.on);
  MC_T_TRUE(!c.stream.calibrating); /* auto: plain stores while the ranks warm up */
  MC_T_EQ_INT((int)c.stream.warm_steps, 0);
  MC_T_EQ_INT((int)c.stream.n_decide, 0);
  mc_param_set_for_tests(MC_P_SHM_STREAM, "1");
  mc_conn_stream_init(&c);
#if defined(__x86_64__)
  MC_T_EQ_INT(c.stream.mode, 1);
  MC_T_TRUE(c.stream.on);
  MC_T_TRUE(!c.stream.calibrating);
#endif
  mc_param_set_for_tests(MC_P_SHM_STREAM, "0");
  mc_conn_stream_init(&c);
  MC_T_EQ_INT(c.stream.mode, 0);
  MC_T_TRUE(!c.stream.on);
  setup();
}

enum { REL_SLOT = 4096 };

struct releaser {
  struct mc_conn_ctrl *ctrl;
  const unsigned char *slots;
  uint64_t steps;
  uint64_t bad; /* 1 + the first step whose slot held other bytes (0: none) */
};

static unsigned char step_byte(uint64_t k, size_t i)
{
  return (unsigned char)(k * 7 + i * 13 + 1);
}

/* The receiver: checks each slot's bytes and releases it, after the
 * sender committed it. */
static void *releaser_main(void *arg)
{
  struct releaser *r = arg;

  for (uint64_t k = 1; k <= r->steps; k++) {
    const unsigned char *s = r->slots + ((k - 1) % MC_STEPS) * REL_SLOT;
    while (__atomic_load_n(&r->ctrl->tail, __ATOMIC_ACQUIRE) < k)
      ;
    for (size_t i = 0; (i < REL_SLOT) && (r->bad == 0); i++)
      if (s[i] != step_byte(k - 1, i))
        r->bad = k;
    __atomic_store_n(&r->ctrl->head, k, __ATOMIC_RELEASE);
  }
  return NULL;
}

/* A sender in auto mode against a receiver thread: its first large steps
 * calibrate (plain and streaming windows in turns) and it decides; every
 * slot the receiver reads holds exactly what was written, whichever mode
 * wrote it. */
static void sender_calibrates_against_a_receiver(void)
{
  enum { STEPS = 4000 };
  static struct mc_conn_ctrl ctrl;
  static _Alignas(64) unsigned char slots[MC_STEPS * REL_SLOT];
  static unsigned char src[REL_SLOT];
  struct releaser r = {.ctrl = &ctrl, .slots = slots, .steps = STEPS};
  struct mc_conn c;
  pthread_t th;

  setup();
  memset(&c, 0, sizeof(c));
  c.kind = MC_TOPO_TRANSPORT_SHM;
  c.is_send = true;
  c.ctrl = &ctrl;
  c.slots = (char *)slots;
  c.slot_bytes = REL_SLOT;
  mc_conn_stream_init(&c);
#if !defined(__x86_64__)
  MC_T_SKIP("no streaming stores on this architecture");
#endif
  MC_T_EQ_INT(pthread_create(&th, NULL, releaser_main, &r), 0);
  for (uint64_t k = 0; k < STEPS; k++) {
    for (size_t i = 0; i < REL_SLOT; i++)
      src[i] = step_byte(k, i);
    while (!mc_conn_send_ready_sampled(&c))
      ;
    mc_conn_slot_copy(&c, mc_conn_send_slot(&c), src, REL_SLOT);
    mc_conn_send_commit(&c, NULL, REL_SLOT);
  }
  MC_T_EQ_INT(pthread_join(th, NULL), 0);
  MC_T_EQ_INT((int)r.bad, 0);
  MC_T_EQ_INT((int)c.stream.n_decide, 1);
  MC_T_TRUE(!c.stream.calibrating);
  MC_T_EQ_INT(c.stream.n_samples[0], MC_STREAM_SAMPLES);
  MC_T_EQ_INT(c.stream.n_samples[1], MC_STREAM_SAMPLES);
  MC_T_TRUE((c.stream.med[0] > 0) && (c.stream.med[1] > 0));
  MC_T_EQ_INT((int)ctrl.head, STEPS);
}

MC_T_MAIN(stream_copy_is_exact, calibration_keeps_the_faster_mode,
          warm_up_then_a_clear_difference_only, settings_from_the_environment,
          sender_calibrates_against_a_receiver)
