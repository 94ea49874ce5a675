/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-topo --json: the facts of the default report (topo_text.c) as one
 * JSON object for scripts: the file, rank counts, P2P level and bandwidths,
 * the GPUs and NETs, the GPU/NET path matrices, the P2P check per GPU pair and
 * each ordered pair of local ranks' transport and reason. The schema is in
 * docs/TOOLS.md; floats always carry a "." or an exponent, non-finite ones
 * are null.
 */
#include "topo_tool.h"

#include "core/check.h"

#include <math.h>
#include <string.h>

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

ncclResult_t topo_json_print(const struct topo_ctx *ctx, FILE *out)
{
  const struct mc_topo_system *sys = ctx->systems[0];
  const struct mc_topo_node_set *gpus = &sys->nodes[MC_TOPO_GPU];
  const struct mc_topo_node_set *nets = &sys->nodes[MC_TOPO_NET];
  int n = ctx->n_local;
  const char *why = NULL;
  int level = mc_topo_p2p_level(sys, &ctx->opts, &why);

  fprintf(out, "{\n  \"file\": ");
  if (ctx->cli.xml_path != NULL)
    json_str(out, ctx->cli.xml_path);
  else
    fputs("null", out); /* this host, detected */
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
    topo_tool_busid_str(gpus->nodes[g]->id, busid, sizeof(busid));
    fprintf(out, "%s\n    {\"dev\": %d, \"rank\": %d, \"busid\": \"%s\", \"sm\": %d}",
            (g == 0) ? "" : ",", gpus->nodes[g]->gpu.dev, gpus->nodes[g]->gpu.rank, busid,
            gpus->nodes[g]->gpu.sm);
  }
  fprintf(out, "%s],\n  \"nets\": [", (gpus->count > 0) ? "\n  " : "");
  for (int i = 0; i < nets->count; i++) {
    fprintf(out, "%s\n    {\"dev\": %d, \"name\": ", (i == 0) ? "" : ",", nets->nodes[i]->net.dev);
    json_str(out, topo_tool_net_name(ctx, sys, nets->nodes[i]));
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
