"""Runs on every rank (under tools/launch): every collective of paddle_like.distributed on
every dtype and reduce op, each result compared with a reference computed here in numpy
from what every rank's inputs are known to be. A mismatch raises, failing the job."""
import sys

import numpy as np

import paddle_like.distributed as dist

DTYPES = [np.float32, np.float64, np.float16, np.int32, np.int64, np.int8, np.uint8,
          np.complex64]
FLOATS = (np.float32, np.float64, np.float16)


def inp(rank, n, dtype, salt=0):
    """Rank r's input: small positive values, exact in every dtype and under every op."""
    vals = (np.arange(n) * 3 + rank * 5 + salt) % 3 + 1
    if dtype is np.complex64:
        return (vals + 1j * (vals + rank)).astype(dtype)
    return vals.astype(dtype)


def reduce_ref(xs, op):
    R = dist.ReduceOp
    if op == R.SUM:
        out = xs[0].copy()
        for x in xs[1:]:
            out = out + x
        return out
    if op == R.AVG:
        out = np.sum(np.stack(xs), axis=0)
        return (out / len(xs)).astype(xs[0].dtype) if np.issubdtype(
            xs[0].dtype, np.inexact) else out // len(xs)
    if op == R.PRODUCT:
        return np.prod(np.stack(xs), axis=0).astype(xs[0].dtype)
    if op == R.MIN:
        return np.min(np.stack(xs), axis=0)
    if op == R.MAX:
        return np.max(np.stack(xs), axis=0)
    fn = {R.BAND: np.bitwise_and, R.BOR: np.bitwise_or, R.BXOR: np.bitwise_xor}[op]
    out = xs[0].copy()
    for x in xs[1:]:
        out = fn(out, x)
    return out


def ops_for(dtype):
    R = dist.ReduceOp
    if dtype is np.complex64:
        return [R.SUM, R.AVG]
    ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
    if dtype in FLOATS:
        ops.append(R.AVG)
    else:
        ops += [R.BAND, R.BOR, R.BXOR]
    return ops


def check(got, want, what):
    if got.dtype == np.float16 or want.dtype == np.float16:
        ok = np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-3)
    else:
        ok = np.array_equal(got, want)
    if not ok:
        raise AssertionError(f"rank {dist.get_rank()}: {what}: got {got!r}, want {want!r}")


