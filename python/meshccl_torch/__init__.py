# SPDX-License-Identifier: Apache-2.0
"""The "meshccl" backend of torch.distributed, for CPU tensors.

    import torch.distributed as dist
    import meshccl_torch                      # registers the backend
    dist.init_process_group("meshccl")        # env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)

Each process group is one meshccl communicator. Its unique id goes through
the process group's c10d store, as ProcessGroupNCCL's does. Operations run in
issue order on a worker thread per process group (the default) or on the
calling thread: pg_options=meshccl_torch.Options(async_ops=False) in
init_process_group / new_group, or TORCH_MESHCCL_ASYNC=0 in the environment.
See docs/PYTORCH.md.
"""
import os

import torch
import torch.distributed as dist

if not dist.is_available():
    raise ImportError("meshccl_torch: this torch was built without torch.distributed")

from . import _C  # noqa: E402  (needs torch.distributed's ProcessGroup binding first)

__all__ = ["BACKEND", "Options", "ProcessGroupMeshccl", "create_process_group", "nccl_version"]

BACKEND = "meshccl"
ProcessGroupMeshccl = _C.ProcessGroupMeshccl
nccl_version = _C.nccl_version


class Options:
    """pg_options of a "meshccl" process group (init_process_group, new_group).

    async_ops: True runs the group's operations on its worker thread (Work
    completes later), False on the calling thread (Work returned completed);
    None (the default) takes TORCH_MESHCCL_ASYNC from the environment, 1 if unset.
    """

    def __init__(self, async_ops=None):
        self.async_ops = async_ops

    def __repr__(self):
        return "meshccl_torch.Options(async_ops=%r)" % (self.async_ops,)


def _async_from_env():
    # Not MESHCCL_*: the library warns about variables of its own prefixes it does not know.
    value = os.environ.get("TORCH_MESHCCL_ASYNC", "1")
    if value not in ("0", "1"):
        raise ValueError(
            "meshccl_torch: TORCH_MESHCCL_ASYNC=%r: expected 1 (operations on a worker thread, "
            "the default) or 0 (on the calling thread)" % value
        )
    return value == "1"


def create_process_group(dist_options, pg_options=None):
    """The creator torch.distributed calls for backend "meshccl"
    (Backend.register_backend with extended_api): dist_options carries the
    group's PrefixStore, rank, size, timeout (bounding init and every
    operation), name and global ranks; pg_options is None or an Options."""
    if pg_options is not None and not isinstance(pg_options, Options):
        raise TypeError("meshccl_torch: pg_options must be a meshccl_torch.Options, got %s"
                        % type(pg_options).__name__)
    async_ops = pg_options.async_ops if pg_options is not None else None
    if async_ops is None:
        async_ops = _async_from_env()
    timeout_ms = max(1, int(dist_options.timeout.total_seconds() * 1000))
    ranks = list(dist_options.global_ranks_in_group)
    label = ""
    if ranks:
        label = "global rank %d, group %s" % (ranks[dist_options.group_rank], dist_options.group_id)
    return ProcessGroupMeshccl(dist_options.store, dist_options.group_rank, dist_options.group_size,
                               timeout_ms, bool(async_ops), label)


if getattr(dist.Backend, BACKEND.upper(), None) is None:
    dist.Backend.register_backend(BACKEND, create_process_group, extended_api=True)
