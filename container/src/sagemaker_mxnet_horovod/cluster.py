"""Act: the master/worker handshake, the per-job SSH keys and sshd, and the completion signal.

Protocol (JSON lines over TCP, worker connects to the master's handshake port):
  worker -> {"type": "hello", "host": H, "version": V}
  master -> {"type": "key", "authorized_key": "ssh-ed25519 ..."}        (or {"type": "reject", "message"})
  worker -> {"type": "ready", "host_key": "ssh-ed25519 ..."}             (or {"type": "error", "message"})
  master -> {"type": "heartbeat"} every HEARTBEAT_S while the job runs
  worker -> {"type": "launched"} once mpirun's daemon (orted) runs on the worker
  worker -> {"type": "daemon_exited"} when that daemon is gone again (normal at the job's end; before
            then, mpirun waits for it forever: the master ends the job if mpirun has not within a grace)
  master -> {"type": "done", "exit_code": N, "failure": "...", "user_failure": "..."}
  worker -> {"type": "bye", "user_failure": "..."}
user_failure: what the user's program wrote to that host's /opt/ml/output/failure during the job (or null),
so each host's failure file can show the text the user's program wrote on another host.
The per-job key never leaves the job: the master generates it, gives each worker the public half, and pins
each worker's freshly generated host key in its known_hosts, so ssh checks host keys strictly.
Every wait has a deadline and, when it expires, says what it waited for.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from sagemaker_mxnet_horovod import __version__
from sagemaker_mxnet_horovod.failure import read_user_failure

HEARTBEAT_S = 5.0
HEARTBEAT_TIMEOUT_S = 30.0  # a worker that hears nothing from the master for this long gives up
MESSAGE_TIMEOUT_S = 30.0  # one step of the handshake once connected
# A worker whose kernel has not acknowledged the master's heartbeats for this long is unreachable (network
# partition, host gone without a reset): TCP_USER_TIMEOUT errors the link then, where TCP's own
# retransmissions would take about 15 minutes and a link with nothing to send would never notice.
UNREACHABLE_AFTER_S = 20.0
SSHD = "/usr/sbin/sshd"


class ClusterError(RuntimeError):
    """A peer did not do its part in time, or said why it could not."""


# ---------------------------------------------------------------------------------------------------------
# Framing.


class Connection:
    def __init__(self, sock: socket.socket, peer: str):
        self.sock, self.peer = sock, peer
        self.buffer = b""  # our own line buffer: a file object's breaks when a read times out
        self.send_lock = threading.Lock()

    def send(self, message: dict) -> None:
        data = (json.dumps(message) + "\n").encode()
        with self.send_lock:
            self.sock.sendall(data)

    def receive(self, timeout: float | None) -> dict | None:
        """The next message, None on EOF; socket.timeout when nothing arrives in time."""
        self.sock.settimeout(timeout)
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError:
            raise ClusterError(f"garbled handshake message from {self.peer}: {line[:80]!r}") from None
        if not isinstance(message, dict) or "type" not in message:
            raise ClusterError(f"unexpected handshake message from {self.peer}: {message!r}")
        return message

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


# ---------------------------------------------------------------------------------------------------------
# Keys and sshd.


def generate_key(path: Path) -> str:
    """An ed25519 key pair at path (private) and path.pub; returns the public key line."""
    for stale in (path, path.with_name(path.name + ".pub")):
        stale.unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "sagemaker-cluster", "-f", str(path)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return path.with_name(path.name + ".pub").read_text().strip()


class Sshd:
    """sshd for one job: key-only, this job's authorized key, host key generated now, one address."""

    def __init__(self, run_dir: Path, listen_address: str | None, port: int = 22):
        self.run_dir, self.listen_address, self.port = run_dir, listen_address, port
        self.authorized = run_dir / "authorized_keys"
        self.process: subprocess.Popen | None = None
        self.host_key = ""

    def launch(self) -> None:
        """Generate this job's host key and start sshd with no authorized key yet (nobody can log in before
        authorize()), so sshd starts while the worker is still checking in with the master."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege separation directory
        self.authorized.unlink(missing_ok=True)
        self.authorized.touch(mode=0o600)
        self.host_key = generate_key(self.run_dir / "ssh_host_ed25519_key")
        argv = [
            SSHD, "-D", "-e",
            "-o", f"HostKey={self.run_dir}/ssh_host_ed25519_key",
            "-o", f"AuthorizedKeysFile={self.authorized}",
            "-o", f"PidFile={self.run_dir}/sshd.pid",
            "-o", "PasswordAuthentication=no",
            "-o", "KbdInteractiveAuthentication=no",
            "-o", "PermitRootLogin=prohibit-password",
            "-o", "LogLevel=ERROR",
        ]
        if self.listen_address:
            # Port is cumulative in sshd: pass it only inside ListenAddress, or it binds twice.
            argv += ["-o", f"ListenAddress={self.listen_address}:{self.port}"]
        else:
            argv += ["-o", f"Port={self.port}"]
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL)

    def authorize(self, authorized_key: str) -> None:
        """The job's public key; sshd reads the file at each login."""
        staged = self.authorized.with_name(self.authorized.name + ".new")
        staged.unlink(missing_ok=True)
        staged.touch(mode=0o600)
        staged.write_text(authorized_key + "\n")
        staged.replace(self.authorized)

    def wait_ready(self, deadline: float) -> str:
        """Wait until sshd answers with an SSH banner; returns the host public key."""
        address = self.listen_address or "127.0.0.1"
        while True:
            if self.process.poll() is not None:
                raise ClusterError(f"sshd exited with code {self.process.returncode} at start (see its log above)")
            try:
                with socket.create_connection((address, self.port), timeout=1) as probe:
                    if probe.recv(8).startswith(b"SSH-"):
                        probe.sendall(b"SSH-2.0-readiness-probe\r\n")  # so sshd logs no protocol error
                        return self.host_key
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise ClusterError(f"sshd did not answer on {address}:{self.port} in time")
            time.sleep(0.05)  # sshd has no readiness notification without systemd; poll its port briefly

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()


