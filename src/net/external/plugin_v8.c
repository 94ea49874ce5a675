/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Adapter for ncclNet_v8_t plugins (NCCL 2.20; NCCL's
 * src/plugin/net/net_v8.cc): int sizes in isend, irecv and test (a size
 * above INT_MAX is refused naming the call), size_t regMr; properties with
 * regIsGlobal but no forceFlush, vProps or maxP2pBytes: a device is its own
 * vNIC, max_p2p_bytes is NCCL's MAX_NET_SIZE (1 GiB), no CollNet size. No
 * makeVDevice (mc_net_no_make_vdevice). init(logger) once per process.
 * The code is plugin_adapter.inc's, with its switches for v8.
 */
#define PA_VERSION 8
#include "plugin_adapter.inc"

const struct mc_net_plugin_adapter mc_net_plugin_v8 = {
    .version = 8, .symbol = "ncclNetPlugin_v8", .ops = &v8_ops, .bind = v8_bind};
