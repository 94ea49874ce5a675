/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Mesh net's discovery and relay wire formats and the host table
 * (src/net/mesh/mesh_discover.c, mesh_handle.c), without sockets: datagram
 * round trip, truncation, a wrong MAC, magic or version, oversized input,
 * every single-byte corruption refused; the table's update rules (newer
 * version wins, same contents is only a refresh, bounded, expiry never
 * drops the context's own entry); the relay request and refusal codecs.
 */
#include "mc_test.h"
#include "net/mesh/mesh_int.h"

#include <arpa/inet.h>
#include <string.h>

static const uint8_t key_a[MC_SHA256_BYTES] = {1, 2, 3};
static const uint8_t key_b[MC_SHA256_BYTES] = {9, 9, 9};

static void make_rec(struct mc_net_mesh_rec *r, uint64_t host, uint64_t ctx, uint64_t version,
                     int n_addrs)
{
  memset(r, 0, sizeof(*r));
  r->host_hash = host;
  r->ctx_id = ctx;
  r->version = version;
  snprintf(r->name, sizeof(r->name), "node%llu", (unsigned long long)host);
  r->n_addrs = n_addrs;
  for (int i = 0; i < n_addrs; i++) {
    struct mc_net_mesh_rec_addr *a = &r->addrs[i];
    char s[64];

    if (i % 2 == 0) {
      a->addr.sin.sin_family = AF_INET;
      snprintf(s, sizeof(s), "10.0.%d.%llu", i, (unsigned long long)(host & 0xff));
      MC_T_TRUE(inet_pton(AF_INET, s, &a->addr.sin.sin_addr) == 1);
      a->prefix_len = 24;
    } else {
      a->addr.sin6.sin6_family = AF_INET6;
      snprintf(s, sizeof(s), "fd00:%d::%llx", i, (unsigned long long)(host & 0xffff));
      MC_T_TRUE(inet_pton(AF_INET6, s, &a->addr.sin6.sin6_addr) == 1);
      a->prefix_len = 64;
    }
    mc_sockaddr_set_port(&a->addr, 40000 + i);
    a->lane = (i == 0) ? MC_NET_MESH_LANE_FAST : MC_NET_MESH_LANE_MGMT;
    a->speed_mbps = 100000 - i;
    snprintf(a->if_name, sizeof(a->if_name), "eth%d", i);
  }
}

static bool rec_equal(const struct mc_net_mesh_rec *a, const struct mc_net_mesh_rec *b)
{
  if ((a->host_hash != b->host_hash) || (a->ctx_id != b->ctx_id) || (a->version != b->version) ||
      (strcmp(a->name, b->name) != 0) || (a->n_addrs != b->n_addrs))
    return false;
  for (int i = 0; i < a->n_addrs; i++) {
    if (!mc_sockaddr_equal(&a->addrs[i].addr, &b->addrs[i].addr) ||
        (mc_sockaddr_port(&a->addrs[i].addr) != mc_sockaddr_port(&b->addrs[i].addr)) ||
        (a->addrs[i].prefix_len != b->addrs[i].prefix_len) ||
        (a->addrs[i].lane != b->addrs[i].lane) ||
        (a->addrs[i].speed_mbps != b->addrs[i].speed_mbps) ||
        (strcmp(a->addrs[i].if_name, b->addrs[i].if_name) != 0))
      return false;
  }
  return true;
}

