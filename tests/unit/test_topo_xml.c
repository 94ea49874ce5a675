/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Topology XML (src/topo/topo_xml.c): the real files of tests/data/topo load,
 * NCCL's own dumps round-trip byte for byte, malformed input is refused with
 * "<file>:<line>: <what>", attribute access, find, and fusion of two ranks.
 *
 * Which real files load: every topology file in tests/data/topo (the AWS,
 * Azure, Modal and sugarlxn files with version="1", and all rccl-*.xml with
 * RCCL's version="2", whose <xgmi> links are dropped with an INFO line).
 * Refused: azure-ncv4-a100pcie.graph.xml, an NCCL graph file (<graphs>), not a
 * topology. NCCL itself ignores its <graphs> element and loads an empty
 * topology; we refuse it with a message naming NCCL_GRAPH_FILE (deviation:
 * no <system>, no topology).
 */
#include "topo/topo_xml.h"

#include "mc_test.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

/* ---------- helpers ---------- */

static struct mc_xml *new_tree(int max_nodes)
{
  struct mc_xml *xml = NULL;

  if (mc_xml_create(max_nodes, &xml) != ncclSuccess)
    MC_T_FAIL("mc_xml_create(%d) failed", max_nodes);
  return xml;
}

/* Whole file in a malloc'd buffer (NULL when unreadable). */
static char *slurp(const char *path, size_t *bytes_out)
{
  FILE *f = fopen(path, "rb");
  char *buf = NULL;
  long n;

  if (f == NULL)
    return NULL;
  if ((fseek(f, 0, SEEK_END) == 0) && ((n = ftell(f)) >= 0) && (fseek(f, 0, SEEK_SET) == 0)) {
    buf = malloc((size_t)n + 1);
    if ((buf != NULL) && (fread(buf, 1, (size_t)n, f) == (size_t)n)) {
      buf[n] = '\0';
      *bytes_out = (size_t)n;
    } else {
      free(buf);
      buf = NULL;
    }
  }
  fclose(f);
  return buf;
}

/* mc_xml_dump into a malloc'd string. */
static char *dump_str(const struct mc_xml *xml)
{
  char *text = NULL;
  size_t bytes = 0;
  FILE *f = open_memstream(&text, &bytes);

  if (f == NULL)
    MC_T_FAIL("open_memstream failed");
  MC_T_OK(mc_xml_dump(xml, f));
  fclose(f);
  return text;
}

static ncclResult_t load_str(struct mc_xml *xml, const char *text)
{
  return mc_xml_load_buf(text, strlen(text), "t.xml", xml);
}

/* The input must be refused with ncclInvalidUsage and this text in the error. */
static void expect_refused(const char *text, const char *message)
{
  struct mc_xml *xml = new_tree(256);

  MC_T_EQ_INT(load_str(xml, text), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), message);
  MC_T_EQ_INT(xml->n_nodes, 0);
  mc_xml_destroy(xml);
}

static bool has_suffix(const char *s, const char *suffix)
{
  size_t n = strlen(s);
  size_t k = strlen(suffix);

  return (n >= k) && (strcmp(s + n - k, suffix) == 0);
}

/* ---------- real files ---------- */

/* Every file of tests/data/topo loads (256 elements, like NCCL), and its dump
 * reloads to the same dump; the graph file is refused. */
