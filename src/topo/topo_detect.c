/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Detection of this host into NCCL's topology XML. Mirrors NCCL 2.30's
 * ncclTopoGetXmlFromSys / ncclTopoGetXmlFromCpu / ncclTopoFillGpu /
 * ncclTopoFillNet (src/graph/xml.cc, topo.cc ncclTopoGetSystem); it
 * does not copy their code. Every /sys and /proc read goes through
 * topo_sysfs.c under one root.
 *
 * Where meshccl differs from NCCL, on purpose:
 *  - CPU vendor/family/model come from /proc/cpuinfo (so recorded trees
 *    replay), converted to NCCL's CPUID encoding (familyid = family +
 *    (extFamily << 4)). Without /proc/cpuinfo: vendor="" familyid="0"
 *    modelid="0", what NCCL writes when CPUID reports nothing.
 *  - A NIC whose numa_node is -1 on a host with exactly one NUMA node is
 *    placed under that node's CPU, unless a GPU already put a cpu
 *    numaid="-1" in the XML (then under that one, as NCCL): a compute
 *    device sits under the node the rank runs on, and NCCL's second cpu
 *    numaid="-1" would make every device-NIC path SYS on single-node VMs.
 *    A GPU (or any other PCI device) whose numa_node is -1 is under a cpu
 *    numaid="-1" without affinity, as NCCL places it.
 *  - NICs are the host's running, non-loopback interfaces (what the socket
 *    net sees) in ifindex order. As NCCL's ncclTopoFillNet, a NIC whose
 *    /sys/class/net/<if>/device is not a PCI function (virtio-net:
 *    .../0000:00:03.0/virtio2, whose subsystem is the virtio bus) is "not a
 *    PCI device" and goes under the XML's first CPU. Interfaces without a
 *    device (bridges, tunnels, veth) are virtual NICs under the CPU of the
 *    host's first NUMA node, the same for every rank so that fusion merges
 *    them.
 *  - GPUs come from NVML loaded with dlopen (MESHCCL_NVML_LIBRARY,
 *    topo_nvml.c), their gdr from the CUDA driver (MESHCCL_CUDA_LIBRARY,
 *    topo_cuda.c); the GPU's PCI ids are completed from sysfs, and its
 *    link_speed/link_width are the sysfs ones (NCCL asks NVML for the
 *    current PCIe generation and width).
 *  - No GPU/NVML, or a rank whose device the job did not name
 *    (me->is_compute): the rank's compute device is a virtual PCI device, see
 *    add_compute_device() and docs/design/lifecycle.md, "Devices".
 *  - No keep="1" attributes: detection adds only what this rank uses, so
 *    there is nothing for ncclTopoTrimXml to remove.
 *
 * Length: one port of NCCL's XML detection (xml.cc, topo.cc), kept in its shape.
 */
#include "topo/topo_detect.h"

#include "topo/topo_int.h"
#include "topo/topo_cuda.h"
#include "topo/topo_nvml.h"
#include "topo/topo_xml.h"

#include "check.h"
#include "log.h"
#include "params.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NUMA  64
#define REL_MAX   (PATH_MAX + 32) /* a sysfs path plus a file name */
#define MAX_IFS   256
#define IFF_UP_   0x1 /* linux/if.h values, as /sys/class/net/<if>/flags shows them */
#define IFF_LOOP_ 0x8
/* The socket net's properties (NCCL's net_socket.cc). */
#define SOCKET_MAX_COMMS     65536
#define SOCKET_DEFAULT_SPEED 10000

/* Reserved PCI domain of compute devices (real domains stop well below). */
#define VDEV_DOMAIN "fffe"

#if defined(__x86_64__)
#define BUILD_ARCH "x86_64"
#define ARCH_X86   1
#elif defined(__aarch64__)
#define BUILD_ARCH "arm64"
#elif defined(__powerpc64__)
#define BUILD_ARCH "ppc64"
#else
#define BUILD_ARCH "unknown"
#endif

struct detect_ctx {
  const char *root;
  struct mc_xml *xml;
  struct mc_xml_node *system;
  uint64_t host_hash;
  int n_numa;
  int numa_ids[MAX_NUMA]; /* ascending */
  bool cpuinfo_read;
  char vendor[64];
  int family;
  int model;
  bool is_nic; /* placing a NIC: numa_node -1 may fold (header comment) */
};

/* ------------------------------------------------------------ NUMA nodes */

static int cmp_int(const void *a, const void *b)
{
  int x = *(const int *)a;
  int y = *(const int *)b;
  return (x > y) - (x < y);
}

/* node<N> directories of /sys/devices/system/node, ascending. */
static int list_numa_nodes(const char *root, int *ids, int max_ids)
{
  char path[PATH_MAX];
  DIR *dir;
  struct dirent *de;
  int n = 0;

  if (mc_sysfs_path(root, "/sys/devices/system/node", path, sizeof(path)) != ncclSuccess) {
    return 0;
  }
  dir = opendir(path);
  if (dir == NULL) {
    return 0;
  }
  while (((de = readdir(dir)) != NULL) && (n < max_ids)) {
    char *end = NULL;
    long id;
    if ((strncmp(de->d_name, "node", 4) != 0) || !isdigit((unsigned char)de->d_name[4])) {
      continue;
    }
    id = strtol(de->d_name + 4, &end, 10);
    if ((*end == '\0') && (id >= 0) && (id < INT_MAX)) {
      ids[n++] = (int)id;
    }
  }
  closedir(dir);
  qsort(ids, (size_t)n, sizeof(*ids), cmp_int);
  return n;
}

/* The CPU a PCI device's numa_node puts it under: NCCL's, but for a NIC
 * whose -1 on a single-node host means that node (header comment). */
