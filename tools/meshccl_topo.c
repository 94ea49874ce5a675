/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-topo --xml FILE: treats an NCCL topology file as the
 * host NCCL would run on and prints what NCCL 2.30's init would conclude:
 * the ncclTopoPrint lines of local rank 0's final system, the path matrix
 * between GPUs and NETs (type/bandwidth, like `nvidia-smi topo -m`), the
 * ncclTopoCheckP2p result per GPU pair, and the transport each ordered pair of
 * local ranks would use (P2P, else SHM, else NET, NCCL's selectTransport order) with the
 * reason. --json prints the same facts for scripts (docs/TOOLS.md), --dot /
 * --svg draw the system, --dump writes the XML used, --env the parameters.
 *
 * Init order as initTransportsRank: load -> mc_topo_system_from_xml ->
 * mc_topo_compute_paths -> mc_topo_trim_system -> mc_topo_compute_paths ->
 * mc_topo_search_init, each local rank on its own system.
 *
 * Exit codes: 0 success, 2 bad input or usage, 3 internal failure.
 */
#include "core/check.h"
#include "topo_graphs.h"
#include "core/log.h"
#include "core/params.h"
#include "topo/topo.h"
#include "topo/topo_detect.h"
#include "core/utils.h"
#include "topo/topo_xml.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXIT_BAD_INPUT 2
#define EXIT_INTERNAL  3

struct cli {
  const char *xml_path;
  int n_ranks; /* --ranks, -1 = every GPU of the file */
  int n_nodes; /* --nodes */
  bool json;
  bool graphs;
  bool env;
  bool markdown;
  const char *dump_path;
  const char *dot_path;
  const char *svg_path;
};

/* What one rank decides about a peer (NCCL's selectTransport order). */
struct pair_decision {
  int p2p;
  int read;
  int inter;
  int net;
  bool in_topo;
  const char *transport;
  char reason[256];
};

struct topo_ctx {
  struct cli cli;
  struct mc_xml *xml;
  uint64_t host_hash;
  int n_local;         /* local ranks (GPUs with a rank after --ranks) */
  bool ranks_by_busid; /* the tool numbered the GPUs in PCI bus-id order */
  struct mc_topo_paths_opts opts;
  struct mc_topo_system **systems; /* [max(n_local, 1)]: local rank i's final system */
  struct pair_decision *pairs;     /* [n_local * n_local] */
};

static void usage(FILE *out, const char *prog)
{
  fprintf(out,
          "usage: %s --xml FILE [--ranks N] [--nodes N] [--graphs] [--json] [--dump OUT.xml]\n"
          "          [--dot OUT.dot] [--svg OUT.svg] [--env [--markdown]]\n"
          "       %s --env [--markdown]\n"
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
          "  --dot FILE     write a Graphviz picture of the system\n"
          "  --svg FILE     render it with Graphviz's dot (must be installed)\n"
          "  --env          list the parameters in effect (--markdown: docs/ENV.md format)\n"
          "\n"
          "Without --xml: this host, detected from sysfs (MESHCCL_SYSFS_ROOT), as --ranks N\n"
          "local ranks (default 1).\n"
          "Exit status: 0 success, 2 bad input or usage, 3 internal failure.\n",
          prog, prog);
}

/* --------------------------------------------------------------- errors */

static int exit_code_of(ncclResult_t res)
{
  return ((res == ncclInvalidUsage) || (res == ncclInvalidArgument)) ? EXIT_BAD_INPUT
                                                                     : EXIT_INTERNAL;
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
    return EXIT_BAD_INPUT;
  }
  errno = 0;
  v = strtol(val, &end, 10);
  if ((errno != 0) || (end == val) || (*end != '\0') || (v < 1) || (v > 65536)) {
    fprintf(stderr, "meshccl-topo: %s %s: expected a count from 1 to 65536\n", opt, val);
    usage(stderr, prog);
    return EXIT_BAD_INPUT;
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
      return EXIT_BAD_INPUT;
    }
    if (str_opt != NULL) {
      if ((val == NULL) || (val[0] == '\0')) {
        fprintf(stderr, "meshccl-topo: %s needs a file name\n", a);
        usage(stderr, argv[0]);
        return EXIT_BAD_INPUT;
      }
      *str_opt = val;
      i++;
    }
  }
  if (cli->markdown && !cli->env) {
    fprintf(stderr, "meshccl-topo: --markdown goes with --env\n");
    usage(stderr, argv[0]);
    return EXIT_BAD_INPUT;
  }
  if (cli->env && cli->json) {
    fprintf(stderr, "meshccl-topo: --env prints text; use it without --json\n");
    usage(stderr, argv[0]);
    return EXIT_BAD_INPUT;
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
            ctx->cli.xml_path, n);
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
  ncclResult_t res;

  MC_CHECK(mc_topo_system_from_xml(ctx->xml, ctx->host_hash, &sys));
  MC_CHECK_GOTO(mc_topo_compute_paths(sys, &ctx->opts), res, fail);
  MC_CHECK_GOTO(mc_topo_trim_system(sys, my_rank, ctx->n_local * ctx->cli.n_nodes), res, fail);
  MC_CHECK_GOTO(mc_topo_compute_paths(sys, &ctx->opts), res, fail);
  mc_topo_search_init(sys);
  *sys_out = sys;
  return ncclSuccess;
