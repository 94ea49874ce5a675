/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mp_grow: one rank of a meshccl-run job that checks ncclCommGrow's
 * contract through the public API.
 *
 *   mp_grow NOLD   ranks 0..NOLD-1 split off a parent; the others join it.
 *
 * Existing ranks: bad arguments (nRanks not larger, a rank other than -1,
 * NULL newcomm) fail at once; a grow before any ncclCommGetUniqueId fails on
 * every existing rank naming the missing id; parent rank 0 makes the id (a
 * second one is refused while the first is outstanding), a wrong id from it
 * is refused. New ranks: NULL id, a rank out of range or among the parent's,
 * nRanks not larger, an id of ncclGetUniqueId: each fails at once. Then the
 * real grow: existing ranks keep their ranks, new ones get theirs, an
 * all-reduce and an all-gather on the grown communicator are exact, the
 * parent still all-reduces, and the id was consumed (parent rank 0 can ask
 * for a new one). Prints "rank <r>: ok" and exits 0 when every check held.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_mp.h"
#include "meshccl.h"
#include "nccl.h"

static void expect_err(const char *what, ncclResult_t got, ncclResult_t want, const char *needle)
{
  const char *msg = ncclGetLastError(NULL);

  if ((got != want) || (strstr(msg, needle) == NULL))
    MC_MP_FAIL("%s returned %d (want %d), message '%s' (want '%s')", what, (int)got, (int)want, msg,
               needle);
}

static void check_grown(ncclComm_t grown, int n, int rank)
{
  int32_t x = rank + 1;
  int32_t *all = calloc((size_t)n, sizeof(*all));

  if (all == NULL)
    MC_MP_FAIL("out of memory");
  mc_mp_expect_count_rank(grown, n, rank);
  MC_MP_CHECK(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, grown, NULL));
  if (x != n * (n + 1) / 2)
    MC_MP_FAIL("all-reduce on the grown communicator gave %d, expected %d", (int)x,
               n * (n + 1) / 2);
  x = 1000 + rank;
  MC_MP_CHECK(ncclAllGather(&x, all, 1, ncclInt32, grown, NULL));
  for (int r = 0; r < n; r++)
    if (all[r] != 1000 + r)
      MC_MP_FAIL("all-gather on the grown communicator: slot %d is %d, expected %d", r, (int)all[r],
                 1000 + r);
  free(all);
}

