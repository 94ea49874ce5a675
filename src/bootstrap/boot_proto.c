/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bootstrap's wire formats as pure functions over bytes: the
 * authentication exchange, the framed rank <-> root control messages and the
 * ring / p2p headers (bootstrap_int.h describes them). Nothing here touches
 * a socket or logs, so tests/fuzz/fuzz_boot_msg.c can feed every parser
 * arbitrary bytes. NCCL's bootstrap.cc trusts what it receives (socket
 * magic aside); here every rank number, length and address is checked
 * before it is used.
 */
#include "bootstrap_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define AUTH_KEY_LABEL "meshccl bootstrap auth v1"

_Static_assert(MC_BOOT_KEY_BYTES == MC_SHA256_BYTES, "a key is one HMAC-SHA256");
_Static_assert(MC_BOOT_PROOF_BYTES == MC_SHA256_BYTES, "a proof is one HMAC-SHA256");

/* Writes why (when not NULL) and returns false. */
static bool fail_why(char *why, size_t why_bytes, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool fail_why(char *why, size_t why_bytes, const char *fmt, ...)
{
  va_list ap;

  if ((why != NULL) && (why_bytes > 0)) {
    va_start(ap, fmt);
    vsnprintf(why, why_bytes, fmt, ap);
    va_end(ap);
  }
  return false;
}

/* ---------- authentication ---------- */

void mc_boot_auth_key(const uint8_t secret[MC_BOOT_SECRET_BYTES],
                      uint8_t key_out[MC_BOOT_KEY_BYTES])
{
  mc_hmac_sha256(secret, MC_BOOT_SECRET_BYTES, AUTH_KEY_LABEL, sizeof(AUTH_KEY_LABEL) - 1, key_out);
}

void mc_boot_auth_mac(const uint8_t key[MC_BOOT_KEY_BYTES], char dir, const struct mc_boot_auth *a,
                      uint8_t mac_out[MC_SHA256_BYTES])
{
  struct mc_hmac_sha256 h;
  uint32_t version = MC_BOOT_AUTH_VERSION;
  uint8_t d = (uint8_t)dir;

  /* The direction keeps a server's MAC from serving as a client's proof
   * (reflection); magic and type bind the proof to this id and this kind
   * of connection (root, ring/p2p). */
  mc_hmac_sha256_init(&h, key, MC_BOOT_KEY_BYTES);
  mc_hmac_sha256_update(&h, &d, sizeof(d));
  mc_hmac_sha256_update(&h, &version, sizeof(version));
  mc_hmac_sha256_update(&h, &a->magic, sizeof(a->magic));
  mc_hmac_sha256_update(&h, &a->type, sizeof(a->type));
  mc_hmac_sha256_update(&h, a->nc, sizeof(a->nc));
  mc_hmac_sha256_update(&h, a->ns, sizeof(a->ns));
  mc_hmac_sha256_final(&h, mac_out);
}

void mc_boot_auth_hello_build(const struct mc_boot_auth *a, uint8_t out[MC_BOOT_HELLO_BYTES])
{
  uint32_t version = MC_BOOT_AUTH_VERSION;

  memcpy(out, &a->magic, sizeof(a->magic));
  memcpy(out + 8, &a->type, sizeof(a->type));
  memcpy(out + MC_BOOT_HS_BYTES, &version, sizeof(version));
  memcpy(out + MC_BOOT_HS_BYTES + 4, a->nc, MC_BOOT_NONCE_BYTES);
}

int mc_boot_auth_hello_parse(struct mc_boot_auth *a, const uint8_t *buf, size_t got, char *why,
                             size_t why_bytes)
{
  uint64_t magic;
  uint32_t type;
  uint32_t version;

  if (got > MC_BOOT_HELLO_BYTES) {
    fail_why(why, why_bytes, "%zu bytes where a hello has %d", got, MC_BOOT_HELLO_BYTES);
    return -1;
  }
  /* Judge each field as soon as it is complete: a stranger is dropped at
   * its first wrong field, with NCCL's words for the handshake. */
  if (got >= 8) {
    memcpy(&magic, buf, sizeof(magic));
    if (magic != a->magic) {
      fail_why(why, why_bytes, "socket magic mismatch (0x%llx, expected 0x%llx)",
               (unsigned long long)magic, (unsigned long long)a->magic);
      return -1;
    }
  }
  if (got >= MC_BOOT_HS_BYTES) {
    memcpy(&type, buf + 8, sizeof(type));
    if (type != a->type) {
      fail_why(why, why_bytes,
               "wrong socket type %u (expected %u): peer connected to the wrong socket", type,
               a->type);
      return -1;
    }
  }
  if (got >= MC_BOOT_HS_BYTES + 4) {
    memcpy(&version, buf + MC_BOOT_HS_BYTES, sizeof(version));
    if (version != MC_BOOT_AUTH_VERSION) {
      fail_why(why, why_bytes,
               "not an authentication hello (version field %u, expected %u): not meshccl, or a "
               "meshccl without bootstrap authentication",
               version, MC_BOOT_AUTH_VERSION);
      return -1;
    }
  }
  if (got < MC_BOOT_HELLO_BYTES)
    return 0;
  memcpy(a->nc, buf + MC_BOOT_HS_BYTES + 4, MC_BOOT_NONCE_BYTES);
  return 1;
}

void mc_boot_auth_challenge_build(const struct mc_boot_auth *a,
                                  uint8_t out[MC_BOOT_CHALLENGE_BYTES])
{
  uint32_t version = MC_BOOT_AUTH_VERSION;

  memcpy(out, &version, sizeof(version));
  memcpy(out + 4, a->ns, MC_BOOT_NONCE_BYTES);
}

bool mc_boot_auth_challenge_parse(struct mc_boot_auth *a, const uint8_t *buf, size_t bytes,
                                  char *why, size_t why_bytes)
{
  uint32_t version;

  if (bytes != MC_BOOT_CHALLENGE_BYTES)
    return fail_why(why, why_bytes, "a challenge of %zu bytes, expected %d", bytes,
                    MC_BOOT_CHALLENGE_BYTES);
  memcpy(&version, buf, sizeof(version));
  if (version != MC_BOOT_AUTH_VERSION)
    return fail_why(why, why_bytes,
                    "authentication version %u, expected %u: not a meshccl bootstrap peer, or "
                    "another meshccl version",
                    version, MC_BOOT_AUTH_VERSION);
  memcpy(a->ns, buf + 4, MC_BOOT_NONCE_BYTES);
  return true;
}

void mc_boot_auth_proof_build(const uint8_t key[MC_BOOT_KEY_BYTES], const struct mc_boot_auth *a,
                              uint8_t out[MC_BOOT_PROOF_BYTES])
{
  mc_boot_auth_mac(key, 'C', a, out);
}

bool mc_boot_auth_proof_check(const uint8_t key[MC_BOOT_KEY_BYTES], const struct mc_boot_auth *a,
                              const uint8_t *buf, size_t bytes)
{
  uint8_t want[MC_BOOT_PROOF_BYTES];
  bool ok;

  if (bytes != MC_BOOT_PROOF_BYTES)
    return false;
  mc_boot_auth_mac(key, 'C', a, want);
  ok = mc_crypto_equal(want, buf, sizeof(want));
  mc_crypto_wipe(want, sizeof(want));
  return ok;
}

void mc_boot_auth_verdict_build(const uint8_t key[MC_BOOT_KEY_BYTES], const struct mc_boot_auth *a,
                                bool is_accepted, uint8_t out[MC_BOOT_VERDICT_BYTES])
{
  uint32_t status = is_accepted ? MC_BOOT_VERDICT_ACCEPT : MC_BOOT_VERDICT_REJECT;

  memset(out, 0, MC_BOOT_VERDICT_BYTES);
  memcpy(out, &status, sizeof(status));
  if (is_accepted)
    mc_boot_auth_mac(key, 'S', a, out + 4);
}

ncclResult_t mc_boot_auth_verdict_parse(const uint8_t key[MC_BOOT_KEY_BYTES],
                                        const struct mc_boot_auth *a, const uint8_t *buf,
                                        size_t bytes, char *why, size_t why_bytes)
{
  uint8_t want[MC_SHA256_BYTES];
  uint32_t status;
  bool ok;

  if (bytes != MC_BOOT_VERDICT_BYTES) {
    fail_why(why, why_bytes, "a verdict of %zu bytes, expected %d", bytes, MC_BOOT_VERDICT_BYTES);
    return ncclRemoteError;
  }
  memcpy(&status, buf, sizeof(status));
  if (status == MC_BOOT_VERDICT_REJECT) {
    fail_why(why, why_bytes, "it rejected this process's proof of the job's secret");
    return ncclInvalidUsage;
  }
  if (status != MC_BOOT_VERDICT_ACCEPT) {
    fail_why(why, why_bytes, "verdict 0x%08x is neither accept nor reject (protocol error)",
             status);
    return ncclRemoteError;
  }
  mc_boot_auth_mac(key, 'S', a, want);
  ok = mc_crypto_equal(want, buf + 4, sizeof(want));
  mc_crypto_wipe(want, sizeof(want));
  if (!ok) {
    fail_why(why, why_bytes, "it did not prove that it knows the job's secret");
    return ncclRemoteError;
  }
  return ncclSuccess;
}

/* ---------- control messages ---------- */

size_t mc_boot_rx_want(const struct mc_boot_rx *rx)
{
  return MC_BOOT_CTL_FRAME_BYTES - rx->got;
}

void mc_boot_rx_free(struct mc_boot_rx *rx)
{
  free(rx->buf);
  rx->buf = NULL;
  rx->got = 0;
}

static bool frame_length_ok(const uint8_t *len_bytes, char *why, size_t why_bytes)
{
  uint32_t len;

  memcpy(&len, len_bytes, sizeof(len));
  if (len != sizeof(struct mc_boot_ctl))
    return fail_why(why, why_bytes, "a control message of %u bytes, expected %zu", len,
                    sizeof(struct mc_boot_ctl));
  return true;
}

int mc_boot_rx_feed(struct mc_boot_rx *rx, const void *data, size_t n, struct mc_boot_ctl *msg_out,
                    char *why, size_t why_bytes)
{
  const uint8_t *frame = data;

  if (n > mc_boot_rx_want(rx)) {
    fail_why(why, why_bytes, "%zu bytes fed where %zu are missing", n, mc_boot_rx_want(rx));
    mc_boot_rx_free(rx);
    return -1;
  }
  if (n == 0)
    return 0;
  /* The usual case, a whole message at once, needs no buffer. */
  if ((rx->got > 0) || (n < MC_BOOT_CTL_FRAME_BYTES)) {
    if ((rx->buf == NULL) && ((rx->buf = malloc(MC_BOOT_CTL_FRAME_BYTES)) == NULL)) {
      fail_why(why, why_bytes, "out of memory for a control message");
      mc_boot_rx_free(rx);
      return -1;
    }
    memcpy(rx->buf + rx->got, data, n);
    rx->got += n;
    frame = rx->buf;
    n = rx->got;
  }
  if ((n >= sizeof(uint32_t)) && !frame_length_ok(frame, why, why_bytes)) {
    mc_boot_rx_free(rx);
    return -1;
  }
  if (n < MC_BOOT_CTL_FRAME_BYTES)
    return 0;
  memcpy(msg_out, frame + sizeof(uint32_t), sizeof(*msg_out));
  mc_boot_rx_free(rx);
  return 1;
}

bool mc_boot_addr_check(const union mc_sockaddr *a, char *why, size_t why_bytes)
{
  int family = a->sa.sa_family;

  if ((family != AF_INET) && (family != AF_INET6))
    return fail_why(why, why_bytes, "address family %d is neither IPv4 nor IPv6", family);
  if (mc_sockaddr_port(a) == 0)
    return fail_why(why, why_bytes, "address without a port");
  return true;
}

static void terminate_strings(struct mc_boot_ctl *m)
{
  m->host[sizeof(m->host) - 1] = '\0';
  m->text[sizeof(m->text) - 1] = '\0';
}

/* A FAIL's code must name a failure: ncclSuccess and ncclInProgress would
 * let the receiver carry on with fields that were never filled. */
static bool fail_code_ok(int32_t code)
{
  return (code > ncclSuccess) && (code < ncclNumResults) && (code != ncclInProgress);
}

bool mc_boot_ctl_check_register(struct mc_boot_ctl *m, char *why, size_t why_bytes)
{
  char a[MC_SOCKADDR_STRLEN];

  terminate_strings(m);
  if ((m->kind != MC_BOOT_CTL_REGISTER) && (m->kind != MC_BOOT_CTL_NEIGHBOR))
    return fail_why(why, why_bytes, "message kind %u where a registration was expected", m->kind);
  if ((m->n_ranks < 1) || (m->n_ranks > MC_BOOT_MAX_RANKS))
    return fail_why(why, why_bytes, "registration with nranks %d (1 to %d accepted)", m->n_ranks,
                    MC_BOOT_MAX_RANKS);
  if ((m->rank < 0) || (m->rank >= m->n_ranks))
    return fail_why(why, why_bytes, "registration of rank %d of %d ranks", m->rank, m->n_ranks);
  if ((m->n_roots < 1) || (m->n_roots > m->n_ranks))
    return fail_why(why, why_bytes, "registration of rank %d with %d roots for %d ranks", m->rank,
                    m->n_roots, m->n_ranks);
  if ((m->root < 0) || (m->root >= m->n_roots))
    return fail_why(why, why_bytes, "registration of rank %d with root %d of %d", m->rank, m->root,
                    m->n_roots);
  if ((m->kind == MC_BOOT_CTL_NEIGHBOR) && (m->n_roots < 2))
    return fail_why(why, why_bytes, "neighbor registration of rank %d with a single root", m->rank);
  if (!mc_boot_addr_check(&m->addr, a, sizeof(a)))
    return fail_why(why, why_bytes, "registration of rank %d with ring address: %s", m->rank, a);
  if ((m->kind == MC_BOOT_CTL_REGISTER) && !mc_boot_addr_check(&m->p2p, a, sizeof(a)))
    return fail_why(why, why_bytes, "registration of rank %d with p2p address: %s", m->rank, a);
  return true;
}

bool mc_boot_ctl_check_from_rank(struct mc_boot_ctl *m, char *why, size_t why_bytes)
{
  terminate_strings(m);
  if (m->kind == MC_BOOT_CTL_DONE)
    return true;
  if (m->kind != MC_BOOT_CTL_FAIL)
    return fail_why(why, why_bytes, "message kind %u where DONE or FAIL was expected", m->kind);
  if (!fail_code_ok(m->code))
    return fail_why(why, why_bytes, "FAIL with code %d, which is not a failure", m->code);
  return true;
}

bool mc_boot_ctl_check_from_root(struct mc_boot_ctl *m, int rank, int n_ranks, bool is_next_ok,
                                 char *why, size_t why_bytes)
{
  char a[MC_SOCKADDR_STRLEN];

  terminate_strings(m);
  if (m->kind == MC_BOOT_CTL_FAIL) {
    if (!fail_code_ok(m->code))
      return fail_why(why, why_bytes, "FAIL with code %d, which is not a failure", m->code);
    return true;
  }
  if ((m->kind != MC_BOOT_CTL_NEXT) || !is_next_ok)
    return fail_why(why, why_bytes, "unexpected message kind %u", m->kind);
  if ((n_ranks < 1) || (m->n_ranks != n_ranks) || (m->rank != (rank + 1) % n_ranks))
    return fail_why(why, why_bytes, "NEXT names rank %d of %d, expected rank %d of %d", m->rank,
                    m->n_ranks, (n_ranks > 0) ? (rank + 1) % n_ranks : -1, n_ranks);
  if (!mc_boot_addr_check(&m->addr, a, sizeof(a)))
    return fail_why(why, why_bytes, "NEXT with ring address: %s", a);
  if ((m->table_bytes != 0) && (m->table_bytes != (uint64_t)n_ranks * sizeof(struct mc_boot_peer)))
    return fail_why(why, why_bytes, "NEXT announcing an address table of %u bytes (%d ranks: %zu)",
                    m->table_bytes, n_ranks, (size_t)n_ranks * sizeof(struct mc_boot_peer));
  return true;
}

/* ---------- ring and p2p headers ---------- */

bool mc_boot_p2p_header_check(const struct mc_boot_p2p_header *h, int n_ranks, char *why,
                              size_t why_bytes)
{
  if ((h->rank < 0) || (h->rank >= n_ranks))
    return fail_why(why, why_bytes, "message header from rank %d of %d", h->rank, n_ranks);
  if ((h->bytes > MC_BOOT_MAX_MSG_BYTES) && (h->bytes != MC_BOOT_STREAM_BYTES) &&
      (h->bytes != MC_BOOT_BYE_BYTES))
    return fail_why(why, why_bytes, "message header announcing %u bytes (at most %u)", h->bytes,
                    MC_BOOT_MAX_MSG_BYTES);
  return true;
}

bool mc_boot_ring_hello_check(int32_t from, int prev, int n_ranks, char *why, size_t why_bytes)
{
  if ((from < 0) || (from >= n_ranks))
    return fail_why(why, why_bytes, "ring connection from rank %d of %d", from, n_ranks);
  if (from != prev)
    return fail_why(why, why_bytes, "ring connection from rank %d, expected rank %d", from, prev);
  return true;
}

bool mc_boot_ag_header_check(const uint32_t hdr[2], size_t slice, char *why, size_t why_bytes)
{
  if (hdr[1] != slice)
    return fail_why(why, why_bytes, "allgather slices of %u bytes, expected %zu", hdr[1], slice);
  return true;
}
