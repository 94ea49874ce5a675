/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-topo's default output: the "#" header lines, local rank 0's final
 * system as NCCL's ncclTopoPrint, the path matrix between GPUs and NETs
 * (NCCL path type/bandwidth, like `nvidia-smi topo -m`), the ncclTopoCheckP2p
 * result per GPU pair and the transport each ordered pair of local ranks
 * would use with the reason (decided by meshccl_topo.c). The golden fixtures
 * of tests/mp/test_topo_tool.sh compare these lines byte for byte.
 */
#include "topo_tool.h"

#include "core/check.h"

#include <string.h>

static void cell_str(const struct mc_topo_system *sys, int ft, int fi, int tt, int ti, char *buf,
                     size_t bytes)
{
  snprintf(buf, bytes, "%s/%g", mc_topo_path_type_str(mc_topo_path_type(sys, ft, fi, tt, ti)),
           mc_topo_path_bw(sys, ft, fi, tt, ti));
}

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

ncclResult_t topo_text_print(const struct topo_ctx *ctx, FILE *out)
{
  const struct mc_topo_system *sys = ctx->systems[0];
  int n_gpus = sys->nodes[MC_TOPO_GPU].count;
  int n = ctx->n_local;
  const char *why = NULL;
  int level = mc_topo_p2p_level(sys, &ctx->opts, &why);

  fprintf(out, "# %s: %d local rank(s), %d NET(s); NCCL 2.30 rules; local rank 0's system%s\n",
          (ctx->cli.xml_path != NULL) ? ctx->cli.xml_path : "this host", n,
          sys->nodes[MC_TOPO_NET].count,
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
