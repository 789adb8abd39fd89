"""Fixtures of the torch backend's tests: skip where torch or the extension is missing, and
run a worker on N real ranks under tools/launch --no_store (torch's env:// has rank 0 host
its own TCPStore on MASTER_PORT).

By hand:
    PYTHONPATH=build-torch/python PADDLE_LIKE_LAUNCH=build-torch/tools/launch/launch \\
        /usr/bin/python3 -m pytest paddle_like/python/tests/torch
"""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _require_backend():
    try:
        import torch  # noqa: F401
        import torch.distributed  # noqa: F401
    except ImportError as e:
        pytest.skip(f"torch is not installed for {sys.executable}: {e}")
    try:
        import paddle_like.torch_backend  # noqa: F401
    except ImportError as e:
        pytest.skip(f"paddle_like.torch_backend does not import (not built here?): {e}")


def run_ranks(nproc, *args, timeout=150, env=None, expect_ok=True, launch_args=()):
    """Runs `worker.py args` on nproc ranks (launch --no_store); returns the process."""
    _require_backend()
    launch = os.environ.get("PADDLE_LIKE_LAUNCH")
    if not launch or not os.path.exists(launch):
        pytest.skip(f"PADDLE_LIKE_LAUNCH does not name the built launcher (got {launch!r})")
    full_env = dict(os.environ)
    full_env.setdefault("OMP_NUM_THREADS", "1")
    full_env.setdefault("FLAGS_gloo_spin_us", "0")  # ranks share 2 cores in CI
    if env:
        full_env.update(env)
    cmd = [launch, "--nproc_per_node", str(nproc), "--no_store", "--grace_s", "2",
           *launch_args, "--", sys.executable, os.path.join(HERE, "worker.py"),
           *map(str, args)]
    proc = subprocess.run(cmd, env=full_env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 and "ddress already in use" in proc.stdout + proc.stderr:
        # rank 0's store lost its port to another process between the launcher's probe and
        # its bind (other suites run beside this one): once more, on another port
        proc = subprocess.run(cmd, env=full_env, capture_output=True, text=True,
                              timeout=timeout)
    if expect_ok and proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {proc.returncode}\n"
                    f"--- stdout\n{proc.stdout[-8000:]}\n--- stderr\n{proc.stderr[-8000:]}")
    return proc


@pytest.fixture
def ranks():
    return run_ranks


@pytest.fixture
def backend():
    _require_backend()
