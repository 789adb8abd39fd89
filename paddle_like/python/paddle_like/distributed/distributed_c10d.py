"""The seed's process groups and tensor collectives over paddle_like._C.

Everything a call checks (arguments, group ranks, list lengths) is checked here with the
seed's exception types and messages; the communication is the C++ runtime's. Ranks given
as `src`/`dst`/`peer` are global ranks; `group_src`/`group_dst`/`group_peer` are ranks in
the group. A synchronous call returns None, an asynchronous one (async_op=True) a Work.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import threading
import warnings
from typing import List, Optional

from .. import _C
from . import _tensors as T
from ._backend import (Backend, BackendConfig, GroupMember, ReduceOp, default_pg_timeout,
                       is_backend_compiled, supports_complex)
from ._work import Work

# ------------------------------------------------------------------ profiling names
_comm_state = threading.local()


def _current_comm_name() -> Optional[str]:
    stack = getattr(_comm_state, "names", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def record_comm(name: str):
    """Names the Work of the ops issued inside the block (shown in repr(work))."""
    if not isinstance(name, str):
        raise TypeError("communication profiling name must be a string")
    stack = getattr(_comm_state, "names", None)
    if stack is None:
        stack = _comm_state.names = []
    stack.append(name)
    try:
        yield
    finally:
        stack.pop()


# ------------------------------------------------------------------ process groups
class ProcessGroup:
    """A group of ranks: its global ranks in group-rank order and its C++ group."""

    def __init__(self, handle, group_name: str, backend: str = Backend.UNDEFINED,
                 backend_config: Optional[str] = None, group_desc: Optional[str] = None):
        self._handle = handle
        self.ranks = list(handle.ranks)
        self.group_name = group_name
        self.group_desc = group_desc or group_name
        self.backend = backend
        self._backend_config = backend_config or str(backend)
        self._pending_p2p_works: List[Work] = []
        self._destroyed = False

    @property
    def _timeout_s(self) -> float:
        """The group's timeout as the runtime holds it (set_timeout changes it there)."""
        return self._handle.timeout_ms / 1000.0

    def _group(self):
        if self._destroyed:
            raise RuntimeError(f"process group '{self.group_name}' was destroyed")
        return self._handle

    def size(self) -> int:
        return len(self.ranks)

    def group_size(self) -> int:
        return len(self.ranks)

    def rank(self) -> int:
        return self.group_rank(_global_rank())

    def name(self) -> str:
        return self.group_name

    def global_rank(self, group_rank: int) -> int:
        return self.ranks[group_rank]

    def group_rank(self, global_rank: int) -> int:
        return self.ranks.index(global_rank)

    def set_timeout(self, timeout: _dt.timedelta) -> None:
        if not isinstance(timeout, _dt.timedelta):
            raise TypeError("Expected timeout argument to be of type datetime.timedelta")
        if timeout.total_seconds() < 0:
            raise ValueError("timeout must be non-negative")
        _C.set_timeout(_ms(timeout.total_seconds()), self._group())

    def _retain_p2p_work(self, work):
        if work is not None:
            self._pending_p2p_works.append(work)
        return work

    def _release_p2p_works(self) -> None:
        pending, self._pending_p2p_works = self._pending_p2p_works, []
        for work in pending:
            if not work.is_completed():
                work.wait()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        try:
            self._release_p2p_works()
        except BaseException:
            if exc_type is None:
                raise
        return False

    def __repr__(self) -> str:
        state = "destroyed" if self._destroyed else f"ranks={self.ranks}"
        return f"ProcessGroup({self.group_name!r}, {self.backend}, {state})"


group = GroupMember  # the seed's alias: group.WORLD

_world_group: Optional[ProcessGroup] = None
_groups: dict = {}
_rank_state = [0]
_uninitialized_msg = ("Default process group has not been initialized, please make sure to "
                      "call init_process_group.")
_invalid_group_msg = "Invalid process group specified"


def _global_rank() -> int:
    return _rank_state[0]


def _check_default_pg() -> ProcessGroup:
    if _world_group is None:
        raise RuntimeError(_uninitialized_msg)
    return _world_group


def _get_default_group() -> ProcessGroup:
    return _check_default_pg()


