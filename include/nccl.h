/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file nccl.h
 * meshccl's public API: NCCL's names, enum values and struct layouts
 * (matching NCCL 2.30), so that a program written against NCCL compiles
 * against meshccl and links with -lmeshccl. Buffers are host memory.
 *
 * Every host function of NCCL 2.30 is declared, with its p-prefixed
 * profiling alias. Functions that need a GPU (the device API's host side,
 * one-sided RMA) return ncclInvalidUsage saying so; docs/ARCHITECTURE.md
 * ("API coverage") lists each function and its host meaning. Extensions
 * live in meshccl.h.
 */
#ifndef NCCL_H_
#define NCCL_H_

#include <stddef.h>
#include <stdint.h>
#include <limits.h>

#define NCCL_MAJOR  2
#define NCCL_MINOR  30
#define NCCL_PATCH  7
#define NCCL_SUFFIX "meshccl"

/** NCCL_VERSION(X,Y,Z): X*10000+Y*100+Z since 2.9; X*1000+Y*100+Z before. */
#define NCCL_VERSION(X, Y, Z)                                                                      \
  (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

/* The stream argument of NCCL's API: opaque here, CUDA's type when its header came first. */
#if !defined(__CUDA_RUNTIME_API_H__) && !defined(CUDART_VERSION)
typedef struct CUstream_st *cudaStream_t;
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** Opaque communicator handle. */
typedef struct ncclComm *ncclComm_t;
/** Opaque handle of a registered window (ncclCommWindowRegister). */
typedef struct ncclWindow_vidmem *ncclWindow_t;
#define NCCL_COMM_NULL NULL

#define NCCL_UNIQUE_ID_BYTES 128
/** Bootstrap identity: magic (8 bytes) + root socket address (28 bytes) + nRanks (4), zero padded.
 */
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

/** Result codes, NCCL's numbers. */
typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclTimeout = 8,
  ncclNumResults = 9
} ncclResult_t;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
#define NCCL_SPLIT_NOCOLOR    -1
#define NCCL_UNDEF_FLOAT      -1.0f

/** ncclCommWindowRegister flags. */
#define NCCL_WIN_DEFAULT         0x00
#define NCCL_WIN_COLL_SYMMETRIC  0x01
#define NCCL_WIN_STRICT_ORDERING 0x02
/** Alignment of a buffer registered with NCCL_WIN_COLL_SYMMETRIC. */
#define NCCL_WIN_REQUIRED_ALIGNMENT 4096

/** ncclConfig_t.CTAPolicy values (accepted, no meaning without a GPU). */
#define NCCL_CTA_POLICY_DEFAULT    0x00
#define NCCL_CTA_POLICY_EFFICIENCY 0x01
#define NCCL_CTA_POLICY_ZERO       0x02

/** ncclCommShrink flags. */
#define NCCL_SHRINK_DEFAULT 0x00 /* shrink a healthy parent */
#define NCCL_SHRINK_ABORT   0x01 /* abort the parent's operations first, then shrink */

/** ncclCommRevoke flags (must be NCCL_REVOKE_DEFAULT). */
#define NCCL_REVOKE_DEFAULT 0x00

/** ncclCommSuspend flags. */
#define NCCL_SUSPEND_MEM 0x01

/** Communicator configuration; the field order is NCCL 2.30's ABI. */
typedef struct ncclConfig_v23000 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char *netName;
  int splitShare;
  int trafficClass;
  const char *commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
  int graphUsageMode;
  int numRmaCtx;
  int maxP2pPeers;
  int graphStreamOrdering;
} ncclConfig_t;

#define NCCL_API_MAGIC 0xcafebeef

