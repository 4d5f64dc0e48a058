"""MNIST with Gluon + Horovod: the smoke-test workload of the image (``sagemaker_program=mnist``).

Run once per rank by the launcher under mpirun (``python /opt/entrypoints/mnist.py --key value ...``)
or directly as a single process. ``--help`` lists the hyperparameters; ``--batch_size`` and
``--batch-size`` are the same key; booleans are true/false/1/0.

Data (channels ``train`` and ``test``)
    File mode: a channel dir holds any of
      * MNIST IDX files, plain or gzip (train-images-idx3-ubyte, t10k-labels-idx1-ubyte.gz, ...):
        recognised by their magic numbers, not their names; image and label files pair up by name.
        A channel holding both the train-* and t10k-* pairs uses the pair matching the channel.
      * ``.npz`` with arrays ``data`` (N, 28, 28) / (N, 784) / (N, 1, 28, 28) and ``labels`` (N,)
        (also accepted: x/y, x_train/y_train or x_test/y_test, images/labels, image/label);
      * RecordIO files (format below).
    All recognised files of a channel are read (in name order) and concatenated. Rank r of N then
    uses samples r, r+N, r+2N, ... of that data set. A channel whose S3DistributionType is
    ShardedByS3Key (SM_INPUT_DATA_CONFIG) holds a different part on each host: it is split by local
    rank instead (local rank l of L ranks per host uses samples l, l+L, ... of its host's part), so
    the job trains on every host's part once per epoch; rank 0 logs one line per channel saying which
    split was used. A sharded ``test`` channel works the same way: each host scores its own part and
    the counts are summed, so val_accuracy covers the union of the hosts' parts. Alternatively per-rank File channels
    train_0..train_{N-1} (no ``train`` channel): rank r uses all of train_r.
    Every rank runs the same number of steps per epoch (the smallest shard decides); shards are
    reshuffled every epoch, so samples past that count are still used in other epochs.

    Pipe mode (SM_INPUT_DATA_CONFIG marks ``train_0`` or ``train`` as TrainingInputMode "Pipe"):
      One FIFO has exactly one reader, so rank r reads its own channel ``train_<r>`` (a single
      process may use ``train``) from ``$SM_INPUT_DIR/data/train_<r>_<k>``, k = 0, 1, ... for the
      k-th epoch this process runs (a resumed job starts again at k = 0). Channels train_0 ..
      train_{N-1} must all be configured, else the job fails before training (no per-rank channel
      at all reads "have none"). Each epoch's FIFO is read to its end into memory, then trained on
      (MNIST-sized data). Test data: the ``test`` channel in File mode when there is one, else
      per-rank Pipe channels ``test_<r>`` read the same way (a fresh pass per validation).
      Record format: dmlc RecordIO framing (uint32 magic 0xced7230a, uint32 lrecord = cflag << 29 |
      length, payload padded to 4 bytes; cflag 1/2/3 split records at an aligned magic word, as
      mx.recordio writes them). Each payload is ``mx.recordio.pack(IRHeader(0, label, id, 0),
      pixels)``: a 24-byte header (struct "IfQQ": flag, float label, id, id2) then 784 raw uint8
      pixels (28x28, row-major). `synth-data shard --format recordio` writes exactly this.

Outputs
    * Rank 0 logs one line per epoch (regexes: METRIC_DEFINITIONS)::
          epoch=3 train_loss=0.1234 train_accuracy=0.9712 val_accuracy=0.9801 samples_per_sec=1234.5 ...
      samples_per_sec counts all ranks' training samples over the epoch's training time, train_samples
      the samples all ranks trained on in the epoch.
      val_accuracy covers the whole test set: every rank scores its shard, correct/total are summed.
    * Rank 0 exports the model to the model dir: model-symbol.json + model-0000.params
      (``mx.gluon.nn.SymbolBlock.imports(symbol, ["data"], params)``) and metrics.json.
    * Rank 0 checkpoints after every epoch to the checkpoint dir: checkpoint-epoch-NNNN.params
      (+ .states optimizer state, + .json, written last), keeping the newest 2. On start the newest
      checkpoint there is resumed (rank 0 reads it, all ranks receive it by broadcast).
    * Rank 0 writes TensorBoard scalars with tensorboardX if it is installed.

SIGTERM: the ranks agree on a step to stop at (within a batch of the signal), rank 0 writes a
checkpoint (``checkpoint-epoch-NNNN-batch-BBBBBB``, resumable mid-epoch), and all exit 143. One rank
receiving the signal is enough. While waiting for a Pipe FIFO between epochs it exits 143 at once (the
epoch's checkpoint is already written). Note for launchers: mpirun itself, on SIGTERM, signals the
ranks only after ``odls_base_sigkill_timeout`` (1 s) and SIGKILLs them 1 s later; forward SIGTERM to
the rank processes directly to give them time to checkpoint.

Exit codes: 0 done; 2 bad hyperparameter or input, one line ``mnist: error: ...`` on stderr, normally
before any MPI collective; 1 unexpected failure (traceback, then ``mnist: error: ...``); 143 stopped
by SIGTERM.
"""