static int device_numa(const struct detect_ctx *c, int numa)
{
  if ((numa < 0) && c->is_nic && (c->n_numa == 1) &&
      (mc_xml_get_sub_kv(c->system, "cpu", "numaid", "-1") == NULL)) {
    return c->numa_ids[0];
  }
  return numa;
}

/* -1 on a single-node host means that node: the node of a rank's compute
 * device. */
static int fix_numa(const struct detect_ctx *c, int numa)
{
  if ((numa < 0) && (c->n_numa == 1)) {
    return c->numa_ids[0];
  }
  return numa;
}

static int first_numa(const struct detect_ctx *c)
{
  return (c->n_numa > 0) ? c->numa_ids[0] : -1;
}

/* Does the cpulist text ("0-3,8,10-11") contain a CPU of set? */
static bool cpulist_hits(const char *list, const cpu_set_t *set)
{
  const char *p = list;

  while (*p != '\0') {
    char *end = NULL;
    long lo = strtol(p, &end, 10);
    long hi = lo;
    if (end == p) {
      return false;
    }
    p = end;
    if (*p == '-') {
      hi = strtol(p + 1, &end, 10);
      p = end;
    }
    for (long cpu = lo; (cpu <= hi) && (cpu < CPU_SETSIZE); cpu++) {
      if ((cpu >= 0) && CPU_ISSET((int)cpu, set)) {
        return true;
      }
    }
    if (*p == ',') {
      p++;
    } else {
      break;
    }
  }
  return false;
}

/*
 * The real affinity of the calling thread (sched_getaffinity) mapped through
 * the node<N>/cpulist files of the tree: the lowest node that holds one of
 * the allowed CPUs. Recorded trees therefore answer for this machine's CPU
 * numbers (tests pin their expectations on cpulists that cover every CPU).
 */
int mc_topo_detect_numa_of_self(const char *sysfs_root)
{
  const char *root = sysfs_root;
  int ids[MAX_NUMA];
  int n;
  cpu_set_t set;

  if (root == NULL) {
    root = mc_param_str(MC_P_SYSFS_ROOT);
  }
  if ((root == NULL) || (root[0] == '\0')) {
    root = "/";
  }
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    return -1;
  }
  n = list_numa_nodes(root, ids, MAX_NUMA);
  for (int i = 0; i < n; i++) {
    char rel[64];
    char list[4096];
    snprintf(rel, sizeof(rel), "/sys/devices/system/node/node%d/cpulist", ids[i]);
    if (mc_sysfs_read_opt(root, rel, list, sizeof(list)) && cpulist_hits(list, &set)) {
      return ids[i];
    }
  }
  return -1;
}

/* ------------------------------------------------------------------ CPUs */

/* First "key : value" of /proc/cpuinfo with exactly that key. */
static bool cpuinfo_value(const char *text, const char *key, char *out, size_t out_bytes)
{
  size_t key_len = strlen(key);
  const char *line = text;

  while ((line != NULL) && (*line != '\0')) {
    const char *nl = strchr(line, '\n');
    size_t len = (nl != NULL) ? (size_t)(nl - line) : strlen(line);
    if ((len > key_len) && (strncmp(line, key, key_len) == 0) &&
        ((line[key_len] == ' ') || (line[key_len] == '\t') || (line[key_len] == ':'))) {
      const char *colon = memchr(line, ':', len);
      if (colon != NULL) {
        const char *v = colon + 1;
        size_t vlen;
        while ((*v == ' ') || (*v == '\t')) {
          v++;
        }
        vlen = len - (size_t)(v - line);
        snprintf(out, out_bytes, "%.*s", (int)vlen, v);
        return true;
      }
    }
    line = (nl != NULL) ? nl + 1 : NULL;
  }
  return false;
}

static ncclResult_t read_cpuinfo(struct detect_ctx *c)
{
  char text[4096];
  char val[64];
  bool found = false;

  c->vendor[0] = '\0';
  c->family = 0;
  c->model = 0;
  MC_CHECK(mc_sysfs_read(c->root, "/proc/cpuinfo", text, sizeof(text), &found));
  c->cpuinfo_read = found;
  if (!found) {
    MC_INFO(MC_SUB_GRAPH, "Topo: %s/proc/cpuinfo not found, CPU vendor/family/model unknown",
            (strcmp(c->root, "/") == 0) ? "" : c->root);
    return ncclSuccess;
  }
  if (cpuinfo_value(text, "vendor_id", val, sizeof(val))) {
    snprintf(c->vendor, sizeof(c->vendor), "%s", val);
  }
  if (cpuinfo_value(text, "cpu family", val, sizeof(val))) {
    int fam = (int)strtol(val, NULL, 10);
    /* Linux prints family + extFamily; NCCL encodes family + (extFamily << 4). */
    c->family = (fam >= 15) ? 15 + ((fam - 15) << 4) : fam;
  }
  if (cpuinfo_value(text, "model", val, sizeof(val))) {
    c->model = (int)strtol(val, NULL, 10); /* model + (extModel << 4), as NCCL */
  }
  return ncclSuccess;
}

/* ncclTopoGetXmlFromCpu: init only (a file's values win). */
static ncclResult_t cpu_fill(struct detect_ctx *c, struct mc_xml_node *cpu, int numa)
{
  /* NCCL's ncclTopoSetAttrFromSys: no attribute when the node has no
   * cpumap (numaid -1: "Affinity for GPU 0 is empty, ignoring"). */
  if (mc_xml_get_attr(cpu, "affinity") == NULL) {
    char rel[64];
    char map[MC_XML_MAX_STR];
    bool found = false;
    map[0] = '\0';
    if (numa >= 0) {
      snprintf(rel, sizeof(rel), "/sys/devices/system/node/node%d/cpumap", numa);
      MC_CHECK(mc_sysfs_read(c->root, rel, map, sizeof(map), &found));
    }
    if (map[0] != '\0') {
      MC_CHECK(mc_xml_init_attr(cpu, "affinity", map));
    }
  }
  MC_CHECK(mc_xml_init_attr(cpu, "arch", BUILD_ARCH));
#ifdef ARCH_X86
  MC_CHECK(mc_xml_init_attr(cpu, "vendor", c->vendor));
  MC_CHECK(mc_xml_init_attr_int(cpu, "familyid", c->family));
  MC_CHECK(mc_xml_init_attr_int(cpu, "modelid", c->model));
#endif
  return ncclSuccess;
}

