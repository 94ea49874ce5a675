/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One rank of tests/mp/test_net_plugin.sh: ncclCommAbort from a second
 * thread ends a collective that waits, and returns, even when the rank's
 * proxy thread is blocked inside a net plugin's call.
 *
 *   mp_abort_wait ABORT_MS
 *
 * Joins the communicator of the environment (meshcclCommInitFromEnv), starts
 * a thread that calls ncclCommAbort ABORT_MS after the all-reduce started,
 * and runs one all-reduce of 4099 floats. Prints
 *   "rank R: all-reduce returned C after S s; abort returned C after S s"
 * and exits 0 when the all-reduce failed and both returned, 1 otherwise.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "mc_mp.h"
#include "meshccl.h"
#include "nccl.h"

#define COUNT 4099

static ncclComm_t g_comm;
static int g_abort_ms;
static ncclResult_t g_abort_res = ncclInternalError;
static double g_abort_s = -1.0;

static void *aborter(void *arg)
{
  double t0;

  (void)arg;
  usleep((useconds_t)g_abort_ms * 1000u);
  t0 = mc_mp_now_sec();
  g_abort_res = ncclCommAbort(g_comm);
  g_abort_s = mc_mp_now_sec() - t0;
  return NULL;
}

int main(int argc, char **argv)
{
  pthread_t th;
  float *buf;
  int rank = -1;
  double t0;
  ncclResult_t res;

  if (argc != 2) {
    fprintf(stderr, "usage: mp_abort_wait ABORT_MS\n");
    return 1;
  }
  g_abort_ms = atoi(argv[1]);
  if (meshcclCommInitFromEnv(&g_comm, NULL) != ncclSuccess) {
    fprintf(stderr, "mp_abort_wait: init failed\n");
    return 1;
  }
  if (ncclCommUserRank(g_comm, &rank) != ncclSuccess)
    return 1;
  buf = calloc(COUNT, sizeof(*buf));
  if ((buf == NULL) || (pthread_create(&th, NULL, aborter, NULL) != 0))
    return 1;
  t0 = mc_mp_now_sec();
  res = ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, g_comm, NULL);
  printf("rank %d: all-reduce returned %d after %.2f s; ", rank, (int)res, mc_mp_now_sec() - t0);
  pthread_join(th, NULL);
  printf("abort returned %d after %.2f s\n", (int)g_abort_res, g_abort_s);
  fflush(stdout);
  free(buf);
  return ((res != ncclSuccess) && (g_abort_res == ncclSuccess)) ? 0 : 1;
}
