"""mpirun.py: the master's mpirun command as data (-mca parameters, exported variables, the user's options)
and the environment rules of MPI jobs."""

import dataclasses
import shlex

import pytest
from sagemaker_mxnet_horovod.backends.mpi.mpirun import (
    build_mpirun_command,
    exported_names,
    mpi_params,
    mpi_yield_when_idle,
    mpirun_command,
    nccl_socket_interface,
    nccl_sockets_on_100g,
    omp_threads_per_rank,
    ssh_options,
    transport_shares_the_core,
    user_sets_mca,
    yields_when_idle,
)
from sagemaker_mxnet_horovod.backends.registry import plan_job
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.parse.mpi_options import parse_mpi_options
from sagemaker_mxnet_horovod.plan.env_rules import Setting, apply_rules
from unit_helpers.rule_cases import CPU2, CPU16, GPU8, job, settings, two_hosts

RANK_ARGV = ("python", "-m", "sagemaker_mxnet_horovod.backends.mpi.rank_env", "/run/sc", "/opt/ml/code", "--", "python", "p.py")
BASE = [("pml", "ob1"), ("btl", "^openib,ofi"), ("btl_vader_single_copy_mechanism", "none"),
        ("plm_rsh_no_tree_spawn", "1"), ("orte_abort_on_non_zero_status", "1")]


def mca(argv):
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == "-mca"]


def options(*tokens):
    """The user's options as given (sagemaker_mpi_custom_mpi_options), parsed as the settings parse them."""
    return parse_mpi_options("sagemaker_mpi_custom_mpi_options", shlex.join(tokens))


def command(hosts=("algo-1", "algo-2"), per_host=1, cores_per_rank=2, custom=(), base_env=None, env=None,
            interface="eth0"):
    return mpirun_command(hosts, "c0ffee", per_host, cores_per_rank, interface, "/run/sc", options(*custom),
                          base_env or {}, env or {}, RANK_ARGV)


def test_mpi_params_in_order():
    assert mpi_params(None, False, None) == BASE
    params = mpi_params("eth1", True, "/run/sc")
    assert params[:5] == BASE
    assert params[5:7] == [("btl_tcp_if_include", "eth1"), ("oob_tcp_if_include", "eth1")]
    assert params[7] == ("plm_rsh_args", " ".join(ssh_options("/run/sc")))
    assert params[8] == ("mpi_yield_when_idle", "1")


def test_ssh_options_pin_the_jobs_key_and_host_keys():
    options = " ".join(ssh_options("/run/sc"))
    for option in ("IdentityFile=/run/sc/id_ed25519", "UserKnownHostsFile=/run/sc/known_hosts",
                   "StrictHostKeyChecking=yes", "BatchMode=yes", "KexAlgorithms=curve25519-sha256,"):
        assert option in options


def test_user_sets_mca():
    assert user_sets_mca("btl", options("-mca", "btl", "tcp,self"), {})
    assert user_sets_mca("btl", options("--mca", "btl", "tcp,self"), {})
    assert user_sets_mca("btl", options(), {"OMPI_MCA_btl": "tcp,self"})
    assert not user_sets_mca("btl", options("-mca", "pml", "btl"), {})  # a value, not the name
    assert not user_sets_mca("btl", options("-x", "btl"), {"OMPI_MCA_pml": "ob1"})
    assert not user_sets_mca("btl", options("-mca"), {})


@pytest.mark.parametrize("cores_per_rank,yields", [(1, True), (2, True), (4, True), (5, False), (8, False)])
def test_yields_when_fewer_than_5_cores_per_rank(cores_per_rank, yields):
    assert yields_when_idle(cores_per_rank, options(), {}) == yields
    assert not yields_when_idle(cores_per_rank, options("-mca", "mpi_yield_when_idle", "0"), {})
    assert not yields_when_idle(cores_per_rank, options(), {"OMPI_MCA_mpi_yield_when_idle": "0"})


