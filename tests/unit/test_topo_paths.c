/* SPDX-License-Identifier: Apache-2.0 */
/*
 * System graph and paths against NCCL 2.30's own output. Fixtures in
 * tests/data/topo/golden/<name>/ (see the README there): topo.xml is the
 * NCCL_TOPO_DUMP_FILE output, a.txt the ncclTopoPrint lines of local rank 0
 * (a-rank<N>.txt for ranks that built another system), b1/b2/b3.txt the
 * GPU x GPU, GPU x NET and NET x GPU "TYPE/bw" cells of section [b] of the
 * golden 1node.txt, b4.txt (some files) its ncclTopoCheckGdr modes. Each case
 * replays init's order: net import with NIC fusion (on the dump), build, compute paths,
 * trim, compute paths, search init; then prints and compares exactly.
 */
#include "mc_test.h"
#include "mc_topo_fixture.h"

#include "topo/topo.h"
#include "topo/topo_xml.h"

#include <stdlib.h>
#include <string.h>

static char *dup_text(const char *s)
{
  char *d = malloc(strlen(s) + 1);
  if (d != NULL) {
    strcpy(d, s);
  }
  return d;
}

/* Compares line by line; fails naming the first differing line. */
static void expect_text(const char *what, const char *got, const char *exp_path)
{
  char *exp = dup_text(mc_t_read_file(exp_path));
  const char *g = got;
  const char *e = exp;
  int line = 1;

  if ((exp == NULL) || (exp[0] == '\0')) {
    free(exp);
    MC_T_FAIL("%s: expected file %s is missing or empty", what, exp_path);
  }
  while ((*g != '\0') || (*e != '\0')) {
    size_t gl = strcspn(g, "\n");
    size_t el = strcspn(e, "\n");
    if ((gl != el) || (strncmp(g, e, gl) != 0)) {
      char msg[2300];
      snprintf(msg, sizeof(msg), "%s line %d:\n  got:      %.*s\n  expected: %.*s", what, line,
               (int)(gl > 1000 ? 1000 : gl), g, (int)(el > 1000 ? 1000 : el), e);
      free(exp);
      MC_T_FAIL("%s", msg);
    }
    g += gl + ((g[gl] == '\n') ? 1 : 0);
    e += el + ((e[el] == '\n') ? 1 : 0);
    line++;
  }
  free(exp);
}

static void cell(FILE *f, const struct mc_topo_system *sys, int ft, int fi, int tt, int ti,
                 int first)
{
  fprintf(f, "%s%s/%g", first ? "" : " ",
          mc_topo_path_type_str(mc_topo_path_type(sys, ft, fi, tt, ti)),
          mc_topo_path_bw(sys, ft, fi, tt, ti));
}

static char *matrix(const struct mc_topo_system *sys, int ft, int tt)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);

  for (int i = 0; i < sys->nodes[ft].count; i++) {
    for (int j = 0; j < sys->nodes[tt].count; j++) {
      cell(f, sys, ft, i, tt, j, j == 0);
    }
    fprintf(f, "\n");
  }
  fclose(f);
  return buf;
}

/* Builds rank's final system as NCCL's init does. */
static struct mc_topo_system *final_system(const char *name, int rank)
{
  char path[512];
  struct mc_xml *xml = NULL;
  struct mc_topo_system *sys = NULL;
  struct mc_topo_paths_opts opts;
  int n_ranks;

  snprintf(path, sizeof(path), "topo/golden/%s/topo.xml", name);
  MC_T_OK(mc_xml_create(MC_XML_MAX_NODES, &xml));
  MC_T_OK(mc_xml_load_file(mc_t_data(path), xml));
  tt_import_nets(xml);
  MC_T_OK(mc_topo_system_from_xml(xml, tt_first_host_hash(xml), &sys));
  mc_xml_destroy(xml);
  n_ranks = sys->nodes[MC_TOPO_GPU].count;
  mc_topo_paths_opts_init(&opts);
  MC_T_OK(mc_topo_compute_paths(sys, &opts));
  MC_T_OK(mc_topo_trim_system(sys, rank, n_ranks, NULL));
  MC_T_OK(mc_topo_compute_paths(sys, &opts));
  mc_topo_search_init(sys);
  return sys;
}

