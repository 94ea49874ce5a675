/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mp_misuse: API misuse is detected, never silent (one process).
 *   mp_misuse destroyed
 *       A communicator destroyed with ncclCommDestroy, one aborted with
 *       ncclCommAbort, and an address that never was one: every API call
 *       given them returns ncclInvalidArgument with its exact message
 *       ("<call> : communicator 0x... was destroyed ..."), and nothing reads
 *       the freed memory (ASan runs this too).
 *   mp_misuse threads
 *       Two threads on one communicator (ncclCommInitAll, 2 ranks in this
 *       process). (a) The main thread holds both ranks' all-reduces in an
 *       open group; another thread's collectives, group and destroy on them
 *       get ncclInvalidUsage naming the holder; the main thread's destroy
 *       inside its own group is refused; its ncclGroupEnd then completes with
 *       the right sums, and the other thread may drive them afterwards.
 *       (b) Two threads call ncclAllReduce on rank 0 at once, while nobody
 *       drives rank 1 yet: whichever comes second gets ncclInvalidUsage at
 *       once (the first is still waiting for rank 1), then a third thread
 *       drives rank 1 and the first completes with the right sums. Both
 *       outcomes are decided by the order of the calls, not by timing.
 * Prints "<scenario>: ok" and exits 0, or the first difference and exits 1.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_mp.h"
#include "meshccl.h"
#include "nccl.h"

#define COUNT 1000

/* The call returned want and ncclGetLastError(NULL) is exactly text. */
static void expect(const char *what, ncclResult_t got, ncclResult_t want, const char *text)
{
  const char *err = ncclGetLastError(NULL);

  if (got != want)
    MC_MP_FAIL("%s returned %d (%s), expected %d (%s); last error: %s", what, (int)got,
               ncclGetErrorString(got), (int)want, ncclGetErrorString(want), err);
  if ((text != NULL) && (strcmp(err, text) != 0))
    MC_MP_FAIL("%s: last error\n  '%s'\nexpected\n  '%s'", what, err, text);
  printf("%s -> %s: %s\n", what, ncclGetErrorString(got), (text != NULL) ? err : "");
}

/* ------------------------------------------------------------ destroyed */

static char g_text[1024];

static const char *gone_text(const char *call, ncclComm_t comm)
{
  snprintf(g_text, sizeof(g_text),
           "%s : communicator %p was destroyed (ncclCommDestroy or ncclCommAbort); it cannot be "
           "used any more",
           call, (void *)comm);
  return g_text;
}

