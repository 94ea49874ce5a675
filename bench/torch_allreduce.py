# SPDX-License-Identifier: Apache-2.0
"""torch.distributed all_reduce of float32 tensors: meshccl against gloo.

Run by every rank (bench/torch_allreduce.sh starts it under meshccl-run).
One job holds three process groups over the same ranks: meshccl with its
worker thread (the default), meshccl on the calling thread
(meshccl_torch.Options(async_ops=False)) and gloo. For each size, each group runs warm-up
iterations, then timed ones; the time is the slowest rank's mean per
all_reduce. busbw = size / time x 2(n-1)/n, as nccl-tests reports it.
Rank 0 prints the table.

    torch_allreduce.py [--min-bytes 1024] [--max-bytes 268435456] [--factor 4]
"""
import argparse
import sys
import time

import torch
import torch.distributed as dist

import meshccl_torch


def fmt_size(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return "%d %s" % (b // div, unit)
    return "%d B" % b


def iterations(nbytes):
    """Enough to average out noise, bounded in time: ~256 MiB moved per size, 3..200."""
    return max(3, min(200, (256 << 20) // max(nbytes, 1)))


def timed(pg, t, iters, warmup, sync_pg):
    for _ in range(warmup):
        dist.all_reduce(t, group=pg)
    dist.barrier(group=sync_pg)
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t, group=pg)
    elapsed = (time.perf_counter() - t0) / iters
    worst = torch.tensor([elapsed], dtype=torch.float64)
    dist.all_reduce(worst, op=dist.ReduceOp.MAX, group=sync_pg)
    return worst.item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--min-bytes", type=int, default=1 << 10)
    ap.add_argument("--max-bytes", type=int, default=256 << 20)
    ap.add_argument("--factor", type=int, default=4)
    args = ap.parse_args()
    dist.init_process_group("meshccl")
    n = dist.get_world_size()
    rank = dist.get_rank()
    sync_mc = dist.new_group(backend="meshccl", pg_options=meshccl_torch.Options(async_ops=False))
    gloo = dist.new_group(backend="gloo")
    groups = (("meshccl", None), ("meshccl-sync", sync_mc), ("gloo", gloo))
    factor = 2 * (n - 1) / n if n > 1 else 1.0
    if rank == 0:
        print("# torch.distributed all_reduce (sum) of float32 tensors, %d processes on this host, torch %s"
              % (n, torch.__version__))
        print("# time: the slowest rank's mean per call; busbw = size / time x 2(n-1)/n (GB/s = 1e9 B/s)")
        print("# meshccl: default (worker thread); meshccl-sync: Options(async_ops=False) (calling thread)")
        print("# ratio: gloo time / meshccl time (above 1: meshccl faster)")
        print("%10s %12s %8s %12s %8s %12s %8s %7s" % ("size", "meshccl us", "busbw", "mc-sync us", "busbw",
                                                     "gloo us", "busbw", "ratio"))
        sys.stdout.flush()
    nbytes = args.min_bytes
    while nbytes <= args.max_bytes:
        t = torch.ones(nbytes // 4, dtype=torch.float32)
        iters = iterations(nbytes)
        warmup = 2 if nbytes >= (16 << 20) else 5
        row = []
        for _, pg in groups:
            sec = timed(pg, t, iters, warmup, gloo)
            row.append((sec * 1e6, nbytes / sec * factor / 1e9))
        if rank == 0:
            print("%10s %12.1f %8.2f %12.1f %8.2f %12.1f %8.2f %7.2f"
                  % (fmt_size(nbytes), row[0][0], row[0][1], row[1][0], row[1][1], row[2][0], row[2][1],
                     row[2][0] / row[0][0]))
            sys.stdout.flush()
        del t
        nbytes *= args.factor
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
