#!/usr/bin/env python3
"""How the Docker daemon spreads the starts of N containers asked for at once: `docker run -d` from N threads
(as scripts/local_job.py starts a job's hosts) against `docker create` for all, then `docker start` from N
threads. Prints, per count and way: first to last start, how late algo-1 started after the first, and the
first request to the last start (docker's clock for the starts). The containers only sleep.

  python3 -m benchmarks.container_start_spread [--image sagemaker-mxnet-horovod:cpu] [--hosts 8 16] [--repeat 2]
"""

from __future__ import annotations

import argparse
import secrets
import subprocess
import sys
import threading
import time

from scripts.local_job import DOCKER, docker_time


def docker(*args: str) -> str:
    return subprocess.run([DOCKER, *args], capture_output=True, text=True, check=True).stdout.strip()


def in_threads(action, items) -> None:
    threads = [threading.Thread(target=action, args=(item,)) for item in items]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def once(image: str, count: int, way: str) -> tuple[float, float, float]:
    project = f"spread-{secrets.token_hex(3)}"
    network = f"{project}-net"
    docker("network", "create", network)
    hosts = [f"algo-{i}" for i in range(1, count + 1)]

    def run_args(host: str) -> list:
        return ["--name", f"{project}-{host}", "--network", network, "--network-alias", host,
                "--entrypoint", "sleep", image, "2"]

    try:
        asked = time.time()
        if way == "run":
            in_threads(lambda host: docker("run", "-d", *run_args(host)), hosts)
        else:
            in_threads(lambda host: docker("create", *run_args(host)), hosts)
            asked = time.time()
            in_threads(lambda host: docker("start", f"{project}-{host}"), hosts)
        starts = [docker_time(docker("inspect", "-f", "{{.State.StartedAt}}", f"{project}-{host}")) for host in hosts]
        return max(starts) - min(starts), starts[0] - min(starts), max(starts) - asked
    finally:
        subprocess.run([DOCKER, "rm", "-f", *(f"{project}-{host}" for host in hosts)], capture_output=True)
        subprocess.run([DOCKER, "network", "rm", network], capture_output=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--hosts", type=int, nargs="+", default=[8, 16])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    for count in args.hosts:
        for way in ("run", "create+start"):
            runs = [once(args.image, count, way) for _ in range(args.repeat)]
            print(f"{count:2d} containers, {way:12s}: first -> last start {[round(r[0], 2) for r in runs]} s, "
                  f"algo-1 after the first {[round(r[1], 2) for r in runs]} s, "
                  f"request -> last start {[round(r[2], 2) for r in runs]} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