import gzip
import math
import os
import struct
import sys
import tempfile
import time
import traceback
import zipfile

import channel_sharding
import sm_common as smc

PROG = "mnist"
NUM_CLASSES = 10
IMAGE_SIDE = 28
IMAGE_BYTES = IMAGE_SIDE * IMAGE_SIDE
EVAL_BATCH_SIZE = 1000
PIPE_WAIT_SECONDS = 600  # how long a Pipe-mode FIFO may take to appear before the job fails

_NUMBER = r"([0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"
# For the estimator's metric_definitions. Each regex matches only the per-epoch line (batch progress
# lines start "epoch=N batch=..."), and captures one number.
METRIC_DEFINITIONS = [
    {"Name": "train:loss", "Regex": r"epoch=\d+ train_loss=" + _NUMBER},
    {"Name": "train:accuracy", "Regex": r"epoch=\d+ train_loss=\S+ train_accuracy=" + _NUMBER},
    {"Name": "validation:accuracy",
     "Regex": r"epoch=\d+ train_loss=\S+ train_accuracy=\S+ val_accuracy=" + _NUMBER},
    {"Name": "train:samples_per_sec",
     "Regex": r"epoch=\d+ train_loss=\S+ train_accuracy=\S+ val_accuracy=\S+ samples_per_sec=" + _NUMBER},
]

IDX_IMAGES_MAGIC = 0x00000803  # unsigned byte, 3 dimensions
IDX_LABELS_MAGIC = 0x00000801  # unsigned byte, 1 dimension
_NPZ_COMMON_KEYS = [("x", "y"), ("images", "labels"), ("image", "label")]
_NPZ_KEY_PAIRS = {  # (images, labels) array names, first match wins
    "train": [("data", "labels"), ("x_train", "y_train"), *_NPZ_COMMON_KEYS],
    "test": [("data", "labels"), ("x_test", "y_test"), *_NPZ_COMMON_KEYS],
}


def build_parser():
    parser = smc.HyperparameterParser(
        prog=PROG, description="Train a LeNet-style CNN on MNIST with Horovod (one process per rank).",
        formatter_class=smc.DefaultsHelpFormatter)
    p = parser.add_argument
    p("--epochs", type=smc.positive_int, default=5, help="number of epochs")
    p("--batch-size", type=smc.positive_int, default=64, help="batch size per rank")
    p("--lr", type=smc.non_negative_float, default=0.01,
      help="learning rate per rank; the optimizer uses lr x number of ranks")
    p("--momentum", type=smc.non_negative_float, default=0.9, help="SGD momentum")
    p("--wd", type=smc.non_negative_float, default=0.0001, help="weight decay")
    p("--seed", type=int, default=42, help="random seed (initialisation, shuffling)")
    p("--log-interval", type=int, default=100, help="log progress every N batches (0: only per epoch)")
    p("--train-dir", default=None, help="train channel dir [default: $SM_CHANNEL_TRAIN or "
      "$SM_INPUT_DIR/data/train]")
    p("--test-dir", default=None,
      help="test channel dir [default: $SM_CHANNEL_TEST or $SM_INPUT_DIR/data/test]")
    p("--model-dir", default=None,
      help=f"model output dir [default: $SM_MODEL_DIR or {smc.SM_MODEL_DIR_DEFAULT}]")
    p("--checkpoint-dir", default=None,
      help=f"checkpoint dir [default: $SM_CHECKPOINT_DIR or {smc.SM_CHECKPOINT_DIR_DEFAULT}]")
    p("--save-checkpoints", type=smc.str2bool, default=True,
      help="checkpoint after every epoch and on SIGTERM")
    p("--resume", type=smc.str2bool, default=True,
      help="resume from the newest checkpoint in the checkpoint dir")
    p("--keep-checkpoints", type=smc.positive_int, default=2, help="how many checkpoints to keep")
    p("--tensorboard-dir", default=smc.SM_TENSORBOARD_DIR_DEFAULT, help="TensorBoard log dir")
    p("--tensorboard", type=smc.str2bool, default=True, help="write TensorBoard scalars (needs tensorboardX)")
    return parser


# --------------------------------------------------------------------------------------------
# Data


class Dataset:
    """Images as float32 (N, 1, 28, 28) in [0, 1] and labels as float32 (N,) (what the loss wants)."""

    def __init__(self, images, labels, source):
        self.images, self.labels, self.source = images, labels, source

    def __len__(self):
        return len(self.labels)


def _np():
    import numpy

    return numpy


