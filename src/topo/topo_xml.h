/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NCCL's topology XML as a tree (mirrors src/graph/xml.h/xml.cc of NCCL 2.30):
 * read, write, find, set, fuse. The parser is strict and bounded: a malformed
 * file gets ncclInvalidUsage and a message naming the file, the line and what
 * was expected; nothing is allocated beyond the limits below.
 *
 * Pure logic: no sockets, no sysfs. Thread-safety: a tree is used by one
 * thread at a time.
 */
#ifndef MC_TOPO_XML_H
#define MC_TOPO_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "nccl.h"

/* Names and values: at most 255 characters (NCCL's MAX_STR_LEN). */
#define MC_XML_MAX_STR 256
/* Attributes per element (NCCL's MAX_ATTR_COUNT); the parser drops further ones. */
#define MC_XML_MAX_ATTRS 16
/* Children per element (NCCL's MAX_SUBS). */
#define MC_XML_MAX_SUBS 640
/* Elements per tree (NCCL: 256 per rank's file; fused trees hold n_ranks x 256). */
#define MC_XML_MAX_NODES 4096

/* How an element appeared in a file: NCCL keeps it and fusion compares it. */
enum mc_xml_node_type {
  MC_XML_NODE_NONE = 0,  /* created by detection */
  MC_XML_NODE_OPEN = 1,  /* <a ...>...</a> */
  MC_XML_NODE_CLOSE = 2, /* reserved (NCCL's NODE_TYPE_CLOSE) */
  MC_XML_NODE_SINGLE = 3 /* <a .../> */
};

struct mc_xml_attr {
  char key[MC_XML_MAX_STR];
  char value[MC_XML_MAX_STR];
};

/* NCCL's fixed-size element (xml.h, struct ncclXmlNode), its small fields
 * first: an element with a few attributes and no children touches one or two
 * of its 13.6 KB's pages, not the scalars' pages after the attributes and
 * the child array too (every rank of a host holds the host's fused XML:
 * about 520 elements at 256 ranks). */
struct mc_xml_node {
  int n_attrs;
  enum mc_xml_node_type type;
  int n_subs;
  int line; /* line of the opening tag in its file, 0 when created in memory */
  struct mc_xml_node *parent;
  char name[MC_XML_MAX_STR];
  struct mc_xml_attr attrs[MC_XML_MAX_ATTRS];
  struct mc_xml_node *subs[MC_XML_MAX_SUBS];
};

/* A tree: nodes live in one array (no per-node allocation); nodes[0] is the
 * first top-level element (normally <system>). */
struct mc_xml {
  int n_nodes;
  int max_nodes;
  struct mc_xml_node *nodes; /* [max_nodes] */
};

/* Allocates an empty tree able to hold max_nodes elements (<= MC_XML_MAX_NODES). */
ncclResult_t mc_xml_create(int max_nodes, struct mc_xml **xml_out);
/* Frees the tree; accepts NULL. */
void mc_xml_destroy(struct mc_xml *xml);
/* Empties the tree (n_nodes = 0); accepts NULL. */
void mc_xml_clear(struct mc_xml *xml);

/*
 * Parses a topology file (NCCL 2.30's grammar, src/graph/xml.cc
 * ncclTopoGetXmlFromFile and xmlLoadSub; see the header of topo_xml.c; plus
 * RCCL's version="2" files). Elements outside NCCL's nesting
 * rules (system -> cpu; cpu -> pci|nic; pci -> pci|gpu|nic|pcilink;
 * gpu -> nvlink|c2c; nic -> net) are dropped with their subtree and an INFO
 * line "XML: <file>:<line>: ignoring element X" (RCCL's <xgmi> among them).
 * More than MC_XML_MAX_ATTRS attributes: the extra ones are dropped (INFO).
 * Errors: ncclInvalidUsage with "<path>:<line>: <what was expected, what was
 * found>"; a file without <system> (empty, or an NCCL graph file) is an
 * error, and so is a file that cannot be opened ("<path>: cannot open
 * topology file: <strerror>"; NCCL only logs that, so a caller that wants
 * NCCL's behaviour checks access() first). On success the tree's previous
 * content is replaced (nodes[0] is the <system>, each node's `line` is set);
 * on failure the tree is left as it was.
 */
ncclResult_t mc_xml_load_file(const char *path, struct mc_xml *xml);
/* Same from a buffer; `name` stands for the path in messages. */
ncclResult_t mc_xml_load_buf(const char *buf, size_t bytes, const char *name, struct mc_xml *xml);

/* Writes NCCL's format (two-space indent, attributes in stored order, "/>"
 * when childless), starting at nodes[0] as NCCL does; an empty tree writes
 * nothing. A value holding '"' is written between '\'' so it reads back.
 * dump_file: a path that cannot be opened is INFO "Unable to open %s, not
 * dumping topology." and success (NCCL). */
ncclResult_t mc_xml_dump_file(const struct mc_xml *xml, const char *path);
ncclResult_t mc_xml_dump(const struct mc_xml *xml, FILE *out);

/* The tree as bytes (*buf_out, caller frees) and back: mc_xml_unpack gives
 * the same elements in the same array order, with the same attributes, types,
 * lines, parents and child order (for sending a tree between processes).
 * unpack replaces xml's content; malformed bytes or more elements than xml
 * holds are ncclInvalidUsage, and leave xml empty. */
ncclResult_t mc_xml_pack(const struct mc_xml *xml, void **buf_out, size_t *bytes_out);
ncclResult_t mc_xml_unpack(const void *buf, size_t bytes, struct mc_xml *xml);
/* NCCL's "Loading topology <name>" INFO line for xml's <system>, once per
 * process (whether this process parsed the XML or received it packed). */
