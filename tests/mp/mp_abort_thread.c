/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mp_abort_thread: ncclCommAbort on one thread while others use the
 * communicator (docs/design/lifecycle.md, "Errors").
 *   mp_abort_thread group   50 times: ncclCommInitAll of 2; one thread runs
 *                           grouped all-reduces over both communicators
 *                           (ncclGroupStart; comm0; comm1; ncclGroupEnd) in a
 *                           loop while another aborts comm0 after 0-10 ms.
 *                           The loop ends with an error, a call on comm0
 *                           after the abort is ncclInvalidArgument, comm1 is
 *                           destroyed. Every 5th time also an abort of comm0
 *                           queued in the aborting thread's own open group:
 *                           abort returns at once, ncclGroupEnd fails and
 *                           frees comm0; and an abort of comm0 while another
 *                           thread is in ncclCommSplit on it: the split
 *                           fails, then abort frees comm0.
 *   mp_abort_thread peer    20 times: ncclCommInitAll of 2; one thread drives
 *                           each communicator (all-reduces in a loop; every
 *                           other time comm1's only, which then waits for
 *                           comm0) while a third aborts comm0 after 0-10 ms:
 *                           comm1's thread fails within seconds naming rank
 *                           0's abort (when it was waiting for rank 0 then).
 *   mp_abort_thread shm     one rank of a 2-rank meshccl-run job: both
 *                           all-reduce once; rank 1 aborts and sleeps,
 *                           alive; rank 0's next all-reduce fails naming
 *                           rank 1's abort. Prints "rank <r>: ok".
 * An optional second argument sets the all-reduces' count (4096 floats).
 * group and peer end with as many fds and threads as before the first
 * init; alarm() turns a hang into a failure. Exits 0 when every check held.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mc_mp.h"
#include "mc_proc.h"
#include "meshccl.h"
#include "nccl.h"

#define ITERS       20
#define GROUP_ITERS 50 /* the grouped loop's race is narrower: more tries */
#define COUNT       g_count
#define HANG_LIMIT  60 /* seconds for a whole mode */

/* Elements per all-reduce (argv[2]: large enough for several channels, so
 * that MESHCCL_NTHREADS > 1 runs them on the communicator's workers). */
static size_t g_count = 4096;

struct driver {
  ncclComm_t comms[2];
  int n_comms;  /* 2: one group over both; 1: comms[0] alone */
  size_t count; /* elements per all-reduce */
  atomic_int *go;
  ncclResult_t res; /* the call that ended the loop */
  char err[512];
  int n_done; /* operations that succeeded */
  double t_fail;
};

static void *drive(void *arg)
{
  struct driver *d = arg;
  float *buf = calloc(2 * COUNT, sizeof(*buf));

  if (buf == NULL)
    MC_MP_FAIL("out of memory");
  while (atomic_load(d->go) == 0)
    ;
  for (;;) {
    ncclResult_t res = ncclSuccess;
    if (d->n_comms == 2) {
      res = ncclGroupStart();
      for (int i = 0; (i < 2) && (res == ncclSuccess); i++)
        res = ncclAllReduce(buf + i * COUNT, buf + i * COUNT, d->count, ncclFloat, ncclSum,
                            d->comms[i], NULL);
      if (res != ncclSuccess) {
        (void)ncclGroupEnd();
      } else {
        res = ncclGroupEnd();
      }
    } else {
      res = ncclAllReduce(buf, buf, d->count, ncclFloat, ncclSum, d->comms[0], NULL);
    }
    if (res != ncclSuccess) {
      d->res = res;
      d->t_fail = mc_mp_now_sec();
      snprintf(d->err, sizeof(d->err), "%s", ncclGetLastError(NULL));
      break;
    }
    d->n_done++;
  }
  /* As a user would, at once: a rank of this process that reads this
   * buffer in place (P2P) must be done with it when the failed call
   * returns (mc_conn_send_withdraw); under ASan a late read is an error. */
  free(buf);
  return NULL;
}