# ---------------------------------------------------------------------------------------------------------
# Master side.


# A datagram to a port nothing listens on (discard): it only has to leave the master.
ANNOUNCE_PORT = 9


def announce(workers, port: int = ANNOUNCE_PORT) -> None:
    """Send each worker a datagram as soon as the master listens, so that the master asks ARP for it. On a bridge
    network (SageMaker local mode, this repository's tests) a worker that tried the master's address before the
    master's container was on it keeps its SYNs queued until its kernel asks ARP again, once a second; the
    master's ARP request teaches it the master's address at once (measured at 4 hosts: workers that started
    before the master checked in 0.8 s after it listened). A name that does not resolve yet is skipped: that
    worker is not on the network, and it will find the master up when it is."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for host in workers:
            try:
                sock.sendto(b"", (ipv4_address(host), port))
            except OSError:
                pass


@dataclass
class WorkerLink:
    host: str
    connection: Connection
    host_key: str


class Master:
    def __init__(self, workers: tuple[str, ...], port: int, bind_address: str, run_dir: Path, deadline: float):
        self.expected = set(workers)
        self.port, self.bind_address, self.run_dir, self.deadline = port, bind_address, run_dir, deadline
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
        try:
            hello = connection.receive(MESSAGE_TIMEOUT_S)
            if not hello or hello.get("type") != "hello":
                connection.close()
                return  # a port scanner or a stray client: not a worker
            host = str(hello.get("host"))
            if hello.get("version") != __version__:
                self._fail(f"worker {host} runs launcher {hello.get('version')}, master runs {__version__}: "
                           "every host of a job must use the same image", connection)
                return
            with self.cond:
                problem = ("is not a worker of this job" if host not in self.expected
                           else "connected twice" if host in self.links else None)
            if problem:
                self._fail(f"host {host!r} ({connection.peer}) {problem}; workers: {sorted(self.expected)}",
                           connection)
                return
            connection.send({"type": "key", "authorized_key": self.authorized_key})
            ready = connection.receive(MESSAGE_TIMEOUT_S)
            if ready is None:
                raise ClusterError(f"worker {host} disconnected during the handshake")
            if ready.get("type") == "error":
                raise ClusterError(f"worker {host}: {ready.get('message')}")
            if ready.get("type") != "ready" or not ready.get("host_key"):
                raise ClusterError(f"worker {host} sent {ready!r} instead of ready")
            with self.cond:
                self.links[host] = WorkerLink(host, connection, str(ready["host_key"]))
                self.cond.notify_all()
        except TimeoutError:
            self._fail(f"worker at {connection.peer} stopped answering during the handshake", connection)
        except (OSError, ClusterError) as error:
            self._fail(str(error), connection)

    def _fail(self, message: str, connection: Connection) -> None:
        try:
            connection.send({"type": "reject", "message": message})
        except OSError:
            pass
        connection.close()
        with self.cond:
            self.errors.append(message)
            self.cond.notify_all()

    def gather(self, authorized_key: str) -> dict[str, WorkerLink]:
        """Wait until every worker has its sshd up with our key, or fail naming who is missing."""
        self.authorized_key = authorized_key
        self.listen()
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
        # mpirun reaches workers by name: a worker that checked in may still not resolve here (SageMaker's
        # DNS can lag behind the containers), so wait for the names too, within the same deadline.
        for host in sorted(self.links):
            try:
                resolve(host, self.deadline)
            except ClusterError as error:
                raise ClusterError(f"worker {host} checked in, but the master cannot resolve its name: {error}") from None
        known_hosts = "".join(f"{link.host} {link.host_key}\n" for link in self.links.values())
        (self.run_dir / "known_hosts").write_text(known_hosts)
        self.watchers = [threading.Thread(target=self._watch, args=(link,), daemon=True)
                         for link in self.links.values()]
        for watcher in self.watchers:
            watcher.start()
        threading.Thread(target=self._heartbeat, daemon=True).start()
        return self.links

    def _watch(self, link: WorkerLink) -> None:
        """A worker's connection closing before `done` means the worker is gone; timing out, that it is
        unreachable."""
        how = "went away during the job (container stopped or crashed)"
        try:
            while (message := link.connection.receive(None)) is not None:
                if message.get("type") == "launched":
                    with self.cond:
                        self.launched.add(link.host)
                        self.cond.notify_all()
                elif message.get("type") == "daemon_exited" and not self.closing and self.on_daemon_exited:
                    self.on_daemon_exited(link.host)
                elif message.get("type") == "bye" and message.get("user_failure"):
                    self.user_failures[link.host] = str(message["user_failure"])
        except TimeoutError:
            how = (f"became unreachable during the job: it acknowledged nothing for {UNREACHABLE_AFTER_S:g} s "
                   "(network partition, or the host went down)")
        except (OSError, ClusterError):
            pass
        if not self.closing and self.on_worker_lost:
            self.on_worker_lost(link.host, how)

    def _heartbeat(self) -> None:
        while not self.closing:
            for link in list(self.links.values()):
                try:
                    link.connection.send({"type": "heartbeat"})
                except OSError:
                    pass
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
            try:
                link.connection.send({"type": "stop", "signal": int(signum)})
            except OSError:
                pass

    def finish(self, exit_code: int, failure: str | None, timeout_s: float = 10.0,
               user_failure: str | None = None) -> None:
        """Tell every worker the job's outcome and wait (briefly) for each to acknowledge (its `bye` carries
        its user's failure text, into user_failures)."""
        self.closing = True
        with self.cond:
            self.cond.notify_all()
        for link in self.links.values():
            try:
                link.connection.send({"type": "done", "exit_code": exit_code, "failure": failure,
                                      "user_failure": user_failure})
            except OSError:
                pass
        # Each worker answers "bye" and closes its end, which ends its watcher: wait for that, briefly.
        deadline = time.monotonic() + timeout_s
        for watcher in self.watchers:
            watcher.join(max(0.0, deadline - time.monotonic()))
        for link in self.links.values():
            link.connection.close()
        if self.server:
            self.server.close()