static void real_files_load(void)
{
  DIR *dir = opendir(mc_t_data("topo"));
  struct dirent *e;
  int n_loaded = 0;
  int n_rccl = 0;

  MC_T_TRUE(dir != NULL);
  while ((e = readdir(dir)) != NULL) {
    char path[4096];
    struct mc_xml *xml;
    struct mc_xml *again;
    char *text;
    char *text2;

    if (!has_suffix(e->d_name, ".xml"))
      continue;
    snprintf(path, sizeof(path), "%s/%s", mc_t_data("topo"), e->d_name);
    xml = new_tree(256);
    if (has_suffix(e->d_name, ".graph.xml")) {
      MC_T_EQ_INT(mc_xml_load_file(path, xml), ncclInvalidUsage);
      MC_T_CONTAINS(mc_t_last_error(), "graph.xml:1: expected <system version=\"1\">, found only "
                                       "<graphs>: this is an NCCL graph file (NCCL_GRAPH_FILE)");
      mc_xml_destroy(xml);
      continue;
    }
    if (mc_xml_load_file(path, xml) != ncclSuccess)
      MC_T_FAIL("%s: %s", e->d_name, mc_t_last_error());
    MC_T_EQ_STR(xml->nodes[0].name, "system");
    if (strncmp(e->d_name, "rccl-", 5) == 0) {
      MC_T_EQ_STR(mc_xml_get_attr(&xml->nodes[0], "version"), "2");
      MC_T_NULL(mc_xml_find_tag(xml, "xgmi"));
      n_rccl++;
    }
    text = dump_str(xml);
    again = new_tree(256);
    MC_T_OK(mc_xml_load_buf(text, strlen(text), e->d_name, again));
    text2 = dump_str(again);
    MC_T_EQ_STR(text2, text);
    free(text);
    free(text2);
    mc_xml_destroy(again);
    mc_xml_destroy(xml);
    n_loaded++;
  }
  closedir(dir);
  MC_T_TRUE(n_loaded >= 80);
  MC_T_TRUE(n_rccl >= 60);
}

/* NCCL's own NCCL_TOPO_DUMP_FILE outputs: load + dump reproduces them. */
static void golden_round_trip(void)
{
  DIR *dir = opendir(mc_t_data("topo"));
  struct dirent *e;
  int n = 0;

  MC_T_TRUE(dir != NULL);
  while ((e = readdir(dir)) != NULL) {
    char path[4096];
    struct mc_xml *xml;
    char *want;
    char *got;
    size_t bytes = 0;

    if ((strncmp(e->d_name, "golden-", 7) != 0) || !has_suffix(e->d_name, ".xml"))
      continue;
    snprintf(path, sizeof(path), "%s/%s", mc_t_data("topo"), e->d_name);
    want = slurp(path, &bytes);
    MC_T_TRUE(want != NULL);
    xml = new_tree(256);
    MC_T_OK(mc_xml_load_file(path, xml));
    got = dump_str(xml);
    if (strcmp(got, want) != 0)
      MC_T_FAIL("%s: dump differs from NCCL's", e->d_name);
    free(got);
    free(want);
    mc_xml_destroy(xml);
    n++;
  }
  closedir(dir);
  MC_T_TRUE(n >= 5);
}

/* ---------- malformed input ---------- */

