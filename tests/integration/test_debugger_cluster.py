"""SageMaker Debugger across 2 hosts (real containers, scripts/local_job/): a debughookconfig.json as SDK v2 makes
SageMaker write it (tests/fixtures/debugger), the built-in MNIST, a user's script with smdebug's API, one without
(zero code change), under Horovod and under the parameter server, and configurations that cannot be used. Every host's /opt/ml/output/tensors is what SageMaker
uploads to the one S3OutputPath; the tests merge the hosts' directories as that prefix would, and read them with
smdebug's trial API inside the image (tests/integration/code/debugger/read_trial.py)."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cluster_jobs import DOCKER, synthetic_mnist
from local_job import Channel, JobSpec, run_job

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "debugger"
CODE = Path(__file__).resolve().parent / "code" / "debugger"
HOSTS = ("algo-1", "algo-2")


@pytest.fixture(scope="module")
def mnist_data(image, tmp_path_factory):
    return synthetic_mnist(image, tmp_path_factory.mktemp("mnist"), 2000, 500)


def hook_config(name, **changes):
    config = json.loads((FIXTURES / f"{name}.debughookconfig.json").read_text())
    return json.dumps({**config, **changes})


def mnist_job(image, workdir, data, config_text, **hyperparameters):
    hps = {"sagemaker_program": "mnist", "epochs": "2", "batch-size": "64", "log-interval": "0",
           "mpi_peer_timeout_s": "60", **hyperparameters}
    return run_job(JobSpec(image=image, hosts=2, hyperparameters=hps, timeout_s=600,
                           channels=[Channel("train", data / "train"), Channel("test", data / "test")],
                           config_files={"debughookconfig.json": config_text}), workdir)


def script_job(image, workdir, script, config_text, **hyperparameters):
    hps = {"sagemaker_program": script, "sagemaker_submit_directory": "/opt/ml/code", "mpi_peer_timeout_s": "60",
           **hyperparameters}
    return run_job(JobSpec(image=image, hosts=2, hyperparameters=hps, code_dir=CODE, timeout_s=600,
                           config_files={"debughookconfig.json": config_text}), workdir)


def uploaded(result, workdir):
    """The hosts' /opt/ml/output/tensors merged into one directory, as SageMaker's uploads merge them in S3."""
    merged = Path(workdir) / "s3-tensors"
    for host in result.hosts:
        tensors = host.root / "output" / "tensors"
        if tensors.is_dir():
            shutil.copytree(tensors, merged, dirs_exist_ok=True)
    return merged


def read_trial(image, directory, *tensors):
    done = subprocess.run([DOCKER, "run", "--rm", "-v", f"{directory}:/tensors:ro", "-v", f"{CODE}:/code:ro",
                           "--entrypoint", "python", image, "/code/read_trial.py", "/tensors", *tensors],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_mnist_saves_the_configured_collections_on_every_rank(image, mnist_data, tmp_path):
    """include_workers all: each host's rank saves as worker_<rank>; weights and gradients every 2 steps, the loss
    every step (its collection's own save_interval)."""
    result = mnist_job(image, tmp_path, mnist_data, hook_config("sdk-v2-collections"))
    assert result.exit_codes == [0, 0], result.describe()
    assert "SageMaker Debugger hook configuration (debughookconfig.json): collections gradients, losses, weights; " \
           "every 2 steps; saved by every rank (include_workers all)" in result.master.logs
    found = read_trial(image, uploaded(result, tmp_path), "mnist_dense0_weight", "gradient/mnist_dense0_weight",
                       "softmaxcrossentropyloss0_output_0")
    assert found["workers"] == ["worker_0", "worker_1"], found
    weight, gradient, loss = (found["tensors"][name] for name in
                              ("mnist_dense0_weight", "gradient/mnist_dense0_weight", "softmaxcrossentropyloss0_output_0"))
    # 1000 samples per rank and batch 64: 16 steps per epoch, 2 epochs. smdebug writes a step's weights and gradients
    # at the next step's forward pass, and the weights once more at the end, into the last step it saved (31: the
    # loss's).
    assert weight["steps"] == [*range(0, 32, 2), 31] and gradient["steps"] == list(range(0, 32, 2)), found
    assert loss["steps"] == list(range(32)), found
    assert weight["changed"] and gradient["changed"] and loss["changed"], found
    assert weight["workers"] == ["worker_0", "worker_1"], found


def test_mnist_with_sdk_v2s_default_saves_the_losses_on_rank_0(image, mnist_data, tmp_path):
    """SDK v2's default hook configuration: the losses every 500 steps, from rank 0 only (include_workers one)."""
    result = mnist_job(image, tmp_path, mnist_data, hook_config("sdk-v2-default"))
    assert result.exit_codes == [0, 0], result.describe()
    assert not list((result.hosts[1].root / "output" / "tensors").glob("**/*.tfevents")), "rank 1 saved"
    found = read_trial(image, uploaded(result, tmp_path), "softmaxcrossentropyloss0_output_0")
    assert found["workers"] == ["worker_0"], found
    assert found["tensors"]["softmaxcrossentropyloss0_output_0"]["steps"] == [0], found
    assert [name for name in found["names"] if not name.startswith("softmaxcrossentropyloss0")] == [], found


@pytest.mark.parametrize("script", ["gluon_smdebug_api.py", "gluon_plain.py"])
def test_a_users_gluon_script_saves_with_its_own_hook_or_with_none(image, tmp_path, script):
    """smdebug's API unchanged, and a script with no smdebug (zero code change): the model's weights and gradients
    and the loss, every 2 steps, from both ranks, in TRAIN mode and then EVAL."""
    config = hook_config("sdk-v2-collections", CollectionConfigurations=[
        {"CollectionName": "weights"}, {"CollectionName": "gradients"}, {"CollectionName": "losses"}])
    result = script_job(image, tmp_path, script, config)
    assert result.exit_codes == [0, 0], result.describe()
    found = read_trial(image, uploaded(result, tmp_path), "dense0_weight", "softmaxcrossentropyloss0_output_0")
    assert found["workers"] == ["worker_0", "worker_1"], found
    assert {"dense0_weight", "gradient/dense0_weight", "softmaxcrossentropyloss0_output_0"} <= set(found["names"])
    weight, loss = found["tensors"]["dense0_weight"], found["tensors"]["softmaxcrossentropyloss0_output_0"]
    assert weight["steps"] == [0, 2, 4, 6] and weight["changed"], found
    assert loss["steps"] == [0, 2, 4, 6] and loss["changed"], found
    assert found["eval_steps"] == [0], found  # 2 validation batches, every 2 steps: the first


def test_a_users_gluon_script_under_the_parameter_server_saves_from_worker_0_only(image, tmp_path):
    """distribution={'parameter_server': ...}, a dist_sync script without smdebug (zero code change), 2 hosts x 1
    worker: smdebug sees no Horovod there and would name each worker worker_0, so the hosts' files would take each
    other's names under the one S3OutputPath. Only worker 0 (algo-1) saves: every step once, both modes."""
    config = hook_config("sdk-v2-collections", CollectionConfigurations=[
        {"CollectionName": "weights"}, {"CollectionName": "losses"}])
    result = script_job(image, tmp_path, "gluon_dist_sync.py", config, sagemaker_parameter_server_enabled="true")
    assert result.exit_codes == [0, 0], result.describe()
    assert not list((result.hosts[1].root / "output" / "tensors").glob("**/*.tfevents")), "worker 1 saved"
    found = read_trial(image, uploaded(result, tmp_path), "dense0_weight", "softmaxcrossentropyloss0_output_0")
    assert found["workers"] == ["worker_0"], found
    weight, loss = found["tensors"]["dense0_weight"], found["tensors"]["softmaxcrossentropyloss0_output_0"]
    assert weight["steps"] == [0, 2, 4, 6] and weight["changed"], found  # 8 steps, every 2
    assert loss["steps"] == [0, 2, 4, 6] and loss["changed"], found
    assert found["eval_steps"] == [0], found


def test_configurations_that_cannot_be_used_leave_the_job_training(image, mnist_data, tmp_path):
    """A hook configuration of an unknown shape: one note in the start log, one warning per rank, a trained model."""
    result = mnist_job(image, tmp_path, mnist_data, json.dumps({"Version": "2", "S3OutputPath": "s3://b/t"}),
                       epochs="1")
    assert result.exit_codes == [0, 0], result.describe()
    assert "SageMaker Debugger: debughookconfig.json unknown key(s) Version: not the DebugHookConfig this image " \
           "knows" in result.master.logs, result.master.logs[-3000:]
    assert "mnist: warning: SageMaker Debugger: /opt/ml/input/config/debughookconfig.json unknown key(s) " \
           "Version" in result.master.logs
    assert (result.master.root / "model" / "model-0000.params").is_file()
    assert not (result.master.root / "output" / "tensors").exists()


def test_an_unwritable_local_path_is_named_and_the_job_trains(image, mnist_data, tmp_path):
    result = mnist_job(image, tmp_path, mnist_data, hook_config("sdk-v2-default", LocalPath="/proc/tensors"),
                       epochs="1")
    assert result.exit_codes == [0, 0], result.describe()
    assert "mnist: warning: SageMaker Debugger: LocalPath /proc/tensors is not writable here (No such file or " \
           "directory); training goes on without the hook" in result.master.logs, result.master.logs[-3000:]
    assert (result.master.root / "model" / "model-0000.params").is_file()
