"""verdict.py: the job's one Failure from how its process ended and what the watches saw: none for a success;
a stop said as such, exit 143 whatever the job's process exited with; a failed rank or program named; the launcher's own finding first (a lost worker before a
hang watch's), with the job's exit code as train's; a SIGKILLed rank on a host whose OOM killer struck, and a rank
dead of a shared-memory symptom on a host with a small /dev/shm, named as such."""

import dataclasses
import signal

from sagemaker_mxnet_horovod.backends.mpi.output import MPIRUN
from sagemaker_mxnet_horovod.core.outcome import JobResult
from sagemaker_mxnet_horovod.diagnose.crashes import CrashLog
from sagemaker_mxnet_horovod.diagnose.hangs import StallLog
from sagemaker_mxnet_horovod.diagnose.host_report import HostReport
from sagemaker_mxnet_horovod.diagnose.job_output import PROGRAM
from sagemaker_mxnet_horovod.diagnose.memory import MemoryReading
from sagemaker_mxnet_horovod.diagnose.progress import MARKER
from sagemaker_mxnet_horovod.diagnose.verdict import FINDINGS, Evidence, job_failure
from unit_helpers.plan_cases import config, plan

MPI = plan(config(hosts=("algo-1", "algo-2")))  # 2 hosts x 1 rank, this host the master
SINGLE = plan(config(hosts=("algo-1",)))
MPIRUN_NAMES_RANK_1 = ["mpirun detected that one or more processes exited with non-zero status, thus causing",
                       "  Process name: [[41731,1],1]", "  Exit code:    3"]


def verdict(plan_, result, stall_lines=(), crash_lines=(), hosts=None):
    stall_log, crash_log = StallLog(), CrashLog()
    for rank, line in stall_lines:
        stall_log.observe(rank, line)
    for rank, line in crash_lines:
        crash_log.observe(rank, line)
    # As each backend runs it: the MPI backend's run reads mpirun's output, the single process's its own.
    return job_failure(Evidence(plan_, result, stall_log, crash_log, hosts or {},
                                output=MPIRUN if plan_.backend == "mpi" else PROGRAM))


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


def test_a_stopped_job_exits_143_whatever_its_process_exits_with():
    # mpirun's status after a stop is its ranks' (1 here), and a program may exit 0 on SIGTERM: stopped, both.
    for planned, returncode in ((MPI, 1), (SINGLE, 0)):
        failure = verdict(planned, JobResult(returncode, stopped_by_signal=signal.SIGTERM))
        assert (failure.exit_code, failure.signal_number, failure.host) == (143, signal.SIGTERM, "algo-1")
        assert failure.cause == ("stopped by SIGTERM (SageMaker stop or spot interruption); the job exited with code "
                                 f"{returncode}")


def test_the_launchers_own_finding_comes_first_and_an_abort_before_a_hang_watch():
    watch_line = f"{MARKER} rank 1 on algo-2 wrote no output, started no collective and did not compute for 60 s"
    result = JobResult(1, rank_stderr={1: [watch_line]}, untagged_tail=MPIRUN_NAMES_RANK_1)
    assert verdict(MPI, result).finding == watch_line[len("train: "):]
    aborted = JobResult(1, rank_stderr={1: [watch_line]}, untagged_tail=MPIRUN_NAMES_RANK_1,
                        abort_reason="worker algo-2 went away during the job (container stopped or crashed)")
    lines = verdict(MPI, aborted).render().splitlines()
    assert lines[0] == "worker algo-2 went away during the job (container stopped or crashed)"
    assert lines[1].startswith("rank 1 on algo-2 exited with code 3: train: no progress: rank 1 on algo-2")
    assert [find.__name__ for find in FINDINGS] == ["out_of_memory", "shm_too_small", "launcher_abort", "hang_watch"]


def test_a_native_crash_seen_by_the_crash_log_is_the_cause():
    result = JobResult(139, rank_stderr={1: ["Segmentation fault: 11"]},
                       untagged_tail=["mpirun noticed that process rank 1 with PID 7 on node c0ffee exited on signal "
                                      "11 (Segmentation fault)."])
    failure = verdict(MPI, result, crash_lines=[(1, "Segmentation fault: 11")])
    assert failure.render().splitlines()[0] == "rank 1 on algo-2 was killed by SIGSEGV (segmentation fault)"
    assert failure.signal_number == signal.SIGSEGV


