"""The master's side of the handshake (protocol.py): wait until every worker has checked in (its sshd up with
the job's key, its host key pinned), watch each worker while the job runs, and tell every worker the outcome."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from sagemaker_mxnet_horovod import __version__
from sagemaker_mxnet_horovod.act.cluster.network import ANNOUNCE_PORT, announce, resolve
from sagemaker_mxnet_horovod.act.cluster.protocol import HEARTBEAT_S, MESSAGE_TIMEOUT_S, Connection
from sagemaker_mxnet_horovod.exits import ClusterError

# A worker whose kernel has not acknowledged the master's heartbeats for this long is unreachable (network
# partition, host gone without a reset): TCP_USER_TIMEOUT errors the link then, where TCP's own
# retransmissions would take about 15 minutes and a link with nothing to send would never notice.
UNREACHABLE_AFTER_S = 20.0


@dataclass
class WorkerLink:
    host: str
    connection: Connection
    host_key: str


class Master:
    def __init__(self, workers: tuple[str, ...], port: int, bind_address: str, run_dir: Path, deadline: float):
        self.expected = set(workers)
        self.port, self.bind_address, self.run_dir, self.deadline = port, bind_address, run_dir, deadline
        self.authorized_key = ""
        self.links: dict[str, WorkerLink] = {}
        self.launched: set[str] = set()  # workers where mpirun's daemon is running
        self.errors: list[str] = []
        self.cond = threading.Condition()
        self.server: socket.socket | None = None
        self.closing = False
        self.on_worker_lost = None  # callback(host, how) while the job runs
        self.on_daemon_exited = None  # callback(host): mpirun's daemon on that worker is gone
        self.user_failures: dict[str, str] = {}  # worker -> what the user's program wrote to its failure file
        self.watchers: list[threading.Thread] = []
        self.announce_port = ANNOUNCE_PORT

    # -----------------------------------------------------------------------------------------------------
    # Check-in

    def gather(self, authorized_key: str) -> dict[str, WorkerLink]:
        """Wait until every worker has its sshd up with our key, or fail naming who is missing; then pin their
        host keys and watch them."""
        self.authorized_key = authorized_key
        self.listen()
        self._await_check_ins()
        self._await_names()
        (self.run_dir / "known_hosts").write_text("".join(f"{link.host} {link.host_key}\n"
                                                          for link in self.links.values()))
        self.watchers = [threading.Thread(target=self._watch, args=(link,), daemon=True)
                         for link in self.links.values()]
        for watcher in self.watchers:
            watcher.start()
        threading.Thread(target=self._heartbeat, daemon=True).start()
        return self.links

    def listen(self) -> None:
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.server.bind((self.bind_address, self.port))
        except OSError as error:
            raise ClusterError(f"cannot listen for workers on {self.bind_address or '*'}:{self.port}: "
                               f"{error.strerror}") from None
        self.server.listen(64)
        threading.Thread(target=self._accept_loop, daemon=True).start()
        threading.Thread(target=announce, args=(sorted(self.expected), self.announce_port), daemon=True).start()

    def _await_check_ins(self) -> None:
        with self.cond:
            while not self.errors and set(self.links) != self.expected:
                remaining = self.deadline - time.monotonic()
                if remaining <= 0:
                    missing = sorted(self.expected - set(self.links))
                    raise ClusterError(
                        f"worker(s) {', '.join(missing)} did not check in with the master within the peer "
                        f"timeout (mpi_peer_timeout_s): the container never started, cannot resolve or reach "
                        f"the master on port {self.port}, or crashed before its handshake"
                    )
                self.cond.wait(remaining)
            if self.errors:
                raise ClusterError(self.errors[0])

    def _await_names(self) -> None:
        """mpirun reaches workers by name: a worker that checked in may still not resolve here (SageMaker's DNS
        can lag behind the containers), so wait for the names too, within the same deadline."""
        for host in sorted(self.links):
            try:
                resolve(host, self.deadline)
            except ClusterError as error:
                raise ClusterError(f"worker {host} checked in, but the master cannot resolve its name: {error}") from None

    def _accept_loop(self) -> None:
        while not self.closing:
            try:
                sock, address = self.server.accept()
            except OSError:
                return
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(UNREACHABLE_AFTER_S * 1000))
            threading.Thread(target=self._greet, args=(Connection(sock, address[0]),), daemon=True).start()

    def _greet(self, connection: Connection) -> None:
        """One connection's check-in: hello, the job's key, ready. What goes wrong fails the job, saying what."""
        try:
            hello = connection.receive(MESSAGE_TIMEOUT_S)
            if not hello or hello.get("type") != "hello":
                connection.close()
                return  # a port scanner or a stray client: not a worker
            host = str(hello.get("host"))
            self._check_hello(host, hello.get("version"), connection.peer)
            connection.send({"type": "key", "authorized_key": self.authorized_key})
            host_key = self._await_ready(host, connection)
            with self.cond:
                self.links[host] = WorkerLink(host, connection, host_key)
                self.cond.notify_all()
        except TimeoutError:
            self._fail(f"worker at {connection.peer} stopped answering during the handshake", connection)
        except (OSError, ClusterError) as error:
            self._fail(str(error), connection)

    def _check_hello(self, host: str, version, peer: str) -> None:
        if version != __version__:
            raise ClusterError(f"worker {host} runs launcher {version}, master runs {__version__}: "
                               "every host of a job must use the same image")
        with self.cond:
            problem = ("is not a worker of this job" if host not in self.expected
                       else "connected twice" if host in self.links else None)
        if problem:
            raise ClusterError(f"host {host!r} ({peer}) {problem}; workers: {sorted(self.expected)}")

    @staticmethod
    def _await_ready(host: str, connection: Connection) -> str:
        """The worker's host key, once its sshd answers with our key authorized."""
        ready = connection.receive(MESSAGE_TIMEOUT_S)
        if ready is None:
            raise ClusterError(f"worker {host} disconnected during the handshake")
        if ready.get("type") == "error":
            raise ClusterError(f"worker {host}: {ready.get('message')}")
        if ready.get("type") != "ready" or not ready.get("host_key"):
            raise ClusterError(f"worker {host} sent {ready!r} instead of ready")
        return str(ready["host_key"])

    def _fail(self, message: str, connection: Connection) -> None:
        connection.send_quietly({"type": "reject", "message": message})
        connection.close()
        with self.cond:
            self.errors.append(message)
            self.cond.notify_all()

    # -----------------------------------------------------------------------------------------------------
    # While the job runs

    def _watch(self, link: WorkerLink) -> None:
        """Hand each of a worker's messages to its handler. The connection closing before `done` means the
        worker is gone; timing out, that it is unreachable."""
        handlers = {"launched": self._on_launched, "daemon_exited": self._on_daemon_exited, "bye": self._on_bye}
        how = "went away during the job (container stopped or crashed)"
        try:
            while (message := link.connection.receive(None)) is not None:
                handler = handlers.get(message["type"])
                if handler:
                    handler(link.host, message)
        except TimeoutError:
            how = (f"became unreachable during the job: it acknowledged nothing for {UNREACHABLE_AFTER_S:g} s "
                   "(network partition, or the host went down)")
        except (OSError, ClusterError):
            pass
        if not self.closing and self.on_worker_lost:
            self.on_worker_lost(link.host, how)

    def _on_launched(self, host: str, message: dict) -> None:
        with self.cond:
            self.launched.add(host)
            self.cond.notify_all()

    def _on_daemon_exited(self, host: str, message: dict) -> None:
        if not self.closing and self.on_daemon_exited:
            self.on_daemon_exited(host)

    def _on_bye(self, host: str, message: dict) -> None:
        if message.get("user_failure"):
            self.user_failures[host] = str(message["user_failure"])

    def _heartbeat(self) -> None:
        while not self.closing:
            for link in list(self.links.values()):
                link.connection.send_quietly({"type": "heartbeat"})
            with self.cond:
                self.cond.wait(HEARTBEAT_S)

    def wait_launched(self, deadline: float) -> list[str]:
        """Wait until mpirun's daemon runs on every worker; returns the workers still without one at the
        deadline (none once the job has finished). mpirun itself waits forever for a daemon that died
        without ssh reporting an error."""
        with self.cond:
            while not self.closing and self.launched != set(self.links):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return sorted(set(self.links) - self.launched)
                self.cond.wait(remaining)
        return []

    def broadcast_stop(self, signum: int) -> None:
        """Ask every worker to pass a stop signal to its ranks (when only the master was signalled)."""
        for link in list(self.links.values()):
            link.connection.send_quietly({"type": "stop", "signal": int(signum)})

    # -----------------------------------------------------------------------------------------------------
    # The outcome

    def finish(self, exit_code: int, failure: str | None, timeout_s: float = 10.0,
               user_failure: str | None = None) -> None:
        """Tell every worker the job's outcome and wait (briefly) for each to acknowledge (its `bye` carries
        its user's failure text, into user_failures)."""
        self.closing = True
        with self.cond:
            self.cond.notify_all()
        for link in self.links.values():
            link.connection.send_quietly({"type": "done", "exit_code": exit_code, "failure": failure,
                                          "user_failure": user_failure})
        # Each worker answers "bye" and closes its end, which ends its watcher: wait for that, briefly.
        deadline = time.monotonic() + timeout_s
        for watcher in self.watchers:
            watcher.join(max(0.0, deadline - time.monotonic()))
        for link in self.links.values():
            link.connection.close()
        if self.server:
            self.server.close()
