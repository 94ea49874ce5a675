/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Net handles as a connector receives them from a peer: the socket net's
 * (src/net/net_socket_handle.c) and the Mesh net's (src/net/mesh/
 * mesh_handle.c) parsers take what a listener writes and refuse anything
 * else, naming the field, before a socket is opened or a thread started.
 * tests/fuzz/fuzz_net_handle.c explores the same parsers at random.
 */
#include "net/mesh/mesh_int.h"
#include "net/net_socket_int.h"

#include "core/log.h"

#include "mc_test.h"

#include <arpa/inet.h>
#include <stdlib.h>

#define MAGIC 0x564ab9f2fc4b9d6cull

static struct mc_net_sock_handle good_sock(void)
{
  struct mc_net_sock_handle h;

  memset(&h, 0, sizeof(h));
  h.addr.sin.sin_family = AF_INET;
  h.addr.sin.sin_addr.s_addr = htonl(0x0a000001); /* 10.0.0.1 */
  mc_sockaddr_set_port(&h.addr, 40000);
  h.magic = MAGIC;
  h.n_socks = 4;
  h.n_threads = 2;
  h.inline_bytes = 128;
  h.min_task_bytes = 65536;
  return h;
}

/* Parses h from a heap buffer of exactly the handle's 128 bytes, so that
 * ASan sees any read beyond them. */
static ncclResult_t parse_sock(const struct mc_net_sock_handle *h, struct mc_net_sock_handle *out)
{
  uint8_t *buf = calloc(1, MC_NET_HANDLE_BYTES);
  ncclResult_t res;

  memcpy(buf, h, sizeof(*h));
  res = mc_net_sock_handle_parse(buf, MAGIC, out);
  free(buf);
  return res;
}

static void socket_handle_fields_are_checked(void)
{
  struct mc_net_sock_handle h = good_sock();
  struct mc_net_sock_handle out;

  MC_T_OK(parse_sock(&h, &out));
  MC_T_EQ_INT(out.n_socks, 4);
  MC_T_EQ_INT(mc_sockaddr_port(&out.addr), 40000);

  h.addr.sa.sa_family = AF_UNIX;
  MC_T_EQ_INT(parse_sock(&h, &out), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "the handle is not a socket-net handle (address family 1)");
  h = good_sock();
  mc_sockaddr_set_port(&h.addr, 0);
  MC_T_EQ_INT(parse_sock(&h, &out), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "the handle's address 10.0.0.1<0> is not a listener's");
  h = good_sock();
  h.addr.sin.sin_addr.s_addr = htonl(0xe0000001); /* 224.0.0.1 */
  MC_T_EQ_INT(parse_sock(&h, &out), ncclInvalidArgument);
  h = good_sock();
  h.addr.sin.sin_addr.s_addr = htonl(INADDR_ANY);
  MC_T_EQ_INT(parse_sock(&h, &out), ncclInvalidArgument);
  h = good_sock();
  h.magic = 1;
  MC_T_EQ_INT(parse_sock(&h, &out), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "set the same NCCL_SOCKET_MAGIC on every rank");
  h = good_sock();
  h.n_socks = MC_NET_SOCK_MAX_SOCKS + 1;
  MC_T_EQ_INT(parse_sock(&h, &out), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "asks for 65 data sockets over 2 threads");
  h = good_sock();
  h.n_socks = -1;
  MC_T_EQ_INT(parse_sock(&h, &out), ncclInvalidArgument);
  h = good_sock();
  h.n_threads = MC_NET_SOCK_MAX_THREADS + 1;
  MC_T_EQ_INT(parse_sock(&h, &out), ncclInvalidArgument);
  h = good_sock();
  h.n_socks = 3; /* not a whole number per thread */
  MC_T_EQ_INT(parse_sock(&h, &out), ncclInvalidArgument);
  h = good_sock();
  h.inline_bytes = MC_NET_SOCK_MAX_INLINE + 1;
  MC_T_EQ_INT(parse_sock(&h, &out), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "asks for 1048577 inline bytes");
  h = good_sock();
  h.min_task_bytes = 0;
  MC_T_EQ_INT(parse_sock(&h, &out), ncclInvalidArgument);
  /* No data sockets, no threads: everything on the control socket. */
  h = good_sock();
  h.n_socks = 0;
  h.n_threads = 0;
  MC_T_OK(parse_sock(&h, &out));
}

/* Six IPv4 and two IPv6 entries fill the 96 address bytes exactly: a ninth
 * announced entry lies beyond the handle. Before the bound the decoder read
 * its family byte at offset 128. */
static void mesh_handle_entries_stay_inside(void)
{
  struct mc_net_mesh_handle h;
  struct mc_net_mesh_handle back;
  uint8_t *buf = calloc(1, MC_NET_HANDLE_BYTES);

  memset(&h, 0, sizeof(h));
  h.n_socks = 1;
  h.min_task_bytes = 65536;
  h.n_addrs = 8;
  for (int i = 0; i < 8; i++) {
    struct mc_net_mesh_addr *a = &h.addrs[i];
    if (i < 6) {
      a->addr.sin.sin_family = AF_INET;
      a->addr.sin.sin_addr.s_addr = htonl(0x0a000001 + (uint32_t)i);
      a->prefix_len = 24;
    } else {
      a->addr.sin6.sin6_family = AF_INET6;
      a->addr.sin6.sin6_addr.s6_addr[0] = 0xfd;
      a->addr.sin6.sin6_addr.s6_addr[15] = (uint8_t)i;
      a->prefix_len = 64;
    }
    mc_sockaddr_set_port(&a->addr, 40000 + i);
  }
  MC_T_OK(mc_net_mesh_handle_encode(&h, buf));
  MC_T_OK(mc_net_mesh_handle_decode(buf, &back));
  MC_T_EQ_INT(back.n_addrs, 8);
  buf[5] = 9; /* n_addrs */
  MC_T_EQ_INT(mc_net_mesh_handle_decode(buf, &back), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(),
                "NET/Mesh: connect: corrupt handle (9 addresses announced, 8 fit)");
  buf[5] = 8;
  buf[6] = MC_NET_SOCK_MAX_SOCKS + 1; /* n_socks */
  MC_T_EQ_INT(mc_net_mesh_handle_decode(buf, &back), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "the handle asks for 65 data sockets and 0 threads");
  buf[6] = 1;
  buf[7] = MC_NET_SOCK_MAX_THREADS + 1; /* n_threads */
  MC_T_EQ_INT(mc_net_mesh_handle_decode(buf, &back), ncclInvalidArgument);
  free(buf);
}

MC_T_MAIN(socket_handle_fields_are_checked, mesh_handle_entries_stay_inside)
