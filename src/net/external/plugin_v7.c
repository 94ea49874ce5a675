/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Adapter for ncclNet_v7_t plugins (NCCL 2.19; NCCL's
 * src/plugin/net/net_v7.cc): as v8 with an int regMr size and no
 * regIsGlobal (false). Sizes above INT_MAX are refused naming the call.
 * The code is plugin_adapter.inc's, with its switches for v7.
 */
#define PA_VERSION 7
#include "plugin_adapter.inc"

const struct mc_net_plugin_adapter mc_net_plugin_v7 = {
    .version = 7, .symbol = "ncclNetPlugin_v7", .ops = &v7_ops, .bind = v7_bind};
