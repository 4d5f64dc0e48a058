#!/usr/bin/env python3
"""How soon a worker gets into a master whose listen queue drops its SYNs (as a container not yet on the network
does): the launcher's cluster.connect, whose attempts give up after 0.2 s while hosts start together and each
send a fresh SYN, against one plain connect that waits for the kernel's own SYN resend (1 s, then 3 s later).

Per trial: a listener on 127.0.0.1 whose queue (listen(0)) one connection fills; --room-after seconds later it
accepts that one, making room. Each way connects as the trial starts; the figure is start to connected. The two
ways alternate within each round. Prints every trial, the medians and their ratio (plain / launcher).

  PYTHONPATH=container/src python3 -m benchmarks.connect_retry [--room-after 0.3] [--repeat 10]

This was a unit test's timed bound (connected within 0.9 s where the resend takes 1.0 s); the unit test now
checks only that the worker gets in once there is room.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import threading
import time

from sagemaker_mxnet_horovod.act.cluster.network import connect


def launcher_way(port: int) -> None:
    connect("127.0.0.1", port, time.monotonic() + 10).close()


def plain_way(port: int) -> None:
    socket.create_connection(("127.0.0.1", port), timeout=10).close()


def trial(way, room_after: float) -> float:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):  # fills the listen queue
            room = threading.Timer(room_after, server.accept)
            room.start()
            started = time.monotonic()
            way(port)
            seconds = time.monotonic() - started
            room.join()
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--room-after", type=float, default=0.3, help="seconds until the queue has room")
    parser.add_argument("--repeat", type=int, default=10, help="rounds (each runs both ways)")
    args = parser.parse_args()
    ways = {"launcher (cluster.connect)": launcher_way, "plain (kernel SYN resend)": plain_way}
    seconds: dict = {name: [] for name in ways}
    for round_index in range(args.repeat):
        for name, way in ways.items():
            seconds[name].append(trial(way, args.room_after))
        print(f"round {round_index + 1}: " + "  ".join(f"{name} {values[-1]:.3f} s" for name, values in seconds.items()),
              flush=True)
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    for name, median in medians.items():
        print(f"{name}: median {median:.3f} s (min {min(seconds[name]):.3f}, max {max(seconds[name]):.3f}) "
              f"with room after {args.room_after:g} s")
    launcher, plain = medians.values()
    print(f"plain / launcher: {plain / launcher:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
