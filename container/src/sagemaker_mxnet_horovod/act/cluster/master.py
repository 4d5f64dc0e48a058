"""The master's side of the handshake (protocol.py): wait until every worker has checked in (its sshd up with
the job's key, its host key pinned), watch each worker while the job runs, and tell every worker the outcome.

Anyone on the job's network can connect to the handshake port, so a check-in is believed only from an address
that the claimed host's name resolves to (retrying while names resolve late, within the peer timeout). Anything
else is noise: a client that says nothing or garbage, a host that is no worker of this job, a known worker's name
from another address. Noise is logged once with its address and claim, rejected without a word about the job,
and the job goes on waiting for its real workers. Only a verified worker's own error (its sshd failed, another
launcher version) fails the job.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sagemaker_mxnet_horovod import __version__
from sagemaker_mxnet_horovod.act.cluster.network import ANNOUNCE_PORT, announce, ipv4_addresses, resolve
from sagemaker_mxnet_horovod.act.cluster.protocol import HEARTBEAT_S, MESSAGE_TIMEOUT_S, Connection
from sagemaker_mxnet_horovod.core.exits import ClusterError
from sagemaker_mxnet_horovod.core.log import log
from sagemaker_mxnet_horovod.parse.settings import KEYS

# A worker whose kernel has not acknowledged the master's heartbeats for this long is unreachable (network
# partition, host gone without a reset): TCP_USER_TIMEOUT errors the link then, where TCP's own
# retransmissions would take about 15 minutes and a link with nothing to send would never notice.
UNREACHABLE_AFTER_S = 20.0
# After the job failed before every worker checked in, how long the master still answers the late ones with the
# job's failure (they retry every 50 ms to 1 s), so that they end with its reason instead of at their peer timeout.
LINGER_S = 10.0


@dataclass
class WorkerLink:
    host: str
    connection: Connection
    host_key: str


@dataclass(frozen=True)
class Claim:
    """What a connection's hello says it is, and where it comes from."""

    host: str
    version: object
    address: str

    def __str__(self) -> str:
        return f"{self.address} (as {self.host!r}, launcher {self.version})"