/** Initialize every ncclConfig_t with this, then set the fields you need. */
#define NCCL_CONFIG_INITIALIZER                                                                    \
  {                                                                                                \
    sizeof(ncclConfig_t),                                 /* size */                               \
        NCCL_API_MAGIC,                                   /* magic */                              \
        NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */                            \
        NCCL_CONFIG_UNDEF_INT,                            /* blocking */                           \
        NCCL_CONFIG_UNDEF_INT,                            /* cgaClusterSize */                     \
        NCCL_CONFIG_UNDEF_INT,                            /* minCTAs */                            \
        NCCL_CONFIG_UNDEF_INT,                            /* maxCTAs */                            \
        NCCL_CONFIG_UNDEF_PTR,                            /* netName */                            \
        NCCL_CONFIG_UNDEF_INT,                            /* splitShare */                         \
        NCCL_CONFIG_UNDEF_INT,                            /* trafficClass */                       \
        NCCL_CONFIG_UNDEF_PTR,                            /* commName */                           \
        NCCL_CONFIG_UNDEF_INT,                            /* collnetEnable */                      \
        NCCL_CONFIG_UNDEF_INT,                            /* CTAPolicy */                          \
        NCCL_CONFIG_UNDEF_INT,                            /* shrinkShare */                        \
        NCCL_CONFIG_UNDEF_INT,                            /* nvlsCTAs */                           \
        NCCL_CONFIG_UNDEF_INT,                            /* nChannelsPerNetPeer */                \
        NCCL_CONFIG_UNDEF_INT,                            /* nvlinkCentricSched */                 \
        NCCL_CONFIG_UNDEF_INT,                            /* graphUsageMode */                     \
        NCCL_CONFIG_UNDEF_INT,                            /* numRmaCtx */                          \
        NCCL_CONFIG_UNDEF_INT,                            /* maxP2pPeers */                        \
        NCCL_CONFIG_UNDEF_INT                             /* graphStreamOrdering */                \
  }

/** What ncclGroupSimulateEnd reports; initialize with NCCL_SIM_INFO_INITIALIZER. */
typedef struct ncclSimInfo_v22200 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  float estimatedTime;
} ncclSimInfo_t;

#define NCCL_SIM_INFO_MAGIC 0x74685283
#define NCCL_SIM_INFO_INITIALIZER                                                                  \
  {                                                                                                \
    sizeof(ncclSimInfo_t),                                /* size */                               \
        NCCL_SIM_INFO_MAGIC,                              /* magic */                              \
        NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), /* version */                            \
        NCCL_UNDEF_FLOAT                                  /* estimatedTime */                      \
  }

/** Data types, NCCL's values. */
typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
  ncclNumTypes = 12
} ncclDataType_t;

/** Reduction operations, NCCL's values. */
typedef enum { ncclNumOps_dummy = 5 } ncclRedOp_dummy_t;
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclNumOps = 5,
  ncclMaxRedOp = 0x7fffffff >> (32 - 8 * sizeof(ncclRedOp_dummy_t))
} ncclRedOp_t;

/** Where the scalar of ncclRedOpCreatePreMulSum lives. Host memory either way here. */
typedef enum { ncclScalarDevice = 0, ncclScalarHostImmediate = 1 } ncclScalarResidence_t;

/**
 * Allocates size bytes of page-aligned host memory (rounded up to whole
 * pages) for buffers that are registered or used in windows: a memfd mapped
 * shared, which the other ranks on this host can map (symmetric windows).
 * ptr NULL or size 0: ncclInvalidArgument.
 */
ncclResult_t ncclMemAlloc(void **ptr, size_t size);
ncclResult_t pncclMemAlloc(void **ptr, size_t size);
/** Frees memory from ncclMemAlloc (its start; else ncclInvalidArgument); NULL is a no-op. */
ncclResult_t ncclMemFree(void *ptr);
ncclResult_t pncclMemFree(void *ptr);

/** Writes NCCL_VERSION_CODE of the library into *version. */
ncclResult_t ncclGetVersion(int *version);
ncclResult_t pncclGetVersion(int *version);

/**
 * Creates a unique id for a new communicator and starts its bootstrap root
 * in this process (a thread that lives until every rank has joined, or the
 * init timeout). With NCCL_COMM_ID set, the id names that address and no root
 * is started here: rank 0 starts it during init.
 */
ncclResult_t ncclGetUniqueId(ncclUniqueId *uniqueId);
ncclResult_t pncclGetUniqueId(ncclUniqueId *uniqueId);

/** Creates rank `rank` of an nranks communicator (blocking, default configuration). */
ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);
ncclResult_t pncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank);

