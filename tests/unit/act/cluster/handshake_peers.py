"""The peers of the master's handshake in the unit tests of act/cluster: a worker's end written out by hand, and
the master's gather() in a thread. A uniquely named helper, as every helper under tests/."""

import json
import socket
import threading
import time

from sagemaker_mxnet_horovod import __version__
from sagemaker_mxnet_horovod.act.cluster.master import Master
from sagemaker_mxnet_horovod.core.exits import ClusterError

JOB_KEY = "ssh-ed25519 AAAAjobkey sagemaker-cluster"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class ProtocolWorker:
    """A worker's end of the handshake, written out by hand: JSON lines over TCP, from `source` (another
    loopback address plays a stranger on the job's network)."""

    def __init__(self, port: int, source: str = "127.0.0.1"):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
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


def connect_worker(port: int, deadline_s: float = 10, source: str = "127.0.0.1") -> ProtocolWorker:
    """Connect once the master listens (gather() starts listening in its thread)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return ProtocolWorker(port, source)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)  # the master's listen() has no notification to await


def checked_in_worker(master: Master, silent_clients: int = 0, first=None) -> ProtocolWorker:
    """The master's one worker, through the whole handshake (gather() has returned); first, silent_clients
    connections that close without a word, and first(port) when given (another client's doing)."""
    thread, outcome = gathering(master)
    for _ in range(silent_clients):
        connect_worker(master.port).close()
    if first:
        first(master.port)
    worker = connect_worker(master.port)
    worker.send(type="hello", host="localhost", version=__version__)
    worker.receive()
    worker.send(type="ready", host_key="ssh-ed25519 AAAAhostkey")
    thread.join(10)
    assert list(outcome["links"]) == ["localhost"]
    return worker
