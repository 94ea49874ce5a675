/* SPDX-License-Identifier: Apache-2.0 */
/*
 * XML tree -> system graph. Mirrors NCCL 2.30's ncclTopoGetSystemFromXml and
 * its helpers in src/graph/topo.cc: node creation in depth-first
 * XML order, links kept sorted by bandwidth, NVLink/C2C/pcilink second pass,
 * Broadcom switch flattening, inter-CPU links, up-links last; plus
 * ncclTopoPrint's lines.
 *
 * Length: one port of ncclTopoGetSystemFromXml and its helpers (topo.cc), kept in their shape.
 */
#include "topo/topo.h"
#include "topo/topo_int.h"

#include "check.h"
#include "log.h"

#include <stdlib.h>
#include <string.h>

#define SM60_NVLINK_BW  18.0
#define SM70_NVLINK_BW  20.0
#define SM80_NVLINK_BW  20.0
#define SM86_NVLINK_BW  12.0
#define SM90_NVLINK_BW  20.6
#define SM100_NVLINK_BW 40.1
#define AMD_BW          16.0
#define BDW_QPI_BW      6.0
#define SKL_QPI_BW      10.0
#define SRP_QPI_BW      22.0
#define ERP_QPI_BW      40.0
#define ZPI_BW          6.0
#define YONGFENG_ZPI_BW 9.0
#define P9_BW           32.0
#define ARM_BW          6.0

#define MLOPART_MASK      0x3
#define MLOPART_DEV_MAX   2
#define MAX_HOPS_CHANNELS 64 /* NCCL's MAXCHANNELS, default maxconn */

static const char *const node_type_str[MC_TOPO_NODE_TYPES] = {"GPU", "PCI", "NVS", "CPU", "NIC",
                                                              "NET", "GIN", "RMA", "DEV", "CXB"};
static const char *const link_type_str[] = {"LOC", "NVL", "", "C2C", "PCI", "",
                                            "",    "",    "", "SYS", "NET"};

const char *mc_topo_node_type_str(int type)
{
  if ((type < 0) || (type >= MC_TOPO_NODE_TYPES)) {
    return "?";
  }
  return node_type_str[type];
}

const char *mc_topo_link_type_str(int type)
{
  if ((type < 0) || (type > MC_TOPO_LINK_NET)) {
    return "?";
  }
  return link_type_str[type];
}

/* A prefix dictionary (NCCL's kvDict / kvConvertToInt): first entry whose
 * key is a prefix of the string wins; the NULL entry is the fallback. */
struct kv {
  const char *key;
  int value;
};

static const struct kv pci_class_kv[] = {{"0x060400", MC_TOPO_PCI}, {"0x080100", MC_TOPO_PCI},
                                         {"0x068000", MC_TOPO_NVS}, {"0x068001", MC_TOPO_CPU},
                                         {"0x03", MC_TOPO_GPU},     {"0x02", MC_TOPO_NIC},
                                         {NULL, MC_TOPO_PCI}};
static const struct kv pci_gen_kv[] = {
    {"2.5 GT/s", 15},        {"5 GT/s", 30},          {"8 GT/s", 60},
    {"16 GT/s", 120},        {"32 GT/s", 240},        {"2.5 GT/s PCIe", 15},
    {"5.0 GT/s PCIe", 30},   {"8.0 GT/s PCIe", 60},   {"16.0 GT/s PCIe", 120},
    {"32.0 GT/s PCIe", 240}, {"64.0 GT/s PCIe", 480}, {NULL, 60}};
static const struct kv cpu_arch_kv[] = {{"x86_64", MC_TOPO_CPU_ARCH_X86},
                                        {"arm64", MC_TOPO_CPU_ARCH_ARM},
                                        {"ppc64", MC_TOPO_CPU_ARCH_POWER},
                                        {NULL, 0}};
static const struct kv cpu_vendor_kv[] = {{"GenuineIntel", MC_TOPO_CPU_VENDOR_INTEL},
                                          {"AuthenticAMD", MC_TOPO_CPU_VENDOR_AMD},
                                          {"CentaurHauls", MC_TOPO_CPU_VENDOR_ZHAOXIN},
                                          {"  Shanghai  ", MC_TOPO_CPU_VENDOR_ZHAOXIN},
                                          {NULL, 0}};

static int kv_lookup(const char *str, const struct kv *dict)
{
  const struct kv *d = dict;

  for (; d->key != NULL; d++) {
    if (strncmp(str, d->key, strlen(d->key)) == 0) {
      return d->value;
    }
  }
  return d->value;
}

int64_t mc_topo_bus_id_to_int64(const char *str)
{
  int64_t v = 0;

  for (const char *c = str; *c != '\0'; c++) {
    int d;
    if ((*c == ':') || (*c == '.')) {
      continue;
    }
    if ((*c >= '0') && (*c <= '9')) {
      d = *c - '0';
    } else if ((*c >= 'a') && (*c <= 'f')) {
      d = *c - 'a' + 10;
    } else if ((*c >= 'A') && (*c <= 'F')) {
      d = *c - 'A' + 10;
    } else {
      break;
    }
    v = (int64_t)(((uint64_t)v << 4) | (uint64_t)d);
  }
  return v;
}

static ncclResult_t attr_str(const struct mc_xml_node *xn, const char *key, const char **out)
{
  const char *v = mc_xml_get_attr(xn, key);

  if (v == NULL) {
    return MC_FAIL(ncclInvalidUsage,
                   "Topo: attribute %s of element %s (line %d) not found; the XML needs it to "
                   "build the system graph",
                   key, xn->name, xn->line);
  }
  *out = v;
  return ncclSuccess;
}

static float nvlink_bw(int sm)
{
  return (sm >= 100)  ? (float)SM100_NVLINK_BW
         : (sm >= 90) ? (float)SM90_NVLINK_BW
         : (sm == 86) ? (float)SM86_NVLINK_BW
         : (sm >= 80) ? (float)SM80_NVLINK_BW
         : (sm >= 70) ? (float)SM70_NVLINK_BW
         : (sm >= 60) ? (float)SM60_NVLINK_BW
                      : (float)SM80_NVLINK_BW;
}

/* ---------------------------------------------------------------- nodes */

static struct mc_topo_node *get_node(struct mc_topo_system *sys, int type, int64_t id)
{
  for (int i = 0; i < sys->nodes[type].count; i++) {
    if (sys->nodes[type].nodes[i]->id == id) {
      return sys->nodes[type].nodes[i];
    }
  }
  return NULL;
}

/* Sparser ranks than this many table slots per GPU are looked up by a scan. */
#define RANK_TABLE_SLOTS_PER_GPU 8

