# SPDX-License-Identifier: Apache-2.0
"""The "meshccl" backend of torch.distributed, for CPU tensors.

    import torch.distributed as dist
    import meshccl_torch                      # registers the backend
    dist.init_process_group("meshccl")        # env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)

Each process group is one meshccl communicator. Its unique id goes through
the process group's c10d store, as ProcessGroupNCCL's does. Operations run in
issue order on a worker thread per process group (MESHCCL_TORCH_ASYNC=1, the
default) or on the calling thread (MESHCCL_TORCH_ASYNC=0). See docs/PYTORCH.md.
"""
import os

import torch
import torch.distributed as dist

if not dist.is_available():
    raise ImportError("meshccl_torch: this torch was built without torch.distributed")

from . import _C  # noqa: E402  (needs torch.distributed's ProcessGroup binding first)

__all__ = ["BACKEND", "ProcessGroupMeshccl", "create_process_group", "nccl_version"]

BACKEND = "meshccl"
ProcessGroupMeshccl = _C.ProcessGroupMeshccl
nccl_version = _C.nccl_version


def _async_from_env():
    value = os.environ.get("MESHCCL_TORCH_ASYNC", "1")
    if value not in ("0", "1"):
        raise ValueError(
            "meshccl_torch: MESHCCL_TORCH_ASYNC=%r: expected 1 (operations on a worker thread, "
            "the default) or 0 (on the calling thread)" % value
        )
    return value == "1"


def create_process_group(store, rank, world_size, timeout):
    """The creator torch.distributed calls for backend "meshccl"
    (Backend.register_backend): store is the group's PrefixStore, timeout a
    datetime.timedelta that bounds init and every operation."""
    timeout_ms = max(1, int(timeout.total_seconds() * 1000))
    return ProcessGroupMeshccl(store, rank, world_size, timeout_ms, _async_from_env())


if getattr(dist.Backend, BACKEND.upper(), None) is None:
    dist.Backend.register_backend(BACKEND, create_process_group)
