/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The data path's host-measured decisions (src/transport/tp_decide.c) on
 * recorded figures of two machines:
 *   - the 2-core development VM (build/bench/limit there: copy 58.0 / 34.4 /
 *     19.2 GB/s at 1 / 16 / 256 MiB, pair FIFO 24.5 GB/s, cache-line round
 *     trip 516 ns, load average 4.9; the window rates below are what its SHM
 *     senders logged at NCCL_DEBUG_SUBSYS=TUNING in meshccl-perf all_reduce
 *     -b 64K -e 64M, 2 ranks, 128 KiB slots);
 *   - a 16-core Xeon VM as its users measured it: copy 22.5 / 11.4 / 10.4
 *     GB/s, pair FIFO 9.0-10.1 GB/s between any two cores, round trip
 *     344-413 ns; all_reduce at 2 ranks 2.6-3.85 GB/s with plain stores and
 *     2.6-2.9 with streaming stores (the window rates below spread over those
 *     ranges);
 * and the cgroup quota as recorded trees of /sys/fs/cgroup give it.
 * The single-copy (P2P/CMA) threshold on the figures the P2P/CMA probe
 * (tp_cma.c) logged on the VM, and on the Xeon's figures through the model
 * of its FIFO hop and of a process_vm_readv call (the Xeon's own probe was
 * not recorded: three cases bracket it).
 * The single-host FIFO size on the two machines' caches as recorded trees of
 * sysfs (tests/data/sysfs/make-cache.sh), and the one-shot all-reduce's
 * threshold from its model on the two machines' hand-off figures.
 */
#include "transport/tp_decide.h"
#include "transport/transport.h"

#include "mc_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Window rates (MB/s) per mode. */
struct rec_stream {
  const char *what;
  float plain[5];
  float stream[5];
  int want_stream; /* 1 streaming, 0 plain, -1 the mode in use */
};

static const struct rec_stream recorded[] = {
    /* 16-core Xeon: plain 2.6-3.85 GB/s, streaming 2.6-2.9 */
    {"xeon16", {2600, 3100, 3300, 3600, 3850}, {2600, 2700, 2750, 2850, 2900}, 0},
    /* 2-core VM, rank 1 -> 0 channel 0, first calibration (64 KiB - 1 MiB ops) */
    {"vm2 first", {2810, 11040, 8460, 7810, 8910}, {20, 8050, 7580, 1680, 9110}, 0},
    /* 2-core VM, rank 0 -> 1 channel 0, a re-check during the 16-64 MiB ops */
    {"vm2 recheck", {4620, 7090, 8950, 3270, 3040}, {4670, 6070, 130, 3230, 2510}, 0},
    /* 2-core VM, rank 0 -> 1 channel 0, a first calibration while the ranks warmed up (the
     * all-reduce then moved 14-15 GB/s with plain stores, 7.5 with streaming): streaming's
     * median 30% ahead, its lower quartile behind plain's median: the mode in use stays */
    {"vm2 warm-up", {2920, 1990, 4200, 3360, 6270}, {2910, 2670, 4370, 6090, 5970}, -1},
    /* far cores, windows spread as that placement's busbw was (plain 3.0-3.9 GB/s, streaming
     * 4.8-5.8, docs/design/datapath.md): every streaming window ahead */
    {"vm2 far", {3000, 3900, 3400, 3600, 3200}, {4800, 5800, 5100, 5300, 4900}, 1},
};

static void stream_choice_on_recorded_rates(void)
{
  for (size_t i = 0; i < sizeof(recorded) / sizeof(recorded[0]); i++) {
    const struct rec_stream *r = &recorded[i];
    float p = -1;
    float s = -1;
    /* from plain (the first decision) and from streaming (a re-check after
     * the old latency rule, or an earlier calibration, chose it) */
    for (int kept = 0; kept < 2; kept++) {
      bool on = mc_tp_decide_stream(r->plain, 5, r->stream, 5, kept != 0, &p, &s);
      if ((int)on != ((r->want_stream < 0) ? kept : r->want_stream))
        MC_T_FAIL("%s, from %s: chose %s (medians plain %.0f, streaming %.0f MB/s)", r->what,
                  kept ? "streaming" : "plain", on ? "streaming" : "plain", p, s);
    }
  }
  /* the Xeon's medians: 3.3 and 2.75 GB/s */
  {
    float p = 0;
    float s = 0;
    (void)mc_tp_decide_stream(recorded[0].plain, 5, recorded[0].stream, 5, false, &p, &s);
    MC_T_EQ_INT((int)p, 3300);
    MC_T_EQ_INT((int)s, 2750);
  }
}