ncclResult_t mc_topo_rank_table_build(struct mc_topo_system *sys)
{
  const struct mc_topo_node_set *gpus = &sys->nodes[MC_TOPO_GPU];
  int lo = 0;
  int hi = 0;
  int *table = NULL;

  free(sys->rank_gpu);
  sys->rank_gpu = NULL;
  sys->n_rank_slots = 0;
  sys->rank_lo = 0;
  for (int g = 0; g < gpus->count; g++) {
    int r = gpus->nodes[g]->gpu.rank;
    if (r < 0) {
      return ncclSuccess; /* a GPU without a rank: mc_topo_rank_to_index scans */
    }
    lo = ((g == 0) || (r < lo)) ? r : lo;
    hi = ((g == 0) || (r > hi)) ? r : hi;
  }
  if ((gpus->count == 0) ||
      ((int64_t)hi - lo + 1 > (int64_t)RANK_TABLE_SLOTS_PER_GPU * gpus->count + 64)) {
    return ncclSuccess; /* no GPU, or ranks too sparse for a table: a scan */
  }
  MC_CHECK(mc_calloc(&table, (size_t)(hi - lo + 1)));
  for (int i = 0; i <= hi - lo; i++) {
    table[i] = -1;
  }
  /* The first GPU of a rank wins, as the scan NCCL's ncclTopoRankToIndex does. */
  for (int g = gpus->count - 1; g >= 0; g--) {
    int r = gpus->nodes[g]->gpu.rank;
    if (r >= 0) {
      table[r - lo] = g;
    }
  }
  sys->rank_gpu = table;
  sys->rank_lo = lo;
  sys->n_rank_slots = hi - lo + 1;
  return ncclSuccess;
}

int mc_topo_rank_to_index(const struct mc_topo_system *sys, int rank)
{
  const struct mc_topo_node_set *gpus = &sys->nodes[MC_TOPO_GPU];

  if (sys->rank_gpu != NULL) {
    int64_t slot = (int64_t)rank - sys->rank_lo;
    return ((slot < 0) || (slot >= sys->n_rank_slots)) ? -1 : sys->rank_gpu[slot];
  }
  for (int i = 0; i < gpus->count; i++) {
    if (gpus->nodes[i]->gpu.rank == rank) {
      return i;
    }
  }
  return -1;
}

int mc_topo_id_to_index(const struct mc_topo_system *sys, enum mc_topo_node_type type, int64_t id)
{
  for (int i = 0; i < sys->nodes[type].count; i++) {
    if (sys->nodes[type].nodes[i]->id == id) {
      return i;
    }
  }
  return -1;
}

static ncclResult_t create_node(struct mc_topo_system *sys, int type, int64_t id,
                                struct mc_topo_node **node_out)
{
  struct mc_topo_node_set *set = &sys->nodes[type];
  struct mc_topo_node *n = NULL;

  if (set->count == MC_TOPO_MAX_NODES) {
    /* ncclTopoCreateNode's limit ("tried to create too many nodes"). */
    return MC_FAIL(ncclInvalidUsage,
                   "Topo: more than %d %s nodes in one system (NCCL's limit, "
                   "NCCL_TOPO_MAX_NODES)",
                   MC_TOPO_MAX_NODES, node_type_str[type]);
  }
  if (set->count == set->cap) {
    int cap = (set->cap == 0) ? 16 : set->cap * 2;
    struct mc_topo_node **nodes = realloc(set->nodes, (size_t)cap * sizeof(*nodes));
    if (nodes == NULL) {
      return MC_FAIL(ncclSystemError, "Topo: out of memory for %d %s nodes", cap,
                     node_type_str[type]);
    }
    set->nodes = nodes;
    set->cap = cap;
  }
  MC_CHECK(mc_calloc(&n, 1));
  n->type = (enum mc_topo_node_type)type;
  n->id = id;
  n->gpu.dev = MC_TOPO_UNDEF;
  n->gpu.rank = MC_TOPO_UNDEF;
  n->gpu.sm = MC_TOPO_UNDEF;
  n->gpu.mlopart = MC_TOPO_UNDEF;
  n->dev.dev = MC_TOPO_UNDEF;
  n->dev.sm = MC_TOPO_UNDEF;
  n->cpu.arch = MC_TOPO_UNDEF;
  n->cpu.vendor = MC_TOPO_UNDEF;
  n->cpu.model = MC_TOPO_UNDEF;
  n->net.port = MC_TOPO_UNDEF;
  n->net.rail = MC_TOPO_UNDEF;
  n->net.plane = MC_TOPO_UNDEF;
  n->net.local_gpu = -1;
  n->index = set->count;
  set->nodes[set->count++] = n;
  *node_out = n;
  return ncclSuccess;
}

/* ncclTopoConnectNodes: a second link of the same type to the same node adds
 * its bandwidth; the link then moves in front of links with smaller bw. */
static ncclResult_t connect_nodes(struct mc_topo_node *node, struct mc_topo_node *rem, int type,
                                  float bw)
{
  struct mc_topo_link save;
  int l;

  for (l = 0; l < node->n_links; l++) {
    if ((node->links[l].rem == rem) && ((int)node->links[l].type == type)) {
      break;
    }
  }
  if (l == node->n_links) {
    if (node->n_links == node->cap_links) {
      int cap = (node->cap_links == 0) ? 8 : node->cap_links * 2;
      struct mc_topo_link *links = realloc(node->links, (size_t)cap * sizeof(*links));
      if (links == NULL) {
        return MC_FAIL(ncclSystemError, "Topo: out of memory for %d links", cap);
      }
      node->links = links;
      node->cap_links = cap;
    }
    node->links[l].type = (enum mc_topo_link_type)type;
    node->links[l].rem = rem;
    node->links[l].bw = 0;
    node->n_links++;
  }
  node->links[l].bw += bw;
  save = node->links[l];
  while ((l > 0) && (node->links[l - 1].bw < save.bw)) {
    node->links[l] = node->links[l - 1];
    l--;
  }
  node->links[l] = save;
  return ncclSuccess;
}

static void node_free(struct mc_topo_node *n)
{
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    if (n->paths[t] == NULL) {
      continue;
    }
    free(n->paths[t]);
  }
  free(n->links);
  free(n);
}

