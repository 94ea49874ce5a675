/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mp_mismatch: ranks that make different calls on one communicator fail
 * with ncclInvalidUsage naming both calls, instead of hanging or returning
 * different data. One rank per process (meshcclCommInitFromEnv).
 *
 *   mp_mismatch CASE [--warm]
 * Rank 1 makes call B, every other rank call A:
 *   count   A AllReduce(count 1048576, float, sum)   B AllReduce(count 10, float, sum)
 *   type    A AllReduce(count 1000, float, sum)      B AllReduce(count 1000, double, sum)
 *   kind    A AllReduce(count 1000, float, sum)      B Broadcast(count 1000, float, root 0)
 *   op      A AllReduce(count 1000, float, sum)      B AllReduce(count 1000, float, max)
 *   root    A Broadcast(count 1000, float, root 0)   B Broadcast(count 1000, float, root 1)
 *   bigtype A AllReduce(count 262144, float, sum)    B AllReduce(count 262144, int32, sum)
 *   recvsmall  rank 0 Send(count 10, float, to 1)    rank 1 Recv(count 3, float, from 0);
 *              then every rank AllReduce(count 4, float, sum), which fails at
 *              once where the communicator failed, and a sender that returned
 *              before its receiver checked the send learns of it there
 *   recvlarge  rank 0 Send(count 3, float, to 1)     rank 1 Recv(count 10, float, from 0):
 *              allowed, the first 3 elements arrive, the others stay
 *   same    every rank A of "count" (the control: all succeed)
 * --warm: first one matching small all-reduce and one matching large one on
 * every rank (the connections made at first use exist).
 * Every rank prints one line (recvsmall: a second one, "rank R then: ..."):
 *   rank R: <ncclGetErrorString> (<code>), async <code>: <ncclGetLastError>
 * and exits 0 (1 when init fails or a result is wrong).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_mp.h"
#include "meshccl.h"
#include "nccl.h"

#define BIG (1u << 20)

static float g_fbuf[2][BIG];

static ncclResult_t allreduce(ncclComm_t comm, size_t count, ncclDataType_t type, ncclRedOp_t op)
{
  return ncclAllReduce(g_fbuf[0], g_fbuf[1], count, type, op, comm, NULL);
}

static ncclResult_t call(const char *what, int rank, ncclComm_t comm)
{
  bool b = (rank == 1);

  if (strcmp(what, "count") == 0)
    return allreduce(comm, b ? 10 : 1048576, ncclFloat, ncclSum);
  if (strcmp(what, "same") == 0)
    return allreduce(comm, 1048576, ncclFloat, ncclSum);
  if (strcmp(what, "type") == 0)
    return allreduce(comm, 1000, b ? ncclFloat64 : ncclFloat, ncclSum);
  if (strcmp(what, "bigtype") == 0)
    return allreduce(comm, 262144, b ? ncclInt32 : ncclFloat, ncclSum);
  if (strcmp(what, "op") == 0)
    return allreduce(comm, 1000, ncclFloat, b ? ncclMax : ncclSum);
  if (strcmp(what, "kind") == 0)
    return b ? ncclBroadcast(g_fbuf[0], g_fbuf[1], 1000, ncclFloat, 0, comm, NULL)
             : allreduce(comm, 1000, ncclFloat, ncclSum);
  if (strcmp(what, "root") == 0)
    return ncclBroadcast(g_fbuf[0], g_fbuf[1], 1000, ncclFloat, b ? 1 : 0, comm, NULL);
  MC_MP_FAIL("unknown case %s", what);
}

/* Rank 0 sends `sent` floats to rank 1, which receives `posted` of them. */
static ncclResult_t sendrecv(int rank, ncclComm_t comm, size_t sent, size_t posted)
{
  ncclResult_t res;

  for (size_t i = 0; i < 16; i++) {
    g_fbuf[0][i] = (float)(i + 1);
    g_fbuf[1][i] = -1.0f;
  }
  if (rank == 0)
    return ncclSend(g_fbuf[0], sent, ncclFloat, 1, comm, NULL);
  if (rank != 1)
    return ncclSuccess;
  res = ncclRecv(g_fbuf[1], posted, ncclFloat, 0, comm, NULL);
  if ((res == ncclSuccess) && (sent < posted)) {
    for (size_t i = 0; i < posted; i++) {
      float want = (i < sent) ? (float)(i + 1) : -1.0f;
      if (g_fbuf[1][i] != want)
        MC_MP_FAIL("element %zu of the receive is %g, expected %g", i, (double)g_fbuf[1][i],
                   (double)want);
    }
  }
  return res;
}

int main(int argc, char **argv)
{
  ncclComm_t comm = NULL;
  ncclResult_t res;
  ncclResult_t async = ncclSuccess;
  int rank = -1;
  bool warm = (argc == 3) && (strcmp(argv[2], "--warm") == 0);

  mc_mp_set_name("mp_mismatch", mc_mp_env_int("RANK", -1));
  if ((argc < 2) || (argc > 3) || ((argc == 3) && !warm)) {
    fprintf(stderr, "usage: mp_mismatch CASE [--warm]\n");
    return 2;
  }
  MC_MP_CHECK(meshcclCommInitFromEnv(&comm, NULL));
  MC_MP_CHECK(ncclCommUserRank(comm, &rank));
  mc_mp_set_rank(rank);
  if (warm) {
    MC_MP_CHECK(allreduce(comm, 8, ncclFloat, ncclSum));
    MC_MP_CHECK(allreduce(comm, BIG, ncclFloat, ncclSum));
  }
  if (strcmp(argv[1], "recvsmall") == 0)
    res = sendrecv(rank, comm, 10, 3);
  else if (strcmp(argv[1], "recvlarge") == 0)
    res = sendrecv(rank, comm, 3, 10);
  else
    res = call(argv[1], rank, comm);
  MC_MP_CHECK(ncclCommGetAsyncError(comm, &async));
  printf("rank %d: %s (%d), async %d: %s\n", rank, ncclGetErrorString(res), (int)res, (int)async,
         (res == ncclSuccess) ? "-" : ncclGetLastError(comm));
  if ((strcmp(argv[1], "recvsmall") == 0) && (rank == 0)) {
    res = allreduce(comm, 4, ncclFloat, ncclSum);
    MC_MP_CHECK(ncclCommGetAsyncError(comm, &async));
    printf("rank %d then: %s (%d), async %d: %s\n", rank, ncclGetErrorString(res), (int)res,
           (int)async, (res == ncclSuccess) ? "-" : ncclGetLastError(comm));
  }
  fflush(stdout);
  if (res == ncclSuccess)
    MC_MP_CHECK(ncclCommDestroy(comm));
  else
    MC_MP_CHECK(ncclCommAbort(comm));
  return 0;
}
