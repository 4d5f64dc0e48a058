"""output_config.py: checkpointconfig.json's and tensorboardoutputconfig.json's LocalPath, written as SageMaker
writes them, reach every rank (SM_CHECKPOINT_DIR) and the start log; a file that cannot be used fails `train` with
exit 2 and the failure file naming the file and the field, before the program runs."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.core.exits import ConfigError
from sagemaker_mxnet_horovod.parse import output_config as oc
from sagemaker_mxnet_horovod.parse.paths import Paths
from unit_helpers import unit_paths


def write(config_dir: Path, name: str, data) -> Path:
    config_dir.mkdir(parents=True, exist_ok=True)
    path = config_dir / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_no_files_leave_sagemakers_defaults(tmp_path):
    output = oc.load_output_config(tmp_path)
    assert output == oc.OutputConfig(None, None)
    paths = oc.with_output_config(Paths(Path("/opt/ml")), output)
    assert (str(paths.checkpoint_dir), str(paths.tensorboard_dir)) == ("/opt/ml/checkpoints",
                                                                       "/opt/ml/output/tensorboard")
    assert oc.notes(output) == []


def test_local_paths_move_both_directories(tmp_path):
    write(tmp_path, oc.CHECKPOINT_CONFIG, {"LocalPath": str(tmp_path / "ckpt"), "S3Uri": "s3://b/ckpt"})
    write(tmp_path, oc.TENSORBOARD_CONFIG, {"LocalPath": str(tmp_path / "tb"), "S3OutputPath": "s3://b/tb"})
    output = oc.load_output_config(tmp_path)
    paths = oc.with_output_config(Paths(Path("/opt/ml")), output)
    assert (paths.checkpoint_dir, paths.tensorboard_dir) == (tmp_path / "ckpt", tmp_path / "tb")
    assert oc.notes(output)[0] == (f"checkpoints: {tmp_path / 'ckpt'} (checkpointconfig.json's LocalPath; "
                                   "SM_CHECKPOINT_DIR on every rank)")


def test_a_file_without_local_path_is_sagemakers_default(tmp_path):
    write(tmp_path, oc.CHECKPOINT_CONFIG, {"S3Uri": "s3://b/ckpt"})
    assert oc.load_output_config(tmp_path).checkpoint_local_path is None


@pytest.mark.parametrize("name", [oc.CHECKPOINT_CONFIG, oc.TENSORBOARD_CONFIG])
def test_a_file_that_cannot_be_used_names_itself_and_the_field(tmp_path, name):
    config_dir = tmp_path / "config"
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    cases = [
        ("{not json", "is not valid JSON"),
        ('"/opt/ml/ckpt"', "must be a JSON object with LocalPath, got str"),
        ('{"LocalPath": null}', "LocalPath must be a non-empty path, got None"),
        ('{"LocalPath": "  "}', "LocalPath must be a non-empty path, got '  '"),
        ('{"LocalPath": "ckpt"}', "LocalPath 'ckpt' is not an absolute path"),
        (json.dumps({"LocalPath": str(a_file / "ckpt")}),
         f"LocalPath {a_file / 'ckpt'} is not writable: {a_file} is not a directory"),
    ]
    for text, message in cases:
        path = write(config_dir, name, text)
        with pytest.raises(ConfigError) as raised:
            oc.load_output_config(config_dir)
        assert str(raised.value).startswith(str(path)) and message in str(raised.value), (text, raised.value)
    path.unlink()
    path.mkdir()
    with pytest.raises(ConfigError, match=f"^{path} cannot be read: Is a directory$"):
        oc.load_output_config(config_dir)


# ---- through `train`, one host, a user's script


def job(tmp_path, files: dict) -> Path:
    """A one-host job whose script prints what SM_CHECKPOINT_DIR it got; `files`: extra config files."""
    base = tmp_path / "ml"
    config = base / "input" / "config"
    config.mkdir(parents=True)
    (base / "code").mkdir()
    (base / "code" / "train.py").write_text(textwrap.dedent("""
        import os
        print("SM_CHECKPOINT_DIR=" + os.environ["SM_CHECKPOINT_DIR"], flush=True)
    """))
    hps = {"sagemaker_program": "train.py", "sagemaker_submit_directory": str(base / "code")}
    (config / "hyperparameters.json").write_text(json.dumps({k: json.dumps(v) for k, v in hps.items()}))
    for name, data in files.items():
        write(config, name, data)
    return base


def run_train(base: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sagemaker_mxnet_horovod.cli"],
                          env={**os.environ, "PYTHONPATH": str(unit_paths.SRC), "SAGEMAKER_BASE_DIR": str(base),
                               "SMMH_RUN_DIR": str(base.parent / "run"), "SM_NUM_GPUS": "0"},
                          capture_output=True, text=True, timeout=120)


def test_the_script_gets_local_path_as_sm_checkpoint_dir(tmp_path):
    ckpt = tmp_path / "my-ckpt"
    base = job(tmp_path, {oc.CHECKPOINT_CONFIG: {"LocalPath": str(ckpt), "S3Uri": "s3://b/c"}})
    done = run_train(base)
    assert done.returncode == 0, done.stderr
    assert f"SM_CHECKPOINT_DIR={ckpt}\n" in done.stdout
    assert f"note: checkpoints: {ckpt} (checkpointconfig.json's LocalPath" in done.stderr + done.stdout


def test_without_the_file_sm_checkpoint_dir_is_the_default(tmp_path):
    base = job(tmp_path, {})
    done = run_train(base)
    assert done.returncode == 0, done.stderr
    assert f"SM_CHECKPOINT_DIR={base / 'checkpoints'}\n" in done.stdout


def test_a_bad_file_exits_2_runs_nothing_and_names_the_field(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "checkpoint-epoch-0001.json").write_text("{}")
    base = job(tmp_path, {oc.CHECKPOINT_CONFIG: {"LocalPath": str(ckpt)},
                          oc.TENSORBOARD_CONFIG: {"LocalPath": "tb", "S3OutputPath": "s3://b/t"}})
    done = run_train(base)
    assert done.returncode == 2, done.stderr
    assert "SM_CHECKPOINT_DIR=" not in done.stdout
    config = base / "input" / "config"
    assert (base / "output" / "failure").read_text().splitlines() == [
        f"invalid job configuration: {config / oc.TENSORBOARD_CONFIG}: LocalPath 'tb' is not an absolute path"]
    assert [p.name for p in ckpt.iterdir()] == ["checkpoint-epoch-0001.json"]
