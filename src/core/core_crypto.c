/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SHA-256 as FIPS 180-4 section 6.2 defines it (message schedule of 64
 * words, the eight working variables, big-endian length padding) and HMAC
 * as RFC 2104 section 2 defines it (H(K ^ opad, H(K ^ ipad, text))). Checked
 * against the FIPS 180-4 examples and RFC 4231's test cases in
 * tests/unit/test_crypto.c.
 */
#include "crypto.h"

#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

static const uint32_t k_round[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static uint32_t rotr(uint32_t x, int n)
{
  return (x >> n) | (x << (32 - n));
}

static void compress_portable(uint32_t h[8], const uint8_t block[MC_SHA256_BLOCK_BYTES])
{
  uint32_t w[64];
  uint32_t v[8];

  for (int i = 0; i < 16; i++)
    w[i] = ((uint32_t)block[4 * i] << 24) | ((uint32_t)block[4 * i + 1] << 16) |
           ((uint32_t)block[4 * i + 2] << 8) | (uint32_t)block[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  memcpy(v, h, sizeof(v));
  for (int i = 0; i < 64; i++) {
    uint32_t s1 = rotr(v[4], 6) ^ rotr(v[4], 11) ^ rotr(v[4], 25);
    uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
    uint32_t t1 = v[7] + s1 + ch + k_round[i] + w[i];
    uint32_t s0 = rotr(v[0], 2) ^ rotr(v[0], 13) ^ rotr(v[0], 22);
    uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);
    uint32_t t2 = s0 + maj;

    v[7] = v[6];
    v[6] = v[5];
    v[5] = v[4];
    v[4] = v[3] + t1;
    v[3] = v[2];
    v[2] = v[1];
    v[1] = v[0];
    v[0] = t1 + t2;
  }
  for (int i = 0; i < 8; i++)
    h[i] += v[i];
}

#if defined(__x86_64__)
/*
 * The same block with the x86 SHA extensions (SHA256RNDS2 does two rounds,
 * SHA256MSG1/MSG2 the message schedule), several times faster than the
 * portable rounds: the topology's digests hash a system of hundreds of
 * devices on every rank. The instructions keep the state as ABEF and CDGH
 * (A in the highest lane); the words of a block are big-endian.
 */
__attribute__((target("sha,sse4.1,ssse3"))) static void
compress_sha_ext(uint32_t h[8], const uint8_t block[MC_SHA256_BLOCK_BYTES])
{
  const __m128i bswap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
  __m128i abcd = _mm_loadu_si128((const __m128i *)(const void *)&h[0]); /* lanes A B C D */
  __m128i efgh = _mm_loadu_si128((const __m128i *)(const void *)&h[4]); /* lanes E F G H */
  __m128i badc = _mm_shuffle_epi32(abcd, 0xB1);
  __m128i hgfe = _mm_shuffle_epi32(efgh, 0x1B);
  __m128i abef = _mm_alignr_epi8(badc, hgfe, 8);    /* lanes F E B A */
  __m128i cdgh = _mm_blend_epi16(hgfe, badc, 0xF0); /* lanes H G D C */
  __m128i abef0 = abef;
  __m128i cdgh0 = cdgh;
  __m128i w[4];

  for (int i = 0; i < 16; i++) { /* four rounds each */
    __m128i wk;
    if (i < 4)
      w[i] =
          _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(block + 16 * i)), bswap);
    else /* w[t] = s1(w[t-2]) + w[t-7] + s0(w[t-15]) + w[t-16], four at a time */
      w[i % 4] =
          _mm_sha256msg2_epu32(_mm_add_epi32(_mm_sha256msg1_epu32(w[i % 4], w[(i + 1) % 4]),
                                             _mm_alignr_epi8(w[(i + 3) % 4], w[(i + 2) % 4], 4)),
                               w[(i + 3) % 4]);
    wk = _mm_add_epi32(w[i % 4], _mm_loadu_si128((const __m128i *)(const void *)&k_round[4 * i]));
    cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
    abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
  }
  abef = _mm_add_epi32(abef, abef0);
  cdgh = _mm_add_epi32(cdgh, cdgh0);
  badc = _mm_shuffle_epi32(abef, 0x1B); /* lanes A B E F */
  hgfe = _mm_shuffle_epi32(cdgh, 0xB1); /* lanes G H C D */
  _mm_storeu_si128((__m128i *)(void *)&h[0], _mm_blend_epi16(badc, hgfe, 0xF0));
  _mm_storeu_si128((__m128i *)(void *)&h[4], _mm_alignr_epi8(hgfe, badc, 8));
}

static bool cpu_has_sha_ext(void)
{
  unsigned eax, ebx, ecx, edx;

  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0)
    return false;
  if (((ecx & bit_SSSE3) == 0) || ((ecx & bit_SSE4_1) == 0))
    return false;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0)
    return false;
  return (ebx & bit_SHA) != 0;
}
#endif

/* -1 not looked at yet, 0 portable, 1 the CPU's instructions (a cache of
 * what the CPU has: every thread that fills it writes the same value). */
static int sha_ext = -1;

void mc_sha256_force_portable(bool is_portable)
{
#if defined(__x86_64__)
  __atomic_store_n(&sha_ext, (is_portable || !cpu_has_sha_ext()) ? 0 : 1, __ATOMIC_RELAXED);
#else
  (void)is_portable;
#endif
}

