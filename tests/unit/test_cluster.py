"""cluster.py: the master's side of the handshake over real sockets on this host, with a test worker speaking
the protocol (check-in, rejections, the deadline, a lost worker, the outcome and each host's failure text);
Master.wait_launched, the launcher's bound on mpirun's daemon start (mpirun alone waits forever); the pace of a
worker's connection retries, and the master's announcement to the workers. The worker's side (sshd,
serve_master) runs across real containers (tests/integration, tests/faults)."""

import json
import socket
import threading
import time
from pathlib import Path

import pytest
from sagemaker_mxnet_horovod import __version__
from sagemaker_mxnet_horovod.cluster import ClusterError, Master

JOB_KEY = "ssh-ed25519 AAAAjobkey sagemaker-cluster"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ProtocolWorker:
    """A worker's end of the handshake, written out by hand: JSON lines over TCP."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.lines = self.sock.makefile("r")

    def send(self, **message) -> None:
        self.sock.sendall((json.dumps(message) + "\n").encode())

    def receive(self, skip_heartbeats: bool = True) -> dict:
        while True:
            message = json.loads(self.lines.readline())
            if not (skip_heartbeats and message["type"] == "heartbeat"):
                return message

    def close(self) -> None:
        self.lines.close()
        self.sock.close()


def gathering(master: Master):
    """master.gather() in a thread: returns the thread and where its result or error lands."""
    outcome = {}

    def gather() -> None:
        try:
            outcome["links"] = master.gather(JOB_KEY)
        except ClusterError as error:
            outcome["error"] = str(error)

    thread = threading.Thread(target=gather, daemon=True)
    thread.start()
    return thread, outcome


def connect_worker(port: int, deadline_s: float = 10) -> ProtocolWorker:
    """Connect once the master listens (gather() starts listening in its thread)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return ProtocolWorker(port)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)  # the master's listen() has no notification to await


def checked_in_worker(master: Master, silent_clients: int = 0) -> ProtocolWorker:
    """The master's one worker, through the whole handshake (gather() has returned); first, silent_clients
    connections that close without a word."""
    thread, outcome = gathering(master)
    for _ in range(silent_clients):
        connect_worker(master.port).close()
    worker = connect_worker(master.port)
    worker.send(type="hello", host="localhost", version=__version__)
    worker.receive()
    worker.send(type="ready", host_key="ssh-ed25519 AAAAhostkey")
    thread.join(10)
    assert list(outcome["links"]) == ["localhost"]
    return worker


@pytest.fixture
def master(tmp_path):
    """A master expecting one worker, "localhost" (a name that resolves here), for 10 s."""
    master = Master(("localhost",), free_port(), "127.0.0.1", tmp_path, deadline=time.monotonic() + 10)
    yield master
    master.closing = True
    if master.server:
        master.server.close()


def test_a_worker_checks_in_gets_the_jobs_key_and_its_host_key_is_pinned(master, tmp_path):
    thread, outcome = gathering(master)
    worker = connect_worker(master.port)
    worker.send(type="hello", host="localhost", version=__version__)
    assert worker.receive() == {"type": "key", "authorized_key": JOB_KEY}
    worker.send(type="ready", host_key="ssh-ed25519 AAAAhostkey")
    thread.join(10)
    assert list(outcome["links"]) == ["localhost"]
    assert (tmp_path / "known_hosts").read_text() == "localhost ssh-ed25519 AAAAhostkey\n"
    worker.close()


def test_the_outcome_reaches_the_worker_and_its_failure_text_comes_back(master):
    worker = checked_in_worker(master)

    received = []

    def acknowledge() -> None:  # as serve_master does: bye, with this host's failure text, then close
        received.append(worker.receive())
        worker.send(type="bye", user_failure="the worker's text")
        worker.close()

    acknowledging = threading.Thread(target=acknowledge)
    acknowledging.start()
    master.finish(1, "rank 0 failed", user_failure="the master's text")
    acknowledging.join(10)
    assert received == [{"type": "done", "exit_code": 1, "failure": "rank 0 failed",
                         "user_failure": "the master's text"}]
    assert master.user_failures == {"localhost": "the worker's text"}


def test_a_worker_of_another_launcher_version_is_rejected_and_the_job_fails_saying_why(master):
    thread, outcome = gathering(master)
    worker = connect_worker(master.port)
    worker.send(type="hello", host="localhost", version="0.0.1")
    reply = worker.receive()
    thread.join(10)
    expected = (f"worker localhost runs launcher 0.0.1, master runs {__version__}: every host of a job must use "
                "the same image")
    assert reply == {"type": "reject", "message": expected} and outcome == {"error": expected}
    worker.close()


def test_a_host_that_is_no_worker_of_this_job_is_rejected(master):
    thread, outcome = gathering(master)
    worker = connect_worker(master.port)
    worker.send(type="hello", host="algo-9", version=__version__)
    assert worker.receive()["type"] == "reject"
    thread.join(10)
    assert outcome["error"].startswith("host 'algo-9' (127.0.0.1) is not a worker of this job; workers: "
                                       "['localhost']")
    worker.close()


