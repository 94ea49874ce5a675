/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclNetPlugin_v11 (NCCL 2.28, NCCL src/include/plugin/net/net_v11.h): the
 * mesh net for NCCL's v11 ABI, the first with a context per NCCL
 * communicator: init(ctx, commId, config, logger, profiler) makes one mesh
 * context each (the commId keys it), finalize(ctx) frees it. Properties of
 * 112 bytes: up to 4 devices per virtual device, maxMultiRequestSize; no
 * railId or planeId. config's trafficClass, the profiler and setNetAttr's
 * hints are not used.
 * The code is mesh_plugin_table.inc's, with its switches for v11.
 */
#define MP_VERSION     11
#define MP_PROPS_BYTES 112
#include "mesh_plugin_table.inc"
