"""mpirun's rank tags: mpirun --tag-output marks every piece of output a rank writes with "[job,rank]<stream>:"
("[1,3]<stderr>:"). A rank's line written in pieces arrives as several tagged pieces, and a piece without its
newline is followed by whatever comes next, another rank's piece included, on the same line of mpirun's output.
RankLines cuts mpirun's output at the tags and gives back each rank's whole lines, no tag left in them (what the
run keeps, logs and diagnoses: act/supervise.py, diagnose/); the console shows them with their tag. What comes
before a line's first tag is mpirun's own (its report of a failed rank: output.py)."""

from __future__ import annotations

import re

from sagemaker_mxnet_horovod.diagnose.job_output import RankLine

TAG = re.compile(rb"\[(\d+),(\d+)\]<(stdout|stderr)>:")


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape").rstrip("\n")


class RankLines:
    """One of mpirun's streams cut into each rank's whole lines (a diagnose/job_output.LineReader). Not thread-safe:
    one per stream (pump)."""

    def __init__(self, stream: str):
        self.stream = stream
        self.partial: dict[tuple[int, str], bytes] = {}  # (rank, stream) -> the start of a line still arriving
        self.tags: dict[tuple[int, str], bytes] = {}

    def feed(self, line: bytes) -> list[RankLine]:
        """The whole lines that `line` (one line of mpirun's output) completes."""
        tags = list(TAG.finditer(line))
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
