#!/usr/bin/env python3
"""Raw TCP on an emulated link, per congestion control: two network namespaces joined by a veth pair, each
end's sending rate capped by `tc tbf` as benchmarks/common/emulated_link.py caps a container's; over one connection
both ends send M bytes at once and wait for the other's M (an allreduce's exchange between 2 hosts), rounds
GAP seconds apart. Prints the median time per round against M at the link's payload rate, side by side for
each congestion control: what TCP alone does on the link, without Open MPI.

  sudo python3 -m benchmarks.tcp_exchange [--rate-mbit 2190] [--megabytes 25] [--gap-ms 0 50]
      [--congestion-controls cubic bbr] [--rounds 15] [--queue-ms 10]

Needs root, `ip` and `tc` (iproute2).
"""

from __future__ import annotations

import argparse
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks.common import emulated_link as link

ROOT = Path(__file__).resolve().parents[1]  # where `python3 -m benchmarks.tcp_exchange` runs from

NAMESPACES = ("tcpx-a", "tcpx-b")
ADDRESSES = ("10.213.0.1", "10.213.0.2")
PORT = 5571


def end(role: str, address: str, size: int, rounds: int, gap_s: float) -> None:
    """One end of the exchange (run inside its namespace): prints one line, the seconds of each round."""
    if role == "listen":
        with socket.create_server((address, PORT)) as server:
            print("listening", flush=True)  # the parent starts the other end on this line
            connection, _ = server.accept()
    else:
        connection = socket.create_connection((address, PORT))
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    outgoing, incoming = bytes(size), memoryview(bytearray(size))

    def receive() -> None:
        got = 0
        while got < size:
            got += connection.recv_into(incoming[got:], size - got)

    seconds = []
    for _ in range(rounds):
        started = time.monotonic()
        receiver = threading.Thread(target=receive)
        receiver.start()
        connection.sendall(outgoing)
        receiver.join()
        seconds.append(time.monotonic() - started)
        time.sleep(gap_s)  # the emulated compute between two exchanges
    connection.close()
    print(" ".join(f"{s:.4f}" for s in seconds), flush=True)


def ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True, text=True)


def setup(rate_bps: float, queue_ms: float, congestion_control: str) -> None:
    teardown()
    for name in NAMESPACES:
        ip("netns", "add", name)
    ip("link", "add", "tcpx0", "type", "veth", "peer", "name", "tcpx1")
    for index, (name, address) in enumerate(zip(NAMESPACES, ADDRESSES)):
        device = f"tcpx{index}"
        ip("link", "set", device, "netns", name)
        ip("-n", name, "addr", "add", f"{address}/24", "dev", device)
        ip("-n", name, "link", "set", device, "up")
        link.shape(f"/run/netns/{name}", rate_bps, device=device, queue_ms=queue_ms)
        link.set_congestion_control(f"/run/netns/{name}", congestion_control)


def teardown() -> None:
    for name in NAMESPACES:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


def exchange(size: int, rounds: int, gap_s: float) -> float:
    """Median seconds per round after the first, as the connecting end measured them."""
    me = [sys.executable, "-m", "benchmarks.tcp_exchange", "--end"]  # from ROOT (cwd below)
    common = [str(size), str(rounds), str(gap_s)]
    listener = subprocess.Popen(["ip", "netns", "exec", NAMESPACES[0], *me, "listen", ADDRESSES[0], *common],
                                stdout=subprocess.PIPE, text=True, cwd=ROOT)
    if listener.stdout.readline().strip() != "listening":
        raise SystemExit("the listening end did not start")
    connector = subprocess.run(["ip", "netns", "exec", NAMESPACES[1], *me, "connect", ADDRESSES[0], *common],
                               capture_output=True, text=True, timeout=600, cwd=ROOT)
    listener.wait(600)
    if connector.returncode != 0 or listener.returncode != 0:
        raise SystemExit(f"the exchange failed: {connector.stderr.strip()}")
    return statistics.median(float(s) for s in connector.stdout.split()[1:])


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--end":
        role, address, size, rounds, gap = sys.argv[2:7]
        end(role, address, int(size), int(rounds), float(gap))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate-mbit", type=float, default=2190, help="the link's rate (2190: the probe at 0.77)")
    parser.add_argument("--megabytes", type=float, default=25, help="what each end sends per round")
    parser.add_argument("--gap-ms", type=float, nargs="+", default=[0, 50])
    parser.add_argument("--congestion-controls", nargs="+", default=["cubic", "bbr"])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--queue-ms", type=float, default=link.QUEUE_MS)
    args = parser.parse_args()
    if not shutil.which("ip") or not shutil.which("tc"):
        raise SystemExit("needs ip and tc (iproute2)")
    try:
        link.require_tc()
        link.require_congestion_controls(args.congestion_controls)
    except link.LinkError as error:
        raise SystemExit(f"tcp_exchange: {error}") from None
    size = int(args.megabytes * 1e6)
    ideal = size * 8 / (args.rate_mbit * 1e6 * link.TCP_PAYLOAD_SHARE)
    print(f"link {args.rate_mbit:g} Mbit/s, queue {args.queue_ms:g} ms; {args.megabytes:g} MB each way a round "
          f"takes {ideal * 1000:.0f} ms at the payload rate")
    try:
        for gap_ms in args.gap_ms:
            for algorithm in args.congestion_controls:
                setup(args.rate_mbit * 1e6, args.queue_ms, algorithm)
                median = exchange(size, args.rounds, gap_ms / 1000)
                print(f"gap {gap_ms:4g} ms  {algorithm:6s} {median * 1000:6.0f} ms a round = "
                      f"{ideal / median:.2f} of the link", flush=True)
    finally:
        teardown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
