/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-topo --dot FILE / --svg FILE: pictures for Graphviz (--svg runs
 * its dot). One host (local rank 0's final system): a box per CPU (NUMA
 * node) holding its PCI tree drawn top-down as a tree (CPU, PCI switches,
 * NICs with their NETs, devices), each device one box (a GPU, or a compute
 * device when it has no SM version, with its rank and bus id: NCCL's DEV and
 * GPU nodes in one); links that are not the tree (NVLink in green, CPU to CPU
 * dashed, NVSwitches outside the boxes) do not move it. Links are labelled
 * with their type and bandwidth in GB/s. The NETs of one NIC wrap into a
 * grid of about square shape once there are more than NET_ROW of them (a
 * host with 15 socket NICs drew one row 3500 points wide): invisible edges
 * put each NET below the one a row before it. NIC PCI functions of the XML
 * without a network device (NCCL adds no NIC node for them, ncclTopoAddPci)
 * are drawn as dashed NICs under their PCI parent, saying so. With
 * --nodes N > 1, an overview instead: one box per host with its CPUs, their
 * devices and ranks, its NICs and their NETs (in rows as above), each NET
 * joined to the network between the hosts.
 */
#include "topo_tool.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* One node of the picture: where it hangs in the PCI tree (a BFS from each
 * CPU over PCI, LOC, C2C and NET links) and which vertex draws it. */
struct pic_node {
  const struct mc_topo_node *node;
  int idx;       /* index among the nodes of its type */
  int parent;    /* pic index of its tree parent, -1 for CPUs and unreached nodes */
  int cpu;       /* pic index of the CPU whose tree holds it, -1 when none */
  int vertex;    /* pic index of the node whose vertex draws it (itself, or a DEV's GPU) */
  int n_gpus;    /* DEV: GPUs whose parent it is */
  int first_gpu; /* DEV: pic index of the first of them */
  int above;     /* NET in a grid: pic index of the NET drawn above it, else -1 */
};

#define NET_ROW 4 /* NETs of one NIC drawn in one row; more wrap into a grid */

struct pic {
  struct pic_node *n;
  int count;
};

static int pic_find(const struct pic *p, const struct mc_topo_node *node)
{
  for (int i = 0; i < p->count; i++) {
    if (p->n[i].node == node) {
      return i;
    }
  }
  return -1;
}

static bool is_tree_link(enum mc_topo_link_type type)
{
  return (type == MC_TOPO_LINK_PCI) || (type == MC_TOPO_LINK_LOC) || (type == MC_TOPO_LINK_C2C) ||
         (type == MC_TOPO_LINK_NET);
}

/* Columns of a grid of n NETs: one row up to NET_ROW, else about square. */
static int grid_cols(int n)
{
  return (n <= NET_ROW) ? n : (int)ceil(sqrt((double)n));
}

/* The NETs whose tree parent is u in a grid: each one's `above` (the NET
 * `cols` before it among u's, in index order). */
static void grid_nets(struct pic *p, int u)
{
  int n = 0;
  int k = 0;
  int cols;

  for (int v = 0; v < p->count; v++) {
    n += (p->n[v].node->type == MC_TOPO_NET) && (p->n[v].parent == u);
  }
  cols = grid_cols(n);
  for (int v = 0; v < p->count; v++) {
    if ((p->n[v].node->type != MC_TOPO_NET) || (p->n[v].parent != u)) {
      continue;
    }
    p->n[v].above = -1;
    if (k >= cols) {
      int back = v;
      for (int left = cols; left > 0; left--) {
        do {
          back--;
        } while ((p->n[back].node->type != MC_TOPO_NET) || (p->n[back].parent != u));
      }
      p->n[v].above = back;
    }
    k++;
  }
}

/* Every node in type order; the PCI tree below each CPU; a DEV holding
 * exactly one GPU is drawn by that GPU's vertex (one box per device). */
