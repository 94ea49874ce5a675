/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The topology's NICs from the communicator's net. Mirrors the NET part of
 * NCCL 2.30's ncclTopoGetSystem (src/graph/topo.cc): ncclTopoProcessNet with
 * the net's devices and getProperties (ncclTopoPopulateNics places each one
 * by its pciPath through ncclTopoFillNet), the fusion of ncclTopoMakeVNics
 * through the net's makeVDevice, made once per process and net (NCCL keeps
 * the count with setVirtDevCount, src/plugin/net.cc), then ncclTopoTrimXml.
 * The net device index is the NET node's dev, so the NIC a channel search
 * picks (mc_topo_graph_net_dev) is the device the NET transport uses.
 */
#include "topo/topo.h"
#include "topo/topo_detect.h"
#include "topo/topo_int.h"

#include "check.h"
#include "log.h"
#include "net/net.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NETS 8 /* distinct nets one process fuses NICs of */

/* Per net of the process: its physical devices, and how many virtual ones
 * it made (-1: not yet). */
struct net_state {
  const struct mc_net_ops *ops;
  int n_phys;
  int n_virt;
};

static pthread_mutex_t net_lock = PTHREAD_MUTEX_INITIALIZER;
static struct net_state net_states[MAX_NETS];
static int n_net_states;

typedef char pci_path_t[sizeof(((struct mc_net_props *)0)->pci_path)];

struct vdev_arg {
  const struct mc_net_ops *net;
  void *ctx;
};

static int id_of(int id)
{
  return (id < 0) ? MC_TOPO_UNDEF : (id & 0xffff); /* NCCL reserves bit 16 for its own */
}

static ncclResult_t props_get(const struct mc_net_ops *net, void *ctx, int dev,
                              struct mc_net_props *raw, struct mc_topo_net_props *p)
{
  memset(raw, 0, sizeof(*raw));
  MC_CHECK(net->get_properties(ctx, dev, raw));
  memset(p, 0, sizeof(*p));
  if (raw->name[0] == '\0')
    return MC_FAIL(ncclInvalidUsage, "NET/%s: device %d has no name (getProperties)", net->name,
                   dev);
  snprintf(p->name, sizeof(p->name), "%s", raw->name);
  p->speed = raw->speed;
  p->port = raw->port;
  p->latency = raw->latency;
  p->guid = raw->guid;
  p->max_comms = raw->max_comms;
  p->gdr = 0; /* host memory only: no GPUDirect RDMA */
  p->rail = id_of(raw->rail_id);
  p->plane = id_of(raw->plane_id);
  return ncclSuccess;
}

static ncclResult_t vprops_get(const struct mc_net_ops *net, void *ctx, int dev,
                               struct mc_topo_net_props *p)
{
  struct mc_net_props raw;

  MC_CHECK(props_get(net, ctx, dev, &raw, p));
  if ((raw.vprops.n_devs < 1) || (raw.vprops.n_devs > MC_TOPO_NET_MAX_DEVS_PER_NIC))
    return MC_FAIL(ncclInternalError,
                   "NET/%s: virtual device %d (%s) reports %d physical devices (1..%d)", net->name,
                   dev, raw.name, raw.vprops.n_devs, MC_TOPO_NET_MAX_DEVS_PER_NIC);
  p->n_vdevs = raw.vprops.n_devs;
  memcpy(p->vdevs, raw.vprops.devs, (size_t)raw.vprops.n_devs * sizeof(p->vdevs[0]));
  return ncclSuccess;
}

/* mc_topo_make_vdevice_fn over the net's make_vdevice. */
static ncclResult_t net_make_vdevice(void *varg, const int *devs, int n_devs,
                                     struct mc_topo_net_props *props_out, int *index_out)
{
  const struct vdev_arg *a = varg;
  struct mc_net_vprops vp;
  int dev = -1;

  memset(&vp, 0, sizeof(vp));
  if ((n_devs < 1) || (n_devs > MC_NET_MAX_VDEVS))
    return MC_FAIL(ncclInternalError, "NET/%s: cannot fuse %d devices (1..%d)", a->net->name,
                   n_devs, MC_NET_MAX_VDEVS);
  vp.n_devs = n_devs;
  memcpy(vp.devs, devs, (size_t)n_devs * sizeof(vp.devs[0]));
  MC_CHECK(a->net->make_vdevice(a->ctx, &vp, &dev));
  MC_CHECK(vprops_get(a->net, a->ctx, dev, props_out));
  *index_out = dev;
  return ncclSuccess;
}

static struct net_state *state_of(const struct mc_net_ops *net, int n_devs)
{
  for (int i = 0; i < n_net_states; i++) {
    if (net_states[i].ops == net)
      return &net_states[i];
  }
  if (n_net_states == MAX_NETS)
    return NULL;
  net_states[n_net_states] = (struct net_state){.ops = net, .n_phys = n_devs, .n_virt = -1};
  return &net_states[n_net_states++];
}