def _peek(path, size=8):
    """First bytes of a file's content (decompressed if gzip) and whether it is gzip."""
    with open(path, "rb") as f:
        head = f.read(size)
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as f:
                return f.read(size), True
        except (OSError, EOFError) as exc:
            raise smc.EntrypointError(f"corrupt gzip file {path}: {exc}") from None
    return head, False


def classify_file(path):
    """'idx-images', 'idx-labels', 'npz', 'recordio' or None (unrecognised), by content."""
    head, _ = _peek(path)
    if len(head) >= 4:
        magic = struct.unpack(">I", head[:4])[0]
        if magic == IDX_IMAGES_MAGIC:
            return "idx-images"
        if magic == IDX_LABELS_MAGIC:
            return "idx-labels"
        if head[:4] == b"PK\x03\x04":
            return "npz"
        if struct.unpack("<I", head[:4])[0] == smc.RECORDIO_MAGIC:
            return "recordio"
    return None


def _pair_key(name):
    base = name.lower()
    base = base.removesuffix(".gz")
    for a, b in (("images", "*"), ("labels", "*"), ("image", "*"), ("label", "*"), ("idx3", "idx"),
                 ("idx1", "idx")):
        base = base.replace(a, b)
    return base


def _role_matches(name, role):
    name = os.path.basename(name).lower()
    return name.startswith("train") if role == "train" else name.startswith(("t10k", "test"))


def _list_files(directory):
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        found.extend(os.path.join(root, f) for f in sorted(files) if not f.startswith("."))
    return found


def load_channel(directory, channel, role):
    """Reads and validates a File-mode channel. Returns (images uint8/float, labels int64, description)."""
    np = _np()
    if not os.path.isdir(directory):
        raise smc.EntrypointError(f"missing channel '{channel}': directory {directory} does not exist")
    files = _list_files(directory)
    if not files:
        raise smc.EntrypointError(f"channel '{channel}' is empty: no files in {directory}")
    kinds = {path: classify_file(path) for path in files}
    recognised = [p for p, k in kinds.items() if k]
    if not recognised:
        listing = ", ".join(os.path.relpath(p, directory) for p in files[:5])
        listing += " ..." if len(files) > 5 else ""
        raise smc.EntrypointError(
            f"unrecognised data format in channel '{channel}' ({directory}): expected MNIST IDX files "
            f"(plain or .gz), .npz with 'data'/'labels' arrays, or RecordIO; found {listing}")
    for path, kind in kinds.items():
        if not kind:
            smc.warn(PROG, f"ignoring unrecognised file {path}")

    images_files = {_pair_key(os.path.basename(p)): p for p, k in kinds.items() if k == "idx-images"}
    labels_files = {_pair_key(os.path.basename(p)): p for p, k in kinds.items() if k == "idx-labels"}
    if len(images_files) == 1 and len(labels_files) == 1:
        # A lone pair belongs together whatever the names say.
        images_files = {"pair": next(iter(images_files.values()))}
        labels_files = {"pair": next(iter(labels_files.values()))}
    for key in sorted(set(images_files) ^ set(labels_files)):
        path = images_files.get(key) or labels_files.get(key)
        other = "labels" if key in images_files else "images"
        raise smc.EntrypointError(f"IDX file {path} has no matching {other} file in channel '{channel}'")
    pairs = sorted((images_files[k], labels_files[k]) for k in images_files)
    if len(pairs) > 1 and any(_role_matches(i, role) for i, _ in pairs):
        # The stock MNIST download has train-* and t10k-* side by side: take the channel's own.
        pairs = [pair for pair in pairs if _role_matches(pair[0], role)]

    parts = []
    for images_path, labels_path in pairs:
        images = _read_idx(images_path, 3)
        labels = _read_idx(labels_path, 1)
        _check_part(images, labels, f"{images_path} + {os.path.basename(labels_path)}")
        parts.append((images, labels))
    for path in sorted(p for p, k in kinds.items() if k == "npz"):
        parts.append(_read_npz(path, role))
    for path in sorted(p for p, k in kinds.items() if k == "recordio"):
        with open(path, "rb") as f:
            parts.append(read_recordio_stream(f, path))
    total = sum(len(labels) for _, labels in parts)
    if total == 0:
        raise smc.EntrypointError(f"channel '{channel}' is empty: 0 samples in {directory}")
    images = parts[0][0] if len(parts) == 1 else np.concatenate([_as_float(i) for i, _ in parts])
    labels = np.concatenate([labels for _, labels in parts]).astype(np.int64)
    return images, labels, f"{directory} ({total} samples)"