static void disc_round_trip(void)
{
  struct mc_net_mesh_rec in[MC_NET_MESH_MAX_RECS + 4];
  struct mc_net_mesh_rec out[MC_NET_MESH_MAX_RECS];
  uint8_t buf[MC_NET_MESH_DISC_MAX_BYTES];
  uint64_t sender = 0;
  int n_in = MC_NET_MESH_MAX_RECS + 4;
  int done = 0;
  int n_dgrams = 0;

  for (int i = 0; i < n_in; i++)
    make_rec(&in[i], 0x1000 + (uint64_t)i, 0x77 + (uint64_t)i, 5 + (uint64_t)i, i % 9);
  /* Several datagrams carry them all, each within the bound, in order. */
  while (done < n_in) {
    int n_taken = 0;
    int n_out = 0;
    size_t bytes = mc_net_mesh_disc_encode(key_a, 0xabc, 0x77, in + done, n_in - done, &n_taken,
                                           buf, sizeof(buf));

    MC_T_TRUE((bytes > 0) && (bytes <= MC_NET_MESH_DISC_MAX_BYTES) && (n_taken > 0));
    MC_T_EQ_INT(mc_net_mesh_disc_decode(buf, bytes, key_a, &sender, out, &n_out),
                MC_NET_MESH_DISC_OK);
    MC_T_EQ_INT(n_out, n_taken);
    MC_T_TRUE(sender == 0x77);
    for (int i = 0; i < n_out; i++)
      MC_T_TRUE(rec_equal(&in[done + i], &out[i]));
    done += n_taken;
    n_dgrams++;
  }
  MC_T_TRUE(n_dgrams >= 2);
}

static void disc_refused(void)
{
  struct mc_net_mesh_rec in[3];
  struct mc_net_mesh_rec out[MC_NET_MESH_MAX_RECS];
  uint8_t buf[MC_NET_MESH_DISC_MAX_BYTES + 8];
  uint8_t copy[MC_NET_MESH_DISC_MAX_BYTES + 8];
  uint64_t sender = 0x5555;
  int n_taken = 0;
  int n_out = -1;
  size_t bytes;

  for (int i = 0; i < 3; i++)
    make_rec(&in[i], 0x2000 + (uint64_t)i, 0x10 + (uint64_t)i, 1, 3);
  bytes = mc_net_mesh_disc_encode(key_a, 1, 2, in, 3, &n_taken, buf, MC_NET_MESH_DISC_MAX_BYTES);
  MC_T_EQ_INT(n_taken, 3);
  /* Another secret. */
  MC_T_EQ_INT(mc_net_mesh_disc_decode(buf, bytes, key_b, &sender, out, &n_out),
              MC_NET_MESH_DISC_MAC_BAD);
  /* Every truncation. */
  for (size_t cut = 0; cut < bytes; cut++) {
    enum mc_net_mesh_disc_err e = mc_net_mesh_disc_decode(buf, cut, key_a, &sender, out, &n_out);
    MC_T_TRUE(e != MC_NET_MESH_DISC_OK);
  }
  /* Every single corrupted byte. */
  for (size_t i = 0; i < bytes; i++) {
    memcpy(copy, buf, bytes);
    copy[i] ^= 0x40;
    MC_T_TRUE(mc_net_mesh_disc_decode(copy, bytes, key_a, &sender, out, &n_out) !=
              MC_NET_MESH_DISC_OK);
  }
  /* Garbage, a wrong version, oversized input. */
  memset(copy, 'G', sizeof(copy));
  MC_T_EQ_INT(mc_net_mesh_disc_decode(copy, 200, key_a, &sender, out, &n_out),
              MC_NET_MESH_DISC_MAGIC_BAD);
  memcpy(copy, buf, bytes);
  copy[4] = MC_NET_MESH_DISC_VERSION + 1;
  MC_T_EQ_INT(mc_net_mesh_disc_decode(copy, bytes, key_a, &sender, out, &n_out),
              MC_NET_MESH_DISC_VERSION_BAD);
  MC_T_EQ_INT(
      mc_net_mesh_disc_decode(buf, MC_NET_MESH_DISC_MAX_BYTES + 1, key_a, &sender, out, &n_out),
      MC_NET_MESH_DISC_OVERSIZED);
  /* A validly signed datagram with lying counts or lengths is malformed. */
  memcpy(copy, buf, bytes);
  copy[5] = 200;
  mc_hmac_sha256(key_a, MC_SHA256_BYTES, copy, bytes - MC_SHA256_BYTES,
                 copy + bytes - MC_SHA256_BYTES);
  MC_T_EQ_INT(mc_net_mesh_disc_decode(copy, bytes, key_a, &sender, out, &n_out),
              MC_NET_MESH_DISC_MALFORMED);
  /* Outputs untouched on failure. */
  MC_T_TRUE(sender == 0x5555);
  MC_T_EQ_INT(n_out, -1);
}

