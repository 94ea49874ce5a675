/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The parts of NCCL 2.30's host API that only make sense with GPUs: the
 * host side of the device API (nccl_device/core.h: device communicators,
 * device pointers of windows, communicator properties for kernels) and
 * one-sided RMA (ncclPutSignal, ncclSignal, ncclWaitSignal, which need
 * GPU-initiated networking). Each returns ncclInvalidUsage with a message
 * naming the function, so that a program probing for them gets a clear
 * answer instead of a load error. Teams (NCCL's nccl_device/core.cc) have a
 * host meaning and are computed: see include/nccl.h.
 */
#include "comm.h"
#include "init_api.h"

#include "check.h"
#include "log.h"

static ncclResult_t needs_gpu(const char *call, const char *what)
{
  mc_api_enter();
  return MC_FAIL(ncclInvalidUsage,
                 "%s : %s needs a GPU; meshccl runs on host memory (see API coverage in "
                 "docs/design/lifecycle.md)",
                 call, what);
}

NCCL_API(ncclResult_t, ncclCommQueryProperties, ncclComm_t comm, ncclCommProperties_t *props);
ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t *props)
{
  (void)comm;
  (void)props;
  return needs_gpu("ncclCommQueryProperties", "the device API");
}

NCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, ncclDevCommRequirements_t const *reqs,
         ncclDevComm_t *outDevComm);
ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs,
                               ncclDevComm_t *outDevComm)
{
  (void)comm;
  (void)reqs;
  (void)outDevComm;
  return needs_gpu("ncclDevCommCreate", "a device communicator");
}

NCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, ncclDevComm_t const *devComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm)
{
  (void)comm;
  (void)devComm;
  return needs_gpu("ncclDevCommDestroy", "a device communicator");
}

NCCL_API(ncclResult_t, ncclGetLsaMultimemDevicePointer, ncclWindow_t window, size_t offset,
         void **outPtr);
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void **outPtr)
{
  (void)window;
  (void)offset;
  (void)outPtr;
  return needs_gpu("ncclGetLsaMultimemDevicePointer", "a multimem (NVLink SHARP) pointer");
}

NCCL_API(ncclResult_t, ncclGetMultimemDevicePointer, ncclWindow_t window, size_t offset,
         ncclMultimemHandle_t multimem, void **outPtr);
ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                          ncclMultimemHandle_t multimem, void **outPtr)
{
  (void)window;
  (void)offset;
  (void)multimem;
  (void)outPtr;
  return needs_gpu("ncclGetMultimemDevicePointer", "a multimem (NVLink SHARP) pointer");
}

NCCL_API(ncclResult_t, ncclGetLsaDevicePointer, ncclWindow_t window, size_t offset, int lsaRank,
         void **outPtr);
ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank, void **outPtr)
{
  (void)window;
  (void)offset;
  (void)lsaRank;
  (void)outPtr;
  return needs_gpu("ncclGetLsaDevicePointer", "a peer's device pointer");
}

NCCL_API(ncclResult_t, ncclGetPeerDevicePointer, ncclWindow_t window, size_t offset, int peer,
         void **outPtr);
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void **outPtr)
{
  (void)window;
  (void)offset;
  (void)peer;
  (void)outPtr;
  return needs_gpu("ncclGetPeerDevicePointer", "a peer's device pointer");
}

NCCL_API(ncclResult_t, ncclPutSignal, const void *localbuff, size_t count, ncclDataType_t datatype,
         int peer, ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
         unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                           unsigned int flags, ncclComm_t comm, cudaStream_t stream)
{
  (void)localbuff, (void)count, (void)datatype, (void)peer, (void)peerWin;
  (void)peerWinOffset, (void)sigIdx, (void)ctx, (void)flags, (void)comm, (void)stream;
  return needs_gpu("ncclPutSignal", "one-sided RMA (GPU-initiated networking)");
}

NCCL_API(ncclResult_t, ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags,
         ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream)
{
  (void)peer, (void)sigIdx, (void)ctx, (void)flags, (void)comm, (void)stream;
  return needs_gpu("ncclSignal", "one-sided RMA (GPU-initiated networking)");
}

NCCL_API(ncclResult_t, ncclWaitSignal, int nDesc, ncclWaitSignalDesc_t *signalDescs,
         ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                            cudaStream_t stream)
{
  (void)nDesc, (void)signalDescs, (void)comm, (void)stream;
  return needs_gpu("ncclWaitSignal", "one-sided RMA (GPU-initiated networking)");
}

/* ---------- teams ---------- */

static bool comm_live(const struct ncclComm *comm)
{
  return mc_comm_is_live(comm);
}

NCCL_API(ncclTeam_t, ncclTeamWorld, ncclComm_t comm);
ncclTeam_t ncclTeamWorld(ncclComm_t comm)
{
  ncclTeam_t t = {0, 0, 1};

  if (comm_live(comm)) {
    t.nRanks = comm->n_ranks;
    t.rank = comm->rank;
  }
  return t;
}

