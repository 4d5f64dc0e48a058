"""The single-process backend: the program runs once on this host, without MPI (one process in all,
sagemaker_mpi_enabled=false, or a host outside the distribution instance groups). Its command is the rank's own
command line, run as act/command_run.py runs a command; it needs no environment rules beyond every job's."""

from __future__ import annotations

from collections.abc import Mapping

from sagemaker_mxnet_horovod.core.outcome import Outcome
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.plan.backend import Backend, HostInputs, HostPlan


class Single(Backend):
    name = "single"
    label = "no MPI"

    def host_plan(self, inputs: HostInputs) -> HostPlan:
        """What this host executes: the program, started through rank_program as every rank is."""
        return HostPlan(command=tuple(inputs.rank_argv))

    def run(self, plan: Plan, env: Mapping[str, str], paths: Paths, bind_address: str) -> Outcome:
        from sagemaker_mxnet_horovod.act.command_run import CommandRun  # to run: planning needs none of it

        return CommandRun(plan, {**env, **plan.env}, paths.failure_file).run()


BACKEND = Single()
