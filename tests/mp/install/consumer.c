/* SPDX-License-Identifier: Apache-2.0 */
/* An installed meshccl's consumer: includes <nccl.h> from the install, runs
 * a 2-rank all-reduce in one process (ncclCommInitAll) and checks it. Built
 * by tests/mp/test_install.sh with find_package(meshccl), with pkg-config
 * and through add_subdirectory. Prints "consumer ok" and exits 0 on success. */
#include <nccl.h>
#include <stdio.h>

int main(void)
{
  ncclComm_t comms[2];
  int data[2][4] = {{1, 2, 3, 4}, {10, 20, 30, 40}};
  int version = 0;

  if ((ncclGetVersion(&version) != ncclSuccess) || (version != NCCL_VERSION_CODE)) {
    fprintf(stderr, "consumer: version %d, header says %d\n", version, NCCL_VERSION_CODE);
    return 1;
  }
  if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) {
    fprintf(stderr, "consumer: ncclCommInitAll: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  if (ncclGroupStart() != ncclSuccess)
    return 1;
  for (int r = 0; r < 2; r++) {
    if (ncclAllReduce(data[r], data[r], 4, ncclInt32, ncclSum, comms[r], NULL) != ncclSuccess)
      return 1;
  }
  if (ncclGroupEnd() != ncclSuccess)
    return 1;
  for (int r = 0; r < 2; r++) {
    for (int i = 0; i < 4; i++) {
      if (data[r][i] != 11 * (i + 1)) {
        fprintf(stderr, "consumer: rank %d element %d is %d, want %d\n", r, i, data[r][i],
                11 * (i + 1));
        return 1;
      }
    }
    ncclCommDestroy(comms[r]);
  }
  printf("consumer ok\n");
  return 0;
}
