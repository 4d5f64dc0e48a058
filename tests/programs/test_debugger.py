"""debugger.py: the built-in programs with a SageMaker Debugger hook configuration (smdebug's own variable,
SMDEBUG_CONFIG_FILE_PATH, points at it here; SageMaker writes /opt/ml/input/config/debughookconfig.json), read back
with smdebug's trial API. One process each; tests/integration/test_debugger_cluster.py runs 2 hosts."""

import json

import pytest

from programs.helpers import DEV_VENV_REASON, channels_env, make_mnist, run_mnist
from programs.rcnn import helpers as rcnn

pytest.importorskip("smdebug", reason=DEV_VENV_REASON)
from smdebug.core.modes import ModeKeys  # noqa: E402
from smdebug.trials import create_trial  # noqa: E402

WEIGHTS_AND_LOSSES = {"HookParameters": {"save_interval": "1"},
                      "CollectionConfigurations": [{"CollectionName": "weights"}, {"CollectionName": "gradients"},
                                                   {"CollectionName": "losses"}]}


def hook_env(tmp_path, config):
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
    assert trial.steps(mode=ModeKeys.EVAL) == [0, 1]  # one validation batch per epoch
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


@pytest.mark.parametrize("model", ["faster", "mask"])
def test_rcnn_saves_its_losses_and_weights(coco, tmp_path, model):
    env = {**rcnn.channel_env(coco), **hook_env(tmp_path, WEIGHTS_AND_LOSSES)}
    job = rcnn.run(model, tmp_path / "job", [*rcnn.TINY_ARGS, "--epochs", "1", "--max-iterations-per-epoch", "2",
                                             "--val-interval", "2"], env=env)
    assert job.returncode == 0, job.explain()
    trial = create_trial(str(tmp_path / "tensors"))
    names = trial.tensor_names()
    losses = [name for name in names if name.endswith("_output_0") and "loss" in name]
    # RPN and R-CNN classification and box losses (and the mask loss for Mask R-CNN).
    assert len(losses) == (5 if model == "mask" else 4), names
    assert trial.steps(mode=ModeKeys.TRAIN) == [0, 1]
    assert any(name.startswith("gradient/") for name in names) and any(name.endswith("_weight") for name in names)