ncclResult_t mc_topo_node_remove(struct mc_topo_system *sys, int type, int index)
{
  struct mc_topo_node *del = sys->nodes[type].nodes[index];

  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    if (del->paths[t] != NULL) {
      return MC_FAIL(ncclInternalError, "Topo: cannot remove node %s/%lx while paths are computed",
                     node_type_str[type], (unsigned long)del->id);
    }
    for (int i = 0; i < sys->nodes[t].count; i++) {
      struct mc_topo_node *n = sys->nodes[t].nodes[i];
      int w = 0;
      if (n == del) {
        continue;
      }
      for (int l = 0; l < n->n_links; l++) {
        if (n->links[l].rem != del) {
          n->links[w++] = n->links[l];
        }
      }
      n->n_links = w;
      if ((t == MC_TOPO_GPU) && (n->gpu.parent == del)) {
        n->gpu.parent = NULL;
      }
    }
  }
  memmove(&sys->nodes[type].nodes[index], &sys->nodes[type].nodes[index + 1],
          (size_t)(sys->nodes[type].count - index - 1) * sizeof(struct mc_topo_node *));
  sys->nodes[type].count--;
  for (int i = index; i < sys->nodes[type].count; i++) {
    sys->nodes[type].nodes[i]->index = i;
  }
  node_free(del);
  if (type == MC_TOPO_GPU) {
    return mc_topo_rank_table_build(sys);
  }
  return ncclSuccess;
}

void mc_topo_system_destroy(struct mc_topo_system *sys)
{
  if (sys == NULL) {
    return;
  }
  mc_topo_free_paths(sys);
  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    for (int i = 0; i < sys->nodes[t].count; i++) {
      node_free(sys->nodes[t].nodes[i]);
    }
    free(sys->nodes[t].nodes);
  }
  free(sys->rank_gpu);
  free(sys);
}

/* ---------------------------------------------------------------- build */

static ncclResult_t system_id_of(struct mc_topo_system *sys, const struct mc_xml_node *xcpu,
                                 int *sid_out)
{
  const char *str = mc_xml_get_attr(xcpu, "host_hash");
  uint64_t hash = (str != NULL) ? strtoull(str, NULL, 16) : 0;
  int sid;

  for (sid = 0; sid < sys->n_hosts; sid++) {
    if (sys->host_hashes[sid] == hash) {
      break;
    }
  }
  if (sid == sys->n_hosts) {
    if (sys->n_hosts == (int)(sizeof(sys->host_hashes) / sizeof(sys->host_hashes[0]))) {
      return MC_FAIL(ncclInvalidUsage, "Topo: more than %d host hashes in the XML (line %d)",
                     sys->n_hosts, xcpu->line);
    }
    sys->host_hashes[sys->n_hosts++] = hash;
  }
  *sid_out = sid;
  return ncclSuccess;
}

static uint64_t pci_device_of(const struct mc_xml_node *xpci)
{
  static const char *const keys[4] = {"vendor", "device", "subsystem_vendor", "subsystem_device"};
  uint64_t v = 0;

  for (int k = 0; k < 4; k++) {
    const char *str = mc_xml_get_attr(xpci, keys[k]);
    if (str != NULL) {
      v += (uint64_t)strtol(str, NULL, 0) << (48 - 16 * k);
    }
  }
  return v;
}

static int count_dev_nodes(struct mc_topo_system *sys, int64_t id, struct mc_topo_node **out)
{
  int n = 0;

  for (int d = 0; d < sys->nodes[MC_TOPO_DEV].count; d++) {
    struct mc_topo_node *dev = sys->nodes[MC_TOPO_DEV].nodes[d];
    if ((dev->id & ~(int64_t)MLOPART_MASK) == (id & ~(int64_t)MLOPART_MASK)) {
      if ((out != NULL) && (n < MLOPART_DEV_MAX)) {
        out[n] = dev;
      }
      n++;
    }
  }
  return n;
}

static int64_t dev_bus_id(int64_t bus_id, int mlopart)
{
  if (mlopart == MC_TOPO_UNDEF) {
    return bus_id;
  }
  return bus_id | ((((int64_t)mlopart << 1) | 1) & MLOPART_MASK);
}

static ncclResult_t add_net(struct mc_topo_system *sys, const struct mc_xml_node *xnet,
                            struct mc_topo_node *nic, int sid)
{
  struct mc_topo_node *net = NULL;
  const char *guid = NULL;
  int dev = 0;
  int mbps = 0;
  int64_t id;

  MC_CHECK(mc_xml_get_attr_int(xnet, "dev", &dev));
  id = MC_TOPO_ID(sid, dev);
  MC_CHECK(create_node(sys, MC_TOPO_NET, id, &net));
  net->net.dev = dev;
  MC_CHECK(mc_xml_get_attr_int_default(xnet, "speed", &mbps, 0));
  if (mbps <= 0) {
    mbps = 10000;
  }
  net->net.bw = (float)(mbps / 8000.0);
  if (mc_xml_get_attr(xnet, "latency") != NULL) {
    MC_CHECK(mc_xml_get_attr_float(xnet, "latency", &net->net.latency));
  }
  MC_CHECK(mc_xml_get_attr_int_default(xnet, "port", &net->net.port, 0));
  MC_CHECK(mc_xml_get_attr_int_default(xnet, "gdr", &net->net.gdr, 0));
  MC_CHECK(mc_xml_get_attr_int_default(xnet, "maxconn", &net->net.max_channels, MAX_HOPS_CHANNELS));
  MC_CHECK(mc_xml_get_attr_int_default(xnet, "coll", &net->net.coll, 0));
  MC_CHECK(mc_xml_get_attr_int_default(xnet, "rail", &net->net.rail, MC_TOPO_UNDEF));
  MC_CHECK(mc_xml_get_attr_int_default(xnet, "plane", &net->net.plane, MC_TOPO_UNDEF));
  guid = mc_xml_get_attr(xnet, "guid");
  net->net.asic = (guid != NULL) ? strtoull(guid, NULL, 16) : (uint64_t)id;
  MC_CHECK(connect_nodes(nic, net, MC_TOPO_LINK_NET, net->net.bw));
  MC_CHECK(connect_nodes(net, nic, MC_TOPO_LINK_NET, net->net.bw));
  return ncclSuccess;
}

/* ncclTopoAddNic: every net child with a dev and net != 0 (GIN/RMA not built). */
static ncclResult_t add_nic(struct mc_topo_system *sys, const struct mc_xml_node *xnic,
                            struct mc_topo_node *nic, int sid)
{
  for (int s = 0; s < xnic->n_subs; s++) {
    const struct mc_xml_node *xnet = xnic->subs[s];
    int is_net = 1;
    if (strcmp(xnet->name, "net") != 0) {
      continue;
    }
    MC_CHECK(mc_xml_get_attr_int_default(xnet, "net", &is_net, 1));
    if ((mc_xml_attr_index(xnet, "dev") == -1) || (is_net == 0)) {
      continue;
    }
    MC_CHECK(add_net(sys, xnet, nic, sid));
  }
  return ncclSuccess;
}

