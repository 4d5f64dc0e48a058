"""cluster/worker.py: a worker's side of the handshake over a real socket pair, the master's end written out by
hand: the check-in (hello, the job's key into sshd, ready with its host key; a rejection; sshd that could not
start, reported to the master), then the session's handlers (the outcome, with this host's failure text going
back; a rejection; the master gone or silent; a stop the master never reports on). The whole worker, with a real
sshd and mpirun, runs across real containers (tests/integration, tests/faults)."""

import json
import socket
import subprocess
import threading
import time

import pytest
from sagemaker_mxnet_horovod import __version__
from sagemaker_mxnet_horovod.act.cluster.protocol import HEARTBEAT_TIMEOUT_S, Connection
from sagemaker_mxnet_horovod.act.cluster.ssh import Sshd
from sagemaker_mxnet_horovod.act.cluster.worker import (
    HostDiagnostics,
    WorkerOutcome,
    WorkerSession,
    check_in,
    check_in_without_ssh,
)
from sagemaker_mxnet_horovod.core.exits import EXIT_STOPPED, STOP_GRACE_S, ClusterError
from sagemaker_mxnet_horovod.diagnose.host_report import HostReport
from sagemaker_mxnet_horovod.diagnose.memory import MemoryReading
from test_ssh import banner_server


class MasterEnd:
    """The master's end of the connection: JSON lines, read and written by hand."""

    def __init__(self, sock: socket.socket):
        self.sock, self.lines = sock, sock.makefile("r")

    def send(self, **message) -> None:
        self.sock.sendall((json.dumps(message) + "\n").encode())

    def receive(self) -> dict:
        return json.loads(self.lines.readline())

    def receive_skipping_daemon_reports(self) -> dict:
        # The session reports mpirun's daemon when it sees one in /proc, which on a shared host can be another job's.
        while (message := self.receive())["type"] in ("launched", "daemon_exited"):
            pass
        return message


@pytest.fixture
def link():
    ours, theirs = socket.socketpair()
    yield Connection(ours, "algo-1"), MasterEnd(theirs)
    ours.close()
    theirs.close()


def in_thread(target, *args):
    outcome = {}

    def run():
        try:
            outcome["value"] = target(*args)
        except Exception as error:  # noqa: BLE001 - handed to the test
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def test_the_check_in_authorizes_the_jobs_key_and_answers_with_this_jobs_host_key(link, tmp_path):
    connection, master = link
    server = banner_server(b"SSH-2.0-OpenSSH_9.2\r\n")
    sshd = Sshd(tmp_path, "127.0.0.1", port=server.getsockname()[1])
    sshd.process = subprocess.Popen(["sleep", "30"])  # sshd's process, still running
    sshd.host_key = "ssh-ed25519 AAAAhost sagemaker-cluster"
    thread, outcome = in_thread(check_in, connection, "algo-1", "algo-2", sshd, None, time.monotonic() + 10)
    try:
        assert master.receive() == {"type": "hello", "host": "algo-2", "version": __version__}
        master.send(type="key", authorized_key="ssh-ed25519 AAAAjob sagemaker-cluster")
        assert master.receive() == {"type": "ready", "host_key": "ssh-ed25519 AAAAhost sagemaker-cluster"}
        thread.join(10)
        assert outcome == {"value": None}
        assert sshd.authorized.read_text() == "ssh-ed25519 AAAAjob sagemaker-cluster\n"
    finally:
        sshd.stop()
        server.close()


def test_a_rejected_check_in_says_what_the_master_said(link, tmp_path):
    connection, master = link
    thread, outcome = in_thread(check_in, connection, "algo-1", "algo-2", Sshd(tmp_path, None), None,
                                time.monotonic() + 10)
    master.receive()
    master.send(type="reject", message="worker algo-2 runs launcher 0.0.1, master runs 0.1.0")
    thread.join(10)
    assert str(outcome["error"]) == ("the master algo-1 rejected this worker: worker algo-2 runs launcher 0.0.1, "
                                     "master runs 0.1.0")


def test_the_masters_answer_after_this_hosts_deadline_is_still_what_the_worker_says(link, tmp_path):
    """The master waits for this host's name until its own peer deadline, later than this host's when its container
    started later (a fault scenario under load: the worker's wait ended first, with a bare TimeoutError)."""
    connection, master = link
    thread, outcome = in_thread(check_in, connection, "algo-1", "algo-2", Sshd(tmp_path, None), None,
                                time.monotonic() + 0.1)
    master.receive()
    time.sleep(1.5)  # the master's own deadline, past this host's (and past the 1 s the worker waits at least)
    master.send(type="reject", message="algo-2 does not resolve on the master within the peer timeout")
    thread.join(10)
    assert str(outcome["error"]) == ("the master algo-1 rejected this worker: algo-2 does not resolve on the master "
                                     "within the peer timeout")


