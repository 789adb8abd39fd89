"""A rank killed by SIGKILL makes the others raise torch's RuntimeError within seconds
instead of hanging (worker.py kill, under launch --elastic so that the survivors go on)."""
import time

import pytest


@pytest.mark.parametrize("nproc", [2, 3])
def test_killed_rank_raises_runtime_error(ranks, nproc):
    start = time.time()
    proc = ranks(nproc, "kill", launch_args=("--elastic",), timeout=60,
                 env={"PYTHONWARNINGS": "ignore"})
    out = proc.stdout
    assert out.count("raised RuntimeError") == nproc - 1, out[-3000:]
    assert "no error after the peer died" not in out
    assert time.time() - start < 40


def test_registers_and_imports(backend):
    import torch.distributed as dist
    import paddle_like.torch_backend as tb
    assert "PADDLE_LIKE" in dist.Backend._plugins
    assert dist.Backend("paddle_like") == "paddle_like"
    assert "gloo" in tb.engine_backends()
