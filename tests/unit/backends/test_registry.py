"""registry.py: the one place a backend is chosen, a lookup by the layout's distribution (each one the layout decides
has its backend), and a plan's name of it taken back to its unit; each backend's plan as the planner gets it: the
single process runs the program itself, through rank_program as every rank, with every job's environment rules and none
of MPI's."""

from typing import get_args

import pytest
from sagemaker_mxnet_horovod.backends import parameter_server, registry, single
from sagemaker_mxnet_horovod.backends.mpi import backend as mpi
from sagemaker_mxnet_horovod.plan.backend import HostInputs
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


RANK_PROGRAM = "sagemaker_mxnet_horovod.act.rank_program"


def test_the_single_backends_command_is_the_ranks_own():
    argv = ("python", "-m", RANK_PROGRAM, "/run/sc", "/opt/ml/code", "--", "python", "train.py")
    host = single.BACKEND.host_plan(HostInputs(None, {}, argv, "/run/sc", "python"))
    assert (host.command, host.processes, host.lines) == (argv, (), ())
    assert single.BACKEND.rules == ()


def test_a_one_host_job_plans_the_single_backend():
    p = plan(config(hosts=("algo-1",)))
    assert p.role == "single" and p.backend == "single" and p.backend_summary == "1 process, no MPI"
    assert p.command[:3] == ("/opt/venv/bin/python", "-m", RANK_PROGRAM)
    assert p.command[-1].endswith("mnist.py")
    assert "OMP_NUM_THREADS" not in p.env and "NCCL_SOCKET_IFNAME" not in p.env  # MPI's rules only


def test_mpis_ranks_start_through_its_own_module_every_other_backends_through_the_rank_program():
    # MPI's ranks apply this host's environment and Gloo's numbers first (backends/mpi/rank_env.py), then run the
    # program as every other backend's ranks do.
    mpi_plan = plan(config(hosts=("algo-1", "algo-2")))
    rank_start = mpi_plan.command.index("--") - 4
    assert mpi_plan.command[rank_start:rank_start + 2] == ("-m", "sagemaker_mxnet_horovod.backends.mpi.rank_env")
    ps_plan = plan(config({"sagemaker_parameter_server_enabled": "true"}, hosts=("algo-1", "algo-2")))
    assert ps_plan.processes[-1].argv[1:3] == ("-m", RANK_PROGRAM)
    assert {backend.rank_module for backend in registry.BACKENDS.values() if backend is not mpi.BACKEND} == {
        RANK_PROGRAM}