static void sleep_us(long us)
{
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static bool is_error_of_abort(ncclResult_t res)
{
  return (res == ncclInvalidArgument) || (res == ncclInvalidUsage) || (res == ncclRemoteError);
}

/* Lists the process's fds on stderr (what a leak left open). */
static void show_fds(void)
{
  char path[64];
  char target[256];

  for (int fd = 0; fd < 1024; fd++) {
    ssize_t n;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    n = readlink(path, target, sizeof(target) - 1);
    if (n < 0)
      continue;
    target[n] = '\0';
    fprintf(stderr, "fd %d: %s\n", fd, target);
  }
}

/* The aborting thread's own open group holds comm0: abort returns at once,
 * the group's end fails naming comm0 and frees it. */
static void own_group(int iter)
{
  ncclComm_t comms[2] = {NULL, NULL};
  float buf[2] = {1, 1};
  ncclResult_t res;
  double t0;

  MC_MP_CHECK(ncclCommInitAll(comms, 2, NULL));
  MC_MP_CHECK(ncclGroupStart());
  for (int i = 0; i < 2; i++)
    MC_MP_CHECK(ncclAllReduce(&buf[i], &buf[i], 1, ncclFloat, ncclSum, comms[i], NULL));
  t0 = mc_mp_now_sec();
  MC_MP_CHECK(ncclCommAbort(comms[0]));
  if (mc_mp_now_sec() - t0 > 2.0)
    MC_MP_FAIL("own group %d: abort waited %.1f s for this thread's own group", iter,
               mc_mp_now_sec() - t0);
  res = ncclGroupEnd();
  if ((res != ncclInvalidArgument) || (strstr(ncclGetLastError(NULL), "was destroyed") == NULL))
    MC_MP_FAIL("own group %d: ncclGroupEnd after aborting comm0 returned %d: %s", iter, (int)res,
               ncclGetLastError(NULL));
  MC_MP_CHECK(ncclCommDestroy(comms[1]));
}

struct splitter {
  ncclComm_t comm;
  ncclResult_t res;
};

static void *split_main(void *arg)
{
  struct splitter *sp = arg;
  ncclComm_t child = NULL;

  sp->res = ncclCommSplit(sp->comm, 0, 0, &child, NULL);
  if (child != NULL)
    MC_MP_FAIL("ncclCommSplit made a child without comm1");
  return NULL;
}

/* comm0 in ncclCommSplit on another thread (waiting for comm1, which does
 * not split): abort stops it (an error) before it frees comm0. */
static void split_abort(int iter)
{
  ncclComm_t comms[2] = {NULL, NULL};
  struct splitter sp;
  pthread_t t;

  MC_MP_CHECK(ncclCommInitAll(comms, 2, NULL));
  sp.comm = comms[0];
  sp.res = ncclSuccess;
  if (pthread_create(&t, NULL, split_main, &sp) != 0)
    MC_MP_FAIL("pthread_create");
  sleep_us(20000 + (iter * 523) % 10000);
  MC_MP_CHECK(ncclCommAbort(comms[0]));
  pthread_join(t, NULL);
  if (sp.res == ncclSuccess)
    MC_MP_FAIL("split %d: ncclCommSplit on comm0 succeeded across its abort", iter);
  MC_MP_CHECK(ncclCommDestroy(comms[1]));
}

static void mode_group(int iter)
{
  ncclComm_t comms[2] = {NULL, NULL};
  atomic_int go = 0;
  struct driver d;
  pthread_t t;
  float x = 0;

  MC_MP_CHECK(ncclCommInitAll(comms, 2, NULL));
  memset(&d, 0, sizeof(d));
  d.comms[0] = comms[0];
  d.comms[1] = comms[1];
  d.n_comms = 2;
  d.count = (iter % 2 == 0) ? COUNT : 1; /* 1: most of the time between the calls */
  d.go = &go;
  if (pthread_create(&t, NULL, drive, &d) != 0)
    MC_MP_FAIL("pthread_create");
  atomic_store(&go, 1);
  sleep_us((iter * 523) % 10000);
  MC_MP_CHECK(ncclCommAbort(comms[0]));
  pthread_join(t, NULL);
  if (!is_error_of_abort(d.res))
    MC_MP_FAIL("group %d: the loop ended with %d (%s), want an error of the abort", iter,
               (int)d.res, d.err);
  if (ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comms[0], NULL) != ncclInvalidArgument)
    MC_MP_FAIL("group %d: an all-reduce on the aborted comm0 is not ncclInvalidArgument", iter);
  MC_MP_CHECK(ncclCommDestroy(comms[1]));
  if (iter % 5 == 0)
    own_group(iter);
  if (iter % 5 == 1)
    split_abort(iter);
}

