"""backends/mpi/rendezvous.py with the image's Horovod: the master serves Horovod's own rendezvous store while the
command runs and closes it after, whatever the outcome; a port already taken fails the job at once with the reason,
before mpirun starts. Runs inside the image (make image-tests). A whole job over Gloo:
tests/integration/test_gloo_cluster.py."""

import dataclasses
import signal
import socket
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from sagemaker_mxnet_horovod.backends.mpi.master_run import MasterRun
from sagemaker_mxnet_horovod.backends.registry import plan_job
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.training_config import parse_training_config

pytest.importorskip("horovod.runner.http.http_server", reason="needs the image's Horovod: run inside the image")
from sagemaker_mxnet_horovod.backends.mpi.rendezvous import Rendezvous, RendezvousError  # noqa: E402

ENTRYPOINTS = str(Path(__file__).resolve().parents[2] / "entrypoints")


@pytest.fixture(autouse=True)
def restore_signal_handlers():
    """A master's run handles SIGTERM, SIGINT and SIGUSR1 itself: the test process gets its own back afterwards."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def nothing_listens(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return False
    except ConnectionRefusedError:
        return True


def status(port: int, path: str) -> int:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5).status
    except urllib.error.HTTPError as error:
        return error.code


def test_the_rendezvous_serves_horovods_store_until_closed():
    port = free_port()
    rendezvous = Rendezvous("127.0.0.1", port, 4, 2)
    try:
        put = urllib.request.Request(f"http://127.0.0.1:{port}/global/rank0", data=b"address", method="PUT")
        assert urllib.request.urlopen(put, timeout=5).status == 200
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/global/rank0", timeout=5).read() == b"address"
        assert rendezvous.server.scope_size == {"global": 4, "local_host-0": 2, "local_host-1": 2, "cross_0": 2,
                                                "cross_1": 2}
    finally:
        rendezvous.close()
    assert nothing_listens(port)


def test_a_port_already_taken_is_an_error_saying_so():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RendezvousError, match=f"Horovod's Gloo rendezvous cannot listen on 127.0.0.1:{port}: "
                                                  "Address already in use"):
            Rendezvous("127.0.0.1", port, 2, 1)


def one_host_gloo_plan(tmp_path, port, command):
    config = parse_training_config(Paths(tmp_path / "ml"), {"current_host": "algo-1", "hosts": ["algo-1"]},
                                   {"sagemaker_program": "mnist", "sagemaker_mpi_num_of_processes_per_host": "2"},
                                   {}, {}, entrypoints_dir=ENTRYPOINTS)
    env = {"HOROVOD_CPU_OPERATIONS": "gloo", "HOROVOD_GLOO_RENDEZVOUS_PORT": str(port)}
    plan = plan_job(config, HostFacts(cpu_count=2, interfaces=("eth0",)), env)
    plan = dataclasses.replace(plan, command=command, run_dir=str(tmp_path / "run"),
                               output_data_dir=str(tmp_path / "data"))
    return plan, {**env, **plan.env}


def test_the_master_serves_the_rendezvous_while_its_command_runs_and_closes_it_after(tmp_path):
    port = free_port()
    # mpirun, stood in for by a program: it asks the rendezvous for a key no rank has put (404: served) and fails.
    ask = (f"import sys, urllib.request, urllib.error\ntry:\n urllib.request.urlopen('http://127.0.0.1:{port}/global/x',"
           " timeout=5)\nexcept urllib.error.HTTPError as e:\n print('served', e.code)\nsys.exit(3)")
    plan, env = one_host_gloo_plan(tmp_path, port, (sys.executable, "-c", ask))
    outcome = MasterRun(plan, env, "", tmp_path / "failure").run()
    assert outcome.exit_code == 3
    assert "served 404" in outcome.failure.render()
    assert nothing_listens(port)  # closed after a failed command too


def test_a_taken_port_fails_the_job_before_its_command_starts(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        plan, env = one_host_gloo_plan(tmp_path, port, ("true",))
        run = MasterRun(plan, env, "", tmp_path / "failure")
        outcome = run.run()
    assert outcome.exit_code == 1 and run.job.process is None  # the command was never started
    assert outcome.failure.render().startswith(f"Horovod's Gloo rendezvous cannot listen on 127.0.0.1:{port}: "
                                               "Address already in use")