def _resolve_group(group) -> ProcessGroup:
    if group is None:
        return _check_default_pg()
    if isinstance(group, ProcessGroup):
        if group._destroyed:
            raise RuntimeError(f"process group '{group.group_name}' was destroyed")
        return group
    if isinstance(group, str):
        if _world_group is not None and group == _world_group.group_name:
            return _world_group
        pg = _groups.get(group)
        if pg is not None:
            return pg
    raise ValueError(_invalid_group_msg)


def _rank_not_in_group(group) -> bool:
    if group is None:
        return False
    return group is GroupMember.NON_GROUP_MEMBER


def _warn_not_in_group(op_name: str) -> None:
    warnings.warn(f"Running {op_name} on global rank {_global_rank()} which does not belong "
                  "to the given group.", stacklevel=3)


def _canonicalize_group_rank(pg: ProcessGroup, global_rank: Optional[int] = None,
                             group_rank: Optional[int] = None, *, default: int = 0):
    """(global rank, group rank) of a root given either way (the group rank `default`
    when neither is)."""
    if global_rank is not None and group_rank is not None:
        raise ValueError("cannot specify both a global rank and a group rank")
    if global_rank is None and group_rank is None:
        group_rank = default
    if group_rank is not None:
        if type(group_rank) is not int or not 0 <= group_rank < pg.size():
            raise ValueError("group rank is outside the process group")
        return pg.global_rank(group_rank), group_rank
    if type(global_rank) is not int:
        raise TypeError("global rank must be an integer")
    if global_rank not in pg.ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {pg}")
    return global_rank, pg.group_rank(global_rank)


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


# ------------------------------------------------------------------ availability
def is_available() -> bool:
    return True


def is_nccl_available() -> bool:
    return _C.is_nccl_available()


def is_gloo_available() -> bool:
    return _C.is_gloo_available()


def is_mpi_available() -> bool:
    return _C.is_mpi_available()


def is_backend_available(backend: str) -> bool:
    """Whether every backend a configuration names is available."""
    try:
        config = BackendConfig(str(backend).lower())
    except (TypeError, ValueError, RuntimeError):
        return False
    for name in config.get_device_backend_map().values():
        if name in (Backend.GLOO, Backend.MPI, Backend.NCCL):
            if not is_backend_compiled(name):
                return False
        elif str(name).upper() not in Backend._plugins:
            return False
    return bool(config.get_device_backend_map())


def is_initialized() -> bool:
    return _world_group is not None


# ------------------------------------------------------------------ init and groups
def _select_backend(requested: str):
    """(the backend the group runs on, its BackendConfig), checked as the seed does."""
    config = BackendConfig(requested)
    if len(config.device_backend_map) == 1:
        backend = next(iter(config.device_backend_map.values()))
    else:
        try:
            backend = config.device_backend_map["cpu"]
        except KeyError as exc:
            raise ValueError("No backend configured for active device 'cpu'") from exc
    backend = str(backend).lower()
    if backend not in (Backend.NCCL, Backend.GLOO, Backend.MPI):
        raise ValueError(f"Invalid backend: '{backend}'. paddle_like currently supports: "
                         f"'{Backend.NCCL}', '{Backend.GLOO}', '{Backend.MPI}'")
    if not is_backend_compiled(backend):
        raise RuntimeError(f"The {backend} backend was not compiled into this build")
    return backend, config


def init_process_group(backend: Optional[str] = None, init_method: Optional[str] = None,
                       world_size: int = -1, rank: int = -1, store=None, group_name: str = "",
                       timeout: _dt.timedelta = default_pg_timeout) -> None:
    """Joins the job: env:// (the launcher's variables), tcp://host:port, file://path, or
    a store with rank and world_size."""
    global _world_group
    if _world_group is not None:
        raise RuntimeError("trying to initialize the default process group twice!")
    if not isinstance(timeout, _dt.timedelta):
        raise TypeError("Expected timeout argument to be of type datetime.timedelta")
    selected, config = _select_backend(
        Backend.UNDEFINED if backend is None else str(backend).lower())
    if store is not None and (rank < 0 or world_size < 0):
        raise RuntimeError("rank and world_size must be provided when a store is given")
    if init_method is not None and store is not None:
        raise ValueError("Cannot specify both init_method and store.")
    _C.init_process_group(repr(config), init_method or "env://", store, world_size, rank,
                          group_name, _ms(timeout.total_seconds()))
    handle = _C.world()
    _rank_state[0] = handle.rank
    _world_group = ProcessGroup(handle, group_name or handle.name, selected, repr(config))
    GroupMember.WORLD = _world_group


