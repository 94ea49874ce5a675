/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Net plugin devices imported into the topology XML. Mirrors NCCL 2.30's
 * ncclTopoProcessNet / ncclTopoPopulateNics / ncclTopoFillNet /
 * ncclTopoMakeVNics / ncclTopoForceMerge / ncclTopoAutoMerge /
 * ncclTopoUpdateVNics (src/graph/topo.cc, xml.cc) and ncclTopoTrimXml: physical devices are filled
 * in plugin order, then the groups of NCCL_NET_FORCE_MERGE and the devices whose XML path is at
 * most the merge level (NCCL_NET_MERGE_LEVEL, PORT by default: several nets of one nic, or
 * functions whose bus ids differ only in the last character) are fused into
 * virtual NICs, the way the IB plugin's makeVDevice does it; the fused
 * physical nets lose net/keep and the virtual ones are added under the
 * common parent.
 *
 * Where this differs from NCCL, on purpose: a forced group that names a
 * device twice, names a device of an earlier group, or names more devices
 * than a NIC may fuse is refused (NCCL ignores names past the 8th and would
 * fuse a device twice), and an unparsable group is skipped (NCCL's loop does
 * not advance there).
 *
 * No sysfs: a device whose net is not in the XML is attached to the first cpu
 * (NCCL's "not a PCI device" case).
 *
 * Length: one port of NCCL's NIC import and merge (topo.cc, xml.cc), kept in its shape.
 */
#include "topo/topo.h"
#include "topo/topo_int.h"

#include "check.h"
#include "log.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define XML_DEPTH_MAX        256
#define PCI_BRIDGE_CLASS     "0x060400"
#define VNIC_PLANE           0x4001      /* what the IB plugin reports for a fused NIC */
#define PATH_PORT            MC_PATH_NVL /* NCCL's PATH_PORT alias */
#define DEFAULT_MAX_DEVS_NIC 8

void mc_topo_net_opts_init(struct mc_topo_net_opts *opts)
{
  memset(opts, 0, sizeof(*opts));
  opts->merge_level = PATH_PORT;
  opts->merge_policy_rail = false;
  opts->force_merge = NULL;
}

int mc_topo_net_merge_level_parse(const char *str)
{
  static const struct {
    const char *name;
    int level;
  } levels[] = {{"LOC", MC_PATH_LOC}, {"PORT", PATH_PORT},  {"PIX", MC_PATH_PIX},
                {"PXB", MC_PATH_PXB}, {"P2C", MC_PATH_P2C}, {"PXN", MC_PATH_PXN},
                {"PHB", MC_PATH_PHB}, {"SYS", MC_PATH_SYS}};

  if (str == NULL) {
    return -1;
  }
  for (size_t i = 0; i < sizeof(levels) / sizeof(levels[0]); i++) {
    if (strncmp(str, levels[i].name, strlen(levels[i].name)) == 0) {
      return levels[i].level;
    }
  }
  return -1;
}

/* ---------------------------------------------------------------------- */
/* Emulated plugin (golden harness)                                        */
/* ---------------------------------------------------------------------- */

enum family { FAMILY_IB, FAMILY_OFI, FAMILY_SOCKET };

static enum family family_of(const char *name)
{
  if ((strncmp(name, "mlx5_", 5) == 0) || (strncmp(name, "bnxt_re", 7) == 0)) {
    return FAMILY_IB;
  }
  if (strncmp(name, "rdmap", 5) == 0) {
    return FAMILY_OFI;
  }
  return FAMILY_SOCKET;
}

static int attr_int(const struct mc_xml_node *x, const char *key, int def)
{
  const char *v = mc_xml_get_attr(x, key);
  return (v != NULL) ? (int)strtol(v, NULL, 0) : def;
}

static void props_from_net(const struct mc_xml_node *x, enum family fam, int index,
                           struct mc_topo_net_props *p)
{
  const char *v;
  /* speed, port, maxComms, gdr, latency when the file has none. */
  static const int defs[3][5] = {
      {100000, 1, 131072, 1, 0}, {100000, 1, 65536, 1, 0}, {10000, 0, 65536, 0, 0}};

  memset(p, 0, sizeof(*p));
  snprintf(p->name, sizeof(p->name), "%s", mc_xml_get_attr(x, "name"));
  p->speed = attr_int(x, "speed", defs[fam][0]);
  p->port = attr_int(x, "port", defs[fam][1]);
  p->max_comms = attr_int(x, "maxconn", defs[fam][2]);
  p->gdr = attr_int(x, "gdr", defs[fam][3]);
  v = mc_xml_get_attr(x, "latency");
  p->latency = (v != NULL) ? strtof(v, NULL) : (float)defs[fam][4];
  v = mc_xml_get_attr(x, "guid");
  p->guid = (v != NULL) ? strtoull(v, NULL, 0) : (uint64_t)index;
  p->rail = MC_TOPO_UNDEF;
  p->plane = MC_TOPO_UNDEF;
}

ncclResult_t mc_topo_net_plugin_from_xml(const struct mc_xml *xml,
                                         struct mc_topo_net_plugin *plugin_out)
{
  const struct mc_xml_node *nets[MC_TOPO_NET_MAX_DEVS];
  int n = 0;
  bool all_dev = true;
  enum family fam = FAMILY_SOCKET;
  static const char *names[3] = {"IB", "OFI", "Socket"};

  memset(plugin_out, 0, sizeof(*plugin_out));
  for (int i = 0; i < xml->n_nodes; i++) {
    const struct mc_xml_node *x = &xml->nodes[i];
    const char *name = mc_xml_get_attr(x, "name");
    bool seen = false;
    if ((strcmp(x->name, "net") != 0) || (name == NULL)) {
      continue;
    }
    for (int j = 0; j < n; j++) {
      if (strcmp(mc_xml_get_attr(nets[j], "name"), name) == 0) {
        seen = true;
      }
    }
    if (seen) {
      continue;
    }
    if (n == MC_TOPO_NET_MAX_DEVS) {
      return MC_FAIL(ncclInvalidUsage, "topology XML: more than %d net devices, cannot import them",
                     MC_TOPO_NET_MAX_DEVS);
    }
    nets[n++] = x;
    all_dev = all_dev && (mc_xml_get_attr(x, "dev") != NULL);
  }
  if (all_dev) {
    /* stable insertion sort by dev */
    for (int i = 1; i < n; i++) {
      const struct mc_xml_node *k = nets[i];
      int kd = attr_int(k, "dev", 0);
      int j = i - 1;
      while ((j >= 0) && (attr_int(nets[j], "dev", 0) > kd)) {
        nets[j + 1] = nets[j];
        j--;
      }
      nets[j + 1] = k;
    }
  }
  if (n > 0) {
    fam = family_of(mc_xml_get_attr(nets[0], "name"));
  }
  snprintf(plugin_out->name, sizeof(plugin_out->name), "%s", names[fam]);
  plugin_out->can_merge = (fam == FAMILY_IB);
  plugin_out->max_devs_per_nic = DEFAULT_MAX_DEVS_NIC;
  for (int i = 0; i < n; i++) {
    props_from_net(nets[i], fam, i, &plugin_out->devs[i]);
  }
  plugin_out->n_phys = n;
  plugin_out->n_devs = n;
  return ncclSuccess;
}

/* The net's own makeVDevice (NCCL's ncclTopoMakeVnic: makeVDevice, then the
 * new device's properties): its index must be the next device's. */
static ncclResult_t net_make_vdevice(struct mc_topo_net_plugin *plugin, const int *devs, int n_devs,
                                     int *index_out)
{
  struct mc_topo_net_props props;
  int index = -1;

  memset(&props, 0, sizeof(props));
  MC_CHECK(plugin->make_vdevice(plugin->make_vdevice_arg, devs, n_devs, &props, &index));
  if (index != plugin->n_devs) {
    return MC_FAIL(ncclInternalError,
                   "NET/%s : makeVDevice of %d devices (first %s) returned device %d, expected "
                   "%d (the next index: physical devices first, then virtual ones in order)",
                   plugin->name, n_devs, plugin->devs[devs[0]].name, index, plugin->n_devs);
  }
  if ((props.n_vdevs != n_devs) || (props.n_vdevs > MC_TOPO_NET_MAX_DEVS_PER_NIC)) {
    return MC_FAIL(ncclInternalError,
                   "NET/%s : virtual device %d (%s) reports %d physical devices, %d were fused",
                   plugin->name, index, props.name, props.n_vdevs, n_devs);
  }
  plugin->devs[index] = props;
  *index_out = plugin->n_devs++;
  MC_INFO(MC_SUB_NET, "NET/%s : Made virtual device [%d] name=%s ndevs=%d", plugin->name,
          *index_out, props.name, n_devs);
  return ncclSuccess;
}

/* The IB plugin's makeVDevice as the harness emulated it. */
static ncclResult_t make_vdevice(struct mc_topo_net_plugin *plugin, const int *devs, int n_devs,
                                 int *index_out)
{
  struct mc_topo_net_props *v;
  const struct mc_topo_net_props *first = &plugin->devs[devs[0]];
  char name[MC_XML_MAX_STR];
  size_t len = 0;

  if (plugin->n_devs == MC_TOPO_NET_MAX_DEVS) {
    return MC_FAIL(ncclInternalError, "NET/%s : cannot make a virtual device: %d devices already",
                   plugin->name, plugin->n_devs);
  }
  if (plugin->make_vdevice != NULL) {
    return net_make_vdevice(plugin, devs, n_devs, index_out);
  }
  v = &plugin->devs[plugin->n_devs];
  *v = *first;
  name[0] = '\0';
  v->speed = 0;
  for (int i = 0; i < n_devs; i++) {
    const struct mc_topo_net_props *p = &plugin->devs[devs[i]];
    int w = snprintf(name + len, sizeof(name) - len, "%s%s", (i == 0) ? "" : "+", p->name);
    if ((w < 0) || ((size_t)w >= sizeof(name) - len)) {
      return MC_FAIL(ncclInternalError, "NET/%s : virtual device name too long (%s...)",
                     plugin->name, name);
    }
    len += (size_t)w;
    v->speed += p->speed;
    v->vdevs[i] = devs[i];
  }
  memcpy(v->name, name, sizeof(v->name));
  v->n_vdevs = n_devs;
  v->rail = MC_TOPO_UNDEF;
  v->plane = VNIC_PLANE;
  *index_out = plugin->n_devs++;
  MC_INFO(MC_SUB_NET, "NET/%s : Made virtual device [%d] name=%s ndevs=%d", plugin->name,
          *index_out, v->name, n_devs);
  return ncclSuccess;
}

/* ---------------------------------------------------------------------- */
/* XML helpers                                                             */
/* ---------------------------------------------------------------------- */

static void int64_to_bus_id(int64_t id, char *buf, size_t size)
{
  uint64_t u = (uint64_t)id;
  snprintf(buf, size, "%04" PRIx64 ":%02" PRIx64 ":%02" PRIx64 ".%01" PRIx64, u >> 20,
           (u & 0xff000) >> 12, (u & 0xff0) >> 4, u & 0xf);
}

static bool is(const struct mc_xml_node *x, const char *name)
{
  return strcmp(x->name, name) == 0;
}

/* ncclTopoFillNet: the net named name, else a new one under force_parent's
 * (or the first cpu's) nic. */
static ncclResult_t fill_net(struct mc_xml *xml, const char *name, struct mc_xml_node *force_parent,
                             struct mc_xml_node **net_out)
{
  struct mc_xml_node *parent = force_parent;
  struct mc_xml_node *nic = NULL;
  struct mc_xml_node *net = mc_xml_find_tag_kv(xml, "net", "name", name);

  if (net != NULL) {
    *net_out = net;
    return ncclSuccess;
  }
  if (parent == NULL) {
    parent = mc_xml_find_tag(xml, "cpu");
  }
  if (parent == NULL) {
    struct mc_xml_node *top = mc_xml_find_tag(xml, "system");
    if (top == NULL) {
      return MC_FAIL(ncclInvalidUsage, "topology XML has no <system>: cannot attach net %s", name);
    }
    MC_CHECK(mc_xml_add_node(xml, top, "cpu", &parent));
    MC_CHECK(mc_xml_set_attr(parent, "host_hash", "0x0"));
    MC_CHECK(mc_xml_set_attr(parent, "numaid", "0"));
  }
  nic = mc_xml_get_sub(parent, "nic");
  if (nic == NULL) {
    MC_CHECK(mc_xml_add_node(xml, parent, "nic", &nic));
  }
  MC_CHECK(mc_xml_add_node(xml, nic, "net", &net));
  MC_CHECK(mc_xml_set_attr(net, "name", name));
  *net_out = net;
  return ncclSuccess;
}

/* ncclTopoCheckPix */
static bool check_pix(const struct mc_xml_node *common, struct mc_xml_node **nodes, int n)
{
  if (mc_xml_get_attr(common, "busid") == NULL) {
    return false;
  }
  for (int i = 0; i < n; i++) {
    const struct mc_xml_node *x = nodes[i];
    if (!is(x, "net")) {
      continue;
    }
    x = x->parent;
    if (x == NULL) {
      return false;
    }
    if (is(x, "nic")) {
      x = x->parent;
      if (x == NULL) {
        return false;
      }
      if (is(x, "pci") && (x->parent != common)) {
        return false;
      }
    }
  }
  return true;
}

struct stack {
  struct mc_xml_node *elems[XML_DEPTH_MAX];
  int tail;
};

/* ncclTopoGetPath: the distance class of a set of nets (LOC, PORT, PIX, PXB,
 * PHB, SYS, DIS) and their common parent (the first pci at or above it). */
static ncclResult_t get_path(struct mc_xml_node **nodes, int n, int *path_out,
                             struct mc_xml_node **parent_out)
{
  struct stack *st = NULL;
  struct mc_xml_node *common = NULL;
  int path = MC_PATH_DIS;
  bool decided = false;
  bool c = true;

  if (n < 1) {
    return MC_FAIL(ncclInternalError, "NIC distances of %d nets", n);
  }
  if (n == 1) {
    common = nodes[0];
    path = MC_PATH_LOC;
    decided = true;
  } else {
    st = calloc((size_t)n, sizeof(*st));
    if (st == NULL) {
      return MC_FAIL(ncclSystemError, "out of memory computing NIC distances");
    }
    for (int i = 0; i < n; i++) {
      struct mc_xml_node *t = nodes[i];
      while (t != NULL) {
        if (st[i].tail < XML_DEPTH_MAX) {
          st[i].elems[st[i].tail++] = t;
        }
        t = is(t, "system") ? NULL : t->parent;
      }
    }
    while (c && (st[0].tail > 0)) {
      struct mc_xml_node *t = st[0].elems[st[0].tail - 1];
      for (int i = 1; i < n; i++) {
        if (st[i].tail > 0) {
          c = c && (t == st[i].elems[st[i].tail - 1]);
        } else {
          c = false;
          break;
        }
      }
      if (c) {
        common = t;
        for (int i = 0; i < n; i++) {
          st[i].tail--;
        }
      } else {
        /* Multi-port: the diverging parents' bus ids differ only in the last character. */
        bool multi = true;
        const char *tb = mc_xml_get_attr(t, "busid");
        if (tb != NULL) {
          for (int i = 1; i < n; i++) {
            const char *b;
            if (st[i].tail == 0) {
              continue;
            }
            b = mc_xml_get_attr(st[i].elems[st[i].tail - 1], "busid");
            if ((b == NULL) || (strlen(b) != strlen(tb)) || (strncmp(b, tb, strlen(b) - 1) != 0)) {
              multi = false;
              break;
            }
          }
        } else {
          multi = false;
        }
        if (multi) {
          path = PATH_PORT;
          decided = true;
        }
      }
    }
    free(st);
  }
  if (!decided) {
    if (common == NULL) {
      path = MC_PATH_DIS;
    } else if (is(common, "system")) {
      path = MC_PATH_SYS;
    } else if (is(common, "cpu")) {
      path = MC_PATH_PHB;
    } else if (is(common, "nic") || is(common, "net")) {
      path = PATH_PORT;
    } else if (check_pix(common, nodes, n)) {
      path = MC_PATH_PIX;
    } else {
      path = MC_PATH_PXB;
    }
  }
  /* ncclFindFirstPciParent */
  if (common != NULL) {
    struct mc_xml_node *p = common;
    while (!is(p, "pci")) {
      p = p->parent;
      if ((p == NULL) || is(p, "system")) {
        break;
      }
    }
    if ((p != NULL) && is(p, "pci")) {
      common = p;
    }
  }
  *path_out = path;
  *parent_out = common;
  return ncclSuccess;
}

static bool is_phys(const struct mc_xml_node *x, struct mc_xml_node **phys, int n)
{
  for (int i = 0; i < n; i++) {
    if (x == phys[i]) {
      return true;
    }
  }
  return false;
}

/* ncclTopoFindLinkWidthRec */
static void link_width_rec(const struct mc_xml_node *x, struct mc_xml_node **phys, int n,
                           bool *found_out, int *width_out)
{
  int mine = 0;
  int total = 0;
  bool found = is_phys(x, phys, n);

  if (is(x, "pci")) {
    mine = attr_int(x, "link_width", 0);
  }
  for (int s = 0; s < x->n_subs; s++) {
    bool f = false;
    int w = 0;
    link_width_rec(x->subs[s], phys, n, &f, &w);
    if (f) {
      found = true;
      total += w;
    }
  }
  if (!found) {
    *width_out = 0;
  } else if (total == 0) {
    *width_out = mine;
  } else {
    *width_out = (mine > 0) ? ((mine < total) ? mine : total) : total;
  }
  *found_out = found;
}

static int link_width(const struct mc_xml_node *parent, struct mc_xml_node **phys, int n)
{
  int width = 0;

  for (int s = 0; s < parent->n_subs; s++) {
    bool f = false;
    int w = 0;
    link_width_rec(parent->subs[s], phys, n, &f, &w);
    if (f) {
      width += w;
    }
  }
  return width;
}

/* ncclTopoMakePciParent: a new pci under *parent, copy of NIC 0's pci with
 * the first free bus id after it. */
static ncclResult_t make_pci_parent(struct mc_xml *xml, struct mc_xml_node **parent,
                                    const struct mc_xml_node *phys0)
{
  const struct mc_xml_node *pci = (phys0->parent != NULL) ? phys0->parent->parent : NULL;
  char bus[32];
  int64_t id;

  if ((pci == NULL) || !is(pci, "pci") || (mc_xml_get_attr(pci, "busid") == NULL)) {
    return MC_FAIL(ncclInternalError, "TOPO/NET : Can't find busId of child 0 %s",
                   mc_xml_get_attr(phys0, "name"));
  }
  id = mc_topo_bus_id_to_int64(mc_xml_get_attr(pci, "busid"));
  for (int i = 0; i < 100; i++) {
    struct mc_xml_node *np = NULL;
    id++;
    int64_to_bus_id(id, bus, sizeof(bus));
    if (mc_xml_find_tag_kv(xml, "pci", "busid", bus) != NULL) {
      continue;
    }
    MC_CHECK(mc_xml_add_node(xml, *parent, "pci", &np));
    MC_CHECK(mc_xml_set_attr(np, "busid", bus));
    for (int a = 0; a < pci->n_attrs; a++) {
      MC_CHECK(mc_xml_set_attr(np, pci->attrs[a].key, pci->attrs[a].value));
    }
    MC_CHECK(mc_xml_set_attr(np, "busid", bus));
    *parent = np;
    return ncclSuccess;
  }
  return MC_FAIL(ncclInternalError, "TOPO/NET : Couldn't generate unique busId after 100 tries");
}

/* ncclTopoGetVNicParent */
static ncclResult_t vnic_parent(struct mc_xml *xml, const struct mc_topo_net_plugin *plugin,
                                const struct mc_topo_net_props *v, struct mc_xml_node **parent_out)
{
  struct mc_xml_node *phys[MC_TOPO_NET_MAX_DEVS_PER_NIC];
  struct mc_xml_node *parent = NULL;
  struct mc_xml_node *phys_parent;
  int path = MC_PATH_LOC;
  int width = 0;

  for (int i = 0; i < v->n_vdevs; i++) {
    phys[i] = mc_xml_find_tag_kv(xml, "net", "name", plugin->devs[v->vdevs[i]].name);
    if (phys[i] == NULL) {
      return MC_FAIL(ncclInternalError, "TOPO/NET : net %s of virtual NIC %s is not in the XML",
                     plugin->devs[v->vdevs[i]].name, v->name);
    }
  }
  MC_CHECK(get_path(phys, v->n_vdevs, &path, &parent));
  if ((path == MC_PATH_PHB) || (path == MC_PATH_PXB) || (path == MC_PATH_PIX)) {
    width = link_width(parent, phys, v->n_vdevs);
  }
  phys_parent = parent;
  if (parent != NULL) {
    if (is(parent, "pci")) {
      const char *cls = mc_xml_get_attr(parent, "class");
      if ((cls != NULL) && (strcmp(cls, PCI_BRIDGE_CLASS) == 0)) {
        MC_CHECK(make_pci_parent(xml, &parent, phys[0]));
      }
    } else if (is(parent, "cpu")) {
      MC_CHECK(make_pci_parent(xml, &parent, phys[0]));
    } else if (is(parent, "system")) {
      return MC_FAIL(ncclInvalidArgument,
                     "Fusing NET devices from different NUMA domains is not supported (%s); set "
                     "NCCL_NET_MERGE_LEVEL=LOC to disable NIC fusion",
                     v->name);
    }
  }
  if (width > 0) {
    struct mc_xml_node *x = parent;
    while (x != NULL) {
      if (is(x, "pci")) {
        MC_CHECK(mc_xml_set_attr_int(x, "link_width", width));
      }
      if (x == phys_parent) {
        break;
      }
      x = x->parent;
    }
  }
  *parent_out = parent;
  return ncclSuccess;
}

static ncclResult_t init_guid(struct mc_xml_node *x, uint64_t guid)
{
  char buf[32];
  snprintf(buf, sizeof(buf), "0x%" PRIx64, guid);
  return mc_xml_init_attr(x, "guid", buf);
}

/* ncclTopoPopulateNics for devices [start, end) of the NET family. */
static ncclResult_t populate(struct mc_xml *xml, const struct mc_topo_net_plugin *plugin, int start,
                             int end, bool virtual_nics)
{
  for (int n = start; n < end; n++) {
    const struct mc_topo_net_props *p = &plugin->devs[n];
    struct mc_xml_node *parent = NULL;
    struct mc_xml_node *net = NULL;
    int dev;

    if (virtual_nics && (mc_xml_find_tag_kv(xml, "net", "name", p->name) == NULL)) {
      MC_CHECK(vnic_parent(xml, plugin, p, &parent));
    }
    MC_CHECK(fill_net(xml, p->name, parent, &net));
    MC_CHECK(mc_xml_set_attr_int(net, "keep", 1));
    dev = attr_int(net, "dev", -1);
    if ((dev != -1) && (dev != n)) {
      MC_INFO(MC_SUB_GRAPH, "TOPO/NET : Changing %s dev index from %d to %d", plugin->name, dev, n);
    }
    MC_CHECK(mc_xml_set_attr_int(net, "dev", n));
    MC_CHECK(mc_xml_init_attr_int(net, "latency", (int)p->latency));
    MC_CHECK(mc_xml_init_attr_int(net, "speed", p->speed));
    MC_CHECK(mc_xml_init_attr_int(net, "port", p->port));
    if (p->rail != MC_TOPO_UNDEF) {
      MC_CHECK(mc_xml_init_attr_int(net, "rail", p->rail));
    }
    if (p->plane != MC_TOPO_UNDEF) {
      MC_CHECK(mc_xml_init_attr_int(net, "plane", p->plane));
    }
    MC_CHECK(init_guid(net, p->guid));
    MC_CHECK(mc_xml_init_attr_int(net, "maxconn", p->max_comms));
    MC_INFO(MC_SUB_NET, "NET/%s : GPU Direct RDMA %s for HCA %d '%s'", plugin->name,
            (p->gdr != 0) ? "Enabled" : "Disabled", n, p->name);
    MC_CHECK(mc_xml_init_attr_int(net, "gdr", (p->gdr != 0) ? 1 : 0));
    MC_CHECK(mc_xml_set_attr_int(net, "net", 1));
    MC_INFO(MC_SUB_GRAPH, "ncclTopoPopulateNics : Filled %s in topo net=1 keep=1 rail=%d plane=%d",
            p->name, p->rail, p->plane);
  }
  return ncclSuccess;
}

/* ncclTopoMakeVnic + the automatic merge of ncclTopoAutoMerge, over the
 * devices not placed by a forced group. */
static ncclResult_t auto_merge(struct mc_xml *xml, struct mc_topo_net_plugin *plugin,
                               const struct mc_topo_net_opts *opts, int *placed)
{
  int n = plugin->n_phys;
  int *paths = calloc((size_t)n * (size_t)n + 1, sizeof(*paths));
  struct mc_xml_node **phys = calloc((size_t)n + 1, sizeof(*phys));
  ncclResult_t res = ncclSuccess;

  if ((paths == NULL) || (phys == NULL)) {
    res = MC_FAIL(ncclSystemError, "out of memory fusing %d NICs", n);
    goto out;
  }
  for (int i = 0; i < n; i++) {
    phys[i] = mc_xml_find_tag_kv(xml, "net", "name", plugin->devs[i].name);
  }
  for (int i = 0; i < n; i++) {
    for (int j = 0; j < n; j++) {
      struct mc_xml_node *pair[2] = {phys[i], phys[j]};
      struct mc_xml_node *parent = NULL;
      MC_CHECK_GOTO(get_path(pair, 2, &paths[i * n + j], &parent), res, out);
    }
  }
  for (int i = 0; i < n; i++) {
    int devs[MC_TOPO_NET_MAX_DEVS_PER_NIC];
    int nd = 0;
    int vdev = 0;
    ncclResult_t ret = ncclSuccess;
    if (placed[i] != 0) {
      continue;
    }
    devs[nd++] = i;
    placed[i] = 1;
    for (int j = 0; j < n; j++) {
      if ((paths[i * n + j] <= opts->merge_level) && (placed[j] == 0) && (j != i) &&
          (!opts->merge_policy_rail || ((plugin->devs[i].rail != MC_TOPO_UNDEF) &&
                                        (plugin->devs[i].rail == plugin->devs[j].rail)))) {
        devs[nd++] = j;
        placed[j] = 1;
      }
      if (nd == plugin->max_devs_per_nic) {
        break;
      }
    }
    if (nd == 1) {
      continue; /* no vNIC of size 1 */
    }
    ret = make_vdevice(plugin, devs, nd, &vdev);
    if (ret == ncclSuccess) {
      MC_INFO(MC_SUB_GRAPH, "TOPO/NET : Made vNic %d", vdev);
    } else {
      MC_INFO(MC_SUB_GRAPH | MC_SUB_NET,
              "Marking physical devices as unplaced, increasing distance and restarting search.");
      placed[i] = 0;
      for (int k = 1; k < nd; k++) {
        placed[devs[k]] = 0;
        paths[i * n + devs[k]] = MC_PATH_DIS;
        paths[devs[k] * n + i] = MC_PATH_DIS;
      }
      i = 0; /* as NCCL: the loop resumes at 1 */
    }
  }
out:
  free(paths);
  free(phys);
  return res;
}

/* An entry of a forced group: "name" or "name:port" (NCCL's parseStringList
 * and matchIfList with exact matching). */
static bool force_entry_matches(const struct mc_topo_net_props *p, const char *entry)
{
  const char *colon = strchr(entry, ':');
  size_t name_len = (colon != NULL) ? (size_t)(colon - entry) : strlen(entry);

  if ((strlen(p->name) != name_len) || (strncmp(p->name, entry, name_len) != 0)) {
    return false;
  }
  return (colon == NULL) || (p->port == (int)strtol(colon + 1, NULL, 10));
}

/* One group of NCCL_NET_FORCE_MERGE ("mlx5_0,mlx5_1:2"), fused into a vNIC
 * unless it has a single device; its devices are placed either way. */
static ncclResult_t force_group(struct mc_topo_net_plugin *plugin, char *group, const char *all,
                                int *placed)
{
  char *entries[MC_TOPO_NET_MAX_DEVS_PER_NIC + 1];
  int devs[MC_TOPO_NET_MAX_DEVS_PER_NIC];
  char *save = NULL;
  char text[MC_XML_MAX_STR];
  int n_entries = 0;
  int nd = 0;
  int vdev = 0;

  snprintf(text, sizeof(text), "%s", group);
  for (char *e = strtok_r(group, ",", &save); e != NULL; e = strtok_r(NULL, ",", &save)) {
    if ((e[0] == '\0') || (e[0] == ':')) {
      continue;
    }
    if (n_entries == plugin->max_devs_per_nic) {
      return MC_FAIL(ncclInvalidUsage,
                     "TOPO/NET : NCCL_NET_FORCE_MERGE=%s: group '%s' names more than %d devices, "
                     "the most NET/%s fuses into one NIC",
                     all, text, plugin->max_devs_per_nic, plugin->name);
    }
    entries[n_entries++] = e;
  }
  if (n_entries == 0) {
    MC_INFO(MC_SUB_NET,
            "NET/%s : Invalid NCCL_NET_FORCE_MERGE specified %s. Couldn't parse substring %s. "
            "Please provide a semicolon-delimited list of comma-delimited NIC groups.",
            plugin->name, all, text);
    return ncclSuccess;
  }
  /* Plugin order, as NCCL's loop over the devices. */
  for (int d = 0; d < plugin->n_phys; d++) {
    int hits = 0;
    for (int e = 0; e < n_entries; e++) {
      hits += force_entry_matches(&plugin->devs[d], entries[e]) ? 1 : 0;
    }
    if (hits == 0) {
      continue;
    }
    if ((hits > 1) || (placed[d] != 0)) {
      return MC_FAIL(ncclInvalidUsage,
                     "TOPO/NET : NCCL_NET_FORCE_MERGE=%s names device %s (%d) twice; give each "
                     "device to one group",
                     all, plugin->devs[d].name, d);
    }
    devs[nd++] = d;
  }
  if (nd != n_entries) {
    char names[1024];
    size_t len = 0;
    names[0] = '\0';
    for (int d = 0; (d < plugin->n_phys) && (len < sizeof(names)); d++) {
      int w = snprintf(names + len, sizeof(names) - len, "%s%s:%d", (d == 0) ? "" : ",",
                       plugin->devs[d].name, plugin->devs[d].port);
      len += (w > 0) ? (size_t)w : 0;
    }
    return MC_FAIL(ncclInvalidUsage,
                   "TOPO/NET : Only matched %d devices, %d requested from %s "
                   "(NCCL_NET_FORCE_MERGE=%s); NET/%s devices are: %s",
                   nd, n_entries, text, all, plugin->name, names);
  }
  if (nd > 1) {
    MC_CHECK(make_vdevice(plugin, devs, nd, &vdev));
    MC_INFO(MC_SUB_GRAPH, "TOPO/NET : Made vNic %d", vdev);
  }
  for (int i = 0; i < nd; i++) {
    placed[devs[i]] = 1;
  }
  return ncclSuccess;
}

/* ncclTopoForceMerge: the semicolon-separated groups, in order. */
static ncclResult_t force_merge(struct mc_topo_net_plugin *plugin, const char *str, int *placed)
{
  char *copy = strdup(str);
  char *save = NULL;
  ncclResult_t res = ncclSuccess;

  if (copy == NULL) {
    return MC_FAIL(ncclSystemError, "out of memory parsing NCCL_NET_FORCE_MERGE=%s", str);
  }
  MC_INFO(MC_SUB_ENV | MC_SUB_NET, "TOPO/NET : Force-fusing NICs using NCCL_NET_FORCE_MERGE=%s",
          str);
  for (char *g = strtok_r(copy, ";", &save); g != NULL; g = strtok_r(NULL, ";", &save)) {
    MC_CHECK_GOTO(force_group(plugin, g, str, placed), res, out);
  }
out:
  free(copy);
  return res;
}

/* ncclTopoMakeVNics: forced groups first, then the automatic merge. */
static ncclResult_t make_vnics(struct mc_xml *xml, struct mc_topo_net_plugin *plugin,
                               const struct mc_topo_net_opts *opts)
{
  int *placed = calloc((size_t)plugin->n_phys + 1, sizeof(*placed));
  ncclResult_t res = ncclSuccess;

  if (placed == NULL) {
    return MC_FAIL(ncclSystemError, "out of memory fusing %d NICs", plugin->n_phys);
  }
  if (opts->force_merge != NULL) {
    MC_CHECK_GOTO(force_merge(plugin, opts->force_merge, placed), res, out);
  }
  MC_CHECK_GOTO(auto_merge(xml, plugin, opts, placed), res, out);
out:
  free(placed);
  return res;
}

/* ncclTopoUpdateVNics: the fused physical nets are no longer NET devices. */
static ncclResult_t update_vnics(struct mc_xml *xml, const struct mc_topo_net_plugin *plugin)
{
  for (int v = plugin->n_phys; v < plugin->n_devs; v++) {
    const struct mc_topo_net_props *vp = &plugin->devs[v];
    for (int i = 0; i < vp->n_vdevs; i++) {
      struct mc_xml_node *x =
          mc_xml_find_tag_kv(xml, "net", "name", plugin->devs[vp->vdevs[i]].name);
      if (x == NULL) {
        continue;
      }
      MC_CHECK(mc_xml_set_attr_int(x, "net", 0));
      if ((attr_int(x, "gin", 0) == 0) && (attr_int(x, "coll", 0) == 0)) {
        MC_CHECK(mc_xml_set_attr_int(x, "keep", 0));
      }
    }
  }
  return ncclSuccess;
}

ncclResult_t mc_topo_net_import(struct mc_xml *xml, struct mc_topo_net_plugin *plugin,
                                const struct mc_topo_net_opts *opts, bool dumping)
{
  struct mc_topo_net_opts def;

  if (opts == NULL) {
    mc_topo_net_opts_init(&def);
    opts = &def;
  }
  if ((plugin->max_devs_per_nic <= 0) ||
      (plugin->max_devs_per_nic > MC_TOPO_NET_MAX_DEVS_PER_NIC)) {
    return MC_FAIL(ncclInvalidArgument, "NET/%s : max devices per NIC %d out of 1..%d",
                   plugin->name, plugin->max_devs_per_nic, MC_TOPO_NET_MAX_DEVS_PER_NIC);
  }
  MC_INFO(MC_SUB_GRAPH, "TOPO/NET : Importing network plugins to topology");
  /* Virtual devices of an earlier import are made again, unless the net
   * already has them (has_vdevs). */
  if (!plugin->has_vdevs) {
    plugin->n_devs = plugin->n_phys;
  }
  MC_CHECK(populate(xml, plugin, 0, plugin->n_phys, false));
  if (dumping || !plugin->can_merge) {
    return ncclSuccess;
  }
  if ((plugin->n_phys > 0) && !plugin->has_vdevs) {
    MC_CHECK(make_vnics(xml, plugin, opts));
  }
  if (plugin->n_devs > plugin->n_phys) {
    MC_CHECK(update_vnics(xml, plugin));
    MC_CHECK(populate(xml, plugin, plugin->n_phys, plugin->n_devs, true));
  }
  return ncclSuccess;
}

/* ---------------------------------------------------------------------- */
/* Trim                                                                    */
/* ---------------------------------------------------------------------- */

static ncclResult_t trim_rec(struct mc_xml_node *x, int depth, int *keep_out)
{
  const char *k = mc_xml_get_attr(x, "keep");
  struct mc_xml_node **subs;
  int n_subs = x->n_subs;
  int keep = 0;

  if ((k != NULL) && (strcmp(k, "1") == 0)) {
    mc_xml_unset_attr(x, "keep");
    *keep_out = 1;
    return ncclSuccess;
  }
  if (depth > XML_DEPTH_MAX) {
    return MC_FAIL(ncclInvalidUsage, "topology XML nested deeper than %d elements", XML_DEPTH_MAX);
  }
  subs = malloc(((size_t)n_subs + 1) * sizeof(*subs));
  if (subs == NULL) {
    return MC_FAIL(ncclSystemError, "out of memory trimming the topology XML");
  }
  memcpy(subs, x->subs, (size_t)n_subs * sizeof(*subs));
  for (int s = 0; s < n_subs; s++) {
    int kk = 0;
    ncclResult_t res = trim_rec(subs[s], depth + 1, &kk);
    if (res != ncclSuccess) {
      free(subs);
      return res;
    }
    keep += kk;
  }
  free(subs);
  if ((keep == 0) && (is(x, "pci") || is(x, "cpu") || is(x, "nic") || is(x, "net"))) {
    MC_CHECK(mc_xml_remove_node(x));
  }
  *keep_out = keep;
  return ncclSuccess;
}

ncclResult_t mc_topo_xml_trim(struct mc_xml *xml)
{
  int keep = 0;

  if (xml->n_nodes == 0) {
    return ncclSuccess;
  }
  return trim_rec(&xml->nodes[0], 0, &keep);
}

ncclResult_t mc_topo_xml_keep_ranked_gpus(struct mc_xml_node *node)
{
  if ((strcmp(node->name, "gpu") == 0) && (mc_xml_get_attr(node, "rank") != NULL))
    MC_CHECK(mc_xml_set_attr_int(node, "keep", 1));
  for (int s = 0; s < node->n_subs; s++)
    MC_CHECK(mc_topo_xml_keep_ranked_gpus(node->subs[s]));
  return ncclSuccess;
}

ncclResult_t mc_topo_nets_from_file(struct mc_xml *xml)
{
  struct mc_topo_net_plugin *plugin = NULL;
  struct mc_topo_net_opts opts;
  ncclResult_t res;

  if (xml->n_nodes > 0)
    MC_CHECK(mc_topo_xml_keep_ranked_gpus(&xml->nodes[0]));
  MC_CHECK(mc_calloc(&plugin, 1));
  mc_topo_net_opts_from_params(&opts);
  MC_CHECK_GOTO(mc_topo_net_plugin_from_xml(xml, plugin), res, out);
  MC_CHECK_GOTO(mc_topo_net_import(xml, plugin, &opts, false), res, out);
  MC_CHECK_GOTO(mc_topo_xml_trim(xml), res, out);
out:
  free(plugin);
  return res;
}

/* ------------------------------------------------- GPUs of a static file */

#define MAX_FILE_GPUS 64

static bool is_bare_gpu_leaf(const struct mc_xml_node *n)
{
  const char *cls = mc_xml_get_attr(n, "class");
  return (strcmp(n->name, "pci") == 0) && (n->n_subs == 0) && (cls != NULL) &&
         (strncmp(cls, "0x03", 4) == 0) && (mc_xml_get_attr(n, "busid") != NULL);
}

static void walk_gpu_leaves(struct mc_xml_node *n, struct mc_xml_node **out, int *n_out, int max,
                            int *n_gpus)
{
  if (strcmp(n->name, "gpu") == 0)
    (*n_gpus)++;
  if (is_bare_gpu_leaf(n) && (*n_out < max))
    out[(*n_out)++] = n;
  for (int s = 0; s < n->n_subs; s++)
    walk_gpu_leaves(n->subs[s], out, n_out, max, n_gpus);
}

static int cmp_leaf_busid(const void *a, const void *b)
{
  const struct mc_xml_node *const *x = a;
  const struct mc_xml_node *const *y = b;
  return strcasecmp(mc_xml_get_attr(*x, "busid"), mc_xml_get_attr(*y, "busid"));
}

ncclResult_t mc_topo_gpus_from_file(struct mc_xml *xml, int *n_added)
{
  struct mc_xml_node *leaves[MAX_FILE_GPUS];
  int n = 0;
  int n_gpus = 0;

  *n_added = 0;
  if (xml->n_nodes == 0)
    return ncclSuccess;
  walk_gpu_leaves(&xml->nodes[0], leaves, &n, MAX_FILE_GPUS, &n_gpus);
  if ((n_gpus > 0) || (n == 0))
    return ncclSuccess;
  qsort(leaves, (size_t)n, sizeof(leaves[0]), cmp_leaf_busid);
  for (int i = 0; i < n; i++) {
    struct mc_xml_node *gpu = NULL;
    MC_CHECK(mc_xml_add_node(xml, leaves[i], "gpu", &gpu));
    MC_CHECK(mc_xml_set_attr_int(gpu, "dev", i));
    MC_CHECK(mc_xml_set_attr_int(gpu, "sm", 0));
    MC_CHECK(mc_xml_set_attr_int(gpu, "gdr", 0));
  }
  MC_INFO(MC_SUB_GRAPH,
          "Topo: %d GPU PCI device(s) of the file without <gpu> completed in bus-id "
          "order (no NVML: no NVLinks)",
          n);
  *n_added = n;
  return ncclSuccess;
}
