"""The seed's argument checks (its ValueError / TypeError / RuntimeError cases) and the
tensor rules, on a one-rank world (the checks are local: nothing is sent)."""
import datetime as dt

import numpy as np
import pytest

import paddle_like.distributed as dist


@pytest.fixture(scope="module", autouse=True)
def world():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_init_twice_raises():
    with pytest.raises(RuntimeError, match="twice"):
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def test_backend_config_parsing_and_errors():
    assert dist.BackendConfig("gloo").get_device_backend_map() == {"cpu": "gloo"}
    assert repr(dist.BackendConfig("cpu:gloo,cuda:nccl")) == "cpu:gloo,cuda:nccl"
    with pytest.raises(ValueError, match="Duplicate device type 'cpu'"):
        dist.BackendConfig("cpu:gloo,cpu:mpi")
    with pytest.raises(ValueError, match="Unknown backend: 'nope'"):
        dist.BackendConfig("nope")
    with pytest.raises(ValueError, match="pairs"):
        dist.BackendConfig("cpu:")
    assert dist.Backend("GLOO") == "gloo"
    with pytest.raises(ValueError):
        dist.Backend(3)


def test_register_backend_rules():
    with pytest.raises(ValueError, match="single non-empty identifier"):
        dist.Backend.register_backend("a:b", lambda *a: None)
    with pytest.raises(ValueError, match="single non-empty identifier"):
        dist.Backend.register_backend("a,b", lambda *a: None)
    with pytest.raises(TypeError, match="callable"):
        dist.Backend.register_backend("mine", 3)
    dist.Backend.register_backend("mine", lambda *a: None)
    assert dist.Backend.backend_capability["mine"] == ["cpu"]
    assert dist.is_backend_available("mine")
    assert dist.is_backend_available("gloo")
    assert not dist.is_backend_available("nosuch")


def test_rank_arguments():
    t = np.zeros(3, np.float32)
    with pytest.raises(ValueError, match="both a global rank and a group rank"):
        dist.broadcast(t, src=0, group_src=0)
    with pytest.raises(ValueError, match="outside the process group"):
        dist.broadcast(t, group_src=1)
    with pytest.raises(ValueError, match="not part of group"):
        dist.reduce(t, dst=5)
    with pytest.raises(TypeError, match="integer"):
        dist.broadcast(t, src="0")
    with pytest.raises(ValueError, match="Must specify peer or group_peer"):
        dist.P2POp(dist.isend, t)
    with pytest.raises(ValueError, match="both peer and group_peer"):
        dist.P2POp(dist.isend, t, peer=0, group_peer=0)
    with pytest.raises(ValueError, match="Invalid ``op``"):
        dist.P2POp(dist.broadcast, t, 0)
    with pytest.raises(ValueError, match="Invalid ``p2p_op_list``"):
        dist.batch_isend_irecv([1])
    with pytest.raises(ValueError, match="cannot target the current rank"):
        dist.send(t, dst=0)


def test_list_lengths_and_roots():
    t = np.zeros(3, np.float32)
    with pytest.raises(RuntimeError, match="does not match the group world size"):
        dist.all_gather([t, t], t)
    with pytest.raises(RuntimeError, match="gather_list must be specified"):
        dist.gather(t, None, dst=0)
    with pytest.raises(RuntimeError, match="scatter_list must be specified"):
        dist.scatter(t, None, src=0)
    with pytest.raises(ValueError, match="one tensor per process-group rank"):
        dist.scatter(t, [t, t], src=0)
    with pytest.raises(RuntimeError, match="elements"):
        dist.all_gather_into_tensor(np.zeros(5, np.float32), t)
    with pytest.raises(ValueError, match="one slot per"):
        dist.all_gather_object([None, None], 1)


def test_tensor_rules():
    with pytest.raises(ValueError, match="not contiguous"):
        dist.all_reduce(np.zeros(8, np.float32)[::2])
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        dist.all_reduce(ro)
    # A read-only array is fine where the op only reads it.
    out = np.zeros(4, np.float32)
    dist.all_gather_into_tensor(out, ro)
    with pytest.raises(TypeError, match="must be a tensor"):
        dist.all_reduce([1, 2, 3])
    with pytest.raises(TypeError, match="not supported"):
        dist.all_reduce(np.zeros(2, dtype=np.uint16))
    with pytest.raises(RuntimeError, match="does not support complex"):
        dist.all_reduce(np.zeros(2, np.complex64), op=dist.ReduceOp.MAX)
    with pytest.raises(ValueError, match="Invalid reduce op"):
        dist.all_reduce(np.zeros(2, np.float32), op=42)
    with pytest.raises(ValueError):  # the runtime's typed error: dtype mismatch
        dist.all_gather_into_tensor(np.zeros(1, np.float64), np.zeros(1, np.float32))


