/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-topo [--xml FILE]: treats an NCCL topology file (without --xml,
 * this host as detected) as the host NCCL would run on and prints what NCCL
 * 2.30's init would conclude:
 * the ncclTopoPrint lines of local rank 0's final system, the path matrix
 * between GPUs and NETs (type/bandwidth, like `nvidia-smi topo -m`), the
 * ncclTopoCheckP2p result per GPU pair, and the transport each ordered pair of
 * local ranks would use (P2P, else SHM, else NET, NCCL's selectTransport order) with the
 * reason. --json prints the same facts for scripts (docs/TOOLS.md), --dot /
 * --svg draw the system, --dump writes the XML used, --env the parameters.
 *
 * This file parses the command line, loads or detects the XML, numbers the
 * local ranks, builds each rank's system and decides each pair's transport
 * (struct topo_ctx, tools/topo/topo_tool.h); each output form is a file of
 * tools/topo/: topo_text.c, topo_json.c, topo_dot.c, topo_graphs.c (--graphs).
 *
 * Init order as initTransportsRank: load -> mc_topo_system_from_xml ->
 * mc_topo_compute_paths -> mc_topo_trim_system -> mc_topo_compute_paths (when
 * the trim removed a GPU) -> mc_topo_search_init, each local rank on its own
 * system.
 *
 * Exit codes: 0 success, 2 bad input or usage, 3 internal failure.
 */
#include "topo_tool.h"
#include "net/mesh/mesh.h"
#include "topo_graphs.h"

#include "core/check.h"
#include "core/log.h"
#include "core/params.h"
#include "core/utils.h"
#include "topo/topo.h"
#include "topo/topo_detect.h"
#include "net/net.h"
#include "topo/topo_xml.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void usage(FILE *out, const char *prog)
{
  fprintf(out,
          "usage: %s [--xml FILE] [--ranks N] [--nodes N] [--graphs] [--json] [--dump OUT.xml]\n"
          "          [--dot OUT.dot] [--svg OUT.svg] [--env [--markdown]] [--nics net|sysfs]\n"
          "       %s --env [--markdown]\n"
          "       %s --mesh [--mesh-wait MS]\n"
          "\n"
          "Treats an NCCL topology file (NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE format) as the\n"
          "host NCCL 2.30 would run on, and prints local rank 0's final system (ncclTopoPrint),\n"
          "the path matrix between GPUs and NETs (NCCL path type / bandwidth in GB/s), the\n"
          "P2P check per GPU pair and the transport each pair of local ranks would use\n"
          "(P2P, else SHM, else NET) with the reason. NCCL_P2P_LEVEL, NCCL_P2P_DISABLE,\n"
          "NCCL_SHM_DISABLE, NCCL_NET_GDR_LEVEL, ... apply (see --env).\n"
          "\n"
          "  --xml FILE     the topology file; local rank i drives the GPU whose rank attribute\n"
          "                 is i (else the i-th GPU in PCI bus-id order)\n"
          "  --ranks N      use only local ranks 0..N-1 (the other GPUs are left out)\n"
          "  --nodes N      the file describes each of N identical hosts; rank = node*ranks+local\n"
          "  --graphs       search rings and trees on every local rank and connect the nodes:\n"
          "                 NCCL's graph lines, then each rank's rings, trees and channels\n"
          "  --json         the same facts as JSON (schema in docs/TOOLS.md)\n"
          "  --dump FILE    write the XML the system was built from\n"
          "  --dot FILE     write a Graphviz picture of the system: a box per CPU holding its\n"
          "                 PCI tree; with --nodes N, the hosts and their NICs instead\n"
          "  --svg FILE     render it with Graphviz's dot (must be installed)\n"
          "  --nics net|sysfs  without --xml: the NICs are the devices of the net init would\n"
          "                 use (net, the default: NCCL_NET, NCCL_NET_PLUGIN apply) or the\n"
          "                 running interfaces of /sys/class/net (sysfs)\n"
          "  --env          list the parameters in effect (--markdown: docs/ENV.md format)\n"
          "  --mesh         the Mesh net on this host: its NICs and lanes, then the hosts, links,\n"
          "                 shape and routes its discovery learns in --mesh-wait MS (2000)\n"
          "\n"
          "Without --xml: this host, detected from sysfs (MESHCCL_SYSFS_ROOT), as --ranks N\n"
          "local ranks (default 1), its NICs as --nics says.\n"
          "Exit status: 0 success, 2 bad input or usage, 3 internal failure.\n",
          prog, prog, prog);
}

/* --------------------------------------------------------------- errors */

static int exit_code_of(ncclResult_t res)
{
  return ((res == ncclInvalidUsage) || (res == ncclInvalidArgument)) ? MC_TOPO_TOOL_EXIT_BAD_INPUT
                                                                     : MC_TOPO_TOOL_EXIT_INTERNAL;
}

/* Prints the recorded error, prefixed with the file when it does not name it. */
static int report(const char *file, ncclResult_t res, const char *what)
{
  const char *msg = mc_error_last();

  if ((msg != NULL) && (msg[0] != '\0')) {
    bool named = (strncmp(msg, file, strlen(file)) == 0);
    fprintf(stderr, "meshccl-topo: %s%s%s\n", named ? "" : file, named ? "" : ": ", msg);
  } else {
    fprintf(stderr, "meshccl-topo: %s failed: %s\n", what, ncclGetErrorString(res));
  }
  return exit_code_of(res);
}

/* ------------------------------------------------------------ arguments */

static int parse_count(const char *prog, const char *opt, const char *val, int *out)
{
  char *end = NULL;
  long v;

  if (val == NULL) {
    fprintf(stderr, "meshccl-topo: %s needs a value\n", opt);
    usage(stderr, prog);
    return MC_TOPO_TOOL_EXIT_BAD_INPUT;
  }
  errno = 0;
  v = strtol(val, &end, 10);
  if ((errno != 0) || (end == val) || (*end != '\0') || (v < 1) || (v > 65536)) {
    fprintf(stderr, "meshccl-topo: %s %s: expected a count from 1 to 65536\n", opt, val);
    usage(stderr, prog);
    return MC_TOPO_TOOL_EXIT_BAD_INPUT;
  }
  *out = (int)v;
  return 0;
}

static int parse_args(int argc, char **argv, struct cli *cli)
{
  cli->n_ranks = -1;
  cli->n_nodes = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = (i + 1 < argc) ? argv[i + 1] : NULL;
    const char **str_opt = NULL;
    int rc;

    if ((strcmp(a, "--help") == 0) || (strcmp(a, "-h") == 0)) {
      usage(stdout, argv[0]);
      exit(0);
    } else if (strcmp(a, "--json") == 0) {
      cli->json = true;
    } else if (strcmp(a, "--graphs") == 0) {
      cli->graphs = true;
    } else if (strcmp(a, "--mesh") == 0) {
      cli->mesh = true;
    } else if (strcmp(a, "--mesh-wait") == 0) {
      if ((rc = parse_count(argv[0], a, val, &cli->mesh_wait_ms)) != 0) {
        return rc;
      }
      i++;
    } else if (strcmp(a, "--env") == 0) {
      cli->env = true;
    } else if (strcmp(a, "--markdown") == 0) {
      cli->markdown = true;
    } else if (strcmp(a, "--ranks") == 0) {
      if ((rc = parse_count(argv[0], a, val, &cli->n_ranks)) != 0) {
        return rc;
      }
      i++;
    } else if (strcmp(a, "--nodes") == 0) {
      if ((rc = parse_count(argv[0], a, val, &cli->n_nodes)) != 0) {
        return rc;
      }
      i++;
    } else if (strcmp(a, "--nics") == 0) {
      if ((val == NULL) || ((strcmp(val, "net") != 0) && (strcmp(val, "sysfs") != 0))) {
        fprintf(stderr, "meshccl-topo: --nics takes 'net' or 'sysfs'\n");
        usage(stderr, argv[0]);
        return MC_TOPO_TOOL_EXIT_BAD_INPUT;
      }
      cli->nics_sysfs = (strcmp(val, "sysfs") == 0);
      i++;
    } else if (strcmp(a, "--xml") == 0) {
      str_opt = &cli->xml_path;
    } else if (strcmp(a, "--dump") == 0) {
      str_opt = &cli->dump_path;
    } else if (strcmp(a, "--dot") == 0) {
      str_opt = &cli->dot_path;
    } else if (strcmp(a, "--svg") == 0) {
      str_opt = &cli->svg_path;
    } else {
      fprintf(stderr, "meshccl-topo: unknown argument '%s'\n", a);
      usage(stderr, argv[0]);
      return MC_TOPO_TOOL_EXIT_BAD_INPUT;
    }
    if (str_opt != NULL) {
      if ((val == NULL) || (val[0] == '\0')) {
        fprintf(stderr, "meshccl-topo: %s needs a file name\n", a);
        usage(stderr, argv[0]);
        return MC_TOPO_TOOL_EXIT_BAD_INPUT;
      }
      *str_opt = val;
      i++;
    }
  }
  if (cli->markdown && !cli->env) {
    fprintf(stderr, "meshccl-topo: --markdown goes with --env\n");
    usage(stderr, argv[0]);
    return MC_TOPO_TOOL_EXIT_BAD_INPUT;
  }
  if (cli->env && cli->json) {
    fprintf(stderr, "meshccl-topo: --env prints text; use it without --json\n");
    usage(stderr, argv[0]);
    return MC_TOPO_TOOL_EXIT_BAD_INPUT;
  }
  return 0;
}

