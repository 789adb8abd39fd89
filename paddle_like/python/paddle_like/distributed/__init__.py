"""paddle_like.distributed: the seed's distributed module (tensorplay.distributed) over
paddle_like's C++ runtime. Arrays are numpy arrays or DLPack tensors (torch CPU tensors),
used in place. See docs/python.md."""
from .. import _C
from ._backend import (AllgatherOptions, AllreduceCoalescedOptions, AllreduceOptions,
                       AllToAllOptions, Backend, BackendConfig, BarrierOptions,
                       BroadcastOptions, GatherOptions, GroupMember, ReduceOp, ReduceOptions,
                       ReduceScatterOptions, ScatterOptions, default_pg_timeout,
                       supports_complex)
from ._collectives import (P2POp, all_gather, all_gather_coalesced, all_gather_into_tensor,
                           all_gather_single, all_gather_single_coalesced, all_reduce,
                           all_reduce_coalesced, all_to_all, all_to_all_single, barrier,
                           batch_isend_irecv, broadcast, gather, gather_into_tensor,
                           gather_single, irecv, isend, monitored_barrier, recv, reduce,
                           reduce_scatter, reduce_scatter_coalesced, reduce_scatter_single,
                           reduce_scatter_single_coalesced, reduce_scatter_tensor, scatter,
                           send)
from ._data_parallel import (GradBucket, _broadcast_coalesced,
                             _compute_bucket_assignment_by_size,
                             _verify_params_across_processes)
from ._objects import (all_gather_object, broadcast_object_list, gather_object,
                       recv_object_list, scatter_object_list, send_object_list)
from ._work import Work
from .distributed_c10d import (SHRINK_ABORT, SHRINK_DEFAULT, ProcessGroup,
                               ProcessGroupGlooOptions, ProcessGroupNCCLOptions,
                               _canonicalize_group_rank, destroy_process_group,
                               get_backend, get_backend_config,
                               get_default_backend_for_device, get_global_rank,
                               get_group_rank, get_process_group_ranks, get_rank,
                               get_world_size, group, init_process_group, is_available,
                               is_backend_available, is_gloo_available, is_initialized,
                               is_mpi_available, is_nccl_available, new_group, new_subgroups,
                               new_subgroups_by_enumeration, record_comm, set_timeout,
                               shrink_group, split_group)

# The runtime's stores and error types (torch.distributed's names).
TCPStore = _C.TCPStore
FileStore = _C.FileStore
HashStore = _C.HashStore
PrefixStore = _C.PrefixStore
Store = _C.Store
DistError = _C.DistError
DistTimeoutError = _C.DistTimeoutError
DistNetworkError = _C.DistNetworkError
DistBackendError = _C.DistBackendError

__all__ = [
    "Backend", "BackendConfig", "GroupMember", "ProcessGroup", "ReduceOp",
    "AllreduceCoalescedOptions", "AllreduceOptions", "AllToAllOptions", "BarrierOptions",
    "BroadcastOptions", "GatherOptions", "AllgatherOptions", "ReduceOptions",
    "ReduceScatterOptions", "ScatterOptions", "Work", "group", "all_gather",
    "all_gather_single", "all_gather_coalesced", "all_gather_into_tensor",
    "all_gather_single_coalesced", "all_gather_object", "all_reduce", "all_reduce_coalesced",
    "all_to_all", "all_to_all_single", "barrier", "batch_isend_irecv", "broadcast",
    "broadcast_object_list", "destroy_process_group", "gather", "gather_single",
    "gather_into_tensor", "gather_object", "get_backend", "get_backend_config",
    "get_default_backend_for_device", "get_global_rank", "get_group_rank",
    "get_process_group_ranks", "get_rank", "get_world_size", "GradBucket",
    "init_process_group", "irecv", "is_available", "is_backend_available",
    "is_gloo_available", "is_initialized", "is_mpi_available", "is_nccl_available",
    "monitored_barrier", "new_group", "new_subgroups", "new_subgroups_by_enumeration",
    "P2POp", "recv", "recv_object_list", "reduce", "reduce_scatter",
    "reduce_scatter_coalesced", "reduce_scatter_single", "reduce_scatter_single_coalesced",
    "reduce_scatter_tensor", "scatter", "scatter_object_list", "send", "send_object_list",
    "isend", "set_timeout", "split_group", "shrink_group", "record_comm", "supports_complex",
    "SHRINK_DEFAULT", "SHRINK_ABORT",
    # beyond the seed's list
    "TCPStore", "FileStore", "HashStore", "PrefixStore", "Store", "DistError",
    "DistTimeoutError", "DistNetworkError", "DistBackendError",
]
