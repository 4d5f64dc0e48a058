"""mnist.py as 2 Horovod ranks under mpirun on one host (skipped when horovod/mpirun are missing)."""

import json
import os
import re
import signal

import pytest
from sagemaker_mxnet_data import synth_data

from programs.helpers import (
    PipeFeeder,
    channels_env,
    first_step_differences,
    input_config,
    make_mnist,
    mxnet_blocked_env,
    rank_pids,
    recorded_run,
    run_mnist,
    start_mnist,
)

pytestmark = [pytest.mark.mpi, pytest.mark.usefixtures("needs_horovod")]
# A first step's change of any weight, one layout against the other: float32 sums in another order (measured: below
# 1e-5); a step twice too long or short (lr, averaging, rescaling) is 0.5 or 1, another image in it far more.
SAME_STEP = 1e-3

EPOCH_LINE = re.compile(
    r"^epoch=(\d+) train_loss=\S+ train_accuracy=\S+ val_accuracy=(\S+) .*val_samples=(\d+)", re.MULTILINE)


@pytest.mark.slow
def test_two_ranks_reach_95_percent_on_synthetic_mnist(small_mnist, tmp_path):
    job = run_mnist(tmp_path, ["--epochs", "3", "--batch-size", "64", "--log-interval", "0"],
                    env=channels_env(small_mnist), ranks=2, timeout=110)
    assert job.returncode == 0, job.explain()
    assert "world_size=2" in job.stdout and "lr=0.02 " in job.stdout  # 0.01 x 2 ranks
    epochs = EPOCH_LINE.findall(job.stdout)
    assert [int(e) for e, _, _ in epochs] == [1, 2, 3]  # rank 0 logs, once per epoch
    assert all(int(n) == 1000 for _, _, n in epochs)  # validation covers the whole test set
    metrics = json.loads((job.model_dir / "metrics.json").read_text())
    assert metrics["world_size"] == 2
    assert metrics["val_accuracy"] >= 0.95, job.stdout
    assert float(epochs[-1][1]) == pytest.approx(metrics["val_accuracy"], abs=1e-4)
    print(f"2 ranks: val_accuracy={metrics['val_accuracy']:.4f} in {job.seconds:.1f} s, "
          f"{metrics['samples_per_sec']:.0f} samples/s")


@pytest.mark.slow
def test_sigterm_to_one_rank_stops_all_with_a_checkpoint_then_resume(small_mnist, tmp_path):
    """SIGTERM reaching only rank 1 must still stop both ranks at the same step, checkpointed by rank 0."""
    args = ["--epochs", "2", "--batch-size", "32", "--log-interval", "10", "--tensorboard", "false"]
    job = start_mnist(tmp_path, args, env=channels_env(small_mnist), ranks=2)
    try:
        job.wait_for(r"epoch=1 batch=20/", timeout=90)
        ranks = rank_pids(job.proc.pid)
        assert sorted(ranks) == [0, 1]
        os.kill(ranks[1], signal.SIGTERM)
        job.wait(60)  # a generous bound: SageMaker sends SIGKILL 120 s after its SIGTERM
    finally:
        job.kill()
    assert job.returncode == 143, job.explain()  # mpirun reports the ranks' status
    assert "stopped by SIGTERM" in job.stdout
    # Had the ranks stopped after different steps, one would have failed in a collective the other never joined.
    assert "mnist: error" not in job.stderr, job.explain()
    checkpoints = sorted((tmp_path / "checkpoints").glob("checkpoint-epoch-0001-batch-*.json"))
    assert len(checkpoints) == 1, job.explain()
    stopped_at = json.loads(checkpoints[0].read_text())["batch"]

    resumed = run_mnist(tmp_path, args, env=channels_env(small_mnist), ranks=2, timeout=110)
    assert resumed.returncode == 0, resumed.explain()
    assert f"at epoch 1 batch {stopped_at}" in resumed.stdout
    assert [int(e) for e, _, _ in EPOCH_LINE.findall(resumed.stdout)] == [1, 2]
    metrics = json.loads((tmp_path / "model" / "metrics.json").read_text())
    assert metrics["val_accuracy"] >= 0.9


@pytest.mark.slow
def test_pipe_mode_two_ranks_read_their_own_fifos(small_mnist, tmp_path):
    shards = tmp_path / "shards"
    assert synth_data.main(["shard", str(small_mnist / "train"), str(shards), "--shards", "2"]) == 0
    assert synth_data.main(["shard", str(small_mnist / "test"), str(shards), "--shards", "2",
                          "--channel", "test"]) == 0
    workdir = tmp_path / "job"
    sources = {f"{channel}_{r}": shards / f"{channel}_{r}" / f"{channel}_{r}.rec"
               for channel in ("train", "test") for r in range(2)}
    feeder = PipeFeeder(workdir / "input" / "data", sources, passes=3)
    config = {name: {"TrainingInputMode": "Pipe", "RecordWrapperType": "RecordIO"} for name in sources}
    try:
        job = run_mnist(workdir, ["--epochs", "3", "--log-interval", "0"], ranks=2, timeout=110,
                        env={"SM_INPUT_DATA_CONFIG": json.dumps(config),
                             "SM_CHANNELS": json.dumps(sorted(config))})
    finally:
        feeder.close()
    assert job.returncode == 0, job.explain()
    assert "train=Pipe channels train_0..train_1 test=Pipe channels test_0..test_1" in job.stdout
    # every rank read every pass of its own FIFOs to the end
    assert feeder.fed == {name: 3 for name in sources} and not feeder.errors
    epochs = EPOCH_LINE.findall(job.stdout)
    assert [int(n) for _, _, n in epochs] == [1000, 1000, 1000]  # test_0 + test_1 = the full test set
    assert json.loads((workdir / "model" / "metrics.json").read_text())["val_accuracy"] >= 0.95