/* Whether a calibration's windows separate: the faster median's lower
 * quartile at least the other median. */
static void stream_windows_separate(void)
{
  MC_T_TRUE(!mc_tp_stream_separated(recorded[3].plain, 5, recorded[3].stream, 5));
  MC_T_TRUE(mc_tp_stream_separated(recorded[4].plain, 5, recorded[4].stream, 5));
  MC_T_TRUE(mc_tp_stream_separated(recorded[0].plain, 5, recorded[0].stream, 5));
  MC_T_TRUE(!mc_tp_stream_separated(recorded[0].plain, 0, recorded[0].stream, 5));
  MC_T_EQ_INT((int)mc_tp_lower_quartile(recorded[3].stream, 5), 2910);
  MC_T_EQ_INT((int)mc_tp_lower_quartile(recorded[3].stream, 4), 2670);
  MC_T_EQ_INT((int)mc_tp_lower_quartile(recorded[3].stream, 0), 0);
}

/* Within the margin the mode in use stays; without samples of a mode too. */
static void stream_margin_and_missing_samples(void)
{
  const float a[3] = {1000, 1000, 1000};
  const float b[3] = {1080, 1080, 1080}; /* 8% faster: within the 10% margin */
  const float c[3] = {1150, 1150, 1150}; /* 15% faster */

  MC_T_TRUE(!mc_tp_decide_stream(a, 3, b, 3, false, NULL, NULL));
  MC_T_TRUE(mc_tp_decide_stream(b, 3, a, 3, true, NULL, NULL));
  MC_T_TRUE(mc_tp_decide_stream(a, 3, c, 3, false, NULL, NULL));
  MC_T_TRUE(!mc_tp_decide_stream(c, 3, a, 3, true, NULL, NULL));
  MC_T_TRUE(mc_tp_decide_stream(a, 0, c, 3, true, NULL, NULL));
  MC_T_TRUE(!mc_tp_decide_stream(c, 3, a, 0, false, NULL, NULL));
  MC_T_EQ_INT((int)mc_tp_median(b, 0), 0);
  {
    const float even[4] = {4, 1, 3, 2};
    MC_T_EQ_INT((int)(mc_tp_median(even, 4) * 10), 25);
  }
}

static void spin_choice_on_recorded_hosts(void)
{
  static const struct {
    const char *what;
    struct mc_host_figures f;
    int want_passes;
    int want_cpus;
  } hosts[] = {
      /* 16-core Xeon, 2 ranks bound to one core each (mpirun --bind-to core) */
      {"xeon16 bound", {.online_cpus = 16, .affinity_cpus = 1, .local_ranks = 2}, 2000, 16},
      {"xeon16 16 ranks", {.online_cpus = 16, .affinity_cpus = 16, .local_ranks = 16}, 2000, 16},
      /* this 2-core VM: 2 ranks, unbound or bound (meshccl-run --bind-to core) */
      {"vm2", {.online_cpus = 2, .affinity_cpus = 2, .local_ranks = 2}, 2000, 2},
      {"vm2 bound", {.online_cpus = 2, .affinity_cpus = 1, .local_ranks = 2}, 2000, 2},
      /* 4 ranks on 2 cores: they must yield */
      {"vm2 4 ranks", {.online_cpus = 2, .affinity_cpus = 2, .local_ranks = 4}, 8, 2},
      /* a container on a 16-core host limited to 2 CPUs (cpu.max 200000 100000) */
      {"container",
       {.online_cpus = 16, .quota_cpus = 2, .affinity_cpus = 16, .local_ranks = 4},
       8,
       2},
      /* a quota above the host's CPUs does not raise them */
      {"quota>host",
       {.online_cpus = 2, .quota_cpus = 8, .affinity_cpus = 2, .local_ranks = 4},
       8,
       2},
      /* nothing known: spin */
      {"unknown", {.local_ranks = 4}, 2000, 0},
  };

  for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
    int cpus = -1;
    int passes = mc_tp_decide_spin(&hosts[i].f, &cpus);
    if ((passes != hosts[i].want_passes) || (cpus != hosts[i].want_cpus))
      MC_T_FAIL("%s: %d passes on %d CPUs, want %d on %d", hosts[i].what, passes, cpus,
                hosts[i].want_passes, hosts[i].want_cpus);
  }
}

