"""registry.py: the one place a backend is chosen, a lookup by the layout's distribution (each one the layout decides
has its backend), and a plan's name of it taken back to its unit; each backend's plan as the planner gets it: the
single process runs the program itself, through rank_env as every rank, with every job's environment rules and none
of MPI's."""

from typing import get_args

import pytest
from sagemaker_mxnet_horovod.backends import mpi, parameter_server, registry, single
from sagemaker_mxnet_horovod.plan.backend import HostInputs
from sagemaker_mxnet_horovod.plan.job_plan import RANK_ENTRY_MODULE
from sagemaker_mxnet_horovod.plan.layout import Distribution, plan_layout
from unit_helpers.plan_cases import config, plan
from unit_helpers.rule_cases import CPU2


@pytest.mark.parametrize("hosts,hps,chosen", [
    (("algo-1",), {}, single.BACKEND),
    (("algo-1", "algo-2"), {}, mpi.BACKEND),
    (("algo-1",), {"sagemaker_mpi_num_of_processes_per_host": "2"}, mpi.BACKEND),
    (("algo-1", "algo-2"), {"sagemaker_mpi_enabled": "false"}, single.BACKEND),
    (("algo-1", "algo-2"), {"sagemaker_parameter_server_enabled": "true"}, parameter_server.BACKEND),
    (("algo-1",), {"sagemaker_parameter_server_enabled": "true"}, parameter_server.BACKEND),
    (("algo-1", "algo-2"), {"kvstore": "dist_sync"}, parameter_server.BACKEND),  # mnist's own kvstore argument
])
def test_the_layout_chooses_the_backend_and_the_plan_names_it(hosts, hps, chosen):
    cfg = config(hps, hosts=hosts)
    assert registry.choose(plan_layout(cfg, CPU2)) is chosen
    assert registry.BACKENDS[plan(cfg).backend] is chosen


def test_every_distribution_the_layout_decides_has_its_backend():
    assert set(get_args(Distribution)) == set(registry.BACKENDS)


def test_every_backend_is_registered_under_its_own_name():
    assert {name: backend.name for name, backend in registry.BACKENDS.items()} == {
        "mpi": "mpi", "parameter_server": "parameter_server", "single": "single"}


def test_the_single_backends_command_is_the_ranks_own():
    argv = ("python", "-m", RANK_ENTRY_MODULE, "/run/sc", "/opt/ml/code", "--", "python", "train.py")
    host = single.BACKEND.host_plan(HostInputs(None, {}, argv, "/run/sc", "python"))
    assert (host.command, host.processes, host.lines) == (argv, (), ())
    assert single.BACKEND.rules == ()


def test_a_one_host_job_plans_the_single_backend():
    p = plan(config(hosts=("algo-1",)))
    assert p.role == "single" and p.backend == "single" and p.backend_summary == "1 process, no MPI"
    assert p.command[:3] == ("/opt/venv/bin/python", "-m", RANK_ENTRY_MODULE)
    assert p.command[-1].endswith("mnist.py")
    assert "OMP_NUM_THREADS" not in p.env and "NCCL_SOCKET_IFNAME" not in p.env  # MPI's rules only
