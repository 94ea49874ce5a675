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

/* Rank 0's view of the job: one line per rank, then its own init breakdown. */
static void print_report(ncclComm_t comm, const meshcclEnvInfo_t *env, const meshcclCommInfo_t *me,
                         int version)
{
  const meshcclInitTimings_t *t = &me->timings;

  printf("meshccl %d (NCCL API %d.%d.%d): %d ranks on %d host(s), launched by %s, bootstrap "
         "root %s\n",
         version, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, me->nranks, me->nNodes,
         meshcclLauncherName(env->launcher), env->rootAddr);
  printf("%5s  %-16s %8s %5s %10s %6s  %-24s %10s\n", "rank", "host", "pid", "node", "localRank",
         "device", "bootstrap interface", "bootstrap");
  for (int r = 0; r < me->nranks; r++) {
    meshcclCommInfo_t p;
    char ifc[sizeof(p.bootstrapIf) + sizeof(p.bootstrapAddr) + 2];
    char local[24];
    if (meshcclCommGetPeerInfo(comm, r, &p) != ncclSuccess)
      continue;
    snprintf(ifc, sizeof(ifc), "%s %s", p.bootstrapIf, p.bootstrapAddr);
    snprintf(local, sizeof(local), "%d/%d", p.localRank, p.localRanks);
    printf("%5d  %-16s %8d %5d %10s %6d  %-24s %9.1fms\n", r, p.host, p.pid, p.node, local,
           p.device, ifc, p.timings.bootstrap * 1e3);
  }
  printf("Init timings (rank 0, ms): total %.2f (kernels %.2f, alloc %.2f, bootstrap %.2f, "
         "allgathers %.2f, topo %.2f, graphs %.2f, connections %.2f, rest %.2f)\n",
         t->total * 1e3, t->kernels * 1e3, t->alloc * 1e3, t->bootstrap * 1e3, t->allgathers * 1e3,
         t->topo * 1e3, t->graphs * 1e3, t->connections * 1e3, t->rest * 1e3);
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
      printf("init nranks %d total %.6f alloc %.6f bootstrap %.6f allgathers %.6f topo %.6f "
             "rest %.6f connections %.6f graphs %.6f\n",
             info.nranks, info.timings.total, info.timings.alloc, info.timings.bootstrap,
             info.timings.allgathers, info.timings.topo, info.timings.rest,
             info.timings.connections, info.timings.graphs);
  } else if (info.rank == 0) {
    print_report(comm, &env, &info, version);
  }
  res = ncclCommDestroy(comm);
  if (res != ncclSuccess) {
    fprintf(stderr, "meshccl-hello: destroy failed: %s\n", ncclGetErrorString(res));
    return 1;
  }
  return 0;
}