/**
 * As ncclCommInitRank with a configuration. With config->blocking == 0 it
 * returns ncclInProgress at once; poll ncclCommGetAsyncError until it leaves
 * ncclInProgress.
 */
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config);
ncclResult_t pncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                     ncclConfig_t *config);

/** Creates ndev communicators of one clique in this process, one thread each. devlist may be NULL.
 */
ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist);
ncclResult_t pncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist);

/**
 * Collective over comm: ranks with the same color form a new communicator,
 * ordered by key then by parent rank. color NCCL_SPLIT_NOCOLOR yields NULL.
 * config NULL inherits the parent's configuration.
 */
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config);
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                            ncclConfig_t *config);

/** Ends all operations of comm; the communicator can then only be destroyed. */
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t pncclCommFinalize(ncclComm_t comm);

/** Frees every resource of comm (sockets, threads, memory). */
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t pncclCommDestroy(ncclComm_t comm);

/** Stops whatever comm is doing (init included, from any thread) and frees it: a
 * collective running or queued in a group on another thread returns an error, and abort
 * waits (a bounded time) for it to leave comm; later calls with comm are
 * ncclInvalidArgument. Peers in this process or on this host see the abort at once. */
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t pncclCommAbort(ncclComm_t comm);

/** State of comm: ncclSuccess, ncclInProgress (non-blocking init running) or the error. */
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError);

/** Number of ranks of comm. */
ncclResult_t ncclCommCount(const ncclComm_t comm, int *count);
ncclResult_t pncclCommCount(const ncclComm_t comm, int *count);

/** Device index the rank uses (a CPU compute device on hosts without GPUs). */
ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int *device);
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int *device);

/** Rank of the caller in comm. */
ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank);
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int *rank);

/**
 * Collective over comm: a new communicator of the ranks not listed in
 * excludeRanksList (excludeRanksCount entries), ordered as in comm.
 * Excluded ranks do not call it. NCCL_SHRINK_ABORT first stops comm's
 * operations (for a parent with failed ranks). config NULL inherits comm's.
 */
ncclResult_t ncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                            ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags);
ncclResult_t pncclCommShrink(ncclComm_t comm, int *excludeRanksList, int excludeRanksCount,
                             ncclComm_t *newcomm, ncclConfig_t *config, int shrinkFlags);

/**
 * A fresh id for a later ncclCommGrow of comm. Only one id may be
 * outstanding: a second call before the first is consumed is ncclInvalidUsage.
 */
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId);
ncclResult_t pncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId *uniqueId);

/**
 * Grows comm to nRanks ranks (NCCL 2.28+). Every rank of comm calls with
 * comm and rank -1 and keeps its rank; the rank that called
 * ncclCommGetUniqueId(comm) may pass that id, the others pass NULL. Each
 * new rank calls with comm NULL, that id and its rank (comm's size to
 * nRanks - 1). newcomm is a complete communicator; comm stays usable. The
 * grow consumes the id. Bad arguments: ncclInvalidArgument; no rank of
 * comm holding an id, or ranks disagreeing on nRanks: ncclInvalidUsage.
 */
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                          ncclComm_t *newcomm, ncclConfig_t *config);
ncclResult_t pncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId *uniqueId, int rank,
                           ncclComm_t *newcomm, ncclConfig_t *config);

/**
 * As ncclCommInitRankConfig with nId unique ids (same ids, same order on
 * every rank; each from ncclGetUniqueId, which starts that id's root in the
 * calling process). Rank r registers with the root of
 * commIds[rootIdFromRank(r)] (NCCL's mapping: contiguous groups, the first
 * nranks % nId one rank larger). See docs/ARCHITECTURE.md, bootstrap.
 */
ncclResult_t ncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                      ncclUniqueId *commIds, ncclConfig_t *config);
ncclResult_t pncclCommInitRankScalable(ncclComm_t *newcomm, int nranks, int myrank, int nId,
                                       ncclUniqueId *commIds, ncclConfig_t *config);

/**
 * Stops comm's operations in flight; later collectives on comm fail
 * (ncclInvalidUsage); ncclCommDestroy and ncclCommAbort still work.
 * revokeFlags must be NCCL_REVOKE_DEFAULT.
 */
ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
ncclResult_t pncclCommRevoke(ncclComm_t comm, int revokeFlags);