static ncclResult_t add_gpu(struct mc_topo_system *sys, const struct mc_xml_node *xpci,
                            const struct mc_xml_node *xgpu, struct mc_topo_node *parent, int sid,
                            int64_t bus_id, float bw)
{
  struct mc_topo_node *dev = NULL;
  struct mc_topo_node *gpu = NULL;
  int mlopart = MC_TOPO_UNDEF;
  int64_t dbus;

  if ((bus_id & MLOPART_MASK) != 0) {
    return MC_FAIL(ncclInvalidUsage,
                   "Topo: GPU bus id 0x%lx (line %d) uses the low bits NCCL keeps for MLOPart",
                   (unsigned long)bus_id, xgpu->line);
  }
  MC_CHECK(mc_xml_get_attr_int_default(xgpu, "mlopart", &mlopart, MC_TOPO_UNDEF));
  if (mlopart >= MLOPART_DEV_MAX) {
    return MC_FAIL(ncclInvalidUsage, "Topo: MLOPart index %d out of range (line %d, max %d)",
                   mlopart, xgpu->line, MLOPART_DEV_MAX - 1);
  }
  dbus = dev_bus_id(bus_id, mlopart);
  dev = get_node(sys, MC_TOPO_DEV, MC_TOPO_ID(sid, dbus));
  if (dev == NULL) {
    struct mc_topo_node *sibs[MLOPART_DEV_MAX];
    int n_sibs;
    MC_CHECK(create_node(sys, MC_TOPO_DEV, MC_TOPO_ID(sid, dbus), &dev));
    dev->dev.device = pci_device_of(xpci);
    MC_CHECK(mc_xml_get_attr_int(xgpu, "sm", &dev->dev.sm));
    MC_CHECK(mc_xml_get_attr_int(xgpu, "dev", &dev->dev.dev));
    MC_CHECK(connect_nodes(dev, parent, MC_TOPO_LINK_PCI, bw));
    MC_CHECK(connect_nodes(parent, dev, MC_TOPO_LINK_PCI, bw));
    n_sibs = count_dev_nodes(sys, dev->id, sibs);
    for (int s = 0; (s < n_sibs) && (s < MLOPART_DEV_MAX); s++) {
      if (sibs[s] == dev) {
        continue;
      }
      MC_CHECK(connect_nodes(dev, sibs[s], MC_TOPO_LINK_LOC, (float)MC_TOPO_MLOPART_LOC_BW));
      MC_CHECK(connect_nodes(sibs[s], dev, MC_TOPO_LINK_LOC, (float)MC_TOPO_MLOPART_LOC_BW));
    }
  }
  MC_CHECK(create_node(
      sys, MC_TOPO_GPU,
      MC_TOPO_ID(sid, ((uint64_t)dev->dev.n_gpus << 40) | ((uint64_t)dbus & ((1ULL << 40) - 1))),
      &gpu));
  MC_CHECK(mc_xml_get_attr_int(xgpu, "rank", &gpu->gpu.rank));
  MC_CHECK(mc_xml_get_attr_int(xgpu, "sm", &gpu->gpu.sm));
  MC_CHECK(mc_xml_get_attr_int(xgpu, "dev", &gpu->gpu.dev));
  MC_CHECK(mc_xml_get_attr_int(xgpu, "gdr", &gpu->gpu.gdr));
  gpu->gpu.mlopart = mlopart;
  gpu->gpu.parent = dev;
  MC_CHECK(connect_nodes(dev, gpu, MC_TOPO_LINK_LOC, (float)MC_TOPO_LOC_BW));
  MC_CHECK(connect_nodes(gpu, dev, MC_TOPO_LINK_LOC, (float)MC_TOPO_LOC_BW));
  dev->dev.n_gpus++;
  return ncclSuccess;
}

/* ncclTopoAddPci: depth first; the new PCI/NIC node is linked to its parent
 * after its subtree was built. */
static ncclResult_t add_pci(struct mc_topo_system *sys, const struct mc_xml_node *xpci,
                            struct mc_topo_node *parent, int sid)
{
  struct mc_topo_node *node = NULL;
  const struct mc_xml_node *xnic = NULL;
  const char *str = NULL;
  int type;
  int width = 0;
  int64_t bus_id;
  float bw;

  MC_CHECK(attr_str(xpci, "class", &str));
  type = kv_lookup(str, pci_class_kv);
  MC_CHECK(attr_str(xpci, "busid", &str));
  bus_id = mc_topo_bus_id_to_int64(str);
  MC_CHECK(mc_xml_get_attr_int(xpci, "link_width", &width));
  MC_CHECK(attr_str(xpci, "link_speed", &str));
  if (width == 0) {
    width = 16;
  }
  bw = (float)(width * kv_lookup(str, pci_gen_kv) / 80.0);

  for (int g = 0; g < xpci->n_subs; g++) {
    const struct mc_xml_node *xgpu = xpci->subs[g];
    if (strcmp(xgpu->name, "gpu") != 0) {
      continue;
    }
    if (mc_xml_attr_index(xgpu, "rank") == -1) {
      return ncclSuccess;
    }
    MC_CHECK(add_gpu(sys, xpci, xgpu, parent, sid, bus_id, bw));
  }

  for (int s = 0; s < xpci->n_subs; s++) {
    if (strcmp(xpci->subs[s]->name, "nic") == 0) {
      xnic = xpci->subs[s];
      break;
    }
  }
  if (xnic != NULL) {
    /* 2.30: (numaId << 56) + busId, the numa bits fall out of the id mask. */
    int64_t id = MC_TOPO_ID(sid, bus_id);
    struct mc_topo_node *nic = get_node(sys, MC_TOPO_NIC, id);
    if (nic == NULL) {
      MC_CHECK(create_node(sys, MC_TOPO_NIC, id, &nic));
      node = nic;
    }
    MC_CHECK(add_nic(sys, xnic, nic, sid));
  } else if (type == MC_TOPO_PCI) {
    MC_CHECK(create_node(sys, MC_TOPO_PCI, MC_TOPO_ID(sid, bus_id), &node));
    node->pci.device = pci_device_of(xpci);
    for (int s = 0; s < xpci->n_subs; s++) {
      const struct mc_xml_node *sub = xpci->subs[s];
      if (strcmp(sub->name, "pcilink") == 0) {
        continue;
      }
      if (strcmp(sub->name, "pci") != 0) {
        continue; /* NCCL's nesting rules: only pci (and pcilink) below pci */
      }
      MC_CHECK(add_pci(sys, sub, node, sid));
    }
  }
  if (node != NULL) {
    MC_CHECK(connect_nodes(node, parent, MC_TOPO_LINK_PCI, bw));
    MC_CHECK(connect_nodes(parent, node, MC_TOPO_LINK_PCI, bw));
  }
  return ncclSuccess;
}

