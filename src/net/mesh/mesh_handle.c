/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Mesh net's wire formats, written byte by byte in network order so that
 * hosts of any endianness and compilers of any padding agree:
 *
 * Handle (MC_NET_HANDLE_BYTES = 128, NCCL_NET_HANDLE_MAXSIZE):
 *   0  magic "MESH" (4)      4  version (1)      5  n_addrs (1)
 *   6  n_socks (1)           7  n_threads (1)    8  listener host hash (8)
 *   16 listen comm id (8)    24 inline bytes (4) 28 min task bytes (4)
 *   32 address entries, packed: family 4|6 (1), prefix length (1), lane (1),
 *      handshake port (2), address (4 or 16) -- 9 bytes for IPv4, 21 for
 *      IPv6: at most 10 IPv4 or 4 IPv6 addresses in the 96 bytes.
 * Challenge, response and confirm: net_auth.h's layouts, with the magics
 * "MSHC", "MSHR" and "MSHA" (mc_net_mesh_auth).
 */
#include "mesh_int.h"

#include "net/net_socket_int.h"

#include "check.h"
#include "core/byteorder.h"
#include "log.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

const struct mc_net_auth_domain mc_net_mesh_auth = {
    .magic_challenge = 0x4d534843u, /* "MSHC" */
    .magic_response = 0x4d534852u,  /* "MSHR" */
    .magic_confirm = 0x4d534841u,   /* "MSHA" */
    .version = MC_NET_MESH_VERSION,
    .mac_label = {'m', 'e', 's', 'h'},
    .key_label = "meshccl mesh key",
};

_Static_assert(MC_NET_MESH_HDR_BYTES + MC_NET_MESH_MAX_ADDRS * MC_NET_MESH_ENTRY4_BYTES <=
                   MC_NET_HANDLE_BYTES,
               "the mesh handle must fit NCCL's 128 bytes");
_Static_assert(MC_NET_MESH_MAX_ADDRS <= 255, "n_addrs is one byte");

static size_t entry_bytes(const union mc_sockaddr *a)
{
  return (a->sa.sa_family == AF_INET) ? MC_NET_MESH_ENTRY4_BYTES : MC_NET_MESH_ENTRY6_BYTES;
}

size_t mc_net_mesh_handle_addr_bytes(const struct mc_net_mesh_addr *addrs, int n_addrs)
{
  size_t bytes = 0;

  for (int i = 0; i < n_addrs; i++)
    bytes += entry_bytes(&addrs[i].addr);
  return bytes;
}

