/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl extensions (meshccl.h): the device of the calling thread, a
 * communicator built from a launcher's environment, and what init found.
 * The launcher variables read here (RANK, OMPI_COMM_WORLD_*, SLURM_*...) are
 * the launchers' contract, not meshccl parameters, so they are read with
 * getenv rather than declared in params.def.
 */
#include "comm.h"
#include "init_group.h"
#include "init_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "meshccl.h"
#include "params.h"
#include "utils.h"

/* Below Linux's default ephemeral range (32768-60999), so that no client
 * connection of this host holds the port. */
_Static_assert(sizeof(meshcclInitTimings_t) == sizeof(struct mc_comm_timings),
               "public timings mirror the internal ones");

#define DERIVED_PORT_BASE  12000
#define DERIVED_PORT_RANGE 16000

__attribute__((visibility("default"))) ncclResult_t meshcclSetDevice(int dev)
{
  if (dev < -1)
    return MC_FAIL(ncclInvalidArgument, "meshcclSetDevice : invalid device %d", dev);
  mc_thread_set_device(dev);
  return ncclSuccess;
}

/* Integer environment variable; false when unset or not an integer. */
static bool env_int(const char *name, int *out)
{
  const char *v = getenv(name);
  char *end = NULL;
  long x;

  if ((v == NULL) || (v[0] == '\0'))
    return false;
  x = strtol(v, &end, 10);
  if ((end == v) || (*end != '\0') || (x < -1) || (x > 1 << 30))
    return false;
  *out = (int)x;
  return true;
}

__attribute__((visibility("default"))) const char *meshcclLauncherName(meshcclLauncher_t l)
{
  static const char *const names[] = {"none", "meshccl-run", "torchrun", "openmpi", "slurm"};

  if (((int)l < 0) || ((size_t)l >= sizeof(names) / sizeof(names[0])))
    return "none";
  return names[l];
}

static void detect_launcher(meshcclEnvInfo_t *info)
{
  bool by_meshccl_run = mc_param_int(MC_P_RUN) == 1;

  info->localRank = -1;
  info->localSize = -1;
  if (env_int("RANK", &info->rank) && env_int("WORLD_SIZE", &info->nranks)) {
    info->launcher = by_meshccl_run ? meshcclLauncherMeshcclRun : meshcclLauncherTorchrun;
    (void)env_int("LOCAL_RANK", &info->localRank);
    (void)env_int("LOCAL_WORLD_SIZE", &info->localSize);
  } else if (env_int("OMPI_COMM_WORLD_RANK", &info->rank) &&
             env_int("OMPI_COMM_WORLD_SIZE", &info->nranks)) {
    info->launcher = meshcclLauncherOpenMPI;
    (void)env_int("OMPI_COMM_WORLD_LOCAL_RANK", &info->localRank);
    (void)env_int("OMPI_COMM_WORLD_LOCAL_SIZE", &info->localSize);
  } else if (env_int("SLURM_PROCID", &info->rank) && env_int("SLURM_NTASKS", &info->nranks)) {
    int n_nodes = 0;
    info->launcher = meshcclLauncherSlurm;
    (void)env_int("SLURM_LOCALID", &info->localRank);
    if (env_int("SLURM_STEP_NUM_NODES", &n_nodes) || env_int("SLURM_NNODES", &n_nodes))
      info->localSize = (n_nodes == 1) ? info->nranks : -1;
  } else {
    info->launcher = meshcclLauncherNone;
  }
}

/* A port all ranks of one job derive alike from its id. */
static int derived_port(const char *job_key)
{
  return DERIVED_PORT_BASE + (int)(mc_hash64(job_key, strlen(job_key)) % DERIVED_PORT_RANGE);
}

