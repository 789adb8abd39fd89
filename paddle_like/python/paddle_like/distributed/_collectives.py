"""The seed's tensor collectives and point-to-point calls (checks here, work in C++)."""
from __future__ import annotations

import datetime as _dt
from typing import List, Optional

from .. import _C
from . import _tensors as T
from ._backend import ReduceOp
from ._work import Work
from .distributed_c10d import (ProcessGroup, _canonicalize_group_rank, _check_reduce,
                               _current_comm_name, _finish, _ms, _rank_not_in_group,
                               _resolve_group, _warn_not_in_group, get_global_rank,
                               get_group_rank)

_PREMUL = 1.0  # PREMUL_SUM's factor: paddle_like.distributed takes it as 1 (a plain SUM)


def _list_len(tensors, n: int, what: str) -> None:
    if not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{what} must be a list of tensors")
    if len(tensors) != n:
        raise ValueError(f"{what} must have one tensor per process-group rank "
                         f"(expected {n}, got {len(tensors)})")


def _copy_out(outputs, staging):
    """Copies each rank's block of the staging buffer into the caller's outputs."""
    def done():
        for out, block in zip(outputs, staging):
            _C.copy_into(T.as_arg(out, "output"), block)
    return done


# ------------------------------------------------------------------ one tensor
def broadcast(tensor, src: Optional[int] = None, group=None, async_op: bool = False,
              group_src: Optional[int] = None):
    pg = _resolve_group(group)
    src, _ = _canonicalize_group_rank(pg, src, group_src)
    work = _C.broadcast(T.as_arg(tensor), src, pg._group(), async_op)
    return _finish(work, [tensor], async_op)


def all_reduce(tensor, op: int = ReduceOp.SUM, group=None, async_op: bool = False):
    pg = _resolve_group(group)
    op = _check_reduce(op, [tensor])
    work = _C.all_reduce(T.as_arg(tensor), op, pg._group(), async_op, _PREMUL)
    return _finish(work, [tensor], async_op)


def reduce(tensor, dst: Optional[int] = None, op: int = ReduceOp.SUM, group=None,
           async_op: bool = False, group_dst: Optional[int] = None):
    pg = _resolve_group(group)
    dst, _ = _canonicalize_group_rank(pg, dst, group_dst)
    op = _check_reduce(op, [tensor])
    work = _C.reduce(T.as_arg(tensor), dst, op, pg._group(), async_op, _PREMUL)
    return _finish(work, [tensor], async_op)


def all_gather_single(output_tensor, input_tensor, group=None, async_op: bool = False):
    """Every rank's input, concatenated along dim 0 (or stacked for 0-d inputs)."""
    pg = _resolve_group(group)
    expected = pg.size() * T.numel(input_tensor)
    if T.numel(output_tensor) != expected:
        raise RuntimeError(f"output tensor must have {expected} elements (group size x input "
                           f"numel); got {T.numel(output_tensor)}")
    work = _C.all_gather_into_tensor(T.as_arg(output_tensor, "output_tensor"),
                                     T.as_arg(input_tensor, "input_tensor"), pg._group(), async_op)
    return _finish(work, [output_tensor], async_op)


all_gather_into_tensor = all_gather_single


def all_gather(tensor_list, tensor, group=None, async_op: bool = False):
    """tensor_list[r] gets rank r's tensor (staged through one buffer, copied out when the
    op is waited on)."""
    pg = _resolve_group(group)
    if not isinstance(tensor_list, (list, tuple)) or len(tensor_list) != pg.size():
        n = len(tensor_list) if isinstance(tensor_list, (list, tuple)) else "not a list"
        raise RuntimeError(f"Number of tensors in tensor_list ({n}) does not match the group "
                           f"world size ({pg.size()})")
    for out in tensor_list:
        if T.shape_of(out) != T.shape_of(tensor) or T.dtype_name(out) != T.dtype_name(tensor):
            raise ValueError(f"all_gather: every output must have the input's shape "
                             f"{T.shape_of(tensor)} and dtype {T.dtype_name(tensor)}; got "
                             f"{T.shape_of(out)} {T.dtype_name(out)}")
    staging = T.empty_like_flat(tensor, pg.size())
    work = _C.all_gather_into_tensor(staging, T.as_arg(tensor), pg._group(), async_op)
    return _finish(work, list(tensor_list), async_op, done=_copy_out(tensor_list, staging))


