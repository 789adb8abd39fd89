#!/usr/bin/python3
"""An unchanged PyTorch DistributedDataParallel program on the paddle_like backend.

Fashion-MNIST (Debian's dataset-fashion-mnist: gzip IDX files), an MLP 784-256-128-10,
Adam, global batch 128 split over the ranks. Rank 0 prints the test accuracy after each
epoch and the training throughput (samples/s). `--backend gloo` runs the same program on
torch's own gloo backend, for comparison.

    build-torch/tools/launch/launch --nproc_per_node 4 --no_store -- \\
        /usr/bin/python3 paddle_like/python/examples/torch_ddp_fashion_mnist.py
    ... torch_ddp_fashion_mnist.py --backend gloo

(PYTHONPATH=build-torch/python; torchrun works the same way: the program reads env://.)
"""
import argparse
import gzip
import os
import struct
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def load(data_dir, split):
    x = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))
    y = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))
    x = (x.reshape(x.shape[0], -1).float() / 255.0 - MEAN) / STD
    return x, y.long()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", default="paddle_like", choices=["paddle_like", "gloo"])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch_size", type=int, default=128, help="global batch")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--data_dir", default="/usr/share/datasets/fashion-mnist")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.backend == "paddle_like":
        import paddle_like.torch_backend  # noqa: F401  registers "paddle_like"
    dist.init_process_group(args.backend)  # env:// (launch --no_store, torchrun)
    rank, world = dist.get_rank(), dist.get_world_size()
    assert args.batch_size % world == 0, "the global batch must split evenly over the ranks"
    local = args.batch_size // world

    train_x, train_y = load(args.data_dir, "train")
    test_x, test_y = load(args.data_dir, "t10k")
    torch.manual_seed(0)  # the same initial weights on every rank (DDP broadcasts rank 0's)
    net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                              torch.nn.Linear(256, 128), torch.nn.ReLU(),
                              torch.nn.Linear(128, 10))
    model = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    steps = train_x.shape[0] // args.batch_size
    seen, train_time = 0, 0.0
    for epoch in range(args.epochs):
        order = torch.randperm(train_x.shape[0], generator=torch.Generator().manual_seed(epoch))
        model.train()
        dist.barrier()
        t0 = time.perf_counter()
        for step in range(steps):
            idx = order[step * args.batch_size + rank * local:
                        step * args.batch_size + (rank + 1) * local]
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(train_x[idx]), train_y[idx])
            loss.backward()  # DDP all-reduces the gradient buckets on the backend
            opt.step()
            if rank == 0 and step % 200 == 0:
                print(f"epoch {epoch} step {step}/{steps} loss {loss.item():.4f}", flush=True)
        dist.barrier()
        train_time += time.perf_counter() - t0
        seen += steps * args.batch_size
        model.eval()
        with torch.no_grad():
            correct = (net(test_x).argmax(1) == test_y).sum().item()
        if rank == 0:
            print(f"epoch {epoch}: test accuracy {correct / test_x.shape[0]:.4f}, "
                  f"{seen / train_time:.0f} samples/s ({args.backend}, {world} ranks)",
                  flush=True)
    if rank == 0:
        print(f"torch_ddp_fashion_mnist: backend {args.backend}, {world} ranks, test accuracy "
              f"{correct / test_x.shape[0]:.4f}, {seen / train_time:.0f} samples/s")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
