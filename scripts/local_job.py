#!/usr/bin/env python3
"""Run a SageMaker-like training job on N local containers of the image: the same files, network and
`docker run IMAGE train` that SageMaker uses, without an AWS account.

Each host gets its own /opt/ml (a directory under --workdir) with resourceconfig.json, hyperparameters.json
and inputdataconfig.json; containers join a private network under the names algo-1..algo-N, while their own
hostnames are random (as in SDK local mode, where the hostname is the container id). Channels are
bind-mounted read-only (File and FastFile mode alike: a mount read on demand); Pipe-mode channels are fed through
FIFOs <channel>_<epoch> as SageMaker does. A ShardedByS3Key channel gives each host its own part, as SageMaker
does: `--channel train=part1,part2:ShardedByS3Key` (one directory per host, in host order).

  scripts/local_job.py --image sagemaker-mxnet-horovod:cpu --hosts 2 \\
      --hp sagemaker_program=mnist --hp epochs=2 --channel train=data/train --channel test=data/test

Used by the integration tests, `make demo` and the benchmarks (import run_job). Stdlib only.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

DOCKER = os.environ.get("DOCKER", "docker")


@dataclass
class HostResult:
    name: str
    exit_code: int | None  # None: never started or still running at the deadline
    logs: str
    failure: str | None
    root: Path  # this host's /opt/ml
    seconds: float | None = None  # from job start to this container's exit
    started_at: float | None = None  # docker's own clock (epoch seconds): container start and exit
    finished_at: float | None = None
    timed_log: list = field(default_factory=list)  # (epoch seconds, line) by docker's clock, if asked for

    def first_log_time(self, text: str) -> float | None:
        """When the first log line containing text was written (needs JobSpec.timed_logs)."""
        return next((at for at, line in self.timed_log if text in line), None)


@dataclass
class JobResult:
    hosts: list[HostResult]
    seconds: float  # wall time from the first container's start to the last exit
    timed_out: bool = False
    fault_at: float | None = None  # epoch seconds when `during` injected its fault (RunningJob.mark_fault)
    during_error: str | None = None  # what went wrong inside `during`, if anything
    submitted_at: float | None = None  # epoch seconds just before the first `docker run`
    gate_at: float | None = None  # epoch seconds when JobSpec.start_gate let every host's command start

    @property
    def run_seconds(self) -> float | None:
        """The first `docker run` to the last container's exit by docker's clock: `seconds` without the
        harness's polling latency."""
        ends = [h.finished_at for h in self.hosts if h.finished_at]
        return max(ends) - self.submitted_at if ends and self.submitted_at else None

    @property
    def master(self) -> HostResult:
        return self.hosts[0]

    @property
    def hosts_started_at(self) -> float | None:
        """When the job began: its start gate if it had one (JobSpec.start_gate), else the first container's
        start, by docker's clock."""
        starts = [h.started_at for h in self.hosts if h.started_at]
        return self.gate_at or (min(starts) if starts else None)

    @property
    def container_seconds(self) -> float | None:
        """hosts_started_at to the last container's exit, by docker's clock: no harness latency in it."""
        ends = [h.finished_at for h in self.hosts if h.finished_at]
        return max(ends) - self.hosts_started_at if self.hosts_started_at and ends else None

    @property
    def exit_codes(self) -> list:
        return [h.exit_code for h in self.hosts]

    def describe(self) -> str:
        lines = [f"job: {self.seconds:.1f} s{' (TIMED OUT)' if self.timed_out else ''}"]
        for h in self.hosts:
            lines.append(f"--- {h.name}: exit {h.exit_code}" + (f", failure: {h.failure!r}" if h.failure else ""))
            lines.append(h.logs[-6000:])
        return "\n".join(lines)


# Input modes whose channel is a directory: File (SageMaker downloads it first) and FastFile (SageMaker mounts the S3
# prefix and streams each file on its first read): both a read-only bind mount here.
MOUNTED_MODES = ("File", "FastFile")


@dataclass
class Channel:
    name: str
    source: Path
    mode: str = "File"  # File | FastFile | Pipe
    distribution: str = "FullyReplicated"  # S3DistributionType in inputdataconfig.json: or ShardedByS3Key
    host_sources: dict = field(default_factory=dict)  # host -> its own part (File mode), instead of source

    def source_for(self, host: str) -> Path:
        return self.host_sources.get(host, self.source)


