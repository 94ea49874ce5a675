/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Graph XML (mirrors NCCL 2.30's src/graph/search.cc: ncclTopoGetXmlFromGraphs
 * for NCCL_GRAPH_DUMP_FILE, ncclTopoGetGraphFromXml for NCCL_GRAPH_FILE):
 *
 *   <graphs version="1">
 *     <graph id pattern crossnic nchannels speedintra speedinter latencyinter
 *            typeintra typeinter samechannels>
 *       <channel> <net dev/> <gpu dev rank/> ... <net dev/> </channel>
 *
 * The writer prints NCCL's format byte for byte (two-space indent, %g floats,
 * %#lx ids). The reader is a small strict parser of that grammar: a malformed
 * file is ncclInvalidUsage naming the file and line.
 */
#include "topo/topo_graph.h"

#include "core/check.h"
#include "core/log.h"
#include "topo/topo_int.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* NCCL's kvDictLinkType: the path types a graph file may name. */
static const struct {
  const char *name;
  int type;
} graph_types[] = {
    {"LOC", MC_PATH_LOC}, {"NVL", MC_PATH_NVL}, {"NVB", MC_PATH_NVB},
    {"PIX", MC_PATH_PIX}, {"PXB", MC_PATH_PXB}, {"P2C", MC_PATH_P2C},
    {"PXN", MC_PATH_PXN}, {"PHB", MC_PATH_PHB}, {"SYS", MC_PATH_SYS},
};
#define N_GRAPH_TYPES ((int)(sizeof(graph_types) / sizeof(graph_types[0])))

static const char *graph_type_name(int type)
{
  for (int i = 0; i < N_GRAPH_TYPES; i++) {
    if (graph_types[i].type == type) {
      return graph_types[i].name;
    }
  }
  return NULL;
}

/* kvConvertToInt: the first name the value starts with; unknown is 0 (LOC). */
static int graph_type_parse(const char *str)
{
  for (int i = 0; (str != NULL) && (i < N_GRAPH_TYPES); i++) {
    if (strncmp(str, graph_types[i].name, strlen(graph_types[i].name)) == 0) {
      return graph_types[i].type;
    }
  }
  return 0;
}

/* ---------------------------------------------------------------- dump */

static int gpu_index_of_rank(const struct mc_topo_system *sys, int rank)
{
  for (int g = 0; g < sys->nodes[MC_TOPO_GPU].count; g++) {
    if (mc_topo_node_at(sys, MC_TOPO_GPU, g)->gpu.rank == rank) {
      return g;
    }
  }
  return -1;
}

static ncclResult_t dump_channel(const struct mc_topo_system *sys, const struct mc_topo_graph *g,
                                 int c, FILE *out)
{
  int ngpus = sys->nodes[MC_TOPO_GPU].count;

  fprintf(out, "    <channel>\n");
  if (sys->inter) {
    fprintf(out, "      <net dev=\"%#llx\"/>\n", (unsigned long long)g->inter[2 * c]);
  }
  for (int i = 0; i < ngpus; i++) {
    int rank = g->intra[ngpus * c + i];
    int gi = gpu_index_of_rank(sys, rank);
    const struct mc_topo_node *gpu;
    if (gi < 0) {
      return MC_FAIL(ncclInternalError, "XML Export Channel : rank %d not found.", rank);
    }
    gpu = mc_topo_node_at(sys, MC_TOPO_GPU, gi);
    fprintf(out, "      <gpu dev=\"%#llx\" rank=\"%d\"/>\n",
            (unsigned long long)MC_TOPO_ID(MC_TOPO_ID_SYSTEM(gpu->id), gpu->gpu.dev), rank);
    if (g->id == MC_TOPO_GRAPH_NVLS) {
      break; /* NVLS graphs name only the head */
    }
  }
  if (sys->inter) {
    fprintf(out, "      <net dev=\"%#llx\"/>\n", (unsigned long long)g->inter[2 * c + 1]);
  }
  fprintf(out, "    </channel>\n");
  return ncclSuccess;
}

