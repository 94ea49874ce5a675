/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mp_leaks: repeated communicator lifecycles in one process must not leak.
 * Every cycle runs collectives (a ring all-reduce, a one-shot all-reduce and
 * a grouped ring exchange) before the teardown.
 *   mp_leaks env N     (meshccl-run job) N x meshcclCommInitFromEnv + ncclCommDestroy;
 *                      NCCL_COMM_ID is reused by every communicator
 *   mp_leaks abort N   (meshccl-run job) N x meshcclCommInitFromEnv + ncclCommAbort
 *   mp_leaks all N     (alone) N x ncclCommInitAll(4) + ncclCommDestroy of each
 *   mp_leaks scalable N (meshccl-run job) N x ncclCommInitRankScalable over 2
 *                      roots (ids of ranks 0 and 1, exchanged over a
 *                      communicator made once before the count) + destroy
 *   mp_leaks grow N    (meshccl-run job) N x a parent of ranks 0..1 split off,
 *                      ncclCommGetUniqueId, ncclCommGrow to every rank,
 *                      destroy of both
 * After every cycle the process has exactly the fds and threads it had
 * before the first init; in mode all (a single process, so no other rank
 * races with it) /dev/shm also holds exactly the meshccl segments of this
 * process it held before (none: they are unlinked as soon as mapped).
 * Exits 0 when every check passed, 1 with a message on stderr otherwise.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_mp.h"
#include "meshccl.h"
#include "nccl.h"

#define ALL_NDEV 4

static int g_rank = -1;
static ncclComm_t g_world; /* scalable, grow: carries the ids, lives across cycles */

/* This process's meshccl segments (named "meshccl-...-<pid of the creator>"):
 * other jobs running at the same time may have their own. */
static int count_shm(void)
{
  char suffix[32];
  DIR *d = opendir("/dev/shm");
  struct dirent *e;
  int n = 0;

  if (d == NULL)
    return 0;
  snprintf(suffix, sizeof(suffix), "-%d", (int)getpid());
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    size_t sl = strlen(suffix);
    if ((strncmp(e->d_name, "meshccl-", 8) == 0) && (len > sl) &&
        (strcmp(e->d_name + len - sl, suffix) == 0))
      n++;
  }
  closedir(d);
  return n;
}

/* Waits (up to 2 s) until the fd count holds still for 200 ms. */
static void fds_settle(void)
{
  double t_end = mc_mp_now_sec() + 2.0;
  double t_same = mc_mp_now_sec();
  int last = mc_count_fds();

  while (mc_mp_now_sec() < t_end) {
    int now;
    usleep(10000);
    now = mc_count_fds();
    if (now != last) {
      last = now;
      t_same = mc_mp_now_sec();
    } else if (mc_mp_now_sec() - t_same >= 0.2) {
      return;
    }
  }
}

#define COLL_COUNT (256 * 1024)

/* An all-reduce and a ring exchange, so that connections (and with NET the
 * proxy thread and sockets) exist before the teardown. */
static void collectives(ncclComm_t comm, float *buf, float *out)
{
  int n = 0;
  int r = 0;

  MC_MP_CHECK(ncclCommCount(comm, &n));
  MC_MP_CHECK(ncclCommUserRank(comm, &r));
  MC_MP_CHECK(ncclAllReduce(buf, buf, COLL_COUNT, ncclFloat, ncclSum, comm, NULL));
  MC_MP_CHECK(ncclAllReduce(buf, out, 8, ncclFloat, ncclSum, comm, NULL)); /* one-shot */
  MC_MP_CHECK(ncclGroupStart());
  MC_MP_CHECK(ncclSend(buf, COLL_COUNT, ncclFloat, (r + 1) % n, comm, NULL));
  MC_MP_CHECK(ncclRecv(out, COLL_COUNT, ncclFloat, (r + n - 1) % n, comm, NULL));
  MC_MP_CHECK(ncclGroupEnd());
}

static float *buffers(int n)
{
  float *b = calloc((size_t)n * COLL_COUNT, sizeof(float));
  if (b == NULL)
    MC_MP_FAIL("out of memory");
  return b;
}

