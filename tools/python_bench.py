#!/usr/bin/env python3
"""paddle_like.distributed's all_reduce from Python, timed as comm_bench and
tools/torch_gloo_bench.py time theirs: sync float32 sum all-reduces in place, one op at a
time, each timed alone; one JSON line per size with the mean, median and p90 per op in
microseconds (each rank's figure, averaged over the ranks). Run it under the launcher:

  build/tools/launch/launch --nproc_per_node 2 -- /usr/bin/python3 tools/python_bench.py \\
      --sizes 8,1M --iters 200 --rounds 5          (PYTHONPATH=build/python)
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np

import paddle_like.distributed as dist
from bench_common import parse_size, percentile  # tools/bench_common.py


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="8,1K,16K,256K,1M")
    ap.add_argument("--iters", type=int, default=200, help="ops per round up to 1 MiB")
    ap.add_argument("--big_iters", type=int, default=10, help="ops per round above 1 MiB")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=20)
    args = ap.parse_args()
    dist.init_process_group("gloo")
    world = dist.get_world_size()
    for size in (parse_size(s) for s in args.sizes.split(",")):
        t = np.zeros(max(1, size // 4), np.float32)
        iters = args.iters if size <= (1 << 20) else args.big_iters
        for _ in range(args.warmup):
            dist.all_reduce(t)
        samples = []
        clock = time.perf_counter
        for _ in range(args.rounds):
            dist.barrier()
            for _ in range(iters):
                t0 = clock()
                dist.all_reduce(t)
                samples.append((clock() - t0) * 1e6)
        mine = np.array([statistics.mean(samples), statistics.median(samples),
                         percentile(samples, 90)], np.float64)
        dist.all_reduce(mine)
        mine /= world
        if dist.get_rank() == 0:
            print(json.dumps({"engine": "paddle_like_python", "size_bytes": t.nbytes,
                              "time_us": mine[0], "median_us": mine[1], "p90_us": mine[2],
                              "iters": iters * args.rounds}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
