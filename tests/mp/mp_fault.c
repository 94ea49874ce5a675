/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A peer dies in the middle of collectives: every rank loops ncclAllReduce
 * (count floats); the victim rank SIGKILLs itself after kill_ms. Every
 * survivor must get ncclRemoteError or ncclSystemError from a collective
 * within seconds, the same code from ncclCommGetAsyncError, further calls
 * must fail at once, ncclRedOpDestroy of a premulsum op created before the
 * failure must return (success or an error, never a crash), and
 * ncclCommAbort must return promptly.
 *
 *   mp_fault VICTIM KILL_MS COUNT
 * Survivors print "rank R: <error> after S s, I iterations (async A, again
 * A, redop destroy D) (abort A s): <last error>"
 * and exit 0 when all of that holds; SIGTERM from the launcher is ignored
 * so that each survivor finds out by itself.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "meshccl.h"
#include "nccl.h"

#define LOOP_LIMIT_S 60.0

static int kill_ms;

static double now(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *killer(void *arg)
{
  (void)arg;
  usleep((useconds_t)kill_ms * 1000);
  kill(getpid(), SIGKILL);
  return NULL;
}

int main(int argc, char **argv)
{
  ncclComm_t comm;
  int rank, victim;
  size_t count;
  float *buf;
  double t0, t_err, t_abort;
  ncclResult_t res = ncclSuccess, async = ncclSuccess, again, destroyed;
  ncclRedOp_t premul;
  float scalar = 0.5f;
  long iters = 0;

  if (argc != 4) {
    fprintf(stderr, "usage: mp_fault VICTIM KILL_MS COUNT\n");
    return 2;
  }
  victim = atoi(argv[1]);
  kill_ms = atoi(argv[2]);
  count = strtoull(argv[3], NULL, 0);
  signal(SIGTERM, SIG_IGN);
  if (meshcclCommInitFromEnv(&comm, NULL) != ncclSuccess) {
    fprintf(stderr, "init failed: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  ncclCommUserRank(comm, &rank);
  buf = calloc(count, sizeof(float));
  if (ncclRedOpCreatePreMulSum(&premul, &scalar, ncclFloat, ncclScalarHostImmediate, comm) !=
      ncclSuccess) {
    fprintf(stderr, "ncclRedOpCreatePreMulSum failed: %s\n", ncclGetLastError(comm));
    return 1;
  }
  /* Every rank starts its clock after the same all-reduce: a rank that
   * finished init early would otherwise count its wait for the others. */
  if (ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, comm, NULL) != ncclSuccess) {
    fprintf(stderr, "first all-reduce failed: %s\n", ncclGetLastError(comm));
    return 1;
  }
  if (rank == victim) {
    pthread_t th;
    pthread_create(&th, NULL, killer, NULL);
  }
  t0 = now();
  while ((res == ncclSuccess) && (now() - t0 < LOOP_LIMIT_S)) {
    res = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
    iters++;
  }
  t_err = now() - t0 - kill_ms * 1e-3;
  ncclCommGetAsyncError(comm, &async);
  again = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
  destroyed = ncclRedOpDestroy(premul, comm);
  printf("rank %d: %s after %.2f s, %ld iterations (async %d, again %d, redop destroy %d)", rank,
         ncclGetErrorString(res), t_err, iters, (int)async, (int)again, (int)destroyed);
  t_abort = now();
  ncclCommAbort(comm);
  printf(" (abort %.2f s): %s\n", now() - t_abort, ncclGetLastError(NULL));
  free(buf);
  return (((res == ncclRemoteError) || (res == ncclSystemError)) && (async == res) &&
          (again == res))
             ? 0
             : 1;
}
