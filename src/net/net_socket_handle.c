/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The socket net's handle, as a connector receives it from the listener
 * through the NET transport's connect message (NCCL's
 * transport/net_socket.cc, ncclNetSocketConnect, takes the handle's address
 * as it is). Every field is checked before the connector acts on it: the
 * handle comes from another process, possibly another host, and decides
 * where this process connects, how many sockets and threads it creates and
 * how it cuts messages. Pure, so that tests/fuzz/fuzz_net_handle.c feeds it
 * arbitrary bytes.
 */
#include "net_socket_int.h"

#include "check.h"

#include <arpa/inet.h>
#include <string.h>

/* An address a listener can have: not unspecified, multicast or broadcast. */
static bool addr_usable(const union mc_sockaddr *a)
{
  if (a->sa.sa_family == AF_INET) {
    uint32_t v = ntohl(a->sin.sin_addr.s_addr);
    return (v != INADDR_ANY) && (v != INADDR_BROADCAST) && !IN_MULTICAST(v);
  }
  return !IN6_IS_ADDR_UNSPECIFIED(&a->sin6.sin6_addr) && !IN6_IS_ADDR_MULTICAST(&a->sin6.sin6_addr);
}

ncclResult_t mc_net_sock_handle_parse(const void *buf, uint64_t magic,
                                      struct mc_net_sock_handle *h_out)
{
  struct mc_net_sock_handle h;
  char a[MC_SOCKADDR_STRLEN];

  memcpy(&h, buf, sizeof(h));
  if ((h.addr.sa.sa_family != AF_INET) && (h.addr.sa.sa_family != AF_INET6))
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Socket: connect: the handle is not a socket-net handle (address family "
                   "%d); do all ranks use the same NCCL_NET?",
                   (int)h.addr.sa.sa_family);
  if ((mc_sockaddr_port(&h.addr) == 0) || !addr_usable(&h.addr))
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Socket: connect: the handle's address %s is not a listener's",
                   mc_sockaddr_str(&h.addr, a, sizeof(a)));
  if (h.magic != magic)
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Socket: connect: the handle of %s carries magic 0x%llx, this rank uses "
                   "0x%llx: set the same NCCL_SOCKET_MAGIC on every rank",
                   mc_sockaddr_str(&h.addr, a, sizeof(a)), (unsigned long long)h.magic,
                   (unsigned long long)magic);
  if ((h.n_socks < 0) || (h.n_socks > MC_NET_SOCK_MAX_SOCKS) || (h.n_threads < 0) ||
      (h.n_threads > MC_NET_SOCK_MAX_THREADS) ||
      ((h.n_threads > 0) && ((h.n_socks == 0) || (h.n_socks % h.n_threads != 0))))
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Socket: connect: the handle of %s asks for %d data sockets over %d "
                   "threads (at most %d sockets, %d threads, a whole number of sockets per "
                   "thread)",
                   mc_sockaddr_str(&h.addr, a, sizeof(a)), h.n_socks, h.n_threads,
                   MC_NET_SOCK_MAX_SOCKS, MC_NET_SOCK_MAX_THREADS);
  if ((h.inline_bytes > MC_NET_SOCK_MAX_INLINE) || (h.min_task_bytes < MC_NET_SOCK_MIN_TASK) ||
      (h.min_task_bytes > MC_NET_SOCK_MAX_TASK))
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Socket: connect: the handle of %s asks for %u inline bytes and tasks of "
                   "at least %u bytes (at most %u inline; tasks %u to %u bytes)",
                   mc_sockaddr_str(&h.addr, a, sizeof(a)), h.inline_bytes, h.min_task_bytes,
                   MC_NET_SOCK_MAX_INLINE, MC_NET_SOCK_MIN_TASK, MC_NET_SOCK_MAX_TASK);
  *h_out = h;
  return ncclSuccess;
}
