"""mpirun: the master's command as data: -mca parameters, exported variables, the user's options."""

import shlex

import pytest
from sagemaker_mxnet_horovod.mpirun import (
    build_mpirun_command,
    exported_names,
    mpi_params,
    mpirun_command,
    ssh_options,
    user_sets_mca,
    yields_when_idle,
)

RANK_ARGV = ("python", "-m", "sagemaker_mxnet_horovod.rank_env", "/run/sc", "/opt/ml/code", "--", "python", "p.py")
BASE = [("pml", "ob1"), ("btl", "^openib,ofi"), ("btl_vader_single_copy_mechanism", "none"),
        ("plm_rsh_no_tree_spawn", "1"), ("orte_abort_on_non_zero_status", "1")]


def mca(argv):
    return [(argv[i + 1], argv[i + 2]) for i, a in enumerate(argv) if a == "-mca"]


def command(hosts=("algo-1", "algo-2"), per_host=1, cpus=2, custom=(), base_env=None, env=None, interface="eth0"):
    return mpirun_command(hosts, "c0ffee", per_host, cpus, interface, "/run/sc", custom, base_env or {}, env or {},
                          RANK_ARGV)


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
    assert user_sets_mca("btl", ("-mca", "btl", "tcp,self"), {})
    assert user_sets_mca("btl", ("--mca", "btl", "tcp,self"), {})
    assert user_sets_mca("btl", (), {"OMPI_MCA_btl": "tcp,self"})
    assert not user_sets_mca("btl", ("-mca", "pml", "btl"), {})  # a value, not the name
    assert not user_sets_mca("btl", ("-x", "btl"), {"OMPI_MCA_pml": "ob1"})
    assert not user_sets_mca("btl", ("-mca",), {})


@pytest.mark.parametrize("cpus,per_host,yields", [(2, 1, True), (4, 1, True), (5, 1, False), (9, 2, True),
                                                  (10, 2, False), (64, 8, False), (1, 4, True)])
def test_yields_when_fewer_than_5_cores_per_rank(cpus, per_host, yields):
    assert yields_when_idle(cpus, per_host, (), {}) == yields
    assert not yields_when_idle(cpus, per_host, ("-mca", "mpi_yield_when_idle", "0"), {})
    assert not yields_when_idle(cpus, per_host, (), {"OMPI_MCA_mpi_yield_when_idle": "0"})


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
    assert argv.index("MSG=hello world") < argv.index("sagemaker_mxnet_horovod.rank_env")
    assert argv[-len(RANK_ARGV):] == list(RANK_ARGV)
    assert shlex.split(shlex.join(argv)) == argv