static void one_cycle(const char *mode)
{
  if (strcmp(mode, "all") == 0) {
    ncclComm_t comms[ALL_NDEV];
    float *buf = buffers(2 * ALL_NDEV);
    MC_MP_CHECK(ncclCommInitAll(comms, ALL_NDEV, NULL));
    /* One thread drives the 4 ranks: the operations run at ncclGroupEnd. */
    MC_MP_CHECK(ncclGroupStart());
    for (int i = 0; i < ALL_NDEV; i++)
      collectives(comms[i], buf + (size_t)(2 * i) * COLL_COUNT,
                  buf + (size_t)(2 * i + 1) * COLL_COUNT);
    MC_MP_CHECK(ncclGroupEnd());
    free(buf);
    for (int i = 0; i < ALL_NDEV; i++)
      MC_MP_CHECK(ncclCommDestroy(comms[i]));
  } else if (strcmp(mode, "scalable") == 0) {
    ncclUniqueId all[64];
    ncclUniqueId mine;
    ncclComm_t comm = NULL;
    float *buf = buffers(2);
    int n = 0;
    int r = 0;
    MC_MP_CHECK(ncclCommCount(g_world, &n));
    MC_MP_CHECK(ncclCommUserRank(g_world, &r));
    if (n > 64)
      MC_MP_FAIL("scalable: at most 64 ranks");
    memset(&mine, 0, sizeof(mine));
    if (r < 2)
      MC_MP_CHECK(ncclGetUniqueId(&mine));
    MC_MP_CHECK(ncclAllGather(&mine, all, sizeof(mine), ncclUint8, g_world, NULL));
    MC_MP_CHECK(ncclCommInitRankScalable(&comm, n, r, 2, all, NULL));
    collectives(comm, buf, buf + COLL_COUNT);
    free(buf);
    MC_MP_CHECK(ncclCommDestroy(comm));
  } else if (strcmp(mode, "grow") == 0) {
    ncclComm_t parent = NULL;
    ncclComm_t grown = NULL;
    ncclUniqueId id;
    float *buf = buffers(2);
    int n = 0;
    int r = 0;
    MC_MP_CHECK(ncclCommCount(g_world, &n));
    MC_MP_CHECK(ncclCommUserRank(g_world, &r));
    memset(&id, 0, sizeof(id));
    MC_MP_CHECK(ncclCommSplit(g_world, (r < 2) ? 0 : NCCL_SPLIT_NOCOLOR, r, &parent, NULL));
    if (r == 0)
      MC_MP_CHECK(ncclCommGetUniqueId(parent, &id));
    MC_MP_CHECK(ncclBroadcast(&id, &id, sizeof(id), ncclUint8, 0, g_world, NULL));
    if (parent != NULL)
      MC_MP_CHECK(ncclCommGrow(parent, n, (r == 0) ? &id : NULL, -1, &grown, NULL));
    else
      MC_MP_CHECK(ncclCommGrow(NULL, n, &id, r, &grown, NULL));
    collectives(grown, buf, buf + COLL_COUNT);
    free(buf);
    MC_MP_CHECK(ncclCommDestroy(grown));
    if (parent != NULL)
      MC_MP_CHECK(ncclCommDestroy(parent));
  } else {
    ncclComm_t comm = NULL;
    int n = -1;
    MC_MP_CHECK(meshcclCommInitFromEnv(&comm, NULL));
    float *buf = buffers(2);
    MC_MP_CHECK(ncclCommCount(comm, &n));
    collectives(comm, buf, buf + COLL_COUNT);
    free(buf);
    if (strcmp(mode, "abort") == 0)
      MC_MP_CHECK(ncclCommAbort(comm));
    else
      MC_MP_CHECK(ncclCommDestroy(comm));
  }
}

int main(int argc, char **argv)
{
  const char *mode = (argc == 3) ? argv[1] : "";
  int cycles = (argc == 3) ? atoi(argv[2]) : 0;
  bool single = strcmp(mode, "all") == 0;
  bool has_world = (strcmp(mode, "scalable") == 0) || (strcmp(mode, "grow") == 0);
  int fds0;
  int threads0;
  int shm0;

  if ((cycles < 1) ||
      (!single && !has_world && (strcmp(mode, "env") != 0) && (strcmp(mode, "abort") != 0))) {
    fprintf(stderr, "usage: mp_leaks env|abort|all|scalable|grow CYCLES\n");
    return 2;
  }
  g_rank = single ? 0 : mc_mp_env_int("RANK", -1);
  mc_mp_set_name("mp_leaks", g_rank);
  if (has_world) {
    /* With NCCL_COMM_ID set, ncclGetUniqueId returns that one id (as in NCCL). */
    if (strcmp(mode, "scalable") == 0)
      unsetenv("NCCL_COMM_ID");
    MC_MP_CHECK(meshcclCommInitFromEnv(&g_world, NULL));
    /* The world's root (rank 0's process) closes each rank's connection when
     * that rank's init is done: after a barrier, wait for its count to settle. */
    MC_MP_CHECK(ncclAllReduce(&cycles, &cycles, 1, ncclInt32, ncclMax, g_world, NULL));
    fds_settle();
  }
  fds0 = mc_count_fds();
  threads0 = mc_count_threads_stable();
  shm0 = count_shm();
  for (int c = 1; c <= cycles; c++) {
    int fds;
    int threads;
    one_cycle(mode);
    fds = mc_count_fds();
    threads = mc_count_threads_settled(threads0, 2000);
    if (fds != fds0)
      MC_MP_FAIL("%s cycle %d: %d fds open, %d before the first init", mode, c, fds, fds0);
    if (threads != threads0)
      MC_MP_FAIL("%s cycle %d: %d threads, %d before the first init", mode, c, threads, threads0);
    if (single && (count_shm() != shm0))
      MC_MP_FAIL("%s cycle %d: %d entries in /dev/shm, %d before the first init", mode, c,
                 count_shm(), shm0);
  }
  if (g_world != NULL)
    MC_MP_CHECK(ncclCommDestroy(g_world));
  printf("rank %d: %s x %d: ok (fds %d, threads %d)\n", g_rank, mode, cycles, fds0, threads0);
  return 0;
}
