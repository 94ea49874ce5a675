/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory calls of nccl.h with their host meaning: ncclMemAlloc/ncclMemFree
 * (page-aligned host memory where NCCL maps cuMem allocations: here a memfd
 * mapped shared, so that the other processes of a communicator on this host
 * can map it too, as NCCL's peers import a cuMem handle), buffer
 * registration (ncclCommRegister/Deregister: a handle recording the range,
 * as there is nothing to pin), windows (ncclCommWindowRegister,
 * ncclCommWindowDeregister, ncclWinGetUserPtr: the buffer, size and flags
 * of a local window; a NCCL_WIN_COLL_SYMMETRIC window must be ncclMemAlloc
 * memory, which its peers map when a collective runs on it, coll_sym.c) and
 * ncclCommMemStats (no GPU memory: every amount is 0).
 * The entry points mirror NCCL's allocator.cc, register.cc and
 * dev_runtime.cc in their argument checks; registrations and windows hang
 * off the communicator and are freed with it.
 */
#include "init_mem.h"

#include "comm.h"
#include "init_api.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "log.h"
#include "params.h"
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

/* The allocations of ncclMemAlloc in this process: a list (few, long-lived). */
struct mem_alloc {
  char *base;
  size_t bytes;
  int fd;
  uint64_t id;  /* never reused: a peer's cached mapping is keyed by it */
  uint64_t ino; /* the memfd's st_ino and st_dev: a peer checks what it opened */
  uint64_t dev;
  struct mem_alloc *next;
};

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mem_alloc *mem_list;
static uint64_t mem_next_id = 1;
/* ncclMemFree calls so far, and the ids of the last MC_MEM_FREED_IDS freed
 * (mem_freed[gen % MC_MEM_FREED_IDS] is the gen-th's): what a peer's cache
 * needs to drop its mappings of them (mc_mem_frees). */
static uint64_t mem_free_gen;
static uint64_t mem_freed[MC_MEM_FREED_IDS];

NCCL_API(ncclResult_t, ncclMemAlloc, void **ptr, size_t size);
ncclResult_t ncclMemAlloc(void **ptr, size_t size)
{
  size_t page = page_bytes();
  size_t rounded;
  struct mem_alloc *a = NULL;
  struct stat st;
  void *p;
  int fd;

  mc_api_enter();
  if (ptr == NULL)
    return MC_FAIL(ncclInvalidArgument, "ncclMemAlloc : ptr argument is NULL");
  if (size == 0)
    return MC_FAIL(ncclInvalidArgument, "ncclMemAlloc : size argument is 0");
  if (size > SIZE_MAX - page)
    return MC_FAIL(ncclInvalidArgument, "ncclMemAlloc : size %zu is too large", size);
  /* NCCL rounds up to the allocation granularity; a host page is ours. */
  rounded = (size + page - 1) / page * page;
  MC_CHECK(mc_calloc(&a, 1));
  fd = memfd_create("meshccl-mem", MFD_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    char hint[MC_FD_HINT_BYTES];
    free(a);
    return MC_FAIL(ncclSystemError, "ncclMemAlloc : memfd_create failed: %s%s", strerror(e),
                   mc_fd_limit_hint(e, hint, sizeof(hint)));
  }
  /* fallocate sizes the memfd and allocates its pages: the memory exists
   * from here on, as cuMemCreate's does: a shortage is
   * this call's error, not a SIGBUS at the first touch, and a peer that
   * maps it (mc_mem_peer_map) finds every page there. The mapping below is
   * populated for the same reason: no fault in a collective's first pass. */
  if (fallocate(fd, 0, 0, (off_t)rounded) != 0) {
    int e = errno;
    close(fd);
    free(a);
    return MC_FAIL(ncclSystemError, "ncclMemAlloc : cannot commit %zu bytes of shared memory: %s",
                   rounded, strerror(e));
  }
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    free(a);
    return MC_FAIL(ncclSystemError, "ncclMemAlloc : fstat of its memfd failed: %s", strerror(e));
  }
  p = mmap(NULL, rounded, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    free(a);
    return MC_FAIL(ncclSystemError, "ncclMemAlloc : mmap of %zu bytes failed: %s", rounded,
                   strerror(e));
  }
  a->base = p;
  a->ino = (uint64_t)st.st_ino;
  a->dev = (uint64_t)st.st_dev;
  a->bytes = rounded;
  a->fd = fd;
  pthread_mutex_lock(&mem_lock);
  a->id = mem_next_id++;
  a->next = mem_list;
  mem_list = a;
  pthread_mutex_unlock(&mem_lock);
  MC_INFO(MC_SUB_ALLOC, "ncclMemAlloc %zu bytes (%zu allocated) at %p", size, rounded, p);
  *ptr = p;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclMemFree, void *ptr);