def test_a_master_that_never_answers_the_hello_is_named(link, tmp_path, monkeypatch):
    monkeypatch.setattr("sagemaker_mxnet_horovod.act.cluster.worker.ANSWER_GRACE_S", 0.2)
    connection, _master = link
    with pytest.raises(ClusterError) as raised:
        check_in(connection, "algo-1", "algo-2", Sshd(tmp_path, None), None, time.monotonic())
    assert str(raised.value) == ("the master algo-1 did not answer this worker's check-in within the peer timeout "
                                 "and 0.2 s more")
    listener = socket.create_server(("127.0.0.1", 0))  # a parameter-server host's check-in waits alike
    try:
        with pytest.raises(ClusterError, match="^the master localhost did not answer this worker's check-in"):
            check_in_without_ssh("localhost", listener.getsockname()[1], "algo-2", time.monotonic() + 0.5, None)
    finally:
        listener.close()


def test_an_sshd_that_could_not_start_is_reported_to_the_master_naming_this_host(link, tmp_path):
    connection, master = link
    failed = FileNotFoundError(2, "No such file or directory", "/usr/sbin/sshd")
    thread, outcome = in_thread(check_in, connection, "algo-1", "algo-2", Sshd(tmp_path, None), failed,
                                time.monotonic() + 10)
    master.receive()
    master.send(type="key", authorized_key="ssh-ed25519 AAAAjob")
    assert master.receive() == {"type": "error", "message": "sshd on algo-2 did not start: [Errno 2] No such file "
                                                            "or directory: '/usr/sbin/sshd'"}
    thread.join(10)
    assert outcome["error"] is failed


def session(connection, tmp_path, user_text=None, stop=False, diagnostics=None):
    failure_file = tmp_path / "failure"
    if user_text:
        failure_file.write_text(user_text)
    requested = threading.Event()
    if stop:
        requested.set()
    return WorkerSession(connection, "algo-1", requested, failure_file, diagnostics)


def test_a_successful_job_ends_the_session_with_nothing_to_report(link, tmp_path):
    connection, master = link
    thread, outcome = in_thread(session(connection, tmp_path, user_text="not read: the job succeeded").run)
    master.send(type="heartbeat")
    master.send(type="done", exit_code=0, failure=None, user_failure=None)
    assert master.receive_skipping_daemon_reports() == {"type": "bye", "user_failure": None}
    thread.join(10)
    assert outcome["value"] == WorkerOutcome(0, None)


def test_a_failed_job_brings_the_masters_failure_and_sends_back_this_hosts_user_text(link, tmp_path):
    connection, master = link
    thread, outcome = in_thread(session(connection, tmp_path, user_text="algo-2's own reason\n").run)
    master.send(type="done", exit_code=1, failure="rank 1 on algo-2 exited with code 1", user_failure="master's")
    assert master.receive_skipping_daemon_reports() == {"type": "bye", "user_failure": "algo-2's own reason"}
    thread.join(10)
    assert outcome["value"] == WorkerOutcome(1, "the job failed on algo-1: rank 1 on algo-2 exited with code 1",
                                             master_user_failure="master's")


def test_a_rejection_during_the_job_is_an_error(link, tmp_path):
    connection, master = link
    thread, outcome = in_thread(session(connection, tmp_path).run)
    master.send(type="reject", message="host 'algo-2' (10.0.0.3) connected twice")
    thread.join(10)
    assert str(outcome["error"]) == "the master algo-1 rejected this worker: host 'algo-2' (10.0.0.3) connected twice"
    assert isinstance(outcome["error"], ClusterError)


def test_a_master_that_hangs_up_without_the_outcome_is_lost_contact(link, tmp_path):
    connection, master = link
    thread, outcome = in_thread(session(connection, tmp_path).run)
    master.sock.shutdown(socket.SHUT_WR)
    thread.join(10)
    assert outcome["value"].exit_code == 1
    assert outcome["value"].failure.startswith("lost contact with the master algo-1: it closed the connection")
    assert outcome["value"].lost_master  # the worker takes its own ranks' stacks then


def test_a_silent_master_ends_the_session_when_overdue(link, tmp_path):
    connection, _ = link
    silent = session(connection, tmp_path)
    silent.last_heard = time.monotonic() - HEARTBEAT_TIMEOUT_S - 1
    thread, outcome = in_thread(silent.run)
    thread.join(10)
    assert outcome["value"] == WorkerOutcome(1, "lost contact with the master algo-1: no heartbeat for 30 s (host "
                                                "down or network partition)", lost_master=True)


