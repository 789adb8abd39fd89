"""Every collective of paddle_like.distributed against numpy references on 1-4 real ranks
(workers/collectives_worker.py checks the values on each rank)."""
import pytest

from conftest import run_ranks


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_every_collective_matches_the_reference(world_size):
    proc = run_ranks(world_size, "workers/collectives_worker.py", timeout=300)
    assert proc.stdout.count("all collectives match the reference") == world_size
