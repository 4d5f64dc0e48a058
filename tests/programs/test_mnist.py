"""The mnist program (entrypoints/mnist.py) as one process: training, model export, metrics lines, checkpoints,
resume (once on 2 ranks, with another learning rate), SIGTERM, bad input."""

import json
import os
import re
import signal
import struct
import subprocess
import sys

import pytest
from mxnet_programs import mnist_data
from mxnet_programs.mnist import METRIC_DEFINITIONS, build_net
from sagemaker_mxnet_data import synth_data

from programs.helpers import (
    DEV_VENV_REASON,
    MNIST,
    PipeFeeder,
    base_env,
    channels_env,
    make_mnist,
    mxnet_blocked_env,
    optimizer_learning_rate,
    run_mnist,
    start_mnist,
)

# The entrypoint runs with this Python: without numpy/mxnet (e.g. the lint/tools venv) skip, don't fail.
np = pytest.importorskip("numpy", reason=DEV_VENV_REASON)
pytest.importorskip("mxnet", reason=DEV_VENV_REASON)

EPOCH_LINE = re.compile(r"^epoch=(\d+) train_loss=")


def epoch_lines(stdout):
    return [line for line in stdout.splitlines() if EPOCH_LINE.match(line)]


def read_tensorboard_tags(logdir):
    """Scalar tags in tensorboardX event files, parsed from the TFRecord framing with its protobufs."""
    event_pb2 = pytest.importorskip("tensorboardX.proto.event_pb2")
    tags = {}
    for name in os.listdir(logdir):
        with open(os.path.join(logdir, name), "rb") as f:
            data = f.read()
        offset = 0
        while offset < len(data):
            (length,) = struct.unpack_from("<Q", data, offset)
            event = event_pb2.Event.FromString(data[offset + 12:offset + 12 + length])
            offset += 12 + length + 4
            for value in event.summary.value:
                tags.setdefault(value.tag, []).append((event.step, value.simple_value))
    return tags


def load_exported(model_dir):
    mx = pytest.importorskip("mxnet")
    return mx, mx.gluon.nn.SymbolBlock.imports(
        str(model_dir / "model-symbol.json"), ["data"], str(model_dir / "model-0000.params"), ctx=mx.cpu())


def accuracy_of(mx, net, data_dir):
    images, labels = synth_data.read_dataset(str(data_dir / "test"))
    x = mx.nd.array(images.reshape(-1, 1, 28, 28).astype(np.float32) / 255.0)
    predicted = net(x).argmax(axis=1).asnumpy()
    return float((predicted == labels).mean())


@pytest.fixture(scope="module")
def trained(tiny_mnist, tmp_path_factory):
    """One 3-epoch single-process run on the tiny data set, shared by the checks below."""
    workdir = tmp_path_factory.mktemp("trained")
    job = run_mnist(workdir, ["--epochs", "3", "--batch_size", "32", "--log-interval", "5", "--lr", "0.02"],
                    env=channels_env(tiny_mnist))
    assert job.returncode == 0, job.explain()
    return job


def test_trains_and_exports_a_model_mxnet_can_load(trained, tiny_mnist):
    files = sorted(os.listdir(trained.model_dir))
    assert files == ["metrics.json", "model-0000.params", "model-symbol.json"]  # no staging leftovers
    metrics = json.loads((trained.model_dir / "metrics.json").read_text())
    assert metrics["world_size"] == 1 and metrics["epochs"] == 3 and metrics["epochs_run"] == 3
    assert metrics["samples_per_sec"] > 0
    mx, net = load_exported(trained.model_dir)
    accuracy = accuracy_of(mx, net, tiny_mnist)
    # The loaded model is the trained one: it scores exactly what training reported on the same test set.
    assert accuracy == pytest.approx(metrics["val_accuracy"], abs=1e-9)
    assert accuracy > 0.5  # 600 samples x 3 epochs learn something (chance is 0.1)


def test_metric_definitions_match_the_real_log(trained):
    lines = epoch_lines(trained.stdout)
    assert len(lines) == 3
    history = json.loads((trained.model_dir / "metrics.json").read_text())["history"]
    keys = {"train:loss": "train_loss", "train:accuracy": "train_accuracy",
            "validation:accuracy": "val_accuracy", "train:samples_per_sec": "samples_per_sec"}
    assert {d["Name"] for d in METRIC_DEFINITIONS} == set(keys)
    for definition in METRIC_DEFINITIONS:
        # SageMaker applies each regex to every log line and takes group 1.
        values = [float(m.group(1)) for line in trained.stdout.splitlines()
                  for m in [re.search(definition["Regex"], line)] if m]
        want = [h[keys[definition["Name"]]] for h in history]
        assert values == pytest.approx(want, rel=1e-3, abs=1e-3), definition
    # mpirun --tag-output prefixes lines; the regexes still match
    tagged = "[1,0]<stdout>:" + lines[-1]
    assert all(re.search(d["Regex"], tagged) for d in METRIC_DEFINITIONS)


