/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which nets exist and which one a communicator uses. Mirrors the choice of
 * NCCL 2.30's src/plugin/net.cc (ncclNetInit): the nets are tried in a
 * fixed order and NCCL_NET, when set, keeps only the one of that name
 * (case-insensitive). The external plugin NCCL_NET_PLUGIN loads (external/)
 * comes first, then the built-in nets; the built-in order is an explicit
 * array, visible and replaceable, not constructor registration.
 */
#include "net.h"
#include "net/external/plugin.h"

#include "check.h"
#include "log.h"
#include "params.h"
#include "utils.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The built-in nets, in the order they are considered. */
static const struct mc_net_ops *const builtin_nets[] = {
    &mc_net_socket_ops,
    &mc_net_mesh_ops,
};

#define N_BUILTIN ((int)(sizeof(builtin_nets) / sizeof(builtin_nets[0])))

ncclResult_t mc_net_no_make_vdevice(void *ctx, const struct mc_net_vprops *vprops, int *dev_out)
{
  (void)ctx;
  (void)vprops;
  (void)dev_out;
  MC_WARN_ONCE("NET: this net cannot fuse devices into a virtual one (make_vdevice)");
  return ncclInvalidUsage;
}

ncclResult_t mc_net_ops_validate(const struct mc_net_ops *ops, const char *origin)
{
  const char *missing = NULL;

  if (ops == NULL)
    return MC_FAIL(ncclInvalidUsage, "NET: %s has no net table", origin);
  if (ops->abi != MC_NET_OPS_ABI)
    return MC_FAIL(ncclInvalidUsage, "NET: %s's net table has ABI %u, this library needs %u",
                   origin, ops->abi, MC_NET_OPS_ABI);
#define MANDATORY(_m)                                                                              \
  if ((missing == NULL) && (ops->_m == NULL))                                                      \
  missing = #_m
  MANDATORY(name);
  MANDATORY(init);
  MANDATORY(devices);
  MANDATORY(get_properties);
  MANDATORY(make_vdevice);
  MANDATORY(listen);
  MANDATORY(connect);
  MANDATORY(accept);
  MANDATORY(reg_mr);
  MANDATORY(dereg_mr);
  MANDATORY(isend);
  MANDATORY(irecv);
  MANDATORY(test);
  MANDATORY(close_send);
  MANDATORY(close_recv);
  MANDATORY(close_listen);
  MANDATORY(finalize);
#undef MANDATORY
  if (missing != NULL)
    return MC_FAIL(ncclInvalidUsage, "NET: %s's net table has no '%s'", origin, missing);
  /* A proxy abandoned inside a call that blocks (tp_net.c) would leave the
   * net a pointer into user memory that the user then frees. */
  if (ops->can_send_user_ptr && !ops->calls_never_block)
    return MC_FAIL(ncclInvalidUsage,
                   "NET: %s's net table (%s) says can_send_user_ptr but not calls_never_block: "
                   "a net whose calls may block must send from its registered slots",
                   origin, ops->name);
  return ncclSuccess;
}

ncclResult_t mc_net_find_builtin(const char *name, const struct mc_net_ops **ops_out)
{
  for (int i = 0; i < N_BUILTIN; i++) {
    if ((name != NULL) && (strcasecmp(name, builtin_nets[i]->name) == 0)) {
      *ops_out = builtin_nets[i];
      return ncclSuccess;
    }
  }
  return MC_FAIL(ncclInvalidArgument, "NET: no built-in net is called %s",
                 (name != NULL) ? name : "(null)");
}

ncclResult_t mc_net_select(const struct mc_net_ops **ops_out)
{
  const char *want = mc_param_str(MC_P_NET);
  const struct mc_net_ops *plugin = NULL;
  const struct mc_net_ops *nets[1 + N_BUILTIN];
  const char *plugin_why = NULL;
  char names[256];
  size_t used = 0;
  int n = 0;

  MC_CHECK(mc_net_plugin_get(&plugin, &plugin_why));
  if (plugin != NULL)
    nets[n++] = plugin;
  for (int i = 0; i < N_BUILTIN; i++) {
    MC_CHECK(mc_net_ops_validate(builtin_nets[i], "the built-in net"));
    nets[n++] = builtin_nets[i];
  }
  names[0] = '\0';
  for (int i = 0; i < n; i++) {
    const struct mc_net_ops *ops = nets[i];
    mc_str_appendf(names, sizeof(names), &used, "%s%s", (i > 0) ? ", " : "", ops->name);
    if ((want != NULL) && (strcasecmp(want, ops->name) != 0))
      continue;
    if (ops == plugin)
      MC_INFO(MC_SUB_INIT | MC_SUB_NET, "Using network %s (net plugin v%d, %s)%s%s", ops->name,
              mc_net_plugin_version(ops), mc_net_plugin_path(ops),
              (want != NULL) ? " NCCL_NET=" : "", (want != NULL) ? want : "");
    else if (want != NULL)
      MC_INFO(MC_SUB_INIT | MC_SUB_NET, "Using network %s (NCCL_NET=%s)", ops->name, want);
    else
      MC_INFO(MC_SUB_INIT | MC_SUB_NET, "Using network %s", ops->name);
    *ops_out = ops;
    return ncclSuccess;
  }
  return MC_FAIL(ncclInvalidUsage, "NET: NCCL_NET=%s names no network; the networks are: %s%s%s%s",
                 (want != NULL) ? want : "(unset)", names,
                 ((plugin == NULL) && (plugin_why != NULL) && (plugin_why[0] != '\0'))
                     ? " (no net plugin loaded: "
                     : "",
                 ((plugin == NULL) && (plugin_why != NULL)) ? plugin_why : "",
                 ((plugin == NULL) && (plugin_why != NULL) && (plugin_why[0] != '\0')) ? ")" : "");
}
