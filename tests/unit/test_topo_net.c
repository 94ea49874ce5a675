/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NIC fusion knobs of the net import (topo_net.c, topo_params.c):
 * NCCL_NET_MERGE_LEVEL, NCCL_NET_FORCE_MERGE and NCCL_NET_MERGE_POLICY, on
 * the Modal 8xB200 file (13 IB devices: by default fused into 3 NETs).
 */
#include "mc_test.h"
#include "mc_topo_fixture.h"

#include "params.h"
#include "topo/topo.h"
#include "topo/topo_xml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODAL "topo/modal-gvisor-8xb200-hgx-vm.xml"

/* The file's nets imported as meshccl-topo and NCCL_TOPO_FILE do; the result
 * of the import, and on success the NET count of the system and whether a
 * net of that name is in the XML. */
static ncclResult_t import_file(const char *rel, int *n_nets_out, const char *name,
                                bool *has_name_out)
{
  struct mc_xml *xml = NULL;
  struct mc_topo_system *sys = NULL;
  ncclResult_t res;

  MC_T_OK(mc_xml_create(MC_XML_MAX_NODES, &xml));
  MC_T_OK(mc_xml_load_file(mc_t_data(rel), xml));
  res = mc_topo_nets_from_file(xml);
  if (res == ncclSuccess) {
    MC_T_OK(mc_topo_system_from_xml(xml, tt_first_host_hash(xml), &sys));
    *n_nets_out = sys->nodes[MC_TOPO_NET].count;
    if (name != NULL) {
      *has_name_out = (mc_xml_find_tag_kv(xml, "net", "name", name) != NULL);
    }
    mc_topo_system_destroy(sys);
  }
  mc_xml_destroy(xml);
  return res;
}

static int modal_nets(void)
{
  int n = -1;
  MC_T_OK(import_file(MODAL, &n, NULL, NULL));
  return n;
}

static void reset_params(void)
{
  mc_param_set_for_tests(MC_P_NET_MERGE_LEVEL, NULL);
  mc_param_set_for_tests(MC_P_NET_FORCE_MERGE, NULL);
  mc_param_set_for_tests(MC_P_NET_MERGE_POLICY, NULL);
}

/* NCCL's table, prefix matched, case-sensitive. */
static void merge_level_names(void)
{
  MC_T_EQ_INT(mc_topo_net_merge_level_parse("LOC"), MC_PATH_LOC);
  MC_T_EQ_INT(mc_topo_net_merge_level_parse("PORT"), 1);
  MC_T_EQ_INT(mc_topo_net_merge_level_parse("PIX"), MC_PATH_PIX);
  MC_T_EQ_INT(mc_topo_net_merge_level_parse("PXB"), MC_PATH_PXB);
  MC_T_EQ_INT(mc_topo_net_merge_level_parse("P2C"), MC_PATH_P2C);
  MC_T_EQ_INT(mc_topo_net_merge_level_parse("PXN"), MC_PATH_PXN);
  MC_T_EQ_INT(mc_topo_net_merge_level_parse("PHB"), MC_PATH_PHB);
  MC_T_EQ_INT(mc_topo_net_merge_level_parse("SYS"), MC_PATH_SYS);
  MC_T_EQ_INT(mc_topo_net_merge_level_parse("PIXEL"), MC_PATH_PIX);
  MC_T_EQ_INT(mc_topo_net_merge_level_parse("pix"), -1);
  MC_T_EQ_INT(mc_topo_net_merge_level_parse("NVL"), -1);
  MC_T_EQ_INT(mc_topo_net_merge_level_parse(""), -1);
}

static void merge_level_param(void)
{
  struct mc_topo_net_opts opts;

  reset_params();
  mc_topo_net_opts_from_params(&opts);
  MC_T_EQ_INT(opts.merge_level, 1);
  MC_T_TRUE(!opts.merge_policy_rail);
  MC_T_NULL(opts.force_merge);
  MC_T_EQ_INT(modal_nets(), 3);

  /* LOC disables fusion: every IB device is a NET. */
  mc_param_set_for_tests(MC_P_NET_MERGE_LEVEL, "LOC");
  mc_topo_net_opts_from_params(&opts);
  MC_T_EQ_INT(opts.merge_level, MC_PATH_LOC);
  MC_T_EQ_INT(modal_nets(), 13);

  mc_param_set_for_tests(MC_P_NET_MERGE_LEVEL, "PXB");
  mc_topo_net_opts_from_params(&opts);
  MC_T_EQ_INT(opts.merge_level, MC_PATH_PXB);
  reset_params();
}

/* An unknown level or policy WARNs (naming variable and value) and keeps the
 * default. Runs in a child: it redirects the log to a file. */
