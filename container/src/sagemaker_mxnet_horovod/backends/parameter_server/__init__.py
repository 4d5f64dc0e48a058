"""The parameter-server backend: MXNet's own distribution (kvstore dist_sync, dist_device_sync, dist_async), as
AWS's MXNet toolkit ran it for SDK v2's distribution={'parameter_server': {'enabled': True}}. Where the job's
roles run, as each host's processes, and the DMLC_* rules (placement.py); each host's run (ps_run.py) over its
own processes (process_group.py), watched and judged (roles.py), no mpirun and no ssh."""

from __future__ import annotations

from collections.abc import Mapping

from sagemaker_mxnet_horovod.act.rank_program import rank_environment
from sagemaker_mxnet_horovod.backends.parameter_server import placement
from sagemaker_mxnet_horovod.core.outcome import Outcome
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.plan.backend import Backend, HostInputs, HostPlan


class ParameterServer(Backend):
    name = "parameter_server"
    label = "parameter server"
    process_names = ("worker", "workers")
    rules = placement.RULES

    def host_plan(self, inputs: HostInputs) -> HostPlan:
        return placement.host_plan(inputs)

    def run(self, plan: Plan, env: Mapping[str, str], paths: Paths, bind_address: str) -> Outcome:
        # Imported to run: planning (and `train --dry-run`) needs none of it.
        from sagemaker_mxnet_horovod.backends.parameter_server.ps_run import ParameterServerRun

        # This host's processes get the environment every rank gets (act/rank_program.py) directly: no file to apply.
        return ParameterServerRun(plan, rank_environment(plan, env), bind_address, paths.failure_file).run()


BACKEND = ParameterServer()
