/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bad arguments to the collectives return NCCL's codes at once, with a
 * message naming the argument (ncclGetLastError): NULL buffers with count >
 * 0, a bad type or op, a root or peer out of range, a user op of another
 * type or destroyed, a NULL comm; count 0 with NULL buffers is a no-op; a
 * failed check inside a group fails its ncclGroupEnd too; after
 * ncclCommAbort-free failures nothing is left half done. Two communicators
 * from ncclCommInitAll, one thread. Prints "<call> -> <result>: <message>"
 * lines that test_coll_args.sh matches; exits 0 when every expectation held.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"

static int failures;

static void expect(const char *what, ncclResult_t got, ncclResult_t want, const char *needle)
{
  const char *msg = ncclGetLastError(NULL);
  printf("%s -> %s: %s\n", what, ncclGetErrorString(got), (got == ncclSuccess) ? "" : msg);
  if ((got != want) || ((needle != NULL) && (strstr(msg, needle) == NULL))) {
    fprintf(stderr, "FAIL: %s returned %d (want %d), message '%s' (want '%s')\n", what, (int)got,
            (int)want, msg, (needle != NULL) ? needle : "");
    failures++;
  }
}

int main(void)
{
  ncclComm_t comms[2];
  ncclComm_t c;
  float buf[16] = {0};
  float scalar = 2.0f;
  ncclRedOp_t op;
  ncclResult_t r;

  if (ncclCommInitAll(comms, 2, NULL) != ncclSuccess) {
    fprintf(stderr, "init failed: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  c = comms[0];
  expect("AllReduce(NULL sendbuff)", ncclAllReduce(NULL, buf, 4, ncclFloat, ncclSum, c, NULL),
         ncclInvalidArgument, "sendbuff argument is NULL");
  expect("AllReduce(NULL recvbuff)", ncclAllReduce(buf, NULL, 4, ncclFloat, ncclSum, c, NULL),
         ncclInvalidArgument, "recvbuff argument is NULL");
  expect("AllReduce(type 99)", ncclAllReduce(buf, buf, 4, (ncclDataType_t)99, ncclSum, c, NULL),
         ncclInvalidArgument, "invalid type 99");
  expect("AllReduce(op 42)", ncclAllReduce(buf, buf, 4, ncclFloat, (ncclRedOp_t)42, c, NULL),
         ncclInvalidArgument, "invalid reduction operation 42");
  expect("AllReduce(NULL comm)", ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, NULL, NULL),
         ncclInvalidArgument, "comm argument is NULL");
  expect("AllReduce(count 0, NULL buffers)",
         ncclAllReduce(NULL, NULL, 0, ncclFloat, ncclSum, c, NULL), ncclSuccess, NULL);
  expect("Broadcast(root 2)", ncclBroadcast(buf, buf, 4, ncclFloat, 2, c, NULL),
         ncclInvalidArgument, "invalid root 2");
  expect("Reduce(root -1)", ncclReduce(buf, buf, 4, ncclFloat, ncclSum, -1, c, NULL),
         ncclInvalidArgument, "invalid root -1");
  expect("Send(peer 5)", ncclSend(buf, 4, ncclFloat, 5, c, NULL), ncclInvalidArgument,
         "invalid peer 5");
  expect("Recv(NULL recvbuff)", ncclRecv(NULL, 4, ncclFloat, 1, c, NULL), ncclInvalidArgument,
         "recvbuff argument is NULL");
  expect("AllGather(NULL sendbuff)", ncclAllGather(NULL, buf, 4, ncclFloat, c, NULL),
         ncclInvalidArgument, "sendbuff argument is NULL");
  expect("AlltoAll(NULL recvbuff)", ncclAlltoAll(buf, NULL, 4, ncclFloat, c, NULL),
         ncclInvalidArgument, "AlltoAll : recvbuff argument is NULL");
  expect("AlltoAll(in place)", ncclAlltoAll(buf, buf, 4, ncclFloat, c, NULL), ncclInvalidArgument,
         "in-place AlltoAll is not supported");
  expect("AlltoAll(type 99)", ncclAlltoAll(buf, buf + 8, 4, (ncclDataType_t)99, c, NULL),
         ncclInvalidArgument, "invalid type 99");
  expect("Gather(root 2)", ncclGather(buf, buf, 4, ncclFloat, 2, c, NULL), ncclInvalidArgument,
         "Gather : invalid root 2");
  expect("Gather(NULL recvbuff at the root)", ncclGather(buf, NULL, 4, ncclFloat, 0, c, NULL),
         ncclInvalidArgument, "Gather : recvbuff argument is NULL");
  expect("Gather(NULL sendbuff)", ncclGather(NULL, buf, 4, ncclFloat, 1, c, NULL),
         ncclInvalidArgument, "Gather : sendbuff argument is NULL");
  expect("Scatter(root -1)", ncclScatter(buf, buf, 4, ncclFloat, -1, c, NULL), ncclInvalidArgument,
         "Scatter : invalid root -1");
  expect("Scatter(NULL sendbuff at the root)", ncclScatter(NULL, buf, 4, ncclFloat, 0, c, NULL),
         ncclInvalidArgument, "Scatter : sendbuff argument is NULL");
  expect("Scatter(NULL recvbuff)", ncclScatter(buf, NULL, 4, ncclFloat, 1, c, NULL),
         ncclInvalidArgument, "Scatter : recvbuff argument is NULL");
  expect("AlltoAll(count 0, NULL buffers)", ncclAlltoAll(NULL, NULL, 0, ncclFloat, c, NULL),
         ncclSuccess, NULL);
  expect("ReduceScatter(op 7)", ncclReduceScatter(buf, buf, 4, ncclFloat, (ncclRedOp_t)7, c, NULL),
         ncclInvalidArgument, "invalid reduction operation 7");
  expect("RedOpCreatePreMulSum(NULL scalar)",
         ncclRedOpCreatePreMulSum(&op, NULL, ncclFloat, ncclScalarHostImmediate, c),
         ncclInvalidArgument, "scalar argument is NULL");
  expect("RedOpCreatePreMulSum(float)",
         ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat, ncclScalarHostImmediate, c), ncclSuccess,
         NULL);
  expect("AllReduce(premulsum of float, on int32)",
         ncclAllReduce(buf, buf, 4, ncclInt32, op, c, NULL), ncclInvalidArgument,
         "was created for type float, used with int32");
  expect("RedOpDestroy", ncclRedOpDestroy(op, c), ncclSuccess, NULL);
  expect("AllReduce(destroyed op)", ncclAllReduce(buf, buf, 4, ncclFloat, op, c, NULL),
         ncclInvalidArgument, "invalid reduction operation");
  expect("RedOpDestroy(ncclSum)", ncclRedOpDestroy(ncclSum, c), ncclInvalidArgument,
         "built-in operation");
  /* A bad call inside a group: the call fails and so does the group; the
   * valid operations queued with it are dropped, not run half. */
  r = ncclGroupStart();
  expect("GroupStart", r, ncclSuccess, NULL);
  expect("AllReduce in a group (valid)", ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, c, NULL),
         ncclSuccess, NULL);
  expect("Send in a group (peer 9)", ncclSend(buf, 4, ncclFloat, 9, c, NULL), ncclInvalidArgument,
         "invalid peer 9");
  expect("GroupEnd after a bad call", ncclGroupEnd(), ncclInvalidArgument, NULL);
  /* Both communicators still work (one thread drives both in a group). */
  r = ncclGroupStart();
  for (int i = 0; (i < 2) && (r == ncclSuccess); i++)
    r = ncclAllReduce(buf, buf, 16, ncclFloat, ncclSum, comms[i], NULL);
  expect("AllReduce on both ranks in a group", (r == ncclSuccess) ? ncclGroupEnd() : r, ncclSuccess,
         NULL);
  for (int i = 0; i < 2; i++)
    ncclCommDestroy(comms[i]);
  printf("%s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