bool mc_sha256_uses_cpu_ext(void)
{
  int v = __atomic_load_n(&sha_ext, __ATOMIC_RELAXED);

#if defined(__x86_64__)
  if (v < 0) {
    v = cpu_has_sha_ext() ? 1 : 0;
    __atomic_store_n(&sha_ext, v, __ATOMIC_RELAXED);
  }
#endif
  return v > 0;
}

static void compress(uint32_t h[8], const uint8_t block[MC_SHA256_BLOCK_BYTES])
{
#if defined(__x86_64__)
  if (mc_sha256_uses_cpu_ext()) {
    compress_sha_ext(h, block);
    return;
  }
#endif
  compress_portable(h, block);
}

void mc_sha256_init(struct mc_sha256 *s)
{
  static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

  memcpy(s->h, h0, sizeof(h0));
  s->total_bytes = 0;
  s->block_used = 0;
}

void mc_sha256_update(struct mc_sha256 *s, const void *data, size_t bytes)
{
  const uint8_t *p = data;

  s->total_bytes += bytes;
  while (bytes > 0) {
    size_t take = MC_SHA256_BLOCK_BYTES - s->block_used;

    if (take > bytes)
      take = bytes;
    memcpy(s->block + s->block_used, p, take);
    s->block_used += take;
    p += take;
    bytes -= take;
    if (s->block_used == MC_SHA256_BLOCK_BYTES) {
      compress(s->h, s->block);
      s->block_used = 0;
    }
  }
}

void mc_sha256_final(struct mc_sha256 *s, uint8_t digest_out[MC_SHA256_BYTES])
{
  uint64_t bits = s->total_bytes * 8;

  /* Padding: 0x80, zeros up to 56 mod 64, then the length in bits (big endian). */
  s->block[s->block_used++] = 0x80;
  if (s->block_used > MC_SHA256_BLOCK_BYTES - 8) {
    memset(s->block + s->block_used, 0, MC_SHA256_BLOCK_BYTES - s->block_used);
    compress(s->h, s->block);
    s->block_used = 0;
  }
  memset(s->block + s->block_used, 0, MC_SHA256_BLOCK_BYTES - 8 - s->block_used);
  for (int i = 0; i < 8; i++)
    s->block[MC_SHA256_BLOCK_BYTES - 1 - i] = (uint8_t)(bits >> (8 * i));
  compress(s->h, s->block);
  for (int i = 0; i < 8; i++) {
    digest_out[4 * i] = (uint8_t)(s->h[i] >> 24);
    digest_out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
    digest_out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
    digest_out[4 * i + 3] = (uint8_t)s->h[i];
  }
  mc_crypto_wipe(s, sizeof(*s));
}

void mc_sha256(const void *data, size_t bytes, uint8_t digest_out[MC_SHA256_BYTES])
{
  struct mc_sha256 s;

  mc_sha256_init(&s);
  mc_sha256_update(&s, data, bytes);
  mc_sha256_final(&s, digest_out);
}

void mc_hmac_sha256_init(struct mc_hmac_sha256 *h, const void *key, size_t key_bytes)
{
  uint8_t k[MC_SHA256_BLOCK_BYTES];
  uint8_t inner_key[MC_SHA256_BLOCK_BYTES];

  memset(k, 0, sizeof(k));
  if (key_bytes > MC_SHA256_BLOCK_BYTES)
    mc_sha256(key, key_bytes, k);
  else if (key_bytes > 0)
    memcpy(k, key, key_bytes);
  for (int i = 0; i < MC_SHA256_BLOCK_BYTES; i++) {
    inner_key[i] = k[i] ^ 0x36;
    h->outer_key[i] = k[i] ^ 0x5c;
  }
  mc_sha256_init(&h->inner);
  mc_sha256_update(&h->inner, inner_key, sizeof(inner_key));
  mc_crypto_wipe(k, sizeof(k));
  mc_crypto_wipe(inner_key, sizeof(inner_key));
}

void mc_hmac_sha256_update(struct mc_hmac_sha256 *h, const void *data, size_t bytes)
{
  mc_sha256_update(&h->inner, data, bytes);
}

void mc_hmac_sha256_final(struct mc_hmac_sha256 *h, uint8_t mac_out[MC_SHA256_BYTES])
{
  uint8_t inner_digest[MC_SHA256_BYTES];
  struct mc_sha256 outer;

  mc_sha256_final(&h->inner, inner_digest);
  mc_sha256_init(&outer);
  mc_sha256_update(&outer, h->outer_key, sizeof(h->outer_key));
  mc_sha256_update(&outer, inner_digest, sizeof(inner_digest));
  mc_sha256_final(&outer, mac_out);
  mc_crypto_wipe(inner_digest, sizeof(inner_digest));
  mc_crypto_wipe(h, sizeof(*h));
}

void mc_hmac_sha256(const void *key, size_t key_bytes, const void *data, size_t bytes,
                    uint8_t mac_out[MC_SHA256_BYTES])
{
  struct mc_hmac_sha256 h;

  mc_hmac_sha256_init(&h, key, key_bytes);
  mc_hmac_sha256_update(&h, data, bytes);
  mc_hmac_sha256_final(&h, mac_out);
}

bool mc_crypto_equal(const void *a, const void *b, size_t bytes)
{
  const volatile uint8_t *x = a;
  const volatile uint8_t *y = b;
  uint8_t diff = 0;

  for (size_t i = 0; i < bytes; i++)
    diff |= (uint8_t)(x[i] ^ y[i]);
  return diff == 0;
}

void mc_crypto_wipe(void *buf, size_t bytes)
{
  volatile uint8_t *p = buf;

  for (size_t i = 0; i < bytes; i++)
    p[i] = 0;
}