/* --------------------------------------------------------------- ranks */

static const char *gpu_busid(const struct mc_xml_node *gpu)
{
  const char *b = (gpu->parent != NULL) ? mc_xml_get_attr(gpu->parent, "busid") : NULL;
  return (b != NULL) ? b : "";
}

/* The gpu elements of the tree in document order, walking from the root
 * (removed subtrees are not reached; detected elements count too). */
static void collect_gpus(struct mc_xml_node *node, struct mc_xml_node **gpus, int *n)
{
  if (strcmp(node->name, "gpu") == 0)
    gpus[(*n)++] = node;
  for (int s = 0; s < node->n_subs; s++)
    collect_gpus(node->subs[s], gpus, n);
}

static int cmp_busid(const void *a, const void *b)
{
  const struct mc_xml_node *const *x = a;
  const struct mc_xml_node *const *y = b;
  return strcasecmp(gpu_busid(*x), gpu_busid(*y));
}

/*
 * Local rank i drives the GPU whose rank attribute is i when every GPU has
 * one and they number 0..n-1; else the i-th GPU in PCI bus-id order (CUDA's
 * and NVML's order). Then --ranks N leaves the GPUs of ranks >= N without a rank,
 * which mc_topo_system_from_xml skips (as NCCL's ncclTopoAddPci).
 */