def destroy_process_group(group=None) -> None:
    """Releases a group's communicators now (every group, and the world, when None)."""
    global _world_group
    if group is GroupMember.NON_GROUP_MEMBER:
        return
    if group is None or group is _world_group:
        pgs = ([_world_group] if _world_group is not None else []) + list(_groups.values())
        _C.destroy_process_group(None)
        for pg in pgs:
            pg._destroyed = True
        _world_group = None
        GroupMember.WORLD = None
        _groups.clear()
        return
    pg = _resolve_group(group)
    _C.destroy_process_group(pg._group())
    pg._destroyed = True
    _groups.pop(pg.group_name, None)


def get_rank(group=None) -> int:
    if group is None and _world_group is None:
        raise RuntimeError(_uninitialized_msg)
    pg = _resolve_group(group)
    return pg.group_rank(_global_rank())


def get_world_size(group=None) -> int:
    return _resolve_group(group).size()


def get_backend(group=None) -> str:
    return _resolve_group(group).backend


def get_backend_config(group=None) -> str:
    return str(_resolve_group(group)._backend_config)


def get_default_backend_for_device(device) -> str:
    device_type = getattr(device, "type", None)
    name = str(device_type if device_type is not None else device).lower().split(":", 1)[0]
    try:
        return Backend.default_device_backend_map[name]
    except KeyError as exc:
        raise ValueError(f"Default backend not registered for device: {device}") from exc


def set_timeout(timeout: _dt.timedelta, group=None) -> None:
    """The timeout of the group's later ops and waits (its existing backends included)."""
    _resolve_group(group).set_timeout(timeout)


def new_group(ranks: Optional[List[int]] = None, timeout: _dt.timedelta = default_pg_timeout,
              backend: Optional[str] = None, pg_options=None, group_desc: Optional[str] = None,
              sort_ranks: bool = True, use_local_synchronization: bool = False):
    """A group of global ranks. Every rank calls it for every group in the same order;
    the ranks outside it get GroupMember.NON_GROUP_MEMBER."""
    world = _check_default_pg()
    requested = world._backend_config if backend is None else str(backend).lower()
    selected, config = _select_backend(requested)
    if timeout is None:
        timeout = _dt.timedelta(seconds=world._timeout_s)
    if not isinstance(timeout, _dt.timedelta):
        raise TypeError("Expected timeout argument to be of type datetime.timedelta")
    world_size = world.size()
    ranks = list(range(world_size)) if ranks is None else list(ranks)
    if not ranks:
        raise ValueError("ranks must not be empty")
    if len(ranks) != len(set(ranks)):
        raise ValueError("ranks must be unique")
    if any(type(r) is not int for r in ranks):
        raise TypeError("ranks must be integers")
    if any(rank < 0 or rank >= world_size for rank in ranks):
        raise ValueError(f"ranks must be in the range [0, {world_size})")
    handle = _C.new_group(ranks, _ms(timeout.total_seconds()), repr(config),
                          bool(use_local_synchronization), bool(sort_ranks),
                          _pg_options(pg_options), "" if group_desc is None else str(group_desc))
    return _register_group(handle, selected, config, group_desc)


#: pg_options of new_group / split_group / shrink_group: where Gloo listens (interface or
#: hostname) and its timeout; NCCL's ncclConfig_t fields and a high-priority comm stream.
ProcessGroupGlooOptions = _C.ProcessGroupGlooOptions
ProcessGroupNCCLOptions = _C.ProcessGroupNCCLOptions


def _pg_options(pg_options):
    """pg_options as the runtime takes them: None, or one of the backends' option classes."""
    if pg_options is not None and not isinstance(pg_options, _C.ProcessGroupOptions):
        raise TypeError("pg_options must be a ProcessGroupGlooOptions or ProcessGroupNCCLOptions, "
                        f"got {type(pg_options).__name__}")
    return pg_options