MIB = 1 << 20
CALM = MemoryReading(limit_bytes=256 * MIB, peak_bytes=40 * MIB, oom_kills=0, limit_hits=0)
OOM = MemoryReading(limit_bytes=256 * MIB, peak_bytes=256 * MIB, oom_kills=1, limit_hits=812)
RANK_1_SIGKILLED = ["mpirun noticed that process rank 1 with PID 0 on node algo-2 exited on signal 9 (Killed)."]


def test_a_sigkilled_rank_on_a_host_whose_oom_killer_struck_ran_out_of_memory():
    result = JobResult(137, rank_stderr={0: ["Horovod has been shut down"]}, untagged_tail=RANK_1_SIGKILLED)
    lines = verdict(MPI, result, hosts={"algo-1": HostReport(CALM, CALM), "algo-2": HostReport(CALM, OOM)}
                    ).render().splitlines()
    assert lines[0].startswith("algo-2 ran out of memory: the kernel's OOM killer killed rank 1 (SIGKILL); container "
                               "limit 256 MiB, peak usage 256 MiB of 256 MiB")
    assert lines[1] == "rank 1 on algo-2 was killed by SIGKILL"
    # The same SIGKILL without an OOM kill recorded: no such finding.
    assert verdict(MPI, result, hosts={"algo-2": HostReport(CALM, CALM)}).finding is None
    # A kernel that only counts limit hits (v1 before 4.13): they count for the SIGKILLed rank's host only.
    hits_only = dataclasses.replace(OOM, oom_kills=None)
    start = dataclasses.replace(CALM, oom_kills=None)
    assert verdict(MPI, result, hosts={"algo-2": HostReport(start, hits_only)}).finding.startswith(
        "algo-2 ran out of memory: the kernel's OOM killer killed rank 1")
    assert verdict(MPI, result, hosts={"algo-1": HostReport(start, hits_only)}).finding is None


def test_a_program_without_mpi_killed_by_the_oom_killer():
    failure = verdict(SINGLE, JobResult(-signal.SIGKILL, rank_stderr={0: ["Killed"]}),
                      hosts={"algo-1": HostReport(CALM, OOM)})
    assert failure.render().splitlines()[0].startswith("algo-1 ran out of memory: the kernel's OOM killer killed "
                                                       "mnist (SIGKILL)")


def test_a_rank_dead_of_a_shm_symptom_on_a_small_dev_shm():
    small = dataclasses.replace(MPI, shm=dataclasses.replace(MPI.shm, size_bytes=64 * MIB, need_bytes=256 * MIB))
    result = JobResult(135, rank_stderr={1: ["Bus error (core dumped)"]}, untagged_tail=[
        "mpirun noticed that process rank 1 with PID 0 on node algo-2 exited on signal 7 (Bus error)."])
    first = verdict(small, result).render().splitlines()[0]
    assert first.startswith("/dev/shm too small: rank 1 on algo-2 died of Bus error: SIGBUS on a page of a full "
                            "/dev/shm ('Bus error (core dumped)'); /dev/shm there is 64 MiB, smaller than")
    # A rank killed by SIGBUS says nothing itself: mpirun's report names it.
    silent = dataclasses.replace(result, rank_stderr={0: ["Horovod has been shut down"]})
    assert verdict(small, silent).render().startswith("/dev/shm too small: rank 1 on algo-2 died of Bus error")
    # The worker's own report, when there is one, gives its /dev/shm; a large one is not blamed.
    assert verdict(small, result, hosts={"algo-2": HostReport(CALM, CALM, 32 << 30)}).finding is None
    # ... unless others fill it (the host's own /dev/shm, docker run --ipc=host): what was free counts.
    shared_at_start = dataclasses.replace(CALM, shm_free_bytes=100 * MIB)
    shared = verdict(small, result, hosts={"algo-2": HostReport(shared_at_start, CALM, 32 << 30)})
    assert "; /dev/shm there is 100 MiB free of 32 GiB, smaller than" in shared.render().splitlines()[0]