static ncclResult_t assign_ranks(struct topo_ctx *ctx)
{
  struct mc_xml *xml = ctx->xml;
  struct mc_xml_node **gpus = NULL;
  bool *seen = NULL;
  int n = 0;
  bool valid = true;
  ncclResult_t res = ncclSuccess;

  gpus = calloc((size_t)xml->n_nodes + 1, sizeof(*gpus));
  seen = calloc((size_t)xml->n_nodes + 1, sizeof(*seen));
  if ((gpus == NULL) || (seen == NULL)) {
    fprintf(stderr, "meshccl-topo: out of memory\n");
    res = ncclSystemError;
    goto out;
  }
  if (xml->n_nodes > 0)
    collect_gpus(&xml->nodes[0], gpus, &n);
  for (int g = 0; (g < n) && valid; g++) {
    const char *r = mc_xml_get_attr(gpus[g], "rank");
    char *end = NULL;
    long v = (r != NULL) ? strtol(r, &end, 0) : -1;
    if ((r == NULL) || (end == r) || (v < 0) || (v >= n) || seen[v]) {
      valid = false;
    } else {
      seen[v] = true;
    }
  }
  if (!valid) {
    qsort(gpus, (size_t)n, sizeof(*gpus), cmp_busid);
    for (int g = 0; g < n; g++) {
      MC_CHECK_GOTO(mc_xml_set_attr_int(gpus[g], "rank", g), res, out);
    }
    ctx->ranks_by_busid = true;
  }
  if (ctx->cli.n_ranks > n) {
    fprintf(stderr, "meshccl-topo: --ranks %d: %s has only %d GPU(s)\n", ctx->cli.n_ranks,
            (ctx->cli.xml_path != NULL) ? ctx->cli.xml_path : "this host", n);
    res = ncclInvalidUsage;
    goto out;
  }
  ctx->n_local = n;
  if (ctx->cli.n_ranks > 0) {
    for (int g = 0; g < n; g++) {
      int r = 0;
      MC_CHECK_GOTO(mc_xml_get_attr_int(gpus[g], "rank", &r), res, out);
      if (r >= ctx->cli.n_ranks) {
        /* As NCCL's detection, which only adds the GPUs of local ranks. */
        MC_CHECK_GOTO(mc_xml_remove_node((gpus[g]->parent != NULL) ? gpus[g]->parent : gpus[g]),
                      res, out);
      }
    }
    ctx->n_local = ctx->cli.n_ranks;
  }
out:
  free(gpus);
  free(seen);
  return res;
}

