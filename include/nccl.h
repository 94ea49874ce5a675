/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file nccl.h
 * meshccl's public API: NCCL's names, enum values and struct layouts
 * (matching NCCL 2.30), so that a program written against NCCL compiles
 * against meshccl and links with -lmeshccl. Buffers are host memory.
 *
 * Only what meshccl implements is declared here; later releases add the
 * collectives. Extensions live in meshccl.h.
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

/** Stops whatever comm is doing (init included, from any thread) and frees it. */
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

/** Human-readable text of a result code. */
const char *ncclGetErrorString(ncclResult_t result);
const char *pncclGetErrorString(ncclResult_t result);

/**
 * Text of the last error: comm's own when comm is given and it failed,
 * otherwise the last error recorded by this process.
 */
const char *ncclGetLastError(ncclComm_t comm);
const char *pncclGetLastError(ncclComm_t comm);

/**
 * Group calls nest; only the outermost ncclGroupEnd acts. Communicator
 * inits issued inside a group complete at the outermost ncclGroupEnd, each
 * in its own thread.
 */
ncclResult_t ncclGroupStart(void);
ncclResult_t pncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t pncclGroupEnd(void);

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

#ifdef __cplusplus
}
#endif

#endif /* NCCL_H_ */