#define EXPECT_GONE(_call, _name, _comm)                                                           \
  expect(#_call, (_call), ncclInvalidArgument, gone_text((_name), (_comm)))

static ncclComm_t one_rank_comm(void)
{
  ncclUniqueId id;
  ncclComm_t comm = NULL;

  MC_MP_CHECK(ncclGetUniqueId(&id));
  MC_MP_CHECK(ncclCommInitRank(&comm, 1, id, 0));
  return comm;
}

/* Every kind of call on a handle that is no longer a communicator. */
static void calls_on_gone(ncclComm_t c)
{
  float buf[4] = {0};
  int v = 0;
  ncclResult_t async;
  ncclRedOp_t op;
  ncclComm_t child = NULL;
  void *handle = NULL;
  uint64_t stat = 0;
  ncclUniqueId id;
  meshcclCommInfo_t info;
  ncclTeam_t team;

  EXPECT_GONE(ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, c, NULL), "AllReduce", c);
  EXPECT_GONE(ncclBroadcast(buf, buf, 1, ncclFloat, 0, c, NULL), "Broadcast", c);
  EXPECT_GONE(ncclBcast(buf, 1, ncclFloat, 0, c, NULL), "Broadcast", c);
  EXPECT_GONE(ncclReduce(buf, buf, 1, ncclFloat, ncclSum, 0, c, NULL), "Reduce", c);
  EXPECT_GONE(ncclAllGather(buf, buf, 1, ncclFloat, c, NULL), "AllGather", c);
  EXPECT_GONE(ncclReduceScatter(buf, buf, 1, ncclFloat, ncclSum, c, NULL), "ReduceScatter", c);
  EXPECT_GONE(ncclSend(buf, 1, ncclFloat, 0, c, NULL), "Send", c);
  EXPECT_GONE(ncclRecv(buf, 1, ncclFloat, 0, c, NULL), "Recv", c);
  EXPECT_GONE(ncclAlltoAll(buf, buf + 2, 1, ncclFloat, c, NULL), "AlltoAll", c);
  EXPECT_GONE(ncclGather(buf, buf, 1, ncclFloat, 0, c, NULL), "Gather", c);
  EXPECT_GONE(ncclScatter(buf, buf, 1, ncclFloat, 0, c, NULL), "Scatter", c);
  EXPECT_GONE(ncclCommCount(c, &v), "ncclCommCount", c);
  EXPECT_GONE(ncclCommUserRank(c, &v), "ncclCommUserRank", c);
  EXPECT_GONE(ncclCommCuDevice(c, &v), "ncclCommCuDevice", c);
  EXPECT_GONE(ncclCommGetAsyncError(c, &async), "ncclCommGetAsyncError", c);
  EXPECT_GONE(ncclCommFinalize(c), "ncclCommFinalize", c);
  EXPECT_GONE(ncclCommSplit(c, 0, 0, &child, NULL), "ncclCommSplit", c);
  EXPECT_GONE(ncclCommRevoke(c, NCCL_REVOKE_DEFAULT), "ncclCommRevoke", c);
  EXPECT_GONE(ncclCommSuspend(c, 0), "ncclCommSuspend", c);
  EXPECT_GONE(ncclCommResume(c), "ncclCommResume", c);
  EXPECT_GONE(ncclCommGetUniqueId(c, &id), "ncclCommGetUniqueId", c);
  EXPECT_GONE(ncclRedOpCreatePreMulSum(&op, buf, ncclFloat, ncclScalarHostImmediate, c),
              "ncclRedOpCreatePreMulSum", c);
  EXPECT_GONE(ncclRedOpDestroy((ncclRedOp_t)ncclNumOps, c), "ncclRedOpDestroy", c);
  EXPECT_GONE(ncclCommRegister(c, buf, sizeof(buf), &handle), "ncclCommRegister", c);
  EXPECT_GONE(ncclCommDeregister(c, buf), "ncclCommDeregister", c);
  EXPECT_GONE(ncclCommMemStats(c, ncclStatGpuMemTotal, &stat), "ncclCommMemStats", c);
  EXPECT_GONE(meshcclCommGetInfo(c, &info), "meshcclCommGetInfo", c);
  EXPECT_GONE(ncclCommDestroy(c), "ncclCommDestroy", c);
  EXPECT_GONE(ncclCommAbort(c), "ncclCommAbort", c);
  /* A grouped call fails at once and fails the group. */
  MC_MP_CHECK(ncclGroupStart());
  EXPECT_GONE(ncclAllReduce(buf, buf, 1, ncclFloat, ncclSum, c, NULL), "AllReduce", c);
  expect("ncclGroupEnd", ncclGroupEnd(), ncclInvalidArgument, NULL);
  /* No error code to return: the process's last error, and an empty team. */
  if (ncclGetLastError(c) == NULL)
    MC_MP_FAIL("ncclGetLastError of a destroyed communicator is NULL");
  team = ncclTeamWorld(c);
  if ((team.nRanks != 0) || (team.rank != 0))
    MC_MP_FAIL("ncclTeamWorld of a destroyed communicator: %d ranks, rank %d", team.nRanks,
               team.rank);
}

static int run_destroyed(void)
{
  ncclComm_t c = one_rank_comm();
  ncclComm_t a;
  int v = 0;
  char not_comm[64] = {0};

  MC_MP_CHECK(ncclCommDestroy(c));
  calls_on_gone(c);
  a = one_rank_comm();
  MC_MP_CHECK(ncclCommAbort(a));
  calls_on_gone(a);
  /* An address no init returned. */
  snprintf(g_text, sizeof(g_text),
           "ncclCommCount : %p is not a communicator (not made by an ncclCommInit* call, or "
           "destroyed)",
           (void *)not_comm);
  expect("ncclCommCount(not a communicator)", ncclCommCount((ncclComm_t)not_comm, &v),
         ncclInvalidArgument, g_text);
  printf("destroyed: ok\n");
  return 0;
}

