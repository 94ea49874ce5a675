/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-hello: builds a communicator from the launcher's environment
 * (meshccl-run, torchrun, mpirun, srun) and prints what init found: rank,
 * host, node, local rank, device, bootstrap interface, and the init timing
 * breakdown. The main job of `make run`.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "meshccl.h"
#include "nccl.h"

static const char *launcher_str(meshcclLauncher_t l)
{
  switch (l) {
  case meshcclLauncherMeshcclRun:
    return "meshccl-run";
  case meshcclLauncherTorchrun:
    return "torchrun";
  case meshcclLauncherOpenMPI:
    return "mpirun (Open MPI)";
  case meshcclLauncherSlurm:
    return "srun (Slurm)";
  default:
    return "none";
  }
}

int main(int argc, char **argv)
{
  meshcclEnvInfo_t env;
  meshcclCommInfo_t info;
  ncclComm_t comm = NULL;
  ncclResult_t res;
  int version = 0;
  bool quiet = false;

  if ((argc == 2) && (strcmp(argv[1], "-q") == 0)) {
    quiet = true;
  } else if (argc > 1) {
    fprintf(stderr, "usage: meshccl-run -n N meshccl-hello [-q]   (or mpirun/srun/torchrun)\n"
                    "  -q: only rank 0 prints, one line of init timings\n");
    return 2;
  }
  res = meshcclGetEnvInfo(&env);
  if (res == ncclSuccess)
    res = meshcclCommInitFromEnv(&comm, NULL);
  if (res == ncclSuccess)
    res = meshcclCommGetInfo(comm, &info);
  if (res != ncclSuccess) {
    fprintf(stderr, "meshccl-hello: init failed: %s: %s\n", ncclGetErrorString(res),
            ncclGetLastError(comm));
    ncclCommAbort(comm);
    return 1;
  }
  ncclGetVersion(&version);
  if (quiet) {
    if (info.rank == 0)
      printf("init nranks %d total %.6f alloc %.6f bootstrap %.6f allgathers %.6f rest %.6f\n",
             info.nranks, info.timings.total, info.timings.alloc, info.timings.bootstrap,
             info.timings.allgathers, info.timings.rest);
  } else if (info.rank == 0)
    printf("meshccl %d (NCCL API %d.%d.%d): %d ranks on %d host(s), launched by %s, root %s\n",
           version, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, info.nranks, info.nNodes,
           launcher_str(env.launcher), env.rootAddr);
  if (!quiet)
    printf("rank %d/%d host %s pid %d node %d/%d localRank %d/%d device %d bootstrap %s %s\n",
           info.rank, info.nranks, info.host, info.pid, info.node, info.nNodes, info.localRank,
           info.localRanks, info.device, info.bootstrapIf, info.bootstrapAddr);
  if (!quiet)
    printf("rank %d init timings (s): total %.4f (kernels %.4f, alloc %.4f, bootstrap %.4f, "
           "allgathers %.4f, topo %.4f, graphs %.4f, connections %.4f, rest %.4f)\n",
           info.rank, info.timings.total, info.timings.kernels, info.timings.alloc,
           info.timings.bootstrap, info.timings.allgathers, info.timings.topo, info.timings.graphs,
           info.timings.connections, info.timings.rest);
  res = ncclCommDestroy(comm);
  if (res != ncclSuccess) {
    fprintf(stderr, "meshccl-hello: destroy failed: %s\n", ncclGetErrorString(res));
    return 1;
  }
  return 0;
}