def _read_idx(path, ndim):
    np = _np()
    opener = gzip.open if _peek(path)[1] else open
    try:
        with opener(path, "rb") as f:
            data = f.read()
    except (OSError, EOFError) as exc:
        raise smc.EntrypointError(f"cannot read {path}: {exc}") from None
    header = 4 + 4 * ndim
    if len(data) < header:
        raise smc.EntrypointError(f"truncated IDX header in {path}")
    dims = struct.unpack(f">{ndim}I", data[4:header])
    expected = int(np.prod(dims, dtype=np.int64))
    if len(data) - header != expected:
        shape = "x".join(map(str, dims))
        raise smc.EntrypointError(f"IDX file {path} is truncated or padded: header says {shape} "
                                  f"({expected} bytes), file has {len(data) - header}")
    array = np.frombuffer(data, dtype=np.uint8, offset=header).reshape(dims)
    if ndim == 3 and tuple(dims[1:]) != (IMAGE_SIDE, IMAGE_SIDE):
        raise smc.EntrypointError(f"images in {path} are {dims[1]}x{dims[2]}, expected 28x28")
    return array


def _read_npz(path, role):
    np = _np()
    try:
        npz = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise smc.EntrypointError(f"cannot read .npz {path}: {exc}") from None
    with npz:
        keys = set(npz.files)
        for images_key, labels_key in _NPZ_KEY_PAIRS[role]:
            if images_key in keys and labels_key in keys:
                images, labels = npz[images_key], npz[labels_key]
                break
        else:
            raise smc.EntrypointError(f"unrecognised .npz layout in {path}: arrays {sorted(keys)}; expected "
                                      "'data' and 'labels'")
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1:
        raise smc.EntrypointError(f"labels in {path} must be one number per image, got shape {labels.shape}")
    images = np.asarray(images)
    if images.ndim >= 1 and len(images) != len(labels):
        raise smc.EntrypointError(f"images/labels count mismatch in {path}: {len(images)} images, "
                                  f"{len(labels)} labels")
    if images.size != len(labels) * IMAGE_BYTES:
        raise smc.EntrypointError(f"images in {path} have shape {images.shape}, expected (N, 28, 28)")
    images = images.reshape(len(labels), IMAGE_SIDE, IMAGE_SIDE)
    if not np.issubdtype(labels.dtype, np.number) or (labels.size and not np.all(np.mod(labels, 1) == 0)):
        raise smc.EntrypointError(f"labels in {path} must be integers 0..9, got dtype {labels.dtype}")
    _check_part(images, labels, path)
    return images, labels.astype(np.int64)


def read_recordio_stream(stream, source):
    """Image records (IRHeader label + 784 raw pixels) from a RecordIO file or FIFO."""
    np = _np()
    pixels, labels = bytearray(), []
    for index, record in enumerate(smc.iter_recordio(stream, source)):
        label, payload = smc.unpack_ir_record(record, source)
        if len(payload) != IMAGE_BYTES:
            raise smc.EntrypointError(f"RecordIO record {index} in {source} has a {len(payload)}-byte image; "
                                      "expected 784 raw 28x28 uint8 pixels")
        pixels += payload
        labels.append(label)
    images = np.frombuffer(bytes(pixels), dtype=np.uint8).reshape(-1, IMAGE_SIDE, IMAGE_SIDE)
    labels = np.asarray(labels, dtype=np.float64)
    if labels.size and not np.all(np.mod(labels, 1) == 0):
        raise smc.EntrypointError(f"labels in {source} must be integers 0..9")
    _check_part(images, labels, source)
    return images, labels.astype(np.int64)


def _check_part(images, labels, source):
    np = _np()
    if len(images) != len(labels):
        raise smc.EntrypointError(f"images/labels count mismatch in {source}: {len(images)} images, "
                                  f"{len(labels)} labels")
    if len(labels):
        bad = labels[(labels < 0) | (labels >= NUM_CLASSES)]
        if bad.size:
            raise smc.EntrypointError(f"labels out of range 0..9 in {source}: found {bad.size} "
                                      f"(e.g. {np.asarray(bad).flat[0]:g})")


def _as_float(images):
    np = _np()
    images = np.asarray(images)
    if images.dtype == np.uint8:
        return images.astype(np.float32) / 255.0
    images = images.astype(np.float32)
    # Float data may already be scaled to [0, 1]; 0..255 floats get the uint8 treatment.
    if images.size and images.max() > 1.0:
        images /= 255.0
    return images


def to_dataset(images, labels, source, index=0, count=1):
    """Part `index` of `count` (samples index::count) as a Dataset."""
    np = _np()
    shard_images = _as_float(images[index::count]).reshape(-1, 1, IMAGE_SIDE, IMAGE_SIDE)
    return Dataset(np.ascontiguousarray(shard_images), labels[index::count].astype(np.float32), source)


class Stopped(Exception):
    """SIGTERM arrived while waiting for input between epochs (the last checkpoint is complete)."""