def _register_group(handle, backend: str, config, group_desc):
    """The ProcessGroup of a new C++ group, or NON_GROUP_MEMBER where this rank is not in
    it (new_group and split_group)."""
    if handle is None or not handle.is_member:
        return GroupMember.NON_GROUP_MEMBER
    pg = ProcessGroup(handle, handle.name, backend, repr(config), group_desc)
    _groups[pg.group_name] = pg
    return pg


def _check_registered(group) -> None:
    if not isinstance(group, ProcessGroup) or group.group_name not in _groups:
        raise ValueError(f"Group {group} is not registered, please create group with "
                         "paddle_like.distributed.new_group API")


def get_group_rank(group: ProcessGroup, global_rank: int) -> int:
    if group is GroupMember.WORLD or group is _world_group:
        return global_rank
    _check_registered(group)
    if global_rank not in group.ranks:
        raise ValueError(f"Global rank {global_rank} is not part of group {group}")
    return group.ranks.index(global_rank)


def get_global_rank(group: ProcessGroup, group_rank: int) -> int:
    if group is GroupMember.WORLD or group is _world_group:
        return group_rank
    _check_registered(group)
    if group_rank < 0 or group_rank >= len(group.ranks):
        raise ValueError(f"Group rank {group_rank} is not part of group {group}")
    return group.ranks[group_rank]


def get_process_group_ranks(group) -> List[int]:
    return list((group or _get_default_group()).ranks)


SHRINK_DEFAULT = 0x00
SHRINK_ABORT = 0x01


def split_group(parent_pg=None, split_ranks=None, timeout=None, pg_options=None,
                group_desc=None, backend=None):
    """This rank's group among disjoint groups of PARENT-group ranks."""
    if split_ranks is None or not split_ranks:
        raise ValueError("split_ranks cannot be None or empty")
    parent = _resolve_group(parent_pg)
    parent_size = parent.size()
    used = set()
    parent_groups = []
    for ranks in split_ranks:
        if not isinstance(ranks, (list, tuple)) or not ranks:
            raise ValueError("each split group must be a non-empty sequence")
        values = [int(rank) for rank in ranks]
        if len(values) != len(set(values)):
            raise ValueError("the split group cannot have duplicate ranks")
        if any(rank < 0 or rank >= parent_size for rank in values):
            raise ValueError("split ranks must be valid parent group ranks")
        if used.intersection(values):
            raise ValueError("split groups cannot overlap")
        used.update(values)
        parent_groups.append(values)  # the runtime takes parent ranks, as the seed
    if timeout is None:
        timeout = _dt.timedelta(seconds=parent._timeout_s)
    if not isinstance(timeout, _dt.timedelta):
        raise TypeError("timeout must be a datetime.timedelta")
    if timeout.total_seconds() < 0:
        raise ValueError("timeout must be non-negative")
    selected, config = _select_backend(
        parent._backend_config if backend is None else str(backend).lower())
    handle = _C.split_group(parent._group(), parent_groups, _ms(timeout.total_seconds()),
                            repr(config), _pg_options(pg_options),
                            "" if group_desc is None else str(group_desc))
    return _register_group(handle, selected, config, group_desc)


def shrink_group(ranks_to_exclude, group=None, shrink_flags=SHRINK_DEFAULT, pg_options=None):
    """The group without some of its ranks (PARENT-group ranks), made by the ranks that
    stay; with SHRINK_ABORT the parent's communicators are aborted first. Shrinking the
    world makes the new group the world."""
    global _world_group
    if not isinstance(ranks_to_exclude, list):
        raise TypeError("ranks_to_exclude must be a list")
    if not ranks_to_exclude:
        raise ValueError("ranks_to_exclude cannot be empty")
    if shrink_flags not in (SHRINK_DEFAULT, SHRINK_ABORT):
        raise ValueError("invalid shrink_flags")
    parent = _resolve_group(group)
    if parent.size() <= 1:
        raise ValueError("cannot shrink a process group with one rank")
    excluded = []
    for rank in ranks_to_exclude:
        if not isinstance(rank, int):
            raise TypeError("ranks_to_exclude must contain integers")
        if rank < 0 or rank >= parent.size():
            raise ValueError("rank to exclude is out of range")
        if rank in excluded:
            raise ValueError("ranks_to_exclude cannot contain duplicates")
        excluded.append(rank)
    if len(excluded) >= parent.size():
        raise ValueError("cannot exclude every rank in a process group")
    if parent.rank() in excluded:
        raise RuntimeError("the current rank is excluded and must not call shrink_group")
    handle = _C.shrink_group(excluded, parent._group(),
                             shrink_flags == SHRINK_ABORT, _ms(parent._timeout_s),
                             _pg_options(pg_options))
    child = ProcessGroup(handle, handle.name, parent.backend, parent._backend_config)
    if parent is _world_group:
        for old in list(_groups.values()):
            old._destroyed = True
        _groups.clear()
        parent._destroyed = True
        _rank_state[0] = handle.rank
        _world_group = child
        GroupMember.WORLD = child
    else:
        _groups.pop(parent.group_name, None)
        parent._destroyed = True
        _groups[child.group_name] = child
    return child


