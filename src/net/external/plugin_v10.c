/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Adapter for ncclNet_v10_t plugins (NCCL 2.26; NCCL's
 * src/plugin/net/net_v10.cc): as v9, plus init(logger, profiler) with a
 * NULL profiler callback, connect(dev, config, ...) with the communicator's
 * config (traffic class undefined), and profiler handles (NULL) in isend and
 * irecv. Properties as v9. init runs once per process.
 * The code is plugin_adapter.inc's, with its switches for v10.
 */
#define PA_VERSION 10
#include "plugin_adapter.inc"

const struct mc_net_plugin_adapter mc_net_plugin_v10 = {
    .version = 10, .symbol = "ncclNetPlugin_v10", .ops = &v10_ops, .bind = v10_bind};
