"""The seed's data-parallel helpers: bucket assignment, coalesced broadcast, parameter
verification and GradBucket, on numpy arrays or DLPack tensors."""
from __future__ import annotations

from collections import deque
from typing import List

import numpy as np

from .. import _C
from . import _tensors as T
from ._collectives import broadcast
from .distributed_c10d import get_global_rank, get_world_size


def _nbytes(t) -> int:
    return T.numel(t) * np.dtype(T.dtype_name(t)).itemsize


def _readable(t) -> np.ndarray:
    """A flat read-only numpy view of t (no copy)."""
    arr = t if isinstance(t, np.ndarray) else np.from_dlpack(t)
    return arr.reshape(-1)


def _compute_bucket_assignment_by_size(tensors, bucket_size_limits,
                                       expect_sparse_gradient=None, tensor_indices=None):
    """(bucket_indices, per_bucket_size_limits): tensors binned per (dtype, device), each
    bin closed once it reaches the current limit (the next limit applies after that)."""
    if expect_sparse_gradient is not None and \
            len(expect_sparse_gradient) not in (0, len(tensors)):
        raise AssertionError("expect_sparse_gradient has invalid length")
    if not tensors:
        raise ValueError("tensors must not be empty")
    result = []
    buckets: dict = {}
    iterators: dict = {}
    for i, tensor in enumerate(tensors):
        index = tensor_indices[i] if tensor_indices else i
        if expect_sparse_gradient and expect_sparse_gradient[index]:
            result.append(([index], 0))
            continue
        key = (T.dtype_name(tensor), "cpu")
        bucket = buckets.setdefault(key, {"indices": [], "size": 0, "limit": 0})
        bucket["indices"].append(index)
        bucket["size"] += _nbytes(tensor)
        limit_idx = iterators.setdefault(key, 0)
        limit = bucket_size_limits[limit_idx]
        bucket["limit"] = limit
        if bucket["size"] >= limit:
            result.append((bucket["indices"], limit))
            buckets[key] = {"indices": [], "size": 0, "limit": 0}
            if limit_idx + 1 < len(bucket_size_limits):
                iterators[key] = limit_idx + 1
    for bucket in buckets.values():
        if bucket["indices"]:
            result.append((bucket["indices"], bucket["limit"]))
    result.sort(key=lambda item: min(item[0]))
    return [list(indices) for indices, _ in result], [limit for _, limit in result]


def _broadcast_coalesced(process_group, tensors, buffer_size, authoritative_rank=0):
    """Broadcasts the tensors from the group rank `authoritative_rank`, flattened into
    buckets of at most buffer_size bytes per dtype, two buckets in flight."""
    if not tensors:
        return
    src = get_global_rank(process_group, authoritative_rank)
    order, streams = [], {}
    for idx, tensor in enumerate(tensors):
        key = T.dtype_name(tensor)
        if key not in streams:
            streams[key] = []
            order.append(key)
        streams[key].append(idx)
    buckets = []
    for key in order:
        acc, acc_size = [], 0
        for i in streams[key]:
            size = _nbytes(tensors[i])
            if acc and acc_size + size > buffer_size:
                buckets.append(acc)
                acc, acc_size = [], 0
            acc.append(i)
            acc_size += size
        if acc:
            buckets.append(acc)

    def start(bucket):
        members = [tensors[i] for i in bucket]
        flat = np.concatenate([_readable(t) for t in members])
        work = broadcast(flat, src, group=process_group, async_op=True)
        return members, flat, work

    def finish(members, flat, work):
        work.wait()
        offset = 0
        for t in members:
            n = T.numel(t)
            if n:
                _C.copy_into(T.as_arg(t), flat[offset:offset + n])
            offset += n

    in_flight = deque()
    for bucket in buckets:
        if len(in_flight) >= 2:
            finish(*in_flight.popleft())
        in_flight.append(start(bucket))
    while in_flight:
        finish(*in_flight.popleft())


def _verify_params_across_processes(process_group, tensors, logger=None) -> bool:
    """True when every rank holds the same values as group rank 0 (each tensor is
    broadcast from rank 0 into a scratch copy and compared)."""
    if get_world_size(process_group) == 1 or not tensors:
        return True
    src = get_global_rank(process_group, 0)
    for tensor in tensors:
        mine = np.array(_readable(tensor))
        theirs = mine.copy()
        broadcast(theirs, src, group=process_group)
        if not np.array_equal(mine, theirs, equal_nan=mine.dtype.kind in "fc"):
            return False
    return True


class GradBucket:
    """One bucket of gradients as a communication hook sees it."""

    def __init__(self, index: int, buffer, offsets: List[int], lengths: List[int],
                 sizes: List[List[int]], parameters: List, num_total_buckets: int = 0):
        self._index = index
        self._buffer = buffer
        self._offsets = offsets
        self._lengths = lengths
        self._sizes = sizes
        self._parameters = parameters
        self._num_total_buckets = num_total_buckets

    def index(self) -> int:
        return self._index

    def buffer(self):
        return self._buffer

    def set_buffer(self, buffer) -> None:
        self._buffer = buffer

    def gradients(self) -> List:
        return [self._buffer[o:o + n].reshape(shape)
                for o, n, shape in zip(self._offsets, self._lengths, self._sizes)]

    def parameters(self) -> List:
        return list(self._parameters)

    def is_last(self) -> bool:
        return self._index == self._num_total_buckets - 1
