/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mp_split: one rank of a meshccl-run job (any size; the driver uses 8) that
 * checks ncclCommSplit through the public API:
 *   1. color rank%3, key -rank: child size = ranks of that color, child rank
 *      = order by key (reverse parent order);
 *   2. color rank/4, key 0: ties are ordered by parent rank;
 *   3. NCCL_SPLIT_NOCOLOR on odd ranks: they get NULL, even ranks a comm of
 *      the even ranks with child rank rank/2;
 *   4. a split of that child (color childRank%2, key childRank);
 *   5. children inherit the parent's device; children are destroyed before
 *      the parent. A negative color other than NOCOLOR is ncclInvalidArgument.
 * Exits 0 when every check passed, 1 with a message on stderr otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_mp.h"
#include "meshccl.h"
#include "nccl.h"

static int g_rank = -1;

static void expect_comm(const char *what, ncclComm_t comm, int size, int rank, int dev)
{
  int v = -1;

  if (comm == NULL)
    MC_MP_FAIL("%s: child is NULL", what);
  MC_MP_CHECK(ncclCommCount(comm, &v));
  if (v != size)
    MC_MP_FAIL("%s: ncclCommCount is %d, expected %d", what, v, size);
  MC_MP_CHECK(ncclCommUserRank(comm, &v));
  if (v != rank)
    MC_MP_FAIL("%s: ncclCommUserRank is %d, expected %d", what, v, rank);
  MC_MP_CHECK(ncclCommCuDevice(comm, &v));
  if (v != dev)
    MC_MP_FAIL("%s: ncclCommCuDevice is %d, expected %d (the parent's)", what, v, dev);
}

int main(void)
{
  ncclComm_t parent = NULL;
  ncclComm_t by3 = NULL;
  ncclComm_t ties = NULL;
  ncclComm_t evens = NULL;
  ncclComm_t quarter = NULL;
  ncclComm_t bad = NULL;
  int n = mc_mp_env_int("WORLD_SIZE", -1);
  int dev = -1;
  int size = 0;
  int rank = 0;
  ncclResult_t res;

  g_rank = mc_mp_env_int("RANK", -1);
  mc_mp_set_name("mp_split", g_rank);
  MC_MP_CHECK(meshcclCommInitFromEnv(&parent, NULL));
  MC_MP_CHECK(ncclCommCuDevice(parent, &dev));

  /* 1. color rank%3, key -rank: members of my color with a larger parent rank come first. */
  MC_MP_CHECK(ncclCommSplit(parent, g_rank % 3, -g_rank, &by3, NULL));
  for (int q = g_rank % 3; q < n; q += 3) {
    size++;
    rank += (q > g_rank) ? 1 : 0;
  }
  expect_comm("split color rank%3 key -rank", by3, size, rank, dev);

  /* 2. equal keys: parent order. */
  MC_MP_CHECK(ncclCommSplit(parent, g_rank / 4, 0, &ties, NULL));
  size = ((g_rank / 4) * 4 + 4 <= n) ? 4 : n % 4;
  expect_comm("split color rank/4 key 0", ties, size, g_rank % 4, dev);

  /* 3. NOCOLOR on odd ranks. */
  evens = (ncclComm_t)&evens; /* must be overwritten with NULL for odd ranks */
  MC_MP_CHECK(
      ncclCommSplit(parent, (g_rank % 2 == 0) ? 0 : NCCL_SPLIT_NOCOLOR, g_rank, &evens, NULL));
  if (g_rank % 2 != 0) {
    if (evens != NULL)
      MC_MP_FAIL("NCCL_SPLIT_NOCOLOR: child is %p, expected NULL", (void *)evens);
  } else {
    expect_comm("split evens", evens, (n + 1) / 2, g_rank / 2, dev);
    /* 4. split of a split: child rank c -> color c%2, key c. */
    int c = g_rank / 2;
    int ce = (n + 1) / 2;
    MC_MP_CHECK(ncclCommSplit(evens, c % 2, c, &quarter, NULL));
    expect_comm("split of the evens", quarter, (ce - c % 2 + 1) / 2, c / 2, dev);
  }

  /* A color below NOCOLOR is rejected at once, before any exchange. */
  res = ncclCommSplit(parent, -2, 0, &bad, NULL);
  if (res != ncclInvalidArgument)
    MC_MP_FAIL("ncclCommSplit color -2 returned %d, expected ncclInvalidArgument", (int)res);

  /* 5. children first, then the parent. */
  MC_MP_CHECK(ncclCommDestroy(quarter));
  MC_MP_CHECK(ncclCommDestroy(evens));
  MC_MP_CHECK(ncclCommDestroy(ties));
  MC_MP_CHECK(ncclCommDestroy(by3));
  MC_MP_CHECK(ncclCommDestroy(parent));
  printf("rank %d: ok\n", g_rank);
  return 0;
}