/**
 * Records [buff, buff + size) as registered with comm and returns a handle
 * for ncclCommDeregister. Host memory needs no pinning: registration only
 * records the range; every registration is freed with the communicator.
 */
ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle);
ncclResult_t pncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle);
/** Forgets a registration; a handle comm did not return is ncclInvalidArgument. */
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle);
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void *handle);

/**
 * Suspends comm (flags: NCCL_SUSPEND_MEM): collectives on it return
 * ncclInvalidUsage until ncclCommResume. No GPU memory to release on hosts.
 */
ncclResult_t ncclCommSuspend(ncclComm_t comm, int flags);
ncclResult_t pncclCommSuspend(ncclComm_t comm, int flags);
/** Ends a suspension (ncclInvalidUsage when comm is not suspended). */
ncclResult_t ncclCommResume(ncclComm_t comm);
ncclResult_t pncclCommResume(ncclComm_t comm);

/** Statistics of ncclCommMemStats. */
typedef enum {
  ncclStatGpuMemSuspend = 0,   /* GPU memory that can be suspended (bytes) */
  ncclStatGpuMemSuspended = 1, /* 1 while suspended, else 0 */
  ncclStatGpuMemPersist = 2,   /* GPU memory that cannot be suspended (bytes) */
  ncclStatGpuMemTotal = 3      /* all GPU memory of the communicator (bytes) */
} ncclCommMemStat_t;

/** One statistic of comm; every GPU memory amount is 0 on hosts. */
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value);
ncclResult_t pncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value);

/**
 * Registers [buff, buff + size) as a window of comm (winFlags: NCCL_WIN_*).
 * With NCCL_WIN_COLL_SYMMETRIC, buff must be NCCL_WIN_REQUIRED_ALIGNMENT
 * aligned and the window within one ncclMemAlloc allocation; an all-reduce,
 * all-gather or reduce-scatter whose buffers are in such windows on every
 * rank of a one-host communicator reads its peers' buffers directly
 * (MESHCCL_SYMMETRIC). On hosts the window
 * records buff, size and flags (a local call).
 */
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                    int winFlags);
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                     int winFlags);
/** Frees a window of comm (ncclInvalidArgument for a window comm did not return). */
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win);
/** The buff a window was registered with. */
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr);
ncclResult_t pncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr);

/** Human-readable text of a result code. */
const char *ncclGetErrorString(ncclResult_t result);
const char *pncclGetErrorString(ncclResult_t result);

/**
 * Text of the last error: comm's own when comm is given and it failed,
 * otherwise the last error recorded by this process.
 */
const char *ncclGetLastError(ncclComm_t comm);
const char *pncclGetLastError(ncclComm_t comm);

/** Reads NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE from the environment again. */
void ncclResetDebugInit(void);
void pncclResetDebugInit(void);

/**
 * Group calls nest; only the outermost ncclGroupEnd acts. Communicator
 * inits issued inside a group complete at the outermost ncclGroupEnd, each
 * in its own thread.
 */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

/**
 * Ends the outermost group like ncclGroupEnd but runs nothing: the queued
 * operations are checked, dropped, and their time estimated with the tuning
 * model into simInfo->estimatedTime (microseconds). Communicator inits in
 * the group do run (as in NCCL).
 */
ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo);
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t *simInfo);

/*
 * Collectives (NCCL's signatures). Buffers are host memory. The stream
 * argument is accepted and ignored: an operation has completed when the call
 * returns, except inside ncclGroupStart/End, where the operations of the
 * group complete at the outermost ncclGroupEnd. count 0 is a no-op.
 */

/**
 * Creates a reduction: each rank's input is multiplied by *scalar (of type
 * datatype, read at once: both residences are host memory here), then summed.
 */
ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                      ncclScalarResidence_t residence, ncclComm_t comm);
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t *op, void *scalar, ncclDataType_t datatype,
                                       ncclScalarResidence_t residence, ncclComm_t comm);
/** Frees a reduction created by ncclRedOpCreatePreMulSum on comm. */
ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm);

/** Reduces count elements across ranks with op; every rank receives the result. */
ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t pncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                            cudaStream_t stream);

