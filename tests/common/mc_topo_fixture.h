/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Topology XML steps shared by the unit tests of src/topo that build a
 * system from a recorded topology file (test_topo_paths.c, test_topo_share.c,
 * test_topo_graph.c, test_topo_file.c, test_topo_net.c).
 */
#ifndef MC_TOPO_FIXTURE_H
#define MC_TOPO_FIXTURE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mc_test.h"
#include "topo/topo.h"
#include "topo/topo_xml.h"

/* The host hash of the file's first CPU (0 when it has none). */
static inline uint64_t tt_first_host_hash(const struct mc_xml *xml)
{
  for (int i = 0; i < xml->n_nodes; i++) {
    if (strcmp(xml->nodes[i].name, "cpu") == 0) {
      const char *h = mc_xml_get_attr(&xml->nodes[i], "host_hash");
      return (h != NULL) ? strtoull(h, NULL, 16) : 0;
    }
  }
  return 0;
}

/*
 * The non-dump pass of ncclTopoGetSystem replayed on the dump (which holds
 * the physical NICs only): every local rank's GPU is kept, the emulated
 * plugin's devices are imported (IB-style NIC fusion makes the virtual NICs),
 * then the XML is trimmed. On files without fusion this changes nothing.
 */
static inline void tt_import_nets(struct mc_xml *xml)
{
  struct mc_topo_net_plugin *plugin = calloc(1, sizeof(*plugin));
  struct mc_topo_net_opts opts;

  MC_T_TRUE(plugin != NULL);
  for (int i = 0; i < xml->n_nodes; i++) {
    if ((strcmp(xml->nodes[i].name, "gpu") == 0) &&
        (mc_xml_get_attr(&xml->nodes[i], "rank") != NULL)) {
      MC_T_OK(mc_xml_set_attr_int(&xml->nodes[i], "keep", 1));
    }
  }
  mc_topo_net_opts_init(&opts);
  MC_T_OK(mc_topo_net_plugin_from_xml(xml, plugin));
  MC_T_OK(mc_topo_net_import(xml, plugin, &opts, false));
  MC_T_OK(mc_topo_xml_trim(xml));
  free(plugin);
}

#endif /* MC_TOPO_FIXTURE_H */