def test_progress_lines_are_not_mistaken_for_epoch_metrics(trained):
    progress = [line for line in trained.stdout.splitlines() if re.match(r"epoch=\d+ batch=", line)]
    assert progress, trained.stdout
    for line in progress:
        assert not any(re.search(d["Regex"], line) for d in METRIC_DEFINITIONS), line


def test_keeps_the_newest_two_checkpoints(trained):
    names = sorted(os.listdir(trained.checkpoint_dir))
    exts = ("json", "params", "states")
    assert names == [f"checkpoint-epoch-{e:04d}.{ext}" for e in (2, 3) for ext in exts]
    state = json.loads((trained.checkpoint_dir / "checkpoint-epoch-0003.json").read_text())
    assert state["epoch"] == 3 and state["batch"] is None


def test_writes_tensorboard_scalars(trained):
    tags = read_tensorboard_tags(trained.workdir / "tensorboard")
    for tag in ("train/loss", "train/accuracy", "validation/accuracy", "train/learning_rate",
                "train/samples_per_sec"):
        assert [step for step, _ in tags[tag]] == [1, 2, 3], tag
    assert tags["train/learning_rate"][0][1] == pytest.approx(0.02)


def test_resume_continues_at_the_next_epoch_with_its_own_learning_rate_and_ranks(tiny_mnist, tmp_path):
    args = ["--batch-size", "32", "--log-interval", "0", "--tensorboard", "false"]
    first = run_mnist(tmp_path, ["--epochs", "2", "--lr", "0.02", *args], env=channels_env(tiny_mnist))
    assert first.returncode == 0, first.explain()
    checkpoints = tmp_path / "checkpoints"
    assert optimizer_learning_rate(checkpoints / "checkpoint-epoch-0002.states") == pytest.approx(0.02)  # 0.02 x 1
    # Resumed on 2 ranks at --lr 0.05: --lr per rank x ranks is 0.1, not the checkpoint's optimizer's 0.02.
    second = run_mnist(tmp_path, ["--epochs", "3", "--lr", "0.05", *args], env=channels_env(tiny_mnist), ranks=2)
    assert f"resumed from checkpoint {checkpoints / 'checkpoint-epoch-0002'}.params at epoch 3" in second.stdout
    assert [line.split()[0] for line in epoch_lines(second.stdout)] == ["epoch=3"], second.explain()
    assert (checkpoints / "checkpoint-epoch-0002.params").exists()  # epochs 2 and 3 are the newest two
    assert optimizer_learning_rate(checkpoints / "checkpoint-epoch-0003.states") == pytest.approx(0.1)
    metrics = json.loads((tmp_path / "model" / "metrics.json").read_text())
    assert second.returncode == 0 and metrics["epochs_run"] == 1 and metrics["resumed_from_epoch"] == 3
    # Nothing left to train: the exported model must be exactly checkpoint 3's weights.
    third = run_mnist(tmp_path, ["--epochs", "3", *args], env=channels_env(tiny_mnist))
    assert third.returncode == 0, third.explain()
    assert "at epoch 4" in third.stdout and not epoch_lines(third.stdout)
    mx, exported = load_exported(tmp_path / "model")
    from_checkpoint = build_net(mx)
    from_checkpoint.load_parameters(str(tmp_path / "checkpoints" / "checkpoint-epoch-0003.params"))
    images, _ = synth_data.read_dataset(str(tiny_mnist / "test"))
    x = mx.nd.array(images[:50].reshape(-1, 1, 28, 28).astype(np.float32) / 255.0)
    np.testing.assert_allclose(exported(x).asnumpy(), from_checkpoint(x).asnumpy(), rtol=1e-5, atol=1e-5)


