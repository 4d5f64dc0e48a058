"""The host that runs the job's command, in named steps: gather the workers (the MPI master only), start the
job with its watches, wait for it, diagnose how it ended, release the workers with the outcome. Every rank's
stacks are written when asked for (stacks.py) and whenever a hang watch ends the job or Horovod first warns of
a stall (its shutdown ends ranks at once: the warning is the last moment every rank surely runs).

The same run serves a single-process host (no workers to gather or release). Failures stay records (a Failure)
until cli.py writes the one the run returns.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from sagemaker_mxnet_horovod.act import stacks
from sagemaker_mxnet_horovod.act.cluster.master import Master
from sagemaker_mxnet_horovod.act.cluster.ssh import generate_key
from sagemaker_mxnet_horovod.act.outcome_files import read_user_failure
from sagemaker_mxnet_horovod.act.rank_output import RankLogs
from sagemaker_mxnet_horovod.act.supervise import JobProcess, forward_stop_signals
from sagemaker_mxnet_horovod.core.exits import EXIT_FAILED, EXIT_STOPPED, ClusterError, StopRequested
from sagemaker_mxnet_horovod.core.failure import Failure, describe_exit, rank_host
from sagemaker_mxnet_horovod.core.log import log
from sagemaker_mxnet_horovod.core.outcome import JobResult, Outcome
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.diagnose.crashes import CrashLog
from sagemaker_mxnet_horovod.diagnose.hangs import StallLog
from sagemaker_mxnet_horovod.diagnose.host_report import REPORT_TIMEOUT_S, HostReport, every_host_report, peak_line
from sagemaker_mxnet_horovod.diagnose.memory import read_memory
from sagemaker_mxnet_horovod.diagnose.verdict import Evidence, job_failure

DAEMON_EXIT_GRACE_S = 15.0  # after a worker's MPI daemon exits, how long mpirun may take to end the job
# After a rank's crash report, how long the job may take to end. MXNet's SIGSEGV handler calls exit() on the
# crashed thread, which can hang in a library's exit handler; mpirun then waits for that rank forever.
CRASH_EXIT_GRACE_S = 30.0


class MasterRun:
    def __init__(self, plan: Plan, env: dict, bind_address: str, failure_file: Path):
        self.plan, self.failure_file = plan, failure_file
        self.memory_at_start = read_memory()  # the OOM killer's count before the job: its kills are the job's
        self.host_reports: dict[str, HostReport] = {}
        self.stacks_lock = threading.Lock()  # one dump at a time
        self.stall_log = StallLog(on_first_report=lambda: self.dump_stacks_later("Horovod's first stall warning"))
        self.crash_log = CrashLog(on_first_report=self.on_crash_report)
        rank_hosts = plan.rank_hosts if plan.use_mpi else (plan.current_host,)
        output = Path(plan.output_data_dir) if plan.output_data_dir else None
        self.job = JobProcess(plan.command, env, tagged=plan.use_mpi,
                       stderr_observers=(self.stall_log.observe, self.crash_log.observe),
                       rank_logs=RankLogs(output / "logs", rank_hosts) if output else None,
                       console_ranks=plan.console_ranks,
                       before_abort=lambda reason: self.dump_stacks(f"a hang watch ends the job: {reason}"))
        self.cluster = (Master(plan.workers, plan.handshake_port, bind_address, Path(plan.run_dir),
                               deadline=time.monotonic() + plan.peer_timeout_s) if plan.workers else None)

    def run(self) -> Outcome:
        failure = self.gather()
        if failure is None:
            self.start()
            failure = self.diagnose(self.wait())
            self.release(failure)
        return Outcome(failure, tuple(sorted(self.cluster.user_failures.items())) if self.cluster else ())

    def gather(self) -> Failure | None:
        """Every worker checked in, its sshd up with the job's key (none without workers)."""
        if not self.cluster:
            return None
        started = time.monotonic()
        key = generate_key(Path(self.plan.run_dir) / "id_ed25519")
        try:
            # No separate ssh check: it cost a round trip per job, and mpirun's own ssh error, when there is
            # one, becomes the first line of the failure file.
            self.cluster.gather(key)
        except ClusterError as error:
            message = f"cluster setup failed on master {self.plan.current_host}: {error}"
            self.cluster.finish(EXIT_FAILED, message)
            return Failure(message, EXIT_FAILED, host=self.plan.current_host)
        except StopRequested as stop:
            self.cluster.finish(EXIT_STOPPED, f"stopped by {stop} during cluster setup")
            return Failure(f"stopped by {stop} while waiting for workers", EXIT_STOPPED, host=self.plan.current_host)
        log(f"{len(self.plan.workers)} worker(s) ready in {time.monotonic() - started:.2f} s")
        return None

    def start(self) -> None:
        """The job's command, with SIGTERM forwarded to it and the watches on the workers armed."""
        cluster = self.cluster
        forward_stop_signals(self.job, on_stop=cluster.broadcast_stop if cluster else None)
        stacks.serve_requests(self.plan.run_dir, self.dump_stacks, log)
        if cluster:
            cluster.on_worker_lost = lambda host, how: self.job.abort(f"worker {host} {how}")
            cluster.on_daemon_exited = self.on_daemon_exited
            cluster.on_stacks_wanted = self.dump_stacks_later
        self.started = time.monotonic()
        self.job.start()
        if cluster:
            threading.Thread(target=self.watch_launch, daemon=True).start()

    def wait(self) -> JobResult:
        result = self.job.wait()
        seconds = time.monotonic() - self.started
        self.host_reports = every_host_report(self.plan.current_host, self.memory_at_start,
                                              self.cluster.ask_workers if self.cluster else None)
        log(f"job {describe_exit(result.returncode)} after {seconds:.1f} s; {peak_line(self.host_reports)}")
        return result

    def diagnose(self, result: JobResult) -> Failure | None:
        return job_failure(Evidence(self.plan, result, self.stall_log, self.crash_log, self.host_reports))

    def release(self, failure: Failure | None) -> None:
        """Tell every worker the outcome; each answers with what its user's program wrote to its failure file."""
        if not self.cluster:
            return
        released = time.monotonic()
        code = failure.exit_code if failure else 0
        self.cluster.finish(code, failure.render() if failure else None,
                            user_failure=read_user_failure(self.failure_file) if code else None)
        log(f"{len(self.plan.workers)} worker(s) released in {time.monotonic() - released:.2f} s")

    # -----------------------------------------------------------------------------------------------------
    # Every rank's stacks

    def dump_stacks(self, reason: str) -> None:
        """Every rank's stacks on every host, into the log and output/data/stacks/<dump>/ (each worker writes its
        own there too)."""
        if not self.plan.output_data_dir:
            return
        with self.stacks_lock:
            stacks.dump_job(self.plan.run_dir, Path(self.plan.output_data_dir) / "stacks", self.plan.current_host,
                            self.plan.workers, self.cluster.ask_workers if self.cluster else None, reason, log,
                            REPORT_TIMEOUT_S)

    def dump_stacks_later(self, reason: str) -> None:
        """From a stderr observer, which must not block the job's output."""
        threading.Thread(target=self.dump_stacks, args=(reason,), name="stacks", daemon=True).start()

    # -----------------------------------------------------------------------------------------------------
    # Watches: the launcher ends a job that mpirun alone would leave hanging.

    def on_crash_report(self, rank: int) -> None:
        def reason() -> str:
            crash = self.crash_log.crash(rank)
            host = rank_host(self.plan.rank_hosts, rank, self.plan.current_host)
            return (f"rank {rank} on {host} crashed" + (f" with {crash.describe()}" if crash else "")
                    + f" and the job had not ended {CRASH_EXIT_GRACE_S:g} s later (a crash handler hung while "
                    "exiting): the launcher stopped it")
        self.job.abort_later(CRASH_EXIT_GRACE_S, reason)

    def on_daemon_exited(self, host: str) -> None:
        # At the job's end mpirun exits within moments of its daemons; one that died mid-job leaves mpirun
        # waiting forever.
        self.job.abort_later(DAEMON_EXIT_GRACE_S, f"mpirun's daemon on {host} exited and mpirun was still waiting "
                             f"for it {DAEMON_EXIT_GRACE_S:g} s later: orted died there without mpirun noticing")

    def watch_launch(self) -> None:
        timeout = self.plan.peer_timeout_s
        missing = self.cluster.wait_launched(self.started + timeout)
        if missing:
            self.job.abort(f"mpirun started no MPI daemon on {', '.join(missing)} within {timeout:g} s "
                           "(mpi_peer_timeout_s): ssh or orted failed there without mpirun noticing")
