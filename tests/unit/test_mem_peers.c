/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The map of a peer's ncclMemAlloc memory (init_mem.c, used by the symmetric
 * collectives): the memfd opened through /proc is checked against what its
 * owner described (inode, device, size) before anything is mapped, so a
 * wrong descriptor or a size larger than the file is a named error, not a
 * SIGBUS; the cache holds at most MESHCCL_SYM_MAP_BYTES and drops what the
 * owner freed; the PID namespace comparison of two peer infos.
 * The "peer" is this process: its allocations are opened as
 * /proc/self's pid, which is what a rank of the same PID namespace does.
 */
#include "init/comm.h"

#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "params.h"
#include "utils.h"

#include "mc_test.h"

#define PAGE 4096

/* A two-rank communicator with just what the peer map uses. */
static struct ncclComm *fake_comm(void)
{
  struct ncclComm *comm = calloc(1, sizeof(*comm));

  MC_T_TRUE(comm != NULL);
  comm->rank = 0;
  comm->n_ranks = 2;
  MC_T_OK(mc_mem_peers_ready(comm));
  mc_mem_peers_op(comm);
  return comm;
}

static void fake_comm_free(struct ncclComm *comm)
{
  mc_comm_regs_free(comm);
  free(comm);
}

/* A memfd of bytes, described as ncclMemAlloc would (ref). */
static int make_memfd(size_t bytes, uint64_t id, struct mc_mem_ref *ref)
{
  struct stat st;
  int fd = memfd_create("test-mem-peers", MFD_CLOEXEC);

  MC_T_TRUE(fd >= 0);
  MC_T_EQ_INT(ftruncate(fd, (off_t)bytes), 0);
  MC_T_EQ_INT(fstat(fd, &st), 0);
  *ref = (struct mc_mem_ref){.pid = (int)getpid(),
                             .fd = fd,
                             .id = id,
                             .ino = (uint64_t)st.st_ino,
                             .dev = (uint64_t)st.st_dev,
                             .alloc_bytes = bytes,
                             .offset = 0};
  return fd;
}

static void wrong_inode(void)
{
  struct ncclComm *comm = fake_comm();
  struct mc_mem_ref ref;
  const char *p = NULL;
  int fd = make_memfd(PAGE, 1, &ref);
  int n;

  ref.ino++; /* another file than the one described */
  MC_T_EQ_INT(mc_mem_peer_map(comm, 1, &ref, &p), ncclRemoteError);
  MC_T_CONTAINS(mc_t_last_error(), "is not the ncclMemAlloc memory rank 1 (pid");
  MC_T_CONTAINS(mc_t_last_error(), "not mapping it");
  MC_T_TRUE(p == NULL);
  ref.ino--;
  ref.dev++;
  MC_T_EQ_INT(mc_mem_peer_map(comm, 1, &ref, &p), ncclRemoteError);
  MC_T_EQ_INT(mc_mem_peers_held(comm, &n), 0);
  MC_T_EQ_INT(n, 0);
  close(fd);
  fake_comm_free(comm);
}

static void size_too_small(void)
{
  struct ncclComm *comm = fake_comm();
  struct mc_mem_ref ref;
  const char *p = NULL;
  int fd = make_memfd(PAGE, 1, &ref);

  /* A file of one page described as 64: mapping it all and reading past the
   * first page would be a SIGBUS. */
  ref.alloc_bytes = 64 * PAGE;
  MC_T_EQ_INT(mc_mem_peer_map(comm, 1, &ref, &p), ncclRemoteError);
  MC_T_CONTAINS(mc_t_last_error(), "of 4096 bytes where it said");
  MC_T_CONTAINS(mc_t_last_error(), "of 262144 bytes");
  MC_T_TRUE(p == NULL);
  close(fd);
  fake_comm_free(comm);
}

static void real_allocation(void)
{
  struct ncclComm *comm = fake_comm();
  struct mc_mem_ref ref;
  const char *p = NULL;
  char *buf = NULL;
  int n;

  MC_T_OK(ncclMemAlloc((void **)&buf, 3 * PAGE));
  memset(buf, 0x5a, 3 * PAGE);
  MC_T_TRUE(mc_mem_lookup(buf + PAGE, PAGE, &ref));
  MC_T_OK(mc_mem_peer_map(comm, 1, &ref, &p));
  MC_T_EQ_INT((unsigned char)p[0], 0x5a);
  MC_T_EQ_INT((unsigned char)p[2 * PAGE - 1], 0x5a);
  MC_T_EQ_INT(mc_mem_peers_held(comm, &n), 3 * PAGE);
  MC_T_EQ_INT(n, 1);
  fake_comm_free(comm);
  MC_T_OK(ncclMemFree(buf));
}