static ncclResult_t add_cpu(struct mc_topo_system *sys, const struct mc_xml_node *xcpu)
{
  struct mc_topo_node *cpu = NULL;
  const char *str = NULL;
  int numa = 0;
  int sid = 0;

  MC_CHECK(mc_xml_get_attr_int(xcpu, "numaid", &numa));
  MC_CHECK(system_id_of(sys, xcpu, &sid));
  MC_CHECK(create_node(sys, MC_TOPO_CPU, MC_TOPO_ID(sid, numa), &cpu));
  MC_CHECK(attr_str(xcpu, "arch", &str));
  cpu->cpu.arch = kv_lookup(str, cpu_arch_kv);
  if (cpu->cpu.arch == MC_TOPO_CPU_ARCH_X86) {
    MC_CHECK(attr_str(xcpu, "vendor", &str));
    cpu->cpu.vendor = kv_lookup(str, cpu_vendor_kv);
    if (cpu->cpu.vendor == MC_TOPO_CPU_VENDOR_INTEL) {
      int family = 0;
      int model = 0;
      MC_CHECK(mc_xml_get_attr_int(xcpu, "familyid", &family));
      MC_CHECK(mc_xml_get_attr_int(xcpu, "modelid", &model));
      cpu->cpu.model = ((family == 6) && (model >= 0xCF))   ? MC_TOPO_CPU_MODEL_INTEL_ERP
                       : ((family == 6) && (model >= 0x8F)) ? MC_TOPO_CPU_MODEL_INTEL_SRP
                       : ((family == 6) && (model >= 0x55)) ? MC_TOPO_CPU_MODEL_INTEL_SKL
                                                            : MC_TOPO_CPU_MODEL_INTEL_BDW;
    } else if (cpu->cpu.vendor == MC_TOPO_CPU_VENDOR_ZHAOXIN) {
      int family = 0;
      int model = 0;
      MC_CHECK(mc_xml_get_attr_int(xcpu, "familyid", &family));
      MC_CHECK(mc_xml_get_attr_int(xcpu, "modelid", &model));
      if ((family == 7) && (model == 0x5B)) {
        cpu->cpu.model = MC_TOPO_CPU_MODEL_YONGFENG;
      }
    }
  }
  for (int s = 0; s < xcpu->n_subs; s++) {
    const struct mc_xml_node *sub = xcpu->subs[s];
    if (strcmp(sub->name, "pci") == 0) {
      MC_CHECK(add_pci(sys, sub, cpu, sid));
    }
    if (strcmp(sub->name, "nic") == 0) {
      /* 2.30: every CPU-attached NIC gets local id 0 and they collapse. */
      struct mc_topo_node *nic = get_node(sys, MC_TOPO_NIC, MC_TOPO_ID(sid, 0));
      if (nic == NULL) {
        MC_CHECK(create_node(sys, MC_TOPO_NIC, MC_TOPO_ID(sid, 0), &nic));
        MC_CHECK(connect_nodes(cpu, nic, MC_TOPO_LINK_PCI, (float)MC_TOPO_LOC_BW));
        MC_CHECK(connect_nodes(nic, cpu, MC_TOPO_LINK_PCI, (float)MC_TOPO_LOC_BW));
      }
      MC_CHECK(add_nic(sys, sub, nic, sid));
    }
  }
  return ncclSuccess;
}

/* ncclTopoGetLocal CPU of a node: up the PCI tree through switches only. */
static struct mc_topo_node *find_local_cpu(struct mc_topo_node *node, struct mc_topo_node *from)
{
  if (node->type == MC_TOPO_CPU) {
    return node;
  }
  for (int l = 0; l < node->n_links; l++) {
    struct mc_topo_node *rem = node->links[l].rem;
    if ((node->links[l].type == MC_TOPO_LINK_PCI) && (rem != from) &&
        ((rem->type == MC_TOPO_PCI) || (rem->type == MC_TOPO_CPU))) {
      struct mc_topo_node *cpu = find_local_cpu(rem, node);
      if (cpu != NULL) {
        return cpu;
      }
    }
  }
  return NULL;
}

/* Is xgpu the first gpu of its pci with its mlopart (only it adds links)? */
static bool is_primary_gpu(const struct mc_xml_node *xgpu)
{
  int mine = MC_TOPO_UNDEF;

  (void)mc_xml_get_attr_int_default(xgpu, "mlopart", &mine, MC_TOPO_UNDEF);
  for (int s = 0; s < xgpu->parent->n_subs; s++) {
    const struct mc_xml_node *sib = xgpu->parent->subs[s];
    int theirs = MC_TOPO_UNDEF;
    if (strcmp(sib->name, "gpu") != 0) {
      continue;
    }
    if (sib == xgpu) {
      break;
    }
    (void)mc_xml_get_attr_int_default(sib, "mlopart", &theirs, MC_TOPO_UNDEF);
    if (theirs == mine) {
      return false;
    }
  }
  return true;
}

static ncclResult_t gpu_dev_node(struct mc_topo_system *sys, const struct mc_xml_node *xgpu,
                                 const char *bus, int sid, struct mc_topo_node **dev_out)
{
  int mlopart = MC_TOPO_UNDEF;

  MC_CHECK(mc_xml_get_attr_int_default(xgpu, "mlopart", &mlopart, MC_TOPO_UNDEF));
  *dev_out = get_node(sys, MC_TOPO_DEV,
                      MC_TOPO_ID(sid, dev_bus_id(mc_topo_bus_id_to_int64(bus), mlopart)));
  if (*dev_out == NULL) {
    return MC_FAIL(ncclInvalidUsage,
                   "Topo: no DEV for GPU %s (line %d): its gpu element has no rank attribute", bus,
                   xgpu->line);
  }
  return ncclSuccess;
}