ncclResult_t mc_topo_graphs_dump(const struct mc_topo_system *sys,
                                 const struct mc_topo_graph *const *graphs, int n_graphs, FILE *out)
{
  fprintf(out, "<graphs version=\"1\">\n");
  for (int i = 0; i < n_graphs; i++) {
    const struct mc_topo_graph *g = graphs[i];
    const char *ti = graph_type_name(g->type_intra);
    const char *te = graph_type_name(g->type_inter);
    if ((ti == NULL) || (te == NULL)) {
      /* NCCL's kvConvertToStr fails the same way. */
      return MC_FAIL(ncclInternalError,
                     "graph %d: path type %s has no name in NCCL's graph XML; not dumping", g->id,
                     mc_topo_path_type_str((ti == NULL) ? g->type_intra : g->type_inter));
    }
    fprintf(out,
            "  <graph id=\"%d\" pattern=\"%d\" crossnic=\"%d\" nchannels=\"%d\" speedintra=\"%g\" "
            "speedinter=\"%g\" latencyinter=\"%g\" typeintra=\"%s\" typeinter=\"%s\" "
            "samechannels=\"%d\"%s>\n",
            g->id, g->pattern, g->cross_nic, g->n_channels, (double)g->bw_intra,
            (double)g->bw_inter, (double)g->latency_inter, ti, te, g->same_channels,
            (g->n_channels > 0) ? "" : "/");
    for (int c = 0; c < g->n_channels; c++) {
      MC_CHECK(dump_channel(sys, g, c, out));
    }
    if (g->n_channels > 0) {
      fprintf(out, "  </graph>\n");
    }
  }
  fprintf(out, "</graphs>\n");
  return (ferror(out) != 0)
             ? MC_FAIL(ncclSystemError, "graph dump: write error: %s", strerror(errno))
             : ncclSuccess;
}

/* ---------------------------------------------------------------- load */

#define GX_MAX_ATTRS 12
#define GX_STR       64

struct gx_elem {
  char name[GX_STR];
  int n_attrs;
  char keys[GX_MAX_ATTRS][GX_STR];
  char values[GX_MAX_ATTRS][GX_STR];
  bool closing; /* </name> */
  bool empty;   /* <name .../> */
  int line;
};

struct gx_reader {
  const char *path;
  const char *p;
  const char *end;
  int line;
};

static const char *gx_attr(const struct gx_elem *e, const char *key)
{
  for (int i = 0; i < e->n_attrs; i++) {
    if (strcmp(e->keys[i], key) == 0) {
      return e->values[i];
    }
  }
  return NULL;
}

static void gx_skip_space(struct gx_reader *r)
{
  while ((r->p < r->end) && isspace((unsigned char)*r->p)) {
    if (*r->p == '\n') {
      r->line++;
    }
    r->p++;
  }
}

static ncclResult_t gx_word(struct gx_reader *r, char *buf, const char *what)
{
  int n = 0;

  while ((r->p < r->end) && (isalnum((unsigned char)*r->p) || (*r->p == '_'))) {
    if (n == GX_STR - 1) {
      return MC_FAIL(ncclInvalidUsage, "%s:%d: %s too long", r->path, r->line, what);
    }
    buf[n++] = *r->p++;
  }
  buf[n] = '\0';
  if (n == 0) {
    return MC_FAIL(ncclInvalidUsage, "%s:%d: expected %s", r->path, r->line, what);
  }
  return ncclSuccess;
}

