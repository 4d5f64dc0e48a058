"""Layout rules: which hosts run this host's job, how many processes each, whether over MPI or MXNet's parameter
servers, on which interface. Each rule returns its decision and the notes that say why; `plan_layout` applies
them in order. The layout says what the job asks for; which backend runs it is backends/registry.py's choice."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sagemaker_mxnet_horovod.core.exits import PlanError
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.parse.settings import KEYS
from sagemaker_mxnet_horovod.parse.training_config import TrainingConfig

# How the job's processes work together; each is the name of the backend that runs it (backends/registry.py).
MPI, PARAMETER_SERVER, SINGLE = "mpi", "parameter_server", "single"
Distribution = Literal["mpi", "parameter_server", "single"]


@dataclass(frozen=True)
class Layout:
    """This host's part of the job, decided before any environment or command."""

    current_host: str
    hosts: tuple[str, ...]  # the hosts of this host's distributed job; this host alone without one
    master_host: str  # this host without a distributed job
    processes_per_host: int  # MPI ranks, or parameter-server workers
    # mpi: Horovod over MPI; parameter_server: MXNet's own distribution (scheduler, servers and kvstore workers);
    # single: the program alone on this host
    distribution: Distribution
    interface: str | None
    outside_reason: str = ""  # why this host runs alone, outside the distribution hosts' MPI job
    notes: tuple[str, ...] = ()

    @property
    def distributed(self) -> bool:
        """Its hosts run one job together (over MPI or the parameter servers), as this host's role says."""
        return self.distribution != SINGLE

    @property
    def total_processes(self) -> int:
        return self.processes_per_host * len(self.hosts)

    @property
    def role(self) -> str:
        """single: run the program here; master: run mpirun, or coordinate a parameter-server job (its first host);
        worker: serve the master's mpirun, or run this host's parameter-server processes under the master."""
        if not self.distributed:
            return "single"
        return "master" if self.current_host == self.master_host else "worker"

    @property
    def rank_hosts(self) -> tuple[str, ...]:
        """The host of each rank, in rank order."""
        return tuple(h for h in self.hosts for _ in range(self.processes_per_host))


def plan_layout(config: TrainingConfig, facts: HostFacts) -> Layout:
    settings, resource = config.settings, config.resource
    notes: list[str] = []
    hosts, per_host, mpi_enabled = resource.distribution_hosts, settings.processes_per_host, settings.mpi_enabled
    parameter_server, ps_notes = parameter_server_or_not(config)
    notes += ps_notes

    outside_reason = outside_distribution_reason(config)
    if outside_reason:
        hosts, per_host, mpi_enabled, parameter_server = (resource.current_host,), 1, False, False
    else:
        notes += instance_group_notes(config)

    single_process = program_single_process(config, len(hosts), per_host, mpi_enabled, parameter_server)
    if single_process:
        per_host, mpi_enabled = 1, False
        notes.append(single_process)

    if parameter_server and per_host is None:
        per_host = 1  # as AWS's MXNet toolkit: one worker per host, over all of its devices
    per_host, per_host_notes = processes_per_host(per_host, facts, resource.current_host)
    notes += per_host_notes
    if parameter_server:
        distribution: Distribution = PARAMETER_SERVER
    else:
        over_mpi, mpi_notes = mpi_or_not(mpi_enabled, per_host, len(hosts))
        distribution, notes = (MPI if over_mpi else SINGLE), notes + mpi_notes
    distributed = distribution != SINGLE

    interface, interface_note = choose_interface(resource.network_interface_name, facts)
    notes += [interface_note] if interface_note else []
    if distributed and len(hosts) > 1 and not interface:
        raise PlanError("no network interface found for a multi-host job (no default route, no interface)")

    return Layout(
        current_host=resource.current_host,
        hosts=hosts if distributed else (resource.current_host,),
        master_host=resource.master_host if distributed else resource.current_host,
        processes_per_host=per_host,
        distribution=distribution,
        interface=interface,
        outside_reason=outside_reason or "",
        notes=tuple(notes),
    )


def outside_distribution_reason(config: TrainingConfig) -> str | None:
    """Why this host runs the program on its own, outside the MPI job, or None when it is one of the distribution
    hosts. As the toolkit: a host whose instance group is not a distribution group runs the program alone, as one
    process, and its own exit code is its result (heterogeneous clusters: e.g. a data-loading group)."""
    resource = config.resource
    if resource.current_host in resource.distribution_hosts:
        return None
    group = resource.group_of(resource.current_host)
    return (f"outside the distribution: instance group {group!r} is not in {KEYS.distribution_instance_groups} "
            f"{list(config.settings.distribution_instance_groups or ())}; runs the program on its own, one process "
            f"(MPI runs on {', '.join(resource.distribution_hosts)}, master {resource.master_host})")


def instance_group_notes(config: TrainingConfig) -> list[str]:
    """Several instance groups and no distribution groups named: each group is its own job, as the toolkit
    does with MPI enabled."""
    resource = config.resource
    if config.settings.distribution_instance_groups is not None or len(resource.instance_groups) <= 1:
        return []
    return [f"{KEYS.distribution_instance_groups} not set: MPI spans this host's instance group "
            f"{resource.group_of(resource.current_host)!r} only (each group its own job, as the toolkit does with "
            "MPI enabled)"]