static ncclResult_t add_nvlink(struct mc_topo_system *sys, const struct mc_xml_node *xl,
                               const char *bus, int sid)
{
  struct mc_topo_node *dev = NULL;
  const char *tclass = NULL;
  int count = 0;
  int n_local;
  int ttype;
  float bw;

  if ((bus == NULL) || !is_primary_gpu(xl->parent)) {
    return ncclSuccess;
  }
  MC_CHECK(gpu_dev_node(sys, xl->parent, bus, sid, &dev));
  n_local = count_dev_nodes(sys, dev->id, NULL);
  MC_CHECK(mc_xml_get_attr_int(xl, "count", &count));
  MC_CHECK(attr_str(xl, "tclass", &tclass));
  ttype = kv_lookup(tclass, pci_class_kv);
  bw = nvlink_bw(dev->dev.sm);
  if (ttype == MC_TOPO_GPU) {
    struct mc_topo_node *rems[MLOPART_DEV_MAX];
    const char *target = NULL;
    int n_rem;
    MC_CHECK(attr_str(xl, "target", &target));
    n_rem = count_dev_nodes(sys, MC_TOPO_ID(sid, mc_topo_bus_id_to_int64(target)), rems);
    for (int j = 0; (j < n_rem) && (j < MLOPART_DEV_MAX); j++) {
      MC_CHECK(connect_nodes(dev, rems[j], MC_TOPO_LINK_NVL, count * bw / n_rem / n_local));
    }
  } else {
    struct mc_topo_node *rem = NULL;
    if (ttype == MC_TOPO_CPU) {
      rem = find_local_cpu(dev, NULL);
    } else if (sys->nodes[MC_TOPO_NVS].count == 0) {
      MC_CHECK(create_node(sys, MC_TOPO_NVS, 0, &rem));
    } else {
      rem = sys->nodes[MC_TOPO_NVS].nodes[0];
    }
    if (rem != NULL) {
      MC_CHECK(connect_nodes(dev, rem, MC_TOPO_LINK_NVL, count * bw / n_local));
      MC_CHECK(connect_nodes(rem, dev, MC_TOPO_LINK_NVL, count * bw / n_local));
    }
  }
  return ncclSuccess;
}

static ncclResult_t add_c2c(struct mc_topo_system *sys, const struct mc_xml_node *xc,
                            const char *bus, int sid)
{
  struct mc_topo_node *dev = NULL;
  struct mc_topo_node *cpu = NULL;
  int count = 0;
  int bwi = 0;
  float bw;

  if ((bus == NULL) || !is_primary_gpu(xc->parent)) {
    return ncclSuccess;
  }
  MC_CHECK(gpu_dev_node(sys, xc->parent, bus, sid, &dev));
  MC_CHECK(mc_xml_get_attr_int(xc, "count", &count));
  MC_CHECK(mc_xml_get_attr_int(xc, "bw", &bwi));
  bw = (float)((bwi * count) / 1000.0);
  cpu = find_local_cpu(dev, NULL);
  if (cpu == NULL) {
    return ncclSuccess;
  }
  if (count_dev_nodes(sys, dev->id, NULL) > 1) {
    int64_t id = dev->id & ~(int64_t)MLOPART_MASK;
    struct mc_topo_node *cxb = get_node(sys, MC_TOPO_CXB, id);
    if (cxb == NULL) {
      MC_CHECK(create_node(sys, MC_TOPO_CXB, id, &cxb));
      MC_CHECK(connect_nodes(cxb, cpu, MC_TOPO_LINK_C2C, bw));
      MC_CHECK(connect_nodes(cpu, cxb, MC_TOPO_LINK_C2C, bw));
    }
    MC_CHECK(connect_nodes(dev, cxb, MC_TOPO_LINK_C2C, bw));
    MC_CHECK(connect_nodes(cxb, dev, MC_TOPO_LINK_C2C, bw));
  } else {
    MC_CHECK(connect_nodes(dev, cpu, MC_TOPO_LINK_C2C, bw));
    MC_CHECK(connect_nodes(cpu, dev, MC_TOPO_LINK_C2C, bw));
  }
  return ncclSuccess;
}

static ncclResult_t add_pcilink(struct mc_topo_system *sys, const struct mc_xml_node *xl,
                                const char *bus, int sid)
{
  struct mc_topo_node *pci = NULL;
  struct mc_topo_node *rem = NULL;
  const char *target = NULL;

  if (bus == NULL) {
    return ncclSuccess;
  }
  pci = get_node(sys, MC_TOPO_PCI, MC_TOPO_ID(sid, mc_topo_bus_id_to_int64(bus)));
  if (pci == NULL) {
    return MC_FAIL(ncclInvalidUsage, "Topo: pcilink (line %d) under %s, which is not a PCI switch",
                   xl->line, bus);
  }
  MC_CHECK(attr_str(xl, "target", &target));
  rem = get_node(sys, MC_TOPO_PCI, MC_TOPO_ID(sid, mc_topo_bus_id_to_int64(target)));
  if (rem != NULL) {
    MC_CHECK(connect_nodes(pci, rem, MC_TOPO_LINK_LOC, (float)MC_TOPO_LOC_BW));
  }
  return ncclSuccess;
}

typedef ncclResult_t (*leaf_fn)(struct mc_topo_system *sys, const struct mc_xml_node *xl,
                                const char *bus, int sid);

/* The second pass (ncclTopoAddNvLinks / AddC2c / AddPciLinks): walk the whole
 * tree carrying the nearest busid and the cpu's system id. */
static ncclResult_t walk_leaves(struct mc_topo_system *sys, const struct mc_xml_node *xn,
                                const char *leaf, leaf_fn fn, const char *bus, int sid)
{
  const char *my_bus;

  if (strcmp(xn->name, leaf) == 0) {
    return fn(sys, xn, bus, sid);
  }
  if (strcmp(xn->name, "cpu") == 0) {
    MC_CHECK(system_id_of(sys, xn, &sid));
  }
  my_bus = mc_xml_get_attr(xn, "busid");
  for (int s = 0; s < xn->n_subs; s++) {
    MC_CHECK(walk_leaves(sys, xn->subs[s], leaf, fn, (my_bus != NULL) ? my_bus : bus, sid));
  }
  return ncclSuccess;
}

static int bcm_gen(uint64_t device, int level)
{
  if ((device & 0xfffffffffffff000ULL) == 0x1000c0101000a000ULL) {
    return 4;
  }
  if ((device & 0xfffffffffffff000ULL) == (0x1000c03010000000ULL | ((uint64_t)level * 0x1000))) {
    return 5;
  }
  return 0;
}

