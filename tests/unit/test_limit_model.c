/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench/limit's model (bench/limit_model.c), pure arithmetic: the bytes each
 * rank moves per algorithm for known n, the rates at a working set (anchors,
 * interpolation, the memory bus shared by n ranks of k threads), busbw for
 * given figures worked out by hand, the figures' text form, and the exact
 * table and JSON lines.
 */
#include "limit_model.h"
#include "mc_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NEAR(_a, _b)                                                                               \
  MC_T_TRUE(fabs((double)(_a) - (double)(_b)) <= 1e-9 * fabs((double)(_b)) + 1e-12)

static struct mc_lim_figures *flat(double copy, double red, double pair, int cores)
{
  static struct mc_lim_figures f;

  memset(&f, 0, sizeof(f));
  for (int i = 0; i < MC_LIM_N_ANCHORS; i++) {
    f.copy[i] = copy;
    f.red[i] = red;
  }
  f.pair = pair;
  f.cores = cores;
  return &f;
}

static void bytes_per_rank(void)
{
  struct mc_lim_bytes b;

  /* FIFO all-reduce, 4 ranks, c = 1: send, 2 recvReduceSend, recvReduceCopySend, 2 recvCopySend,
   * recv: 6 chunks into its slots and 6 out of its peer's, 6 hops. */
  mc_lim_rank_bytes(MC_LIM_ALL_REDUCE, MC_LIM_FIFO, 4, 4, &b);
  NEAR(b.pass, 6);
  NEAR(b.red, 3);
  NEAR(b.steps, 7);
  NEAR(b.read, 10);
  NEAR(b.write, 10);
  NEAR(b.local, 0);
  mc_lim_rank_bytes(MC_LIM_ALL_REDUCE, MC_LIM_SINGLE, 4, 4, &b);
  NEAR(b.pass, 6);
  NEAR(b.red, 3);
  NEAR(b.steps, 3);
  NEAR(b.read, 7);
  NEAR(b.write, 4);
  mc_lim_rank_bytes(MC_LIM_ALL_GATHER, MC_LIM_FIFO, 8, 800, &b);
  NEAR(b.pass, 700);
  NEAR(b.red, 0);
  NEAR(b.steps, 8);
  NEAR(b.read, 800);
  NEAR(b.write, 1500);
  mc_lim_rank_bytes(MC_LIM_ALL_GATHER, MC_LIM_SINGLE, 8, 800, &b);
  NEAR(b.pass, 700);
  NEAR(b.local, 100);
  NEAR(b.steps, 2);
  mc_lim_rank_bytes(MC_LIM_REDUCE_SCATTER, MC_LIM_FIFO, 2, 64, &b);
  NEAR(b.pass, 32);
  NEAR(b.red, 32);
  NEAR(b.read, 96);
  NEAR(b.write, 64);
  mc_lim_rank_bytes(MC_LIM_REDUCE_SCATTER, MC_LIM_SINGLE, 16, 1600, &b);
  NEAR(b.pass, 1500);
  NEAR(b.red, 1500);
  NEAR(b.write, 100);
  mc_lim_rank_bytes(MC_LIM_BROADCAST, MC_LIM_FIFO, 4, 1000, &b);
  NEAR(b.pass, 1000);
  NEAR(b.steps, 4);
  NEAR(b.write, 2000);
  NEAR(mc_lim_bus_factor(MC_LIM_ALL_REDUCE, 4), 1.5);
  NEAR(mc_lim_bus_factor(MC_LIM_ALL_GATHER, 4), 0.75);
  NEAR(mc_lim_bus_factor(MC_LIM_BROADCAST, 4), 1.0);
  NEAR(mc_lim_working_set(MC_LIM_ALL_REDUCE, 4, 100), 200);
  NEAR(mc_lim_working_set(MC_LIM_REDUCE_SCATTER, 4, 100), 125);
}

