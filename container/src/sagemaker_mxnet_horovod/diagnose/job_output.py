"""How the job's process's output is read: cut into each rank's whole lines (RankLine) as it arrives, and, for the
verdict, what names the process that failed and how. The default is the program's own (one process, rank 0 on this
host, its exit code its own: what the single-process backend runs); a backend whose process reads otherwise hands
its own reader to the run (the MPI backend's is mpirun's, backends/mpi/output.py: each rank's pieces marked with
its rank, and a report of the first failed rank). act/ and this folder know no backend: they ask the reader."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import ClassVar, Protocol

from sagemaker_mxnet_horovod.core.failure import Failure
from sagemaker_mxnet_horovod.core.outcome import JobResult
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.diagnose.crashes import CrashLog
from sagemaker_mxnet_horovod.diagnose.process_failure import process_failure


@dataclass(frozen=True)
class RankLine:
    """One whole line of the job's output, as its reader cut it."""

    rank: int | None  # None: the process's own line (the launched program's, or the launcher's of ranks: mpirun's)
    stream: str  # stdout | stderr
    text: str  # without its newline, nothing of the reader's marking left in it
    prefix: bytes = b""  # what the process wrote before the text to say whose it is, shown with it on the console

    def console_bytes(self) -> bytes:
        return self.prefix + self.text.encode("utf-8", "surrogateescape") + b"\n"


class LineReader(Protocol):
    """One of the process's streams cut into whole lines; one per stream (a pump's), not shared between threads."""

    def feed(self, line: bytes) -> list[RankLine]:
        """The whole lines that `line` (one line of the process's output) completes."""

    def flush(self) -> list[RankLine]:
        """The lines still unfinished when the stream ends."""


class ProgramLines:
    """The program's own output: each line as it is, no rank named in it."""

    def __init__(self, stream: str):
        self.stream = stream

    def feed(self, line: bytes) -> list[RankLine]:
        return [RankLine(None, self.stream, line.decode("utf-8", "replace").rstrip("\n"))]

    def flush(self) -> list[RankLine]:
        return []


class JobOutput:
    """The program itself: its output names no rank (it is rank 0's), and it alone ends the job."""

    # The process's output names each line's rank (lines() says which), the console shows only the chosen ranks'
    # lines (Plan.console_ranks), and a stop reaches this host's ranks before the process itself (act/supervise.py).
    tagged_by_rank: ClassVar[bool] = False

    def lines(self, stream: str) -> LineReader:
        """A reader of one of the process's streams ("stdout", "stderr"), cutting it into each rank's lines."""
        return ProgramLines(stream)

    def where(self, plan: Plan, rank: int, host: str) -> str:
        """How a failure names the process of `rank` on `host`: 'mnist on algo-1'."""
        return f"{plan.program.name} on {host}"

    def killed_by_sigkill(self, plan: Plan, result: JobResult) -> tuple[str, str] | None:
        """(host, 'rank 1' or the program's name) of the process killed by SIGKILL that ended the job, if one did."""
        return (plan.current_host, plan.program.name) if result.returncode == -signal.SIGKILL else None

    def reported_rank(self, result: JobResult) -> int | None:
        """The rank the job's process itself says failed first, when it says one (none here: it is the program)."""
        return None

    def failure(self, plan: Plan, result: JobResult, crash_log: CrashLog) -> Failure:
        """The failure as the job's process reports it: here, the failed program, its crash or its error line."""
        return process_failure(plan.program.name, plan.current_host, result.returncode, result.rank_stderr.get(0, ()),
                               crash_log.crash(0))


PROGRAM = JobOutput()
