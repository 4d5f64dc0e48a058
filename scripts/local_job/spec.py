"""What local_job runs and returns, as data: a job (JobSpec: its image, hosts, hyperparameters, channels,
and what to do to it), each channel, and the result of each host and of the job. Stdlib only."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

START_GATE = "start-gate"  # in each host's /opt/ml, with JobSpec.start_gate


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
    hang_report: str = ""  # a container still running at the job's timeout: its processes and ranks' stacks

    def stuck_in(self) -> str:
        """One line from the hang report: where `train stacks` found each rank's main thread ("rank 0 on algo-1 in
        hang.py:8 <module>"); "" when there is no report or no stack in it."""
        ranks, rank, where, in_main = [], None, None, False
        for line in self.hang_report.splitlines() + ["===== end"]:
            text = line.strip()
            if text.startswith("====="):
                if where:
                    ranks.append(where)
                where, in_main = None, False
                name = re.fullmatch(r"===== (\S+)-rank-(\d+)\.txt", text)
                rank = f"rank {name.group(2)} on {name.group(1)}" if name else None
            elif text.startswith("Thread "):
                in_main = text.startswith("Thread MainThread")
            elif in_main and rank and (frame := re.fullmatch(r'File "(.+)", line (\d+), in (.+)', text)):
                where = f"{rank} in {Path(frame.group(1)).name}:{frame.group(2)} {frame.group(3)}"
        return "; ".join(ranks)

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
            if h.hang_report:
                lines.append(h.hang_report[-6000:])
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
    # docker --cpu-shares of every host: a benchmark's containers ahead of other work on a shared machine (0: Docker's)
    cpu_shares: int = 0
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
    # The job's network reaches nothing beyond its containers (docker's --internal): SageMaker's network isolation,
    # or a VPC subnet without a NAT gateway.
    isolated: bool = False


def host_names(count: int) -> list:
    return [f"algo-{i}" for i in range(1, count + 1)]