def read_pipe(channel, pass_index, stop=None, deadline_seconds=PIPE_WAIT_SECONDS):
    """Drains Pipe-mode FIFO <input>/data/<channel>_<pass_index> into a Dataset."""
    path = smc.fifo_path(channel, pass_index)
    waited = 0.0
    # SageMaker creates the next pass's FIFO only after the previous one was read to its end.
    while not os.path.exists(path):
        if stop is not None and stop.requested:
            raise Stopped(f"while waiting for {path}")
        if waited >= deadline_seconds:
            raise smc.EntrypointError(f"Pipe mode: FIFO {path} did not appear within {deadline_seconds} s")
        time.sleep(0.1)
        waited += 0.1
    with open(path, "rb", buffering=1 << 20) as stream:
        images, labels = read_recordio_stream(stream, path)
    if len(labels) == 0:
        raise smc.EntrypointError(f"Pipe mode channel '{channel}' is empty: no records in {path}")
    return to_dataset(images, labels, path)


class DataPlan:
    """Where this rank's train/test data comes from; File-mode data is loaded and validated here."""

    def __init__(self, args, env, stop=None):
        self.env, self.rank, self.size, self.stop = env, env.rank, env.size, stop
        self.sharding = []  # one log line per channel read whole and split between ranks
        config = self.config = smc.input_data_config()
        self.train_pipe = smc.per_rank_pipe_channels(config, "train", env.size)
        self.test_pipe = None
        self.train = self.test = None
        if self.train_pipe is None:
            self.train = self._load_file_channel("train", args.train_dir)
        test_in_file_mode = args.test_dir or (smc.channel_exists("test")
                                              and not smc.channel_is_pipe(config, "test"))
        if not test_in_file_mode:
            self.test_pipe = smc.per_rank_pipe_channels(config, "test", env.size)
        if self.test_pipe is None:
            self.test = self._load_file_channel("test", args.test_dir)

    def _load_file_channel(self, base, flag_dir):
        if flag_dir or smc.channel_exists(base) or not smc.channel_exists(f"{base}_0"):
            images, labels, source = load_channel(smc.channel_dir(base, flag_dir), base, base)
            shard = channel_sharding.shard_for(self.config, base, self.env)
            if len(labels) < shard.count:
                where = "on this host, fewer than its" if shard.per_host else "fewer than the"
                raise smc.EntrypointError(f"channel '{base}' has {len(labels)} samples {where} {shard.count} ranks")
            self.sharding.append(shard.describe())
            return to_dataset(images, labels, source, shard.index, shard.count)
        # Per-rank File channels base_0..base_{N-1}: this rank's channel whole.
        have = 0
        while smc.channel_exists(f"{base}_{have}"):
            have += 1
        if have != self.size:
            raise smc.EntrypointError(f"per-rank channels {base}_0..{base}_{have - 1} do not match "
                                      f"{self.size} ranks (need exactly {base}_0..{base}_{self.size - 1})")
        channel = f"{base}_{self.rank}"
        images, labels, source = load_channel(smc.channel_dir(channel), channel, base)
        return to_dataset(images, labels, source)

    def train_data(self, pass_index):
        if self.train_pipe is None:
            return self.train
        return read_pipe(self.train_pipe[self.rank], pass_index, self.stop)

    def test_data(self, pass_index):
        if self.test_pipe is None:
            return self.test
        return read_pipe(self.test_pipe[self.rank], pass_index, self.stop)

    def describe(self):
        def where(pipes, data):
            return f"Pipe channels {pipes[0]}..{pipes[-1]}" if pipes else data.source

        return f"train={where(self.train_pipe, self.train)} test={where(self.test_pipe, self.test)}"


# --------------------------------------------------------------------------------------------
# Horovod


class SingleProcessHorovod:
    """The slice of horovod.mxnet this script uses, for one process when Horovod is not installed."""

    Sum = "Sum"

    def __init__(self, mx):
        self._mx = mx

    def init(self):
        pass

    def shutdown(self):
        pass

    def rank(self):
        return 0

    def local_rank(self):
        return 0

    def size(self):
        return 1

    def allreduce(self, tensor, op=None, name=None):
        return tensor.copy()

    def broadcast_parameters(self, params, root_rank=0):
        pass

    def broadcast_object(self, obj, root_rank=0, name=None):
        return obj

    def DistributedTrainer(self, params, optimizer, optimizer_params):
        return self._mx.gluon.Trainer(params, optimizer, optimizer_params, kvstore=None)


def import_horovod(mx, env):
    try:
        import horovod.mxnet as hvd
    except ImportError as exc:
        if env.size > 1:
            raise smc.EntrypointError(f"{env.size} ranks were launched but horovod.mxnet cannot be imported: "
                                      f"{exc}") from None
        return SingleProcessHorovod(mx)
    return hvd


# --------------------------------------------------------------------------------------------
# Model and training