/* Next element; *eof_out true at the end of the file. Skips <?...?> and comments. */
static ncclResult_t gx_next(struct gx_reader *r, struct gx_elem *e, bool *eof_out)
{
  memset(e, 0, sizeof(*e));
  *eof_out = false;
  for (;;) {
    gx_skip_space(r);
    if (r->p >= r->end) {
      *eof_out = true;
      return ncclSuccess;
    }
    if (*r->p != '<') {
      return MC_FAIL(ncclInvalidUsage, "%s:%d: expected '<', found '%c'", r->path, r->line, *r->p);
    }
    if ((r->end - r->p >= 2) && ((r->p[1] == '?') || (r->p[1] == '!'))) {
      const char *close = memchr(r->p, '>', (size_t)(r->end - r->p));
      if (close == NULL) {
        return MC_FAIL(ncclInvalidUsage, "%s:%d: unterminated declaration", r->path, r->line);
      }
      r->p = close + 1;
      continue;
    }
    break;
  }
  r->p++;
  e->line = r->line;
  if ((r->p < r->end) && (*r->p == '/')) {
    e->closing = true;
    r->p++;
  }
  MC_CHECK(gx_word(r, e->name, "an element name"));
  for (;;) {
    gx_skip_space(r);
    if (r->p >= r->end) {
      return MC_FAIL(ncclInvalidUsage, "%s:%d: <%s> not closed", r->path, e->line, e->name);
    }
    if (*r->p == '>') {
      r->p++;
      return ncclSuccess;
    }
    if ((*r->p == '/') && (r->end - r->p >= 2) && (r->p[1] == '>')) {
      e->empty = true;
      r->p += 2;
      return ncclSuccess;
    }
    if (e->closing || (e->n_attrs == GX_MAX_ATTRS)) {
      return MC_FAIL(ncclInvalidUsage, "%s:%d: unexpected attribute in <%s%s>", r->path, r->line,
                     e->closing ? "/" : "", e->name);
    }
    MC_CHECK(gx_word(r, e->keys[e->n_attrs], "an attribute name"));
    gx_skip_space(r);
    if ((r->p >= r->end) || (*r->p != '=')) {
      return MC_FAIL(ncclInvalidUsage, "%s:%d: expected '=' after %s", r->path, r->line,
                     e->keys[e->n_attrs]);
    }
    r->p++;
    gx_skip_space(r);
    if ((r->p >= r->end) || ((*r->p != '"') && (*r->p != '\''))) {
      return MC_FAIL(ncclInvalidUsage, "%s:%d: expected a quoted value for %s", r->path, r->line,
                     e->keys[e->n_attrs]);
    }
    char quote = *r->p++;
    int n = 0;
    while ((r->p < r->end) && (*r->p != quote)) {
      if (n == GX_STR - 1) {
        return MC_FAIL(ncclInvalidUsage, "%s:%d: value of %s too long", r->path, r->line,
                       e->keys[e->n_attrs]);
      }
      e->values[e->n_attrs][n++] = *r->p++;
    }
    if (r->p >= r->end) {
      return MC_FAIL(ncclInvalidUsage, "%s:%d: unterminated value of %s", r->path, r->line,
                     e->keys[e->n_attrs]);
    }
    r->p++;
    e->n_attrs++;
  }
}

static ncclResult_t gx_int(const struct gx_reader *r, const struct gx_elem *e, const char *key,
                           int base, long long *out)
{
  const char *v = gx_attr(e, key);
  char *end = NULL;

  if (v == NULL) {
    return MC_FAIL(ncclInvalidUsage, "%s:%d: attribute %s of <%s> not found", r->path, e->line, key,
                   e->name);
  }
  errno = 0;
  *out = strtoll(v, &end, base);
  if ((end == v) || (errno != 0)) {
    return MC_FAIL(ncclInvalidUsage, "%s:%d: attribute %s of <%s> is not a number: \"%s\"", r->path,
                   e->line, key, e->name, v);
  }
  return ncclSuccess;
}

static ncclResult_t gx_float(const struct gx_reader *r, const struct gx_elem *e, const char *key,
                             float *out)
{
  const char *v = gx_attr(e, key);
  char *end = NULL;

  if (v == NULL) {
    return MC_FAIL(ncclInvalidUsage, "%s:%d: attribute %s of <%s> not found", r->path, e->line, key,
                   e->name);
  }
  *out = strtof(v, &end);
  if (end == v) {
    return MC_FAIL(ncclInvalidUsage, "%s:%d: attribute %s of <%s> is not a number: \"%s\"", r->path,
                   e->line, key, e->name, v);
  }
  return ncclSuccess;
}

/* ncclTopoGetChannelFromXml: one <channel> into channel c of graph. */
static ncclResult_t load_channel(struct gx_reader *r, const struct mc_topo_system *sys,
                                 struct mc_topo_graph *g, int c, bool apply)
{
  int ngpus = sys->nodes[MC_TOPO_GPU].count;
  int n_net = 0;
  int n_gpu = 0;
  struct gx_elem e;
  bool eof;