def test_exported_names():
    env = {"PATH": "/b", "LD_LIBRARY_PATH": "/l", "OMP_NUM_THREADS": "1", "SM_HOSTS": "[]", "MXNET_HOME": "/m",
           "HOROVOD_X": "1", "NCCL_DEBUG": "WARN", "FI_PROVIDER": "efa", "AWS_REGION": "r", "SMMH_X": "1",
           "TRAINING_JOB_NAME": "j", "HOME": "/root", "SECRET_THING": "s", "OMPI_MCA_btl": "tcp", "PATHS": "x"}
    assert exported_names(env) == sorted(set(env) - {"HOME", "SECRET_THING", "OMPI_MCA_btl", "PATHS"})


def test_build_mpirun_command_names_the_masters_slots_by_its_hostname():
    argv = build_mpirun_command(("algo-1", "algo-2"), "c0ffee", 2, [("pml", "ob1")], ["PATH"], ("-verbose",), RANK_ARGV)
    assert argv == ("mpirun", "--allow-run-as-root", "--tag-output", "--host", "c0ffee:2,algo-2:2", "-np", "4",
                    "-bind-to", "none", "-map-by", "slot", "-mca", "pml", "ob1", "-x", "PATH", "-verbose", *RANK_ARGV)


def test_mpirun_across_hosts_has_interface_and_ssh():
    params = dict(mca(command()))
    assert params["btl_tcp_if_include"] == params["oob_tcp_if_include"] == "eth0"
    assert "IdentityFile=/run/sc/id_ed25519" in params["plm_rsh_args"]
    assert params["mpi_yield_when_idle"] == "1"


def test_mpirun_on_one_host_needs_no_interface_or_ssh():
    params = dict(mca(command(hosts=("algo-1",), per_host=2)))
    assert not {"btl_tcp_if_include", "oob_tcp_if_include", "plm_rsh_args"} & set(params)


def test_a_parameter_the_user_set_replaces_ours():
    custom = ("-mca", "btl_tcp_if_include", "eth1", "-mca", "mpi_yield_when_idle", "0")
    argv = command(custom=custom)
    assert [(n, v) for n, v in mca(argv) if n in ("btl_tcp_if_include", "mpi_yield_when_idle")] == [
        ("btl_tcp_if_include", "eth1"), ("mpi_yield_when_idle", "0")]  # only the user's, where the user put them
    assert ("btl", "^openib,ofi") not in mca(command(base_env={"OMPI_MCA_btl": "tcp,self"}))


def test_exports_the_containers_and_the_plans_variables_and_custom_options_come_before_the_program():
    argv = list(command(custom=("-x", "MSG=hello world"), base_env={"PATH": "/b", "HOME": "/root"},
                        env={"OMP_NUM_THREADS": "1"}))
    assert {argv[i + 1] for i, a in enumerate(argv) if a == "-x"} == {"PATH", "OMP_NUM_THREADS", "MSG=hello world"}
    assert argv.index("MSG=hello world") < argv.index("sagemaker_mxnet_horovod.backends.mpi.rank_env")
    assert argv[-len(RANK_ARGV):] == list(RANK_ARGV)
    assert shlex.split(shlex.join(argv)) == argv


# --- MPI jobs' environment rules -----------------------------------------------------------------------------

@pytest.mark.parametrize("facts,per_host,threads", [
    (CPU2, "1", "2"), (CPU16, "4", "4"), (GPU8, "8", "8"),
    (CPU2, "3", "1"),  # never 0
])
@pytest.mark.parametrize("instance_type", ["ml.c5.xlarge", "ml.p3.16xlarge", None])
def test_omp_threads_per_rank_on_a_host_alone(facts, per_host, threads, instance_type):
    effects = omp_threads_per_rank(two_hosts(facts=facts, instance_type=instance_type,
                                             sagemaker_mpi_num_of_processes_per_host=per_host))
    assert effects == [Setting("OMP_NUM_THREADS", threads, f"{facts.cpu_count} cores / {per_host} ranks per host")]


LOCAL_HOSTS = {1: ("algo-1",), 2: ("algo-1", "algo-2"), 3: ("algo-1", "algo-2", "algo-3")}