static void refuses_malformed(void)
{
  static const struct {
    const char *text;
    const char *message;
  } cases[] = {
      {"<system version=\"1\">\n\t<cpu/>\n</system>\n", "t.xml:2: expected '<' (a child element "
                                                        "or </system>), found tab"},
      {"<system version=\"1\">\n<cpu numaid=\"0\"\taffinity=\"ff\"/>\n</system>\n",
       "t.xml:2: expected '>' after attribute list of <cpu>, found tab"},
      {"<system version=\"1\">\n<cpu\tnumaid=\"0\"/>\n</system>\n",
       "t.xml:2: expected ' ', '>' or '/>' after '<cpu', found tab"},
      {"<system version=\"1\">\n  <cpu numaid=\"0\"\n  affinity=\"ff\"/>\n</system>\n",
       "t.xml:2: expected '>' after attribute list of <cpu>, found newline"},
      {"<system version=1>\n</system>\n",
       "t.xml:1: expected a quoted value after version= in <system>, found '1'"},
      {"<system version=\"1\">\n<cpu numaid=\"0\"", "t.xml:2: expected '>' after attribute list of "
                                                    "<cpu>, found end of file"},
      {"<system version=\"1\">\n<cpu numaid=\"0", "t.xml:2: unterminated value of attribute numaid "
                                                  "in <cpu>: expected \", found end of file"},
      {"<system version=\"1\">\n<cpu>\n", "t.xml:3: unterminated <cpu> (opened at line 2): "
                                          "expected </cpu>, found end of file"},
      {"<system version=\"1\">\n<cpu>\n</pci>\n</system>\n",
       "t.xml:3: expected </cpu> (opened at line 2), found </pci>"},
      {"<system>\n</system>\n", "t.xml:1: <system> has no version attribute"},
      {"<system version=\"3\">\n</system>\n",
       "t.xml:1: <system version=\"3\">: expected version \"1\" (NCCL) or \"2\" (RCCL)"},
      {"<system version=\"x\"/>", "<system version=\"x\">: expected version"},
      {"", "t.xml:1: expected <system version=\"1\">, found end of file"},
      {"\n\n<!-- only a comment -->\n", "t.xml:4: expected <system version=\"1\">, found end of "
                                        "file"},
      {"<foo/>\n", "t.xml:1: expected <system version=\"1\">, found only <foo>"},
      {"<?xml version=\"1.0\"?>\n<system version=\"1\"/>\n",
       "t.xml:1: expected '>' after attribute list of <?xml>, found '?' (NCCL's parser takes no "
       "<?xml ...?> prolog"},
      {"\x7f\x45\x4c\x46\x02\x01\x01", "t.xml:1: expected '<', found byte 0x7f"},
      {"<\x01\x02\x03>", "t.xml:1: expected an element name after '<', found byte 0x01"},
      {"<system version=\"1\">\n<!-- open comment\n", "t.xml:2: unterminated comment"},
      {"<system version=\"1\">text</system>", "t.xml:1: expected '<' (a child element or "
                                              "</system>), found 't'"},
      {"</system>", "t.xml:1: unexpected </system>: no element is open"},
      {"<system version=\"1\"></system >", "t.xml:1: expected '>' after '</system', found ' '"},
      {"<system version=\"1\"/ >", "t.xml:1: expected '>' after '/' in <system/>, found ' '"},
      {"<>", "t.xml:1: expected an element name after '<', found '>'"},
      {"<system version=\"1\">\n<cpu a=\"1\" b\n=\"2\"/>\n</system>",
       "t.xml:2: expected '=' after "
       "attribute name 'b' of <cpu>, "
       "found newline"},
  };

  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    expect_refused(cases[i].text, cases[i].message);
}

/* A NUL byte (binary input) is refused, never read as the end of a string. */
static void refuses_binary(void)
{
  static const char bin[] = "<system version=\"1\0\">";
  unsigned char garbage[512];
  struct mc_xml *xml = new_tree(256);

  MC_T_EQ_INT(mc_xml_load_buf(bin, sizeof(bin) - 1, "b.xml", xml), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "b.xml:1: value of attribute version in <system> holds byte "
                                   "0x00");
  for (size_t i = 0; i < sizeof(garbage); i++)
    garbage[i] = (unsigned char)((i * 131u + 7u) ^ (i >> 3));
  MC_T_EQ_INT(mc_xml_load_buf((const char *)garbage, sizeof(garbage), "g.bin", xml),
              ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "g.bin:1: expected '<'");
  MC_T_EQ_INT(xml->n_nodes, 0);
  mc_xml_destroy(xml);
}

/* A truncated real file fails with the line where it stops, and leaves the tree as it was. */
static void truncated_file_keeps_tree(void)
{
  size_t bytes = 0;
  char *text = slurp(mc_t_data("topo/golden-azure-ndv4-a100.xml"), &bytes);
  struct mc_xml *xml = new_tree(256);
  char *before;
  char *after;

  MC_T_TRUE(text != NULL);
  MC_T_OK(load_str(xml, "<system version=\"1\"><cpu numaid=\"7\"/></system>"));
  before = dump_str(xml);
  MC_T_EQ_INT(mc_xml_load_buf(text, bytes / 2, "half.xml", xml), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "half.xml:");
  after = dump_str(xml);
  MC_T_EQ_STR(after, before);
  MC_T_EQ_INT(xml->n_nodes, 2);
  for (size_t cut = 0; cut + 1 < bytes; cut += 97) /* every prefix fails cleanly */
    MC_T_TRUE(mc_xml_load_buf(text, cut, "cut.xml", xml) != ncclSuccess);
  MC_T_OK(mc_xml_load_buf(text, bytes, "full.xml", xml));
  free(before);
  free(after);
  free(text);
  mc_xml_destroy(xml);
}

