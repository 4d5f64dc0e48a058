"""The MPI backend: Horovod over Open MPI, as AWS's images run it. The master runs mpirun (mpirun.py: the command
and MPI's environment rules; gloo.py Horovod's Gloo when the job asks for it) between gathering its workers and releasing them (master_run.py); each worker serves
mpirun's ssh and waits for the master's verdict (worker_run.py)."""

from __future__ import annotations

from collections.abc import Mapping

from sagemaker_mxnet_horovod.act.rank_env import write_rank_environment
from sagemaker_mxnet_horovod.backends.mpi import gloo, mpirun
from sagemaker_mxnet_horovod.core.outcome import Outcome
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.plan.backend import Backend, HostInputs, HostPlan


class Mpi(Backend):
    name = "mpi"
    label = "MPI"
    collectives_in_shm = True
    rules = mpirun.RULES + gloo.RULES

    def host_plan(self, inputs: HostInputs) -> HostPlan:
        return mpirun.host_plan(inputs)

    def run(self, plan: Plan, env: Mapping[str, str], paths: Paths, bind_address: str) -> Outcome:
        # Imported to run: planning (and `train --dry-run`) needs none of it.
        from sagemaker_mxnet_horovod.backends.mpi.master_run import MasterRun
        from sagemaker_mxnet_horovod.backends.mpi.worker_run import run_worker

        # sshd starts the ranks on workers with an empty environment, and mpirun exports only the master's: every
        # host's ranks apply this host's environment from a file (act/rank_env.py).
        write_rank_environment(plan, env)
        if plan.role == "worker":
            return run_worker(plan, paths, bind_address)
        return MasterRun(plan, {**env, **plan.env}, bind_address, paths.failure_file).run()


BACKEND = Mpi()
