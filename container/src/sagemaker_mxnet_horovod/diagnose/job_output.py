"""How the job's process's output is read, for the verdict: what names the process that failed and how. The
default is the program's own (one process, rank 0 on this host, its exit code its own: what the single-process
backend runs); a backend whose process reads otherwise hands its own reader to the run (Backend.output: the MPI
backend's is mpirun's, backends/mpi/output.py, tagged by rank and reporting the first failed rank). act/ and this
folder know no backend: they ask the reader."""

from __future__ import annotations

import signal
from typing import ClassVar

from sagemaker_mxnet_horovod.core.failure import Failure
from sagemaker_mxnet_horovod.core.outcome import JobResult
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.diagnose.crashes import CrashLog
from sagemaker_mxnet_horovod.diagnose.ranks import process_failure


class JobOutput:
    """The program itself: its output carries no rank's tag (it is rank 0's), and it alone ends the job."""

    # The process's output carries each rank's tag (act/rank_output.RankLines cuts it into each rank's lines), and
    # a stop reaches this host's ranks before the process itself (act/supervise.py).
    tagged_by_rank: ClassVar[bool] = False

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
