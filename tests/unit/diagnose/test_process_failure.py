"""process_failure.py: a process that is not one of mpirun's ranks named with how it ended, its native crash or its
error line first, then its last stderr lines. The capture is real output (backends/mpi/test_mpirun_report.py says
where it comes from)."""

import os
from pathlib import Path

from sagemaker_mxnet_horovod.act.supervise import JobProcess
from sagemaker_mxnet_horovod.diagnose.crashes import CrashLog
from sagemaker_mxnet_horovod.diagnose.job_output import PROGRAM
from sagemaker_mxnet_horovod.diagnose.process_failure import process_failure

CAPTURES = Path(__file__).parent / "captures"


def test_untagged_program_crash():
    # mpirun without --tag-output: the launcher runs a program that way only without MPI, as "rank 0".
    crash_log = CrashLog()
    job = JobProcess(["sh", "-c", 'cat "$0" >&2', str(CAPTURES / "plain-mpirun-segv-exit255.txt")], dict(os.environ),
                     output=PROGRAM, stderr_observers=(crash_log.observe,))
    job.start()
    result = job.wait()
    message = process_failure("train.py", "algo-1", 255, result.rank_stderr[0], crash_log.crash(0)).render()
    first, *rest = message.splitlines()
    assert first == "train.py on algo-1 crashed with SIGSEGV (segmentation fault); then it exited with code 255"
    assert "Segmentation fault: 11" in rest


def test_process_failure():
    message = process_failure("train.py", "algo-1", -9, ["loading", "Killed"]).render()
    assert message.splitlines()[0] == "train.py on algo-1 was killed by SIGKILL: Killed"
    assert process_failure("mnist", "algo-1", 2, []).render() == "mnist on algo-1 exited with code 2"