static void rates(void)
{
  struct mc_lim_figures *f = flat(10, 5, 8, 4);
  struct mc_lim_rates r;

  mc_lim_rates(f, 2, 1, 1e9, &r);
  NEAR(r.copy, 10);
  NEAR(r.red, 5);
  NEAR(r.fetch, 8);
  NEAR(r.hop, 4); /* no duplex figure: half the one-way pair */
  f->duplex[0] = f->duplex[1] = 6;
  mc_lim_rates(f, 2, 1, 1e9, &r);
  NEAR(r.hop, 6);
  /* k threads: k times each rate; no agg figure: the bus grows with them. */
  mc_lim_rates(f, 2, 2, 1e9, &r);
  NEAR(r.copy, 20);
  NEAR(r.red, 10);
  NEAR(r.fetch, 16);
  NEAR(r.hop, 12);
  f->duplex[0] = f->duplex[1] = 0;
  /* Between the anchors: linear in log2(ws); 4 MiB is half way from 1 to 16 MiB. */
  f->copy[0] = 20;
  mc_lim_rates(f, 2, 1, 4194304, &r);
  NEAR(r.copy, 15);
  NEAR(r.fetch, 8);
  mc_lim_rates(f, 2, 1, 1024, &r);
  NEAR(r.copy, 20);
  /* The bus: agg2 = 10 and agg4 = 14 give agg(3) = 12, 4 per rank of 3. */
  f->agg[2] = 10;
  f->agg[4] = 14;
  mc_lim_rates(f, 3, 1, 1e9, &r);
  NEAR(r.copy, 4);
  NEAR(r.red, 2); /* scaled as the copy is */
  NEAR(r.fetch, 4);
  /* Past the largest known count: flat. */
  mc_lim_rates(f, 8, 1, 1e9, &r);
  NEAR(r.copy, 14.0 / 8);
  /* No reduce figure: 2/3 of the copy rate. */
  f = flat(9, 0, 8, 4);
  mc_lim_rates(f, 2, 1, 1e9, &r);
  NEAR(r.red, 6);
}

/* The both-ways figures: linear in log2 of the working set between the 1 and
 * 16 MiB anchors, one anchor standing for both; a single-copy read at least
 * a hop's rate; reducing hops at their own rate. */
static void both_ways(void)
{
  struct mc_lim_figures *f = flat(100, 50, 8, 4);
  struct mc_lim_rates r;

  f->duplex[0] = 20;
  f->duplex[1] = 10;
  mc_lim_rates(f, 2, 1, 4194304, &r); /* half way from 1 to 16 MiB */
  NEAR(r.hop, 15);
  NEAR(r.fetch, 15); /* above the one-way pair's 8 */
  NEAR(r.hop_red, 0);
  mc_lim_rates(f, 2, 1, 524288, &r);
  NEAR(r.hop, 20);
  mc_lim_rates(f, 2, 1, 1e9, &r);
  NEAR(r.hop, 10); /* past the last anchor measured: its figure */
  f->duplex[2] = 6;
  mc_lim_rates(f, 2, 1, 67108864, &r); /* half way from 16 to 256 MiB */
  NEAR(r.hop, 8);
  mc_lim_rates(f, 2, 1, 1e9, &r);
  NEAR(r.hop, 6);
  f->duplex[1] = 0; /* 1 and 256 MiB known: 16 MiB is half way (log2) */
  mc_lim_rates(f, 2, 1, 16777216, &r);
  NEAR(r.hop, 20 - 14 * 0.5);
  f->duplex[1] = 10;
  f->duplex[2] = 0;
  f->duplex[0] = 0;
  mc_lim_rates(f, 2, 1, 524288, &r);
  NEAR(r.hop, 10);
  f->duplex_red[0] = 12;
  f->duplex_red[1] = 6;
  mc_lim_rates(f, 2, 2, 4194304, &r);
  NEAR(r.hop_red, 18);
  /* All-reduce 2 ranks, 2 MiB (working set 4 MiB), c = 1 MiB: one copying hop at 10, one
   * reducing hop at 9, no separate reduction term. */
  f->duplex[0] = f->duplex[1] = 10;
  NEAR(mc_lim_time(f, MC_LIM_ALL_REDUCE, MC_LIM_FIFO, 2, 1, 2097152.0),
       1048576.0 / 10e9 + 1048576.0 / 9e9);
}

/* A benchmark that moves its calls through buffers of the sweep's largest size: the rates of
 * that working set for every size (meshccl-perf, mpi_perf and nccl-tests time so). */
static void rotation(void)
{
  struct mc_lim_figures *f = flat(40, 40, 8, 2);

  f->copy[1] = f->red[1] = 20;
  f->copy[2] = f->red[2] = 10;
  f->duplex[0] = 20;
  f->duplex[1] = 10;
  /* All-reduce 2 ranks, 64 KiB (c = 32 KiB): its own working set of 128 KiB is below 1 MiB,
   * hops at 20; through buffers of 8 MiB, a working set of 16 MiB: hops at 10 (two hops of c,
   * no reduction term: copy and reduce alike). */
  NEAR(mc_lim_time_span(f, MC_LIM_ALL_REDUCE, MC_LIM_FIFO, 2, 1, 65536.0, 0), 2 * 32768.0 / 20e9);
  NEAR(mc_lim_time_span(f, MC_LIM_ALL_REDUCE, MC_LIM_FIFO, 2, 1, 65536.0, 8388608.0),
       2 * 32768.0 / 10e9);
  NEAR(mc_lim_time(f, MC_LIM_ALL_REDUCE, MC_LIM_FIFO, 2, 1, 65536.0),
       mc_lim_time_span(f, MC_LIM_ALL_REDUCE, MC_LIM_FIFO, 2, 1, 65536.0, 65536.0));
  /* The largest size itself is unchanged. */
  NEAR(mc_lim_busbw_span(f, MC_LIM_ALL_REDUCE, MC_LIM_FIFO, 2, 1, 8388608.0, 8388608.0),
       mc_lim_busbw(f, MC_LIM_ALL_REDUCE, MC_LIM_FIFO, 2, 1, 8388608.0));
}

