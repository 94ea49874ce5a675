/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small cryptographic helpers for authenticating connections: SHA-256
 * (FIPS 180-4), HMAC-SHA256 (RFC 2104) and a constant-time comparison.
 * Written for handshakes and digests, not for bulk data; no state is shared
 * between calls but a cache of whether the CPU has SHA instructions, so
 * every function is thread-safe.
 */
#ifndef MC_CORE_CRYPTO_H
#define MC_CORE_CRYPTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MC_SHA256_BYTES       32
#define MC_SHA256_BLOCK_BYTES 64

/* Incremental SHA-256: init, any number of updates, final. */
struct mc_sha256 {
  uint32_t h[8];
  uint64_t total_bytes;
  uint8_t block[MC_SHA256_BLOCK_BYTES];
  size_t block_used;
};

void mc_sha256_init(struct mc_sha256 *s);
void mc_sha256_update(struct mc_sha256 *s, const void *data, size_t bytes);
/* Writes the 32-byte digest; s must be initialised again before reuse. */
void mc_sha256_final(struct mc_sha256 *s, uint8_t digest_out[MC_SHA256_BYTES]);
/* One-shot digest of data. */
void mc_sha256(const void *data, size_t bytes, uint8_t digest_out[MC_SHA256_BYTES]);

/* Whether SHA-256 runs on the CPU's SHA instructions (x86-64 SHA
 * extensions, when the CPU has them) rather than the portable rounds. */
bool mc_sha256_uses_cpu_ext(void);
/* For tests: the portable rounds even where the CPU has the instructions
 * (true), or back to what the CPU has (false). Process-wide. */
void mc_sha256_force_portable(bool is_portable);

/* Incremental HMAC-SHA256 with a key of any length (longer than a block is
 * hashed first, as RFC 2104 says). */
struct mc_hmac_sha256 {
  struct mc_sha256 inner;
  uint8_t outer_key[MC_SHA256_BLOCK_BYTES]; /* key ^ opad */
};

void mc_hmac_sha256_init(struct mc_hmac_sha256 *h, const void *key, size_t key_bytes);
void mc_hmac_sha256_update(struct mc_hmac_sha256 *h, const void *data, size_t bytes);
void mc_hmac_sha256_final(struct mc_hmac_sha256 *h, uint8_t mac_out[MC_SHA256_BYTES]);
/* One-shot MAC of data. */
void mc_hmac_sha256(const void *key, size_t key_bytes, const void *data, size_t bytes,
                    uint8_t mac_out[MC_SHA256_BYTES]);

/* True when the bytes are equal; the time taken depends on `bytes` only, never
 * on where the buffers differ (for comparing MACs). */
bool mc_crypto_equal(const void *a, const void *b, size_t bytes);

/* Overwrites bytes with zeros in a way the compiler does not remove. */
void mc_crypto_wipe(void *buf, size_t bytes);

#endif /* MC_CORE_CRYPTO_H */
