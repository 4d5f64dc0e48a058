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

Used by the integration tests, `make demo` and the benchmarks (import run_job). Stdlib only. The steps of a job are
here; what it is and returns is local_job_spec.py, its containers local_job_docker.py, each host's /opt/ml
local_job_hosts.py.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import sys
import threading
import time
from pathlib import Path

from local_job_docker import (
    DOCKER,
    RunningJob,
    create_network,
    docker,
    docker_run_args,
    docker_time,
    remove_job,
    resolve_late,
    timed_log,
)
from local_job_hosts import open_start_gate, set_up_host
from local_job_spec import Channel, HostResult, JobResult, JobSpec, host_names

# What the integration tests, `make demo`, the fault suite and the benchmarks import from here.
__all__ = ["DOCKER", "Channel", "HostResult", "JobResult", "JobSpec", "RunningJob", "docker_time", "run_job"]


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