static void busbw_by_hand(void)
{
  struct mc_lim_figures *f = flat(10, 5, 8, 4);

  /* All-reduce 2 ranks, c = 4e6, no duplex figure (4 GB/s each way, half the pair's 8):
   * FIFO 2c / 4 GB/s + c (1/5 - 1/10) ns = 2.4 ms; single copy 2c / 8 + the same = 1.4 ms. */
  NEAR(mc_lim_time(f, MC_LIM_ALL_REDUCE, MC_LIM_FIFO, 2, 1, 8e6), 2.4e-3);
  NEAR(mc_lim_busbw(f, MC_LIM_ALL_REDUCE, MC_LIM_SINGLE, 2, 1, 8e6), 8e6 / 1.4e-3 / 1e9);
  /* Measured both ways at once, 8 GB/s each way: the FIFO's hops as fast as single copy's reads. */
  f->duplex[0] = f->duplex[1] = 8;
  NEAR(mc_lim_time(f, MC_LIM_ALL_REDUCE, MC_LIM_FIFO, 2, 1, 8e6), 1.4e-3);
  NEAR(mc_lim_busbw(f, MC_LIM_ALL_REDUCE, MC_LIM_FIFO, 2, 1, 8e6), 8e6 / 1.4e-3 / 1e9);
  /* Two threads per rank: hops 16, C 20, R 10: 8e6/16e9 + 4e6 * 0.05e-9. */
  NEAR(mc_lim_time(f, MC_LIM_ALL_REDUCE, MC_LIM_FIFO, 2, 2, 8e6), 7e-4);
  /* More threads than cores: no figure. */
  NEAR(mc_lim_time(f, MC_LIM_ALL_REDUCE, MC_LIM_FIFO, 2, 3, 8e6), 0);
  NEAR(mc_lim_busbw(f, MC_LIM_ALL_REDUCE, MC_LIM_FIFO, 8, 1, 8e6), 0);
  /* The latency term: 7 hand-offs of 100 ns on a 4-rank FIFO all-reduce (6 hops of c). */
  f->rtt_ns = 100;
  NEAR(mc_lim_time(f, MC_LIM_ALL_REDUCE, MC_LIM_FIFO, 4, 1, 4e6),
       6e6 / 8e9 + 3e6 * 0.1e-9 + 700e-9);
  /* Shared bus: agg2 = 12 gives 6 GB/s a rank at 256 MiB, R 3, hops 6: t = c (2/6 + 1/6) ns,
   * busbw 4. */
  f->rtt_ns = 0;
  f->agg[2] = 12;
  NEAR(mc_lim_busbw(f, MC_LIM_ALL_REDUCE, MC_LIM_FIFO, 2, 1, 268435456.0), 4.0);
  /* All-gather single copy, 2 ranks: c / F + c / C = c (1/8 + 1/10) ns. */
  f->agg[2] = 0;
  NEAR(mc_lim_time(f, MC_LIM_ALL_GATHER, MC_LIM_SINGLE, 2, 1, 2e6), 1e6 * (1 / 8e9 + 1 / 10e9));
  NEAR(mc_lim_busbw(f, MC_LIM_BROADCAST, MC_LIM_FIFO, 4, 1, 2e6), 8);
}

