/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the transports' connect messages
 * (src/transport/tp_blob.c): the round-1 message a sender receives from the
 * receiver (P2P, SHM, NET) and the round-2 answer the receiver gets back.
 *
 * Input: one byte of scenario, then the message's bytes (cut or zero-padded
 * to its size). Scenario bits: 0 round (0: round 1, 1: round 2), 1 the peer
 * is on this host, 2 the peer is this process, 3-4 the transport the
 * receiver chose (round 2). Every accepted message must satisfy what the
 * transports then rely on; a broken property aborts, so the fuzzer reports
 * it as a crash.
 *
 *   fuzz_tp_blob -max_total_time=60 NEW_CORPUS_DIR tests/data/fuzz/tp_blob
 */
#include "transport/tp_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PEER_PID   4242 /* the peer's pid when it is another process */
#define COMM_HASH  0x5eed5eed5eed5eedull
#define SLOT_BYTES 8192

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
  if (!ok) {
    fprintf(stderr, "fuzz_tp_blob: property broken: %s\n", what);
    abort();
  }
}

static bool name_is(const char *got, const struct mc_tp_blob_view *v, const char *what)
{
  char want[MC_SHM_NAME_BYTES];

  mc_shm_name(want, v->comm_hash, what, v->peer, v->rank, v->channel, v->conn_index, v->peer_pid);
  return memcmp(got, want, strlen(want) + 1) == 0;
}

static void round1(const struct mc_tp_blob_view *v, const uint8_t *data, size_t size)
{
  /* On the heap, exactly its size: ASan sees any read beyond it. */
  struct mc_blob_r1 *r1 = calloc(1, sizeof(*r1));

  check(r1 != NULL, "calloc");
  memcpy(r1, data, (size < sizeof(*r1)) ? size : sizeof(*r1));
  if (mc_tp_blob_r1_check(v, r1) == ncclSuccess) {
    check((r1->kind == MC_TOPO_TRANSPORT_P2P) || (r1->kind == MC_TOPO_TRANSPORT_SHM) ||
              (r1->kind == MC_TOPO_TRANSPORT_NET),
          "a known transport");
    check((r1->kind == MC_TOPO_TRANSPORT_NET) || v->same_host, "same-host transports on one host");
    switch (r1->kind) {
    case MC_TOPO_TRANSPORT_P2P:
      check(r1->bytes == v->slot_bytes, "P2P: this rank's slot size");
      if (r1->same_process != 0)
        check(v->same_process && (r1->addr != 0) && (r1->addr % 64 == 0),
              "P2P: a pointer only within this process, non-NULL and aligned");
      else
        check(!v->same_process && (r1->addr == 0) && name_is(r1->shm_name, v, "p2p"),
              "P2P: across processes, the peer's own counters page");
      break;
    case MC_TOPO_TRANSPORT_SHM:
      check(r1->bytes == mc_tp_ctrl_bytes() + MC_STEPS * v->slot_bytes, "SHM: the segment size");
      check(name_is(r1->shm_name, v, "shm"), "SHM: the peer's own segment");
      break;
    default:
      check((r1->bytes == v->slot_bytes + MC_CONN_HDR_ROOM) && (r1->addr == 0),
            "NET: slot size (data and a step header's room), no address");
      break;
    }
  }
  free(r1);
}

static void round2(const struct mc_tp_blob_view *v, uint32_t kind, const uint8_t *data, size_t size)
{
  struct mc_blob_r2 *r2 = calloc(1, sizeof(*r2));

  check(r2 != NULL, "calloc");
  memcpy(r2, data, (size < sizeof(*r2)) ? size : sizeof(*r2));
  if (mc_tp_blob_r2_check(v, kind, r2) == ncclSuccess) {
    check((r2->kind == kind) && (r2->ok == 1), "the transport this rank chose, accepted");
    if (kind == MC_TOPO_TRANSPORT_P2P)
      check((r2->slots != 0) && (r2->slots % 64 == 0), "P2P: slots non-NULL and aligned");
    else
      check(r2->slots == 0, "no slots address outside P2P");
  }
  free(r2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  static const uint32_t kinds[4] = {MC_TOPO_TRANSPORT_P2P, MC_TOPO_TRANSPORT_SHM,
                                    MC_TOPO_TRANSPORT_NET, MC_TP_BLOB_FAILED};
  struct mc_tp_blob_view v;
  uint8_t scenario;

  if (size < 1)
    return 0;
  scenario = data[0];
  memset(&v, 0, sizeof(v));
  v.rank = 0;
  v.peer = 1;
  v.channel = 0;
  v.conn_index = 0;
  v.comm_hash = COMM_HASH;
  v.same_host = (scenario & 2) != 0;
  v.same_process = v.same_host && ((scenario & 4) != 0);
  v.peer_pid = v.same_process ? (int)getpid() : PEER_PID;
  v.slot_bytes = SLOT_BYTES;
  if ((scenario & 1) == 0)
    round1(&v, data + 1, size - 1);
  else
    round2(&v, kinds[(scenario >> 3) & 3], data + 1, size - 1);
  return 0;
}