ncclResult_t ncclMemFree(void *ptr)
{
  struct mem_alloc **pp;
  struct mem_alloc *found = NULL;

  mc_api_enter();
  if (ptr == NULL)
    return ncclSuccess;
  pthread_mutex_lock(&mem_lock);
  for (pp = &mem_list; *pp != NULL; pp = &(*pp)->next) {
    if ((*pp)->base == ptr) {
      found = *pp;
      *pp = found->next;
      mem_freed[mem_free_gen % MC_MEM_FREED_IDS] = found->id;
      mem_free_gen++;
      break;
    }
  }
  pthread_mutex_unlock(&mem_lock);
  if (found == NULL)
    return MC_FAIL(ncclInvalidArgument,
                   "ncclMemFree : %p is not the start of memory from ncclMemAlloc (freed "
                   "already, or allocated otherwise?)",
                   ptr);
  (void)munmap(found->base, found->bytes);
  close(found->fd);
  free(found);
  return ncclSuccess;
}

bool mc_mem_lookup(const void *p, size_t bytes, struct mc_mem_ref *out)
{
  const char *c = p;
  bool ok = false;

  pthread_mutex_lock(&mem_lock);
  for (const struct mem_alloc *a = mem_list; a != NULL; a = a->next) {
    if ((c >= a->base) && (c <= a->base + a->bytes) &&
        (bytes <= (size_t)(a->base + a->bytes - c))) {
      out->pid = (int)getpid();
      out->fd = a->fd;
      out->id = a->id;
      out->ino = a->ino;
      out->dev = a->dev;
      out->alloc_bytes = a->bytes;
      out->offset = (size_t)(c - a->base);
      ok = true;
      break;
    }
  }
  pthread_mutex_unlock(&mem_lock);
  return ok;
}

void mc_mem_frees(uint64_t *gen_out, uint64_t freed_out[MC_MEM_FREED_IDS])
{
  pthread_mutex_lock(&mem_lock);
  *gen_out = mem_free_gen;
  for (uint64_t k = 0; k < MC_MEM_FREED_IDS; k++)
    freed_out[k] = (k < mem_free_gen) ? mem_freed[(mem_free_gen - 1 - k) % MC_MEM_FREED_IDS] : 0;
  pthread_mutex_unlock(&mem_lock);
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
  pthread_mutex_lock(&comm->mem.reg_lock);
  reg->next = comm->mem.regs;
  comm->mem.regs = reg;
  pthread_mutex_unlock(&comm->mem.reg_lock);
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
  pthread_mutex_lock(&comm->mem.reg_lock);
  for (pp = &comm->mem.regs; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == handle) {
      found = *pp;
      *pp = found->next;
      break;
    }
  }
  pthread_mutex_unlock(&comm->mem.reg_lock);
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
  if ((winFlags & NCCL_WIN_COLL_SYMMETRIC) != 0) {
    struct mc_mem_ref ref;
    if (!mc_mem_lookup(buff, size, &ref))
      return MC_FAIL(ncclInvalidArgument,
                     "ncclCommWindowRegister : buff %p size %zu of a NCCL_WIN_COLL_SYMMETRIC "
                     "window is not within one allocation of ncclMemAlloc (the other ranks on "
                     "this host map a symmetric window's memory)",
                     buff, size);
  }
  MC_CHECK(mc_calloc(&w, 1));
  w->magic = MC_WIN_MAGIC;
  w->buff = buff;
  w->size = size;
  w->flags = winFlags;
  pthread_mutex_lock(&comm->mem.reg_lock);
  w->next = comm->mem.windows;
  comm->mem.windows = w;
  pthread_mutex_unlock(&comm->mem.reg_lock);
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

  pthread_mutex_lock(&comm->mem.reg_lock);
  for (pp = &comm->mem.windows; *pp != NULL; pp = &(*pp)->next) {
    if (*pp == win) {
      found = *pp;
      if (unlink)
        *pp = found->next;
      break;
    }
  }
  pthread_mutex_unlock(&comm->mem.reg_lock);
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

