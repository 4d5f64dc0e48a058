"""Each rank's output as whole lines: to its own log file, and to the console when it is one of the ranks chosen
to be shown there (mpi_console_ranks; all by default).

mpirun --tag-output tags every piece of output a rank writes ("[1,3]<stderr>:"): a rank's line written in pieces
arrives as several tagged pieces, and a piece without its newline is followed by whatever comes next, another
rank's piece included, on the same line of mpirun's output. RankLines cuts mpirun's output at the tags and
gives back each rank's whole lines; RankLogs writes them to output/data/logs/<host>-rank-<rank>.log, which
SageMaker uploads with output.tar.gz.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from sagemaker_mxnet_horovod.core.log import log

_TAG = re.compile(rb"\[(\d+),(\d+)\]<(stdout|stderr)>:")


@dataclass(frozen=True)
class RankLine:
    rank: int | None  # None: mpirun's own output (or an untagged program's)
    stream: str  # stdout | stderr
    text: str  # without its newline
    tag: bytes = b""  # mpirun's tag, as it wrote it

    def console_bytes(self) -> bytes:
        return self.tag + self.text.encode("utf-8", "surrogateescape") + b"\n"


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape").rstrip("\n")


class RankLines:
    """One of mpirun's streams cut into each rank's whole lines. Not thread-safe: one per stream (pump)."""

    def __init__(self, stream: str):
        self.stream = stream
        self.partial: dict[tuple[int, str], bytes] = {}  # (rank, stream) -> the start of a line still arriving
        self.tags: dict[tuple[int, str], bytes] = {}

    def feed(self, line: bytes) -> list[RankLine]:
        """The whole lines that `line` (one line of mpirun's output) completes."""
        tags = list(_TAG.finditer(line))
        if not tags:
            return [RankLine(None, self.stream, _text(line))]
        found = []
        if tags[0].start() > 0:
            found.append(RankLine(None, self.stream, _text(line[: tags[0].start()])))
        for i, tag in enumerate(tags):
            key = (int(tag.group(2)), tag.group(3).decode())
            self.tags[key] = tag.group(0)
            piece = line[tag.end(): tags[i + 1].start() if i + 1 < len(tags) else len(line)]
            if i + 1 < len(tags) and not piece.endswith(b"\n"):
                self.partial[key] = self.partial.get(key, b"") + piece  # the rest of its line comes later
                continue
            found.append(RankLine(key[0], key[1], _text(self.partial.pop(key, b"") + piece), tag.group(0)))
        return found

    def flush(self) -> list[RankLine]:
        """Lines a rank never finished (its output ended without a newline)."""
        found = [RankLine(rank, stream, _text(piece), self.tags.get((rank, stream), b""))
                 for (rank, stream), piece in sorted(self.partial.items())]
        self.partial.clear()
        return found


class RankLogs:
    """<directory>/<host>-rank-<rank>.log for every rank that writes, stdout and stderr in the order they arrive.
    A failure to write (a full disk) is said once and never stops the job."""

    def __init__(self, directory: Path, rank_hosts: Sequence[str]):
        self.directory, self.rank_hosts = directory, tuple(rank_hosts)
        self.files: dict[int, object] = {}
        self.lock = threading.Lock()
        self.broken = False  # or closed: nothing more is written

    def path(self, rank: int) -> Path:
        host = self.rank_hosts[rank] if rank < len(self.rank_hosts) else "unknown-host"
        return self.directory / f"{host}-rank-{rank}.log"

    def write(self, rank: int, text: str) -> None:
        with self.lock:
            if self.broken:
                return
            try:
                file = self.files.get(rank)
                if file is None:
                    self.directory.mkdir(parents=True, exist_ok=True)
                    # Line-buffered: a launcher killed at the end loses no line already written.
                    file = self.files[rank] = open(self.path(rank), "w", buffering=1, encoding="utf-8",
                                                   errors="surrogateescape")
                file.write(text + "\n")
            except OSError as error:
                self.broken = True
                log(f"per-rank logs stopped: cannot write {self.path(rank)}: {error}")

    def close(self) -> None:
        with self.lock:
            self.broken = True  # a pump still running after the job's end must not reopen (and empty) a log
            for file in self.files.values():
                try:
                    file.close()
                except OSError:
                    pass
            self.files.clear()


def shown(line: RankLine, console_ranks: Collection[int] | None) -> bool:
    """Whether a line reaches the console: mpirun's own always; a rank's when it is chosen (None: all are)."""
    return line.rank is None or console_ranks is None or line.rank in console_ranks