@pytest.mark.parametrize("instance_type", ["local", "local_gpu"])
@pytest.mark.parametrize("facts,hosts,per_host,threads", [
    (CPU2, 2, "1", "1"),  # make demo: 2 hosts x 1 rank on 2 cores, one thread each (was 2)
    (CPU2, 3, "1", "1"),  # more ranks than cores: never 0
    (CPU2, 2, "2", "1"),
    (CPU16, 2, "1", "8"), (CPU16, 2, "2", "4"), (CPU16, 3, "1", "5"), (CPU16, 3, "2", "2"),
    (GPU8, 2, "8", "4"),
])
def test_omp_threads_per_rank_in_local_mode_split_the_cores_between_every_hosts_ranks(instance_type, facts, hosts,
                                                                                      per_host, threads):
    effects = omp_threads_per_rank(job(hosts=LOCAL_HOSTS[hosts], facts=facts, instance_type=instance_type,
                                       sagemaker_mpi_num_of_processes_per_host=per_host))
    assert effects == [Setting("OMP_NUM_THREADS", threads, f"{facts.cpu_count} cores / ({per_host} ranks per host x "
                                                           f"{hosts} hosts on this machine)")]


def test_omp_threads_for_one_local_mode_host_are_its_cores_per_rank():
    effects = omp_threads_per_rank(job(facts=CPU16, instance_type="local", sagemaker_mpi_num_of_processes_per_host="2"))
    assert effects == [Setting("OMP_NUM_THREADS", "8", "16 cores / 2 ranks per host")]


def test_a_users_omp_num_threads_wins_over_the_shared_count():
    env, notes = apply_rules((omp_threads_per_rank,), two_hosts(instance_type="local", env={"OMP_NUM_THREADS": "3"}))
    assert (env, notes) == ({}, ["OMP_NUM_THREADS=3 (set by you; default would be 1: 2 cores / (1 ranks per host x 2 "
                                 "hosts on this machine))"])


def test_a_single_process_has_none_of_mpis_rules():
    # MXNet's own default for its threads, every core; no yielding, no NCCL interface: the rules are MPI's only.
    for single in (job(facts=CPU16), job(facts=CPU16, instance_type="local")):
        planned = plan_job(single.config, single.facts, {})
        assert planned.backend == "single" and not {"OMP_NUM_THREADS", "NCCL_SOCKET_IFNAME"} & set(planned.env)
        assert not any("mpi_yield_when_idle" in note for note in planned.notes)


@pytest.mark.parametrize("facts,per_host,noted", [
    (CPU2, "1", "2"), (CPU16, "4", "4"), (CPU16, "2", None), (GPU8, "8", None),
    (HostFacts(cpu_count=9, interfaces=("eth0",)), "2", "4"),
])
def test_mpi_yield_when_idle_note(facts, per_host, noted):
    notes = mpi_yield_when_idle(two_hosts(facts=facts, sagemaker_mpi_num_of_processes_per_host=per_host))
    assert notes == ([f"mpi_yield_when_idle=1 ({noted} core(s) per rank: {facts.cpu_count} cores / {per_host} ranks "
                      "per host; busy polling would starve it)"] if noted else [])


@pytest.mark.parametrize("instance_type", ["local", "local_gpu"])
@pytest.mark.parametrize("facts,per_host,noted", [
    (CPU16, "2", "4"),  # 8 cores per rank alone, 4 with the other host's ranks: yields
    (GPU8, "8", "4"),
    (CPU16, "1", None),  # 8 cores per rank even shared
])
def test_mpi_yield_when_idle_counts_the_hosts_sharing_the_machine(instance_type, facts, per_host, noted):
    local_job = two_hosts(facts=facts, instance_type=instance_type, sagemaker_mpi_num_of_processes_per_host=per_host)
    assert mpi_yield_when_idle(local_job) == (
        [f"mpi_yield_when_idle=1 ({noted} core(s) per rank: {facts.cpu_count} cores / ({per_host} ranks per host x 2 "
         "hosts on this machine); busy polling would starve it)"] if noted else [])