int main(int argc, char **argv)
{
  int n_old = (argc > 1) ? atoi(argv[1]) : 2;
  ncclComm_t world = NULL;
  ncclComm_t parent = NULL;
  ncclComm_t grown = NULL;
  ncclComm_t x = NULL;
  ncclUniqueId id;
  ncclUniqueId other;
  ncclUniqueId plain;
  int rank = -1;
  int n = 0;
  int prank = -1;
  char want[160];

  MC_MP_CHECK(meshcclCommInitFromEnv(&world, NULL));
  MC_MP_CHECK(ncclCommUserRank(world, &rank));
  MC_MP_CHECK(ncclCommCount(world, &n));
  mc_mp_set_name("mp_grow", rank);
  if ((n_old < 1) || (n_old >= n))
    MC_MP_FAIL("usage: mp_grow NOLD with 1 <= NOLD < nranks (%d)", n);
  MC_MP_CHECK(ncclCommSplit(world, (rank < n_old) ? 0 : NCCL_SPLIT_NOCOLOR, rank, &parent, NULL));
  memset(&id, 0, sizeof(id));

  if (parent != NULL) {
    MC_MP_CHECK(ncclCommUserRank(parent, &prank));
    snprintf(want, sizeof(want), "nRanks %d is not larger than the %d ranks of comm", n_old, n_old);
    expect_err("Grow(nRanks = parent size)", ncclCommGrow(parent, n_old, NULL, -1, &x, NULL),
               ncclInvalidArgument, want);
    expect_err("Grow(existing rank names a rank)", ncclCommGrow(parent, n, NULL, 0, &x, NULL),
               ncclInvalidArgument, "rank 0 with comm");
    expect_err("Grow(NULL newcomm)", ncclCommGrow(parent, n, NULL, -1, NULL, NULL),
               ncclInvalidArgument, "newcomm argument is NULL");
    /* Collective over the parent: every existing rank learns that nobody holds an id. */
    expect_err("Grow(no id made)", ncclCommGrow(parent, n, NULL, -1, &x, NULL), ncclInvalidUsage,
               "holds an id of ncclCommGetUniqueId");
    if (x != NULL)
      MC_MP_FAIL("a failed grow returned a communicator");
    if (prank == 0) {
      MC_MP_CHECK(ncclCommGetUniqueId(parent, &id));
      expect_err("GetUniqueId twice", ncclCommGetUniqueId(parent, &other), ncclInvalidUsage,
                 "already has an id not consumed by ncclCommGrow");
      other = id;
      other.internal[60] ^= 0x5a; /* another secret */
      expect_err("Grow(an id not comm's)", ncclCommGrow(parent, n, &other, -1, &x, NULL),
                 ncclInvalidArgument, "uniqueId is not the id ncclCommGetUniqueId gave");
    }
  }
  /* The id travels to the new ranks out of band (here: the launcher's communicator). */
  MC_MP_CHECK(ncclBroadcast(&id, &id, sizeof(id), ncclUint8, 0, world, NULL));

  if (parent == NULL) {
    expect_err("Grow(new rank, NULL id)", ncclCommGrow(NULL, n, NULL, rank, &x, NULL),
               ncclInvalidArgument, "uniqueId argument is NULL");
    snprintf(want, sizeof(want), "new rank %d is out of range (0..%d", n, n - 1);
    expect_err("Grow(new rank = nRanks)", ncclCommGrow(NULL, n, &id, n, &x, NULL),
               ncclInvalidArgument, want);
    expect_err("Grow(new rank -1)", ncclCommGrow(NULL, n, &id, -1, &x, NULL), ncclInvalidArgument,
               "new rank -1 is out of range");
    snprintf(want, sizeof(want),
             "new rank 0 is a rank of the communicator being grown (ranks 0..%d", n_old - 1);
    expect_err("Grow(new rank among the parent's)", ncclCommGrow(NULL, n, &id, 0, &x, NULL),
               ncclInvalidArgument, want);
    snprintf(want, sizeof(want), "nRanks %d is not larger than the %d ranks of the communicator",
             n_old, n_old);
    expect_err("Grow(new rank, nRanks = parent size)",
               ncclCommGrow(NULL, n_old, &id, n_old - 1, &x, NULL), ncclInvalidArgument, want);
    /* meshccl-run sets NCCL_COMM_ID: this id starts no root */
    MC_MP_CHECK(ncclGetUniqueId(&plain));
    expect_err("Grow(an id of ncclGetUniqueId)", ncclCommGrow(NULL, n, &plain, rank, &x, NULL),
               ncclInvalidArgument, "not an id of ncclCommGetUniqueId");
    if (x != NULL)
      MC_MP_FAIL("a failed grow returned a communicator");
    MC_MP_CHECK(ncclCommGrow(NULL, n, &id, rank, &grown, NULL));
  } else {
    MC_MP_CHECK(ncclCommGrow(parent, n, (prank == 0) ? &id : NULL, -1, &grown, NULL));
  }

  check_grown(grown, n, rank);
  if (parent != NULL) {
    int32_t v = prank + 1;
    MC_MP_CHECK(ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, parent, NULL));
    if (v != n_old * (n_old + 1) / 2)
      MC_MP_FAIL("all-reduce on the parent after the grow gave %d, expected %d", (int)v,
                 n_old * (n_old + 1) / 2);
    mc_mp_expect_count_rank(parent, n_old, rank);
    /* The grow consumed the id: another one may be asked for (destroy stops its root). */
    if (prank == 0)
      MC_MP_CHECK(ncclCommGetUniqueId(parent, &other));
  }
  MC_MP_CHECK(ncclCommDestroy(grown));
  if (parent != NULL)
    MC_MP_CHECK(ncclCommDestroy(parent));
  MC_MP_CHECK(ncclCommDestroy(world));
  printf("rank %d: ok\n", rank);
  return 0;
}
