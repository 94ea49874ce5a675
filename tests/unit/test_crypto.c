/* SPDX-License-Identifier: Apache-2.0 */
/*
 * src/core/core_crypto.c against the published vectors: SHA-256 of "abc",
 * of the 448-bit two-block message and of one million 'a' (FIPS 180-4's
 * examples), fed whole and in odd pieces; HMAC-SHA256 test cases 1-7 of
 * RFC 4231 (keys shorter and longer than a block, truncation); the
 * constant-time comparison. The vectors run on both the portable rounds and,
 * where the CPU has them, the x86 SHA extensions, and the two agree on
 * messages of every length up to five blocks and of a megabyte.
 */
#include "core/crypto.h"

#include "mc_test.h"

#include <stdint.h>

static void hex(const uint8_t *d, size_t n, char *out)
{
  for (size_t i = 0; i < n; i++)
    snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static void expect_sha(const void *msg, size_t n, const char *want)
{
  uint8_t d[MC_SHA256_BYTES];
  char got[2 * MC_SHA256_BYTES + 1];
  struct mc_sha256 s;

  mc_sha256(msg, n, d);
  hex(d, sizeof(d), got);
  MC_T_EQ_STR(got, want);
  /* The same message in pieces of 1, 2, 3 ... bytes. */
  mc_sha256_init(&s);
  for (size_t off = 0, step = 1; off < n; off += step, step++)
    mc_sha256_update(&s, (const char *)msg + off, (off + step <= n) ? step : n - off);
  mc_sha256_final(&s, d);
  hex(d, sizeof(d), got);
  MC_T_EQ_STR(got, want);
}

static void sha256_vectors_once(void)
{
  static char million[1000000];

  expect_sha("abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  expect_sha("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  expect_sha("", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  memset(million, 'a', sizeof(million));
  expect_sha(million, sizeof(million),
             "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

static void sha256_vectors(void)
{
  mc_sha256_force_portable(true);
  MC_T_TRUE(!mc_sha256_uses_cpu_ext());
  sha256_vectors_once();
  mc_sha256_force_portable(false);
  printf("# SHA-256 on %s\n", mc_sha256_uses_cpu_ext() ? "the CPU's SHA extensions"
                                                       : "the portable rounds (no SHA extensions)");
  sha256_vectors_once();
}

/* Portable and CPU rounds give the same digest of every length (0 to 320
 * bytes: every padding case over five blocks) and of 1 MiB of varied bytes. */
static void cpu_rounds_match_portable(void)
{
  static uint8_t data[1 << 20];
  uint8_t a[MC_SHA256_BYTES];
  uint8_t b[MC_SHA256_BYTES];
  uint32_t x = 12345;

  for (size_t i = 0; i < sizeof(data); i++) {
    x = x * 1103515245u + 12345u;
    data[i] = (uint8_t)(x >> 16);
  }
  for (size_t n = 0; n <= sizeof(data); n = (n < 320) ? n + 1 : sizeof(data) + 1) {
    size_t len = (n <= 320) ? n : sizeof(data);
    mc_sha256_force_portable(true);
    mc_sha256(data, len, a);
    mc_sha256_force_portable(false);
    mc_sha256(data, len, b);
    if (memcmp(a, b, sizeof(a)) != 0)
      MC_T_FAIL("SHA-256 of %zu bytes: the CPU's rounds differ from the portable ones", len);
  }
}

static void expect_hmac(const uint8_t *key, size_t key_bytes, const void *msg, size_t n,
                        const char *want)
{
  uint8_t mac[MC_SHA256_BYTES];
  char got[2 * MC_SHA256_BYTES + 1];

  mc_hmac_sha256(key, key_bytes, msg, n, mac);
  hex(mac, sizeof(mac), got);
  got[strlen(want)] = '\0'; /* test case 5 compares the first 128 bits */
  MC_T_EQ_STR(got, want);
}

static void hmac_rfc4231(void)
{
  uint8_t key[131];
  uint8_t data[50];
  const char *big_key = "Test Using Larger Than Block-Size Key - Hash Key First";
  const char *big_both = "This is a test using a larger than block-size key and a larger than "
                         "block-size data. The key needs to be hashed before being used by the "
                         "HMAC algorithm.";

  memset(key, 0x0b, 20);
  expect_hmac(key, 20, "Hi There", 8,
              "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  expect_hmac((const uint8_t *)"Jefe", 4, "what do ya want for nothing?", 28,
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  memset(key, 0xaa, 20);
  memset(data, 0xdd, 50);
  expect_hmac(key, 20, data, 50,
              "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  for (int i = 0; i < 25; i++)
    key[i] = (uint8_t)(i + 1);
  memset(data, 0xcd, 50);
  expect_hmac(key, 25, data, 50,
              "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b");
  memset(key, 0x0c, 20);
  expect_hmac(key, 20, "Test With Truncation", 20, "a3b6167473100ee06e0c796c2955552b");
  memset(key, 0xaa, 131);
  expect_hmac(key, 131, big_key, strlen(big_key),
              "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
  expect_hmac(key, 131, big_both, strlen(big_both),
              "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2");
}

static void hmac_incremental(void)
{
  uint8_t one[MC_SHA256_BYTES];
  uint8_t parts[MC_SHA256_BYTES];
  struct mc_hmac_sha256 h;

  mc_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, one);
  mc_hmac_sha256_init(&h, "Jefe", 4);
  mc_hmac_sha256_update(&h, "what do ya ", 11);
  mc_hmac_sha256_update(&h, "want for nothing?", 17);
  mc_hmac_sha256_final(&h, parts);
  MC_T_TRUE(memcmp(one, parts, sizeof(one)) == 0);
}

static void constant_time_equal(void)
{
  uint8_t a[32];
  uint8_t b[32];

  memset(a, 7, sizeof(a));
  memcpy(b, a, sizeof(b));
  MC_T_TRUE(mc_crypto_equal(a, b, sizeof(a)));
  MC_T_TRUE(mc_crypto_equal(a, b, 0));
  b[0] ^= 1;
  MC_T_TRUE(!mc_crypto_equal(a, b, sizeof(a)));
  b[0] ^= 1;
  b[31] ^= 0x80;
  MC_T_TRUE(!mc_crypto_equal(a, b, sizeof(a)));
  mc_crypto_wipe(a, sizeof(a));
  for (size_t i = 0; i < sizeof(a); i++)
    MC_T_EQ_INT(a[i], 0);
}

MC_T_MAIN(sha256_vectors, cpu_rounds_match_portable, hmac_rfc4231, hmac_incremental,
          constant_time_equal)