static void check_transports(const char *name);

#define SEC_B1  0x1 /* GPU x GPU */
#define SEC_NET 0x2 /* b2, b3 and [a] (they depend on the NET nodes) */
#define SEC_C   0x4 /* [c] */
#define SEC_GDR 0x8 /* b4 (only some files have the fixture) */
#define SEC_ALL 0x7

/* b4: ncclTopoCheckGdr read=0 / read=1 for every GPU (rows) and NET. */
static char *gdr_matrix(const struct mc_topo_system *sys)
{
  static const char *modes[3] = {"Dis", "Def", "PCI"};
  struct mc_topo_paths_opts opts;
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);

  mc_topo_paths_opts_init(&opts);
  for (int i = 0; i < sys->nodes[MC_TOPO_GPU].count; i++) {
    int rank = sys->nodes[MC_TOPO_GPU].nodes[i]->gpu.rank;
    for (int j = 0; j < sys->nodes[MC_TOPO_NET].count; j++) {
      enum mc_topo_gdr_mode m0 = MC_TOPO_GDR_DISABLED;
      enum mc_topo_gdr_mode m1 = MC_TOPO_GDR_DISABLED;
      MC_T_OK(mc_topo_check_gdr(sys, &opts, rank, j, 0, &m0));
      MC_T_OK(mc_topo_check_gdr(sys, &opts, rank, j, 1, &m1));
      fprintf(f, "%s%s/%s", (j == 0) ? "" : " ", modes[m0], modes[m1]);
    }
    fprintf(f, "\n");
  }
  fclose(f);
  return buf;
}

static void check_golden_sections(const char *name, int rank, int sections)
{
  struct mc_topo_system *sys = final_system(name, rank);
  char suffix[32] = "";
  char exp[512];
  char what[256];
  char *text = NULL;
  size_t len = 0;
  FILE *f;
  static const struct {
    const char *file;
    int from;
    int to;
  } mats[3] = {{"b1", MC_TOPO_GPU, MC_TOPO_GPU},
               {"b2", MC_TOPO_GPU, MC_TOPO_NET},
               {"b3", MC_TOPO_NET, MC_TOPO_GPU}};

  if (rank != 0) {
    snprintf(suffix, sizeof(suffix), "-rank%d", rank);
  }
  for (int m = 0; m < 3; m++) {
    char *got = matrix(sys, mats[m].from, mats[m].to);
    snprintf(exp, sizeof(exp), "topo/golden/%s/%s%s.txt", name, mats[m].file, suffix);
    snprintf(what, sizeof(what), "%s %s%s", name, mats[m].file, suffix);
    if ((m > 0) && ((sys->nodes[MC_TOPO_NET].count == 0) || ((sections & SEC_NET) == 0))) {
      free(got);
      continue;
    }
    expect_text(what, got, mc_t_data(exp));
    free(got);
  }
  if ((sections & SEC_GDR) != 0) {
    char *got = gdr_matrix(sys);
    snprintf(exp, sizeof(exp), "topo/golden/%s/b4%s.txt", name, suffix);
    snprintf(what, sizeof(what), "%s b4%s", name, suffix);
    expect_text(what, got, mc_t_data(exp));
    free(got);
  }
  if ((sections & SEC_NET) == 0) {
    mc_topo_system_destroy(sys);
    return;
  }
  f = open_memstream(&text, &len);
  MC_T_OK(mc_topo_print(sys, f));
  fclose(f);
  snprintf(exp, sizeof(exp), "topo/golden/%s/a%s.txt", name, suffix);
  snprintf(what, sizeof(what), "%s [a]%s", name, suffix);
  expect_text(what, text, mc_t_data(exp));
  free(text);
  mc_topo_system_destroy(sys);
  if ((rank == 0) && ((sections & SEC_C) != 0)) {
    check_transports(name);
  }
}

static void check_golden(const char *name, int rank)
{
  check_golden_sections(name, rank, SEC_ALL);
}

/* Section [c]: for every ordered pair of local ranks, rank i's own final
 * system decides CheckP2p, CheckNet and the transport (P2P, SHM, NET). */
