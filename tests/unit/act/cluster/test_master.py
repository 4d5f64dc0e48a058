"""cluster/master.py: the master's side of the handshake over real sockets on this host, with a test worker
speaking the protocol (check-in, rejections, the deadline, a lost worker, the outcome and each host's failure
text); Master.wait_launched, the launcher's bound on mpirun's daemon start (mpirun alone waits forever); the
master's announcement to the workers. The worker's side with a real sshd runs across real containers
(tests/integration, tests/faults); its session logic is in test_worker.py."""

import queue
import socket
import threading
import time
from pathlib import Path

import pytest
from handshake_peers import JOB_KEY, checked_in_worker, connect_worker, free_port, gathering
from sagemaker_mxnet_horovod import __version__
from sagemaker_mxnet_horovod.act.cluster.master import Master
from sagemaker_mxnet_horovod.core.exits import ClusterError
from unit_helpers.late_peers import arriving_late


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


def test_the_master_asks_its_workers_and_hears_a_worker_ask_for_stacks(master):
    wanted = []
    master.on_stacks_wanted = wanted.append
    worker = checked_in_worker(master)

    def answer() -> None:  # as WorkerSession does
        question = worker.receive()
        worker.send(type="host_report", report={"shm_bytes": 64 << 20, "asked": question})

    answering = threading.Thread(target=answer)
    answering.start()
    replies = master.ask_workers({"type": "report_request"}, "host_report", timeout_s=10)
    answering.join(10)
    assert replies == {"localhost": {"type": "host_report", "report": {"shm_bytes": 64 << 20,
                                                                       "asked": {"type": "report_request"}}}}
    worker.send(type="stacks_wanted", reason="no progress on rank 1 (localhost)")
    deadline = time.monotonic() + 10
    while not wanted and time.monotonic() < deadline:
        time.sleep(0.01)  # the watcher thread hands it over
    assert wanted == ["no progress on rank 1 (localhost), asked on localhost"]
    # Silent until 30 s later: none, at the deadline (a wait that ignored it would return the late answer).
    with arriving_late(lambda: worker.send(type="stacks", stacks={})):
        assert master.ask_workers({"type": "dump_stacks"}, "stacks", timeout_s=0.3) == {}
    worker.close()  # gone: not waited for
    for watcher in master.watchers:
        watcher.join(10)
    started = time.monotonic()
    assert master.ask_workers({"type": "report_request"}, "host_report", timeout_s=10) == {}
    assert time.monotonic() - started < 5  # not the 10 s timeout: a generous bound


def master_with(workers):
    master = Master(tuple(workers), port=0, bind_address="", run_dir=Path("/nonexistent"), deadline=0)
    master.links = {host: object() for host in workers}
    return master


def report_launched(master, host):
    """A worker's report that mpirun's daemon runs on it, as the watcher thread hands it over."""
    with master.cond:
        master.launched.add(host)
        master.cond.notify_all()


def test_names_the_workers_without_a_daemon_at_the_deadline():
    master = master_with(["algo-2", "algo-3"])
    master.launched.add("algo-3")
    # algo-2 reports 30 s later: a wait that ignored the deadline would return [] then.
    with arriving_late(lambda: report_launched(master, "algo-2")):
        deadline = time.monotonic() + 0.2
        assert master.wait_launched(deadline) == ["algo-2"]
        assert time.monotonic() >= deadline  # not before it


def test_returns_as_soon_as_every_worker_reports():
    master = master_with(["algo-2"])
    threading.Timer(0.1, report_launched, (master, "algo-2")).start()
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


def test_a_parameter_server_host_checks_in_without_keys_and_its_reports_reach_the_run(master, tmp_path):
    reports = queue.Queue()
    master.on_report = lambda host, message: reports.put((host, message["type"]))
    outcome = {}
    thread = threading.Thread(target=lambda: outcome.update(links=master.gather(None)), daemon=True)
    thread.start()
    worker = connect_worker(master.port)
    worker.send(type="hello", host="localhost", version=__version__)
    assert worker.receive() == {"type": "welcome"}  # no key, and no ready expected
    thread.join(10)
    assert list(outcome["links"]) == ["localhost"] and not (tmp_path / "known_hosts").exists()
    worker.send(type="workers_ended", succeeded=True)
    worker.send(type="failed", failure="server 1 on localhost was killed by SIGKILL", exit_code=137)
    assert [reports.get(timeout=10) for _ in range(2)] == [("localhost", "workers_ended"), ("localhost", "failed")]
    master.broadcast_done(137, "server 1 on localhost was killed by SIGKILL")
    assert worker.receive()["type"] == "done"
    worker.send(type="bye", user_failure=None)
    worker.close()
    master.await_byes(10)