fail:
  mc_topo_system_destroy(sys);
  return res;
}

/* The P2P level mc_topo_check_p2p applies, and where it comes from. */
static int p2p_level(const struct topo_ctx *ctx, const struct mc_topo_system *sys,
                     const char **why_out)
{
  return mc_topo_p2p_level(sys, &ctx->opts, why_out);
}

/* Rank i's decision about rank j on rank i's own system (one file: same host, same /dev/shm). */
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

/* ------------------------------------------------------------- helpers */

/* NCCL's int64ToBusId. */
static void busid_str(int64_t id, char *buf, size_t bytes)
{
  uint64_t v = (uint64_t)MC_TOPO_ID_LOCAL(id);
  snprintf(buf, bytes, "%04lx:%02lx:%02lx.%01lx", (unsigned long)(v >> 20),
           (unsigned long)((v & 0xff000) >> 12), (unsigned long)((v & 0xff0) >> 4),
           (unsigned long)(v & 0xf));
}

/* Name of a NET node: the net element with its dev under a cpu of its host. */
static const char *net_name(const struct topo_ctx *ctx, const struct mc_topo_system *sys,
                            const struct mc_topo_node *net)
{
  uint64_t hash = sys->host_hashes[MC_TOPO_ID_SYSTEM(net->id)];

  for (int i = 0; i < ctx->xml->n_nodes; i++) {
    const struct mc_xml_node *x = &ctx->xml->nodes[i];
    const struct mc_xml_node *cpu = x;
    const char *dev;
    const char *name;
    const char *h;
    if ((x->type == MC_XML_NODE_NONE) || (strcmp(x->name, "net") != 0)) {
      continue;
    }
    dev = mc_xml_get_attr(x, "dev");
    name = mc_xml_get_attr(x, "name");
    if ((dev == NULL) || (name == NULL) || (strtol(dev, NULL, 0) != net->net.dev)) {
      continue;
    }
    while ((cpu != NULL) && (strcmp(cpu->name, "cpu") != 0)) {
      cpu = cpu->parent;
    }
    h = (cpu != NULL) ? mc_xml_get_attr(cpu, "host_hash") : NULL;
    if (((h != NULL) ? strtoull(h, NULL, 16) : 0) == hash) {
      return name;
    }
  }
  return "";
}

static void cell_str(const struct mc_topo_system *sys, int ft, int fi, int tt, int ti, char *buf,
                     size_t bytes)
{
  snprintf(buf, bytes, "%s/%g", mc_topo_path_type_str(mc_topo_path_type(sys, ft, fi, tt, ti)),
           mc_topo_path_bw(sys, ft, fi, tt, ti));
}

