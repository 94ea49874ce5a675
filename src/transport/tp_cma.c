/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What cross-memory attach costs on this host, measured once per process
 * (tp_int.h mc_tp_cma_probe): for step sizes of 4 KiB to 256 KiB, the rate
 * of a FIFO hop as one rank pays it (a step copied into a slot, then out of
 * it) and of one process_vm_readv of the step, over a 1 MiB buffer, the
 * best of three passes each, taken in turns. process_vm_readv reads this
 * process itself: the system call, the pinning of the pages and the
 * kernel's copy are what a read of a peer pays; the line transfers between
 * cores both ways pay alike (the FIFO's receiver reads lines its sender
 * wrote; CMA reads the lines the peer's buffer holds). mc_tp_decide_cma
 * turns the figures into the step size from which the P2P sender publishes
 * its buffer (tp_p2p.c), logged at NCCL_DEBUG_SUBSYS=TUNING. The figures
 * are the host's: at init its first local rank measures them and the others
 * adopt them (init_connect.c), so that one process of the host pays the
 * probe instead of every rank (at 256 ranks on 2 cores the probes were a
 * quarter of the init's CPU time), and all decide from the same figures.
 */
#include "transport/tp_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "log.h"
#include "params.h"
#include "utils.h"

#define PROBE_BUF_BYTES (1u << 20)
#define PROBE_PASSES    3

static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static bool probe_done; /* probe_figs and probe_why hold this process's figures */
static bool probe_said; /* the TUNING line is out */
static struct mc_cma_figures probe_figs;
static char probe_why[160]; /* why CMA was not measured ("": it was) */
static double probe_ms;     /* what measuring took here */
static int probe_from = -1; /* adopted: the rank whose process measured them */

static uint64_t pass_fifo(char *dst, const char *src, char *slot, size_t step)
{
  uint64_t t0 = mc_time_ns();

  for (size_t o = 0; o + step <= PROBE_BUF_BYTES; o += step) {
    memcpy(slot, src + o, step);
    memcpy(dst + o, slot, step);
  }
  return mc_time_ns() - t0;
}

/* 0 when a read failed (errno kept). */
static uint64_t pass_cma(char *dst, const char *src, size_t step)
{
  uint64_t t0 = mc_time_ns();
  pid_t me = getpid();

  for (size_t o = 0; o + step <= PROBE_BUF_BYTES; o += step) {
    struct iovec local = {.iov_base = dst + o, .iov_len = step};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)(src + o), .iov_len = step};
    if (process_vm_readv(me, &local, 1, &remote, 1, 0) != (ssize_t)step)
      return 0;
  }
  return mc_time_ns() - t0;
}

static void probe_run(void)
{
  static const size_t sizes[] = {4096, 16384, 65536, 262144};
  char *src = aligned_alloc(4096, PROBE_BUF_BYTES);
  char *dst = aligned_alloc(4096, PROBE_BUF_BYTES);
  char *slot = aligned_alloc(4096, sizes[3]);

  memset(&probe_figs, 0, sizeof(probe_figs));
  if ((src == NULL) || (dst == NULL) || (slot == NULL)) {
    snprintf(probe_why, sizeof(probe_why), "no memory for the probe's %u-byte buffers",
             PROBE_BUF_BYTES);
    goto out;
  }
  memset(src, 1, PROBE_BUF_BYTES);
  memset(dst, 2, PROBE_BUF_BYTES);
  memset(slot, 3, sizes[3]);
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    uint64_t best_fifo = UINT64_MAX;
    uint64_t best_cma = UINT64_MAX;
    for (int p = 0; p < PROBE_PASSES; p++) {
      uint64_t f = pass_fifo(dst, src, slot, sizes[i]);
      uint64_t c = pass_cma(dst, src, sizes[i]);
      if (c == 0) {
        snprintf(probe_why, sizeof(probe_why), "process_vm_readv of this process failed: %s",
                 strerror(errno));
        goto out;
      }
      best_fifo = (f < best_fifo) ? f : best_fifo;
      best_cma = (c < best_cma) ? c : best_cma;
    }
    probe_figs.bytes[i] = sizes[i];
    /* bytes per ns = GB/s; a pass of 0 ns (a coarse clock) counts as 1 */
    probe_figs.fifo_gbps[i] = (float)PROBE_BUF_BYTES / (float)((best_fifo > 0) ? best_fifo : 1);
    probe_figs.cma_gbps[i] = (float)PROBE_BUF_BYTES / (float)((best_cma > 0) ? best_cma : 1);
    probe_figs.n_sizes = (int)i + 1;
  }
