/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NVML through dlopen for topology detection (topo_nvml.h). Plays the part of
 * NCCL 2.30's src/misc/nvmlwrap.cc for the calls ncclTopoGetXmlFromGpu makes
 * (src/graph/xml.cc); it does not copy NCCL's code. The types below are our own
 * declarations of NVML's documented C ABI (nvml.h is not needed to build).
 *
 * Differences from NCCL, on purpose:
 *  - No process-wide NVML state: every handle holds its own dlopen reference
 *    and nvmlInit_v2 (both reference counted), and nvmlShutdown is called on
 *    close. NCCL initialises once per process and never shuts NVML down.
 *  - Link state comes from nvmlDeviceGetNvLinkState on every GPU (NCCL reads
 *    the NVML_FI_DEV_NVLINK_GET_STATE field on sm90+), and the P2P capability
 *    of a link is not asked (NCCL skips links without
 *    NVML_NVLINK_CAP_P2P_SUPPORTED).
 *  - Remote bus ids are normalised to "dddd:bb:dd.f" (NVML gives
 *    "dddddddd:bb:dd.f"), so that the sysfs class of the target can be read.
 */
#include "topo/topo_nvml.h"

#include "check.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* NVML's C ABI (nvml.h), as far as it is used here. */
typedef int nvml_return_t; /* nvmlReturn_t */
#define NVML_OK             0
#define NVML_FEATURE_ON     1 /* nvmlEnableState_t NVML_FEATURE_ENABLED */
#define NVML_BUSID_LEGACY   16
#define NVML_BUSID_BYTES    32
#define NVML_ERR_MSG_BYTES  1024
#define MAX_LINKS_BY_SM_MAX 18

typedef struct nvml_device *nvml_device_t; /* nvmlDevice_t: opaque */

/* nvmlPciInfo_t (v3 layout, used by GetPciInfo_v3 and GetNvLinkRemotePciInfo_v2). */
struct nvml_pci_info {
  char bus_id_legacy[NVML_BUSID_LEGACY]; /* "dddd:bb:dd.f" */
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;    /* device << 16 | vendor */
  unsigned int pci_subsystem_id; /* subsystem device << 16 | subsystem vendor */
  char bus_id[NVML_BUSID_BYTES]; /* "dddddddd:bb:dd.f" */
};

typedef nvml_return_t (*nvml_void_fn)(void);
typedef nvml_return_t (*nvml_count_fn)(unsigned int *count);
typedef nvml_return_t (*nvml_handle_fn)(unsigned int index, nvml_device_t *dev);
typedef nvml_return_t (*nvml_pci_fn)(nvml_device_t dev, struct nvml_pci_info *pci);
typedef nvml_return_t (*nvml_cc_fn)(nvml_device_t dev, int *major, int *minor);
typedef nvml_return_t (*nvml_link_state_fn)(nvml_device_t dev, unsigned int link, int *state);
typedef nvml_return_t (*nvml_link_pci_fn)(nvml_device_t dev, unsigned int link,
                                          struct nvml_pci_info *pci);

struct mc_topo_nvml {
  char library[256];
  char why[NVML_ERR_MSG_BYTES];
  void *lib;
  bool initialised;
  int n_gpus;
  nvml_void_fn init;
  nvml_void_fn shutdown;
  nvml_count_fn get_count;
  nvml_handle_fn get_handle;
  nvml_pci_fn get_pci;
  nvml_cc_fn get_cc;
  nvml_link_state_fn link_state;
  nvml_link_pci_fn link_pci;
};

static const char *nvml_err_str(nvml_return_t r)
{
  switch (r) {
  case 1:
    return "NVML_ERROR_UNINITIALIZED";
  case 2:
    return "NVML_ERROR_INVALID_ARGUMENT";
  case 3:
    return "NVML_ERROR_NOT_SUPPORTED";
  case 4:
    return "NVML_ERROR_NO_PERMISSION";
  case 6:
    return "NVML_ERROR_NOT_FOUND";
  case 9:
    return "NVML_ERROR_DRIVER_NOT_LOADED";
  case 12:
    return "NVML_ERROR_LIBRARY_NOT_FOUND";
  case 15:
    return "NVML_ERROR_GPU_IS_LOST";
  case 17:
    return "NVML_ERROR_OPERATING_SYSTEM";
  default:
    return "NVML error";
  }
}