def test_pipe_mode_without_a_channel_per_rank_fails_fast(tiny_mnist, tmp_path):
    config = {"train_0": {"TrainingInputMode": "Pipe"}, "test": {"TrainingInputMode": "File"}}
    # Fails fast: on every rank before mxnet (and Horovod) is imported; any import of it raises here.
    job = run_mnist(tmp_path, [], ranks=2, timeout=60,
                    env=mxnet_blocked_env(tmp_path, {"SM_INPUT_DATA_CONFIG": json.dumps(config),
                                                     "SM_CHANNEL_TEST": str(tiny_mnist / "test")}))
    assert job.returncode == 2, job.explain()
    message = "mnist: error: Pipe mode needs one channel per rank: have train_0..train_0, need 2"
    assert message in job.stderr.splitlines(), job.stderr


@pytest.mark.alone  # within 30 s, where 2 ranks import MXNet and Horovod (3-6 s each on an idle core)
def test_one_rank_with_bad_data_does_not_leave_the_other_hanging(tiny_mnist, tmp_path):
    """Per-rank File channels: train_1 is broken. Rank 1 exits 2; rank 0 must not wait forever."""
    good = tiny_mnist / "train"
    bad = tmp_path / "train_1"
    bad.mkdir()
    (bad / "train.csv").write_text("not,mnist\n")
    env = {"SM_CHANNEL_TRAIN_0": str(good), "SM_CHANNEL_TRAIN_1": str(bad),
           "SM_CHANNEL_TEST": str(tiny_mnist / "test"),
           "SM_CHANNELS": json.dumps(["test", "train_0", "train_1"])}
    job = run_mnist(tmp_path / "job", [], ranks=2, env=env, timeout=60)
    assert job.returncode == 2, job.explain()
    # Fails fast: rank 0 (in Horovod's init by then) ends with rank 1, never waits for it; a generous bound.
    assert job.seconds < 30
    assert f"mnist: error: unrecognised data format in channel 'train_1' ({bad})" in job.stderr


@pytest.mark.mpi
@pytest.mark.slow
def test_two_ranks_train_on_all_of_a_sharded_channel(tiny_mnist, tmp_path):
    """Real ranks under mpirun: each epoch trains on every sample of the host's part once, the sharded
    test channel is scored whole, and rank 0 says which split it used."""
    env = dict(channels_env(tiny_mnist), SM_INPUT_DATA_CONFIG=json.dumps(input_config("ShardedByS3Key", "ShardedByS3Key")))
    job = run_mnist(tmp_path, ["--epochs", "1", "--batch-size", "50", "--log-interval", "0"], env=env, ranks=2,
                    timeout=110)
    assert job.returncode == 0, job.explain()
    assert re.search(r"channel 'train' is ShardedByS3Key: .*local rank \(2 per host", job.stdout), job.stdout
    epoch = re.search(r"^epoch=1 .*val_samples=(\d+) train_samples=(\d+)", job.stdout, re.M)
    assert epoch and (int(epoch.group(1)), int(epoch.group(2))) == (200, 600), job.stdout


def test_two_ranks_of_64_take_the_step_one_rank_of_128_takes(tmp_path):
    """Distributed MNIST trains as one big batch. 128 samples: rank r of 2 trains on samples r, r+2, ... (the data
    split), Horovod averages the ranks' gradients, each rank rescales by its batch, and the documented rule (lr x
    ranks) makes --lr 0.01 on 2 ranks of 64 the 0.02 one rank of 128 is given. From the same weights, the first step
    must change every weight as that rank's step does."""
    data = make_mnist(tmp_path / "mnist", 128, 100)
    command, path = recorded_run("mnist")
    env = {**channels_env(data), **path}
    common = ["--epochs", "1", "--log-interval", "0", "--tensorboard", "false"]
    one = run_mnist(tmp_path / "one", [*common, "--batch-size", "128", "--lr", "0.02"], env=env, command=command)
    two = run_mnist(tmp_path / "two", [*common, "--batch-size", "64", "--lr", "0.01"], env=env, ranks=2,
                    command=command, timeout=110)
    for job, ranks in ((one, 1), (two, 2)):
        assert job.returncode == 0, job.explain()
        assert f"world_size={ranks} " in job.stdout and "lr=0.02 " in job.stdout, job.stdout
    same_start, differences, changed = first_step_differences(one.model_dir, two.model_dir)
    assert same_start and changed == len(differences)
    assert max(differences.values()) < SAME_STEP, differences