/* The cpu child of <system> with that numaid, created and filled if absent. */
static ncclResult_t cpu_get(struct detect_ctx *c, int numa, struct mc_xml_node **cpu_out)
{
  char numa_str[16];
  struct mc_xml_node *cpu;

  snprintf(numa_str, sizeof(numa_str), "%d", numa);
  cpu = mc_xml_get_sub_kv(c->system, "cpu", "numaid", numa_str);
  if (cpu == NULL) {
    MC_CHECK(mc_xml_add_node(c->xml, c->system, "cpu", &cpu));
    MC_CHECK(mc_xml_set_attr(cpu, "numaid", numa_str));
  }
  MC_CHECK(cpu_fill(c, cpu, numa));
  MC_CHECK(mc_xml_set_attr_long(cpu, "host_hash", (int64_t)c->host_hash));
  *cpu_out = cpu;
  return ncclSuccess;
}

/* ------------------------------------------------------------------- PCI */

/* NCCL's checkBDFFormat: exactly "hhhh:hh:hh.h". */
static bool is_bdf(const char *s)
{
  if (strlen(s) != 12) {
    return false;
  }
  for (int i = 0; i < 12; i++) {
    bool ok = ((i == 4) || (i == 7)) ? (s[i] == ':')
              : (i == 10)            ? (s[i] == '.')
                                     : (isxdigit((unsigned char)s[i]) != 0);
    if (!ok) {
      return false;
    }
  }
  return true;
}

/* Adds a pci child with that busid, kept sorted by busid (NCCL issue #820). */
static ncclResult_t pci_add_sorted(struct detect_ctx *c, struct mc_xml_node *parent,
                                   const char *busid, struct mc_xml_node **node_out)
{
  struct mc_xml_node *node = NULL;
  int at;

  MC_CHECK(mc_xml_add_node(c->xml, parent, "pci", &node));
  MC_CHECK(mc_xml_set_attr(node, "busid", busid));
  at = parent->n_subs - 1;
  for (int s = 0; s < parent->n_subs - 1; s++) {
    const char *b = mc_xml_get_attr(parent->subs[s], "busid");
    if ((b != NULL) && (strcmp(busid, b) < 0)) {
      at = s;
      break;
    }
  }
  for (int s = parent->n_subs - 1; s > at; s--) {
    parent->subs[s] = parent->subs[s - 1];
  }
  parent->subs[at] = node;
  *node_out = node;
  return ncclSuccess;
}

static float gts_of(const char *s)
{
  float v = 0.0f;
  return (sscanf(s, "%f GT/s", &v) == 1) ? v : -1.0f;
}

/* Attributes of ncclTopoGetXmlFromSys for a device at sysfs path sys. */
static ncclResult_t pci_fill(struct detect_ctx *c, struct mc_xml_node *node, const char *sys)
{
  static const char *const ids[] = {"vendor", "device", "subsystem_vendor", "subsystem_device"};
  char rel[REL_MAX];
  char val[MC_XML_MAX_STR];
  char port[MC_XML_MAX_STR];
  bool found = false;

  snprintf(rel, sizeof(rel), "%s/class", sys);
  MC_CHECK(mc_sysfs_read(c->root, rel, val, sizeof(val), &found));
  if (found) {
    MC_CHECK(mc_xml_set_attr(node, "class", val));
  }
  for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
    if (mc_xml_get_attr(node, ids[i]) != NULL) {
      continue;
    }
    snprintf(rel, sizeof(rel), "%s/%s", sys, ids[i]);
    MC_CHECK(mc_sysfs_read(c->root, rel, val, sizeof(val), &found));
    MC_CHECK(mc_xml_init_attr(node, ids[i], val));
  }
  if (mc_xml_get_attr(node, "link_speed") == NULL) {
    float dev_gts;
    float port_gts;
    snprintf(rel, sizeof(rel), "%s/max_link_speed", sys);
    (void)mc_sysfs_read_opt(c->root, rel, val, sizeof(val));
    snprintf(rel, sizeof(rel), "%s/../max_link_speed", sys);
    (void)mc_sysfs_read_opt(c->root, rel, port, sizeof(port));
    dev_gts = gts_of(val);
    port_gts = gts_of(port);
    /* NCCL: the smaller of device and port; an unreadable one does not count. */
    MC_CHECK(mc_xml_init_attr(
        node, "link_speed",
        ((port_gts >= 0.0f) && ((dev_gts < 0.0f) || (port_gts < dev_gts))) ? port : val));
  }
  if (mc_xml_get_attr(node, "link_width") == NULL) {
    int dev_w;
    int port_w;
    snprintf(rel, sizeof(rel), "%s/max_link_width", sys);
    (void)mc_sysfs_read_opt(c->root, rel, val, sizeof(val));
    dev_w = (int)strtol(val, NULL, 0);
    snprintf(rel, sizeof(rel), "%s/../max_link_width", sys);
    (void)mc_sysfs_read_opt(c->root, rel, port, sizeof(port));
    port_w = (int)strtol(port, NULL, 0);
    /* NCCL's min(device, port): 0 when either is unknown (read as x16). */
    MC_CHECK(mc_xml_init_attr_int(node, "link_width", (dev_w < port_w) ? dev_w : port_w));
  }
  return ncclSuccess;
}

