/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclNetPlugin_v10 (NCCL 2.26, NCCL src/include/plugin/net/net_v10.h): the
 * mesh net for NCCL's v10 ABI. No context per communicator: the first
 * init(logger, profiler) makes the process-wide mesh context
 * (mesh_plugin_int.h says why it lives until the library is unloaded);
 * connect takes a per-connection config (trafficClass, not used); isend and
 * irecv carry profiler handles (not used). Properties as v9's (104 bytes).
 * The code is mesh_plugin_table.inc's, with its switches for v10.
 */
#define MP_VERSION     10
#define MP_PROPS_BYTES 104
#include "mesh_plugin_table.inc"
