/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fake NVML for tests (built as a loadable module, never linked): exports
 * the NVML functions topology detection looks up, with NVML's C ABI, and
 * answers from the environment, read by nvmlInit_v2 when no handle is open:
 *
 *   FAKE_NVML_INIT_FAIL=1   nvmlInit_v2 fails with NVML_ERROR_DRIVER_NOT_LOADED
 *   FAKE_NVML_GPUS          GPUs separated by ';', each "busid,cc[,links]":
 *                           busid as NVML prints it ("00000000:1B:00.0"),
 *                           cc the compute capability as major*10+minor (90),
 *                           links '/'-separated for links 0, 1, ...:
 *                             a bus id  active, to that PCI function
 *                             -         inactive
 *                             !         active, remote bus id empty
 *                             ?         active, remote PCI info not supported
 *                           Links past the list are inactive.
 *   Unset or empty: NVML works and reports no GPU.
 *
 * Every GPU reports PCI ids 0x10de:0x2330, subsystem 0x10de:0x0001.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

/* NVML's values and layouts (our own declarations of the documented ABI). */
enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_DRIVER_NOT_LOADED = 9
};

#define MAX_GPUS  16
#define MAX_LINKS 18
#define BUSID_MAX 32

struct nvml_pci_info {
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};

enum link_kind { LINK_OFF = 0, LINK_TO, LINK_EMPTY, LINK_UNSUPPORTED };