static ncclResult_t pci_get(struct detect_ctx *c, const char *busid, struct mc_xml_node **node_out);

/*
 * NCCL's walk up from a device's sysfs path: the first cut (the port right
 * above the device) is skipped, a BDF at the second cut is the parent pci
 * (so a switch appears as its upstream port), a non-BDF component (the
 * "pci0000:00" root complex) is the CPU of the device's numa_node.
 */
static ncclResult_t pci_parent(struct detect_ctx *c, const char *sys,
                               struct mc_xml_node **parent_out)
{
  char path[PATH_MAX];
  char rel[REL_MAX];
  char val[32];
  bool found = false;
  int numa = -1;
  int cuts = 0;

  if (sys == NULL) {
    return cpu_get(c, device_numa(c, -1), parent_out);
  }
  snprintf(rel, sizeof(rel), "%s/numa_node", sys);
  MC_CHECK(mc_sysfs_read(c->root, rel, val, sizeof(val), &found));
  if (found) {
    numa = (int)strtol(val, NULL, 10);
  }
  numa = device_numa(c, numa);
  snprintf(path, sizeof(path), "%s", sys);
  for (;;) {
    char *slash = strrchr(path, '/');
    char *comp;
    if ((slash == NULL) || (slash == path)) {
      return cpu_get(c, numa, parent_out);
    }
    *slash = '\0';
    cuts++;
    comp = strrchr(path, '/');
    comp = (comp != NULL) ? comp + 1 : path;
    if (!is_bdf(comp)) {
      return cpu_get(c, numa, parent_out);
    }
    if (cuts == 2) {
      char busid[16];
      snprintf(busid, sizeof(busid), "%s", comp);
      for (char *p = busid; *p != '\0'; p++) {
        *p = (char)tolower((unsigned char)*p);
      }
      return pci_get(c, busid, parent_out);
    }
  }
}

/* The pci element of busid: found anywhere in the XML (the walk stops
 * there: a file can pin the hierarchy), else created under its detected
 * parent; filled from sysfs when the device exists there. */
static ncclResult_t pci_get(struct detect_ctx *c, const char *busid, struct mc_xml_node **node_out)
{
  char rel[REL_MAX];
  char sys[PATH_MAX];
  struct mc_xml_node *node = mc_xml_find_tag_kv(c->xml, "pci", "busid", busid);
  bool have_sys;

  snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s", busid);
  have_sys = mc_sysfs_realpath(c->root, rel, sys, sizeof(sys));
  if ((node == NULL) || (node->parent == NULL)) {
    struct mc_xml_node *parent = NULL;
    MC_CHECK(pci_parent(c, have_sys ? sys : NULL, &parent));
    MC_CHECK(pci_add_sorted(c, parent, busid, &node));
  }
  if (have_sys) {
    MC_CHECK(pci_fill(c, node, sys));
  }
  *node_out = node;
  return ncclSuccess;
}

/* ------------------------------------------------------- compute device */

/*
 * The rank's compute device (no GPU). It is a <pci class="0x030000"> with a
 * <gpu> child so that mc_topo_system_from_xml makes it a GPU node and every
 * path, search and transport rule of NCCL applies unchanged. Placement: one
 * virtual PCI host switch per NUMA node, busid "fffe:NN:00.0" (NN: the NUMA
 * node, ff for -1; domain fffe is reserved here, real domains never reach
 * it), under the cpu of that node; each rank's device "fffe:NN:DD.0" below
 * it (DD = dev + 1 in hex, three digits from device 255 on: "fffe:00:100.0";
 * the ids stay distinct and within the 40 bits of a GPU id). Consequences
 * with NCCL's own rules: two ranks on one NUMA node are GPU-PCI-GPU = PIX (<= the default P2P level
 * PXB): P2P; ranks on two NUMA nodes go through both CPUs = SYS: no P2P, SHM (the AMD rule of NCCL,
 * P2P level SYS with <= 2 devices, still applies on AMD). Links are left at NCCL's "unknown" PCIe
 * values (link_speed "" = Gen3, width 16: 12 GB/s), vendor ids 0xffff as AWS's files use for fake
 * switches.
 */
static ncclResult_t vpci_fill(struct mc_xml_node *node, const char *cls)
{
  MC_CHECK(mc_xml_init_attr(node, "class", cls));
  MC_CHECK(mc_xml_init_attr(node, "vendor", "0xffff"));
  MC_CHECK(mc_xml_init_attr(node, "device", "0xffff"));
  MC_CHECK(mc_xml_init_attr(node, "subsystem_vendor", "0xffff"));
  MC_CHECK(mc_xml_init_attr(node, "subsystem_device", "0xffff"));
  MC_CHECK(mc_xml_init_attr(node, "link_speed", ""));
  MC_CHECK(mc_xml_init_attr(node, "link_width", "16"));
  return ncclSuccess;
}

