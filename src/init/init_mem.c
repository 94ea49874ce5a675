/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory calls of nccl.h with their host meaning: ncclMemAlloc/ncclMemFree
 * (page-aligned host memory where NCCL maps cuMem allocations), buffer
 * registration (ncclCommRegister/Deregister: a handle recording the range,
 * as there is nothing to pin or map), windows (ncclCommWindowRegister,
 * ncclCommWindowDeregister, ncclWinGetUserPtr: the buffer, size and flags
 * of a local window) and ncclCommMemStats (no GPU memory: every amount is 0).
 * The entry points mirror NCCL's allocator.cc, register.cc and
 * dev_runtime.cc in their argument checks; registrations and windows hang
 * off the communicator and are freed with it.
 */
#include "comm.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "utils.h"

#define MC_REG_MAGIC 0x6d637265676e6d31ull /* "mcregnm1" */
#define MC_WIN_MAGIC 0x6d6377696e646f31ull /* "mcwindo1" */

/* What an ncclCommRegister handle points at. */
struct mc_comm_reg {
  uint64_t magic;
  void *buff;
  size_t size;
  struct mc_comm_reg *next;
};

/* What an ncclWindow_t points at (NCCL's name for its window object). */
struct ncclWindow_vidmem {
  uint64_t magic;
  void *buff;
  size_t size;
  int flags;
  struct ncclWindow_vidmem *next;
};

#define WIN_KNOWN_FLAGS (NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING)

static size_t page_bytes(void)
{
  long p = sysconf(_SC_PAGESIZE);

  return (p > 0) ? (size_t)p : 4096;
}

NCCL_API(ncclResult_t, ncclMemAlloc, void **ptr, size_t size);
ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
  size_t page = page_bytes();
  size_t rounded;
  void *p = NULL;
  int rc;

  mc_api_enter();
  if (ptr == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclMemAlloc : ptr argument is NULL");
  if (size == 0)
    return MC_FAIL(ncclInvalidArgument, "ncclMemAlloc : size argument is 0");
  if (size > SIZE_MAX - page)
    return MC_FAIL(ncclInvalidArgument, "ncclMemAlloc : size %zu is too large", size);
  /* NCCL rounds up to the allocation granularity; a host page is ours. */
  rounded = (size + page - 1) / page * page;
  rc = posix_memalign(&p, page, rounded);
  if (rc != 0)
    return MC_FAIL(ncclSystemError, "ncclMemAlloc : posix_memalign of %zu bytes failed: %s",
                   rounded, strerror(rc));
  MC_INFO(MC_SUB_ALLOC, "ncclMemAlloc %zu bytes (%zu allocated) at %p", size, rounded, p);
  *ptr = p;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclMemFree, void *ptr);
ncclResult_t ncclMemFree(void *ptr)
{
  mc_api_enter();
  free(ptr);
  return ncclSuccess;
}

/* ---------------------------------------------------------- registration */

NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void *buff, size_t size,
         void **handle);
ncclResult_t ncclCommRegister(const ncclComm_t comm, void *buff, size_t size, void **handle)
{
  struct mc_comm_reg *reg = NULL;

  mc_api_enter();
  MC_CHECK(mc_comm_ready(comm, "ncclCommRegister"));
  if (handle == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclCommRegister : handle argument is NULL");
  if (buff == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclCommRegister : buff argument is NULL");
  MC_CHECK(mc_calloc(&reg, 1));
  reg->magic = MC_REG_MAGIC;
  reg->buff = buff;
  reg->size = size;
  pthread_mutex_lock(&comm->reg_lock);
  reg->next = comm->regs;
  comm->regs = reg;
  pthread_mutex_unlock(&comm->reg_lock);
  MC_INFO(MC_SUB_REG, "ncclCommRegister comm %p rank %d buff %p size %zu -> handle %p",
          (void *)comm, comm->rank, buff, size, (void *)reg);
  *handle = reg;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void *handle);
ncclResult_t ncclCommDeregister(const ncclComm_t comm, void *handle)
{
  struct mc_comm_reg **pp;
  struct mc_comm_reg *found = NULL;

  mc_api_enter();
  MC_CHECK(mc_comm_check(comm, "ncclCommDeregister"));
  if (handle == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclCommDeregister : handle argument is NULL");
  pthread_mutex_lock(&comm->reg_lock);
  for (pp = &comm->regs; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == handle) {
      found = *pp;
      *pp = found->next;
      break;
    }
  }
  pthread_mutex_unlock(&comm->reg_lock);
  if (found == NULL)
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommDeregister : handle %p is not a registration of comm %p (already "
                   "deregistered, or from another communicator?)",
                   handle, (void *)comm);
  found->magic = 0;
  free(found);
  return ncclSuccess;
}

/* --------------------------------------------------------------- windows */

NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void *buff, size_t size,
         ncclWindow_t *win, int winFlags);
ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void *buff, size_t size, ncclWindow_t *win,
                                    int winFlags)
{
  struct ncclWindow_vidmem *w = NULL;

  mc_api_enter();
  MC_CHECK(mc_comm_ready(comm, "ncclCommWindowRegister"));
  if (win == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclCommWindowRegister : win argument is NULL");
  if ((buff == NULL) && (size > 0))
    return MC_FAIL(ncclInvalidArgument, "ncclCommWindowRegister : buff argument is NULL");
  if ((winFlags & ~WIN_KNOWN_FLAGS) != 0)
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommWindowRegister : winFlags 0x%x has unknown bits 0x%x (known: "
                   "NCCL_WIN_COLL_SYMMETRIC, NCCL_WIN_STRICT_ORDERING)",
                   (unsigned)winFlags, (unsigned)(winFlags & ~WIN_KNOWN_FLAGS));
  if (((winFlags & NCCL_WIN_COLL_SYMMETRIC) != 0) &&
      (((uintptr_t)buff % NCCL_WIN_REQUIRED_ALIGNMENT) != 0))
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommWindowRegister : buff %p of a NCCL_WIN_COLL_SYMMETRIC window is not "
                   "aligned to NCCL_WIN_REQUIRED_ALIGNMENT (%d bytes); allocate it with "
                   "ncclMemAlloc",
                   buff, NCCL_WIN_REQUIRED_ALIGNMENT);
  MC_CHECK(mc_calloc(&w, 1));
  w->magic = MC_WIN_MAGIC;
  w->buff = buff;
  w->size = size;
  w->flags = winFlags;
  pthread_mutex_lock(&comm->reg_lock);
  w->next = comm->windows;
  comm->windows = w;
  pthread_mutex_unlock(&comm->reg_lock);
  MC_INFO(MC_SUB_REG, "ncclCommWindowRegister comm %p rank %d buff %p size %zu flags 0x%x -> %p",
          (void *)comm, comm->rank, buff, size, (unsigned)winFlags, (void *)w);
  *win = w;
  return ncclSuccess;
}

