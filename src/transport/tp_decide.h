/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decisions the data path takes from what it measures on the host, as pure
 * functions (figures in, choice out) so that tests replay recorded machines
 * (tests/unit/test_tp_decide.c):
 *   - how long a waiting rank spins before it yields the CPU, from the CPUs
 *     the host (or the container's cgroup quota) gives its local ranks;
 *   - whether a SHM sender writes its slots with plain or streaming stores,
 *     from the rates it achieved with each (tp_stream.c).
 * docs/ARCHITECTURE.md (Data path) says why.
 */
#ifndef MC_TP_DECIDE_H
#define MC_TP_DECIDE_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MC_SPIN_PASSES_SPIN  2000 /* idle polls before yielding while every rank has a CPU */
#define MC_SPIN_PASSES_YIELD 8    /* ... and when the host's ranks outnumber its CPUs */

/* What decides spin vs yield, as read on the host (mc_tp_host_figures_read). */
struct mc_host_figures {
  int online_cpus;   /* sysconf(_SC_NPROCESSORS_ONLN); 0: unknown */
  int quota_cpus;    /* the cgroup's CPU quota, rounded up; 0: no quota */
  int affinity_cpus; /* CPUs in this rank's affinity mask (said, not decisive) */
  int local_ranks;   /* ranks of the communicator on this host */
};

/* Idle passes before a waiting rank yields: MC_SPIN_PASSES_SPIN while the
 * host's CPUs (the quota's when it is lower) are at least its local ranks,
 * MC_SPIN_PASSES_YIELD when the ranks outnumber them. The affinity mask does
 * not count: a rank pinned to one core (mpirun --bind-to core, taskset)
 * still has the host's other cores for the other ranks. *cpus_out (may be
 * NULL): the CPU count the decision used (0: unknown, then it spins). */
int mc_tp_decide_spin(const struct mc_host_figures *f, int *cpus_out);

/* CPUs a cgroup CPU limit allows, rounded up (0: no limit or unreadable):
 * v2's cpu.max text "QUOTA PERIOD" ("max PERIOD": none), v1's
 * cpu.cfs_quota_us and cpu.cfs_period_us texts (quota -1: none). */
int mc_tp_cgroup_v2_cpus(const char *cpu_max);
int mc_tp_cgroup_v1_cpus(const char *quota_us, const char *period_us);

/* Reads the figures of this process: online CPUs, affinity, and the lowest
 * CPU quota of its cgroup and the cgroups above it under cg_root
 * ("/sys/fs/cgroup"; tests give a recorded tree), the cgroup's path taken
 * from proc_cgroup (the text of /proc/self/cgroup; NULL: read it). */
void mc_tp_host_figures_read(const char *cg_root, const char *proc_cgroup, int local_ranks,
                             struct mc_host_figures *out);

/* A SHM sender's choice of stores: each sample is the rate (MB/s) one
 * calibration window achieved with that mode (tp_stream.c). The faster
 * median wins; the mode in use (is_stream) is kept unless the other's
 * median beats it by MC_STREAM_MARGIN_PCT, so that noise does not flip it.
 * With no sample of one of the modes the mode in use is kept. The medians go
 * to *plain_out and *stream_out (may be NULL; 0 without samples). */
#define MC_STREAM_MARGIN_PCT 10
bool mc_tp_decide_stream(const float *plain, int n_plain, const float *stream, int n_stream,
                         bool is_stream, float *plain_out, float *stream_out);

/* The median of n values (the mean of the middle two when n is even; 0 when n is 0). */
float mc_tp_median(const float *v, int n);

#ifdef __cplusplus
}
#endif

#endif /* MC_TP_DECIDE_H */
