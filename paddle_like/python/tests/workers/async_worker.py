"""Async ops, futures, lifetimes and failures on real ranks. argv[1] names the case."""
import datetime as dt
import gc
import os
import signal
import sys
import threading
import time

import numpy as np

import paddle_like.distributed as dist


def futures_and_lifetimes():
    me, n = dist.get_rank(), dist.get_world_size()
    # get_future(): the value is the op's output tensors; then() chains.
    t = np.full(1 << 16, me + 1, np.float64)
    fut = dist.all_reduce(t, async_op=True).get_future()
    doubled = fut.then(lambda f: f.value()[0] * 2)
    want = n * (n + 1) / 2
    assert doubled.wait()[0] == 2 * want
    assert fut.value()[0] is t and t[0] == want
    # Work.result() holds the outputs of every kind of op.
    out = np.zeros(n * 4, np.int32)
    w = dist.all_gather_into_tensor(out, np.full(4, me, np.int32), async_op=True)
    assert w.wait() and w.result()[0] is out
    # The only reference to an array is dropped mid-op: the op keeps the memory alive.
    for _ in range(20):
        x = np.full(1 << 18, 1.0, np.float32)
        w = dist.all_reduce(x, async_op=True)
        del x
        gc.collect()
        w.wait()
        del w
    # A DLPack producer dropped mid-op.
    try:
        import torch
        tt = torch.ones(1 << 18)
        w = dist.all_reduce(tt, async_op=True)
        del tt
        gc.collect()
        assert w.wait()
        assert float(w.result()[0][0]) == n
    except ImportError:
        pass
    # The GIL is released while an op waits: a thread makes progress meanwhile.
    if n > 1:
        ticks = []
        stop = threading.Event()

        def spin():
            while not stop.is_set():
                ticks.append(1)
                time.sleep(0.001)

        th = threading.Thread(target=spin)
        th.start()
        if me == 0:
            time.sleep(0.5)  # the others wait in the all-reduce for half a second
        dist.all_reduce(np.ones(4, np.float32))
        stop.set()
        th.join()
        if me != 0:
            assert len(ticks) > 50, f"only {len(ticks)} ticks while waiting: GIL held?"
    # wait(timeout): False while the op is pending (it stays issued), True once done.
    if n > 1:
        y = np.ones(8, np.float32)
        if me == 0:
            w = dist.all_reduce(y, async_op=True)
            assert w.wait(timeout=dt.timedelta(milliseconds=100)) is False
            assert not w.is_completed()
            dist.barrier()  # tells the others to join the all-reduce... after it
        else:
            time.sleep(0.5)
            w = dist.all_reduce(y, async_op=True)
        if me != 0:
            dist.barrier()
        assert w.wait() is True and y[0] == n
    # Every collective honours async_op: barrier, list all_gather, coalesced gather.
    assert dist.barrier(async_op=True).wait()
    outs = [np.zeros(2, np.int64) for _ in range(n)]
    w = dist.all_gather(outs, np.full(2, me, np.int64), async_op=True)
    assert isinstance(w, dist.Work) and w.wait()
    assert [int(o[0]) for o in outs] == list(range(n))
    assert dist.all_reduce(np.ones(1, np.float32)) is None  # sync: None, as the seed
    # Groups: parent-relative split, non-members get NON_GROUP_MEMBER.
    if n >= 3:
        sub = dist.split_group(split_ranks=[[n - 1, 0]])
        if me in (0, n - 1):
            assert sub.ranks == [n - 1, 0], sub.ranks
            v = np.full(1, me, np.int64)
            dist.broadcast(v, group=sub, group_src=0)  # group rank 0 is global n-1
            assert v[0] == n - 1
        else:
            assert sub is dist.GroupMember.NON_GROUP_MEMBER
        evens = dist.new_group([r for r in range(n) if r % 2 == 0])
        if me % 2 == 0:
            assert dist.get_rank(evens) == me // 2
    print(f"rank {me}: ok", flush=True)


def killed_rank():
    """Rank 1 dies by SIGKILL; the others must raise (not hang) within the timeout."""
    me = dist.get_rank()
    dist.set_timeout(dt.timedelta(seconds=5))
    dist.all_reduce(np.ones(4, np.float32))
    if me == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        dist.all_reduce(np.ones(1 << 20, np.float32))
        dist.all_reduce(np.ones(4, np.float32))
    except dist.DistError as error:
        took = time.monotonic() - start
        assert took < 10, f"raised after {took:.1f} s"
        assert "1" in str(error), error
        print(f"rank {me}: raised {type(error).__name__} after {took:.2f} s: "
              f"{str(error).splitlines()[0]}", flush=True)
        os._exit(0)
    raise AssertionError("the all-reduce with a dead rank did not raise")


def stalled_rank():
    """Rank 1 does not call the all-reduce: the others' wait raises DistTimeoutError."""
    me = dist.get_rank()
    dist.set_timeout(dt.timedelta(seconds=2))
    if me == 1:
        time.sleep(6)
        os._exit(0)
    try:
        dist.all_reduce(np.ones(4, np.float32))
    except dist.DistTimeoutError as error:
        print(f"rank {me}: timed out: {str(error).splitlines()[0]}", flush=True)
        os._exit(0)
    raise AssertionError("no timeout")


if __name__ == "__main__":
    dist.init_process_group("gloo")
    globals()[sys.argv[1]]()
    if dist.is_initialized():
        dist.destroy_process_group()