/* ---------------------------------------------------------------- text */

static void print_matrix(const struct mc_topo_system *sys, FILE *out)
{
  static const enum mc_topo_node_type types[2] = {MC_TOPO_GPU, MC_TOPO_NET};
  char cell[64];
  int width = 5;
  int n_cols = sys->nodes[MC_TOPO_GPU].count + sys->nodes[MC_TOPO_NET].count;
  int col = 0;

  for (int a = 0; a < 2; a++) {
    for (int i = 0; i < sys->nodes[types[a]].count; i++) {
      for (int b = 0; b < 2; b++) {
        for (int j = 0; j < sys->nodes[types[b]].count; j++) {
          cell_str(sys, types[a], i, types[b], j, cell, sizeof(cell));
          if ((int)strlen(cell) > width) {
            width = (int)strlen(cell);
          }
        }
      }
    }
  }
  fprintf(out, "%s", (n_cols > 0) ? "      " : "(no GPU or NET)");
  for (int b = 0; b < 2; b++) {
    for (int j = 0; j < sys->nodes[types[b]].count; j++) {
      char name[32];
      snprintf(name, sizeof(name), "%s%d", mc_topo_node_type_str(types[b]), j);
      fprintf(out, " %-*s", (col++ == n_cols - 1) ? 0 : width, name);
    }
  }
  fprintf(out, "\n");
  for (int a = 0; a < 2; a++) {
    for (int i = 0; i < sys->nodes[types[a]].count; i++) {
      char name[32];
      snprintf(name, sizeof(name), "%s%d", mc_topo_node_type_str(types[a]), i);
      fprintf(out, "%-6s", name);
      col = 0;
      for (int b = 0; b < 2; b++) {
        for (int j = 0; j < sys->nodes[types[b]].count; j++) {
          cell_str(sys, types[a], i, types[b], j, cell, sizeof(cell));
          fprintf(out, " %-*s", (col++ == n_cols - 1) ? 0 : width, cell);
        }
      }
      fprintf(out, "\n");
    }
  }
}

static ncclResult_t print_text(const struct topo_ctx *ctx, FILE *out)
{
  const struct mc_topo_system *sys = ctx->systems[0];
  int n_gpus = sys->nodes[MC_TOPO_GPU].count;
  int n = ctx->n_local;
  const char *why = NULL;
  int level = p2p_level(ctx, sys, &why);

  fprintf(out, "# %s: %d local rank(s), %d NET(s); NCCL 2.30 rules; local rank 0's system%s\n",
          ctx->cli.xml_path, n, sys->nodes[MC_TOPO_NET].count,
          ctx->ranks_by_busid ? "; ranks numbered in PCI bus-id order" : "");
  if (ctx->cli.n_nodes > 1) {
    fprintf(out,
            "# %d hosts x %d ranks = %d ranks, rank = node*%d + local; every host as below; "
            "ranks on different hosts use NET\n",
            ctx->cli.n_nodes, n, ctx->cli.n_nodes * n, n);
  }
  MC_CHECK(mc_topo_print(sys, out));
  fprintf(out, "\nPaths (NCCL path type/bandwidth GB/s):\n");
  print_matrix(sys, out);
  fprintf(out, "\nP2P (ncclTopoCheckP2p; P2P level %s, %s):\n", mc_topo_path_type_str(level), why);
  if (n_gpus < 2) {
    fprintf(out, "  (fewer than 2 GPUs)\n");
  }
  for (int a = 0; a < n_gpus; a++) {
    for (int b = 0; b < n_gpus; b++) {
      int ra = sys->nodes[MC_TOPO_GPU].nodes[a]->gpu.rank;
      int rb = sys->nodes[MC_TOPO_GPU].nodes[b]->gpu.rank;
      int p2p = 0;
      int read = 0;
      int inter = -1;
      if (a == b) {
        continue;
      }
      MC_CHECK(mc_topo_check_p2p(sys, &ctx->opts, ra, rb, &p2p, &read, &inter));
      fprintf(out, "  GPU%d->GPU%d  p2p %d read %d intermediate_rank %d\n", a, b, p2p, read, inter);
    }
  }
  fprintf(out, "\nTransports (rank i decides on its own system: P2P, else SHM, else NET):\n");
  if (n < 2) {
    fprintf(out, "  (fewer than 2 local ranks)\n");
  }
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) {
      if (i != j) {
        fprintf(out, "  %d->%d  %s\n", i, j, ctx->pairs[i * n + j].reason);
      }
    }
  }
  return ncclSuccess;
}

