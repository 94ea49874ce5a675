/* SPDX-License-Identifier: Apache-2.0 */
/* Step timings of the init stages, one INFO line per stage (init_steps.c). */
#ifndef MC_INIT_STEPS_H
#define MC_INIT_STEPS_H

#include <stdint.h>

struct ncclComm;

/* Steps of an init stage timed for one INFO line (INIT|PROFILE; init_steps.c):
 * wall time and this thread's CPU time per step, so that a host with more
 * ranks than cores still shows what each step costs. */
#define MC_COMM_MAX_STEPS 12
struct mc_comm_steps {
  int n;
  uint64_t wall0_ns; /* start of the running step */
  uint64_t cpu0_ns;
  const char *name[MC_COMM_MAX_STEPS];
  double wall_ms[MC_COMM_MAX_STEPS];
  double cpu_ms[MC_COMM_MAX_STEPS];
};

/* Starts the first step. */
void mc_comm_steps_start(struct mc_comm_steps *st);
/* Ends the running step as `name` (a string literal) and starts the next; steps past
 * MC_COMM_MAX_STEPS are added to the last one. */
void mc_comm_steps_mark(struct mc_comm_steps *st, const char *name);
/* "<stage> timings - rank R localRanks L (ms wall/cpu): step w/c, ..." at INFO (INIT|PROFILE). */
void mc_comm_steps_log(const struct mc_comm_steps *st, const struct ncclComm *comm,
                       const char *stage);

#endif /* MC_INIT_STEPS_H */
