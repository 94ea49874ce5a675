/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /dev/shm segments of the SHM transport (src/transport/tp_shm.c): both
 * ends map every page at connect, so that no step of a collective takes a
 * page fault on a FIFO page (the pages a mapping has in this process's page
 * tables are its Rss in /proc/self/smaps); what one end writes the other
 * reads; a segment smaller than announced, a missing one, and a name that
 * exists already are named errors.
 */
#include "transport/tp_int.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "nccl.h"

#include "mc_test.h"

#define SEG_BYTES (1u << 20)

/* Rss (KiB) of the mapping that starts at p in /proc/self/smaps; -1: none. */
static long rss_kib(const void *p)
{
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[512];
  bool in = false;
  long kib = -1;

  MC_T_TRUE(f != NULL);
  while (fgets(line, sizeof(line), f) != NULL) {
    unsigned long lo;
    unsigned long hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
      in = (lo == (unsigned long)(uintptr_t)p);
      continue;
    }
    if (in && (sscanf(line, "Rss: %ld kB", &kib) == 1))
      break;
  }
  fclose(f);
  return kib;
}

static void seg_name(char *name, size_t bytes, const char *what)
{
  snprintf(name, bytes, "/meshccl-test-tp-shm-%s-%d", what, (int)getpid());
}

/* Both maps hold every page once made, and share the bytes. */
static void both_ends_map_every_page(void)
{
  char name[96];
  void *recv_map = NULL;
  void *send_map = NULL;

  seg_name(name, sizeof(name), "pages");
  MC_T_OK(mc_shm_create(name, SEG_BYTES, &recv_map));
  MC_T_OK(mc_shm_attach(name, SEG_BYTES, &send_map));
  MC_T_EQ_INT(shm_unlink(name), 0); /* nothing left in /dev/shm if a check fails */
  MC_T_TRUE(send_map != recv_map);
  MC_T_EQ_INT((int)rss_kib(recv_map), SEG_BYTES / 1024);
  MC_T_EQ_INT((int)rss_kib(send_map), SEG_BYTES / 1024);
  for (size_t i = 0; i < SEG_BYTES; i += 4096)
    ((unsigned char *)send_map)[i + (i / 4096) % 4096] = (unsigned char)(i / 4096 + 1);
  for (size_t i = 0; i < SEG_BYTES; i += 4096)
    MC_T_EQ_INT(((unsigned char *)recv_map)[i + (i / 4096) % 4096], (unsigned char)(i / 4096 + 1));
  MC_T_EQ_INT(munmap(send_map, SEG_BYTES), 0);
  MC_T_EQ_INT(munmap(recv_map, SEG_BYTES), 0);
}

/* The sender's side: a segment smaller than announced, or gone; the
 * receiver's: a name that exists. Each call's error is kept, and the
 * segment removed, before any check. */
static void attach_errors_name_the_segment(void)
{
  char name[96];
  char want[160];
  char err[3][256];
  ncclResult_t res[3];
  void *map = NULL;
  void *other[3] = {NULL, NULL, NULL};

  seg_name(name, sizeof(name), "small");
  MC_T_OK(mc_shm_create(name, 4096, &map));
  res[0] = mc_shm_attach(name, 8192, &other[0]);
  snprintf(err[0], sizeof(err[0]), "%s", ncclGetLastError(NULL));
  res[1] = mc_shm_create(name, 4096, &other[1]);
  snprintf(err[1], sizeof(err[1]), "%s", ncclGetLastError(NULL));
  MC_T_EQ_INT(shm_unlink(name), 0);
  res[2] = mc_shm_attach(name, 4096, &other[2]);
  snprintf(err[2], sizeof(err[2]), "%s", ncclGetLastError(NULL));
  MC_T_EQ_INT(munmap(map, 4096), 0);
  for (int i = 0; i < 3; i++) {
    MC_T_EQ_INT(res[i], ncclSystemError);
    MC_T_NULL(other[i]);
  }
  snprintf(want, sizeof(want), "/dev/shm%s is smaller than the 8192 bytes announced", name);
  MC_T_CONTAINS(err[0], want);
  snprintf(want, sizeof(want), "shm_open(/dev/shm%s): File exists", name);
  MC_T_CONTAINS(err[1], want);
  snprintf(want, sizeof(want), "opening /dev/shm%s of the peer: No such file or directory", name);
  MC_T_CONTAINS(err[2], want);
}

MC_T_MAIN(both_ends_map_every_page, attach_errors_name_the_segment)