static void cgroup_texts(void)
{
  MC_T_EQ_INT(mc_tp_cgroup_v2_cpus("max 100000\n"), 0);
  MC_T_EQ_INT(mc_tp_cgroup_v2_cpus("200000 100000\n"), 2);
  MC_T_EQ_INT(mc_tp_cgroup_v2_cpus("150000 100000\n"), 2);
  MC_T_EQ_INT(mc_tp_cgroup_v2_cpus("50000 100000"), 1);
  MC_T_EQ_INT(mc_tp_cgroup_v2_cpus("garbage"), 0);
  MC_T_EQ_INT(mc_tp_cgroup_v1_cpus("-1\n", "100000\n"), 0);
  MC_T_EQ_INT(mc_tp_cgroup_v1_cpus("400000\n", "100000\n"), 4);
  MC_T_EQ_INT(mc_tp_cgroup_v1_cpus("400000\n", "0\n"), 0);
}

static void put(const char *root, const char *rel, const char *text)
{
  char path[512];
  FILE *f;

  snprintf(path, sizeof(path), "%s/%s", root, rel);
  f = fopen(path, "w");
  MC_T_TRUE(f != NULL);
  fputs(text, f);
  fclose(f);
}

static void dir(const char *root, const char *rel)
{
  char path[512];

  snprintf(path, sizeof(path), "%s/%s", root, rel);
  MC_T_EQ_INT(mkdir(path, 0755), 0);
}

