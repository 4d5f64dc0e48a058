"""supervise.py: the job as a real process. Its output passes through while each rank's last stderr lines are
kept (mpirun's tags name the rank); a stop reaches the program, an abort ends it and kills it after the grace;
the launcher's SIGTERM is forwarded once.

request_stop of an mpirun job (which signals the local ranks) is not run here: on a shared host /proc shows other
jobs' ranks too. tests/integration and tests/faults stop ranks inside real containers."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

from sagemaker_mxnet_horovod.act.rank_output import RankLogs
from sagemaker_mxnet_horovod.act.supervise import TAIL_LINES, JobProcess
from sagemaker_mxnet_horovod.backends.mpi.output import MPIRUN
from unit_helpers import unit_paths
from unit_helpers.live_output import wait_for_line

SRC = unit_paths.SRC
# A program that says it is ready on stderr, then sleeps; SIGTERM: {handler}.
SLEEPER = """\
import signal, sys, time
{handler}
print("ready", file=sys.stderr, flush=True)
time.sleep(60)
"""


def python_job(code: str, **kwargs) -> JobProcess:
    return JobProcess([sys.executable, "-c", textwrap.dedent(code)], dict(os.environ), **kwargs)


def started_sleeper(handler: str, **kwargs) -> JobProcess:
    """A started job of SLEEPER, once it is ready (its SIGTERM handler installed)."""
    ready = threading.Event()
    job = python_job(SLEEPER.format(handler=handler),
                     stderr_observers=(lambda rank, text: text == "ready" and ready.set(),), **kwargs)
    job.start()
    assert ready.wait(30), "the program did not start within 30 s"
    return job


def test_an_untagged_programs_stderr_is_rank_0s_and_its_output_passes_through(capfd):
    seen = []
    job = python_job("""
        import sys
        print("epoch 1: accuracy 0.5", flush=True)
        for i in range(25):
            print(f"warning {i}", file=sys.stderr)
        sys.exit(3)
    """, stderr_observers=(lambda rank, text: seen.append((rank, text)),))
    job.start()
    result = job.wait()
    assert result.returncode == 3
    assert result.rank_stderr == {0: [f"warning {i}" for i in range(25 - TAIL_LINES, 25)]}
    assert seen == [(0, f"warning {i}") for i in range(25)]
    assert "epoch 1: accuracy 0.5" in result.untagged_tail and len(result.untagged_tail) == 26
    out, err = capfd.readouterr()
    assert out == "epoch 1: accuracy 0.5\n" and err.endswith("warning 24\n")
    assert (result.stopped_by_signal, result.killed_after_grace, result.abort_reason) == (None, False, None)


def test_mpiruns_tags_name_the_rank_of_each_stderr_line():
    seen = []
    job = python_job(r"""
        import sys
        sys.stderr.write("[1,0]<stderr>:loading\n[1,1]<stderr>:Traceback (most recent call last):\n")
        sys.stdout.write("[1,0]<stdout>:epoch 1\n")
        sys.stderr.write("[1,1]<stderr>:ValueError: bad batch\n")
        sys.stderr.flush()
        sys.stderr.write("mpirun detected that one or more processes exited with non-zero status\n")
        sys.exit(1)
    """, output=MPIRUN, stderr_observers=(lambda rank, text: seen.append((rank, text)),))
    job.start()
    result = job.wait()
    assert result.returncode == 1
    assert result.rank_stderr == {0: ["loading"], 1: ["Traceback (most recent call last):", "ValueError: bad batch"]}
    assert seen == [(0, "loading"), (1, "Traceback (most recent call last):"), (1, "ValueError: bad batch")]
    assert result.untagged_tail == ["mpirun detected that one or more processes exited with non-zero status"]


# As mpirun --tag-output writes it: rank 1's line in two pieces, rank 0's piece between them on one line.
INTERLEAVED = r"""
import sys
sys.stdout.write("[1,1]<stdout>:epoch=1 [1,0]<stdout>:rank 0 says hello\n")
sys.stdout.flush()
sys.stderr.write("[1,1]<stderr>:Traceback (most recent[1,1]<stderr>: call last):\n[1,0]<stderr>:a warning\n")
sys.stderr.write("mpirun: its own message\n")
sys.stdout.write("[1,1]<stdout>:loss=0.5\n[1,0]<stdout>:no newline at the end")
"""


def test_each_ranks_whole_lines_go_to_its_log_and_the_chosen_ranks_to_the_console(tmp_path, capfd):
    seen = []
    job = python_job(INTERLEAVED, output=MPIRUN, stderr_observers=(lambda rank, text: seen.append((rank, text)),),
                     rank_logs=RankLogs(tmp_path, ("algo-1", "algo-2")), console_ranks=frozenset({1}))
    job.start()
    result = job.wait()
    # stdout and stderr are two pipes read by two threads: their order in the log is the order they arrived.
    assert sorted((tmp_path / "algo-2-rank-1.log").read_text().splitlines()) == [
        "Traceback (most recent call last):", "epoch=1 loss=0.5"]
    assert sorted((tmp_path / "algo-1-rank-0.log").read_text().splitlines()) == [
        "a warning", "no newline at the end", "rank 0 says hello"]
    assert seen == [(1, "Traceback (most recent call last):"), (0, "a warning")]
    assert result.rank_stderr == {1: ["Traceback (most recent call last):"], 0: ["a warning"]}
    out, err = capfd.readouterr()
    assert out == "[1,1]<stdout>:epoch=1 loss=0.5\n"  # rank 0 is not shown
    assert err == "[1,1]<stderr>:Traceback (most recent call last):\nmpirun: its own message\n"


def test_every_rank_reaches_the_console_untouched_by_default(capfd):
    job = python_job(INTERLEAVED, output=MPIRUN)
    job.start()
    job.wait()
    out, _ = capfd.readouterr()
    assert out.startswith("[1,1]<stdout>:epoch=1 [1,0]<stdout>:rank 0 says hello\n")  # as mpirun wrote it


def test_a_stop_reaches_the_program_which_may_checkpoint_and_exit():
    job = started_sleeper("signal.signal(signal.SIGTERM, lambda *_: (print('saving a checkpoint', file=sys.stderr), "
                          "sys.exit(0)))", stop_grace_s=30)
    job.request_stop(signal.SIGTERM)
    result = job.wait()
    assert (result.returncode, result.rank_stderr[0][-1], result.killed_after_grace) == (0, "saving a checkpoint",
                                                                                          False)


def test_an_abort_ends_the_job_and_kills_it_after_the_grace_when_sigterm_is_ignored():
    before = []  # what runs before the first abort ends the job (the launcher takes every rank's stacks)
    job = started_sleeper("signal.signal(signal.SIGTERM, signal.SIG_IGN)",
                          before_abort=lambda reason: before.append((reason, job.process.poll())))
    aborted = time.monotonic()
    job.abort("worker algo-2 is gone", grace_s=0.5)
    job.abort("a later reason")  # the first cause is the one reported
    result = job.wait()
    assert (result.returncode, result.killed_after_grace, result.abort_reason) == (-9, True, "worker algo-2 is gone")
    assert time.monotonic() - aborted < 10  # killed after the 0.5 s grace, not the sleeper's 60 s: a generous bound
    assert before == [("worker algo-2 is gone", None)]  # once, while the job still ran


def test_abort_later_ends_a_job_still_running_and_spares_one_that_finished():
    job = started_sleeper("")
    job.abort_later(0.2, "mpirun's daemon on algo-2 exited")
    result = job.wait()
    assert (result.returncode, result.abort_reason, result.killed_after_grace) == (
        -signal.SIGTERM, "mpirun's daemon on algo-2 exited", False)
    finished = python_job("pass")
    finished.start()
    finished.abort_later(0.2, "too late")
    result = finished.wait()
    assert (result.returncode, result.abort_reason) == (0, None)
    finished.abort("after the end")  # what a timer that fired now would do: nothing
    assert finished.abort_reason is None


DRIVER = """
import json, os, sys
from sagemaker_mxnet_horovod.act.supervise import JobProcess
from sagemaker_mxnet_horovod.core import stop
program = sys.argv[1]
job = JobProcess([sys.executable, "-c", program], dict(os.environ), stop_grace_s=30)
stops = []
stop.listen(lambda signum: (job.stop(signum), stops.append(signum)))
job.start()
result = job.wait()
print(json.dumps([result.returncode, result.stopped_by_signal, stops, result.rank_stderr.get(0)]))
"""


def test_the_launchers_sigterm_is_forwarded_to_the_job():
    # In a process of its own: the stop path installs the process's signal handlers.
    program = SLEEPER.format(handler="signal.signal(signal.SIGTERM, lambda *_: (print('rank: stopping', "
                                     "file=sys.stderr), sys.exit(143)))").replace('"ready", file=sys.stderr', '"ready"')
    launcher = subprocess.Popen([sys.executable, "-c", DRIVER, program], env={**os.environ, "PYTHONPATH": str(SRC)},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for_line(launcher.stdout, "ready", 30), "the program did not start within 30 s"
        launcher.send_signal(signal.SIGTERM)
        stdout, stderr = launcher.communicate(timeout=60)
    finally:
        launcher.kill()
    assert launcher.returncode == 0, stderr
    assert json.loads(stdout) == [143, signal.SIGTERM, [signal.SIGTERM], ["rank: stopping"]]
    assert "train: received SIGTERM; stopping the job (killing it if still running after 30 s)" in stderr
