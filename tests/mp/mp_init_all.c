/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mp_init_all: ncclCommInitAll in one process (one communicator per "device").
 *   mp_init_all null      8 comms, devlist NULL: comm i is rank i on device i
 *   mp_init_all reverse   8 comms, devlist {7,...,0}: comm i is rank i on device 7-i
 *   mp_init_all errors    NULL comms and ndev 0 -> ncclInvalidArgument, a negative
 *                         device -> ncclInvalidArgument, a device listed twice ->
 *                         ncclInvalidUsage; each with a message in ncclGetLastError
 *   mp_init_all dup       4 comms on devices {0,1,2,1} (run with
 *                         NCCL_MULTI_RANK_GPU_ENABLE=1, which allows it)
 * Exits 0 when every check passed, 1 with a message on stderr otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mc_mp.h"
#include "meshccl.h"
#include "nccl.h"

#define NDEV 8

#define EXPECT_INT(what, i, got, want)                                                             \
  do {                                                                                             \
    if ((got) != (want))                                                                           \
      MC_MP_FAIL("comm %d: %s is %d, expected %d", (i), (what), (int)(got), (int)(want));          \
  } while (0)

static void init_all(int ndev, const int *devlist)
{
  ncclComm_t comms[NDEV];

  memset(comms, 0, sizeof(comms));
  MC_MP_CHECK(ncclCommInitAll(comms, ndev, devlist));
  for (int i = 0; i < ndev; i++) {
    meshcclCommInfo_t info;
    int v = -1;
    int want_dev = (devlist != NULL) ? devlist[i] : i;
    if (comms[i] == NULL)
      MC_MP_FAIL("comm %d is NULL after ncclCommInitAll succeeded", i);
    for (int j = 0; j < i; j++) {
      if (comms[j] == comms[i])
        MC_MP_FAIL("comms %d and %d are the same handle", j, i);
    }
    MC_MP_CHECK(ncclCommCount(comms[i], &v));
    EXPECT_INT("ncclCommCount", i, v, ndev);
    MC_MP_CHECK(ncclCommUserRank(comms[i], &v));
    EXPECT_INT("ncclCommUserRank", i, v, i);
    MC_MP_CHECK(ncclCommCuDevice(comms[i], &v));
    EXPECT_INT("ncclCommCuDevice", i, v, want_dev);
    MC_MP_CHECK(meshcclCommGetInfo(comms[i], &info));
    EXPECT_INT("info.nNodes", i, info.nNodes, 1);
    EXPECT_INT("info.localRanks", i, info.localRanks, ndev);
    EXPECT_INT("info.localRank", i, info.localRank, i);
  }
  for (int i = 0; i < ndev; i++)
    MC_MP_CHECK(ncclCommDestroy(comms[i]));
}

static void expect_fail(const char *what, ncclResult_t got, ncclResult_t want, const char *text)
{
  const char *err = ncclGetLastError(NULL);

  if (got != want)
    MC_MP_FAIL("%s returned %d (%s), expected %d (%s)", what, (int)got, ncclGetErrorString(got),
               (int)want, ncclGetErrorString(want));
  if ((err == NULL) || (strstr(err, text) == NULL))
    MC_MP_FAIL("%s: last error '%s' does not contain '%s'", what, err ? err : "(null)", text);
  printf("%s -> %s: %s\n", what, ncclGetErrorString(got), err);
}

static void errors(void)
{
  ncclComm_t comms[NDEV];
  const int dup[4] = {0, 1, 2, 1};
  const int neg[2] = {0, -1};

  expect_fail("ncclCommInitAll(NULL, 8, NULL)", ncclCommInitAll(NULL, NDEV, NULL),
              ncclInvalidArgument, "comms");
  expect_fail("ncclCommInitAll(comms, 0, NULL)", ncclCommInitAll(comms, 0, NULL),
              ncclInvalidArgument, "ndev");
  expect_fail("ncclCommInitAll(comms, -1, NULL)", ncclCommInitAll(comms, -1, NULL),
              ncclInvalidArgument, "ndev");
  expect_fail("ncclCommInitAll(comms, 2, {0,-1})", ncclCommInitAll(comms, 2, neg),
              ncclInvalidArgument, "devlist[1]");
  expect_fail("ncclCommInitAll(comms, 4, {0,1,2,1})", ncclCommInitAll(comms, 4, dup),
              ncclInvalidUsage, "device 1");
  /* After the failures, a valid call still works. */
  init_all(NDEV, NULL);
}

int main(int argc, char **argv)
{
  const int reverse[NDEV] = {7, 6, 5, 4, 3, 2, 1, 0};
  const int dup[4] = {0, 1, 2, 1};

  mc_mp_set_name("mp_init_all", MC_MP_NO_RANK);
  if ((argc == 2) && (strcmp(argv[1], "null") == 0))
    init_all(NDEV, NULL);
  else if ((argc == 2) && (strcmp(argv[1], "reverse") == 0))
    init_all(NDEV, reverse);
  else if ((argc == 2) && (strcmp(argv[1], "dup") == 0))
    init_all(4, dup);
  else if ((argc == 2) && (strcmp(argv[1], "errors") == 0))
    errors();
  else {
    fprintf(stderr, "usage: mp_init_all null|reverse|errors|dup\n");
    return 2;
  }
  printf("mp_init_all %s: ok\n", argv[1]);
  return 0;
}