def test_a_stop_gives_the_master_the_grace_to_report_then_ends_the_session(link, tmp_path):
    connection, master = link
    reported = session(connection, tmp_path, stop=True)
    thread, outcome = in_thread(reported.run)
    master.send(type="done", exit_code=143, failure="stopped by SIGTERM", user_failure=None)
    thread.join(10)
    assert outcome["value"].exit_code == 143  # the master's verdict, within the grace
    assert reported.stop_deadline == pytest.approx(time.monotonic() + STOP_GRACE_S, abs=5)
    unreported = session(connection, tmp_path, stop=True)
    unreported.stop_deadline = time.monotonic()  # the grace has run out
    thread, outcome = in_thread(unreported.run)
    thread.join(10)
    assert outcome["value"] == WorkerOutcome(EXIT_STOPPED, "stopped by SIGTERM (SageMaker stop or spot interruption); "
                                                           "the master algo-1 reported no result in time")


def test_the_master_gets_this_hosts_report_and_its_ranks_stacks_and_is_asked_for_a_dump(link, tmp_path):
    connection, master = link
    taken = []
    diagnostics = HostDiagnostics(local_stacks=lambda dump, reason: taken.append((dump, reason)) or {1: "rank 1 ..."},
                                  memory_at_start=MemoryReading(limit_bytes=1 << 30, oom_kills=0))
    diagnostics.stacks_wanted.put("no progress on rank 1 (algo-2)")  # this host was asked (SIGUSR1, a watch)
    thread, outcome = in_thread(session(connection, tmp_path, diagnostics=diagnostics).run)
    assert master.receive_skipping_daemon_reports() == {"type": "stacks_wanted",
                                                        "reason": "no progress on rank 1 (algo-2)"}
    master.send(type="dump_stacks", dump="20251125T210501.123Z-signal", reason="SIGUSR1 on algo-2")
    assert master.receive_skipping_daemon_reports() == {"type": "stacks", "dump": "20251125T210501.123Z-signal",
                                                        "ranks": {"1": "rank 1 ..."}}
    assert taken == [("20251125T210501.123Z-signal", "SIGUSR1 on algo-2")]
    master.send(type="report_request")
    report = HostReport.from_message(master.receive_skipping_daemon_reports()["report"])
    assert report.at_start == MemoryReading(limit_bytes=1 << 30, oom_kills=0)  # the reading from the job's start
    assert report.at_end.ram_bytes and report.shm_bytes  # this machine's, now
    master.send(type="done", exit_code=0, failure=None, user_failure=None)
    thread.join(10)
    assert outcome["value"] == WorkerOutcome(0, None)


# --- a parameter-server host: no ssh, its own stop, its own bye -------------------------------------------------

def test_a_parameter_server_hosts_check_in_is_hello_then_welcome(tmp_path):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    thread, outcome = in_thread(check_in_without_ssh, "localhost", port, "algo-2", time.monotonic() + 10, "127.0.0.1")
    sock, _ = listener.accept()
    master = MasterEnd(sock)
    try:
        assert master.receive() == {"type": "hello", "host": "algo-2", "version": __version__}
        master.send(type="welcome")
        thread.join(10)
        assert isinstance(outcome["value"], Connection)
        outcome["value"].close()
        thread, outcome = in_thread(check_in_without_ssh, "localhost", port, "algo-2", time.monotonic() + 10, None)
        rejected = MasterEnd(listener.accept()[0])
        rejected.receive()
        rejected.send(type="reject", message="the job ended before algo-2 checked in: worker 0 on algo-1 failed")
        thread.join(10)
        assert str(outcome["error"]) == ("the master localhost rejected this worker: the job ended before algo-2 "
                                         "checked in: worker 0 on algo-1 failed")
    finally:
        listener.close()


def test_a_parameter_server_hosts_session_hands_the_stop_over_and_says_bye_when_told(link, tmp_path):
    connection, master = link
    stops = []
    own = WorkerSession(connection, "algo-1", threading.Event(), tmp_path / "failure", on_stop=stops.append,
                        reports_daemon=False, bye_on_done=False)
    thread, outcome = in_thread(own.run)
    master.send(type="stop", signal=15)
    master.send(type="done", exit_code=0, failure=None, user_failure=None)
    thread.join(10)
    assert outcome["value"] == WorkerOutcome(0, None) and stops == [15]
    (tmp_path / "failure").write_text("my own words")
    own.bye(1)  # once the host's own processes have ended
    assert master.receive() == {"type": "bye", "user_failure": "my own words"}  # no daemon report came first