/* ----------------------------------------------- peers' memory, mapped */

/* Peers' ncclMemAlloc allocations this communicator mapped (read-only),
 * keyed by (pid, allocation id), so that an operation on the same windows
 * maps nothing. A mapping keeps its memory alive after the owner frees it,
 * so what is held is bounded: at most maps_max() mappings and
 * MESHCCL_SYM_MAP_BYTES bytes (a new mapping makes room past either by
 * dropping the least recently used mappings the current operation does not
 * use; one operation's own always stay mapped, past the bound until a later
 * operation needs the room); a mapping of an allocation its owner freed is
 * dropped at the next symmetric operation with that owner (its message says
 * what it freed, mc_mem_peer_frees); all of them with the communicator. */
#define MAPS_SPARE 64

/* Mappings a communicator of n_ranks keeps at most: two operations' buffers
 * (an input and an output of every peer each), and MAPS_SPARE more. */
static int maps_max(int n_ranks)
{
  return MAPS_SPARE + 4 * n_ranks;
}

struct peer_map {
  int peer;
  int pid;
  uint64_t id;
  uint64_t ino;
  uint64_t dev;
  const char *base;
  size_t bytes;
  uint64_t last_use; /* the tick of the last operation that used it */
};

struct mc_mem_peers {
  struct peer_map *maps; /* [cap] */
  int cap;               /* maps_max(n_ranks) */
  int n;
  size_t held_bytes;  /* sum of maps[].bytes */
  uint64_t tick;      /* operations so far */
  uint64_t *seen_gen; /* [n_ranks]: each peer's mc_mem_frees count last heard */
  const char **ptr;   /* [2 * n_ranks]: the current operation's inputs, then outputs */
};

static size_t map_bound(void)
{
  return (size_t)mc_param_int(MC_P_SYM_MAP_BYTES);
}

/* Unmaps maps[i] (why: for the log) and moves the last one into its place. */
static void map_drop(struct ncclComm *comm, int i, const char *why)
{
  struct mc_mem_peers *c = comm->mem.peers;
  struct peer_map *m = &c->maps[i];

  (void)munmap((void *)(uintptr_t)m->base, m->bytes);
  c->held_bytes -= m->bytes;
  MC_INFO(MC_SUB_REG,
          "rank %d unmapped rank %d's ncclMemAlloc allocation %llu (%zu bytes, %s): %d mappings "
          "of peers' memory hold %zu bytes (MESHCCL_SYM_MAP_BYTES %zu)",
          comm->rank, m->peer, (unsigned long long)m->id, m->bytes, why, c->n - 1, c->held_bytes,
          map_bound());
  *m = c->maps[c->n - 1];
  c->n--;
}

/* The least recently used mapping the current operation does not use, or -1. */
static int map_lru(const struct mc_mem_peers *c)
{
  int best = -1;

  for (int i = 0; i < c->n; i++)
    if ((c->maps[i].last_use < c->tick) &&
        ((best < 0) || (c->maps[i].last_use < c->maps[best].last_use)))
      best = i;
  return best;
}

/* Drops unused mappings until bytes more fit in the bound (and a slot is
 * free); false when the operation's own mappings leave no slot. Only a new
 * mapping makes room: an operation that maps nothing drops nothing, so
 * operations that alternate between buffers (out of place on two windows,
 * in place on one of them) whose buffers together hold more than the bound
 * map nothing again (unmapping and mapping again 256 MiB windows of 3 peers
 * cost each operation milliseconds). */
static bool map_make_room(struct ncclComm *comm, size_t bytes)
{
  struct mc_mem_peers *c = comm->mem.peers;
  int i;

  while ((c->n == c->cap) || (c->held_bytes + bytes > map_bound())) {
    if ((i = map_lru(c)) < 0)
      return c->n < c->cap; /* over the byte bound only by this operation's own */
    map_drop(comm, i, "least recently used");
  }
  return true;
}