static void table_rules(void)
{
  static struct mc_net_mesh_table t;
  struct mc_net_mesh_rec r;
  struct mc_net_mesh_rec self;

  memset(&t, 0, sizeof(t));
  make_rec(&self, 1, 1, 1, 2);
  MC_T_EQ_INT(mc_net_mesh_table_update(&t, &self, 0), MC_NET_MESH_UPD_NEW);
  make_rec(&r, 2, 20, 5, 2);
  MC_T_EQ_INT(mc_net_mesh_table_update(&t, &r, 10), MC_NET_MESH_UPD_NEW);
  /* Same or older version: ignored, even with other contents. */
  MC_T_EQ_INT(mc_net_mesh_table_update(&t, &r, 11), MC_NET_MESH_UPD_STALE);
  make_rec(&r, 2, 20, 4, 1);
  MC_T_EQ_INT(mc_net_mesh_table_update(&t, &r, 12), MC_NET_MESH_UPD_STALE);
  MC_T_EQ_INT(t.e[1].rec.n_addrs, 2);
  /* Newer, same contents: a refresh; newer, other contents: a change. */
  make_rec(&r, 2, 20, 6, 2);
  MC_T_EQ_INT(mc_net_mesh_table_update(&t, &r, 13), MC_NET_MESH_UPD_REFRESH);
  make_rec(&r, 2, 20, 7, 3);
  MC_T_EQ_INT(mc_net_mesh_table_update(&t, &r, 14), MC_NET_MESH_UPD_CHANGED);
  MC_T_EQ_INT(t.e[1].rec.n_addrs, 3);
  MC_T_TRUE(t.e[1].heard_ns == 14);
  /* Another context of the same host is another entry. */
  make_rec(&r, 2, 21, 1, 2);
  MC_T_EQ_INT(mc_net_mesh_table_update(&t, &r, 15), MC_NET_MESH_UPD_NEW);
  MC_T_EQ_INT(t.n, 3);
  /* Bounded. */
  for (int i = t.n; i < MC_NET_MESH_MAX_ENTRIES; i++) {
    make_rec(&r, 100 + (uint64_t)i, 100 + (uint64_t)i, 1, 1);
    MC_T_EQ_INT(mc_net_mesh_table_update(&t, &r, 100), MC_NET_MESH_UPD_NEW);
  }
  make_rec(&r, 999, 999, 1, 1);
  MC_T_EQ_INT(mc_net_mesh_table_update(&t, &r, 100), MC_NET_MESH_UPD_FULL);
  MC_T_EQ_INT(t.n, MC_NET_MESH_MAX_ENTRIES);
  /* Expiry: everything older than the age, but never entry 0 (our own). */
  MC_T_EQ_INT(mc_net_mesh_table_expire(&t, 1000, 900), 2);
  MC_T_EQ_INT(mc_net_mesh_table_expire(&t, 1000, 800), MC_NET_MESH_MAX_ENTRIES - 3);
  MC_T_EQ_INT(t.n, 1);
  MC_T_TRUE(t.e[0].rec.host_hash == 1);
}

