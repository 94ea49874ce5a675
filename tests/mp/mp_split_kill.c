/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mp_split_kill DIR: one rank of a 4-rank job (RANK, WORLD_SIZE,
 * NCCL_COMM_ID) in which rank 2 is killed (kill -9 by the driver,
 * test_split.sh) while the others are in ncclCommSplit. Every rank touches
 * DIR/ready.<rank> once the communicator is up (the survivors just before
 * the split, rank 2 before it sleeps). Each survivor's split fails naming
 * rank 2 (its neighbours in the bootstrap ring see the connection close;
 * the other one hears it from them), then ncclCommShrink excluding rank 2
 * gives the 3 survivors a communicator that all-reduces. Prints
 * "rank <r>: split failed in <s> s: <error>" and "rank <r>: ok".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_mp.h"
#include "meshccl.h"
#include "nccl.h"

#define KILLED 2

int main(int argc, char **argv)
{
  char ready[4096];
  ncclComm_t parent = NULL;
  ncclComm_t child = NULL;
  ncclComm_t shrunk = NULL;
  int excl[1] = {KILLED};
  int rank = -1;
  int n = 0;
  int32_t x = 0;
  int32_t want = 0;
  ncclResult_t res;
  const char *msg;
  double t0;

  MC_MP_CHECK(meshcclCommInitFromEnv(&parent, NULL));
  MC_MP_CHECK(ncclCommUserRank(parent, &rank));
  MC_MP_CHECK(ncclCommCount(parent, &n));
  mc_mp_set_name("mp_split_kill", rank);
  if ((n != 4) || (argc < 2))
    MC_MP_FAIL("usage: mp_split_kill DIR, in a job of 4 ranks (got %d)", n);
  snprintf(ready, sizeof(ready), "%s/ready.%d", argv[1], rank);
  mc_mp_touch(ready);
  if (rank == KILLED) {
    sleep(60); /* until the driver's kill -9 */
    MC_MP_FAIL("rank %d was not killed", rank);
  }
  t0 = mc_mp_now_sec();
  res = ncclCommSplit(parent, 0, rank, &child, NULL);
  msg = ncclGetLastError(NULL);
  if ((res == ncclSuccess) || (strstr(msg, "rank 2 (host") == NULL))
    MC_MP_FAIL("ncclCommSplit with rank 2 killed returned %d: '%s' (want an error naming rank 2)",
               (int)res, msg);
  printf("rank %d: split failed in %.1f s: %s\n", rank, mc_mp_now_sec() - t0, msg);
  MC_MP_CHECK(ncclCommShrink(parent, excl, 1, &shrunk, NULL, NCCL_SHRINK_ABORT));
  mc_mp_expect_count_rank(shrunk, 3, (rank < KILLED) ? rank : rank - 1);
  x = rank;
  for (int r = 0; r < n; r++)
    want += (r == KILLED) ? 0 : r;
  MC_MP_CHECK(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, shrunk, NULL));
  if (x != want)
    MC_MP_FAIL("all-reduce on the shrunk communicator: %d, want %d", (int)x, (int)want);
  MC_MP_CHECK(ncclCommDestroy(shrunk));
  MC_MP_CHECK(ncclCommAbort(parent)); /* rank 2 is gone: nothing to wait for */
  printf("rank %d: ok\n", rank);
  return 0;
}