@dataclass
class JobSpec:
    image: str
    hosts: int = 2
    hyperparameters: dict = field(default_factory=dict)
    channels: list = field(default_factory=list)
    env: dict = field(default_factory=dict)
    # What SDK local mode writes (its estimator's instance_type): every host is a container on this machine, and the
    # launcher splits the machine's cores between all of their ranks (plan/cores.py). A SageMaker type (ml.*)
    # makes each host count its cores as its own.
    instance_type: str = "local"
    interface_name: str = "eth0"  # what resourceconfig.json claims; SDK v3 local mode writes "ethwe"
    start_delays: dict = field(default_factory=dict)  # host -> seconds before its container starts
    network_alias_delays: dict = field(default_factory=dict)  # host -> seconds before its name resolves
    keep_eth0: bool = True  # after such a delay, rename the reconnected interface back to eth0
    skip_hosts: tuple = ()  # hosts whose containers never start
    timeout_s: float = 600.0
    pipe_epochs: int = 1
    extra_mounts: list = field(default_factory=list)  # (host_path, container_path, mode)
    host_mounts: dict = field(default_factory=dict)  # host -> [(host_path, container_path, mode)]: that host only
    command: tuple = ("train",)
    hostname_is_alias: bool = False  # hostname algo-N as on SageMaker (default: random, as in SDK local mode)
    code_dir: Path | None = None  # copied to each host's /opt/ml/code (sagemaker_submit_directory=/opt/ml/code)
    volumes: dict = field(default_factory=dict)  # host -> [(docker volume name, container path)]
    cpusets: dict = field(default_factory=dict)  # host -> docker --cpuset-cpus (e.g. one core per host)
    cpus: dict = field(default_factory=dict)  # host -> docker --cpus (a share of its cpuset, e.g. "0.5")
    memory: dict = field(default_factory=dict)  # host -> docker --memory, the same --memory-swap (no swap): "768m"
    # /dev/shm of every host: Docker's default (64 MiB) is too small for DataLoader workers and NCCL; SageMaker's
    # hosts have many GiB. None: Docker's default.
    shm_size: str | None = "1g"
    config_files: dict = field(default_factory=dict)  # file name -> text replacing what prepare_host writes
    during: object = None  # callable(RunningJob), run in a thread once the containers started (fault injection)
    timed_logs: bool = False  # also keep every log line with docker's timestamp (HostResult.timed_log)
    # Heterogeneous cluster: instance group name -> its hosts, in resourceconfig.json's order (e.g.
    # {"train": ["algo-1", "algo-2"], "data": ["algo-3"]}); empty: the one group homogeneousCluster, as SageMaker
    # writes for a homogeneous job.
    instance_groups: dict = field(default_factory=dict)
    # Every host's command waits at a FIFO until all containers run, then all start at once, as hosts provisioned
    # in parallel do (the one Docker daemon here starts containers ~0.1 s apart). JobResult.gate_at says when.
    start_gate: bool = False


def host_names(count: int) -> list:
    return [f"algo-{i}" for i in range(1, count + 1)]


def docker(*args, check=True, capture=True, timeout=None) -> subprocess.CompletedProcess:
    done = subprocess.run([DOCKER, *args], check=False, text=True, timeout=timeout,
                          stdout=subprocess.PIPE if capture else None, stderr=subprocess.PIPE if capture else None)
    if check and done.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args[:3])} ... failed ({done.returncode}): {(done.stderr or '').strip()}")
    return done


def docker_time(text: str) -> float | None:
    """Docker's RFC 3339 timestamps have nanoseconds, which datetime does not parse: cut to microseconds."""
    import datetime

    if not text or text.startswith("0001-"):
        return None
    head, _, fraction = text.rstrip("Z").partition(".")
    stamp = datetime.datetime.fromisoformat(head).replace(tzinfo=datetime.UTC)
    return stamp.timestamp() + float(f"0.{fraction or 0}")


