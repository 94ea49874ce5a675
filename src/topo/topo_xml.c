/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Topology XML: parser, writer, attribute access, find, fuse.
 *
 * Mirrors NCCL 2.30's src/graph/xml.cc and xml.h (xmlLoadSub and its handler
 * tables, ncclTopoDumpXmlRec, xmlFindNode/xmlAddTree/ncclTopoFuseXml, the
 * xmlSetAttr* family); it does not copy NCCL's code. Where NCCL's reader is
 * lax in ways that could only come from a broken file, this one refuses with a
 * message (see "Deviations" below); everything NCCL accepts from a real file
 * is accepted and gives the same tree, so dumps are byte-identical.
 *
 * Grammar (NCCL's):
 *  - between elements only ' ', '\n' and '\r' are whitespace (a tab is an error);
 *  - a tag is '<' name { ' ' attribute } ( '>' | '/>' ) on one line, where an
 *    attribute is key [ '=' quoted-value ]: a key without '=' gets an empty
 *    value and two spaces (or a space before '>') make an attribute with an
 *    empty key, exactly as NCCL stores them;
 *  - values are quoted with '"' or '\'' and may hold any byte but NUL and
 *    their quote (newlines included);
 *  - comments "<!-- ... -->" are skipped wherever a tag may start; there is no
 *    prolog, entity or CDATA handling;
 *  - at most MC_XML_MAX_ATTRS attributes per element: further ones are read
 *    and dropped with an INFO line;
 *  - nesting: system -> cpu; cpu -> pci | nic; pci -> pci | gpu | nic | pcilink;
 *    gpu -> nvlink | c2c; nic -> net. Any other element is parsed and dropped
 *    with its subtree (INFO "ignoring element").
 *
 * Deviations from NCCL 2.30 (all refuse input NCCL would take silently, or
 * accept one more element/character where NCCL is off by one):
 *  - RCCL's <system version="2"> is accepted (NCCL refuses any version but 1);
 *  - a file without a <system> element (empty, only comments, a graph file)
 *    is refused; NCCL loads it as an empty topology;
 *  - element names must be non-empty and free of control characters, '<',
 *    '=', and quotes; '/' in a tag must be followed by '>'; closing tags of
 *    ignored elements must match (NCCL does not check them); a closing tag at
 *    the top level is an error; NUL bytes are refused;
 *  - names and values may have 255 characters (NCCL refuses 255-character
 *    values and element names), a tree holds max_nodes elements (NCCL
 *    max_nodes - 1), nesting is limited to MC_XML_PARSE_MAX_DEPTH levels;
 *  - a value that contains '"' is written between '\'' (NCCL writes '"' and
 *    produces a file it cannot read back).
 *
 * Length: one port of NCCL's xml.cc / xml.h (reader, writer, fuse), kept in its shape.
 */
#include "topo_xml.h"

#include "check.h"
#include "log.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

/* Deepest element nesting the parser follows (real files: about 10). */
#define MC_XML_PARSE_MAX_DEPTH 128
/* Largest file mc_xml_load_file reads. */
#define MC_XML_MAX_FILE_BYTES (16u << 20)

/* ---------- parser ---------- */

struct xml_frame {
  struct mc_xml_node *node; /* NULL for an ignored element */
  char name[MC_XML_MAX_STR];
  int line;
};

struct xml_parser {
  const char *buf;
  size_t len;
  size_t pos;
  const char *file; /* name used in messages */
  int line;
  struct mc_xml_node tag; /* the tag being read */
  bool tag_is_close;
  struct mc_xml_node *nodes; /* scratch tree */
  int n_nodes;
  int cap;       /* slots in nodes (bounded by the input size) */
  int max_nodes; /* the destination tree's limit */
  int depth;
  bool has_system;
  char first_top[MC_XML_MAX_STR]; /* first top-level element, for the "no <system>" error */
  int first_top_line;
  struct xml_frame stack[MC_XML_PARSE_MAX_DEPTH];
};

static int peek(const struct xml_parser *p)
{
  return (p->pos < p->len) ? (unsigned char)p->buf[p->pos] : -1;
}

static int peek_at(const struct xml_parser *p, size_t off)
{
  return (p->pos + off < p->len) ? (unsigned char)p->buf[p->pos + off] : -1;
}

static void advance(struct xml_parser *p)
{
  if (p->pos < p->len) {
    if (p->buf[p->pos] == '\n')
      p->line++;
    p->pos++;
  }
}

/* How a character is named in messages: 'x', newline, tab, end of file, byte 0x01. */
static const char *describe(int c, char *buf, size_t buf_bytes)
{
  switch (c) {
  case -1:
    return "end of file";
  case '\n':
    return "newline";
  case '\r':
    return "carriage return";
  case '\t':
    return "tab";
  case ' ':
    return "' '";
  default:
    break;
  }
  if ((c < 0x20) || (c >= 0x7f))
    snprintf(buf, buf_bytes, "byte 0x%02x", (unsigned)c);
  else
    snprintf(buf, buf_bytes, "'%c'", c);
  return buf;
}

/* The detection point of every syntax error: "<file>:<line>: <what>". */
static ncclResult_t parse_fail(const struct xml_parser *p, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ncclResult_t parse_fail(const struct xml_parser *p, int line, const char *fmt, ...)
{
  char msg[768];
  va_list ap;

  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  return MC_FAIL(ncclInvalidUsage, "%s:%d: %s", p->file, line, msg);
}

/* Bytes that may not appear in an element name or attribute key. */
static bool is_bad_name_char(int c)
{
  return (c < 0x20) || (c == 0x7f) || (c == '<') || (c == '"') || (c == '\'') || (c == '=');
}

/* Element name up to ' ', '>' or '/' (not consumed). */
static ncclResult_t read_name(struct xml_parser *p, char *name, const char *after)
{
  char cbuf[16];
  int n = 0;
  int c;

  for (;;) {
    c = peek(p);
    if ((c == ' ') || (c == '>') || (c == '/'))
      break;
    if ((c == -1) || is_bad_name_char(c)) {
      name[n] = '\0';
      if (n == 0)
        return parse_fail(p, p->line, "expected an element name after '%s', found %s", after,
                          describe(c, cbuf, sizeof(cbuf)));
      return parse_fail(p, p->line, "expected ' ', '>' or '/>' after '%s%s', found %s", after, name,
                        describe(c, cbuf, sizeof(cbuf)));
    }
    if (n == MC_XML_MAX_STR - 1) {
      name[n] = '\0';
      return parse_fail(p, p->line, "element name '%.32s...' is longer than %d characters", name,
                        MC_XML_MAX_STR - 1);
    }
    name[n++] = (char)c;
    advance(p);
  }
  name[n] = '\0';
  if (n == 0)
    return parse_fail(p, p->line, "expected an element name after '%s', found %s", after,
                      describe(c, cbuf, sizeof(cbuf)));
  return ncclSuccess;
}

/* One attribute after its leading ' ': key [= quoted value]. */
static ncclResult_t read_attr(struct xml_parser *p, struct mc_xml_attr *attr)
{
  const char *elem = p->tag.name;
  char cbuf[16];
  int n = 0;
  int c;
  int quote;
  int start_line;

  attr->key[0] = '\0';
  attr->value[0] = '\0';
  for (;;) {
    c = peek(p);
    if ((c == ' ') || (c == '>') || (c == '/') || (c == '='))
      break;
    if ((c == -1) || is_bad_name_char(c)) {
      attr->key[n] = '\0';
      return parse_fail(p, p->line, "expected '=' after attribute name '%s' of <%s>, found %s",
                        attr->key, elem, describe(c, cbuf, sizeof(cbuf)));
    }
    if (n == MC_XML_MAX_STR - 1) {
      attr->key[n] = '\0';
      return parse_fail(p, p->line,
                        "attribute name '%.32s...' of <%s> is longer than %d characters", attr->key,
                        elem, MC_XML_MAX_STR - 1);
    }
    attr->key[n++] = (char)c;
    advance(p);
  }
  attr->key[n] = '\0';
  if (c != '=')
    return ncclSuccess; /* NCCL: a key without a value, empty value */
  advance(p);
  quote = peek(p);
  if ((quote != '"') && (quote != '\''))
    return parse_fail(p, p->line, "expected a quoted value after %s= in <%s>, found %s", attr->key,
                      elem, describe(quote, cbuf, sizeof(cbuf)));
  start_line = p->line;
  advance(p);
  n = 0;
  for (;;) {
    c = peek(p);
    if (c == quote)
      break;
    if (c == -1)
      return parse_fail(
          p, start_line,
          "unterminated value of attribute %s in <%s>: expected %c, found end of file", attr->key,
          elem, quote);
    if (c == 0)
      return parse_fail(p, p->line, "value of attribute %s in <%s> holds byte 0x00", attr->key,
                        elem);
    if (n == MC_XML_MAX_STR - 1) {
      attr->value[n] = '\0';
      return parse_fail(p, start_line, "value of attribute %s in <%s> is longer than %d characters",
                        attr->key, elem, MC_XML_MAX_STR - 1);
    }
    attr->value[n++] = (char)c;
    advance(p);
  }
  attr->value[n] = '\0';
  advance(p); /* closing quote */
  return ncclSuccess;
}

/* Skips a comment; p->pos is at "<!--". */
static ncclResult_t skip_comment(struct xml_parser *p)
{
  int start_line = p->line;

  for (int i = 0; i < 4; i++)
    advance(p);
  for (;;) {
    if (peek(p) == -1)
      return parse_fail(p, start_line, "unterminated comment: expected '-->', found end of file");
    if ((peek(p) == '-') && (peek_at(p, 1) == '-') && (peek_at(p, 2) == '>')) {
      for (int i = 0; i < 3; i++)
        advance(p);
      return ncclSuccess;
    }
    advance(p);
  }
}

/*
 * Reads the next tag into p->tag (xmlGetNode). *eof_out is set when only
 * whitespace and comments remain.
 */
static ncclResult_t read_tag(struct xml_parser *p, bool *eof_out)
{
  struct mc_xml_node *tag = &p->tag;
  struct mc_xml_attr extra;
  char cbuf[16];
  int c;

  *eof_out = false;
  for (;;) {
    c = peek(p);
    while ((c == ' ') || (c == '\n') || (c == '\r')) {
      advance(p);
      c = peek(p);
    }
    if (c == -1) {
      *eof_out = true;
      return ncclSuccess;
    }
    if (c != '<') {
      if (p->depth > 0)
        return parse_fail(p, p->line, "expected '<' (a child element or </%s>), found %s",
                          p->stack[p->depth - 1].name, describe(c, cbuf, sizeof(cbuf)));
      return parse_fail(p, p->line, "expected '<', found %s", describe(c, cbuf, sizeof(cbuf)));
    }
    if ((peek_at(p, 1) == '!') && (peek_at(p, 2) == '-') && (peek_at(p, 3) == '-')) {
      MC_CHECK(skip_comment(p));
      continue;
    }
    break;
  }

  tag->n_attrs = 0;
  tag->n_subs = 0;
  tag->parent = NULL;
  tag->line = p->line;
  advance(p); /* '<' */
  if (peek(p) == '/') {
    advance(p);
    p->tag_is_close = true;
    tag->type = MC_XML_NODE_CLOSE;
    MC_CHECK(read_name(p, tag->name, "</"));
    c = peek(p);
    if (c != '>')
      return parse_fail(p, p->line, "expected '>' after '</%s', found %s", tag->name,
                        describe(c, cbuf, sizeof(cbuf)));
    advance(p);
    return ncclSuccess;
  }
  p->tag_is_close = false;
  tag->type = MC_XML_NODE_OPEN;
  MC_CHECK(read_name(p, tag->name, "<"));

  while (peek(p) == ' ') {
    struct mc_xml_attr *attr =
        (tag->n_attrs < MC_XML_MAX_ATTRS) ? &tag->attrs[tag->n_attrs] : &extra;

    advance(p);
    MC_CHECK(read_attr(p, attr));
    if (attr == &extra)
      MC_INFO(MC_SUB_GRAPH, "XML: %s:%d: <%s> has more than %d attributes, ignoring %s=\"%s\"",
              p->file, p->line, tag->name, MC_XML_MAX_ATTRS, extra.key, extra.value);
    else
      tag->n_attrs++;
  }
  c = peek(p);
  if (c == '/') {
    advance(p);
    c = peek(p);
    if (c != '>')
      return parse_fail(p, p->line, "expected '>' after '/' in <%s/>, found %s", tag->name,
                        describe(c, cbuf, sizeof(cbuf)));
    tag->type = MC_XML_NODE_SINGLE;
  } else if (c != '>') {
    if (tag->name[0] == '?')
      return parse_fail(p, p->line,
                        "expected '>' after attribute list of <%s>, found %s (NCCL's parser "
                        "takes no <?xml ...?> prolog: remove it)",
                        tag->name, describe(c, cbuf, sizeof(cbuf)));
    return parse_fail(p, p->line, "expected '>' after attribute list of <%s>, found %s", tag->name,
                      describe(c, cbuf, sizeof(cbuf)));
  }
  advance(p);
  return ncclSuccess;
}

/* NCCL's handler tables: may an element `name` sit under `parent` (NULL: top level)? */
static bool is_allowed(const char *parent, const char *name)
{
  static const struct {
    const char *parent;
    const char *child;
  } rules[] = {
      {"", "system"},    {"system", "cpu"}, {"cpu", "pci"}, {"cpu", "nic"},
      {"pci", "pci"},    {"pci", "gpu"},    {"pci", "nic"}, {"pci", "pcilink"},
      {"gpu", "nvlink"}, {"gpu", "c2c"},    {"nic", "net"},
  };
  const char *pname = (parent == NULL) ? "" : parent;

  for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
    if ((strcmp(rules[i].parent, pname) == 0) && (strcmp(rules[i].child, name) == 0))
      return true;
  }
  return false;
}

static int loading_logged; /* the "Loading ... topology" line was printed (atomic) */

/* The "Loading topology" line, once per process: the ranks of a host parse
 * each other's XML or receive the fused tree (init's fusion), which would
 * repeat the line per rank and per load, or skip it on some ranks. */
static void log_loading(const char *name)
{
  if (__atomic_exchange_n(&loading_logged, 1, __ATOMIC_RELAXED) != 0)
    return;
  if (name != NULL)
    MC_INFO(MC_SUB_GRAPH, "Loading topology %s", name);
  else
    MC_INFO(MC_SUB_GRAPH, "Loading unnamed topology");
}

/* ncclTopoXmlLoadSystem: version check and the "Loading topology" line. */
static ncclResult_t check_system(const struct xml_parser *p, const struct mc_xml_node *node)
{
  const char *version = mc_xml_get_attr(node, "version");
  const char *name = mc_xml_get_attr(node, "name");
  long v;
  char *end = NULL;

  if (version == NULL)
    return parse_fail(p, node->line, "<system> has no version attribute: expected version=\"1\"");
  errno = 0;
  v = strtol(version, &end, 0);
  if ((end == version) || (errno != 0) || ((v != 1) && (v != 2)))
    return parse_fail(p, node->line,
                      "<system version=\"%s\">: expected version \"1\" (NCCL) or \"2\" (RCCL)",
                      version);
  if (v == 2)
    MC_INFO(MC_SUB_GRAPH,
            "XML: %s:%d: RCCL topology (version 2): elements NCCL does not know are ignored",
            p->file, node->line);
  log_loading(name);
  return ncclSuccess;
}

void mc_xml_log_loading(const struct mc_xml *xml)
{
  for (int i = 0; i < xml->n_nodes; i++) {
    if (strcmp(xml->nodes[i].name, "system") == 0) {
      log_loading(mc_xml_get_attr(&xml->nodes[i], "name"));
      return;
    }
  }
}

/* Appends the tag just read to the scratch tree under parent. */
static ncclResult_t commit_tag(struct xml_parser *p, struct mc_xml_node *parent,
                               struct mc_xml_node **node_out)
{
  struct mc_xml_node *node;

  if (p->n_nodes == p->max_nodes)
    return parse_fail(p, p->tag.line, "more than %d elements at <%s> (the tree holds at most %d)",
                      p->max_nodes, p->tag.name, p->max_nodes);
  if (p->n_nodes == p->cap) /* cannot happen: every element takes 3 bytes or more */
    return MC_FAIL(ncclInternalError, "%s:%d: XML scratch tree full (%d)", p->file, p->tag.line,
                   p->cap);
  if ((parent != NULL) && (parent->n_subs == MC_XML_MAX_SUBS))
    return parse_fail(p, p->tag.line, "<%s> (line %d) has more than %d children", parent->name,
                      parent->line, MC_XML_MAX_SUBS);
  node = &p->nodes[p->n_nodes++];
  memcpy(node->name, p->tag.name, sizeof(node->name));
  memcpy(node->attrs, p->tag.attrs, sizeof(node->attrs[0]) * (size_t)p->tag.n_attrs);
  node->n_attrs = p->tag.n_attrs;
  node->type = p->tag.type;
  node->parent = parent;
  node->n_subs = 0;
  node->line = p->tag.line;
  if (parent != NULL)
    parent->subs[parent->n_subs++] = node;
  *node_out = node;
  return ncclSuccess;
}

/* xmlLoadSub, iteratively: one tag at a time against the stack of open elements. */
static ncclResult_t parse(struct xml_parser *p)
{
  for (;;) {
    struct xml_frame *top = (p->depth > 0) ? &p->stack[p->depth - 1] : NULL;
    struct mc_xml_node *node = NULL;
    bool is_eof;
    bool is_ignored_parent;

    MC_CHECK(read_tag(p, &is_eof));
    if (is_eof) {
      if (top != NULL)
        return parse_fail(
            p, p->line, "unterminated <%s> (opened at line %d): expected </%s>, found end of file",
            top->name, top->line, top->name);
      break;
    }
    if (p->tag_is_close) {
      if (top == NULL)
        return parse_fail(p, p->tag.line, "unexpected </%s>: no element is open", p->tag.name);
      if (strcmp(top->name, p->tag.name) != 0)
        return parse_fail(p, p->tag.line, "expected </%s> (opened at line %d), found </%s>",
                          top->name, top->line, p->tag.name);
      p->depth--;
      continue;
    }

    is_ignored_parent = (top != NULL) && (top->node == NULL);
    if ((top == NULL) && (p->first_top[0] == '\0')) {
      memcpy(p->first_top, p->tag.name, sizeof(p->first_top));
      p->first_top_line = p->tag.line;
    }
    if (!is_ignored_parent && is_allowed((top == NULL) ? NULL : top->name, p->tag.name)) {
      MC_CHECK(commit_tag(p, (top == NULL) ? NULL : top->node, &node));
      if (top == NULL) {
        MC_CHECK(check_system(p, node));
        p->has_system = true;
      }
    } else if (!is_ignored_parent) {
      MC_INFO(MC_SUB_GRAPH, "XML: %s:%d: ignoring element %s", p->file, p->tag.line, p->tag.name);
    }

    if (p->tag.type == MC_XML_NODE_OPEN) {
      struct xml_frame *f;

      if (p->depth == MC_XML_PARSE_MAX_DEPTH)
        return parse_fail(p, p->tag.line, "<%s> is nested deeper than %d elements", p->tag.name,
                          MC_XML_PARSE_MAX_DEPTH);
      f = &p->stack[p->depth++];
      f->node = node;
      memcpy(f->name, p->tag.name, sizeof(f->name));
      f->line = p->tag.line;
    }
  }
  if (!p->has_system) {
    if (p->first_top[0] == '\0')
      return parse_fail(p, p->line, "expected <system version=\"1\">, found end of file");
    if (strcmp(p->first_top, "graphs") == 0)
      return parse_fail(p, p->first_top_line,
                        "expected <system version=\"1\">, found only <graphs>: this is an NCCL "
                        "graph file (NCCL_GRAPH_FILE), not a topology file (NCCL_TOPO_FILE)");
    return parse_fail(p, p->first_top_line, "expected <system version=\"1\">, found only <%s>",
                      p->first_top);
  }
  return ncclSuccess;
}

/* Copies the scratch tree into xml, rebasing the pointers. */
static void install_tree(struct mc_xml *xml, const struct mc_xml_node *scratch, int n_nodes)
{
  for (int i = 0; i < n_nodes; i++) {
    const struct mc_xml_node *s = &scratch[i];
    struct mc_xml_node *d = &xml->nodes[i];

    /* The used parts only: a node is ~13 KiB, mostly room for attributes. */
    memcpy(d->name, s->name, sizeof(d->name));
    memcpy(d->attrs, s->attrs, sizeof(d->attrs[0]) * (size_t)s->n_attrs);
    d->n_attrs = s->n_attrs;
    d->type = s->type;
    d->line = s->line;
    d->n_subs = s->n_subs;
    d->parent = (s->parent == NULL) ? NULL : &xml->nodes[s->parent - scratch];
    for (int k = 0; k < s->n_subs; k++)
      d->subs[k] = &xml->nodes[s->subs[k] - scratch];
  }
  xml->n_nodes = n_nodes;
}

ncclResult_t mc_xml_load_buf(const char *buf, size_t bytes, const char *name, struct mc_xml *xml)
{
  ncclResult_t res = ncclSuccess;
  struct xml_parser *p = NULL;
  size_t cap;

  if ((xml == NULL) || ((buf == NULL) && (bytes > 0)))
    return MC_FAIL(ncclInvalidArgument, "mc_xml_load_buf: NULL %s", (xml == NULL) ? "tree" : "buf");
  if (name == NULL)
    name = "(buffer)";
  MC_CHECK(mc_calloc(&p, 1));
  p->buf = buf;
  p->len = bytes;
  p->file = name;
  p->line = 1;
  p->max_nodes = xml->max_nodes;
  /* Every element starts with '<', so their count bounds the scratch tree
   * (nodes are ~13 KiB: a looser bound, such as bytes / 3, made calloc clear
   * megabytes per parse). */
  cap = 1;
  for (size_t i = 0; i < bytes; i++)
    cap += (buf[i] == '<');
  p->cap = (cap < (size_t)xml->max_nodes) ? (int)cap : xml->max_nodes;
  /* Not cleared: the parser fills every field of a node it adds
   * (name, attributes, type, parent, children, line). */
  p->nodes = malloc((size_t)p->cap * sizeof(*p->nodes));
  if (p->nodes == NULL) {
    res = MC_FAIL(ncclSystemError, "%s: out of memory for %d XML elements", name, p->cap);
    goto out;
  }
  MC_CHECK_GOTO(parse(p), res, out);
  install_tree(xml, p->nodes, p->n_nodes);
out:
  free(p->nodes);
  free(p);
  return res;
}

ncclResult_t mc_xml_load_file(const char *path, struct mc_xml *xml)
{
  ncclResult_t res = ncclSuccess;
  FILE *f;
  char *buf = NULL;
  size_t len = 0;
  size_t cap = 0;

  if ((path == NULL) || (xml == NULL))
    return MC_FAIL(ncclInvalidArgument, "mc_xml_load_file: NULL %s",
                   (xml == NULL) ? "tree" : "path");
  f = fopen(path, "r");
  if (f == NULL)
    return MC_FAIL(ncclInvalidUsage, "%s: cannot open topology file: %s", path, strerror(errno));
  MC_INFO(MC_SUB_GRAPH, "Loading topology file %s", path);
  for (;;) {
    size_t got;

    if (len == cap) {
      char *grown;

      if (cap == MC_XML_MAX_FILE_BYTES) {
        res = MC_FAIL(ncclInvalidUsage, "%s: larger than %u MiB, not a topology file", path,
                      MC_XML_MAX_FILE_BYTES >> 20);
        goto out;
      }
      cap = (cap == 0) ? 65536 : cap * 2;
      if (cap > MC_XML_MAX_FILE_BYTES)
        cap = MC_XML_MAX_FILE_BYTES;
      grown = realloc(buf, cap);
      if (grown == NULL) {
        res = MC_FAIL(ncclSystemError, "%s: out of memory reading %zu bytes", path, cap);
        goto out;
      }
      buf = grown;
    }
    got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (got == 0) {
      if (ferror(f)) {
        res = MC_FAIL(ncclInvalidUsage, "%s: read failed: %s", path, strerror(errno));
        goto out;
      }
      break;
    }
  }
  MC_CHECK_GOTO(mc_xml_load_buf(buf, len, path, xml), res, out);
out:
  free(buf);
  fclose(f);
  return res;
}

/* ---------- tree ---------- */

ncclResult_t mc_xml_create(int max_nodes, struct mc_xml **xml_out)
{
  struct mc_xml *xml = NULL;

  if ((xml_out == NULL) || (max_nodes < 1) || (max_nodes > MC_XML_MAX_NODES))
    return MC_FAIL(ncclInvalidArgument, "mc_xml_create: max_nodes %d not in 1..%d", max_nodes,
                   MC_XML_MAX_NODES);
  MC_CHECK(mc_calloc(&xml, 1));
  if (mc_calloc(&xml->nodes, (size_t)max_nodes) != ncclSuccess) {
    free(xml);
    return ncclSystemError;
  }
  xml->max_nodes = max_nodes;
  *xml_out = xml;
  return ncclSuccess;
}

void mc_xml_destroy(struct mc_xml *xml)
{
  if (xml == NULL)
    return;
  free(xml->nodes);
  free(xml);
}

void mc_xml_clear(struct mc_xml *xml)
{
  if (xml != NULL)
    xml->n_nodes = 0;
}

ncclResult_t mc_xml_add_node(struct mc_xml *xml, struct mc_xml_node *parent, const char *name,
                             struct mc_xml_node **node_out)
{
  struct mc_xml_node *node;

  if ((xml == NULL) || (name == NULL))
    return MC_FAIL(ncclInvalidArgument, "mc_xml_add_node: NULL %s",
                   (xml == NULL) ? "tree" : "name");
  if (xml->n_nodes == xml->max_nodes)
    return MC_FAIL(ncclInvalidUsage,
                   "topology XML: cannot add <%s>: the tree holds at most %d elements", name,
                   xml->max_nodes);
  if ((parent != NULL) && (parent->n_subs == MC_XML_MAX_SUBS))
    return MC_FAIL(ncclInvalidUsage, "topology XML: cannot add <%s> to <%s>: at most %d children",
                   name, parent->name, MC_XML_MAX_SUBS);
  node = &xml->nodes[xml->n_nodes++];
  /* The attributes and children past n_attrs and n_subs are never read:
   * clearing all 13.6 KB faulted in every page of every element. */
  memset(node, 0, offsetof(struct mc_xml_node, attrs));
  snprintf(node->name, sizeof(node->name), "%s", name);
  node->parent = parent;
  if (parent != NULL)
    parent->subs[parent->n_subs++] = node;
  if (node_out != NULL)
    *node_out = node;
  return ncclSuccess;
}

ncclResult_t mc_xml_remove_node(struct mc_xml_node *node)
{
  struct mc_xml_node *parent;
  int shift = 0;

  if (node == NULL)
    return MC_FAIL(ncclInvalidArgument, "mc_xml_remove_node: NULL node");
  node->type = MC_XML_NODE_NONE;
  parent = node->parent;
  if (parent == NULL)
    return ncclSuccess;
  for (int s = 0; s < parent->n_subs; s++) {
    if (parent->subs[s] == node)
      shift++;
    else if (shift > 0)
      parent->subs[s - shift] = parent->subs[s];
  }
  parent->n_subs -= shift;
  return ncclSuccess;
}

/* ---------- attributes ---------- */

int mc_xml_attr_index(const struct mc_xml_node *node, const char *key)
{
  if ((node == NULL) || (key == NULL))
    return -1;
  for (int a = 0; a < node->n_attrs; a++) {
    if (strncmp(node->attrs[a].key, key, MC_XML_MAX_STR) == 0)
      return a;
  }
  return -1;
}

const char *mc_xml_get_attr(const struct mc_xml_node *node, const char *key)
{
  int a = mc_xml_attr_index(node, key);

  return (a < 0) ? NULL : node->attrs[a].value;
}

static ncclResult_t attr_missing(const struct mc_xml_node *node, const char *key)
{
  if (node == NULL)
    return MC_FAIL(ncclInvalidArgument, "topology XML: NULL node reading attribute %s", key);
  return MC_FAIL(ncclInvalidUsage, "topology XML: attribute %s of <%s> (line %d) not found", key,
                 node->name, node->line);
}

static ncclResult_t attr_not_number(const struct mc_xml_node *node, const char *key,
                                    const char *value, const char *what)
{
  return MC_FAIL(ncclInvalidUsage, "topology XML: attribute %s=\"%s\" of <%s> (line %d) is not %s",
                 key, value, node->name, node->line, what);
}

/*
 * The numeric getters follow NCCL's strtol/strtof(str, NULL, 0): an empty
 * value reads as 0 (files carry link_width="") and trailing text is ignored,
 * but a value that does not start with a number or overflows is an error.
 */
static bool has_number(const char *s, const char *end)
{
  return (end != s) || (s[strspn(s, " \t\n")] == '\0');
}

ncclResult_t mc_xml_get_attr_int(const struct mc_xml_node *node, const char *key, int *value_out)
{
  const char *s = mc_xml_get_attr(node, key);
  char *end = NULL;
  long v;

  if (s == NULL)
    return attr_missing(node, key);
  errno = 0;
  v = strtol(s, &end, 0);
  if (!has_number(s, end) || (errno != 0) || (v < INT_MIN) || (v > INT_MAX))
    return attr_not_number(node, key, s, "an int");
  *value_out = (int)v;
  return ncclSuccess;
}

ncclResult_t mc_xml_get_attr_int_default(const struct mc_xml_node *node, const char *key,
                                         int *value_out, int def)
{
  if (mc_xml_attr_index(node, key) < 0) {
    *value_out = def;
    return ncclSuccess;
  }
  return mc_xml_get_attr_int(node, key, value_out);
}

ncclResult_t mc_xml_get_attr_float(const struct mc_xml_node *node, const char *key,
                                   float *value_out)
{
  const char *s = mc_xml_get_attr(node, key);
  char *end = NULL;
  float v;

  if (s == NULL)
    return attr_missing(node, key);
  errno = 0;
  v = strtof(s, &end);
  if (!has_number(s, end) || (errno == ERANGE))
    return attr_not_number(node, key, s, "a number");
  *value_out = v;
  return ncclSuccess;
}

/* Signed decimal, or the bits of an unsigned (hex) value as %#lx writes them. */
ncclResult_t mc_xml_get_attr_long(const struct mc_xml_node *node, const char *key,
                                  int64_t *value_out)
{
  const char *s = mc_xml_get_attr(node, key);
  const char *t;
  char *end = NULL;
  int64_t v;

  if (s == NULL)
    return attr_missing(node, key);
  t = s + strspn(s, " \t\n");
  errno = 0;
  if (*t == '-')
    v = (int64_t)strtoll(s, &end, 0);
  else
    v = (int64_t)strtoull(s, &end, 0);
  if (!has_number(s, end) || (errno != 0))
    return attr_not_number(node, key, s, "a 64-bit integer");
  *value_out = v;
  return ncclSuccess;
}

/* xmlSetAttr: overwrite in place or append; values are truncated to 255 characters like NCCL. */
ncclResult_t mc_xml_set_attr(struct mc_xml_node *node, const char *key, const char *value)
{
  int a;

  if ((node == NULL) || (key == NULL) || (value == NULL))
    return MC_FAIL(ncclInvalidArgument, "mc_xml_set_attr: NULL %s",
                   (node == NULL) ? "node" : ((key == NULL) ? "key" : "value"));
  a = mc_xml_attr_index(node, key);
  if (a < 0) {
    if (node->n_attrs == MC_XML_MAX_ATTRS)
      return MC_FAIL(ncclInvalidUsage,
                     "topology XML: cannot set %s on <%s> (line %d): it already has %d attributes",
                     key, node->name, node->line, MC_XML_MAX_ATTRS);
    a = node->n_attrs++;
    snprintf(node->attrs[a].key, sizeof(node->attrs[a].key), "%s", key);
  }
  snprintf(node->attrs[a].value, sizeof(node->attrs[a].value), "%s", value);
  return ncclSuccess;
}

ncclResult_t mc_xml_set_attr_int(struct mc_xml_node *node, const char *key, int value)
{
  char s[32];

  snprintf(s, sizeof(s), "%d", value);
  return mc_xml_set_attr(node, key, s);
}

ncclResult_t mc_xml_set_attr_float(struct mc_xml_node *node, const char *key, float value)
{
  char s[64];

  snprintf(s, sizeof(s), "%g", (double)value);
  return mc_xml_set_attr(node, key, s);
}

ncclResult_t mc_xml_set_attr_long(struct mc_xml_node *node, const char *key, int64_t value)
{
  char s[32];

  snprintf(s, sizeof(s), "%#llx", (unsigned long long)(uint64_t)value);
  return mc_xml_set_attr(node, key, s);
}

ncclResult_t mc_xml_init_attr(struct mc_xml_node *node, const char *key, const char *value)
{
  if (mc_xml_attr_index(node, key) >= 0)
    return ncclSuccess;
  return mc_xml_set_attr(node, key, value);
}

ncclResult_t mc_xml_init_attr_int(struct mc_xml_node *node, const char *key, int value)
{
  if (mc_xml_attr_index(node, key) >= 0)
    return ncclSuccess;
  return mc_xml_set_attr_int(node, key, value);
}

ncclResult_t mc_xml_init_attr_float(struct mc_xml_node *node, const char *key, float value)
{
  if (mc_xml_attr_index(node, key) >= 0)
    return ncclSuccess;
  return mc_xml_set_attr_float(node, key, value);
}

ncclResult_t mc_xml_init_attr_long(struct mc_xml_node *node, const char *key, int64_t value)
{
  if (mc_xml_attr_index(node, key) >= 0)
    return ncclSuccess;
  return mc_xml_set_attr_long(node, key, value);
}

/* xmlUnsetAttr: removes the attribute, keeping the order of the others. */
void mc_xml_unset_attr(struct mc_xml_node *node, const char *key)
{
  int a = mc_xml_attr_index(node, key);

  if (a < 0)
    return;
  memmove(&node->attrs[a], &node->attrs[a + 1],
          sizeof(node->attrs[0]) * (size_t)(node->n_attrs - a - 1));
  node->n_attrs--;
}

/* ---------- find ---------- */

/* The element is a `name` tag and, when key is given, has key="value". */
static bool node_is(const struct mc_xml_node *n, const char *name, const char *key,
                    const char *value)
{
  const char *v;

  if (strcmp(n->name, name) != 0)
    return false;
  if (key == NULL)
    return true;
  v = mc_xml_get_attr(n, key);
  return (v != NULL) && (value != NULL) && (strcmp(v, value) == 0);
}

struct mc_xml_node *mc_xml_find_tag(struct mc_xml *xml, const char *name)
{
  return mc_xml_find_tag_kv(xml, name, NULL, NULL);
}

struct mc_xml_node *mc_xml_find_tag_kv(struct mc_xml *xml, const char *name, const char *key,
                                       const char *value)
{
  if ((xml == NULL) || (name == NULL))
    return NULL;
  for (int i = 0; i < xml->n_nodes; i++)
    if (node_is(&xml->nodes[i], name, key, value))
      return &xml->nodes[i];
  return NULL;
}

struct mc_xml_node *mc_xml_get_sub(struct mc_xml_node *parent, const char *name)
{
  return mc_xml_get_sub_kv(parent, name, NULL, NULL);
}

struct mc_xml_node *mc_xml_get_sub_kv(struct mc_xml_node *parent, const char *name, const char *key,
                                      const char *value)
{
  if ((parent == NULL) || (name == NULL))
    return NULL;
  for (int s = 0; s < parent->n_subs; s++)
    if (node_is(parent->subs[s], name, key, value))
      return parent->subs[s];
  return NULL;
}

/* ---------- writer ---------- */

static void dump_rec(FILE *out, const struct mc_xml_node *node, int indent)
{
  fprintf(out, "%*s<%s", indent, "", node->name);
  for (int a = 0; a < node->n_attrs; a++) {
    const char *v = node->attrs[a].value;
    /* NCCL always writes '"'; a value holding '"' (read between '\'') keeps its quotes. */
    char q = ((strchr(v, '"') != NULL) && (strchr(v, '\'') == NULL)) ? '\'' : '"';

    fprintf(out, " %s=%c%s%c", node->attrs[a].key, q, v, q);
  }
  if (node->n_subs == 0) {
    fputs("/>\n", out);
    return;
  }
  fputs(">\n", out);
  for (int s = 0; s < node->n_subs; s++)
    dump_rec(out, node->subs[s], indent + 2);
  fprintf(out, "%*s</%s>\n", indent, "", node->name);
}

ncclResult_t mc_xml_dump(const struct mc_xml *xml, FILE *out)
{
  if ((xml == NULL) || (out == NULL))
    return MC_FAIL(ncclInvalidArgument, "mc_xml_dump: NULL %s", (xml == NULL) ? "tree" : "file");
  /* NCCL dumps the first element (the <system> of a loaded or detected tree). */
  if (xml->n_nodes > 0)
    dump_rec(out, &xml->nodes[0], 0);
  if ((fflush(out) != 0) || ferror(out))
    return MC_FAIL(ncclSystemError, "writing the topology XML failed: %s", strerror(errno));
  return ncclSuccess;
}

ncclResult_t mc_xml_dump_file(const struct mc_xml *xml, const char *path)
{
  ncclResult_t res;
  FILE *f;

  if ((xml == NULL) || (path == NULL))
    return MC_FAIL(ncclInvalidArgument, "mc_xml_dump_file: NULL %s",
                   (xml == NULL) ? "tree" : "path");
  f = fopen(path, "w");
  if (f == NULL) {
    /* NCCL: not being able to dump is not an error. */
    MC_INFO(MC_SUB_GRAPH | MC_SUB_ENV, "Unable to open %s, not dumping topology.", path);
    return ncclSuccess;
  }
  res = mc_xml_dump(xml, f);
  if ((fclose(f) != 0) && (res == ncclSuccess))
    res = MC_FAIL(ncclSystemError, "%s: close failed: %s", path, strerror(errno));
  return res;
}

/* ---------- fusion ---------- */

/* xmlFindNode: a child of parent equal to search (name, type, attribute count and values). */
static struct mc_xml_node *find_same(struct mc_xml_node *parent, const struct mc_xml_node *search)
{
  for (int i = 0; i < parent->n_subs; i++) {
    struct mc_xml_node *n = parent->subs[i];
    int a;

    if ((strcmp(n->name, search->name) != 0) || (n->type != search->type) ||
        (n->n_attrs != search->n_attrs))
      continue;
    for (a = 0; a < search->n_attrs; a++) {
      const char *v = mc_xml_get_attr(n, search->attrs[a].key);

      if ((v == NULL) || (strcmp(v, search->attrs[a].value) != 0))
        break;
    }
    if (a == search->n_attrs)
      return n;
  }
  return NULL;
}

/* xmlAddTree: deep copy of src under parent. */
static ncclResult_t add_tree(struct mc_xml *dst, struct mc_xml_node *parent,
                             const struct mc_xml_node *src)
{
  struct mc_xml_node *node;

  if (dst->n_nodes == dst->max_nodes)
    return MC_FAIL(ncclInvalidUsage,
                   "topology XML fusion: more than %d elements (copying <%s>); the fused tree "
                   "needs more room",
                   dst->max_nodes, src->name);
  if ((parent != NULL) && (parent->n_subs == MC_XML_MAX_SUBS))
    return MC_FAIL(ncclInvalidUsage, "topology XML fusion: <%s> would have more than %d children",
                   parent->name, MC_XML_MAX_SUBS);
  node = &dst->nodes[dst->n_nodes++];
  memcpy(node->name, src->name, sizeof(node->name));
  memcpy(node->attrs, src->attrs, sizeof(node->attrs[0]) * (size_t)src->n_attrs);
  node->n_attrs = src->n_attrs;
  node->type = src->type;
  node->line = src->line;
  node->parent = parent;
  node->n_subs = 0;
  if (parent != NULL)
    parent->subs[parent->n_subs++] = node;
  for (int i = 0; i < src->n_subs; i++)
    MC_CHECK(add_tree(dst, node, src->subs[i]));
  return ncclSuccess;
}

static ncclResult_t fuse_rec(struct mc_xml *dst, struct mc_xml_node *dst_parent,
                             const struct mc_xml_node *src_parent)
{
  for (int i = 0; i < src_parent->n_subs; i++) {
    const struct mc_xml_node *s = src_parent->subs[i];
    struct mc_xml_node *d = find_same(dst_parent, s);

    if (d == NULL)
      MC_CHECK(add_tree(dst, dst_parent, s));
    else
      MC_CHECK(fuse_rec(dst, d, s));
  }
  return ncclSuccess;
}

static const struct mc_xml_node *find_system(const struct mc_xml *xml)
{
  for (int i = 0; i < xml->n_nodes; i++) {
    if (strcmp(xml->nodes[i].name, "system") == 0)
      return &xml->nodes[i];
  }
  return NULL;
}

ncclResult_t mc_xml_fuse(struct mc_xml *dst, const struct mc_xml *src)
{
  ncclResult_t res = ncclSuccess;
  struct mc_xml_node *dst_top;
  const struct mc_xml_node *src_top;
  int *old_n_subs = NULL;
  int old_n_nodes;

  if ((dst == NULL) || (src == NULL))
    return MC_FAIL(ncclInvalidArgument, "mc_xml_fuse: NULL %s", (dst == NULL) ? "dst" : "src");
  if ((dst == src) || (src->n_nodes == 0))
    return ncclSuccess;
  dst_top = (struct mc_xml_node *)find_system(dst);
  old_n_nodes = dst->n_nodes;
  if (dst_top == NULL) {
    /* NCCL: an empty destination gets a copy of the source's first element. */
    res = add_tree(dst, NULL, &src->nodes[0]);
    if (res != ncclSuccess)
      dst->n_nodes = old_n_nodes;
    return res;
  }
  src_top = find_system(src);
  if (src_top == NULL)
    return ncclSuccess;
  /* Fusion only appends: remember the children counts to undo a failed merge. */
  MC_CHECK(mc_calloc(&old_n_subs, (size_t)old_n_nodes));
  for (int i = 0; i < old_n_nodes; i++)
    old_n_subs[i] = dst->nodes[i].n_subs;
  res = fuse_rec(dst, dst_top, src_top);
  if (res != ncclSuccess) {
    for (int i = 0; i < old_n_nodes; i++)
      dst->nodes[i].n_subs = old_n_subs[i];
    dst->n_nodes = old_n_nodes;
  }
  free(old_n_subs);
  return res;
}

/* ---------- local ranks' GPUs ---------- */

static ncclResult_t gpus_complete_rec(struct mc_xml_node *node, int gdr_support, int *n)
{
  if ((strcmp(node->name, "gpu") == 0) && (mc_xml_attr_index(node, "rank") != -1)) {
    if (mc_xml_attr_index(node, "gdr") == -1) {
      MC_CHECK(mc_xml_set_attr_int(node, "gdr", gdr_support));
      (*n)++;
    }
    MC_CHECK(mc_xml_init_attr_int(node, "mlopart", -1));
  }
  for (int s = 0; s < node->n_subs; s++)
    MC_CHECK(gpus_complete_rec(node->subs[s], gdr_support, n));
  return ncclSuccess;
}

ncclResult_t mc_topo_xml_gpus_complete(struct mc_xml *xml, int gdr_support, int *n_completed_out)
{
  int n = 0;

  if (xml == NULL)
    return MC_FAIL(ncclInvalidArgument, "mc_topo_xml_gpus_complete: NULL xml");
  if (xml->n_nodes > 0)
    MC_CHECK(gpus_complete_rec(&xml->nodes[0], gdr_support, &n));
  if (n > 0)
    MC_INFO(MC_SUB_GRAPH, "Topo: %d <gpu> element(s) without gdr completed with gdr=%d", n,
            gdr_support);
  if (n_completed_out != NULL)
    *n_completed_out = n;
  return ncclSuccess;
}

/* ---------- packed trees ---------- */

/* A tree as bytes, node by node in array order: name, type, line, parent
 * index, attributes, child indices (each string: 2-byte length, then the
 * characters). Unpacking gives back the same array, links and child order. */
#define PACK_MAGIC 0x6d63786du /* "mcxm" */

struct pack_buf {
  char *p;
  size_t used;
  size_t cap;
};

static ncclResult_t pack_put(struct pack_buf *b, const void *data, size_t bytes)
{
  if (b->used + bytes > b->cap) {
    size_t cap = (b->cap == 0) ? 4096 : b->cap;
    char *p;
    while (cap < b->used + bytes)
      cap *= 2;
    p = realloc(b->p, cap);
    if (p == NULL)
      return MC_FAIL(ncclSystemError, "XML: out of memory packing %zu bytes", cap);
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->used, data, bytes);
  b->used += bytes;
  return ncclSuccess;
}

static ncclResult_t pack_i32(struct pack_buf *b, int32_t v)
{
  return pack_put(b, &v, sizeof(v));
}

static ncclResult_t pack_str(struct pack_buf *b, const char *s)
{
  uint16_t len = (uint16_t)strnlen(s, MC_XML_MAX_STR - 1);

  MC_CHECK(pack_put(b, &len, sizeof(len)));
  return pack_put(b, s, len);
}

ncclResult_t mc_xml_pack(const struct mc_xml *xml, void **buf_out, size_t *bytes_out)
{
  struct pack_buf b = {0};
  ncclResult_t res;

  MC_CHECK_GOTO(pack_i32(&b, (int32_t)PACK_MAGIC), res, fail);
  MC_CHECK_GOTO(pack_i32(&b, xml->n_nodes), res, fail);
  for (int i = 0; i < xml->n_nodes; i++) {
    const struct mc_xml_node *n = &xml->nodes[i];
    MC_CHECK_GOTO(pack_str(&b, n->name), res, fail);
    MC_CHECK_GOTO(pack_i32(&b, (int32_t)n->type), res, fail);
    MC_CHECK_GOTO(pack_i32(&b, n->line), res, fail);
    MC_CHECK_GOTO(pack_i32(&b, (n->parent != NULL) ? (int32_t)(n->parent - xml->nodes) : -1), res,
                  fail);
    MC_CHECK_GOTO(pack_i32(&b, n->n_attrs), res, fail);
    for (int a = 0; a < n->n_attrs; a++) {
      MC_CHECK_GOTO(pack_str(&b, n->attrs[a].key), res, fail);
      MC_CHECK_GOTO(pack_str(&b, n->attrs[a].value), res, fail);
    }
    MC_CHECK_GOTO(pack_i32(&b, n->n_subs), res, fail);
    for (int s = 0; s < n->n_subs; s++)
      MC_CHECK_GOTO(pack_i32(&b, (int32_t)(n->subs[s] - xml->nodes)), res, fail);
  }
  *buf_out = b.p;
  *bytes_out = b.used;
  return ncclSuccess;
fail:
  free(b.p);
  return res;
}

struct unpack_buf {
  const char *p;
  size_t left;
};

static bool unpack_get(struct unpack_buf *u, void *out, size_t bytes)
{
  if (u->left < bytes)
    return false;
  memcpy(out, u->p, bytes);
  u->p += bytes;
  u->left -= bytes;
  return true;
}

static bool unpack_i32(struct unpack_buf *u, int32_t lo, int32_t hi, int32_t *v)
{
  return unpack_get(u, v, sizeof(*v)) && (*v >= lo) && (*v <= hi);
}

static bool unpack_str(struct unpack_buf *u, char out[MC_XML_MAX_STR])
{
  uint16_t len;

  if (!unpack_get(u, &len, sizeof(len)) || (len >= MC_XML_MAX_STR) || !unpack_get(u, out, len))
    return false;
  out[len] = '\0';
  return true;
}

ncclResult_t mc_xml_unpack(const void *buf, size_t bytes, struct mc_xml *xml)
{
  struct unpack_buf u = {.p = buf, .left = bytes};
  int32_t magic;
  int32_t n_nodes;

  if (!unpack_get(&u, &magic, sizeof(magic)) || (magic != (int32_t)PACK_MAGIC) ||
      !unpack_i32(&u, 0, xml->max_nodes, &n_nodes))
    return MC_FAIL(ncclInvalidUsage,
                   "XML: a packed tree of %zu bytes is not one (or has more "
                   "than %d elements)",
                   bytes, xml->max_nodes);
  for (int i = 0; i < n_nodes; i++) {
    struct mc_xml_node *n = &xml->nodes[i];
    int32_t type;
    int32_t line;
    int32_t parent;
    int32_t n_attrs;
    int32_t n_subs;
    if (!unpack_str(&u, n->name) || !unpack_i32(&u, MC_XML_NODE_NONE, MC_XML_NODE_SINGLE, &type) ||
        !unpack_i32(&u, INT32_MIN, INT32_MAX, &line) || !unpack_i32(&u, -1, n_nodes - 1, &parent) ||
        !unpack_i32(&u, 0, MC_XML_MAX_ATTRS, &n_attrs))
      goto bad;
    for (int a = 0; a < n_attrs; a++) {
      if (!unpack_str(&u, n->attrs[a].key) || !unpack_str(&u, n->attrs[a].value))
        goto bad;
    }
    if (!unpack_i32(&u, 0, MC_XML_MAX_SUBS, &n_subs))
      goto bad;
    for (int s = 0; s < n_subs; s++) {
      int32_t sub;
      if (!unpack_i32(&u, 0, n_nodes - 1, &sub))
        goto bad;
      n->subs[s] = &xml->nodes[sub];
    }
    n->type = (enum mc_xml_node_type)type;
    n->line = line;
    n->parent = (parent < 0) ? NULL : &xml->nodes[parent];
    n->n_attrs = n_attrs;
    n->n_subs = n_subs;
  }
  if (u.left != 0)
    goto bad;
  xml->n_nodes = n_nodes;
  return ncclSuccess;
bad:
  xml->n_nodes = 0;
  return MC_FAIL(ncclInvalidUsage, "XML: packed tree of %zu bytes is malformed at byte %zu", bytes,
                 bytes - u.left);
}