static uint64_t first_host_hash(const struct mc_xml *xml)
{
  for (int i = 0; i < xml->n_nodes; i++) {
    if ((xml->nodes[i].type != MC_XML_NODE_NONE) && (strcmp(xml->nodes[i].name, "cpu") == 0)) {
      const char *h = mc_xml_get_attr(&xml->nodes[i], "host_hash");
      return (h != NULL) ? strtoull(h, NULL, 16) : 0;
    }
  }
  return 0;
}

/* -------------------------------------------------------------- systems */

/* Local rank my_rank's final system, in initTransportsRank's order. */
static ncclResult_t build_system(const struct topo_ctx *ctx, int my_rank,
                                 struct mc_topo_system **sys_out)
{
  struct mc_topo_system *sys = NULL;
  bool removed = false;
  ncclResult_t res;

  MC_CHECK(mc_topo_system_from_xml(ctx->xml, ctx->host_hash, &sys));
  MC_CHECK_GOTO(mc_topo_compute_paths(sys, &ctx->opts), res, fail);
  MC_CHECK_GOTO(mc_topo_trim_system(sys, my_rank, ctx->n_local * ctx->cli.n_nodes, &removed), res,
                fail);
  if (removed) {
    MC_CHECK_GOTO(mc_topo_compute_paths(sys, &ctx->opts), res, fail);
  }
  mc_topo_search_init(sys);
  *sys_out = sys;
  return ncclSuccess;
fail:
  mc_topo_system_destroy(sys);
  return res;
}

static ncclResult_t decide(const struct topo_ctx *ctx, int i, int j, struct pair_decision *d)
{
  struct mc_topo_transport_choice c;

  MC_CHECK(mc_topo_transport_select(ctx->systems[i], &ctx->opts, i, j, true, true, &c));
  memset(d, 0, sizeof(*d));
  d->p2p = c.p2p;
  d->read = c.read;
  d->inter = c.inter;
  d->net = c.net;
  d->in_topo = c.in_topo;
  d->transport = mc_topo_transport_str(c.transport);
  snprintf(d->reason, sizeof(d->reason), "%s", c.reason);
  return ncclSuccess;
}

static ncclResult_t build_all(struct topo_ctx *ctx)
{
  int n_sys = (ctx->n_local > 0) ? ctx->n_local : 1;
  int n = ctx->n_local;

  ctx->systems = calloc((size_t)n_sys, sizeof(*ctx->systems));
  ctx->pairs = calloc((size_t)n * (size_t)n + 1, sizeof(*ctx->pairs));
  if ((ctx->systems == NULL) || (ctx->pairs == NULL)) {
    fprintf(stderr, "meshccl-topo: out of memory\n");
    return ncclSystemError;
  }
  for (int r = 0; r < n_sys; r++) {
    MC_CHECK(build_system(ctx, r, &ctx->systems[r]));
  }
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) {
      if (i != j) {
        MC_CHECK(decide(ctx, i, j, &ctx->pairs[i * n + j]));
      }
    }
  }
  return ncclSuccess;
}

static void free_all(struct topo_ctx *ctx)
{
  int n_sys = (ctx->n_local > 0) ? ctx->n_local : 1;

  if (ctx->systems != NULL) {
    for (int r = 0; r < n_sys; r++) {
      mc_topo_system_destroy(ctx->systems[r]);
    }
  }
  free(ctx->systems);
  free(ctx->pairs);
  mc_xml_destroy(ctx->xml);
}

static const char *source_name(const struct topo_ctx *ctx)
{
  return (ctx->cli.xml_path != NULL) ? ctx->cli.xml_path : "this host";
}

static int write_dump(const struct topo_ctx *ctx)
{
  FILE *f = fopen(ctx->cli.dump_path, "w");
  ncclResult_t res;

  if (f == NULL) {
    fprintf(stderr, "meshccl-topo: cannot write %s: %s\n", ctx->cli.dump_path, strerror(errno));
    return MC_TOPO_TOOL_EXIT_BAD_INPUT;
  }
  res = mc_xml_dump(ctx->xml, f);
  if ((fclose(f) != 0) && (res == ncclSuccess)) {
    fprintf(stderr, "meshccl-topo: cannot write %s: %s\n", ctx->cli.dump_path, strerror(errno));
    return MC_TOPO_TOOL_EXIT_INTERNAL;
  }
  return (res == ncclSuccess) ? 0 : report(source_name(ctx), res, "dump");
}