static void check_transports(const char *name)
{
  char exp[512];
  char what[256];
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  struct mc_topo_paths_opts opts;
  int n_ranks = 0;

  mc_topo_paths_opts_init(&opts);
  /* Every gpu with a rank in the fused XML is a local rank. */
  {
    struct mc_xml *xml = NULL;
    char path[512];
    snprintf(path, sizeof(path), "topo/golden/%s/topo.xml", name);
    MC_T_OK(mc_xml_create(MC_XML_MAX_NODES, &xml));
    MC_T_OK(mc_xml_load_file(mc_t_data(path), xml));
    n_ranks = 0;
    for (int i = 0; i < xml->n_nodes; i++) {
      if ((strcmp(xml->nodes[i].name, "gpu") == 0) &&
          (mc_xml_get_attr(&xml->nodes[i], "rank") != NULL)) {
        n_ranks++;
      }
    }
    mc_xml_destroy(xml);
  }
  for (int i = 0; i < n_ranks; i++) {
    struct mc_topo_system *sys = final_system(name, i);
    for (int j = 0; j < n_ranks; j++) {
      int p2p = 0;
      int read = 0;
      int inter = -1;
      int in_topo = (mc_topo_rank_to_index(sys, j) >= 0);
      int net;
      const char *tr;
      if (i == j) {
        continue;
      }
      MC_T_OK(mc_topo_check_p2p(sys, &opts, i, j, &p2p, &read, &inter));
      net = mc_topo_check_net(sys, &opts, i, j);
      tr = ((p2p != 0) && ((inter != -1) || (net == 0))) ? "P2P" : (net == 0) ? "SHM" : "NET";
      fprintf(f, "%d->%d  %d %d %d %d %d %d %s\n", i, j, p2p, read, inter, in_topo, net, in_topo,
              tr);
    }
    mc_topo_system_destroy(sys);
  }
  fclose(f);
  snprintf(exp, sizeof(exp), "topo/golden/%s/c.txt", name);
  snprintf(what, sizeof(what), "%s [c]", name);
  expect_text(what, text, mc_t_data(exp));
  free(text);
}

static void golden_aws_p4d(void)
{
  check_golden_sections("aws-p4d.24xlarge", 0, SEC_ALL | SEC_GDR);
}

static void golden_aws_p4de(void)
{
  check_golden("aws-p4de.24xlarge", 0);
}

static void golden_azure_ndv4(void)
{
  check_golden_sections("azure-ndv4-a100", 0, SEC_ALL | SEC_GDR);
}

static void golden_aws_g5(void)
{
  check_golden_sections("aws-g5.48xlarge", 0, SEC_ALL | SEC_GDR);
}

static void golden_syn_2s_intel(void)
{
  check_golden_sections("synthetic-2s-intel-4gpu-2sw-2nic", 0, SEC_ALL | SEC_GDR);
}

static void golden_syn_2s_intel_rank2(void)
{
  check_golden_sections("synthetic-2s-intel-4gpu-2sw-2nic", 2, SEC_ALL | SEC_GDR);
}

static void golden_syn_1s_amd(void)
{
  check_golden("synthetic-1s-amd-2gpu-nvlink4-1nic", 0);
}

static void golden_aws_p5_partial(void)
{
  check_golden("aws-p5.48xlarge-2023-partial", 0);
}

static void golden_aws_p5_handwritten(void)
{
  check_golden_sections("aws-p5.48xlarge-pr1226-handwritten", 0, SEC_ALL | SEC_GDR);
}

static void golden_azure_ncv4(void)
{
  check_golden("azure-ncv4-a100pcie", 0);
}

/* The HGX B200 VM: NCCL's IB-style NIC fusion turns 13 net devices into 3
 * virtual NICs (NET 13-15), which the dump (physical NICs) does not show;
 * tt_import_nets makes them again. */
static void golden_modal_b200(void)
{
  check_golden_sections("modal-gvisor-8xb200-hgx-vm", 0, SEC_ALL | SEC_GDR);
}

/* RCCL's version="2" files: NCCL refuses them ("XML Topology has wrong
 * version 2, 1 needed", ncclInvalidUsage), whichever layer sees it first. */
