/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One rank of tests/mp/test_netns_loss.sh: collectives over a lossy link
 * either complete bit-exact or fail within the timeout.
 *
 *   mp_loss SECONDS
 *
 * Joins the communicator of the environment (meshcclCommInitFromEnv) and,
 * for SECONDS (rank 0's clock, broadcast before each call), cycles through
 * all-reduce (int32 sum), broadcast (uint8 from a rotating root), all-gather
 * (int32) and reduce-scatter (int32 sum) of 1, 1000 and 16384 elements per
 * rank, with data that changes every call; each result is compared bit for
 * bit with what the call must give, and each call is timed (with its
 * go/stop broadcast).
 *
 * Prints one line and exits with:
 *   0  every call exact: "rank R: ok, N collectives, slowest S s"
 *   3  a call failed: "rank R: <code> after N collectives, the failing call
 *      took S s (slowest before: S2 s): <last error>"
 *   4  init failed: "rank R: init failed: <code>: <last error>"
 *   1  a wrong result: "rank R: wrong result in call N (<collective>, <count>)"
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "meshccl.h"
#include "nccl.h"

#define MAX_COUNT 16384

static const size_t counts[] = {1, 1000, MAX_COUNT};
static const char *const names[] = {"AllReduce", "Broadcast", "AllGather", "ReduceScatter"};

static double now(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rank r's element i of call k (small integers: every sum is exact). */
static int32_t val(int r, size_t i, long k)
{
  return (int32_t)((r + 1) * 7 + (int32_t)(i % 1013) + (int32_t)(k % 97));
}

/* Runs call k (collective k % 4, count counts[(k / 4) % 3]); *wrong when the
 * result differs from what it must be. */
static ncclResult_t run_call(ncclComm_t comm, int rank, int n, long k, int32_t *in, int32_t *out,
                             int *wrong)
{
  int kind = (int)(k % 4);
  size_t count = counts[(k / 4) % 3];
  int root = (int)(k % n);
  ncclResult_t res;

  *wrong = 0;
  for (size_t i = 0; i < count * (size_t)n; i++)
    in[i] = val(rank, i, k);
  memset(out, 0xa5, count * (size_t)n * sizeof(*out));
  switch (kind) {
  case 0:
    res = ncclAllReduce(in, out, count, ncclInt32, ncclSum, comm, NULL);
    for (size_t i = 0; (res == ncclSuccess) && (i < count); i++) {
      int32_t want = 0;
      for (int r = 0; r < n; r++)
        want += val(r, i, k);
      *wrong |= (out[i] != want);
    }
    break;
  case 1: {
    uint8_t *b = (uint8_t *)out;
    for (size_t i = 0; i < count; i++)
      b[i] = (rank == root) ? (uint8_t)val(root, i, k) : 0;
    res = ncclBroadcast(b, b, count, ncclUint8, root, comm, NULL);
    for (size_t i = 0; (res == ncclSuccess) && (i < count); i++)
      *wrong |= (b[i] != (uint8_t)val(root, i, k));
    break;
  }
  case 2:
    res = ncclAllGather(in, out, count, ncclInt32, comm, NULL);
    for (size_t i = 0; (res == ncclSuccess) && (i < count * (size_t)n); i++)
      *wrong |= (out[i] != val((int)(i / count), i % count, k));
    break;
  default:
    res = ncclReduceScatter(in, out, count, ncclInt32, ncclSum, comm, NULL);
    for (size_t i = 0; (res == ncclSuccess) && (i < count); i++) {
      int32_t want = 0;
      for (int r = 0; r < n; r++)
        want += val(r, (size_t)rank * count + i, k);
      *wrong |= (out[i] != want);
    }
    break;
  }
  return res;
}

int main(int argc, char **argv)
{
  ncclComm_t comm = NULL;
  ncclResult_t res = ncclSuccess;
  int rank = -1, n = 0, wrong = 0;
  long done = 0;
  double seconds, t0, slowest = 0, took = 0;
  int32_t *in, *out;

  if (argc != 2) {
    fprintf(stderr, "usage: mp_loss SECONDS\n");
    return 2;
  }
  seconds = atof(argv[1]);
  setvbuf(stdout, NULL, _IOLBF, 0);
  res = meshcclCommInitFromEnv(&comm, NULL);
  if (res != ncclSuccess) {
    printf("rank %s: init failed: %s: %s\n", getenv("RANK") ? getenv("RANK") : "?",
           ncclGetErrorString(res), ncclGetLastError(NULL));
    if (comm != NULL)
      ncclCommAbort(comm);
    return 4;
  }
  ncclCommUserRank(comm, &rank);
  ncclCommCount(comm, &n);
  in = malloc((size_t)MAX_COUNT * (size_t)n * sizeof(*in));
  out = malloc((size_t)MAX_COUNT * (size_t)n * sizeof(*out));
  if ((in == NULL) || (out == NULL))
    return 1;
  t0 = now();
  for (;;) {
    int go = (now() - t0 < seconds);
    double t1 = now();

    res = ncclBroadcast(&go, &go, 1, ncclInt32, 0, comm, NULL);
    took = now() - t1;
    if ((res != ncclSuccess) || !go)
      break;
    res = run_call(comm, rank, n, done, in, out, &wrong);
    took = now() - t1;
    if ((res != ncclSuccess) || wrong)
      break;
    slowest = (took > slowest) ? took : slowest;
    done++;
  }
  if (wrong) {
    printf("rank %d: wrong result in call %ld (%s, %zu)\n", rank, done, names[done % 4],
           counts[(done / 4) % 3]);
    ncclCommAbort(comm);
    return 1;
  }
  if (res != ncclSuccess) {
    printf("rank %d: %s after %ld collectives, the failing call took %.2f s (slowest before: "
           "%.2f s): %s\n",
           rank, ncclGetErrorString(res), done, took, slowest, ncclGetLastError(comm));
    ncclCommAbort(comm);
    free(in);
    free(out);
    return 3;
  }
  printf("rank %d: ok, %ld collectives, slowest %.2f s\n", rank, done, slowest);
  ncclCommDestroy(comm);
  free(in);
  free(out);
  return 0;
}
