"""output.py: mpirun's output as the verdict reads it: tagged by rank, each rank named with the plan's host, mpirun's
report naming the rank killed by SIGKILL and the first failed rank (captured in this image: test_mpirun_report.py)."""

import signal

from sagemaker_mxnet_horovod.backends.mpi.output import MPIRUN
from sagemaker_mxnet_horovod.core.outcome import JobResult
from sagemaker_mxnet_horovod.diagnose.crashes import CrashLog
from sagemaker_mxnet_horovod.diagnose.job_output import RankLine
from unit_helpers.plan_cases import config, plan

TWO_HOSTS = plan(config(hosts=("algo-1", "algo-2")))  # 2 hosts x 1 rank: rank 1 is algo-2's
# mpirun knows the master by its container hostname; the plan's names are what a failure gives.
RANK_1_SIGNALED = "mpirun noticed that process rank 1 with PID 0 on node 8c1f2a exited on signal {} ({})."
RANK_1_EXITED = ["  Process name: [[41731,1],1]", "  Exit code:    3"]


def test_ranks_are_tagged_and_named_by_rank_and_host():
    assert MPIRUN.tagged_by_rank is True
    assert MPIRUN.where(TWO_HOSTS, 1, "algo-2") == "rank 1 on algo-2"


def test_its_lines_are_cut_at_mpiruns_tags():
    # How the run reads mpirun's streams: each rank's line apart, mpirun's own untagged (rank_tags.py's cases).
    lines = MPIRUN.lines("stderr")
    assert lines.feed(b"[1,2]<stderr>:ValueError: x\n") + lines.feed(b"mpirun noticed\n") == [
        RankLine(2, "stderr", "ValueError: x", b"[1,2]<stderr>:"), RankLine(None, "stderr", "mpirun noticed")]


def test_the_rank_mpirun_reports_killed_by_sigkill_is_named_with_the_plans_host():
    killed = JobResult(137, untagged_tail=[RANK_1_SIGNALED.format(9, "Killed")])
    assert MPIRUN.killed_by_sigkill(TWO_HOSTS, killed) == ("algo-2", "rank 1")
    # Another signal, or mpirun's own SIGKILL without a rank named, is no rank's SIGKILL.
    assert MPIRUN.killed_by_sigkill(TWO_HOSTS, JobResult(139, untagged_tail=[RANK_1_SIGNALED.format(
        11, "Segmentation fault")])) is None
    assert MPIRUN.killed_by_sigkill(TWO_HOSTS, JobResult(-signal.SIGKILL)) is None


def test_the_first_failed_rank_is_mpiruns():
    assert MPIRUN.reported_rank(JobResult(135, untagged_tail=[RANK_1_SIGNALED.format(7, "Bus error")])) == 1
    assert MPIRUN.reported_rank(JobResult(3, untagged_tail=RANK_1_EXITED)) == 1
    assert MPIRUN.reported_rank(JobResult(1, untagged_tail=["hello"])) is None
    result = JobResult(3, rank_stderr={1: ["ValueError: bad label"]}, untagged_tail=RANK_1_EXITED)
    assert MPIRUN.failure(TWO_HOSTS, result, CrashLog()).render().splitlines()[0] == (
        "rank 1 on algo-2 exited with code 3: ValueError: bad label")
