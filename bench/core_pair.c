/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core_pair: what two processes on two cores of this host can do together,
 * with no meshccl code: the round trip of one cache line between them, and
 * the bandwidth of a FIFO between them in shared memory, shaped like the SHM
 * transport's (8 slots of 128 KiB; the producer copies a private 16 MiB
 * buffer into the slots, the consumer copies them out to its own buffer).
 *
 * Every figure of a host-memory collective between processes is bounded by
 * these two. Run it several times, each a fresh pair of processes: on a host
 * whose cores keep their place the figures repeat; on a VM whose virtual
 * CPUs the hypervisor places anew, they fall into modes (a run is fast or
 * slow as a whole), and so does every collective benchmark run beside it.
 *
 *   build/bench/core_pair [runs] [core_a core_b]    (default: 1 run, cores 0 1)
 *
 * One line per run: "run R: round trip N ns (median of 21 batches), FIFO G GB/s".
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pair_probe.h"

#define N_BATCHES    21
#define BATCH_TRIPS  20000
#define BUF_BYTES    (16u << 20)
#define FIFO_PASSES  16 /* 256 MiB through the FIFO */
#define SPIN_LIMIT_S 20.0

static int pin(int core)
{
  cpu_set_t set;

  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return sched_setaffinity(0, sizeof(set), &set);
}

/* Side 0 pings, side 1 answers; side 0 fills the FIFO, side 1 empties it;
 * both measure, side 0's figures are reported. */
static int side(struct mc_pair *sh, int who, double *rtt_ns, double *gbps)
{
  double t_end = pair_now_sec() + SPIN_LIMIT_S;
  double batch_ns[N_BATCHES];
  char *buf = aligned_alloc(4096, BUF_BYTES);
  uint64_t n = 0;
  double t0;

  if (buf == NULL)
    return 0;
  memset(buf, who + 1, BUF_BYTES);
  if (!pair_rtt(sh, who, N_BATCHES, BATCH_TRIPS, t_end, &n, batch_ns))
    goto fail;
  *rtt_ns = batch_ns[N_BATCHES / 2];
  t0 = pair_now_sec();
  for (uint64_t k = 0; k < (uint64_t)FIFO_PASSES * (BUF_BYTES / PAIR_SLOT_BYTES); k++) {
    char *mine = buf + (k % (BUF_BYTES / PAIR_SLOT_BYTES)) * PAIR_SLOT_BYTES;
    if (!pair_fifo_step(sh, who, k, mine, t_end))
      goto fail;
  }
  *gbps = (double)FIFO_PASSES * BUF_BYTES / (pair_now_sec() - t0) / 1e9;
  free(buf);
  return 1;
fail:
  atomic_store(&sh->failed, 1);
  free(buf);
  return 0;
}

/* A fresh pair of processes, one pinned to each core; their figures come
 * back through the shared page. */
static int one_run(int run, int core_a, int core_b)
{
  struct mc_pair *sh =
      mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  const int cores[2] = {core_a, core_b};
  pid_t pids[2] = {-1, -1};
  int ok = 1;

  if (sh == MAP_FAILED) {
    perror("core_pair: mmap");
    return 0;
  }
  for (int who = 0; who < 2; who++) {
    pids[who] = fork();
    if (pids[who] < 0) {
      perror("core_pair: fork");
      atomic_store(&sh->failed, 1);
      ok = 0;
      break;
    }
    if (pids[who] == 0) {
      double rtt = 0;
      double gbps = 0;
      if (pin(cores[who]) != 0) {
        atomic_store(&sh->failed, 1);
        _exit(2);
      }
      if (!side(sh, who, &rtt, &gbps))
        _exit(1);
      if (who == 0) {
        sh->rtt_ns = rtt;
        sh->gbps = gbps;
      }
      _exit(0);
    }
  }
  for (int who = 0; who < 2; who++) {
    int status = 0;
    if (pids[who] < 0)
      continue;
    if ((waitpid(pids[who], &status, 0) != pids[who]) || !WIFEXITED(status) ||
        (WEXITSTATUS(status) != 0))
      ok = 0;
  }
  if (ok)
    printf("run %d: round trip %.0f ns (median of %d batches), FIFO %.2f GB/s\n", run, sh->rtt_ns,
           N_BATCHES, sh->gbps);
  else
    fprintf(stderr, "core_pair: run %d failed (cores %d and %d: do both exist?)\n", run, core_a,
            core_b);
  fflush(stdout);
  munmap(sh, sizeof(*sh));
  return ok;
}

int main(int argc, char **argv)
{
  int runs = (argc > 1) ? atoi(argv[1]) : 1;
  int core_a = (argc > 3) ? atoi(argv[2]) : 0;
  int core_b = (argc > 3) ? atoi(argv[3]) : 1;

  if (runs < 1) {
    fprintf(stderr, "usage: core_pair [runs] [core_a core_b]\n");
    return 2;
  }
  printf("# core_pair: cores %d and %d, a fresh pair of processes per run\n", core_a, core_b);
  for (int r = 1; r <= runs; r++) {
    if (!one_run(r, core_a, core_b))
      return 1;
  }
  return 0;
}