ncclResult_t mc_net_mesh_handle_encode(const struct mc_net_mesh_handle *h, void *buf)
{
  uint8_t *p = buf;
  size_t off = MC_NET_MESH_HDR_BYTES;
  size_t need;
  int n4 = 0;

  if ((h->n_addrs < 1) || (h->n_addrs > MC_NET_MESH_MAX_NICS))
    return MC_FAIL(ncclInternalError, "NET/Mesh: %d addresses for a handle (1 to %d)", h->n_addrs,
                   MC_NET_MESH_MAX_NICS);
  need = mc_net_mesh_handle_addr_bytes(h->addrs, h->n_addrs);

  for (int i = 0; i < h->n_addrs; i++)
    n4 += (h->addrs[i].addr.sa.sa_family == AF_INET);
  if ((h->n_addrs > MC_NET_MESH_MAX_ADDRS) || (need > MC_NET_MESH_ADDR_BYTES))
    return MC_FAIL(ncclInvalidUsage,
                   "NET/Mesh: this host has %d mesh addresses (%d IPv4, %d IPv6) taking %zu "
                   "bytes; a handle holds %d bytes of addresses (%d IPv4 or %d IPv6): choose "
                   "fewer interfaces with MESHCCL_MESH_IFNAME",
                   h->n_addrs, n4, h->n_addrs - n4, need, MC_NET_MESH_ADDR_BYTES,
                   MC_NET_MESH_ADDR_BYTES / MC_NET_MESH_ENTRY4_BYTES,
                   MC_NET_MESH_ADDR_BYTES / MC_NET_MESH_ENTRY6_BYTES);
  if ((h->n_socks < 0) || (h->n_socks > 255) || (h->n_threads < 0) || (h->n_threads > 255))
    return MC_FAIL(ncclInternalError, "NET/Mesh: %d sockets and %d threads do not fit the handle",
                   h->n_socks, h->n_threads);
  memset(p, 0, MC_NET_HANDLE_BYTES);
  mc_be_put32(p, MC_NET_MESH_MAGIC);
  p[4] = MC_NET_MESH_VERSION;
  p[5] = (uint8_t)h->n_addrs;
  p[6] = (uint8_t)h->n_socks;
  p[7] = (uint8_t)h->n_threads;
  mc_be_put64(p + 8, h->host_hash);
  mc_be_put64(p + 16, h->listen_id);
  mc_be_put32(p + 24, h->inline_bytes);
  mc_be_put32(p + 28, h->min_task_bytes);
  for (int i = 0; i < h->n_addrs; i++) {
    const struct mc_net_mesh_addr *a = &h->addrs[i];
    int port = mc_sockaddr_port(&a->addr);

    p[off] = (a->addr.sa.sa_family == AF_INET) ? 4 : 6;
    p[off + 1] = (uint8_t)a->prefix_len;
    p[off + 2] = (uint8_t)a->lane;
    p[off + 3] = (uint8_t)(port >> 8);
    p[off + 4] = (uint8_t)port;
    if (a->addr.sa.sa_family == AF_INET)
      memcpy(p + off + 5, &a->addr.sin.sin_addr, 4);
    else
      memcpy(p + off + 5, a->addr.sin6.sin6_addr.s6_addr, 16);
    off += entry_bytes(&a->addr);
  }
  return ncclSuccess;
}

ncclResult_t mc_net_mesh_handle_decode(const void *buf, struct mc_net_mesh_handle *h_out)
{
  const uint8_t *p = buf;
  struct mc_net_mesh_handle h;
  size_t off = MC_NET_MESH_HDR_BYTES;

  if (mc_be_get32(p) != MC_NET_MESH_MAGIC)
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Mesh: connect: the handle is not a Mesh handle (magic 0x%08x, expected "
                   "0x%08x); do all ranks use NCCL_NET=Mesh?",
                   mc_be_get32(p), MC_NET_MESH_MAGIC);
  if (p[4] != MC_NET_MESH_VERSION)
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Mesh: connect: the handle has version %u, this library speaks %u (mixed "
                   "meshccl versions?)",
                   p[4], MC_NET_MESH_VERSION);
  memset(&h, 0, sizeof(h));
  h.n_addrs = p[5];
  h.n_socks = p[6];
  h.n_threads = p[7];
  h.host_hash = mc_be_get64(p + 8);
  h.listen_id = mc_be_get64(p + 16);
  h.inline_bytes = mc_be_get32(p + 24);
  h.min_task_bytes = mc_be_get32(p + 28);
  if ((h.n_addrs == 0) || (h.n_addrs > MC_NET_MESH_MAX_ADDRS) || (h.min_task_bytes == 0))
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Mesh: connect: corrupt handle (%d addresses, min task %u bytes)", h.n_addrs,
                   h.min_task_bytes);
  /* What every user of a decoded handle creates: sockets and threads. */
  if ((h.n_socks > MC_NET_SOCK_MAX_SOCKS) || (h.n_threads > MC_NET_SOCK_MAX_THREADS))
    return MC_FAIL(ncclInvalidArgument,
                   "NET/Mesh: connect: the handle asks for %d data sockets and %d threads (at most "
                   "%d and %d)",
                   h.n_socks, h.n_threads, MC_NET_SOCK_MAX_SOCKS, MC_NET_SOCK_MAX_THREADS);
  for (int i = 0; i < h.n_addrs; i++) {
    struct mc_net_mesh_addr *a = &h.addrs[i];
    uint8_t fam;
    size_t len;

    /* n_addrs may claim more entries than the 96 bytes hold: never read
     * past the handle (6 IPv4 and 2 IPv6 entries end exactly at its end). */
    if (off >= MC_NET_HANDLE_BYTES)
      return MC_FAIL(ncclInvalidArgument,
                     "NET/Mesh: connect: corrupt handle (%d addresses announced, %d fit)",
                     h.n_addrs, i);
    fam = p[off];
    len = (fam == 4) ? MC_NET_MESH_ENTRY4_BYTES : MC_NET_MESH_ENTRY6_BYTES;
    if (((fam != 4) && (fam != 6)) || (off + len > MC_NET_HANDLE_BYTES) ||
        (p[off + 1] > ((fam == 4) ? 32 : 128)) || (p[off + 2] > MC_NET_MESH_LANE_FAST))
      return MC_FAIL(ncclInvalidArgument,
                     "NET/Mesh: connect: corrupt handle (address entry %d: family %u, prefix %u, "
                     "lane %u)",
                     i, fam, p[off + 1], p[off + 2]);
    a->prefix_len = p[off + 1];
    a->lane = (enum mc_net_mesh_lane)p[off + 2];
    if (fam == 4) {
      a->addr.sin.sin_family = AF_INET;
      memcpy(&a->addr.sin.sin_addr, p + off + 5, 4);
    } else {
      a->addr.sin6.sin6_family = AF_INET6;
      memcpy(a->addr.sin6.sin6_addr.s6_addr, p + off + 5, 16);
    }
    mc_sockaddr_set_port(&a->addr, ((int)p[off + 3] << 8) | p[off + 4]);
    off += len;
  }
  *h_out = h;
  return ncclSuccess;
}

