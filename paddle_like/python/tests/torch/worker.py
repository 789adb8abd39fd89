"""One rank of the torch backend's tests (started by conftest.run_ranks under launch).

usage: worker.py MODE [args]; MODE is one of
  ops      every op on paddle_like and on torch's gloo (a second group), every dtype and
           reduce op, checked against each other and against a local oracle
  p2p      send/recv (tags, any source), isend/irecv, batch_isend_irecv, subgroups,
           monitored_barrier
  ddp      DistributedDataParallel (float64) for 20 steps on paddle_like and on gloo, and
           one process on the whole batches: the same parameters within 1e-10
  hooks    DDP with find_unused_parameters, no_sync, the fp16 compression hook, PowerSGD
  kill     rank 1 SIGKILLs itself; the others must raise RuntimeError, not hang
  late_first  the first op (connecting the ranks) with a rank 3 s late
  timeout  Work.wait(timeout) raises while a peer is late; a later wait() gets the result
  errors   what the engine cannot do raises RuntimeError naming the op; strided tensors work
Each rank asserts its own results; an assertion exits non-zero, which fails the job.
"""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import paddle_like.torch_backend  # noqa: F401  registers "paddle_like"

torch.set_num_threads(1)

ALL_DTYPES = [torch.bool, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
              torch.float16, torch.bfloat16, torch.float32, torch.float64,
              torch.complex64, torch.complex128]
REDUCE_DTYPES = [d for d in ALL_DTYPES if d is not torch.int16]
OPS = {
    "SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
    "MAX": dist.ReduceOp.MAX, "BAND": dist.ReduceOp.BAND, "BOR": dist.ReduceOp.BOR,
    "BXOR": dist.ReduceOp.BXOR, "AVG": dist.ReduceOp.AVG,
}


def init(timeout_s=60):
    dist.init_process_group("paddle_like", timeout=datetime.timedelta(seconds=timeout_s))
    return dist.get_rank(), dist.get_world_size()


def make(rank, dtype, n, salt=0):
    """Deterministic small values: any rank can compute every rank's input."""
    g = torch.Generator().manual_seed(1000 * rank + 17 * n + salt)
    if dtype is torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    if dtype.is_complex:
        re = torch.randint(-3, 4, (n,), generator=g).double()
        im = torch.randint(-3, 4, (n,), generator=g).double()
        return torch.complex(re, im).to(dtype)
    lo = 0 if dtype is torch.uint8 else -3
    return torch.randint(lo, 4, (n,), generator=g).to(dtype)


def op_ok(name, dtype):
    if name in ("BAND", "BOR", "BXOR"):
        return not (dtype.is_floating_point or dtype.is_complex)
    if dtype.is_complex:
        return name in ("SUM", "AVG")
    if name == "AVG":
        return dtype.is_floating_point
    if dtype is torch.bool:
        return name in ("SUM", "MIN", "MAX", "PRODUCT")
    return True


def oracle(name, xs):
    """The reduction of the ranks' tensors xs, computed locally."""
    dtype = xs[0].dtype
    if dtype is torch.bool:
        s = torch.stack([x.long() for x in xs])
        r = {"SUM": s.amax(0), "MAX": s.amax(0), "MIN": s.amin(0), "PRODUCT": s.amin(0),
             "BAND": s.amin(0), "BOR": s.amax(0), "BXOR": s.sum(0) % 2}[name]
        return r.bool()
    if dtype.is_complex:
        s = torch.stack([x.to(torch.complex128) for x in xs])
        r = s.sum(0) if name == "SUM" else s.sum(0) / len(xs)
        return r.to(dtype)
    if name in ("BAND", "BOR", "BXOR"):
        s = xs[0].clone()
        for x in xs[1:]:
            s = {"BAND": torch.bitwise_and, "BOR": torch.bitwise_or,
                 "BXOR": torch.bitwise_xor}[name](s, x)
        return s
    s = torch.stack([x.double() for x in xs])
    r = {"SUM": s.sum(0), "PRODUCT": s.prod(0), "MIN": s.amin(0), "MAX": s.amax(0),
         "AVG": s.sum(0) / len(xs)}[name]
    return r.to(dtype)