# ---------------------------------------------------------------------------------------------------------
# Worker side.


# For this long after a worker starts trying, the master is at most moments away: every host of a job starts at
# about the same time. Retries are quick then, and patient after (retry_delays, connect_timeout).
PEERS_START_TOGETHER_S = 5.0


def ipv4_address(host: str) -> str:
    return socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]


def retry_delays(fast_s: float = 0.05, fast_for_s: float = PEERS_START_TOGETHER_S, slowest_s: float = 1.0):
    """Pauses between attempts to reach a peer: every host of a job starts at about the same time, so for
    the first seconds the peer is at most moments away and a short pause costs nothing (doubling from the
    first try can leave a worker asleep for most of a second after the master starts listening); after that
    the peer is late (a slow container start, lagging DNS) and the pause doubles up to slowest_s."""
    for _ in range(round(fast_for_s / fast_s)):
        yield fast_s
    delay = fast_s
    while True:
        delay = min(slowest_s, delay * 2)
        yield delay


def resolve(host: str, deadline: float) -> str:
    """Hosts may resolve late on SageMaker: retry until the deadline, then say which name never resolved."""
    delays = retry_delays()
    while True:
        try:
            return ipv4_address(host)
        except socket.gaierror as error:
            delay = next(delays)
            if time.monotonic() + delay > deadline:
                raise ClusterError(f"host name {host!r} did not resolve within the peer timeout: {error}") from None
        time.sleep(delay)  # nothing to await: DNS has no change notification


