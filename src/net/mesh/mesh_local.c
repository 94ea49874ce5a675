/* SPDX-License-Identifier: Apache-2.0 */
/*
 * This host's mesh NICs as the input of the mesh graph (mesh.h): the NICs
 * the Mesh net would use (mesh_nic.c), converted to struct mc_mesh_host.
 */
#include "net/mesh/mesh.h"
#include "mesh_int.h"

#include "check.h"

#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

ncclResult_t mc_net_mesh_local_host(uint64_t host_hash, const char *name, const char *mgmt_ifname,
                                    struct mc_mesh_host *host_out)
{
  struct mc_net_mesh_nic nics[MC_NET_MESH_MAX_NICS];
  struct mc_mesh_host host;
  int n_nics = 0;

  MC_CHECK(mc_net_mesh_nics_probe(mgmt_ifname, nics, MC_NET_MESH_MAX_NICS, &n_nics));
  memset(&host, 0, sizeof(host));
  host.host_hash = host_hash;
  snprintf(host.name, sizeof(host.name), "%s", (name != NULL) ? name : "");
  for (int i = 0; (i < n_nics) && (host.n_addrs < MC_MESH_MAX_ADDRS); i++) {
    struct mc_mesh_addr *a = &host.addrs[host.n_addrs];
    const struct mc_net_mesh_nic *nic = &nics[i];

    if (!nic->carries_data)
      continue;
    if (nic->addr.sa.sa_family == AF_INET) {
      a->family = AF_INET;
      memcpy(a->bytes, &nic->addr.sin.sin_addr, 4);
    } else if (nic->addr.sa.sa_family == AF_INET6) {
      a->family = AF_INET6;
      memcpy(a->bytes, &nic->addr.sin6.sin6_addr, 16);
    } else {
      continue;
    }
    a->prefix_len = nic->prefix_len;
    a->speed_mbps = nic->speed_mbps;
    snprintf(a->if_name, sizeof(a->if_name), "%.*s", (int)sizeof(a->if_name) - 1, nic->name);
    host.n_addrs++;
  }
  *host_out = host;
  return ncclSuccess;
}

/* Whether host h has an address on the subnet of a (same family and prefix). */
static bool has_subnet(const struct mc_mesh_host *h, const struct mc_mesh_addr *a)
{
  for (int i = 0; i < h->n_addrs; i++) {
    const struct mc_mesh_addr *b = &h->addrs[i];
    int bits = a->prefix_len;
    bool same = (b->family == a->family) && (b->prefix_len == a->prefix_len);

    for (int k = 0; same && (k < 16) && (bits > 0); k++, bits -= 8) {
      uint8_t mask = (bits >= 8) ? 0xff : (uint8_t)(0xff << (8 - bits));
      same = ((a->bytes[k] & mask) == (b->bytes[k] & mask));
    }
    if (same)
      return true;
  }
  return false;
}

int mc_net_mesh_hosts_unique(const struct mc_mesh_host *hosts, int n_ranks,
                             struct mc_mesh_host *uniq_out)
{
  int n_uniq = 0;

  for (int r = 0; r < n_ranks; r++) {
    int u = 0;

    while ((u < n_uniq) && (uniq_out[u].host_hash != hosts[r].host_hash))
      u++;
    if (u == n_uniq)
      uniq_out[n_uniq++] = hosts[r];
  }
  return n_uniq;
}

bool mc_net_mesh_is_direct(const struct mc_mesh_host *hosts, int n_hosts, char *why_out,
                           size_t why_bytes)
{
  struct mc_mesh_graph *g = NULL;
  bool is_direct = false;

  if (n_hosts < 3) {
    snprintf(why_out, why_bytes, "%d hosts", n_hosts);
    return false;
  }
  for (int i = 0; i < hosts[0].n_addrs; i++) {
    int h = 1;
    while ((h < n_hosts) && has_subnet(&hosts[h], &hosts[0].addrs[i]))
      h++;
    if (h == n_hosts) {
      char a[64];
      mc_mesh_addr_str(&hosts[0].addrs[i], a, sizeof(a));
      snprintf(why_out, why_bytes, "every host is on the subnet of %s (%s): a switched network", a,
               hosts[0].addrs[i].if_name);
      return false;
    }
  }
  if (mc_mesh_graph_create(hosts, n_hosts, MC_MESH_FAST_THRESHOLD_MBPS, &g) != ncclSuccess) {
    snprintf(why_out, why_bytes, "the hosts' addresses do not form a mesh graph");
    return false;
  }
  if (g->shape == MC_MESH_SHAPE_DISCONNECTED) {
    snprintf(why_out, why_bytes, "the links leave some hosts unreachable");
  } else {
    snprintf(why_out, why_bytes, "%d hosts cabled as a %s mesh, %d links, no common subnet",
             n_hosts, mc_mesh_shape_str(g->shape), g->n_links);
    is_direct = true;
  }
  mc_mesh_graph_destroy(g);
  return is_direct;
}