def same(a, b, what):
    if a.dtype.is_floating_point and a.dtype in (torch.float16, torch.bfloat16):
        ok = torch.allclose(a.double(), b.double(), rtol=1e-2, atol=1e-2)
    elif a.dtype.is_floating_point or a.dtype.is_complex:
        ok = torch.allclose(a, b, rtol=1e-6, atol=1e-6)
    else:
        ok = torch.equal(a, b)
    assert ok, f"{what}: {a} != {b}"


def try_gloo(fn):
    """Runs fn on the gloo group; None when torch's gloo does not take it."""
    try:
        fn()
        return True
    except (RuntimeError, ValueError):
        return None


def run_ops():
    rank, size = init()
    gloo = dist.new_group(backend="gloo")
    sizes = [0, 1, 7, 1031]
    checked = 0
    gloo_checked = 0

    # ---- reducing ops: all_reduce, reduce, reduce_scatter (list and base), all_reduce_coalesced
    for dtype in REDUCE_DTYPES:
        for name, op in OPS.items():
            if not op_ok(name, dtype):
                continue
            for n in sizes:
                xs = [make(r, dtype, n) for r in range(size)]
                want = oracle(name, xs)
                ours = xs[rank].clone()
                dist.all_reduce(ours, op=op)
                same(ours, want, f"all_reduce {name} {dtype} n={n}")
                theirs = xs[rank].clone()
                if n and try_gloo(lambda: dist.all_reduce(theirs, op=op, group=gloo)):
                    same(ours, theirs, f"all_reduce {name} {dtype} vs gloo")
                    gloo_checked += 1
                checked += 1
                if n == 0:
                    continue
                root = n % size
                ours = xs[rank].clone()
                dist.reduce(ours, dst=root, op=op)
                if rank == root:
                    same(ours, want, f"reduce {name} {dtype} n={n}")
                theirs = xs[rank].clone()
                if try_gloo(lambda: dist.reduce(theirs, dst=root, op=op, group=gloo)) \
                        and rank == root:
                    same(ours, theirs, f"reduce {name} {dtype} vs gloo")
                    gloo_checked += 1
                # reduce_scatter: block b of every rank's input reduces onto rank b
                blocks = [[make(r, dtype, n, salt=b + 1) for b in range(size)]
                          for r in range(size)]
                want_rs = oracle(name, [blocks[r][rank] for r in range(size)])
                out = torch.empty(n, dtype=dtype)
                dist.reduce_scatter(out, [b.clone() for b in blocks[rank]], op=op)
                same(out, want_rs, f"reduce_scatter {name} {dtype} n={n}")
                theirs = torch.empty(n, dtype=dtype)
                if try_gloo(lambda: dist.reduce_scatter(theirs, [b.clone() for b in blocks[rank]],
                                                        op=op, group=gloo)):
                    same(out, theirs, f"reduce_scatter {name} {dtype} vs gloo")
                    gloo_checked += 1
                out2 = torch.empty(n, dtype=dtype)
                dist._reduce_scatter_base(out2, torch.cat(blocks[rank]), op=op)
                same(out2, want_rs, f"_reduce_scatter_base {name} {dtype} n={n}")
                checked += 3
            if not dtype.is_complex:
                ts = [make(rank, dtype, n, salt=5) for n in (3, 1, 8)]
                wants = [oracle(name, [make(r, dtype, n, salt=5) for r in range(size)])
                         for n in (3, 1, 8)]
                gs = [t.clone() for t in ts]
                dist.all_reduce_coalesced(ts, op=op)
                for t, w in zip(ts, wants):
                    same(t, w, f"all_reduce_coalesced {name} {dtype}")
                if try_gloo(lambda: dist.all_reduce_coalesced(gs, op=op, group=gloo)):
                    for t, g in zip(ts, gs):
                        same(t, g, f"all_reduce_coalesced {name} {dtype} vs gloo")
                    gloo_checked += 1
                checked += 1

    # PREMUL_SUM (torch's gloo has none)
    x = make(rank, torch.float64, 9)
    want = sum(make(r, torch.float64, 9) for r in range(size)) * 0.5
    y = x.clone()
    dist.all_reduce(y, op=dist._make_nccl_premul_sum(0.5))
    same(y, want, "all_reduce PREMUL_SUM")

    # ---- the rest, every dtype (int16 travels as bytes)
    for dtype in ALL_DTYPES:
        for n in sizes:
            xs = [make(r, dtype, n, salt=3) for r in range(size)]
            root = (n + 1) % size
            # broadcast
            t = xs[rank].clone()
            dist.broadcast(t, src=root)
            same(t, xs[root], f"broadcast {dtype} n={n}")
            g = xs[rank].clone()
            if n and try_gloo(lambda: dist.broadcast(g, src=root, group=gloo)):
                same(t, g, f"broadcast {dtype} vs gloo")
                gloo_checked += 1
            # all_gather (separate tensors: staged) and into views of one buffer (direct)
            outs = [torch.empty(n, dtype=dtype) for _ in range(size)]
            dist.all_gather(outs, xs[rank])
            for r in range(size):
                same(outs[r], xs[r], f"all_gather {dtype} n={n} from {r}")
            buf = torch.empty(size, n, dtype=dtype)
            dist.all_gather(list(buf.unbind(0)), xs[rank])
            same(buf, torch.stack(xs), f"all_gather views {dtype} n={n}")
            gl = [torch.empty(n, dtype=dtype) for _ in range(size)]
            if n and try_gloo(lambda: dist.all_gather(gl, xs[rank].clone(), group=gloo)):
                for r in range(size):
                    same(outs[r], gl[r], f"all_gather {dtype} vs gloo")
                gloo_checked += 1
            base = torch.empty(size * n, dtype=dtype)
            dist._all_gather_base(base, xs[rank])
            same(base, torch.cat(xs), f"_all_gather_base {dtype} n={n}")
            theirs = torch.empty(size * n, dtype=dtype)
            if n and try_gloo(lambda: dist._all_gather_base(theirs, xs[rank], group=gloo)):
                same(base, theirs, f"_all_gather_base {dtype} vs gloo")
                gloo_checked += 1
            # gather / scatter
            glist = [torch.empty(n, dtype=dtype) for _ in range(size)] if rank == root else None
            dist.gather(xs[rank], gather_list=glist, dst=root)
            if rank == root:
                for r in range(size):
                    same(glist[r], xs[r], f"gather {dtype} n={n}")
            theirs = [torch.empty(n, dtype=dtype) for _ in range(size)] if rank == root else None
            if n and try_gloo(lambda: dist.gather(xs[rank], gather_list=theirs, dst=root,
                                                  group=gloo)) and rank == root:
                for r in range(size):
                    same(glist[r], theirs[r], f"gather {dtype} vs gloo")
                gloo_checked += 1
            chunks = [make(root, dtype, n, salt=10 + r) for r in range(size)]
            out = torch.empty(n, dtype=dtype)
            dist.scatter(out, scatter_list=[c.clone() for c in chunks] if rank == root else None,
                         src=root)
            same(out, chunks[rank], f"scatter {dtype} n={n}")
            theirs = torch.empty(n, dtype=dtype)
            if n and try_gloo(lambda: dist.scatter(
                    theirs, scatter_list=[c.clone() for c in chunks] if rank == root else None,
                    src=root, group=gloo)):
                same(out, theirs, f"scatter {dtype} vs gloo")
                gloo_checked += 1
            # all_to_all (list) and all_to_all_single (equal and uneven splits)
            send = [make(rank, dtype, n, salt=20 + r) for r in range(size)]
            recv = [torch.empty(n, dtype=dtype) for _ in range(size)]
            dist.all_to_all(recv, send)
            for r in range(size):
                same(recv[r], make(r, dtype, n, salt=20 + rank), f"all_to_all {dtype} n={n}")
            single_in = torch.cat(send).reshape(size, n)
            single_out = torch.empty(size, n, dtype=dtype)
            dist.all_to_all_single(single_out, single_in)
            same(single_out, torch.stack(recv), f"all_to_all_single {dtype} n={n}")
            theirs = torch.empty(size, n, dtype=dtype)
            if n and try_gloo(lambda: dist.all_to_all_single(theirs, single_in, group=gloo)):
                same(single_out, theirs, f"all_to_all_single {dtype} vs gloo")
                gloo_checked += 1
            if n:
                # rank r sends (r + q + 1) rows of 2 elements to rank q
                rows_in = [rank + q + 1 for q in range(size)]
                rows_out = [q + rank + 1 for q in range(size)]
                src_t = make(rank, dtype, 2 * sum(rows_in), salt=30).reshape(-1, 2)
                dst_t = torch.empty(sum(rows_out), 2, dtype=dtype)
                dist.all_to_all_single(dst_t, src_t, rows_out, rows_in)
                off = 0
                for q in range(size):
                    q_in = [q + k + 1 for k in range(size)]
                    q_src = make(q, dtype, 2 * sum(q_in), salt=30).reshape(-1, 2)
                    start = sum(q_in[:rank])
                    same(dst_t[off:off + rows_out[q]], q_src[start:start + q_in[rank]],
                         f"all_to_all_single uneven {dtype}")
                    off += rows_out[q]
            checked += 8

        # all_gather_coalesced
        ins = [make(rank, dtype, n, salt=40) for n in (2, 5)]
        outs = [[torch.empty(n, dtype=dtype) for n in (2, 5)] for _ in range(size)]
        dist.all_gather_coalesced(outs, ins)
        for r in range(size):
            for t, n in zip(outs[r], (2, 5)):
                same(t, make(r, dtype, n, salt=40), f"all_gather_coalesced {dtype}")
        theirs = [[torch.empty(n, dtype=dtype) for n in (2, 5)] for _ in range(size)]
        if try_gloo(lambda: dist.all_gather_coalesced(theirs, ins, group=gloo)):
            for r in range(size):
                for a, b in zip(outs[r], theirs[r]):
                    same(a, b, f"all_gather_coalesced {dtype} vs gloo")
            gloo_checked += 1
        theirs = [torch.empty(3, dtype=dtype) for _ in range(size)]
        mine = [torch.empty(3, dtype=dtype) for _ in range(size)]
        send = [make(rank, dtype, 3, salt=50 + r) for r in range(size)]
        dist.all_to_all(mine, send)
        if try_gloo(lambda: dist.all_to_all(theirs, send, group=gloo)):
            for a, b in zip(mine, theirs):
                same(a, b, f"all_to_all {dtype} vs gloo")
            gloo_checked += 1

    # Work API: async op, is_completed, wait, result, futures
    t = torch.ones(1000, dtype=torch.float64) * (rank + 1)
    w = dist.all_reduce(t, async_op=True)
    fut = w.get_future()
    assert w.wait()
    assert w.is_completed() and w.is_success()
    assert torch.equal(w.result()[0], t)
    v = fut.wait()
    assert isinstance(v, list) and v[0] is not None and torch.equal(v[0], t)
    chained = dist.all_reduce(t.clone(), async_op=True).get_future().then(
        lambda f: f.value()[0] * 2)
    same(chained.wait(), t * size * 2, "future.then")
    dist.barrier()
    assert dist.get_backend() == "paddle_like"
    print(f"rank {rank}: ops ok ({checked} checks, {gloo_checked} against gloo)")
    dist.destroy_process_group()


