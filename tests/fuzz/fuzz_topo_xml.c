/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the topology XML parser (src/topo/topo_xml.c).
 * Each input is parsed into a 256-element tree (NCCL's limit); a refused
 * input must leave the tree empty. An accepted one is dumped, and the dump
 * must parse again to the same dump; the tree is fused into an empty tree
 * (which must dump the same), then fused again and with the re-parsed copy.
 * Any broken property aborts, so the fuzzer reports it as a crash.
 *
 *   fuzz_topo_xml -max_total_time=60 NEW_CORPUS_DIR tests/data/topo
 */
#include "topo/topo_xml.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct mc_xml *tree;
static struct mc_xml *again;
static struct mc_xml *fused;

static void check(int ok, const char *what)
{
  if (!ok) {
    fprintf(stderr, "fuzz_topo_xml: property broken: %s\n", what);
    abort();
  }
}

static char *dump_str(const struct mc_xml *xml)
{
  char *text = NULL;
  size_t bytes = 0;
  FILE *f = open_memstream(&text, &bytes);

  check(f != NULL, "open_memstream");
  check(mc_xml_dump(xml, f) == ncclSuccess, "dump succeeds");
  fclose(f);
  return text;
}

/* Reads every attribute of every node as each type (errors are fine). */
static void read_attrs(const struct mc_xml *xml)
{
  for (int n = 0; n < xml->n_nodes; n++) {
    const struct mc_xml_node *node = &xml->nodes[n];

    for (int a = 0; a < node->n_attrs; a++) {
      int i;
      float f;
      int64_t l;

      (void)mc_xml_get_attr_int(node, node->attrs[a].key, &i);
      (void)mc_xml_get_attr_float(node, node->attrs[a].key, &f);
      (void)mc_xml_get_attr_long(node, node->attrs[a].key, &l);
    }
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  char *text;
  char *text2;
  char *text3;

  if (tree == NULL) {
    check(mc_xml_create(256, &tree) == ncclSuccess, "create");
    check(mc_xml_create(256, &again) == ncclSuccess, "create");
    check(mc_xml_create(2 * 256, &fused) == ncclSuccess, "create");
  }
  mc_xml_clear(tree);
  if (mc_xml_load_buf((const char *)data, size, "fuzz.xml", tree) != ncclSuccess) {
    check(tree->n_nodes == 0, "no partial tree after a failed load");
    return 0;
  }
  check((tree->n_nodes > 0) && (strcmp(tree->nodes[0].name, "system") == 0), "tree has <system>");
  read_attrs(tree);

  text = dump_str(tree);
  mc_xml_clear(again);
  check(mc_xml_load_buf(text, strlen(text), "dump.xml", again) == ncclSuccess, "dump reloads");
  text2 = dump_str(again);
  check(strcmp(text, text2) == 0, "dump(load(dump)) == dump");

  mc_xml_clear(fused);
  check(mc_xml_fuse(fused, tree) == ncclSuccess, "fuse into empty");
  text3 = dump_str(fused);
  check(strcmp(text, text3) == 0, "fuse into empty copies");
  check(mc_xml_fuse(fused, again) == ncclSuccess, "fuse again");
  free(text3);
  text3 = dump_str(fused);
  (void)mc_xml_fuse(fused, tree); /* may run out of room: must fail cleanly */

  free(text3);
  free(text2);
  free(text);
  return 0;
}
