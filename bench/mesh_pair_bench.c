/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Send/recv between pairs of ranks of one communicator, one pair at a time,
 * the other ranks idle: on a mesh, a pair of hosts with a cable against a
 * pair whose connection is relayed by the hosts on the route (which must be
 * ranks of the same communicator, since the relays share its key).
 *
 *   mesh_pair_bench --pairs 0:1,0:2 [-b 1M] [-e 256M] [-f 4] [-w 1] [-n 5]
 *
 * One process per rank, started like meshccl-perf (meshcclCommInitFromEnv).
 * For each size and each pair in turn, both ranks of the pair send N bytes to
 * each other at once (a grouped ncclSend/ncclRecv, nccl-tests' sendrecv with 2
 * ranks); after -w warm-up rounds, -n timed rounds. A barrier (an all-reduce
 * of one float over every rank) separates the pairs. Rank 0 prints, per size
 * and pair, the time of one round in us and the busbw in GB/s (10^9 B/s): N /
 * time, what each direction carried, nccl-tests' sendrecv formula.
 */
#include "meshccl.h"
#include "nccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_PAIRS 8

#define CHECK(_call)                                                                               \
  do {                                                                                             \
    ncclResult_t r_ = (_call);                                                                     \
    if (r_ != ncclSuccess) {                                                                       \
      fprintf(stderr, "mesh_pair_bench: %s failed: %s\n", #_call, ncclGetErrorString(r_));         \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static size_t parse_size(const char *s)
{
  char *end = NULL;
  size_t v = strtoull(s, &end, 10);

  if ((*end == 'K') || (*end == 'k'))
    v <<= 10;
  else if ((*end == 'M') || (*end == 'm'))
    v <<= 20;
  else if ((*end == 'G') || (*end == 'g'))
    v <<= 30;
  return v;
}

static double now_sec(void)
{
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void barrier(ncclComm_t comm, float *scratch)
{
  CHECK(ncclAllReduce(scratch, scratch, 1, ncclFloat, ncclSum, comm, NULL));
}

int main(int argc, char **argv)
{
  size_t min_bytes = 1 << 20;
  size_t max_bytes = 256 << 20;
  int factor = 4;
  int warmup = 1;
  int iters = 5;
  int pair[MAX_PAIRS][2];
  int n_pairs = 0;
  int rank = 0;
  int n_ranks = 0;
  ncclComm_t comm;
  char *sbuf;
  char *rbuf;
  float scratch = 0;

  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "-b") == 0) {
      min_bytes = parse_size(argv[i + 1]);
    } else if (strcmp(argv[i], "-e") == 0) {
      max_bytes = parse_size(argv[i + 1]);
    } else if (strcmp(argv[i], "-f") == 0) {
      factor = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "-w") == 0) {
      warmup = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "-n") == 0) {
      iters = atoi(argv[i + 1]);
    } else if (strcmp(argv[i], "--pairs") == 0) {
      for (char *p = strtok(argv[i + 1], ","); (p != NULL) && (n_pairs < MAX_PAIRS);
           p = strtok(NULL, ","))
        if (sscanf(p, "%d:%d", &pair[n_pairs][0], &pair[n_pairs][1]) == 2)
          n_pairs++;
    } else {
      fprintf(stderr,
              "mesh_pair_bench: unknown flag %s (see the header of bench/mesh_pair_bench.c)\n",
              argv[i]);
      return 2;
    }
  }
  if ((n_pairs == 0) || (factor < 2) || (iters < 1) || (min_bytes == 0) ||
      (max_bytes < min_bytes)) {
    fprintf(stderr, "usage: mesh_pair_bench --pairs A:B[,C:D] [-b min] [-e max] [-f factor>=2] "
                    "[-w warmup] [-n iters>=1]\n");
    return 2;
  }
  CHECK(meshcclCommInitFromEnv(&comm, NULL));
  CHECK(ncclCommUserRank(comm, &rank));
  CHECK(ncclCommCount(comm, &n_ranks));
  sbuf = malloc(max_bytes);
  rbuf = malloc(max_bytes);
  if ((sbuf == NULL) || (rbuf == NULL)) {
    fprintf(stderr, "mesh_pair_bench: out of memory for 2 x %zu bytes\n", max_bytes);
    return 1;
  }
  memset(sbuf, rank + 1, max_bytes);
  if (rank == 0)
    printf("# mesh_pair_bench: %d ranks, bidirectional send/recv per pair, %d warm-up, %d timed\n"
           "# %11s %6s %10s %11s\n",
           n_ranks, warmup, iters, "size", "pair", "time(us)", "busbw(GB/s)");
  for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= (size_t)factor) {
    for (int p = 0; p < n_pairs; p++) {
      int peer = -1;
      double t = 0;

      if (rank == pair[p][0])
        peer = pair[p][1];
      else if (rank == pair[p][1])
        peer = pair[p][0];
      barrier(comm, &scratch);
      if (peer >= 0) {
        for (int it = 0; it < warmup + iters; it++) {
          if (it == warmup)
            t = now_sec();
          CHECK(ncclGroupStart());
          CHECK(ncclSend(sbuf, bytes, ncclInt8, peer, comm, NULL));
          CHECK(ncclRecv(rbuf, bytes, ncclInt8, peer, comm, NULL));
          CHECK(ncclGroupEnd());
        }
        t = (now_sec() - t) / iters;
        if (rbuf[bytes - 1] != (char)(peer + 1)) {
          fprintf(stderr, "mesh_pair_bench: rank %d: wrong data from rank %d\n", rank, peer);
          return 1;
        }
      }
      /* rank 0 prints what the pair's first rank timed */
      scratch = (rank == pair[p][0]) ? (float)t : 0.0f;
      barrier(comm, &scratch);
      if (rank == 0)
        printf("%13zu %3d:%-2d %10.1f %11.3f\n", bytes, pair[p][0], pair[p][1], scratch * 1e6,
               bytes / scratch / 1e9);
      fflush(stdout);
    }
    if (bytes > max_bytes / (size_t)factor)
      break;
  }
  CHECK(ncclCommDestroy(comm));
  free(sbuf);
  free(rbuf);
  return 0;
}
