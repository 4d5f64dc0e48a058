"""synth-data and mnist_files: the files it writes load back (through mnist_files, the one MNIST reader the
tool and the mnist program share, and through mx.recordio)."""

import gzip
import io
import os
import struct
import subprocess
import sys

import pytest
from sagemaker_mxnet_data import mnist_files, recordio, synth_data

from programs.helpers import CONTAINER_SRC, DEV_VENV_REASON, make_mnist

# A Python without numpy (e.g. the lint/tools venv) skips this module instead of failing to collect it.
np = pytest.importorskip("numpy", reason=DEV_VENV_REASON)

IDX_NAMES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def read_idx_by_hand(path):
    """Independent IDX parser (not the code under test): magic, dims, body."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    assert (zero, dtype) == (0, 0x08)
    dims = struct.unpack(f">{ndim}I", data[4:4 + 4 * ndim])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


@pytest.mark.parametrize("fmt", ["idx", "idx.gz"])
def test_mnist_idx_files_have_standard_names_and_valid_headers(tmp_path, fmt):
    out = make_mnist(tmp_path / "d", 120, 40, fmt=fmt)
    suffix = ".gz" if fmt == "idx.gz" else ""
    for channel, count in (("train", 120), ("test", 40)):
        images_name, labels_name = IDX_NAMES[channel]
        assert sorted(os.listdir(out / channel)) == sorted([images_name + suffix, labels_name + suffix])
        images = read_idx_by_hand(out / channel / (images_name + suffix))
        labels = read_idx_by_hand(out / channel / (labels_name + suffix))
        assert images.shape == (count, 28, 28)
        assert labels.shape == (count,)
        assert labels.max() <= 9
        assert images.max() > 200  # real strokes, not an empty canvas
        # every class shows up, and an image has a plausible amount of ink
        assert len(np.unique(labels)) == 10 or count < 50
        ink = (images > 128).mean(axis=(1, 2))
        assert 0.03 < ink.mean() < 0.4


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = make_mnist(tmp_path / "a", 50, 10, seed=3)
    b = make_mnist(tmp_path / "b", 50, 10, seed=3)
    c = make_mnist(tmp_path / "c", 50, 10, seed=4)
    name = "train/train-images-idx3-ubyte"
    assert (a / name).read_bytes() == (b / name).read_bytes()
    assert (a / name).read_bytes() != (c / name).read_bytes()
    # train and test are drawn from different streams: no test image is a copy of a train image
    train = read_idx_by_hand(a / name).reshape(50, -1)
    test = read_idx_by_hand(a / "test/t10k-images-idx3-ubyte").reshape(10, -1)
    assert not any((train == row).all(axis=1).any() for row in test)


@pytest.mark.parametrize("fmt", ["idx.gz", "npz", "recordio"])
def test_every_format_holds_the_same_data_as_idx(tmp_path, fmt):
    reference = make_mnist(tmp_path / "idx", 80, 30, seed=7, fmt="idx")
    other = make_mnist(tmp_path / fmt, 80, 30, seed=7, fmt=fmt)
    for channel in ("train", "test"):
        want_images, want_labels = mnist_files.read_directory(str(reference / channel), channel, channel)
        got_images, got_labels = mnist_files.read_directory(str(other / channel), channel, channel)
        np.testing.assert_array_equal(got_labels, want_labels)
        np.testing.assert_array_equal(got_images, want_images)
        # and the data tool's own reader agrees
        tool_images, tool_labels = synth_data.read_dataset(str(other / channel))
        np.testing.assert_array_equal(tool_images, want_images)
        np.testing.assert_array_equal(tool_labels, want_labels)


def test_npz_has_data_and_labels_arrays(tmp_path):
    out = make_mnist(tmp_path / "d", 30, 10, fmt="npz")
    with np.load(out / "train" / "train.npz") as npz:
        assert sorted(npz.files) == ["data", "labels"]
        assert npz["data"].shape == (30, 28, 28) and npz["data"].dtype == np.uint8
        assert npz["labels"].shape == (30,)


def test_recordio_reads_back_with_mxnet(tmp_path):
    mx = pytest.importorskip("mxnet")
    out = make_mnist(tmp_path / "d", 60, 10, fmt="recordio")
    want_images, want_labels = synth_data.read_dataset(str(out / "train"))
    reader = mx.recordio.MXRecordIO(str(out / "train" / "train.rec"), "r")
    got = []
    while True:
        record = reader.read()
        if record is None:
            break
        header, payload = mx.recordio.unpack(record)
        got.append((header.label, header.id, np.frombuffer(payload, np.uint8).reshape(28, 28)))
    reader.close()
    assert len(got) == 60
    for index, (label, record_id, image) in enumerate(got):
        assert label == want_labels[index]
        assert record_id == index
        np.testing.assert_array_equal(image, want_images[index])


def _payloads_with_magic():
    magic = struct.pack("<I", recordio.RECORDIO_MAGIC)
    return [
        b"",
        b"abc",
        magic,  # the whole record is the magic word
        magic + b"tail",
        b"1234" + magic + b"5678" + magic + b"9",  # two aligned magics: start/middle/end parts
        b"12" + magic + b"34",  # unaligned: must NOT be split
        bytes(range(256)) * 3 + magic,
    ]


def test_recordio_framing_matches_mxnet_both_ways(tmp_path):
    """Records containing the magic word at aligned offsets are split by mxnet's writer; ours must agree."""
    mx = pytest.importorskip("mxnet")
    payloads = _payloads_with_magic()
    ours = tmp_path / "ours.rec"
    with open(ours, "wb") as f:
        writer = recordio.RecordIOWriter(f)
        for payload in payloads:
            writer.write(payload)
    theirs = tmp_path / "theirs.rec"
    writer = mx.recordio.MXRecordIO(str(theirs), "w")
    for payload in payloads:
        writer.write(payload)
    writer.close()
    assert ours.read_bytes() == theirs.read_bytes()
    reader = mx.recordio.MXRecordIO(str(ours), "r")
    assert [reader.read() for _ in payloads] == payloads
    reader.close()
    with open(theirs, "rb") as f:
        assert list(recordio.iter_records(f)) == payloads