/* ---------------------------------------------------------------- json */

static void json_str(FILE *out, const char *s)
{
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
    if ((*p == '"') || (*p == '\\')) {
      fprintf(out, "\\%c", *p);
    } else if (*p < 0x20) {
      fprintf(out, "\\u%04x", *p);
    } else {
      fputc(*p, out);
    }
  }
  fputc('"', out);
}

static void json_float(FILE *out, float v)
{
  char buf[64];

  if (!isfinite(v)) {
    fputs("null", out);
    return;
  }
  snprintf(buf, sizeof(buf), "%g", (double)v);
  if (strpbrk(buf, ".e") == NULL) {
    strcat(buf, ".0");
  }
  fputs(buf, out);
}

static void json_paths(FILE *out, const struct mc_topo_system *sys, enum mc_topo_node_type ft,
                       enum mc_topo_node_type tt)
{
  fputc('[', out);
  for (int i = 0; i < sys->nodes[ft].count; i++) {
    fprintf(out, "%s[", (i == 0) ? "" : ", ");
    for (int j = 0; j < sys->nodes[tt].count; j++) {
      fprintf(out, "%s{\"type\": \"%s\", \"bw\": ", (j == 0) ? "" : ", ",
              mc_topo_path_type_str(mc_topo_path_type(sys, ft, i, tt, j)));
      json_float(out, mc_topo_path_bw(sys, ft, i, tt, j));
      fputc('}', out);
    }
    fputc(']', out);
  }
  fputc(']', out);
}

/* n x n matrix of the pair decisions' transport (or reason) strings, null on the diagonal. */
static void json_pair_strings(FILE *out, const struct topo_ctx *ctx, int n, bool reason)
{
  for (int i = 0; i < n; i++) {
    fprintf(out, "%s\n    [", (i == 0) ? "" : ",");
    for (int j = 0; j < n; j++) {
      const struct pair_decision *d = &ctx->pairs[i * n + j];
      fprintf(out, "%s", (j == 0) ? "" : ", ");
      if (i == j)
        fputs("null", out);
      else
        json_str(out, reason ? d->reason : d->transport);
    }
    fputc(']', out);
  }
}