/** Copies count elements of root's sendbuff into every rank's recvbuff. */
ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                            ncclDataType_t datatype, int root, ncclComm_t comm,
                            cudaStream_t stream);

/** In-place broadcast (legacy). */
ncclResult_t ncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
                       cudaStream_t stream);
ncclResult_t pncclBcast(void *buff, size_t count, ncclDataType_t datatype, int root,
                        ncclComm_t comm, cudaStream_t stream);

/** Reduces count elements across ranks with op into root's recvbuff. */
ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclReduce(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                         cudaStream_t stream);

/** Gathers sendcount elements of every rank into recvbuff, in rank order. */
ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                            ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/** Reduces nranks * recvcount elements with op; rank i receives block i. */
ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t pncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                                ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                cudaStream_t stream);

/**
 * Sends count elements to every rank and receives count from every rank:
 * block j of sendbuff goes to rank j, block i of recvbuff comes from rank i
 * (blocks of count elements). sendbuff == recvbuff is ncclInvalidArgument
 * (no in-place variant).
 */
ncclResult_t ncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclAlltoAll(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);

/**
 * Every rank sends count elements to root, which places rank i's at
 * recvbuff + i * count (recvbuff is not used elsewhere). In place when
 * sendbuff == recvbuff + root * count at the root.
 */
ncclResult_t ncclGather(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype,
                        int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclGather(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);

/**
 * root sends sendbuff + i * count (count elements) to rank i (sendbuff is
 * not used elsewhere); every rank receives into recvbuff. In place when
 * recvbuff == sendbuff + root * count at the root.
 */
ncclResult_t ncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                         ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclScatter(const void *sendbuff, void *recvbuff, size_t count,
                          ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);

/** Sends count elements to peer (matched by the peer's ncclRecv, in call order). */
ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

/** Receives count elements from peer. */
ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                       ncclComm_t comm, cudaStream_t stream);

/*
 * One-sided communication (NCCL 2.29): needs GPU-initiated networking;
 * returns ncclInvalidUsage here.
 */
typedef struct {
  int opCnt;  /* signal operations to wait for */
  int peer;   /* from this rank */
  int sigIdx; /* signal index */
  int ctx;    /* context */
} ncclWaitSignalDesc_t;

ncclResult_t ncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                           ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                           unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t pncclPutSignal(const void *localbuff, size_t count, ncclDataType_t datatype, int peer,
                            ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx,
                            unsigned int flags, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                        cudaStream_t stream);
ncclResult_t pncclSignal(int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
                         cudaStream_t stream);
ncclResult_t ncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                            cudaStream_t stream);
ncclResult_t pncclWaitSignal(int nDesc, ncclWaitSignalDesc_t *signalDescs, ncclComm_t comm,
                             cudaStream_t stream);

/*
 * Parameters (NCCL 2.30): the variables of docs/ENV.md by name ("NCCL_DEBUG"),
 * with the value meshccl uses (environment, then configuration files, then
 * the default). An unknown key is ncclInvalidArgument.
 */
typedef struct ncclParamHandle *ncclParamHandle_t;

/** A handle to the parameter named key; owned by the library, never freed. */
ncclResult_t ncclParamBind(ncclParamHandle_t *out, const char *key);
ncclResult_t pncclParamBind(ncclParamHandle_t *out, const char *key);
/** The value as an integer of the output's type; ncclInvalidArgument when it does not fit. */
ncclResult_t ncclParamGetI8(ncclParamHandle_t h, int8_t *out);
ncclResult_t pncclParamGetI8(ncclParamHandle_t h, int8_t *out);
ncclResult_t ncclParamGetI16(ncclParamHandle_t h, int16_t *out);
ncclResult_t pncclParamGetI16(ncclParamHandle_t h, int16_t *out);
ncclResult_t ncclParamGetI32(ncclParamHandle_t h, int32_t *out);
ncclResult_t pncclParamGetI32(ncclParamHandle_t h, int32_t *out);
ncclResult_t ncclParamGetI64(ncclParamHandle_t h, int64_t *out);
ncclResult_t pncclParamGetI64(ncclParamHandle_t h, int64_t *out);
ncclResult_t ncclParamGetU8(ncclParamHandle_t h, uint8_t *out);
ncclResult_t pncclParamGetU8(ncclParamHandle_t h, uint8_t *out);
ncclResult_t ncclParamGetU16(ncclParamHandle_t h, uint16_t *out);
ncclResult_t pncclParamGetU16(ncclParamHandle_t h, uint16_t *out);
ncclResult_t ncclParamGetU32(ncclParamHandle_t h, uint32_t *out);
ncclResult_t pncclParamGetU32(ncclParamHandle_t h, uint32_t *out);
ncclResult_t ncclParamGetU64(ncclParamHandle_t h, uint64_t *out);
ncclResult_t pncclParamGetU64(ncclParamHandle_t h, uint64_t *out);
/** The value as text ("" when unset); valid until this thread's next ncclParamGetStr. */
ncclResult_t ncclParamGetStr(ncclParamHandle_t h, const char **out);
ncclResult_t pncclParamGetStr(ncclParamHandle_t h, const char **out);
/**
 * The raw value into out (maxLen bytes): an int64_t for integer parameters,
 * the NUL-terminated text for the others; *len gets the byte count.
 */
