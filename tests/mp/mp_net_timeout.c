/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One rank of tests/mp/test_netns_timeout.sh: waits on the wire are bounded.
 *
 *   mp_net_timeout ITERS COUNT [LATE_RANK LATE_MS]
 *
 * Joins the communicator of the environment (meshcclCommInitFromEnv) and
 * runs ITERS all-reduces of COUNT floats (0: until one fails, at most
 * LOOP_LIMIT_S; -S: for S seconds of rank 0's clock, the ranks agreeing
 * every AGREE_EVERY all-reduces by a 1-float all-reduce of rank 0's vote, so
 * that a slow build runs as long as a fast one and every rank stops at the
 * same all-reduce), each checked (every rank contributes rank + 1), printing
 * "rank R: running" after the first (the driver may now cut a link). Rank
 * LATE_RANK sleeps LATE_MS before its second all-reduce: a peer that is late.
 *
 * Prints one line and exits with:
 *   0  every all-reduce succeeded (ITERS, or for S s): "rank R: ok, I all-reduces (S s)"
 *   3  an all-reduce failed with ncclRemoteError or ncclSystemError, and
 *      ncclCommGetAsyncError and the next call report the same code:
 *      "rank R: <code> after I all-reduces (S s) (async A, again A): <last error>"
 *   4  init failed: "rank R: init failed: <code>: <last error>"
 *   5  SIGUSR1 made another thread of this rank call ncclCommAbort while the
 *      all-reduces ran (the fault matrix's "abort"): the all-reduce then
 *      running, or the next, failed, and a call after the abort returned
 *      ncclInvalidArgument (a freed communicator is never touched):
 *      "rank R: aborted by another thread after I all-reduces (S s): <code>"
 *   1  anything else (wrong result, inconsistent codes, no failure in time)
 */
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "meshccl.h"
#include "nccl.h"

#define LOOP_LIMIT_S 60.0
#define AGREE_EVERY  64

static double now(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static ncclResult_t allreduce_checked(ncclComm_t comm, float *buf, size_t count, int rank,
                                      int n_ranks, int *wrong)
{
  ncclResult_t res;
  float want = (float)n_ranks * (float)(n_ranks + 1) / 2.0f;

  for (size_t i = 0; i < count; i++)
    buf[i] = (float)(rank + 1);
  res = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
  for (size_t i = 0; (res == ncclSuccess) && (i < count); i++) {
    if (buf[i] != want) {
      *wrong = 1;
      break;
    }
  }
  return res;
}

/* Whether to run another all-reduce: ITERS of them, or until the ranks agree
 * to stop (-S), or until one fails within LOOP_LIMIT_S (0). */
static bool more(long iters, double secs, long done, double t0)
{
  if (iters > 0)
    return done < iters;
  if (secs > 0)
    return true; /* go_on ends it */
  return now() - t0 < LOOP_LIMIT_S;
}

/* With a time bound (-S): whether the ranks go on, by rank 0's clock. */
static ncclResult_t go_on(ncclComm_t comm, int rank, double t0, double secs, int *go_out)
{
  float vote = ((rank == 0) && (now() - t0 >= secs)) ? 1.0f : 0.0f;
  ncclResult_t res = ncclAllReduce(&vote, &vote, 1, ncclFloat, ncclSum, comm, NULL);

  *go_out = (res == ncclSuccess) && (vote == 0.0f);
  return res;
}

/* The "abort" fault: SIGUSR1 wakes a thread that aborts the communicator. */
static sem_t g_abort_sem;
static ncclComm_t g_comm;
static volatile int g_aborted; /* atomic: the thread called ncclCommAbort */
static volatile int g_quit;    /* atomic: main is done, the thread ends */

static void on_usr1(int sig)
{
  (void)sig;
  sem_post(&g_abort_sem); /* async-signal-safe */
}

static void *abort_thread(void *arg)
{
  (void)arg;
  while (sem_wait(&g_abort_sem) != 0) {
  }
  if (__atomic_load_n(&g_quit, __ATOMIC_ACQUIRE))
    return NULL;
  __atomic_store_n(&g_aborted, 1, __ATOMIC_RELEASE);
  ncclCommAbort(g_comm);
  return NULL;
}

int main(int argc, char **argv)
{
  pthread_t aborter;
  ncclComm_t comm = NULL;
  ncclResult_t res, async = ncclSuccess, again;
  int rank = -1, n_ranks = 0, wrong = 0, late_rank = -1, late_ms = 0;
  long iters, done = 0;
  double secs = 0;
  int go = 1;
  size_t count;
  float *buf;
  double t0;

  if ((argc != 3) && (argc != 5)) {
    fprintf(stderr, "usage: mp_net_timeout ITERS COUNT [LATE_RANK LATE_MS]\n");
    return 2;
  }
  iters = atol(argv[1]);
  if (iters < 0) {
    secs = (double)-iters;
    iters = 0;
  }
  count = strtoull(argv[2], NULL, 0);
  if (argc == 5) {
    late_rank = atoi(argv[3]);
    late_ms = atoi(argv[4]);
  }
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
  ncclCommCount(comm, &n_ranks);
  g_comm = comm;
  if ((sem_init(&g_abort_sem, 0, 0) != 0) ||
      (pthread_create(&aborter, NULL, abort_thread, NULL) != 0) ||
      (signal(SIGUSR1, on_usr1) == SIG_ERR))
    return 1;
  buf = malloc(((count > 0) ? count : 1) * sizeof(float));
  if (buf == NULL)
    return 1;
  t0 = now();
  res = allreduce_checked(comm, buf, count, rank, n_ranks, &wrong);
  if (res == ncclSuccess) {
    printf("rank %d: running\n", rank);
    done++;
  }
  while ((res == ncclSuccess) && !wrong && go && more(iters, secs, done, t0)) {
    if ((rank == late_rank) && (done == 1))
      usleep((useconds_t)late_ms * 1000);
    res = allreduce_checked(comm, buf, count, rank, n_ranks, &wrong);
    done += (res == ncclSuccess);
    if ((res == ncclSuccess) && (secs > 0) && ((done % AGREE_EVERY) == 0))
      res = go_on(comm, rank, t0, secs, &go);
  }
  if (__atomic_load_n(&g_aborted, __ATOMIC_ACQUIRE)) {
    pthread_join(aborter, NULL);
    again = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
    printf("rank %d: aborted by another thread after %ld all-reduces (%.2f s): %s, then %s\n", rank,
           done, now() - t0, ncclGetErrorString(res), ncclGetErrorString(again));
    free(buf);
    return ((res != ncclSuccess) && (again == ncclInvalidArgument)) ? 5 : 1;
  }
  __atomic_store_n(&g_quit, 1, __ATOMIC_RELEASE);
  sem_post(&g_abort_sem);
  pthread_join(aborter, NULL);
  if (wrong) {
    printf("rank %d: wrong result after %ld all-reduces\n", rank, done);
    ncclCommAbort(comm);
    free(buf);
    return 1;
  }
  if (res == ncclSuccess) {
    bool bounded = (iters > 0) || (secs > 0);
    printf("rank %d: %s, %ld all-reduces (%.2f s)\n", rank, bounded ? "ok" : "no failure", done,
           now() - t0);
    ncclCommDestroy(comm);
    free(buf);
    return bounded ? 0 : 1;
  }
  ncclCommGetAsyncError(comm, &async);
  again = ncclAllReduce(buf, buf, count, ncclFloat, ncclSum, comm, NULL);
  printf("rank %d: %s after %ld all-reduces (%.2f s) (async %d, again %d): %s\n", rank,
         ncclGetErrorString(res), done, now() - t0, (int)async, (int)again, ncclGetLastError(comm));
  ncclCommAbort(comm);
  free(buf);
  return (((res == ncclRemoteError) || (res == ncclSystemError)) && (async == res) &&
          (again == res))
             ? 3
             : 1;
}
