"""sagemaker_config: the checkpoint and TensorBoard paths a job's checkpointconfig.json and
tensorboardoutputconfig.json set, written as SageMaker writes them (<input dir>/config/<name>, {"LocalPath": ...,
"S3Uri": ...}); the built-in programs follow them, resume from them, and refuse a file they cannot use."""

import json
import os
import subprocess
import sys

import pytest
from entrypoint_job import Job
from mxnet_programs import sagemaker_config as smc
from mxnet_programs.process import ProgramError
from mxnet_programs.rcnn import cli
from mxnet_programs.rcnn.faster_rcnn import MODEL as FASTER
from mxnet_programs.rcnn.mask_rcnn import MODEL as MASK

from programs.helpers import MNIST, base_env, channels_env


def write_config(input_dir, name, data):
    config = input_dir / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / name).write_text(data if isinstance(data, str) else json.dumps(data))


def test_checkpoint_dir_flag_then_env_then_file_then_default(tmp_path):
    env = {"SM_INPUT_DIR": str(tmp_path)}
    assert smc.checkpoint_dir(None, env) == "/opt/ml/checkpoints"  # no file
    write_config(tmp_path, smc.CHECKPOINT_CONFIG, {"S3Uri": "s3://b/c"})  # no LocalPath: SageMaker's default
    assert smc.checkpoint_dir(None, env) == "/opt/ml/checkpoints"
    write_config(tmp_path, smc.CHECKPOINT_CONFIG, {"LocalPath": str(tmp_path / "ckpt"), "S3Uri": "s3://b/c"})
    assert smc.checkpoint_dir(None, env) == str(tmp_path / "ckpt")
    assert smc.checkpoint_dir(None, {**env, "SM_CHECKPOINT_DIR": "/launcher"}) == "/launcher"
    assert smc.checkpoint_dir("/flag", {**env, "SM_CHECKPOINT_DIR": "/launcher"}) == "/flag"


def test_tensorboard_dir_flag_then_file_then_default(tmp_path):
    env = {"SM_INPUT_DIR": str(tmp_path)}
    assert smc.tensorboard_dir(None, env) == "/opt/ml/output/tensorboard"
    write_config(tmp_path, smc.TENSORBOARD_CONFIG, {"LocalPath": str(tmp_path / "tb"), "S3OutputPath": "s3://b/t"})
    assert smc.tensorboard_dir(None, env) == str(tmp_path / "tb")
    assert smc.tensorboard_dir("/flag", env) == "/flag"


def test_rcnn_programs_follow_both_files(tmp_path):
    write_config(tmp_path, smc.CHECKPOINT_CONFIG, {"LocalPath": str(tmp_path / "ckpt")})
    write_config(tmp_path, smc.TENSORBOARD_CONFIG, {"LocalPath": str(tmp_path / "tb")})
    env = {"SM_INPUT_DIR": str(tmp_path), "SM_CHANNEL_DATA": "/coco", "SM_CHANNELS": '["data"]'}
    for model in (FASTER, MASK):
        config = cli.parse_config(model, [], env)
        assert (config.checkpoint_dir, config.tensorboard_dir) == (str(tmp_path / "ckpt"), str(tmp_path / "tb"))
        config = cli.parse_config(model, ["--checkpoint-dir", "/c", "--tensorboard-dir", "/t"], env)
        assert (config.checkpoint_dir, config.tensorboard_dir) == ("/c", "/t")


def bad_files(tmp_path):
    """(file text, what the error must say) for each way a file cannot be used."""
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("")
    return [
        ("{not json", "is not valid JSON"),
        ('["/opt/ml/x"]', "must be a JSON object with LocalPath, got list"),
        ('{"LocalPath": 7}', "LocalPath must be a non-empty path, got 7"),
        ('{"LocalPath": ""}', "LocalPath must be a non-empty path, got ''"),
        ('{"LocalPath": "opt/ml/ckpt"}', "LocalPath 'opt/ml/ckpt' is not an absolute path"),
        (json.dumps({"LocalPath": str(not_a_dir / "ckpt")}),
         f"LocalPath {not_a_dir / 'ckpt'} is not writable: {not_a_dir} is not a directory"),
    ]


