"""backend.py: the MPI backend's run, as real processes: every host's rank environment written for root only before
anything runs (with the plan's Gloo rendezvous, rank_env.py), then the master's run (master_run.py): here a master
whose workers never check in, which fails naming them within the peer timeout."""

import dataclasses
import json
import socket
import stat

import pytest
from sagemaker_mxnet_horovod.act.rank_program import rank_environment
from sagemaker_mxnet_horovod.backends.mpi import backend as mpi
from sagemaker_mxnet_horovod.backends.mpi.rank_env import write_rank_environment
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
    assert json.loads(rank_env.read_text()) == {
        "environment": rank_environment(two_hosts, {"PATH": "/usr/bin", "SECRET": "s"}), "gloo_rendezvous": None}


def test_every_hosts_file_carries_the_plans_gloo_rendezvous(tmp_path):
    # A worker's file: its ranks learn from it that the job runs over Gloo (rank_env.py).
    env = {"PATH": "/usr/bin", "HOROVOD_CPU_OPERATIONS": "gloo"}
    worker = dataclasses.replace(plan(config(current="algo-2"), env=env), run_dir=str(tmp_path))
    write_rank_environment(worker, env)
    written = json.loads((tmp_path / "rank-env.json").read_text())
    assert written["gloo_rendezvous"] == {"port": 7421, "bind_address": "", "size": 2, "local_size": 1}
    assert written["environment"]["HOROVOD_CONTROLLER"] == "gloo"