/* ---------- relay request and refusal (mesh_int.h) ---------- */

static const char *const refusal_names[MC_NET_MESH_REFUSE_COUNT] = {
    [MC_NET_MESH_REFUSE_NONE] = "no refusal",
    [MC_NET_MESH_REFUSE_BAD_MAC] = "the request's MAC does not verify (another secret?)",
    [MC_NET_MESH_REFUSE_MALFORMED] = "malformed request",
    [MC_NET_MESH_REFUSE_UNKNOWN_DEST] = "the destination host is not in the relay's mesh table",
    [MC_NET_MESH_REFUSE_HOP_LIMIT] = "hop limit reached (a loop, or routes not agreed yet)",
    [MC_NET_MESH_REFUSE_NO_ADDR] = "no announced handshake address to go on to",
    [MC_NET_MESH_REFUSE_SELF] = "the destination is the relay host itself",
    [MC_NET_MESH_REFUSE_ONWARD] = "the relay could not connect onward",
    [MC_NET_MESH_REFUSE_BUSY] = "the relay service is full or stopped",
};

const char *mc_net_mesh_refusal_str(int reason)
{
  if ((reason < 0) || (reason >= MC_NET_MESH_REFUSE_COUNT))
    return "unknown reason";
  return refusal_names[reason];
}

bool mc_net_mesh_refusal_is_transient(int reason)
{
  return (reason == MC_NET_MESH_REFUSE_UNKNOWN_DEST) || (reason == MC_NET_MESH_REFUSE_HOP_LIMIT) ||
         (reason == MC_NET_MESH_REFUSE_NO_ADDR) || (reason == MC_NET_MESH_REFUSE_ONWARD);
}

static void relay_mac(const uint8_t key[MC_SHA256_BYTES],
                      const uint8_t nonce[MC_NET_MESH_NONCE_BYTES], const uint8_t *buf,
                      uint8_t mac_out[MC_SHA256_BYTES])
{
  struct mc_hmac_sha256 h;

  mc_hmac_sha256_init(&h, key, MC_SHA256_BYTES);
  mc_hmac_sha256_update(&h, "mrly", 4);
  mc_hmac_sha256_update(&h, nonce, MC_NET_MESH_NONCE_BYTES);
  mc_hmac_sha256_update(&h, buf, MC_NET_MESH_RELAY_REQ_BYTES - MC_SHA256_BYTES);
  mc_hmac_sha256_final(&h, mac_out);
}

