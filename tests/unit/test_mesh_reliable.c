/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Mesh net's reliability layer (src/net/mesh/mesh_reliable.c): the
 * sequence and acknowledgement bookkeeping alone (the window, cumulative
 * and duplicate acknowledgements, in-order completion, the resend set after
 * a break, a partial message received again, impossible numbers refused),
 * the acknowledgement codec, and over loopback (MESHCCL_MESH_IFNAME=lo) a
 * connection whose interface is declared down in the middle of a stream of
 * messages, with sends waiting for receives not posted yet: the sender
 * resumes over a new connection, the idle receiver takes it without being
 * called, every byte arrives once and exact, each request completes once,
 * and nothing leaks.
 */
#include "core/log.h"
#include "core/params.h"
#include "net/mesh/mesh_int.h"
#include "net/net.h"

#include "mc_test.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LONG_WAIT   30000 /* ms: only reached when the code under test is broken */
#define MSG_BYTES   (512 * 1024)
#define N_MSGS      24
#define FIRST_RECVS 4

static const struct mc_net_ops *const net = &mc_net_mesh_ops;

/* ---------- bookkeeping ---------- */

static void window_bounded(void)
{
  struct mc_net_mesh_rel r;
  uint64_t seq = 99;

  mc_net_mesh_rel_init(&r, true);
  for (int i = 0; i < MC_NET_MAX_REQUESTS; i++) {
    MC_T_TRUE(mc_net_mesh_rel_post(&r, &seq));
    MC_T_EQ_INT(seq, i);
  }
  MC_T_TRUE(!mc_net_mesh_rel_post(&r, &seq)); /* full: try later */
  /* Released out of order: the window moves only past the oldest. */
  mc_net_mesh_rel_posted(&r, 1);
  mc_net_mesh_rel_moved(&r, 1);
  MC_T_TRUE(mc_net_mesh_rel_ack(&r, 2));
  MC_T_TRUE(mc_net_mesh_rel_is_done(&r, 1));
  mc_net_mesh_rel_release(&r, 1);
  MC_T_TRUE(!mc_net_mesh_rel_post(&r, &seq));
  mc_net_mesh_rel_posted(&r, 0);
  mc_net_mesh_rel_moved(&r, 0);
  MC_T_TRUE(mc_net_mesh_rel_is_done(&r, 0));
  mc_net_mesh_rel_release(&r, 0);
  MC_T_EQ_INT(r.tail, 2);
  MC_T_TRUE(mc_net_mesh_rel_post(&r, &seq));
  MC_T_EQ_INT(seq, MC_NET_MAX_REQUESTS);
}

static void send_done_only_when_acked(void)
{
  struct mc_net_mesh_rel r;
  uint64_t seq;

  mc_net_mesh_rel_init(&r, true);
  for (int i = 0; i < 4; i++) {
    MC_T_TRUE(mc_net_mesh_rel_post(&r, &seq));
    mc_net_mesh_rel_posted(&r, seq);
  }
  mc_net_mesh_rel_moved(&r, 0);
  MC_T_TRUE(!mc_net_mesh_rel_is_done(&r, 0)); /* sent, not acknowledged */
  MC_T_TRUE(mc_net_mesh_rel_ack(&r, 2));
  MC_T_TRUE(mc_net_mesh_rel_is_done(&r, 0));
  MC_T_TRUE(!mc_net_mesh_rel_is_done(&r, 1)); /* acknowledged, socket comm not done with it */
  mc_net_mesh_rel_moved(&r, 1);
  MC_T_TRUE(mc_net_mesh_rel_is_done(&r, 1));
  /* Duplicate and older acknowledgements change nothing. */
  MC_T_TRUE(mc_net_mesh_rel_ack(&r, 2));
  MC_T_TRUE(mc_net_mesh_rel_ack(&r, 1));
  MC_T_EQ_INT(r.acked, 2);
  /* One for a message never sent is a protocol error. */
  MC_T_TRUE(!mc_net_mesh_rel_ack(&r, 5));
  MC_T_EQ_INT(r.acked, 2);
}

static void recv_done_in_order(void)
{
  struct mc_net_mesh_rel r;
  uint64_t seq;

  mc_net_mesh_rel_init(&r, false);
  for (int i = 0; i < 3; i++) {
    MC_T_TRUE(mc_net_mesh_rel_post(&r, &seq));
    mc_net_mesh_rel_posted(&r, seq);
  }
  mc_net_mesh_rel_moved(&r, 1); /* a later one finished first */
  MC_T_EQ_INT(r.acked, 0);
  MC_T_TRUE(!mc_net_mesh_rel_is_done(&r, 1));
  mc_net_mesh_rel_moved(&r, 0);
  MC_T_EQ_INT(r.acked, 2);
  MC_T_TRUE(mc_net_mesh_rel_is_done(&r, 0));
  MC_T_TRUE(mc_net_mesh_rel_is_done(&r, 1));
  MC_T_TRUE(!mc_net_mesh_rel_is_done(&r, 2));
}