struct nvml_device {
  char busid[BUSID_MAX];
  int cc;
  enum link_kind kind[MAX_LINKS];
  char remote[MAX_LINKS][BUSID_MAX];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int n_inits;
static int n_gpus;
static struct nvml_device gpus[MAX_GPUS];

static void parse_links(struct nvml_device *g, char *links)
{
  char *save = NULL;
  int l = 0;

  for (char *tok = strtok_r(links, "/", &save); (tok != NULL) && (l < MAX_LINKS);
       tok = strtok_r(NULL, "/", &save), l++) {
    if (strcmp(tok, "-") == 0) {
      g->kind[l] = LINK_OFF;
    } else if (strcmp(tok, "!") == 0) {
      g->kind[l] = LINK_EMPTY;
    } else if (strcmp(tok, "?") == 0) {
      g->kind[l] = LINK_UNSUPPORTED;
    } else {
      g->kind[l] = LINK_TO;
      snprintf(g->remote[l], sizeof(g->remote[l]), "%s", tok);
    }
  }
}

static void parse_config(void)
{
  const char *env = getenv("FAKE_NVML_GPUS");
  char *copy;
  char *save = NULL;

  memset(gpus, 0, sizeof(gpus));
  n_gpus = 0;
  if ((env == NULL) || (env[0] == '\0')) {
    return;
  }
  copy = strdup(env);
  if (copy == NULL) {
    return;
  }
  for (char *gpu = strtok_r(copy, ";", &save); (gpu != NULL) && (n_gpus < MAX_GPUS);
       gpu = strtok_r(NULL, ";", &save)) {
    struct nvml_device *g = &gpus[n_gpus];
    char *cc = strchr(gpu, ',');
    char *links = NULL;
    if (cc == NULL) {
      continue;
    }
    *cc++ = '\0';
    links = strchr(cc, ',');
    if (links != NULL) {
      *links++ = '\0';
    }
    snprintf(g->busid, sizeof(g->busid), "%s", gpu);
    g->cc = atoi(cc);
    if (links != NULL) {
      parse_links(g, links);
    }
    n_gpus++;
  }
  free(copy);
}

EXPORT int nvmlInit_v2(void)
{
  const char *fail = getenv("FAKE_NVML_INIT_FAIL");
  int ret = NVML_SUCCESS;

  pthread_mutex_lock(&lock);
  if ((fail != NULL) && (strcmp(fail, "1") == 0)) {
    ret = NVML_ERROR_DRIVER_NOT_LOADED;
  } else {
    if (n_inits == 0) {
      parse_config();
    }
    n_inits++;
  }
  pthread_mutex_unlock(&lock);
  return ret;
}

EXPORT int nvmlShutdown(void)
{
  int ret = NVML_SUCCESS;

  pthread_mutex_lock(&lock);
  if (n_inits == 0) {
    ret = NVML_ERROR_UNINITIALIZED;
  } else {
    n_inits--;
  }
  pthread_mutex_unlock(&lock);
  return ret;
}

static int initialised(void)
{
  int yes;

  pthread_mutex_lock(&lock);
  yes = (n_inits > 0);
  pthread_mutex_unlock(&lock);
  return yes;
}

EXPORT int nvmlDeviceGetCount_v2(unsigned int *count)
{
  if (!initialised()) {
    return NVML_ERROR_UNINITIALIZED;
  }
  if (count == NULL) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *count = (unsigned int)n_gpus;
  return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int index, struct nvml_device **dev)
{
  if (!initialised()) {
    return NVML_ERROR_UNINITIALIZED;
  }
  if ((dev == NULL) || (index >= (unsigned int)n_gpus)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *dev = &gpus[index];
  return NVML_SUCCESS;
}

static int valid(const struct nvml_device *dev)
{
  return (dev >= &gpus[0]) && (dev < &gpus[n_gpus]);
}

/* NVML's two spellings of a bus id: "DDDDDDDD:BB:DD.F" and "DDDD:BB:DD.F". */
static void fill_pci(const char *busid, struct nvml_pci_info *pci)
{
  unsigned int dom = 0;
  unsigned int bus = 0;
  unsigned int dev = 0;
  unsigned int fn = 0;

  memset(pci, 0, sizeof(*pci));
  snprintf(pci->bus_id, sizeof(pci->bus_id), "%s", busid);
  for (char *p = pci->bus_id; *p != '\0'; p++) {
    *p = (char)toupper((unsigned char)*p);
  }
  if (sscanf(busid, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4) {
    snprintf(pci->bus_id_legacy, sizeof(pci->bus_id_legacy), "%04X:%02X:%02X.%X", dom & 0xffffU,
             bus & 0xffU, dev & 0x1fU, fn & 7U);
  }
  pci->domain = dom;
  pci->bus = bus;
  pci->device = dev;
  pci->pci_device_id = 0x233010deU;
  pci->pci_subsystem_id = 0x000110deU;
}

EXPORT int nvmlDeviceGetPciInfo_v3(struct nvml_device *dev, struct nvml_pci_info *pci)
{
  if (!initialised()) {
    return NVML_ERROR_UNINITIALIZED;
  }
  if (!valid(dev) || (pci == NULL)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  fill_pci(dev->busid, pci);
  return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetCudaComputeCapability(struct nvml_device *dev, int *major, int *minor)
{
  if (!initialised()) {
    return NVML_ERROR_UNINITIALIZED;
  }
  if (!valid(dev) || (major == NULL) || (minor == NULL)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *major = dev->cc / 10;
  *minor = dev->cc % 10;
  return NVML_SUCCESS;
}

/* nvmlEnableState_t: 0 disabled, 1 enabled. */
EXPORT int nvmlDeviceGetNvLinkState(struct nvml_device *dev, unsigned int link, int *state)
{
  if (!initialised()) {
    return NVML_ERROR_UNINITIALIZED;
  }
  if (!valid(dev) || (state == NULL) || (link >= MAX_LINKS)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  *state = (dev->kind[link] != LINK_OFF) ? 1 : 0;
  return NVML_SUCCESS;
}

EXPORT int nvmlDeviceGetNvLinkRemotePciInfo_v2(struct nvml_device *dev, unsigned int link,
                                               struct nvml_pci_info *pci)
{
  if (!initialised()) {
    return NVML_ERROR_UNINITIALIZED;
  }
  if (!valid(dev) || (pci == NULL) || (link >= MAX_LINKS)) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  switch (dev->kind[link]) {
  case LINK_TO:
    fill_pci(dev->remote[link], pci);
    return NVML_SUCCESS;
  case LINK_EMPTY:
    memset(pci, 0, sizeof(*pci));
    return NVML_SUCCESS;
  default:
    return NVML_ERROR_NOT_SUPPORTED;
  }
}