static ncclResult_t print_json(const struct topo_ctx *ctx, FILE *out)
{
  const struct mc_topo_system *sys = ctx->systems[0];
  const struct mc_topo_node_set *gpus = &sys->nodes[MC_TOPO_GPU];
  const struct mc_topo_node_set *nets = &sys->nodes[MC_TOPO_NET];
  int n = ctx->n_local;
  const char *why = NULL;
  int level = p2p_level(ctx, sys, &why);

  fprintf(out, "{\n  \"file\": ");
  json_str(out, ctx->cli.xml_path);
  fprintf(out, ",\n  \"nodes\": %d,\n  \"local_ranks\": %d,\n  \"ranks\": %d,\n", ctx->cli.n_nodes,
          n, ctx->cli.n_nodes * n);
  fprintf(out, "  \"ranks_by_busid\": %s,\n  \"p2p_level\": \"%s\",\n  \"max_bw\": ",
          ctx->ranks_by_busid ? "true" : "false", mc_topo_path_type_str(level));
  json_float(out, sys->max_bw);
  fprintf(out, ",\n  \"total_bw\": ");
  json_float(out, sys->total_bw);
  fprintf(out, ",\n  \"gpus\": [");
  for (int g = 0; g < gpus->count; g++) {
    char busid[32];
    busid_str(gpus->nodes[g]->id, busid, sizeof(busid));
    fprintf(out, "%s\n    {\"dev\": %d, \"rank\": %d, \"busid\": \"%s\", \"sm\": %d}",
            (g == 0) ? "" : ",", gpus->nodes[g]->gpu.dev, gpus->nodes[g]->gpu.rank, busid,
            gpus->nodes[g]->gpu.sm);
  }
  fprintf(out, "%s],\n  \"nets\": [", (gpus->count > 0) ? "\n  " : "");
  for (int i = 0; i < nets->count; i++) {
    fprintf(out, "%s\n    {\"dev\": %d, \"name\": ", (i == 0) ? "" : ",", nets->nodes[i]->net.dev);
    json_str(out, net_name(ctx, sys, nets->nodes[i]));
    fprintf(out, ", \"bw\": ");
    json_float(out, nets->nodes[i]->net.bw);
    fprintf(out, ", \"local_gpu\": %d}", nets->nodes[i]->net.local_gpu);
  }
  fprintf(out, "%s],\n  \"paths\": {\n    \"gpu_gpu\": ", (nets->count > 0) ? "\n  " : "");
  json_paths(out, sys, MC_TOPO_GPU, MC_TOPO_GPU);
  fprintf(out, ",\n    \"gpu_net\": ");
  json_paths(out, sys, MC_TOPO_GPU, MC_TOPO_NET);
  fprintf(out, ",\n    \"net_gpu\": ");
  json_paths(out, sys, MC_TOPO_NET, MC_TOPO_GPU);
  fprintf(out, "\n  },\n  \"p2p\": [");
  for (int a = 0; a < gpus->count; a++) {
    fprintf(out, "%s\n    [", (a == 0) ? "" : ",");
    for (int b = 0; b < gpus->count; b++) {
      int p2p = 0;
      int read = 0;
      int inter = -1;
      MC_CHECK(mc_topo_check_p2p(sys, &ctx->opts, gpus->nodes[a]->gpu.rank,
                                 gpus->nodes[b]->gpu.rank, &p2p, &read, &inter));
      fprintf(out, "%s{\"p2p\": %d, \"read\": %d, \"intermediate_rank\": %d}", (b == 0) ? "" : ", ",
              p2p, read, inter);
    }
    fputc(']', out);
  }
  fprintf(out, "%s],\n  \"transport\": [", (gpus->count > 0) ? "\n  " : "");
  json_pair_strings(out, ctx, n, false);
  fprintf(out, "%s],\n  \"transport_reason\": [", (n > 0) ? "\n  " : "");
  json_pair_strings(out, ctx, n, true);
  fprintf(out, "%s]\n}\n", (n > 0) ? "\n  " : "");
  return ncclSuccess;
}

/* ----------------------------------------------------------------- dot */

static int node_index(const struct mc_topo_system *sys, const struct mc_topo_node *node)
{
  const struct mc_topo_node_set *set = &sys->nodes[node->type];

  for (int i = 0; i < set->count; i++) {
    if (set->nodes[i] == node) {
      return i;
    }
  }
  return -1;
}

static bool has_link_to(const struct mc_topo_node *from, const struct mc_topo_node *to)
{
  for (int l = 0; l < from->n_links; l++) {
    if (from->links[l].rem == to) {
      return true;
    }
  }
  return false;
}

