/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The registry of live handles (registry.h): open addressing with linear
 * probing over a power-of-two table, grown at half full. Gone entries are
 * kept up to MAX_GONE; beyond that the table is rebuilt with the live ones
 * only, so a program that creates and destroys communicators in a loop
 * keeps a bounded table.
 */
#include "registry.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

#define MIN_SLOTS 64
#define MAX_GONE  256

struct slot {
  uintptr_t key; /* 0: empty */
  uint8_t state; /* enum mc_handle_state */
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *reg_slots;
static size_t reg_cap; /* slots, a power of two */
static size_t reg_used;
static size_t reg_gone;

static size_t hash_ptr(uintptr_t p)
{
  uint64_t x = (uint64_t)p;

  x ^= x >> 33; /* a 64-bit finalizer: heap addresses differ in few middle bits */
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x;
}

static struct slot *find(struct slot *slots, size_t cap, uintptr_t key)
{
  size_t i = hash_ptr(key) & (cap - 1);

  while ((slots[i].key != 0) && (slots[i].key != key))
    i = (i + 1) & (cap - 1);
  return &slots[i];
}

/* A table of cap slots with the live entries (and the gone ones when
 * keep_gone); false when it cannot be allocated (the old one stays). */
static bool rebuild(size_t cap, bool keep_gone)
{
  struct slot *n = calloc(cap, sizeof(*n));
  size_t used = 0;
  size_t gone = 0;

  if (n == NULL)
    return false;
  for (size_t i = 0; i < reg_cap; i++) {
    struct slot *s = &reg_slots[i];
    if ((s->key == 0) || ((s->state == MC_HANDLE_GONE) && !keep_gone))
      continue;
    *find(n, cap, s->key) = *s;
    used++;
    gone += (s->state == MC_HANDLE_GONE) ? 1 : 0;
  }
  free(reg_slots);
  reg_slots = n;
  reg_cap = cap;
  reg_used = used;
  reg_gone = gone;
  return true;
}

ncclResult_t mc_registry_add(const void *h)
{
  uintptr_t key = (uintptr_t)h;
  struct slot *s;
  ncclResult_t res = ncclSuccess;

  if (h == NULL)
    return MC_FAIL(ncclInternalError, "registry: NULL handle");
  pthread_mutex_lock(&reg_lock);
  if ((2 * (reg_used + 1) > reg_cap) && !rebuild((reg_cap == 0) ? MIN_SLOTS : 2 * reg_cap, true))
    res = MC_FAIL(ncclSystemError, "registry: out of memory for %zu communicator slots",
                  (reg_cap == 0) ? (size_t)MIN_SLOTS : 2 * reg_cap);
  if (res == ncclSuccess) {
    s = find(reg_slots, reg_cap, key);
    if (s->key == 0) {
      s->key = key;
      reg_used++;
    } else if (s->state == MC_HANDLE_GONE) {
      reg_gone--; /* the allocator gave the address out again */
    }
    s->state = MC_HANDLE_LIVE;
  }
  pthread_mutex_unlock(&reg_lock);
  return res;
}

void mc_registry_release(const void *h)
{
  struct slot *s;

  if (h == NULL)
    return;
  pthread_mutex_lock(&reg_lock);
  if (reg_cap > 0) {
    s = find(reg_slots, reg_cap, (uintptr_t)h);
    if ((s->key != 0) && (s->state == MC_HANDLE_LIVE)) {
      s->state = MC_HANDLE_GONE;
      reg_gone++;
    }
    /* Forgetting the gone ones only loses the word "destroyed" in an error;
     * when no new table can be allocated, the old one keeps them. */
    if (reg_gone > MAX_GONE)
      (void)rebuild(reg_cap, false);
  }
  pthread_mutex_unlock(&reg_lock);
}

enum mc_handle_state mc_registry_state(const void *h)
{
  enum mc_handle_state st = MC_HANDLE_UNKNOWN;
  struct slot *s;

  if (h == NULL)
    return MC_HANDLE_UNKNOWN;
  pthread_mutex_lock(&reg_lock);
  if (reg_cap > 0) {
    s = find(reg_slots, reg_cap, (uintptr_t)h);
    if (s->key != 0)
      st = (enum mc_handle_state)s->state;
  }
  pthread_mutex_unlock(&reg_lock);
  return st;
}