def run_p2p():
    rank, size = init()
    pg = dist.distributed_c10d._get_default_group()
    if size > 1:
        nxt, prv = (rank + 1) % size, (rank - 1) % size
        for dtype in (torch.float32, torch.int64, torch.int16, torch.bool):
            x = make(rank, dtype, 11)
            y = torch.empty(11, dtype=dtype)
            if rank % 2 == 0:
                dist.send(x, nxt, tag=7)
                dist.recv(y, prv, tag=7)
            else:
                dist.recv(y, prv, tag=7)
                dist.send(x, nxt, tag=7)
            same(y, make(prv, dtype, 11), f"send/recv {dtype}")
        # isend/irecv with futures
        x = torch.full((5,), float(rank))
        y = torch.empty(5)
        reqs = [dist.isend(x, nxt), dist.irecv(y, prv)]
        f = reqs[1].get_future() if hasattr(reqs[1], "get_future") else None
        for r in reqs:
            r.wait()
        if f is not None:
            f.wait()
        same(y, torch.full((5,), float(prv)), "isend/irecv")
        # batch_isend_irecv (engine coalescing)
        y2 = torch.empty(5)
        ops = [dist.P2POp(dist.isend, x * 2, nxt), dist.P2POp(dist.irecv, y2, prv)]
        for r in dist.batch_isend_irecv(ops):
            r.wait()
        same(y2, torch.full((5,), 2.0 * prv), "batch_isend_irecv")
        # receive from any source: rank 0 hears from every other rank
        if rank == 0:
            seen = set()
            for _ in range(size - 1):
                z = torch.empty(3)
                src = dist.recv(z, tag=3)
                assert z[0].item() == src, (z, src)
                seen.add(src)
            assert seen == set(range(1, size)), seen
        else:
            dist.send(torch.full((3,), float(rank)), 0, tag=3)
    # subgroups on this backend: evens and odds, each its own engine group (torch 1.13 cannot
    # create an empty group: not on one rank)
    if size > 1:
        evens = dist.new_group(ranks=list(range(0, size, 2)), backend="paddle_like")
        odds = dist.new_group(ranks=list(range(1, size, 2)), backend="paddle_like")
        mine = list(range(rank % 2, size, 2))
        t = torch.full((6,), float(rank + 1))
        dist.all_reduce(t, group=evens if rank % 2 == 0 else odds)
        same(t, torch.full((6,), float(sum(r + 1 for r in mine))), "subgroup all_reduce")
        b = torch.full((2,), float(rank))
        dist.broadcast(b, src=mine[-1], group=evens if rank % 2 == 0 else odds)
        same(b, torch.full((2,), float(mine[-1])), "subgroup broadcast (global src)")
    pg.monitored_barrier(datetime.timedelta(seconds=20), wait_all_ranks=True)
    dist.barrier()
    print(f"rank {rank}: p2p ok")
    dist.destroy_process_group()


