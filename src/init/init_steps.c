/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Step timings of the init stages "topo" and "graphs": wall and thread CPU
 * time per step, logged as one INFO line per stage (INIT|PROFILE), next to
 * NCCL's "Init timings" line. With more ranks than cores the wall time of a
 * step includes waiting for the CPU and for the other ranks; its CPU time is
 * what the step itself costs.
 */
#include "init_steps.h"

#include "comm.h"

#include <stdio.h>
#include <time.h>

#include "log.h"
#include "utils.h"

static uint64_t thread_cpu_ns(void)
{
  struct timespec ts;

  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    return 0;
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void mc_comm_steps_start(struct mc_comm_steps *st)
{
  st->n = 0;
  st->wall0_ns = mc_time_ns();
  st->cpu0_ns = thread_cpu_ns();
}

void mc_comm_steps_mark(struct mc_comm_steps *st, const char *name)
{
  uint64_t wall = mc_time_ns();
  uint64_t cpu = thread_cpu_ns();
  int i = (st->n < MC_COMM_MAX_STEPS) ? st->n++ : MC_COMM_MAX_STEPS - 1;

  if (i == st->n - 1) {
    st->name[i] = name;
    st->wall_ms[i] = 0;
    st->cpu_ms[i] = 0;
  }
  st->wall_ms[i] += (double)(wall - st->wall0_ns) / 1e6;
  st->cpu_ms[i] += (double)(cpu - st->cpu0_ns) / 1e6;
  st->wall0_ns = wall;
  st->cpu0_ns = cpu;
}

void mc_comm_steps_log(const struct mc_comm_steps *st, const struct ncclComm *comm,
                       const char *stage)
{
  char line[768];
  size_t off = 0;

  if (!mc_log_enabled(MC_LOG_INFO, MC_SUB_INIT | MC_SUB_PROFILE))
    return;
  line[0] = '\0';
  for (int i = 0; (i < st->n) && (off < sizeof(line)); i++) {
    int w = snprintf(line + off, sizeof(line) - off, "%s%s %.2f/%.2f", (i > 0) ? ", " : "",
                     st->name[i], st->wall_ms[i], st->cpu_ms[i]);
    if (w < 0)
      break;
    off += (size_t)w;
  }
  MC_INFO(MC_SUB_INIT | MC_SUB_PROFILE, "%s timings - rank %d localRanks %d (ms wall/cpu): %s",
          stage, comm->rank, comm->nodes.local_ranks, line);
}