static void mode_peer(int iter)
{
  ncclComm_t comms[2] = {NULL, NULL};
  atomic_int go = 0;
  struct driver d[2];
  pthread_t t[2];
  double t_abort;
  int first;

  MC_MP_CHECK(ncclCommInitAll(comms, 2, NULL));
  memset(d, 0, sizeof(d));
  /* Odd times nobody drives comm0: comm1 waits for it until the abort. */
  first = (iter % 2 == 0) ? 0 : 1;
  for (int i = first; i < 2; i++) {
    d[i].comms[0] = comms[i];
    d[i].n_comms = 1;
    d[i].count = COUNT;
    d[i].go = &go;
    if (pthread_create(&t[i], NULL, drive, &d[i]) != 0)
      MC_MP_FAIL("pthread_create");
  }
  atomic_store(&go, 1);
  sleep_us((iter * 523) % 10000);
  t_abort = mc_mp_now_sec();
  MC_MP_CHECK(ncclCommAbort(comms[0]));
  for (int i = first; i < 2; i++)
    pthread_join(t[i], NULL);
  for (int i = first; i < 2; i++)
    if (!is_error_of_abort(d[i].res))
      MC_MP_FAIL("peer %d: comm%d's loop ended with %d (%s), want an error of the abort", iter, i,
                 (int)d[i].res, d[i].err);
  /* comm1 fails on its own connection to rank 0 (the abort's notice), or
   * found comm0's abort in the same operation (one process). */
  if ((d[1].res == ncclRemoteError) && (strstr(d[1].err, "rank 0") == NULL))
    MC_MP_FAIL("peer %d: comm1's error does not name rank 0: %s", iter, d[1].err);
  if (d[1].t_fail - t_abort > 10.0)
    MC_MP_FAIL("peer %d: comm1 failed %.1f s after the abort", iter, d[1].t_fail - t_abort);
  MC_MP_CHECK(ncclCommDestroy(comms[1]));
}

static int mode_shm(void)
{
  ncclComm_t comm = NULL;
  int rank = -1;
  float x = 1;
  ncclResult_t res;
  const char *msg;

  MC_MP_CHECK(meshcclCommInitFromEnv(&comm, NULL));
  MC_MP_CHECK(ncclCommUserRank(comm, &rank));
  mc_mp_set_name("mp_abort_thread", rank);
  MC_MP_CHECK(ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, NULL));
  if (rank == 1) {
    MC_MP_CHECK(ncclCommAbort(comm));
    printf("rank %d: ok\n", rank);
    fflush(stdout);
    sleep(8); /* alive: only the abort's notice can tell rank 0 in time */
    return 0;
  }
  sleep(1); /* rank 1 aborts meanwhile */
  res = ncclAllReduce(&x, &x, 1, ncclFloat, ncclSum, comm, NULL);
  msg = ncclGetLastError(NULL);
  if ((res != ncclRemoteError) || (strstr(msg, "peer rank 1") == NULL) ||
      (strstr(msg, "ncclCommAbort") == NULL))
    MC_MP_FAIL("all-reduce after rank 1's abort returned %d: '%s' (want ncclRemoteError naming "
               "rank 1's abort)",
               (int)res, msg);
  MC_MP_CHECK(ncclCommDestroy(comm));
  printf("rank %d: ok\n", rank);
  return 0;
}

int main(int argc, char **argv)
{
  const char *mode = (argc > 1) ? argv[1] : "";
  int fds0;
  int threads0;
  int fds;
  int threads;
  bool is_group;

  if (strcmp(mode, "shm") == 0)
    return mode_shm();
  if (argc > 2)
    g_count = strtoull(argv[2], NULL, 0);
  mc_mp_set_name("mp_abort_thread", MC_MP_NO_RANK);
  if ((strcmp(mode, "group") != 0) && (strcmp(mode, "peer") != 0))
    MC_MP_FAIL("usage: mp_abort_thread group|peer|shm");
  alarm(HANG_LIMIT);
  /* The first init loads what stays (log, params, registry). */
  is_group = (strcmp(mode, "group") == 0);
  if (is_group)
    mode_group(0);
  else
    mode_peer(0);
  fds0 = mc_count_fds();
  threads0 = mc_count_threads_stable();
  for (int i = 1; i < (is_group ? GROUP_ITERS : ITERS); i++) {
    if (is_group)
      mode_group(i);
    else
      mode_peer(i);
  }
  fds = mc_count_fds();
  threads = mc_count_threads_settled(threads0, 2000);
  if (fds != fds0) {
    show_fds();
    MC_MP_FAIL("%s: %d fds open after the aborts, %d after the first", mode, fds, fds0);
  }
  if (threads != threads0)
    MC_MP_FAIL("%s: %d threads after the aborts, %d after the first", mode, threads, threads0);
  printf("%s: ok (%d aborts)\n", mode, is_group ? GROUP_ITERS : ITERS);
  return 0;
}
