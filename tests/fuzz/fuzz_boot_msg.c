/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for what the bootstrap receives (src/bootstrap/
 * boot_proto.c), without sockets. The first byte chooses the parser:
 *   0  an authentication hello, fed to the server's parser one byte more
 *      at a time, as it may arrive;
 *   1  a challenge then a verdict (36 + 36 bytes), as a client reads them;
 *   2  a client's proof, as the server checks it;
 *   3  control-message frames: the next byte sets the chunk sizes in which
 *      the rest is fed to struct mc_boot_rx; every complete message goes
 *      through the root's and the rank's validators;
 *   4  p2p header, ring hello and allgather header checks;
 *   5  round trips: messages built from the input's bytes must parse back.
 * Properties (accepted means safe to use) abort when broken, so the fuzzer
 * reports them as crashes; ASan and UBSan catch the rest.
 *
 *   fuzz_boot_msg -max_total_time=60 NEW_CORPUS_DIR tests/data/boot
 */
#include "bootstrap/bootstrap_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAGIC MC_BOOT_COMM_ID_MAGIC
#define TYPE  MC_SOCK_TYPE_ROOT

static void check(int ok, const char *what)
{
  if (!ok) {
    fprintf(stderr, "fuzz_boot_msg: property broken: %s\n", what);
    abort();
  }
}

static void fixed_key(uint8_t key[MC_BOOT_KEY_BYTES])
{
  uint8_t secret[MC_BOOT_SECRET_BYTES];

  memset(secret, 0x5a, sizeof(secret));
  mc_boot_auth_key(secret, key);
}

static void fuzz_hello(const uint8_t *p, size_t n)
{
  struct mc_boot_auth a;
  char why[256];
  int last = 0;

  memset(&a, 0, sizeof(a));
  a.magic = MAGIC;
  a.type = TYPE;
  for (size_t got = 1; (got <= n) && (got <= MC_BOOT_HELLO_BYTES); got++) {
    last = mc_boot_auth_hello_parse(&a, p, got, why, sizeof(why));
    check(strlen(why) < sizeof(why), "hello: why terminated");
    if (last != 0)
      break;
  }
  if (last == 1) {
    uint64_t magic;
    uint32_t type;
    check(n >= MC_BOOT_HELLO_BYTES, "hello: complete only with 48 bytes");
    memcpy(&magic, p, sizeof(magic));
    memcpy(&type, p + 8, sizeof(type));
    check((magic == MAGIC) && (type == TYPE), "hello: accepted only with the magic and type");
    check(memcmp(a.nc, p + 16, MC_BOOT_NONCE_BYTES) == 0, "hello: nonce copied");
  }
  check(mc_boot_auth_hello_parse(&a, p, MC_BOOT_HELLO_BYTES + 1, why, sizeof(why)) == -1,
        "hello: longer than a hello is refused");
}

static void fuzz_auth_client(const uint8_t *p, size_t n)
{
  uint8_t key[MC_BOOT_KEY_BYTES];
  struct mc_boot_auth a;
  char why[256];
  size_t first = (n < MC_BOOT_CHALLENGE_BYTES) ? n : MC_BOOT_CHALLENGE_BYTES;
  ncclResult_t res;

  fixed_key(key);
  memset(&a, 0, sizeof(a));
  a.magic = MAGIC;
  a.type = TYPE;
  if (!mc_boot_auth_challenge_parse(&a, p, first, why, sizeof(why)))
    return;
  check(first == MC_BOOT_CHALLENGE_BYTES, "challenge: accepted only whole");
  res = mc_boot_auth_verdict_parse(key, &a, p + first, n - first, why, sizeof(why));
  if (res == ncclSuccess) {
    uint8_t mac[MC_SHA256_BYTES];
    mc_boot_auth_mac(key, 'S', &a, mac);
    check((n - first == MC_BOOT_VERDICT_BYTES) && (memcmp(mac, p + first + 4, sizeof(mac)) == 0),
          "verdict: accepted only with the server's MAC");
  } else {
    check((res == ncclInvalidUsage) || (res == ncclRemoteError), "verdict: failure codes");
  }
}

