"""A job whose estimator sets checkpoint_local_path and TensorBoardOutputConfig(container_local_output_path=...):
SageMaker writes /opt/ml/input/config/checkpointconfig.json and tensorboardoutputconfig.json, syncs each LocalPath
with S3 and, when it restarts the job (spot interruption, RetryStrategy, MaxWaitTimeInSeconds), starts new containers
with the same config and the checkpoints restored into LocalPath on every host. Here: 2 hosts, the paths mounted
from this machine outside /opt/ml, and the restart done as SageMaker does it (new containers and /opt/ml, the
first run's checkpoints copied into every host's LocalPath). Bad files: tests/unit/parse/test_output_config.py;
here the one case only a container shows, a LocalPath on a read-only mount."""

import json
import shutil

import pytest
from cluster_jobs import synthetic_mnist
from local_job import Channel, JobSpec, run_job
from rcnn_cluster_jobs import CKPT as RCNN_CKPT
from rcnn_cluster_jobs import HOSTS, TB, host_dirs
from rcnn_cluster_jobs import config_files as rcnn_config_files

CKPT = "/checkpoints-custom/mnist"  # LocalPath: not SageMaker's default


@pytest.fixture(scope="module")
def mnist_data(image, tmp_path_factory):
    return synthetic_mnist(image, tmp_path_factory.mktemp("mnist"), 1000, 200)


def config_files():
    """What SageMaker writes for checkpoint_s3_uri + checkpoint_local_path and a TensorBoardOutputConfig."""
    return rcnn_config_files(CKPT, TB)


def mnist_run(image, mnist_data, workdir, mounts, epochs, hps=None):
    """One run of the job; `mounts`: host -> this machine's (checkpoint dir, TensorBoard dir) for it."""
    spec = JobSpec(image=image, hosts=2, timeout_s=300, config_files=config_files(),
                   hyperparameters={"sagemaker_program": "mnist", "epochs": str(epochs), "batch-size": "32",
                                    "log-interval": "0", "mpi_peer_timeout_s": "60", **(hps or {})},
                   channels=[Channel("train", mnist_data / "train"), Channel("test", mnist_data / "test")],
                   host_mounts={host: [(ckpt, CKPT, "rw"), (tb, TB, "rw")] for host, (ckpt, tb) in mounts.items()})
    return run_job(spec, workdir)


def epochs_trained(logs):
    return [int(line.split("epoch=")[1].split()[0]) for line in logs.splitlines() if " train_loss=" in line]


@pytest.mark.parametrize("hps", [{}, {"kvstore": "dist_sync"}], ids=["horovod", "parameter_server"])
def test_a_restarted_job_resumes_from_local_path_on_two_hosts(image, mnist_data, tmp_path, hps):
    first_dirs = host_dirs(tmp_path / "first")
    first = mnist_run(image, mnist_data, tmp_path / "first" / "job", first_dirs, epochs=1, hps=hps)
    assert first.exit_codes == [0, 0], first.describe()
    assert f"note: checkpoints: {CKPT} (checkpointconfig.json's LocalPath" in first.master.logs
    ckpt, tb = first_dirs["algo-1"]
    saved = sorted(p.name for p in ckpt.iterdir())
    assert saved == [f"checkpoint-epoch-0001.{ext}" for ext in ("json", "params", "states")], saved
    assert any(p.name.startswith("events.out.tfevents") for p in tb.iterdir()), list(tb.iterdir())
    for host in HOSTS:  # SageMaker's default paths got nothing
        assert not any((first.hosts[HOSTS.index(host)].root / "checkpoints").iterdir())
        assert not (first.hosts[HOSTS.index(host)].root / "output" / "tensorboard").exists()

    # The restart: new containers, a fresh /opt/ml, the same config; S3's checkpoints restored into every host's
    # LocalPath (the files rank 0 wrote: one S3 prefix for the job).
    second_dirs = host_dirs(tmp_path / "second")
    for host_ckpt, _ in second_dirs.values():
        shutil.copytree(ckpt, host_ckpt, dirs_exist_ok=True)
    second = mnist_run(image, mnist_data, tmp_path / "second" / "job", second_dirs, epochs=2, hps=hps)
    assert second.exit_codes == [0, 0], second.describe()
    assert f"resumed from checkpoint {CKPT}/checkpoint-epoch-0001.params at epoch 2" in second.master.logs
    assert epochs_trained(second.master.logs) == [2], second.master.logs[-3000:]
    metrics = json.loads((second.master.root / "model" / "metrics.json").read_text())
    assert (metrics["epochs_run"], metrics["resumed_from_epoch"]) == (1, 2), metrics
    assert "checkpoint-epoch-0002.json" in {p.name for p in second_dirs["algo-1"][0].iterdir()}


