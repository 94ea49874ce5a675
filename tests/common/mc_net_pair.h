/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One connection of a net (struct mc_net_ops) to itself in one process, for
 * the unit tests of the built-in nets (test_net_socket.c, test_net_mesh.c):
 * open a context and listen, connect and accept polled from one thread
 * (neither may block), post and wait for requests, check a transfer byte
 * for byte, and check that fds and threads came back to their counts.
 */
#ifndef MC_NET_PAIR_H
#define MC_NET_PAIR_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/utils.h"
#include "mc_test.h"
#include "net/net.h"

#define NP_LONG_WAIT 30000 /* ms: only reached when the code under test is broken */

struct np_pair {
  const struct mc_net_ops *net;
  void *ctx;
  void *listen;
  void *send;
  void *recv;
  char handle[MC_NET_HANDLE_BYTES];
};

struct np_counts {
  int fds;
  int threads;
};

/* Inits net (one device) and listens on device 0. */
static inline void np_open(struct np_pair *p, const struct mc_net_ops *net,
                           const struct mc_net_init_args *args)
{
  int ndev = 0;

  memset(p, 0, sizeof(*p));
  p->net = net;
  MC_T_OK(net->init(args, &p->ctx));
  MC_T_OK(net->devices(p->ctx, &ndev));
  MC_T_EQ_INT(ndev, 1);
  MC_T_OK(net->listen(p->ctx, 0, p->handle, &p->listen));
  MC_T_TRUE(p->listen != NULL);
}

/* Connects and accepts from this thread, polling both. */
static inline void np_connect(struct np_pair *p)
{
  struct mc_deadline dl = mc_deadline_in_ms(NP_LONG_WAIT);

  while ((p->send == NULL) || (p->recv == NULL)) {
    if (p->send == NULL)
      MC_T_OK(p->net->connect(p->ctx, 0, p->handle, &p->send));
    if (p->recv == NULL)
      MC_T_OK(p->net->accept(p->listen, &p->recv));
    if (mc_deadline_passed(dl))
      MC_T_FAIL("connection not set up within %d ms", NP_LONG_WAIT);
  }
}

/* Closes what is open, finalizes; p is zero again. */
static inline void np_close(struct np_pair *p)
{
  const struct mc_net_ops *net = p->net;

  if (p->send != NULL)
    MC_T_OK(net->close_send(p->send));
  if (p->recv != NULL)
    MC_T_OK(net->close_recv(p->recv));
  if (p->listen != NULL)
    MC_T_OK(net->close_listen(p->listen));
  MC_T_OK(net->finalize(p->ctx));
  memset(p, 0, sizeof(*p));
}

static inline void *np_post_send(struct np_pair *p, void *buf, size_t bytes)
{
  void *req = NULL;
  struct mc_deadline dl = mc_deadline_in_ms(NP_LONG_WAIT);

  while (req == NULL) {
    MC_T_OK(p->net->isend(p->send, buf, bytes, 0, NULL, &req));
    if (mc_deadline_passed(dl))
      MC_T_FAIL("isend not accepted within %d ms", NP_LONG_WAIT);
  }
  return req;
}

static inline void *np_post_recv(struct np_pair *p, void *buf, size_t bytes)
{
  void *req = NULL;
  int tag = 0;

  MC_T_OK(p->net->irecv(p->recv, 1, &buf, &bytes, &tag, NULL, &req));
  MC_T_TRUE(req != NULL);
  return req;
}

/* Tests the n requests (NULL: already done) until every one is done;
 * sizes[i] (sizes may be NULL) gets what request i moved. */
static inline void np_wait(const struct mc_net_ops *net, void **reqs, size_t *sizes, int n)
{
  struct mc_deadline dl = mc_deadline_in_ms(NP_LONG_WAIT);
  int left = 0;

  for (int i = 0; i < n; i++)
    left += (reqs[i] != NULL);
  while (left > 0) {
    for (int i = 0; i < n; i++) {
      int done = 0;

      if (reqs[i] == NULL)
        continue;
      MC_T_OK(net->test(reqs[i], &done, (sizes != NULL) ? &sizes[i] : NULL));
      if (done) {
        reqs[i] = NULL;
        left--;
      }
    }
    if (mc_deadline_passed(dl))
      MC_T_FAIL("%d of %d requests not done within %d ms", left, n, NP_LONG_WAIT);
  }
}

static inline void np_fill(unsigned char *buf, size_t bytes, unsigned seed)
{
  uint32_t x = seed * 2654435761u + 1;

  for (size_t i = 0; i < bytes; i++) {
    x = x * 1103515245u + 12345u;
    buf[i] = (unsigned char)(x >> 24);
  }
}

/* Sends `bytes`, receives into a buffer `extra` bytes larger; checks size,
 * contents and that nothing was written past the message. */
static inline void np_check_xfer(struct np_pair *p, size_t bytes, size_t extra, unsigned seed)
{
  unsigned char *s = malloc(bytes + 1);
  unsigned char *r = malloc(bytes + extra + 1);
  void *reqs[2];
  size_t sizes[2] = {0, 12345};

  MC_T_TRUE((s != NULL) && (r != NULL));
  np_fill(s, bytes, seed);
  memset(r, 0xa5, bytes + extra + 1);
  reqs[1] = np_post_recv(p, r, bytes + extra);
  reqs[0] = np_post_send(p, s, bytes);
  np_wait(p->net, reqs, sizes, 2);
  MC_T_EQ_INT(sizes[1], bytes);
  if (memcmp(s, r, bytes) != 0)
    MC_T_FAIL("%zu bytes differ after the transfer (seed %u)", bytes, seed);
  for (size_t i = bytes; i < bytes + extra + 1; i++) {
    if (r[i] != 0xa5)
      MC_T_FAIL("byte %zu past a %zu-byte message was written", i, bytes);
  }
  free(s);
  free(r);
}

/* The fds and (once settled) the threads are what they were. */
static inline void np_counts_back(struct np_counts before)
{
  MC_T_EQ_INT(mc_count_fds(), before.fds);
  MC_T_EQ_INT(mc_count_threads_settled(before.threads, 5000), before.threads);
}

#endif /* MC_NET_PAIR_H */