/* NCCL 2.30 src/graph/topo.cc ncclTopoFlattenBcmSwitches. */
static ncclResult_t flatten_bcm(struct mc_topo_system *sys)
{
  for (int s = 0; s < sys->nodes[MC_TOPO_PCI].count; s++) {
    struct mc_topo_node *sw = sys->nodes[MC_TOPO_PCI].nodes[s];
    struct mc_topo_node *subs[64];
    int n_subs = 0;
    int gen = bcm_gen(sw->pci.device, 0);
    int w = 0;
    if (gen == 0) {
      continue;
    }
    for (int l = 0; l < sw->n_links; l++) {
      struct mc_topo_node *sub = sw->links[l].rem;
      if ((sub->type == MC_TOPO_PCI) && (bcm_gen(sub->pci.device, 1) == gen) && (n_subs < 64)) {
        subs[n_subs++] = sub;
        continue;
      }
      sw->links[w++] = sw->links[l];
    }
    sw->n_links = w;
    for (int i = 0; i < n_subs; i++) {
      struct mc_topo_node *sub = subs[i];
      for (int l = 0; l < sub->n_links; l++) {
        struct mc_topo_node *rem = sub->links[l].rem;
        if (rem == sw) {
          continue;
        }
        if (sw->n_links == sw->cap_links) {
          int cap = sw->cap_links * 2 + 8;
          struct mc_topo_link *links = realloc(sw->links, (size_t)cap * sizeof(*links));
          if (links == NULL) {
            return MC_FAIL(ncclSystemError, "Topo: out of memory for %d links", cap);
          }
          sw->links = links;
          sw->cap_links = cap;
        }
        sw->links[sw->n_links++] = sub->links[l];
        for (int rl = 0; rl < rem->n_links; rl++) {
          if (rem->links[rl].rem == sub) {
            rem->links[rl].rem = sw;
            break;
          }
        }
      }
      MC_CHECK(
          mc_topo_node_remove(sys, MC_TOPO_PCI, mc_topo_id_to_index(sys, MC_TOPO_PCI, sub->id)));
    }
    sw->pci.device |= 0xffff;
    s = -1; /* restart: the PCI array changed */
  }
  return ncclSuccess;
}

static float inter_cpu_bw(const struct mc_topo_node *cpu)
{
  if (cpu->cpu.arch == MC_TOPO_CPU_ARCH_POWER) {
    return (float)P9_BW;
  }
  if (cpu->cpu.arch == MC_TOPO_CPU_ARCH_ARM) {
    return (float)ARM_BW;
  }
  if (cpu->cpu.arch == MC_TOPO_CPU_ARCH_X86) {
    if (cpu->cpu.vendor == MC_TOPO_CPU_VENDOR_INTEL) {
      return (cpu->cpu.model == MC_TOPO_CPU_MODEL_INTEL_ERP)   ? (float)ERP_QPI_BW
             : (cpu->cpu.model == MC_TOPO_CPU_MODEL_INTEL_SRP) ? (float)SRP_QPI_BW
             : (cpu->cpu.model == MC_TOPO_CPU_MODEL_INTEL_SKL) ? (float)SKL_QPI_BW
                                                               : (float)BDW_QPI_BW;
    }
    if (cpu->cpu.vendor == MC_TOPO_CPU_VENDOR_AMD) {
      return (float)AMD_BW;
    }
    if (cpu->cpu.vendor == MC_TOPO_CPU_VENDOR_ZHAOXIN) {
      return (cpu->cpu.model == MC_TOPO_CPU_MODEL_YONGFENG) ? (float)YONGFENG_ZPI_BW
                                                            : (float)ZPI_BW;
    }
  }
  return (float)MC_TOPO_LOC_BW;
}

static ncclResult_t connect_cpus(struct mc_topo_system *sys)
{
  for (int n = 0; n < sys->nodes[MC_TOPO_CPU].count; n++) {
    struct mc_topo_node *c1 = sys->nodes[MC_TOPO_CPU].nodes[n];
    for (int p = 0; p < sys->nodes[MC_TOPO_CPU].count; p++) {
      struct mc_topo_node *c2 = sys->nodes[MC_TOPO_CPU].nodes[p];
      if ((n == p) || (MC_TOPO_ID_SYSTEM(c1->id) != MC_TOPO_ID_SYSTEM(c2->id))) {
        continue;
      }
      MC_CHECK(connect_nodes(c1, c2, MC_TOPO_LINK_SYS, inter_cpu_bw(c1)));
    }
  }
  return ncclSuccess;
}

/* ncclTopoSort: the link back up moves to the end, then recurse down. */
static void sort_links(struct mc_topo_node *node, struct mc_topo_node *up, int depth)
{
  if (depth > 64) {
    return; /* a PCI cycle (pcilinks are LOC, so only a broken tree gets here) */
  }
  if (up != NULL) {
    int l = 0;
    while ((l < node->n_links) && (node->links[l].rem != up)) {
      l++;
    }
    if (l < node->n_links) {
      struct mc_topo_link save = node->links[l];
      for (; l + 1 < node->n_links; l++) {
        node->links[l] = node->links[l + 1];
      }
      node->links[l] = save;
    }
  }
  for (int l = 0; l < node->n_links; l++) {
    if ((node->links[l].type == MC_TOPO_LINK_PCI) && (node->links[l].rem != up)) {
      sort_links(node->links[l].rem, node, depth + 1);
    }
  }
}

static ncclResult_t build(struct mc_topo_system *sys, const struct mc_xml_node *top,
                          uint64_t local_host_hash)
{
  int sid = 0;

  for (int s = 0; s < top->n_subs; s++) {
    if (strcmp(top->subs[s]->name, "cpu") == 0) {
      MC_CHECK(add_cpu(sys, top->subs[s]));
    }
  }
  while ((sid < sys->n_hosts) && (sys->host_hashes[sid] != local_host_hash)) {
    sid++;
  }
  if (sid == sys->n_hosts) {
    return MC_FAIL(ncclInvalidArgument,
                   "Topo: local host hash 0x%lx is not among the %d host_hash values of the XML",
                   (unsigned long)local_host_hash, sys->n_hosts);
  }
  sys->system_id = sid;
  MC_CHECK(walk_leaves(sys, top, "nvlink", add_nvlink, NULL, 0));
  MC_CHECK(walk_leaves(sys, top, "c2c", add_c2c, NULL, 0));
  MC_CHECK(walk_leaves(sys, top, "pcilink", add_pcilink, NULL, 0));
  MC_CHECK(flatten_bcm(sys));
  MC_CHECK(connect_cpus(sys));
  for (int c = 0; c < sys->nodes[MC_TOPO_CPU].count; c++) {
    sort_links(sys->nodes[MC_TOPO_CPU].nodes[c], NULL, 0);
  }
  return ncclSuccess;
}

