# SPDX-License-Identifier: Apache-2.0
"""The meshccl Python module (ctypes, numpy) checked exactly.

Two ways in, as users have them:
  numpy_api.py --from-env          each rank of meshccl-run: Comm.from_env()
  numpy_api.py --spawn N           this process makes the unique id (and so
                                   hosts the bootstrap root), then starts N
                                   ranks with it: Comm(N, uid, rank)
Every rank runs each collective on integer arrays of several dtypes and
checks the result against what it computes from the inputs, then the
errors users meet.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

import meshccl

DTYPES = [np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64, np.float16, np.float32, np.float64]


def value(r, n, dtype, base=0):
    return ((np.arange(n) + 3 * r + base) % 5 + 1).astype(dtype)


class Checker:
    def __init__(self, rank):
        self.rank = rank
        self.n = 0

    def same(self, got, want, what):
        self.n += 1
        if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
            raise AssertionError("rank %d: %s: got %r, want %r" % (self.rank, what, got, want))

    def raises(self, fn, exc, text, what):
        self.n += 1
        try:
            fn()
        except exc as e:
            if text not in str(e):
                raise AssertionError("rank %d: %s: %r does not say %r" % (self.rank, what, str(e), text))
            return
        raise AssertionError("rank %d: %s: no error" % (self.rank, what))


def run(comm):
    n, me = comm.size, comm.rank
    c = Checker(me)
    for dt in DTYPES:
        ins = [value(r, 7, dt) for r in range(n)]
        s = np.sum(np.stack(ins).astype(np.float64), axis=0)
        for op, ref in (("sum", s), ("max", np.max(np.stack(ins), axis=0)), ("min", np.min(np.stack(ins), axis=0))):
            x = ins[me].copy()
            comm.all_reduce(x, op=op)
            c.same(x, ref.astype(dt), "%s all_reduce %s" % (np.dtype(dt).name, op))
        y = np.zeros(7, dtype=dt)
        comm.all_reduce(ins[me], y)
        c.same(y, s.astype(dt), "%s all_reduce out of place" % np.dtype(dt).name)
        x = ins[me].copy()
        comm.broadcast(x, root=n - 1)
        c.same(x, ins[n - 1], "%s broadcast" % np.dtype(dt).name)
        x = ins[me].copy()
        comm.reduce(x, root=0)
        c.same(x, s.astype(dt) if me == 0 else ins[me], "%s reduce" % np.dtype(dt).name)
        g = comm.all_gather(ins[me])
        c.same(g, np.stack(ins), "%s all_gather" % np.dtype(dt).name)
        blocks = np.concatenate([value(me, 3, dt, base=b) for b in range(n)])
        rs = comm.reduce_scatter(blocks)
        c.same(rs, np.sum([value(r, 3, np.float64, base=me) for r in range(n)], axis=0).astype(dt),
               "%s reduce_scatter" % np.dtype(dt).name)
    # data movement of any dtype: bool, int16, complex128, a structured type
    for dt in (np.bool_, np.int16, np.complex128, np.dtype([("a", np.int32), ("b", np.float64)])):
        src = np.zeros(4 * n, dtype=dt)
        src.view(np.uint8)[:] = (np.arange(src.nbytes) * (me + 1)) % 251
        out = comm.all_to_all(src)
        want = np.concatenate([np.frombuffer(((np.arange(src.nbytes) * (r + 1)) % 251).astype(np.uint8).tobytes(),
                                             dtype=dt)[4 * me:4 * me + 4] for r in range(n)])
        c.same(out.view(np.uint8), want.view(np.uint8), "%s all_to_all" % np.dtype(dt).name)
    # gather and scatter at the last rank
    root = n - 1
    got = comm.gather(value(me, 5, np.int64), root=root)
    if me == root:
        c.same(got, np.stack([value(r, 5, np.int64) for r in range(n)]), "gather")
    buf = np.zeros(5, dtype=np.int32)
    comm.scatter(buf, np.stack([value(r, 5, np.int32, base=2) for r in range(n)]) if me == root else None, root=root)
    c.same(buf, value(me, 5, np.int32, base=2), "scatter")
    # send/recv around a ring, in one group
    if n > 1:
        right, left = (me + 1) % n, (me - 1) % n
        out = np.full(1 << 18, me, dtype=np.int64)
        got = np.zeros(1 << 18, dtype=np.int64)
        with meshccl.group():
            comm.send(out, right)
            comm.recv(got, left)
        c.same(got, np.full(1 << 18, left, dtype=np.int64), "send/recv")
    comm.barrier()
    # errors
    c.raises(lambda: comm.all_reduce(np.ones((4, 4))[:, 0]), ValueError, "C-contiguous", "strided")
    c.raises(lambda: comm.all_reduce(np.ones(3, dtype=np.int16)), TypeError, "no reduction for int16", "int16")
    c.raises(lambda: comm.all_reduce(np.ones(3), op="xor"), ValueError, "not one of", "op")
    c.raises(lambda: comm.broadcast(np.ones(3), root=n), ValueError, "is not a rank", "root")
    c.raises(lambda: comm.all_gather(np.ones(3), np.ones(3 * n + 1)), ValueError, "sizes do not match", "sizes")
    c.raises(lambda: meshccl.Comm(2, b"x" * 5, 0), ValueError, "128 bytes", "uid")
    return c.n


def rank_main(args):
    if args.from_env:
        comm = meshccl.Comm.from_env()
    else:
        comm = meshccl.Comm(args.nranks, bytes.fromhex(args.uid), args.rank)
    with comm:
        checks = run(comm)
        print("rank %d of %d: %d checks passed (%s, library %s, NCCL version code %d)"
              % (comm.rank, comm.size, checks, "from_env" if args.from_env else "unique id",
                 meshccl.library_path(), meshccl.version()), flush=True)
    if repr(comm) != "<meshccl.Comm destroyed>":
        raise AssertionError("repr after destroy: %r" % comm)


def spawn_main(args):
    uid = meshccl.get_unique_id()
    assert len(uid) == meshccl.UNIQUE_ID_BYTES
    env = dict(os.environ)
    env.pop("NCCL_COMM_ID", None)
    # One output file each: the ranks' lines never interleave, and no rank
    # blocks on a full pipe while another waits for it in a collective.
    outs = [tempfile.TemporaryFile() for _ in range(args.spawn)]
    procs = [subprocess.Popen([sys.executable, __file__, "--uid", uid.hex(), "--rank", str(r),
                               "--nranks", str(args.spawn)], env=env, stdout=outs[r],
                              stderr=subprocess.STDOUT) for r in range(args.spawn)]
    codes = [p.wait(timeout=120) for p in procs]
    for r, f in enumerate(outs):
        f.seek(0)
        for line in f.read().decode(errors="replace").splitlines():
            print("[%d] %s" % (r, line))
        f.close()
    if any(codes):
        print("numpy_api: rank exit codes %s" % codes, file=sys.stderr)
        return 1
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--from-env", action="store_true")
    ap.add_argument("--spawn", type=int)
    ap.add_argument("--uid")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--nranks", type=int)
    args = ap.parse_args()
    if args.spawn:
        return spawn_main(args)
    rank_main(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
