"""verdict.py: the job's one Failure from how its process ended and what the watches saw: none for a success;
a stop said as such; a failed rank or program named; the launcher's own finding first (a lost worker before a
hang watch's), with the job's exit code as train's."""

import signal

from plan_cases import config, plan
from sagemaker_mxnet_horovod.act.supervise import JobResult
from sagemaker_mxnet_horovod.diagnose.crashes import CrashLog
from sagemaker_mxnet_horovod.diagnose.hangs import StallLog
from sagemaker_mxnet_horovod.diagnose.progress import MARKER
from sagemaker_mxnet_horovod.diagnose.verdict import FINDINGS, Evidence, job_failure

MPI = plan(config(hosts=("algo-1", "algo-2")))  # 2 hosts x 1 rank, this host the master
SINGLE = plan(config(hosts=("algo-1",)))
MPIRUN_NAMES_RANK_1 = ["mpirun detected that one or more processes exited with non-zero status, thus causing",
                       "  Process name: [[41731,1],1]", "  Exit code:    3"]


def verdict(plan_, result, stall_lines=(), crash_lines=()):
    stall_log, crash_log = StallLog(), CrashLog()
    for rank, line in stall_lines:
        stall_log.observe(rank, line)
    for rank, line in crash_lines:
        crash_log.observe(rank, line)
    return job_failure(Evidence(plan_, result, stall_log, crash_log))


def test_a_job_that_exited_0_has_no_failure():
    assert verdict(MPI, JobResult(0)) is None
    assert verdict(SINGLE, JobResult(0, rank_stderr={0: ["a warning"]})) is None


def test_a_failed_rank_is_named_with_its_host_and_error_and_the_jobs_exit_code():
    result = JobResult(3, rank_stderr={1: ["Traceback (most recent call last):", "ValueError: bad label"]},
                       untagged_tail=MPIRUN_NAMES_RANK_1)
    failure = verdict(MPI, result)
    assert failure.render().splitlines()[0] == "rank 1 on algo-2 exited with code 3: ValueError: bad label"
    assert (failure.exit_code, failure.rank, failure.host, failure.finding) == (3, 1, "algo-2", None)


def test_a_program_without_mpi_is_named_by_its_name_and_a_signal_as_128_plus_it():
    failure = verdict(SINGLE, JobResult(-signal.SIGKILL, rank_stderr={0: ["loading", "Killed"]}))
    assert failure.render().splitlines()[0] == "mnist on algo-1 was killed by SIGKILL: Killed"
    assert (failure.exit_code, failure.signal_number) == (137, signal.SIGKILL)


def test_a_stop_is_said_as_such():
    failure = verdict(MPI, JobResult(143, stopped_by_signal=signal.SIGTERM, killed_after_grace=True))
    assert failure.render() == ("stopped by SIGTERM (SageMaker stop or spot interruption); the job exited with code "
                                "143 (SIGTERM); killed after the grace period")
    assert failure.exit_code == 143


def test_the_launchers_own_finding_comes_first_and_an_abort_before_a_hang_watch():
    watch_line = f"{MARKER} rank 1 on algo-2 wrote no output, started no collective and did not compute for 60 s"
    result = JobResult(1, rank_stderr={1: [watch_line]}, untagged_tail=MPIRUN_NAMES_RANK_1)
    assert verdict(MPI, result).finding == watch_line[len("train: "):]
    aborted = JobResult(1, rank_stderr={1: [watch_line]}, untagged_tail=MPIRUN_NAMES_RANK_1,
                        abort_reason="worker algo-2 went away during the job (container stopped or crashed)")
    lines = verdict(MPI, aborted).render().splitlines()
    assert lines[0] == "worker algo-2 went away during the job (container stopped or crashed)"
    assert lines[1].startswith("rank 1 on algo-2 exited with code 3: train: no progress: rank 1 on algo-2")
    assert [find.__name__ for find in FINDINGS] == ["launcher_abort", "hang_watch"]


def test_a_native_crash_seen_by_the_crash_log_is_the_cause():
    result = JobResult(139, rank_stderr={1: ["Segmentation fault: 11"]},
                       untagged_tail=["mpirun noticed that process rank 1 with PID 7 on node c0ffee exited on signal "
                                      "11 (Segmentation fault)."])
    failure = verdict(MPI, result, crash_lines=[(1, "Segmentation fault: 11")])
    assert failure.render().splitlines()[0] == "rank 1 on algo-2 was killed by SIGSEGV (segmentation fault)"
    assert failure.signal_number == signal.SIGSEGV