def reduce_scatter_single(output, input, op: int = ReduceOp.SUM, group=None,
                          async_op: bool = False):
    pg = _resolve_group(group)
    op = _check_reduce(op, [output, input])
    if T.numel(input) != pg.size() * T.numel(output):
        raise RuntimeError(f"input tensor must have {pg.size() * T.numel(output)} elements "
                           f"(group size x output numel); got {T.numel(input)}")
    work = _C.reduce_scatter_tensor(T.as_arg(output, "output"), T.as_arg(input, "input"), op,
                                    pg._group(), async_op, _PREMUL)
    return _finish(work, [output], async_op)


reduce_scatter_tensor = reduce_scatter_single


def reduce_scatter(output, input_list, op: int = ReduceOp.SUM, group=None,
                   async_op: bool = False):
    pg = _resolve_group(group)
    if not isinstance(input_list, (list, tuple)) or len(input_list) != pg.size():
        raise RuntimeError(f"Number of tensors in input_list does not match the group world "
                           f"size ({pg.size()})")
    op = _check_reduce(op, [output, *input_list])
    work = _C.reduce_scatter(T.as_arg(output, "output"), T.as_args(input_list, "input_list"),
                             op, pg._group(), async_op, _PREMUL)
    return _finish(work, [output], async_op)


def gather(tensor, gather_list=None, dst: Optional[int] = None, group=None,
           async_op: bool = False, group_dst: Optional[int] = None):
    pg = _resolve_group(group)
    dst, group_dst = _canonicalize_group_rank(pg, dst, group_dst)
    me = pg.rank()
    if me == group_dst and gather_list is None:
        raise RuntimeError("gather_list must be specified on the destination rank")
    if me != group_dst and gather_list is not None:
        raise ValueError("gather_list must be omitted on non-destination ranks")
    if me == group_dst:
        _list_len(gather_list, pg.size(), "gather_list")
    outs = T.as_args(gather_list, "gather_list") if gather_list is not None else None
    work = _C.gather(T.as_arg(tensor), outs, dst, pg._group(), async_op)
    return _finish(work, list(gather_list or []), async_op)


def gather_single(tensor, gather_tensor=None, dst: Optional[int] = None, group=None,
                  async_op: bool = False, group_dst: Optional[int] = None):
    """Every rank's tensor concatenated into gather_tensor on the destination."""
    pg = _resolve_group(group)
    dst, group_dst = _canonicalize_group_rank(pg, dst, group_dst)
    me = pg.rank()
    if me == group_dst:
        if gather_tensor is None:
            raise RuntimeError("gather_tensor must be specified on the destination rank")
        if T.numel(gather_tensor) != pg.size() * T.numel(tensor):
            raise RuntimeError(f"gather_tensor must have {pg.size() * T.numel(tensor)} "
                               f"elements; got {T.numel(gather_tensor)}")
        out = gather_tensor
    elif gather_tensor is not None:
        raise ValueError("gather_tensor must be omitted on non-destination ranks")
    else:
        out = T.empty_like_flat(tensor, 0)  # no output off the root
    work = _C.gather_into_tensor(T.as_arg(out, "gather_tensor"), T.as_arg(tensor), dst,
                                 pg._group(), async_op)
    return _finish(work, [gather_tensor] if gather_tensor is not None else [], async_op)


gather_into_tensor = gather_single