/* ---------- limits ---------- */

static void limits(void)
{
  char name[400];
  char text[2048];
  struct mc_xml *xml = new_tree(256);
  struct mc_xml *small = new_tree(3);

  /* 255 characters are fine, 256 are not (names, keys, values). */
  memset(name, 'a', 255);
  name[255] = '\0';
  snprintf(text, sizeof(text), "<system version=\"1\" name=\"%s\"><%s/></system>", name, name);
  MC_T_OK(load_str(xml, text));
  MC_T_EQ_INT((int)strlen(mc_xml_get_attr(&xml->nodes[0], "name")), 255);
  memset(name, 'a', 256);
  name[256] = '\0';
  snprintf(text, sizeof(text), "<system version=\"1\">\n<%s/></system>", name);
  expect_refused(text, "t.xml:2: element name 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...' is longer "
                       "than 255 characters");
  snprintf(text, sizeof(text), "<system version=\"1\" %s=\"1\"/>", name);
  expect_refused(text, "t.xml:1: attribute name 'aaaa");
  snprintf(text, sizeof(text), "<system version=\"1\" name=\"%s\"/>", name);
  expect_refused(text, "t.xml:1: value of attribute name in <system> is longer than 255");

  /* max_nodes elements fit, one more does not. */
  MC_T_OK(load_str(small, "<system version=\"1\"><cpu/><cpu/></system>"));
  MC_T_EQ_INT(small->n_nodes, 3);
  MC_T_EQ_INT(load_str(small, "<system version=\"1\">\n<cpu/><cpu/>\n<cpu/></system>"),
              ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "t.xml:3: more than 3 elements at <cpu> (the tree holds at "
                                   "most 3)");
  MC_T_EQ_INT(small->n_nodes, 3); /* the previous tree is still there */

  /* Deep nesting is bounded. */
  text[0] = '\0';
  for (int i = 0; i < 200; i++)
    strcat(text, "<a>");
  expect_refused(text, "is nested deeper than 128 elements");
  mc_xml_destroy(small);
  mc_xml_destroy(xml);
}

/* More than 16 attributes: the extra ones are dropped, not an error (NCCL). */
static void extra_attributes_dropped(void)
{
  char text[2048] = "<system version=\"1\">\n<cpu";
  struct mc_xml *xml = new_tree(16);
  struct mc_xml_node *cpu;

  for (int i = 0; i < 20; i++) {
    char a[32];

    snprintf(a, sizeof(a), " a%d=\"%d\"", i, i);
    strcat(text, a);
  }
  strcat(text, "/>\n</system>\n");
  MC_T_OK(load_str(xml, text));
  cpu = mc_xml_find_tag(xml, "cpu");
  MC_T_TRUE(cpu != NULL);
  MC_T_EQ_INT(cpu->n_attrs, 16);
  MC_T_EQ_STR(mc_xml_get_attr(cpu, "a15"), "15");
  MC_T_NULL(mc_xml_get_attr(cpu, "a16"));
  MC_T_EQ_INT(cpu->line, 2);
  mc_xml_destroy(xml);
}

/* NCCL's quirks kept: comments anywhere, both quotes, key without value,
 * empty attribute from a space before '/>', unknown elements dropped. */
