"""mnist_data: what each rank of a 2-host x 2-rank layout reads of its channels (in-process: the plan is
built before MPI), and the Pipe-mode FIFO reader."""

import json

import pytest
from mxnet_programs import mnist_data
from mxnet_programs.process import ProgramError

from programs.helpers import HOSTS, LAYOUT, PER_HOST, channels_env, input_config, make_mnist

np = pytest.importorskip("numpy", reason="needs numpy: run inside the image (make image-tests)")


def plans(data_dir, monkeypatch, tmp_path, train, test):
    """{rank: DataPlan} for every rank of LAYOUT, each host's channels holding the same files (what each
    rank reads of them is what matters)."""
    monkeypatch.setenv("SM_INPUT_DIR", str(tmp_path / "input"))
    monkeypatch.setenv("SM_INPUT_DATA_CONFIG", json.dumps(input_config(train, test)))
    for key, value in channels_env(data_dir).items():
        monkeypatch.setenv(key, value)
    return {env.rank: mnist_data.DataPlan("mnist", None, None, env) for env in LAYOUT}


def loaded(data_dir, role):
    images, labels, _ = mnist_data.load_channel("mnist", str(data_dir / role), role, role)
    return mnist_data.to_dataset(images, labels, "all")


def rows(dataset):
    return {bytes(image.tobytes()) + bytes(label.tobytes())
            for image, label in zip(dataset.images, dataset.labels)}


def test_sharded_ranks_of_a_host_read_disjoint_halves_of_its_part(tiny_mnist, monkeypatch,
                                                                   tmp_path):
    by_rank = plans(tiny_mnist, monkeypatch, tmp_path, "ShardedByS3Key", "ShardedByS3Key")
    for role, attr in (("train", "train"), ("test", "test")):
        whole = loaded(tiny_mnist, role)
        for host in range(HOSTS):
            first, second = (getattr(by_rank[host * PER_HOST + local], attr) for local in range(PER_HOST))
            assert rows(first).isdisjoint(rows(second))
            assert len(first) + len(second) == len(whole)
            assert rows(first) | rows(second) == rows(whole)  # the host's whole part, each sample once
    assert any("channel 'train' is ShardedByS3Key" in line for line in by_rank[0].sharding)
    assert any("channel 'test' is ShardedByS3Key" in line for line in by_rank[0].sharding)


def test_replicated_ranks_read_global_rank_shards(tiny_mnist, monkeypatch, tmp_path):
    np = pytest.importorskip("numpy")
    by_rank = plans(tiny_mnist, monkeypatch, tmp_path, "FullyReplicated", "FullyReplicated")
    whole = loaded(tiny_mnist, "train")
    size = HOSTS * PER_HOST
    for rank, plan in by_rank.items():
        np.testing.assert_array_equal(plan.train.labels, whole.labels[rank::size])
        np.testing.assert_array_equal(plan.train.images, whole.images[rank::size])
    assert sum(len(plan.train) for plan in by_rank.values()) == len(whole)
    assert any("channel 'train' is FullyReplicated" in line for line in by_rank[0].sharding)


def test_sharded_channel_smaller_than_the_hosts_ranks_fails(tmp_path, monkeypatch):
    data = make_mnist(tmp_path / "one", 1, 1)
    with pytest.raises(ProgramError, match=r"channel 'train' has 1 samples on this host, fewer than its 2"):
        plans(data, monkeypatch, tmp_path, "ShardedByS3Key", "FullyReplicated")


def test_pipe_wait_ends_at_sigterm_or_its_deadline(tmp_path, monkeypatch):
    from mxnet_programs.process import Stopped, StopRequest

    monkeypatch.setenv("SM_INPUT_DIR", str(tmp_path))
    stop = StopRequest()
    stop.set()
    with pytest.raises(Stopped, match=f"while waiting for {tmp_path}/data/train_0_3"):
        mnist_data.read_pipe("train_0", 3, stop)
    with pytest.raises(ProgramError, match=r"FIFO .*train_0_0 did not appear within 0.3 s"):
        mnist_data.read_pipe("train_0", 0, StopRequest(), deadline_seconds=0.3)
