"""A worker's side of the handshake (protocol.py): start sshd, check in with the master, report mpirun's daemon
on this host, and wait for the job's outcome, handing each of the master's messages to its handler; answer
the master's questions for the diagnosis (this host's report, its ranks' stacks). A parameter-server host checks
in without ssh and runs the same session beside its own processes."""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sagemaker_mxnet_horovod import __version__
from sagemaker_mxnet_horovod.act.cluster.network import connect
from sagemaker_mxnet_horovod.act.cluster.protocol import HEARTBEAT_TIMEOUT_S, Connection
from sagemaker_mxnet_horovod.act.cluster.ssh import Sshd
from sagemaker_mxnet_horovod.act.local_ranks import mpi_daemon_running, signal_local_ranks
from sagemaker_mxnet_horovod.act.outcome_files import read_user_failure
from sagemaker_mxnet_horovod.core.exits import EXIT_FAILED, STOP_GRACE_S, ClusterError
from sagemaker_mxnet_horovod.core.stop import stopped
from sagemaker_mxnet_horovod.diagnose.host_report import report_now
from sagemaker_mxnet_horovod.diagnose.memory import MemoryReading, read_memory

# The master answers a hello once this host's name resolves on it, waiting for that until its own peer deadline,
# which is later than this host's when its container started later: its answer, which names what is wrong, is waited
# for this much beyond this host's deadline.
ANSWER_GRACE_S = 10.0


@dataclass
class WorkerOutcome:
    exit_code: int
    failure: str | None
    master_user_failure: str | None = None  # what the user's program wrote to the master's failure file
    lost_master: bool = False  # the master went silent or away: this host's ranks may still run


@dataclass
class HostDiagnostics:
    """What the worker tells the master's diagnosis, and how it takes its own ranks' stacks."""

    local_stacks: Callable[[str, str], dict[int, str]] | None = None  # (dump, reason) -> rank -> its stacks
    stacks_wanted: queue.Queue = field(default_factory=queue.Queue)  # reasons to ask the master for a dump
    memory_at_start: MemoryReading = field(default_factory=read_memory)


def serve_master(master: str, port: int, current_host: str, sshd: Sshd, deadline: float,
                 stop_requested: threading.Event, failure_file: Path | None = None,
                 diagnostics: HostDiagnostics | None = None) -> WorkerOutcome:
    """Check in with the master, run sshd for its mpirun, and wait for the job's outcome. failure_file: this
    host's, whose text from the user's program the master gets with `bye`."""
    try:
        sshd.launch()
        launch_error = None
    except (OSError, subprocess.CalledProcessError) as error:
        launch_error = error  # reported to the master once connected, so the job fails naming this host
    # From the address this host's name resolves to: the master believes a check-in from there only.
    connection = connect(master, port, deadline, source_address=sshd.listen_address)
    try:
        check_in(connection, master, current_host, sshd, launch_error, deadline)
        return WorkerSession(connection, master, stop_requested, failure_file, diagnostics).run()
    finally:
        connection.close()


def check_in_without_ssh(master: str, port: int, current_host: str, deadline: float,
                         source_address: str | None) -> Connection:
    """A parameter-server host's check-in: hello, welcome; no keys, nothing runs over ssh. Returns the connection
    for the session (WorkerSession) that follows."""
    connection = connect(master, port, deadline, source_address=source_address)
    try:
        connection.send({"type": "hello", "host": current_host, "version": __version__})
        reply = answer_to_hello(connection, master, deadline)
    except BaseException:
        connection.close()
        raise
    if reply is None or reply.get("type") != "welcome":
        connection.close()
        if reply is None:
            raise ClusterError(f"the master {master} closed the connection during the handshake")
        raise ClusterError(f"the master {master} rejected this worker: {reply.get('message', reply)}")
    return connection


def answer_to_hello(connection: Connection, master: str, deadline: float) -> dict | None:
    try:
        return connection.receive(max(1.0, deadline - time.monotonic()) + ANSWER_GRACE_S)
    except TimeoutError:
        raise ClusterError(f"the master {master} did not answer this worker's check-in within the peer timeout and "
                           f"{ANSWER_GRACE_S:g} s more") from None


def check_in(connection: Connection, master: str, current_host: str, sshd: Sshd, launch_error: Exception | None,
             deadline: float) -> None:
    """hello, the job's key into sshd, ready with this job's host key (or the error that stopped sshd)."""
    connection.send({"type": "hello", "host": current_host, "version": __version__})
    reply = answer_to_hello(connection, master, deadline)
    if reply is None:
        raise ClusterError(f"the master {master} closed the connection during the handshake")
    if reply.get("type") == "reject":
        raise ClusterError(f"the master {master} rejected this worker: {reply.get('message')}")
    try:
        if launch_error:
            raise launch_error
        sshd.authorize(str(reply["authorized_key"]))
        host_key = sshd.wait_ready(deadline)
    except (ClusterError, OSError, subprocess.CalledProcessError) as error:
        connection.send({"type": "error", "message": f"sshd on {current_host} did not start: {error}"})
        raise
    connection.send({"type": "ready", "host_key": host_key})