NCCL_API(ncclTeam_t, ncclTeamLsa, ncclComm_t comm);
ncclTeam_t ncclTeamLsa(ncclComm_t comm)
{
  ncclTeam_t t = {comm_live(comm) ? 1 : 0, 0, 1};

  return t;
}

NCCL_API(ncclTeam_t, ncclTeamRail, ncclComm_t comm);
ncclTeam_t ncclTeamRail(ncclComm_t comm)
{
  /* NCCL's rail: world ranks / LSA size, this rank / LSA size; LSA size is 1 here. */
  return ncclTeamWorld(comm);
}

NCCL_API(int, ncclTeamRankToWorld, ncclComm_t comm, ncclTeam_t team, int rank);
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank)
{
  int world;

  if (!comm_live(comm) || (rank < 0) || (rank >= team.nRanks))
    return -1;
  world = comm->rank + (rank - team.rank) * team.stride;
  return ((world >= 0) && (world < comm->n_ranks)) ? world : -1;
}

NCCL_API(int, ncclTeamRankToLsa, ncclComm_t comm, ncclTeam_t team, int rank);
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank)
{
  /* Only this rank is in its LSA team (index 0). */
  if (!comm_live(comm))
    return -1;
  return (ncclTeamRankToWorld(comm, team, rank) == comm->rank) ? 0 : -1;
}

/* ---------- device-API resource requirements (NCCL 2.30's nccl_device) ---------- */

NCCL_API(ncclResult_t, ncclLsaBarrierCreateRequirement, ncclTeam_t team, int nBarriers,
         ncclLsaBarrierHandle_t *outHandle, ncclDevResourceRequirements_t *outReq);
ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                             ncclLsaBarrierHandle_t *outHandle,
                                             ncclDevResourceRequirements_t *outReq)
{
  (void)team;
  (void)nBarriers;
  (void)outHandle;
  (void)outReq;
  return needs_gpu("ncclLsaBarrierCreateRequirement", "a device barrier");
}

NCCL_API(ncclResult_t, ncclGinBarrierCreateRequirement, ncclComm_t comm, ncclTeam_t team,
         int nBarriers, ncclGinBarrierHandle_t *outHandle, ncclDevResourceRequirements_t *outReq);
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t *outHandle,
                                             ncclDevResourceRequirements_t *outReq)
{
  (void)comm;
  (void)team;
  (void)nBarriers;
  (void)outHandle;
  (void)outReq;
  return needs_gpu("ncclGinBarrierCreateRequirement", "a GPU-initiated networking barrier");
}

/* NCCL's count (src/device_api/ll_a2a.cc): a slot holds 8 bytes of an element. */
NCCL_API(int, ncclLLA2ACalcSlots, int maxElts, int maxEltSize);
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize)
{
  return maxElts * ((maxEltSize + 7) / 8);
}

NCCL_API(ncclResult_t, ncclLLA2ACreateRequirement, int nBlocks, int nSlots,
         ncclLLA2AHandle_t *outHandle, ncclDevResourceRequirements_t *outReq);
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t *outHandle,
                                        ncclDevResourceRequirements_t *outReq)
{
  (void)nBlocks;
  (void)nSlots;
  (void)outHandle;
  (void)outReq;
  return needs_gpu("ncclLLA2ACreateRequirement", "a device LL all-to-all");
}

NCCL_API(ncclResult_t, ncclGinOutboxCreateRequirement, int nBlocks, int size_log2,
         ncclGinOutboxHandle *outHandle, ncclDevResourceRequirements *outReq);
ncclResult_t ncclGinOutboxCreateRequirement(int nBlocks, int size_log2,
                                            ncclGinOutboxHandle *outHandle,
                                            ncclDevResourceRequirements *outReq)
{
  (void)nBlocks;
  (void)size_log2;
  (void)outHandle;
  (void)outReq;
  return needs_gpu("ncclGinOutboxCreateRequirement", "a GPU-initiated networking outbox");
}

NCCL_API(ncclResult_t, ncclGinInboxA2ACreateRequirement, ncclTeam_t peers, int nBlocks,
         int size_log2, ncclGinInboxA2AHandle *outHandle, ncclDevResourceRequirements *outReq);
ncclResult_t ncclGinInboxA2ACreateRequirement(ncclTeam_t peers, int nBlocks, int size_log2,
                                              ncclGinInboxA2AHandle *outHandle,
                                              ncclDevResourceRequirements *outReq)
{
  (void)peers;
  (void)nBlocks;
  (void)size_log2;
  (void)outHandle;
  (void)outReq;
  return needs_gpu("ncclGinInboxA2ACreateRequirement", "a GPU-initiated networking inbox");
}
