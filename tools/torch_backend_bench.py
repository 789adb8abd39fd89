#!/usr/bin/python3
"""One rank of tools/torch_backend_bench.sh: torch.distributed on the paddle_like backend or
on torch's gloo, under `launch --no_store` (env://, rank 0 hosts torch's store).

  launch --nproc_per_node N --no_store -- /usr/bin/python3 tools/torch_backend_bench.py \\
      --backend paddle_like|gloo allreduce [--sizes 8,64,...] [--budget_s 0.4]
  ... ddp [--steps 60] [--batch 128]

allreduce: float32 all_reduce (SUM) one op at a time; per size, the median and p90 of the
per-op times (each rank's, then the largest over the ranks) and the process CPU time per op
(every thread, averaged over the ranks). ddp: the Fashion-MNIST MLP
784-256-128-10 under DistributedDataParallel with Adam, global batch --batch split over the
ranks, synthetic inputs; samples/s over --steps steps after warm-up (rank 0's clock, the
slowest rank sets it). Rank 0 prints one JSON line per result.
"""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from bench_common import parse_size, percentile  # noqa: E402 (tools/bench_common.py)

torch.set_num_threads(1)


def bench_allreduce(args, rank, size):
    out = []
    for nbytes in [parse_size(s) for s in args.sizes.split(",")]:
        n = max(1, nbytes // 4)
        t = torch.ones(n, dtype=torch.float32)
        for _ in range(3):
            dist.all_reduce(t)
        # As many ops as fit the budget (decided on rank 0, the same count everywhere).
        t0 = time.perf_counter()
        dist.all_reduce(t)
        one = torch.tensor([time.perf_counter() - t0], dtype=torch.float64)
        dist.broadcast(one, 0)
        iters = int(max(args.min_iters, min(args.max_iters, args.budget_s / max(one.item(), 1e-6))))
        samples = []
        dist.barrier()
        c0 = time.process_time()
        for _ in range(iters):
            t0 = time.perf_counter()
            dist.all_reduce(t)
            samples.append((time.perf_counter() - t0) * 1e6)
        cpu_us = (time.process_time() - c0) / iters * 1e6
        stats = torch.tensor([statistics.median(samples), percentile(samples, 90)],
                             dtype=torch.float64)
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)
        cpu = torch.tensor([cpu_us / size], dtype=torch.float64)
        dist.all_reduce(cpu)
        out.append({"bench": "allreduce", "backend": args.backend, "nproc": size,
                    "size_bytes": n * 4, "median_us": round(stats[0].item(), 2),
                    "p90_us": round(stats[1].item(), 2), "cpu_us": round(cpu.item(), 2),
                    "iters": iters})
    return out


def bench_ddp(args, rank, size):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                              torch.nn.Linear(256, 128), torch.nn.ReLU(),
                              torch.nn.Linear(128, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.Adam(ddp.parameters(), lr=1e-3)
    local = args.batch // size
    g = torch.Generator().manual_seed(rank)
    xs = torch.randn(8, local, 784, generator=g)
    ys = torch.randint(0, 10, (8, local), generator=g)

    def step(i):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(xs[i % 8]), ys[i % 8]).backward()
        opt.step()

    for i in range(args.warmup):
        step(i)
    dist.barrier()
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(args.steps):
        step(i)
    cpu = time.process_time() - c0
    dist.barrier()
    dt = time.perf_counter() - t0
    # CPU time of the whole process (every thread) per step, averaged over the ranks: what a
    # loaded machine's noise does not change much
    cpu_ms = torch.tensor([cpu / args.steps * 1e3], dtype=torch.float64)
    dist.all_reduce(cpu_ms)
    return [{"bench": "ddp", "backend": args.backend, "nproc": size,
             "samples_per_s": round(args.steps * local * size / dt, 1),
             "step_ms": round(dt / args.steps * 1e3, 3),
             "cpu_ms_per_step": round(cpu_ms.item() / size, 3), "steps": args.steps}]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="paddle_like", choices=["paddle_like", "gloo"])
    ap.add_argument("mode", choices=["allreduce", "ddp"])
    ap.add_argument("--sizes", default="8,64,512,4K,32K,256K,2M,16M,64M")
    ap.add_argument("--budget_s", type=float, default=0.4, help="time per size")
    ap.add_argument("--min_iters", type=int, default=8)
    ap.add_argument("--max_iters", type=int, default=400)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--batch", type=int, default=128)
    args = ap.parse_args()
    if args.backend == "paddle_like":
        import paddle_like.torch_backend  # noqa: F401
    dist.init_process_group(args.backend)
    rank, size = dist.get_rank(), dist.get_world_size()
    results = bench_allreduce(args, rank, size) if args.mode == "allreduce" else \
        bench_ddp(args, rank, size)
    if rank == 0:
        for r in results:
            print(json.dumps(r), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