def scatter(tensor, scatter_list=None, src: Optional[int] = None, group=None,
            async_op: bool = False, group_src: Optional[int] = None):
    pg = _resolve_group(group)
    src, group_src = _canonicalize_group_rank(pg, src, group_src)
    me = pg.rank()
    if me == group_src and scatter_list is None:
        raise RuntimeError("scatter_list must be specified on the source rank")
    if me != group_src and scatter_list is not None:
        raise ValueError("scatter_list must be omitted on non-source ranks")
    if me == group_src:
        _list_len(scatter_list, pg.size(), "scatter_list")
    ins = T.as_args(scatter_list, "scatter_list") if scatter_list is not None else None
    work = _C.scatter(T.as_arg(tensor), ins, src, pg._group(), async_op)
    return _finish(work, [tensor], async_op)


def all_to_all_single(output, input, output_split_sizes: Optional[List[int]] = None,
                      input_split_sizes: Optional[List[int]] = None, group=None,
                      async_op: bool = False):
    pg = _resolve_group(group)
    for name, splits in (("output_split_sizes", output_split_sizes),
                         ("input_split_sizes", input_split_sizes)):
        if splits is not None and len(splits) not in (0, pg.size()):
            raise ValueError(f"{name} must have one entry per rank ({pg.size()}); got "
                             f"{len(splits)}")
    work = _C.all_to_all_single(T.as_arg(output, "output"), T.as_arg(input, "input"),
                                list(output_split_sizes or []), list(input_split_sizes or []),
                                pg._group(), async_op)
    return _finish(work, [output], async_op)


def all_to_all(output_tensor_list, input_tensor_list, group=None, async_op: bool = False):
    pg = _resolve_group(group)
    _list_len(output_tensor_list, pg.size(), "output_tensor_list")
    _list_len(input_tensor_list, pg.size(), "input_tensor_list")
    work = _C.all_to_all(T.as_args(output_tensor_list, "output_tensor_list"),
                         T.as_args(input_tensor_list, "input_tensor_list"), pg._group(), async_op)
    return _finish(work, list(output_tensor_list), async_op)


def barrier(group=None, async_op: bool = False, device_ids: Optional[List[int]] = None):
    pg = _resolve_group(group)
    work = _C.barrier(pg._group(), async_op, list(device_ids or []))
    return _finish(work, [], async_op)


def monitored_barrier(group=None, timeout=None, wait_all_ranks: bool = False):
    """A barrier through the store whose timeout names the ranks that did not arrive."""
    pg = _resolve_group(group)
    if timeout is None:
        timeout = _dt.timedelta(seconds=pg._timeout_s)
    if not isinstance(timeout, _dt.timedelta):
        raise TypeError("Expected timeout argument to be of type datetime.timedelta")
    _C.monitored_barrier(pg._group(), _ms(timeout.total_seconds()), bool(wait_all_ranks))


# ------------------------------------------------------------------ coalesced
def all_reduce_coalesced(tensors, op: int = ReduceOp.SUM, group=None, async_op: bool = False):
    pg = _resolve_group(group)
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise ValueError("tensors must be a non-empty list")
    op = _check_reduce(op, tensors)
    work = _C.all_reduce_coalesced(T.as_args(tensors, "tensors"), op, pg._group(), async_op,
                                   _PREMUL)
    return _finish(work, list(tensors), async_op)


def all_gather_single_coalesced(output_tensor_list, input_tensor_list, group=None,
                                async_op: bool = False):
    pg = _resolve_group(group)
    if len(output_tensor_list) != len(input_tensor_list):
        raise ValueError("output_tensor_list and input_tensor_list must have the same length")
    for out, inp in zip(output_tensor_list, input_tensor_list):
        if T.numel(out) != pg.size() * T.numel(inp):
            raise RuntimeError(f"each output must have group size x input numel elements "
                               f"({pg.size() * T.numel(inp)}); got {T.numel(out)}")
    work = _C.all_gather_single_coalesced(T.as_args(output_tensor_list, "output_tensor_list"),
                                          T.as_args(input_tensor_list, "input_tensor_list"),
                                          pg._group(), async_op)
    return _finish(work, list(output_tensor_list), async_op)


