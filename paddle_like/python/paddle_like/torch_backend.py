"""paddle_like as a torch.distributed backend.

    import torch.distributed as dist
    import paddle_like.torch_backend        # registers the backend "paddle_like"
    dist.init_process_group("paddle_like")  # env://, or any init_method torch takes

Every collective of the process group (DistributedDataParallel's included) then runs on
paddle_like's engine: its Gloo backend for CPU tensors, its NCCL backend for CUDA tensors
where paddle_like was built with CUDA. Rendezvous goes through the store torch hands the
backend. See docs/torch.md.
"""
try:
    import torch
    import torch.distributed as _dist
except ImportError as e:  # pragma: no cover - depends on the machine
    raise ImportError(
        "paddle_like.torch_backend needs PyTorch with torch.distributed "
        "(Debian: apt-get install python3-torch; run it with /usr/bin/python3): " + str(e)
    ) from e

if not _dist.is_available():  # pragma: no cover
    raise ImportError("paddle_like.torch_backend: this PyTorch has no torch.distributed")

import os

# The Gloo engine's two-rank spin (FLAGS_gloo_spin_us, see README.md) pays off only when each
# rank has a core for its comm thread; here the op runs on the group's comm thread while the
# Python thread waits, so ranks that share CPUs spin against each other. Unless set, no spin
# when the node's ranks have fewer than two cores each. Read when the runtime library loads.
if "FLAGS_gloo_spin_us" not in os.environ:
    _local = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")) or 1)
    if 2 * _local > (os.cpu_count() or 1):
        os.environ["FLAGS_gloo_spin_us"] = "0"

try:
    from paddle_like import _torch_backend as _ext
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        "paddle_like.torch_backend: the extension paddle_like/_torch_backend*.so is missing "
        "or does not load (it is built where CMake finds torch's C++ headers: Debian's "
        "libtorch-dev; it must be built against this torch " + torch.__version__ + "): "
        + str(e)
    ) from e

BACKEND_NAME = "paddle_like"


def _create(dist_backend_opts, pg_options=None):
    """torch's creator (extended API): a c10d ProcessGroup on paddle_like's engine."""
    o = dist_backend_opts
    return _ext.create_process_group(o.store, o.group_rank, o.group_size, o.timeout,
                                     str(o.group_id))


def create_process_group(store, rank, size, timeout, group_name="0"):
    """The plain creator (store, rank, size, timeout): for direct use."""
    return _ext.create_process_group(store, rank, size, timeout, group_name)


def engine_backends():
    """The engine backends of this build ("gloo", "nccl" where built with CUDA)."""
    return list(_ext.engine_backends())


def _register():
    name = BACKEND_NAME.upper()
    if name in getattr(_dist.Backend, "_plugins", {}):
        return  # already registered (a second import under another name)
    # The extended API (torch >= 1.13) hands the creator torch's group name, which gives
    # the engine's group the same id on every member.
    _dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True)


_register()

__all__ = ["BACKEND_NAME", "create_process_group", "engine_backends"]
