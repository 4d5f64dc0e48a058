"""Which part of a channel each rank reads: ShardedByS3Key by local rank, FullyReplicated by global rank.

channel_sharding's rules, then mnist's DataPlan for every rank of a 2-host x 2-rank layout (run in-process:
the plan is built before MPI), then 2 real ranks under mpirun reading a ShardedByS3Key channel."""

import json
import re

import channel_sharding as cs
import pytest
import sm_common as smc
from entrypoint_helpers import channels_env, run_mnist

HOSTS, PER_HOST = 2, 2
LAYOUT = [smc.DistEnv(rank=h * PER_HOST + local, size=HOSTS * PER_HOST, local_rank=local, local_size=PER_HOST)
          for h in range(HOSTS) for local in range(PER_HOST)]


def config(train="FullyReplicated", test="FullyReplicated"):
    return {"train": {"TrainingInputMode": "File", "S3DistributionType": train, "RecordWrapperType": "None"},
            "test": {"TrainingInputMode": "File", "S3DistributionType": test, "RecordWrapperType": "None"}}


def test_distribution_defaults_to_fully_replicated():
    assert cs.s3_distribution({}, "train") == cs.FULLY_REPLICATED
    assert cs.s3_distribution({"train": {"TrainingInputMode": "File"}}, "train") == cs.FULLY_REPLICATED
    assert cs.s3_distribution(config(train="ShardedByS3Key"), "train") == cs.SHARDED_BY_S3_KEY


def test_unknown_distribution_names_channel_and_value():
    with pytest.raises(smc.EntrypointError, match=r"channel 'train' has S3DistributionType 'Sharded'"):
        cs.s3_distribution(config(train="Sharded"), "train")


def test_sharded_channel_splits_by_local_rank_replicated_by_global_rank():
    sharded = [cs.shard_for(config(train="ShardedByS3Key"), "train", env) for env in LAYOUT]
    assert [(s.index, s.count) for s in sharded] == [(0, 2), (1, 2), (0, 2), (1, 2)]
    assert all(s.per_host for s in sharded)
    assert "ShardedByS3Key" in sharded[0].describe() and "local rank" in sharded[0].describe()
    replicated = [cs.shard_for(config(), "train", env) for env in LAYOUT]
    assert [(s.index, s.count) for s in replicated] == [(0, 4), (1, 4), (2, 4), (3, 4)]
    assert "FullyReplicated" in replicated[3].describe() and "global rank" in replicated[3].describe()


# ---------------------------------------------------------------------------------------------
# mnist's data plan, per rank


@pytest.fixture
def mnist_module(needs_horovod):
    import mnist

    return mnist


def plans(mnist, data_dir, monkeypatch, tmp_path, train, test):
    """{rank: DataPlan} for every rank of LAYOUT, each host's channels holding the same files (what each
    rank reads of them is what matters)."""
    monkeypatch.setenv("SM_INPUT_DIR", str(tmp_path / "input"))
    monkeypatch.setenv("SM_INPUT_DATA_CONFIG", json.dumps(config(train, test)))
    for key, value in channels_env(data_dir).items():
        monkeypatch.setenv(key, value)
    args = mnist.build_parser().parse_args([])
    return {env.rank: mnist.DataPlan(args, env) for env in LAYOUT}


def loaded(mnist, data_dir, role):
    images, labels, _ = mnist.load_channel(str(data_dir / role), role, role)
    return mnist.to_dataset(images, labels, "all")


def rows(dataset):
    return {bytes(image.tobytes()) + bytes(label.tobytes())
            for image, label in zip(dataset.images, dataset.labels)}


def test_sharded_ranks_of_a_host_read_disjoint_halves_of_its_part(mnist_module, tiny_mnist, monkeypatch,
                                                                   tmp_path):
    by_rank = plans(mnist_module, tiny_mnist, monkeypatch, tmp_path, "ShardedByS3Key", "ShardedByS3Key")
    for role, attr in (("train", "train"), ("test", "test")):
        whole = loaded(mnist_module, tiny_mnist, role)
        for host in range(HOSTS):
            first, second = (getattr(by_rank[host * PER_HOST + local], attr) for local in range(PER_HOST))
            assert rows(first).isdisjoint(rows(second))
            assert len(first) + len(second) == len(whole)
            assert rows(first) | rows(second) == rows(whole)  # the host's whole part, each sample once
    assert any("channel 'train' is ShardedByS3Key" in line for line in by_rank[0].sharding)
    assert any("channel 'test' is ShardedByS3Key" in line for line in by_rank[0].sharding)


def test_replicated_ranks_read_global_rank_shards(mnist_module, tiny_mnist, monkeypatch, tmp_path):
    np = pytest.importorskip("numpy")
    by_rank = plans(mnist_module, tiny_mnist, monkeypatch, tmp_path, "FullyReplicated", "FullyReplicated")
    whole = loaded(mnist_module, tiny_mnist, "train")
    size = HOSTS * PER_HOST
    for rank, plan in by_rank.items():
        np.testing.assert_array_equal(plan.train.labels, whole.labels[rank::size])
        np.testing.assert_array_equal(plan.train.images, whole.images[rank::size])
    assert sum(len(plan.train) for plan in by_rank.values()) == len(whole)
    assert any("channel 'train' is FullyReplicated" in line for line in by_rank[0].sharding)


def test_sharded_channel_smaller_than_the_hosts_ranks_fails(mnist_module, tmp_path, monkeypatch):
    from entrypoint_helpers import make_mnist

    data = make_mnist(tmp_path / "one", 1, 1)
    with pytest.raises(smc.EntrypointError, match=r"channel 'train' has 1 samples on this host, fewer than its 2"):
        plans(mnist_module, data, monkeypatch, tmp_path, "ShardedByS3Key", "FullyReplicated")


@pytest.mark.mpi
@pytest.mark.slow
def test_two_ranks_train_on_all_of_a_sharded_channel(tiny_mnist, tmp_path):
    """Real ranks under mpirun: each epoch trains on every sample of the host's part once, the sharded
    test channel is scored whole, and rank 0 says which split it used."""
    env = dict(channels_env(tiny_mnist), SM_INPUT_DATA_CONFIG=json.dumps(config("ShardedByS3Key", "ShardedByS3Key")))
    job = run_mnist(tmp_path, ["--epochs", "1", "--batch-size", "50", "--log-interval", "0"], env=env, ranks=2,
                    timeout=110)
    assert job.returncode == 0, job.explain()
    assert re.search(r"channel 'train' is ShardedByS3Key: .*local rank \(2 per host", job.stdout), job.stdout
    epoch = re.search(r"^epoch=1 .*val_samples=(\d+) train_samples=(\d+)", job.stdout, re.M)
    assert epoch and (int(epoch.group(1)), int(epoch.group(2))) == (200, 600), job.stdout