def test_ir_header_matches_mxnet_pack():
    mx = pytest.importorskip("mxnet")
    pixels = bytes(range(200)) * 4
    packed = mx.recordio.pack(mx.recordio.IRHeader(0, 7.0, 12, 0), pixels[:784])
    assert recordio.pack_ir_record(7, 12, pixels[:784]) == packed
    assert recordio.unpack_ir_record(packed) == (7.0, pixels[:784])
    # label arrays (flag > 0): the first label is the class
    packed = mx.recordio.pack(mx.recordio.IRHeader(0, [3.0, 1.0], 5, 0), b"xyz")
    assert recordio.unpack_ir_record(packed) == (3.0, b"xyz")


@pytest.mark.parametrize("fmt", ["recordio", "idx", "npz"])
def test_shard_splits_round_robin_into_per_rank_channels(tmp_path, fmt):
    source = make_mnist(tmp_path / "src", 101, 10, fmt="idx")
    assert synth_data.main(["shard", str(source / "train"), str(tmp_path / "shards"), "--shards", "3",
                          "--format", fmt]) == 0
    assert sorted(os.listdir(tmp_path / "shards")) == ["train_0", "train_1", "train_2"]
    all_images, all_labels = synth_data.read_dataset(str(source / "train"))
    for shard in range(3):
        shard_dir = tmp_path / "shards" / f"train_{shard}"
        if fmt == "recordio":
            assert os.listdir(shard_dir) == [f"train_{shard}.rec"]  # one file per shard for Pipe mode
        images, labels = mnist_files.read_directory(str(shard_dir), f"train_{shard}", "train")
        np.testing.assert_array_equal(labels, all_labels[shard::3])
        np.testing.assert_array_equal(images, all_images[shard::3])


