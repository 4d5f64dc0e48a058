"""The job's containers, through the docker CLI, for local_job (run.py): docker itself and its clock, the job's
network (a name that resolves late, an interface renamed back to eth0), each host's `docker run`, what a fault
injector may do to the running job (RunningJob), and the logs. Stdlib only."""

from __future__ import annotations

import datetime
import os
import secrets
import subprocess
import threading
import time
from pathlib import Path

from .spec import MOUNTED_MODES, START_GATE, JobSpec

DOCKER = os.environ.get("DOCKER", "docker")


def docker(*args, check=True, capture=True, timeout=None) -> subprocess.CompletedProcess:
    done = subprocess.run([DOCKER, *args], check=False, text=True, timeout=timeout,
                          stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE if capture else None)
    if check and done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args[:3])} ... failed ({done.returncode}): {(done.stderr or '').strip()}")
    return done


def docker_time(text: str) -> float | None:
    """Docker's RFC 3339 timestamps have nanoseconds, which datetime does not parse: cut to microseconds."""
    if not text or text.startswith("0001-"):
        return None
    head, _, fraction = text.rstrip("Z").partition(".")
    stamp = datetime.datetime.fromisoformat(head).replace(tzinfo=datetime.timezone.utc)
    return stamp.timestamp() + float(f"0.{fraction or 0}")


def create_network(name: str, fixed_addresses: bool, isolated: bool = False) -> str | None:
    """A private bridge network. With fixed_addresses, on a /24 of our own (returns "10.A.B"), so a
    container can be reconnected with the same address; a random one, retried if it overlaps another. Isolated
    (docker's --internal): nothing beyond the job's containers answers, as under SageMaker's network isolation or
    in a VPC subnet without a NAT gateway (a connection elsewhere gets no answer, a name outside the job does not
    resolve)."""
    internal = ["--internal"] if isolated else []
    if not fixed_addresses:
        docker("network", "create", *internal, name)
        return None
    for _ in range(10):
        prefix = f"10.{secrets.randbelow(56) + 200}.{secrets.randbelow(256)}"
        if docker("network", "create", *internal, "--subnet", f"{prefix}.0/24", name, check=False).returncode == 0:
            return prefix
    raise RuntimeError(f"could not create network {name}: no free 10.x.y.0/24 found")


def keep_interface_name(cid: str, address: str, gateway: str) -> None:
    """A reconnected container gets eth1, where SageMaker hosts keep eth0 throughout: rename it back from
    the host (root, nsenter into the container's network namespace) and restore the default route."""
    pid = docker("inspect", "-f", "{{.State.Pid}}", cid).stdout.strip()
    netns = ["nsenter", "-t", pid, "-n", "ip"]
    links = subprocess.run([*netns, "-o", "-4", "addr", "show"], capture_output=True, text=True, check=True).stdout
    name = next(line.split()[1] for line in links.splitlines() if f" {address}/" in line)
    if name != "eth0":
        for args in (["link", "set", "dev", name, "down"], ["link", "set", "dev", name, "name", "eth0"],
                     ["link", "set", "dev", "eth0", "up"], ["route", "replace", "default", "via", gateway]):
            subprocess.run([*netns, *args], capture_output=True, check=True)


def docker_run_args(spec: JobSpec, root: Path, host: str, project: str, network: str, address: str | None,
                    alias: bool) -> list:
    """`docker run` of the host's container: its /opt/ml, File-mode channels read-only, the spec's extras."""
    hostname = host if spec.hostname_is_alias else secrets.token_hex(6)
    args = ["run", "-d", "--name", f"{project}-{host}", "--hostname", hostname, "--network", network,
            "-v", f"{root.resolve()}:/opt/ml"]
    if address:
        args += ["--ip", address]
    if alias:
        args += ["--network-alias", host]
    for channel in spec.channels:
        if channel.mode in MOUNTED_MODES:
            args += ["-v", f"{channel.source_for(host).resolve()}:/opt/ml/input/data/{channel.name}:ro"]
    for source, target, mode in (*spec.extra_mounts, *spec.host_mounts.get(host, ())):
        args += ["-v", f"{Path(source).resolve()}:{target}:{mode}"]
    if host in spec.cpusets:
        args += ["--cpuset-cpus", spec.cpusets[host]]
    if host in spec.cpus:
        args += ["--cpus", spec.cpus[host]]
    if spec.cpu_shares:
        args += ["--cpu-shares", str(spec.cpu_shares)]
    if host in spec.memory:
        args += ["--memory", spec.memory[host], "--memory-swap", spec.memory[host]]
    if spec.shm_size:
        args += ["--shm-size", spec.shm_size]
    for volume, target in spec.volumes.get(host, ()):
        args += ["-v", f"{volume}:{target}"]
    for key, value in spec.env.items():
        args += ["-e", f"{key}={value}"]
    command = list(spec.command)
    if spec.start_gate:
        command = ["sh", "-c", f'read -r _ < /opt/ml/{START_GATE} && exec "$@"', START_GATE, *command]
    return [*args, spec.image, *command]


