"""The seed's object collectives: picklable objects as uint8 tensors (pickle, as the seed
does) moved by the tensor collectives, sizes first so every rank can allocate."""
from __future__ import annotations

import io
import pickle
from typing import Optional, Sequence

import numpy as np

from ._collectives import (all_gather_single, broadcast, gather_single, recv, scatter, send)
from .distributed_c10d import (_canonicalize_group_rank, _rank_not_in_group, _resolve_group,
                               _warn_not_in_group)


def _object_to_tensor(obj) -> np.ndarray:
    f = io.BytesIO()
    pickle.Pickler(f).dump(obj)
    return np.frombuffer(f.getvalue(), dtype=np.uint8).copy()


def _tensor_to_object(buf: np.ndarray, size: int):
    return pickle.Unpickler(io.BytesIO(buf[:size].tobytes())).load()


def _padded(data: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=np.uint8)
    out[:data.size] = data
    return out


def all_gather_object(object_list, obj, group=None) -> None:
    """object_list[r] gets rank r's obj (object_list must have one slot per rank)."""
    if _rank_not_in_group(group):
        _warn_not_in_group("all_gather_object")
        return
    pg = _resolve_group(group)
    n = pg.size()
    if len(object_list) != n:
        raise ValueError(f"object_list must have one slot per process-group rank "
                         f"(expected {n}, got {len(object_list)})")
    data = _object_to_tensor(obj)
    sizes = np.zeros(n, dtype=np.int64)
    all_gather_single(sizes, np.array([data.size], dtype=np.int64), group=pg)
    width = int(sizes.max())
    gathered = np.empty(n * width, dtype=np.uint8)
    all_gather_single(gathered, _padded(data, width), group=pg)
    for r in range(n):
        object_list[r] = _tensor_to_object(gathered[r * width:(r + 1) * width], int(sizes[r]))


def gather_object(obj, object_gather_list=None, dst: Optional[int] = None, group=None,
                  group_dst: Optional[int] = None) -> None:
    """object_gather_list[r] gets rank r's obj on the destination (None elsewhere)."""
    if _rank_not_in_group(group):
        _warn_not_in_group("gather_object")
        return
    pg = _resolve_group(group)
    dst, group_dst = _canonicalize_group_rank(pg, dst, group_dst)
    n, me = pg.size(), pg.rank()
    if me == group_dst:
        if object_gather_list is None or len(object_gather_list) != n:
            raise ValueError("Argument ``object_gather_list`` must be specified on the "
                             f"destination rank with {n} slots")
    elif object_gather_list is not None:
        raise ValueError("Argument ``object_gather_list`` must NOT be specified on "
                         "non-destination ranks.")
    data = _object_to_tensor(obj)
    sizes = np.zeros(n, dtype=np.int64)
    all_gather_single(sizes, np.array([data.size], dtype=np.int64), group=pg)
    width = int(sizes.max())
    out = np.empty(n * width, dtype=np.uint8) if me == group_dst else None
    gather_single(_padded(data, width), out, group=pg, group_dst=group_dst)
    if me == group_dst:
        for r in range(n):
            object_gather_list[r] = _tensor_to_object(out[r * width:(r + 1) * width],
                                                      int(sizes[r]))


def broadcast_object_list(object_list, src: Optional[int] = None, group=None, device=None,
                          group_src: Optional[int] = None):
    """Every rank's object_list (same length everywhere) becomes the source's."""
    if _rank_not_in_group(group):
        _warn_not_in_group("broadcast_object_list")
        return object_list
    pg = _resolve_group(group)
    src, group_src = _canonicalize_group_rank(pg, src, group_src)
    if pg.rank() == group_src:
        pieces = [_object_to_tensor(o) for o in object_list]
        sizes = np.array([p.size for p in pieces], dtype=np.int64)
    else:
        sizes = np.zeros(len(object_list), dtype=np.int64)
    broadcast(sizes, src, group=pg)
    payload = (np.concatenate(pieces) if pg.rank() == group_src and pieces
               else np.empty(int(sizes.sum()), dtype=np.uint8))
    broadcast(payload, src, group=pg)
    if pg.rank() != group_src:
        offset = 0
        for i, size in enumerate(sizes):
            object_list[i] = _tensor_to_object(payload[offset:offset + int(size)], int(size))
            offset += int(size)
    return object_list


def scatter_object_list(scatter_object_output_list: list,
                        scatter_object_input_list: Optional[Sequence[object]] = None,
                        src: Optional[int] = None, group=None,
                        group_src: Optional[int] = None) -> None:
    """scatter_object_output_list[0] gets the source's scatter_object_input_list[me]."""
    if _rank_not_in_group(group):
        _warn_not_in_group("scatter_object_list")
        return
    if not isinstance(scatter_object_output_list, list) or len(scatter_object_output_list) < 1:
        raise ValueError("Expected argument scatter_object_output_list to be a list of size "
                         "at least 1.")
    pg = _resolve_group(group)
    src, group_src = _canonicalize_group_rank(pg, src, group_src)
    n, me = pg.size(), pg.rank()
    width = np.zeros(1, dtype=np.int64)
    if me == group_src:
        if scatter_object_input_list is None or len(scatter_object_input_list) != n:
            raise ValueError(f"scatter_object_input_list must have {n} objects on the source")
        pieces = [_object_to_tensor(o) for o in scatter_object_input_list]
        width[0] = max(p.size for p in pieces) + 8
    broadcast(width, src, group=pg)
    w = int(width[0])
    out = np.zeros(w, dtype=np.uint8)
    blocks = None
    if me == group_src:
        blocks = []
        for p in pieces:  # [int64 size][bytes][padding]
            block = np.zeros(w, dtype=np.uint8)
            block[:8] = np.array([p.size], dtype=np.int64).view(np.uint8)
            block[8:8 + p.size] = p
            blocks.append(block)
    scatter(out, blocks, group=pg, group_src=group_src)
    size = int(out[:8].view(np.int64)[0])
    scatter_object_output_list[0] = _tensor_to_object(out[8:], size)


def send_object_list(object_list: Sequence[object], dst: int, group=None,
                     device=None) -> None:
    if _rank_not_in_group(group):
        _warn_not_in_group("send_object_list")
        return
    pieces = [_object_to_tensor(o) for o in object_list]
    send(np.array([p.size for p in pieces], dtype=np.int64), dst, group=group)
    if pieces:
        send(np.concatenate(pieces), dst, group=group)


def recv_object_list(object_list: list, src: Optional[int] = None, group=None,
                     device=None) -> int:
    """Fills object_list (its length must match the sender's); returns the sender's rank."""
    if _rank_not_in_group(group):
        _warn_not_in_group("recv_object_list")
        return -1
    sizes = np.zeros(len(object_list), dtype=np.int64)
    sender = recv(sizes, src, group=group)
    payload = np.empty(int(sizes.sum()), dtype=np.uint8)
    if payload.size:
        recv(payload, sender, group=group)
    offset = 0
    for i, size in enumerate(sizes):
        object_list[i] = _tensor_to_object(payload[offset:offset + int(size)], int(size))
        offset += int(size)
    return sender