def test_resume_false_starts_over(tiny_mnist, tmp_path):
    args = ["--batch-size", "64", "--log-interval", "0", "--tensorboard", "false", "--epochs", "1"]
    assert run_mnist(tmp_path, args, env=channels_env(tiny_mnist)).returncode == 0
    again = run_mnist(tmp_path, [*args, "--resume", "FALSE"], env=channels_env(tiny_mnist))
    assert again.returncode == 0 and "resumed" not in again.stdout
    assert [line.split()[0] for line in epoch_lines(again.stdout)] == ["epoch=1"]


def test_save_checkpoints_false_writes_none(tiny_mnist, tmp_path):
    job = run_mnist(tmp_path, ["--epochs", "1", "--save_checkpoints", "0", "--tensorboard", "false"],
                    env=channels_env(tiny_mnist))
    assert job.returncode == 0, job.explain()
    assert not (tmp_path / "checkpoints").exists() or not os.listdir(tmp_path / "checkpoints")


@pytest.mark.slow
def test_sigterm_checkpoints_mid_epoch_exits_143_and_resumes_there(small_mnist, tmp_path):
    args = ["--epochs", "1", "--batch-size", "32", "--log-interval", "10", "--tensorboard", "false"]
    job = start_mnist(tmp_path, args, env=channels_env(small_mnist))
    try:
        job.wait_for(r"^epoch=1 batch=20/", timeout=90)
        job.proc.send_signal(signal.SIGTERM)
        job.wait(60)  # a generous bound: SageMaker sends SIGKILL 120 s after its SIGTERM
    finally:
        job.kill()
    assert job.returncode == 143, job.explain()
    assert "stopped by SIGTERM" in job.stdout
    jsons = sorted(p.name for p in (tmp_path / "checkpoints").glob("*.json"))
    assert len(jsons) == 1 and re.fullmatch(r"checkpoint-epoch-0001-batch-\d{6}\.json", jsons[0]), jsons
    stopped_at = json.loads((tmp_path / "checkpoints" / jsons[0]).read_text())["batch"]
    assert 20 <= stopped_at < 188  # 6000 / 32 = 188 batches in the epoch
    assert not (tmp_path / "model" / "model-symbol.json").exists()

    resumed = run_mnist(tmp_path, args, env=channels_env(small_mnist))
    assert resumed.returncode == 0, resumed.explain()
    assert f"at epoch 1 batch {stopped_at}" in resumed.stdout
    progress = [int(m.group(1))
                for m in re.finditer(r"^epoch=1 batch=(\d+)/188", resumed.stdout, re.MULTILINE)]
    assert progress and progress[0] > stopped_at  # the finished batches are not repeated
    assert (tmp_path / "model" / "model-symbol.json").exists()


def test_pipe_mode_single_process_reads_one_fifo_per_epoch(trained, tiny_mnist, tmp_path):
    """One process, channel `train` in Pipe mode: FIFOs train_0, train_1, train_2 (one per epoch)."""
    rec = tmp_path / "rec"
    assert synth_data.main(["shard", str(tiny_mnist / "train"), str(rec), "--shards", "1"]) == 0
    workdir = tmp_path / "job"
    feeder = PipeFeeder(workdir / "input" / "data", {"train": rec / "train_0" / "train_0.rec"}, passes=3)
    config = {"train": {"TrainingInputMode": "Pipe"}, "test": {"TrainingInputMode": "File"}}
    env = {"SM_INPUT_DATA_CONFIG": json.dumps(config), "SM_CHANNEL_TEST": str(tiny_mnist / "test")}
    try:
        # the same hyperparameters as the File-mode `trained` run
        job = run_mnist(workdir, ["--epochs", "3", "--batch_size", "32", "--log-interval", "5",
                                  "--lr", "0.02", "--tensorboard", "false"], env=env)
    finally:
        feeder.close()
    assert job.returncode == 0, job.explain()
    assert feeder.fed == {"train": 3} and not feeder.errors
    assert "train=Pipe channels train..train" in job.stdout
    # Same samples in the same order as the File-mode run, so the same training, epoch by epoch.
    pipe_history = json.loads((workdir / "model" / "metrics.json").read_text())["history"]
    file_history = json.loads((trained.model_dir / "metrics.json").read_text())["history"]
    assert [h["train_loss"] for h in pipe_history] == pytest.approx([h["train_loss"] for h in file_history])
    assert [h["val_accuracy"] for h in pipe_history] == [h["val_accuracy"] for h in file_history]