def test_shard_test_channel_keeps_t10k_names(tmp_path):
    source = make_mnist(tmp_path / "src", 20, 20)
    assert synth_data.main(["shard", str(source / "test"), str(tmp_path / "out"), "--shards", "2",
                          "--channel", "test", "--format", "idx"]) == 0
    names = sorted(os.listdir(tmp_path / "out" / "test_1"))
    assert names == ["t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


def run_tool(*args, block_mxnet=False):
    prelude = "import sys; sys.modules['mxnet'] = None; " if block_mxnet else "import sys; "
    code = prelude + "from sagemaker_mxnet_data.synth_data import main; sys.exit(main(sys.argv[1:]))"
    env = dict(os.environ, PYTHONPATH=str(CONTAINER_SRC))
    return subprocess.run([sys.executable, "-c", code, *args], check=False, capture_output=True, text=True,
                          env=env)


def test_runs_without_mxnet(tmp_path):
    """sys.modules['mxnet'] = None makes any `import mxnet` fail: the tool must not need it."""
    result = run_tool("mnist", str(tmp_path / "d"), "--train", "20", "--test", "5", "--format", "recordio",
                      block_mxnet=True)
    assert result.returncode == 0, result.stderr
    result = run_tool("shard", str(tmp_path / "d" / "train"), str(tmp_path / "s"), "--shards", "2",
                      block_mxnet=True)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "s" / "train_1" / "train_1.rec").stat().st_size > 0


def test_cli_errors_are_one_line_exit_2(tmp_path):
    missing = tmp_path / "nope"
    result = run_tool("shard", str(missing), str(tmp_path / "out"), "--shards", "2")
    assert result.returncode == 2
    assert result.stderr.strip() == f"synth-data: error: input dir does not exist: {missing}"
    result = run_tool("shard", str(tmp_path), str(tmp_path / "out"), "--shards", "0")
    assert result.returncode == 2 and "--shards must be at least 1" in result.stderr
    result = run_tool("mnist", str(tmp_path / "x"), "--format", "csv")
    assert result.returncode == 2 and result.stderr.startswith("synth-data: error: argument --format")
    result = run_tool("bogus")
    assert result.returncode == 2 and result.stderr.startswith("synth-data: error:")


def test_help_lists_subcommands():
    result = run_tool("--help")
    assert result.returncode == 0
    assert "mnist" in result.stdout and "shard" in result.stdout


def test_truncated_recordio_is_an_error_naming_the_source():
    stream = io.BytesIO(struct.pack("<II", recordio.RECORDIO_MAGIC, 100) + b"short")
    with pytest.raises(mnist_files.MnistFileError, match="truncated.*: x.rec"):
        mnist_files.read_recordio(stream, "x.rec")


def test_sharding_a_stock_mnist_dir_takes_the_channels_own_pair(tmp_path):
    """A directory with both train-* and t10k-* pairs (the stock download): `shard --channel test` shards the
    t10k pair only, as the mnist program reads it (the tool used to concatenate both pairs)."""
    source = make_mnist(tmp_path / "src", 30, 10)
    both = tmp_path / "both"
    both.mkdir()
    for channel in ("train", "test"):
        for path in (source / channel).iterdir():
            (both / path.name).write_bytes(path.read_bytes())
    for channel, count in (("train", 30), ("test", 10)):
        assert synth_data.main(["shard", str(both), str(tmp_path / channel), "--shards", "2", "--channel", channel,
                              "--format", "npz"]) == 0
        counts = [len(np.load(tmp_path / channel / f"{channel}_{k}" / f"{channel}_{k}.npz")["labels"])
                  for k in range(2)]
        assert sum(counts) == count