def new_subgroups_by_enumeration(ranks_per_subgroup_list, timeout=None, backend=None,
                                 pg_options=None, group_desc=None):
    """Disjoint groups of the given global ranks; returns (this rank's, all of them)."""
    if ranks_per_subgroup_list is None or len(ranks_per_subgroup_list) == 0:
        raise ValueError("The arg 'ranks_per_subgroup_list' cannot be empty")
    subgroups, cur_subgroup, seen = [], None, {}
    for ranks in ranks_per_subgroup_list:
        for rank in ranks:
            if rank in seen:
                raise ValueError(f"Rank {rank} has appeared in both subgroup {seen[rank]} "
                                 f"and {ranks}")
            seen[rank] = ranks
        subgroup = new_group(ranks=ranks,
                             timeout=timeout if timeout is not None else default_pg_timeout,
                             backend=backend, pg_options=pg_options, group_desc=group_desc)
        subgroups.append(subgroup)
        if _global_rank() in ranks:
            cur_subgroup = subgroup
    return cur_subgroup, subgroups


def new_subgroups(group_size: Optional[int] = None, group=None, timeout=None, backend=None,
                  pg_options=None, group_desc=None):
    """Consecutive groups of `group_size` ranks of `group`; (this rank's, all of them)."""
    if group_size is None:
        raise ValueError("Default group size only takes effect when CUDA/XPU is available."
                         "If your subgroup using a backend that does not depend on CUDA/XPU,"
                         "please pass in 'group_size' correctly.")
    if group_size <= 0:
        raise ValueError(f"The arg 'group_size' ({group_size}) must be positive")
    world_size = get_world_size(group=group)
    if world_size < group_size:
        raise ValueError(f"The arg 'group_size' ({group_size}) must not exceed the world "
                         f"size ({world_size})")
    if world_size % group_size != 0:
        raise ValueError(f"The world size ({world_size}) must be divisible by "
                         f"'group_size={group_size}'")
    ranks = get_process_group_ranks(group=group)
    subgroup, subgroups = new_subgroups_by_enumeration(
        [ranks[i:i + group_size] for i in range(0, len(ranks), group_size)],
        timeout=timeout, backend=backend, pg_options=pg_options, group_desc=group_desc)
    if not isinstance(subgroup, ProcessGroup):
        raise AssertionError("Current rank was not assigned to a subgroup")
    return subgroup, subgroups


# ------------------------------------------------------------------ issuing
def _finish(work, tensors, async_op: bool, done=None):
    """The Work of an async op; None for a sync one, which the runtime has already waited
    for (a sync op on an idle comm stream runs inline in the calling thread, without a
    hand-off to the stream's thread: the call returns as fast as the C++ one)."""
    if not async_op:
        if done is not None:
            done()
        return None
    works = work if isinstance(work, list) else [work]
    return Work(works, done=done, tensors=tensors, profiling_name=_current_comm_name())


def _check_reduce(op, tensors) -> int:
    op = int(op)
    if not 0 <= op <= ReduceOp.PREMUL_SUM:
        raise ValueError(f"Invalid reduce op {op}")
    if op in _NOT_FOR_COMPLEX and any(T.is_complex(t) for t in tensors):
        raise RuntimeError("reduction operation does not support complex tensors")
    return op


_NOT_FOR_COMPLEX = frozenset(op for op in range(ReduceOp.PREMUL_SUM + 1)
                             if not supports_complex(op))