static void figures_text(void)
{
  static struct mc_lim_figures f;
  char err[256] = "";
  char line[512];

  MC_T_EQ_INT(
      mc_lim_parse_figures("copy1M=22.5,copy16M=11.4,copy256M=10.4,pair=9.5", &f, err, sizeof(err)),
      0);
  NEAR(f.copy[0], 22.5);
  NEAR(f.copy[2], 10.4);
  NEAR(f.pair, 9.5);
  MC_T_EQ_INT(mc_lim_parse_figures("# a host\nrtt=380\ncores=16 agg4=30.5\n", &f, err, sizeof(err)),
              0);
  MC_T_EQ_INT(f.cores, 16);
  NEAR(f.rtt_ns, 380);
  NEAR(f.agg[4], 30.5);
  mc_lim_format_figures(&f, line, sizeof(line));
  MC_T_EQ_STR(line,
              "copy1M=22.50,copy16M=11.40,copy256M=10.40,pair=9.50,rtt=380,cores=16,agg4=30.50");
  MC_T_EQ_INT(mc_lim_parse_figures("duplex=7.25", &f, err, sizeof(err)), 0);
  mc_lim_format_figures(&f, line, sizeof(line));
  MC_T_EQ_STR(line, "copy1M=22.50,copy16M=11.40,copy256M=10.40,pair=9.50,duplex1M=7.25,"
                    "duplex16M=7.25,duplex256M=7.25,rtt=380,cores=16,agg4=30.50");
  MC_T_EQ_INT(mc_lim_parse_figures("duplex16M=6,duplex256M=3,duplexred1M=5,duplexred16M=4,"
                                   "duplexred256M=2",
                                   &f, err, sizeof(err)),
              0);
  NEAR(f.duplex[0], 7.25);
  NEAR(f.duplex[1], 6);
  NEAR(f.duplex[2], 3);
  NEAR(f.duplex_red[0], 5);
  NEAR(f.duplex_red[1], 4);
  NEAR(f.duplex_red[2], 2);
  MC_T_EQ_INT(mc_lim_parse_figures("duplexred2M=3", &f, err, sizeof(err)), -1);
  MC_T_CONTAINS(err, "limit: unknown figure 'duplexred2M'");
  MC_T_EQ_INT(mc_lim_parse_figures("copy1M", &f, err, sizeof(err)), -1);
  MC_T_EQ_STR(err, "limit: figure 'copy1M' has no '=' (expected key=GB/s, e.g. copy1M=22.5)");
  MC_T_EQ_INT(mc_lim_parse_figures("pair=fast", &f, err, sizeof(err)), -1);
  MC_T_EQ_STR(err, "limit: figure 'pair=fast': 'fast' is not a number >= 0");
  MC_T_EQ_INT(mc_lim_parse_figures("copy2M=3", &f, err, sizeof(err)), -1);
  MC_T_CONTAINS(err, "limit: unknown figure 'copy2M' (keys: copy1M");
  MC_T_EQ_INT(mc_lim_parse_figures("agg0=3", &f, err, sizeof(err)), -1);
  MC_T_EQ_INT(mc_lim_parse_figures("cores=2.5", &f, err, sizeof(err)), -1);
}

static void table_text(void)
{
  struct mc_lim_figures *f = flat(10, 5, 8, 2);
  static const int ns[] = {2, 4};
  struct mc_lim_print_opts o = {.ns = ns,
                                .n_ns = 2,
                                .min_bytes = 1048576,
                                .max_bytes = 4194304,
                                .factor = 4,
                                .json = 1,
                                .colls = 1u << MC_LIM_ALL_REDUCE,
                                .no_rotate = 1};
  char *text = NULL;
  size_t len = 0;
  FILE *out = open_memstream(&text, &len);

  MC_T_TRUE(out != NULL);
  f->duplex[0] = f->duplex[1] = 5;
  /* 4 ranks > 2 cores: left out. */
  MC_T_EQ_INT(mc_lim_print(out, f, &o), 2);
  fclose(out);
  MC_T_EQ_STR(
      text, "# all_reduce, 2 ranks, 2 cores: model busbw (GB/s); per rank, c = size/2:\n"
            "#   fifo:  hops 2c, reductions 1c, 3 hand-offs; reads 4c, writes 4c\n"
            "#   1copy: passes 2c, local copies 0c, reductions 1c, 3 rounds; reads 3c, writes 2c\n"
            "#   each size on buffers of its own size (its working set stays in the caches where "
            "it fits)\n"
            "#       size     fifo k=1    1copy k=1\n"
            "     1048576         4.00         5.71\n"
            "     4194304         4.00         5.71\n"
            "{\"coll\":\"all_reduce\",\"n\":2,\"k\":1,\"bytes\":1048576,\"size\":\"1M\",\"fifo_"
            "busbw\":4.000,"
            "\"single_busbw\":5.714,\"fifo_us\":262.144,\"single_us\":183.501}\n"
            "{\"coll\":\"all_reduce\",\"n\":2,\"k\":1,\"bytes\":4194304,\"size\":\"4M\",\"fifo_"
            "busbw\":4.000,"
            "\"single_busbw\":5.714,\"fifo_us\":1048.576,\"single_us\":734.003}\n"
            "\n");
  free(text);
  /* By default the rows are those of calls moving through buffers of -e's bytes, and say so. */
  o.no_rotate = 0;
  o.json = 0;
  text = NULL;
  out = open_memstream(&text, &len);
  MC_T_TRUE(out != NULL);
  MC_T_EQ_INT(mc_lim_print(out, f, &o), 2);
  fclose(out);
  MC_T_TRUE(strstr(text,
                   "#   calls move through buffers of 4194304 bytes as meshccl-perf's and "
                   "nccl-tests' do: every size at that working set (--no-rotate: its own)\n") !=
            NULL);
  free(text);
}

MC_T_MAIN(bytes_per_rank, rates, both_ways, rotation, busbw_by_hand, figures_text, table_text)