/* Recorded trees: the lowest quota on the way up from the process's cgroup. */
static void cgroup_trees(void)
{
  char root[] = "/tmp/mc_tp_decide_XXXXXX";
  char cmd[600];
  struct mc_host_figures f;

  MC_T_TRUE(mkdtemp(root) != NULL);
  /* v2: /sys/fs/cgroup/cpu.max is absent at the root; a slice limits to 3
   * CPUs, the job's own cgroup to 1.5 (2 rounded up) */
  dir(root, "job.slice");
  dir(root, "job.slice/rank0");
  put(root, "job.slice/cpu.max", "300000 100000\n");
  put(root, "job.slice/rank0/cpu.max", "max 100000\n");
  mc_tp_host_figures_read(root, "0::/job.slice/rank0\n", 2, &f);
  MC_T_EQ_INT(f.quota_cpus, 3);
  MC_T_EQ_INT(f.local_ranks, 2);
  MC_T_TRUE(f.online_cpus > 0);
  put(root, "job.slice/rank0/cpu.max", "150000 100000\n");
  mc_tp_host_figures_read(root, "0::/job.slice/rank0\n", 2, &f);
  MC_T_EQ_INT(f.quota_cpus, 2);
  /* a container whose cgroup namespace shows "/" */
  put(root, "cpu.max", "400000 100000\n");
  mc_tp_host_figures_read(root, "0::/\n", 2, &f);
  MC_T_EQ_INT(f.quota_cpus, 4);
  /* v1: the cpu controller's hierarchy, quota -1 in the leaf */
  dir(root, "cpu,cpuacct");
  dir(root, "cpu,cpuacct/docker");
  dir(root, "cpu,cpuacct/docker/abc");
  put(root, "cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
  put(root, "cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
  put(root, "cpu,cpuacct/docker/cpu.cfs_quota_us", "600000\n");
  put(root, "cpu,cpuacct/docker/cpu.cfs_period_us", "100000\n");
  mc_tp_host_figures_read(root,
                          "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n"
                          "1:name=systemd:/docker/abc\n",
                          2, &f);
  MC_T_EQ_INT(f.quota_cpus, 6);
  /* no limit anywhere */
  mc_tp_host_figures_read(root, "3:memory:/x\n", 2, &f);
  MC_T_EQ_INT(f.quota_cpus, 0);
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
  MC_T_EQ_INT(system(cmd), 0);
}

/* "P2P/CMA probe" lines the 2-core VM logged (4K, 16K, 64K, 256K steps). */
static const struct mc_cma_figures vm_probes[] = {
    /* meshccl-perf all_reduce, 2 ranks, load average 16 (rank 0, rank 1) */
    {4, {4096, 16384, 65536, 262144}, {15.5f, 41.2f, 47.3f, 46.0f}, {4.0f, 9.1f, 12.7f, 14.3f}},
    {4, {4096, 16384, 65536, 262144}, {34.1f, 47.1f, 49.3f, 48.0f}, {4.7f, 9.7f, 13.4f, 15.0f}},
    /* the same loop over a 64 MiB buffer (DRAM), load average 13 */
    {4,
     {4096, 16384, 65536, 262144},
     {6.87f, 10.63f, 17.66f, 15.91f},
     {2.15f, 3.51f, 3.53f, 4.25f}},
};

/* The Xeon: a FIFO hop as one rank pays it is its pair's FIFO rate (9.0-10.1
 * GB/s, writer and reader on two cores) with both copies on one core: 9.5 / 2. */
static void xeon_figures(double call_ns, double copy_gbps, struct mc_cma_figures *f)
{
  static const size_t sizes[] = {4096, 16384, 65536, 131072, 262144};

  memset(f, 0, sizeof(*f));
  for (int i = 0; i < 5; i++) {
    f->bytes[i] = sizes[i];
    f->fifo_gbps[i] = 9.5f / 2;
    f->cma_gbps[i] = mc_tp_cma_rate(sizes[i], call_ns, copy_gbps);
  }
  f->n_sizes = 5;
}

static void cma_choice_on_recorded_hosts(void)
{
  struct mc_cma_figures f;

  /* The VM: the FIFO wins at every size, by 3-8x: never single copy, at
   * the 128 KiB slots of one host's default FIFO and at 256 KiB. */
  for (size_t i = 0; i < sizeof(vm_probes) / sizeof(vm_probes[0]); i++) {
    MC_T_TRUE(mc_tp_decide_cma(&vm_probes[i], 131072) == MC_CMA_NEVER);
    MC_T_TRUE(mc_tp_decide_cma(&vm_probes[i], 262144) == MC_CMA_NEVER);
  }
  /* The VM's call cost, fitted to its first probe (4 KiB 4.0, 256 KiB 14.3
   * GB/s): about 750 ns and 14.9 GB/s. */
  MC_T_TRUE(mc_tp_cma_rate(4096, 750, 14.9) > 3.9f);
  MC_T_TRUE(mc_tp_cma_rate(4096, 750, 14.9) < 4.1f);
  MC_T_TRUE(mc_tp_cma_rate(262144, 750, 14.9) > 14.2f);
  MC_T_TRUE(mc_tp_cma_rate(262144, 750, 14.9) < 14.4f);
  /* Xeon (a): the kernel copies at the core's 16 MiB rate (11.4), a call
   * costs the VM's 750 ns: 4 KiB 3.7 GB/s loses to the hop's 4.75, 16 KiB
   * 7.5 wins: single copy from 16 KiB. */
  xeon_figures(750, 11.4, &f);
  MC_T_TRUE(mc_tp_decide_cma(&f, 131072) == 16384);
  MC_T_TRUE(mc_tp_decide_cma(&f, 262144) == 16384);
  /* (b): the DRAM rate (10.4) and a call four times dearer (3 us): 16 KiB
   * 3.6 loses, 64 KiB 7.1 wins: from 64 KiB. */
  xeon_figures(3000, 10.4, &f);
  MC_T_TRUE(mc_tp_decide_cma(&f, 131072) == 65536);
  /* (c): the VM's own ratio of CMA to FIFO hop (0.26-0.31 at 64-256 KiB)
   * on the Xeon's hop: never. */
  xeon_figures(750, 4.75 * 0.31, &f);
  MC_T_TRUE(mc_tp_decide_cma(&f, 131072) == MC_CMA_NEVER);
}

static void cma_choice_rules(void)
{
  struct mc_cma_figures f = {
      4, {4096, 16384, 65536, 262144}, {10, 10, 10, 10}, {5, 11.5f, 10.5f, 12}};

  /* 16 KiB wins by 15%, 64 KiB by 5% only (short of the 10% margin): the
   * run of wins that ends at the largest size starts at 256 KiB. */
  MC_T_TRUE(mc_tp_decide_cma(&f, 262144) == 262144);
  /* steps of at most 64 KiB: the largest that counts loses: never */
  MC_T_TRUE(mc_tp_decide_cma(&f, 65536) == MC_CMA_NEVER);
  /* exactly 10% more wins */
  f.cma_gbps[2] = 11;
  MC_T_TRUE(mc_tp_decide_cma(&f, 262144) == 16384);
  /* a size without a figure counts as a loss */
  f.cma_gbps[1] = 0;
  MC_T_TRUE(mc_tp_decide_cma(&f, 262144) == 65536);
  /* wins at small sizes only: never */
  f = (struct mc_cma_figures){2, {4096, 65536}, {10, 10}, {20, 9}};
  MC_T_TRUE(mc_tp_decide_cma(&f, 65536) == MC_CMA_NEVER);
  /* no size at or below the slot, or no figures at all: never */
  MC_T_TRUE(mc_tp_decide_cma(&f, 2048) == MC_CMA_NEVER);
  f.n_sizes = 0;
  MC_T_TRUE(mc_tp_decide_cma(&f, 65536) == MC_CMA_NEVER);
  MC_T_TRUE(mc_tp_cma_rate(0, 750, 10) == 0);
  MC_T_TRUE(mc_tp_cma_rate(4096, 750, 0) == 0);
}

/* The FIFO of a single-host connection from the caches sysfs describes:
 * the trees of tests/data/sysfs/make-cache.sh (the VM's as its sysfs reads;
 * the 16-core Xeon's with a Sapphire Rapids core's 2 MiB of L2), a rank
 * busy with a send and a receive connection per channel. */
static void fifo_choice_on_recorded_hosts(void)
{
  struct mc_cache_facts vm;
  struct mc_cache_facts xeon;
  struct mc_cache_facts c;

  MC_T_TRUE(mc_tp_cache_read(mc_t_data("sysfs/cache-epyc-vm"), 1, &vm));
  MC_T_EQ_INT(vm.cpu, 1);
  MC_T_EQ_INT(vm.l2_kib, 1024);
  MC_T_EQ_INT(vm.l2_sharing, 1);
  MC_T_EQ_INT(vm.llc_level, 3);
  MC_T_EQ_INT(vm.llc_kib, 32768);
  MC_T_EQ_INT(vm.llc_sharing, 2);
  /* 2 ranks on the VM: 2 channels, 4 busy FIFOs in 4 x 1 MiB: 1 MiB (the
   * size measured best there, docs/design/datapath.md) */
  MC_T_TRUE(mc_tp_decide_fifo(&vm, 4) == (1u << 20));
  MC_T_TRUE(mc_tp_decide_fifo(&vm, 2) == (2u << 20));
  MC_T_TRUE(mc_tp_decide_fifo(&vm, 8) == (512u << 10));
  MC_T_TRUE(mc_tp_decide_fifo(&vm, 64) == MC_FIFO_MIN_BYTES);
  MC_T_TRUE(mc_tp_cache_read(mc_t_data("sysfs/cache-xeon16"), 7, &xeon));
  MC_T_EQ_INT(xeon.l2_kib, 2048);
  MC_T_EQ_INT(xeon.llc_kib, 30720);
  MC_T_EQ_INT(xeon.llc_sharing, 16);
  /* the Xeon (Sapphire Rapids), 2 channels: 4 FIFOs in 8 MiB: 2 MiB; one
   * channel: the cap, 4 MiB (NCCL's); with the 1-1.25 MiB of L2 of the
   * older generations, 1 MiB */
  MC_T_TRUE(mc_tp_decide_fifo(&xeon, 4) == (2u << 20));
  MC_T_TRUE(mc_tp_decide_fifo(&xeon, 2) == MC_FIFO_MAX_BYTES);
  c = xeon;
  c.l2_kib = 1280;
  MC_T_TRUE(mc_tp_decide_fifo(&c, 4) == (1u << 20));
  c.l2_kib = 1024;
  MC_T_TRUE(mc_tp_decide_fifo(&c, 4) == (1u << 20));
  /* an L2 shared by two hyperthreads: each has half of it */
  c = xeon;
  c.l2_sharing = 2;
  MC_T_TRUE(mc_tp_decide_fifo(&c, 4) == (1u << 20));
  /* no such CPU in the tree, no L2: the floor */
  MC_T_TRUE(!mc_tp_cache_read(mc_t_data("sysfs/cache-epyc-vm"), 5, &c));
  MC_T_EQ_INT(c.cpu, 5);
  MC_T_EQ_INT(c.l2_kib, 0);
  MC_T_TRUE(mc_tp_decide_fifo(&c, 4) == MC_FIFO_MIN_BYTES);
  /* streamed outputs from the L2 of one core: the VM's 1 MiB (where 1-64 MiB gained,
   * docs/design/datapath.md), Sapphire Rapids' 2 MiB, half of it for two hyperthreads, and
   * 1 MiB where no L2 is described */
  MC_T_TRUE(mc_tp_decide_stream_out(&vm) == (1u << 20));
  MC_T_TRUE(mc_tp_decide_stream_out(&xeon) == (2u << 20));
  c = xeon;
  c.l2_sharing = 2;
  MC_T_TRUE(mc_tp_decide_stream_out(&c) == (1u << 20));
  c.l2_kib = 0;
  MC_T_TRUE(mc_tp_decide_stream_out(&c) == MC_STREAM_OUT_BYTES);
  /* the symmetric all-reduce's chunk: n + 2 of them in one core's L2, whole 4 KiB pages, at
   * least 32 KiB: the VM's 1 MiB at 2 ranks 256 KiB, at 3 ranks 204 KiB (204.8 rounded
   * down); Sapphire Rapids' 2 MiB at 2 ranks 512 KiB; 64 ranks the floor; no L2: 1 MiB's */
  MC_T_TRUE(mc_tp_decide_sym_chunk(&vm, 2) == (256u << 10));
  MC_T_TRUE(mc_tp_decide_sym_chunk(&vm, 3) == (204u << 10));
  MC_T_TRUE(mc_tp_decide_sym_chunk(&xeon, 2) == (512u << 10));
  MC_T_TRUE(mc_tp_decide_sym_chunk(&xeon, 64) == MC_SYM_CHUNK_MIN_BYTES);
  MC_T_TRUE(mc_tp_decide_sym_chunk(&c, 2) == (256u << 10));
  MC_T_TRUE(!mc_tp_cache_read("/nonexistent", 0, &c));
}

/* The one-shot all-reduce's threshold from the model on recorded
 * hand-off figures: the VM's (bench/limit's cache-line round trip 516 ns
 * and pair FIFO 24.5 GB/s; and what mc_tp_handoff_probe measured there,
 * 119 ns and 87.1 GB/s), the Xeon's (round trip 344-413 ns, pair FIFO
 * 9.0-10.1 GB/s, both ends); limit: the one-shot's slot limit with 1 MiB
 * FIFOs (128 KiB slots / n). */
static void oneshot_choice_on_recorded_hosts(void)
{
  struct mc_handoff_figures vm_limit = {516, 24.5f, 0};
  struct mc_handoff_figures vm_probe = {119, 87.1f, 0};
  struct mc_handoff_figures xeon_lo = {344, 9.0f, 0};
  struct mc_handoff_figures xeon_hi = {413, 10.1f, 0};
  struct mc_handoff_figures none = {0, 0, 0};

  /* 2 ranks: the one-shot up to its slots' limit, with or without figures */
  MC_T_TRUE(mc_tp_decide_oneshot(2, &vm_limit, 65536) == 65536);
  MC_T_TRUE(mc_tp_decide_oneshot(2, &xeon_lo, 65536) == 65536);
  MC_T_TRUE(mc_tp_decide_oneshot(2, &none, 65536) == 65536);
  /* the VM, 3 and 4 ranks: S* = (2n-3) n h c / (2 (n-1) (n-2)) */
  MC_T_TRUE(mc_tp_decide_oneshot(3, &vm_limit, 43648) == 28416);
  MC_T_TRUE(mc_tp_decide_oneshot(4, &vm_limit, 32768) == 21056);
  MC_T_TRUE(mc_tp_decide_oneshot(4, &vm_probe, 32768) == 17216);
  MC_T_TRUE(mc_tp_decide_oneshot(8, &vm_limit, 16384) == 15616);
  /* the Xeon: 5-7 KiB at 4 ranks, 4-5 KiB at 8, the floor's region at 16 */
  MC_T_TRUE(mc_tp_decide_oneshot(4, &xeon_lo, 32768) == 5120);
  MC_T_TRUE(mc_tp_decide_oneshot(4, &xeon_hi, 32768) == 6912);
  MC_T_TRUE(mc_tp_decide_oneshot(8, &xeon_lo, 16384) == MC_ONESHOT_MIN_BYTES);
  MC_T_TRUE(mc_tp_decide_oneshot(8, &xeon_hi, 16384) == 5120);
  MC_T_TRUE(mc_tp_decide_oneshot(16, &xeon_hi, 8192) == 4608);
  /* clamps: the slot limit above, the floor without figures, a limit
   * below the floor wins */
  MC_T_TRUE(mc_tp_decide_oneshot(4, &vm_limit, 16384) == 16384);
  MC_T_TRUE(mc_tp_decide_oneshot(4, &none, 32768) == MC_ONESHOT_MIN_BYTES);
  MC_T_TRUE(mc_tp_decide_oneshot(64, &vm_limit, 2048) == 2048);
  /* ranks that outnumber the CPUs (3 or 4 on the 2-core VM): the limit,
   * with or without figures; as many ranks as CPUs: the model */
  vm_limit.cpus = 2;
  none.cpus = 2;
  MC_T_TRUE(mc_tp_decide_oneshot(3, &vm_limit, 43648) == 43648);
  MC_T_TRUE(mc_tp_decide_oneshot(4, &none, 32768) == 32768);
  xeon_hi.cpus = 16;
  MC_T_TRUE(mc_tp_decide_oneshot(16, &xeon_hi, 8192) == 4608);
  MC_T_TRUE(mc_tp_decide_oneshot(17, &xeon_hi, 7680) == 7680);
}

/* The hand-off probe (tp_handoff.c) on this machine: no timing is checked,
 * only that it reports figures or says why there are none, names its CPUs
 * and runs once per process. */
static void handoff_probe_reports(void)
{
  struct mc_handoff_figures f;
  struct mc_handoff_figures g;
  struct mc_handoff_info info;
  struct mc_handoff_info again;

  MC_T_TRUE(!mc_tp_handoff_probe_peek(&f, &info));
  mc_tp_handoff_probe(&f, &info);
  MC_T_TRUE(((f.handoff_ns > 0) && (f.copy_gbps > 0) && (info.why[0] == '\0')) ||
            ((f.handoff_ns == 0) && (f.copy_gbps == 0) && (info.why[0] != '\0')));
  MC_T_TRUE((info.why[0] != '\0') ||
            ((info.cpu_a >= 0) && (info.cpu_b >= 0) && (info.cpu_a != info.cpu_b)));
  MC_T_TRUE(mc_tp_handoff_probe_peek(&g, &again));
  MC_T_TRUE((g.handoff_ns == f.handoff_ns) && (g.copy_gbps == f.copy_gbps));
  MC_T_TRUE(again.ms == info.ms);
}

/* Threads per rank (MESHCCL_NTHREADS -1): the idle cores shared among the
 * local ranks, +1 for the rank's own thread, at most the channels. */
static void threads_choice_on_recorded_hosts(void)
{
  static const struct {
    const char *what;
    struct mc_host_figures f;
    int n_channels;
    int forced;
    int want;
    int want_idle;
  } hosts[] = {
      /* this 2-core VM: no idle core, 2 or 4 ranks, bound or not, forced or not */
      {"vm2", {.online_cpus = 2, .affinity_cpus = 2, .local_ranks = 2}, 2, -1, 1, 0},
      {"vm2 bound", {.online_cpus = 2, .affinity_cpus = 1, .local_ranks = 2}, 4, -1, 1, 0},
      {"vm2 4 ranks", {.online_cpus = 2, .affinity_cpus = 2, .local_ranks = 4}, 4, -1, 1, 0},
      {"vm2 forced 3", {.online_cpus = 2, .affinity_cpus = 2, .local_ranks = 2}, 2, 3, 3, 0},
      /* 16-core Xeon, ranks bound to one core each (meshccl-run, mpirun --bind-to core) */
      {"xeon16 2 ranks, 2 ch",
       {.online_cpus = 16, .affinity_cpus = 1, .local_ranks = 2},
       2,
       -1,
       2,
       14},
      {"xeon16 2 ranks, 8 ch",
       {.online_cpus = 16, .affinity_cpus = 1, .local_ranks = 2},
       8,
       -1,
       8,
       14},
      {"xeon16 2 ranks, 16 ch",
       {.online_cpus = 16, .affinity_cpus = 1, .local_ranks = 2},
       16,
       -1,
       8,
       14},
      {"xeon16 4 ranks", {.online_cpus = 16, .affinity_cpus = 1, .local_ranks = 4}, 16, -1, 4, 12},
      {"xeon16 4 ranks, 3 ch",
       {.online_cpus = 16, .affinity_cpus = 1, .local_ranks = 4},
       3,
       -1,
       3,
       12},
      {"xeon16 6 ranks", {.online_cpus = 16, .affinity_cpus = 1, .local_ranks = 6}, 16, -1, 2, 10},
      {"xeon16 16 ranks", {.online_cpus = 16, .affinity_cpus = 1, .local_ranks = 16}, 16, -1, 1, 0},
      {"xeon16 forced 1", {.online_cpus = 16, .affinity_cpus = 1, .local_ranks = 2}, 8, 1, 1, 14},
      /* a container of a 16-core host limited to 4 CPUs (cpu.max 400000 100000) */
      {"container", {.online_cpus = 16, .quota_cpus = 4, .local_ranks = 2}, 8, -1, 2, 2},
      /* forced beyond the bound */
      {"forced 1000", {.online_cpus = 2, .local_ranks = 2}, 2, 1000, MC_THREADS_MAX, 0},
      /* nothing known: one thread */
      {"unknown", {.local_ranks = 4}, 8, -1, 1, 0},
  };

  for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
    int idle = -1;
    int k = mc_tp_decide_threads(&hosts[i].f, hosts[i].n_channels, hosts[i].forced, &idle);
    if ((k != hosts[i].want) || (idle != hosts[i].want_idle))
      MC_T_FAIL("%s: %d threads (%d idle CPUs), want %d (%d)", hosts[i].what, k, idle,
                hosts[i].want, hosts[i].want_idle);
  }
}

/* Where a rank's workers run: the host's idle cores for unbound ranks and
 * ranks bound to one core, the mask's nearest CPUs for a rank bound to a
 * few (a NUMA node). */
static void worker_cpus_on_recorded_hosts(void)
{
  static const int one0[] = {0};
  static const int one1[] = {1};
  static const int one3[] = {3};
  static const int vm2[] = {0, 1};
  static const int xeon16[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  static const int node0[] = {0, 1, 2, 3, 4, 5, 6, 7};
  static const struct {
    const char *what;
    const int *mask;
    int n_mask, n_online, cur, k, local_rank, local_ranks;
    int want[8];
  } cases[] = {
      /* the 2-core VM, MESHCCL_NTHREADS=3 forced: no idle core, round robin */
      {"vm2 rank 0", vm2, 2, 2, 0, 3, 0, 2, {0, 1}},
      {"vm2 rank 1 bound", one1, 1, 2, 1, 2, 1, 2, {1}},
      /* 16-core Xeon, 2 ranks bound to cores 0 and 1, 8 threads each: 2-8, 9-15 */
      {"xeon16 rank 0", one0, 1, 16, 0, 8, 0, 2, {2, 3, 4, 5, 6, 7, 8}},
      {"xeon16 rank 1", one1, 1, 16, 1, 8, 1, 2, {9, 10, 11, 12, 13, 14, 15}},
      /* ... 4 ranks, 4 threads each: rank 3 on core 3 takes 13-15 */
      {"xeon16 4 ranks, rank 3", one3, 1, 16, 3, 4, 3, 4, {13, 14, 15}},
      /* ... unbound: the same idle cores */
      {"xeon16 unbound", xeon16, 16, 16, 5, 8, 0, 2, {2, 3, 4, 5, 6, 7, 8}},
      /* ... bound to NUMA node 0 (CPUs 0-7), running on 3: its nearest */
      {"xeon16 node 0", node0, 8, 16, 3, 4, 0, 2, {2, 4, 1}},
      {"xeon16 node 0 at its edge", node0, 8, 16, 7, 4, 1, 2, {6, 5, 4}},
  };

  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    int got[8];
    mc_tp_decide_worker_cpus(cases[i].mask, cases[i].n_mask, cases[i].n_online, cases[i].cur,
                             cases[i].k, cases[i].local_rank, cases[i].local_ranks, got);
    for (int j = 0; j < cases[i].k - 1; j++)
      if (got[j] != cases[i].want[j])
        MC_T_FAIL("%s: worker %d on CPU %d, want %d", cases[i].what, j + 1, got[j],
                  cases[i].want[j]);
  }
}

MC_T_MAIN(stream_windows_separate, stream_choice_on_recorded_rates,
          stream_margin_and_missing_samples, spin_choice_on_recorded_hosts,
          threads_choice_on_recorded_hosts, worker_cpus_on_recorded_hosts, cgroup_texts,
          cgroup_trees, cma_choice_on_recorded_hosts, cma_choice_rules,
          fifo_choice_on_recorded_hosts, oneshot_choice_on_recorded_hosts, handoff_probe_reports)
