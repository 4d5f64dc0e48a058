"""The job's verdict: from how the job's process ended (core/outcome.JobResult) and what the watches saw, the
one Failure the failure file reports, or None when the job succeeded.

How it ended gives the failure (ranks.py: which rank, how, its error); a finding of the launcher's own, when one
explains it, goes first. FINDINGS lists them in the order they are tried: a new kind of cause (what a rank died
of, say) is one function here, `(Evidence) -> str | None`, and one line in FINDINGS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from sagemaker_mxnet_horovod.core.failure import Failure, describe_exit, exit_status, rank_host
from sagemaker_mxnet_horovod.core.outcome import JobResult
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.core.stop import stopped
from sagemaker_mxnet_horovod.diagnose import shm
from sagemaker_mxnet_horovod.diagnose.crashes import CrashLog
from sagemaker_mxnet_horovod.diagnose.hangs import StallLog, hang_cause
from sagemaker_mxnet_horovod.diagnose.host_report import HostReport, oom_cause
from sagemaker_mxnet_horovod.diagnose.job_output import PROGRAM, JobOutput


@dataclass(frozen=True)
class Evidence:
    """What the diagnosis reads: the plan, how the job ended, what the stderr watches saw as it ran, and what
    each host reported about itself (its memory, its /dev/shm: host_report.py). output: how the job's process's
    output names what failed (job_output.py: the program's own, or the backend's reader, such as mpirun's)."""

    plan: Plan
    result: JobResult
    stall_log: StallLog
    crash_log: CrashLog
    hosts: Mapping[str, HostReport] = field(default_factory=dict)
    output: JobOutput = PROGRAM


def launcher_abort(evidence: Evidence) -> str | None:
    """The launcher ended the job itself (a lost worker, a daemon gone, a crashed rank that did not exit)."""
    return evidence.result.abort_reason


def hang_watch(evidence: Evidence) -> str | None:
    """A hang watch ended it: a rank's progress watch (mpi_progress_timeout_s), or Horovod's stall inspector
    (horovod_stall_timeout_s)."""
    plan = evidence.plan
    return hang_cause(evidence.stall_log, evidence.result.rank_stderr, plan.rank_hosts, plan.rank_env)


def sigkilled(evidence: Evidence) -> tuple[str, str] | None:
    """(host, 'rank 1' or the program's name) of the process killed by SIGKILL that ended the job, if one did."""
    return evidence.output.killed_by_sigkill(evidence.plan, evidence.result)


def out_of_memory(evidence: Evidence) -> str | None:
    """A host whose container's OOM killer killed a process during the job: the rank killed by SIGKILL there,
    when mpirun names it. Where the kernel does not count OOM kills (cgroup v1 before Linux 4.13), usage that
    reached the limit counts only with such a rank."""
    host, victim = sigkilled(evidence) or (None, None)
    for name in sorted(evidence.hosts, key=lambda h: (h != host, h)):
        report = evidence.hosts[name]
        if report.ran_out_of_memory and (name == host or report.at_end.oom_kills is not None):
            return oom_cause(name, victim if name == host else None, report)
    return None


def shm_too_small(evidence: Evidence) -> str | None:
    """A rank died of a shared-memory symptom on a host whose /dev/shm is small (shm.py)."""
    plan, result = evidence.plan, evidence.result
    symptom = shm.find_symptom(result.rank_stderr, result.untagged_tail)
    if symptom is None or plan.shm is None:
        return None
    rank = symptom.rank
    if rank is None:  # in the job's process's own report (mpirun's "exited on signal 7"), when it names the rank
        rank = evidence.output.reported_rank(result)
    if rank is None:
        host, where = plan.current_host, "a rank"
    else:
        host = rank_host(plan.rank_hosts, rank, plan.current_host)
        where = evidence.output.where(plan, rank, host)
    report = evidence.hosts.get(host)
    space = (report.shm_bytes, report.at_start.shm_free_bytes) if report else (plan.shm.size_bytes, plan.shm.free_bytes)
    return shm.cause(symptom, where, plan.shm, *space)


FINDINGS: tuple[Callable[[Evidence], str | None], ...] = (out_of_memory, shm_too_small, launcher_abort, hang_watch)


def how_it_ended(evidence: Evidence) -> Failure:
    """The failure as the job's process reports it, read by its reader: a failed rank (mpirun's), or the failed
    program."""
    return evidence.output.failure(evidence.plan, evidence.result, evidence.crash_log)


def stopped_job(evidence: Evidence) -> Failure:
    """A stopped job, as the stop path says it (exit 143, whatever the job's process exited with), and how the job's
    process ended."""
    result = evidence.result
    return stopped(result.stopped_by_signal, f"the job {describe_exit(result.returncode)}"
                   + ("; killed after the grace period" if result.killed_after_grace else ""),
                   host=evidence.plan.current_host)


def job_failure(evidence: Evidence) -> Failure | None:
    """None when the job exited 0 unstopped; else why it failed: stopped (exit 143), or with train's exit code the
    job's own."""
    code = exit_status(evidence.result.returncode)
    if evidence.result.stopped_by_signal is not None:
        failure = stopped_job(evidence)
    elif code == 0:
        return None
    else:
        failure = replace(how_it_ended(evidence), exit_code=code)
    return failure.with_finding(next((found for find in FINDINGS if (found := find(evidence))), None))
