"""backends/mpi/rendezvous.py with the image's Horovod: the master serves Horovod's own rendezvous store while the
command runs and closes it after, whatever the outcome, to the job's hosts only (another address is closed unanswered
and writes nothing); a port already taken fails the job at once with the reason, before mpirun starts. Runs inside the image (make image-tests). A whole job over Gloo:
tests/integration/test_gloo_cluster.py."""

import dataclasses
import http.client
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
    rendezvous = Rendezvous("127.0.0.1", port, 4, 2, ())
    try:
        put = urllib.request.Request(f"http://127.0.0.1:{port}/global/rank0", data=b"address", method="PUT")
        assert urllib.request.urlopen(put, timeout=5).status == 200
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/global/rank0", timeout=5).read() == b"address"
        assert rendezvous.server.scope_size == {"global": 4, "local_host-0": 2, "local_host-1": 2, "cross_0": 2,
                                                "cross_1": 2}
    finally:
        rendezvous.close()
    assert nothing_listens(port)


def request(port: int, method: str, path: str, source: str, body: bytes | None = None) -> str:
    """One HTTP request to the rendezvous from `source` (another loopback address plays a stranger on the job's
    network): its status, or how the connection ended."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5, source_address=(source, 0))
    try:
        connection.request(method, path, body=body)
        return str(connection.getresponse().status)
    except ConnectionError:  # reset, broken pipe, or closed before the status line
        return "closed unanswered"
    finally:
        connection.close()


def test_a_stranger_is_answered_nothing_and_writes_nothing():
    port = free_port()
    rendezvous = Rendezvous("", port, 2, 1, ("127.0.0.3",))  # a worker of the job at 127.0.0.3
    try:
        assert request(port, "PUT", "/global/0", "127.0.0.1", b"rank 0's address") == "200"  # this host's rank
        assert request(port, "PUT", "/global/1", "127.0.0.3", b"rank 1's address") == "200"  # the worker's
        for method, path, body in (("PUT", "/global/1", b"the stranger's address"), ("GET", "/global/0", None),
                                   ("DELETE", "/global/0", None), ("DELETE", "/global/1", None)):
            assert request(port, method, path, "127.0.0.2", body) == "closed unanswered", (method, path)
        assert rendezvous.server.cache == {"global": {"0": b"rank 0's address", "1": b"rank 1's address"}}
        assert rendezvous.hosts.ignored == {"127.0.0.2"}
    finally:
        rendezvous.close()


def test_a_port_already_taken_is_an_error_saying_so():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(RendezvousError, match=f"Horovod's Gloo rendezvous cannot listen on 127.0.0.1:{port}: "
                                                  "Address already in use"):
            Rendezvous("127.0.0.1", port, 2, 1, ())


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
    # mpirun, stood in for by a program: it asks the rendezvous for a key no rank has put (404: served), from this
    # host and then from another address (no host of the job's: closed unanswered), and fails.
    ask = (f"import http.client, sys\nfor source in ('127.0.0.1', '127.0.0.2'):\n"
           f" c = http.client.HTTPConnection('127.0.0.1', {port}, timeout=5, source_address=(source, 0))\n"
           " try:\n  c.request('GET', '/global/x'); print(source, 'served', c.getresponse().status)\n"
           " except ConnectionError:\n  print(source, 'closed unanswered')\n"
           "sys.exit(3)")
    plan, env = one_host_gloo_plan(tmp_path, port, (sys.executable, "-c", ask))
    outcome = MasterRun(plan, env, "", tmp_path / "failure").run()
    assert outcome.exit_code == 3
    assert "127.0.0.1 served 404" in outcome.failure.render()
    assert "127.0.0.2 closed unanswered" in outcome.failure.render()
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
