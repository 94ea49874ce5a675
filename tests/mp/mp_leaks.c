/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mp_leaks: repeated communicator lifecycles in one process must not leak.
 * Every cycle runs collectives (a ring all-reduce, a one-shot all-reduce and
 * a grouped ring exchange) before the teardown.
 *   mp_leaks env N     (meshccl-run job) N x meshcclCommInitFromEnv + ncclCommDestroy;
 *                      NCCL_COMM_ID is reused by every communicator
 *   mp_leaks abort N   (meshccl-run job) N x meshcclCommInitFromEnv + ncclCommAbort
 *   mp_leaks all N     (alone) N x ncclCommInitAll(4) + ncclCommDestroy of each
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
  int fds0;
  int threads0;
  int shm0;

  if ((cycles < 1) || (!single && (strcmp(mode, "env") != 0) && (strcmp(mode, "abort") != 0))) {
    fprintf(stderr, "usage: mp_leaks env|abort|all CYCLES\n");
    return 2;
  }
  g_rank = single ? 0 : mc_mp_env_int("RANK", -1);
  mc_mp_set_name("mp_leaks", g_rank);
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
  printf("rank %d: %s x %d: ok (fds %d, threads %d)\n", g_rank, mode, cycles, fds0, threads0);
  return 0;
}
