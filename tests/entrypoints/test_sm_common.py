"""sm_common: the helpers the entrypoints share (stdlib only, so these run in any Python)."""

import argparse
import json
import os
import signal

import pytest
import sm_common as smc


def test_hyperparameter_keys_accept_underscores_and_drop_sagemaker_keys():
    argv = ["--batch_size", "32", "--log_interval=5", "--sagemaker_program", "mnist", "--lr", "0.1",
            "--sagemaker_submit_directory=/x", "--save-checkpoints", "false"]
    assert smc.normalize_hyperparameter_argv(argv) == [
        "--batch-size", "32", "--log-interval=5", "--lr", "0.1", "--save-checkpoints", "false"]
    # values are never rewritten, negative numbers stay values
    assert smc.normalize_hyperparameter_argv(["--name", "a_b", "--x", "-1"]) == ["--name", "a_b", "--x", "-1"]


@pytest.mark.parametrize("text,value", [("true", True), ("TRUE", True), ("True", True), ("1", True),
                                        ("false", False), ("False", False), ("0", False), (" false ", False)])
def test_str2bool_accepts(text, value):
    assert smc.str2bool(text) is value


@pytest.mark.parametrize("text", ["yes", "no", "", "2", "t", "none"])
def test_str2bool_rejects(text):
    with pytest.raises(argparse.ArgumentTypeError, match=repr(text)):
        smc.str2bool(text)