# ------------------------------------------------------------------ DDP
def model(seed=0, dtype=torch.float64):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(12, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8), torch.nn.ReLU(),
        torch.nn.Linear(8, 3)).to(dtype)


def batches(steps, global_batch, dtype=torch.float64):
    g = torch.Generator().manual_seed(123)
    return [(torch.randn(global_batch, 12, generator=g, dtype=dtype),
             torch.randint(0, 3, (global_batch,), generator=g)) for _ in range(steps)]


def train(net, data, rank, size, ddp_group=None, steps=20, **ddp_kw):
    """Trains `net` (DDP over ddp_group when given, else alone on the whole batches)."""
    if ddp_group is not None:
        net = torch.nn.parallel.DistributedDataParallel(net, process_group=ddp_group, **ddp_kw)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for x, y in data[:steps]:
        if ddp_group is not None:
            shard = x.shape[0] // size
            x, y = x[rank * shard:(rank + 1) * shard], y[rank * shard:(rank + 1) * shard]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
    return net.module if ddp_group is not None else net


def max_diff(a, b):
    return max((p - q).abs().max().item() for p, q in zip(a.parameters(), b.parameters()))


def run_ddp():
    rank, size = init()
    gloo = dist.new_group(backend="gloo")
    data = batches(20, 12 * size)
    ours = train(model(), data, rank, size, ddp_group=dist.group.WORLD, bucket_cap_mb=0.001)
    theirs = train(model(), data, rank, size, ddp_group=gloo, bucket_cap_mb=0.001)
    alone = train(model(), data, rank, size)
    d_gloo, d_alone = max_diff(ours, theirs), max_diff(ours, alone)
    assert d_gloo <= 1e-10, f"paddle_like DDP vs gloo DDP: max |dw| = {d_gloo}"
    assert d_alone <= 1e-10, f"paddle_like DDP vs one process: max |dw| = {d_alone}"
    print(f"rank {rank}: ddp ok (max |dw| vs gloo {d_gloo:.1e}, vs one process {d_alone:.1e})")
    dist.destroy_process_group()