static void grammar_like_nccl(void)
{
  static const char text[] =
      "<!-- head -->\r\n<system version='1' name=\"t\">\n"
      "  <!--x--><cpu numaid=\"0\" flag />\n"
      "  <gpu dev=\"0\"/>\n"
      "  <cpu numaid=\"1\"><pci busid=\"0000:01:00.0\" note='say \"hi\"'>\n"
      "    <xgmi target=\"1\"><deep><deeper/></deep></xgmi>\n"
      "    <gpu dev=\"1\"><nvlink target=\"x\" count=\"2\"><odd/></nvlink></gpu>\n"
      "  </pci></cpu>\n"
      "</system>\n<trailer/>\n";
  struct mc_xml *xml = new_tree(64);
  struct mc_xml_node *cpu0;
  struct mc_xml_node *pci;
  char *out;

  MC_T_OK(load_str(xml, text));
  MC_T_EQ_INT(xml->n_nodes, 6); /* system cpu cpu pci gpu nvlink */
  cpu0 = mc_xml_find_tag_kv(xml, "cpu", "numaid", "0");
  MC_T_TRUE(cpu0 != NULL);
  MC_T_EQ_INT(cpu0->n_attrs, 3);
  MC_T_EQ_STR(cpu0->attrs[1].key, "flag");
  MC_T_EQ_STR(cpu0->attrs[1].value, "");
  MC_T_EQ_STR(cpu0->attrs[2].key, "");
  MC_T_EQ_INT(cpu0->type, MC_XML_NODE_SINGLE);
  pci = mc_xml_find_tag(xml, "pci");
  MC_T_EQ_INT(pci->type, MC_XML_NODE_OPEN);
  MC_T_EQ_INT(pci->line, 5);
  MC_T_EQ_STR(mc_xml_get_attr(pci, "note"), "say \"hi\"");
  MC_T_EQ_INT(pci->n_subs, 1);
  out = dump_str(xml);
  MC_T_EQ_STR(out, "<system version=\"1\" name=\"t\">\n"
                   "  <cpu numaid=\"0\" flag=\"\" =\"\"/>\n"
                   "  <cpu numaid=\"1\">\n"
                   "    <pci busid=\"0000:01:00.0\" note='say \"hi\"'>\n"
                   "      <gpu dev=\"1\">\n"
                   "        <nvlink target=\"x\" count=\"2\"/>\n"
                   "      </gpu>\n"
                   "    </pci>\n"
                   "  </cpu>\n"
                   "</system>\n");
  free(out);
  mc_xml_destroy(xml);
}

/* ---------- attributes, find, build ---------- */

