/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Detection of this host's topology into NCCL's XML (mirrors
 * ncclTopoGetXmlFromSys / ncclTopoFillGpu / ncclTopoFillNet of NCCL 2.30,
 * src/graph/xml.cc and topo.cc). Everything is read through one sysfs/procfs
 * root (MESHCCL_SYSFS_ROOT, default "/") so that recorded machines replay in
 * tests, as hwloc's HWLOC_FSROOT.
 *
 * Hosts without GPUs: each local rank is a compute device placed under the
 * NUMA node (CPU) it runs on, described as a <pci>/<gpu> pair so that the
 * same path, search and connect code serves (see docs/ARCHITECTURE.md).
 */
#ifndef MC_TOPO_DETECT_H
#define MC_TOPO_DETECT_H

#include <stdbool.h>
#include <stdint.h>

#include "nccl.h"
#include "topo/topo_xml.h"

/* What detection needs to know about this rank. */
struct mc_topo_detect_rank {
  int rank;      /* communicator rank */
  int dev;       /* device index (ncclCommCuDevice) */
  int numa_node; /* NUMA node the rank runs on; -1: detect from its CPU affinity */
  uint64_t host_hash;
  bool skip_nics; /* no NICs from sysfs: a file's or the net's devices are the NICs */
  /* The job did not name this rank's device (ncclCommInitAll's devlist,
   * meshcclSetDevice, MESHCCL_DEVICE): a compute device under its NUMA node
   * even where NVML reports GPUs, so that the ranks of a CPU job on a GPU
   * server need no GPU each. */
  bool is_compute;
};

/*
 * Adds this rank's part of the host topology to xml (which may already hold
 * a loaded NCCL_TOPO_FILE: existing elements are completed, not duplicated,
 * as NCCL completes partial files): the CPU of the rank's NUMA node
 * (numaid, affinity, arch, vendor, familyid, modelid, host_hash), the
 * rank's compute device (or its GPU, when NVML reports GPUs and the rank's
 * device was named, !me->is_compute) with its PCI
 * path, and every network interface with its PCI path (speed, virtual
 * interfaces without PCI under their CPU). sysfs_root NULL means
 * MESHCCL_SYSFS_ROOT, else "/". Errors name the file that could not be read.
 */
ncclResult_t mc_topo_detect(const char *sysfs_root, const struct mc_topo_detect_rank *me,
                            struct mc_xml *xml);

/* A net device to place in the topology (struct mc_net_props' name and pci_path). */
struct mc_topo_detect_nic {
  const char *name;
  const char *pci_path; /* sysfs path of its PCI device, "" or NULL for a virtual device */
};

/*
 * Places each net device of a net (NCCL's ncclTopoFillNet, called by
 * ncclTopoPopulateNics with the device's pciPath) as <nic><net name=...>
 * under its PCI function when pci_path resolves under the sysfs root (the
 * PCI ancestors detected as for any device), else under the CPU of the
 * host's first NUMA node. Attributes (dev, speed, ...) are the net import's
 * (mc_topo_net_import). A name already in xml is left where it is. xml must
 * start with <system> (mc_topo_detect made it). sysfs_root as mc_topo_detect.
 */
ncclResult_t mc_topo_detect_net_nics(const char *sysfs_root, uint64_t host_hash,
                                     const struct mc_topo_detect_nic *nics, int n_nics,
                                     struct mc_xml *xml);

/* NUMA node of the CPUs this thread may run on (lowest when several); -1 when
 * the host has no NUMA information. */
int mc_topo_detect_numa_of_self(const char *sysfs_root);

#endif /* MC_TOPO_DETECT_H */
