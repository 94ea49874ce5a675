/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Gathers, broadcasts and a barrier among some ranks of a communicator over
 * its bootstrap (init_gather.c): a gather up and a binomial tree down.
 */
#ifndef MC_INIT_GATHER_H
#define MC_INIT_GATHER_H

#include <stddef.h>

#include "nccl.h"

struct ncclComm;

/* Allgather among ranks[0..n) (ranks NULL: all ranks; this rank is
 * index my_index): slice i of data is ranks[i]'s, the caller fills its own
 * first. A gather to index 0, then mc_comm_bcast_tree (init_gather.c): a
 * message up and one down per rank where the ring allgather passes n - 1
 * through each. Uses tags tag and tag + 1. Blocks; errors as mc_boot_send/recv. */
ncclResult_t mc_comm_allgather_tree(struct ncclComm *comm, const int *ranks, int n, int my_index,
                                    void *data, size_t slice_bytes, int tag);
/* mc_comm_allgather_tree over all ranks whose broadcast carries the array as
 * pack makes it (rank 0 packs, every other rank unpacks into data): for
 * fixed-size slices that a packed form holds in fewer bytes. pack(data, n,
 * NULL) gives the packed bytes; unpack fails on bytes that do not fit.
 * Beyond the gather's rank count it is the ring allgather of the slices.
 * Uses tags tag .. tag + 2. */
struct mc_comm_packing {
  size_t (*pack)(const void *all, int n, void *buf);
  ncclResult_t (*unpack)(const void *buf, size_t bytes, int n, void *all);
};
ncclResult_t mc_comm_allgather_packed(struct ncclComm *comm, void *data, size_t slice_bytes,
                                      const struct mc_comm_packing *packing, int tag);
/* Barrier among ranks[0..n) (NULL: all ranks) over the same connections as
 * the gathers and broadcasts above: a message up to index 0, then released
 * down its binomial tree (one message up and one down per rank where the
 * bootstrap's dissemination barrier makes log2(n) connections and passes
 * log2(n) messages each way). Beyond the gather's rank count it is the
 * bootstrap's barrier. Uses tags tag and tag + 1. */
ncclResult_t mc_comm_barrier_tree(struct ncclComm *comm, const int *ranks, int n, int my_index,
                                  int tag);
/* Broadcast of bytes of data from index 0 of ranks[0..n) (NULL: all ranks)
 * down a binomial tree: each rank receives once and forwards to at most
 * log2(n) ranks. Blocks; errors as mc_boot_send/recv. */
ncclResult_t mc_comm_bcast_tree(struct ncclComm *comm, const int *ranks, int n, int my_index,
                                void *data, size_t bytes, int tag);

#endif /* MC_INIT_GATHER_H */
