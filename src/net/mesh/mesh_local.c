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

ncclResult_t mc_net_mesh_local_host(uint64_t host_hash, const char *name,
                                    struct mc_mesh_host *host_out)
{
  struct mc_net_mesh_nic nics[MC_NET_MESH_MAX_NICS];
  struct mc_mesh_host host;
  int n_nics = 0;

  MC_CHECK(mc_net_mesh_nics_find(nics, MC_NET_MESH_MAX_NICS, &n_nics));
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