static void dot_node(const struct topo_ctx *ctx, const struct mc_topo_system *sys,
                     const struct mc_topo_node *node, int idx, FILE *out)
{
  static const char *const shapes[MC_TOPO_NODE_TYPES] = {
      "box3d", "box", "octagon", "house", "component", "ellipse", "box", "box", "box", "box"};
  const char *type = mc_topo_node_type_str(node->type);
  char busid[32];

  busid_str(node->id, busid, sizeof(busid));
  fprintf(out, "  \"%s%d\" [shape=%s, label=\"%s%d", type, idx, shapes[node->type], type, idx);
  switch (node->type) {
  case MC_TOPO_GPU:
    fprintf(out, "\\nrank %d dev %d sm %d\\n%s", node->gpu.rank, node->gpu.dev, node->gpu.sm,
            busid);
    break;
  case MC_TOPO_DEV:
  case MC_TOPO_PCI:
  case MC_TOPO_NIC:
    fprintf(out, "\\n%s", busid);
    break;
  case MC_TOPO_CPU:
    fprintf(out, "\\nnuma %ld arch %d vendor %d model %d", (long)MC_TOPO_ID_LOCAL(node->id),
            node->cpu.arch, node->cpu.vendor, node->cpu.model);
    break;
  case MC_TOPO_NET: {
    const char *name = net_name(ctx, sys, node);
    fprintf(out, "\\n");
    for (const char *p = name; *p != '\0'; p++) {
      if ((*p == '"') || (*p == '\\')) {
        fputc('\\', out);
      }
      fputc(*p, out);
    }
    fprintf(out, " dev %d\\n%g GB/s", node->net.dev, node->net.bw);
    break;
  }
  default:
    break;
  }
  fprintf(out, "\"];\n");
}

static void write_dot(const struct topo_ctx *ctx, FILE *out)
{
  const struct mc_topo_system *sys = ctx->systems[0];

  fprintf(out, "graph meshccl_topo {\n  node [fontname=\"Helvetica\", fontsize=10];\n"
               "  edge [fontname=\"Helvetica\", fontsize=9];\n");
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      dot_node(ctx, sys, sys->nodes[t].nodes[i], i, out);
    }
  }
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      const struct mc_topo_node *a = sys->nodes[t].nodes[i];
      for (int l = 0; l < a->n_links; l++) {
        const struct mc_topo_link *link = &a->links[l];
        const struct mc_topo_node *b = link->rem;
        int j = node_index(sys, b);
        bool a_first = ((int)a->type < (int)b->type) || ((a->type == b->type) && (i < j));
        if ((j < 0) || (!a_first && has_link_to(b, a))) {
          continue; /* drawn from the other end */
        }
        fprintf(out, "  \"%s%d\" -- \"%s%d\" [label=\"%s %g\"%s];\n",
                mc_topo_node_type_str(a->type), i, mc_topo_node_type_str(b->type), j,
                mc_topo_link_type_str(link->type), link->bw,
                (link->type == MC_TOPO_LINK_NVL) ? ", color=green4" : "");
      }
    }
  }
  fprintf(out, "}\n");
}

static int write_dot_file(const struct topo_ctx *ctx, const char *path)
{
  FILE *f = fopen(path, "w");

  if (f == NULL) {
    fprintf(stderr, "meshccl-topo: cannot write %s: %s\n", path, strerror(errno));
    return EXIT_BAD_INPUT;
  }
  write_dot(ctx, f);
  if (fclose(f) != 0) {
    fprintf(stderr, "meshccl-topo: cannot write %s: %s\n", path, strerror(errno));
    return EXIT_INTERNAL;
  }
  return 0;
}

static bool have_dot(void)
{
  const char *path = getenv("PATH");
  char buf[4096];

  if (path == NULL) {
    return false;
  }
  while (*path != '\0') {
    size_t len = strcspn(path, ":");
    snprintf(buf, sizeof(buf), "%.*s/dot", (int)((len == 0) ? 1 : len), (len == 0) ? "." : path);
    if (access(buf, X_OK) == 0) {
      return true;
    }
    path += len + ((path[len] == ':') ? 1 : 0);
  }
  return false;
}

