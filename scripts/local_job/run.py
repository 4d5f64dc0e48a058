"""The steps of a local job (local_job/__init__.py says what one is): each host's /opt/ml set up (hosts.py), the
containers started at once on a private network (containers.py), their exits awaited until the job's timeout, each
host's result read (spec.py's HostResult), and the containers and network removed whatever happens. Stdlib only."""

from __future__ import annotations

import secrets
import subprocess
import threading
import time
from pathlib import Path

from .containers import (
    RunningJob,
    create_network,
    docker,
    docker_run_args,
    docker_time,
    remove_job,
    resolve_late,
    timed_log,
)
from .hosts import open_start_gate, set_up_host
from .spec import HostResult, JobResult, JobSpec, host_names


def run_job(spec: JobSpec, workdir: Path, project: str | None = None) -> JobResult:
    """Run the job on its containers until every one has exited or spec.timeout_s has passed; the containers
    and the network are removed whatever happens."""
    project = project or f"smj-{secrets.token_hex(3)}"
    hosts = host_names(spec.hosts)
    network = f"{project}-net"
    subnet = create_network(network, fixed_addresses=bool(spec.network_alias_delays), isolated=spec.isolated)
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
        # Every host's report before any is killed: a killed master would end the others' way of answering.
        hangs = {host: hang_report(cid) for host, cid in handle.containers.items() if host not in exit_times}
        results = [host_result(spec, host, workdir / host, handle.containers.get(host), exit_times.get(host),
                               hangs.get(host, "")) for host in hosts]
        seconds = max(exit_times.values(), default=time.monotonic() - started_at)
        return JobResult(results, seconds, timed_out, handle.fault_at, during_errors[0] if during_errors else None,
                         submitted_at, gate_at)
    finally:
        stop_feeding.set()
        remove_job(handle, network, workdir, hosts)


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


def host_result(spec: JobSpec, host: str, root: Path, cid: str | None, exit_seconds: float | None,
                hang: str = "") -> HostResult:
    """What the host's container did: exit code, logs, failure file, docker's start and exit times. A container
    still running (the job timed out) is killed first; hang: what it was doing then (hang_report)."""
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
                      docker_time(state[1]), None if running else docker_time(state[2]), timed, hang)


HANG_REPORT_TIMEOUT_S = 40.0  # `train stacks` waits up to 20 s for the whole job's dump


def hang_report(cid: str) -> str:
    """What a container still running at the job's timeout was doing, taken before it is killed: its processes
    (ps) and every Python rank's stack (`train stacks`, which also writes them to output/data/stacks/). A hang in CI
    is then explained by its own run rather than by a rerun that may not hang."""
    parts = []
    for title, argv in (("processes", ["ps", "-eo", "pid,ppid,etimes,time,stat,args", "--sort", "pid"]),
                        ("train stacks", ["train", "stacks"])):
        try:
            done = docker("exec", cid, *argv, check=False, timeout=HANG_REPORT_TIMEOUT_S)
            text = (done.stdout + done.stderr).strip()
        except subprocess.TimeoutExpired:
            text = f"no answer within {HANG_REPORT_TIMEOUT_S:g} s"
        parts.append(f"== {title} (still running at the job's timeout)\n{text}")
    return "\n".join(parts)
