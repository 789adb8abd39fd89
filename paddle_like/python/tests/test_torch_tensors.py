"""torch CPU tensors (DLPack) used in place by paddle_like.distributed, on real ranks."""
import pytest

from conftest import run_ranks

torch = pytest.importorskip("torch", reason="python3-torch is not installed")


@pytest.mark.parametrize("world_size", [1, 3])
def test_torch_tensors_zero_copy(world_size):
    proc = run_ranks(world_size, "workers/torch_worker.py", timeout=180)
    assert proc.stdout.count("torch ok") == world_size
