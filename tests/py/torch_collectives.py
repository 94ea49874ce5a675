# SPDX-License-Identifier: Apache-2.0
"""Every collective of the meshccl torch.distributed backend, checked exactly.

Run by every rank of a job (meshccl-run, tests/py/launch_env.py or torchrun):
init_process_group("meshccl") with env://, then each collective on integer
tensors of every dtype NCCL handles (and floats holding small integers, whose
sums are exact), on the default group (worker thread), on a group whose
operations run on the calling thread (Options(async_ops=False)), and on a
subgroup. Expected values are computed locally from what each rank sent.
Then the errors users meet (bad reduce op, non-contiguous tensor, wrong list
length), an operation only one rank calls (the group's timeout revokes it),
and with --peer-death the last rank leaving: the others' next collective
fails naming it.
"""
import argparse
import datetime
import os
import sys
import time
import warnings

import torch
import torch.distributed as dist

import meshccl_torch  # registers "meshccl"

INT_DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
              torch.float32, torch.float64]
RANK = int(os.environ["RANK"])
N_CHECKS = 0
# PyTorch 2.x: meshccl is a c10d Backend for "cpu"; 1.13: a ProcessGroup.
TORCH2 = int(torch.__version__.split(".")[0]) >= 2


def fail(msg):
    raise AssertionError("rank %d: %s" % (RANK, msg))


def same(got, want, what):
    global N_CHECKS
    N_CHECKS += 1
    if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
        fail("%s: got %s, want %s" % (what, got.tolist(), want.tolist()))


def raises(fn, text, what):
    global N_CHECKS
    N_CHECKS += 1
    try:
        fn()
    except (RuntimeError, ValueError) as e:
        if text not in str(e):
            fail("%s: error %r does not say %r" % (what, str(e), text))
        return str(e)
    fail("%s: no error" % what)


def value(r, n_elems, dtype, base=0):
    """Rank r's input: small non-negative integers (exact in every dtype)."""
    return ((torch.arange(n_elems) + 3 * r + base) % 5 + 1).to(dtype)


