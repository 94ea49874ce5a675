/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Adapter for ncclNet_v9_t plugins (NCCL 2.24; NCCL's
 * src/plugin/net/net_v9.cc): size_t isend/irecv sizes, int test sizes,
 * makeVDevice (NULL in the plugin -> mc_net_no_make_vdevice), properties
 * with regIsGlobal, forceFlush, vProps (at most 4 devices), maxP2pBytes and
 * maxCollBytes; no maxMultiRequestSize, rail or plane (0, -1, -1).
 * init(logger) runs once per process; connect/accept get a NULL device
 * handle (no offload).
 * The code is plugin_adapter.inc's, with its switches for v9.
 */
#define PA_VERSION 9
#include "plugin_adapter.inc"

const struct mc_net_plugin_adapter mc_net_plugin_v9 = {
    .version = 9, .symbol = "ncclNetPlugin_v9", .ops = &v9_ops, .bind = v9_bind};
