/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One rank of test_netns_mesh_failover.sh: loops large int32 sum
 * all-reduces and checks every element of every result, while the test
 * takes links of the mesh down under it.
 *
 *   mp_failover --mib M --iters N [--ready FILE]
 *
 * The communicator comes from the environment (meshcclCommInitFromEnv).
 * FILE is created once the first all-reduce is under way, so that the test
 * knows when to cut a link. Each iteration prints "iteration K exact (T ms)".
 * Exit status: 0 when every iteration was exact, 2 when a collective
 * returned ncclRemoteError (its text printed), 3 for another error code,
 * 4 when a result was wrong.
 */
#include "mc_mp.h"
#include "meshccl.h"
#include "nccl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ms(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* The value rank r contributes at element i of iteration k: small enough
 * that the sum of every rank's stays far from overflow. */
static int32_t value(size_t i, int r, int k)
{
  return (int32_t)((i % 1000003u) * 7u + (unsigned)r * 13u + (unsigned)k);
}

int main(int argc, char **argv)
{
  size_t mib = 64;
  int iters = 4;
  const char *ready = NULL;
  ncclComm_t comm = NULL;
  int rank = 0;
  int n_ranks = 0;
  int32_t *send = NULL;
  int32_t *recv = NULL;
  size_t count;

  for (int i = 1; i < argc; i++) {
    if ((strcmp(argv[i], "--mib") == 0) && (i + 1 < argc))
      mib = (size_t)strtoul(argv[++i], NULL, 10);
    else if ((strcmp(argv[i], "--iters") == 0) && (i + 1 < argc))
      iters = atoi(argv[++i]);
    else if ((strcmp(argv[i], "--ready") == 0) && (i + 1 < argc))
      ready = argv[++i];
    else {
      fprintf(stderr, "usage: mp_failover --mib M --iters N [--ready FILE]\n");
      return 1;
    }
  }
  count = mib * 1024 * 1024 / sizeof(int32_t);
  MC_MP_CHECK(meshcclCommInitFromEnv(&comm, NULL));
  MC_MP_CHECK(ncclCommUserRank(comm, &rank));
  MC_MP_CHECK(ncclCommCount(comm, &n_ranks));
  mc_mp_set_name("mp_failover", rank);
  send = malloc(count * sizeof(*send));
  recv = malloc(count * sizeof(*recv));
  if ((send == NULL) || (recv == NULL))
    MC_MP_FAIL("cannot allocate 2 x %zu MiB", mib);
  for (int k = 0; k < iters; k++) {
    uint64_t t0 = now_ms();
    ncclResult_t res;

    for (size_t i = 0; i < count; i++)
      send[i] = value(i, rank, k);
    memset(recv, 0, count * sizeof(*recv));
    if ((k == 0) && (ready != NULL)) {
      FILE *f = fopen(ready, "w");
      if (f != NULL)
        fclose(f);
    }
    res = ncclAllReduce(send, recv, count, ncclInt32, ncclSum, comm, NULL);
    if (res != ncclSuccess) {
      printf("rank %d: iteration %d: ncclAllReduce returned %d (%s) after %llu ms: %s\n", rank, k,
             (int)res, ncclGetErrorString(res), (unsigned long long)(now_ms() - t0),
             ncclGetLastError(comm));
      fflush(stdout);
      ncclCommAbort(comm);
      free(send);
      free(recv);
      return (res == ncclRemoteError) ? 2 : 3;
    }
    for (size_t i = 0; i < count; i++) {
      int64_t want = 0;

      for (int r = 0; r < n_ranks; r++)
        want += value(i, r, k);
      if ((int64_t)recv[i] != want) {
        printf("rank %d: iteration %d: element %zu is %d, want %lld\n", rank, k, i, recv[i],
               (long long)want);
        fflush(stdout);
        ncclCommAbort(comm);
        free(send);
        free(recv);
        return 4;
      }
    }
    printf("rank %d: iteration %d exact (%llu ms)\n", rank, k, (unsigned long long)(now_ms() - t0));
    fflush(stdout);
  }
  MC_MP_CHECK(ncclCommDestroy(comm));
  free(send);
  free(recv);
  return 0;
}
