"""Plan: from a TrainingConfig and HostFacts to the exact argv and environment, as data.

Nothing here touches the system. `make_plan` is what `train --dry-run` prints and what `train` executes. It
applies small named rules, each with its reason: the layout (layout.py: hosts, processes, MPI, interface),
the program and its own launch rules (programs.py), the environment (env_rules.py) and mpirun (mpirun.py).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

from sagemaker_mxnet_horovod.config import TrainingConfig
from sagemaker_mxnet_horovod.env_rules import RULES, Job, apply_rules, check_gpus_supported
from sagemaker_mxnet_horovod.facts import HostFacts
from sagemaker_mxnet_horovod.layout import plan_layout
from sagemaker_mxnet_horovod.mpirun import mpirun_command
from sagemaker_mxnet_horovod.outputs import StrayOutput, find_stray_outputs
from sagemaker_mxnet_horovod.programs import (
    DEFAULT_ENTRYPOINTS_DIR,
    Program,
    load_launch_rules,
    program_name_of,
    resolve_program,
)
from sagemaker_mxnet_horovod.rank_env import SKIP_PREFIXES
from sagemaker_mxnet_horovod.toolkit_env import sm_environment

DEFAULT_RUN_DIR = "/run/sagemaker-cluster"


@dataclass(frozen=True)
class Plan:
    role: str  # "single": run the program here; "master": run mpirun; "worker": serve the master's mpirun
    current_host: str
    master_host: str
    hosts: tuple[str, ...]
    processes_per_host: int
    total_processes: int
    use_mpi: bool
    interface: str | None
    program: Program
    command: tuple[str, ...]  # what this host executes: mpirun ... or the program; empty on workers
    env: Mapping[str, str]  # variables to set on top of the container's environment
    rank_env: Mapping[str, str]  # this host's SM_* values, applied by each local rank (see rank_env.py)
    rank_hosts: tuple[str, ...]  # host of each MPI rank, for naming the failing rank
    peer_timeout_s: float
    handshake_port: int
    run_dir: str
    notes: tuple[str, ...] = field(default=())
    role_reason: str = ""  # why this role, when it is not obvious (a host outside the distribution groups)
    stray_outputs: tuple[StrayOutput, ...] = ()  # copied into output/data when the job ends

    @property
    def workers(self) -> tuple[str, ...]:
        return self.hosts[1:] if self.use_mpi else ()


def make_plan(
    config: TrainingConfig,
    facts: HostFacts,
    base_env: Mapping[str, str],
    python: str = "python3",
    entrypoints_dir: str = DEFAULT_ENTRYPOINTS_DIR,
    run_dir: str = DEFAULT_RUN_DIR,
    code_is_package: bool = False,
) -> Plan:
    launch = load_launch_rules(program_name_of(config), entrypoints_dir)
    layout = plan_layout(config, facts, launch)
    program = resolve_program(config, python, entrypoints_dir, code_is_package)
    check_gpus_supported(facts, base_env)

    # SM_* variables as the sagemaker-training toolkit exports them, so toolkit-style scripts run unchanged.
    sm_env = sm_environment(config, facts.cpu_count, facts.gpu_count, layout.interface, program.name, base_env)
    defaults, rule_notes = apply_rules(RULES, Job(config, facts, base_env, layout, program, launch))
    env = {**sm_env, **defaults}
    custom_options = config.settings.custom_mpi_options if layout.use_mpi else ()  # only when there is an mpirun
    strays = find_stray_outputs(config.paths, custom_options, {**base_env, **env})

    # Every rank, MPI or not, starts through rank_env: this host's SM_* values, line-buffered output, and the
    # code directory as its working directory, as under the toolkit (scripts open files next to them).
    rank_argv = (python, "-m", "sagemaker_mxnet_horovod.rank_env", run_dir, str(config.paths.code_dir), "--",
                 *program.argv)
    command = rank_argv  # a single process runs the program itself; a worker runs nothing: mpirun reaches it
    if layout.role == "master":
        command = mpirun_command(layout.hosts, facts.hostname, layout.processes_per_host, facts.cpu_count,
                                 layout.interface, run_dir, custom_options, base_env, env, rank_argv)
    elif layout.role == "worker":
        command = ()

    return Plan(
        role=layout.role,
        current_host=layout.current_host,
        master_host=layout.master_host,
        hosts=layout.hosts,
        processes_per_host=layout.processes_per_host,
        total_processes=layout.total_processes,
        use_mpi=layout.use_mpi,
        interface=layout.interface,
        program=program,
        command=command,
        env=env,
        rank_env=sm_env,
        rank_hosts=layout.rank_hosts,
        peer_timeout_s=config.settings.peer_timeout_s,
        handshake_port=config.settings.handshake_port,
        run_dir=run_dir,
        notes=(*config.warnings, *layout.notes, *rule_notes, *(stray.warning(config.paths) for stray in strays)),
        role_reason=layout.outside_reason,
        stray_outputs=tuple(strays),
    )


def rank_environment(plan: Plan, base_env: Mapping[str, str]) -> dict:
    """What every rank on this host should see: this container's own environment (SageMaker gives each
    container the job's `environment`, but sshd starts remote ranks with an empty one and mpirun exports
    only the master's), the launcher's defaults, and this host's SM_* values."""
    merged = {**base_env, **plan.env, **plan.rank_env}
    return {k: v for k, v in merged.items() if not k.startswith(SKIP_PREFIXES)}


def describe(plan: Plan, base_env: Mapping[str, str]) -> str:
    """Human-readable plan, for `train --dry-run` and the start log."""
    slots = ", ".join(f"{h}:{plan.processes_per_host}" for h in plan.hosts)
    processes = f"{plan.total_processes} process{'es' if plan.total_processes != 1 else ''}"
    lines = [
        f"role: {plan.role}" + (f" ({plan.role_reason})" if plan.role_reason else ""),
        f"current host: {plan.current_host}  master: {plan.master_host}",
        f"hosts: {slots}  ({processes}, {'MPI' if plan.use_mpi else 'no MPI'})",
        f"interface: {plan.interface}",
        f"program: {plan.program.name}" + ("" if plan.program.builtin else f" from {plan.program.submit_directory}"),
    ]
    if plan.command:
        lines.append("command: " + shlex.join(plan.command))
    changed = {k: v for k, v in plan.env.items() if base_env.get(k) != v and not k.startswith("SM_")}
    if changed:
        lines.append("env: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(changed.items())))
    lines += [f"note: {n}" for n in plan.notes]
    return "\n".join(lines)
