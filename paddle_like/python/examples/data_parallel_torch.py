"""Data-parallel training with torch tensors and paddle_like.distributed.

Each rank trains the same small MLP on its shard of every global batch; after backward the
gradients are all-reduced (averaged) by paddle_like in one flat bucket, in place in the
tensor torch's optimizer reads. In float64 the ranks end with exactly the weights of one
process trained on the whole batches: rank 0 trains that reference itself and compares.

    build/tools/launch/launch --nproc_per_node 4 -- \\
        /usr/bin/python3 paddle_like/python/examples/data_parallel_torch.py

(PYTHONPATH=build/python, or install the package.) Options: --steps, --batch, --dtype.
"""
import argparse
import time

import torch

import paddle_like.distributed as dist


def make_model(seed: int, dtype) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 10)).to(dtype)


def batches(steps: int, batch: int, dtype):
    g = torch.Generator().manual_seed(1234)
    for _ in range(steps):
        x = torch.randn(batch, 32, generator=g, dtype=dtype)
        y = torch.randint(0, 10, (batch,), generator=g)
        yield x, y


def train(model, data, shard=None, grad_sync=None):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    for x, y in data:
        if shard is not None:
            rank, world = shard
            x, y = x.chunk(world)[rank], y.chunk(world)[rank]
        opt.zero_grad(set_to_none=False)  # keeps .grad views (FlatGradients)
        loss = loss_fn(model(x), y)
        loss.backward()
        if grad_sync is not None:
            grad_sync(model)
        opt.step()
    return loss.item()


class FlatGradients:
    """One flat gradient buffer; each parameter's .grad is a view into it, so a single
    all-reduce covers every gradient and nothing is copied."""

    def __init__(self, model):
        params = list(model.parameters())
        total = sum(p.numel() for p in params)
        self.flat = torch.zeros(total, dtype=params[0].dtype)
        offset = 0
        for p in params:
            p.grad = self.flat[offset:offset + p.numel()].view_as(p)
            offset += p.numel()

    def __call__(self, model):
        work = dist.all_reduce(self.flat, op=dist.ReduceOp.AVG, async_op=True)
        work.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64, help="global batch (all ranks)")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    torch.set_num_threads(1)

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        raise SystemExit(f"--batch {args.batch} must be a multiple of the world size {world}")
    model = make_model(0, dtype)
    sync = FlatGradients(model)
    start = time.perf_counter()
    loss = train(model, batches(args.steps, args.batch, dtype), (rank, world), sync)
    took = time.perf_counter() - start
    mine = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    ranks_weights = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(ranks_weights, mine)
    if rank == 0:
        ref = make_model(0, dtype)
        train(ref, batches(args.steps, args.batch, dtype))
        ref_w = torch.cat([p.detach().reshape(-1) for p in ref.parameters()])
        across = max((w - mine).abs().max().item() for w in ranks_weights)
        vs_one = (mine - ref_w).abs().max().item()
        print(f"{world} ranks, {args.steps} steps of {args.batch} ({args.dtype}): loss "
              f"{loss:.4f}, {args.steps * args.batch / took:.0f} samples/s")
        print(f"max |dw| across ranks = {across:.3g}, vs one process = {vs_one:.3g}")
        tol = 1e-10 if dtype == torch.float64 else 1e-4
        if across != 0 or vs_one > tol:
            raise SystemExit(f"data-parallel weights differ from one process (> {tol})")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