static void attributes_and_find(void)
{
  struct mc_xml *xml = new_tree(8);
  struct mc_xml_node *sys;
  struct mc_xml_node *cpu;
  struct mc_xml_node *pci;
  int i = 0;
  float f = 0;
  int64_t l = 0;
  char *out;

  MC_T_OK(mc_xml_add_node(xml, NULL, "system", &sys));
  MC_T_OK(mc_xml_set_attr_int(sys, "version", 1));
  MC_T_OK(mc_xml_add_node(xml, sys, "cpu", &cpu));
  MC_T_OK(mc_xml_set_attr(cpu, "numaid", "0"));
  MC_T_OK(mc_xml_set_attr_long(cpu, "host_hash", 0));
  MC_T_EQ_STR(mc_xml_get_attr(cpu, "host_hash"), "0");
  MC_T_OK(mc_xml_set_attr_long(cpu, "host_hash", 7));
  MC_T_EQ_STR(mc_xml_get_attr(cpu, "host_hash"), "0x7");
  MC_T_OK(mc_xml_set_attr_long(cpu, "host_hash", (int64_t)0xf3a1b2c3d4e5f607ULL));
  MC_T_EQ_STR(mc_xml_get_attr(cpu, "host_hash"), "0xf3a1b2c3d4e5f607");
  MC_T_OK(mc_xml_get_attr_long(cpu, "host_hash", &l));
  MC_T_TRUE((uint64_t)l == 0xf3a1b2c3d4e5f607ULL);
  MC_T_OK(mc_xml_add_node(xml, cpu, "pci", &pci));
  MC_T_OK(mc_xml_set_attr(pci, "busid", "0000:01:00.0"));
  MC_T_OK(mc_xml_set_attr_float(pci, "bw", 24.5f));
  MC_T_EQ_STR(mc_xml_get_attr(pci, "bw"), "24.5");
  MC_T_OK(mc_xml_set_attr_float(pci, "bw", 1e-7f));
  MC_T_EQ_STR(mc_xml_get_attr(pci, "bw"), "1e-07");
  MC_T_OK(mc_xml_get_attr_float(pci, "bw", &f));
  MC_T_TRUE(f == 1e-7f);
  MC_T_OK(mc_xml_init_attr(pci, "busid", "other"));
  MC_T_EQ_STR(mc_xml_get_attr(pci, "busid"), "0000:01:00.0");
  MC_T_OK(mc_xml_init_attr_int(pci, "link_width", 16));
  MC_T_OK(mc_xml_init_attr_int(pci, "link_width", 8));
  MC_T_OK(mc_xml_get_attr_int(pci, "link_width", &i));
  MC_T_EQ_INT(i, 16);
  MC_T_OK(mc_xml_init_attr_float(pci, "lat", 0.5f));
  MC_T_OK(mc_xml_init_attr_long(pci, "guid", 255));
  MC_T_EQ_STR(mc_xml_get_attr(pci, "guid"), "0xff");
  MC_T_EQ_INT(mc_xml_attr_index(pci, "link_width"), 2);
  mc_xml_unset_attr(pci, "bw");
  MC_T_EQ_INT(mc_xml_attr_index(pci, "bw"), -1);
  MC_T_EQ_INT(mc_xml_attr_index(pci, "link_width"), 1);
  mc_xml_unset_attr(pci, "absent");

  /* Numbers: strtol base 0 like NCCL; "" reads 0 (link_width=""); words are errors. */
  MC_T_OK(mc_xml_set_attr(pci, "n", "0x10"));
  MC_T_OK(mc_xml_get_attr_int(pci, "n", &i));
  MC_T_EQ_INT(i, 16);
  MC_T_OK(mc_xml_set_attr(pci, "n", ""));
  MC_T_OK(mc_xml_get_attr_int(pci, "n", &i));
  MC_T_EQ_INT(i, 0);
  MC_T_OK(mc_xml_set_attr(pci, "n", "wide"));
  MC_T_EQ_INT(mc_xml_get_attr_int(pci, "n", &i), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "attribute n=\"wide\" of <pci> (line 0) is not an int");
  MC_T_EQ_INT(mc_xml_get_attr_int(pci, "missing", &i), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "attribute missing of <pci> (line 0) not found");
  MC_T_OK(mc_xml_get_attr_int_default(pci, "missing", &i, 42));
  MC_T_EQ_INT(i, 42);
  MC_T_OK(mc_xml_set_attr(pci, "n", "-1"));
  MC_T_OK(mc_xml_get_attr_long(pci, "n", &l));
  MC_T_EQ_INT(l, -1);

  MC_T_TRUE(mc_xml_find_tag(xml, "pci") == pci);
  MC_T_TRUE(mc_xml_find_tag_kv(xml, "pci", "busid", "0000:01:00.0") == pci);
  MC_T_NULL(mc_xml_find_tag_kv(xml, "pci", "busid", "0000:02:00.0"));
  MC_T_TRUE(mc_xml_get_sub(cpu, "pci") == pci);
  MC_T_TRUE(mc_xml_get_sub_kv(sys, "cpu", "numaid", "0") == cpu);
  MC_T_NULL(mc_xml_get_sub_kv(sys, "cpu", "numaid", "1"));
  MC_T_NULL(mc_xml_get_sub(sys, "pci"));

  out = dump_str(xml);
  MC_T_EQ_STR(out, "<system version=\"1\">\n"
                   "  <cpu numaid=\"0\" host_hash=\"0xf3a1b2c3d4e5f607\">\n"
                   "    <pci busid=\"0000:01:00.0\" link_width=\"16\" lat=\"0.5\" guid=\"0xff\" "
                   "n=\"-1\"/>\n"
                   "  </cpu>\n"
                   "</system>\n");
  free(out);

  /* 16 attributes at most through the setters too. */
  for (int k = 0; k < 20; k++) {
    char key[16];

    snprintf(key, sizeof(key), "k%d", k);
    if (cpu->n_attrs < MC_XML_MAX_ATTRS) {
      MC_T_OK(mc_xml_set_attr_int(cpu, key, k));
    } else {
      MC_T_EQ_INT(mc_xml_set_attr_int(cpu, key, k), ncclInvalidUsage);
    }
  }
  MC_T_EQ_INT(cpu->n_attrs, MC_XML_MAX_ATTRS);

  MC_T_OK(mc_xml_remove_node(pci));
  MC_T_EQ_INT(cpu->n_subs, 0);
  MC_T_EQ_INT(pci->type, MC_XML_NODE_NONE);
  /* The tree is full at 8 nodes. */
  for (int k = xml->n_nodes; k < 8; k++)
    MC_T_OK(mc_xml_add_node(xml, sys, "cpu", NULL));
  MC_T_EQ_INT(mc_xml_add_node(xml, sys, "cpu", NULL), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "holds at most 8 elements");
  MC_T_EQ_INT(mc_xml_create(0, &xml), ncclInvalidArgument);
  mc_xml_destroy(xml);
  mc_xml_destroy(NULL);
}