def test_a_read_only_local_path_fails_every_host_at_start_with_exit_2(image, mnist_data, tmp_path):
    dirs = host_dirs(tmp_path)
    for ckpt, _ in dirs.values():
        (ckpt / "checkpoint-epoch-0001.json").write_text("{}")
    spec = JobSpec(image=image, hosts=2, timeout_s=120, config_files=config_files(),
                   hyperparameters={"sagemaker_program": "mnist", "epochs": "1", "mpi_peer_timeout_s": "60"},
                   channels=[Channel("train", mnist_data / "train"), Channel("test", mnist_data / "test")],
                   host_mounts={host: [(ckpt, CKPT, "ro"), (tb, TB, "rw")] for host, (ckpt, tb) in dirs.items()})
    result = run_job(spec, tmp_path / "job")
    assert result.exit_codes == [2, 2], result.describe()
    for host in result.hosts:
        assert host.failure == ("invalid job configuration: /opt/ml/input/config/checkpointconfig.json: LocalPath "
                                f"{CKPT} is not writable: {CKPT} is read-only"), host.failure
        assert "train_loss=" not in host.logs and "mnist: " not in host.logs, host.logs[-2000:]
    for ckpt, _ in dirs.values():
        assert [p.name for p in ckpt.iterdir()] == ["checkpoint-epoch-0001.json"]


@pytest.mark.parametrize("program", ["faster_rcnn", "mask_rcnn"])
def test_a_restarted_rcnn_job_resumes_from_local_path_on_two_hosts(rcnn_jobs, program):
    # Each model's 2-host job of test_rcnn_cluster.py (rcnn_cluster_jobs.py): its first run trains epoch 0 and
    # validates with the two config files; the restart has new containers, a fresh /opt/ml, the same config and
    # epochs=2, and algo-1's checkpoints restored into every host's LocalPath.
    first = rcnn_jobs.first(program)
    assert first.result.exit_codes == [0, 0], first.result.describe()
    ckpt, tb = first.dirs["algo-1"]
    # Epoch 1's checkpoint, and the best epoch's weights beside it (what a restart's export needs: /opt/ml/model is new)
    params = sorted(p.name for p in ckpt.iterdir() if p.suffix == ".params")
    assert len(params) == 2 and params[1].endswith("-epoch-0001.params"), params
    assert params[0] == params[1].replace("-epoch-", "-best-epoch-"), params
    assert any(p.name.startswith("events.out.tfevents") for p in tb.iterdir()), list(tb.iterdir())
    assert not any((first.result.master.root / "checkpoints").iterdir())

    second = rcnn_jobs.restarted(program).result
    assert second.exit_codes == [0, 0], second.describe()
    stem = params[1][:-len(".params")]
    assert f"{program}: resumed from checkpoint {RCNN_CKPT}/{stem}.params at epoch 1" in second.master.logs
    trained = {line.split("epoch=")[1].split()[0] for line in second.master.logs.splitlines() if " iter=" in line}
    assert trained == {"1"}, second.master.logs[-3000:]