/* -------------------------------------------------------------- threads */

static ncclComm_t g_comms[2];
static unsigned long g_main_thread;

/* How the library names a thread (its pthread_t, as debuggers show it). */
static unsigned long this_thread(void)
{
  return (unsigned long)pthread_self();
}

static const char *busy_text(const char *call, int rank, unsigned long holder)
{
  snprintf(g_text, sizeof(g_text),
           "%s : communicator %p (rank %d) is in use by another thread (thread 0x%lx is running a "
           "collective on it, or holds its operations in an open ncclGroupStart); a communicator "
           "must be driven by one thread at a time",
           call, (void *)g_comms[rank], rank, holder);
  return g_text;
}

static void fill(float *in, int rank)
{
  for (int i = 0; i < COUNT; i++)
    in[i] = (float)(i % 97) + 1000.0f * (float)rank;
}

/* out is the sum of both ranks' inputs. */
static void expect_sums(const char *what, const float *out)
{
  for (int i = 0; i < COUNT; i++) {
    float want = 2.0f * (float)(i % 97) + 1000.0f;
    if (out[i] != want)
      MC_MP_FAIL("%s: element %d is %g, expected %g", what, i, (double)out[i], (double)want);
  }
}

static void *intruder(void *arg)
{
  static float buf[COUNT];
  char text[1024];

  (void)arg;
  expect("other thread: ncclAllReduce(rank 0)",
         ncclAllReduce(buf, buf, COUNT, ncclFloat, ncclSum, g_comms[0], NULL), ncclInvalidUsage,
         busy_text("AllReduce", 0, g_main_thread));
  expect("other thread: ncclSend(rank 1)", ncclSend(buf, COUNT, ncclFloat, 0, g_comms[1], NULL),
         ncclInvalidUsage, busy_text("Send", 1, g_main_thread));
  MC_MP_CHECK(ncclGroupStart());
  expect("other thread, in a group: ncclBroadcast(rank 0)",
         ncclBroadcast(buf, buf, COUNT, ncclFloat, 0, g_comms[0], NULL), ncclInvalidUsage,
         busy_text("Broadcast", 0, g_main_thread));
  expect("other thread: its ncclGroupEnd", ncclGroupEnd(), ncclInvalidUsage, NULL);
  snprintf(text, sizeof(text),
           "ncclCommDestroy : communicator %p (rank 0) is in use by thread 0x%lx (a collective "
           "running, or operations queued in its open group); wait for it, or stop it with "
           "ncclCommAbort",
           (void *)g_comms[0], g_main_thread);
  expect("other thread: ncclCommDestroy(rank 0)", ncclCommDestroy(g_comms[0]), ncclInvalidUsage,
         text);
  return NULL;
}

static void *driver(void *arg)
{
  static float in[2][COUNT];
  static float out[2][COUNT];

  (void)arg;
  for (int r = 0; r < 2; r++)
    fill(in[r], r);
  MC_MP_CHECK(ncclGroupStart());
  for (int r = 0; r < 2; r++)
    MC_MP_CHECK(ncclAllReduce(in[r], out[r], COUNT, ncclFloat, ncclSum, g_comms[r], NULL));
  MC_MP_CHECK(ncclGroupEnd());
  for (int r = 0; r < 2; r++)
    expect_sums("the other thread's group after the holder's", out[r]);
  return NULL;
}

