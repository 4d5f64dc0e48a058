"""How a job ended, as data: JobResult, how the job's process ended (its exit, each rank's last stderr lines, a stop
or an abort of the launcher's own), which the diagnosis reads; Outcome, how the job ended for this host, which
`train` writes to the outcome files and exits with."""

from __future__ import annotations

from dataclasses import dataclass, field

from sagemaker_mxnet_horovod.core.failure import Failure


@dataclass
class JobResult:
    returncode: int
    rank_stderr: dict = field(default_factory=dict)  # rank -> last stderr lines
    untagged_tail: list = field(default_factory=list)  # mpirun's own messages (or an untagged program's)
    stopped_by_signal: int | None = None  # SIGTERM/SIGINT we received and forwarded
    killed_after_grace: bool = False
    abort_reason: str | None = None  # set when the launcher itself ended the job (e.g. a lost worker)


@dataclass(frozen=True)
class Outcome:
    """How the job ended for this host: its failure (None: success) and what the users' programs wrote to other
    hosts' failure files, (host, text) pairs, shown in this host's failure file too."""

    failure: Failure | None = None
    other_hosts_texts: tuple[tuple[str, str | None], ...] = ()

    @property
    def exit_code(self) -> int:
        return self.failure.exit_code if self.failure else 0