out:
  free(src);
  free(dst);
  free(slot);
}

/* "4K 1.2, 16K 3.4, ..." : the figures' rates of one kind per size. */
static void format_rates(char *buf, size_t len, const struct mc_cma_figures *f, bool cma)
{
  size_t at = 0;

  buf[0] = '\0';
  for (int i = 0; (i < f->n_sizes) && (at < len); i++) {
    int w = snprintf(buf + at, len - at, "%s%zuK %.1f", (i == 0) ? "" : ", ", f->bytes[i] >> 10,
                     cma ? f->cma_gbps[i] : f->fifo_gbps[i]);
    if (w < 0)
      break;
    at += (size_t)w;
  }
}

/* Measures once (probe_lock held). */
static void probe_once(void)
{
  uint64_t t0;

  if (probe_done)
    return;
  t0 = mc_time_ns();
  probe_run();
  probe_ms = (double)(mc_time_ns() - t0) * 1e-6;
  probe_done = true;
}

bool mc_tp_cma_by_probe(void)
{
  return (mc_param_int(MC_P_P2P_CMA) < 0) && (mc_param_int(MC_P_P2P_CMA_BYTES) < 0);
}

void mc_tp_cma_measure(struct mc_cma_figures *out, const char **why_out)
{
  pthread_mutex_lock(&probe_lock);
  probe_once();
  *out = probe_figs;
  *why_out = (probe_why[0] != '\0') ? probe_why : NULL;
  pthread_mutex_unlock(&probe_lock);
}

void mc_tp_cma_adopt(const struct mc_cma_figures *f, int from_rank)
{
  pthread_mutex_lock(&probe_lock);
  if (!probe_done) {
    probe_figs = *f;
    probe_why[0] = '\0';
    probe_from = from_rank;
    probe_done = true;
  }
  pthread_mutex_unlock(&probe_lock);
}

void mc_tp_cma_probe(size_t slot_bytes, struct mc_cma_figures *out, const char **why_out)
{
  pthread_mutex_lock(&probe_lock);
  probe_once();
  if (!probe_said) {
    char fifo[160];
    char cma[160];
    char took[96];
    size_t from = mc_tp_decide_cma(&probe_figs, slot_bytes);
    if (probe_from >= 0)
      snprintf(took, sizeof(took), "rank %d's, for this host's ranks", probe_from);
    else
      snprintf(took, sizeof(took), "%.1f ms", probe_ms);
    format_rates(fifo, sizeof(fifo), &probe_figs, false);
    format_rates(cma, sizeof(cma), &probe_figs, true);
    if (probe_why[0] != '\0')
      MC_INFO(MC_SUB_TUNING | MC_SUB_P2P,
              "P2P/CMA probe: not measured (%s): P2P between "
              "processes declines, SHM carries it",
              probe_why);
    else if (from == MC_CMA_NEVER)
      MC_INFO(MC_SUB_TUNING | MC_SUB_P2P,
              "P2P/CMA probe (%s): per step size, GB/s: FIFO hop (copy in, copy out) %s; "
              "process_vm_readv %s: the FIFO is faster at every size (CMA needs %d%% more): P2P "
              "between processes declines, SHM carries it (MESHCCL_P2P_CMA=1 forces CMA)",
              took, fifo, cma, MC_CMA_MARGIN_PCT);
    else
      MC_INFO(MC_SUB_TUNING | MC_SUB_P2P,
              "P2P/CMA probe (%s): per step size, GB/s: FIFO hop (copy in, copy out) %s; "
              "process_vm_readv %s: single copy (the receiver reads the sender's buffer) for "
              "steps of %zu bytes and more (slots of %zu), the FIFO below (MESHCCL_P2P_CMA=0 or "
              "1 forces one)",
              took, fifo, cma, from, slot_bytes);
    probe_said = true;
  }
  *out = probe_figs;
  if (why_out != NULL)
    *why_out = (probe_why[0] != '\0') ? probe_why : NULL;
  pthread_mutex_unlock(&probe_lock);
}