def resolve_late(cid: str, host: str, network: str, address: str, gateway: str, delay: float,
                 keep_eth0: bool) -> None:
    """The container runs on the network, but its name resolves only after the delay (as SageMaker's DNS can
    lag): reconnected with the same address and, now, its alias."""
    time.sleep(delay)
    docker("network", "disconnect", network, cid, check=False)
    docker("network", "connect", "--alias", host, "--ip", address, network, cid, check=False)
    if keep_eth0:
        keep_interface_name(cid, address, gateway)


class RunningJob:
    """What a JobSpec.during callback may do to the job while it runs: wait for a log line, signal a
    container, run a command in one, and mark the moment of its fault (the suite times exits from it)."""

    def __init__(self, project: str):
        self.project = project
        self.containers: dict = {}
        self.exited: dict = {}  # host -> time.monotonic() when its container exited
        self.start_errors: list = []
        self.started = threading.Condition()  # notified on each start, start error and exit
        self.fault_at: float | None = None

    def add_container(self, host: str, cid: str) -> None:
        with self.started:
            self.containers[host] = cid
            self.started.notify_all()
        threading.Thread(target=self.await_exit, args=(host, cid), daemon=True).start()

    def add_start_error(self, message: str) -> None:
        with self.started:
            self.start_errors.append(message)
            self.started.notify_all()

    def await_exit(self, host: str, cid: str) -> None:
        """Block in `docker wait` until the container exits. It costs no CPU meanwhile: polling `docker inspect`
        for each container 5 times a second took ~1 CPU-s of the 2 cores during an 8-host job (process
        accounting), slowing the job it watched."""
        while docker("wait", cid, check=False).returncode != 0:
            state = docker("inspect", "-f", "{{.State.Status}}", cid, check=False)
            if state.returncode != 0 or state.stdout.strip() in ("exited", "dead"):
                break
            time.sleep(0.2)  # `docker wait` failed on a running container (daemon hiccup): ask again
        with self.started:
            self.exited[host] = time.monotonic()
            self.started.notify_all()

    def container(self, host: str, timeout: float) -> str:
        with self.started:
            if not self.started.wait_for(lambda: host in self.containers, timeout):
                raise TimeoutError(f"container {host} did not start within {timeout:.0f} s")
            return self.containers[host]

    def wait_for_log(self, host: str, text: str, timeout: float) -> str:
        """Follow the container's log until a line contains `text`; returns that line."""
        deadline = time.monotonic() + timeout
        cid = self.container(host, timeout)
        follower = subprocess.Popen([DOCKER, "logs", "-f", cid], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, errors="replace")
        timer = threading.Timer(max(0.0, deadline - time.monotonic()), follower.kill)
        timer.start()
        try:
            for line in follower.stdout:
                if text in line:
                    return line
        finally:
            timer.cancel()
            follower.kill()
            follower.wait()
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{host} logged no line containing {text!r} within {timeout:.0f} s")
        raise RuntimeError(f"{host} exited before logging a line containing {text!r}")

    def mark_fault(self) -> None:
        self.fault_at = time.time()

    def signal(self, host: str, signal_name: str = "KILL") -> None:
        cid = self.container(host, 10)
        self.mark_fault()
        docker("kill", "--signal", signal_name, cid)

    def disconnect(self, host: str) -> None:
        """Cut the host off the job's network (a partition): its processes stay alive."""
        cid = self.container(host, 10)
        self.mark_fault()
        docker("network", "disconnect", f"{self.project}-net", cid)

    def exec(self, host: str, *argv: str) -> subprocess.CompletedProcess:
        return docker("exec", self.container(host, 10), *argv)

    def stranger(self, image: str, argv: list, mounts=(), timeout: float = 120) -> subprocess.CompletedProcess:
        """Run argv in a container that is no host of the job but sits on the job's network, as anyone on the
        same VPC could; returns when it ends. mounts: (host path, container path), read-only."""
        args = ["run", "--rm", "--network", f"{self.project}-net"]
        for source, target in mounts:
            args += ["-v", f"{Path(source).resolve()}:{target}:ro"]
        return docker(*args, image, *argv, check=False, timeout=timeout)


def timed_log(cid: str) -> list:
    """The container's stdout and stderr lines, merged in the order docker's clock stamped them."""
    logs = docker("logs", "--timestamps", cid, check=False)
    lines = []
    for line in (logs.stdout + logs.stderr).splitlines():
        stamp, _, text = line.partition(" ")
        at = docker_time(stamp)
        if at is not None:
            lines.append((at, text))
    return sorted(lines, key=lambda pair: pair[0])


def remove_job(handle: RunningJob, network: str, workdir: Path, hosts: list) -> None:
    for cid in handle.containers.values():
        docker("rm", "-f", cid, check=False)
    docker("network", "rm", network, check=False)
    # Unblock feeder threads still waiting for a reader.
    for host in hosts:
        for fifo in (workdir / host / "input" / "data").glob("*_[0-9]*"):
            if fifo.is_fifo():
                try:
                    os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
                except OSError:
                    pass