/* ---------------------------------------------------------------- main */

/* This host as N local ranks (--ranks, default 1) would see it: each rank's
 * detection (MESHCCL_SYSFS_ROOT applies) with the devices of the net init
 * would choose as its NICs (NCCL_NET, NCCL_NET_PLUGIN; --nics sysfs: the
 * running interfaces of /sys/class/net instead), fused in rank order as init
 * does. */
static ncclResult_t detect_host(struct topo_ctx *ctx)
{
  int n = (ctx->cli.n_ranks > 0) ? ctx->cli.n_ranks : 1;
  uint64_t host_hash = mc_host_hash();
  struct mc_net_init_args args = {.comm_id = 0, .secret = NULL, .abort_flag = NULL};
  const struct mc_net_ops *net = NULL;
  void *net_ctx = NULL;
  struct mc_xml *one = NULL;
  ncclResult_t res = ncclSuccess;

  if (!ctx->cli.nics_sysfs) {
    MC_CHECK(mc_net_select(&net));
    MC_CHECK(net->init(&args, &net_ctx));
  }
  MC_CHECK_GOTO(mc_xml_create(256, &one), res, out);
  for (int r = 0; r < n; r++) {
    struct mc_topo_detect_rank me = {.rank = r,
                                     .dev = r,
                                     .numa_node = -1,
                                     .host_hash = host_hash,
                                     .skip_nics = !ctx->cli.nics_sysfs};
    mc_xml_clear(one);
    MC_CHECK_GOTO(mc_topo_detect(NULL, &me, one), res, out);
    if (net != NULL) {
      MC_CHECK_GOTO(mc_topo_nets_from_net(one, NULL, host_hash, net, net_ctx, false), res, out);
    }
    MC_CHECK_GOTO(mc_xml_fuse(ctx->xml, one), res, out);
  }
out:
  mc_xml_destroy(one);
  if (net_ctx != NULL) {
    (void)net->finalize(net_ctx);
  }
  return res;
}

/* GPUs that are bare PCI leaves (AWS's static p4d files) get their <gpu>
 * as NVML would fill them. A file without any GPU (AWS's p5 file) is
 * completed as NCCL completes it on a real host: each local rank's device
 * comes from this host's detection, under the file's CPU of its NUMA node;
 * the file's NICs stay the net devices. */
static ncclResult_t complete_partial(struct topo_ctx *ctx)
{
  int n = 0;
  int ranks = (ctx->cli.n_ranks > 0) ? ctx->cli.n_ranks : 1;
  uint64_t host_hash = mc_host_hash();
  int added = 0;

  MC_CHECK(mc_topo_gpus_from_file(ctx->xml, &added));
  if (added > 0) {
    fprintf(stderr,
            "meshccl-topo: %s: %d GPU PCI device(s) without <gpu> completed in bus-id order, as "
            "NVML would on that server (no NVLink information)\n",
            ctx->cli.xml_path, added);
    return ncclSuccess;
  }

  for (int i = 0; (i < ctx->xml->n_nodes) && (n == 0); i++) {
    if ((ctx->xml->nodes[i].type != MC_XML_NODE_NONE) &&
        (strcmp(ctx->xml->nodes[i].name, "gpu") == 0)) {
      n++;
    }
  }
  if (n > 0) {
    return ncclSuccess;
  }
  fprintf(stderr,
          "meshccl-topo: %s has no GPU: completed with %d device(s) detected on this host, "
          "as NCCL completes partial files\n",
          ctx->cli.xml_path, ranks);
  for (int r = 0; r < ranks; r++) {
    struct mc_topo_detect_rank me = {
        .rank = r, .dev = r, .numa_node = -1, .host_hash = host_hash, .skip_nics = true};
    MC_CHECK(mc_topo_detect(NULL, &me, ctx->xml));
  }
  return ncclSuccess;
}