static ncclResult_t import_locked(struct mc_xml *xml, const char *sysfs_root, uint64_t host_hash,
                                  const struct mc_net_ops *net, void *net_ctx, bool dumping,
                                  struct mc_topo_net_plugin *plugin,
                                  struct mc_topo_detect_nic *nics, pci_path_t *paths)
{
  struct mc_topo_net_opts opts;
  struct vdev_arg arg = {.net = net, .ctx = net_ctx};
  struct net_state *st;
  int n_devs = 0;

  MC_CHECK(net->devices(net_ctx, &n_devs));
  if ((n_devs <= 0) || (n_devs > MC_TOPO_NET_MAX_DEVS))
    return MC_FAIL(ncclSystemError, "NET/%s: %d devices (the topology takes 1..%d)", net->name,
                   n_devs, MC_TOPO_NET_MAX_DEVS);
  st = state_of(net, n_devs);
  if (st == NULL)
    return MC_FAIL(ncclInternalError, "NET/%s: more than %d nets in one process", net->name,
                   MAX_NETS);
  if ((st->n_phys > n_devs) || ((st->n_virt < 0) && (st->n_phys != n_devs)))
    return MC_FAIL(ncclSystemError,
                   "NET/%s: %d devices now, %d physical ones at the first communicator", net->name,
                   n_devs, st->n_phys);
  snprintf(plugin->name, sizeof(plugin->name), "%s", net->name);
  plugin->can_merge = (net->make_vdevice != mc_net_no_make_vdevice);
  plugin->max_devs_per_nic = MC_NET_MAX_VDEVS;
  plugin->n_phys = st->n_phys;
  plugin->n_devs = st->n_phys;
  plugin->make_vdevice = net_make_vdevice;
  plugin->make_vdevice_arg = &arg;
  for (int d = 0; d < st->n_phys; d++) {
    struct mc_net_props raw;
    MC_CHECK(props_get(net, net_ctx, d, &raw, &plugin->devs[d]));
    memcpy(paths[d], raw.pci_path, sizeof(paths[d]));
    paths[d][sizeof(paths[d]) - 1] = '\0';
    nics[d] = (struct mc_topo_detect_nic){.name = plugin->devs[d].name, .pci_path = paths[d]};
    MC_INFO(MC_SUB_GRAPH | MC_SUB_NET, "NET/%s : device %d %s pciPath=%s speed %d port %d",
            net->name, d, raw.name, (raw.pci_path[0] != '\0') ? raw.pci_path : "(none)", raw.speed,
            raw.port);
  }
  if (plugin->can_merge && (st->n_virt > 0)) {
    for (int d = st->n_phys; d < st->n_phys + st->n_virt; d++)
      MC_CHECK(vprops_get(net, net_ctx, d, &plugin->devs[d]));
    plugin->n_devs = st->n_phys + st->n_virt;
    plugin->has_vdevs = true;
  }
  MC_CHECK(mc_topo_detect_net_nics(sysfs_root, host_hash, nics, st->n_phys, xml));
  if (xml->n_nodes > 0)
    MC_CHECK(mc_topo_xml_keep_ranked_gpus(&xml->nodes[0]));
  mc_topo_net_opts_from_params(&opts);
  MC_CHECK(mc_topo_net_import(xml, plugin, &opts, dumping));
  if (plugin->can_merge && !dumping && (st->n_virt < 0))
    st->n_virt = plugin->n_devs - plugin->n_phys;
  return mc_topo_xml_trim(xml);
}

ncclResult_t mc_topo_nets_from_net(struct mc_xml *xml, const char *sysfs_root, uint64_t host_hash,
                                   const struct mc_net_ops *net, void *net_ctx, bool dumping)
{
  struct mc_topo_net_plugin *plugin = NULL;
  struct mc_topo_detect_nic *nics = NULL;
  pci_path_t *paths = NULL;
  ncclResult_t res;

  if ((net == NULL) || (net_ctx == NULL))
    return MC_FAIL(ncclInternalError, "topology: no initialised net to take the NICs from");
  MC_CHECK(mc_calloc(&plugin, 1));
  res = mc_calloc(&nics, MC_TOPO_NET_MAX_DEVS);
  if (res == ncclSuccess)
    res = mc_calloc(&paths, MC_TOPO_NET_MAX_DEVS);
  if (res == ncclSuccess) {
    pthread_mutex_lock(&net_lock);
    res = import_locked(xml, sysfs_root, host_hash, net, net_ctx, dumping, plugin, nics, paths);
    pthread_mutex_unlock(&net_lock);
  }
  free(paths);
  free(nics);
  free(plugin);
  return res;
}
