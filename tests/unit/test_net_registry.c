/* SPDX-License-Identifier: Apache-2.0 */
/* The net registry: NCCL_NET chooses by name (case-insensitive), a name that
 * is no net fails naming the nets that exist, and a table with a missing
 * member or another ABI is refused naming it. */
#include "mc_test.h"

#include "net/net.h"
#include "params.h"

#include <string.h>

static void default_is_socket(void)
{
  const struct mc_net_ops *ops = NULL;

  mc_param_reset_for_tests();
  MC_T_OK(mc_net_select(&ops));
  MC_T_TRUE(ops == &mc_net_socket_ops);
  MC_T_EQ_STR(ops->name, "Socket");
}

static void nccl_net_chooses_by_name(void)
{
  const struct mc_net_ops *ops = NULL;

  mc_param_set_for_tests(MC_P_NET, "socket");
  MC_T_OK(mc_net_select(&ops));
  MC_T_TRUE(ops == &mc_net_socket_ops);
  mc_param_reset_for_tests();
}

static void unknown_net_is_named(void)
{
  const struct mc_net_ops *ops = NULL;

  mc_param_set_for_tests(MC_P_NET, "IB");
  MC_T_EQ_INT(mc_net_select(&ops), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "NCCL_NET=IB names no network; the networks are: Socket, Mesh");
  MC_T_NULL(ops);
  mc_param_reset_for_tests();
}

static void incomplete_table_is_refused(void)
{
  struct mc_net_ops ops = mc_net_socket_ops;

  MC_T_OK(mc_net_ops_validate(&ops, "test"));
  ops.irecv = NULL;
  MC_T_EQ_INT(mc_net_ops_validate(&ops, "libfake.so"), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "libfake.so's net table has no 'irecv'");
  ops = mc_net_socket_ops;
  ops.abi = MC_NET_OPS_ABI + 1;
  MC_T_EQ_INT(mc_net_ops_validate(&ops, "libfake.so"), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "has ABI 3, this library needs 2");
  /* get_progress is optional: a net without it passes. */
  ops = mc_net_socket_ops;
  ops.get_progress = NULL;
  MC_T_OK(mc_net_ops_validate(&ops, "test"));
}

MC_T_MAIN(default_is_socket, nccl_net_chooses_by_name, unknown_net_is_named,
          incomplete_table_is_refused)
