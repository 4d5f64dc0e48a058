"""The plan: from a TrainingConfig and HostFacts to the exact argv and environment of this host, as data.

Nothing here touches the system. `make_plan` is what `train --dry-run` prints and what `train` executes. It
applies small named rules, each with its reason: the layout (layout.py: hosts, processes, MPI, interface),
the program (programs.py), the environment (env_rules.py, then the backend's own rules) and the backend's
command (backends/: mpi.py's mpirun, single.py's one process, or parameter_server.py's local processes).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from sagemaker_mxnet_horovod.compat.toolkit_env import sm_environment
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.parse.launch_rules import DEFAULT_ENTRYPOINTS_DIR
from sagemaker_mxnet_horovod.parse.training_config import TrainingConfig
from sagemaker_mxnet_horovod.plan.backends import mpi, parameter_server, single
from sagemaker_mxnet_horovod.plan.env_rules import RULES, PlanInputs, apply_rules, check_gpus_supported, shm_budget
from sagemaker_mxnet_horovod.plan.layout import Layout, plan_layout
from sagemaker_mxnet_horovod.plan.programs import resolve_program
from sagemaker_mxnet_horovod.plan.stray_outputs import find_stray_outputs, warning

# Every rank, MPI or not, starts through this module (act/rank_env.py): this host's SM_* values,
# line-buffered output, and the code directory as its working directory, as under the toolkit.
RANK_ENTRY_MODULE = "sagemaker_mxnet_horovod.act.rank_env"
DEFAULT_RUN_DIR = "/run/sagemaker-cluster"
BACKENDS = {"mpi": mpi, "parameter_server": parameter_server, "single": single}




def make_plan(
    config: TrainingConfig,
    facts: HostFacts,
    base_env: Mapping[str, str],
    python: str = "python3",
    entrypoints_dir: str = DEFAULT_ENTRYPOINTS_DIR,
    run_dir: str = DEFAULT_RUN_DIR,
    code_is_package: bool = False,
) -> Plan:
    layout = plan_layout(config, facts)
    program = resolve_program(config, python, entrypoints_dir, code_is_package)
    check_gpus_supported(facts, base_env)
    backend = BACKENDS[layout.backend]

    # SM_* variables as the sagemaker-training toolkit exports them, so toolkit-style scripts run unchanged.
    sm_env = sm_environment(config, facts.cpu_count, facts.gpu_count, layout.interface, program.name, base_env)
    job = PlanInputs(config, facts, base_env, layout, program)
    defaults, rule_notes = apply_rules(RULES + backend.RULES, job)
    env = {**sm_env, **defaults}
    custom_options = config.settings.custom_mpi_options if layout.use_mpi else ()  # only when there is an mpirun
    strays = find_stray_outputs(config.paths, custom_options, {**base_env, **env})
    rank_argv = (python, "-m", RANK_ENTRY_MODULE, run_dir, str(config.paths.code_dir), "--", *program.argv)
    servers = parameter_server.server_count(layout, config.settings.parameter_server_num_servers)
    ps = layout.backend == "parameter_server"

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
        command=host_command(layout, facts.hostname, mpi.rank_cores(job).per_process, run_dir, custom_options,
                             base_env, env, rank_argv),
        env=env,
        rank_env=sm_env,
        rank_hosts=layout.rank_hosts,
        peer_timeout_s=config.settings.peer_timeout_s,
        handshake_port=config.settings.handshake_port,
        run_dir=run_dir,
        notes=(*config.warnings, *layout.notes, *rule_notes, *(warning(stray, config.paths) for stray in strays)),
        role_reason=layout.outside_reason,
        stray_outputs=tuple(strays),
        backend=layout.backend,
        processes=(parameter_server.local_processes(layout, servers, python, rank_argv, str(config.paths.code_dir))
                   if ps else ()),
        roles=parameter_server.describe_roles(layout, servers) if ps else "",
        shm=shm_budget(job),
        output_data_dir=str(config.paths.output_data_dir),
        console_ranks=config.settings.console_ranks,
    )


def host_command(layout: Layout, hostname: str, cores_per_rank: int, run_dir: str, custom_options: tuple[str, ...],
                 base_env: Mapping[str, str], env: Mapping[str, str], rank_argv: tuple[str, ...]) -> tuple[str, ...]:
    """What this host executes: the master's mpirun; nothing on an MPI worker (mpirun reaches it over ssh); the
    program itself without MPI; nothing as one command with the parameter server (Plan.processes instead)."""
    if layout.backend == "parameter_server":
        return ()
    if layout.role == "master":
        return mpi.mpirun_command(layout.hosts, hostname, layout.processes_per_host, cores_per_rank,
                                  layout.interface, run_dir, custom_options, base_env, env, rank_argv)
    if layout.role == "worker":
        return ()
    return single.command(rank_argv)



def console(plan: Plan) -> str:
    """Whose output reaches the console (mpi_console_ranks: a parameter-server job's workers by number)."""
    if plan.console_ranks is None:
        return "every rank"
    return f"ranks {', '.join(map(str, sorted(plan.console_ranks))) or 'none'} (mpi_console_ranks)"


def describe(plan: Plan, base_env: Mapping[str, str]) -> str:
    """Human-readable plan, for `train --dry-run` and the start log."""
    slots = ", ".join(f"{h}:{plan.processes_per_host}" for h in plan.hosts)
    unit = ("worker", "s") if plan.backend == "parameter_server" else ("process", "es")
    processes = f"{plan.total_processes} {unit[0]}{unit[1] if plan.total_processes != 1 else ''}"
    how = {"mpi": "MPI", "parameter_server": "parameter server", "single": "no MPI"}[plan.backend]
    lines = [
        f"role: {plan.role}" + (f" ({plan.role_reason})" if plan.role_reason else ""),
        f"current host: {plan.current_host}  master: {plan.master_host}",
        f"hosts: {slots}  ({processes}, {how})",
        f"interface: {plan.interface}",
        f"program: {plan.program.name}" + ("" if plan.program.builtin else f" from {plan.program.submit_directory}"),
    ]
    if plan.roles:
        lines.append(plan.roles)
    if plan.command:
        lines.append("command: " + shlex.join(plan.command))
        lines.append(f"rank logs: {plan.output_data_dir}/logs/<host>-rank-<rank>.log; console: {console(plan)}")
    for process in plan.processes:
        variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in process.env.items())
        lines.append(f"process {process.name}: {variables} {shlex.join(process.argv)}")
    if plan.processes:
        lines.append(f"process logs: {plan.output_data_dir}/logs/<host>-rank-<worker>.log (a server's, the "
                     f"scheduler's: <host>-server-<n>.log, <host>-scheduler.log); console: {console(plan)}")
    changed = {k: v for k, v in plan.env.items() if base_env.get(k) != v and not k.startswith("SM_")}
    if changed:
        lines.append("env: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(changed.items())))
    lines += [f"note: {n}" for n in plan.notes]
    return "\n".join(lines)
