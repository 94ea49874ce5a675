/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-topo's private header, shared by tools/meshccl_topo.c and the
 * output forms in tools/topo/ (one file per form, as hwloc's lstopo):
 * topo_text.c (the default report), topo_json.c (--json), topo_dot.c (--dot,
 * --svg); --graphs is topo_graphs.h. meshccl_topo.c parses the command line
 * and fills a struct topo_ctx (the XML, local rank i's final system, each
 * ordered pair's transport decision); the output forms only read it.
 * topo_tool.c holds the helpers more than one form uses.
 */
#ifndef MC_TOOLS_TOPO_TOOL_H
#define MC_TOOLS_TOPO_TOOL_H

#include "topo/topo.h"
#include "topo/topo_xml.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes of meshccl-topo (0 is success). */
#define MC_TOPO_TOOL_EXIT_BAD_INPUT 2 /* bad input or usage */
#define MC_TOPO_TOOL_EXIT_INTERNAL  3 /* internal failure */

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
  bool nics_sysfs;  /* --nics sysfs: this host's NICs from /sys/class/net, not from the net */
  bool mesh;        /* --mesh: the Mesh net's view of this host and its neighbours */
  int mesh_wait_ms; /* --mesh-wait MS: how long discovery runs (default 2000) */
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

/* ------------------------------------------------------ shared helpers */

/* A node id's PCI bus id as NCCL's int64ToBusId prints it ("0000:1b:00.0"). */
void topo_tool_busid_str(int64_t id, char *buf, size_t bytes);

/* Name of a NET node of sys: the name of the XML net element with its dev
 * under a cpu of its host; "" when there is none. */
const char *topo_tool_net_name(const struct topo_ctx *ctx, const struct mc_topo_system *sys,
                               const struct mc_topo_node *net);

/* ---------------------------------------------------------------- text */

/* The default report (topo_text.c): local rank 0's system as ncclTopoPrint,
 * the GPU/NET path matrix, the P2P check per GPU pair and the transport of
 * each ordered pair of local ranks with its reason. Errors of
 * mc_topo_print / mc_topo_check_p2p propagate. */
ncclResult_t topo_text_print(const struct topo_ctx *ctx, FILE *out);

/* ---------------------------------------------------------------- json */

/* The same facts as topo_text_print as one JSON object (topo_json.c; the
 * schema is in docs/TOOLS.md). */
ncclResult_t topo_json_print(const struct topo_ctx *ctx, FILE *out);

/* ----------------------------------------------------------------- dot */

/* Writes local rank 0's system as a Graphviz graph to path (topo_dot.c).
 * Returns 0, or an exit code after printing why on stderr. */
int topo_dot_write_file(const struct topo_ctx *ctx, const char *path);

/* Whether Graphviz's dot is an executable in PATH. */
bool topo_dot_available(void);

/* Renders the graph to ctx->cli.svg_path with dot -Tsvg, from
 * ctx->cli.dot_path when given, else from a temporary file it removes.
 * Blocks until dot exits. Returns 0, or an exit code after printing why. */
int topo_dot_render_svg(const struct topo_ctx *ctx);

#endif /* MC_TOOLS_TOPO_TOOL_H */
