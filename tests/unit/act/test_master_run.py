"""master_run.py: the run of the host that runs the job's command, as real processes: a success and a failure
become the Outcome cli.py writes; the ranks' stderr reaches the diagnosis; a master whose workers never check in
fails naming them, within the peer timeout. The master with real workers and mpirun runs across real containers
(tests/integration, tests/faults)."""

import dataclasses
import os
import socket
import sys
import textwrap
import time

import pytest
import unit_paths
from plan_cases import config, plan
from sagemaker_mxnet_horovod.act.master_run import MasterRun
from stacks_request import ask_for_stacks_then_release

pytestmark = pytest.mark.usefixtures("restore_signal_handlers")  # the run installs its own handlers


def single(tmp_path, code: str):
    """A one-host job whose command is `python -c code` (the plan's command is data: any program will do)."""
    return dataclasses.replace(plan(config(hosts=("algo-1",))), command=(sys.executable, "-c", code),
                               run_dir=str(tmp_path / "run"), output_data_dir=str(tmp_path / "data"))


def test_a_program_that_succeeds_is_an_outcome_without_failure(tmp_path):
    outcome = MasterRun(single(tmp_path, "print('epoch 1')"), {}, "", tmp_path / "failure").run()
    assert outcome.failure is None and outcome.exit_code == 0 and outcome.other_hosts_texts == ()
    assert (tmp_path / "data" / "logs" / "algo-1-rank-0.log").read_text() == "epoch 1\n"  # the program's own log


def test_a_failing_program_is_diagnosed_from_its_stderr(tmp_path):
    code = "import sys; print('Traceback (most recent call last):', file=sys.stderr); raise SystemExit('bad label 7')"
    outcome = MasterRun(single(tmp_path, code), {}, "", tmp_path / "failure").run()
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
        sys.executable, "-m", "sagemaker_mxnet_horovod.act.rank_env", str(tmp_path / "run"), str(tmp_path), "--",
        sys.executable, str(tmp_path / "train.py"), str(tmp_path / "release")))
    problems = ask_for_stacks_then_release(tmp_path)
    outcome = MasterRun(job, {"PYTHONPATH": str(unit_paths.SRC), "PATH": os.environ["PATH"]}, "",
                        tmp_path / "failure").run()
    assert problems == [] and outcome.exit_code == 0
    (dump,) = (tmp_path / "data" / "stacks").iterdir()
    assert "in wait_for_release" in (dump / "algo-1-rank-0.txt").read_text()
    assert (tmp_path / "data" / "logs" / "algo-1-rank-0.log").read_text() == "released\n"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_master_whose_workers_never_check_in_fails_naming_them_within_the_peer_timeout(tmp_path):
    two_hosts = plan(config(hps={"mpi_peer_timeout_s": "1", "mpi_handshake_port": str(free_port())}))
    two_hosts = dataclasses.replace(two_hosts, run_dir=str(tmp_path), output_data_dir=str(tmp_path / "data"))
    started = time.monotonic()
    outcome = MasterRun(two_hosts, {}, "127.0.0.1", tmp_path / "failure").run()
    assert time.monotonic() - started < 15  # fails fast: one second of peer timeout, not a hang
    assert outcome.exit_code == 1
    assert outcome.failure.render().startswith("cluster setup failed on master algo-1: worker(s) algo-2 did not "
                                               "check in with the master within the peer timeout")
    assert (tmp_path / "id_ed25519.pub").read_text().startswith("ssh-ed25519 ")  # the job's key was made first
