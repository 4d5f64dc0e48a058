"""mpirun's output, as the run reads it (diagnose/job_output.JobOutput): every rank's pieces tagged with its rank
(--tag-output), cut into each rank's whole lines by rank_tags.py, and mpirun's own report of the first rank that
failed, which names the rank and how it ended (mpirun_report.py parses it). The MPI backend hands this reader to
its run; nothing outside backends/mpi asks whether a job runs under mpirun or knows its tags."""

from __future__ import annotations

import signal
from typing import ClassVar

from sagemaker_mxnet_horovod.backends.mpi.mpirun_report import parse_mpirun_report, rank_failure
from sagemaker_mxnet_horovod.backends.mpi.rank_tags import RankLines
from sagemaker_mxnet_horovod.core.failure import Failure, rank_host
from sagemaker_mxnet_horovod.core.outcome import JobResult
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.diagnose.crashes import CrashLog
from sagemaker_mxnet_horovod.diagnose.job_output import JobOutput


class MpirunOutput(JobOutput):
    tagged_by_rank: ClassVar[bool] = True

    def lines(self, stream: str) -> RankLines:
        return RankLines(stream)

    def where(self, plan: Plan, rank: int, host: str) -> str:
        return f"rank {rank} on {host}"

    def killed_by_sigkill(self, plan: Plan, result: JobResult) -> tuple[str, str] | None:
        report = parse_mpirun_report(result.untagged_tail)
        if report and report.rank is not None and report.signal_number == signal.SIGKILL:
            return rank_host(plan.rank_hosts, report.rank, plan.current_host), f"rank {report.rank}"
        return None

    def reported_rank(self, result: JobResult) -> int | None:
        """The rank mpirun's report names ('process rank 1 ... exited on signal 7', 'Process name: [[..],1]')."""
        report = parse_mpirun_report(result.untagged_tail)
        return report.rank if report else None

    def failure(self, plan: Plan, result: JobResult, crash_log: CrashLog) -> Failure:
        """The rank mpirun names (or the one with a cause of its own), its host, how it ended, its error."""
        return rank_failure(result.returncode, parse_mpirun_report(result.untagged_tail), plan.rank_hosts,
                            result.rank_stderr, result.untagged_tail, crash_log.crashes())


MPIRUN = MpirunOutput()
