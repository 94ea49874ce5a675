/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file meshccl.h
 * meshccl EXTENSIONS to NCCL's API. Nothing here exists in NCCL: code that
 * must also build against NCCL should guard its use with
 * `#ifdef MESHCCL_EXTENSIONS`.
 */
#ifndef MESHCCL_H_
#define MESHCCL_H_

#include "nccl.h"

#define MESHCCL_EXTENSIONS 1

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Sets the device index the calling thread's next communicator inits use
 * (meshccl's analogue of cudaSetDevice; -1 = automatic: the rank's local
 * rank on its host). Returns ncclInvalidArgument for dev < -1.
 */
ncclResult_t meshcclSetDevice(int dev);

/** The launcher meshcclCommInitFromEnv recognised. */
typedef enum {
  meshcclLauncherNone = 0,
  meshcclLauncherMeshcclRun = 1, /**< meshccl-run: RANK, WORLD_SIZE, NCCL_COMM_ID */
  meshcclLauncherTorchrun = 2,   /**< RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT */
  meshcclLauncherOpenMPI = 3,    /**< OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK */
  meshcclLauncherSlurm = 4       /**< SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID */
} meshcclLauncher_t;

/** Short name of a launcher: "meshccl-run", "torchrun", "openmpi", "slurm" or "none". */
const char *meshcclLauncherName(meshcclLauncher_t launcher);

/** What the environment of a launched process says about its place in the job. */
typedef struct {
  meshcclLauncher_t launcher;
  int rank;
  int nranks;
  int localRank;      /**< -1 when the launcher does not say */
  int localSize;      /**< -1 when the launcher does not say */
  char rootAddr[256]; /**< "host:port" of the bootstrap root all ranks use */
  char rootFrom[64];  /**< where rootAddr came from: "NCCL_COMM_ID", "MASTER_ADDR:MASTER_PORT",
                           or "derived from the job id" */
} meshcclEnvInfo_t;

/**
 * Reads the environment a launcher left: meshccl-run, torchrun (RANK,
 * WORLD_SIZE, MASTER_ADDR, MASTER_PORT), Open MPI (OMPI_COMM_WORLD_*) or
 * Slurm (SLURM_PROCID, SLURM_NTASKS), in that order of precedence. The root
 * address is NCCL_COMM_ID when set, else MASTER_ADDR:MASTER_PORT, else, for
 * a job whose ranks are all on this host, 127.0.0.1 with a port derived from
 * the job id (Open MPI: the job's namespace; Slurm: SLURM_JOB_ID and
 * SLURM_STEP_ID). ncclInvalidUsage, naming what is missing, otherwise.
 */
ncclResult_t meshcclGetEnvInfo(meshcclEnvInfo_t *info);

/**
 * Builds a communicator of every rank of the job from the launcher's
 * environment (see meshcclGetEnvInfo): one call instead of the unique-id
 * exchange. config may be NULL.
 */
ncclResult_t meshcclCommInitFromEnv(ncclComm_t *comm, ncclConfig_t *config);

/**
 * Like ncclGetUniqueId, for an id that must go through a channel others can
 * read (the torch backend's c10d TCPStore, a shared file): the id returned
 * is PUBLISHED, with a random nonce and no secret. Its bootstrap secret is
 * HMAC-SHA256 keyed with MESHCCL_SECRET over a label, the id's magic and
 * nonce, which only ranks that know MESHCCL_SECRET can compute: every rank,
 * this one included, passes the published id through meshcclUniqueIdAddSecret
 * before ncclCommInitRank*, and a process that read the id without knowing
 * MESHCCL_SECRET can neither join nor disturb the communicator. With
 * NCCL_COMM_ID the id names that address (rank 0 starts the root at init);
 * otherwise a root starts in this process, as with ncclGetUniqueId.
 * ncclInvalidUsage when MESHCCL_SECRET is unset.
 */
ncclResult_t meshcclGetPublicUniqueId(ncclUniqueId *uniqueId);

/**
 * Completes a published id (meshcclGetPublicUniqueId) in place with the
 * secret derived from MESHCCL_SECRET; any other id is left as it is, so a
 * rank may call it on whatever id it received. ncclInvalidUsage when the id
 * is published and MESHCCL_SECRET is unset. ncclCommInitRank* refuse a
 * published id that was not completed (ncclInvalidArgument).
 */
ncclResult_t meshcclUniqueIdAddSecret(ncclUniqueId *uniqueId);

/** Init timings of a communicator, NCCL's breakdown (seconds). */
typedef struct {
  double total, kernels, alloc, bootstrap, allgathers, topo, graphs, connections, rest;
} meshcclInitTimings_t;

/** What init found, for reports and tools. */
typedef struct {
  int rank;
  int nranks;
  int nNodes;
  int node;
  int localRank;
  int localRanks;
  int device;
  int pid;
  char host[64];
  char bootstrapIf[16];   /**< interface name */
  char bootstrapAddr[80]; /**< its address */
  meshcclInitTimings_t timings;
} meshcclCommInfo_t;

/** Fills *info for a ready communicator. */
ncclResult_t meshcclCommGetInfo(const ncclComm_t comm, meshcclCommInfo_t *info);

/**
 * What this rank learned at init about rank `peer` (any rank of comm):
 * host, pid, node, local rank, device and bootstrap interface. Of the
 * timings only `bootstrap` is known for other ranks; the others are 0.
 */
ncclResult_t meshcclCommGetPeerInfo(const ncclComm_t comm, int peer, meshcclCommInfo_t *info);

#ifdef __cplusplus
}
#endif

#endif /* MESHCCL_H_ */
