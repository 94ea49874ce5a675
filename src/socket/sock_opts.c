/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Socket options that bound how long a connection may look alive when it is
 * not: TCP keepalive probes on an idle connection, TCP_USER_TIMEOUT on one
 * with data the peer has not acknowledged (or a zero window it keeps
 * closed). After the timeout the kernel resets the connection and the next
 * send or recv fails with ETIMEDOUT. NCCL's misc/socket.cc sets neither; the
 * Mesh net sets the same pair for its sockets (mesh_handshake.c,
 * mc_net_mesh_sock_opts). Also NCCL_SOCKET_SNDBUF / NCCL_SOCKET_RCVBUF, the
 * buffer sizes every TCP socket of bootstrap and nets takes.
 */
#include "socket.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "params.h"

/* Keepalive probes per bound: with TCP_USER_TIMEOUT set, Linux resets an
 * idle connection once the bound passed with a probe unanswered, so the
 * count only says how many chances a live peer gets. Every tenth of the
 * bound (at least 1 s): on a lossy link one lost probe or answer must not
 * pass for a dead peer. With a probe every third, three losses in a row
 * (about 2% of windows at 15% loss each way) reset live connections:
 * tests/mp/test_netns_loss.sh saw it. */
#define KEEPALIVE_PROBES 10

static ncclResult_t opt_fail(struct mc_sock *s, const char *what)
{
  snprintf(s->err, sizeof(s->err), "setsockopt(%s): %s", what, strerror(errno));
  s->end = MC_SOCK_END_ERROR;
  return ncclSystemError;
}

ncclResult_t mc_sock_set_liveness(struct mc_sock *s, int64_t timeout_ms)
{
  int one = 1;
  int cnt = KEEPALIVE_PROBES;
  /* Idle connections start probing after a third of the timeout, then probe
   * every tenth: a dead peer shows within about the timeout. */
  int idle_s = (timeout_ms / 3000 > 0) ? (int)(timeout_ms / 3000) : 1;
  int probe_s = (timeout_ms / (1000 * KEEPALIVE_PROBES) > 0)
                    ? (int)(timeout_ms / (1000 * KEEPALIVE_PROBES))
                    : 1;
  unsigned int user_ms =
      (timeout_ms > (int64_t)INT32_MAX) ? (unsigned int)INT32_MAX : (unsigned int)timeout_ms;

  if ((s->fd < 0) || (timeout_ms <= 0)) {
    snprintf(s->err, sizeof(s->err), "liveness options: bad socket %d or timeout %lld ms", s->fd,
             (long long)timeout_ms);
    s->end = MC_SOCK_END_ERROR;
    return ncclInternalError;
  }
  if ((s->addr.sa.sa_family != AF_INET) && (s->addr.sa.sa_family != AF_INET6))
    return ncclSuccess; /* not TCP over IP: nothing to set */
  if (setsockopt(s->fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) != 0)
    return opt_fail(s, "SO_KEEPALIVE");
  if (setsockopt(s->fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s)) != 0)
    return opt_fail(s, "TCP_KEEPIDLE");
  if (setsockopt(s->fd, IPPROTO_TCP, TCP_KEEPINTVL, &probe_s, sizeof(probe_s)) != 0)
    return opt_fail(s, "TCP_KEEPINTVL");
  if (setsockopt(s->fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) != 0)
    return opt_fail(s, "TCP_KEEPCNT");
  if (setsockopt(s->fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof(user_ms)) != 0)
    return opt_fail(s, "TCP_USER_TIMEOUT");
  return ncclSuccess;
}

void mc_sock_set_buf_sizes(int fd)
{
  int64_t sndbuf = mc_param_int(MC_P_SOCKET_SNDBUF);
  int64_t rcvbuf = mc_param_int(MC_P_SOCKET_RCVBUF);

  if (sndbuf > 0) {
    int v = (int)sndbuf;
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
  }
  if (rcvbuf > 0) {
    int v = (int)rcvbuf;
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
  }
}
