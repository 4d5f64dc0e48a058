"""master_run.py and the MPI backend's run, as real processes: the rank environment written for root only before
anything runs; a master whose workers never check in fails naming them, within the peer timeout; a stop ends the
job with 143, whatever mpirun then exits with. The master with real workers and mpirun runs across real containers
(tests/integration, tests/faults)."""

import dataclasses
import json
import signal
import socket
import stat
import sys

import pytest
from sagemaker_mxnet_horovod.act.rank_env import rank_environment
from sagemaker_mxnet_horovod.backends import mpi
from sagemaker_mxnet_horovod.backends.mpi.master_run import MasterRun
from sagemaker_mxnet_horovod.parse.paths import Paths
from unit_helpers.late_peers import arriving_late, worker_checking_in
from unit_helpers.plan_cases import config, plan

pytestmark = pytest.mark.usefixtures("restore_signal_handlers")  # the run installs its own handlers


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_master_whose_workers_never_check_in_fails_naming_them_within_the_peer_timeout(tmp_path):
    # The worker ("localhost": its check-in comes from its name's address) checks in 30 s later: a master still
    # gathering then would take its check-in and fail otherwise when it hangs up.
    two_hosts = plan(config(hosts=("algo-1", "localhost"), hps={"mpi_peer_timeout_s": "1",
                                                                "mpi_handshake_port": str(free_port())}),
                     env={"PATH": "/usr/bin", "SECRET": "s"})
    two_hosts = dataclasses.replace(two_hosts, run_dir=str(tmp_path), output_data_dir=str(tmp_path / "data"))
    with arriving_late(lambda: worker_checking_in(two_hosts.handshake_port, "localhost")):
        outcome = mpi.BACKEND.run(two_hosts, {"PATH": "/usr/bin", "SECRET": "s"}, Paths(tmp_path / "ml"), "127.0.0.1")
    assert outcome.exit_code == 1
    assert outcome.failure.render().startswith("cluster setup failed on master algo-1: worker(s) localhost did not "
                                               "check in with the master within the peer timeout")
    assert (tmp_path / "id_ed25519.pub").read_text().startswith("ssh-ed25519 ")  # the job's key was made first
    # Every MPI rank applies this host's environment from a file, written before anything ran.
    rank_env = tmp_path / "rank-env.json"
    assert stat.S_IMODE(rank_env.stat().st_mode) == 0o600  # the job's environment may hold credentials
    assert json.loads(rank_env.read_text()) == rank_environment(two_hosts, {"PATH": "/usr/bin", "SECRET": "s"})


def test_a_stopped_job_exits_143_whatever_mpirun_exits_with(tmp_path):
    # mpirun, stood in for by a program: it stops the launcher (SageMaker's SIGTERM reaching this process, the
    # test's) and exits 1, as mpirun does once its ranks have checkpointed and exited. This exited 1 before: the
    # MPI path took mpirun's status for the job's.
    p = plan(config(hosts=("algo-1",), hps={"sagemaker_mpi_num_of_processes_per_host": "2"}))
    assert (p.backend, p.workers) == ("mpi", ())
    code = "import os, signal, sys; os.kill(os.getppid(), signal.SIGTERM); sys.exit(1)"
    p = dataclasses.replace(p, command=(sys.executable, "-c", code), run_dir=str(tmp_path / "run"),
                            output_data_dir=str(tmp_path / "data"))
    outcome = MasterRun(p, {}, "", tmp_path / "failure").run()
    assert (outcome.exit_code, outcome.failure.signal_number) == (143, signal.SIGTERM)
    assert outcome.failure.cause == "stopped by SIGTERM (SageMaker stop or spot interruption); the job exited with code 1"