  for (;;) {
    MC_CHECK(gx_next(r, &e, &eof));
    if (eof) {
      return MC_FAIL(ncclInvalidUsage, "%s: <channel> not closed", r->path);
    }
    if (e.closing && (strcmp(e.name, "channel") == 0)) {
      return ncclSuccess;
    }
    if (!e.empty || ((strcmp(e.name, "net") != 0) && (strcmp(e.name, "gpu") != 0))) {
      return MC_FAIL(ncclInvalidUsage, "%s:%d: expected <net .../> or <gpu .../>, found <%s%s>",
                     r->path, e.line, e.closing ? "/" : "", e.name);
    }
    long long dev = 0;
    MC_CHECK(gx_int(r, &e, "dev", 16, &dev));
    if (strcmp(e.name, "net") == 0) {
      if (n_net == 2) {
        return MC_FAIL(ncclInvalidUsage, "%s:%d: more than two <net> in a channel", r->path,
                       e.line);
      }
      if (apply && (c < MC_TOPO_MAX_CHANNELS)) {
        g->inter[2 * c + n_net] = dev;
      }
      n_net++;
      continue;
    }
    int rank = -1;
    if (gx_attr(&e, "rank") != NULL) {
      long long v = 0;
      MC_CHECK(gx_int(r, &e, "rank", 0, &v));
      rank = (int)v;
    } else {
      for (int i = 0; i < ngpus; i++) {
        const struct mc_topo_node *gpu = mc_topo_node_at(sys, MC_TOPO_GPU, i);
        if (MC_TOPO_ID(MC_TOPO_ID_SYSTEM(gpu->id), gpu->gpu.dev) == (int64_t)dev) {
          rank = gpu->gpu.rank;
        }
      }
      if (rank == -1) {
        return MC_FAIL(ncclInvalidUsage, "%s:%d: XML Import Channel : dev %lld not found.", r->path,
                       e.line, dev);
      }
    }
    if (n_gpu == ngpus) {
      return MC_FAIL(ncclInvalidUsage, "%s:%d: channel %d names more than the %d GPUs of this node",
                     r->path, e.line, c, ngpus);
    }
    if (apply && (c < MC_TOPO_MAX_CHANNELS)) {
      g->intra[ngpus * c + n_gpu] = rank;
    }
    n_gpu++;
  }
}

/* ncclTopoGetGraphFromXmlSub for one <graph>; *n_loaded_out its channel elements. */
static ncclResult_t load_graph(struct gx_reader *r, const struct gx_elem *ge,
                               const struct mc_topo_system *sys, struct mc_topo_graph *g,
                               const struct mc_topo_search_opts *opts, int *n_loaded_out)
{
  long long v = 0;
  bool apply;
  int n_channels = 0;
  struct gx_elem e;
  bool eof;

  MC_CHECK(gx_int(r, ge, "id", 0, &v));
  apply = (v == g->id);
  if (apply) {
    long long cross = 0;
    MC_CHECK(gx_int(r, ge, "crossnic", 0, &cross));
    if ((opts->cross_nic == 0) && (cross == 1)) {
      apply = false;
    }
  }
  if (apply) {
    long long x = 0;
    const char *lat;
    MC_CHECK(gx_int(r, ge, "crossnic", 0, &x));
    g->cross_nic = (int)x;
    MC_CHECK(gx_int(r, ge, "pattern", 0, &x));
    g->pattern = (int)x;
    MC_CHECK(gx_int(r, ge, "nchannels", 0, &x));
    if ((x < 0) || (x > MC_TOPO_MAX_CHANNELS)) {
      return MC_FAIL(ncclInvalidUsage, "%s:%d: nchannels %lld out of range [0, %d]", r->path,
                     ge->line, x, MC_TOPO_MAX_CHANNELS);
    }
    g->n_channels = (int)x;
    MC_CHECK(gx_float(r, ge, "speedintra", &g->bw_intra));
    MC_CHECK(gx_float(r, ge, "speedinter", &g->bw_inter));
    lat = gx_attr(ge, "latencyinter");
    if (lat == NULL) {
      MC_INFO(MC_SUB_GRAPH, "latencyinter not found in graph, using 0.0");
    }
    g->latency_inter = (lat != NULL) ? strtof(lat, NULL) : 0.0f;
    g->type_intra = graph_type_parse(gx_attr(ge, "typeintra"));
    g->type_inter = graph_type_parse(gx_attr(ge, "typeinter"));
    MC_CHECK(gx_int(r, ge, "samechannels", 0, &x));
    g->same_channels = (int)x;
  }
  if (ge->empty) {
    *n_loaded_out = apply ? 0 : *n_loaded_out;
    return ncclSuccess;
  }
  for (;;) {
    MC_CHECK(gx_next(r, &e, &eof));
    if (eof) {
      return MC_FAIL(ncclInvalidUsage, "%s: <graph> not closed", r->path);
    }
    if (e.closing && (strcmp(e.name, "graph") == 0)) {
      break;
    }
    if (e.closing || (strcmp(e.name, "channel") != 0)) {
      return MC_FAIL(ncclInvalidUsage, "%s:%d: expected <channel>, found <%s%s>", r->path, e.line,
                     e.closing ? "/" : "", e.name);
    }
    if (e.empty) {
      n_channels++;
      continue;
    }
    MC_CHECK(load_channel(r, sys, g, n_channels, apply));
    n_channels++;
  }
  if (apply) {
    *n_loaded_out = n_channels;
  }
  return ncclSuccess;
}