ncclResult_t ncclParamGet(ncclParamHandle_t h, void *out, int maxLen, int *len);
ncclResult_t pncclParamGet(ncclParamHandle_t h, void *out, int maxLen, int *len);
/** The value of key as text and its length; valid until this thread's next call. */
ncclResult_t ncclParamGetParameter(const char *key, const char **value, int *valueLen);
ncclResult_t pncclParamGetParameter(const char *key, const char **value, int *valueLen);
/** Every parameter name (a table owned by the library). */
ncclResult_t ncclParamGetAllParameterKeys(const char ***table, int *tableLen);
ncclResult_t pncclParamGetAllParameterKeys(const char ***table, int *tableLen);
/** Logs every parameter and its value (INFO, subsystem ENV). */
void ncclParamDumpAll(void);
void pncclParamDumpAll(void);

/*
 * Host side of the device API (NCCL 2.28+, nccl_device/core.h): device
 * communicators, windows' device pointers and teams for GPU kernels. The
 * structures are opaque here: every call that needs a GPU returns
 * ncclInvalidUsage naming itself. Teams have a host meaning: the world is
 * every rank; LSA (load/store-accessible peers) is the rank alone, since
 * host ranks share no GPU memory; a rail is the world.
 */
typedef struct ncclDevComm ncclDevComm_t;
typedef struct ncclDevCommRequirements ncclDevCommRequirements_t;
typedef struct ncclCommProperties ncclCommProperties_t;
/** A multicast (NVLink SHARP) mapping of a team (NCCL's layout). */
typedef struct ncclMultimemHandle {
  void *mcBasePtr;
} ncclMultimemHandle_t;

/** A set of ranks: nRanks of them, this one at index rank, world ranks stride apart. */
typedef struct ncclTeam {
  int nRanks, rank, stride;
} ncclTeam_t;

ncclResult_t ncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t *props);
ncclResult_t pncclCommQueryProperties(ncclComm_t comm, ncclCommProperties_t *props);
ncclResult_t ncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs,
                               ncclDevComm_t *outDevComm);
ncclResult_t pncclDevCommCreate(ncclComm_t comm, ncclDevCommRequirements_t const *reqs,
                                ncclDevComm_t *outDevComm);
ncclResult_t ncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm);
ncclResult_t pncclDevCommDestroy(ncclComm_t comm, ncclDevComm_t const *devComm);
ncclResult_t ncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void **outPtr);
ncclResult_t pncclGetLsaMultimemDevicePointer(ncclWindow_t window, size_t offset, void **outPtr);
ncclResult_t ncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                          ncclMultimemHandle_t multimem, void **outPtr);
ncclResult_t pncclGetMultimemDevicePointer(ncclWindow_t window, size_t offset,
                                           ncclMultimemHandle_t multimem, void **outPtr);
ncclResult_t ncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                     void **outPtr);
ncclResult_t pncclGetLsaDevicePointer(ncclWindow_t window, size_t offset, int lsaRank,
                                      void **outPtr);
ncclResult_t ncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void **outPtr);
ncclResult_t pncclGetPeerDevicePointer(ncclWindow_t window, size_t offset, int peer, void **outPtr);

