"""Async ops, futures, array lifetimes, the GIL, groups and failures on real ranks."""
import pytest

from conftest import run_ranks


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_futures_lifetimes_and_groups(world_size):
    proc = run_ranks(world_size, "workers/async_worker.py", "futures_and_lifetimes")
    assert proc.stdout.count(": ok") == world_size


def test_a_killed_rank_makes_the_others_raise():
    # --elastic: the launcher lets the others run on, so that their errors show.
    proc = run_ranks(3, "workers/async_worker.py", "killed_rank", timeout=60,
                     launch_args=("--elastic",))
    raised = proc.stdout.count("raised Dist")
    assert raised == 2, proc.stdout + proc.stderr


def test_a_stalled_rank_times_out_the_others():
    proc = run_ranks(2, "workers/async_worker.py", "stalled_rank", timeout=60)
    assert "timed out" in proc.stdout, proc.stdout + proc.stderr
