"""Where each MNIST rank's train and test data come from: File-mode channels (read by the image's
mnist_files reader and split between the ranks) or per-rank Pipe-mode FIFOs.

File mode: rank r of N uses samples r, r+N, ... of a channel; a ShardedByS3Key channel is split by local
rank instead (channel_sharding); per-rank channels train_0..train_{N-1} are read whole by their rank.
Pipe mode: rank r reads FIFO <input>/data/<channel>_<r>_<k> for its k-th pass, to its end, into memory.
"""

import os
import time

from sagemaker_mxnet_data import mnist_files

from mxnet_programs import channel_sharding
from mxnet_programs import sagemaker_env as sm
from mxnet_programs.process import ProgramError, Stopped, warn

PIPE_WAIT_SECONDS = 600  # how long a Pipe-mode FIFO may take to appear before the job fails
IMAGE_SIDE = mnist_files.IMAGE_SIDE


class Dataset:
    """Images as float32 (N, 1, 28, 28) in [0, 1] and labels as float32 (N,) (what the loss wants)."""

    def __init__(self, images, labels, source):
        self.images, self.labels, self.source = images, labels, source

    def __len__(self):
        return len(self.labels)


def to_dataset(images, labels, source, index=0, count=1):
    """Part `index` of `count` (samples index::count) as a Dataset."""
    import numpy as np

    shard_images = mnist_files.as_float(images[index::count]).reshape(-1, 1, IMAGE_SIDE, IMAGE_SIDE)
    return Dataset(np.ascontiguousarray(shard_images), labels[index::count].astype(np.float32), source)


def load_channel(prog, directory, channel, role):
    """A File-mode channel read and checked: (images, labels, description)."""
    try:
        images, labels = mnist_files.read_directory(directory, channel, role, warn=lambda m: warn(prog, m))
    except mnist_files.MnistFileError as exc:
        raise ProgramError(str(exc)) from None
    return images, labels, f"{directory} ({len(labels)} samples)"


def read_pipe(channel, pass_index, stop=None, deadline_seconds=PIPE_WAIT_SECONDS):
    """Drains Pipe-mode FIFO <input>/data/<channel>_<pass_index> into a Dataset."""
    path = sm.fifo_path(channel, pass_index)
    deadline = time.monotonic() + deadline_seconds
    # SageMaker creates the next pass's FIFO only after the previous one was read to its end.
    while not os.path.exists(path):
        if stop is not None and stop.requested:
            raise Stopped(f"while waiting for {path}")
        if time.monotonic() >= deadline:
            raise ProgramError(f"Pipe mode: FIFO {path} did not appear within {deadline_seconds} s")
        time.sleep(0.1)
    try:
        with open(path, "rb", buffering=1 << 20) as stream:
            images, labels = mnist_files.read_recordio(stream, path)
    except mnist_files.MnistFileError as exc:
        raise ProgramError(str(exc)) from None
    if len(labels) == 0:
        raise ProgramError(f"Pipe mode channel '{channel}' is empty: no records in {path}")
    return to_dataset(images, labels, path)


class DataPlan:
    """Where this rank's train/test data comes from; File-mode data is loaded and checked here."""

    def __init__(self, prog, train_dir, test_dir, env, stop=None):
        self.prog, self.env, self.rank, self.size, self.stop = prog, env, env.rank, env.size, stop
        self.sharding = []  # one log line per channel read whole and split between ranks
        config = self.config = sm.input_data_config()
        self.train_pipe = sm.per_rank_pipe_channels(config, "train", env.size)
        self.test_pipe = None
        self.train = self.test = None
        if self.train_pipe is None:
            self.train = self._load_file_channel("train", train_dir)
        test_in_file_mode = test_dir or (sm.channel_exists("test") and not sm.channel_is_pipe(config, "test"))
        if not test_in_file_mode:
            self.test_pipe = sm.per_rank_pipe_channels(config, "test", env.size)
        if self.test_pipe is None:
            self.test = self._load_file_channel("test", test_dir)

    def _load_file_channel(self, base, flag_dir):
        if flag_dir or sm.channel_exists(base) or not sm.channel_exists(f"{base}_0"):
            images, labels, source = load_channel(self.prog, sm.channel_dir(base, flag_dir), base, base)
            shard = channel_sharding.shard_for(self.config, base, self.env)
            if len(labels) < shard.count:
                where = "on this host, fewer than its" if shard.per_host else "fewer than the"
                raise ProgramError(f"channel '{base}' has {len(labels)} samples {where} {shard.count} ranks")
            self.sharding.append(shard.describe())
            return to_dataset(images, labels, source, shard.index, shard.count)
        # Per-rank File channels base_0..base_{N-1}: this rank's channel whole.
        have = 0
        while sm.channel_exists(f"{base}_{have}"):
            have += 1
        if have != self.size:
            raise ProgramError(f"per-rank channels {base}_0..{base}_{have - 1} do not match {self.size} ranks "
                               f"(need exactly {base}_0..{base}_{self.size - 1})")
        channel = f"{base}_{self.rank}"
        images, labels, source = load_channel(self.prog, sm.channel_dir(channel), channel, base)
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