ncclResult_t mc_mem_peers_ready(struct ncclComm *comm)
{
  struct mc_mem_peers *c = comm->mem.peers;

  if (c == NULL) {
    MC_CHECK(mc_calloc(&c, 1));
    c->cap = maps_max(comm->n_ranks);
    if ((mc_calloc(&c->ptr, 2 * (size_t)comm->n_ranks) != ncclSuccess) ||
        (mc_calloc(&c->seen_gen, (size_t)comm->n_ranks) != ncclSuccess) ||
        (mc_calloc(&c->maps, (size_t)c->cap) != ncclSuccess)) {
      free(c->seen_gen);
      free(c->ptr);
      free(c);
      return ncclSystemError;
    }
    comm->mem.peers = c;
  }
  return ncclSuccess;
}

void mc_mem_peers_op(struct ncclComm *comm)
{
  comm->mem.peers->tick++;
}

const char **mc_mem_peers_in(struct ncclComm *comm)
{
  return comm->mem.peers->ptr;
}

const char **mc_mem_peers_out(struct ncclComm *comm)
{
  return comm->mem.peers->ptr + comm->n_ranks;
}

size_t mc_mem_peers_held(const struct ncclComm *comm, int *n_out)
{
  const struct mc_mem_peers *c = comm->mem.peers;

  *n_out = (c != NULL) ? c->n : 0;
  return (c != NULL) ? c->held_bytes : 0;
}

void mc_mem_peer_frees(struct ncclComm *comm, int peer, uint64_t gen,
                       const uint64_t freed[MC_MEM_FREED_IDS])
{
  struct mc_mem_peers *c = comm->mem.peers;
  uint64_t news = gen - c->seen_gen[peer];
  int i = 0;

  if (gen == c->seen_gen[peer])
    return;
  c->seen_gen[peer] = gen;
  while (i < c->n) {
    struct peer_map *m = &c->maps[i];
    bool gone = false;
    if ((m->peer == peer) && (m->last_use < c->tick)) {
      gone = (news > MC_MEM_FREED_IDS); /* which ones is not known: all of them */
      for (uint64_t k = 0; !gone && (k < news); k++)
        gone = (freed[k] == m->id);
    }
    if (gone)
      map_drop(comm, i, (news > MC_MEM_FREED_IDS) ? "its owner freed allocations" : "freed");
    else
      i++;
  }
}

/* Opens ref's memfd (of rank peer) through /proc and checks it is the one
 * ref names, of at least its size: *fd_out. */
static ncclResult_t peer_open(struct ncclComm *comm, int peer, const struct mc_mem_ref *ref,
                              const char *path, int *fd_out)
{
  struct stat st;
  int fd = open(path, O_RDONLY | O_CLOEXEC);

  if (fd < 0)
    return MC_FAIL(ncclSystemError,
                   "rank %d cannot open rank %d's ncclMemAlloc memory %s: %s (the ranks of a "
                   "host must share one PID namespace and user)",
                   comm->rank, peer, path, strerror(errno));
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return MC_FAIL(ncclSystemError, "rank %d: fstat of %s (rank %d's memory) failed: %s",
                   comm->rank, path, peer, strerror(e));
  }
  if (((uint64_t)st.st_ino != ref->ino) || ((uint64_t)st.st_dev != ref->dev) || (st.st_size < 0) ||
      ((uint64_t)st.st_size < (uint64_t)ref->alloc_bytes)) {
    close(fd);
    return MC_FAIL(ncclRemoteError,
                   "rank %d: %s is not the ncclMemAlloc memory rank %d (pid %d) announced: inode "
                   "%llu device %llu of %lld bytes where it said inode %llu device %llu of %zu "
                   "bytes; not mapping it (is rank %d in another PID namespace, or not a "
                   "meshccl process?)",
                   comm->rank, path, peer, ref->pid, (unsigned long long)st.st_ino,
                   (unsigned long long)st.st_dev, (long long)st.st_size,
                   (unsigned long long)ref->ino, (unsigned long long)ref->dev, ref->alloc_bytes,
                   peer);
  }
  *fd_out = fd;
  return ncclSuccess;
}

