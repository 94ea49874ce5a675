/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mp_errors: error paths of the public API.
 *   mp_errors args
 *       Invalid arguments return ncclInvalidArgument at once (under 100 ms)
 *       with a message: rank -1, rank == nranks, nranks 0, NULL comm
 *       pointer, a config without NCCL_CONFIG_INITIALIZER (magic 0), NULL
 *       comm to the query calls. ncclGroupEnd without ncclGroupStart is
 *       ncclInvalidUsage; nested groups are fine and only the outermost
 *       ncclGroupEnd runs an init queued inside them.
 *   mp_errors init [--id-file PATH [--create]]
 *       One rank: meshcclCommInitFromEnv (RANK, WORLD_SIZE, NCCL_COMM_ID),
 *       or with --id-file NCCL's flow: --create calls ncclGetUniqueId and
 *       writes the id to PATH, otherwise the id is read from PATH (waiting
 *       for it up to 20 s); then ncclCommInitRank(RANK of WORLD_SIZE).
 *       On failure prints "rank R: init failed: <code> <name>: <last error>"
 *       on stderr and exits with the result code; on success destroys the
 *       communicator and exits 0.
 *   mp_errors suicide MAX_MS
 *       As init, but non-blocking, and the process SIGKILLs itself after a
 *       random 0..MAX_MS ms (wherever the init is at that point).
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mc_mp.h"
#include "meshccl.h"
#include "nccl.h"

static int g_rank = -1;

/* Checks a call's result, its speed and the text ncclGetLastError(NULL) gives. */
static void expect(const char *what, ncclResult_t got, double took, ncclResult_t want,
                   const char *text)
{
  const char *err = ncclGetLastError(NULL);

  if (got != want)
    MC_MP_FAIL("%s returned %d (%s), expected %d (%s)", what, (int)got, ncclGetErrorString(got),
               (int)want, ncclGetErrorString(want));
  if (took > 0.1)
    MC_MP_FAIL("%s took %.3f s: argument errors must be immediate", what, took);
  if ((text != NULL) && ((err == NULL) || (strstr(err, text) == NULL)))
    MC_MP_FAIL("%s: last error '%s' does not contain '%s'", what, err ? err : "(null)", text);
  printf("%s -> %s: %s\n", what, ncclGetErrorString(got), (text != NULL) ? err : "");
}