def test_parser_rejects_abbreviations_and_prints_one_line(capsys):
    parser = smc.HyperparameterParser(prog="x")
    parser.add_argument("--epochs", type=int, default=1)
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(["--epoch", "3"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("x: error: unrecognized arguments: --epoch 3")
    assert parser.parse_args(["--epochs", "3"]).epochs == 3


def test_dist_env_reads_openmpi_horovodrun_and_defaults():
    env = smc.dist_env({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8",
                        "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    assert (env.rank, env.size, env.local_rank, env.local_size) == (3, 8, 1, 2)
    env = smc.dist_env({"HOROVOD_RANK": "1", "HOROVOD_SIZE": "2"})
    assert (env.rank, env.size) == (1, 2)
    env = smc.dist_env({})
    assert (env.rank, env.size, env.local_rank, env.local_size) == (0, 1, 0, 1)


def test_limit_cpu_threads_splits_cores_unless_user_set():
    env = {}
    threads = smc.limit_cpu_threads(2, env)
    assert env["OMP_NUM_THREADS"] == str(threads) and threads >= 1
    env = {"OMP_NUM_THREADS": "7"}
    assert smc.limit_cpu_threads(2, env) is None and env["OMP_NUM_THREADS"] == "7"
    assert smc.limit_cpu_threads(1, {}) is None


def test_paths_flag_then_env_then_default(tmp_path):
    env = {"SM_MODEL_DIR": "/env/model", "SM_CHANNEL_TRAIN": "/env/train", "SM_INPUT_DIR": str(tmp_path)}
    assert smc.resolve_path("/flag", "SM_MODEL_DIR", "/default", env) == "/flag"
    assert smc.resolve_path(None, "SM_MODEL_DIR", "/default", env) == "/env/model"
    assert smc.resolve_path(None, "SM_NOPE", "/default", env) == "/default"
    assert smc.channel_dir("train", environ=env) == "/env/train"
    assert smc.channel_dir("test", environ=env) == str(tmp_path / "data" / "test")
    assert smc.channel_dir("train_1", environ=dict(env, SM_CHANNEL_TRAIN_1="/t1")) == "/t1"


def test_input_data_config_from_env_or_file(tmp_path):
    assert smc.input_data_config({"SM_INPUT_DIR": str(tmp_path)}) == {}
    (tmp_path / "config").mkdir()
    file_mode = {"train": {"TrainingInputMode": "File"}}
    (tmp_path / "config" / "inputdataconfig.json").write_text(json.dumps(file_mode))
    assert smc.input_data_config({"SM_INPUT_DIR": str(tmp_path)}) == file_mode
    config = {"train_0": {"TrainingInputMode": "Pipe"}}
    assert smc.input_data_config({"SM_INPUT_DATA_CONFIG": json.dumps(config)}) == config
    with pytest.raises(smc.EntrypointError, match="must be a JSON object"):
        smc.input_data_config({"SM_INPUT_DATA_CONFIG": "[1]"})


def pipe(*names):
    return {name: {"TrainingInputMode": "Pipe"} for name in names}


def test_per_rank_pipe_channels():
    assert smc.per_rank_pipe_channels({"train": {"TrainingInputMode": "File"}}, "train", 2) is None
    assert smc.per_rank_pipe_channels({}, "train", 2) is None
    assert smc.per_rank_pipe_channels(pipe("train"), "train", 1) == ["train"]
    three = pipe("train_0", "train_1", "train_2")
    assert smc.per_rank_pipe_channels(three, "train", 2) == ["train_0", "train_1"]
    with pytest.raises(smc.EntrypointError) as error:
        smc.per_rank_pipe_channels(pipe("train_0", "train_1"), "train", 4)
    assert str(error.value) == "Pipe mode needs one channel per rank: have train_0..train_1, need 4"
    with pytest.raises(smc.EntrypointError) as error:
        smc.per_rank_pipe_channels(pipe("train"), "train", 2)
    assert str(error.value) == "Pipe mode needs one channel per rank: have none, need 2"


def test_atomic_write_replaces_whole_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "sub" / "f.json"
    smc.atomic_write_json(str(target), {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}

    def broken(f):
        f.write(b"partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        smc.atomic_write(str(target), broken)
    assert json.loads(target.read_text()) == {"a": 1}  # old content intact
    assert os.listdir(tmp_path / "sub") == ["f.json"]


def _writer(text):
    def save(filename):
        with open(filename, "w") as f:
            f.write(text)
    return save


class _Room:
    """os.statvfs's answer for a filesystem with `free` bytes left."""

    def __init__(self, free):
        self.f_frsize, self.f_bavail, self.f_blocks = 1024, free // 1024, 8192


def _failing_save(filename):
    with open(filename, "wb") as f:
        f.write(b"partial")
    raise RuntimeError("Check failed: fwrite(ptr, 1, size, fp_) == size: FileStream.Write incomplete")


def test_failed_save_on_a_full_disk_says_so_and_where(tmp_path, monkeypatch):
    # MXNet's own message for a full disk names neither the cause nor the file.
    monkeypatch.setattr(smc.os, "statvfs", lambda _path: _Room(free=0))
    target = tmp_path / "checkpoint.params"
    with pytest.raises(OSError) as raised:
        smc.atomic_save(str(target), _failing_save)
    assert raised.value.errno == smc.errno.ENOSPC
    assert str(raised.value).startswith(f"[Errno 28] No space left on device while saving {target}")
    assert os.listdir(tmp_path) == []  # the partial temp file is gone


def test_failed_save_with_room_left_keeps_its_own_error(tmp_path, monkeypatch):
    monkeypatch.setattr(smc.os, "statvfs", lambda _path: _Room(free=64 << 20))
    with pytest.raises(RuntimeError, match="FileStream.Write incomplete"):
        smc.atomic_save(str(tmp_path / "checkpoint.params"), _failing_save)


def test_enospc_from_python_gets_the_path(tmp_path, monkeypatch):
    monkeypatch.setattr(smc.os, "statvfs", lambda _path: _Room(free=0))

    def full(_f):
        raise OSError(smc.errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match=r"while saving .*state\.json \(0 KiB free of 8192 KiB\)"):
        smc.atomic_write(str(tmp_path / "state.json"), full)


def test_checkpoints_order_prune_and_latest(tmp_path):
    manager = smc.CheckpointManager(str(tmp_path), keep=2)
    assert manager.latest() == (None, None)
    manager.save(1, {"v": 1}, {"params": _writer("e1")})
    manager.save(2, {"v": 2}, {"params": _writer("e2")}, batch=17)  # stopped inside epoch 2
    state, stem = manager.latest()
    assert (state["epoch"], state["batch"], state["v"]) == (2, 17, 2)
    assert stem.endswith("checkpoint-epoch-0002-batch-000017")
    manager.save(2, {"v": 3}, {"params": _writer("e2 done")})  # epoch 2 complete: newer than its partial one
    state, stem = manager.latest()
    assert (state["epoch"], state["batch"]) == (2, None)
    assert sorted(os.listdir(tmp_path)) == [  # epoch 1 pruned, newest two kept
        "checkpoint-epoch-0002-batch-000017.json", "checkpoint-epoch-0002-batch-000017.params",
        "checkpoint-epoch-0002.json", "checkpoint-epoch-0002.params"]


def test_checkpoint_without_its_files_is_skipped(tmp_path):
    manager = smc.CheckpointManager(str(tmp_path), keep=5)
    manager.save(1, {}, {"params": _writer("e1")})
    manager.save(2, {}, {"params": _writer("e2")})
    os.remove(tmp_path / "checkpoint-epoch-0002.params")  # e.g. a partial S3 sync
    (tmp_path / "checkpoint-epoch-0003.json").write_text("{truncated")
    state, _ = manager.latest()
    assert state["epoch"] == 1


def test_format_metrics():
    line = smc.format_metrics([("epoch", 3), ("train_loss", 0.123456), ("samples_per_sec", 1234.56),
                               ("time_sec", 2.0), ("batch", "4/10")])
    assert line == "epoch=3 train_loss=0.1235 samples_per_sec=1234.6 time_sec=2.00 batch=4/10"


def test_stop_request_is_set_by_sigterm():
    stop = smc.StopRequest()
    previous = signal.getsignal(signal.SIGTERM)
    try:
        stop.install()
        assert not stop.requested
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.requested and stop.signum == signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_tensorboard_writer_disabled_is_a_no_op(tmp_path):
    writer = smc.TensorBoardWriter(str(tmp_path / "tb"), enabled=False)
    writer.scalars(1, {"a": 1.0})
    writer.close()
    assert not writer.active and not (tmp_path / "tb").exists()