/** Every rank of comm: {nRanks, rank, 1}. */
ncclTeam_t ncclTeamWorld(ncclComm_t comm);
ncclTeam_t pncclTeamWorld(ncclComm_t comm);
/** The ranks this one can load/store into: itself alone on hosts, {1, 0, 1}. */
ncclTeam_t ncclTeamLsa(ncclComm_t comm);
ncclTeam_t pncclTeamLsa(ncclComm_t comm);
/** The same LSA index across LSA teams: the world on hosts. */
ncclTeam_t ncclTeamRail(ncclComm_t comm);
ncclTeam_t pncclTeamRail(ncclComm_t comm);
/** World rank of index rank of team (-1 when out of range). */
int ncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToWorld(ncclComm_t comm, ncclTeam_t team, int rank);
/** LSA index of index rank of team (-1 when that rank is not load/store accessible). */
int ncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);
int pncclTeamRankToLsa(ncclComm_t comm, ncclTeam_t team, int rank);

/*
 * Device-API resources a kernel asks for (NCCL 2.30's nccl_device/
 * lsa_barrier.h, gin_barrier.h, ll_a2a.h, gin headers): barriers, LL
 * all-to-all slots, GIN outboxes and inboxes. Opaque here; each call that
 * creates a requirement returns ncclInvalidUsage naming itself (they need a
 * GPU). ncclLLA2ACalcSlots is NCCL's arithmetic on its arguments.
 */
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements_t;
typedef struct ncclDevResourceRequirements ncclDevResourceRequirements;
typedef struct ncclLsaBarrierHandle ncclLsaBarrierHandle_t;
typedef struct ncclGinBarrierHandle ncclGinBarrierHandle_t;
typedef struct ncclLLA2AHandle ncclLLA2AHandle_t;
typedef struct ncclGinOutboxHandle ncclGinOutboxHandle;
typedef struct ncclGinInboxA2AHandle ncclGinInboxA2AHandle;

ncclResult_t ncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                             ncclLsaBarrierHandle_t *outHandle,
                                             ncclDevResourceRequirements_t *outReq);
ncclResult_t pncclLsaBarrierCreateRequirement(ncclTeam_t team, int nBarriers,
                                              ncclLsaBarrierHandle_t *outHandle,
                                              ncclDevResourceRequirements_t *outReq);
ncclResult_t ncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                             ncclGinBarrierHandle_t *outHandle,
                                             ncclDevResourceRequirements_t *outReq);
ncclResult_t pncclGinBarrierCreateRequirement(ncclComm_t comm, ncclTeam_t team, int nBarriers,
                                              ncclGinBarrierHandle_t *outHandle,
                                              ncclDevResourceRequirements_t *outReq);
/** LL all-to-all slots for maxElts elements of up to maxEltSize bytes: one per 8 bytes of each. */
int ncclLLA2ACalcSlots(int maxElts, int maxEltSize);
int pncclLLA2ACalcSlots(int maxElts, int maxEltSize);
ncclResult_t ncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t *outHandle,
                                        ncclDevResourceRequirements_t *outReq);
ncclResult_t pncclLLA2ACreateRequirement(int nBlocks, int nSlots, ncclLLA2AHandle_t *outHandle,
                                         ncclDevResourceRequirements_t *outReq);
ncclResult_t ncclGinOutboxCreateRequirement(int nBlocks, int size_log2,
                                            ncclGinOutboxHandle *outHandle,
                                            ncclDevResourceRequirements *outReq);
ncclResult_t pncclGinOutboxCreateRequirement(int nBlocks, int size_log2,
                                             ncclGinOutboxHandle *outHandle,
                                             ncclDevResourceRequirements *outReq);
ncclResult_t ncclGinInboxA2ACreateRequirement(ncclTeam_t peers, int nBlocks, int size_log2,
                                              ncclGinInboxA2AHandle *outHandle,
                                              ncclDevResourceRequirements *outReq);
ncclResult_t pncclGinInboxA2ACreateRequirement(ncclTeam_t peers, int nBlocks, int size_log2,
                                               ncclGinInboxA2AHandle *outHandle,
                                               ncclDevResourceRequirements *outReq);

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