static void golden_rccl_refused(void)
{
  struct mc_xml *xml = NULL;
  struct mc_topo_system *sys = NULL;
  ncclResult_t res;

  MC_T_OK(mc_xml_create(MC_XML_MAX_NODES, &xml));
  res = mc_xml_load_file(mc_t_data("topo/golden/rccl-8p_pcie/topo.xml"), xml);
  if (res == ncclSuccess) {
    res = mc_topo_system_from_xml(xml, 0, &sys);
  }
  mc_xml_destroy(xml);
  MC_T_EQ_INT(res, ncclInvalidUsage);
  MC_T_NULL(sys);
  MC_T_CONTAINS(mc_t_last_error(), "wrong version 2, 1 needed");
}

static void level_names(void)
{
  MC_T_EQ_INT(mc_topo_level_parse("LOC"), MC_PATH_LOC);
  MC_T_EQ_INT(mc_topo_level_parse("NVB"), MC_PATH_NVB);
  MC_T_EQ_INT(mc_topo_level_parse("P2C"), MC_PATH_P2C);
  MC_T_EQ_INT(mc_topo_level_parse("PXN"), MC_PATH_PXN);
  MC_T_EQ_INT(mc_topo_level_parse("SYS"), MC_PATH_SYS);
  MC_T_EQ_INT(mc_topo_level_parse("NET"), -1); /* not a level */
  MC_T_EQ_INT(mc_topo_level_parse("pxb"), -1); /* case-sensitive */
  MC_T_EQ_INT(mc_topo_level_parse("0"), MC_PATH_LOC);
  MC_T_EQ_INT(mc_topo_level_parse("1"), MC_PATH_PIX);
  MC_T_EQ_INT(mc_topo_level_parse("2"), MC_PATH_PXB);
  MC_T_EQ_INT(mc_topo_level_parse("3"), MC_PATH_PHB);
  MC_T_EQ_INT(mc_topo_level_parse("4"), MC_PATH_SYS);
  MC_T_EQ_INT(mc_topo_level_parse("9"), MC_PATH_SYS);
  MC_T_EQ_STR(mc_topo_path_type_str(MC_PATH_DIS), "DIS");
}

/* NCCL_P2P_LEVEL=LOC on the NVLink pair: P2P refused, the path goes
 * through the CPU (PHB at the PCIe bandwidth). */
static void p2p_level_reroutes(void)
{
  struct mc_xml *xml = NULL;
  struct mc_topo_system *sys = NULL;
  struct mc_topo_paths_opts opts;
  int p2p = -1;
  int read = -1;
  int inter = 0;

  MC_T_OK(mc_xml_create(MC_XML_MAX_NODES, &xml));
  MC_T_OK(
      mc_xml_load_file(mc_t_data("topo/golden/synthetic-1s-amd-2gpu-nvlink4-1nic/topo.xml"), xml));
  MC_T_OK(mc_topo_system_from_xml(xml, tt_first_host_hash(xml), &sys));
  mc_xml_destroy(xml);
  mc_topo_paths_opts_init(&opts);
  MC_T_OK(mc_topo_compute_paths(sys, &opts));
  MC_T_OK(mc_topo_check_p2p(sys, &opts, 0, 1, &p2p, &read, &inter));
  MC_T_EQ_INT(p2p, 1);
  MC_T_EQ_INT(read, 1);
  MC_T_EQ_INT(inter, -1);
  opts.p2p_level = mc_topo_level_parse("LOC");
  MC_T_OK(mc_topo_compute_paths(sys, &opts));
  MC_T_EQ_STR(mc_topo_path_type_str(mc_topo_path_type(sys, MC_TOPO_GPU, 0, MC_TOPO_GPU, 1)), "PHB");
  MC_T_EQ_INT(mc_topo_path_hops(sys, MC_TOPO_GPU, 0, MC_TOPO_GPU, 1), 4);
  MC_T_TRUE(mc_topo_path_bw(sys, MC_TOPO_GPU, 0, MC_TOPO_GPU, 1) == 24.0f);
  mc_topo_system_destroy(sys);
}

MC_T_MAIN(golden_aws_p4d, golden_aws_p4de, golden_azure_ndv4, golden_aws_g5, golden_syn_2s_intel,
          golden_syn_2s_intel_rank2, golden_syn_1s_amd, golden_aws_p5_partial,
          golden_aws_p5_handwritten, golden_azure_ncv4, golden_modal_b200, golden_rccl_refused,
          level_names, p2p_level_reroutes)
