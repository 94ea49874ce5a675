/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The challenge, response and confirm of net_auth.h, written byte by byte in
 * network order so that hosts of any endianness and compilers of any padding
 * agree, and the MACs and keys over them.
 */
#include "net_auth.h"

#include "core/byteorder.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

const struct mc_net_auth_domain mc_net_auth_socket = {
    .magic_challenge = 0x53434b43u, /* "SCKC" */
    .magic_response = 0x53434b52u,  /* "SCKR" */
    .magic_confirm = 0x53434b41u,   /* "SCKA" */
    .version = 1,
    .mac_label = {'s', 'o', 'c', 'k'},
    .key_label = "meshccl socket key",
};

void mc_net_auth_key(const struct mc_net_auth_domain *d, const void *secret, size_t secret_bytes,
                     uint64_t comm_id, uint8_t key_out[MC_SHA256_BYTES])
{
  struct mc_hmac_sha256 h;
  uint8_t id[8];

  mc_be_put64(id, comm_id);
  if (secret == NULL)
    secret_bytes = 0;
  mc_hmac_sha256_init(&h, (secret != NULL) ? secret : "", secret_bytes);
  mc_hmac_sha256_update(&h, d->key_label, strlen(d->key_label));
  mc_hmac_sha256_update(&h, id, sizeof(id));
  mc_hmac_sha256_final(&h, key_out);
  mc_crypto_wipe(&h, sizeof(h));
}

void mc_net_auth_challenge_encode(const struct mc_net_auth_domain *d,
                                  const uint8_t nonce_a[MC_NET_AUTH_NONCE_BYTES], uint8_t *buf)
{
  memset(buf, 0, MC_NET_AUTH_CHALLENGE_BYTES);
  mc_be_put32(buf, d->magic_challenge);
  buf[4] = d->version;
  memcpy(buf + 8, nonce_a, MC_NET_AUTH_NONCE_BYTES);
}

bool mc_net_auth_challenge_decode(const struct mc_net_auth_domain *d, const uint8_t *buf,
                                  uint8_t nonce_a_out[MC_NET_AUTH_NONCE_BYTES])
{
  if ((mc_be_get32(buf) != d->magic_challenge) || (buf[4] != d->version))
    return false;
  memcpy(nonce_a_out, buf + 8, MC_NET_AUTH_NONCE_BYTES);
  return true;
}

void mc_net_auth_response_encode(const struct mc_net_auth_domain *d,
                                 const struct mc_net_auth_response *r, uint8_t *buf)
{
  memset(buf, 0, MC_NET_AUTH_RESPONSE_BYTES);
  mc_be_put32(buf, d->magic_response);
  buf[4] = d->version;
  mc_be_put64(buf + 8, r->listen_id);
  mc_be_put64(buf + 16, r->conn_id);
  mc_be_put64(buf + 24, r->host_hash);
  mc_be_put32(buf + 32, r->index);
  mc_be_put32(buf + 36, r->n_socks);
  memcpy(buf + 40, r->nonce_c, MC_NET_AUTH_NONCE_BYTES);
  memcpy(buf + 56, r->mac, MC_SHA256_BYTES);
}

bool mc_net_auth_response_decode(const struct mc_net_auth_domain *d, const uint8_t *buf,
                                 struct mc_net_auth_response *r_out)
{
  if ((mc_be_get32(buf) != d->magic_response) || (buf[4] != d->version))
    return false;
  r_out->listen_id = mc_be_get64(buf + 8);
  r_out->conn_id = mc_be_get64(buf + 16);
  r_out->host_hash = mc_be_get64(buf + 24);
  r_out->index = mc_be_get32(buf + 32);
  r_out->n_socks = mc_be_get32(buf + 36);
  memcpy(r_out->nonce_c, buf + 40, MC_NET_AUTH_NONCE_BYTES);
  memcpy(r_out->mac, buf + 56, MC_SHA256_BYTES);
  return true;
}

void mc_net_auth_confirm_encode(const struct mc_net_auth_domain *d,
                                const uint8_t mac[MC_SHA256_BYTES], uint8_t *buf)
{
  memset(buf, 0, MC_NET_AUTH_CONFIRM_BYTES);
  mc_be_put32(buf, d->magic_confirm);
  memcpy(buf + 8, mac, MC_SHA256_BYTES);
}

bool mc_net_auth_confirm_decode(const struct mc_net_auth_domain *d, const uint8_t *buf,
                                uint8_t mac_out[MC_SHA256_BYTES])
{
  if (mc_be_get32(buf) != d->magic_confirm)
    return false;
  memcpy(mac_out, buf + 8, MC_SHA256_BYTES);
  return true;
}

void mc_net_auth_mac(const struct mc_net_auth_domain *d, const uint8_t key[MC_SHA256_BYTES],
                     char role, const uint8_t nonce_a[MC_NET_AUTH_NONCE_BYTES],
                     const struct mc_net_auth_response *r, uint8_t mac_out[MC_SHA256_BYTES])
{
  struct mc_hmac_sha256 h;
  uint8_t fields[32];

  mc_be_put64(fields, r->listen_id);
  mc_be_put64(fields + 8, r->conn_id);
  mc_be_put64(fields + 16, r->host_hash);
  mc_be_put32(fields + 24, r->index);
  mc_be_put32(fields + 28, r->n_socks);
  mc_hmac_sha256_init(&h, key, MC_SHA256_BYTES);
  mc_hmac_sha256_update(&h, d->mac_label, sizeof(d->mac_label));
  mc_hmac_sha256_update(&h, &role, 1);
  mc_hmac_sha256_update(&h, nonce_a, MC_NET_AUTH_NONCE_BYTES);
  mc_hmac_sha256_update(&h, r->nonce_c, MC_NET_AUTH_NONCE_BYTES);
  mc_hmac_sha256_update(&h, fields, sizeof(fields));
  mc_hmac_sha256_final(&h, mac_out);
}

int mc_net_auth_io(int fd, bool is_send, uint8_t *buf, size_t bytes, size_t *done)
{
  while (*done < bytes) {
    ssize_t n = is_send ? send(fd, buf + *done, bytes - *done, MSG_DONTWAIT | MSG_NOSIGNAL)
                        : recv(fd, buf + *done, bytes - *done, MSG_DONTWAIT);
    if (n > 0) {
      *done += (size_t)n;
      continue;
    }
    if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK) || (errno == EINTR)))
      return 0;
    if (n == 0)
      errno = 0;
    return -1;
  }
  return 1;
}
