/* SPDX-License-Identifier: Apache-2.0 */
/*
 * meshccl-topo: helpers that more than one output form uses (topo_tool.h):
 * a node's PCI bus id in NCCL's spelling, and a NET node's name from the XML
 * the systems were built from.
 */
#include "topo_tool.h"

#include <stdlib.h>
#include <string.h>

/* NCCL's int64ToBusId. */
void topo_tool_busid_str(int64_t id, char *buf, size_t bytes)
{
  uint64_t v = (uint64_t)MC_TOPO_ID_LOCAL(id);
  snprintf(buf, bytes, "%04lx:%02lx:%02lx.%01lx", (unsigned long)(v >> 20),
           (unsigned long)((v & 0xff000) >> 12), (unsigned long)((v & 0xff0) >> 4),
           (unsigned long)(v & 0xf));
}

/* Name of a NET node: the net element with its dev under a cpu of its host. */
const char *topo_tool_net_name(const struct topo_ctx *ctx, const struct mc_topo_system *sys,
                               const struct mc_topo_node *net)
{
  uint64_t hash = sys->host_hashes[MC_TOPO_ID_SYSTEM(net->id)];

  for (int i = 0; i < ctx->xml->n_nodes; i++) {
    const struct mc_xml_node *x = &ctx->xml->nodes[i];
    const struct mc_xml_node *cpu = x;
    const char *dev;
    const char *name;
    const char *h;
    if ((x->type == MC_XML_NODE_NONE) || (strcmp(x->name, "net") != 0)) {
      continue;
    }
    dev = mc_xml_get_attr(x, "dev");
    name = mc_xml_get_attr(x, "name");
    if ((dev == NULL) || (name == NULL) || (strtol(dev, NULL, 0) != net->net.dev)) {
      continue;
    }
    while ((cpu != NULL) && (strcmp(cpu->name, "cpu") != 0)) {
      cpu = cpu->parent;
    }
    h = (cpu != NULL) ? mc_xml_get_attr(cpu, "host_hash") : NULL;
    if (((h != NULL) ? strtoull(h, NULL, 16) : 0) == hash) {
      return name;
    }
  }
  return "";
}
