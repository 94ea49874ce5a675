/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclNetPlugin_v8 (NCCL 2.20, NCCL src/include/plugin/net/net_v8.h): the
 * mesh net for NCCL's v8 ABI. No context per communicator: the first
 * init(logger) makes the process-wide mesh context (mesh_plugin_int.h says
 * why it lives until the library is unloaded). isend/irecv/test sizes are
 * int (regMr's is size_t): a negative size is refused. Properties of 64
 * bytes: regIsGlobal after ptrSupport, no forceFlush, vProps or
 * maxP2pBytes (NCCL assumes MAX_NET_SIZE, 1 GiB, for v8).
 * The code is mesh_plugin_table.inc's, with its switches for v8.
 */
#define MP_VERSION     8
#define MP_PROPS_BYTES 64
#include "mesh_plugin_table.inc"
