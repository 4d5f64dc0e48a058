"""The plan: from a TrainingConfig and HostFacts to the exact argv and environment of this host, as data.

Nothing here touches the system. `make_plan` is what `train --dry-run` prints and what `train` executes. It
applies small named rules, each with its reason: the layout (layout.py: hosts, processes, MPI, interface, decided
before), the program (programs.py), the environment (env_rules.py, then the backend's own rules) and this host's
part as the backend plans it (its command, or its own processes). The backend is given: backends/registry.py
chooses it from the layout.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from sagemaker_mxnet_horovod.compat import debugger
from sagemaker_mxnet_horovod.compat.toolkit_env import sm_environment
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.parse.launch_rules import DEFAULT_ENTRYPOINTS_DIR
from sagemaker_mxnet_horovod.parse.settings import KEYS
from sagemaker_mxnet_horovod.parse.training_config import TrainingConfig
from sagemaker_mxnet_horovod.plan.backend import Backend, HostInputs
from sagemaker_mxnet_horovod.plan.env_rules import RULES, PlanInputs, apply_rules, check_gpus_supported, shm_budget
from sagemaker_mxnet_horovod.plan.layout import Layout
from sagemaker_mxnet_horovod.plan.programs import resolve_program
from sagemaker_mxnet_horovod.plan.stray_outputs import find_stray_outputs, warning

DEFAULT_RUN_DIR = "/run/sagemaker-cluster"


def make_plan(
    config: TrainingConfig,
    facts: HostFacts,
    base_env: Mapping[str, str],
    layout: Layout,
    backend: Backend,
    python: str = "python3",
    entrypoints_dir: str = DEFAULT_ENTRYPOINTS_DIR,
    run_dir: str = DEFAULT_RUN_DIR,
    code_is_package: bool = False,
) -> Plan:
    program = resolve_program(config, python, entrypoints_dir, code_is_package)
    check_gpus_supported(facts, base_env)

    # SM_* variables as the sagemaker-training toolkit exports them, so toolkit-style scripts run unchanged.
    sm_env = sm_environment(config, facts.cpu_count, facts.gpu_count, layout.interface, program.name, base_env)
    job = PlanInputs(config, facts, base_env, layout, program, backend.collectives_in_shm,
                     backend.options_env(config, base_env))
    defaults, rule_notes = apply_rules(RULES + backend.rules, job)
    # On top of the container's environment: the backend's options (the user's, more specific), this host's SM_*
    # (the toolkit's, this host's own), the rules' defaults that the user did not replace.
    env = {**job.options_env, **sm_env, **defaults}
    rank_argv = (python, "-m", backend.rank_module, run_dir, str(config.paths.code_dir), "--", *program.argv)
    host = backend.host_plan(HostInputs(job, env, rank_argv, run_dir, python))
    strays = find_stray_outputs(config.paths, host.rank_variables, {**base_env, **env})

    return Plan(
        backend=backend.name,
        role=layout.role,
        current_host=layout.current_host,
        master_host=layout.master_host,
        hosts=layout.hosts,
        processes_per_host=layout.processes_per_host,
        total_processes=layout.total_processes,
        interface=layout.interface,
        program=program,
        command=host.command,
        env=env,
        rank_env=sm_env,
        rank_hosts=layout.rank_hosts,
        peer_timeout_s=config.settings.peer_timeout_s,
        handshake_port=config.settings.handshake_port,
        run_dir=run_dir,
        notes=(*config.warnings, *debugger.notes(config.debugger_configs), *layout.notes, *rule_notes,
               *(warning(stray, config.paths) for stray in strays)),
        role_reason=layout.outside_reason,
        stray_outputs=tuple(strays),
        processes=host.processes,
        backend_summary=backend.summary(layout.total_processes),
        backend_lines=host.lines,
        shm=shm_budget(job),
        output_data_dir=str(config.paths.output_data_dir),
        console_ranks=config.settings.console_ranks,
        gloo_rendezvous=host.gloo_rendezvous,
    )


def console(console_ranks: frozenset[int] | None) -> str:
    """Whose output reaches the console (mpi_console_ranks: a parameter-server job's workers by number)."""
    if console_ranks is None:
        return "every rank"
    return f"ranks {', '.join(map(str, sorted(console_ranks))) or 'none'} ({KEYS.console_ranks})"


def describe(plan: Plan, base_env: Mapping[str, str]) -> str:
    """Human-readable plan, for `train --dry-run` and the start log."""
    slots = ", ".join(f"{h}:{plan.processes_per_host}" for h in plan.hosts)
    lines = [
        f"role: {plan.role}" + (f" ({plan.role_reason})" if plan.role_reason else ""),
        f"current host: {plan.current_host}  master: {plan.master_host}",
        f"hosts: {slots}  ({plan.backend_summary})",
        f"interface: {plan.interface}",
        f"program: {plan.program.name}" + ("" if plan.program.builtin else f" from {plan.program.submit_directory}"),
    ]
    lines += plan.backend_lines
    if plan.command:
        lines.append("command: " + shlex.join(plan.command))
        lines.append(f"rank logs: {plan.output_data_dir}/logs/<host>-rank-<rank>.log; "
                     f"console: {console(plan.console_ranks)}")
    changed = {k: v for k, v in plan.env.items() if base_env.get(k) != v and not k.startswith("SM_")}
    if changed:
        lines.append("env: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(changed.items())))
    lines += [f"note: {n}" for n in plan.notes]
    return "\n".join(lines)