def build_net(mx):
    nn = mx.gluon.nn
    # Fixed prefix: parameter names must match across ranks for broadcast and across runs for resume.
    net = nn.HybridSequential(prefix="mnist_")
    with net.name_scope():
        net.add(nn.Conv2D(20, kernel_size=5, activation="relu"), nn.MaxPool2D(pool_size=2, strides=2),
                nn.Conv2D(50, kernel_size=5, activation="relu"), nn.MaxPool2D(pool_size=2, strides=2),
                nn.Flatten(), nn.Dense(500, activation="relu"), nn.Dense(NUM_CLASSES))
    return net


class TrainingJob:
    """One rank's training: Horovod setup, resume, epochs, checkpoints, export."""

    def __init__(self, args, env, plan, first_train, stop):
        self.args, self.env, self.plan, self.stop = args, env, plan, stop
        self.first_train = first_train  # pass 0's training data, read (and checked) before MPI init
        self.pass_index = 0  # Pipe-mode FIFO number: counts epochs run by this process

    # ---- setup

    def setup(self):
        import mxnet as mx
        import numpy as np

        self.mx, self.np = mx, np
        hvd = self.hvd = import_horovod(mx, self.env)
        hvd.init()
        self.rank, self.size = hvd.rank(), hvd.size()
        if (self.rank, self.size) != (self.env.rank, self.env.size):
            raise smc.EntrypointError(f"Horovod says rank {self.rank} of {self.size}, the MPI environment "
                                      f"said {self.env.rank} of {self.env.size}")
        self.ctx = mx.gpu(hvd.local_rank()) if mx.context.num_gpus() > 0 else mx.cpu()
        mx.random.seed(self.args.seed)
        self.net = build_net(mx)
        self.net.initialize(mx.init.Xavier(magnitude=2.24), ctx=self.ctx)
        self.net.hybridize(static_alloc=True)
        self.net(mx.nd.zeros((1, 1, IMAGE_SIDE, IMAGE_SIDE), ctx=self.ctx))  # allocate deferred-shape params
        self.lr = self.args.lr * self.size  # linear scaling: the global batch is size x batch_size
        self.trainer = hvd.DistributedTrainer(
            self.net.collect_params(), "sgd",
            {"learning_rate": self.lr, "momentum": self.args.momentum, "wd": self.args.wd})
        self.loss_fn = mx.gluon.loss.SoftmaxCrossEntropyLoss()
        self.checkpoints = smc.CheckpointManager(self.args.checkpoint_dir, keep=self.args.keep_checkpoints)
        self.start_epoch, self.skip_batches = 1, 0
        if self.args.resume:
            self._resume()
        hvd.broadcast_parameters(self.net.collect_params(), root_rank=0)
        self.tb = smc.TensorBoardWriter(self.args.tensorboard_dir, self.args.tensorboard and self.rank == 0)

    def _resume(self):
        payload = None
        if self.rank == 0:
            state, stem = self.checkpoints.latest()
            if state is not None:
                files = state["files"]
                with open(os.path.join(self.args.checkpoint_dir, files["params"]), "rb") as f:
                    params = f.read()
                with open(os.path.join(self.args.checkpoint_dir, files["states"]), "rb") as f:
                    states = f.read()
                payload = {"state": state, "stem": stem, "params": params, "states": states}
        # The checkpoint dir is local to rank 0's host: other hosts get the bytes by broadcast.
        payload = self.hvd.broadcast_object(payload, root_rank=0, name="mnist.resume")
        if payload is None:
            return
        with tempfile.TemporaryDirectory() as tmp:
            for key in ("params", "states"):
                with open(os.path.join(tmp, key), "wb") as f:
                    f.write(payload[key])
            self.net.load_parameters(os.path.join(tmp, "params"), ctx=self.ctx)
            self.trainer.load_states(os.path.join(tmp, "states"))
        self.trainer.set_learning_rate(self.lr)  # the states file carries the old run's optimizer settings
        state = payload["state"]
        if state.get("batch") is None:
            self.start_epoch, self.skip_batches = state["epoch"] + 1, 0
        else:
            self.start_epoch, self.skip_batches = state["epoch"], state["batch"]
        at = f"epoch {self.start_epoch}" + (f" batch {self.skip_batches}" if self.skip_batches else "")
        self.log(f"resumed from checkpoint {payload['stem']}.params at {at}")

    # ---- helpers

    def log(self, message):
        if self.rank == 0:
            smc.log(message)

    def allreduce_sum(self, values, name):
        mx = self.mx
        return self.hvd.allreduce(mx.nd.array(values, dtype="float64"), op=self.hvd.Sum, name=name).asnumpy()

    def save_checkpoint(self, epoch, batch=None, extra=None):
        if self.rank != 0 or not self.args.save_checkpoints:
            return
        state = {"world_size": self.size, "lr": self.lr, "seed": self.args.seed, "time": time.time()}
        state.update(extra or {})
        stem = self.checkpoints.save(epoch, state, {"params": self.net.save_parameters,
                                                    "states": self.trainer.save_states}, batch=batch)
        self.log(f"saved checkpoint {stem}.params")

    # ---- epochs

    def train_epoch(self, epoch, data, skip):
        """One epoch. Returns global (loss sum, correct, samples), seconds, and where a stop was agreed:
        None, a batch count (stop mid-epoch), or "end" (stop after this epoch)."""
        mx, np, args = self.mx, self.np, self.args
        # Equal step counts on all ranks, or the gradient allreduces would wait forever.
        counts = self.allreduce_sum(np.eye(self.size)[self.rank] * len(data), f"mnist.counts.{epoch}")
        usable = int(counts.min())
        steps = math.ceil(usable / args.batch_size)
        if usable == 0:
            raise smc.EntrypointError(f"a rank has no training samples in epoch {epoch} (per-rank counts "
                                      f"{counts.astype(int).tolist()})")
        order = np.random.default_rng([args.seed, epoch, self.rank]).permutation(len(data))[:usable]
        loss_sum = mx.nd.zeros((1,), ctx=self.ctx)
        correct = mx.nd.zeros((1,), ctx=self.ctx)
        samples = 0
        pending_stop = previous_loss = None
        stopped_at = None
        start = interval_start = time.time()
        for batch in range(skip, steps):
            idx = np.sort(order[batch * args.batch_size:(batch + 1) * args.batch_size])
            x = mx.nd.array(data.images[idx], ctx=self.ctx)
            y = mx.nd.array(data.labels[idx], ctx=self.ctx)
            with mx.autograd.record():
                out = self.net(x)
                loss = self.loss_fn(out, y)
            loss.backward()
            self.trainer.step(len(idx))
            loss_sum += loss.sum()
            correct += (out.argmax(axis=1) == y).sum()
            samples += len(idx)
            # Keep the engine at most one batch behind Python: bounded memory, honest timings.
            if previous_loss is not None:
                previous_loss.wait_to_read()
            previous_loss = loss
            # SIGTERM: every rank contributes its flag; the sum pushed after batch b is read after
            # batch b+1 on every rank, so all ranks stop after the same batch without a sync per step.
            if pending_stop is not None and pending_stop.asscalar() > 0:
                stopped_at = batch + 1
                break
            pending_stop = self.hvd.allreduce(mx.nd.array([1.0 if self.stop.requested else 0.0]),
                                              op=self.hvd.Sum, name=f"mnist.stop.{batch % 2}")
            if args.log_interval and (batch + 1) % args.log_interval == 0:
                now = time.time()
                rate = args.log_interval * args.batch_size * self.size / max(now - interval_start, 1e-9)
                interval_start = now
                batch_loss = loss.mean().asscalar()
                self.log(smc.format_metrics([("epoch", epoch), ("batch", f"{batch + 1}/{steps}"),
                                             ("loss", float(batch_loss)), ("samples_per_sec", rate)]))
                self.tb.scalars((epoch - 1) * steps + batch + 1, {"train/batch_loss": float(batch_loss)})
        # One allreduce for the epoch's totals and a final, synchronous stop vote.
        stop_vote = 1.0 if self.stop.requested else 0.0
        if pending_stop is not None and stopped_at is None:
            stop_vote += float(pending_stop.asscalar())
        totals = self.allreduce_sum([loss_sum.asscalar(), correct.asscalar(), samples, stop_vote],
                                    f"mnist.totals.{epoch}")
        seconds = time.time() - start
        if stopped_at is None and totals[3] > 0:
            stopped_at = "end"
        return totals[0], totals[1], totals[2], seconds, stopped_at

    def evaluate(self, data, name):
        """Accuracy over the whole test set: per-rank shard counts summed over ranks."""
        mx = self.mx
        correct = mx.nd.zeros((1,), ctx=self.ctx)
        for lo in range(0, len(data), EVAL_BATCH_SIZE):
            x = mx.nd.array(data.images[lo:lo + EVAL_BATCH_SIZE], ctx=self.ctx)
            y = mx.nd.array(data.labels[lo:lo + EVAL_BATCH_SIZE], ctx=self.ctx)
            correct += (self.net(x).argmax(axis=1) == y).sum()
        total_correct, total = self.allreduce_sum([correct.asscalar(), len(data)], name)
        return total_correct / max(total, 1), int(total)

    def run(self):
        args = self.args
        self.log(f"mnist: world_size={self.size} context={self.ctx} per_rank_batch={args.batch_size} "
                 f"lr={self.lr:g} epochs={args.epochs} {self.plan.describe()}")
        for line in self.plan.sharding:
            self.log(f"mnist: {line}")
        history = []
        val_accuracy = None
        for epoch in range(self.start_epoch, args.epochs + 1):
            train = self.plan.train_data(self.pass_index) if self.pass_index else self.first_train
            skip = self.skip_batches if epoch == self.start_epoch else 0
            loss, correct, samples, seconds, stopped_at = self.train_epoch(epoch, train, skip)
            if stopped_at not in (None, "end"):
                self.save_checkpoint(epoch, batch=stopped_at)
                self.finish_stopped()
            test = self.plan.test_data(self.pass_index)
            self.pass_index += 1
            val_accuracy, val_total = self.evaluate(test, f"mnist.val.{epoch}")
            rate = samples / max(seconds, 1e-9)
            train_loss, train_accuracy = loss / max(samples, 1), correct / max(samples, 1)
            history.append({"epoch": epoch, "train_loss": train_loss, "train_accuracy": train_accuracy,
                            "val_accuracy": val_accuracy, "samples_per_sec": rate, "seconds": seconds,
                            "train_samples": int(samples), "val_samples": val_total})
            self.log(smc.format_metrics([
                ("epoch", epoch), ("train_loss", train_loss), ("train_accuracy", train_accuracy),
                ("val_accuracy", val_accuracy), ("samples_per_sec", rate), ("lr", self.lr),
                ("val_samples", val_total), ("train_samples", int(samples)), ("time_sec", seconds)]))
            self.tb.scalars(epoch, {"train/loss": train_loss, "train/accuracy": train_accuracy,
                                    "validation/accuracy": val_accuracy, "train/learning_rate": self.lr,
                                    "train/samples_per_sec": rate})
            self.save_checkpoint(epoch, extra={"val_accuracy": val_accuracy})
            if stopped_at == "end" and epoch < args.epochs:
                self.finish_stopped()
        if val_accuracy is None:
            # Resumed after the last epoch: nothing to train, still report and export.
            val_accuracy, _ = self.evaluate(self.plan.test_data(self.pass_index), "mnist.val.final")
        self.tb.close()
        if self.rank == 0:
            self.export(val_accuracy, history)
        self.hvd.shutdown()

    def finish_stopped(self):
        # Hold every rank until rank 0's checkpoint is on disk: mpirun kills the job as soon as one
        # rank exits non-zero.
        self.allreduce_sum([0.0], "mnist.stop.barrier")
        self.log("mnist: stopped by SIGTERM")
        self.tb.close()
        self.hvd.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(smc.EXIT_SIGTERM)

    def export(self, val_accuracy, history):
        model_dir = self.args.model_dir
        smc.export_hybrid_block(self.net, model_dir, name="model", epoch=0)
        rates = [h["samples_per_sec"] for h in history]
        metrics = {
            "val_accuracy": val_accuracy,
            "epochs": self.args.epochs,
            "epochs_run": len(history),
            "resumed_from_epoch": self.start_epoch if self.start_epoch > 1 or self.skip_batches else None,
            "world_size": self.size,
            "batch_size_per_rank": self.args.batch_size,
            "learning_rate": self.lr,
            "samples_per_sec": sum(rates) / len(rates) if rates else None,
            "history": history,
        }
        smc.atomic_write_json(os.path.join(model_dir, "metrics.json"), metrics)
        smc.log(f"mnist: done val_accuracy={val_accuracy:.4f} model={model_dir}/model-symbol.json")