ncclResult_t mc_topo_system_from_xml(const struct mc_xml *xml, uint64_t local_host_hash,
                                     struct mc_topo_system **sys_out)
{
  ncclResult_t res = ncclSuccess;
  struct mc_topo_system *sys = NULL;
  const struct mc_xml_node *top = NULL;
  int version = 0;

  if ((xml == NULL) || (sys_out == NULL)) {
    return MC_FAIL(ncclInvalidArgument, "Topo: mc_topo_system_from_xml needs an XML tree");
  }
  for (int i = 0; i < xml->n_nodes; i++) {
    if ((xml->nodes[i].parent == NULL) && (strcmp(xml->nodes[i].name, "system") == 0)) {
      top = &xml->nodes[i];
      break;
    }
  }
  if (top == NULL) {
    return MC_FAIL(ncclInvalidUsage, "Topo: the XML has no <system> element");
  }
  MC_CHECK(mc_xml_get_attr_int(top, "version", &version));
  if (version != 1) {
    return MC_FAIL(ncclInvalidUsage,
                   "XML Topology has wrong version %d, 1 needed (line %d; RCCL's version 2 files "
                   "are refused by NCCL too)",
                   version, top->line);
  }
  MC_CHECK(mc_calloc(&sys, 1));
  MC_CHECK_GOTO(build(sys, top, local_host_hash), res, fail);
  MC_CHECK_GOTO(mc_topo_rank_table_build(sys), res, fail);
  *sys_out = sys;
  return ncclSuccess;
fail:
  mc_topo_system_destroy(sys);
  return res;
}

/* ---------------------------------------------------------------- print */

static int id_print(char *buf, size_t size, const struct mc_topo_node *n)
{
  return snprintf(buf, size, "%s/%lx-%lx", node_type_str[n->type],
                  (unsigned long)MC_TOPO_ID_SYSTEM(n->id), (unsigned long)MC_TOPO_ID_LOCAL(n->id));
}

#define PRINT_LINE 1024

static void print_rec(const struct mc_topo_node *node, const struct mc_topo_node *prev, char *line,
                      int offset, FILE *out, int depth)
{
  char *p = line + offset;
  size_t room = PRINT_LINE - (size_t)offset;
  int k = id_print(p, room, node);

  if ((k > 0) && ((size_t)k < room)) {
    p += k;
    room -= (size_t)k;
    if (node->type == MC_TOPO_GPU) {
      if (node->gpu.mlopart == -1) {
        snprintf(p, room, " (%d)", node->gpu.rank);
      } else {
        snprintf(p, room, " (%d) [MLOPart %d]", node->gpu.rank, node->gpu.mlopart);
      }
    } else if (node->type == MC_TOPO_CPU) {
      snprintf(p, room, " (%d/%d/%d)", node->cpu.arch, node->cpu.vendor, node->cpu.model);
    } else if (node->type == MC_TOPO_PCI) {
      snprintf(p, room, " (%lx)", (unsigned long)node->pci.device);
    } else if (node->type == MC_TOPO_DEV) {
      snprintf(p, room, " (%lx)", (unsigned long)node->dev.device);
    }
  }
  fprintf(out, "%s\n", line);
  memset(line, ' ', (size_t)offset);
  if (depth > 64) {
    return;
  }
  for (int l = 0; l < node->n_links; l++) {
    const struct mc_topo_link *link = &node->links[l];
    const struct mc_topo_node *rem = link->rem;
    int next;
    if ((link->type == MC_TOPO_LINK_PCI) && (rem == prev)) {
      continue;
    }
    next = offset + snprintf(line + offset, PRINT_LINE - (size_t)offset, "+ %s[%2.1f] - ",
                             link_type_str[link->type], link->bw);
    if (next >= PRINT_LINE - 64) {
      continue;
    }
    if (link->type == MC_TOPO_LINK_PCI) {
      print_rec(rem, node, line, next, out, depth + 1);
      continue;
    }
    k = id_print(line + next, PRINT_LINE - (size_t)next, rem);
    if ((link->type != MC_TOPO_LINK_LOC) && (rem->type == MC_TOPO_NET) && (k > 0)) {
      snprintf(line + next + k, PRINT_LINE - (size_t)(next + k), " (%d/%lx/%d/%f)", rem->net.coll,
               (unsigned long)rem->net.asic, rem->net.port, rem->net.bw);
    }
    fprintf(out, "%s\n", line);
  }
}

/* printNodePaths: one line, cut at 1023 characters like NCCL's buffer. */
static void print_paths(const struct mc_topo_system *sys, const struct mc_topo_node *node,
                        FILE *out)
{
  char line[PRINT_LINE];
  int offset = snprintf(line, sizeof(line), "%s/%lx-%lx :", node_type_str[node->type],
                        (unsigned long)MC_TOPO_ID_SYSTEM(node->id),
                        (unsigned long)MC_TOPO_ID_LOCAL(node->id));

  for (int t = 0; t < MC_TOPO_NODE_TYPES; t++) {
    if (node->paths[t] == NULL) {
      continue;
    }
    for (int n = 0; n < sys->nodes[t].count; n++) {
      const struct mc_topo_node *to = sys->nodes[t].nodes[n];
      const struct mc_topo_path *path = &node->paths[t][n];
      if (offset >= PRINT_LINE - 1) {
        break;
      }
      snprintf(line + offset, sizeof(line) - (size_t)offset, "%s/%lx-%lx (%d/%.1f/%s) ",
               node_type_str[t], (unsigned long)MC_TOPO_ID_SYSTEM(to->id),
               (unsigned long)MC_TOPO_ID_LOCAL(to->id), path->count, path->bw,
               mc_topo_path_type_str(path->type));
      offset = (int)strlen(line);
    }
  }
  fprintf(out, "%s\n", line);
}

ncclResult_t mc_topo_print(const struct mc_topo_system *sys, FILE *out)
{
  char line[PRINT_LINE];

  fprintf(out, "=== System : maxBw %2.1f totalBw %2.1f ===\n", sys->max_bw, sys->total_bw);
  for (int c = 0; c < sys->nodes[MC_TOPO_CPU].count; c++) {
    print_rec(sys->nodes[MC_TOPO_CPU].nodes[c], NULL, line, 0, out, 0);
  }
  fprintf(out, "==========================================\n");
  for (int g = 0; g < sys->nodes[MC_TOPO_GPU].count; g++) {
    print_paths(sys, sys->nodes[MC_TOPO_GPU].nodes[g], out);
  }
  for (int n = 0; n < sys->nodes[MC_TOPO_NET].count; n++) {
    print_paths(sys, sys->nodes[MC_TOPO_NET].nodes[n], out);
  }
  return ncclSuccess;
}