def test_help_lists_hyperparameters_with_defaults():
    result = subprocess.run([sys.executable, str(MNIST), "--help"], check=False, capture_output=True, text=True)
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for flag, default in (("--epochs", "5"), ("--batch-size", "64"), ("--lr", "0.01"), ("--momentum", "0.9"),
                          ("--wd", "0.0001"), ("--seed", "42"), ("--log-interval", "100"),
                          ("--save-checkpoints", "True")):
        assert flag in text
        assert re.search(re.escape(flag) + r" \S+ .*?\(default: " + re.escape(default) + r"\)", text), flag
    assert "--checkpoint-dir" in text and "checkpointconfig.json's LocalPath, else /opt/ml/checkpoints" in text
    assert "tensorboardoutputconfig.json's LocalPath, else /opt/ml/output/tensorboard" in text
    assert "--model-dir" in text and "SM_MODEL_DIR" in text


# ---- bad input: exit 2, one line "mnist: error: ..." naming problem and path, before mxnet is imported


def write_idx(directory, images, labels, stem="train"):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{stem}-images-idx3-ubyte").write_bytes(
        struct.pack(">IIII", 0x803, len(images), 28, 28) + np.asarray(images, np.uint8).tobytes())
    (directory / f"{stem}-labels-idx1-ubyte").write_bytes(
        struct.pack(">II", 0x801, len(labels)) + np.asarray(labels, np.uint8).tobytes())


def bad_empty(tmp_path, good):
    (tmp_path / "train").mkdir()
    return ({"SM_CHANNEL_TRAIN": str(tmp_path / "train")}, [],
            ["channel 'train' is empty", str(tmp_path / "train")])


def bad_missing(tmp_path, good):
    return ({"SM_CHANNEL_TRAIN": str(tmp_path / "nowhere")}, [],
            ["missing channel 'train'", str(tmp_path / "nowhere")])


def bad_missing_test(tmp_path, good):
    # no SM_CHANNEL_TEST, no <input>/data/test
    return {"SM_CHANNEL_TRAIN": str(good / "train")}, [], ["missing channel 'test'", "data/test"]


def bad_format(tmp_path, good):
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "digits.csv").write_text("label,pixel0\n3,0\n")
    return ({"SM_CHANNEL_TRAIN": str(tmp_path / "train")}, [],
            ["unrecognised data format", str(tmp_path / "train"), "digits.csv"])


def bad_count(tmp_path, good):
    write_idx(tmp_path / "train", np.zeros((10, 28, 28)), [1] * 9)
    return ({"SM_CHANNEL_TRAIN": str(tmp_path / "train")}, [],
            ["images/labels count mismatch", str(tmp_path / "train"), "10 images, 9 labels"])


def bad_labels_idx(tmp_path, good):
    write_idx(tmp_path / "train", np.zeros((10, 28, 28)), [1] * 9 + [10])
    return ({"SM_CHANNEL_TRAIN": str(tmp_path / "train")}, [],
            ["labels out of range 0..9", str(tmp_path / "train" / "train-images-idx3-ubyte")])


def bad_labels_npz(tmp_path, good):
    (tmp_path / "test").mkdir()
    np.savez(tmp_path / "test" / "test.npz", data=np.zeros((5, 28, 28), np.uint8), labels=[0, 1, 2, 12, 3])
    return ({"SM_CHANNEL_TRAIN": str(good / "train"), "SM_CHANNEL_TEST": str(tmp_path / "test")}, [],
            ["labels out of range 0..9", str(tmp_path / "test" / "test.npz"), "12"])


def bad_npz_keys(tmp_path, good):
    (tmp_path / "train").mkdir()
    np.savez(tmp_path / "train" / "a.npz", pixels=np.zeros((5, 28, 28), np.uint8))
    return ({"SM_CHANNEL_TRAIN": str(tmp_path / "train")}, [],
            ["unrecognised .npz layout", str(tmp_path / "train" / "a.npz"), "pixels"])


def bad_image_size(tmp_path, good):
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "train-images-idx3-ubyte").write_bytes(
        struct.pack(">IIII", 0x803, 1, 32, 32) + bytes(1024))
    (tmp_path / "train" / "train-labels-idx1-ubyte").write_bytes(struct.pack(">II", 0x801, 1) + bytes(1))
    return ({"SM_CHANNEL_TRAIN": str(tmp_path / "train")}, [],
            ["32x32, expected 28x28", str(tmp_path / "train")])


def bad_boolean(tmp_path, good):
    return channels_env(good), ["--save_checkpoints", "yes"], ["--save-checkpoints", "'yes'"]


def bad_number(tmp_path, good):
    return channels_env(good), ["--batch-size", "0"], ["--batch-size", "at least 1"]


