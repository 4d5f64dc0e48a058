"""zero_code_change.py with the image's MXNet and smdebug: a user's Gluon script without smdebug gets the job's hook at
its first training step (the image's sagemaker_mxnet_debugger.pth arms it when a hook configuration exists), a script
with smdebug's own API keeps its hook alone, and nothing is touched without a configuration. The scripts are those
of tests/integration/code/debugger, run as one process here (Horovod of size 1)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("smdebug", reason="needs the image's MXNet and smdebug: run inside the image (make image-tests)")
from smdebug.core.modes import ModeKeys  # noqa: E402
from smdebug.trials import create_trial  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "tests" / "integration" / "code" / "debugger"
SOURCE = ROOT / "container" / "src"  # this tree's package first; the image's .pth imports it from there
CONFIG = {"S3OutputPath": "s3://bucket/job", "HookParameters": {"save_interval": "2"},
          "CollectionConfigurations": [{"CollectionName": "weights"}, {"CollectionName": "gradients"},
                                       {"CollectionName": "losses"}]}


def run(tmp_path, code_or_script, config=CONFIG, **env):
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("OMPI_", "SMDEBUG_"))}
    environ.update({"PYTHONPATH": str(SOURCE), **env})
    if config is not None:
        path = tmp_path / "debughookconfig.json"
        path.write_text(config if isinstance(config, str) else json.dumps({"LocalPath": str(tmp_path / "tensors"),
                                                                           **config}))
        environ["SMDEBUG_CONFIG_FILE_PATH"] = str(path)
    argv = [sys.executable, str(SCRIPTS / code_or_script)] if code_or_script.endswith(".py") else \
        [sys.executable, "-c", code_or_script]
    done = subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def saved(tmp_path):
    trial = create_trial(str(tmp_path / "tensors"))
    return trial, trial.tensor("dense0_weight")


def test_a_script_without_smdebug_saves_at_its_training_steps_in_train_and_eval_mode(tmp_path):
    run(tmp_path, "gluon_plain.py")
    trial, weight = saved(tmp_path)
    assert trial.workers() == ["worker_0"]
    # 8 training steps, every 2; the shape-inference forward before training is no step.
    assert weight.steps(mode=ModeKeys.TRAIN) == [0, 2, 4, 6]
    assert trial.tensor("softmaxcrossentropyloss0_output_0").steps(mode=ModeKeys.TRAIN) == [0, 2, 4, 6]
    assert trial.steps(mode=ModeKeys.EVAL) == [0]  # the 2 validation forwards, every 2
    assert (weight.value(0, mode=ModeKeys.TRAIN) != weight.value(6, mode=ModeKeys.TRAIN)).any()
    assert "gradient/dense0_weight" in trial.tensor_names()


def test_a_script_with_smdebugs_api_keeps_its_own_hook_alone(tmp_path):
    done = run(tmp_path, "gluon_smdebug_api.py")
    trial, weight = saved(tmp_path)
    # One hook: a second one registered on the same blocks would count every forward twice.
    assert weight.steps(mode=ModeKeys.TRAIN) == [0, 2, 4, 6]
    assert trial.steps(mode=ModeKeys.EVAL) == [0]
    assert "zero-code-change" not in done.stderr


WRAPPED = "import mxnet; print(hasattr(mxnet.gluon.Block.__call__, '__wrapped__'))"


def test_gluon_is_left_alone_without_a_configuration_or_when_turned_off(tmp_path):
    assert run(tmp_path, WRAPPED, config=None).stdout.strip() == "False"
    assert run(tmp_path, WRAPPED, SMDEBUG_ZERO_CODE_CHANGE="0").stdout.strip() == "False"
    assert run(tmp_path, WRAPPED).stdout.strip() == "True"


def test_a_configuration_that_cannot_be_used_is_a_warning_and_the_script_trains(tmp_path):
    done = run(tmp_path, "gluon_plain.py", config="{cut short")
    assert f"zero-code-change: warning: SageMaker Debugger: {tmp_path}/debughookconfig.json is not valid JSON " \
           "(Expecting property name" in done.stderr
    assert done.stderr.count("SageMaker Debugger") == 1
    assert "rank 0: done" in done.stdout and not (tmp_path / "tensors").exists()
