/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mp_init: one rank of a job that builds a communicator and checks what init
 * reports through the public API, then destroys it.
 *   mp_init env [--nodes N] [--launcher NAME] [--root-prefix STR]
 *     meshcclCommInitFromEnv; rank, size and local rank are expected from
 *     RANK/WORLD_SIZE/LOCAL_RANK (or OMPI_COMM_WORLD_*). With --nodes N the
 *     job is expected to span N hosts by NCCL_HOSTID = h(rank % N): node
 *     rank % N, local rank rank / N. --launcher checks meshcclGetEnvInfo's
 *     launcher (meshccl-run, torchrun, openmpi, slurm), --root-prefix the
 *     beginning of its root address.
 *   mp_init rootaddr
 *     Prints meshcclGetEnvInfo's root address (host:port) and exits.
 *   mp_init uid DIR
 *     NCCL's classic flow: rank 0 calls ncclGetUniqueId and writes the id to
 *     DIR/id, the others wait for that file; then ncclCommInitRank.
 * Exits 0 when every check passed, 1 with a message on stderr otherwise.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mc_mp.h"
#include "meshccl.h"
#include "nccl.h"

static int g_rank = -1;

#define EXPECT_INT(what, got, want)                                                                \
  do {                                                                                             \
    if ((got) != (want))                                                                           \
      MC_MP_FAIL("%s is %d, expected %d", (what), (int)(got), (int)(want));                        \
  } while (0)

static int env_first(const char *a, const char *b, int def)
{
  int v = mc_mp_env_int(a, -12345);

  return (v != -12345) ? v : mc_mp_env_int(b, def);
}

/* Checks count, rank, device and node layout of a ready communicator. */
static void check_comm(ncclComm_t comm, int rank, int size, int local, int nodes)
{
  meshcclCommInfo_t info;
  int v = -1;

  mc_mp_expect_count_rank(comm, size, rank);
  MC_MP_CHECK(meshcclCommGetInfo(comm, &info));
  EXPECT_INT("info.rank", info.rank, rank);
  EXPECT_INT("info.nranks", info.nranks, size);
  EXPECT_INT("info.nNodes", info.nNodes, nodes);
  if (nodes == 1) {
    MC_MP_CHECK(ncclCommCuDevice(comm, &v));
    EXPECT_INT("ncclCommCuDevice", v, local);
    EXPECT_INT("info.node", info.node, 0);
    EXPECT_INT("info.localRank", info.localRank, local);
    EXPECT_INT("info.localRanks", info.localRanks, size);
  } else {
    int node = rank % nodes;
    MC_MP_CHECK(ncclCommCuDevice(comm, &v));
    EXPECT_INT("ncclCommCuDevice", v, rank / nodes);
    EXPECT_INT("info.node", info.node, node);
    EXPECT_INT("info.localRank", info.localRank, rank / nodes);
    EXPECT_INT("info.localRanks", info.localRanks, (size - node + nodes - 1) / nodes);
  }
  EXPECT_INT("info.device", info.device, (nodes == 1) ? local : rank / nodes);
  EXPECT_INT("info.pid", info.pid, (int)getpid());
}

static int run_env(int argc, char **argv)
{
  int nodes = 1;
  const char *launcher = NULL;
  const char *root_prefix = NULL;
  meshcclEnvInfo_t env;
  ncclComm_t comm = NULL;
  int size = env_first("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", -1);
  int local;

  g_rank = env_first("RANK", "OMPI_COMM_WORLD_RANK", -1);
  mc_mp_set_rank(g_rank);
  local = env_first("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", g_rank);
  for (int i = 0; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--nodes") == 0)
      nodes = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--launcher") == 0)
      launcher = argv[i + 1];
    else if (strcmp(argv[i], "--root-prefix") == 0)
      root_prefix = argv[i + 1];
    else
      MC_MP_FAIL("unknown option %s", argv[i]);
  }
  if ((g_rank < 0) || (size < 1))
    MC_MP_FAIL("no RANK/WORLD_SIZE (or OMPI_COMM_WORLD_*) in the environment");
  MC_MP_CHECK(meshcclGetEnvInfo(&env));
  EXPECT_INT("env.rank", env.rank, g_rank);
  EXPECT_INT("env.nranks", env.nranks, size);
  if ((launcher != NULL) && (strcmp(launcher, meshcclLauncherName(env.launcher)) != 0))
    MC_MP_FAIL("launcher is %s, expected %s", meshcclLauncherName(env.launcher), launcher);
  if ((root_prefix != NULL) && (strncmp(env.rootAddr, root_prefix, strlen(root_prefix)) != 0))
    MC_MP_FAIL("root address is '%s', expected it to start with '%s'", env.rootAddr, root_prefix);
  MC_MP_CHECK(meshcclCommInitFromEnv(&comm, NULL));
  check_comm(comm, g_rank, size, local, nodes);
  MC_MP_CHECK(ncclCommDestroy(comm));
  printf("rank %d of %d: ok (%s)\n", g_rank, size, meshcclLauncherName(env.launcher));
  return 0;
}

/* Waits up to 20 s for path to exist and reads exactly bytes from it. */
static void read_id_file(const char *path, ncclUniqueId *id)
{
  size_t n;

  if (!mc_mp_wait_path(path, 20))
    MC_MP_FAIL("%s did not appear within 20 s", path);
  n = mc_mp_read_id(path, id);
  if (n != sizeof(*id))
    MC_MP_FAIL("%s holds %zu bytes, expected %zu", path, n, sizeof(*id));
}

static int run_uid(const char *dir)
{
  char path[4096];
  ncclUniqueId id;
  ncclComm_t comm = NULL;
  int size = mc_mp_env_int("WORLD_SIZE", -1);

  g_rank = mc_mp_env_int("RANK", -1);
  mc_mp_set_rank(g_rank);
  if ((g_rank < 0) || (size < 1))
    MC_MP_FAIL("no RANK/WORLD_SIZE in the environment");
  if (getenv("NCCL_COMM_ID") != NULL)
    MC_MP_FAIL("NCCL_COMM_ID must be unset for the unique-id flow");
  snprintf(path, sizeof(path), "%s/id", dir);
  if (g_rank == 0) {
    MC_MP_CHECK(ncclGetUniqueId(&id));
    if (mc_mp_write_id(path, &id) != 0)
      MC_MP_FAIL("cannot write %s: %s", path, strerror(errno));
  } else {
    read_id_file(path, &id);
  }
  MC_MP_CHECK(ncclCommInitRank(&comm, size, id, g_rank));
  check_comm(comm, g_rank, size, g_rank, 1);
  MC_MP_CHECK(ncclCommDestroy(comm));
  printf("rank %d of %d: ok (unique id)\n", g_rank, size);
  return 0;
}

static int run_rootaddr(void)
{
  meshcclEnvInfo_t env;

  MC_MP_CHECK(meshcclGetEnvInfo(&env));
  printf("%s\n", env.rootAddr);
  return 0;
}

int main(int argc, char **argv)
{
  mc_mp_set_name("mp_init", g_rank);
  if ((argc == 2) && (strcmp(argv[1], "rootaddr") == 0))
    return run_rootaddr();
  if ((argc >= 2) && (strcmp(argv[1], "env") == 0))
    return run_env(argc - 2, argv + 2);
  if ((argc == 3) && (strcmp(argv[1], "uid") == 0))
    return run_uid(argv[2]);
  fprintf(stderr, "usage: mp_init env [--nodes N] [--launcher NAME] [--root-prefix STR]\n"
                  "       mp_init rootaddr\n"
                  "       mp_init uid DIR\n");
  return 2;
}
