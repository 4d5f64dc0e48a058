"""job_output.py: the program's own output as the verdict reads it: no rank tags, the program named by its name,
its own SIGKILL the job's, no report of a first failed rank (mpirun's reader: backends/mpi/test_output.py)."""

import signal

from sagemaker_mxnet_horovod.core.outcome import JobResult
from sagemaker_mxnet_horovod.diagnose.crashes import CrashLog
from sagemaker_mxnet_horovod.diagnose.job_output import PROGRAM, RankLine
from unit_helpers.plan_cases import config, plan

SINGLE = plan(config(hosts=("algo-1",)))
# mpirun's words, which a program's own output never holds: the program's reader must not take them for a report.
MPIRUN_WORDS = ["mpirun noticed that process rank 1 with PID 0 on node algo-2 exited on signal 9 (Killed)."]


def test_the_program_is_named_by_its_name_and_its_output_is_untagged():
    assert PROGRAM.where(SINGLE, 0, "algo-1") == "mnist on algo-1"
    assert PROGRAM.tagged_by_rank is False


def test_the_programs_lines_are_taken_as_they_are():
    # Nothing in a program's own output names a rank, whatever it looks like; nothing is left over at the end.
    lines = PROGRAM.lines("stdout")
    assert lines.feed(b"[1,0]<stdout>:epoch 1\n") + lines.feed(b"bad \xff byte\n") == [
        RankLine(None, "stdout", "[1,0]<stdout>:epoch 1"), RankLine(None, "stdout", "bad \ufffd byte")]
    assert lines.flush() == []


def test_only_the_programs_own_sigkill_is_the_jobs():
    assert PROGRAM.killed_by_sigkill(SINGLE, JobResult(-signal.SIGKILL)) == ("algo-1", "mnist")
    assert PROGRAM.killed_by_sigkill(SINGLE, JobResult(137, untagged_tail=MPIRUN_WORDS)) is None
    assert PROGRAM.reported_rank(JobResult(137, untagged_tail=MPIRUN_WORDS)) is None


def test_the_failure_is_the_programs_error_line():
    result = JobResult(2, rank_stderr={0: ["Traceback (most recent call last):", "ValueError: bad label"]})
    assert PROGRAM.failure(SINGLE, result, CrashLog()).render().splitlines()[0] == (
        "mnist on algo-1 exited with code 2: ValueError: bad label")
