/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mp_scalable: one rank of a meshccl-run job that checks the failures of
 * ncclCommInitRankScalable with several roots. Ranks 0..nId-1 each make one
 * id (ncclGetUniqueId, which starts a root in that process); the ids travel
 * over the launcher's communicator (made from MASTER_ADDR:MASTER_PORT:
 * NCCL_COMM_ID would make ncclGetUniqueId return that one id, as in NCCL).
 *
 *   mp_scalable args NID      bad arguments, local and immediate: nId 0 and
 *                             nId > nranks, NULL commIds, the same id twice
 *   mp_scalable nid NID BAD   rank BAD passes nId 1 instead of NID: every
 *                             rank's init fails, naming nId
 *   mp_scalable nranks NID BAD
 *                             rank BAD passes nranks + 1: every rank's init
 *                             fails, naming both nranks
 *   mp_scalable unreach NID PORT
 *                             commIds[NID-1] names 127.0.0.1:PORT, where no
 *                             root listens: every rank's init fails within
 *                             the init timeout, naming that address
 *
 * Prints "rank <r>: ok" and exits 0 when its checks held; exits 1 with a
 * message otherwise.
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_mp.h"
#include "meshccl.h"
#include "nccl.h"

#define MAX_IDS 64

/* The root's port in an id: NCCL's ncclBootstrapHandle keeps the address
 * (a sockaddr_in for IPv4) at byte 8, so the port is at bytes 10..11. */
#define ID_PORT_OFFSET 10

static void expect_err(const char *what, ncclResult_t got, ncclResult_t want, const char *needle)
{
  const char *msg = ncclGetLastError(NULL);

  if ((got != want) || (strstr(msg, needle) == NULL))
    MC_MP_FAIL("%s returned %d (want %d), message '%s' (want '%s')", what, (int)got, (int)want, msg,
               needle);
}

/* Ids of ranks 0..n_ids-1, gathered on every rank. */
static void gather_ids(ncclComm_t world, int rank, int n, int n_ids, ncclUniqueId *ids)
{
  ncclUniqueId *all = calloc((size_t)n, sizeof(*all));
  ncclUniqueId mine;

  if (all == NULL)
    MC_MP_FAIL("out of memory");
  memset(&mine, 0, sizeof(mine));
  if (rank < n_ids)
    MC_MP_CHECK(ncclGetUniqueId(&mine));
  MC_MP_CHECK(ncclAllGather(&mine, all, sizeof(mine), ncclUint8, world, NULL));
  memcpy(ids, all, (size_t)n_ids * sizeof(*ids));
  free(all);
}