def test_a_client_that_says_nothing_is_no_worker_and_is_ignored(master):
    checked_in_worker(master, silent_clients=2).close()  # a port scanner, a health check


def test_the_master_names_the_workers_that_never_checked_in(tmp_path):
    master = Master(("localhost",), free_port(), "127.0.0.1", tmp_path, deadline=time.monotonic() + 0.3)
    with pytest.raises(ClusterError, match=r"^worker\(s\) localhost did not check in with the master within the "
                                           r"peer timeout \(mpi_peer_timeout_s\)"):
        master.gather(JOB_KEY)
    master.server.close()


def test_a_worker_gone_during_the_job_is_reported_and_its_daemon_reports_are_heard(master):
    lost, daemon_exited = [], threading.Event()
    master.on_worker_lost = lambda host, how: lost.append((host, how))
    master.on_daemon_exited = lambda host: daemon_exited.set()
    worker = checked_in_worker(master)
    worker.send(type="launched")
    assert master.wait_launched(time.monotonic() + 10) == []
    worker.send(type="daemon_exited")
    assert daemon_exited.wait(10)
    worker.close()  # the container stopped
    for watcher in master.watchers:
        watcher.join(10)
    assert lost == [("localhost", "went away during the job (container stopped or crashed)")]


def master_with(workers):
    master = Master(tuple(workers), port=0, bind_address="", run_dir=Path("/nonexistent"), deadline=0)
    master.links = {host: object() for host in workers}
    return master


def test_names_the_workers_without_a_daemon_at_the_deadline():
    master = master_with(["algo-2", "algo-3"])
    master.launched.add("algo-3")
    started = time.monotonic()
    assert master.wait_launched(started + 0.2) == ["algo-2"]
    # Not before the deadline; at it, within a generous bound (a wait that ignored the deadline never returns).
    assert 0.2 <= time.monotonic() - started < 2


def test_returns_as_soon_as_every_worker_reports():
    master = master_with(["algo-2"])

    def report():
        with master.cond:
            master.launched.add("algo-2")
            master.cond.notify_all()

    threading.Timer(0.1, report).start()
    started = time.monotonic()
    assert master.wait_launched(started + 30) == []
    assert time.monotonic() - started < 5  # at the report, not the 30 s deadline: a generous bound


def test_a_finished_job_stops_the_wait():
    master = master_with(["algo-2"])

    def finish():
        with master.cond:
            master.closing = True
            master.cond.notify_all()

    threading.Timer(0.1, finish).start()
    started = time.monotonic()
    assert master.wait_launched(started + 30) == []
    assert time.monotonic() - started < 5  # at the job's end, not the 30 s deadline: a generous bound


def test_retry_delays_stay_short_while_peers_start_together_then_back_off():
    from itertools import islice

    from sagemaker_mxnet_horovod.cluster import retry_delays

    delays = list(islice(retry_delays(fast_s=0.05, fast_for_s=5.0, slowest_s=1.0), 200))
    fast = [d for d in delays if d == 0.05]
    assert len(fast) == 100  # 5 s of 50 ms pauses: a worker notices the master within 50 ms of it listening
    assert delays[100:106] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert max(delays) == 1.0


def test_a_worker_whose_syns_are_dropped_gets_in_once_there_is_room():
    """A listen queue that is full drops SYNs as a container not yet on the network does: the worker keeps
    trying and gets in once there is room. How much sooner its fresh SYNs get in than the kernel's own resend
    (1 s) is a speed, measured side by side by benchmarks/connect_retry.py."""
    from sagemaker_mxnet_horovod.cluster import connect

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):  # fills the listen queue
            room = threading.Timer(0.3, server.accept)
            room.start()
            connection = connect("127.0.0.1", port, time.monotonic() + 10)
            room.join()
            server.settimeout(10)
            accepted, _ = server.accept()  # the worker's connection, queued once there was room
            accepted.settimeout(10)
            connection.send({"type": "hello"})
            assert json.loads(accepted.makefile("r").readline()) == {"type": "hello"}
            accepted.close()
            connection.close()


def test_connect_attempts_are_short_while_hosts_start_together_then_patient():
    from sagemaker_mxnet_horovod.cluster import connect_timeout

    assert connect_timeout(0.0) == connect_timeout(4.9) == 0.2
    assert connect_timeout(5.0) == connect_timeout(60.0) == 5.0


def test_the_master_announces_itself_to_each_worker_once_it_listens(tmp_path):
    """A datagram to each worker as soon as the master listens (so that the master asks ARP for it, and a worker
    waiting for the master's address learns it at once); a name that does not resolve is skipped."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as worker:
        worker.bind(("127.0.0.1", 0))
        worker.settimeout(5)
        master = Master(("localhost", "no-such-host.invalid"), free_port(), "127.0.0.1", tmp_path,
                        deadline=time.monotonic() + 10)
        master.announce_port = worker.getsockname()[1]
        try:
            master.listen()
            data, sender = worker.recvfrom(16)
        finally:
            master.closing = True
            master.server.close()
    assert (data, sender[0]) == (b"", "127.0.0.1")
