"""The launcher's one log: a line to stderr, "train: " in front, in one write.

The job's output reaches the same stderr from other threads (each rank's lines, mpirun's): print() writes its
newline separately, and a rank's line could land between the message and its newline."""

from __future__ import annotations

import sys

PREFIX = "train: "


def log(message: str) -> None:
    sys.stderr.write(f"{PREFIX}{message}\n")
    sys.stderr.flush()