static void resend_set_after_break(void)
{
  struct mc_net_mesh_rel s;
  struct mc_net_mesh_rel r;
  uint64_t seqs[MC_NET_MAX_REQUESTS];
  uint64_t seq;
  int n;

  mc_net_mesh_rel_init(&s, true);
  mc_net_mesh_rel_init(&r, false);
  for (int i = 0; i < 6; i++) {
    MC_T_TRUE(mc_net_mesh_rel_post(&s, &seq));
    mc_net_mesh_rel_posted(&s, seq);
    mc_net_mesh_rel_moved(&s, seq); /* all handed to the kernel */
    MC_T_TRUE(mc_net_mesh_rel_post(&r, &seq));
    mc_net_mesh_rel_posted(&r, seq);
  }
  /* The receiver got 0..2 whole, 4 whole, 3 partly; 0 and 1 were
   * acknowledged before the break, the acknowledgement of 2 was lost. */
  mc_net_mesh_rel_moved(&r, 0);
  mc_net_mesh_rel_moved(&r, 1);
  mc_net_mesh_rel_moved(&r, 2);
  mc_net_mesh_rel_moved(&r, 4);
  MC_T_EQ_INT(r.acked, 3);
  MC_T_TRUE(mc_net_mesh_rel_ack(&s, 2));
  /* The break: the receiver drops what it holds from 3 on (the partial 3,
   * the whole but out-of-order 4) and posts them again. */
  MC_T_TRUE(mc_net_mesh_rel_resume(&r, r.acked));
  n = mc_net_mesh_rel_to_post(&r, seqs, MC_NET_MAX_REQUESTS);
  MC_T_EQ_INT(n, 3);
  MC_T_EQ_INT(seqs[0], 3);
  MC_T_EQ_INT(seqs[2], 5);
  MC_T_TRUE(mc_net_mesh_rel_is_done(&r, 2)); /* given once, never again */
  MC_T_TRUE(!mc_net_mesh_rel_is_done(&r, 4));
  /* The sender learns 3 from the first acknowledgement: 2 is complete (no
   * duplicate), 3..5 are resent in order from its buffers. */
  MC_T_TRUE(mc_net_mesh_rel_resume(&s, 3));
  MC_T_TRUE(mc_net_mesh_rel_is_done(&s, 2));
  MC_T_TRUE(!mc_net_mesh_rel_is_done(&s, 3));
  n = mc_net_mesh_rel_to_post(&s, seqs, MC_NET_MAX_REQUESTS);
  MC_T_EQ_INT(n, 3);
  MC_T_EQ_INT(seqs[0], 3);
  MC_T_EQ_INT(seqs[1], 4);
  MC_T_EQ_INT(seqs[2], 5);
  /* Impossible numbers: before what was acknowledged, after what was sent. */
  MC_T_TRUE(!mc_net_mesh_rel_resume(&s, 1));
  MC_T_TRUE(!mc_net_mesh_rel_resume(&s, 7));
}

static void ack_codec(void)
{
  uint8_t b[MC_NET_MESH_ACK_BYTES];
  uint64_t v[] = {0, 1, 255, 256, 0x0102030405060708ull, UINT64_MAX};

  for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
    mc_net_mesh_ack_encode(v[i], b);
    MC_T_EQ_INT(mc_net_mesh_ack_decode(b), v[i]);
  }
  mc_net_mesh_ack_encode(0x0102030405060708ull, b);
  MC_T_EQ_INT(b[0], 1); /* big endian */
  MC_T_EQ_INT(b[7], 8);
}

/* ---------- over loopback ---------- */

static void fill(unsigned char *buf, size_t bytes, unsigned seed)
{
  uint32_t x = seed * 2654435761u + 1;

  for (size_t i = 0; i < bytes; i++) {
    x = x * 1103515245u + 12345u;
    buf[i] = (unsigned char)(x >> 24);
  }
}

static void drive(void **reqs, int *n_done_each, int n)
{
  for (int i = 0; i < n; i++) {
    int done = 0;

    if (reqs[i] == NULL)
      continue;
    MC_T_OK(net->test(reqs[i], &done, NULL));
    if (done) {
      n_done_each[i]++;
      reqs[i] = NULL;
    }
  }
}

static void *post_recv(void *recv, unsigned char *r, int i)
{
  void *buf = r + (size_t)i * MSG_BYTES;
  size_t bytes = MSG_BYTES;
  int tag = 0;
  void *req = NULL;

  MC_T_OK(net->irecv(recv, 1, &buf, &bytes, &tag, NULL, &req));
  MC_T_TRUE(req != NULL);
  return req;
}