static int run(struct topo_ctx *ctx)
{
  ncclResult_t res;
  int rc;

  res = mc_xml_create(MC_XML_MAX_NODES, &ctx->xml);
  if (res != ncclSuccess) {
    return report(source_name(ctx), res, "XML allocation");
  }
  res = (ctx->cli.xml_path != NULL) ? mc_xml_load_file(ctx->cli.xml_path, ctx->xml)
                                    : detect_host(ctx);
  if (res != ncclSuccess) {
    return report(source_name(ctx), res, (ctx->cli.xml_path != NULL) ? "load" : "detection");
  }
  if ((ctx->cli.xml_path != NULL) && ((res = complete_partial(ctx)) != ncclSuccess)) {
    return report(source_name(ctx), res, "completion by detection");
  }
  res = assign_ranks(ctx);
  if (res != ncclSuccess) {
    return (res == ncclInvalidUsage) ? MC_TOPO_TOOL_EXIT_BAD_INPUT
                                     : report(source_name(ctx), res, "rank assignment");
  }
  /* A <gpu> without gdr gets gdrSupport 1, as on the GPU servers the files describe. */
  res = mc_topo_xml_gpus_complete(ctx->xml, 1, NULL);
  if (res != ncclSuccess) {
    return report(source_name(ctx), res, "completion");
  }
  ctx->host_hash = (ctx->cli.xml_path != NULL) ? first_host_hash(ctx->xml) : mc_host_hash();
  mc_topo_paths_opts_from_params(&ctx->opts);
  if (ctx->cli.dump_path != NULL) {
    if ((rc = write_dump(ctx)) != 0) {
      return rc;
    }
  }
  /* After the dump: NCCL dumps physical NICs only, then fuses virtual ones. */
  /* A file's nets become devices through NCCL's net import; detected ones are already. */
  res = (ctx->cli.xml_path != NULL) ? mc_topo_nets_from_file(ctx->xml) : ncclSuccess;
  if (res != ncclSuccess) {
    return report(source_name(ctx), res, "net import");
  }
  res = build_all(ctx);
  if (res != ncclSuccess) {
    return report(source_name(ctx), res, "system");
  }
  if (ctx->cli.graphs) {
    res = (ctx->n_local > 0) ? topo_graphs_print(ctx->systems, ctx->n_local, ctx->cli.n_nodes,
                                                 ctx->cli.json, stdout)
                             : MC_FAIL(ncclInvalidUsage, "no GPU to search graphs over");
  } else {
    res = ctx->cli.json ? topo_json_print(ctx, stdout) : topo_text_print(ctx, stdout);
  }
  if (res != ncclSuccess) {
    return report(source_name(ctx), res, "print");
  }
  if (ctx->cli.env) {
    fprintf(stdout, "\nParameters:\n");
    mc_param_dump(stdout, ctx->cli.markdown, false);
  }
  if ((ctx->cli.dot_path != NULL) && ((rc = topo_dot_write_file(ctx, ctx->cli.dot_path)) != 0)) {
    return rc;
  }
  if ((ctx->cli.svg_path != NULL) && ((rc = topo_dot_render_svg(ctx)) != 0)) {
    return rc;
  }
  if (fflush(stdout) != 0) {
    return MC_TOPO_TOOL_EXIT_INTERNAL;
  }
  return 0;
}

int main(int argc, char **argv)
{
  struct topo_ctx ctx;
  int rc;

  memset(&ctx, 0, sizeof(ctx));
  if ((rc = parse_args(argc, argv, &ctx.cli)) != 0) {
    return rc;
  }
  if (ctx.cli.xml_path == NULL) {
    if (ctx.cli.env && (ctx.cli.n_ranks < 0) && (ctx.cli.n_nodes == 1) &&
        (ctx.cli.dump_path == NULL) && (ctx.cli.dot_path == NULL) && (ctx.cli.svg_path == NULL)) {
      mc_param_dump(stdout, ctx.cli.markdown, false);
      return 0;
    }
  }
  if (ctx.cli.mesh) {
    ncclResult_t res;
    if ((ctx.cli.xml_path != NULL) || ctx.cli.json || ctx.cli.graphs) {
      fprintf(stderr, "meshccl-topo: --mesh describes this host's mesh; use it alone\n");
      return MC_TOPO_TOOL_EXIT_BAD_INPUT;
    }
    res = mc_net_mesh_explain(stdout, (ctx.cli.mesh_wait_ms > 0) ? ctx.cli.mesh_wait_ms : 2000);
    return (res == ncclSuccess) ? 0 : report("mesh", res, "--mesh");
  }
  if ((ctx.cli.svg_path != NULL) && !topo_dot_available()) {
    fprintf(stderr, "meshccl-topo: --svg needs Graphviz's dot, which is not in PATH "
                    "(apt-get install graphviz); --dot FILE writes the graph without it\n");
    return MC_TOPO_TOOL_EXIT_INTERNAL;
  }
  rc = run(&ctx);
  free_all(&ctx);
  return rc;
}
