# SPDX-License-Identifier: Apache-2.0
"""The "meshccl" backend of torch.distributed, for CPU tensors.

    import torch.distributed as dist
    import meshccl_torch                      # registers the backend
    dist.init_process_group("meshccl")        # env:// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)

With PyTorch 2.x the backend is a c10d Backend registered for device "cpu"
(Backend.register_backend(..., devices=["cpu"])); with PyTorch 1.13 it is a
ProcessGroup. Each process group is one meshccl communicator. Its unique id goes through
the process group's c10d store, as ProcessGroupNCCL's does. Operations run in
issue order on a worker thread per process group (the default) or on the
calling thread: pg_options=meshccl_torch.Options(async_ops=False) in
init_process_group / new_group, or TORCH_MESHCCL_ASYNC=0 in the environment.
See docs/PYTORCH.md.
"""
import os
import sys


def _built_for():
    """(python, torch version) `make python` built this package for, from the
    PYTHON and TORCH_VERSION files python/build.sh writes next to it."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = []
    for name in ("PYTHON", "TORCH_VERSION"):
        try:
            with open(os.path.join(here, name)) as f:
                found.append(f.read().strip())
        except OSError:
            found.append("")
    return found[0], found[1]


def _wrong_python(why):
    python, version = _built_for()
    where = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    hint = ""
    if python and python != sys.executable:
        hint = "; run it with %s (torch %s), e.g. meshccl-run -n 4 %s train.py" % (
            python, version or "?", python)
    elif python:
        hint = "; run 'make python' again (it was built for torch %s)" % (version or "?")
    return ImportError("meshccl_torch (%s): %s is %s%s" % (where, sys.executable, why, hint))


try:
    import torch
except ImportError as e:
    raise _wrong_python("a Python without torch (%s)" % e) from e
import torch.distributed as dist  # noqa: E402

if not dist.is_available():
    raise ImportError("meshccl_torch: this torch was built without torch.distributed")

# A build for another torch may not even fail cleanly when loaded: check first.
_built_torch = _built_for()[1]
if _built_torch and _built_torch.split(".")[0] != torch.__version__.split(".")[0]:
    raise _wrong_python("running torch %s, this build is for torch %s" % (torch.__version__, _built_torch))
try:
    from . import _C  # noqa: E402  (needs torch.distributed's bindings first)
except ImportError as e:
    raise _wrong_python("running torch %s, which cannot load this build (%s)"
                        % (torch.__version__, e)) from e

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


def _register():
    if getattr(dist.Backend, BACKEND.upper(), None) is not None:
        return
    if _C.IS_C10D_BACKEND:
        # PyTorch 2.x: a Backend for CPU tensors; ProcessGroup dispatches CPU
        # tensors to it (a job may name another backend for other devices,
        # e.g. init_process_group("cpu:meshccl,cuda:nccl")).
        dist.Backend.register_backend(BACKEND, create_process_group, extended_api=True,
                                      devices=["cpu"])
    else:
        dist.Backend.register_backend(BACKEND, create_process_group, extended_api=True)


_register()
