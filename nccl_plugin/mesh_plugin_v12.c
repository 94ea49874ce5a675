/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ncclNetPlugin_v12 (NCCL 2.30, NCCL src/include/plugin/net/net_v12.h): the
 * mesh net for NCCL's v12 ABI. init(ctx, commId, config, logger, profiler)
 * once per NCCL context, one mesh context each (the commId keys it);
 * properties of 128 bytes with up to 8 devices per virtual device, railId
 * and planeId (undefined: the mesh has no rails). config's trafficClass,
 * the profiler and setNetAttr's hints are not used.
 * The code is mesh_plugin_table.inc's, with its switches for v12.
 */
#define MP_VERSION     12
#define MP_PROPS_BYTES 128
#include "mesh_plugin_table.inc"
