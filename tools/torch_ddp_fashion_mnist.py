#!/usr/bin/python3
"""The main job's model in PyTorch DistributedDataParallel on torch's gloo (the reference of
tools/main_job_vs_torch.sh).

Same as tools/train_fashion_mnist: an MLP 784-256-128-10 (ReLU), Adam lr 1e-3, the global
batch split into contiguous per-rank shards, the same sample order (EpochOrder's
mt19937_64 Fisher-Yates) and the same initial weights (MakeParameter's Xavier-uniform
draws), float32. The clock runs from the first step to the end of the last epoch's test
pass, as the main job's last line. Ranks are processes of their own (this script starts
them), each with one BLAS thread and torch.set_num_threads(1).

usage: /usr/bin/python3 tools/torch_ddp_fashion_mnist.py --nproc N [--batch_size B]
           [--epochs E] [--data_dir DIR] [--port P]
Prints (rank 0) "torch_ddp: N ranks ... samples/s" and the BLAS library the process mapped.
"""

import argparse
import gzip
import os
import socket
import struct
import subprocess
import sys
import time

# Before torch loads OpenBLAS: one thread per rank (ranks are processes).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

MEAN, STD = 0.2860, 0.3530
MASK64 = (1 << 64) - 1


class MT19937_64:
    """std::mt19937_64 (the C++ side's generator), for the same sample order and weights."""

    def __init__(self, seed):
        self.mt = [0] * 312
        self.mt[0] = seed & MASK64
        for i in range(1, 312):
            prev = self.mt[i - 1]
            self.mt[i] = (6364136223846793005 * (prev ^ (prev >> 62)) + i) & MASK64
        self.index = 312

    def _twist(self):
        mt = self.mt
        for i in range(312):
            x = (mt[i] & 0xFFFFFFFF80000000) | (mt[(i + 1) % 312] & 0x7FFFFFFF)
            xa = x >> 1
            if x & 1:
                xa ^= 0xB5026F5AA96619E9
            mt[i] = mt[(i + 156) % 312] ^ xa
        self.index = 0

    def __call__(self):
        if self.index >= 312:
            self._twist()
        y = self.mt[self.index]
        self.index += 1
        y ^= (y >> 29) & 0x5555555555555555
        y ^= (y << 17) & 0x71D67FFFEDA60000
        y ^= (y << 37) & 0xFFF7EEE000000000
        y ^= y >> 43
        return y & MASK64


def epoch_order(n, seed, epoch):
    order = list(range(n))
    gen = MT19937_64((seed * 1000003 + epoch) & MASK64)
    for i in range(n - 1, 0, -1):
        j = gen() % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def xavier(torch, fan_in, fan_out, seed):
    """MakeParameter's uniform draws, as a torch Linear weight ([out, in])."""
    gen = MT19937_64(seed)
    limit = (6.0 / (fan_in + fan_out)) ** 0.5
    vals = [(2.0 * ((gen() >> 11) * (1.0 / 9007199254740992.0)) - 1.0) * limit
            for _ in range(fan_in * fan_out)]
    return torch.tensor(vals, dtype=torch.float64).reshape(fan_in, fan_out).t().float()


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack(">I", data[:4])[0]
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return dims, data[4 + 4 * ndim:]


def load(torch, data_dir, split):
    dims, pixels = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))
    _, labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))
    x = torch.frombuffer(bytearray(pixels), dtype=torch.uint8).reshape(dims[0], -1)
    x = ((x.double() / 255.0 - MEAN) / STD).float()
    y = torch.frombuffer(bytearray(labels), dtype=torch.uint8).long()
    return x, y


def blas_library():
    """The BLAS shared objects this process mapped (what torch's gemm calls into)."""
    libs = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if "blas" in path or "mkl" in path:
                libs.add(os.path.realpath(path))
    return ", ".join(sorted(libs)) or "none mapped"


def worker(args):
    import torch
    import torch.distributed as dist
    from torch import nn

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=world)
    train_x, train_y = load(torch, args.data_dir, "train")
    test_x, test_y = load(torch, args.data_dir, "t10k")

    hidden = 256
    model = nn.Sequential(nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, hidden // 2),
                          nn.ReLU(), nn.Linear(hidden // 2, 10))
    with torch.no_grad():
        for layer, (fan_in, fan_out, seed) in zip(
                (model[0], model[2], model[4]),
                ((784, hidden, args.seed + 1), (hidden, hidden // 2, args.seed + 2),
                 (hidden // 2, 10, args.seed + 3))):
            layer.weight.copy_(xavier(torch, fan_in, fan_out, seed))
            layer.bias.zero_()
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.Adam(ddp.parameters(), lr=args.lr)
    loss_fn = nn.CrossEntropyLoss()

    glob = args.batch_size * world
    steps = train_x.shape[0] // glob
    orders = [torch.tensor(epoch_order(train_x.shape[0], args.seed, e))
              for e in range(args.epochs)]
    dist.barrier()
    start = time.perf_counter()
    accuracy = 0.0
    for epoch in range(args.epochs):
        order = orders[epoch]
        for s in range(steps):
            idx = order[s * glob + rank * args.batch_size:s * glob + (rank + 1) * args.batch_size]
            loss = loss_fn(ddp(train_x[idx]), train_y[idx])
            opt.zero_grad(set_to_none=False)
            loss.backward()
            opt.step()
        # Test accuracy, each rank its slice (as the main job).
        with torch.no_grad():
            n = test_x.shape[0]
            begin, end = n * rank // world, n * (rank + 1) // world
            correct = torch.zeros(1, dtype=torch.int64)
            for at in range(begin, end, 500):
                stop = min(at + 500, end)
                pred = model(test_x[at:stop]).argmax(dim=1)
                correct += (pred == test_y[at:stop]).sum()
            dist.all_reduce(correct)
            accuracy = correct.item() / n
    seconds = time.perf_counter() - start
    if rank == 0:
        print(f"torch_ddp: {world} ranks, global batch {glob} ({args.batch_size} per rank), "
              f"{steps * args.epochs} steps, test accuracy {100 * accuracy:.2f}%, "
              f"{seconds:.1f} s, {steps * args.epochs * glob / seconds:.0f} samples/s")
        print(f"torch_ddp: torch {torch.__version__}, threads {torch.get_num_threads()}, "
              f"BLAS {blas_library()}")
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nproc", type=int, default=1)
    p.add_argument("--batch_size", type=int, default=0, help="per rank (default 128 / nproc)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--port", type=int, default=0, help="rendezvous port (default: a free one)")
    args = p.parse_args()
    if args.batch_size == 0:
        args.batch_size = max(1, 128 // args.nproc)
    if "RANK" in os.environ:
        worker(args)
        return
    # The launcher: one process per rank, this script again with RANK set.
    if args.port == 0:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            args.port = sock.getsockname()[1]
    procs = []
    for rank in range(args.nproc):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(args.nproc),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args.port))
        procs.append(subprocess.Popen([sys.executable] + sys.argv, env=env))
    status = 0
    for proc in procs:
        status = proc.wait() or status
    sys.exit(status)


if __name__ == "__main__":
    main()