def connect_timeout(trying_for_s: float, fast_s: float = 0.2, fast_for_s: float = PEERS_START_TOGETHER_S,
                    slow_s: float = 5.0) -> float:
    """How long one attempt to connect may take. A SYN the peer's host drops (its container not on the network
    yet, its listen queue full) is resent by the kernel only after 1 s, then 3 s: measured at 4 hosts, a worker
    that started 0.3 s before the master connected a whole second late. While hosts start together an attempt
    gives up sooner and the next one sends a fresh SYN; after that, a slow network gets slow_s per attempt."""
    return fast_s if trying_for_s < fast_for_s else slow_s


def connect(host: str, port: int, deadline: float) -> Connection:
    """Connect to the master, retrying while it is not listening yet, until the deadline."""
    address = resolve(host, deadline)
    delays, started = retry_delays(), time.monotonic()
    while True:
        try:
            timeout = connect_timeout(time.monotonic() - started)
            sock = socket.create_connection((address, port), timeout=max(0.1, min(timeout, deadline - time.monotonic())))
            sock.settimeout(max(0.1, min(5.0, deadline - time.monotonic())))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            return Connection(sock, host)
        except OSError as error:
            delay = next(delays)
            if time.monotonic() + delay > deadline:
                raise ClusterError(f"could not reach the master {host} ({address}) on port {port} within the "
                                   f"peer timeout: {error.strerror or error}") from None
        time.sleep(delay)  # the master is not listening yet; connect() has no way to wait for that


@dataclass
class WorkerOutcome:
    exit_code: int
    failure: str | None
    master_user_failure: str | None = None  # what the user's program wrote to the master's failure file


def serve_master(master: str, port: int, current_host: str, sshd: Sshd, deadline: float,
                 stop_requested: threading.Event, failure_file: Path | None = None) -> WorkerOutcome:
    """Check in with the master, run sshd for its mpirun, and wait for the job's outcome. failure_file: this
    host's, whose text from the user's program the master gets with `bye`."""
    try:
        sshd.launch()
        launch_error = None
    except (OSError, subprocess.CalledProcessError) as error:
        launch_error = error  # reported to the master once connected, so the job fails naming this host
    connection = connect(master, port, deadline)
    try:
        connection.send({"type": "hello", "host": current_host, "version": __version__})
        reply = connection.receive(max(1.0, deadline - time.monotonic()))
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
        from sagemaker_mxnet_horovod.supervise import mpi_daemon_running, signal_local_ranks

        last_heard = time.monotonic()
        stop_deadline = None
        launched = daemon_exited = False
        while True:
            daemon_running = mpi_daemon_running()
            report = None
            if daemon_running and not launched:
                launched, report = True, {"type": "launched"}
            elif launched and not daemon_running and not daemon_exited:
                daemon_exited, report = True, {"type": "daemon_exited"}
            if report:
                try:
                    connection.send(report)
                except OSError:
                    pass  # the master is gone: the next receive says so
            if stop_requested.is_set() and stop_deadline is None:
                # SageMaker stops every host at once; the master forwards the stop to the ranks and reports.
                stop_deadline = time.monotonic() + 100.0
            try:
                message = connection.receive(1.0)
            except TimeoutError:
                message = {"type": "tick"}
            if message is None:
                return WorkerOutcome(1, f"lost contact with the master {master}: it closed the connection "
                                        "without reporting the job's result (it crashed or was killed)")
            kind = message.get("type")
            if kind == "done":
                code = int(message.get("exit_code", 1))
                # The job has ended: this host's ranks have too, and whatever they wrote is complete.
                user_failure = read_user_failure(failure_file) if failure_file and code else None
                try:
                    connection.send({"type": "bye", "user_failure": user_failure})
                except OSError:
                    pass
                if code == 0:
                    return WorkerOutcome(0, None)
                return WorkerOutcome(code, f"the job failed on {master}: {message.get('failure') or f'exit code {code}'}",
                                     master_user_failure=message.get("user_failure") or None)
            if kind == "reject":
                raise ClusterError(f"the master {master} rejected this worker: {message.get('message')}")
            if kind == "stop":
                signal_local_ranks(int(message.get("signal", 15)))
            now = time.monotonic()
            if kind == "heartbeat":
                last_heard = now
            elif now - last_heard > HEARTBEAT_TIMEOUT_S:
                return WorkerOutcome(1, f"lost contact with the master {master}: no heartbeat for "
                                        f"{HEARTBEAT_TIMEOUT_S:.0f} s (host down or network partition)")
            if stop_deadline is not None and now > stop_deadline:
                return WorkerOutcome(143, f"stopped by SIGTERM; the master {master} reported no result in time")
    finally:
        connection.close()