static int pic_build(const struct mc_topo_system *sys, struct pic *p)
{
  int total = 0;
  int *queue = NULL;

  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    total += sys->nodes[t].count;
  }
  p->n = calloc((size_t)total + 1, sizeof(*p->n));
  queue = calloc((size_t)total + 1, sizeof(*queue));
  if ((p->n == NULL) || (queue == NULL)) {
    free(p->n);
    free(queue);
    fprintf(stderr, "meshccl-topo: out of memory drawing the system\n");
    return MC_TOPO_TOOL_EXIT_INTERNAL;
  }
  p->count = 0;
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      struct pic_node *pn = &p->n[p->count];
      pn->node = sys->nodes[t].nodes[i];
      pn->idx = i;
      pn->parent = -1;
      pn->cpu = (t == MC_TOPO_CPU) ? p->count : -1;
      pn->vertex = p->count;
      pn->first_gpu = -1;
      pn->above = -1;
      p->count++;
    }
  }
  for (int c = 0; c < p->count; c++) {
    int head = 0;
    int tail = 0;
    if (p->n[c].node->type != MC_TOPO_CPU) {
      continue;
    }
    queue[tail++] = c;
    while (head < tail) {
      int u = queue[head++];
      const struct mc_topo_node *un = p->n[u].node;
      for (int l = 0; l < un->n_links; l++) {
        int v = pic_find(p, un->links[l].rem);
        if ((v < 0) || (p->n[v].cpu >= 0) || !is_tree_link(un->links[l].type)) {
          continue;
        }
        p->n[v].cpu = c;
        p->n[v].parent = u;
        queue[tail++] = v;
      }
    }
  }
  free(queue);
  for (int g = 0; g < p->count; g++) {
    const struct mc_topo_node *gn = p->n[g].node;
    int d = (gn->type == MC_TOPO_GPU) ? pic_find(p, gn->gpu.parent) : -1;
    if (d >= 0) {
      if (p->n[d].n_gpus++ == 0) {
        p->n[d].first_gpu = g;
      }
    }
  }
  for (int d = 0; d < p->count; d++) {
    if (p->n[d].n_gpus == 1) {
      p->n[d].vertex = p->n[d].first_gpu;
    }
  }
  for (int u = 0; u < p->count; u++) {
    grid_nets(p, u);
  }
  return 0;
}

/* Invisible edges that put each gridded NET below its `above`. */
static void draw_grid_edges(const struct pic *p, const char *prefix, FILE *out)
{
  for (int v = 0; v < p->count; v++) {
    if (p->n[v].above >= 0) {
      fprintf(out, "  \"%sNET%d\" -> \"%sNET%d\" [style=invis];\n", prefix, p->n[p->n[v].above].idx,
              prefix, p->n[v].idx);
    }
  }
}

static void vertex_name(const struct pic *p, int i, char *buf, size_t bytes)
{
  const struct pic_node *pn = &p->n[p->n[i].vertex];
  snprintf(buf, bytes, "%s%d", mc_topo_node_type_str(pn->node->type), pn->idx);
}

static void put_escaped(const char *str, FILE *out)
{
  for (const char *c = str; *c != '\0'; c++) {
    if ((*c == '"') || (*c == '\\')) {
      fputc('\\', out);
    }
    fputc(*c, out);
  }
}

/* A GPU without SM version is one of meshccl's compute devices (a rank's
 * device on a host without NVML); both are drawn as a device box. */
static void dot_node(const struct topo_ctx *ctx, const struct mc_topo_system *sys,
                     const struct pic_node *pn, const char *indent, FILE *out)
{
  const struct mc_topo_node *node = pn->node;
  const char *type = mc_topo_node_type_str(node->type);
  char busid[32];

  topo_tool_busid_str(node->id, busid, sizeof(busid));
  fprintf(out, "%s\"%s%d\" [", indent, type, pn->idx);
  switch (node->type) {
  case MC_TOPO_GPU:
    if (node->gpu.sm == 0) {
      fprintf(out, "shape=box3d, style=filled, fillcolor=lightblue, label=\"compute device %d\\n",
              node->gpu.dev);
    } else {
      fprintf(out, "shape=box3d, style=filled, fillcolor=palegreen, label=\"GPU%d sm %d\\n",
              node->gpu.dev, node->gpu.sm);
    }
    fprintf(out, "rank %d\\n%s", node->gpu.rank, busid);
    break;
  case MC_TOPO_DEV:
    fprintf(out, "shape=box3d, label=\"DEV%d\\n%d partitions\\n%s", pn->idx, pn->n_gpus, busid);
    break;
  case MC_TOPO_PCI:
    fprintf(out, "shape=box, label=\"PCI switch\\n%s", busid);
    break;
  case MC_TOPO_NIC:
    fprintf(out, "shape=component, label=\"NIC%d\\n%s", pn->idx, busid);
    break;
  case MC_TOPO_CPU:
    fprintf(out, "shape=house, label=\"CPU%d\\nnuma %ld", pn->idx,
            (long)MC_TOPO_ID_LOCAL(node->id));
    break;
  case MC_TOPO_NET: {
    const char *name = topo_tool_net_name(ctx, sys, node);
    fprintf(out, "shape=ellipse, style=filled, fillcolor=lightyellow, label=\"NET%d", pn->idx);
    if (name[0] != '\0') {
      fprintf(out, " ");
      put_escaped(name, out);
    }
    fprintf(out, "\\ndev %d, %g GB/s", node->net.dev, node->net.bw);
    break;
  }
  case MC_TOPO_NVS:
    fprintf(out, "shape=octagon, label=\"NVSwitch%d", pn->idx);
    break;
  default:
    fprintf(out, "shape=box, label=\"%s%d", type, pn->idx);
    break;
  }
  fprintf(out, "\"];\n");
}

