#!/usr/bin/env python3
"""torch.distributed's gloo backend, timed the way comm_bench times ours (the peer baseline).

Spawns `--nproc` processes of its own (nothing of ours runs in them) that all-reduce float32
tensors synchronously, one op at a time, and prints one JSON line per size with the mean,
median and p90 per-op times in microseconds (each rank's figure, averaged over ranks).

  /usr/bin/python3 tools/torch_gloo_bench.py --sizes 8,1K,64M --iters 200 --rounds 5

Needs Debian's python3-torch (`tools/install_deps.sh --bench` installs it).
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time
from bench_common import parse_size, percentile  # tools/bench_common.py


def worker(rank, world, port, sizes, iters, rounds, warmup, out_path):
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    results = []
    for size in sizes:
        n = max(1, size // 4)
        t = torch.zeros(n, dtype=torch.float32)
        it = iters(size)
        for _ in range(warmup):
            dist.all_reduce(t)
        samples = []
        for _ in range(rounds):
            dist.barrier()
            for _ in range(it):
                t0 = time.perf_counter()
                dist.all_reduce(t)
                samples.append((time.perf_counter() - t0) * 1e6)
        mine = torch.tensor([statistics.mean(samples), statistics.median(samples),
                             percentile(samples, 90)], dtype=torch.float64)
        dist.all_reduce(mine)
        mine /= world
        results.append({"engine": "torch_gloo", "size_bytes": n * 4,
                        "time_us": mine[0].item(), "median_us": mine[1].item(),
                        "p90_us": mine[2].item(), "iters": it * rounds})
    if rank == 0:
        with open(out_path, "w") as f:
            for r in results:
                f.write(json.dumps(r) + "\n")
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--sizes", default="8,1K,16K,256K,1M,16M,64M")
    ap.add_argument("--iters", type=int, default=200, help="ops per round up to 1 MiB")
    ap.add_argument("--big_iters", type=int, default=10, help="ops per round above 1 MiB")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    try:
        import torch.multiprocessing as mp
    except ImportError:
        print("torch_gloo_bench: torch is not installed (Debian: python3-torch)", file=sys.stderr)
        return 2
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out_path = f"/tmp/torch_gloo_bench.{os.getpid()}.jsonl"
    iters = lambda size: args.iters if size <= (1 << 20) else args.big_iters  # noqa: E731
    mp.start_processes(worker, args=(args.nproc, port, sizes, iters, args.rounds, args.warmup,
                                     out_path),
                       nprocs=args.nproc, join=True, start_method="fork")
    with open(out_path) as f:
        sys.stdout.write(f.read())
    os.remove(out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