static void fuzz_proof(const uint8_t *p, size_t n)
{
  uint8_t key[MC_BOOT_KEY_BYTES];
  uint8_t want[MC_BOOT_PROOF_BYTES];
  struct mc_boot_auth a;

  fixed_key(key);
  memset(&a, 0, sizeof(a));
  a.magic = MAGIC;
  a.type = TYPE;
  mc_boot_auth_proof_build(key, &a, want);
  check(mc_boot_auth_proof_check(key, &a, p, n) ==
            ((n == sizeof(want)) && (memcmp(p, want, n) == 0)),
        "proof: accepted exactly when it is the MAC");
}

static void validate(const struct mc_boot_ctl *msg)
{
  struct mc_boot_ctl m;
  char why[256];
  int n_ranks;
  int rank;

  m = *msg;
  if (mc_boot_ctl_check_register(&m, why, sizeof(why))) {
    check(((m.kind == MC_BOOT_CTL_REGISTER) || (m.kind == MC_BOOT_CTL_NEIGHBOR)) && (m.rank >= 0) &&
              (m.rank < m.n_ranks) && (m.n_ranks <= MC_BOOT_MAX_RANKS) && (m.n_roots >= 1) &&
              (m.n_roots <= m.n_ranks) && (m.root >= 0) && (m.root < m.n_roots),
          "register: rank within nranks");
    check((m.addr.sa.sa_family == AF_INET) || (m.addr.sa.sa_family == AF_INET6),
          "register: a usable address");
  }
  check((strlen(m.host) < sizeof(m.host)) && (strlen(m.text) < sizeof(m.text)),
        "register: strings terminated");
  m = *msg;
  if (mc_boot_ctl_check_from_rank(&m, why, sizeof(why)))
    check((m.kind == MC_BOOT_CTL_DONE) || ((m.kind == MC_BOOT_CTL_FAIL) && (m.code != 0)),
          "from rank: DONE, or FAIL with a failure code");
  /* the rank this message would be for: one of the message's own numbers */
  n_ranks = (msg->n_ranks > 0) ? msg->n_ranks : 1;
  rank = (msg->rank > 0) ? (msg->rank - 1) % n_ranks : 0;
  for (int is_next_ok = 0; is_next_ok < 2; is_next_ok++) {
    m = *msg;
    if (!mc_boot_ctl_check_from_root(&m, rank, n_ranks, is_next_ok != 0, why, sizeof(why)))
      continue;
    check(strlen(m.text) < sizeof(m.text), "from root: text terminated");
    if (m.kind == MC_BOOT_CTL_FAIL)
      check((m.code > ncclSuccess) && (m.code < ncclNumResults) && (m.code != ncclInProgress),
            "from root: FAIL carries a failure code");
    else
      check((m.kind == MC_BOOT_CTL_NEXT) && is_next_ok && (m.rank == (rank + 1) % n_ranks) &&
                (mc_sockaddr_port(&m.addr) != 0),
            "from root: NEXT names the next rank and an address");
  }
}

static void fuzz_frames(const uint8_t *p, size_t n)
{
  struct mc_boot_rx rx = {NULL, 0};
  struct mc_boot_ctl msg;
  char why[256];
  size_t chunk;

  if (n == 0)
    return;
  chunk = 1 + (size_t)p[0] * 8; /* 1 .. 2041 bytes at a time */
  p++;
  n--;
  while (n > 0) {
    size_t want = mc_boot_rx_want(&rx);
    size_t take = (chunk < want) ? chunk : want;
    int st;
    if (take > n)
      take = n;
    st = mc_boot_rx_feed(&rx, p, take, &msg, why, sizeof(why));
    p += take;
    n -= take;
    if (st == 1)
      validate(&msg);
    if (st != 0)
      check((rx.buf == NULL) && (rx.got == 0), "frames: reset after a message or an error");
    else
      check(rx.got < MC_BOOT_CTL_FRAME_BYTES, "frames: partial stays partial");
  }
  mc_boot_rx_free(&rx);
}

