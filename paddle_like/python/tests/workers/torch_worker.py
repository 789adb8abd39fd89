"""torch CPU tensors through DLPack, zero-copy, every dtype torch and the runtime share."""
import numpy as np
import torch

import paddle_like.distributed as dist

dist.init_process_group("gloo")
me, n = dist.get_rank(), dist.get_world_size()
want_sum = n * (n + 1) // 2
for dtype in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
              torch.uint8, torch.int32, torch.int64, torch.complex64):
    t = torch.full((5,), me + 1, dtype=dtype)
    ptr = t.data_ptr()
    dist.all_reduce(t)
    assert t.data_ptr() == ptr
    assert torch.equal(t, torch.full((5,), want_sum, dtype=dtype)), (dtype, t)
    out = torch.zeros(n * 2, dtype=dtype)
    dist.all_gather_into_tensor(out, torch.full((2,), me, dtype=dtype))
    assert torch.equal(out, torch.arange(n, dtype=torch.int64).repeat_interleave(2).to(dtype))
# bool: DLPack (torch 1.13) calls it uint8; the dtype hint keeps it a bool (MAX = any).
b = torch.tensor([me == 0, False, True])
dist.all_reduce(b, op=dist.ReduceOp.MAX)
assert b.tolist() == [True, False, True], b
# Outputs written in place through views into a bigger tensor (contiguous slices).
big = torch.zeros(3, 4)
dist.broadcast(big[1], src=0) if me else dist.broadcast(big[1].fill_(7.0), src=0)
assert big[1].tolist() == [7.0] * 4 and big[0].sum() == 0
try:
    dist.all_reduce(torch.zeros(4, 4).t())
    raise AssertionError("a transposed tensor was accepted")
except ValueError as e:
    assert "not contiguous" in str(e)
lst = [torch.zeros(3) for _ in range(n)]
dist.all_gather(lst, torch.full((3,), float(me)))
assert [float(x[0]) for x in lst] == [float(r) for r in range(n)]
# Mixed with numpy in one coalesced call.
a, c = torch.ones(3, dtype=torch.float64), np.ones(2, np.int32)
dist.all_reduce_coalesced([a, c])
assert a.tolist() == [n] * 3 and c.tolist() == [n] * 2
dist.destroy_process_group()
print(f"rank {me}: torch ok", flush=True)