static ncclResult_t add_compute_device(struct detect_ctx *c, const struct mc_topo_detect_rank *me,
                                       int numa)
{
  char busid[16];
  struct mc_xml_node *cpu = NULL;
  struct mc_xml_node *sw = NULL;
  struct mc_xml_node *dev = NULL;
  struct mc_xml_node *gpu = NULL;

  if ((me->dev < 0) || (me->dev >= MC_TOPO_MAX_NODES)) {
    return MC_FAIL(ncclInvalidArgument,
                   "Topo: rank %d: device index %d out of range 0..%d for a compute device (a "
                   "host holds at most %d devices, NCCL's NCCL_TOPO_MAX_NODES): start fewer ranks "
                   "on this host",
                   me->rank, me->dev, MC_TOPO_MAX_NODES - 1, MC_TOPO_MAX_NODES);
  }
  MC_CHECK(cpu_get(c, numa, &cpu));
  snprintf(busid, sizeof(busid), VDEV_DOMAIN ":%02x:00.0", (unsigned)numa & 0xffU);
  sw = mc_xml_find_tag_kv(c->xml, "pci", "busid", busid);
  if (sw == NULL) {
    MC_CHECK(pci_add_sorted(c, cpu, busid, &sw));
  }
  MC_CHECK(vpci_fill(sw, "0x060400"));
  snprintf(busid, sizeof(busid), VDEV_DOMAIN ":%02x:%02x.0", (unsigned)numa & 0xffU,
           (unsigned)me->dev + 1);
  dev = mc_xml_find_tag_kv(c->xml, "pci", "busid", busid);
  if (dev == NULL) {
    MC_CHECK(pci_add_sorted(c, sw, busid, &dev));
  }
  MC_CHECK(vpci_fill(dev, "0x030000"));
  gpu = mc_xml_get_sub(dev, "gpu");
  if (gpu == NULL) {
    MC_CHECK(mc_xml_add_node(c->xml, dev, "gpu", &gpu));
  }
  /* ncclTopoGetSystem step 5: dev/sm init, rank set, gdr init, mlopart set. */
  MC_CHECK(mc_xml_init_attr_int(gpu, "dev", me->dev));
  MC_CHECK(mc_xml_init_attr_int(gpu, "sm", 0));
  MC_CHECK(mc_xml_set_attr_int(gpu, "rank", me->rank));
  MC_CHECK(mc_xml_init_attr_int(gpu, "gdr", 0));
  MC_CHECK(mc_xml_set_attr_int(gpu, "mlopart", -1));
  return ncclSuccess;
}

/* ------------------------------------------------------------------ GPUs */

/*
 * tclass of an nvlink without one (end of ncclTopoGetXmlFromGpu): a target
 * NVML could not name is an NVSwitch; else the class of the target's PCI
 * function in sysfs; a target sysfs does not show (a VM, an NVSwitch off the
 * PCI tree) is assumed to be an NVSwitch.
 */
static ncclResult_t nvlink_tclass(struct detect_ctx *c, struct mc_xml_node *nvl)
{
  char rel[REL_MAX];
  char cls[MC_XML_MAX_STR];
  const char *target = mc_xml_get_attr(nvl, "target");
  bool found = false;

  if (mc_xml_get_attr(nvl, "tclass") != NULL) {
    return ncclSuccess;
  }
  if ((target != NULL) && (strcmp(target, MC_TOPO_NVML_UNKNOWN_TARGET) != 0)) {
    snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/class", target);
    MC_CHECK(mc_sysfs_read(c->root, rel, cls, sizeof(cls), &found));
    if (!found) {
      MC_INFO(MC_SUB_GRAPH, "Topo: NVLink target %s is not in sysfs, assuming NVSwitch", target);
    }
  }
  if (!found) {
    snprintf(cls, sizeof(cls), "0x068000");
  }
  return mc_xml_set_attr(nvl, "tclass", cls);
}

/*
 * ncclTopoFillGpu + ncclTopoGetXmlFromGpu + step 5 of ncclTopoGetSystem for
 * the rank's GPU, NVML index me->dev: its pci element placed by the sysfs walk
 * (switches, root ports and CPU from sysfs; found anywhere in a loaded file),
 * the ids NVML gives when sysfs has none, then <gpu dev sm rank gdr mlopart>
 * and one <nvlink> per distinct remote end of its active links.
 */
static ncclResult_t add_gpu(struct detect_ctx *c, const struct mc_topo_detect_rank *me,
                            struct mc_topo_nvml *nvml)
{
  struct mc_topo_nvml_gpu g;
  struct mc_xml_node *pci = NULL;
  struct mc_xml_node *gpu = NULL;
  char hex[16];
  char why[256];
  int gdr = 0;
  int n = mc_topo_nvml_count(nvml);
  ncclResult_t res;

  if ((me->dev < 0) || (me->dev >= n)) {
    return MC_FAIL(ncclInvalidUsage,
                   "Topo: rank %d uses device %d but %s reports %d GPU(s) (devices 0..%d): give "
                   "each rank a device below %d (ncclCommInitAll's devlist, meshcclSetDevice, "
                   "MESHCCL_DEVICE) or start fewer ranks on this host",
                   me->rank, me->dev, mc_topo_nvml_library(nvml), n, n - 1, n);
  }
  res = mc_topo_nvml_gpu_info(nvml, me->dev, &g);
  if (res != ncclSuccess) {
    return MC_FAIL(res, "Topo: rank %d device %d: %s", me->rank, me->dev, mc_topo_nvml_why(nvml));
  }
  MC_CHECK(pci_get(c, g.busid, &pci));
  MC_CHECK(mc_xml_init_attr(pci, "class", "0x03"));
  snprintf(hex, sizeof(hex), "0x%04x", g.pci_device_id & 0xffffU);
  MC_CHECK(mc_xml_init_attr(pci, "vendor", hex));
  snprintf(hex, sizeof(hex), "0x%04x", g.pci_device_id >> 16);
  MC_CHECK(mc_xml_init_attr(pci, "device", hex));
  snprintf(hex, sizeof(hex), "0x%04x", g.pci_subsystem_id & 0xffffU);
  MC_CHECK(mc_xml_init_attr(pci, "subsystem_vendor", hex));
  snprintf(hex, sizeof(hex), "0x%04x", g.pci_subsystem_id >> 16);
  MC_CHECK(mc_xml_init_attr(pci, "subsystem_device", hex));
  /* Not in sysfs: NCCL's values when NVML cannot say (Gen3 x16). */
  MC_CHECK(mc_xml_init_attr(pci, "link_speed", ""));
  MC_CHECK(mc_xml_init_attr(pci, "link_width", "16"));