class Branchy(torch.nn.Module):
    """Uses `b` only on even steps: DDP must find its unused parameters."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.a = torch.nn.Linear(12, 3).double()
        self.b = torch.nn.Linear(12, 3).double()
        self.step = 0

    def forward(self, x):
        self.step += 1
        return self.a(x) + (self.b(x) if self.step % 2 == 0 else 0)


def run_hooks():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    rank, size = init()
    data = batches(20, 12 * size)
    # find_unused_parameters: against one process
    ours = train(Branchy(), data, rank, size, ddp_group=dist.group.WORLD,
                 find_unused_parameters=True)
    alone = train(Branchy(), data, rank, size)
    d = max_diff(ours, alone)
    assert d <= 1e-10, f"find_unused_parameters: max |dw| = {d}"
    # no_sync: accumulate two micro-batches locally, all-reduce on the second
    net = torch.nn.parallel.DistributedDataParallel(model(), process_group=dist.group.WORLD)
    ref = model()
    opt, ref_opt = torch.optim.SGD(net.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
    for x, y in data[:10]:
        shard = x.shape[0] // size
        xs, ys = x[rank * shard:(rank + 1) * shard], y[rank * shard:(rank + 1) * shard]
        half = shard // 2
        opt.zero_grad()
        with net.no_sync():
            torch.nn.functional.cross_entropy(net(xs[:half]), ys[:half], reduction="sum").backward()
        torch.nn.functional.cross_entropy(net(xs[half:]), ys[half:], reduction="sum").backward()
        opt.step()
        ref_opt.zero_grad()
        (torch.nn.functional.cross_entropy(ref(x), y, reduction="sum") / size).backward()
        ref_opt.step()
    d = max_diff(net.module, ref)
    assert d <= 1e-10, f"no_sync: max |dw| = {d}"
    # fp16 compression hook: within fp16's rounding of one process, and equal to gloo's
    gloo = dist.new_group(backend="gloo")
    runs = []
    for group in (dist.group.WORLD, gloo):
        net = torch.nn.parallel.DistributedDataParallel(model(dtype=torch.float32),
                                                        process_group=group)
        net.register_comm_hook(group, default_hooks.fp16_compress_hook)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for x, y in batches(10, 12 * size, torch.float32):
            shard = x.shape[0] // size
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x[rank * shard:(rank + 1) * shard]),
                                              y[rank * shard:(rank + 1) * shard]).backward()
            opt.step()
        runs.append(net.module)
    alone = model(dtype=torch.float32)
    opt = torch.optim.SGD(alone.parameters(), lr=0.1)
    for x, y in batches(10, 12 * size, torch.float32):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(alone(x), y).backward()
        opt.step()
    d_gloo, d_alone = max_diff(runs[0], runs[1]), max_diff(runs[0], alone)
    # fp16 sums in another order round differently: a few fp16 ulps of the gradients
    assert d_gloo <= 1e-4, f"fp16 hook vs gloo: max |dw| = {d_gloo}"
    assert d_alone <= 1e-2, f"fp16 hook vs one process: max |dw| = {d_alone}"
    # PowerSGD: its future callbacks issue all-reduces and wait for them (nested futures)
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
    runs = []
    for group in (dist.group.WORLD, gloo):
        net = torch.nn.parallel.DistributedDataParallel(model(dtype=torch.float32),
                                                        process_group=group)
        state = psgd.PowerSGDState(process_group=group, matrix_approximation_rank=1,
                                   start_powerSGD_iter=2, random_seed=7)
        net.register_comm_hook(state, psgd.powerSGD_hook)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for x, y in batches(8, 12 * size, torch.float32):
            shard = x.shape[0] // size
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(x[rank * shard:(rank + 1) * shard]),
                                              y[rank * shard:(rank + 1) * shard]).backward()
            opt.step()
        runs.append(net.module)
    d_psgd = max_diff(runs[0], runs[1])
    assert d_psgd <= 1e-4, f"PowerSGD hook vs gloo: max |dw| = {d_psgd}"
    print(f"rank {rank}: hooks ok (fp16 vs gloo {d_gloo:.1e}, vs one process {d_alone:.1e}; "
          f"PowerSGD vs gloo {d_psgd:.1e})")
    dist.destroy_process_group()


def run_kill():
    rank, size = init(timeout_s=10)
    t = torch.ones(1 << 16)
    dist.all_reduce(t)
    if rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.5)
    start = time.time()
    try:
        for _ in range(3):
            dist.all_reduce(t)
    except RuntimeError as e:
        print(f"rank {rank}: raised RuntimeError after {time.time() - start:.1f}s: "
              f"{str(e).splitlines()[0][:300]}", flush=True)
        os._exit(0)
    print(f"rank {rank}: no error after the peer died", flush=True)
    os._exit(3)


def run_timeout():
    """Work.wait(timeout) raises RuntimeError when a peer is late; the op goes on and a later
    wait() gets its result."""
    rank, size = init()
    dist.all_reduce(torch.ones(8))  # the communicator exists: the late op is the only wait
    t = torch.full((1000,), float(rank + 1))
    if rank == 1:
        time.sleep(3)
    w = dist.all_reduce(t, async_op=True)
    if rank == 0:
        start = time.time()
        try:
            w.wait(datetime.timedelta(milliseconds=1000))
            raise AssertionError("wait(1 s) returned while rank 1 was still asleep")
        except RuntimeError as e:
            assert "timed out" in str(e), e
            assert time.time() - start < 2.5, time.time() - start
    w.wait()
    same(t, torch.full((1000,), float(size * (size + 1) / 2)), "the late all_reduce")
    print(f"rank {rank}: timeout ok")
    dist.destroy_process_group()


def run_late_first():
    """The group's first op (which connects the ranks through torch's store) with one rank
    3 s late: the engine's short store waits time out many times meanwhile."""
    rank, size = init(timeout_s=30)
    if rank == size - 1:
        time.sleep(3)
    t = torch.full((1000,), float(rank + 1))
    dist.all_reduce(t)
    same(t, torch.full((1000,), float(size * (size + 1) / 2)), "the first all_reduce")
    print(f"rank {rank}: late_first ok")
    dist.destroy_process_group()


