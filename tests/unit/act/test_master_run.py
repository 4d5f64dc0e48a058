"""master_run.py: the run of the host that runs the job's command, as real processes: a success and a failure
become the Outcome cli.py writes; the ranks' stderr reaches the diagnosis; a master whose workers never check in
fails naming them, within the peer timeout. The master with real workers and mpirun runs across real containers
(tests/integration, tests/faults)."""

import dataclasses
import socket
import sys
import time

import pytest
from plan_cases import config, plan
from sagemaker_mxnet_horovod.act.master_run import MasterRun

pytestmark = pytest.mark.usefixtures("restore_signal_handlers")  # the run installs its own handlers


def single(tmp_path, code: str):
    """A one-host job whose command is `python -c code` (the plan's command is data: any program will do)."""
    return dataclasses.replace(plan(config(hosts=("algo-1",))), command=(sys.executable, "-c", code),
                               run_dir=str(tmp_path / "run"))


def test_a_program_that_succeeds_is_an_outcome_without_failure(tmp_path):
    outcome = MasterRun(single(tmp_path, "print('epoch 1')"), {}, "", tmp_path / "failure").run()
    assert outcome.failure is None and outcome.exit_code == 0 and outcome.other_hosts_texts == ()


def test_a_failing_program_is_diagnosed_from_its_stderr(tmp_path):
    code = "import sys; print('Traceback (most recent call last):', file=sys.stderr); raise SystemExit('bad label 7')"
    outcome = MasterRun(single(tmp_path, code), {}, "", tmp_path / "failure").run()
    assert outcome.exit_code == 1
    assert outcome.failure.render().splitlines()[:2] == ["mnist on algo-1 exited with code 1: bad label 7",
                                                         "--- last lines of mnist stderr ---"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_master_whose_workers_never_check_in_fails_naming_them_within_the_peer_timeout(tmp_path):
    two_hosts = plan(config(hps={"mpi_peer_timeout_s": "1", "mpi_handshake_port": str(free_port())}))
    two_hosts = dataclasses.replace(two_hosts, run_dir=str(tmp_path))
    started = time.monotonic()
    outcome = MasterRun(two_hosts, {}, "127.0.0.1", tmp_path / "failure").run()
    assert time.monotonic() - started < 15  # fails fast: one second of peer timeout, not a hang
    assert outcome.exit_code == 1
    assert outcome.failure.render().startswith("cluster setup failed on master algo-1: worker(s) algo-2 did not "
                                               "check in with the master within the peer timeout")
    assert (tmp_path / "id_ed25519.pub").read_text().startswith("ssh-ed25519 ")  # the job's key was made first
