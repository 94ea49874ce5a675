/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allgather and broadcast among some ranks of a communicator for the init
 * stages, over the bootstrap's send/recv: a gather to the first rank, then a
 * binomial broadcast from it. The result is the allgather's (slice i is
 * ranks[i]'s, in that order); the cost per rank is one message up and one
 * down plus at most log2(n) forwards, where the ring allgather
 * (mc_boot_allgather_sub, NCCL's bootstrapIntraNodeAllGather) takes n - 1
 * messages through every rank: on a host with many more ranks than cores,
 * those messages are most of the init's system time.
 */
#include "init_gather.h"

#include "comm.h"

#include "check.h"

#include <stdint.h>
#include <stdlib.h>

/* The first rank holds one connection per other rank while it gathers:
 * beyond this many ranks the ring allgather is used. */
#define GATHER_MAX_RANKS 1024

static int rank_of(const int *ranks, int i)
{
  return (ranks != NULL) ? ranks[i] : i;
}

ncclResult_t mc_comm_bcast_tree(struct ncclComm *comm, const int *ranks, int n, int my_index,
                                void *data, size_t bytes, int tag)
{
  int mask = 1;

  if (my_index != 0) {
    /* Parent: my_index without its highest bit; children: my_index + larger powers of 2. */
    while ((mask << 1) <= my_index)
      mask <<= 1;
    MC_CHECK(mc_boot_recv(comm->bootstrap.boot, rank_of(ranks, my_index - mask), tag, data, bytes));
    mask <<= 1;
  }
  for (; my_index + mask < n; mask <<= 1)
    MC_CHECK(mc_boot_send(comm->bootstrap.boot, rank_of(ranks, my_index + mask), tag, data, bytes));
  return ncclSuccess;
}

/* The gather half of the allgathers: every slice to index 0. */
static ncclResult_t gather_tree(struct ncclComm *comm, const int *ranks, int n, int my_index,
                                char *d, size_t slice_bytes, int tag)
{
  if (slice_bytes > MC_BOOT_MAX_MSG_BYTES / (size_t)n)
    return MC_FAIL(ncclInvalidArgument, "Init: allgather of %zu bytes per rank is too large",
                   slice_bytes);
  if (my_index != 0)
    return mc_boot_send(comm->bootstrap.boot, rank_of(ranks, 0), tag,
                        d + (size_t)my_index * slice_bytes, slice_bytes);
  for (int i = 1; i < n; i++)
    MC_CHECK(mc_boot_recv(comm->bootstrap.boot, rank_of(ranks, i), tag, d + (size_t)i * slice_bytes,
                          slice_bytes));
  return ncclSuccess;
}

ncclResult_t mc_comm_allgather_packed(struct ncclComm *comm, void *data, size_t slice_bytes,
                                      const struct mc_comm_packing *packing, int tag)
{
  int n = comm->n_ranks;
  int me = comm->rank;
  uint64_t bytes = 0;
  char *buf = NULL;
  ncclResult_t res;

  if (n == 1)
    return ncclSuccess;
  if (n > GATHER_MAX_RANKS)
    return mc_boot_allgather(comm->bootstrap.boot, data, slice_bytes);
  MC_CHECK(gather_tree(comm, NULL, n, me, data, slice_bytes, tag));
  if (me == 0)
    bytes = packing->pack(data, n, NULL);
  MC_CHECK(mc_comm_bcast_tree(comm, NULL, n, me, &bytes, sizeof(bytes), tag + 1));
  if ((bytes == 0) || (bytes > MC_BOOT_MAX_MSG_BYTES))
    return MC_FAIL(ncclRemoteError, "Init: rank 0 announced a packed allgather of %llu bytes",
                   (unsigned long long)bytes);
  MC_CHECK(mc_calloc(&buf, (size_t)bytes));
  if (me == 0)
    (void)packing->pack(data, n, buf);
  res = mc_comm_bcast_tree(comm, NULL, n, me, buf, (size_t)bytes, tag + 2);
  if ((res == ncclSuccess) && (me != 0))
    res = packing->unpack(buf, (size_t)bytes, n, data);
  free(buf);
  return res;
}

ncclResult_t mc_comm_barrier_tree(struct ncclComm *comm, const int *ranks, int n, int my_index,
                                  int tag)
{
  uint8_t token = 0;

  if (n == 1)
    return ncclSuccess;
  if (n > GATHER_MAX_RANKS)
    return mc_boot_barrier(comm->bootstrap.boot, ranks, n, my_index, tag);
  if (my_index != 0) {
    MC_CHECK(mc_boot_send(comm->bootstrap.boot, rank_of(ranks, 0), tag, &token, sizeof(token)));
  } else {
    for (int i = 1; i < n; i++)
      MC_CHECK(mc_boot_recv(comm->bootstrap.boot, rank_of(ranks, i), tag, &token, sizeof(token)));
  }
  return mc_comm_bcast_tree(comm, ranks, n, my_index, &token, sizeof(token), tag + 1);
}

ncclResult_t mc_comm_allgather_tree(struct ncclComm *comm, const int *ranks, int n, int my_index,
                                    void *data, size_t slice_bytes, int tag)
{
  char *d = data;

  if (n == 1)
    return ncclSuccess;
  if (n > GATHER_MAX_RANKS) {
    if (ranks == NULL)
      return mc_boot_allgather(comm->bootstrap.boot, data, slice_bytes);
    return mc_boot_allgather_sub(comm->bootstrap.boot, ranks, n, my_index, data, slice_bytes, tag);
  }
  MC_CHECK(gather_tree(comm, ranks, n, my_index, d, slice_bytes, tag));
  return mc_comm_bcast_tree(comm, ranks, n, my_index, data, (size_t)n * slice_bytes, tag + 1);
}