def test_groups():
    with pytest.raises(ValueError, match="range"):
        dist.new_group([0, 1])
    with pytest.raises(ValueError, match="unique"):
        dist.new_group([0, 0])
    with pytest.raises(ValueError, match="Invalid process group"):
        dist.get_rank(group=12345)
    with pytest.raises(ValueError, match="split_ranks cannot be None or empty"):
        dist.split_group(split_ranks=[])
    with pytest.raises(ValueError, match="valid parent group ranks"):
        dist.split_group(split_ranks=[[1]])
    with pytest.raises(ValueError, match="cannot be empty"):
        dist.shrink_group([])
    with pytest.raises(TypeError, match="must be a list"):
        dist.shrink_group((0,))
    with pytest.raises(ValueError, match="one rank"):
        dist.shrink_group([0])
    with pytest.raises(TypeError, match="timedelta"):
        dist.set_timeout(5)
    dist.set_timeout(dt.timedelta(seconds=60))
    g = dist.new_group([0], group_desc="solo")
    assert g.group_desc == "solo" and dist.get_rank(g) == 0 and dist.get_world_size(g) == 1
    dist.destroy_process_group(g)
    with pytest.raises(RuntimeError, match="destroyed"):
        dist.all_reduce(np.zeros(1, np.float32), group=g)


def test_supports_complex_and_defaults():
    assert dist.supports_complex(dist.ReduceOp.SUM)
    assert not dist.supports_complex(dist.ReduceOp.MAX)
    assert dist.get_default_backend_for_device("cpu") == "gloo"
    with pytest.raises(ValueError, match="Default backend not registered"):
        dist.get_default_backend_for_device("tpu")
    assert dist.AllreduceOptions().reduceOp == dist.ReduceOp.SUM
    assert dist.GroupMember.NON_GROUP_MEMBER == -100


def test_data_parallel_helpers():
    ts = [np.zeros(10, np.float32), np.zeros(10, np.float64), np.zeros(30, np.float32),
          np.zeros(5, np.float32)]
    # Each (dtype, device) key walks the limits on its own: the float64 bucket still has 50.
    buckets, limits = dist._compute_bucket_assignment_by_size(ts, [50, 1000])
    assert buckets == [[0, 2], [1], [3]] and limits == [50, 50, 1000], (buckets, limits)
    params = [np.arange(5, dtype=np.float32), np.arange(3, dtype=np.int64)]
    dist._broadcast_coalesced(dist.group.WORLD, params, 8)
    assert params[0].tolist() == [0, 1, 2, 3, 4]
    assert dist._verify_params_across_processes(dist.group.WORLD, params) is True
    buf = np.arange(6, dtype=np.float32)
    b = dist.GradBucket(0, buf, [0, 2], [2, 4], [(2,), (2, 2)], ["p0", "p1"], 1)
    assert [g.shape for g in b.gradients()] == [(2,), (2, 2)] and b.is_last()


def test_pg_options_reach_the_backend_and_group_desc_is_kept():
    lo = dist.ProcessGroupGlooOptions()
    lo.interface = "lo"
    g = dist.new_group([0], pg_options=lo, group_desc="attention tp")
    assert g.group_desc == "attention tp"
    t = np.ones(4, np.float32)
    dist.all_reduce(t, group=g)
    assert (t == 1).all()
    bad = dist.ProcessGroupGlooOptions()
    bad.interface = "no_such_if0"
    gb = dist.new_group([0], pg_options=bad)
    with pytest.raises(RuntimeError, match="no_such_if0"):
        dist.all_reduce(t, group=gb)
    with pytest.raises(ValueError, match="'nccl'"):
        dist.new_group([0], pg_options=dist.ProcessGroupNCCLOptions())
    with pytest.raises(TypeError, match="pg_options"):
        dist.new_group([0], pg_options={"interface": "lo"})
