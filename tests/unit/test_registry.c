/* SPDX-License-Identifier: Apache-2.0 */
/*
 * src/core/core_registry.c: handles are unknown until added, live until
 * released, then gone (never read: the tests pass addresses of objects that
 * were never registered or are freed); an address given out again is live
 * again; thousands of handles grow the table; when released ones fill it,
 * they are forgotten while the live ones stay; NULL and unaligned addresses
 * are never live; lookups from other threads while the table is rewritten
 * always find the live handles.
 */
#include "core/registry.h"

#include "mc_test.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

static void states(void)
{
  uint64_t a = 0;
  uint64_t b = 0;

  MC_T_EQ_INT(mc_registry_state(&a), MC_HANDLE_UNKNOWN);
  MC_T_OK(mc_registry_add(&a));
  MC_T_EQ_INT(mc_registry_state(&a), MC_HANDLE_LIVE);
  MC_T_EQ_INT(mc_registry_state(&b), MC_HANDLE_UNKNOWN);
  mc_registry_release(&a);
  MC_T_EQ_INT(mc_registry_state(&a), MC_HANDLE_GONE);
  mc_registry_release(&a); /* twice: stays gone */
  MC_T_EQ_INT(mc_registry_state(&a), MC_HANDLE_GONE);
  MC_T_OK(mc_registry_add(&a)); /* the allocator reused the address */
  MC_T_EQ_INT(mc_registry_state(&a), MC_HANDLE_LIVE);
  mc_registry_release(&a);
  mc_registry_release(&b); /* never added: nothing */
  MC_T_EQ_INT(mc_registry_state(&b), MC_HANDLE_UNKNOWN);
  MC_T_EQ_INT(mc_registry_state(NULL), MC_HANDLE_UNKNOWN);
  MC_T_EQ_INT(mc_registry_add(NULL), ncclInternalError);
  MC_T_EQ_INT(mc_registry_add((char *)&a + 1), ncclInternalError);
  MC_T_EQ_INT(mc_registry_state((char *)&a + 1), MC_HANDLE_UNKNOWN);
  mc_registry_release(NULL);
}

#define N_HANDLES 5000

/* Addresses beyond block (never dereferenced), distinct per round. */
static const void *other(const uint64_t *block, int i, int round)
{
  return (const void *)((uintptr_t)(block + i) + 8u * N_HANDLES * (unsigned)(round + 1));
}

static void many(void)
{
  uint64_t *block = malloc(N_HANDLES * sizeof(*block));

  MC_T_TRUE(block != NULL);
  for (int i = 0; i < N_HANDLES; i++)
    MC_T_OK(mc_registry_add(block + i));
  for (int i = 0; i < N_HANDLES; i++)
    MC_T_EQ_INT(mc_registry_state(block + i), MC_HANDLE_LIVE);
  for (int i = 0; i < N_HANDLES; i += 2)
    mc_registry_release(block + i);
  for (int i = 0; i < N_HANDLES; i++)
    MC_T_EQ_INT(mc_registry_state(block + i), (i % 2 == 0) ? MC_HANDLE_GONE : MC_HANDLE_LIVE);
  /* New handles fill the table with the gone ones: it is rewritten without
   * them (or grows); the live ones stay live, the gone ones never become live. */
  for (int round = 0; round < 4; round++) {
    for (int i = 0; i < N_HANDLES; i += 2)
      MC_T_OK(mc_registry_add(other(block, i, round)));
    for (int i = 0; i < N_HANDLES; i += 2)
      mc_registry_release(other(block, i, round));
  }
  for (int i = 0; i < N_HANDLES; i++)
    MC_T_EQ_INT(mc_registry_state(block + i) == MC_HANDLE_LIVE, i % 2 == 1);
  for (int i = 1; i < N_HANDLES; i += 2)
    mc_registry_release(block + i);
  for (int i = 0; i < N_HANDLES; i++)
    MC_T_TRUE(mc_registry_state(block + i) != MC_HANDLE_LIVE);
  free(block);
}

/* Another thread looks up live handles while this one fills and empties
 * the table again and again (rewrites and growth under its lookups). */
static uint64_t g_live[64];
static volatile int g_stop;
static int g_misses;

static void *looker(void *arg)
{
  (void)arg;
  while (!g_stop)
    for (int i = 0; i < 64; i++)
      if (mc_registry_state(&g_live[i]) != MC_HANDLE_LIVE)
        __atomic_add_fetch(&g_misses, 1, __ATOMIC_RELAXED);
  return NULL;
}

static void concurrent(void)
{
  uint64_t *churn = malloc(4096 * sizeof(*churn));
  pthread_t th;

  MC_T_TRUE(churn != NULL);
  for (int i = 0; i < 64; i++)
    MC_T_OK(mc_registry_add(&g_live[i]));
  MC_T_EQ_INT(pthread_create(&th, NULL, looker, NULL), 0);
  for (int round = 0; round < 50; round++) {
    for (int i = 0; i < 4096; i++)
      MC_T_OK(mc_registry_add(&churn[i]));
    for (int i = 0; i < 4096; i++)
      mc_registry_release(&churn[i]);
  }
  g_stop = 1;
  pthread_join(th, NULL);
  MC_T_EQ_INT(g_misses, 0);
  for (int i = 0; i < 64; i++)
    mc_registry_release(&g_live[i]);
  free(churn);
}

MC_T_MAIN(states, many, concurrent)