def all_gather_coalesced(output_tensor_lists, input_tensor_list, group=None,
                         async_op: bool = False):
    """output_tensor_lists[i][r] gets rank r's input_tensor_list[i] (written in place)."""
    pg = _resolve_group(group)
    if len(output_tensor_lists) != len(input_tensor_list):
        raise ValueError("output_tensor_lists and input_tensor_list must have the same length")
    for outs in output_tensor_lists:
        _list_len(outs, pg.size(), "each output list")
    staging = [T.empty_like_flat(t, pg.size()) for t in input_tensor_list]
    work = _C.all_gather_single_coalesced(staging,
                                          T.as_args(input_tensor_list, "input_tensor_list"),
                                          pg._group(), async_op)
    copies = [_copy_out(outs, buf) for outs, buf in zip(output_tensor_lists, staging)]

    def done():
        for copy in copies:
            copy()
    flat = [t for outs in output_tensor_lists for t in outs]
    return _finish(work, flat, async_op, done=done)


def reduce_scatter_single_coalesced(output_tensor_list, input_tensor_list,
                                    op: int = ReduceOp.SUM, group=None, async_op: bool = False):
    pg = _resolve_group(group)
    if len(output_tensor_list) != len(input_tensor_list):
        raise ValueError("output_tensor_list and input_tensor_list must have the same length")
    op = _check_reduce(op, [*output_tensor_list, *input_tensor_list])
    work = _C.reduce_scatter_single_coalesced(
        T.as_args(output_tensor_list, "output_tensor_list"),
        T.as_args(input_tensor_list, "input_tensor_list"), op, pg._group(), async_op, _PREMUL)
    return _finish(work, list(output_tensor_list), async_op)


def reduce_scatter_coalesced(output_tensor_list, input_tensor_lists, op: int = ReduceOp.SUM,
                             group=None, async_op: bool = False):
    """output_tensor_list[i] gets the reduction of every rank's input_tensor_lists[i][me]."""
    pg = _resolve_group(group)
    if len(output_tensor_list) != len(input_tensor_lists):
        raise ValueError("output_tensor_list and input_tensor_lists must have the same length")
    staging = []
    for out, ins in zip(output_tensor_list, input_tensor_lists):
        _list_len(ins, pg.size(), "each input list")
        buf = T.empty_like_flat(out, pg.size())
        for r, t in enumerate(ins):
            _C.copy_into(buf[r], T.as_arg(t, "input"))
        staging.append(buf)
    op = _check_reduce(op, output_tensor_list)
    work = _C.reduce_scatter_single_coalesced(
        T.as_args(output_tensor_list, "output_tensor_list"), staging, op, pg._group(), async_op,
        _PREMUL)
    return _finish(work, list(output_tensor_list), async_op)


# ------------------------------------------------------------------ point to point
def _p2p_peer(pg: ProcessGroup, peer, group_peer, what: str) -> int:
    if peer is None and group_peer is None:
        raise ValueError(f"Must specify {what} or group_{what}")
    return _canonicalize_group_rank(pg, peer, group_peer)[0]


def isend(tensor, dst: Optional[int] = None, group=None, tag: int = 0,
          group_dst: Optional[int] = None):
    """Returns a Work, or None when this rank is not in `group`."""
    if _rank_not_in_group(group):
        _warn_not_in_group("isend")
        return None
    pg = _resolve_group(group)
    dst = _p2p_peer(pg, dst, group_dst, "dst")
    work = _C.isend(T.as_arg(tensor), dst, pg._group(), int(tag))
    return pg._retain_p2p_work(Work([work], tensors=[tensor],
                                    profiling_name=_current_comm_name()))


