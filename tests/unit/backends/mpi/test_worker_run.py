"""worker_run.py: a worker host as real sockets and processes on this host: a master that is not there within
the peer timeout ends the worker, naming the master and the port, with exit 1 (a master listening long after it is not
reached). The worker with a real sshd, the
master's mpirun and every outcome runs across real containers (tests/integration, tests/faults)."""

import dataclasses
import socket

import pytest
from sagemaker_mxnet_horovod.backends.mpi.worker_run import run_worker
from sagemaker_mxnet_horovod.parse.paths import Paths
from unit_helpers.late_peers import arriving_late, master_listening
from unit_helpers.plan_cases import config, plan

pytestmark = pytest.mark.usefixtures("restore_signal_handlers")  # the run installs its own handlers


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed again when the probe is: nothing listens there


def test_a_worker_that_cannot_reach_the_master_fails_naming_it_within_the_peer_timeout(tmp_path):
    worker = plan(config(current="algo-2", hps={"mpi_peer_timeout_s": "1", "mpi_handshake_port": str(closed_port())}))
    # The master's name must resolve here: the worker then finds nothing listening on the port.
    worker = dataclasses.replace(worker, master_host="localhost", run_dir=str(tmp_path / "run"))
    # The master comes 30 s later, and hangs up: a worker still trying then would fail otherwise.
    with arriving_late(lambda: master_listening(worker.handshake_port)):
        outcome = run_worker(worker, Paths(tmp_path / "ml"), "127.0.0.1")
    assert outcome.exit_code == 1 and outcome.other_hosts_texts == ()
    assert outcome.failure.render().startswith(f"worker algo-2: could not reach the master localhost (127.0.0.1) on "
                                               f"port {worker.handshake_port} within the peer timeout")
