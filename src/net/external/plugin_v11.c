/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Adapter for ncclNet_v11_t plugins (NCCL 2.28; NCCL's
 * src/plugin/net/net_v11.cc): init(ctx, commId, config, logger, profiler)
 * per communicator (commId from mc_net_init_args.comm_id, traffic class
 * undefined, NULL profiler), listen and connect take the plugin's context,
 * finalize(ctx) per communicator; properties as v10 plus
 * maxMultiRequestSize. setNetAttr is not called.
 * The code is plugin_adapter.inc's, with its switches for v11.
 */
#define PA_VERSION 11
#include "plugin_adapter.inc"

const struct mc_net_plugin_adapter mc_net_plugin_v11 = {
    .version = 11, .symbol = "ncclNetPlugin_v11", .ops = &v11_ops, .bind = v11_bind};