def program_single_process(config: TrainingConfig, host_count: int, per_host: int | None,
                           mpi_enabled: bool | None, parameter_server: bool = False) -> str | None:
    """The program's own rule (SINGLE_PROCESS_WHEN_FALSE or SINGLE_PROCESS_WHEN in its launch modules): an
    argument set false, or to one of the declared values, makes the job one process on one host without MPI.
    Returns the note saying so, or None; refuses a job that asks for more."""
    request = config.single_process
    if request is None:
        return None
    setting = request.setting
    if host_count > 1:
        other = f"{request.argument}=true" if request.value == "false" else f"another {request.argument}"
        raise PlanError(f"{setting} runs one process on one host; this job has {host_count} hosts "
                        f"(use {other}, or instance_count=1)")
    if per_host not in (None, 1) or mpi_enabled:
        raise PlanError(f"{setting} runs one process without MPI: remove {KEYS.mpi_enabled} and "
                        f"{KEYS.processes_per_host}")
    if parameter_server:
        raise PlanError(f"{setting} runs one process without parameter servers: remove "
                        f"{KEYS.parameter_server_enabled}")
    return f"{setting}: {request.instead}, no MPI"


def parameter_server_or_not(config: TrainingConfig) -> tuple[bool, list[str]]:
    """sagemaker_parameter_server_enabled, or the program's own argument (PARAMETER_SERVER_WHEN in its launch
    modules: a built-in program's kvstore=dist_sync); a contradiction between them, or with MPI, is refused."""
    enabled, request = config.settings.parameter_server_enabled, config.parameter_server
    asked = enabled or (request is not None and request.asks)
    if config.settings.parameter_server_num_servers and not asked:
        raise PlanError(f"{KEYS.parameter_server_num_servers} is set but the job has no parameter server "
                        f"({KEYS.parameter_server_enabled}=true, or a built-in program's kvstore=dist_sync): it "
                        "would do nothing")
    if request is None:
        return enabled, []
    if enabled and not request.asks:
        raise PlanError(f"{KEYS.parameter_server_enabled}=true, but {request.setting}: the parameter servers "
                        f"serve a kvstore {', '.join(request.values)} (remove {request.argument}: the program then "
                        f"trains with {request.values[0]})")
    if not request.asks:
        return False, []
    if config.settings.mpi_enabled:
        raise PlanError(f"{request.setting} trains with MXNet's parameter servers, {KEYS.mpi_enabled}=true with "
                        "Horovod over MPI: remove one of them")
    if enabled:
        return True, []
    return True, [f"{request.setting}: MXNet's parameter servers, as with {KEYS.parameter_server_enabled}=true"]


def processes_per_host(requested: int | None, facts: HostFacts, current_host: str) -> tuple[int, list[str]]:
    """The hyperparameter, else one per GPU, else one. Never more than the GPUs; on CPU hosts more ranks than
    cores only share the cores (the toolkit never refuses it): it is how small jobs and tests run several
    ranks per host."""
    if requested is None:
        return max(1, facts.gpu_count), []
    if facts.gpu_count and requested > facts.gpu_count:
        raise PlanError(f"{KEYS.processes_per_host}={requested} but {current_host} "
                        f"has {facts.gpu_count} GPU(s): more processes than slots")
    if not facts.gpu_count and requested > facts.cpu_count:
        return requested, [f"{KEYS.processes_per_host}={requested} on {facts.cpu_count} CPU core(s): "
                           "the ranks share the cores (oversubscribed)"]
    return requested, []


def mpi_or_not(mpi_enabled: bool | None, per_host: int, host_count: int) -> tuple[bool, list[str]]:
    """sagemaker_mpi_enabled, else MPI whenever there is more than one process."""
    if mpi_enabled is False and per_host > 1:
        raise PlanError(f"{KEYS.mpi_enabled}=false cannot run {per_host} processes per host; "
                        f"enable MPI or set {KEYS.processes_per_host}=1")
    over_mpi = mpi_enabled if mpi_enabled is not None else per_host * host_count > 1
    if not over_mpi and host_count > 1:
        return over_mpi, [f"MPI disabled: each of the {host_count} hosts runs the program on its own"]
    return over_mpi, []


def choose_interface(requested: str | None, facts: HostFacts) -> tuple[str | None, str | None]:
    """The cluster interface and, when it differs from the request, a note saying why.

    SageMaker names the interface in resourceconfig.json; SDK v3 local mode names "ethwe", which does not
    exist in its compose network. Trust the name only if the interface exists, else take the default route's.
    """
    if requested and requested in facts.interfaces:
        return requested, None
    fallback = facts.default_route_interface or (facts.interfaces[0] if facts.interfaces else None)
    if requested:
        return fallback, f"network_interface_name {requested!r} does not exist here; using {fallback!r}"
    return fallback, None
