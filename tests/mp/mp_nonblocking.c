/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mp_nonblocking: non-blocking communicator init through the public API.
 *   mp_nonblocking config DIR   (meshccl-run job) ncclCommInitRankConfig with
 *       config.blocking = 0; rank 0 starts first and must see ncclInProgress
 *       and ncclCommCount -> ncclInvalidArgument while the others wait for
 *       DIR/go, which rank 0 creates after these checks. Then every rank polls
 *       ncclCommGetAsyncError until it leaves ncclInProgress: ncclSuccess.
 *   mp_nonblocking env DIR      the same with ncclCommInitRank and
 *       NCCL_COMM_BLOCKING=0 in the environment.
 *   mp_nonblocking abort        RANK=0 of WORLD_SIZE=2 whose rank 1 never
 *       starts: a second thread calls ncclCommAbort 300 ms into the init; it
 *       must return within 1 s, and no thread or fd of the library is left
 *       (also without NCCL_COMM_ID: the root ncclGetUniqueId started ends).
 * The unique id comes from ncclGetUniqueId with NCCL_COMM_ID set (every rank
 * computes the same id). Exits 0 when every check passed, 1 otherwise.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_mp.h"
#include "meshccl.h"
#include "nccl.h"

static int g_rank = -1;

/* Polls ncclCommGetAsyncError until it leaves ncclInProgress (30 s at most). */
static ncclResult_t wait_async(ncclComm_t comm)
{
  ncclResult_t state = ncclInProgress;
  double end = mc_mp_now_sec() + 30.0;

  while (mc_mp_now_sec() < end) {
    MC_MP_CHECK(ncclCommGetAsyncError(comm, &state));
    if (state != ncclInProgress)
      return state;
    usleep(1000);
  }
  MC_MP_FAIL("ncclCommGetAsyncError still ncclInProgress after 30 s");
}

static int run_init(const char *dir, bool use_config)
{
  char go[4096];
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  ncclResult_t res;
  int n = mc_mp_env_int("WORLD_SIZE", -1);
  int v = -1;

  g_rank = mc_mp_env_int("RANK", -1);
  mc_mp_set_rank(g_rank);
  snprintf(go, sizeof(go), "%s/go", dir);
  if ((g_rank != 0) && !mc_mp_wait_path(go, 30))
    MC_MP_FAIL("%s did not appear within 30 s", go);
  MC_MP_CHECK(ncclGetUniqueId(&id));
  config.blocking = 0;
  res = use_config ? ncclCommInitRankConfig(&comm, n, id, g_rank, &config)
                   : ncclCommInitRank(&comm, n, id, g_rank);
  if ((res != ncclInProgress) && (res != ncclSuccess))
    MC_MP_FAIL("non-blocking init returned %d (%s): %s", (int)res, ncclGetErrorString(res),
               ncclGetLastError(NULL));
  if (comm == NULL)
    MC_MP_FAIL("non-blocking init returned %d but no communicator", (int)res);
  if (g_rank == 0) {
    /* The other ranks have not started: the init cannot be complete. */
    if ((n > 1) && (res != ncclInProgress))
      MC_MP_FAIL("init returned %d while rank 1 cannot have joined, expected ncclInProgress",
                 (int)res);
    if (n > 1) {
      res = ncclCommCount(comm, &v);
      if (res != ncclInvalidArgument)
        MC_MP_FAIL("ncclCommCount during init returned %d, expected ncclInvalidArgument", (int)res);
      if (strstr(ncclGetLastError(NULL), "in progress") == NULL)
        MC_MP_FAIL("ncclCommCount during init: last error '%s' lacks 'in progress'",
                   ncclGetLastError(NULL));
    }
    mc_mp_touch(go);
  }
  res = wait_async(comm);
  if (res != ncclSuccess)
    MC_MP_FAIL("ncclCommGetAsyncError ended with %d (%s): %s", (int)res, ncclGetErrorString(res),
               ncclGetLastError(comm));
  mc_mp_expect_count_rank(comm, n, g_rank);
  MC_MP_CHECK(ncclCommDestroy(comm));
  printf("rank %d: ok\n", g_rank);
  return 0;
}

struct aborter {
  ncclComm_t comm;
  double took;
  ncclResult_t res;
};

static void *abort_main(void *arg)
{
  struct aborter *a = arg;
  double t0;

  usleep(300 * 1000);
  t0 = mc_mp_now_sec();
  a->res = ncclCommAbort(a->comm);
  a->took = mc_mp_now_sec() - t0;
  return NULL;
}

static int run_abort(void)
{
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  struct aborter a = {.comm = NULL, .took = -1.0, .res = ncclInternalError};
  ncclUniqueId id;
  ncclResult_t res;
  pthread_t t;
  int fds0;
  int threads0;

  g_rank = mc_mp_env_int("RANK", -1);
  mc_mp_set_rank(g_rank);
  if ((g_rank != 0) || (mc_mp_env_int("WORLD_SIZE", -1) != 2))
    MC_MP_FAIL("run with RANK=0 WORLD_SIZE=2 and no rank 1");
  /* Before the id: without NCCL_COMM_ID, ncclGetUniqueId starts the root
   * here, and the aborted communicator must stop it too. */
  fds0 = mc_count_fds();
  threads0 = mc_count_threads_stable();
  MC_MP_CHECK(ncclGetUniqueId(&id));
  config.blocking = 0;
  res = ncclCommInitRankConfig(&a.comm, 2, id, 0, &config);
  if (res != ncclInProgress)
    MC_MP_FAIL("non-blocking init of a 2-rank job without rank 1 returned %d, expected "
               "ncclInProgress",
               (int)res);
  if (pthread_create(&t, NULL, abort_main, &a) != 0)
    MC_MP_FAIL("pthread_create failed");
  pthread_join(t, NULL);
  if (a.res != ncclSuccess)
    MC_MP_FAIL("ncclCommAbort returned %d (%s)", (int)a.res, ncclGetErrorString(a.res));
  printf("ncclCommAbort took %.3f s\n", a.took);
  if (a.took > 1.0)
    MC_MP_FAIL("ncclCommAbort took %.3f s (more than 1 s)", a.took);
  if (mc_count_threads_settled(threads0, 2000) != threads0)
    MC_MP_FAIL("%d threads after abort, %d before init", mc_count_threads(), threads0);
  if (mc_count_fds() != fds0)
    MC_MP_FAIL("%d fds after abort, %d before init", mc_count_fds(), fds0);
  printf("rank 0: abort ok\n");
  return 0;
}

int main(int argc, char **argv)
{
  mc_mp_set_name("mp_nonblocking", g_rank);
  if ((argc == 3) && (strcmp(argv[1], "config") == 0))
    return run_init(argv[2], true);
  if ((argc == 3) && (strcmp(argv[1], "env") == 0))
    return run_init(argv[2], false);
  if ((argc == 2) && (strcmp(argv[1], "abort") == 0))
    return run_abort();
  fprintf(stderr, "usage: mp_nonblocking config DIR | env DIR | abort\n");
  return 2;
}
