/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The process's registry of live handles (communicators): an API entry asks
 * whether a handle the user passed is one the library created and has not
 * freed yet, without reading the memory behind it (which may be freed, or
 * never have been an object). NCCL reads the communicator itself
 * (init.cc, ncclCommEnsureReady / CommCheck), which a destroyed handle turns
 * into a use after free.
 *
 * A small open-addressed hash set of addresses under one mutex. Freed
 * handles stay as "gone" entries (a few hundred at most are kept) so that
 * the error can say the handle was destroyed; an address the allocator
 * reuses for a new handle becomes live again.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef MC_CORE_REGISTRY_H
#define MC_CORE_REGISTRY_H

#include <stdint.h>

#include "nccl.h"

enum mc_handle_state {
  MC_HANDLE_UNKNOWN = 0, /* never registered (or forgotten long ago) */
  MC_HANDLE_LIVE,
  MC_HANDLE_GONE /* registered, then released */
};

/* Records h as live. ncclSystemError when memory runs out (h is then not registered). */
ncclResult_t mc_registry_add(const void *h);
/* Marks h as gone (before its memory is freed); nothing when it is not live. */
void mc_registry_release(const void *h);
/* The state of h; NULL is MC_HANDLE_UNKNOWN. */
enum mc_handle_state mc_registry_state(const void *h);
/* How many handles were released so far: a caller that checked handles
 * needs not check them again while this has not changed. */
uint64_t mc_registry_releases(void);

#endif /* MC_CORE_REGISTRY_H */