  gpu = mc_xml_get_sub(pci, "gpu");
  if (gpu == NULL) {
    MC_CHECK(mc_xml_add_node(c->xml, pci, "gpu", &gpu));
  }
  MC_CHECK(mc_xml_init_attr_int(gpu, "dev", me->dev));
  MC_CHECK(mc_xml_init_attr_int(gpu, "sm", g.sm));
  MC_CHECK(mc_xml_set_attr_int(gpu, "rank", me->rank));
  /* NCCL: init gdr from the rank's gdrSupport, which CUDA gives. */
  mc_topo_cuda_gdr(mc_param_str(MC_P_CUDA_LIBRARY), g.busid, &gdr, why, sizeof(why));
  MC_CHECK(mc_xml_init_attr_int(gpu, "gdr", gdr));
  MC_CHECK(mc_xml_set_attr_int(gpu, "mlopart", -1));
  if (mc_xml_get_sub(gpu, "nvlink") == NULL) {
    for (int l = 0; l < g.n_links; l++) {
      struct mc_xml_node *nvl = NULL;
      MC_CHECK(mc_xml_add_node(c->xml, gpu, "nvlink", &nvl));
      MC_CHECK(mc_xml_set_attr(nvl, "target", g.links[l].target));
      MC_CHECK(mc_xml_set_attr_int(nvl, "count", g.links[l].count));
    }
  }
  for (int s = 0; s < gpu->n_subs; s++) {
    if (strcmp(gpu->subs[s]->name, "nvlink") == 0) {
      MC_CHECK(nvlink_tclass(c, gpu->subs[s]));
    }
  }
  MC_INFO(MC_SUB_GRAPH | MC_SUB_INIT,
          "Topo: rank %d dev %d is GPU %s (sm %d, %d NVLink target(s), GPUDirect RDMA %d%s%s) "
          "from %s (sysfs root %s)",
          me->rank, me->dev, g.busid, g.sm, g.n_links, gdr, (why[0] != '\0') ? ": " : "", why,
          mc_topo_nvml_library(nvml), c->root);
  return ncclSuccess;
}

/* ------------------------------------------------------------------ NICs */

struct iface {
  char name[64];
  long ifindex;
};

static int cmp_iface(const void *a, const void *b)
{
  const struct iface *x = a;
  const struct iface *y = b;
  if (x->ifindex != y->ifindex) {
    return (x->ifindex > y->ifindex) - (x->ifindex < y->ifindex);
  }
  return strcmp(x->name, y->name);
}

/* Running, non-loopback interfaces in ifindex order (getifaddrs' order). */
static ncclResult_t list_ifaces(struct detect_ctx *c, struct iface *ifs, int *n_out)
{
  char path[PATH_MAX];
  DIR *dir;
  struct dirent *de;
  int n = 0;

  MC_CHECK(mc_sysfs_path(c->root, "/sys/class/net", path, sizeof(path)));
  dir = opendir(path);
  if (dir == NULL) {
    *n_out = 0;
    return ncclSuccess;
  }
  while (((de = readdir(dir)) != NULL) && (n < MAX_IFS)) {
    char rel[REL_MAX];
    char val[64];
    if ((de->d_name[0] == '.') || (strcmp(de->d_name, "lo") == 0) ||
        (strlen(de->d_name) >= sizeof(ifs[n].name))) {
      continue;
    }
    snprintf(rel, sizeof(rel), "/sys/class/net/%s/flags", de->d_name);
    if (mc_sysfs_read_opt(c->root, rel, val, sizeof(val))) {
      long flags = strtol(val, NULL, 0);
      if (((flags & IFF_UP_) == 0) || ((flags & IFF_LOOP_) != 0)) {
        continue;
      }
    }
    snprintf(rel, sizeof(rel), "/sys/class/net/%s/operstate", de->d_name);
    if (mc_sysfs_read_opt(c->root, rel, val, sizeof(val)) &&
        ((strcmp(val, "down") == 0) || (strcmp(val, "lowerlayerdown") == 0) ||
         (strcmp(val, "notpresent") == 0))) {
      continue;
    }
    snprintf(ifs[n].name, sizeof(ifs[n].name), "%s", de->d_name);
    snprintf(rel, sizeof(rel), "/sys/class/net/%s/ifindex", de->d_name);
    ifs[n].ifindex =
        mc_sysfs_read_opt(c->root, rel, val, sizeof(val)) ? strtol(val, NULL, 10) : LONG_MAX;
    n++;
  }
  closedir(dir);
  qsort(ifs, (size_t)n, sizeof(*ifs), cmp_iface);
  *n_out = n;
  return ncclSuccess;
}

/* Whether sysfs path sys is a PCI function: its subsystem link resolves to
 * the pci bus (NCCL's test); in a recorded tree without the link, its name
 * is a bus id. *subsys_out (bytes >= 1) receives the subsystem's name. */
static bool is_pci_function(struct detect_ctx *c, const char *sys, char *subsys_out, size_t bytes)
{
  char rel[REL_MAX];
  char real[PATH_MAX];
  const char *base = strrchr(sys, '/');

  base = (base != NULL) ? base + 1 : sys;
  snprintf(rel, sizeof(rel), "%s/subsystem", sys);
  if (mc_sysfs_realpath(c->root, rel, real, sizeof(real))) {
    const char *sub = strrchr(real, '/');
    snprintf(subsys_out, bytes, "%.63s", (sub != NULL) ? sub + 1 : real);
    return strcmp(subsys_out, "pci") == 0;
  }
  snprintf(subsys_out, bytes, "%s", is_bdf(base) ? "pci" : "no subsystem");
  return is_bdf(base);
}