/* The window of comm that win names, or NULL; unlinks it when unlink is set. */
static struct ncclWindow_vidmem *find_window(struct ncclComm *comm, ncclWindow_t win, bool unlink)
{
  struct ncclWindow_vidmem **pp;
  struct ncclWindow_vidmem *found = NULL;

  pthread_mutex_lock(&comm->reg_lock);
  for (pp = &comm->windows; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == win) {
      found = *pp;
      if (unlink)
        *pp = found->next;
      break;
    }
  }
  pthread_mutex_unlock(&comm->reg_lock);
  return found;
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win);
ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win)
{
  struct ncclWindow_vidmem *w;

  mc_api_enter();
  MC_CHECK(mc_comm_check(comm, "ncclCommWindowDeregister"));
  if (win == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclCommWindowDeregister : win argument is NULL");
  w = find_window(comm, win, true);
  if (w == NULL)
    return MC_FAIL(ncclInvalidArgument,
                   "ncclCommWindowDeregister : window %p is not a window of comm %p", (void *)win,
                   (void *)comm);
  w->magic = 0;
  free(w);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void **outUserPtr);
ncclResult_t ncclWinGetUserPtr(ncclComm_t comm, ncclWindow_t win, void **outUserPtr)
{
  struct ncclWindow_vidmem *w;

  mc_api_enter();
  MC_CHECK(mc_comm_check(comm, "ncclWinGetUserPtr"));
  if (outUserPtr == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclWinGetUserPtr : outUserPtr argument is NULL");
  if (win == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclWinGetUserPtr : win argument is NULL");
  w = find_window(comm, win, false);
  if (w == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclWinGetUserPtr : window %p is not a window of comm %p",
                   (void *)win, (void *)comm);
  *outUserPtr = w->buff;
  return ncclSuccess;
}

void mc_comm_regs_free(struct ncclComm *comm)
{
  if (comm == NULL)
    return;
  while (comm->regs != NULL) {
    struct mc_comm_reg *r = comm->regs;
    comm->regs = r->next;
    free(r);
  }
  while (comm->windows != NULL) {
    struct ncclWindow_vidmem *w = comm->windows;
    comm->windows = w->next;
    free(w);
  }
}

/* ----------------------------------------------------------------- stats */

NCCL_API(ncclResult_t, ncclCommMemStats, ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value);
ncclResult_t ncclCommMemStats(ncclComm_t comm, ncclCommMemStat_t stat, uint64_t *value)
{
  mc_api_enter();
  MC_CHECK(mc_comm_check(comm, "ncclCommMemStats"));
  if (value == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclCommMemStats : value argument is NULL");
  switch (stat) {
  case ncclStatGpuMemSuspended:
    *value = (uint64_t)__atomic_load_n(&comm->is_suspended, __ATOMIC_ACQUIRE);
    return ncclSuccess;
  case ncclStatGpuMemSuspend:
  case ncclStatGpuMemPersist:
  case ncclStatGpuMemTotal:
    /* Every buffer of a host communicator is host memory: no GPU bytes. */
    *value = 0;
    return ncclSuccess;
  default:
    return MC_FAIL(ncclInvalidArgument, "ncclCommMemStats : invalid stat %d", (int)stat);
  }
}