void mc_xml_log_loading(const struct mc_xml *xml);

/* Attribute access. get returns NULL when absent. */
const char *mc_xml_get_attr(const struct mc_xml_node *node, const char *key);
/* Integer (strtol base 0) / float (strtof) / 64-bit values (strtoll for a
 * negative value, else strtoull base 0, so "%#lx" values read back bit for
 * bit); ncclInvalidUsage naming element, attribute, value and line when
 * absent, out of range or not starting with a number. As NCCL's strtol, an
 * empty value reads as 0 (files carry link_width="") and trailing text is
 * ignored. */
ncclResult_t mc_xml_get_attr_int(const struct mc_xml_node *node, const char *key, int *value_out);
ncclResult_t mc_xml_get_attr_int_default(const struct mc_xml_node *node, const char *key,
                                         int *value_out, int def);
ncclResult_t mc_xml_get_attr_float(const struct mc_xml_node *node, const char *key,
                                   float *value_out);
ncclResult_t mc_xml_get_attr_long(const struct mc_xml_node *node, const char *key,
                                  int64_t *value_out);
/* Index of the attribute, -1 when absent. */
int mc_xml_attr_index(const struct mc_xml_node *node, const char *key);

/* Sets (adds or overwrites) attributes; NCCL's formats: %d, %g, %#lx (0 is
 * "0", 7 is "0x7"). Values longer than 255 characters are truncated (NCCL);
 * a 17th attribute is ncclInvalidUsage. */
ncclResult_t mc_xml_set_attr(struct mc_xml_node *node, const char *key, const char *value);
ncclResult_t mc_xml_set_attr_int(struct mc_xml_node *node, const char *key, int value);
ncclResult_t mc_xml_set_attr_float(struct mc_xml_node *node, const char *key, float value);
ncclResult_t mc_xml_set_attr_long(struct mc_xml_node *node, const char *key, int64_t value);
/* Sets only when absent (NCCL's xmlInitAttr*). */
ncclResult_t mc_xml_init_attr(struct mc_xml_node *node, const char *key, const char *value);
ncclResult_t mc_xml_init_attr_int(struct mc_xml_node *node, const char *key, int value);
ncclResult_t mc_xml_init_attr_float(struct mc_xml_node *node, const char *key, float value);
ncclResult_t mc_xml_init_attr_long(struct mc_xml_node *node, const char *key, int64_t value);
void mc_xml_unset_attr(struct mc_xml_node *node, const char *key);

/* Finding. Tag-only: the first node of the tree with that name; with a key:
 * the first whose attribute key equals value. NULL when none. As NCCL's
 * xmlFindTag, this scans every slot in creation order, including nodes
 * removed with mc_xml_remove_node. */
struct mc_xml_node *mc_xml_find_tag(struct mc_xml *xml, const char *name);
struct mc_xml_node *mc_xml_find_tag_kv(struct mc_xml *xml, const char *name, const char *key,
                                       const char *value);
/* Children of parent with that name (and key=value when key != NULL). */
struct mc_xml_node *mc_xml_get_sub(struct mc_xml_node *parent, const char *name);
struct mc_xml_node *mc_xml_get_sub_kv(struct mc_xml_node *parent, const char *name, const char *key,
                                      const char *value);

/* Adds a child element (parent NULL: a top-level element). */
ncclResult_t mc_xml_add_node(struct mc_xml *xml, struct mc_xml_node *parent, const char *name,
                             struct mc_xml_node **node_out);
/* Removes node and its subtree from its parent (the slots stay used; the
 * node's type becomes MC_XML_NODE_NONE, as NCCL's xmlRemoveNode does). */
ncclResult_t mc_xml_remove_node(struct mc_xml_node *node);

/*
 * Fuses src into dst as NCCL's ncclTopoFuseXml does (merging the trees of the
 * ranks of one host in local-rank order), starting at each tree's <system>.
 * Matching is NCCL's xmlFindNode, among the children of the corresponding
 * dst node only: same name, same type (open/self-closing), same attribute
 * count, and every attribute of the src node has the same value in the dst
 * node (order-insensitive) -- all attributes, not selected keys. A match is
 * merged recursively; an unmatched subtree is appended (deep copy) after the
 * existing children, in src order. An empty dst gets a copy of src's
 * nodes[0]. If dst runs out of room (max_nodes, MC_XML_MAX_SUBS) the call
 * fails with ncclInvalidUsage and dst is left as it was.
 */
ncclResult_t mc_xml_fuse(struct mc_xml *dst, const struct mc_xml *src);

/*
 * Completes the <gpu> elements of local ranks as NCCL 2.30 does right after
 * ncclTopoFillGpu in ncclTopoGetSystem (src/graph/topo.cc): every <gpu>
 * reachable from the root that has a rank attribute gets gdr = gdr_support
 * (NCCL: xmlInitAttrInt(node, "gdr", peerInfo[r].gdrSupport)) when it has no
 * gdr, and mlopart = -1 (no MLOPart split) when it has no mlopart. Topology
 * files written by hand or completed offline often have no gdr; NCCL fills
 * it in rather than refusing the file, and mc_topo_system_from_xml needs it.
 * A <gpu> without rank is no local rank's GPU and is left alone (the system
 * skips it, as NCCL's ncclTopoAddPci). n_completed_out (may be NULL): how
 * many elements got a gdr. Errors: ncclInvalidUsage when an element has no
 * room for another attribute (the message names element and line).
 */
ncclResult_t mc_topo_xml_gpus_complete(struct mc_xml *xml, int gdr_support, int *n_completed_out);

#endif /* MC_TOPO_XML_H */