void mc_net_mesh_relay_req_encode(const struct mc_net_mesh_relay_req *r,
                                  const uint8_t key[MC_SHA256_BYTES],
                                  const uint8_t nonce[MC_NET_MESH_NONCE_BYTES], uint8_t *buf)
{
  memset(buf, 0, MC_NET_MESH_RELAY_REQ_BYTES);
  mc_be_put32(buf, MC_NET_MESH_RELAY_MAGIC);
  buf[4] = MC_NET_MESH_VERSION;
  buf[5] = (uint8_t)r->hops_left;
  mc_be_put64(buf + 8, r->conn_id);
  mc_be_put64(buf + 16, r->origin_host);
  memcpy(buf + MC_NET_MESH_RELAY_HDR_BYTES, r->handle, MC_NET_HANDLE_BYTES);
  relay_mac(key, nonce, buf, buf + MC_NET_MESH_RELAY_REQ_BYTES - MC_SHA256_BYTES);
}

bool mc_net_mesh_relay_req_is_one(const uint8_t *buf, size_t bytes)
{
  return (bytes >= 4) && (mc_be_get32(buf) == MC_NET_MESH_RELAY_MAGIC);
}

enum mc_net_mesh_refusal mc_net_mesh_relay_req_decode(const uint8_t *buf,
                                                      const uint8_t key[MC_SHA256_BYTES],
                                                      const uint8_t nonce[MC_NET_MESH_NONCE_BYTES],
                                                      struct mc_net_mesh_relay_req *r_out)
{
  uint8_t mac[MC_SHA256_BYTES];

  if ((mc_be_get32(buf) != MC_NET_MESH_RELAY_MAGIC) || (buf[4] != MC_NET_MESH_VERSION) ||
      (buf[5] > MC_NET_MESH_MAX_HOPS))
    return MC_NET_MESH_REFUSE_MALFORMED;
  relay_mac(key, nonce, buf, mac);
  if (!mc_crypto_equal(mac, buf + MC_NET_MESH_RELAY_REQ_BYTES - MC_SHA256_BYTES, sizeof(mac)))
    return MC_NET_MESH_REFUSE_BAD_MAC;
  if (mc_be_get32(buf + MC_NET_MESH_RELAY_HDR_BYTES) != MC_NET_MESH_MAGIC)
    return MC_NET_MESH_REFUSE_MALFORMED;
  r_out->hops_left = buf[5];
  r_out->conn_id = mc_be_get64(buf + 8);
  r_out->origin_host = mc_be_get64(buf + 16);
  memcpy(r_out->handle, buf + MC_NET_MESH_RELAY_HDR_BYTES, MC_NET_HANDLE_BYTES);
  return MC_NET_MESH_REFUSE_NONE;
}

void mc_net_mesh_refusal_encode(enum mc_net_mesh_refusal reason, uint64_t relay_host, uint8_t *buf)
{
  memset(buf, 0, MC_NET_MESH_REFUSAL_BYTES);
  mc_be_put32(buf, MC_NET_MESH_REFUSAL_MAGIC);
  buf[4] = MC_NET_MESH_VERSION;
  buf[5] = (uint8_t)reason;
  mc_be_put64(buf + 8, relay_host);
}

bool mc_net_mesh_refusal_decode(const uint8_t *buf, int *reason_out, uint64_t *relay_host_out)
{
  if ((mc_be_get32(buf) != MC_NET_MESH_REFUSAL_MAGIC) || (buf[4] != MC_NET_MESH_VERSION))
    return false;
  *reason_out = buf[5];
  *relay_host_out = mc_be_get64(buf + 8);
  return true;
}