/* dlsym into a function pointer (ISO C has no object-to-function cast). */
static bool lookup(struct mc_topo_nvml *n, const char *name, void *fn_out, size_t fn_bytes)
{
  void *sym = dlsym(n->lib, name);

  if (sym == NULL) {
    snprintf(n->why, sizeof(n->why), "%s has no symbol %s (NVML older than the R450 driver?)",
             n->library, name);
    return false;
  }
  memcpy(fn_out, &sym, fn_bytes);
  return true;
}

#define LOOKUP(_n, _name, _field) lookup((_n), (_name), &(_n)->_field, sizeof((_n)->_field))

static void start(struct mc_topo_nvml *n)
{
  const char *err;
  unsigned int count = 0;
  nvml_return_t r;

  n->lib = dlopen(n->library, RTLD_NOW | RTLD_LOCAL);
  if (n->lib == NULL) {
    err = dlerror();
    /* dlerror() names the library. */
    snprintf(n->why, sizeof(n->why), "dlopen failed: %s",
             (err != NULL) ? err : "unknown dlopen error");
    return;
  }
  if (!LOOKUP(n, "nvmlInit_v2", init) || !LOOKUP(n, "nvmlShutdown", shutdown) ||
      !LOOKUP(n, "nvmlDeviceGetCount_v2", get_count) ||
      !LOOKUP(n, "nvmlDeviceGetHandleByIndex_v2", get_handle) ||
      !LOOKUP(n, "nvmlDeviceGetPciInfo_v3", get_pci) ||
      !LOOKUP(n, "nvmlDeviceGetCudaComputeCapability", get_cc) ||
      !LOOKUP(n, "nvmlDeviceGetNvLinkState", link_state) ||
      !LOOKUP(n, "nvmlDeviceGetNvLinkRemotePciInfo_v2", link_pci)) {
    return;
  }
  r = n->init();
  if (r != NVML_OK) {
    snprintf(n->why, sizeof(n->why), "%s: nvmlInit_v2 failed: %s (%d)", n->library, nvml_err_str(r),
             r);
    return;
  }
  n->initialised = true;
  r = n->get_count(&count);
  if (r != NVML_OK) {
    snprintf(n->why, sizeof(n->why), "%s: nvmlDeviceGetCount_v2 failed: %s (%d)", n->library,
             nvml_err_str(r), r);
    return;
  }
  if (count == 0) {
    snprintf(n->why, sizeof(n->why), "%s reports no GPU", n->library);
    return;
  }
  n->n_gpus = (count > 4096) ? 4096 : (int)count;
}

ncclResult_t mc_topo_nvml_open(const char *library, struct mc_topo_nvml **nvml_out)
{
  struct mc_topo_nvml *n = NULL;

  MC_CHECK(mc_calloc(&n, 1));
  snprintf(n->library, sizeof(n->library), "%s",
           ((library != NULL) && (library[0] != '\0')) ? library : "libnvidia-ml.so.1");
  start(n);
  *nvml_out = n;
  return ncclSuccess;
}

int mc_topo_nvml_count(const struct mc_topo_nvml *nvml)
{
  return (nvml != NULL) ? nvml->n_gpus : 0;
}

const char *mc_topo_nvml_why(const struct mc_topo_nvml *nvml)
{
  return (nvml != NULL) ? nvml->why : "NVML not opened";
}

const char *mc_topo_nvml_library(const struct mc_topo_nvml *nvml)
{
  return (nvml != NULL) ? nvml->library : "";
}

/*
 * NVML's "dddddddd:BB:DD.F" (or the legacy 4-digit form) as NCCL writes bus
 * ids: "%04x:%02x:%02x.%x", lower case. false when it is not a bus id.
 */
