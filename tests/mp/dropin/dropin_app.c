/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A program written for NVIDIA NCCL, compiled against NVIDIA's own nccl.h
 * (tests/mp/test_nccl_header.sh gives the include path; CUDA's headers are
 * replaced by a few declarations of its types, since buffers here are host
 * memory) and run on libmeshccl.so: one rank of a meshccl-run job
 * (RANK, WORLD_SIZE, NCCL_COMM_ID; rank 0 makes nothing: NCCL_COMM_ID's
 * root). An all-reduce, an all-gather and a broadcast are checked, and
 * ncclGetVersion against the header's NCCL_VERSION_CODE.
 * Prints "rank R: ok" and exits 0, or says what differed and exits 1.
 */
#include <nccl.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(int rank, const char *what, ncclResult_t r)
{
  printf("rank %d: %s: %d (%s)\n", rank, what, (int)r, ncclGetLastError(NULL));
  return 1;
}

int main(void)
{
  int rank = atoi(getenv("RANK") ? getenv("RANK") : "0");
  int n = atoi(getenv("WORLD_SIZE") ? getenv("WORLD_SIZE") : "1");
  ncclUniqueId id;
  ncclComm_t comm;
  ncclResult_t r;
  float sum[1024];
  int all[16];
  int mine = rank * 7 + 1;
  int version = 0;
  double b = (rank == 0) ? 2.5 : 0.0;

  memset(&id, 0, sizeof(id));
  if ((n < 1) || (n > 16))
    return fail(rank, "WORLD_SIZE out of 1..16", ncclInvalidArgument);
  /* NCCL_COMM_ID in the environment: every rank computes the same id. */
  r = ncclGetUniqueId(&id);
  if (r != ncclSuccess)
    return fail(rank, "ncclGetUniqueId", r);
  r = ncclCommInitRank(&comm, n, id, rank);
  if (r != ncclSuccess)
    return fail(rank, "ncclCommInitRank", r);
  for (int i = 0; i < 1024; i++)
    sum[i] = (float)(rank + i);
  r = ncclAllReduce(sum, sum, 1024, ncclFloat, ncclSum, comm, NULL);
  if (r != ncclSuccess)
    return fail(rank, "ncclAllReduce", r);
  for (int i = 0; i < 1024; i++) {
    if (sum[i] != (float)(n * i + n * (n - 1) / 2)) {
      printf("rank %d: all-reduce element %d is %g\n", rank, i, (double)sum[i]);
      return 1;
    }
  }
  r = ncclAllGather(&mine, all, 1, ncclInt32, comm, NULL);
  if (r != ncclSuccess)
    return fail(rank, "ncclAllGather", r);
  for (int k = 0; k < n; k++) {
    if (all[k] != k * 7 + 1) {
      printf("rank %d: all-gather element %d is %d\n", rank, k, all[k]);
      return 1;
    }
  }
  r = ncclBroadcast(&b, &b, 1, ncclFloat64, 0, comm, NULL);
  if ((r != ncclSuccess) || (b != 2.5))
    return fail(rank, "ncclBroadcast", r);
  if ((ncclGetVersion(&version) != ncclSuccess) || (version != NCCL_VERSION_CODE)) {
    printf("rank %d: ncclGetVersion says %d, NVIDIA's header %d\n", rank, version,
           NCCL_VERSION_CODE);
    return 1;
  }
  r = ncclCommDestroy(comm);
  if (r != ncclSuccess)
    return fail(rank, "ncclCommDestroy", r);
  printf("rank %d: ok (NCCL_VERSION_CODE %d)\n", rank, NCCL_VERSION_CODE);
  return 0;
}