int main(int argc, char **argv)
{
  ncclUniqueId ids[MAX_IDS];
  ncclComm_t world = NULL;
  ncclComm_t comm = NULL;
  const char *mode = (argc > 2) ? argv[1] : "";
  int n_ids = (argc > 2) ? atoi(argv[2]) : 0;
  int rank = -1;
  int n = 0;
  ncclResult_t res;

  unsetenv("NCCL_COMM_ID");
  MC_MP_CHECK(meshcclCommInitFromEnv(&world, NULL));
  MC_MP_CHECK(ncclCommUserRank(world, &rank));
  MC_MP_CHECK(ncclCommCount(world, &n));
  mc_mp_set_name("mp_scalable", rank);
  if ((n_ids < 2) || (n_ids > n) || (n_ids > MAX_IDS))
    MC_MP_FAIL("usage: mp_scalable args|nid|unreach NID [BAD|PORT], 2 <= NID <= nranks (%d)", n);
  gather_ids(world, rank, n, n_ids, ids);

  if (strcmp(mode, "args") == 0) {
    ncclUniqueId twice[2] = {ids[0], ids[0]};
    expect_err("nId 0", ncclCommInitRankScalable(&comm, n, rank, 0, ids, NULL), ncclInvalidArgument,
               "invalid nId 0");
    expect_err("nId > nranks", ncclCommInitRankScalable(&comm, n, rank, n + 1, ids, NULL),
               ncclInvalidArgument, "must be in 1..nranks");
    expect_err("NULL commIds", ncclCommInitRankScalable(&comm, n, rank, 2, NULL, NULL),
               ncclInvalidArgument, "commIds argument is NULL");
    expect_err("the same id twice", ncclCommInitRankScalable(&comm, n, rank, 2, twice, NULL),
               ncclInvalidArgument, "commIds[0] and commIds[1] are the same id");
    expect_err("rank out of range", ncclCommInitRankScalable(&comm, n, n, n_ids, ids, NULL),
               ncclInvalidArgument, "invalid rank requested");
    /* The ids are still good: the job initialises with them. */
    MC_MP_CHECK(ncclCommInitRankScalable(&comm, n, rank, n_ids, ids, NULL));
    mc_mp_expect_count_rank(comm, n, rank);
    MC_MP_CHECK(ncclCommDestroy(comm));
    comm = NULL;
  } else if (strcmp(mode, "nid") == 0) {
    int bad = (argc > 3) ? atoi(argv[3]) : 0;
    res = ncclCommInitRankScalable(&comm, n, rank, (rank == bad) ? 1 : n_ids, ids, NULL);
    if (res == ncclSuccess)
      MC_MP_FAIL("init with rank %d passing nId 1 succeeded", bad);
    printf("rank %d: init failed: %d %s\n", rank, (int)res, ncclGetLastError(NULL));
    if (strstr(ncclGetLastError(NULL), "passed nId") == NULL)
      MC_MP_FAIL("the error does not say which ranks passed which nId: %s", ncclGetLastError(NULL));
  } else if (strcmp(mode, "nranks") == 0) {
    int bad = (argc > 3) ? atoi(argv[3]) : 0;
    res = ncclCommInitRankScalable(&comm, (rank == bad) ? n + 1 : n, rank, n_ids, ids, NULL);
    if (res == ncclSuccess)
      MC_MP_FAIL("init with rank %d passing nranks %d succeeded", bad, n + 1);
    printf("rank %d: init failed: %d %s\n", rank, (int)res, ncclGetLastError(NULL));
    if (strstr(ncclGetLastError(NULL), "every rank must pass the same nranks") == NULL)
      MC_MP_FAIL("the error does not say the ranks disagree on nranks: %s", ncclGetLastError(NULL));
  } else if (strcmp(mode, "unreach") == 0) {
    int port = (argc > 3) ? atoi(argv[3]) : 0;
    uint16_t be = htons((uint16_t)port);
    char where[64];
    memcpy(ids[n_ids - 1].internal + ID_PORT_OFFSET, &be, sizeof(be));
    snprintf(where, sizeof(where), "cannot reach the bootstrap root at 127.0.0.1<%d>", port);
    res = ncclCommInitRankScalable(&comm, n, rank, n_ids, ids, NULL);
    if (res == ncclSuccess)
      MC_MP_FAIL("init with an unreachable root succeeded");
    printf("rank %d: init failed: %d %s\n", rank, (int)res, ncclGetLastError(NULL));
    if (strstr(ncclGetLastError(NULL), where) == NULL)
      MC_MP_FAIL("the error does not name the unreachable root ('%s'): %s", where,
                 ncclGetLastError(NULL));
  } else {
    MC_MP_FAIL("unknown mode '%s'", mode);
  }
  /* Every process keeps its failed communicator (and so the roots it hosts)
   * until every rank is done: destroying it stops those roots, and ranks
   * still talking to them would read that instead of the failure under test. */
  MC_MP_CHECK(ncclAllReduce(&n, &n, 1, ncclInt32, ncclMax, world, NULL));
  if (comm != NULL)
    MC_MP_CHECK(ncclCommDestroy(comm));
  MC_MP_CHECK(ncclCommDestroy(world));
  printf("rank %d: ok\n", rank);
  return 0;
}