/* The <nic> of a net device at sysfs path sys (NCCL's ncclTopoFillNet):
 * under its PCI function; a path that is not a PCI function (virtio-net:
 * .../0000:00:03.0/virtio2) under the XML's first CPU, said at INFO; no
 * path (a virtual interface) under the CPU of the host's first NUMA node. */
static ncclResult_t nic_under(struct detect_ctx *c, const char *name, char *sys,
                              struct mc_xml_node **nic_out)
{
  struct mc_xml_node *parent = NULL;
  struct mc_xml_node *nic;
  char subsys[64];

  if ((sys != NULL) && is_pci_function(c, sys, subsys, sizeof(subsys))) {
    char busid[16];
    const char *base = strrchr(sys, '/');
    snprintf(busid, sizeof(busid), "%s", (base != NULL) ? base + 1 : sys);
    for (char *p = busid; *p != '\0'; p++) {
      *p = (char)tolower((unsigned char)*p);
    }
    c->is_nic = true;
    MC_CHECK(pci_get(c, busid, &parent));
    c->is_nic = false;
    MC_CHECK(mc_xml_init_attr(parent, "class", "0x02"));
  } else if (sys != NULL) {
    parent = mc_xml_get_sub(c->system, "cpu");
    MC_INFO(MC_SUB_GRAPH,
            "Topology detection: network path (name = %s) %s is not a PCI device (%s). "
            "Attaching to first CPU",
            name, sys, subsys);
  }
  if (parent == NULL) {
    MC_CHECK(cpu_get(c, first_numa(c), &parent));
  }
  nic = mc_xml_get_sub(parent, "nic");
  if (nic == NULL) {
    MC_CHECK(mc_xml_add_node(c->xml, parent, "nic", &nic));
  }
  *nic_out = nic;
  return ncclSuccess;
}

/* The <nic> of an interface: under its PCI function, else under a CPU. */
static ncclResult_t nic_parent(struct detect_ctx *c, const char *ifname,
                               struct mc_xml_node **nic_out)
{
  char rel[REL_MAX];
  char sys[PATH_MAX];

  snprintf(rel, sizeof(rel), "/sys/class/net/%s/device", ifname);
  return nic_under(c, ifname, mc_sysfs_realpath(c->root, rel, sys, sizeof(sys)) ? sys : NULL,
                   nic_out);
}

static ncclResult_t add_nics(struct detect_ctx *c)
{
  struct iface *ifs = NULL;
  ncclResult_t res = ncclSuccess;
  int n = 0;

  MC_CHECK(mc_calloc(&ifs, MAX_IFS));
  MC_CHECK_GOTO(list_ifaces(c, ifs, &n), res, out);
  for (int i = 0; i < n; i++) {
    char rel[REL_MAX];
    char val[64];
    char guid[16];
    long speed = -1;
    struct mc_xml_node *net = mc_xml_find_tag_kv(c->xml, "net", "name", ifs[i].name);

    snprintf(rel, sizeof(rel), "/sys/class/net/%s/speed", ifs[i].name);
    if (mc_sysfs_read_opt(c->root, rel, val, sizeof(val))) {
      speed = strtol(val, NULL, 10);
    }
    if ((speed <= 0) || (speed > INT_MAX)) {
      speed = SOCKET_DEFAULT_SPEED; /* NCCL: "Defaulting to 10 Gbps" */
    }
    if (net == NULL) {
      struct mc_xml_node *nic = NULL;
      MC_CHECK_GOTO(nic_parent(c, ifs[i].name, &nic), res, out);
      MC_CHECK_GOTO(mc_xml_add_node(c->xml, nic, "net", &net), res, out);
      MC_CHECK_GOTO(mc_xml_set_attr(net, "name", ifs[i].name), res, out);
    }
    /* ncclTopoFillNet's order; guid as its "0x%lx" */
    snprintf(guid, sizeof(guid), "0x%x", (unsigned)i);
    MC_CHECK_GOTO(mc_xml_set_attr_int(net, "dev", i), res, out);
    MC_CHECK_GOTO(mc_xml_init_attr(net, "latency", "0"), res, out);
    MC_CHECK_GOTO(mc_xml_init_attr_int(net, "speed", (int)speed), res, out);
    MC_CHECK_GOTO(mc_xml_init_attr_int(net, "port", 0), res, out);
    MC_CHECK_GOTO(mc_xml_init_attr(net, "guid", guid), res, out);
    MC_CHECK_GOTO(mc_xml_init_attr_int(net, "maxconn", SOCKET_MAX_COMMS), res, out);
    MC_CHECK_GOTO(mc_xml_init_attr_int(net, "gdr", 0), res, out);
    MC_CHECK_GOTO(mc_xml_init_attr_int(net, "net", 1), res, out);
  }
out:
  free(ifs);
  return res;
}

/* A net device at its PCI path: the path as the host's sysfs shows it
 * ("/sys/devices/pci0000:00/0000:00:03.0"), or already below the root (the
 * socket net resolves /sys/class/net/<if>/device under MESHCCL_SYSFS_ROOT);
 * false when it does not resolve under the root. */
static bool net_sys_path(const struct detect_ctx *c, const char *pci_path, char *sys,
                         size_t sys_bytes)
{
  char root_real[PATH_MAX];
  size_t len;

  if ((pci_path == NULL) || (pci_path[0] != '/')) {
    return false;
  }
  if (mc_sysfs_realpath(c->root, pci_path, sys, sys_bytes)) {
    return true;
  }
  if ((strcmp(c->root, "/") == 0) || (realpath(c->root, root_real) == NULL)) {
    return false;
  }
  len = strlen(root_real);
  return (strncmp(pci_path, root_real, len) == 0) && (pci_path[len] == '/') &&
         mc_sysfs_realpath(c->root, pci_path + len, sys, sys_bytes);
}

