/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPUs through NVML, loaded with dlopen when it exists (NCCL's nvmlwrap.cc
 * role, for topology detection only). The library is never linked: its
 * functions are looked up with dlsym and called through NVML's C ABI
 * (nvmlInit_v2, nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2,
 * nvmlDeviceGetPciInfo_v3, nvmlDeviceGetCudaComputeCapability,
 * nvmlDeviceGetNvLinkState, nvmlDeviceGetNvLinkRemotePciInfo_v2,
 * nvmlShutdown).
 *
 * A missing library, a failed nvmlInit or a host without GPUs is not an
 * error: the handle then reports 0 GPUs and says why. Each open holds its own
 * dlopen reference and nvmlInit (both reference counted by the loader and by
 * NVML), so several communicators may open, use and close handles from
 * different threads; one handle is used by one thread at a time.
 */
#ifndef MC_TOPO_NVML_H
#define MC_TOPO_NVML_H

#include <stdint.h>

#include "nccl.h"

/* "dddd:bb:dd.f" and NCCL's "fffffff:ffff:ff", with room for 8-digit domains. */
#define MC_TOPO_NVML_BUSID_BYTES 24
/* NVML_NVLINK_MAX_LINKS */
#define MC_TOPO_NVML_MAX_LINKS 18
/* NCCL's bus id for an NVLink peer NVML cannot name (assumed to be an NVSwitch). */
#define MC_TOPO_NVML_UNKNOWN_TARGET "fffffff:ffff:ff"

struct mc_topo_nvml;

/* One distinct remote end of the GPU's active NVLinks. */
struct mc_topo_nvml_link {
  char target[MC_TOPO_NVML_BUSID_BYTES]; /* normalised bus id, or MC_TOPO_NVML_UNKNOWN_TARGET */
  int count;                             /* active links to it */
};

struct mc_topo_nvml_gpu {
  char busid[MC_TOPO_NVML_BUSID_BYTES]; /* "dddd:bb:dd.f", lower case, as NCCL writes it */
  uint32_t pci_device_id;               /* device << 16 | vendor */
  uint32_t pci_subsystem_id;            /* subsystem device << 16 | subsystem vendor */
  int sm;                               /* compute capability major * 10 + minor */
  int n_links;                          /* distinct targets, in order of first link */
  struct mc_topo_nvml_link links[MC_TOPO_NVML_MAX_LINKS];
};

/*
 * Loads library (a dlopen name or path) and initialises NVML. *nvml_out is
 * always a handle on success; when NVML is unusable it reports 0 GPUs and
 * mc_topo_nvml_why() says what failed (library, symbol, or NVML error).
 * Returns ncclSystemError only when memory runs out. Thread-safe.
 */
ncclResult_t mc_topo_nvml_open(const char *library, struct mc_topo_nvml **nvml_out);

/* GPUs NVML reports (nvmlDeviceGetCount_v2); 0 when NVML is unusable. */
int mc_topo_nvml_count(const struct mc_topo_nvml *nvml);

/* Why NVML is unusable or the last call failed ("" when nothing failed). */
const char *mc_topo_nvml_why(const struct mc_topo_nvml *nvml);

/* The library name or path the handle was opened with. */
const char *mc_topo_nvml_library(const struct mc_topo_nvml *nvml);

/*
 * GPU `index` (0 <= index < count): its PCI bus id and ids, compute
 * capability, and the remote ends of its active NVLinks (links 0 to NCCL's
 * maximum for its compute capability: none below sm60, 4, 6, 12, else 18)
 * grouped by remote bus id. Remote bus ids are lower-cased and normalised to
 * "dddd:bb:dd.f"; an empty, unprintable or unparsable one is
 * MC_TOPO_NVML_UNKNOWN_TARGET.
 * A link whose state or remote end NVML cannot give is skipped (as NCCL).
 * Errors: ncclInvalidArgument for a bad index, ncclSystemError when NVML
 * fails for the handle, PCI info or compute capability; nothing is logged,
 * mc_topo_nvml_why() holds the text for the caller, which knows the rank.
 */
ncclResult_t mc_topo_nvml_gpu_info(struct mc_topo_nvml *nvml, int index,
                                   struct mc_topo_nvml_gpu *gpu_out);

/* nvmlShutdown (when nvmlInit succeeded), dlclose, free; accepts NULL. */
void mc_topo_nvml_close(struct mc_topo_nvml *nvml);

#endif /* MC_TOPO_NVML_H */