static void invalid_values_child(void)
{
  char log[512];
  const char *text;
  struct mc_topo_net_opts opts;

  mc_t_tmp_path("warn.log", log, sizeof(log));
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("NCCL_DEBUG_FILE", log, 1);
  setenv("NCCL_NET_MERGE_LEVEL", "BOGUS", 1);
  setenv("NCCL_NET_MERGE_POLICY", "RAILS", 1);
  mc_param_reset_for_tests();
  mc_topo_net_opts_from_params(&opts);
  MC_T_EQ_INT(opts.merge_level, 1);
  MC_T_TRUE(!opts.merge_policy_rail);
  MC_T_EQ_INT(modal_nets(), 3);
  text = mc_t_read_file(log);
  MC_T_CONTAINS(text, "NCCL_NET_MERGE_LEVEL='BOGUS' is not a merge level (LOC, PORT, PIX, PXB, "
                      "P2C, PXN, PHB or SYS); using the default PORT");
  MC_T_CONTAINS(text, "NCCL_NET_MERGE_POLICY='RAILS' is not a merge policy (ALL or RAIL); using "
                      "the default ALL");
  mc_t_tmp_cleanup();
}

static void invalid_values(void)
{
  mc_t_run_in_child(invalid_values_child);
}

/* RAIL merges only devices with the same defined rail: the file's nets
 * report none, so nothing is fused. */
static void merge_policy_rail(void)
{
  struct mc_topo_net_opts opts;

  reset_params();
  mc_param_set_for_tests(MC_P_NET_MERGE_POLICY, "rail");
  mc_topo_net_opts_from_params(&opts);
  MC_T_TRUE(opts.merge_policy_rail);
  MC_T_EQ_INT(modal_nets(), 13);
  mc_param_set_for_tests(MC_P_NET_MERGE_POLICY, "ALL");
  MC_T_EQ_INT(modal_nets(), 3);
  reset_params();
}

/* Forced groups first (a port may be named), then the automatic merge of
 * what is left: {0,1} {5,6} forced; {2,3,4} {7,8} {9..12} at PORT. */
static void force_merge(void)
{
  int n = 0;
  bool has = false;

  reset_params();
  mc_param_set_for_tests(MC_P_NET_FORCE_MERGE, "mlx5_0,mlx5_1;;mlx5_5:1,mlx5_6");
  MC_T_OK(import_file(MODAL, &n, "mlx5_5+mlx5_6", &has));
  MC_T_EQ_INT(n, 5);
  MC_T_TRUE(has);
  MC_T_OK(import_file(MODAL, &n, "mlx5_2+mlx5_3+mlx5_4", &has));
  MC_T_TRUE(has);

  /* A group of one keeps that device out of the automatic merge. */
  mc_param_set_for_tests(MC_P_NET_FORCE_MERGE, "mlx5_4");
  MC_T_OK(import_file(MODAL, &n, "mlx5_0+mlx5_1+mlx5_2+mlx5_3", &has));
  MC_T_EQ_INT(n, 4);
  MC_T_TRUE(has);

  /* With LOC only the forced groups are fused. */
  mc_param_set_for_tests(MC_P_NET_MERGE_LEVEL, "LOC");
  mc_param_set_for_tests(MC_P_NET_FORCE_MERGE, "mlx5_9,mlx5_10,mlx5_11,mlx5_12");
  MC_T_OK(import_file(MODAL, &n, NULL, NULL));
  MC_T_EQ_INT(n, 10);
  reset_params();
}

static void force_merge_errors(void)
{
  int n = 0;

  reset_params();
  mc_param_set_for_tests(MC_P_NET_FORCE_MERGE, "mlx5_0,mlx5_77");
  MC_T_EQ_INT(import_file(MODAL, &n, NULL, NULL), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "TOPO/NET : Only matched 1 devices, 2 requested from "
                                   "mlx5_0,mlx5_77 (NCCL_NET_FORCE_MERGE=mlx5_0,mlx5_77)");
  MC_T_CONTAINS(mc_t_last_error(), "mlx5_12:4");

  mc_param_set_for_tests(MC_P_NET_FORCE_MERGE, "mlx5_0:2,mlx5_1");
  MC_T_EQ_INT(import_file(MODAL, &n, NULL, NULL), ncclInvalidUsage);

  mc_param_set_for_tests(MC_P_NET_FORCE_MERGE, "mlx5_0,mlx5_1;mlx5_1,mlx5_2");
  MC_T_EQ_INT(import_file(MODAL, &n, NULL, NULL), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "names device mlx5_1 (1) twice");

  mc_param_set_for_tests(MC_P_NET_FORCE_MERGE,
                         "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7,mlx5_8");
  MC_T_EQ_INT(import_file(MODAL, &n, NULL, NULL), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "names more than 8 devices");

  /* Across the two NUMA nodes: refused, as NCCL. */
  mc_param_set_for_tests(MC_P_NET_FORCE_MERGE, "mlx5_0,mlx5_12");
  MC_T_EQ_INT(import_file(MODAL, &n, NULL, NULL), ncclInvalidArgument);
  MC_T_CONTAINS(mc_t_last_error(), "different NUMA domains");
  reset_params();
}

MC_T_MAIN(merge_level_names, merge_level_param, invalid_values, merge_policy_rail, force_merge,
          force_merge_errors)