/* ---------- fusion ---------- */

static const char rank0_xml[] = "<system version=\"1\">\n"
                                "  <cpu numaid=\"0\" host_hash=\"0x1000\">\n"
                                "    <pci busid=\"0000:10:00.0\" class=\"0x060400\">\n"
                                "      <pci busid=\"0000:14:00.0\" class=\"0x020700\">\n"
                                "        <nic>\n"
                                "          <net name=\"mlx5_0\" dev=\"0\"/>\n"
                                "        </nic>\n"
                                "      </pci>\n"
                                "      <pci busid=\"0000:12:00.0\" class=\"0x030200\">\n"
                                "        <gpu dev=\"0\" rank=\"0\"/>\n"
                                "      </pci>\n"
                                "    </pci>\n"
                                "  </cpu>\n"
                                "</system>\n";

static const char rank1_xml[] = "<system version=\"1\">\n"
                                "  <cpu numaid=\"0\" host_hash=\"0x1000\">\n"
                                "    <pci busid=\"0000:10:00.0\" class=\"0x060400\">\n"
                                "      <pci busid=\"0000:13:00.0\" class=\"0x030200\">\n"
                                "        <gpu dev=\"1\" rank=\"1\"/>\n"
                                "      </pci>\n"
                                "      <pci busid=\"0000:14:00.0\" class=\"0x020700\">\n"
                                "        <nic>\n"
                                "          <net dev=\"0\" name=\"mlx5_0\"/>\n"
                                "        </nic>\n"
                                "      </pci>\n"
                                "    </pci>\n"
                                "  </cpu>\n"
                                "  <cpu host_hash=\"0x1000\" numaid=\"1\"/>\n"
                                "</system>\n";

