"""DistributedDataParallel on the paddle_like backend: 20 steps in float64 end with the
parameters of DDP on torch's gloo and of one process on the whole batches (1e-10); also
find_unused_parameters, no_sync, the fp16 compression hook and PowerSGD (whose future
callbacks issue and wait for more all-reduces) (worker.py ddp / hooks)."""
import pytest


@pytest.mark.parametrize("nproc", [1, 2, 3, 4])
def test_ddp_matches_gloo_and_one_process(ranks, nproc):
    out = ranks(nproc, "ddp", env={"PYTHONWARNINGS": "ignore"}).stdout
    assert out.count("ddp ok") == nproc, out[-3000:]


@pytest.mark.parametrize("nproc", [3])
def test_ddp_unused_parameters_no_sync_fp16_hook(ranks, nproc):
    out = ranks(nproc, "hooks", env={"PYTHONWARNINGS": "ignore"}).stdout
    assert out.count("hooks ok") == nproc, out[-3000:]
