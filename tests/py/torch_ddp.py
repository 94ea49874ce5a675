# SPDX-License-Identifier: Apache-2.0
"""DistributedDataParallel over meshccl gives gloo's parameters.

Every rank trains the same small model (Linear, BatchNorm1d, ReLU, Linear,
plus an int64 buffer the forward pass updates) three times from the same
start, on its own data, with DistributedDataParallel over:
  1. the meshccl default group (operations on a worker thread),
  2. a meshccl group whose operations run on the calling thread,
  3. a gloo group (the reference).
Initial weights differ per rank, so DDP's broadcast from rank 0 at
construction matters; several small buckets make several all-reduces per
step. Checks:
  * float parameters and buffers: |meshccl - gloo| <= ATOL + RTOL * |gloo|
    (the two backends sum gradients in different orders, so the last bits
    may differ; measured differences are ~1e-7 after these steps);
  * integer buffers (num_batches_tracked, the int64 buffer): exactly equal;
  * the meshccl runs: parameters identical on every rank, bit for bit, and
    the two meshccl runs identical to each other. (Buffers are broadcast
    from rank 0 before each forward, so after the last one each rank holds
    its own update.)
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import meshccl_torch  # noqa: F401

STEPS = 12
RTOL = 1e-4
ATOL = 1e-5
RANK = int(os.environ["RANK"])


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 64)
        self.bn = nn.BatchNorm1d(64)
        self.fc2 = nn.Linear(64, 5)
        self.register_buffer("seen", torch.zeros(3, dtype=torch.int64))

    def forward(self, x):
        # A rank-dependent integer buffer: DDP broadcasts rank 0's before
        # every forward, so every rank ends with rank 0's history.
        self.seen += torch.tensor([1, x.shape[0], RANK + 1])
        return self.fc2(F.relu(self.bn(self.fc1(x))))


def train(pg):
    torch.manual_seed(1000 + RANK)  # differs per rank: DDP must broadcast rank 0's
    model = Net()
    ddp = DDP(model, process_group=pg, bucket_cap_mb=0.004)  # ~1000 floats per bucket
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(7 + RANK)
    for _ in range(STEPS):
        x = torch.randn(8 + RANK, 16, generator=gen)
        y = torch.randint(0, 5, (8 + RANK,), generator=gen)
        loss = F.cross_entropy(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def fail(msg):
    raise AssertionError("rank %d: %s" % (RANK, msg))


def main():
    t0 = time.monotonic()
    dist.init_process_group("meshccl")
    n = dist.get_world_size()
    os.environ["TORCH_MESHCCL_ASYNC"] = "0"  # the environment's way (torch_collectives.py: Options)
    sync_pg = dist.new_group(backend="meshccl")
    os.environ.pop("TORCH_MESHCCL_ASYNC")
    gloo = dist.new_group(backend="gloo")
    got = train(None)
    got_sync = train(sync_pg)
    ref = train(gloo)
    worst = 0.0
    for k, want in ref.items():
        for label, state in (("meshccl", got), ("meshccl sync", got_sync)):
            have = state[k]
            if have.dtype != want.dtype or have.shape != want.shape:
                fail("%s %s: %s %s, gloo %s %s" % (label, k, have.dtype, tuple(have.shape), want.dtype, tuple(want.shape)))
            if want.is_floating_point():
                diff = (have - want).abs()
                worst = max(worst, diff.max().item())
                if not bool((diff <= ATOL + RTOL * want.abs()).all()):
                    fail("%s %s differs from gloo by up to %g (tolerance %g + %g x |value|)"
                         % (label, k, diff.max().item(), ATOL, RTOL))
            elif not torch.equal(have, want):
                fail("%s %s (integer) = %s, gloo %s" % (label, k, have.tolist(), want.tolist()))
        if not torch.equal(got[k], got_sync[k]):
            fail("%s differs between the worker-thread and calling-thread meshccl runs" % k)
    # Rank 0's history broadcast before each forward, plus this rank's last step.
    if got["seen"].tolist() != [STEPS, 8 * STEPS + RANK, STEPS + RANK]:
        fail("int64 buffer %s is not rank 0's history" % got["seen"].tolist())
    # Same parameter bits on every rank (buffers hold each rank's last
    # forward): gather every rank's flattened parameters through gloo.
    params = [k for k in got if not k.startswith("bn.running") and k not in ("bn.num_batches_tracked", "seen")]
    flat = torch.cat([got[k].reshape(-1).double() for k in params])
    every = [torch.zeros_like(flat) for _ in range(n)]
    dist.all_gather(every, flat, group=gloo)
    for r in range(n):
        if not torch.equal(every[r], flat):
            fail("meshccl parameters of rank %d differ from this rank's" % r)
    print("rank %d: DDP over %d ranks, %d steps: meshccl == gloo (max |diff| %.3g, tolerance %g + %g x |value|), "
          "integer buffers equal, every rank identical (%.1f s)"
          % (RANK, n, STEPS, worst, ATOL, RTOL, time.monotonic() - t0), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
