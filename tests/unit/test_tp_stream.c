/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Streamed slot writes over SHM (src/transport/tp_stream.c): the copy is
 * exact at every size and alignment, the majority rule over the last 16
 * timed transfers, the settings a SHM sender takes from the environment,
 * and a sender whose receiver releases slots from another thread (the
 * timed loads of its head counter give verdicts and never change what
 * mc_conn_send_ready says).
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

/* 8 slow transfers of the last 16 turn streaming on; it stays on while 8
 * of the last 16 are slow and goes off at the ninth fast one. */
static void majority_of_the_last_16_decides(void)
{
  struct mc_conn_stream st;

  memset(&st, 0, sizeof(st));
  st.mode = -1;
  for (int i = 0; i < 7; i++)
    mc_conn_stream_note(&st, true);
  MC_T_TRUE(!st.on);
  mc_conn_stream_note(&st, true);
  MC_T_TRUE(st.on);
  for (int i = 0; i < 8; i++)
    mc_conn_stream_note(&st, false);
  MC_T_TRUE(st.on); /* 8 slow, 8 fast */
  mc_conn_stream_note(&st, false);
  MC_T_TRUE(!st.on);
  /* alternating verdicts hold it where it is: 8 of 16 at most on, then off */
  for (int i = 0; i < 64; i++)
    mc_conn_stream_note(&st, (i & 1) != 0);
  MC_T_TRUE(st.on);
  MC_T_EQ_INT((int)st.n_timed, 7 + 1 + 8 + 1 + 64);
  MC_T_EQ_INT((int)st.n_switch, 3);
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
  MC_T_EQ_INT((int)c.stream.hist, 0);
  MC_T_EQ_INT((int)c.stream.n_timed, 0);
  mc_param_set_for_tests(MC_P_SHM_STREAM, "1");
  mc_conn_stream_init(&c);
#if defined(__x86_64__)
  MC_T_EQ_INT(c.stream.mode, 1);
  MC_T_TRUE(c.stream.on);
#endif
  mc_param_set_for_tests(MC_P_SHM_STREAM, "0");
  mc_conn_stream_init(&c);
  MC_T_EQ_INT(c.stream.mode, 0);
  MC_T_TRUE(!c.stream.on);
  setup();
}

struct releaser {
  struct mc_conn_ctrl *ctrl;
  uint64_t steps;
};

/* The receiver: releases one slot after another, each after the sender
 * committed it. */
static void *releaser_main(void *arg)
{
  struct releaser *r = arg;

  for (uint64_t k = 1; k <= r->steps; k++) {
    while (__atomic_load_n(&r->ctrl->tail, __ATOMIC_ACQUIRE) < k)
      ;
    __atomic_store_n(&r->ctrl->head, k, __ATOMIC_RELEASE);
  }
  return NULL;
}

/* A sender in auto mode against a receiver thread: every 8th step's ready
 * check times the load of head, at most one verdict per new head value
 * (after the TSC is calibrated, 2 ms in); ready means what it always does. */
static void sender_times_the_receivers_counter(void)
{
  enum { STEPS = 4000 };
  static struct mc_conn_ctrl ctrl;
  static char slots[MC_STEPS * 64];
  struct releaser r = {.ctrl = &ctrl, .steps = STEPS};
  struct mc_conn c;
  pthread_t th;

  setup();
  memset(&c, 0, sizeof(c));
  c.kind = MC_TOPO_TRANSPORT_SHM;
  c.is_send = true;
  c.ctrl = &ctrl;
  c.slots = slots;
  c.slot_bytes = 64;
  mc_conn_stream_init(&c);
#if !defined(__x86_64__)
  MC_T_SKIP("no streaming stores on this architecture");
#endif
  MC_T_EQ_INT(pthread_create(&th, NULL, releaser_main, &r), 0);
  for (uint64_t k = 0; k < STEPS; k++) {
    while (!mc_conn_send_ready_sampled(&c))
      ;
    mc_conn_slot_copy(&c, mc_conn_send_slot(&c), "0123456789abcdef0123456789abcdef", 32);
    mc_conn_send_commit(&c, NULL, 32);
    if (k == STEPS / 2) {
      struct timespec ts = {0, 3000000}; /* past the calibration window */
      nanosleep(&ts, NULL);
    }
  }
  MC_T_EQ_INT(pthread_join(th, NULL), 0);
  MC_T_TRUE(c.stream.n_timed > 0);
  MC_T_TRUE(c.stream.n_timed <= STEPS / 8 + 1);
  MC_T_TRUE(c.stream.bound_ticks > 0);
  MC_T_EQ_INT((int)ctrl.head, STEPS);
}

MC_T_MAIN(stream_copy_is_exact, majority_of_the_last_16_decides, settings_from_the_environment,
          sender_times_the_receivers_counter)