/* The pic node an XML element hangs from in the picture: the PCI node
 * with its bus id, else (up the tree) its CPU by NUMA id; -1 when none. */
static int xml_attach(const struct pic *p, const struct mc_xml_node *x)
{
  char busid[32];

  for (x = x->parent; x != NULL; x = x->parent) {
    const char *want = mc_xml_get_attr(x, (strcmp(x->name, "cpu") == 0) ? "numaid" : "busid");
    if ((want == NULL) || ((strcmp(x->name, "pci") != 0) && (strcmp(x->name, "cpu") != 0))) {
      continue;
    }
    for (int i = 0; i < p->count; i++) {
      const struct mc_topo_node *n = p->n[i].node;
      if ((n->type == MC_TOPO_PCI) && (x->name[0] == 'p')) {
        topo_tool_busid_str(n->id, busid, sizeof(busid));
        if (strcasecmp(busid, want) == 0) {
          return i;
        }
      } else if ((n->type == MC_TOPO_CPU) && (x->name[0] == 'c') &&
                 ((long)MC_TOPO_ID_LOCAL(n->id) == strtol(want, NULL, 0))) {
        return i;
      }
    }
  }
  return -1;
}

/* A NIC PCI function of the XML (class 0x02....) without a <nic>: NCCL adds
 * no node for it, so it has no network device NCCL could use. */
static bool is_unused_nic(const struct mc_xml_node *x)
{
  const char *cls = mc_xml_get_attr(x, "class");

  return (strcmp(x->name, "pci") == 0) && (cls != NULL) && (strncmp(cls, "0x02", 4) == 0) &&
         (mc_xml_get_sub((struct mc_xml_node *)x, "nic") == NULL);
}

/* The unused NIC functions whose tree lies under CPU pic node cpu: their
 * vertices (edges false), else the dashed edges from where they hang (in
 * the overview, prefix "h<host>_", from their CPU). Vertex names: prefix +
 * "NICFN" + their index among the XML's. */
static void draw_unused_nics(const struct topo_ctx *ctx, const struct pic *p, int cpu,
                             const char *prefix, bool edges, FILE *out)
{
  char from[32];
  int k = 0;

  if (ctx->xml == NULL) {
    return;
  }
  for (int i = 0; i < ctx->xml->n_nodes; i++) {
    const struct mc_xml_node *x = &ctx->xml->nodes[i];
    const char *busid = mc_xml_get_attr(x, "busid");
    int at;
    if (!is_unused_nic(x)) {
      continue;
    }
    at = xml_attach(p, x);
    if ((at >= 0) && ((at == cpu) || (p->n[at].cpu == cpu))) {
      if (!edges) {
        fprintf(out,
                "    \"%sNICFN%d\" [shape=component, style=dashed, label=\"NIC %s\\nno network "
                "device: not used\"];\n",
                prefix, k, (busid != NULL) ? busid : "?");
      } else {
        vertex_name(p, (prefix[0] != '\0') ? cpu : at, from, sizeof(from));
        fprintf(out, "  \"%s%s\" -> \"%sNICFN%d\" [style=dashed];\n", prefix, from, prefix, k);
      }
    }
    k++;
  }
}

static void cpu_label(const struct pic_node *cpu, FILE *out)
{
  fprintf(out, "CPU%d (NUMA node %ld)", cpu->idx, (long)MC_TOPO_ID_LOCAL(cpu->node->id));
}

/* Whether the link from pic node a to pic node b is a's or b's tree edge. */
static bool is_tree_edge(const struct pic *p, int a, int b)
{
  return (p->n[a].parent == b) || (p->n[b].parent == a);
}

/* The vertices of u's subtree, depth first (u first, children in index order). */
static void draw_subtree(const struct topo_ctx *ctx, const struct pic *p, int u, FILE *out)
{
  if (p->n[u].vertex == u) {
    dot_node(ctx, ctx->systems[0], &p->n[u], "    ", out);
  }
  for (int v = 0; v < p->count; v++) {
    if (p->n[v].parent == u) {
      draw_subtree(ctx, p, v, out);
    }
  }
}

