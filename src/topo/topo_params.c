/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The path, transport-check and NIC fusion options of src/topo from the
 * parameters (NCCL_P2P_LEVEL, NCCL_P2P_DISABLE, NCCL_NET_GDR_LEVEL,
 * NCCL_NET_MERGE_LEVEL, ...), with NCCL's validation: a level NCCL would not
 * parse is reported and ignored.
 */
#include "topo.h"

#include "check.h"
#include "log.h"
#include "params.h"

#include <strings.h>

static int level_param(enum mc_param_id id)
{
  const char *v = mc_param_str(id);
  int level;

  if (v == NULL)
    return -1;
  level = mc_topo_level_parse(v);
  if (level < 0)
    MC_WARN("%s='%s' is not a path level (LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB, SYS or "
            "0-5); using the default",
            mc_param_name(id), v);
  return level;
}

void mc_topo_paths_opts_from_params(struct mc_topo_paths_opts *opts)
{
  mc_topo_paths_opts_init(opts);
  opts->p2p_level = level_param(MC_P_P2P_LEVEL);
  opts->p2p_disable = mc_param_int(MC_P_P2P_DISABLE) != 0;
  opts->nvb_disable = mc_param_int(MC_P_NVB_DISABLE) != 0;
  opts->pxn_disable = mc_param_int(MC_P_PXN_DISABLE) != 0;
  opts->pxn_c2c = mc_param_int(MC_P_PXN_C2C) != 0;
  opts->net_gdr_level = level_param(MC_P_NET_GDR_LEVEL);
  opts->net_gdr_read = (int)mc_param_int(MC_P_NET_GDR_READ);
  opts->net_gdr_c2c = mc_param_int(MC_P_NET_GDR_C2C) != 0;
  opts->net_disable_intra = mc_param_int(MC_P_NET_DISABLE_INTRA) != 0;
  opts->shm_disable = mc_param_int(MC_P_SHM_DISABLE) != 0;
}

void mc_topo_net_opts_from_params(struct mc_topo_net_opts *opts)
{
  const char *level = mc_param_str(MC_P_NET_MERGE_LEVEL);
  const char *policy = mc_param_str(MC_P_NET_MERGE_POLICY);
  const char *force = mc_param_str(MC_P_NET_FORCE_MERGE);

  mc_topo_net_opts_init(opts);
  if (level != NULL) {
    int l = mc_topo_net_merge_level_parse(level);
    if (l < 0)
      MC_WARN("%s='%s' is not a merge level (LOC, PORT, PIX, PXB, P2C, PXN, PHB or SYS); using "
              "the default PORT",
              mc_param_name(MC_P_NET_MERGE_LEVEL), level);
    else
      opts->merge_level = l;
  }
  if (policy != NULL) {
    if (strcasecmp(policy, "RAIL") == 0)
      opts->merge_policy_rail = true;
    else if (strcasecmp(policy, "ALL") != 0)
      MC_WARN("%s='%s' is not a merge policy (ALL or RAIL); using the default ALL",
              mc_param_name(MC_P_NET_MERGE_POLICY), policy);
  }
  if ((force != NULL) && (force[0] != '\0'))
    opts->force_merge = force;
}
