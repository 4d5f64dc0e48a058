"""debugger.py: the built-in programs with a SageMaker Debugger hook configuration (smdebug's own variable,
SMDEBUG_CONFIG_FILE_PATH, points at it here; SageMaker writes /opt/ml/input/config/debughookconfig.json), read back
with smdebug's trial API. One process each (R-CNN: tests/programs/rcnn/test_training_debugger.py);
tests/integration/test_debugger_cluster.py runs 2 hosts."""

import json

import pytest

from programs.helpers import DEV_VENV_REASON, ParameterServerJob, channels_env, make_mnist, mnist_argv, run_mnist

pytest.importorskip("smdebug", reason=DEV_VENV_REASON)
from smdebug.core.modes import ModeKeys  # noqa: E402
from smdebug.trials import create_trial  # noqa: E402

WEIGHTS_AND_LOSSES = {"HookParameters": {"save_interval": "1"},
                      "CollectionConfigurations": [{"CollectionName": "weights"}, {"CollectionName": "gradients"},
                                                   {"CollectionName": "losses"}]}
# smdebug 1.0.34's line when it turns itself off (BASE_ERROR_MESSAGE), then the stack trace.
SMDEBUG_DISABLED = "SMDebug error has occurred, disabling SMDebug for the rest of the training job. Stack trace:"


def hook_env(tmp_path, config):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "debughookconfig.json"
    path.write_text(json.dumps({"S3OutputPath": "s3://bucket/job", "LocalPath": str(tmp_path / "tensors"),
                                **config}))
    return {"SMDEBUG_CONFIG_FILE_PATH": str(path)}


def test_mnist_saves_weights_gradients_and_losses_in_train_and_eval_mode(tmp_path):
    data = make_mnist(tmp_path / "data", train=256, test=128)
    env = {**channels_env(data), **hook_env(tmp_path, WEIGHTS_AND_LOSSES)}
    job = run_mnist(tmp_path / "job", ["--epochs", "2", "--batch-size", "64"], env=env)
    assert job.returncode == 0, job.explain()
    trial = create_trial(str(tmp_path / "tensors"))
    assert trial.steps(mode=ModeKeys.TRAIN) == list(range(8))  # 4 steps per epoch
    # One validation batch per epoch: smdebug writes a step's weights at the next forward pass, which here is already
    # in the other mode, so not every EVAL step holds data.
    assert set(trial.steps(mode=ModeKeys.EVAL)) & {0, 1}
    assert {"mnist_dense0_weight", "gradient/mnist_dense0_weight", "softmaxcrossentropyloss0_output_0"} <= \
        set(trial.tensor_names())
    weight = trial.tensor("mnist_dense0_weight")
    assert (weight.value(0, mode=ModeKeys.TRAIN) != weight.value(7, mode=ModeKeys.TRAIN)).any()
    assert (tmp_path / "tensors" / "training_job_end.ts").is_file()  # closed before the program's os._exit


def test_mnist_trains_on_without_a_hook_its_configuration_cannot_make(tmp_path):
    data = make_mnist(tmp_path / "data", train=128, test=64)
    env = {**channels_env(data), **hook_env(tmp_path, {"HookParameters": {"include_workers": "half"}})}
    job = run_mnist(tmp_path / "job", ["--epochs", "1"], env=env)
    assert job.returncode == 0, job.explain()
    assert "mnist: warning: SageMaker Debugger: " in job.stderr
    assert "HookParameters include_workers='half': smdebug knows 'one' and 'all'; training goes on without the " \
           "hook" in job.stderr
    assert not (tmp_path / "tensors").exists()


def test_mnist_trains_on_when_smdebugs_save_fails_mid_job(tmp_path):
    """A LocalPath that cannot be written from some step on (a full disk): smdebug logs its error and turns itself
    off, the job trains to the end. smdebug does so only for SageMaker's default configuration; this one names
    collections (sagemaker_mxnet_debugger.hook.guarded)."""
    data = make_mnist(tmp_path / "data", train=256, test=64)
    env = {**channels_env(data), **hook_env(tmp_path, WEIGHTS_AND_LOSSES)}
    # Step 2's directory is taken by a file: steps 0 and 1 save, step 2's event file cannot be opened, for root too.
    (tmp_path / "tensors" / "events").mkdir(parents=True)
    (tmp_path / "tensors" / "events" / "000000000002").write_text("")
    job = run_mnist(tmp_path / "job", ["--epochs", "2", "--batch-size", "64"], env=env)
    assert job.returncode == 0, job.explain()
    assert "mnist: done val_accuracy=" in job.stdout
    # smdebug's own error handling (smdebug/core/error_handling_agent.py), once: smdebug is off from then on.
    assert job.stdout.count(SMDEBUG_DISABLED) == 1, job.explain()
    assert "Not a directory" in job.stdout.split(SMDEBUG_DISABLED)[1]
    trial = create_trial(str(tmp_path / "tensors"))
    assert trial.steps(mode=ModeKeys.TRAIN) == [0, 1]  # saved before it failed, readable
    assert (tmp_path / "tensors" / "training_job_end.ts").is_file()  # closed all the same


@pytest.mark.slow
@pytest.mark.mpi
@pytest.mark.usefixtures("needs_horovod")
def test_under_parameter_servers_only_worker_0_saves_each_step_once(tmp_path):
    """2 kvstore workers (dist_sync), each with its own LocalPath as on its own host: smdebug sees no Horovod and
    would call both worker_0, so only worker 0 saves (entrypoints/mxnet_programs/debugger.py)."""
    data = make_mnist(tmp_path / "data", train=256, test=64)
    argv = mnist_argv(tmp_path / "job", ["--epochs", "1", "--batch-size", "32", "--kvstore", "dist_sync"])
    job = ParameterServerJob(tmp_path / "job", argv, channels_env(data),
                             worker_env=lambda rank: hook_env(tmp_path / f"host-{rank}", WEIGHTS_AND_LOSSES))
    workers = job.wait(120)
    for worker in workers:
        assert worker.returncode == 0, worker.explain()
    trial = create_trial(str(tmp_path / "host-0" / "tensors"))
    # 128 samples per worker in batches of 32: 4 steps, each saved once, by worker_0 alone.
    assert trial.steps(mode=ModeKeys.TRAIN) == [0, 1, 2, 3]
    assert trial.workers() == ["worker_0"]
    events = tmp_path / "host-0" / "tensors" / "events"
    assert {step.name: sorted(path.name for path in step.iterdir()) for step in events.iterdir()} == {
        f"{step:012d}": [f"{step:012d}_worker_0.tfevents"] for step in range(trial.steps()[-1] + 1)}
    assert not (tmp_path / "host-1" / "tensors").exists()
