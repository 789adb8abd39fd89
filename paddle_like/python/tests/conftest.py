"""Shared fixtures: run a Python worker script on N real ranks under tools/launch.

The multi-rank tests are real processes: `launch --nproc_per_node N -- python3 worker.py`
with the launcher's TCPStore, and each worker checks its own results (a failed assertion
exits non-zero, which fails the job and so the test). The paths come from ctest's
environment (PADDLE_LIKE_LAUNCH, PYTHONPATH); run by hand, point them at a build:

    PYTHONPATH=build/python PADDLE_LIKE_LAUNCH=build/tools/launch/launch \\
        /usr/bin/python3 -m pytest paddle_like/python/tests
"""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _launch_binary():
    path = os.environ.get("PADDLE_LIKE_LAUNCH")
    if not path or not os.path.exists(path):
        pytest.skip("PADDLE_LIKE_LAUNCH does not name the built launcher "
                    f"(got {path!r}); ctest sets it")
    return path


def run_ranks(nproc, script, *args, timeout=120, env=None, expect_ok=True,
              launch_args=()):
    """Runs `script args` on `nproc` ranks; returns the CompletedProcess.

    `script` is a path relative to this folder (or absolute). With expect_ok the job
    must exit 0; its output is shown on failure.
    """
    launch = _launch_binary()
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    cmd = [launch, "--nproc_per_node", str(nproc), *launch_args, "--",
           sys.executable, os.path.join(HERE, script), *map(str, args)]
    proc = subprocess.run(cmd, env=full_env, capture_output=True, text=True,
                          timeout=timeout)
    if expect_ok and proc.returncode != 0:
        pytest.fail(f"{' '.join(cmd)} exited {proc.returncode}\n"
                    f"--- stdout\n{proc.stdout[-6000:]}\n--- stderr\n{proc.stderr[-6000:]}")
    return proc


@pytest.fixture
def ranks():
    return run_ranks