static ncclResult_t root_address(meshcclEnvInfo_t *info)
{
  const char *comm_id = mc_param_str(MC_P_COMM_ID);
  const char *maddr = getenv("MASTER_ADDR");
  const char *mport = getenv("MASTER_PORT");
  char key[256];

  if (comm_id != NULL) {
    snprintf(info->rootAddr, sizeof(info->rootAddr), "%s", comm_id);
    snprintf(info->rootFrom, sizeof(info->rootFrom), "NCCL_COMM_ID");
    return ncclSuccess;
  }
  if ((maddr != NULL) && (mport != NULL)) {
    bool is_v6 = (strchr(maddr, ':') != NULL) && (maddr[0] != '[');
    snprintf(info->rootAddr, sizeof(info->rootAddr), is_v6 ? "[%s]:%s" : "%s:%s", maddr, mport);
    snprintf(info->rootFrom, sizeof(info->rootFrom), "MASTER_ADDR:MASTER_PORT");
    return ncclSuccess;
  }
  if (info->localSize != info->nranks)
    return MC_FAIL(ncclInvalidUsage,
                   "meshcclCommInitFromEnv: ranks launched by %s span several "
                   "hosts (or the launcher does not say): set MASTER_ADDR and MASTER_PORT, or "
                   "NCCL_COMM_ID=<host of rank 0>:<port>",
                   meshcclLauncherName(info->launcher));
  /* Every rank on this host: a loopback root at a port derived from the job id. */
  if (info->launcher == meshcclLauncherOpenMPI) {
    const char *ns = getenv("PMIX_NAMESPACE");
    const char *jobid = getenv("OMPI_MCA_ess_base_jobid");
    snprintf(key, sizeof(key), "ompi:%s:%s", (ns != NULL) ? ns : "", (jobid != NULL) ? jobid : "");
  } else {
    const char *job = getenv("SLURM_JOB_ID");
    const char *step = getenv("SLURM_STEP_ID");
    snprintf(key, sizeof(key), "slurm:%s:%s", (job != NULL) ? job : "", (step != NULL) ? step : "");
  }
  snprintf(info->rootAddr, sizeof(info->rootAddr), "127.0.0.1:%d", derived_port(key));
  snprintf(info->rootFrom, sizeof(info->rootFrom), "derived from the job id (%s)", key);
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t meshcclGetEnvInfo(meshcclEnvInfo_t *info)
{
  meshcclEnvInfo_t out;

  if (info == NULL)
    return MC_FAIL(ncclInvalidArgument, "meshcclGetEnvInfo : info argument is NULL");
  memset(&out, 0, sizeof(out));
  detect_launcher(&out);
  if (out.launcher == meshcclLauncherNone)
    return MC_FAIL(ncclInvalidUsage,
                   "meshcclCommInitFromEnv: no launcher environment found: "
                   "expected RANK and WORLD_SIZE (meshccl-run, torchrun), OMPI_COMM_WORLD_RANK "
                   "and OMPI_COMM_WORLD_SIZE (mpirun), or SLURM_PROCID and SLURM_NTASKS (srun)");
  if ((out.nranks < 1) || (out.rank < 0) || (out.rank >= out.nranks))
    return MC_FAIL(ncclInvalidUsage, "meshcclCommInitFromEnv: %s says rank %d of %d ranks",
                   meshcclLauncherName(out.launcher), out.rank, out.nranks);
  MC_CHECK(root_address(&out));
  *info = out;
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t meshcclCommInitFromEnv(ncclComm_t *comm,
                                                                           ncclConfig_t *config)
{
  meshcclEnvInfo_t info;
  union mc_sockaddr root;
  ncclUniqueId id;

  mc_error_clear_thread();
  mc_param_report_once();
  if (comm == NULL)
    return MC_FAIL(ncclInvalidArgument, "meshcclCommInitFromEnv : comm argument is NULL");
  MC_CHECK(meshcclGetEnvInfo(&info));
  MC_CHECK(mc_sockaddr_parse(info.rootAddr, info.rootFrom, &root));
  MC_CHECK(mc_boot_unique_id_at(&root, &id));
  MC_INFO(MC_SUB_INIT | MC_SUB_BOOTSTRAP,
          "meshcclCommInitFromEnv: %s rank %d of %d (local %d of "
          "%d), root %s",
          meshcclLauncherName(info.launcher), info.rank, info.nranks, info.localRank,
          info.localSize, info.rootAddr);
  return ncclCommInitRankConfig(comm, info.nranks, id, info.rank, config);
}

__attribute__((visibility("default"))) ncclResult_t
meshcclCommGetPeerInfo(const ncclComm_t comm, int peer, meshcclCommInfo_t *info)
{
  meshcclCommInfo_t out;
  const struct mc_peer_info *p;
  int state;

  MC_CHECK(mc_comm_check(comm, "meshcclCommGetPeerInfo"));
  if (info == NULL)
    return MC_FAIL(ncclInvalidArgument, "meshcclCommGetPeerInfo : info argument is NULL");
  state = __atomic_load_n(&comm->life.async_result, __ATOMIC_ACQUIRE);
  if (state != ncclSuccess)
    return MC_FAIL(ncclInvalidUsage, "meshcclCommGetPeerInfo : communicator %p is not ready (%d)",
                   (void *)comm, state);
  if ((peer < 0) || (peer >= comm->n_ranks))
    return MC_FAIL(ncclInvalidArgument, "meshcclCommGetPeerInfo : rank %d of %d", peer,
                   comm->n_ranks);
  p = &comm->peers[peer];
  memset(&out, 0, sizeof(out));
  out.rank = peer;
  out.nranks = comm->n_ranks;
  out.nNodes = comm->nodes.n_nodes;
  out.node = comm->nodes.rank_to_node[peer];
  out.localRank = comm->nodes.rank_to_local_rank[peer];
  out.localRanks = comm->nodes.node_n_ranks[out.node];
  out.device = comm->nodes.dev[peer];
  out.pid = p->pid;
  snprintf(out.host, sizeof(out.host), "%s", p->host);
  snprintf(out.bootstrapIf, sizeof(out.bootstrapIf), "%s", p->if_name);
  snprintf(out.bootstrapAddr, sizeof(out.bootstrapAddr), "%s", p->if_addr);
  if (peer == comm->rank)
    memcpy(&out.timings, &comm->t, sizeof(out.timings));
  else
    out.timings.bootstrap = p->t_bootstrap;
  *info = out;
  return ncclSuccess;
}

__attribute__((visibility("default"))) ncclResult_t meshcclCommGetInfo(const ncclComm_t comm,
                                                                       meshcclCommInfo_t *info)
{
  MC_CHECK(mc_comm_check(comm, "meshcclCommGetInfo"));
  return meshcclCommGetPeerInfo(comm, comm->rank, info);
}
