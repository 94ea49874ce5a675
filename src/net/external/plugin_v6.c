/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Adapter for ncclNet_v6_t plugins (NCCL 2.12; NCCL's
 * src/plugin/net/net_v6.cc): int sizes everywhere but regMrDmaBuf,
 * connect and accept without device handles, properties without
 * regIsGlobal or offload fields (defaults as v8's). A v6 plugin promises
 * NCCL_NET_MAX_REQUESTS_V6 (8) requests per comm, which the NET transport's
 * 8 steps per connection respect.
 * The code is plugin_adapter.inc's, with its switches for v6.
 */
#define PA_VERSION 6
#include "plugin_adapter.inc"

const struct mc_net_plugin_adapter mc_net_plugin_v6 = {
    .version = 6, .symbol = "ncclNetPlugin_v6", .ops = &v6_ops, .bind = v6_bind};