def run_errors():
    rank, size = init()
    def raises(fn, what):
        try:
            fn()
        except RuntimeError as e:
            assert "paddle_like" in str(e), f"{what}: {e}"
            return
        raise AssertionError(f"{what}: no error")
    raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)), "int16 all_reduce")
    raises(lambda: dist.all_reduce(torch.ones(4).to_sparse()), "sparse")
    raises(lambda: dist.all_reduce(torch.ones(4, dtype=torch.float32),
                                   op=dist.ReduceOp.BAND), "BAND on float")
    dist.barrier()
    # non-contiguous tensors are staged through a contiguous copy (as torch's gloo takes them)
    x = torch.arange(16, dtype=torch.float64).reshape(4, 4).t()
    dist.all_reduce(x)
    same(x, torch.arange(16, dtype=torch.float64).reshape(4, 4).t() * size, "non-contiguous")
    y = torch.zeros(4, 4, dtype=torch.int32).t()
    if rank == 0:
        y.copy_(torch.arange(16, dtype=torch.int32).reshape(4, 4))
    dist.broadcast(y, src=0)
    same(y, torch.arange(16, dtype=torch.int32).reshape(4, 4), "non-contiguous broadcast")
    t = torch.ones(3)
    dist.all_reduce(t)  # the group still works after the failed checks
    assert t[0].item() == size
    print(f"rank {rank}: errors ok")
    dist.destroy_process_group()


if __name__ == "__main__":
    {"ops": run_ops, "p2p": run_p2p, "ddp": run_ddp, "hooks": run_hooks, "kill": run_kill,
     "errors": run_errors, "timeout": run_timeout, "late_first": run_late_first}[sys.argv[1]]()