def irecv(tensor, src: Optional[int] = None, group=None, tag: int = 0,
          group_src: Optional[int] = None):
    """Receives into `tensor` (from any rank when src and group_src are None)."""
    if _rank_not_in_group(group):
        _warn_not_in_group("irecv")
        return None
    pg = _resolve_group(group)
    src = -1 if src is None and group_src is None else \
        _canonicalize_group_rank(pg, src, group_src)[0]
    work = _C.irecv(T.as_arg(tensor), src, pg._group(), int(tag))
    return pg._retain_p2p_work(Work([work], tensors=[tensor],
                                    profiling_name=_current_comm_name()))


def send(tensor, dst: Optional[int] = None, group=None, tag: int = 0,
         group_dst: Optional[int] = None) -> None:
    if _rank_not_in_group(group):
        _warn_not_in_group("send")
        return
    pg = _resolve_group(group)
    dst_global = _p2p_peer(pg, dst, group_dst, "dst")
    if dst_global == pg.global_rank(pg.rank()):
        raise ValueError("synchronous send cannot target the current rank")
    isend(tensor, dst_global, group=group, tag=tag).wait()


def recv(tensor, src: Optional[int] = None, group=None, tag: int = 0,
         group_src: Optional[int] = None) -> int:
    """Returns the sender's global rank (-1 when this rank is not in `group`)."""
    if _rank_not_in_group(group):
        _warn_not_in_group("recv")
        return -1
    work = irecv(tensor, src, group=group, tag=tag, group_src=group_src)
    work.wait()
    return work._source_rank()


class P2POp:
    """One send or receive of batch_isend_irecv: op is isend or irecv, `peer` a global
    rank (or `group_peer` a group rank)."""

    def __init__(self, op, tensor, peer: Optional[int] = None, group=None, tag: int = 0,
                 group_peer: Optional[int] = None):
        _check_op(op)
        self.op = op
        self.tensor = tensor
        if group_peer is not None:
            if peer is not None:
                raise ValueError("Can't specify both peer and group_peer")
            self.peer = get_global_rank(_resolve_group(group), group_peer)
            self.group_peer = group_peer
        else:
            if peer is None:
                raise ValueError("Must specify peer or group_peer")
            self.peer = peer
            self.group_peer = get_group_rank(_resolve_group(group), peer)
        self.group = group
        self.tag = tag

    def __repr__(self) -> str:
        return (f"P2POp({getattr(self.op, '__name__', self.op)}, peer={self.peer}, "
                f"group={self.group}, tag={self.tag})")


def _check_op(op) -> None:
    if op not in (isend, irecv):
        raise ValueError("Invalid ``op``. Expected ``op`` to be of type "
                         "``paddle_like.distributed.isend`` or "
                         "``paddle_like.distributed.irecv``.")


def batch_isend_irecv(p2p_op_list: List[P2POp]) -> List[Work]:
    """Posts every op as one group (any order completes); one Work per op."""
    if not isinstance(p2p_op_list, list) or not all(isinstance(p, P2POp)
                                                    for p in p2p_op_list):
        raise ValueError("Invalid ``p2p_op_list``. Each op is expected to be of type "
                         "``paddle_like.distributed.P2POp``.")
    if not p2p_op_list:
        return []
    group = p2p_op_list[0].group
    if not all(group == p.group for p in p2p_op_list):
        raise ValueError("All ops need to use the same group.")
    pg = _resolve_group(group)
    ops = [(p.op is isend, T.as_arg(p.tensor), p.peer, pg._group(), int(p.tag))
           for p in p2p_op_list]
    works = _C.batch_isend_irecv(ops)
    name = _current_comm_name()
    return [Work([w], tensors=[p.tensor], profiling_name=name)
            for w, p in zip(works, p2p_op_list)]
