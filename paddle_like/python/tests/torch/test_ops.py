"""Every op of the paddle_like torch backend against torch's gloo and a local oracle: every
dtype and reduce op, sizes 0/1/7/1031, on 1-4 real ranks (worker.py ops)."""
import pytest


@pytest.mark.parametrize("nproc", [1, 2, 3, 4])
def test_every_op_matches_gloo(ranks, nproc):
    out = ranks(nproc, "ops", env={"PYTHONWARNINGS": "ignore"}).stdout
    assert out.count("ops ok") == nproc, out[-3000:]


@pytest.mark.parametrize("nproc", [4])
def test_point_to_point_subgroups_and_monitored_barrier(ranks, nproc):
    out = ranks(nproc, "p2p", env={"PYTHONWARNINGS": "ignore"}).stdout
    assert out.count("p2p ok") == nproc, out[-3000:]


@pytest.mark.parametrize("nproc", [2])
def test_unsupported_raises_runtime_error(ranks, nproc):
    out = ranks(nproc, "errors", env={"PYTHONWARNINGS": "ignore"}).stdout
    assert out.count("errors ok") == nproc, out[-3000:]