def bad_unknown_key(tmp_path, good):
    return (channels_env(good), ["--epoch", "2", "--learning-rate", "3"],
            ["unrecognized arguments", "--epoch 2", "--learning-rate"])


def bad_data_config(tmp_path, good):
    return (dict(channels_env(good), SM_INPUT_DATA_CONFIG="{not json"), [],
            ["SM_INPUT_DATA_CONFIG", "not valid JSON"])


def bad_pipe_fifo_contents(tmp_path, good):
    # A "FIFO" (a plain file here) that is not RecordIO: caught while reading pass 0, before MPI init.
    data = tmp_path / "input" / "data"
    data.mkdir(parents=True)
    (data / "train_0").write_bytes(b"this is not recordio")
    config = {"train": {"TrainingInputMode": "Pipe"}}
    return ({"SM_INPUT_DATA_CONFIG": json.dumps(config), "SM_CHANNEL_TEST": str(good / "test"),
             "SM_INPUT_DIR": str(tmp_path / "input")}, [],
            ["not a RecordIO stream", str(data / "train_0")])


BAD_INPUTS = [bad_empty, bad_missing, bad_missing_test, bad_format, bad_count, bad_labels_idx, bad_labels_npz,
              bad_npz_keys, bad_image_size, bad_boolean, bad_number, bad_unknown_key, bad_data_config,
              bad_pipe_fifo_contents]


@pytest.mark.parametrize("case", BAD_INPUTS, ids=[c.__name__ for c in BAD_INPUTS])
def test_bad_input_fails_fast_with_one_line_and_exit_2(case, tiny_mnist, tmp_path):
    env, args, expected = case(tmp_path, tiny_mnist)
    workdir = tmp_path / "job"
    workdir.mkdir()
    # Fails fast: before mxnet is imported (any import of it raises here), not after a timed bound.
    result = subprocess.run([sys.executable, str(MNIST), *args], env=base_env(workdir, mxnet_blocked_env(workdir, env)),
                            cwd=workdir, check=False, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, f"{result.returncode}\n{result.stdout}\n{result.stderr}"
    errors = [line for line in result.stderr.splitlines() if "error" in line]
    assert len(errors) == 1 and errors[0].startswith("mnist: error: "), result.stderr
    for text in expected:
        assert text in errors[0], (text, errors[0])
    assert "Traceback" not in result.stderr
    assert "mxnet" not in result.stdout  # nothing started training
    assert not (workdir / "model").exists()


def test_channel_with_both_standard_pairs_uses_its_own(tmp_path):
    """The stock MNIST download (train-* and t10k-* together) can be given as both channels."""
    source = make_mnist(tmp_path / "d", 30, 20)
    both = tmp_path / "both"
    both.mkdir()
    for channel in ("train", "test"):
        for path in (source / channel).iterdir():
            os.link(path, both / path.name)
    _, labels, _ = mnist_data.load_channel("mnist", str(both), "train", "train")
    assert len(labels) == 30
    _, labels, _ = mnist_data.load_channel("mnist", str(both), "test", "test")
    assert len(labels) == 20


def run_without_horovod(workdir, args, env):
    """mnist.py where `import horovod` fails (sys.modules entry None), as on a plain mxnet install."""
    # sys.path[0] = the script's dir, as `python mnist.py` would have it
    code = ("import os, runpy, sys; sys.modules['horovod'] = None; sys.argv = sys.argv[1:]; "
            "sys.path.insert(0, os.path.dirname(sys.argv[0])); "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    workdir.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-c", code, str(MNIST), *args], env=base_env(workdir, env),
                          cwd=workdir, check=False, capture_output=True, text=True, timeout=120)


def test_single_process_runs_without_horovod(tiny_mnist, tmp_path):
    result = run_without_horovod(tmp_path, ["--epochs", "1", "--tensorboard", "false"],
                                 channels_env(tiny_mnist))
    assert result.returncode == 0, result.stderr
    assert "world_size=1" in result.stdout
    assert (tmp_path / "model" / "model-symbol.json").exists()


def test_several_ranks_without_horovod_is_an_error(tiny_mnist, tmp_path):
    env = dict(channels_env(tiny_mnist), OMPI_COMM_WORLD_RANK="0", OMPI_COMM_WORLD_SIZE="2")
    result = run_without_horovod(tmp_path, ["--epochs", "1"], env)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(
        "mnist: error: 2 ranks were launched but horovod.mxnet cannot be imported")
