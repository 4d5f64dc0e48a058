"""Reaching a peer on the job's network: names that resolve late (SageMaker's DNS can lag behind the
containers), a master not listening yet, SYNs dropped while hosts start together. Each wait has a deadline."""

from __future__ import annotations

import socket
import time

from sagemaker_mxnet_horovod.act.cluster.protocol import Connection
from sagemaker_mxnet_horovod.core.exits import ClusterError

# For this long after a worker starts trying, the master is at most moments away: every host of a job starts at
# about the same time. Retries are quick then, and patient after (retry_delays, connect_timeout).
PEERS_START_TOGETHER_S = 5.0


def ipv4_address(host: str) -> str:
    return socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]


def ipv4_addresses(host: str) -> tuple[str, ...]:
    """Every IPv4 address the name resolves to; raises socket.gaierror while it does not resolve."""
    return tuple(sorted({info[4][0] for info in socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)}))


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


def resolve(host: str, deadline: float, lookup=ipv4_address):
    """Hosts may resolve late on SageMaker: retry until the deadline, then say which name never resolved.
    lookup: ipv4_address (one address) or ipv4_addresses (all of them)."""
    delays = retry_delays()
    while True:
        try:
            return lookup(host)
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


def connect(host: str, port: int, deadline: float, source_address: str | None = None) -> Connection:
    """Connect to the master, retrying while it is not listening yet, until the deadline. source_address: this
    host's address on the cluster interface, which its name resolves to and the master checks the connection's
    address against."""
    address = resolve(host, deadline)
    delays, started = retry_delays(), time.monotonic()
    while True:
        try:
            timeout = connect_timeout(time.monotonic() - started)
            sock = socket.create_connection((address, port), timeout=max(0.1, min(timeout, deadline - time.monotonic())),
                                            source_address=(source_address, 0) if source_address else None)
            sock.settimeout(max(0.1, min(5.0, deadline - time.monotonic())))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            return Connection(sock, host)
        except OSError as error:
            delay = next(delays)
            if time.monotonic() + delay > deadline:
                raise ClusterError(f"could not reach the master {host} ({address}) on port {port} within the "
                                   f"peer timeout: {error.strerror or error}") from None
        time.sleep(delay)  # the master is not listening yet; connect() has no way to wait for that


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
