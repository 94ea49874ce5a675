/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for what a net reads from a peer before it trusts it:
 * the handles a connector receives (the socket net's,
 * src/net/net_socket_handle.c, and the Mesh net's, src/net/mesh/mesh_handle.c)
 * and the authentication messages of both nets (src/net/net_auth.c:
 * challenge, response, confirm). Input: one byte choosing the parser (0:
 * socket handle, 1: Mesh handle, 2: socket-net handshake, 3: Mesh
 * handshake), then the bytes, cut or zero-padded to NCCL's 128 and placed in
 * a heap buffer of exactly that size, so that ASan sees any read beyond it.
 * An accepted handle must have every field within what the connector
 * creates from it; an accepted Mesh handle must encode again and decode to
 * the same fields; an accepted handshake message must encode again to the
 * same bytes, and a response's MAC must not verify unless it was made with
 * the key. A broken property aborts.
 *
 *   fuzz_net_handle -max_total_time=60 NEW_CORPUS_DIR tests/data/fuzz/net_handle
 */
#include "net/mesh/mesh_int.h"
#include "net/net_auth.h"
#include "net/net_socket_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC 0x564ab9f2fc4b9d6cull /* NCCL_SOCKET_MAGIC's default */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
  if (!ok) {
    fprintf(stderr, "fuzz_net_handle: property broken: %s\n", what);
    abort();
  }
}

static void socket_handle(const uint8_t *buf)
{
  struct mc_net_sock_handle h;

  if (mc_net_sock_handle_parse(buf, MAGIC, &h) != ncclSuccess)
    return;
  check((h.addr.sa.sa_family == AF_INET) || (h.addr.sa.sa_family == AF_INET6), "an IP address");
  check(mc_sockaddr_port(&h.addr) != 0, "a port");
  check(h.magic == MAGIC, "this rank's magic");
  check((h.n_socks >= 0) && (h.n_socks <= MC_NET_SOCK_MAX_SOCKS), "data sockets within 0..64");
  check((h.n_threads >= 0) && (h.n_threads <= MC_NET_SOCK_MAX_THREADS), "threads within 0..16");
  check((h.n_threads == 0) || ((h.n_socks > 0) && (h.n_socks % h.n_threads == 0)),
        "whole sockets per thread");
  check((h.inline_bytes <= MC_NET_SOCK_MAX_INLINE) && (h.min_task_bytes >= MC_NET_SOCK_MIN_TASK) &&
            (h.min_task_bytes <= MC_NET_SOCK_MAX_TASK),
        "inline and task sizes within their parameters' ranges");
}

static void mesh_handle(const uint8_t *buf)
{
  struct mc_net_mesh_handle h;
  struct mc_net_mesh_handle back;
  uint8_t *again;

  if (mc_net_mesh_handle_decode(buf, &h) != ncclSuccess)
    return;
  check((h.n_addrs >= 1) && (h.n_addrs <= MC_NET_MESH_MAX_ADDRS), "1 to 10 addresses");
  check((h.n_socks >= 0) && (h.n_socks <= MC_NET_SOCK_MAX_SOCKS) && (h.n_threads >= 0) &&
            (h.n_threads <= MC_NET_SOCK_MAX_THREADS),
        "sockets and threads within the socket net's limits");
  check(mc_net_mesh_handle_addr_bytes(h.addrs, h.n_addrs) <= MC_NET_MESH_ADDR_BYTES,
        "addresses inside the handle");
  for (int i = 0; i < h.n_addrs; i++) {
    int fam = h.addrs[i].addr.sa.sa_family;
    check((fam == AF_INET) || (fam == AF_INET6), "an IP address");
    check(h.addrs[i].prefix_len <= ((fam == AF_INET) ? 32 : 128), "a prefix length");
  }
  again = calloc(1, MC_NET_HANDLE_BYTES);
  check(again != NULL, "calloc");
  if (h.n_addrs <= MC_NET_MESH_MAX_NICS) {
    check(mc_net_mesh_handle_encode(&h, again) == ncclSuccess, "a decoded handle encodes");
    check(mc_net_mesh_handle_decode(again, &back) == ncclSuccess, "and decodes again");
    check((back.host_hash == h.host_hash) && (back.listen_id == h.listen_id) &&
              (back.n_socks == h.n_socks) && (back.n_threads == h.n_threads) &&
              (back.inline_bytes == h.inline_bytes) && (back.min_task_bytes == h.min_task_bytes) &&
              (back.n_addrs == h.n_addrs),
          "to the same fields");
    for (int i = 0; i < h.n_addrs; i++)
      check(mc_sockaddr_equal(&back.addrs[i].addr, &h.addrs[i].addr) &&
                (back.addrs[i].prefix_len == h.addrs[i].prefix_len) &&
                (back.addrs[i].lane == h.addrs[i].lane),
            "and the same addresses");
  }
  free(again);
}

/* Each handshake message the bytes decode as re-encodes to them (the
 * padding the encoder zeroes aside). */
static void auth_messages(const struct mc_net_auth_domain *d, const uint8_t *buf)
{
  uint8_t nonce[MC_NET_AUTH_NONCE_BYTES];
  uint8_t mac[MC_SHA256_BYTES];
  uint8_t again[MC_NET_AUTH_RESPONSE_BYTES];
  struct mc_net_auth_response r;

  if (mc_net_auth_challenge_decode(d, buf, nonce)) {
    mc_net_auth_challenge_encode(d, nonce, again);
    check(memcmp(again, buf, 5) == 0, "a challenge's magic and version survive");
    check(memcmp(again + 8, buf + 8, MC_NET_AUTH_NONCE_BYTES) == 0, "and its nonce");
  }
  if (mc_net_auth_response_decode(d, buf, &r)) {
    mc_net_auth_response_encode(d, &r, again);
    check(memcmp(again, buf, 5) == 0, "a response's magic and version survive");
    check(memcmp(again + 8, buf + 8, MC_NET_AUTH_RESPONSE_BYTES - 8) == 0, "and its fields");
  }
  if (mc_net_auth_confirm_decode(d, buf, mac)) {
    mc_net_auth_confirm_encode(d, mac, again);
    check(memcmp(again, buf, 4) == 0, "a confirm's magic survives");
    check(memcmp(again + 8, buf + 8, MC_SHA256_BYTES) == 0, "and its MAC");
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  uint8_t *buf;

  if (size < 1)
    return 0;
  buf = calloc(1, MC_NET_HANDLE_BYTES);
  check(buf != NULL, "calloc");
  memcpy(buf, data + 1, (size - 1 < MC_NET_HANDLE_BYTES) ? size - 1 : MC_NET_HANDLE_BYTES);
  switch (data[0] & 3) {
  case 0:
    socket_handle(buf);
    break;
  case 1:
    mesh_handle(buf);
    break;
  case 2:
    auth_messages(&mc_net_auth_socket, buf);
    break;
  default:
    auth_messages(&mc_net_mesh_auth, buf);
    break;
  }
  free(buf);
  return 0;
}