/* ----------------------------------------------------------------- entry */

static ncclResult_t ctx_open(const char *sysfs_root, struct mc_xml *xml, uint64_t host_hash,
                             struct detect_ctx **c_out)
{
  struct detect_ctx *c = NULL;

  MC_CHECK(mc_calloc(&c, 1));
  c->root = sysfs_root;
  if ((c->root == NULL) || (c->root[0] == '\0')) {
    c->root = mc_param_str(MC_P_SYSFS_ROOT);
  }
  if ((c->root == NULL) || (c->root[0] == '\0')) {
    c->root = "/";
  }
  c->xml = xml;
  c->host_hash = host_hash;
  c->n_numa = list_numa_nodes(c->root, c->numa_ids, MAX_NUMA);
  c->system = (xml->n_nodes > 0) ? &xml->nodes[0] : NULL;
  *c_out = c;
  return ncclSuccess;
}

ncclResult_t mc_topo_detect_net_nics(const char *sysfs_root, uint64_t host_hash,
                                     const struct mc_topo_detect_nic *nics, int n_nics,
                                     struct mc_xml *xml)
{
  struct detect_ctx *c = NULL;
  ncclResult_t res = ncclSuccess;

  MC_CHECK(ctx_open(sysfs_root, xml, host_hash, &c));
  if ((c->system == NULL) || (strcmp(c->system->name, "system") != 0)) {
    res = MC_FAIL(ncclInvalidUsage, "Topo: placing %d net device(s) in an XML without <system>",
                  n_nics);
    goto out;
  }
  MC_CHECK_GOTO(read_cpuinfo(c), res, out);
  for (int i = 0; i < n_nics; i++) {
    struct mc_xml_node *nic = NULL;
    struct mc_xml_node *net = NULL;
    if (mc_xml_find_tag_kv(xml, "net", "name", nics[i].name) != NULL) {
      continue; /* already placed (a completed file, or a second rank's pass) */
    }
    {
      char sys[PATH_MAX];
      bool found = net_sys_path(c, nics[i].pci_path, sys, sizeof(sys));
      MC_CHECK_GOTO(nic_under(c, nics[i].name, found ? sys : NULL, &nic), res, out);
    }
    MC_CHECK_GOTO(mc_xml_add_node(xml, nic, "net", &net), res, out);
    MC_CHECK_GOTO(mc_xml_set_attr(net, "name", nics[i].name), res, out);
  }
out:
  free(c);
  return res;
}

ncclResult_t mc_topo_detect(const char *sysfs_root, const struct mc_topo_detect_rank *me,
                            struct mc_xml *xml)
{
  struct detect_ctx *c = NULL;
  struct mc_topo_nvml *nvml = NULL;
  ncclResult_t res = ncclSuccess;
  int numa;

  if ((me == NULL) || (xml == NULL)) {
    return MC_FAIL(ncclInvalidArgument, "Topo: mc_topo_detect needs a rank and an XML tree");
  }
  MC_CHECK(ctx_open(sysfs_root, xml, me->host_hash, &c));
  if ((c->system != NULL) && (strcmp(c->system->name, "system") != 0)) {
    res = MC_FAIL(ncclInvalidUsage, "Topo: XML to complete starts with <%s>, not <system>",
                  c->system->name);
    goto out;
  }
  if (c->system == NULL) {
    MC_CHECK_GOTO(mc_xml_add_node(xml, NULL, "system", &c->system), res, out);
    MC_CHECK_GOTO(mc_xml_set_attr_int(c->system, "version", 1), res, out);
  }
  /* ncclTopoGetSystem step 2: every cpu of a loaded file is this host's. */
  for (int s = 0; s < c->system->n_subs; s++) {
    if (strcmp(c->system->subs[s]->name, "cpu") == 0) {
      MC_CHECK_GOTO(mc_xml_set_attr_long(c->system->subs[s], "host_hash", (int64_t)c->host_hash),
                    res, out);
    }
  }
  MC_CHECK_GOTO(read_cpuinfo(c), res, out);

  MC_CHECK_GOTO(mc_topo_nvml_open(mc_param_str(MC_P_NVML_LIBRARY), &nvml), res, out);
  if ((mc_topo_nvml_count(nvml) > 0) && !me->is_compute) {
    MC_CHECK_GOTO(add_gpu(c, me, nvml), res, out);
  } else {
    numa = me->numa_node;
    if (numa < 0) {
      numa = mc_topo_detect_numa_of_self(c->root);
    }
    numa = fix_numa(c, numa);
    if (mc_topo_nvml_count(nvml) > 0)
      MC_INFO(MC_SUB_GRAPH | MC_SUB_INIT,
              "Topo: %s reports %d GPU(s), but the job did not name rank %d's device "
              "(ncclCommInitAll's devlist, meshcclSetDevice, MESHCCL_DEVICE): dev %d is a "
              "compute device under NUMA node %d (sysfs root %s)",
              mc_topo_nvml_library(nvml), mc_topo_nvml_count(nvml), me->rank, me->dev, numa,
              c->root);
    else
      MC_INFO(MC_SUB_GRAPH | MC_SUB_INIT,
              "Topo: no GPU from NVML (%s): rank %d dev %d is a compute device under NUMA node "
              "%d (sysfs root %s)",
              mc_topo_nvml_why(nvml), me->rank, me->dev, numa, c->root);
    MC_CHECK_GOTO(add_compute_device(c, me, numa), res, out);
  }
  if (!me->skip_nics) {
    MC_CHECK_GOTO(add_nics(c), res, out);
  }
out:
  mc_topo_nvml_close(nvml);
  free(c);
  return res;
}