/* The edges of u's subtree, depth first, each labelled with its link. */
static void draw_tree_edges(const struct pic *p, int u, FILE *out)
{
  char va[32];
  char vb[32];

  for (int v = 0; v < p->count; v++) {
    const struct mc_topo_node *n = p->n[v].node;
    if (p->n[v].parent != u) {
      continue;
    }
    for (int l = 0; (l < n->n_links) && (p->n[u].vertex != p->n[v].vertex); l++) {
      if (n->links[l].rem == p->n[u].node) {
        vertex_name(p, u, va, sizeof(va));
        vertex_name(p, v, vb, sizeof(vb));
        fprintf(out, "  \"%s\" -> \"%s\" [label=\"%s %g GB/s\"];\n", va, vb,
                mc_topo_link_type_str(n->links[l].type), n->links[l].bw);
        break;
      }
    }
    draw_tree_edges(p, v, out);
  }
}

static void write_dot(const struct topo_ctx *ctx, const struct pic *p, FILE *out)
{
  const struct mc_topo_system *sys = ctx->systems[0];
  char va[32];
  char vb[32];

  fprintf(out, "digraph meshccl_topo {\n  rankdir=TB;\n  newrank=true;\n"
               "  node [fontname=\"Helvetica\", fontsize=10];\n"
               "  edge [fontname=\"Helvetica\", fontsize=9, dir=none];\n");
  for (int c = 0; c < p->count; c++) {
    if (p->n[c].node->type != MC_TOPO_CPU) {
      continue;
    }
    fprintf(out, "  subgraph \"cluster_CPU%d\" {\n    label=\"", p->n[c].idx);
    cpu_label(&p->n[c], out);
    fprintf(out, "\";\n    style=rounded;\n");
    draw_subtree(ctx, p, c, out);
    draw_unused_nics(ctx, p, c, "", false, out);
    fprintf(out, "  }\n");
  }
  for (int i = 0; i < p->count; i++) {
    if ((p->n[i].cpu < 0) && (p->n[i].vertex == i)) {
      dot_node(ctx, sys, &p->n[i], "  ", out);
    }
  }
  /* The tree, parent above child, in the order of the vertices. */
  for (int c = 0; c < p->count; c++) {
    if (p->n[c].node->type == MC_TOPO_CPU) {
      draw_tree_edges(p, c, out);
      draw_unused_nics(ctx, p, c, "", true, out);
    }
  }
  draw_grid_edges(p, "", out);
  /* Every other link (NVLink, CPU to CPU, ...), once per pair, without
   * moving the tree. */
  for (int i = 0; i < p->count; i++) {
    const struct mc_topo_node *a = p->n[i].node;
    for (int l = 0; l < a->n_links; l++) {
      const struct mc_topo_link *link = &a->links[l];
      int j = pic_find(p, link->rem);
      if ((j < 0) || is_tree_edge(p, i, j) || (p->n[i].vertex == p->n[j].vertex)) {
        continue;
      }
      if (j < i) {
        bool drawn = false; /* from j's side already, when j links back to i */
        for (int k = 0; (k < link->rem->n_links) && !drawn; k++) {
          drawn = (link->rem->links[k].rem == a);
        }
        if (drawn) {
          continue;
        }
      }
      vertex_name(p, i, va, sizeof(va));
      vertex_name(p, j, vb, sizeof(vb));
      fprintf(out, "  \"%s\" -> \"%s\" [label=\"%s %g GB/s\", constraint=false%s];\n", va, vb,
              mc_topo_link_type_str(link->type), link->bw,
              (link->type == MC_TOPO_LINK_NVL)   ? ", color=green4, penwidth=2"
              : (link->type == MC_TOPO_LINK_SYS) ? ", style=dashed"
                                                 : "");
    }
  }
  fprintf(out, "}\n");
}

/* The overview's vertex of a NET of host h, in its host box. */
static void overview_net(const struct topo_ctx *ctx, const struct pic_node *pn, int h, FILE *out)
{
  const char *name = topo_tool_net_name(ctx, ctx->systems[0], pn->node);

  fprintf(out,
          "    \"h%d_NET%d\" [shape=ellipse, style=filled, fillcolor=lightyellow, label=\"NET%d", h,
          pn->idx, pn->idx);
  if (name[0] != '\0') {
    fprintf(out, " ");
    put_escaped(name, out);
  }
  fprintf(out, "\\n%g GB/s\"];\n", pn->node->net.bw);
}