#define EXPECT(call, want, text)                                                                   \
  do {                                                                                             \
    double t0_ = mc_mp_now_sec();                                                                  \
    ncclResult_t r_ = (call);                                                                      \
    expect(#call, r_, mc_mp_now_sec() - t0_, (want), (text));                                      \
  } while (0)

static int run_args(void)
{
  ncclComm_t comm = (ncclComm_t)&comm; /* must be reset to NULL by a failed init */
  ncclConfig_t good = NCCL_CONFIG_INITIALIZER;
  ncclConfig_t nomagic;
  ncclUniqueId id;
  int v = 0;

  memset(&id, 0, sizeof(id)); /* never used: the arguments are checked first */
  memset(&nomagic, 0, sizeof(nomagic));
  nomagic.size = sizeof(nomagic);
  nomagic.blocking = 1;
  EXPECT(ncclCommInitRank(&comm, 4, id, -1), ncclInvalidArgument, "invalid rank");
  if (comm != NULL)
    MC_MP_FAIL("*comm is %p after a failed ncclCommInitRank, expected NULL", (void *)comm);
  EXPECT(ncclCommInitRank(&comm, 4, id, 4), ncclInvalidArgument, "invalid rank");
  EXPECT(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument, "number of ranks");
  EXPECT(ncclCommInitRank(&comm, -3, id, 0), ncclInvalidArgument, "number of ranks");
  EXPECT(ncclCommInitRank(NULL, 4, id, 0), ncclInvalidArgument, "NULL");
  EXPECT(ncclCommInitRankConfig(NULL, 4, id, 0, &good), ncclInvalidArgument, "NULL");
  EXPECT(ncclCommInitRankConfig(&comm, 1, id, 0, &nomagic), ncclInvalidArgument,
         "NCCL_CONFIG_INITIALIZER");
  good.blocking = 7;
  EXPECT(ncclCommInitRankConfig(&comm, 1, id, 0, &good), ncclInvalidArgument, "blocking");
  EXPECT(ncclCommCount(NULL, &v), ncclInvalidArgument, "comm");
  EXPECT(ncclCommUserRank(NULL, &v), ncclInvalidArgument, "comm");
  EXPECT(ncclCommCuDevice(NULL, &v), ncclInvalidArgument, "comm");
  EXPECT(ncclCommGetAsyncError(NULL, NULL), ncclInvalidArgument, NULL);
  EXPECT(ncclGetUniqueId(NULL), ncclInvalidArgument, "NULL");
  EXPECT(meshcclSetDevice(-2), ncclInvalidArgument, "device");
  EXPECT(ncclCommDestroy(NULL), ncclSuccess, NULL);
  EXPECT(ncclCommAbort(NULL), ncclSuccess, NULL);

  /* Groups. */
  EXPECT(ncclGroupEnd(), ncclInvalidUsage, "not in a group");
  EXPECT(ncclGroupStart(), ncclSuccess, NULL);
  EXPECT(ncclGroupStart(), ncclSuccess, NULL);
  EXPECT(ncclGroupEnd(), ncclSuccess, NULL);
  EXPECT(ncclGroupEnd(), ncclSuccess, NULL);
  EXPECT(ncclGroupEnd(), ncclInvalidUsage, "not in a group");

  /* An init queued in nested groups runs at the outermost ncclGroupEnd. */
  MC_MP_CHECK(ncclGetUniqueId(&id));
  MC_MP_CHECK(ncclGroupStart());
  MC_MP_CHECK(ncclGroupStart());
  MC_MP_CHECK(ncclCommInitRank(&comm, 1, id, 0));
  MC_MP_CHECK(ncclGroupEnd());
  if (ncclCommCount(comm, &v) != ncclInvalidArgument)
    MC_MP_FAIL("ncclCommCount after the inner ncclGroupEnd: expected ncclInvalidArgument (init not "
               "run yet)");
  MC_MP_CHECK(ncclGroupEnd());
  MC_MP_CHECK(ncclCommCount(comm, &v));
  if (v != 1)
    MC_MP_FAIL("ncclCommCount of the grouped 1-rank comm is %d", v);
  MC_MP_CHECK(ncclCommDestroy(comm));
  printf("args: ok\n");
  return 0;
}

/* NCCL's flow: the id through a file (written whole by a rename). */
static ncclResult_t init_with_id_file(ncclComm_t *comm, const char *path, bool create)
{
  ncclUniqueId id;

  if (create) {
    MC_MP_CHECK(ncclGetUniqueId(&id));
    if (mc_mp_write_id(path, &id) != 0)
      MC_MP_FAIL("cannot write %s", path);
  } else if (!mc_mp_wait_path(path, 20) || (mc_mp_read_id(path, &id) != sizeof(id))) {
    MC_MP_FAIL("cannot read the unique id from %s", path);
  }
  return ncclCommInitRank(comm, mc_mp_env_int("WORLD_SIZE", -1), id, g_rank);
}

static int run_init(int suicide_max_ms, const char *id_file, bool create)
{
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclComm_t comm = NULL;
  ncclResult_t res;

  g_rank = mc_mp_env_int("RANK", -1);
  mc_mp_set_rank(g_rank);
  if (suicide_max_ms >= 0) {
    unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL);
    int ms = (int)(rand_r(&seed) % (unsigned)(suicide_max_ms + 1));
    config.blocking = 0;
    res = meshcclCommInitFromEnv(&comm, &config);
    fprintf(stderr, "rank %d: init returned %d, SIGKILL in %d ms\n", g_rank, (int)res, ms);
    usleep((useconds_t)ms * 1000);
    raise(SIGKILL);
  }
  if (id_file != NULL)
    res = init_with_id_file(&comm, id_file, create);
  else
    res = meshcclCommInitFromEnv(&comm, NULL);
  if (res != ncclSuccess) {
    fprintf(stderr, "rank %d: init failed: %d %s: %s\n", g_rank, (int)res, ncclGetErrorString(res),
            ncclGetLastError(comm));
    (void)ncclCommDestroy(comm);
    return (int)res;
  }
  MC_MP_CHECK(ncclCommDestroy(comm));
  fprintf(stderr, "rank %d: init ok\n", g_rank);
  return 0;
}

int main(int argc, char **argv)
{
  mc_mp_set_name("mp_errors", g_rank);
  if ((argc == 2) && (strcmp(argv[1], "args") == 0))
    return run_args();
  if ((argc == 2) && (strcmp(argv[1], "init") == 0))
    return run_init(-1, NULL, false);
  if ((argc >= 4) && (argc <= 5) && (strcmp(argv[1], "init") == 0) &&
      (strcmp(argv[2], "--id-file") == 0))
    return run_init(-1, argv[3], (argc == 5) && (strcmp(argv[4], "--create") == 0));
  if ((argc == 3) && (strcmp(argv[1], "suicide") == 0))
    return run_init(atoi(argv[2]), NULL, false);
  fprintf(stderr, "usage: mp_errors args | init [--id-file PATH [--create]] | suicide MAX_MS\n");
  return 2;
}
