"""The job's command on this host, supervised in named steps: start it with its watches, wait for it, diagnose how
it ended. What the single-process backend runs (the program), and what the MPI master runs around its cluster
(mpirun: backends/mpi/master_run.py adds the workers' steps). Every rank's stacks are written when asked for
(stacks.py) and whenever a hang watch ends the job or Horovod first warns of a stall (its shutdown ends ranks at
once: the warning is the last moment every rank surely runs). A stop (core/stop.py) reaches the job's ranks first,
then the command itself after the grace.

Failures stay records (a Failure) until cli.py writes the one the run returns.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from sagemaker_mxnet_horovod.act import stacks
from sagemaker_mxnet_horovod.act.rank_output import RankLogs
from sagemaker_mxnet_horovod.act.supervise import JobProcess
from sagemaker_mxnet_horovod.core import stop
from sagemaker_mxnet_horovod.core.failure import Failure, describe_exit, rank_host
from sagemaker_mxnet_horovod.core.log import log
from sagemaker_mxnet_horovod.core.outcome import JobResult, Outcome
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.diagnose.crashes import CrashLog
from sagemaker_mxnet_horovod.diagnose.hangs import StallLog
from sagemaker_mxnet_horovod.diagnose.host_report import REPORT_TIMEOUT_S, HostReport, every_host_report, peak_line
from sagemaker_mxnet_horovod.diagnose.job_output import PROGRAM, JobOutput
from sagemaker_mxnet_horovod.diagnose.memory import read_memory
from sagemaker_mxnet_horovod.diagnose.verdict import Evidence, job_failure

# After a rank's crash report, how long the job may take to end. MXNet's SIGSEGV handler calls exit() on the
# crashed thread, which can hang in a library's exit handler; mpirun then waits for that rank forever.
CRASH_EXIT_GRACE_S = 30.0


class CommandRun:
    """output: how the command's output is read (diagnose/job_output.py): the program's own, rank 0 on this host, or
    the backend's reader (the MPI backend's: mpirun's output, each rank's lines apart, reporting the first failed
    rank)."""

    def __init__(self, plan: Plan, env: Mapping[str, str], failure_file: Path, output: JobOutput = PROGRAM):
        self.plan, self.failure_file, self.output = plan, failure_file, output
        self.memory_at_start = read_memory()  # the OOM killer's count before the job: its kills are the job's
        self.host_reports: dict[str, HostReport] = {}
        self.stacks = stacks.JobDumps(plan.run_dir, plan.output_data_dir, plan.current_host, plan.workers,
                                      self.ask_workers, REPORT_TIMEOUT_S)
        self.stall_log = StallLog(on_first_report=lambda: self.stacks.dump_later("Horovod's first stall warning"))
        self.crash_log = CrashLog(on_first_report=self.on_crash_report)
        data_dir = Path(plan.output_data_dir) if plan.output_data_dir else None
        self.job = JobProcess(plan.command, env, output,
                              stderr_observers=(self.stall_log.observe, self.crash_log.observe),
                              rank_logs=RankLogs(data_dir / "logs", plan.rank_hosts) if data_dir else None,
                              console_ranks=plan.console_ranks,
                              before_abort=lambda reason: self.stacks.dump(f"a hang watch ends the job: {reason}"))

    def run(self) -> Outcome:
        self.start()
        return Outcome(self.diagnose(self.wait()))

    def ask_workers(self):
        """The cluster's way to ask the other hosts (for their reports, their ranks' stacks); None: no other hosts."""
        return None

    def on_stop(self, signum: int) -> None:
        """A stop (core/stop.py): the ranks get it first, to checkpoint; the command after the grace."""
        self.job.stop(signum)

    def start(self) -> None:
        """The job's command, stops passed on to it, stacks written when asked for."""
        stop.listen(self.on_stop)
        stacks.serve_requests(self.plan.run_dir, self.stacks.dump, log)
        self.started = time.monotonic()
        self.job.start()

    def wait(self) -> JobResult:
        result = self.job.wait()
        seconds = time.monotonic() - self.started
        self.host_reports = every_host_report(self.plan.current_host, self.memory_at_start, self.ask_workers())
        log(f"job {describe_exit(result.returncode)} after {seconds:.1f} s; {peak_line(self.host_reports)}")
        return result

    def diagnose(self, result: JobResult) -> Failure | None:
        return job_failure(Evidence(self.plan, result, self.stall_log, self.crash_log, self.host_reports,
                                    output=self.output))

    def on_crash_report(self, rank: int) -> None:
        """A rank's crash report: the job must end within the crash grace (a crash handler can hang while exiting)."""
        def reason() -> str:
            crash = self.crash_log.crash(rank)
            host = rank_host(self.plan.rank_hosts, rank, self.plan.current_host)
            return (f"rank {rank} on {host} crashed" + (f" with {crash.describe()}" if crash else "")
                    + f" and the job had not ended {CRASH_EXIT_GRACE_S:g} s later (a crash handler hung while "
                    "exiting): the launcher stopped it")
        self.job.abort_later(CRASH_EXIT_GRACE_S, reason)