static void fuse_two_ranks(void)
{
  struct mc_xml *r0 = new_tree(256);
  struct mc_xml *r1 = new_tree(256);
  struct mc_xml *fused = new_tree(2 * 256);
  struct mc_xml *tiny = new_tree(10);
  char *out;
  char *before;

  MC_T_OK(load_str(r0, rank0_xml));
  MC_T_OK(load_str(r1, rank1_xml));
  /* Empty destination: a copy of rank 0. */
  MC_T_OK(mc_xml_fuse(fused, r0));
  out = dump_str(fused);
  MC_T_EQ_STR(out, rank0_xml);
  free(out);
  MC_T_OK(mc_xml_fuse(fused, r1));
  out = dump_str(fused);
  /* Switch and NIC merge (attribute order does not matter), rank 1's GPU is
   * appended after rank 0's children, the self-closing <cpu numaid=1> is new. */
  MC_T_EQ_STR(out, "<system version=\"1\">\n"
                   "  <cpu numaid=\"0\" host_hash=\"0x1000\">\n"
                   "    <pci busid=\"0000:10:00.0\" class=\"0x060400\">\n"
                   "      <pci busid=\"0000:14:00.0\" class=\"0x020700\">\n"
                   "        <nic>\n"
                   "          <net name=\"mlx5_0\" dev=\"0\"/>\n"
                   "        </nic>\n"
                   "      </pci>\n"
                   "      <pci busid=\"0000:12:00.0\" class=\"0x030200\">\n"
                   "        <gpu dev=\"0\" rank=\"0\"/>\n"
                   "      </pci>\n"
                   "      <pci busid=\"0000:13:00.0\" class=\"0x030200\">\n"
                   "        <gpu dev=\"1\" rank=\"1\"/>\n"
                   "      </pci>\n"
                   "    </pci>\n"
                   "  </cpu>\n"
                   "  <cpu host_hash=\"0x1000\" numaid=\"1\"/>\n"
                   "</system>\n");
  MC_T_EQ_INT(fused->n_nodes, 11);
  /* Fusing the same rank again adds nothing. */
  MC_T_OK(mc_xml_fuse(fused, r1));
  MC_T_EQ_INT(fused->n_nodes, 11);
  free(out);

  /* Type takes part in matching: <nic/> does not match <nic>...</nic>. */
  MC_T_OK(load_str(r1, "<system version=\"1\"><cpu numaid=\"0\" host_hash=\"0x1000\"><pci "
                       "busid=\"0000:10:00.0\" class=\"0x060400\"><pci busid=\"0000:14:00.0\" "
                       "class=\"0x020700\"><nic/></pci></pci></cpu></system>"));
  MC_T_OK(mc_xml_fuse(fused, r1));
  MC_T_EQ_INT(fused->n_nodes, 12);

  /* A fusion that runs out of room fails and leaves the destination as it was. */
  MC_T_OK(mc_xml_fuse(tiny, r0));
  before = dump_str(tiny);
  MC_T_OK(load_str(r1, rank1_xml));
  MC_T_EQ_INT(mc_xml_fuse(tiny, r1), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "fusion: more than 10 elements");
  out = dump_str(tiny);
  MC_T_EQ_STR(out, before);
  MC_T_EQ_INT(tiny->n_nodes, 8);
  free(out);
  free(before);

  mc_xml_destroy(tiny);
  mc_xml_destroy(fused);
  mc_xml_destroy(r1);
  mc_xml_destroy(r0);
}

/* mc_xml_dump_file writes the dump; an unwritable path is not an error (NCCL). */
static void dump_file(void)
{
  char path[512];
  struct mc_xml *xml = new_tree(256);
  struct mc_xml *back = new_tree(256);

  mc_t_tmp_path("topo.xml", path, sizeof(path));
  MC_T_OK(load_str(xml, rank0_xml));
  MC_T_OK(mc_xml_dump_file(xml, path));
  MC_T_EQ_STR(mc_t_read_file(path), rank0_xml);
  MC_T_OK(mc_xml_load_file(path, back));
  MC_T_EQ_INT(back->n_nodes, xml->n_nodes);
  MC_T_OK(mc_xml_dump_file(xml, "/nonexistent-dir/topo.xml"));
  MC_T_EQ_INT(mc_xml_load_file("/nonexistent-dir/topo.xml", back), ncclInvalidUsage);
  MC_T_CONTAINS(mc_t_last_error(), "/nonexistent-dir/topo.xml: cannot open topology file");
  MC_T_EQ_INT(back->n_nodes, xml->n_nodes);
  mc_t_tmp_cleanup();
  mc_xml_destroy(back);
  mc_xml_destroy(xml);
}

MC_T_MAIN(real_files_load, golden_round_trip, refuses_malformed, refuses_binary,
          truncated_file_keeps_tree, limits, extra_attributes_dropped, grammar_like_nccl,
          attributes_and_find, fuse_two_ranks, dump_file)