static int render_svg(const struct topo_ctx *ctx)
{
  char tmp[] = "/tmp/meshccl-topo.XXXXXX";
  const char *dot_file = ctx->cli.dot_path;
  int rc = 0;
  int status = 0;
  pid_t pid;

  if (dot_file == NULL) {
    int fd = mkstemp(tmp);
    if (fd < 0) {
      fprintf(stderr, "meshccl-topo: cannot create a temporary file: %s\n", strerror(errno));
      return EXIT_INTERNAL;
    }
    close(fd);
    dot_file = tmp;
    if ((rc = write_dot_file(ctx, dot_file)) != 0) {
      unlink(tmp);
      return EXIT_INTERNAL;
    }
  }
  fflush(stdout);
  pid = fork();
  if (pid == 0) {
    execlp("dot", "dot", "-Tsvg", "-o", ctx->cli.svg_path, dot_file, (char *)NULL);
    fprintf(stderr, "meshccl-topo: cannot run dot: %s\n", strerror(errno));
    _exit(127);
  }
  if ((pid < 0) || (waitpid(pid, &status, 0) < 0)) {
    fprintf(stderr, "meshccl-topo: cannot run dot: %s\n", strerror(errno));
    rc = EXIT_INTERNAL;
  } else if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0)) {
    fprintf(stderr, "meshccl-topo: dot -Tsvg -o %s %s failed (status %d)\n", ctx->cli.svg_path,
            dot_file, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    rc = EXIT_INTERNAL;
  }
  if (dot_file == tmp) {
    unlink(tmp);
  }
  return rc;
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
    return EXIT_BAD_INPUT;
  }
  res = mc_xml_dump(ctx->xml, f);
  if ((fclose(f) != 0) && (res == ncclSuccess)) {
    fprintf(stderr, "meshccl-topo: cannot write %s: %s\n", ctx->cli.dump_path, strerror(errno));
    return EXIT_INTERNAL;
  }
  return (res == ncclSuccess) ? 0 : report(source_name(ctx), res, "dump");
}

/* ---------------------------------------------------------------- main */

/* This host as N local ranks (--ranks, default 1) would see it: each rank's
 * detection (MESHCCL_SYSFS_ROOT applies), fused in rank order as init does. */
static ncclResult_t detect_host(struct topo_ctx *ctx)
{
  int n = (ctx->cli.n_ranks > 0) ? ctx->cli.n_ranks : 1;
  uint64_t host_hash = mc_host_hash();
  struct mc_xml *one = NULL;
  ncclResult_t res = ncclSuccess;

  MC_CHECK(mc_xml_create(256, &one));
  for (int r = 0; r < n; r++) {
    struct mc_topo_detect_rank me = {.rank = r, .dev = r, .numa_node = -1, .host_hash = host_hash};
    mc_xml_clear(one);
    MC_CHECK_GOTO(mc_topo_detect(NULL, &me, one), res, out);
    MC_CHECK_GOTO(mc_xml_fuse(ctx->xml, one), res, out);
  }
out:
  mc_xml_destroy(one);
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
    return (res == ncclInvalidUsage) ? EXIT_BAD_INPUT
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
    res = ctx->cli.json ? print_json(ctx, stdout) : print_text(ctx, stdout);
  }
  if (res != ncclSuccess) {
    return report(source_name(ctx), res, "print");
  }
  if (ctx->cli.env) {
    fprintf(stdout, "\nParameters:\n");
    mc_param_dump(stdout, ctx->cli.markdown, false);
  }
  if ((ctx->cli.dot_path != NULL) && ((rc = write_dot_file(ctx, ctx->cli.dot_path)) != 0)) {
    return rc;
  }
  if ((ctx->cli.svg_path != NULL) && ((rc = render_svg(ctx)) != 0)) {
    return rc;
  }
  if (fflush(stdout) != 0) {
    return EXIT_INTERNAL;
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
  if ((ctx.cli.svg_path != NULL) && !have_dot()) {
    fprintf(stderr, "meshccl-topo: --svg needs Graphviz's dot, which is not in PATH "
                    "(apt-get install graphviz); --dot FILE writes the graph without it\n");
    return EXIT_INTERNAL;
  }
  rc = run(&ctx);
  free_all(&ctx);
  return rc;
}
