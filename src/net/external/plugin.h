/* SPDX-License-Identifier: Apache-2.0 */
/*
 * External NCCL net plugins (NCCL 2.30's src/plugin/net.cc and
 * plugin_open.cc): the libraries NCCL_NET_PLUGIN names are opened once per
 * process, their newest ncclNetPlugin_vN symbol (v12 down to v6) is wrapped
 * by the adapter of that version (plugin_v6.c ... plugin_v12.c) into a
 * struct mc_net_ops, validated and initialised once as a probe. The
 * registry (net_registry.c) puts the loaded plugin before the built-in nets.
 */
#ifndef MC_NET_EXTERNAL_PLUGIN_H
#define MC_NET_EXTERNAL_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>

#include "nccl.h"
#include "net/net.h"

/*
 * The net plugin of this process, chosen by NCCL_NET_PLUGIN as NCCL 2.30
 * does: unset -> libnccl-net.so; "none" (any case) -> no plugin; else a
 * comma-separated list of choices tried in order, each a path or a file name
 * (opened as given, then as libnccl-net-<name>.so unless it contains '/' or
 * already reads lib*.so). The first choice that opens, exports a supported
 * symbol, validates and initialises is the plugin; every choice that fails
 * logs one INFO line naming the file and why.
 * *ops_out receives the plugin's table (valid until exit) or NULL when no
 * plugin is in use; *why_out (may be NULL) a short text of what was tried
 * when none is (for the registry's messages), valid until the next call.
 * Returns ncclInvalidUsage, naming NCCL_NET_PLUGIN's value and every
 * choice's failure, when NCCL_NET_PLUGIN is set (not "none") and nothing
 * loads. Thread-safe; the decision is made once per value of NCCL_NET_PLUGIN
 * (the value changes only in tests), libraries are never closed.
 */
ncclResult_t mc_net_plugin_get(const struct mc_net_ops **ops_out, const char **why_out);

/*
 * Loads from an explicit NCCL_NET_PLUGIN-style spec (NULL = unset), without
 * caching the decision: mc_net_plugin_get's work, for tests and tools.
 * asked: failing to load anything is an error (ncclInvalidUsage) rather than
 * *ops_out = NULL. why (may be NULL, why_bytes) receives the failures.
 */
ncclResult_t mc_net_plugin_load(const char *spec, bool asked, const struct mc_net_ops **ops_out,
                                char *why, size_t why_bytes);

/* The ABI version (6..12) and the resolved library path of a table that
 * mc_net_plugin_get/_load returned; 0 and NULL for any other table. */
int mc_net_plugin_version(const struct mc_net_ops *ops);
const char *mc_net_plugin_path(const struct mc_net_ops *ops);

#endif /* MC_NET_EXTERNAL_PLUGIN_H */