static void fuzz_headers(const uint8_t *p, size_t n)
{
  struct mc_boot_p2p_header h;
  int32_t n_ranks;
  int32_t from;
  int32_t prev;
  uint32_t ag[2];
  uint32_t slice;
  char why[256];

  if (n < 4 + sizeof(h) + 8 + sizeof(ag) + 4)
    return;
  memcpy(&n_ranks, p, 4);
  memcpy(&h, p + 4, sizeof(h));
  memcpy(&from, p + 4 + sizeof(h), 4);
  memcpy(&prev, p + 8 + sizeof(h), 4);
  memcpy(ag, p + 12 + sizeof(h), sizeof(ag));
  memcpy(&slice, p + 12 + sizeof(h) + sizeof(ag), 4);
  if (mc_boot_p2p_header_check(&h, n_ranks, why, sizeof(why)))
    check((h.rank >= 0) && (h.rank < n_ranks) &&
              ((h.bytes <= MC_BOOT_MAX_MSG_BYTES) || (h.bytes == MC_BOOT_STREAM_BYTES) ||
               (h.bytes == MC_BOOT_BYE_BYTES)),
          "p2p header: rank and size bounded");
  if (mc_boot_ring_hello_check(from, prev, n_ranks, why, sizeof(why)))
    check((from == prev) && (from >= 0) && (from < n_ranks), "ring hello: the previous rank");
  if (mc_boot_ag_header_check(ag, slice, why, sizeof(why)))
    check(ag[1] == slice, "allgather header: the slice size");
}

static void fuzz_round_trip(const uint8_t *p, size_t n)
{
  uint8_t key[MC_BOOT_KEY_BYTES];
  uint8_t other[MC_BOOT_KEY_BYTES];
  uint8_t hello[MC_BOOT_HELLO_BYTES];
  uint8_t challenge[MC_BOOT_CHALLENGE_BYTES];
  uint8_t proof[MC_BOOT_PROOF_BYTES];
  uint8_t verdict[MC_BOOT_VERDICT_BYTES];
  struct mc_boot_auth c;
  struct mc_boot_auth s;
  char why[256];

  if (n < 2 * MC_BOOT_NONCE_BYTES + MC_BOOT_SECRET_BYTES)
    return;
  memset(&c, 0, sizeof(c));
  c.magic = MAGIC;
  c.type = TYPE;
  s = c;
  memcpy(c.nc, p, MC_BOOT_NONCE_BYTES);
  memcpy(s.ns, p + MC_BOOT_NONCE_BYTES, MC_BOOT_NONCE_BYTES);
  mc_boot_auth_key(p + 2 * MC_BOOT_NONCE_BYTES, key);
  fixed_key(other);
  mc_boot_auth_hello_build(&c, hello);
  check(mc_boot_auth_hello_parse(&s, hello, sizeof(hello), why, sizeof(why)) == 1,
        "round trip: hello");
  mc_boot_auth_challenge_build(&s, challenge);
  check(mc_boot_auth_challenge_parse(&c, challenge, sizeof(challenge), why, sizeof(why)),
        "round trip: challenge");
  check(memcmp(&c, &s, sizeof(c)) == 0, "round trip: both sides see the same exchange");
  mc_boot_auth_proof_build(key, &c, proof);
  check(mc_boot_auth_proof_check(key, &s, proof, sizeof(proof)), "round trip: proof");
  check((memcmp(key, other, sizeof(key)) == 0) ||
            !mc_boot_auth_proof_check(other, &s, proof, sizeof(proof)),
        "round trip: a proof under another key is refused");
  mc_boot_auth_verdict_build(key, &s, true, verdict);
  check(mc_boot_auth_verdict_parse(key, &c, verdict, sizeof(verdict), why, sizeof(why)) ==
            ncclSuccess,
        "round trip: accept");
  check((memcmp(key, other, sizeof(key)) == 0) ||
            (mc_boot_auth_verdict_parse(other, &c, verdict, sizeof(verdict), why, sizeof(why)) ==
             ncclRemoteError),
        "round trip: a server without the key is found out");
  mc_boot_auth_verdict_build(key, &s, false, verdict);
  check(mc_boot_auth_verdict_parse(key, &c, verdict, sizeof(verdict), why, sizeof(why)) ==
            ncclInvalidUsage,
        "round trip: reject");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  if (size == 0)
    return 0;
  switch (data[0] % 6) {
  case 0:
    fuzz_hello(data + 1, size - 1);
    break;
  case 1:
    fuzz_auth_client(data + 1, size - 1);
    break;
  case 2:
    fuzz_proof(data + 1, size - 1);
    break;
  case 3:
    fuzz_frames(data + 1, size - 1);
    break;
  case 4:
    fuzz_headers(data + 1, size - 1);
    break;
  default:
    fuzz_round_trip(data + 1, size - 1);
    break;
  }
  return 0;
}
