/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which nets exist and which one a communicator uses. Mirrors the choice of
 * NCCL 2.30's src/plugin/net.cc (ncclNetInit): the nets are tried in a
 * fixed order and NCCL_NET, when set, keeps only the one of that name
 * (case-insensitive). The order is an explicit array, visible and
 * replaceable, not constructor registration.
 */
#include "net.h"

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
  return ncclSuccess;
}

ncclResult_t mc_net_select(const struct mc_net_ops **ops_out)
{
  const char *want = mc_param_str(MC_P_NET);
  char names[256];
  size_t used = 0;

  names[0] = '\0';
  for (int i = 0; i < N_BUILTIN; i++) {
    const struct mc_net_ops *ops = builtin_nets[i];
    MC_CHECK(mc_net_ops_validate(ops, "the built-in net"));
    mc_str_appendf(names, sizeof(names), &used, "%s%s", (i > 0) ? ", " : "", ops->name);
    if ((want != NULL) && (strcasecmp(want, ops->name) != 0))
      continue;
    if (want != NULL)
      MC_INFO(MC_SUB_INIT | MC_SUB_NET, "Using network %s (NCCL_NET=%s)", ops->name, want);
    else
      MC_INFO(MC_SUB_INIT | MC_SUB_NET, "Using network %s", ops->name);
    *ops_out = ops;
    return ncclSuccess;
  }
  return MC_FAIL(ncclInvalidUsage, "NET: NCCL_NET=%s names no network; the networks are: %s",
                 (want != NULL) ? want : "(unset)", names);
}