def main():
    dist.init_process_group("gloo")
    me, n = dist.get_rank(), dist.get_world_size()
    N = 7  # odd, and not a multiple of the world size
    for dtype in DTYPES:
        xs = [inp(r, N, dtype) for r in range(n)]
        for op in ops_for(dtype):
            if op == dist.ReduceOp.AVG and not (dtype in FLOATS or dtype is np.complex64):
                continue
            t = xs[me].copy()
            dist.all_reduce(t, op=op)
            check(t, reduce_ref(xs, op), f"all_reduce {dtype.__name__} op {op}")
            t = xs[me].copy()
            w = dist.all_reduce(t, op=op, async_op=True)
            assert w.wait() is True
            check(t, reduce_ref(xs, op), f"async all_reduce {dtype.__name__} op {op}")
            for root in range(n):
                t = xs[me].copy()
                dist.reduce(t, dst=root, op=op)
                if me == root:
                    check(t, reduce_ref(xs, op), f"reduce {dtype.__name__} op {op} root {root}")
            # reduce_scatter: rank r's input is n blocks; block k reduced lands on rank k.
            blocks = [[inp(r, N, dtype, salt=k) for k in range(n)] for r in range(n)]
            out = np.zeros(N, dtype)
            dist.reduce_scatter(out, [b.copy() for b in blocks[me]], op=op)
            check(out, reduce_ref([blocks[r][me] for r in range(n)], op),
                  f"reduce_scatter {dtype.__name__} op {op}")
            out = np.zeros(N, dtype)
            dist.reduce_scatter_tensor(out, np.concatenate(blocks[me]), op=op)
            check(out, reduce_ref([blocks[r][me] for r in range(n)], op),
                  f"reduce_scatter_tensor {dtype.__name__} op {op}")
        # Data movement.
        for root in range(n):
            t = xs[me].copy()
            dist.broadcast(t, src=root)
            check(t, xs[root], f"broadcast {dtype.__name__} src {root}")
            t = xs[me].copy()
            dist.broadcast(t, group_src=root)
            check(t, xs[root], f"broadcast group_src {root}")
            gl = [np.zeros(N, dtype) for _ in range(n)] if me == root else None
            dist.gather(xs[me].copy(), gl, dst=root)
            if me == root:
                for r in range(n):
                    check(gl[r], xs[r], f"gather {dtype.__name__} from {r}")
            out = np.zeros(N, dtype)
            dist.scatter(out, [inp(r, N, dtype, 9) for r in range(n)] if me == root else None,
                         src=root)
            check(out, inp(me, N, dtype, 9), f"scatter {dtype.__name__} root {root}")
        outs = [np.zeros(N, dtype) for _ in range(n)]
        w = dist.all_gather(outs, xs[me].copy(), async_op=True)
        w.wait()
        for r in range(n):
            check(outs[r], xs[r], f"all_gather {dtype.__name__} [{r}]")
        flat = np.zeros(n * N, dtype)
        dist.all_gather_into_tensor(flat, xs[me].copy())
        check(flat, np.concatenate(xs), f"all_gather_into_tensor {dtype.__name__}")
        # all_to_all: rank r sends block k (salt r*10+k) to rank k.
        ins = [inp(me, N, dtype, me * 10 + k) for k in range(n)]
        outs = [np.zeros(N, dtype) for _ in range(n)]
        dist.all_to_all(outs, ins)
        for r in range(n):
            check(outs[r], inp(r, N, dtype, r * 10 + me), f"all_to_all {dtype.__name__} {r}")
        out = np.zeros(n * N, dtype)
        dist.all_to_all_single(out, np.concatenate(ins))
        check(out, np.concatenate([inp(r, N, dtype, r * 10 + me) for r in range(n)]),
              f"all_to_all_single {dtype.__name__}")
        # Unequal splits: rank r sends k+1 elements to rank k.
        send = np.concatenate([inp(me, k + 1, dtype, k) for k in range(n)])
        recv = np.zeros(n * (me + 1), dtype)
        dist.all_to_all_single(recv, send, output_split_sizes=[me + 1] * n,
                               input_split_sizes=[k + 1 for k in range(n)])
        check(recv, np.concatenate([inp(r, me + 1, dtype, me) for r in range(n)]),
              f"all_to_all_single splits {dtype.__name__}")
    # Coalesced forms (float32 and int64 mixed).
    a = [inp(r, 5, np.float32) for r in range(n)]
    b = [inp(r, 3, np.int64, 1) for r in range(n)]
    ta, tb = a[me].copy(), b[me].copy()
    dist.all_reduce_coalesced([ta, tb])
    check(ta, reduce_ref(a, 0), "all_reduce_coalesced a")
    check(tb, reduce_ref(b, 0), "all_reduce_coalesced b")
    outs = [[np.zeros(5, np.float32) for _ in range(n)], [np.zeros(3, np.int64) for _ in range(n)]]
    keep = [o for lst in outs for o in lst]
    w = dist.all_gather_coalesced(outs, [a[me].copy(), b[me].copy()], async_op=True)
    w.wait()
    assert all(x is y for x, y in zip(keep, [o for lst in outs for o in lst])), "replaced"
    for r in range(n):
        check(outs[0][r], a[r], "all_gather_coalesced a")
        check(outs[1][r], b[r], "all_gather_coalesced b")
    oa, ob = np.zeros(5 * n, np.float32), np.zeros(3 * n, np.int64)
    dist.all_gather_single_coalesced([oa, ob], [a[me].copy(), b[me].copy()])
    check(oa, np.concatenate(a), "all_gather_single_coalesced")
    check(ob, np.concatenate(b), "all_gather_single_coalesced")
    ins = [inp(me, 4 * n, np.float64, 3), inp(me, 2 * n, np.int32, 4)]
    outs = [np.zeros(4, np.float64), np.zeros(2, np.int32)]
    dist.reduce_scatter_single_coalesced(outs, ins)
    for i, (size, dt, salt) in enumerate([(4, np.float64, 3), (2, np.int32, 4)]):
        full = reduce_ref([inp(r, size * n, dt, salt) for r in range(n)], 0)
        check(outs[i], full[me * size:(me + 1) * size], "reduce_scatter_single_coalesced")
    lists = [[inp(me, 4, np.float32, k) for k in range(n)]]
    outs = [np.zeros(4, np.float32)]
    dist.reduce_scatter_coalesced(outs, lists)
    check(outs[0], reduce_ref([inp(r, 4, np.float32, me) for r in range(n)], 0),
          "reduce_scatter_coalesced")
    # gather_single into one tensor.
    g = np.zeros(n * N, np.float32) if me == 0 else None
    dist.gather_single(inp(me, N, np.float32), g, dst=0)
    if me == 0:
        check(g, np.concatenate([inp(r, N, np.float32) for r in range(n)]), "gather_single")
    # Point to point: a ring, sync and async, with group ranks.
    if n > 1:
        right, left = (me + 1) % n, (me - 1) % n
        got = np.zeros(N, np.float64)
        ops = [dist.P2POp(dist.isend, inp(me, N, np.float64), right),
               dist.P2POp(dist.irecv, got, group_peer=left)]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        check(got, inp(left, N, np.float64), "batch_isend_irecv ring")
        if me == 0:
            for src in range(1, n):
                buf = np.zeros(3, np.int64)
                sender = dist.recv(buf)  # any source
                check(buf, np.full(3, sender, np.int64), "recv any source")
        else:
            dist.send(np.full(3, me, np.int64), dst=0)
        dist.barrier()  # the any-source receives must not meet the messages below
        w = dist.isend(np.full(2, me, np.int32), group_dst=right)
        buf = np.zeros(2, np.int32)
        assert dist.recv(buf, src=left) == left
        w.wait()
        check(buf, np.full(2, left, np.int32), "isend/recv")
    # Object collectives with nested objects.
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": me, "nested": [me, (me, "x" * me)], "set": {me}})
    for r in range(n):
        assert objs[r] == {"rank": r, "nested": [r, (r, "x" * r)], "set": {r}}, objs
    lst = [{"a": [1, 2, {"b": 3}]}, "two", 3.5] if me == n - 1 else [None, None, None]
    dist.broadcast_object_list(lst, src=n - 1)
    assert lst == [{"a": [1, 2, {"b": 3}]}, "two", 3.5], lst
    gl = [None] * n if me == 0 else None
    dist.gather_object(("obj", me, list(range(me))), gl, dst=0)
    if me == 0:
        assert gl == [("obj", r, list(range(r))) for r in range(n)], gl
    out = [None]
    dist.scatter_object_list(out, [{"to": r, "data": "y" * (r + 3)} for r in range(n)]
                             if me == 0 else None, src=0)
    assert out[0] == {"to": me, "data": "y" * (me + 3)}, out
    if n > 1:
        if me == 0:
            dist.send_object_list([{"k": [1, 2]}, "s"], dst=1)
        elif me == 1:
            got = [None, None]
            assert dist.recv_object_list(got, src=0) == 0
            assert got == [{"k": [1, 2]}, "s"], got
    # Barriers.
    dist.barrier()
    dist.barrier(async_op=True).wait()
    dist.monitored_barrier(wait_all_ranks=True)
    dist.destroy_process_group()
    print(f"rank {me}: all collectives match the reference", flush=True)


if __name__ == "__main__":
    sys.exit(main())
