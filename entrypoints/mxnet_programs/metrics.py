"""Metric lines (``k=v k=v``, what SageMaker's metric regexes read) and TensorBoard scalars."""

import json
import os
import sys


def format_metrics(pairs):
    """``k=v k=v``: the stable line format metric regexes match. Floats: rates (*_per_sec) with 1
    decimal, durations (*_sec) with 2, everything else with 4."""
    parts = []
    for key, value in pairs:
        if isinstance(value, float):
            digits = 1 if key.endswith("_per_sec") else 2 if key.endswith("_sec") else 4
            value = f"{value:.{digits}f}"
        parts.append(f"{key}={value}")
    return " ".join(parts)


def quoted(text):
    """A value that may hold spaces or '=' (a class name), as one field of a metric line: JSON's string, UTF-8."""
    return json.dumps(text, ensure_ascii=False)


class TensorBoardWriter:
    """tensorboardX SummaryWriter when enabled and importable; otherwise every call is a no-op."""

    def __init__(self, logdir, enabled=True):
        self._writer = None
        if not enabled:
            return
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            return
        try:
            os.makedirs(logdir, exist_ok=True)
            self._writer = SummaryWriter(logdir=logdir)
        except OSError as exc:
            # Scalars are a convenience: an unwritable log dir must not cost the training job.
            print(f"warning: TensorBoard disabled, cannot write {logdir}: {exc}", file=sys.stderr, flush=True)

    @property
    def active(self):
        return self._writer is not None

    def scalars(self, step, values):
        if self._writer is None:
            return
        for tag, value in values.items():
            self._writer.add_scalar(tag, value, step)
        self._writer.flush()

    def close(self):
        if self._writer is not None:
            self._writer.close()
            self._writer = None
