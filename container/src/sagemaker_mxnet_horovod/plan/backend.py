"""A backend: one way of running a job's processes across its hosts (Horovod over MPI, MXNet's parameter servers,
one process alone). Each is one folder of backends/, planning and running side by side, and this interface is all
the rest of the launcher knows of it: its environment rules and this host's part of the plan (which the planner,
job_plan.make_plan, applies), and its run (which `train` calls). backends/registry.py is the one place a backend is
chosen; adding one is a folder there and a line in the registry.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from sagemaker_mxnet_horovod.core.outcome import Outcome
from sagemaker_mxnet_horovod.core.plan import GlooRendezvous, LocalProcess, Plan
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.training_config import TrainingConfig
from sagemaker_mxnet_horovod.plan.env_rules import PlanInputs, Rule


@dataclass(frozen=True)
class HostInputs:
    """What a backend plans this host's part from."""

    job: PlanInputs
    env: Mapping[str, str]  # what the plan sets on top of the container's environment (the plan's env)
    rank_argv: tuple[str, ...]  # how each rank (or worker) starts: the backend's rank_module, then the program
    run_dir: str
    python: str


@dataclass(frozen=True)
class HostPlan:
    """This host's part of the job, as the backend plans it."""

    command: tuple[str, ...] = ()  # what this host executes (mpirun ..., the program); empty when nothing
    processes: tuple[LocalProcess, ...] = ()  # or this host's own processes, each with its role
    # Variables the backend gives every rank beyond the plan's environment (MPI: the user's -x NAME=VALUE), whose
    # files count as the job's output (plan/stray_outputs.py)
    rank_variables: Mapping[str, str] = field(default_factory=dict)
    lines: tuple[str, ...] = ()  # the backend's own lines for the start log
    gloo_rendezvous: GlooRendezvous | None = None  # the MPI backend's, when its ranks run Horovod over Gloo


class Backend(ABC):
    name: ClassVar[str]  # Plan.backend, the registry's key
    label: ClassVar[str]  # how the start log names it: "MPI"
    process_names: ClassVar[tuple[str, str]] = ("process", "processes")  # what it calls the job's processes
    # Its ranks' collectives use /dev/shm: Open MPI's segments between a host's ranks, NCCL's between its GPUs.
    collectives_in_shm: ClassVar[bool] = False
    rules: ClassVar[tuple[Rule, ...]] = ()  # its environment rules, after every job's (env_rules.RULES)
    # The module each of its ranks (or workers) starts through: act/rank_program.py (line-buffered output, the code
    # directory as working directory, as under the toolkit), or a module of the backend's own that ends there.
    rank_module: ClassVar[str] = "sagemaker_mxnet_horovod.act.rank_program"

    def options_env(self, config: TrainingConfig, base_env: Mapping[str, str]) -> dict[str, str]:
        """What the backend's own options, the user's, set on every rank (PlanInputs.options_env): none by default."""
        return {}

    def summary(self, total_processes: int) -> str:
        """The job's processes as this backend counts them, for the start log: '2 processes, MPI'."""
        return f"{total_processes} {self.process_names[total_processes != 1]}, {self.label}"

    @abstractmethod
    def host_plan(self, inputs: HostInputs) -> HostPlan:
        """This host's part: the command it executes, or its own processes."""

    @abstractmethod
    def run(self, plan: Plan, env: Mapping[str, str], paths: Paths, bind_address: str) -> Outcome:
        """This host's run of the planned job, supervised to its end, as this host's Outcome. env: the container's
        environment; bind_address: this host's address on the cluster interface."""
