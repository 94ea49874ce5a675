/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Transport choice for a pair of ranks, in NCCL 2.30's order (src/transport.cc
 * selectTransport: the first whose canConnect accepts): P2P when
 * ncclTopoCheckP2p allows it and no NIC is faster (p2p.cc), else SHM on the
 * same host and /dev/shm unless NCCL_SHM_DISABLE (shm.cc), else NET
 * (net.cc). The reason is one line that both the init log and meshccl-topo
 * print.
 */
#include "topo.h"

#include <stdio.h>
#include <string.h>

#include "check.h"
#include "topo_int.h"

int mc_topo_p2p_level(const struct mc_topo_system *sys, const struct mc_topo_paths_opts *opts,
                      const char **why_out)
{
  const struct mc_topo_node *cpu0 =
      (sys->nodes[MC_TOPO_CPU].count > 0) ? sys->nodes[MC_TOPO_CPU].nodes[0] : NULL;

  if (opts->p2p_disable) {
    *why_out = "NCCL_P2P_DISABLE=1";
    return MC_PATH_LOC;
  }
  if (opts->p2p_level >= 0) {
    *why_out = "NCCL_P2P_LEVEL";
    return opts->p2p_level;
  }
  if ((cpu0 != NULL) && (cpu0->cpu.arch == MC_TOPO_CPU_ARCH_X86) &&
      (cpu0->cpu.vendor == MC_TOPO_CPU_VENDOR_AMD) && (sys->nodes[MC_TOPO_DEV].count <= 2)) {
    *why_out = "NCCL default on AMD x86 with at most 2 GPUs";
    return MC_PATH_SYS;
  }
  *why_out = "NCCL default";
  return MC_PATH_PXB;
}

const char *mc_topo_transport_str(enum mc_topo_transport t)
{
  switch (t) {
  case MC_TOPO_TRANSPORT_P2P:
    return "P2P";
  case MC_TOPO_TRANSPORT_SHM:
    return "SHM";
  case MC_TOPO_TRANSPORT_NET:
    return "NET";
  }
  return "?";
}

ncclResult_t mc_topo_transport_select(const struct mc_topo_system *sys,
                                      const struct mc_topo_paths_opts *opts, int rank, int peer,
                                      bool same_host, bool same_shm_dev,
                                      struct mc_topo_transport_choice *out)
{
  struct mc_topo_transport_choice c;
  int gi = mc_topo_rank_to_index(sys, rank);
  int gj = mc_topo_rank_to_index(sys, peer);
  const char *why = NULL;
  const char *level = mc_topo_path_type_str(mc_topo_p2p_level(sys, opts, &why));
  const char *path;

  memset(&c, 0, sizeof(c));
  c.inter = -1;
  c.in_topo = (gj >= 0);
  if (!same_host || !same_shm_dev) {
    c.transport = MC_TOPO_TRANSPORT_NET;
    snprintf(c.reason, sizeof(c.reason), "NET: %s",
             !same_host ? "different host" : "different /dev/shm (container or namespace)");
    *out = c;
    return ncclSuccess;
  }
  MC_CHECK(mc_topo_check_p2p(sys, opts, rank, peer, &c.p2p, &c.read, &c.inter));
  c.net = mc_topo_check_net(sys, opts, rank, peer);
  /* A peer trimmed from the system (NET-separated domain): no P2P, no NET check. */
  path = (c.in_topo && (gi >= 0))
             ? mc_topo_path_type_str(mc_topo_path_type(sys, MC_TOPO_GPU, gi, MC_TOPO_GPU, gj))
             : "NET (peer trimmed from this rank's system)";
  if ((c.p2p != 0) && (c.inter != -1)) {
    c.transport = MC_TOPO_TRANSPORT_P2P;
    snprintf(c.reason, sizeof(c.reason), "P2P: path %s through rank %d within NCCL_P2P_LEVEL %s",
             path, c.inter, level);
  } else if ((c.p2p != 0) && (c.net == 0)) {
    c.transport = MC_TOPO_TRANSPORT_P2P;
    snprintf(c.reason, sizeof(c.reason), "P2P: path %s within NCCL_P2P_LEVEL %s", path, level);
  } else if ((c.net == 0) && !opts->shm_disable) {
    c.transport = MC_TOPO_TRANSPORT_SHM;
    if (opts->p2p_disable)
      snprintf(c.reason, sizeof(c.reason), "SHM: P2P disabled by NCCL_P2P_DISABLE (path %s)", path);
    else
      snprintf(c.reason, sizeof(c.reason), "SHM: path %s beyond P2P level %s", path, level);
  } else if (c.net != 0) {
    c.transport = MC_TOPO_TRANSPORT_NET;
    snprintf(c.reason, sizeof(c.reason),
             "NET: both GPUs reach a NIC faster than path %s (ncclTopoCheckNet refuses %s)", path,
             (c.p2p != 0) ? "P2P and SHM" : "SHM");
  } else {
    c.transport = MC_TOPO_TRANSPORT_NET;
    snprintf(c.reason, sizeof(c.reason), "NET: path %s beyond P2P level %s and NCCL_SHM_DISABLE=1",
             path, level);
  }
  *out = c;
  return ncclSuccess;
}
