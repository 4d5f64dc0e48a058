"""Why a job that hung was ended: the cause line the failure file starts with. Pure, unit-tested on
captured text.

- A stalled collective (horovod_stall_timeout_s): Horovod's stall inspector on rank 0 (the coordinator)
  reports, every HOROVOD_STALL_CHECK_TIME_SECONDS, the ranks that never submitted a tensor others wait on:

    Missing ranks:
    1!: [horovod_allreduce.step0]
    One or more rank (marked by "!") is stalled for longer than 10 seconds. Will shutdown.

  and then shuts Horovod down, so the waiting ranks' collectives fail ("Horovod has been shut down") and
  mpirun ends the job. StallLog reads those lines as they arrive: the waiting ranks' tracebacks follow
  them and would push them out of the stderr tail kept for the failure file.
- No progress (mpi_progress_timeout_s): the stuck rank's own watch wrote one line saying so (progress.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from sagemaker_mxnet_horovod.core.failure import rank_host
from sagemaker_mxnet_horovod.diagnose.progress import MARKER
from sagemaker_mxnet_horovod.parse.settings import KEYS

_MISSING_HEADER = "Missing ranks:"
_MISSING_RANK = re.compile(r"^(\d+)(!?): \[(.*)\]$")
_SHUTDOWN = re.compile(r"stalled for longer than (\d+) seconds\. Will shutdown")


class StallLog:
    """Follows Horovod's stall reports in the ranks' stderr (a supervise.JobProcess stderr observer)."""

    def __init__(self, on_first_report=None):
        self.on_first_report = on_first_report  # callable(), once the first report of a stall is complete
        self._block: dict[int, tuple[bool, list[str]]] | None = None
        self.latest: dict[int, tuple[bool, list[str]]] = {}  # rank -> (past the shutdown time, tensors)
        self.shutdown_after_s: int | None = None

    def observe(self, rank: int, text: str) -> None:
        line = text.strip()  # whole: Horovod's message written in pieces is one line again (job_output.py)
        if line == _MISSING_HEADER:
            self._block = {}
            return
        if self._block is None:
            return
        match = _MISSING_RANK.match(line)
        if match:
            tensors = [t.strip() for t in match.group(3).removesuffix(" ...").split(",") if t.strip()]
            self._block[int(match.group(1))] = (match.group(2) == "!", tensors)
            return
        if self._block:
            if not self.latest and self.on_first_report:
                self.on_first_report()
            self.latest = self._block
        self._block = None
        shutdown = _SHUTDOWN.search(line)
        if shutdown:
            self.shutdown_after_s = int(shutdown.group(1))


def pipe_channels(input_data_config: str | None) -> list[str]:
    """The channels in Pipe mode, from SM_INPUT_DATA_CONFIG's JSON."""
    try:
        channels = json.loads(input_data_config or "{}")
    except ValueError:
        return []
    return sorted(name for name, spec in channels.items()
                  if isinstance(spec, dict) and spec.get("TrainingInputMode") == "Pipe")


def _ranks_on_hosts(ranks: Sequence[int], rank_hosts: Sequence[str]) -> str:
    named = [f"{rank} on {rank_host(rank_hosts, rank)}" for rank in ranks]
    return ("rank " if len(named) == 1 else "ranks ") + ", ".join(named)


def stall_cause(log: StallLog, rank_hosts: Sequence[str], pipe: Sequence[str]) -> str | None:
    """The cause line when Horovod's stall inspector shut the job down, else None."""
    if log.shutdown_after_s is None or not log.latest:
        return None
    stalled = sorted(rank for rank, (past, _) in log.latest.items() if past) or sorted(log.latest)
    tensors = sorted({tensor for rank in stalled for tensor in log.latest[rank][1]})
    shown = ", ".join(tensors[:4]) + (f" and {len(tensors) - 4} more" if len(tensors) > 4 else "")
    cause = (f"Horovod stall: {_ranks_on_hosts(stalled, rank_hosts)} never submitted {shown}, which the other "
             f"ranks waited on for more than {log.shutdown_after_s} s ({KEYS.stall_timeout_s}); Horovod shut "
             "down and the job was ended")
    if pipe:
        channels = f"Channel {pipe[0]} is" if len(pipe) == 1 else f"Channels {', '.join(pipe)} are"
        cause += (f". {channels} in Pipe mode: each is one FIFO with one reader, so when "
                  "several ranks read the same channel, one gets the data and the others wait for ever. Give "
                  "each rank its own channel (train_0, train_1, ...: one S3 prefix per rank)")
    return cause


def progress_cause(rank_stderr: Mapping[int, Sequence[str]]) -> str | None:
    """The cause line when a rank's progress watch ended it, else None."""
    for rank in sorted(rank_stderr):
        for line in reversed(rank_stderr[rank]):
            if MARKER in line:
                return line[line.index(MARKER) + len("train: "):].strip()
    return None


def hang_cause(log: StallLog, rank_stderr: Mapping[int, Sequence[str]], rank_hosts: Sequence[str],
               rank_env: Mapping[str, str]) -> str | None:
    return (progress_cause(rank_stderr)
            or stall_cause(log, rank_hosts, pipe_channels(rank_env.get("SM_INPUT_DATA_CONFIG"))))