class WorkerSession:
    """After the check-in: once a second, report mpirun's daemon here, then handle what the master sent."""

    def __init__(self, connection: Connection, master: str, stop_requested: threading.Event,
                 failure_file: Path | None, diagnostics: HostDiagnostics | None = None,
                 on_stop: Callable[[int], object] = signal_local_ranks, reports_daemon: bool = True,
                 bye_on_done: bool = True):
        self.connection, self.master, self.stop_requested, self.failure_file = (
            connection, master, stop_requested, failure_file)
        self.diagnostics = diagnostics or HostDiagnostics()
        # What the master's stop does here (an MPI worker signals its ranks), whether there is an MPI daemon to
        # report on, and whether `done` is acknowledged at once (a parameter-server host first ends its own
        # processes, then says bye itself).
        self.stop_here, self.reports_daemon, self.bye_on_done = on_stop, reports_daemon, bye_on_done
        self.last_heard = time.monotonic()
        self.stop_deadline: float | None = None
        self.launched = self.daemon_exited = False
        self.handlers = {"done": self.on_done, "reject": self.on_reject, "stop": self.on_stop,
                         "heartbeat": self.on_heartbeat, "report_request": self.on_report_request,
                         "dump_stacks": self.on_dump_stacks}

    def run(self) -> WorkerOutcome:
        while True:
            self.report_daemon()
            while not self.diagnostics.stacks_wanted.empty():
                self.connection.send_quietly({"type": "stacks_wanted",
                                              "reason": self.diagnostics.stacks_wanted.get_nowait()})
            if self.stop_requested.is_set() and self.stop_deadline is None:
                # SageMaker stops every host at once; the master forwards the stop to the ranks and reports.
                self.stop_deadline = time.monotonic() + STOP_GRACE_S
            try:
                message = self.connection.receive(1.0)
            except TimeoutError:
                message = {"type": "tick"}
            if message is None:
                return WorkerOutcome(EXIT_FAILED, f"lost contact with the master {self.master}: it closed the "
                                                  "connection without reporting the job's result (it crashed or "
                                                  "was killed)", lost_master=True)
            handler = self.handlers.get(message["type"])
            outcome = (handler(message) if handler else None) or self.overdue()
            if outcome:
                return outcome

    def report_daemon(self) -> None:
        """`launched` once mpirun's daemon runs here, `daemon_exited` once it is gone again."""
        if not self.reports_daemon:
            return
        running = mpi_daemon_running()
        if running and not self.launched:
            self.launched = True
            self.connection.send_quietly({"type": "launched"})
        elif self.launched and not running and not self.daemon_exited:
            self.daemon_exited = True
            self.connection.send_quietly({"type": "daemon_exited"})

    def on_done(self, message: dict) -> WorkerOutcome:
        code = int(message.get("exit_code", 1))
        # The job has ended: this host's ranks have too, and whatever they wrote is complete.
        if self.bye_on_done:
            self.bye(code)
        if code == 0:
            return WorkerOutcome(0, None)
        return WorkerOutcome(code, f"the job failed on {self.master}: {message.get('failure') or f'exit code {code}'}",
                             master_user_failure=message.get("user_failure") or None)

    def bye(self, code: int) -> None:
        """The acknowledgement of `done`, with what the user's program wrote to this host's failure file."""
        user_failure = read_user_failure(self.failure_file) if self.failure_file and code else None
        self.connection.send_quietly({"type": "bye", "user_failure": user_failure})

    def on_reject(self, message: dict) -> None:
        raise ClusterError(f"the master {self.master} rejected this worker: {message.get('message')}")

    def on_stop(self, message: dict) -> None:
        self.stop_here(int(message.get("signal", signal.SIGTERM)))

    def on_heartbeat(self, message: dict) -> None:
        self.last_heard = time.monotonic()

    def on_report_request(self, message: dict) -> None:
        report = report_now(self.diagnostics.memory_at_start)
        self.connection.send_quietly({"type": "host_report", "report": report.to_message()})

    def on_dump_stacks(self, message: dict) -> None:
        """In a thread: taking the stacks waits for the ranks, and the master's messages keep coming."""
        def answer() -> None:
            dump, collect = str(message.get("dump")), self.diagnostics.local_stacks
            ranks = collect(dump, str(message.get("reason"))) if collect else {}
            self.connection.send_quietly({"type": "stacks", "dump": dump,
                                          "ranks": {str(rank): text for rank, text in ranks.items()}})

        threading.Thread(target=answer, name="stacks", daemon=True).start()

    def overdue(self) -> WorkerOutcome | None:
        """The master silent for too long, or a stop it has not reported on in time."""
        now = time.monotonic()
        if now - self.last_heard > HEARTBEAT_TIMEOUT_S:
            return WorkerOutcome(EXIT_FAILED, f"lost contact with the master {self.master}: no heartbeat for "
                                              f"{HEARTBEAT_TIMEOUT_S:.0f} s (host down or network partition)",
                                 lost_master=True)
        if self.stop_deadline is not None and now > self.stop_deadline:
            stopped_here = stopped(signal.SIGTERM, f"the master {self.master} reported no result in time")
            return WorkerOutcome(stopped_here.exit_code, stopped_here.cause)
        return None