static void loopback_break_resumes_exact(void)
{
  void *ctx = NULL;
  void *listen = NULL;
  void *send = NULL;
  void *recv = NULL;
  char handle[MC_NET_HANDLE_BYTES];
  unsigned char *s = malloc((size_t)N_MSGS * MSG_BYTES);
  unsigned char *r = malloc((size_t)N_MSGS * MSG_BYTES);
  void *reqs[2 * N_MSGS];
  int n_done[2 * N_MSGS];
  struct mc_deadline dl = mc_deadline_in_ms(LONG_WAIT);
  struct mc_net_mesh_stats st;
  struct mc_net_mesh_ctx *mctx;
  int fds = mc_count_fds();
  int left;

  mc_param_reset_for_tests();
  mc_param_set_for_tests(MC_P_MESH_IFNAME, "=lo");
  mc_param_set_for_tests(MC_P_SOCKET_NTHREADS, "2");
  mc_param_set_for_tests(MC_P_NSOCKS_PERTHREAD, "2");
  MC_T_TRUE((s != NULL) && (r != NULL));
  fill(s, (size_t)N_MSGS * MSG_BYTES, 7);
  memset(r, 0, (size_t)N_MSGS * MSG_BYTES);
  memset(n_done, 0, sizeof(n_done));
  MC_T_OK(net->init(NULL, &ctx));
  mctx = ctx;
  MC_T_OK(net->listen(ctx, 0, handle, &listen));
  while ((send == NULL) || (recv == NULL)) {
    if (send == NULL)
      MC_T_OK(net->connect(ctx, 0, handle, &send));
    if (recv == NULL)
      MC_T_OK(net->accept(listen, &recv));
    MC_T_TRUE(!mc_deadline_passed(dl));
  }
  /* Every send, and the first FIRST_RECVS receives: the rest of the sends
   * wait, unacknowledged, when the link goes down. */
  for (int i = 0; i < N_MSGS; i++) {
    reqs[i] = NULL;
    MC_T_OK(net->isend(send, s + (size_t)i * MSG_BYTES, MSG_BYTES, 0, NULL, &reqs[i]));
    MC_T_TRUE(reqs[i] != NULL);
    reqs[N_MSGS + i] = (i < FIRST_RECVS) ? post_recv(recv, r, i) : NULL;
  }
  for (int got = 0; got < FIRST_RECVS;) {
    drive(reqs, n_done, 2 * N_MSGS);
    got = 0;
    for (int i = 0; i < N_MSGS; i++)
      got += n_done[N_MSGS + i];
    MC_T_TRUE(!mc_deadline_passed(dl));
  }
  /* The interface is declared down (the handshake thread sees lo up again
   * and clears it within its tick): the sender breaks and moves; the idle
   * receiver takes the resume from the handshake thread. */
  do {
    __atomic_store_n(&mctx->nic_down[0], 1, __ATOMIC_RELEASE);
    drive(reqs, n_done, 2 * N_MSGS);
    mc_net_mesh_stats_get(ctx, &st);
    MC_T_TRUE(!mc_deadline_passed(dl));
  } while (st.n_breaks < 1);
  __atomic_store_n(&mctx->nic_down[0], 0, __ATOMIC_RELEASE);
  for (int i = FIRST_RECVS; i < N_MSGS; i++)
    reqs[N_MSGS + i] = post_recv(recv, r, i);
  do {
    left = 0;
    drive(reqs, n_done, 2 * N_MSGS);
    for (int i = 0; i < 2 * N_MSGS; i++)
      left += (reqs[i] != NULL);
    if (mc_deadline_passed(dl))
      MC_T_FAIL("%d requests not done within %d ms after the break", left, LONG_WAIT);
  } while (left > 0);
  mc_net_mesh_stats_get(ctx, &st);
  MC_T_TRUE(st.n_breaks >= 2);
  MC_T_TRUE(st.n_resumed >= 2);
  MC_T_EQ_INT(st.n_lost, 0);
  for (int i = 0; i < 2 * N_MSGS; i++)
    MC_T_EQ_INT(n_done[i], 1);
  if (memcmp(s, r, (size_t)N_MSGS * MSG_BYTES) != 0)
    MC_T_FAIL("bytes differ after the resume");
  MC_T_OK(net->close_send(send));
  MC_T_OK(net->close_recv(recv));
  MC_T_OK(net->close_listen(listen));
  MC_T_OK(net->finalize(ctx));
  MC_T_EQ_INT(mc_count_fds(), fds);
  free(s);
  free(r);
  mc_param_reset_for_tests();
}

MC_T_MAIN(window_bounded, send_done_only_when_acked, recv_done_in_order, resend_set_after_break,
          ack_codec, loopback_break_resumes_exact)
