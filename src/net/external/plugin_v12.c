/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Adapter for ncclNet_v12_t plugins (NCCL 2.30; NCCL's
 * src/plugin/net/net_v12.cc): the v11 calls over v12's types; virtual
 * devices of up to 8 devices, railId and planeId (NCCL_NET_ID_UNDEF -> -1).
 * The code is plugin_adapter.inc's, with its switches for v12.
 */
#define PA_VERSION 12
#include "plugin_adapter.inc"

const struct mc_net_plugin_adapter mc_net_plugin_v12 = {
    .version = 12, .symbol = "ncclNetPlugin_v12", .ops = &v12_ops, .bind = v12_bind};
