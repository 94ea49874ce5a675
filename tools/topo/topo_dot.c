/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-topo --dot FILE / --svg FILE: local rank 0's final system as an
 * undirected Graphviz graph, one vertex per node (GPUs with rank, dev, SM and
 * bus id; CPUs with NUMA id and arch/vendor/model; NETs with name and
 * bandwidth) and one edge per link pair, labelled with the link type and
 * bandwidth (NVLink in green). --svg runs Graphviz's dot on it.
 */
#include "topo_tool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

  topo_tool_busid_str(node->id, busid, sizeof(busid));
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
    const char *name = topo_tool_net_name(ctx, sys, node);
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

int topo_dot_write_file(const struct topo_ctx *ctx, const char *path)
{
  FILE *f = fopen(path, "w");

  if (f == NULL) {
    fprintf(stderr, "meshccl-topo: cannot write %s: %s\n", path, strerror(errno));
    return MC_TOPO_TOOL_EXIT_BAD_INPUT;
  }
  write_dot(ctx, f);
  if (fclose(f) != 0) {
    fprintf(stderr, "meshccl-topo: cannot write %s: %s\n", path, strerror(errno));
    return MC_TOPO_TOOL_EXIT_INTERNAL;
  }
  return 0;
}

bool topo_dot_available(void)
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

int topo_dot_render_svg(const struct topo_ctx *ctx)
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
      return MC_TOPO_TOOL_EXIT_INTERNAL;
    }
    close(fd);
    dot_file = tmp;
    if ((rc = topo_dot_write_file(ctx, dot_file)) != 0) {
      unlink(tmp);
      return MC_TOPO_TOOL_EXIT_INTERNAL;
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
    rc = MC_TOPO_TOOL_EXIT_INTERNAL;
  } else if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0)) {
    fprintf(stderr, "meshccl-topo: dot -Tsvg -o %s %s failed (status %d)\n", ctx->cli.svg_path,
            dot_file, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    rc = MC_TOPO_TOOL_EXIT_INTERNAL;
  }
  if (dot_file == tmp) {
    unlink(tmp);
  }
  return rc;
}
