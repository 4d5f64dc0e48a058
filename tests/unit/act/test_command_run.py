"""command_run.py: the job's command run on this host, as real processes: a success and a failure become the Outcome
cli.py writes; the ranks' stderr reaches the diagnosis; every rank's stacks on demand; a stop ends the job with 143,
whatever the program then exits with. Around mpirun, with workers: backends/mpi/test_master_run.py."""

import dataclasses
import os
import signal
import sys
import textwrap

import pytest
from sagemaker_mxnet_horovod.act.command_run import CommandRun
from unit_helpers import unit_paths
from unit_helpers.plan_cases import config, plan
from unit_helpers.stacks_request import ask_for_stacks_then_release

pytestmark = pytest.mark.usefixtures("restore_signal_handlers")  # the run installs its own handlers


def single(tmp_path, code: str):
    """A one-host job whose command is `python -c code` (the plan's command is data: any program will do)."""
    return dataclasses.replace(plan(config(hosts=("algo-1",))), command=(sys.executable, "-c", code),
                               run_dir=str(tmp_path / "run"), output_data_dir=str(tmp_path / "data"))


def test_a_program_that_succeeds_is_an_outcome_without_failure(tmp_path):
    outcome = CommandRun(single(tmp_path, "print('epoch 1')"), {}, tmp_path / "failure").run()
    assert outcome.failure is None and outcome.exit_code == 0 and outcome.other_hosts_texts == ()
    assert (tmp_path / "data" / "logs" / "algo-1-rank-0.log").read_text() == "epoch 1\n"  # the program's own log


def test_a_failing_program_is_diagnosed_from_its_stderr(tmp_path):
    code = "import sys; print('Traceback (most recent call last):', file=sys.stderr); raise SystemExit('bad label 7')"
    outcome = CommandRun(single(tmp_path, code), {}, tmp_path / "failure").run()
    assert outcome.exit_code == 1
    assert outcome.failure.render().splitlines()[:2] == ["mnist on algo-1 exited with code 1: bad label 7",
                                                         "--- last lines of mnist stderr ---"]


# A rank blocked opening a FIFO nobody writes yet (native code), until the test lets it go. It says when it is in
# wait_for_release (fifo + ".waiting"): a rank still importing when asked has other stacks.
WAITING_RANK = textwrap.dedent("""
    import sys
    def wait_for_release(fifo):
        open(fifo + ".waiting", "w").close()
        open(fifo).close()
    wait_for_release(sys.argv[1])
    print("released")
""")


def test_sigusr1_writes_every_ranks_stacks_and_the_job_goes_on(tmp_path):
    (tmp_path / "train.py").write_text(WAITING_RANK)
    os.mkfifo(tmp_path / "release")
    job = dataclasses.replace(single(tmp_path, ""), command=(
        sys.executable, "-m", "sagemaker_mxnet_horovod.act.rank_program", str(tmp_path / "run"), str(tmp_path), "--",
        sys.executable, str(tmp_path / "train.py"), str(tmp_path / "release")))
    problems = ask_for_stacks_then_release(tmp_path)
    outcome = CommandRun(job, {"PYTHONPATH": str(unit_paths.SRC), "PATH": os.environ["PATH"]},
                         tmp_path / "failure").run()
    assert problems == [] and outcome.exit_code == 0
    (dump,) = (tmp_path / "data" / "stacks").iterdir()
    assert "in wait_for_release" in (dump / "algo-1-rank-0.txt").read_text()
    assert (tmp_path / "data" / "logs" / "algo-1-rank-0.log").read_text() == "released\n"


def test_a_stopped_job_exits_143_whatever_the_program_exits_with(tmp_path):
    # The program stops the launcher (SageMaker's SIGTERM reaching this process, the test's); the stop reaches the
    # program, which exits 0 on it, as a script that catches SIGTERM may: the job was stopped all the same (it exited
    # 0 and succeeded before).
    code = ("import os, signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); "
            "os.kill(os.getppid(), signal.SIGTERM); time.sleep(60)")
    outcome = CommandRun(single(tmp_path, code), {}, tmp_path / "failure").run()
    assert (outcome.exit_code, outcome.failure.signal_number) == (143, signal.SIGTERM)
    assert outcome.failure.cause == "stopped by SIGTERM (SageMaker stop or spot interruption); the job exited with code 0"
