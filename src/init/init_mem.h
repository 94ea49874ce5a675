/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A communicator's memory (init_mem.c): ncclMemAlloc's memfd-backed
 * allocations, the peers' allocations mapped here for the symmetric
 * collectives (coll_sym.c), buffer registrations and windows.
 */
#ifndef MC_INIT_MEM_H
#define MC_INIT_MEM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

struct ncclComm;
struct mc_mem_peers;
struct mc_comm_reg;

/* A communicator's memory (its part of struct ncclComm, comm->mem): the
 * host meaning of NCCL's registration calls and the peers' memory mapped
 * here, freed with the communicator. */
struct mc_comm_mem {
  struct mc_mem_peers *peers;        /* peers' ncclMemAlloc memory mapped here */
  pthread_mutex_t reg_lock;          /* guards regs and windows */
  struct mc_comm_reg *regs;          /* ncclCommRegister handles, freed at destroy */
  struct ncclWindow_vidmem *windows; /* ncclCommWindowRegister windows, freed at destroy */
};

/* Frees every registration and window of comm (destroy). */
void mc_comm_regs_free(struct ncclComm *comm);

/* Where [p, p + bytes) lies in an ncclMemAlloc allocation of this process
 * (init_mem.c): what a peer on this host needs to map it
 * (/proc/<pid>/fd/<fd>, id naming the allocation for its cache). */
struct mc_mem_ref {
  int pid;
  int fd;
  uint64_t id;
  uint64_t ino; /* the memfd's st_ino and st_dev, checked by the peer that opens it */
  uint64_t dev;
  size_t alloc_bytes;
  size_t offset;
};
bool mc_mem_lookup(const void *p, size_t bytes, struct mc_mem_ref *out);
/* ncclMemFree in this process: how many so far (*gen_out) and the ids of
 * the last MC_MEM_FREED_IDS freed, the latest first (0 past gen). */
#define MC_MEM_FREED_IDS 8
void mc_mem_frees(uint64_t *gen_out, uint64_t freed_out[MC_MEM_FREED_IDS]);
/* The communicator's cache of peers' mappings exists (made at the first
 * symmetric operation's plan, so that its progress cannot fail on it). */
ncclResult_t mc_mem_peers_ready(struct ncclComm *comm);
/* A new operation maps peers' memory (mc_mem_peer_map): the mappings it
 * uses stay while it runs, and after it until a new mapping needs their
 * room. After mc_mem_peers_ready. */
void mc_mem_peers_op(struct ncclComm *comm);
/* Rank peer said (mc_mem_frees of its process) that it freed gen
 * allocations so far, the last of them freed: drops this communicator's
 * mappings of those (of all of peer's not used by this operation when more
 * were freed since it last said). */
void mc_mem_peer_frees(struct ncclComm *comm, int peer, uint64_t gen,
                       const uint64_t freed[MC_MEM_FREED_IDS]);
/* Bytes and mappings of peers' memory held by comm now. */
size_t mc_mem_peers_held(const struct ncclComm *comm, int *n_out);
/* The operation's peer buffers: [n_ranks] inputs and outputs (the caller's). */
const char **mc_mem_peers_in(struct ncclComm *comm);
const char **mc_mem_peers_out(struct ncclComm *comm);
/* Where the memory ref (of rank peer, on this host, in this PID namespace)
 * is mapped here: *out (read-only). ncclSystemError naming the path when it
 * cannot be opened; ncclRemoteError naming the peer when what it opens is
 * not the memfd ref says (inode, device) or is smaller than alloc_bytes:
 * nothing is mapped then (a mapping past the file's end is a SIGBUS). */
ncclResult_t mc_mem_peer_map(struct ncclComm *comm, int peer, const struct mc_mem_ref *ref,
                             const char **out);
/* [p, p + bytes) lies in a NCCL_WIN_COLL_SYMMETRIC window of comm. */
bool mc_comm_sym_window(struct ncclComm *comm, const void *p, size_t bytes);

#endif /* MC_INIT_MEM_H */
