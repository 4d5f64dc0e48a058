"""job_plan.make_plan for a parameter-server job (a topic of test_job_plan.py): the master runs the scheduler, its
servers and workers without mpirun; every host's processes split its cores."""


import pytest
from sagemaker_mxnet_horovod.core.exits import PlanError
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.plan.job_plan import describe
from unit_helpers.job_plan_cases import ENTRYPOINTS, config, plan

# --- the parameter server ----------------------------------------------------------------------------------

PS = {"sagemaker_parameter_server_enabled": "true"}


def test_parameter_server_master_runs_its_processes_no_mpirun():
    p = plan(config(hosts=("algo-1", "algo-2"), hps={**PS, "epochs": "2"}))
    assert (p.backend, p.role, p.command) == ("parameter_server", "master", ())
    assert p.workers == ("algo-2",)  # the hosts that check in
    assert [process.name for process in p.processes] == ["scheduler", "server 0", "worker 0"]
    worker = p.processes[-1]
    assert worker.argv[-4:] == ("/opt/venv/bin/python", f"{ENTRYPOINTS}/mnist.py", "--epochs", "2")
    assert worker.argv[:3] == ("/opt/venv/bin/python", "-m", "sagemaker_mxnet_horovod.act.rank_program")
    assert {k: p.env[k] for k in ("DMLC_PS_ROOT_URI", "DMLC_NUM_SERVER", "DMLC_NUM_WORKER")} == {
        "DMLC_PS_ROOT_URI": "algo-1", "DMLC_NUM_SERVER": "2", "DMLC_NUM_WORKER": "2"}
    assert "NCCL_SOCKET_IFNAME" not in p.env  # MPI's rules are MPI's


def test_parameter_server_workers_split_the_cores_of_their_machine():
    # Every process of the host gets the plan's environment; the workers are what computes. 16 cores: 2 workers per host
    # on instances of their own get 8 threads each; in SDK local mode the 2 hosts share the machine's 16: 4 each.
    cpu16 = HostFacts(cpu_count=16, interfaces=("eth0",), default_route_interface="eth0", hostname="c0ffee")
    hosts, two_workers = ("algo-1", "algo-2"), {**PS, "sagemaker_mpi_num_of_processes_per_host": "2"}
    own = plan(config(hosts=hosts, hps=two_workers, instance_type="ml.c5.4xlarge"), facts=cpu16)
    assert own.env["OMP_NUM_THREADS"] == "8"
    local = plan(config(hosts=hosts, hps=two_workers, instance_type="local"), facts=cpu16)
    assert local.env["OMP_NUM_THREADS"] == "4"
    assert "OMP_NUM_THREADS=4 (16 cores / (2 workers per host x 2 hosts on this machine))" in describe(local, {})
    alone = plan(config(hosts=hosts, hps=PS, instance_type="ml.c5.4xlarge"), facts=cpu16)
    assert "OMP_NUM_THREADS" not in alone.env  # one worker alone on its instance: MXNet's own choice, as AWS's toolkit


def test_parameter_server_worker_host():
    p = plan(config(hosts=("algo-1", "algo-2"), current="algo-2", hps=PS))
    assert (p.role, p.command, [process.name for process in p.processes]) == ("worker", (), ["server 1", "worker 1"])
    assert p.rank_env["SM_CURRENT_HOST"] == "algo-2"


def test_a_builtin_programs_dist_kvstore_is_a_parameter_server_job():
    p = plan(config(hosts=("algo-1", "algo-2"), hps={"kvstore": "dist_sync"}))
    assert p.backend == "parameter_server" and "--kvstore" in p.processes[-1].argv
    assert "kvstore=dist_sync: MXNet's parameter servers, as with sagemaker_parameter_server_enabled=true" in p.notes
    servers = plan(config(hosts=("algo-1", "algo-2"), hps={"kvstore": "dist_sync",
                                                           "sagemaker_parameter_server_num_servers": "4"}))
    assert servers.env["DMLC_NUM_SERVER"] == "4" and [p.name for p in servers.processes][:3] == [
        "scheduler", "server 0", "server 2"]
    single = plan(config(hps={"kvstore": "local"}))
    assert single.backend == "single" and "kvstore=local: one process over all devices" in " ".join(single.notes)
    with pytest.raises(PlanError, match="kvstore=device runs one process on one host; this job has 2 hosts "
                                        r"\(use another kvstore, or instance_count=1\)"):
        plan(config(hosts=("algo-1", "algo-2"), hps={"kvstore": "device"}))


def test_describe_a_parameter_server_host():
    hps = {**PS, "sagemaker_mpi_num_of_processes_per_host": "2"}
    text = describe(plan(config(hosts=("algo-1", "algo-2"), hps=hps)), {"PATH": "/usr/bin"})
    lines = text.splitlines()
    assert lines[2] == "hosts: algo-1:2, algo-2:2  (4 workers, parameter server)"
    assert "parameter server: scheduler on algo-1; 2 servers (algo-1: 1, algo-2: 1); 4 workers (2 per host)" in lines
    assert "process scheduler: DMLC_ROLE=scheduler /opt/venv/bin/python -c 'import mxnet'" in lines
    assert any(line.startswith("process worker 1: DMLC_ROLE=worker SMMH_WORKER_RANK=1 SMMH_LOCAL_WORKER_RANK=1 "
                               "SMMH_LOCAL_WORKERS=2 /opt/venv/bin/python -m sagemaker_mxnet_horovod.act.rank_program")
               for line in lines)
    assert not any(line.startswith("command:") for line in lines)
    assert ("process logs: /opt/ml/output/data/logs/<host>-rank-<worker>.log (a server's, the scheduler's: "
            "<host>-server-<n>.log, <host>-scheduler.log); console: every rank") in lines
    assert "DMLC_PS_ROOT_URI=algo-1" in next(line for line in lines if line.startswith("env: "))
