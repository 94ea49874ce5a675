/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The registry of live handles (registry.h): open addressing with linear
 * probing over a power-of-two table of 64-bit words, each a handle's
 * address with its state in the low bits (handles are 8-byte aligned).
 *
 * Every API call looks its communicator up, so a lookup takes no lock: it
 * reads the published table with atomic loads, between two reads of a
 * sequence number that is odd while the table is rewritten in place (a
 * seqlock; a lookup that overlapped a rewrite runs again). Writers (create,
 * destroy) hold a mutex. A released handle stays in its slot, marked gone,
 * so that no probe chain is cut and the error can say "destroyed"; its
 * address becomes live again if the allocator hands it out again. When
 * entries fill three quarters of the table it is rewritten in place
 * without the gone ones, or, when live ones fill half of it, replaced by
 * one twice as large; a replaced table is kept (a lookup may still be
 * reading it), and since tables only double, the kept ones add up to less
 * than the current one.
 */
#include "registry.h"

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define MIN_SLOTS  64
#define STATE_MASK 7u

struct table {
  struct table *replaced; /* the table this one replaced (kept for lookups in it) */
  size_t cap;             /* slots, a power of two */
  uint64_t slots[];       /* 0: empty; else address | enum mc_handle_state */
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct table *reg_table; /* published with release */
static uint64_t reg_seq;        /* odd while the table is rewritten in place */
static size_t reg_live;         /* the writers' counts, under reg_lock */
static size_t reg_gone;
static uint64_t reg_releases; /* atomic */

static size_t hash_ptr(uintptr_t p)
{
  uint64_t x = (uint64_t)p;

  x ^= x >> 33; /* a 64-bit finalizer: heap addresses differ in few middle bits */
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x;
}

/* The slot of key in t, or the empty slot where it would go (NULL: the
 * table is full, which only a lookup during a rewrite can see). */
static inline __attribute__((always_inline)) uint64_t *find(struct table *t, uintptr_t key)
{
  size_t i = hash_ptr(key) & (t->cap - 1);

  for (size_t n = 0; n < t->cap; n++) {
    uint64_t v = __atomic_load_n(&t->slots[i], __ATOMIC_RELAXED);
    if ((v == 0) || ((v & ~(uint64_t)STATE_MASK) == key))
      return &t->slots[i];
    i = (i + 1) & (t->cap - 1);
  }
  return NULL;
}

static void put(struct table *t, uint64_t v)
{
  uint64_t *slot = find(t, (uintptr_t)(v & ~(uint64_t)STATE_MASK));

  if (slot != NULL)
    __atomic_store_n(slot, v, __ATOMIC_RELAXED);
}

/* Rewrites reg_table in place with its live entries only; false without
 * memory (the table stays as it is). */
static bool purge(void)
{
  struct table *t = reg_table;
  uint64_t *live = malloc(reg_live * sizeof(*live) + 1);
  size_t n = 0;

  if (live == NULL)
    return false;
  for (size_t i = 0; i < t->cap; i++)
    if ((t->slots[i] & STATE_MASK) == MC_HANDLE_LIVE)
      live[n++] = t->slots[i];
  __atomic_store_n(&reg_seq, reg_seq + 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  for (size_t i = 0; i < t->cap; i++)
    __atomic_store_n(&t->slots[i], 0, __ATOMIC_RELAXED);
  for (size_t i = 0; i < n; i++)
    put(t, live[i]);
  __atomic_store_n(&reg_seq, reg_seq + 1, __ATOMIC_RELEASE);
  free(live);
  reg_gone = 0;
  return true;
}

/* Publishes a table of cap slots with every entry of the current one. */
static bool grow(size_t cap)
{
  struct table *old = reg_table;
  struct table *t = calloc(1, sizeof(*t) + cap * sizeof(t->slots[0]));

  if (t == NULL)
    return false;
  t->cap = cap;
  t->replaced = old;
  for (size_t i = 0; (old != NULL) && (i < old->cap); i++)
    if (old->slots[i] != 0)
      put(t, old->slots[i]);
  __atomic_store_n(&reg_table, t, __ATOMIC_RELEASE);
  return true;
}

/* Room for one more entry (the caller holds reg_lock). */
static ncclResult_t make_room(void)
{
  size_t cap = (reg_table == NULL) ? 0 : reg_table->cap;

  if (4 * (reg_live + reg_gone + 1) <= 3 * cap)
    return ncclSuccess;
  if ((2 * (reg_live + 1) <= cap) && purge())
    return ncclSuccess;
  if (grow((cap == 0) ? MIN_SLOTS : 2 * cap))
    return ncclSuccess;
  return MC_FAIL(ncclSystemError, "registry: out of memory for %zu communicator slots",
                 (cap == 0) ? (size_t)MIN_SLOTS : 2 * cap);
}

ncclResult_t mc_registry_add(const void *h)
{
  uintptr_t key = (uintptr_t)h;
  ncclResult_t res;
  uint64_t *slot;

  if ((h == NULL) || ((key & STATE_MASK) != 0))
    return MC_FAIL(ncclInternalError, "registry: handle %p is not 8-byte aligned", h);
  pthread_mutex_lock(&reg_lock);
  res = make_room();
  if (res == ncclSuccess) {
    slot = find(reg_table, key);
    if ((*slot & STATE_MASK) == MC_HANDLE_GONE)
      reg_gone--; /* the allocator gave the address out again */
    if ((*slot & STATE_MASK) != MC_HANDLE_LIVE)
      reg_live++;
    __atomic_store_n(slot, (uint64_t)key | MC_HANDLE_LIVE, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&reg_lock);
  return res;
}

void mc_registry_release(const void *h)
{
  uintptr_t key = (uintptr_t)h;
  uint64_t *slot;

  if ((h == NULL) || ((key & STATE_MASK) != 0))
    return;
  pthread_mutex_lock(&reg_lock);
  slot = (reg_table != NULL) ? find(reg_table, key) : NULL;
  if ((slot != NULL) && ((*slot & STATE_MASK) == MC_HANDLE_LIVE)) {
    __atomic_store_n(slot, (uint64_t)key | MC_HANDLE_GONE, __ATOMIC_RELEASE);
    __atomic_add_fetch(&reg_releases, 1, __ATOMIC_RELEASE);
    reg_live--;
    reg_gone++;
  }
  pthread_mutex_unlock(&reg_lock);
}

enum mc_handle_state mc_registry_state(const void *h)
{
  uintptr_t key = (uintptr_t)h;

  if ((h == NULL) || ((key & STATE_MASK) != 0))
    return MC_HANDLE_UNKNOWN;
  for (;;) {
    uint64_t seq = __atomic_load_n(&reg_seq, __ATOMIC_ACQUIRE);
    struct table *t = __atomic_load_n(&reg_table, __ATOMIC_ACQUIRE);
    uint64_t v = 0;
    uint64_t *slot;
    if ((seq & 1) != 0) {
      sched_yield(); /* a rewrite of a few thousand words is under way */
      continue;
    }
    if (t == NULL)
      return MC_HANDLE_UNKNOWN;
    slot = find(t, key);
    if (slot != NULL)
      v = __atomic_load_n(slot, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&reg_seq, __ATOMIC_RELAXED) == seq)
      return (enum mc_handle_state)(v & STATE_MASK);
  }
}

uint64_t mc_registry_releases(void)
{
  return __atomic_load_n(&reg_releases, __ATOMIC_ACQUIRE);
}
