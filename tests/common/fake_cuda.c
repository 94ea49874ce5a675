/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fake CUDA driver for the topology tests (loaded through
 * MESHCCL_CUDA_LIBRARY by src/topo/topo_cuda.c): the four calls detection
 * makes, driven by the environment:
 *   FAKE_CUDA_GPUS   "busid=gdr,busid=gdr": the GPUs it knows and whether each
 *                    supports GPUDirect RDMA ("0000:00:06.0=1");
 *   FAKE_CUDA_DRIVER the driver version (default 12040);
 *   FAKE_CUDA_INIT_FAIL set: cuInit fails (CUDA_ERROR_NO_DEVICE, 100).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NO_DEVICE     100
#define ATTR_GDR                 116
#define EXPORT                   __attribute__((visibility("default")))

int cuInit(unsigned int flags);
int cuDriverGetVersion(int *version);
int cuDeviceGetByPCIBusId(int *dev, const char *bus_id);
int cuDeviceGetAttribute(int *value, int attr, int dev);

EXPORT int cuInit(unsigned int flags)
{
  (void)flags;
  return (getenv("FAKE_CUDA_INIT_FAIL") != NULL) ? CUDA_ERROR_NO_DEVICE : 0;
}

EXPORT int cuDriverGetVersion(int *version)
{
  const char *v = getenv("FAKE_CUDA_DRIVER");

  *version = (v != NULL) ? atoi(v) : 12040;
  return 0;
}

/* The index-th entry of FAKE_CUDA_GPUS: its bus id (12 characters) and gdr. */
static int entry(int index, char *busid, int *gdr)
{
  const char *p = getenv("FAKE_CUDA_GPUS");

  for (int i = 0; (p != NULL) && (*p != '\0'); i++) {
    const char *eq = strchr(p, '=');
    const char *end = strchr(p, ',');

    if ((eq == NULL) || (eq - p != 12))
      return CUDA_ERROR_INVALID_VALUE;
    if (i == index) {
      memcpy(busid, p, 12);
      busid[12] = '\0';
      *gdr = atoi(eq + 1);
      return 0;
    }
    p = (end != NULL) ? end + 1 : "";
  }
  return CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuDeviceGetByPCIBusId(int *dev, const char *bus_id)
{
  char b[16];
  int gdr;

  for (int i = 0; entry(i, b, &gdr) == 0; i++) {
    if (strcasecmp(b, bus_id) == 0) {
      *dev = i;
      return 0;
    }
  }
  return CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuDeviceGetAttribute(int *value, int attr, int dev)
{
  char b[16];
  int gdr;

  if ((attr != ATTR_GDR) || (entry(dev, b, &gdr) != 0))
    return CUDA_ERROR_INVALID_VALUE;
  *value = gdr;
  return 0;
}
