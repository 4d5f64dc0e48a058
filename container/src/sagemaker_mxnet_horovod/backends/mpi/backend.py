"""The MPI backend as the registry knows it (plan/backend.py's interface): its environment rules (mpirun.py's, then
gloo.py's), this host's plan (mpirun.py), its ranks' start (rank_env.py) and its run (the master's, master_run.py;
a worker's, worker_run.py)."""

from __future__ import annotations

from collections.abc import Mapping

from sagemaker_mxnet_horovod.backends.mpi import gloo, mpirun
from sagemaker_mxnet_horovod.backends.mpi.rank_env import write_rank_environment
from sagemaker_mxnet_horovod.core.outcome import Outcome
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.training_config import TrainingConfig
from sagemaker_mxnet_horovod.plan.backend import Backend, HostInputs, HostPlan


class Mpi(Backend):
    name = "mpi"
    label = "MPI"
    collectives_in_shm = True
    rules = mpirun.RULES + gloo.RULES
    rank_module = "sagemaker_mxnet_horovod.backends.mpi.rank_env"

    def options_env(self, config: TrainingConfig, base_env: Mapping[str, str]) -> dict[str, str]:
        """-x NAME=VALUE in sagemaker_mpi_custom_mpi_options, and -x NAME for a variable of the container's: mpirun
        sets them on every rank, and each rank keeps them (rank_env.py applies the plan's environment, with them)."""
        return config.settings.custom_mpi_options.exported_values(base_env)

    def host_plan(self, inputs: HostInputs) -> HostPlan:
        return mpirun.host_plan(inputs)

    def run(self, plan: Plan, env: Mapping[str, str], paths: Paths, bind_address: str) -> Outcome:
        # Imported to run: planning (and `train --dry-run`) needs none of it.
        from sagemaker_mxnet_horovod.backends.mpi.master_run import MasterRun
        from sagemaker_mxnet_horovod.backends.mpi.worker_run import run_worker

        # sshd starts the ranks on workers with an empty environment, and mpirun exports only the master's: every
        # host's ranks apply this host's environment from a file (rank_env.py).
        write_rank_environment(plan, env)
        if plan.role == "worker":
            return run_worker(plan, paths, bind_address)
        return MasterRun(plan, {**env, **plan.env}, bind_address, paths.failure_file).run()


BACKEND = Mpi()
