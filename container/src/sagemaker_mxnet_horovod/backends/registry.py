"""The one place a backend is chosen: the layout's distribution (the job runs over MPI, over MXNet's parameter
servers, or neither: plan/layout.py decides it, with its reasons) names the unit that plans this host's part and
runs it, and a plan's backend name takes it back to that unit. A new backend is a folder beside these and a line
in BACKENDS."""

from __future__ import annotations

from collections.abc import Mapping

from sagemaker_mxnet_horovod.backends import parameter_server, single
from sagemaker_mxnet_horovod.backends.mpi import backend as mpi  # its package imports nothing: every rank imports it
from sagemaker_mxnet_horovod.core.outcome import Outcome
from sagemaker_mxnet_horovod.core.plan import Plan
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.training_config import TrainingConfig
from sagemaker_mxnet_horovod.plan.backend import Backend
from sagemaker_mxnet_horovod.plan.job_plan import make_plan
from sagemaker_mxnet_horovod.plan.layout import Layout, plan_layout

BACKENDS: Mapping[str, Backend] = {unit.name: unit for unit in (
    mpi.BACKEND,
    parameter_server.BACKEND,
    single.BACKEND,
)}


def choose(layout: Layout) -> Backend:
    """The backend the layout's distribution names."""
    return BACKENDS[layout.distribution]


def plan_job(config: TrainingConfig, facts: HostFacts, base_env: Mapping[str, str], **options) -> Plan:
    """This host's plan (job_plan.make_plan's options), by the backend its layout asks for."""
    layout = plan_layout(config, facts)
    return make_plan(config, facts, base_env, layout, choose(layout), **options)


def run(plan: Plan, env: Mapping[str, str], paths: Paths, bind_address: str) -> Outcome:
    """This host's run of the plan, by its backend (Backend.run)."""
    return BACKENDS[plan.backend].run(plan, env, paths, bind_address)