static void relay_codec(void)
{
  struct mc_net_mesh_relay_req in;
  struct mc_net_mesh_relay_req out;
  struct mc_net_mesh_handle h;
  uint8_t nonce[MC_NET_MESH_NONCE_BYTES] = {7};
  uint8_t nonce2[MC_NET_MESH_NONCE_BYTES] = {8};
  uint8_t buf[MC_NET_MESH_RELAY_REQ_BYTES];
  uint8_t copy[MC_NET_MESH_RELAY_REQ_BYTES];
  uint64_t relay = 0;
  int reason = 0;

  memset(&h, 0, sizeof(h));
  h.host_hash = 0xd;
  h.listen_id = 0x1d;
  h.n_socks = 1;
  h.min_task_bytes = 65536;
  h.n_addrs = 1;
  h.addrs[0].addr.sin.sin_family = AF_INET;
  MC_T_TRUE(inet_pton(AF_INET, "10.1.34.4", &h.addrs[0].addr.sin.sin_addr) == 1);
  mc_sockaddr_set_port(&h.addrs[0].addr, 4242);
  h.addrs[0].prefix_len = 24;
  memset(&in, 0, sizeof(in));
  in.hops_left = 2;
  in.conn_id = 0xc0ffee;
  in.origin_host = 0xa;
  MC_T_OK(mc_net_mesh_handle_encode(&h, in.handle));
  mc_net_mesh_relay_req_encode(&in, key_a, nonce, buf);
  MC_T_TRUE(mc_net_mesh_relay_req_is_one(buf, 4));
  MC_T_TRUE(!mc_net_mesh_relay_req_is_one(buf, 3));
  MC_T_EQ_INT(mc_net_mesh_relay_req_decode(buf, key_a, nonce, &out), MC_NET_MESH_REFUSE_NONE);
  MC_T_EQ_INT(out.hops_left, 2);
  MC_T_TRUE((out.conn_id == 0xc0ffee) && (out.origin_host == 0xa));
  MC_T_TRUE(memcmp(out.handle, in.handle, MC_NET_HANDLE_BYTES) == 0);
  /* Another key, or replayed to another challenge: the MAC does not verify. */
  MC_T_EQ_INT(mc_net_mesh_relay_req_decode(buf, key_b, nonce, &out), MC_NET_MESH_REFUSE_BAD_MAC);
  MC_T_EQ_INT(mc_net_mesh_relay_req_decode(buf, key_a, nonce2, &out), MC_NET_MESH_REFUSE_BAD_MAC);
  for (size_t i = 0; i < sizeof(buf); i++) {
    memcpy(copy, buf, sizeof(buf));
    copy[i] ^= 0x01;
    MC_T_TRUE(mc_net_mesh_relay_req_decode(copy, key_a, nonce, &out) != MC_NET_MESH_REFUSE_NONE);
  }
  /* A hop count beyond the limit is refused before anything else. */
  in.hops_left = MC_NET_MESH_MAX_HOPS + 1;
  mc_net_mesh_relay_req_encode(&in, key_a, nonce, buf);
  MC_T_EQ_INT(mc_net_mesh_relay_req_decode(buf, key_a, nonce, &out), MC_NET_MESH_REFUSE_MALFORMED);
  /* A refusal is the size of a challenge and is not one. */
  mc_net_mesh_refusal_encode(MC_NET_MESH_REFUSE_HOP_LIMIT, 0xb, buf);
  MC_T_TRUE(!mc_net_auth_challenge_decode(&mc_net_mesh_auth, buf, nonce));
  MC_T_TRUE(mc_net_mesh_refusal_decode(buf, &reason, &relay));
  MC_T_EQ_INT(reason, MC_NET_MESH_REFUSE_HOP_LIMIT);
  MC_T_TRUE(relay == 0xb);
  MC_T_TRUE(mc_net_mesh_refusal_is_transient(reason));
  MC_T_TRUE(!mc_net_mesh_refusal_is_transient(MC_NET_MESH_REFUSE_BAD_MAC));
  MC_T_CONTAINS(mc_net_mesh_refusal_str(MC_NET_MESH_REFUSE_UNKNOWN_DEST), "not in the relay");
  MC_T_CONTAINS(mc_net_mesh_refusal_str(99), "unknown");
  mc_net_auth_challenge_encode(&mc_net_mesh_auth, nonce, buf);
  MC_T_TRUE(!mc_net_mesh_refusal_decode(buf, &reason, &relay));
}

MC_T_MAIN(disc_round_trip, disc_refused, table_rules, relay_codec)