def check_group(pg, label):
    n = dist.get_world_size(pg)
    me = dist.get_rank(pg)
    for dtype in INT_DTYPES:
        tag = "%s %s" % (label, dtype)
        ins = [value(r, 7, dtype) for r in range(n)]
        stack = torch.stack([x.to(torch.float64) for x in ins])
        # all_reduce: SUM, PRODUCT, MIN, MAX, AVG (integer and float inputs)
        for op, ref in ((dist.ReduceOp.SUM, stack.sum(0)), (dist.ReduceOp.PRODUCT, stack.prod(0)),
                        (dist.ReduceOp.MIN, stack.min(0).values), (dist.ReduceOp.MAX, stack.max(0).values)):
            if dtype in (torch.int8, torch.uint8) and op == dist.ReduceOp.PRODUCT and n > 3:
                continue  # 5^4 overflows 8 bits
            if dtype in (torch.float16, torch.bfloat16) and op == dist.ReduceOp.PRODUCT and n > 3:
                continue  # 5^4 = 625 is not exact in bfloat16
            t = ins[me].clone()
            dist.all_reduce(t, op=op, group=pg)
            same(t, ref.to(dtype), "%s all_reduce %s" % (tag, op))
        # AVG of inputs whose sum is a multiple of n: exact for integers (sum,
        # then divide); floats are scaled by 1/n first (NCCL's avg), so close.
        delta = (1 if me == 0 else 0) - (1 if me == n - 1 else 0)
        t = torch.full((5,), 2 * n + delta, dtype=torch.float64).to(dtype)
        dist.all_reduce(t, op=dist.ReduceOp.AVG, group=pg)
        want = torch.full((5,), 2 * n).to(dtype)
        if dtype.is_floating_point:
            rtol = 1e-2 if dtype in (torch.float16, torch.bfloat16) else 1e-6
            if not torch.allclose(t.double(), want.double(), rtol=rtol):
                fail("%s all_reduce AVG: got %s, want %s" % (tag, t.tolist(), want.tolist()))
        else:
            same(t, want, "%s all_reduce AVG" % tag)
        # broadcast from the last rank, reduce to rank 1 % n
        t = ins[me].clone()
        dist.broadcast(t, src=dist.get_global_rank(pg, n - 1) if pg is not None else n - 1, group=pg)
        same(t, ins[n - 1], "%s broadcast" % tag)
        t = ins[me].clone()
        root = 1 % n
        dist.reduce(t, dst=dist.get_global_rank(pg, root) if pg is not None else root, op=dist.ReduceOp.SUM, group=pg)
        same(t, stack.sum(0).to(dtype) if me == root else ins[me], "%s reduce" % tag)
        # all_gather: list and into-tensor forms
        outs = [torch.zeros(7, dtype=dtype) for _ in range(n)]
        dist.all_gather(outs, ins[me], group=pg)
        for r in range(n):
            same(outs[r], ins[r], "%s all_gather[%d]" % (tag, r))
        out = torch.zeros(n * 7, dtype=dtype)
        dist.all_gather_into_tensor(out, ins[me], group=pg)
        same(out, torch.cat(ins), "%s all_gather_into_tensor" % tag)
        # reduce_scatter: list and tensor forms; rank i gets the sum of block i
        blocks = [value(me, 3, dtype, base=b) for b in range(n)]
        want = sum(value(r, 3, torch.float64, base=me) for r in range(n)).to(dtype)
        t = torch.zeros(3, dtype=dtype)
        dist.reduce_scatter(t, blocks, group=pg)
        same(t, want, "%s reduce_scatter" % tag)
        t = torch.zeros(3, dtype=dtype)
        dist.reduce_scatter_tensor(t, torch.cat(blocks), group=pg)
        same(t, want, "%s reduce_scatter_tensor" % tag)
    # Any dtype moves: bool, int16, complex through broadcast/all_gather/all_to_all.
    for dtype in (torch.bool, torch.int16, torch.complex64):
        tag = "%s %s" % (label, dtype)
        ins = [value(r, 4 * n, torch.int64).to(dtype) for r in range(n)]
        outs = [torch.zeros(4 * n, dtype=dtype) for _ in range(n)]
        dist.all_gather(outs, ins[me], group=pg)
        for r in range(n):
            same(outs[r], ins[r], "%s all_gather[%d]" % (tag, r))
        out = torch.zeros(4 * n, dtype=dtype)
        dist.all_to_all_single(out, ins[me], group=pg)
        same(out, torch.cat([ins[r][4 * me:4 * me + 4] for r in range(n)]), "%s all_to_all_single" % tag)
    # bool reductions: SUM is a logical or, PRODUCT an and (ProcessGroupNCCL's mapping)
    bits = [torch.tensor([r == 0, True, False, r % 2 == 1]) for r in range(n)]
    t = bits[me].clone()
    dist.all_reduce(t, op=dist.ReduceOp.SUM, group=pg)
    same(t, torch.stack(bits).any(0), "%s bool all_reduce SUM" % label)
    t = bits[me].clone()
    dist.all_reduce(t, op=dist.ReduceOp.PRODUCT, group=pg)
    same(t, torch.stack(bits).all(0), "%s bool all_reduce PRODUCT" % label)
    # PREMUL_SUM (a double factor, a tensor factor): inputs scaled, then summed
    # (a tensor factor: one tensor in 2.x, a list of one per device in 1.13)
    for factor in (2.0, torch.tensor([3.0]) if TORCH2 else [torch.tensor([3.0])]):
        scale = 2.0 if isinstance(factor, float) else 3.0
        t = value(me, 5, torch.float32)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor), group=pg)
        same(t, scale * sum(value(r, 5, torch.float32) for r in range(n)), "%s PREMUL_SUM x%g" % (label, scale))
        t = torch.zeros(2, dtype=torch.float64)
        src = torch.cat([value(me, 2, torch.float64, base=b) for b in range(n)])
        dist.reduce_scatter_tensor(t, src, op=dist._make_nccl_premul_sum(factor), group=pg)
        same(t, scale * sum(value(r, 2, torch.float64, base=me) for r in range(n)),
             "%s reduce_scatter_tensor PREMUL_SUM x%g" % (label, scale))
        same(src, torch.cat([value(me, 2, torch.float64, base=b) for b in range(n)]), "%s PREMUL_SUM input kept" % label)
    # complex sum: pairs of reals
    t = torch.complex(value(me, 3, torch.float32), value(me, 3, torch.float32, base=1))
    dist.all_reduce(t, group=pg)
    same(t, torch.complex(sum(value(r, 3, torch.float32) for r in range(n)),
                          sum(value(r, 3, torch.float32, base=1) for r in range(n))), "%s complex sum" % label)
    # all_to_all_single with uneven splits: rank r sends r + p + 1 rows to rank p
    rows_out = [me + p + 1 for p in range(n)]
    rows_in = [r + me + 1 for r in range(n)]
    src = torch.cat([torch.full((rows_out[p], 2), 100 * me + p, dtype=torch.int64) for p in range(n)])
    dst = torch.zeros(sum(rows_in), 2, dtype=torch.int64)
    dist.all_to_all_single(dst, src, output_split_sizes=rows_in, input_split_sizes=rows_out, group=pg)
    same(dst, torch.cat([torch.full((rows_in[r], 2), 100 * r + me, dtype=torch.int64) for r in range(n)]),
         "%s all_to_all_single uneven" % label)
    # all_to_all (lists, uneven sizes)
    ins = [torch.full((me + p + 1,), 10 * me + p, dtype=torch.int32) for p in range(n)]
    outs = [torch.zeros(r + me + 1, dtype=torch.int32) for r in range(n)]
    dist.all_to_all(outs, ins, group=pg)
    for r in range(n):
        same(outs[r], torch.full((r + me + 1,), 10 * r + me, dtype=torch.int32), "%s all_to_all[%d]" % (label, r))
    # gather and scatter at the last rank
    root = n - 1
    groot = dist.get_global_rank(pg, root) if pg is not None else root
    mine = value(me, 6, torch.int64)
    glist = [torch.zeros(6, dtype=torch.int64) for _ in range(n)] if me == root else None
    dist.gather(mine, gather_list=glist, dst=groot, group=pg)
    if me == root:
        for r in range(n):
            same(glist[r], value(r, 6, torch.int64), "%s gather[%d]" % (label, r))
    t = torch.zeros(6, dtype=torch.int64)
    slist = [value(r, 6, torch.int64, base=7) for r in range(n)] if me == root else None
    dist.scatter(t, scatter_list=slist, src=groot, group=pg)
    same(t, value(me, 6, torch.int64, base=7), "%s scatter" % label)
    # all_reduce_coalesced, all_gather_object, broadcast_object_list (uint8 tensors underneath)
    ts = [value(me, 4, torch.int64), value(me, 9, torch.int64, base=2)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "will be deprecated"
        dist.all_reduce_coalesced(ts, group=pg)
    same(ts[0], sum(value(r, 4, torch.float64) for r in range(n)).to(torch.int64), "%s coalesced[0]" % label)
    same(ts[1], sum(value(r, 9, torch.float64, base=2) for r in range(n)).to(torch.int64), "%s coalesced[1]" % label)
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": me, "s": "x" * me}, group=pg)
    if objs != [{"rank": r, "s": "x" * r} for r in range(n)]:
        fail("%s all_gather_object: %r" % (label, objs))
    # point to point: a ring, blocking (even ranks send first) and batched
    if n > 1:
        right, left = (me + 1) % n, (me - 1) % n
        gright = dist.get_global_rank(pg, right) if pg is not None else right
        gleft = dist.get_global_rank(pg, left) if pg is not None else left
        out = value(me, 1000, torch.int64)
        got = torch.zeros(1000, dtype=torch.int64)
        if me % 2 == 0:
            dist.send(out, gright, group=pg)
            dist.recv(got, gleft, group=pg)
        else:
            dist.recv(got, gleft, group=pg)
            dist.send(out, gright, group=pg)
        same(got, value(left, 1000, torch.int64), "%s send/recv" % label)
        # 4 MiB each way in one batch: sends and receives must run together
        big_out = torch.full((1 << 20,), me, dtype=torch.int32)
        big_in = [torch.zeros(1 << 20, dtype=torch.int32) for _ in range(2)]
        ops = [dist.P2POp(dist.isend, big_out, gright, group=pg), dist.P2POp(dist.isend, big_out, gleft, group=pg),
               dist.P2POp(dist.irecv, big_in[0], gleft, group=pg), dist.P2POp(dist.irecv, big_in[1], gright, group=pg)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        same(big_in[0], torch.full((1 << 20,), left, dtype=torch.int32), "%s batch_isend_irecv left" % label)
        same(big_in[1], torch.full((1 << 20,), right, dtype=torch.int32), "%s batch_isend_irecv right" % label)
    # async handles: several operations in flight, then wait; futures carry the tensors
    ts = [value(me, 100, torch.int64, base=b) for b in range(4)]
    works = [dist.all_reduce(t, group=pg, async_op=True) for t in ts]
    fut = works[-1].get_future()
    for w in works:
        w.wait()
        if not w.is_completed():
            fail("%s: a waited work is not completed" % label)
    for b, t in enumerate(ts):
        same(t, sum(value(r, 100, torch.float64, base=b) for r in range(n)).to(torch.int64), "%s async[%d]" % (label, b))
    same(fut.wait()[0], ts[-1], "%s future value" % label)
    dist.barrier(group=pg)


def check_backend(pg, label):
    """PyTorch 2.x: the group's CPU backend is a ProcessGroupMeshccl; the
    coalescing manager's fast paths (allreduce_coalesced,
    allgather_into_tensor_coalesced, reduce_scatter_tensor_coalesced inside
    startCoalescing/endCoalescing) and its plain batches give one Work that
    completes with every operation; a shut-down backend refuses work."""
    cpu = torch.device("cpu")
    group = pg if pg is not None else dist.group.WORLD
    be = group._get_backend(cpu)
    if not isinstance(be, meshccl_torch.ProcessGroupMeshccl) or be.name() != "meshccl":
        fail("%s: the cpu backend is %r (%s)" % (label, be, be.name()))
    if dist.Backend.backend_capability.get("meshccl") != ["cpu"]:
        fail("registered for devices %r" % dist.Backend.backend_capability.get("meshccl"))
    n = dist.get_world_size(pg)
    me = dist.get_rank(pg)
    # Names of 2.x releases before all_gather_single / reduce_scatter_single.
    gather_single = getattr(dist, "all_gather_single", dist.all_gather_into_tensor)
    scatter_single = getattr(dist, "reduce_scatter_single", dist.reduce_scatter_tensor)
    ts = [value(me, 5 + i, torch.int64, base=i) for i in range(3)]
    with dist._coalescing_manager(group=pg, device=cpu, async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t, group=pg)
    if len(cm.works) != 1:
        fail("%s: coalesced all_reduce gave %d works" % (label, len(cm.works)))
    cm.wait()
    for i, t in enumerate(ts):
        same(t, sum(value(r, 5 + i, torch.float64, base=i) for r in range(n)).to(torch.int64),
             "%s coalesced all_reduce[%d]" % (label, i))
    ins = [value(me, 2 + i, torch.float32, base=i) for i in range(3)]
    outs = [torch.zeros(n * (2 + i)) for i in range(3)]
    with dist._coalescing_manager(group=pg, device=cpu, async_ops=True) as cm:
        for o, i in zip(outs, ins):
            gather_single(o, i, group=pg)
    cm.wait()
    for i, o in enumerate(outs):
        same(o, torch.cat([value(r, 2 + i, torch.float32, base=i) for r in range(n)]),
             "%s coalesced all_gather_into_tensor[%d]" % (label, i))
    srcs = [torch.cat([value(me, 3, torch.float64, base=b + i) for b in range(n)]) for i in range(2)]
    outs = [torch.zeros(3, dtype=torch.float64) for _ in range(2)]
    with dist._coalescing_manager(group=pg, device=cpu, async_ops=True) as cm:
        for o, src in zip(outs, srcs):
            scatter_single(o, src, group=pg)
    cm.wait()
    for i, o in enumerate(outs):
        same(o, sum(value(r, 3, torch.float64, base=me + i) for r in range(n)),
             "%s coalesced reduce_scatter_tensor[%d]" % (label, i))
    # A batch of different operations, called as blocking collectives (their
    # wait() inside the batch returns: they run when it ends): one Work,
    # whose result() is every output.
    b = value(me, 4, torch.int32)
    a = value(me, 4, torch.int32, base=1)
    with dist._coalescing_manager(group=pg, device=cpu, async_ops=True) as cm:
        dist.broadcast(b, src=dist.get_global_rank(group, 0), group=pg)
        dist.all_reduce(a, group=pg)
    (w,) = cm.works
    w.wait()
    if not w.is_completed() or len(w.result()) != 2:
        fail("%s: a batch's work: completed %s, %d results" % (label, w.is_completed(), len(w.result())))
    same(b, value(0, 4, torch.int32), "%s batch broadcast" % label)
    same(a, sum(value(r, 4, torch.float64, base=1) for r in range(n)).to(torch.int32), "%s batch all_reduce" % label)
    with dist._coalescing_manager(group=pg, device=cpu, async_ops=True) as cm:
        pass
    cm.wait()


def check_shutdown():
    """PyTorch 2.x: destroy_process_group shuts the backend down; work issued
    on it afterwards fails instead of using a freed communicator."""
    for async_ops in (True, False):
        g = dist.new_group(backend="meshccl", pg_options=meshccl_torch.Options(async_ops=async_ops))
        be = g._get_backend(torch.device("cpu"))
        t = torch.ones(3)
        dist.all_reduce(t, group=g)
        dist.destroy_process_group(g)
        raises(lambda: be.allreduce([t]).wait(), "after the process group was shut down",
               "all_reduce after shutdown (async_ops=%s)" % async_ops)


def check_concurrent(n):
    """Two process groups at work at once (each on its own worker thread),
    both connecting for the first time: their communicators must not share
    anything, even when made under one NCCL_COMM_ID (meshccl-run)."""
    groups = [None, dist.new_group(backend="meshccl"), dist.new_group(backend="meshccl")]
    for size in (1000, 300000):
        ts = [torch.full((size,), float(RANK + g), dtype=torch.float32) for g in range(len(groups))]
        works = [dist.all_reduce(t, group=pg, async_op=True) for t, pg in zip(ts, groups)]
        for w in works:
            w.wait()
        for g, t in enumerate(ts):
            same(t, torch.full((size,), float(n * (n - 1) // 2 + n * g)), "concurrent groups, group %d" % g)
    for pg in groups[1:]:
        dist.destroy_process_group(pg)


def check_errors(pg):
    t = torch.ones(4, dtype=torch.int32)
    raises(lambda: dist.all_reduce(t, op=dist.ReduceOp.BAND, group=pg), "is not an NCCL reduction", "BAND")
    raises(lambda: dist.all_reduce(torch.ones(4, 4)[:, 0], group=pg), "is not contiguous", "non-contiguous")
    raises(lambda: dist.all_gather([torch.ones(4)], torch.ones(4), group=pg), "tensors, expected", "list length")
    raises(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16), group=pg), "no reduction for Short", "int16 sum")
    msg = raises(lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool), op=dist.ReduceOp.AVG, group=pg),
                 "AVG of bool", "bool avg")
    if "rank %d of" % dist.get_rank(pg) not in msg:
        fail("error %r does not name the rank" % msg)


def check_timeout(n):
    """Only rank 0 runs an all-reduce on a group with a 3 s timeout: the
    watchdog revokes it and the error says so; the others are not touched."""
    g = dist.new_group(backend="meshccl", timeout=datetime.timedelta(seconds=3))
    if RANK == 0:
        t0 = time.monotonic()
        w = dist.all_reduce(torch.ones(8), group=g, async_op=True)
        msg = raises(w.wait, "did not finish within the process group's timeout", "timeout")
        took = time.monotonic() - t0
        if took > 30:
            fail("the timeout took %.1f s" % took)
        raises(lambda: dist.all_reduce(torch.ones(8), group=g), "failed earlier", "after timeout")
        print("timeout ok after %.1f s: %s" % (took, msg.splitlines()[0][:200]), flush=True)
    dist.barrier()
    dist.destroy_process_group(g)


def check_ports(n):
    """Under meshccl-run: torch's TCPStore (MASTER_PORT) and meshccl's
    bootstrap root (NCCL_COMM_ID) are on two ports, so a communicator from
    the launcher's environment comes up while the store is listening."""
    import numpy as np
    import meshccl
    root_port = int(os.environ["NCCL_COMM_ID"].rsplit(":", 1)[1])
    store_port = int(os.environ["MASTER_PORT"])
    if root_port == store_port:
        fail("NCCL_COMM_ID and MASTER_PORT are both %d" % store_port)
    with meshccl.Comm.from_env() as comm:
        x = np.full(4, RANK + 1, dtype=np.int64)
        comm.all_reduce(x)
        if x.tolist() != [n * (n + 1) // 2] * 4:
            fail("all_reduce on a communicator from the environment: %s" % x.tolist())
    print("ports ok: TCPStore at MASTER_PORT %d, meshccl's root at NCCL_COMM_ID port %d" % (store_port, root_port),
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer-death", action="store_true")
    args = ap.parse_args()
    t0 = time.monotonic()
    dist.init_process_group("meshccl")
    n = dist.get_world_size()
    if dist.get_backend() != "meshccl":
        fail("backend is %s" % dist.get_backend())
    if os.environ.get("MESHCCL_RUN") == "1":
        check_ports(n)
    check_concurrent(n)
    check_group(None, "default")
    if TORCH2:
        check_backend(None, "default")
        check_shutdown()
    # The calling thread's variant, and a subgroup of the first ranks.
    sync_pg = dist.new_group(backend="meshccl", pg_options=meshccl_torch.Options(async_ops=False))
    check_group(sync_pg, "sync")
    sub_ranks = list(range(max(1, n - 1)))
    sub = dist.new_group(ranks=sub_ranks, backend="meshccl")
    if TORCH2:
        check_backend(sync_pg, "sync")
    if RANK in sub_ranks:
        check_group(sub, "subgroup")
        raises(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int16), group=sub),
               "meshccl: rank %d of %d (global rank %d, group " % (RANK, len(sub_ranks), RANK),
               "subgroup errors name the global rank")
    check_errors(None)
    check_timeout(n)
    dist.destroy_process_group(sub)
    dist.destroy_process_group(sync_pg)
    print("rank %d: %d checks passed in %.1f s" % (RANK, N_CHECKS, time.monotonic() - t0), flush=True)
    if args.peer_death and n > 1:
        dist.barrier()
        if RANK == n - 1:
            os._exit(0)  # leaves without a word: the others must not hang
        t = torch.ones(1 << 16)
        msg = raises(lambda: dist.all_reduce(t), "rank", "peer death")
        print("rank %d: peer death seen: %s" % (RANK, msg.splitlines()[0][:300]), flush=True)
        os._exit(0)  # the default group's communicator failed: nothing to tidy
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