class Master:
    def __init__(self, workers: tuple[str, ...], port: int, bind_address: str, run_dir: Path, deadline: float,
                 addresses_of: Callable[[str], tuple[str, ...]] = ipv4_addresses,
                 log: Callable[[str], None] = log):
        self.expected = set(workers)
        self.port, self.bind_address, self.run_dir, self.deadline = port, bind_address, run_dir, deadline
        self.addresses_of, self.log = addresses_of, log  # a host's addresses (DNS); the launcher's log
        self.authorized_key = ""
        self.links: dict[str, WorkerLink] = {}
        self.launched: set[str] = set()  # workers where mpirun's daemon is running
        self.errors: list[str] = []
        self.cond = threading.Condition()
        self.server: socket.socket | None = None
        self.closing = False
        self.on_worker_lost = None  # callback(host, how) while the job runs
        self.on_daemon_exited = None  # callback(host): mpirun's daemon on that worker is gone
        self.on_report = None  # callback(host, message): a parameter-server host's report on its processes
        self.user_failures: dict[str, str] = {}  # worker -> what the user's program wrote to its failure file
        self.watchers: list[threading.Thread] = []
        self.announce_port = ANNOUNCE_PORT
        self.gathered = False  # every worker checked in: the job runs
        self.ignored: set[tuple[str, str, str]] = set()  # noise already logged: (address, claim, why)
        self.late_failure: str | None = None  # once the job failed before every worker checked in
        self.told: set[str] = set()  # late workers told that failure
        self.unresolved: dict[str, str] = {}  # host -> the address of a claim its name has not resolved for
        self.lost: set[str] = set()  # workers whose link ended
        self.replies: dict[str, dict[str, dict]] = {}  # reply type -> worker -> its reply (ask_workers)
        self.on_stacks_wanted = None  # callback(reason): a worker was asked for every rank's stacks

    # -----------------------------------------------------------------------------------------------------
    # Check-in

    def gather(self, authorized_key: str | None) -> dict[str, WorkerLink]:
        """Wait until every worker has its sshd up with our key, or fail naming who is missing; then pin their
        host keys and watch them. authorized_key None: a parameter-server job, whose hosts check in without ssh."""
        self.authorized_key = authorized_key
        self.listen()
        self._await_check_ins()
        if authorized_key is not None:
            (self.run_dir / "known_hosts").write_text("".join(f"{link.host} {link.host_key}\n"
                                                              for link in self.links.values()))
        self.watchers = [threading.Thread(target=self._watch, args=(link,), daemon=True)
                         for link in self.links.values()]
        for watcher in self.watchers:
            watcher.start()
        threading.Thread(target=self._heartbeat, daemon=True).start()
        self.gathered = True
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
                    unresolved = [host for host in missing if host in self.unresolved]
                    if unresolved:
                        # mpirun could not reach it by name either.
                        raise ClusterError(f"worker {unresolved[0]} checked in, but the master cannot resolve its "
                                           f"name: host name {unresolved[0]!r} did not resolve within the peer timeout")
                    raise ClusterError(
                        f"worker(s) {', '.join(missing)} did not check in with the master within the peer "
                        f"timeout ({KEYS.peer_timeout_s}): the container never started, cannot resolve or reach "
                        f"the master on port {self.port}, or crashed before its handshake"
                    )
                self.cond.wait(remaining)
            if self.errors:
                raise ClusterError(self.errors[0])

    def _accept_loop(self) -> None:
        while True:  # until finish() closes the server
            try:
                sock, address = self.server.accept()
            except OSError:
                return
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(UNREACHABLE_AFTER_S * 1000))
            threading.Thread(target=self._greet, args=(Connection(sock, address[0]),), daemon=True).start()

    def _greet(self, connection: Connection) -> None:
        """One connection: its hello, then, from a verified worker only, the check-in (or, once the job has
        failed, its failure)."""
        try:
            hello = connection.receive(MESSAGE_TIMEOUT_S)
        except (TimeoutError, OSError, ClusterError):
            hello = None  # silence or garbage: nobody has claimed anything yet
        if not hello or hello.get("type") != "hello":
            connection.close()  # a port scanner or a stray client: not a worker
            return
        claim = Claim(str(hello.get("host")), hello.get("version"), connection.peer)
        why_not = self._unverified(claim)
        if why_not:
            self._ignore(connection, claim, *why_not)
        elif self.late_failure is not None:
            self._tell_late(connection, claim.host)
        else:
            self._check_in(connection, claim)

    def _unverified(self, claim: Claim) -> tuple[str, str] | None:
        """Why this hello is not from the worker it names, and what the client may be told, or None when it is:
        a worker of this job, from an address its name resolves to (waiting for the name within the peer
        timeout, as SageMaker's can lag)."""
        not_a_worker = f"{claim.address} is not a worker of this job"
        if claim.host not in self.expected:
            return "not a worker of this job", not_a_worker
        with self.cond:
            self.unresolved[claim.host] = claim.address  # until its name resolves
        try:
            addresses = resolve(claim.host, self.deadline, self.addresses_of)
        except ClusterError:
            why = f"{claim.host} does not resolve on the master within the peer timeout, so it cannot tell who this is"
            return why, why
        with self.cond:
            self.unresolved.pop(claim.host, None)
        if claim.address not in addresses:
            return f"{claim.host} resolves to {', '.join(addresses)}, not to this address", not_a_worker
        return None

    def _ignore(self, connection: Connection, claim: Claim, why: str, told: str) -> None:
        """Noise: logged once per address, claim and reason, and rejected with nothing about the job (told)."""
        key = (claim.address, claim.host, why)
        with self.cond:
            first = key not in self.ignored
            self.ignored.add(key)
        if first:
            self.log(f"ignored a check-in from {claim}: {why}")
        connection.send_quietly({"type": "reject", "message": told})
        connection.close()

    def _check_in(self, connection: Connection, claim: Claim) -> None:
        """A verified worker's check-in: the job's key, then its host key once its sshd answers. Its own errors
        fail the job, naming it."""
        host = claim.host
        try:
            if claim.version != __version__:
                raise ClusterError(f"worker {host} runs launcher {claim.version}, master runs {__version__}: "
                                   "every host of a job must use the same image")
            replaced = self._earlier_link(host, claim.address)
            if self.authorized_key is None:  # a parameter-server job: nothing runs over ssh
                connection.send({"type": "welcome"})
                host_key = ""
            else:
                connection.send({"type": "key", "authorized_key": self.authorized_key})
                host_key = self._await_ready(host, connection)
            with self.cond:
                late = self.late_failure is not None  # the job failed while this worker checked in
                if not late:
                    self.links[host] = WorkerLink(host, connection, host_key)
                    self.cond.notify_all()
            if late:
                self._tell_late(connection, host)
            elif replaced:
                replaced.connection.close()
                self.log(f"worker {host} checked in again from {claim.address}; its earlier connection had closed")
        except TimeoutError:
            self._fail(f"worker at {connection.peer} stopped answering during the handshake", connection)
        except (OSError, ClusterError) as error:
            self._fail(str(error), connection)

    def _earlier_link(self, host: str, address: str) -> WorkerLink | None:
        """The worker's earlier link, when it checks in again from its own address: replaced while workers still
        check in if the earlier one is dead; else this is an error of that worker's."""
        with self.cond:
            earlier = self.links.get(host)
        if earlier is None:
            return None
        if self.gathered or not earlier.connection.peer_closed():
            raise ClusterError(f"host {host!r} ({address}) connected twice; workers: {sorted(self.expected)}")
        return earlier

    def _tell_late(self, connection: Connection, host: str) -> None:
        """A verified worker checking in after the job failed: it ends with the job's failure."""
        connection.send_quietly({"type": "reject", "message": f"the job ended before {host} checked in: "
                                                              f"{self.late_failure}"})
        connection.close()
        with self.cond:
            self.told.add(host)
            self.cond.notify_all()

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
        handlers = {"launched": self._on_launched, "daemon_exited": self._on_daemon_exited, "bye": self._on_bye,
                    **dict.fromkeys(("failed", "workers_finished", "workers_ended", "stopped"), self._on_report),
                    "host_report": self._on_reply, "stacks": self._on_reply, "stacks_wanted": self._on_stacks_wanted}
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
        with self.cond:
            self.lost.add(link.host)
            self.cond.notify_all()
        if not self.closing and self.on_worker_lost:
            self.on_worker_lost(link.host, how)

    def _on_launched(self, host: str, message: dict) -> None:
        with self.cond:
            self.launched.add(host)
            self.cond.notify_all()

    def _on_daemon_exited(self, host: str, message: dict) -> None:
        if not self.closing and self.on_daemon_exited:
            self.on_daemon_exited(host)

    def _on_report(self, host: str, message: dict) -> None:
        if not self.closing and self.on_report:
            self.on_report(host, message)

    def _on_bye(self, host: str, message: dict) -> None:
        if message.get("user_failure"):
            self.user_failures[host] = str(message["user_failure"])

    def _on_reply(self, host: str, message: dict) -> None:
        with self.cond:
            if message["type"] in self.replies:
                self.replies[message["type"]][host] = message
                self.cond.notify_all()

    def _on_stacks_wanted(self, host: str, message: dict) -> None:
        if not self.closing and self.on_stacks_wanted:
            self.on_stacks_wanted(f"{message.get('reason') or 'stacks wanted'}, asked on {host}")

    def ask_workers(self, message: dict, reply_type: str, timeout_s: float) -> dict[str, dict]:
        """Send `message` to every worker still linked and wait, up to timeout_s, for each one's `reply_type`
        reply: the replies that came, by worker (one gone or silent is left out). One question of a type at
        a time."""
        with self.cond:
            asked = set(self.links) - self.lost
            self.replies[reply_type] = {}
        for host in sorted(asked):
            self.links[host].connection.send_quietly(message)
        with self.cond:
            self.cond.wait_for(lambda: asked - self.lost <= set(self.replies[reply_type]), timeout_s)
            return self.replies.pop(reply_type)

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
        its user's failure text, into user_failures). A job that failed before every worker checked in lingers,
        up to LINGER_S and never past the peer deadline, to tell the late workers why."""
        self.broadcast_done(exit_code, failure, user_failure)
        self.await_byes(timeout_s)

    def broadcast_done(self, exit_code: int, failure: str | None, user_failure: str | None = None) -> None:
        """finish()'s first half: the outcome to every worker (a parameter-server master then ends its own
        processes while the workers end theirs)."""
        with self.cond:
            if exit_code and not self.gathered:
                self.late_failure = failure or f"exit code {exit_code}"
            self.closing = True
            self.cond.notify_all()
        for link in self.links.values():
            link.connection.send_quietly({"type": "done", "exit_code": exit_code, "failure": failure,
                                          "user_failure": user_failure})

    def await_byes(self, timeout_s: float) -> None:
        """finish()'s second half: each worker's bye, briefly, then the links and the listener closed."""
        # Each worker answers "bye" and closes its end, which ends its watcher: wait for that, briefly.
        deadline = time.monotonic() + timeout_s
        for watcher in self.watchers:
            watcher.join(max(0.0, deadline - time.monotonic()))
        for link in self.links.values():
            link.connection.close()
        self._linger()
        if self.server:
            self.server.close()

    def _linger(self) -> None:
        if self.late_failure is None:
            return
        until = min(self.deadline, time.monotonic() + LINGER_S)
        with self.cond:
            self.cond.wait_for(lambda: self.expected <= set(self.links) | self.told,
                               max(0.0, until - time.monotonic()))