@pytest.mark.parametrize("name", [smc.CHECKPOINT_CONFIG, smc.TENSORBOARD_CONFIG])
def test_a_file_that_cannot_be_used_names_itself_and_the_field(tmp_path, name):
    env = {"SM_INPUT_DIR": str(tmp_path)}
    path = tmp_path / "config" / name
    for text, message in bad_files(tmp_path):
        write_config(tmp_path, name, text)
        with pytest.raises(ProgramError) as raised:
            smc.local_path(name, env)
        assert str(raised.value).startswith(str(path)) and message in str(raised.value), (text, raised.value)
    path.unlink()
    path.mkdir()  # cannot be read
    with pytest.raises(ProgramError, match=f"^{path} cannot be read: Is a directory"):
        smc.local_path(name, env)


def test_unwritable_names_a_read_only_mount():
    """/proc/sys is mounted read-only in a container; the check must say so rather than 'no permission'."""
    if not os.path.isdir("/proc/sys") or not (os.statvfs("/proc/sys").f_flag & os.ST_RDONLY):
        pytest.skip("/proc/sys is not a read-only mount here")
    assert smc.unwritable("/proc/sys/ckpt") == "/proc/sys is read-only"


def mnist_env(workdir, data):
    """The program's environment without the launcher's SM_CHECKPOINT_DIR: the file decides."""
    env = base_env(workdir, channels_env(data))
    del env["SM_CHECKPOINT_DIR"]
    return env


def run_mnist_plain(workdir, data, args):
    """mnist.py as a job without the launcher would run it: no --checkpoint-dir, no --tensorboard-dir."""
    proc = subprocess.Popen([sys.executable, str(MNIST), "--batch-size", "32", "--log-interval", "0", *args],
                            env=mnist_env(workdir, data), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=workdir)
    return Job(proc, workdir).wait(180)


def listing(directory):
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(directory.iterdir())}


def test_mnist_checkpoints_and_tensorboard_follow_the_files_and_resume(tiny_mnist, tmp_path):
    pytest.importorskip("mxnet", reason="needs mxnet: run inside the image")
    ckpt, tb = tmp_path / "my-ckpt", tmp_path / "my-tb"
    write_config(tmp_path / "input", smc.CHECKPOINT_CONFIG, {"LocalPath": str(ckpt), "S3Uri": "s3://b/ckpt"})
    write_config(tmp_path / "input", smc.TENSORBOARD_CONFIG, {"LocalPath": str(tb), "S3OutputPath": "s3://b/tb"})
    first = run_mnist_plain(tmp_path, tiny_mnist, ["--epochs", "1"])
    assert first.returncode == 0, first.explain()
    assert sorted(p.name for p in ckpt.iterdir()) == [f"checkpoint-epoch-0001.{ext}"
                                                      for ext in ("json", "params", "states")]
    assert [p.name for p in tb.iterdir() if p.name.startswith("events.out.tfevents")], list(tb.iterdir())
    assert not (tmp_path / "checkpoints").exists()

    # A restart (SageMaker restores the checkpoints into LocalPath) resumes after the last checkpoint.
    second = run_mnist_plain(tmp_path, tiny_mnist, ["--epochs", "2"])
    assert second.returncode == 0, second.explain()
    assert f"resumed from checkpoint {ckpt / 'checkpoint-epoch-0001'}.params at epoch 2" in second.stdout
    assert [line.split()[0] for line in second.stdout.splitlines() if " train_loss=" in line] == ["epoch=2"]

    # A file that cannot be used: exit 2 at start, naming the file and the field; the checkpoints stay as they were.
    before = listing(ckpt)
    write_config(tmp_path / "input", smc.CHECKPOINT_CONFIG, {"LocalPath": "my-ckpt"})
    bad = run_mnist_plain(tmp_path, tiny_mnist, ["--epochs", "3"])
    assert bad.returncode == 2, bad.explain()
    assert bad.stderr.strip().splitlines()[-1] == (f"mnist: error: {tmp_path / 'input' / 'config' / smc.CHECKPOINT_CONFIG}"
                                                   ": LocalPath 'my-ckpt' is not an absolute path")
    assert listing(ckpt) == before
