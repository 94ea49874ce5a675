/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclNetPlugin_v9 (NCCL 2.24, NCCL src/include/plugin/net/net_v9.h): the
 * mesh net for NCCL's v9 ABI. No context per communicator: the first
 * init(logger) makes the process-wide mesh context (mesh_plugin_int.h says
 * why it lives until the library is unloaded). isend/irecv sizes are
 * size_t, test's are int, so a request is refused above INT_MAX. Properties
 * of 104 bytes: forceFlush, vProps (up to 4 devices), maxP2pBytes,
 * maxCollBytes; makeVDevice is NULL.
 * The code is mesh_plugin_table.inc's, with its switches for v9.
 */
#define MP_VERSION     9
#define MP_PROPS_BYTES 104
#include "mesh_plugin_table.inc"
