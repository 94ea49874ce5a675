# SPDX-License-Identifier: Apache-2.0
"""A stranger who knows MASTER_ADDR:MASTER_PORT reads the meshccl backend's
unique id from torch's TCPStore (which admits anyone) and tries to join the
process group; the honest ranks must not notice (tests/py/test_torch_stranger.sh).

  honest    a rank of a 2-rank job (meshccl-run: MESHCCL_SECRET set): the
            default group, then group "1" (new_group), which rank 1 joins only
            after the stranger is done (--wait-for FILE); broadcast and
            all_reduce on both, checked
  stranger  MASTER_ADDR/MASTER_PORT only: reads group 1's key, then calls
            ncclCommInitRank as rank 1 with what it read, as read and with a
            forged secret; every attempt must fail. Writes --done FILE
  warn      a rank of a job with NCCL_COMM_ID and no MESHCCL_SECRET: two
            groups, checked (the driver counts the WARN lines)
"""
import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist

# The key of group "1" (the first new_group): init_process_group's
# PrefixStore("default_pg"), the group's PrefixStore(name), the backend's key;
# 2.x nests the group's PrefixStore("1/") in the default group's ("0/") and
# adds the backend's device, PrefixStore("cpu/").
if int(torch.__version__.split(".")[0]) >= 2:
    KEY = "default_pg/0//1//cpu//meshccl/unique_id"
else:
    KEY = "default_pg/1/meshccl/unique_id"
TIMEOUT = datetime.timedelta(seconds=60)


def check_group(group, rank, size, what):
    t = torch.arange(8, dtype=torch.int64) + 100 * rank
    dist.broadcast(t, src=0, group=group)
    want = torch.arange(8, dtype=torch.int64)
    if not torch.equal(t, want):
        raise AssertionError("rank %d: %s: broadcast gave %s" % (rank, what, t.tolist()))
    t = torch.full((5,), rank + 1, dtype=torch.float32)
    dist.all_reduce(t, group=group)
    want = torch.full((5,), size * (size + 1) / 2, dtype=torch.float32)
    if not torch.equal(t, want):
        raise AssertionError("rank %d: %s: all_reduce gave %s" % (rank, what, t.tolist()))


def honest(a):
    import meshccl_torch  # noqa: F401  (registers "meshccl")

    dist.init_process_group("meshccl", timeout=TIMEOUT)
    rank, size = dist.get_rank(), dist.get_world_size()
    check_group(None, rank, size, "default group")
    if a.wait_for and rank != 0:
        deadline = time.time() + 60
        while not os.path.exists(a.wait_for):
            if time.time() > deadline:
                raise AssertionError("rank %d: the stranger never finished" % rank)
            time.sleep(0.05)
    group = dist.new_group(list(range(size)), backend="meshccl")
    check_group(group, rank, size, "group 1")
    dist.destroy_process_group(group)
    dist.destroy_process_group()
    print("rank %d: honest checks passed" % rank, flush=True)


def stranger(a):
    import meshccl

    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                          is_master=False, timeout=TIMEOUT, wait_for_workers=False)
    uid = bytes(store.get(KEY))
    print("stranger: read %d bytes at %s" % (len(uid), KEY), flush=True)
    assert len(uid) == meshccl.UNIQUE_ID_BYTES
    # struct mc_boot_handle (src/bootstrap/bootstrap.h): secret at 48..80
    print("stranger: secret in the store: %s" % ("none" if uid[48:80] == bytes(32) else "yes"),
          flush=True)
    forged = bytearray(uid)
    forged[40:44] = (2).to_bytes(4, "little")  # claim "derived from MESHCCL_SECRET"
    forged[48:80] = os.urandom(32)
    refused = 0
    for what, attempt in (("as read", uid), ("forged secret", bytes(forged))):
        t0 = time.time()
        try:
            comm = meshccl.Comm(2, attempt, 1)
        except meshccl.MeshcclError as e:
            refused += 1
            print("stranger: %s: refused after %.1f s: %s" % (what, time.time() - t0, e),
                  flush=True)
            continue
        print("stranger: %s: JOINED the process group as rank 1" % what, flush=True)
        comm.abort()
    with open(a.done, "w") as f:
        f.write("done\n")
    sys.exit(0 if refused == 2 else 1)


def warn(a):
    import meshccl_torch  # noqa: F401

    dist.init_process_group("meshccl", timeout=TIMEOUT)
    rank, size = dist.get_rank(), dist.get_world_size()
    check_group(None, rank, size, "default group")
    group = dist.new_group(list(range(size)), backend="meshccl")
    check_group(group, rank, size, "group 1")
    dist.destroy_process_group(group)
    dist.destroy_process_group()
    print("rank %d: checks passed" % rank, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=("honest", "stranger", "warn"))
    ap.add_argument("--wait-for", default="")
    ap.add_argument("--done", default="")
    a = ap.parse_args()
    {"honest": honest, "stranger": stranger, "warn": warn}[a.mode](a)


if __name__ == "__main__":
    main()
