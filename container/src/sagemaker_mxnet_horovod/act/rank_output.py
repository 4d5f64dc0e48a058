"""Each rank's output as whole lines (cut by the reader the job's backend hands the run: diagnose/job_output.py): to
its own log file, and to the console when it is one of the ranks chosen to be shown there (mpi_console_ranks; all
by default). RankLogs writes them to output/data/logs/<host>-rank-<rank>.log, which SageMaker uploads with
output.tar.gz.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from pathlib import Path

from sagemaker_mxnet_horovod.core.log import log
from sagemaker_mxnet_horovod.diagnose.job_output import RankLine


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
    """Whether a line reaches the console: the process's own always; a rank's when it is chosen (None: all are)."""
    return line.rank is None or console_ranks is None or line.rank in console_ranks
