/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Decisions the data path takes from what it measures on the host, as pure
 * functions (figures in, choice out) so that tests replay recorded machines
 * (tests/unit/test_tp_decide.c):
 *   - how long a waiting rank spins before it yields the CPU, from the CPUs
 *     the host (or the container's cgroup quota) gives its local ranks;
 *   - how many threads run a rank's channels, from the cores its job
 *     leaves idle, and on which CPUs;
 *   - whether a SHM sender writes its slots with plain or streaming stores,
 *     from the rates it achieved with each (tp_stream.c);
 *   - from which step size a P2P connection between processes moves a step
 *     with one cross-memory-attach read of the sender's buffer instead of
 *     the FIFO's two copies, from what the process measured of both
 *     (tp_cma.c), or never.
 * docs/design/datapath.md ("Data path") says why.
 */
#ifndef MC_TP_DECIDE_H
#define MC_TP_DECIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* The CPUs a host gives its ranks: its online ones, or the cgroup's quota
 * when that is lower; 0 when neither is known. */
int mc_tp_host_cpus(const struct mc_host_figures *f);

/* Idle passes before a waiting rank yields: MC_SPIN_PASSES_SPIN while the
 * host's CPUs (the quota's when it is lower) are at least its local ranks,
 * MC_SPIN_PASSES_YIELD when the ranks outnumber them. The affinity mask does
 * not count: a rank pinned to one core (mpirun --bind-to core, taskset)
 * still has the host's other cores for the other ranks. *cpus_out (may be
 * NULL): the CPU count the decision used (0: unknown, then it spins). */
int mc_tp_decide_spin(const struct mc_host_figures *f, int *cpus_out);

/* Threads per rank for the collectives' channels (coll_exec.c runs a rank's
 * channels on that many threads: the calling one and workers). forced >= 1
 * (MESHCCL_NTHREADS) wins, bounded to MC_THREADS_MAX. Otherwise (forced <= 0)
 * the host's cores the job leaves idle are shared among its local ranks:
 * CPUs (online, or the cgroup quota when lower) minus local ranks, divided by
 * the local ranks, plus the rank's own thread; at most n_channels (a thread
 * without a channel has nothing to do), at least 1 (also when the CPUs are
 * unknown). *idle_out (may be NULL): the idle CPUs the rule counted (0 when
 * none or unknown). The affinity mask does not count, as for spinning: a
 * rank bound to one core still has the host's idle cores for its workers. */
#define MC_THREADS_MAX 64
int mc_tp_decide_threads(const struct mc_host_figures *f, int n_channels, int forced,
                         int *idle_out);

/* The CPUs of a rank's k - 1 workers (cpus_out[0 .. k - 2]), near the rank:
 * where its affinity mask (mask_cpus[0 .. n_mask - 1], ascending) holds at
 * least k CPUs but fewer than the n_online online ones (mpirun --bind-to
 * numa or socket, a cpuset), the k - 1 of the mask nearest to cur, the CPU
 * the rank runs on (cur - 1, cur + 1, cur - 2, ...); otherwise (unbound, or
 * bound to one core by meshccl-run or mpirun --bind-to core, which put local
 * rank i on the i-th CPU) the host's idle cores: CPUs local_ranks ..
 * n_online - 1, local rank r taking k - 1 of them from local_ranks + r (k -
 * 1), round robin past the end (more threads than idle cores: forced by
 * MESHCCL_NTHREADS). -1 where nothing is known (n_online 0). */
void mc_tp_decide_worker_cpus(const int *mask_cpus, int n_mask, int n_online, int cur, int k,
                              int local_rank, int local_ranks, int *cpus_out);

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
 * calibration window achieved with that mode (tp_stream.c). The mode in use
 * (is_stream) is kept unless the other's windows are clearly faster: their
 * median beats the in-use median by MC_STREAM_MARGIN_PCT, and their lower
 * quartile (the second lowest of 5) beats it too, so that neither noise nor a
 * calibration run while the ranks still warmed up (every window slow, their
 * rates scattered 3x) flips it. With no sample of one of the modes the mode
 * in use is kept. The medians go to *plain_out and *stream_out (may be NULL;
 * 0 without samples). */
#define MC_STREAM_MARGIN_PCT 10
bool mc_tp_decide_stream(const float *plain, int n_plain, const float *stream, int n_stream,
                         bool is_stream, float *plain_out, float *stream_out);
/* Whether the windows of the two modes separate: the lower quartile of the
 * mode with the higher median is at least the other's median. When they do
 * not, the calibration said little, and tp_stream.c's TUNING line says that
 * the mode in use stayed. */
bool mc_tp_stream_separated(const float *plain, int n_plain, const float *stream, int n_stream);
/* The lower quartile of n samples (the sample of rank (n - 1) / 4 from the
 * lowest; 0 for none). */
float mc_tp_lower_quartile(const float *v, int n);

/* What a process measured of the two ways a step of a P2P connection
 * between processes can move (tp_cma.c), per step size (ascending):
 *   fifo_gbps  a FIFO hop as one rank pays it: the sender's copy of the
 *              step into a slot and the receiver's copy out of it (both on
 *              the measuring core; in a ring every rank does both)
 *   cma_gbps   one process_vm_readv of the step from the sender's buffer
 *              (system call, page pinning and copy)
 * Rates in GB/s (1e9 B/s) of step bytes; 0: not measured. */
#define MC_CMA_MAX_SIZES  8
#define MC_CMA_MARGIN_PCT 10       /* CMA must beat the FIFO by this much */
#define MC_CMA_NEVER      SIZE_MAX /* no step size: the FIFO everywhere */
struct mc_cma_figures {
  int n_sizes;
  size_t bytes[MC_CMA_MAX_SIZES];
  float fifo_gbps[MC_CMA_MAX_SIZES];
  float cma_gbps[MC_CMA_MAX_SIZES];
};

/* For a connection whose steps are at most max_step bytes (its slot): the
 * smallest measured step size from which a single CMA read beats the FIFO
 * hop by MC_CMA_MARGIN_PCT at that size and at every larger measured size
 * up to max_step (the sender then publishes its buffer for steps of at
 * least that many bytes and copies smaller ones into the slots), or
 * MC_CMA_NEVER when it does not at the largest (a size with a figure
 * missing counts as a loss for CMA; so does no measured size). */
size_t mc_tp_decide_cma(const struct mc_cma_figures *f, size_t max_step);

/* The rate of a step of bytes moved by one call of fixed cost call_ns
 * copying at copy_gbps: bytes / (call_ns + bytes / copy_gbps), GB/s (the
 * model behind a recorded host's CMA figures when only its copy rate and a
 * call's cost are known; tests/unit/test_tp_decide.c). */
float mc_tp_cma_rate(size_t bytes, double call_ns, double copy_gbps);

/* The median of n values (the mean of the middle two when n is even; 0 when n is 0). */
float mc_tp_median(const float *v, int n);

/* A CPU's caches as sysfs describes them (mc_tp_cache_read): the level-2
 * cache holding data and the last level, each with the number of CPUs
 * sharing it (its shared_cpu_list); 0: unknown. */
struct mc_cache_facts {
  int cpu;        /* the CPU they were read for (-1: none) */
  int l2_kib;     /* the L2 data or unified cache, KiB */
  int l2_sharing; /* CPUs sharing it */
  int llc_level;  /* the highest level found */
  int llc_kib;
  int llc_sharing;
};

/* Reads /sys/devices/system/cpu/cpuN/cache/index* (level, type, size,
 * shared_cpu_list) under root ("/" or MESHCCL_SYSFS_ROOT's tree); false,
 * with *out zeroed but for cpu, when no L2 is described. */
bool mc_tp_cache_read(const char *root, int cpu, struct mc_cache_facts *out);

/* A single-host connection's FIFO (NCCL_BUFFSIZE unset): the largest power
 * of two from MC_FIFO_MIN_BYTES to MC_FIFO_MAX_BYTES whose hot_conns FIFOs
 * (the connections a rank keeps busy: a send and a receive per channel)
 * fit in MC_FIFO_L2_SHARE times the L2 one core has (l2_kib / l2_sharing);
 * MC_FIFO_MIN_BYTES without an L2 figure. docs/design/datapath.md says why. */
#define MC_FIFO_MIN_BYTES (256u << 10)
#define MC_FIFO_MAX_BYTES (4u << 20)
#define MC_FIFO_L2_SHARE  4
size_t mc_tp_decide_fifo(const struct mc_cache_facts *c, int hot_conns);

/* Out-of-place operations whose output is at least this many bytes write
 * what they receive into it with streaming stores (coll_prim.c, mc_coll_copy_out):
 * the output no longer fits in the L2 one core has (l2_kib / l2_sharing),
 * so its lines would not stay there, and streaming skips reading each line
 * for ownership before it is overwritten; below it the output stays in the
 * cache for whoever reads it next. MC_STREAM_OUT_BYTES without an L2
 * figure. */
#define MC_STREAM_OUT_BYTES (1u << 20)
size_t mc_tp_decide_stream_out(const struct mc_cache_facts *c);

/* The chunk in which a symmetric all-reduce of n_ranks ranks (coll_sym.c)
 * reduces its slice before telling its peers, who then copy that chunk:
 * while a rank reduces its next chunk (reading n_ranks chunks of input and
 * writing one) the chunk it just wrote should stay in its core's L2 for the
 * peers to read, so n_ranks + 2 chunks fit in one core's L2 (l2_kib /
 * l2_sharing, MC_STREAM_OUT_BYTES without an L2 figure); at least
 * MC_SYM_CHUNK_MIN_BYTES, so that a chunk's message costs little beside
 * its copy, and a multiple of 4 KiB. */
#define MC_SYM_CHUNK_MIN_BYTES (32u << 10)
size_t mc_tp_decide_sym_chunk(const struct mc_cache_facts *c, int n_ranks);

/* Figures of the one-shot all-reduce's model, measured once per process
 * (mc_tp_handoff_probe): handoff_ns, what one step between two cores costs
 * beyond its bytes (a cache-line round trip: the receiver sees the flag,
 * then fetches the data's lines); copy_gbps, the rate (GB/s) at which a
 * block written by one core is copied out by another. 0: not measured. */
struct mc_handoff_figures {
  float handoff_ns;
  float copy_gbps;
  int cpus; /* CPUs the host gives its ranks (mc_tp_decide_spin's; 0: unknown) */
};

/* The largest all-reduce (bytes) that goes one-shot on n_ranks ranks of one
 * host, from a model of both algorithms' time on a rank, with h the
 * hand-off and c the copy rate (bytes per ns):
 *   one-shot  h + 2 (n-1) S / c: one hand-off; S copied into each of the
 *             n-1 peers' slots, and n-1 inputs read while reducing
 *   ring      2 (n-1) h + 4 (n-1) S / (n c): 2(n-1) hand-offs; the chunks
 *             of S/n of the reduce-scatter and the all-gather each copied
 *             into a FIFO slot and out of it
 * so the one-shot wins below S* = (2n - 3) n h c / (2 (n-1) (n-2)), and at
 * every size on 2 ranks (the same bytes, one hand-off fewer; no figures
 * needed) and where the ranks outnumber the host's CPUs (f->cpus: a
 * hand-off then waits for the scheduler to run the peer). S* rounded
 * down to 64 bytes and clamped to [MC_ONESHOT_MIN_BYTES, limit] (limit:
 * the largest the one-shot's slots take); without figures,
 * MC_ONESHOT_MIN_BYTES. */
#define MC_ONESHOT_MIN_BYTES 4096
#define MC_ONESHOT_MAX_BYTES (1u << 20) /* MESHCCL_ALLREDUCE_ONESHOT_BYTES's maximum */
size_t mc_tp_decide_oneshot(int n_ranks, const struct mc_handoff_figures *f, size_t limit);

#ifdef __cplusplus
}
#endif

#endif /* MC_TP_DECIDE_H */