ncclResult_t mc_mem_peer_map(struct ncclComm *comm, int peer, const struct mc_mem_ref *ref,
                             const char **out)
{
  struct mc_mem_peers *c = comm->mem.peers;
  struct peer_map *m;
  char path[64];
  void *p;
  int fd = -1;

  for (int i = 0; i < c->n; i++) {
    m = &c->maps[i];
    if ((m->pid != ref->pid) || (m->id != ref->id))
      continue;
    if ((m->ino == ref->ino) && (m->dev == ref->dev) && (m->bytes == ref->alloc_bytes)) {
      m->last_use = c->tick;
      *out = m->base + ref->offset;
      return ncclSuccess;
    }
    map_drop(comm, i, "not what its owner describes now");
    break;
  }
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", ref->pid, ref->fd);
  MC_CHECK(peer_open(comm, peer, ref, path, &fd));
  if (!map_make_room(comm, ref->alloc_bytes)) {
    close(fd);
    return MC_FAIL(ncclInternalError, "rank %d: one operation maps more than %d allocations",
                   comm->rank, c->cap);
  }
  /* Populated: a collective reads the owner's buffers at any offset (a
   * benchmark rotates them, as nccl-tests does), and a page first touched
   * in the middle of an operation costs it a fault; here every page table
   * entry is made once, while mapping (the owner committed the memory at
   * ncclMemAlloc, so nothing is allocated here). */
  p = mmap(NULL, ref->alloc_bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(fd);
    return MC_FAIL(ncclSystemError, "rank %d cannot map %zu bytes of %s (rank %d): %s", comm->rank,
                   ref->alloc_bytes, path, peer, strerror(e));
  }
  close(fd);
  m = &c->maps[c->n++];
  *m = (struct peer_map){.peer = peer,
                         .pid = ref->pid,
                         .id = ref->id,
                         .ino = ref->ino,
                         .dev = ref->dev,
                         .base = p,
                         .bytes = ref->alloc_bytes,
                         .last_use = c->tick};
  c->held_bytes += ref->alloc_bytes;
  MC_INFO(MC_SUB_REG,
          "rank %d mapped rank %d's ncclMemAlloc memory %s (%zu bytes): %d mappings of peers' "
          "memory hold %zu bytes (MESHCCL_SYM_MAP_BYTES %zu)",
          comm->rank, peer, path, ref->alloc_bytes, c->n, c->held_bytes, map_bound());
  *out = (const char *)p + ref->offset;
  return ncclSuccess;
}

static void mem_peers_free(struct ncclComm *comm)
{
  struct mc_mem_peers *c = comm->mem.peers;

  if (c == NULL)
    return;
  for (int i = 0; i < c->n; i++)
    (void)munmap((void *)(uintptr_t)c->maps[i].base, c->maps[i].bytes);
  free(c->maps);
  free(c->seen_gen);
  free(c->ptr);
  free(c);
  comm->mem.peers = NULL;
}

bool mc_comm_sym_window(struct ncclComm *comm, const void *p, size_t bytes)
{
  const char *c = p;
  bool ok = false;

  pthread_mutex_lock(&comm->mem.reg_lock);
  for (const struct ncclWindow_vidmem *w = comm->mem.windows; w != NULL; w = w->next) {
    const char *b = w->buff;
    if (((w->flags & NCCL_WIN_COLL_SYMMETRIC) != 0) && (c >= b) && (c <= b + w->size) &&
        (bytes <= (size_t)(b + w->size - c))) {
      ok = true;
      break;
    }
  }
  pthread_mutex_unlock(&comm->mem.reg_lock);
  return ok;
}

void mc_comm_regs_free(struct ncclComm *comm)
{
  if (comm == NULL)
    return;
  mem_peers_free(comm);
  while (comm->mem.regs != NULL) {
    struct mc_comm_reg *r = comm->mem.regs;
    comm->mem.regs = r->next;
    free(r);
  }
  while (comm->mem.windows != NULL) {
    struct ncclWindow_vidmem *w = comm->mem.windows;
    comm->mem.windows = w->next;
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
    *value = (uint64_t)__atomic_load_n(&comm->life.is_suspended, __ATOMIC_ACQUIRE);
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
