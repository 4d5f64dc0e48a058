"""placement.py: every host's own processes as data (scheduler on the first host, the servers in
turn over the hosts, the workers numbered host by host) and the DMLC_* variables of parameter-server jobs."""

import pytest
from sagemaker_mxnet_horovod.backends.parameter_server.placement import (
    RULES,
    describe_roles,
    local_processes,
    node_interface,
    omp_threads_per_worker,
    ps_verbose,
    role_counts,
    scheduler_address,
    server_count,
    server_hosts,
)
from sagemaker_mxnet_horovod.plan.env_rules import apply_rules
from unit_helpers.rule_cases import CPU2, CPU16, GPU8, job, settings, two_hosts

RANK_ARGV = ("python", "-m", "sagemaker_mxnet_horovod.act.rank_program", "/run/sc", "/opt/ml/code", "--", "python", "p.py")
ROLE_ARGV = ("python", "-c", "import mxnet")
PS = {"sagemaker_parameter_server_enabled": "true"}


def test_servers_alternate_over_the_hosts_from_the_first():
    hosts = ("algo-1", "algo-2", "algo-3")
    assert server_hosts(hosts, 1) == ("algo-1",)
    assert server_hosts(hosts, 3) == hosts
    assert server_hosts(hosts, 5) == (*hosts, "algo-1", "algo-2")


def test_one_server_per_host_unless_asked():
    layout = two_hosts(**PS).layout
    assert server_count(layout, None) == 2 and server_count(layout, 1) == 1


def test_the_first_host_runs_scheduler_its_server_and_its_worker():
    processes = local_processes(two_hosts(**PS).layout, 2, "python", RANK_ARGV, "/opt/ml/code")
    assert [(p.name, p.role) for p in processes] == [("scheduler", "scheduler"), ("server 0", "server"),
                                                     ("worker 0", "worker")]
    assert processes[0].argv == processes[1].argv == ROLE_ARGV  # `import mxnet` runs the role (AWS's command)
    assert dict(processes[0].env) == {"DMLC_ROLE": "scheduler"} and dict(processes[1].env) == {"DMLC_ROLE": "server"}
    assert processes[2].argv == RANK_ARGV  # the program, through rank_program as every rank
    assert {p.cwd for p in processes} == {"/opt/ml/code"}  # a server can unpickle the code's own optimizer
    assert dict(processes[2].env) == {"DMLC_ROLE": "worker", "SMMH_WORKER_RANK": "0", "SMMH_LOCAL_WORKER_RANK": "0",
                                      "SMMH_LOCAL_WORKERS": "1"}


def test_another_host_runs_its_servers_and_workers_numbered_host_by_host():
    layout = job(hosts=("algo-1", "algo-2", "algo-3"), sagemaker_mpi_num_of_processes_per_host="2", **PS).layout
    layout = type(layout)(**{**layout.__dict__, "current_host": "algo-2"})
    processes = local_processes(layout, 4, "python", RANK_ARGV, "/opt/ml/code")
    assert [p.name for p in processes] == ["server 1", "worker 2", "worker 3"]
    assert [p.env["SMMH_LOCAL_WORKER_RANK"] for p in processes[1:]] == ["0", "1"]
    assert {p.env["SMMH_LOCAL_WORKERS"] for p in processes[1:]} == {"2"}


def test_a_host_without_a_server():
    layout = two_hosts(**PS).layout
    layout = type(layout)(**{**layout.__dict__, "current_host": "algo-2"})
    assert [p.name for p in local_processes(layout, 1, "python", RANK_ARGV, "/opt/ml/code")] == ["worker 1"]


def test_describe_roles():
    layout = job(hosts=("algo-1", "algo-2"), sagemaker_mpi_num_of_processes_per_host="2", **PS).layout
    assert describe_roles(layout, 3) == ("parameter server: scheduler on algo-1; 3 servers (algo-1: 2, algo-2: 1); "
                                         "4 workers (2 per host)")
    assert describe_roles(job(**PS).layout, 1) == ("parameter server: scheduler on algo-1; 1 server (algo-1: 1); "
                                                   "1 worker (1 per host)")


def test_scheduler_address_by_name_port_and_bound_to_every_address():
    effects = scheduler_address(two_hosts(**PS))
    assert settings(effects) == {"DMLC_PS_ROOT_URI": "algo-1", "DMLC_PS_ROOT_PORT": "8000", "DMLC_USE_KUBERNETES": "1"}
    assert not any(effect.user_wins for effect in effects)  # the layout's, not the container's to change
    assert settings(scheduler_address(two_hosts(_ps_port="9100", **PS)))["DMLC_PS_ROOT_PORT"] == "9100"


def test_role_counts():
    assert settings(role_counts(two_hosts(**PS))) == {"DMLC_NUM_SERVER": "2", "DMLC_NUM_WORKER": "2"}
    counts = role_counts(job(hosts=("algo-1", "algo-2", "algo-3"), sagemaker_mpi_num_of_processes_per_host="2",
                             sagemaker_parameter_server_num_servers="1", **PS))
    assert settings(counts) == {"DMLC_NUM_SERVER": "1", "DMLC_NUM_WORKER": "6"}
    assert [effect.why for effect in counts] == ["sagemaker_parameter_server_num_servers", "2 per host x 3 host(s)"]


def test_interface_verbosity_and_threads():
    assert settings(node_interface(two_hosts(**PS))) == {"DMLC_INTERFACE": "eth0"}
    assert ps_verbose(two_hosts(**PS)) == []
    assert settings(ps_verbose(two_hosts(_ps_verbose="2", **PS))) == {"PS_VERBOSE": "2"}
    assert omp_threads_per_worker(two_hosts(**PS)) == []  # one worker: MXNet's own choice
    assert settings(omp_threads_per_worker(job(facts=CPU16, sagemaker_mpi_num_of_processes_per_host="4", **PS))) == {
        "OMP_NUM_THREADS": "4"}


@pytest.mark.parametrize(("instance_type", "per_host", "threads", "why"), [
    ("local", "1", "1", "2 cores / (1 workers per host x 2 hosts on this machine)"),
    ("local_cpu", "2", "1", "2 cores / (2 workers per host x 2 hosts on this machine)"),
    ("ml.c5.xlarge", "2", "1", "2 cores / 2 workers per host"),
])
def test_workers_split_the_cores_of_hosts_that_share_a_machine(instance_type, per_host, threads, why):
    effects = omp_threads_per_worker(two_hosts(instance_type=instance_type, sagemaker_mpi_num_of_processes_per_host=per_host,
                                               **PS))
    assert settings(effects) == {"OMP_NUM_THREADS": threads} and [effect.why for effect in effects] == [why]


def test_a_worker_alone_on_its_own_instance_keeps_mxnets_choice():
    assert omp_threads_per_worker(two_hosts(facts=CPU16, instance_type="ml.c5.4xlarge", **PS)) == []
    assert settings(omp_threads_per_worker(two_hosts(facts=CPU16, instance_type="local", **PS))) == {
        "OMP_NUM_THREADS": "8"}


@pytest.mark.parametrize("facts", [CPU2, GPU8])
def test_the_container_cannot_override_the_layout_but_can_the_interface(facts):
    env, notes = apply_rules(RULES, two_hosts(facts=facts, env={"DMLC_NUM_WORKER": "7", "DMLC_INTERFACE": "eth1"},
                                              **PS))
    assert env["DMLC_NUM_WORKER"] == "2" and "DMLC_INTERFACE" not in env
    assert "DMLC_INTERFACE=eth1 (set by you; default would be eth0: servers and workers announce" in " ".join(notes)
