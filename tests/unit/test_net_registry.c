/* SPDX-License-Identifier: Apache-2.0 */
/* The net registry: NCCL_NET chooses by name (case-insensitive), a name that
 * is no net fails naming the nets that exist, a table with a missing
 * member or another ABI is refused naming it, and so is a table whose
 * properties contradict each other. The built-in nets' properties are
 * those the layers above rely on (the external plugins' are checked in
 * test_net_plugin.c). */
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
  MC_T_CONTAINS(mc_t_last_error(), "has ABI 4, this library needs 3");
  /* get_progress is optional: a net without it passes. */
  ops = mc_net_socket_ops;
  ops.get_progress = NULL;
  MC_T_OK(mc_net_ops_validate(&ops, "test"));
}

static void inconsistent_properties_are_refused(void)
{
  struct mc_net_ops ops = mc_net_mesh_ops;

  /* sending user pointers is only safe when no call is ever abandoned */
  ops.calls_never_block = false;
  MC_T_EQ_INT(mc_net_ops_validate(&ops, "libfake.so"), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(),
                "NET: libfake.so's net table (Mesh) says can_send_user_ptr but not "
                "calls_never_block");
  /* the conservative values together are consistent */
  ops.can_send_user_ptr = false;
  MC_T_OK(mc_net_ops_validate(&ops, "test"));
  /* a net that never blocks may still copy into its slots */
  ops.calls_never_block = true;
  MC_T_OK(mc_net_ops_validate(&ops, "test"));
}

static void socket_properties(void)
{
  const struct mc_net_ops *ops = &mc_net_socket_ops;

  MC_T_OK(mc_net_ops_validate(ops, "the built-in net"));
  MC_T_TRUE(ops->calls_never_block);
  MC_T_TRUE(ops->can_send_user_ptr);
  MC_T_TRUE(ops->is_fallback);
  MC_T_NULL(ops->failover_ms);
  MC_T_NULL(ops->node_orders);
}

static void mesh_properties(void)
{
  const struct mc_net_ops *ops = &mc_net_mesh_ops;

  MC_T_OK(mc_net_ops_validate(ops, "the built-in net"));
  MC_T_TRUE(ops->calls_never_block);
  MC_T_TRUE(ops->can_send_user_ptr);
  MC_T_TRUE(!ops->is_fallback);
  MC_T_TRUE(ops->node_orders != NULL);
  MC_T_TRUE(ops->failover_ms != NULL);
  /* MESHCCL_MESH_LINK_TIMEOUT_MS + MESHCCL_MESH_ROUTE_TIMEOUT_MS */
  mc_param_reset_for_tests();
  MC_T_EQ_INT(ops->failover_ms(), 3000 + 20000);
  mc_param_set_for_tests(MC_P_MESH_LINK_TIMEOUT_MS, "1000");
  mc_param_set_for_tests(MC_P_MESH_ROUTE_TIMEOUT_MS, "500");
  MC_T_EQ_INT(ops->failover_ms(), 1500);
  mc_param_reset_for_tests();
}

MC_T_MAIN(default_is_socket, nccl_net_chooses_by_name, unknown_net_is_named,
          incomplete_table_is_refused, inconsistent_properties_are_refused, socket_properties,
          mesh_properties)
