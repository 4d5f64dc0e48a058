"""Numbered checkpoints in one directory, newest `keep` kept; a checkpoint counts once its JSON is written."""

import json
import os
import re

from mxnet_programs.files import atomic_save, atomic_write_json, remove_quietly


class CheckpointManager:
    """Numbered checkpoints in one directory: ``<prefix>-epoch-NNNN[-batch-BBBBBB].<ext>`` files.

    A checkpoint is its data files plus ``.json`` state; the JSON is written last, so a checkpoint
    counts only once all its files are complete. The newest `keep` are kept. Complete epochs use
    ``-epoch-NNNN`` (N = epochs done); a stop mid-epoch uses ``-epoch-NNNN-batch-BBBBBB`` (N = the
    epoch in progress, B = its batches done), ordered before epoch N's complete checkpoint.
    """

    _NAME = re.compile(r"^(?P<prefix>.+)-epoch-(?P<epoch>\d{4,})(?:-batch-(?P<batch>\d{6,}))?\.json$")

    def __init__(self, directory, prefix="checkpoint", keep=2):
        self.directory, self.prefix, self.keep = directory, prefix, keep

    def stem(self, epoch, batch=None):
        name = f"{self.prefix}-epoch-{epoch:04d}"
        if batch is not None:
            name += f"-batch-{batch:06d}"
        return os.path.join(self.directory, name)

    def save(self, epoch, state, writers, batch=None):
        """writers: {extension: fn(filename)}; state: JSON-able dict. Returns the checkpoint's stem."""
        stem = self.stem(epoch, batch)
        for ext, save_fn in writers.items():
            atomic_save(f"{stem}.{ext}", save_fn)
        files = {ext: os.path.basename(f"{stem}.{ext}") for ext in writers}
        atomic_write_json(f"{stem}.json", dict(state, epoch=epoch, batch=batch, files=files))
        self._prune()
        return stem

    def _listing(self):
        """[(sort key, stem)] of committed checkpoints, oldest first."""
        found = []
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        for name in names:
            m = self._NAME.match(name)
            if not m or m.group("prefix") != self.prefix:
                continue
            epoch = int(m.group("epoch"))
            # A mid-epoch checkpoint of epoch N sorts after epoch N-1's and before epoch N's complete one.
            key = (epoch - 1, int(m.group("batch"))) if m.group("batch") else (epoch, -1)
            found.append((key, os.path.join(self.directory, name[:-len(".json")])))
        return sorted(found)

    def latest(self):
        """(state dict, stem) of the newest complete checkpoint, or (None, None)."""
        for stem, state in reversed(self._readable()):
            files = state.get("files", {})
            if all(os.path.isfile(os.path.join(self.directory, name)) for name in files.values()):
                return state, stem
        return None, None

    def states(self):
        """The state dicts of the retained checkpoints, oldest first (an unreadable one left out)."""
        return [state for _, state in self._readable()]

    def _readable(self):
        """[(stem, state dict)] of the checkpoints whose JSON reads, oldest first."""
        found = []
        for _, stem in self._listing():
            try:
                with open(stem + ".json") as f:
                    found.append((stem, json.load(f)))
            except (OSError, ValueError):
                continue
        return found

    def _prune(self):
        for _, stem in self._listing()[:-self.keep]:
            # JSON first: a crash mid-prune must not leave a committed checkpoint with missing files.
            remove_quietly(stem + ".json")
            for ext_file in _glob_stem(stem):
                remove_quietly(ext_file)


def _glob_stem(stem):
    directory, base = os.path.split(stem)
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return [os.path.join(directory, n) for n in names if n.startswith(base + ".")]