/* (a): the main thread holds both ranks in an open group. */
static void group_holder(void)
{
  static float in[2][COUNT];
  static float out[2][COUNT];
  pthread_t th;
  char text[1024];

  g_main_thread = this_thread();
  for (int r = 0; r < 2; r++)
    fill(in[r], r);
  MC_MP_CHECK(ncclGroupStart());
  for (int r = 0; r < 2; r++)
    MC_MP_CHECK(ncclAllReduce(in[r], out[r], COUNT, ncclFloat, ncclSum, g_comms[r], NULL));
  pthread_create(&th, NULL, intruder, NULL);
  pthread_join(th, NULL);
  snprintf(text, sizeof(text),
           "ncclCommDestroy : communicator %p (rank 0) has operations queued in this thread's "
           "open group; end the group (ncclGroupEnd) first",
           (void *)g_comms[0]);
  expect("holder: ncclCommDestroy(rank 0) inside its group", ncclCommDestroy(g_comms[0]),
         ncclInvalidUsage, text);
  MC_MP_CHECK(ncclGroupEnd());
  for (int r = 0; r < 2; r++)
    expect_sums("the holder's group", out[r]);
  /* Released: another thread drives both now. */
  pthread_create(&th, NULL, driver, NULL);
  pthread_join(th, NULL);
}

struct racer {
  pthread_t th;
  unsigned long self;
  float in[COUNT];
  float out[COUNT];
  ncclResult_t res;
  char err[1024];
};

static struct racer g_racers[2];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_returned;
static int g_started;

static void *racer_main(void *arg)
{
  struct racer *r = arg;

  pthread_mutex_lock(&g_lock);
  r->self = this_thread();
  g_started++;
  pthread_cond_broadcast(&g_cond);
  pthread_mutex_unlock(&g_lock);
  fill(r->in, 0);
  r->res = ncclAllReduce(r->in, r->out, COUNT, ncclFloat, ncclSum, g_comms[0], NULL);
  snprintf(r->err, sizeof(r->err), "%s", ncclGetLastError(NULL));
  pthread_mutex_lock(&g_lock);
  g_returned++;
  pthread_cond_broadcast(&g_cond);
  pthread_mutex_unlock(&g_lock);
  return NULL;
}

/* (b): two threads call a collective on rank 0; rank 1 waits for the loser. */
static void racing_calls(void)
{
  static float in1[COUNT];
  static float out1[COUNT];
  int loser;
  int winner;

  for (int i = 0; i < 2; i++)
    pthread_create(&g_racers[i].th, NULL, racer_main, &g_racers[i]);
  pthread_mutex_lock(&g_lock);
  while ((g_returned == 0) || (g_started < 2))
    pthread_cond_wait(&g_cond, &g_lock);
  pthread_mutex_unlock(&g_lock);
  /* The winner cannot return before rank 1 takes part: the loser returned. */
  loser = (g_racers[0].res != ncclSuccess) ? 0 : 1;
  winner = 1 - loser;
  expect("the second caller", g_racers[loser].res, ncclInvalidUsage, NULL);
  busy_text("AllReduce", 0, g_racers[winner].self);
  if (strcmp(g_racers[loser].err, g_text) != 0)
    MC_MP_FAIL("the second caller's error\n  '%s'\nexpected\n  '%s'", g_racers[loser].err, g_text);
  fill(in1, 1);
  MC_MP_CHECK(ncclAllReduce(in1, out1, COUNT, ncclFloat, ncclSum, g_comms[1], NULL));
  for (int i = 0; i < 2; i++)
    pthread_join(g_racers[i].th, NULL);
  if (g_racers[winner].res != ncclSuccess)
    MC_MP_FAIL("the first caller returned %d: %s", (int)g_racers[winner].res, g_racers[winner].err);
  expect_sums("the first caller (rank 0)", g_racers[winner].out);
  expect_sums("rank 1", out1);
  printf("racing calls: thread 0x%lx ran, thread 0x%lx was refused\n", g_racers[winner].self,
         g_racers[loser].self);
}

static int run_threads(void)
{
  MC_MP_CHECK(ncclCommInitAll(g_comms, 2, NULL));
  group_holder();
  racing_calls();
  for (int r = 0; r < 2; r++)
    MC_MP_CHECK(ncclCommDestroy(g_comms[r]));
  printf("threads: ok\n");
  return 0;
}

int main(int argc, char **argv)
{
  mc_mp_set_name("mp_misuse", MC_MP_NO_RANK);
  if ((argc == 2) && (strcmp(argv[1], "destroyed") == 0))
    return run_destroyed();
  if ((argc == 2) && (strcmp(argv[1], "threads") == 0))
    return run_threads();
  fprintf(stderr, "usage: mp_misuse destroyed | threads\n");
  return 2;
}
