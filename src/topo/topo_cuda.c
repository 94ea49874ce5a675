/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GPUDirect RDMA support of a GPU from the CUDA driver API, loaded with
 * dlopen (topo_cuda.h). The types below are our own declarations of the
 * driver's documented C ABI (cuda.h is not needed to build). NCCL asks the
 * runtime (cudaDeviceGetAttribute with cudaDevAttrGPUDirectRDMASupported);
 * the driver's attribute of the same meaning is
 * CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED. NCCL's fallback for
 * drivers older than CUDA 11.3 (asking the net plugins, with a test
 * registration) needs GPU memory, and gives 0 here.
 */
#include "topo/topo_cuda.h"

#include <dlfcn.h>
#include <stdio.h>

typedef int cu_result_t; /* CUresult: 0 is CUDA_SUCCESS */
typedef int cu_device_t; /* CUdevice */

#define CU_ATTR_GPU_DIRECT_RDMA_SUPPORTED 116 /* CUdevice_attribute */
#define CU_DRIVER_MIN_VERSION             11030

typedef cu_result_t (*cu_init_fn)(unsigned int flags);
typedef cu_result_t (*cu_version_fn)(int *version);
typedef cu_result_t (*cu_by_bus_fn)(cu_device_t *dev, const char *bus_id);
typedef cu_result_t (*cu_attr_fn)(int *value, int attr, cu_device_t dev);

void mc_topo_cuda_gdr(const char *library, const char *busid, int *gdr_out, char *why,
                      size_t why_bytes)
{
  void *lib = NULL;
  cu_init_fn init;
  cu_version_fn version;
  cu_by_bus_fn by_bus;
  cu_attr_fn attr;
  cu_device_t dev = 0;
  int driver = 0;
  int value = 0;
  cu_result_t r;

  *gdr_out = 0;
  why[0] = '\0';
  if ((library == NULL) || (library[0] == '\0')) {
    snprintf(why, why_bytes, "MESHCCL_CUDA_LIBRARY is empty");
    return;
  }
  lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    snprintf(why, why_bytes, "%s", dlerror());
    return;
  }
  init = (cu_init_fn)dlsym(lib, "cuInit");
  version = (cu_version_fn)dlsym(lib, "cuDriverGetVersion");
  by_bus = (cu_by_bus_fn)dlsym(lib, "cuDeviceGetByPCIBusId");
  attr = (cu_attr_fn)dlsym(lib, "cuDeviceGetAttribute");
  if ((init == NULL) || (version == NULL) || (by_bus == NULL) || (attr == NULL)) {
    snprintf(why, why_bytes,
             "%s lacks cuInit, cuDriverGetVersion, cuDeviceGetByPCIBusId or "
             "cuDeviceGetAttribute",
             library);
  } else if ((r = init(0)) != 0) {
    snprintf(why, why_bytes, "cuInit failed with CUresult %d", r);
  } else if (((r = version(&driver)) != 0) || (driver < CU_DRIVER_MIN_VERSION)) {
    snprintf(why, why_bytes, "driver version %d (CUresult %d): older than CUDA 11.3", driver, r);
  } else if ((r = by_bus(&dev, busid)) != 0) {
    snprintf(why, why_bytes, "the driver knows no GPU at %s (CUresult %d)", busid, r);
  } else if ((r = attr(&value, CU_ATTR_GPU_DIRECT_RDMA_SUPPORTED, dev)) != 0) {
    snprintf(why, why_bytes,
             "cuDeviceGetAttribute(GPU_DIRECT_RDMA_SUPPORTED) of %s failed with "
             "CUresult %d",
             busid, r);
  } else {
    *gdr_out = (value != 0) ? 1 : 0;
  }
  dlclose(lib);
}
