/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one question topology detection asks CUDA (topo_cuda.c): whether a
 * GPU can do GPUDirect RDMA, the rank's gdrSupport that NCCL 2.30 writes
 * into the <gpu gdr> of the rank's GPU (ncclGpuGdrSupport, src/transport/
 * net.cc: with a driver of CUDA 11.3 or later, the device attribute
 * cudaDevAttrGPUDirectRDMASupported). The driver is loaded with dlopen, so
 * that meshccl neither needs nor links CUDA.
 */
#ifndef MC_TOPO_CUDA_H
#define MC_TOPO_CUDA_H

#include <stddef.h>

/*
 * *gdr_out: 1 when the CUDA driver `library` (MESHCCL_CUDA_LIBRARY) says the
 * GPU at busid ("dddd:bb:dd.f") supports GPUDirect RDMA, else 0; when the
 * driver cannot be loaded or initialised, does not know the bus id, or is
 * older than CUDA 11.3, 0 with why (why_bytes >= 1) saying so. Never fails;
 * thread-safe (no state is kept: each call loads and unloads the driver).
 */
void mc_topo_cuda_gdr(const char *library, const char *busid, int *gdr_out, char *why,
                      size_t why_bytes);

#endif /* MC_TOPO_CUDA_H */