static bool normalise_busid(const char *in, size_t in_bytes, char *out, size_t out_bytes)
{
  char buf[NVML_BUSID_BYTES + 1];
  unsigned int dom = 0;
  unsigned int bus = 0;
  unsigned int dev = 0;
  unsigned int fn = 0;
  char tail = '\0';
  size_t len = 0;

  while ((len < in_bytes) && (len < sizeof(buf) - 1) && (in[len] != '\0')) {
    if (!isprint((unsigned char)in[len])) {
      return false;
    }
    buf[len] = (char)tolower((unsigned char)in[len]);
    len++;
  }
  buf[len] = '\0';
  if ((len == 0) || (sscanf(buf, "%x:%x:%x.%x%c", &dom, &bus, &dev, &fn, &tail) != 4) ||
      (bus > 0xff) || (dev > 0x1f) || (fn > 7)) {
    return false;
  }
  snprintf(out, out_bytes, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
  return true;
}

/* NCCL's maximum NVLink count by compute capability (ncclTopoGetXmlFromGpu). */
static int max_links_of(int sm)
{
  if (sm < 60) {
    return 0;
  }
  if (sm < 70) {
    return 4;
  }
  if (sm < 80) {
    return 6;
  }
  if (sm < 90) {
    return 12;
  }
  return MAX_LINKS_BY_SM_MAX;
}

static void add_link(struct mc_topo_nvml_gpu *g, const char *target)
{
  for (int i = 0; i < g->n_links; i++) {
    if (strcmp(g->links[i].target, target) == 0) {
      g->links[i].count++;
      return;
    }
  }
  if (g->n_links < MC_TOPO_NVML_MAX_LINKS) {
    snprintf(g->links[g->n_links].target, sizeof(g->links[g->n_links].target), "%s", target);
    g->links[g->n_links].count = 1;
    g->n_links++;
  }
}

ncclResult_t mc_topo_nvml_gpu_info(struct mc_topo_nvml *nvml, int index,
                                   struct mc_topo_nvml_gpu *gpu_out)
{
  struct mc_topo_nvml_gpu g;
  struct nvml_pci_info pci;
  nvml_device_t dev = NULL;
  nvml_return_t r;
  int major = 0;
  int minor = 0;

  if ((nvml == NULL) || (index < 0) || (index >= nvml->n_gpus)) {
    if (nvml != NULL) {
      snprintf(nvml->why, sizeof(nvml->why), "%s: GPU index %d out of 0..%d", nvml->library, index,
               nvml->n_gpus - 1);
    }
    return ncclInvalidArgument;
  }
  memset(&g, 0, sizeof(g));
  r = nvml->get_handle((unsigned int)index, &dev);
  if (r != NVML_OK) {
    snprintf(nvml->why, sizeof(nvml->why), "%s: nvmlDeviceGetHandleByIndex_v2(%d) failed: %s (%d)",
             nvml->library, index, nvml_err_str(r), r);
    return ncclSystemError;
  }
  memset(&pci, 0, sizeof(pci));
  r = nvml->get_pci(dev, &pci);
  if (r != NVML_OK) {
    snprintf(nvml->why, sizeof(nvml->why), "%s: nvmlDeviceGetPciInfo_v3(GPU %d) failed: %s (%d)",
             nvml->library, index, nvml_err_str(r), r);
    return ncclSystemError;
  }
  if (!normalise_busid(pci.bus_id, sizeof(pci.bus_id), g.busid, sizeof(g.busid)) &&
      !normalise_busid(pci.bus_id_legacy, sizeof(pci.bus_id_legacy), g.busid, sizeof(g.busid))) {
    /* The numeric fields carry no function number: function 0. */
    snprintf(g.busid, sizeof(g.busid), "%04x:%02x:%02x.0", pci.domain, pci.bus & 0xffU,
             pci.device & 0x1fU);
  }
  g.pci_device_id = pci.pci_device_id;
  g.pci_subsystem_id = pci.pci_subsystem_id;
  r = nvml->get_cc(dev, &major, &minor);
  if (r != NVML_OK) {
    snprintf(nvml->why, sizeof(nvml->why),
             "%s: nvmlDeviceGetCudaComputeCapability(GPU %d, %s) failed: %s (%d)", nvml->library,
             index, g.busid, nvml_err_str(r), r);
    return ncclSystemError;
  }
  g.sm = major * 10 + minor;
  for (int l = 0; l < max_links_of(g.sm); l++) {
    struct nvml_pci_info rem;
    char target[MC_TOPO_NVML_BUSID_BYTES];
    int state = 0;

    if ((nvml->link_state(dev, (unsigned int)l, &state) != NVML_OK) || (state != NVML_FEATURE_ON)) {
      continue;
    }
    memset(&rem, 0, sizeof(rem));
    if (nvml->link_pci(dev, (unsigned int)l, &rem) != NVML_OK) {
      continue;
    }
    if (!normalise_busid(rem.bus_id, sizeof(rem.bus_id), target, sizeof(target))) {
      /* NCCL: an empty or unprintable remote bus id is a peer it cannot see. */
      snprintf(target, sizeof(target), "%s", MC_TOPO_NVML_UNKNOWN_TARGET);
    }
    add_link(&g, target);
  }
  nvml->why[0] = '\0';
  *gpu_out = g;
  return ncclSuccess;
}

void mc_topo_nvml_close(struct mc_topo_nvml *nvml)
{
  if (nvml == NULL) {
    return;
  }
  if (nvml->initialised && (nvml->shutdown != NULL)) {
    (void)nvml->shutdown();
  }
  if (nvml->lib != NULL) {
    (void)dlclose(nvml->lib);
  }
  free(nvml);
}