@pytest.mark.parametrize("hosts,facts,per_host,instance_type,hinted", [
    (2, CPU2, "1", "ml.c5.large", False),  # 2 cores, 1 rank: 2 cores per rank
    (2, CPU2, "2", "ml.c5.large", True),  # 1 core per rank
    (2, CPU16, "16", "ml.c5.4xlarge", True),
    (2, CPU16, "8", "ml.c5.4xlarge", False),  # 2 cores per rank
    (2, CPU2, "1", "local", True),  # 2 cores / (1 rank x 2 hosts on this machine)
    (1, CPU2, "2", "ml.c5.large", False),  # one host: its ranks meet in shared memory, not over TCP
])
def test_one_core_per_rank_across_hosts_is_hinted(hosts, facts, per_host, instance_type, hinted):
    planned = job(hosts=tuple(f"algo-{n + 1}" for n in range(hosts)), facts=facts, instance_type=instance_type,
                  sagemaker_mpi_num_of_processes_per_host=per_host)
    notes = transport_shares_the_core(planned)
    assert bool(notes) == hinted
    assert all(note.startswith("1 core per rank across hosts") for note in notes)


@pytest.mark.parametrize("env,suggests_gloo", [
    ({}, True),
    ({"HOROVOD_CPU_OPERATIONS": "mpi"}, True),
    ({"HOROVOD_CPU_OPERATIONS": "gloo"}, False),  # already over Gloo: nothing to suggest
    ({"HOROVOD_CONTROLLER": "Gloo"}, False),
])
def test_the_hint_suggests_gloo_unless_the_job_uses_it(env, suggests_gloo):
    [note] = transport_shares_the_core(two_hosts(env=env, sagemaker_mpi_num_of_processes_per_host="2"))
    assert ("HOROVOD_CPU_OPERATIONS=gloo" in note) == suggests_gloo
    assert note.endswith("(docs/benchmarks/link-scaling.md#user-scripts)")


@pytest.mark.parametrize("instance_type,yields", [("local", True), ("ml.c5.4xlarge", False)])
def test_the_masters_mpirun_yields_by_the_same_count(instance_type, yields):
    facts = dataclasses.replace(CPU16, hostname="c0ffee")
    planned = plan_job(two_hosts(facts=facts, instance_type=instance_type,
                                  sagemaker_mpi_num_of_processes_per_host="2").config, facts, {})
    assert (("mpi_yield_when_idle", "1") in mca(planned.command)) == yields


def test_mpi_yield_when_idle_no_note_when_the_user_chose():
    assert mpi_yield_when_idle(two_hosts(env={"OMPI_MCA_mpi_yield_when_idle": "0"})) == []
    assert mpi_yield_when_idle(two_hosts(sagemaker_mpi_custom_mpi_options="--mca mpi_yield_when_idle 0")) == []


def test_nccl_socket_interface_follows_the_cluster_interface_under_mpi():
    assert nccl_socket_interface(two_hosts()) == [Setting("NCCL_SOCKET_IFNAME", "eth0", "the cluster interface")]
    assert nccl_socket_interface(job(facts=HostFacts(cpu_count=2), sagemaker_mpi_num_of_processes_per_host="2")) == []


@pytest.mark.parametrize("instance_type", ["ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.g5.48xlarge",
                                           "ml.g6.48xlarge", "ml.g6e.24xlarge", "ml.g6e.48xlarge"])
def test_nccl_sockets_on_100g_hosts(instance_type):
    effects = nccl_sockets_on_100g(two_hosts(facts=GPU8, instance_type=instance_type))
    assert settings(effects) == {"NCCL_SOCKET_NTHREADS": "4", "NCCL_NSOCKS_PERTHREAD": "8"}
    assert int(effects[0].value) * int(effects[1].value) <= 64  # NCCL's cap on threads x sockets
    assert instance_type in effects[0].why and "no EFA plugin" in effects[0].why
    single = job(facts=GPU8, instance_type=instance_type, sagemaker_mpi_enabled="false",
                 sagemaker_mpi_num_of_processes_per_host="1")
    assert not {"NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD"} & set(plan_job(single.config, single.facts, {}).env)


@pytest.mark.parametrize("instance_type", ["ml.p3.16xlarge", "ml.g5.12xlarge", "ml.g4dn.12xlarge", "ml.c5n.18xlarge",
                                           None])
def test_slower_links_keep_nccls_own_choice(instance_type):
    assert nccl_sockets_on_100g(two_hosts(facts=GPU8, instance_type=instance_type)) == []
