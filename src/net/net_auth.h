/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connection authentication shared by the built-in nets (the socket net,
 * net_socket.c, and the Mesh net, mesh/): every socket of a connection
 * proves, in both directions, that its end knows the communicator's key
 * before a byte of data is taken from it:
 *
 *   acceptor  -> connector  CHALLENGE  magic, version, nonce_a
 *   connector -> acceptor   RESPONSE   magic, version, listen id, conn id,
 *                                      connector host, socket index,
 *                                      n_socks, nonce_c, MAC_c
 *   acceptor  -> connector  CONFIRM    magic, MAC_a
 *
 * MAC_x = HMAC-SHA256(key, label | role x | nonce_a | nonce_c | listen id |
 * conn id | connector host | index | n_socks). The role byte ('C' or 'A')
 * keeps either MAC from being replayed as the other; the fresh nonce_a of
 * the acceptor keeps a recorded response from being replayed to another
 * socket; the listen id (random, in the listener's handle) keeps a socket
 * meant for one listener from being accepted by another of the same
 * communicator. key = HMAC-SHA256(secret, key label | comm id), so that a
 * connection is bound to one communicator of one job.
 *
 * Each net has its own domain (magics, version, labels), so that a socket of
 * one net is never taken by the other. Byte layouts, in network order:
 *   Challenge (24): magic, version, 3 zero bytes, nonce_a (16).
 *   Response (88):  magic, version, 3 zero bytes, listen id, conn id,
 *                   connector host (8 each), index, n_socks (4 each),
 *                   nonce_c (16), MAC_c (32).
 *   Confirm (40):   magic, 4 zero bytes, MAC_a (32).
 * Pure functions: tests/fuzz/fuzz_net_handle.c feeds the decoders anything.
 */
#ifndef MC_NET_AUTH_H
#define MC_NET_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/crypto.h"

#define MC_NET_AUTH_NONCE_BYTES     16
#define MC_NET_AUTH_CHALLENGE_BYTES 24
#define MC_NET_AUTH_RESPONSE_BYTES  88
#define MC_NET_AUTH_CONFIRM_BYTES   40

struct mc_net_auth_domain {
  uint32_t magic_challenge;
  uint32_t magic_response;
  uint32_t magic_confirm;
  uint8_t version;
  char mac_label[4];     /* first bytes of every MAC's input */
  const char *key_label; /* HMAC input that makes the key from the secret */
};

/* The socket net's domain ("SCKC", "SCKR", "SCKA"; MACs under "sock"). */
extern const struct mc_net_auth_domain mc_net_auth_socket;

struct mc_net_auth_response {
  uint64_t listen_id;
  uint64_t conn_id;
  uint64_t host_hash; /* the connector's host (0 where the net has none) */
  uint32_t index;     /* 0: control socket, 1..n_socks: data socket */
  uint32_t n_socks;
  uint8_t nonce_c[MC_NET_AUTH_NONCE_BYTES];
  uint8_t mac[MC_SHA256_BYTES];
};

/* key = HMAC-SHA256(secret, d->key_label | comm id, big-endian); a NULL or
 * empty secret gives the key of the empty secret (integrity, not
 * authentication: anyone can compute it). */
void mc_net_auth_key(const struct mc_net_auth_domain *d, const void *secret, size_t secret_bytes,
                     uint64_t comm_id, uint8_t key_out[MC_SHA256_BYTES]);

/* Each encoder writes exactly its message's bytes; each decoder reads
 * exactly that many and returns false when a magic or version is wrong. */
void mc_net_auth_challenge_encode(const struct mc_net_auth_domain *d,
                                  const uint8_t nonce_a[MC_NET_AUTH_NONCE_BYTES], uint8_t *buf);
bool mc_net_auth_challenge_decode(const struct mc_net_auth_domain *d, const uint8_t *buf,
                                  uint8_t nonce_a_out[MC_NET_AUTH_NONCE_BYTES]);
void mc_net_auth_response_encode(const struct mc_net_auth_domain *d,
                                 const struct mc_net_auth_response *r, uint8_t *buf);
bool mc_net_auth_response_decode(const struct mc_net_auth_domain *d, const uint8_t *buf,
                                 struct mc_net_auth_response *r_out);
void mc_net_auth_confirm_encode(const struct mc_net_auth_domain *d,
                                const uint8_t mac[MC_SHA256_BYTES], uint8_t *buf);
bool mc_net_auth_confirm_decode(const struct mc_net_auth_domain *d, const uint8_t *buf,
                                uint8_t mac_out[MC_SHA256_BYTES]);

/* Moves the rest of one handshake message, buf[*done .. bytes), through the
 * non-blocking socket fd without waiting. Returns 1 once all of it went
 * through, 0 when the socket would block, -1 when the peer closed (errno
 * 0) or the socket failed (errno set). A read never takes more than the
 * message, so what follows it stays in the socket. */
int mc_net_auth_io(int fd, bool is_send, uint8_t *buf, size_t bytes, size_t *done);

/* MAC of role 'C' (connector) or 'A' (acceptor) over the response's fields. */
void mc_net_auth_mac(const struct mc_net_auth_domain *d, const uint8_t key[MC_SHA256_BYTES],
                     char role, const uint8_t nonce_a[MC_NET_AUTH_NONCE_BYTES],
                     const struct mc_net_auth_response *r, uint8_t mac_out[MC_SHA256_BYTES]);

#endif /* MC_NET_AUTH_H */
