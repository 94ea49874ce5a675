/* SPDX-License-Identifier: Apache-2.0 */
/* A program as built against NVIDIA's NCCL: it includes no meshccl header and
 * declares the few NCCL 2.x functions it calls the way NCCL's nccl.h does
 * (ncclResult_t an int-sized enum, opaque ncclComm_t, ncclDataType_t and
 * ncclRedOp_t enums with NCCL's values: ncclInt32 = 2, ncclSum = 0). It is
 * linked with -lnccl (NEEDED libnccl.so.2) and must run on meshccl's
 * libnccl.so.2 through LD_LIBRARY_PATH. Prints "nccl binary ok". */
#include <stddef.h>
#include <stdio.h>

typedef struct ncclComm *ncclComm_t;
typedef enum { ncclSuccess = 0 } ncclResult_t;
typedef enum { ncclInt32 = 2 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;

ncclResult_t ncclGetVersion(int *version);
ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, void *stream);

int main(void)
{
  ncclComm_t comms[3];
  int data[3] = {1, 2, 4};
  int version = 0;

  if ((ncclGetVersion(&version) != ncclSuccess) || (version < 23000)) {
    fprintf(stderr, "nccl binary: version %d\n", version);
    return 1;
  }
  if (ncclCommInitAll(comms, 3, NULL) != ncclSuccess)
    return 1;
  ncclGroupStart();
  for (int r = 0; r < 3; r++)
    ncclAllReduce(&data[r], &data[r], 1, ncclInt32, ncclSum, comms[r], NULL);
  if (ncclGroupEnd() != ncclSuccess)
    return 1;
  for (int r = 0; r < 3; r++) {
    if (data[r] != 7) {
      fprintf(stderr, "nccl binary: rank %d got %d, want 7\n", r, data[r]);
      return 1;
    }
    ncclCommDestroy(comms[r]);
  }
  printf("nccl binary ok (version %d)\n", version);
  return 0;
}
