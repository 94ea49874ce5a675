/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mp_shrink: one rank of a meshccl-run job (3 ranks or more) that checks
 * ncclCommShrink and ncclCommRevoke through the public API. Rank 1 is
 * excluded: with "default" it destroys the parent and leaves; with "abort"
 * it dies without a word (_exit) and the others shrink with
 * NCCL_SHRINK_ABORT. The survivors check the child's size and ranks (parent
 * order without rank 1), an all-reduce of their parent ranks on it, bad
 * arguments (self excluded, a rank twice, bad flags), then revoke the child:
 * a collective on it is ncclInvalidUsage naming the revoke, and destroy
 * still works. Prints "rank <r>: ok" and exits 0 when every check held.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_mp.h"
#include "meshccl.h"
#include "nccl.h"

#define EXCLUDED 1

static void expect_err(const char *what, ncclResult_t got, ncclResult_t want, const char *needle)
{
  const char *msg = ncclGetLastError(NULL);

  if ((got != want) || (strstr(msg, needle) == NULL))
    MC_MP_FAIL("%s returned %d (want %d), message '%s' (want '%s')", what, (int)got, (int)want, msg,
               needle);
}

int main(int argc, char **argv)
{
  bool abort_mode = (argc > 1) && (strcmp(argv[1], "abort") == 0);
  ncclComm_t parent = NULL;
  ncclComm_t child = NULL;
  ncclComm_t none = NULL;
  int rank = -1;
  int n = 0;
  int excl[2] = {EXCLUDED, EXCLUDED};
  int32_t x = 0;
  int32_t want = 0;

  MC_MP_CHECK(meshcclCommInitFromEnv(&parent, NULL));
  MC_MP_CHECK(ncclCommUserRank(parent, &rank));
  MC_MP_CHECK(ncclCommCount(parent, &n));
  mc_mp_set_name("mp_shrink", rank);
  if (n < 3)
    MC_MP_FAIL("needs 3 ranks or more, got %d", n);
  if (rank == EXCLUDED) {
    if (abort_mode)
      _exit(0); /* a failed rank: no destroy, no goodbye */
    MC_MP_CHECK(ncclCommDestroy(parent));
    printf("rank %d: ok\n", rank);
    return 0;
  }
  expect_err("Shrink(self excluded)",
             ncclCommShrink(parent, &rank, 1, &none, NULL, NCCL_SHRINK_DEFAULT),
             ncclInvalidArgument, "excluded ranks do not call ncclCommShrink");
  expect_err("Shrink(rank twice)", ncclCommShrink(parent, excl, 2, &none, NULL, 0),
             ncclInvalidArgument, "appears twice");
  expect_err("Shrink(flags 7)", ncclCommShrink(parent, excl, 1, &none, NULL, 7),
             ncclInvalidArgument, "shrinkFlags 7");
  expect_err("Shrink(NULL newcomm)", ncclCommShrink(parent, excl, 1, NULL, NULL, 0),
             ncclInvalidArgument, "newcomm argument is NULL");
  MC_MP_CHECK(ncclCommShrink(parent, excl, 1, &child, NULL,
                             abort_mode ? NCCL_SHRINK_ABORT : NCCL_SHRINK_DEFAULT));
  mc_mp_expect_count_rank(child, n - 1, (rank < EXCLUDED) ? rank : rank - 1);
  x = rank;
  for (int r = 0; r < n; r++)
    want += (r == EXCLUDED) ? 0 : r;
  MC_MP_CHECK(ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, child, NULL));
  if (x != want)
    MC_MP_FAIL("all-reduce on the shrunk communicator gave %d, expected %d", (int)x, (int)want);
  expect_err("Revoke(flags 1)", ncclCommRevoke(child, 1), ncclInvalidArgument,
             "NCCL_REVOKE_DEFAULT");
  MC_MP_CHECK(ncclCommRevoke(child, NCCL_REVOKE_DEFAULT));
  expect_err("AllReduce after revoke", ncclAllReduce(&x, &x, 1, ncclInt32, ncclSum, child, NULL),
             ncclInvalidUsage, "was revoked by ncclCommRevoke");
  MC_MP_CHECK(ncclCommDestroy(child));
  if (abort_mode)
    MC_MP_CHECK(ncclCommAbort(parent));
  else
    MC_MP_CHECK(ncclCommDestroy(parent));
  printf("rank %d: ok\n", rank);
  return 0;
}