def resolve_paths(args):
    if args.model_dir and "://" in args.model_dir:
        # Some SageMaker SDK estimators pass an S3 URI as model_dir; the local dir is what gets uploaded.
        smc.warn(PROG, f"ignoring --model-dir {args.model_dir} (not a local path); using $SM_MODEL_DIR")
        args.model_dir = None
    args.model_dir = smc.resolve_path(args.model_dir, "SM_MODEL_DIR", smc.SM_MODEL_DIR_DEFAULT)
    args.checkpoint_dir = smc.resolve_path(args.checkpoint_dir, "SM_CHECKPOINT_DIR",
                                           smc.SM_CHECKPOINT_DIR_DEFAULT)


def main(argv=None):
    args = build_parser().parse_args(argv)
    stop = smc.StopRequest().install()
    try:
        resolve_paths(args)
        env = smc.dist_env()
        # Everything up to here is local: a bad input fails on every rank before any collective.
        plan = DataPlan(args, env, stop)
        first_train = plan.train_data(0)
        smc.limit_cpu_threads(env.local_size)  # before mxnet is imported
        job = TrainingJob(args, env, plan, first_train, stop)
        job.setup()
        job.run()
    except Stopped as exc:
        smc.log(f"mnist: stopped by SIGTERM {exc}")
        sys.stdout.flush()
        os._exit(smc.EXIT_SIGTERM)
    except smc.EntrypointError as exc:
        smc.fail(PROG, str(exc), exc.exit_code)
    except Exception as exc:  # noqa: BLE001 - any other failure must still end this rank, not hang it
        traceback.print_exc()
        smc.fail(PROG, f"unexpected {type(exc).__name__}: {exc}", smc.EXIT_INTERNAL)
    return smc.EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
