"""backends/single.py: a job of one process runs the program itself, through rank_env as every rank, with every
job's environment rules and none of MPI's."""

from plan_cases import config, plan
from sagemaker_mxnet_horovod.plan.backends import single
from sagemaker_mxnet_horovod.plan.job_plan import RANK_ENTRY_MODULE


def test_the_command_is_the_ranks_own():
    argv = ("python", "-m", RANK_ENTRY_MODULE, "/run/sc", "/opt/ml/code", "--", "python", "train.py")
    assert single.command(argv) == argv
    assert single.RULES == ()


def test_a_one_host_job_plans_the_single_backend():
    p = plan(config(hosts=("algo-1",)))
    assert p.role == "single" and not p.use_mpi
    assert p.command[:3] == ("/opt/venv/bin/python", "-m", RANK_ENTRY_MODULE)
    assert p.command[-1].endswith("mnist.py")
    assert "OMP_NUM_THREADS" not in p.env and "NCCL_SOCKET_IFNAME" not in p.env  # MPI's rules only