def create_network(name: str, fixed_addresses: bool) -> str | None:
    """A private bridge network. With fixed_addresses, on a /24 of our own (returns "10.A.B"), so a
    container can be reconnected with the same address; a random one, retried if it overlaps another."""
    if not fixed_addresses:
        docker("network", "create", name)
        return None
    for _ in range(10):
        prefix = f"10.{secrets.randbelow(56) + 200}.{secrets.randbelow(256)}"
        if docker("network", "create", "--subnet", f"{prefix}.0/24", name, check=False).returncode == 0:
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


def prepare_host(root: Path, spec: JobSpec, host: str, hosts: list) -> None:
    config = root / "input" / "config"
    config.mkdir(parents=True, exist_ok=True)
    for sub in ("model", "output/data", "checkpoints", "input/data"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    groups = spec.instance_groups or {"homogeneousCluster": hosts}
    (config / "resourceconfig.json").write_text(json.dumps({
        "current_host": host, "hosts": hosts, "network_interface_name": spec.interface_name,
        "current_instance_type": spec.instance_type,
        "current_group_name": next((name for name, members in groups.items() if host in members), None),
        "instance_groups": [{"instance_group_name": name, "instance_type": spec.instance_type, "hosts": list(members)}
                            for name, members in groups.items()],
    }))
    # SDK v2 JSON-encodes every hyperparameter value; do the same so the launcher sees what SageMaker sends.
    (config / "hyperparameters.json").write_text(json.dumps({k: json.dumps(v) for k, v in spec.hyperparameters.items()}))
    (config / "inputdataconfig.json").write_text(json.dumps({
        c.name: {"TrainingInputMode": c.mode, "S3DistributionType": c.distribution, "RecordWrapperType": "None"}
        for c in spec.channels}))
    for name, text in spec.config_files.items():
        (config / name).write_text(text)


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


def feed_pipes(data_dir: Path, channel: Channel, epochs: int, stop: threading.Event) -> None:
    """SageMaker Pipe mode: FIFO <channel>_<epoch>, one per epoch, each carrying the whole channel."""
    files = sorted(p for p in channel.source.rglob("*") if p.is_file())
    for epoch in range(epochs):
        fifo = data_dir / f"{channel.name}_{epoch}"
        if not fifo.exists():
            os.mkfifo(fifo)
        try:
            fd = os.open(fifo, os.O_WRONLY)  # blocks until the rank opens it
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as out:
                for path in files:
                    with open(path, "rb") as f:
                        shutil.copyfileobj(f, out)
        except (BrokenPipeError, OSError):
            pass
        if stop.is_set():
            return


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


def run_job(spec: JobSpec, workdir: Path, project: str | None = None) -> JobResult:
    """Run the job on its containers until every one has exited or spec.timeout_s has passed; the containers
    and the network are removed whatever happens."""
    project = project or f"smj-{secrets.token_hex(3)}"
    hosts = host_names(spec.hosts)
    network = f"{project}-net"
    subnet = create_network(network, fixed_addresses=bool(spec.network_alias_delays))
    stop_feeding = threading.Event()
    handle = RunningJob(project)
    started_at = time.monotonic()
    try:
        for host in hosts:
            set_up_host(workdir / host, spec, host, hosts, stop_feeding)
        submitted_at = time.time()
        start_containers(spec, workdir, hosts, network, subnet, handle)
        gate_at = open_start_gate(spec, workdir, hosts, handle, started_at) if spec.start_gate else None
        during_errors = start_during(spec, handle)
        exit_times, timed_out = wait_for_exits(spec, hosts, handle, started_at)
        results = [host_result(spec, host, workdir / host, handle.containers.get(host), exit_times.get(host))
                   for host in hosts]
        seconds = max(exit_times.values(), default=time.monotonic() - started_at)
        return JobResult(results, seconds, timed_out, handle.fault_at, during_errors[0] if during_errors else None,
                         submitted_at, gate_at)
    finally:
        stop_feeding.set()
        remove_job(handle, network, workdir, hosts)


START_GATE = "start-gate"  # in each host's /opt/ml, with JobSpec.start_gate


def set_up_host(root: Path, spec: JobSpec, host: str, hosts: list, stop_feeding: threading.Event) -> None:
    """The host's /opt/ml: config files, the code, and a feeder thread for each Pipe-mode channel."""
    prepare_host(root, spec, host, hosts)
    if spec.start_gate:
        os.mkfifo(root / START_GATE)
    if spec.code_dir:
        shutil.copytree(spec.code_dir, root / "code", dirs_exist_ok=True)
    data_dir = root / "input" / "data"
    for channel in spec.channels:
        if channel.mode == "Pipe":
            for epoch in range(spec.pipe_epochs):
                os.mkfifo(data_dir / f"{channel.name}_{epoch}")
            threading.Thread(target=feed_pipes, args=(data_dir, channel, spec.pipe_epochs, stop_feeding),
                             daemon=True).start()


def start_containers(spec: JobSpec, workdir: Path, hosts: list, network: str, subnet: str | None,
                     handle: RunningJob) -> None:
    """Start every host's container at once, as SageMaker starts them (one after another, the last would start
    ~0.3 s late). A container that cannot start is reported in handle.start_errors."""
    def start(host: str) -> None:
        try:
            start_container(spec, workdir / host, host, hosts, network, subnet, handle)
        except Exception as error:  # noqa: BLE001 - reported by wait_for_exits
            handle.add_start_error(f"{host}: {error}")

    for host in hosts:
        if host not in spec.skip_hosts:
            threading.Thread(target=start, args=(host,), daemon=True).start()


def start_container(spec: JobSpec, root: Path, host: str, hosts: list, network: str, subnet: str | None,
                    handle: RunningJob) -> None:
    delay = spec.start_delays.get(host, 0)
    if delay:
        time.sleep(delay)  # the scenario under test: a host that starts late
    alias_delay = spec.network_alias_delays.get(host)
    address = f"{subnet}.{10 + hosts.index(host)}" if subnet else None
    cid = docker(*docker_run_args(spec, root, host, handle.project, network, address,
                                  alias=alias_delay is None)).stdout.strip()
    handle.add_container(host, cid)
    if alias_delay is not None:
        resolve_late(cid, host, network, address, f"{subnet}.1", alias_delay, spec.keep_eth0)


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


def open_start_gate(spec: JobSpec, workdir: Path, hosts: list, handle: RunningJob, started_at: float) -> float:
    """Once every host's command waits at its gate (a FIFO it opened for reading), let them all through at once;
    returns that moment (epoch seconds)."""
    writers: dict = {}
    pending = [h for h in hosts if h not in spec.skip_hosts]
    try:
        while pending:
            if handle.start_errors:
                raise RuntimeError(f"a container did not start: {handle.start_errors[0]}")
            gone = [h for h in pending if h in handle.exited]
            if gone:
                raise RuntimeError(f"the start gate: {', '.join(gone)} exited before reaching it")
            if time.monotonic() > started_at + spec.timeout_s:
                raise RuntimeError(f"the start gate: {', '.join(pending)} never reached it")
            for host in list(pending):
                try:
                    writers[host] = os.open(workdir / host / START_GATE, os.O_WRONLY | os.O_NONBLOCK)
                    pending.remove(host)
                except OSError as error:
                    if error.errno != errno.ENXIO:
                        raise
            if pending:
                time.sleep(0.01)  # a FIFO's writer cannot wait for its reader with a deadline: ENXIO until then
        gate_at = time.time()
        for fd in writers.values():
            os.write(fd, b"go\n")
        return gate_at
    finally:
        for fd in writers.values():
            os.close(fd)


def start_during(spec: JobSpec, handle: RunningJob) -> list:
    """Run spec.during (fault injection) in a thread; returns the list its error, if any, is added to."""
    errors: list = []
    if spec.during:
        def during() -> None:
            try:
                spec.during(handle)
            except Exception as error:  # noqa: BLE001 - reported in the result, never lost
                errors.append(f"{type(error).__name__}: {error}")

        threading.Thread(target=during, daemon=True).start()
    return errors


def wait_for_exits(spec: JobSpec, hosts: list, handle: RunningJob, started_at: float) -> tuple[dict, bool]:
    """Seconds from the start to each container's exit, and whether the timeout came first."""
    expected = [h for h in hosts if h not in spec.skip_hosts]
    with handle.started:
        done = handle.started.wait_for(lambda: handle.start_errors or all(h in handle.exited for h in expected),
                                       timeout=max(0.0, started_at + spec.timeout_s - time.monotonic()))
        if handle.start_errors:
            raise RuntimeError(f"a container did not start: {handle.start_errors[0]}")
        return {h: handle.exited[h] - started_at for h in expected if h in handle.exited}, not done


def host_result(spec: JobSpec, host: str, root: Path, cid: str | None, exit_seconds: float | None) -> HostResult:
    """What the host's container did: exit code, logs, failure file, docker's start and exit times. A container
    still running (the job timed out) is killed first."""
    failure_file = root / "output" / "failure"
    failure = failure_file.read_text().strip() if failure_file.exists() else None
    if not cid:
        return HostResult(host, None, "", failure, root)
    running = exit_seconds is None
    if running:
        docker("kill", cid, check=False)
    state = docker("inspect", "-f", "{{.State.ExitCode}} {{.State.StartedAt}} {{.State.FinishedAt}}", cid,
                   check=False).stdout.split()
    if spec.timed_logs:
        timed = timed_log(cid)
        logs = "".join(text + "\n" for _, text in timed)
    else:
        timed, done = [], docker("logs", cid, check=False)
        logs = done.stdout + done.stderr
    return HostResult(host, None if running else int(state[0]), logs, failure, root, exit_seconds,
                      docker_time(state[1]), None if running else docker_time(state[2]), timed)


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--image", default="sagemaker-mxnet-horovod:cpu")
    parser.add_argument("--hosts", type=int, default=2)
    parser.add_argument("--hp", action="append", default=[], metavar="KEY=VALUE", help="hyperparameter")
    parser.add_argument("--channel", action="append", default=[], metavar="NAME=DIR[:Pipe|:FastFile]",
                        help="a channel; NAME=DIR1,DIR2,...:ShardedByS3Key gives host N its own DIR N")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--workdir", type=Path, default=Path("out/local-job"))
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--pipe-epochs", type=int, default=1)
    parser.add_argument("--shm-size", default="1g", help="each container's /dev/shm (docker --shm-size)")
    parser.add_argument("--instance-group", action="append", default=[], metavar="NAME=HOST,HOST",
                        help="a heterogeneous cluster's instance group (repeat; default: one homogeneousCluster)")
    args = parser.parse_args(argv)

    channels = []
    for item in args.channel:
        name, _, rest = item.partition("=")
        source, _, mode = rest.partition(":")
        if mode == "ShardedByS3Key":
            parts = [Path(p) for p in source.split(",")]
            if len(parts) != args.hosts:
                parser.error(f"--channel {item}: {len(parts)} parts for {args.hosts} hosts")
            channels.append(Channel(name, parts[0], "File", mode, dict(zip(host_names(args.hosts), parts))))
        else:
            channels.append(Channel(name, Path(source), mode or "File"))
    spec = JobSpec(image=args.image, hosts=args.hosts,
                   hyperparameters=dict(item.split("=", 1) for item in args.hp),
                   channels=channels, env=dict(item.split("=", 1) for item in args.env),
                   timeout_s=args.timeout, pipe_epochs=args.pipe_epochs, shm_size=args.shm_size,
                   instance_groups={name: hosts.split(",") for name, _, hosts in
                                    (item.partition("=") for item in args.instance_group)})
    if args.workdir.exists():
        shutil.rmtree(args.workdir)
    args.workdir.mkdir(parents=True)
    result = run_job(spec, args.workdir)
    for host in result.hosts:
        print(f"===== {host.name} (exit {host.exit_code}) =====")
        print(host.logs.rstrip())
    print("=" * 60)
    print(f"job finished in {result.seconds:.1f} s; exit codes: "
          + ", ".join(f"{h.name}={h.exit_code}" for h in result.hosts))
    for host in result.hosts:
        if host.failure:
            print(f"{host.name} failure: {host.failure}")
    print(f"model (master): {result.master.root / 'model'}")
    print(f"output (master): {result.master.root / 'output'}")
    return 0 if all(code == 0 for code in result.exit_codes) and not result.timed_out else 1


if __name__ == "__main__":
    sys.exit(main())
