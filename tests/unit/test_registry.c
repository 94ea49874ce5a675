/* SPDX-License-Identifier: Apache-2.0 */
/*
 * src/core/core_registry.c: handles are unknown until added, live until
 * released, then gone (never read: the tests pass addresses of objects that
 * were never registered or are freed); an address given out again is live
 * again; thousands of handles grow the table; released handles beyond the
 * kept number are forgotten while the live ones stay; NULL is never live.
 */
#include "core/registry.h"

#include "mc_test.h"

#include <stdlib.h>

static void states(void)
{
  char a = 0;
  char b = 0;

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
  mc_registry_release(NULL);
}

#define N_HANDLES 5000

static void many(void)
{
  char *block = malloc(N_HANDLES);

  MC_T_TRUE(block != NULL);
  for (int i = 0; i < N_HANDLES; i++)
    MC_T_OK(mc_registry_add(block + i));
  for (int i = 0; i < N_HANDLES; i++)
    MC_T_EQ_INT(mc_registry_state(block + i), MC_HANDLE_LIVE);
  /* Release the even ones: more than the registry keeps as gone. */
  for (int i = 0; i < N_HANDLES; i += 2)
    mc_registry_release(block + i);
  for (int i = 1; i < N_HANDLES; i += 2)
    MC_T_EQ_INT(mc_registry_state(block + i), MC_HANDLE_LIVE);
  /* The last released are still known as gone; early ones may be forgotten. */
  MC_T_EQ_INT(mc_registry_state(block + N_HANDLES - 2), MC_HANDLE_GONE);
  for (int i = 0; i < N_HANDLES; i += 2)
    MC_T_TRUE(mc_registry_state(block + i) != MC_HANDLE_LIVE);
  for (int i = 1; i < N_HANDLES; i += 2)
    mc_registry_release(block + i);
  for (int i = 0; i < N_HANDLES; i++)
    MC_T_TRUE(mc_registry_state(block + i) != MC_HANDLE_LIVE);
  free(block);
}

MC_T_MAIN(states, many)