/* The peer's free list drops its mapping at the next operation. */
static void owner_frees(void)
{
  struct ncclComm *comm = fake_comm();
  struct mc_mem_ref ra;
  struct mc_mem_ref rb;
  uint64_t gen;
  uint64_t freed[MC_MEM_FREED_IDS];
  const char *p;
  char *a = NULL;
  char *b = NULL;
  int n;

  MC_T_OK(ncclMemAlloc((void **)&a, PAGE));
  MC_T_OK(ncclMemAlloc((void **)&b, 2 * PAGE));
  MC_T_TRUE(mc_mem_lookup(a, PAGE, &ra));
  MC_T_TRUE(mc_mem_lookup(b, 2 * PAGE, &rb));
  mc_mem_frees(&gen, freed);
  mc_mem_peer_frees(comm, 1, gen, freed);
  MC_T_OK(mc_mem_peer_map(comm, 1, &ra, &p));
  MC_T_OK(mc_mem_peer_map(comm, 1, &rb, &p));
  MC_T_EQ_INT(mc_mem_peers_held(comm, &n), 3 * PAGE);
  MC_T_OK(ncclMemFree(a));
  mc_mem_peers_op(comm); /* the next operation */
  mc_mem_frees(&gen, freed);
  MC_T_EQ_INT(freed[0], ra.id);
  mc_mem_peer_frees(comm, 1, gen, freed);
  MC_T_EQ_INT(mc_mem_peers_held(comm, &n), 2 * PAGE);
  MC_T_EQ_INT(n, 1);
  /* More frees than the list names: every mapping of that peer goes. */
  for (int i = 0; i < MC_MEM_FREED_IDS + 1; i++) {
    char *x = NULL;
    MC_T_OK(ncclMemAlloc((void **)&x, PAGE));
    MC_T_OK(ncclMemFree(x));
  }
  mc_mem_peers_op(comm);
  mc_mem_frees(&gen, freed);
  mc_mem_peer_frees(comm, 1, gen, freed);
  MC_T_EQ_INT(mc_mem_peers_held(comm, &n), 0);
  fake_comm_free(comm);
  MC_T_OK(ncclMemFree(b));
}

/* One operation (mc_mem_peers_op) mapping bufs[first..last] as rank 1's. */
static void map_op(struct ncclComm *comm, char **bufs, int first, int last)
{
  struct mc_mem_ref ref;
  const char *p;

  mc_mem_peers_op(comm);
  for (int i = first; i <= last; i++) {
    MC_T_TRUE(mc_mem_lookup(bufs[i], 2 * PAGE, &ref));
    MC_T_OK(mc_mem_peer_map(comm, 1, &ref, &p));
  }
}

/* MESHCCL_SYM_MAP_BYTES: a new mapping makes room by dropping what the
 * current operation does not use, least recently used first; an
 * operation's own stay past the bound until another needs the room. */
static void byte_bound(void)
{
  struct ncclComm *comm;
  char *bufs[5] = {NULL, NULL, NULL, NULL, NULL};
  int n;

  mc_param_set_for_tests(MC_P_SYM_MAP_BYTES, "16384"); /* 4 pages */
  comm = fake_comm();
  for (int i = 0; i < 5; i++)
    MC_T_OK(ncclMemAlloc((void **)&bufs[i], 2 * PAGE));
  for (int i = 0; i < 4; i++) {
    map_op(comm, bufs, i, i); /* one operation per buffer */
    MC_T_TRUE(mc_mem_peers_held(comm, &n) <= 4 * PAGE);
  }
  MC_T_EQ_INT(n, 2);
  /* One operation's own buffers stay mapped, past the bound if need be. */
  map_op(comm, bufs, 0, 3);
  MC_T_EQ_INT(mc_mem_peers_held(comm, &n), 8 * PAGE);
  /* Operations that map nothing new drop nothing: the same buffers again,
   * or half of them (in place on one of two windows), then all again. */
  map_op(comm, bufs, 0, 3);
  MC_T_EQ_INT(mc_mem_peers_held(comm, &n), 8 * PAGE);
  map_op(comm, bufs, 2, 3);
  map_op(comm, bufs, 2, 3);
  MC_T_EQ_INT(mc_mem_peers_held(comm, &n), 8 * PAGE);
  map_op(comm, bufs, 0, 3);
  MC_T_EQ_INT(mc_mem_peers_held(comm, &n), 8 * PAGE);
  MC_T_EQ_INT(n, 4);
  /* A new mapping brings it back within the bound: the least recently used
   * go (bufs[0] and [1], last used before [2] and [3], then one of those). */
  map_op(comm, bufs, 2, 3);
  map_op(comm, bufs, 4, 4);
  MC_T_EQ_INT(mc_mem_peers_held(comm, &n), 4 * PAGE);
  MC_T_EQ_INT(n, 2);
  fake_comm_free(comm);
  for (int i = 0; i < 5; i++)
    MC_T_OK(ncclMemFree(bufs[i]));
  mc_param_reset_for_tests();
}

static void same_pidns(void)
{
  struct mc_peer_info a = {.host_hash = 1, .pidns_ino = 4026531836ull, .pidns_dev = 4};
  struct mc_peer_info b = a;

  MC_T_TRUE(mc_peer_same_pidns(&a, &b));
  b.pidns_ino++;
  MC_T_TRUE(!mc_peer_same_pidns(&a, &b));
  b = a;
  b.pidns_dev++;
  MC_T_TRUE(!mc_peer_same_pidns(&a, &b));
  b = a;
  b.host_hash++;
  MC_T_TRUE(!mc_peer_same_pidns(&a, &b));
  /* unknown on both sides is not "the same" */
  a.pidns_ino = 0;
  a.pidns_dev = 0;
  b = a;
  MC_T_TRUE(!mc_peer_same_pidns(&a, &b));
  /* this process's own, as mc_pidns_id reads it */
  mc_pidns_id(&a.pidns_ino, &a.pidns_dev);
  if (a.pidns_ino == 0)
    MC_T_SKIP("/proc/self/ns/pid cannot be read");
  b = a;
  MC_T_TRUE(mc_peer_same_pidns(&a, &b));
}

MC_T_MAIN(wrong_inode, size_too_small, real_allocation, owner_frees, byte_bound, same_pidns)