static ncclResult_t read_file(const char *path, char **buf_out, size_t *bytes_out)
{
  FILE *f = fopen(path, "r");
  char *buf = NULL;
  size_t cap = 0;
  size_t n = 0;

  if (f == NULL) {
    return MC_FAIL(ncclInvalidUsage, "NCCL_GRAPH_FILE %s: cannot open: %s", path, strerror(errno));
  }
  for (;;) {
    if (n == cap) {
      size_t ncap = (cap == 0) ? 65536 : cap * 2;
      char *nbuf = realloc(buf, ncap);
      if ((nbuf == NULL) || (ncap > (64u << 20))) {
        free((nbuf != NULL) ? nbuf : buf);
        fclose(f);
        return MC_FAIL(ncclInvalidUsage, "NCCL_GRAPH_FILE %s: too large or out of memory", path);
      }
      buf = nbuf;
      cap = ncap;
    }
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (got == 0) {
      break;
    }
  }
  if (ferror(f) != 0) {
    free(buf);
    fclose(f);
    return MC_FAIL(ncclInvalidUsage, "NCCL_GRAPH_FILE %s: read error", path);
  }
  fclose(f);
  *buf_out = buf;
  *bytes_out = n;
  return ncclSuccess;
}

/* Loads graph->id's graph from opts->graph_file into graph (search.cc's
 * NCCL_GRAPH_FILE branch of ncclTopoCompute). */
ncclResult_t mc_topo_graph_load(struct mc_topo_system *sys, struct mc_topo_graph *graph,
                                const struct mc_topo_search_opts *opts, int *n_loaded_out)
{
  char *buf = NULL;
  size_t bytes = 0;
  struct gx_reader r;
  struct gx_elem e;
  bool eof;
  ncclResult_t res = ncclSuccess;
  int n_loaded = 0;

  MC_INFO(MC_SUB_ENV, "NCCL_GRAPH_FILE set by environment to %s", opts->graph_file);
  MC_CHECK(read_file(opts->graph_file, &buf, &bytes));
  r = (struct gx_reader){.path = opts->graph_file, .p = buf, .end = buf + bytes, .line = 1};
  MC_CHECK_GOTO(gx_next(&r, &e, &eof), res, out);
  if (eof || e.closing || (strcmp(e.name, "graphs") != 0)) {
    res = MC_FAIL(ncclInvalidUsage, "%s:%d: expected <graphs version=\"1\">", r.path, r.line);
    goto out;
  }
  if (!e.empty) {
    for (;;) {
      MC_CHECK_GOTO(gx_next(&r, &e, &eof), res, out);
      if (eof) {
        res = MC_FAIL(ncclInvalidUsage, "%s: <graphs> not closed", r.path);
        goto out;
      }
      if (e.closing && (strcmp(e.name, "graphs") == 0)) {
        break;
      }
      if (e.closing || (strcmp(e.name, "graph") != 0)) {
        res = MC_FAIL(ncclInvalidUsage, "%s:%d: expected <graph>, found <%s%s>", r.path, e.line,
                      e.closing ? "/" : "", e.name);
        goto out;
      }
      MC_CHECK_GOTO(load_graph(&r, &e, sys, graph, opts, &n_loaded), res, out);
    }
  }
  MC_INFO(MC_SUB_GRAPH, "Search %d : %d channels loaded from XML graph", graph->id, n_loaded);
  *n_loaded_out = n_loaded;
out:
  free(buf);
  return res;
}