/* The overview's edge into pic node v (a NIC or a NET) from its NIC or CPU. */
static void overview_edge_in(const struct pic *p, int v, int h, FILE *out)
{
  int from = p->n[v].parent;

  if ((from < 0) || (p->n[from].node->type != MC_TOPO_NIC)) {
    from = p->n[v].cpu; /* the overview draws no PCI switch */
  }
  if (from >= 0) {
    fprintf(out, "  \"h%d_%s%d\" -> \"h%d_%s%d\";\n", h,
            mc_topo_node_type_str(p->n[from].node->type), p->n[from].idx, h,
            mc_topo_node_type_str(p->n[v].node->type), p->n[v].idx);
  }
}

/* --nodes N: the hosts and their NICs. Each host is a cluster with a vertex
 * per CPU (its NUMA node, its devices and their ranks), the NICs under it and
 * their NETs; every NET reaches the network between the hosts. Every host is
 * the file. */
static void write_overview(const struct topo_ctx *ctx, const struct pic *p, FILE *out)
{
  int n_local = ctx->n_local;
  char prefix[24];

  fprintf(out,
          "digraph meshccl_hosts {\n  rankdir=TB;\n  newrank=true;\n"
          "  node [fontname=\"Helvetica\", fontsize=10];\n"
          "  edge [fontname=\"Helvetica\", fontsize=9, dir=none];\n"
          "  \"network\" [shape=doubleoctagon, label=\"network between the %d hosts\\n(NET "
          "transport)\"];\n",
          ctx->cli.n_nodes);
  for (int h = 0; h < ctx->cli.n_nodes; h++) {
    snprintf(prefix, sizeof(prefix), "h%d_", h);
    fprintf(out,
            "  subgraph \"cluster_host%d\" {\n    label=\"host %d: ranks %d-%d\";\n"
            "    style=rounded;\n",
            h, h, h * n_local, h * n_local + n_local - 1);
    for (int c = 0; c < p->count; c++) {
      if (p->n[c].node->type != MC_TOPO_CPU) {
        continue;
      }
      fprintf(out, "    \"h%d_CPU%d\" [shape=house, label=\"", h, p->n[c].idx);
      cpu_label(&p->n[c], out);
      for (int g = 0; g < p->count; g++) {
        const struct mc_topo_node *gn = p->n[g].node;
        if ((gn->type == MC_TOPO_GPU) && (p->n[g].cpu == c)) {
          fprintf(out, "\\n%s %d: rank %d", (gn->gpu.sm == 0) ? "compute device" : "GPU",
                  gn->gpu.dev, h * n_local + gn->gpu.rank);
        }
      }
      fprintf(out, "\"];\n");
      draw_unused_nics(ctx, p, c, prefix, false, out);
    }
    for (int i = 0; i < p->count; i++) {
      char busid[32];
      if (p->n[i].node->type == MC_TOPO_NIC) {
        topo_tool_busid_str(p->n[i].node->id, busid, sizeof(busid));
        fprintf(out, "    \"h%d_NIC%d\" [shape=component, label=\"NIC%d\\n%s\"];\n", h, p->n[i].idx,
                p->n[i].idx, busid);
      } else if (p->n[i].node->type == MC_TOPO_NET) {
        overview_net(ctx, &p->n[i], h, out);
      }
    }
    fprintf(out, "  }\n");
    for (int i = 0; i < p->count; i++) {
      enum mc_topo_node_type t = p->n[i].node->type;
      if ((t == MC_TOPO_NIC) || (t == MC_TOPO_NET)) {
        overview_edge_in(p, i, h, out);
      }
      if (t == MC_TOPO_NET) {
        fprintf(out, "  \"h%d_NET%d\" -> \"network\" [label=\"%g GB/s\"];\n", h, p->n[i].idx,
                p->n[i].node->net.bw);
      }
      if (t == MC_TOPO_CPU) {
        draw_unused_nics(ctx, p, i, prefix, true, out);
      }
    }
    draw_grid_edges(p, prefix, out);
  }
  fprintf(out, "}\n");
}

int topo_dot_write_file(const struct topo_ctx *ctx, const char *path)
{
  struct pic p = {.n = NULL, .count = 0};
  FILE *f;
  int rc = pic_build(ctx->systems[0], &p);

  if (rc != 0) {
    return rc;
  }
  f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "meshccl-topo: cannot write %s: %s\n", path, strerror(errno));
    free(p.n);
    return MC_TOPO_TOOL_EXIT_BAD_INPUT;
  }
  if (ctx->cli.n_nodes > 1) {
    write_overview(ctx, &p, f);
  } else {
    write_dot(ctx, &p, f);
  }
  free(p.n);
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
