"""layout: which hosts, how many processes each, MPI or not, which interface; every rule's branches."""

import json
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest
from sagemaker_mxnet_horovod.core.exits import ConfigError, PlanError
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.parse.launch_rules import LaunchRules, parameter_server_request, single_process_request
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.training_config import parse_training_config
from sagemaker_mxnet_horovod.plan.layout import (
    choose_interface,
    instance_group_notes,
    mpi_or_not,
    outside_distribution_reason,
    plan_layout,
    processes_per_host,
    program_single_process,
)
from unit_helpers import unit_paths

PATHS = Paths(Path("/opt/ml"))
CPU2 = HostFacts(cpu_count=2, interfaces=("eth0",), default_route_interface="eth0")
GPU8 = HostFacts(cpu_count=64, gpu_count=8, interfaces=("eth0",), default_route_interface="eth0")
NO_RULES = LaunchRules()
SWITCH = LaunchRules(single_process_when_false=MappingProxyType({"horovod": "one process over all devices"}))

ENTRYPOINTS = str(unit_paths.ENTRYPOINTS)  # the built-in programs and their launch rules


def config(hosts=("algo-1",), current="algo-1", interface="eth0", **hps):
    resource = {"current_host": current, "hosts": list(hosts), **({"network_interface_name": interface} if interface else {})}
    return parse_training_config(PATHS, resource, {"sagemaker_program": "mnist", **hps}, {}, {},
                                 entrypoints_dir=ENTRYPOINTS)


def groups_config(current, distribution=None, **hps):
    """Two instance groups: train (algo-1, algo-2) and data (algo-3)."""
    groups = (("train", ("algo-1", "algo-2")), ("data", ("algo-3",)))
    resource = {"current_host": current, "hosts": ["algo-1", "algo-2", "algo-3"], "network_interface_name": "eth0",
                "current_group_name": next(name for name, hosts in groups if current in hosts),
                "instance_groups": [{"instance_group_name": name, "instance_type": "ml.c5.xlarge", "hosts": list(hosts)}
                                    for name, hosts in groups]}
    if distribution is not None:
        hps["sagemaker_distribution_instance_groups"] = json.dumps(distribution)
    return parse_training_config(PATHS, resource, {"sagemaker_program": "mnist", **hps}, {}, {},
                                 entrypoints_dir=ENTRYPOINTS)


# --- the distribution hosts ---------------------------------------------------------------------------------

def test_outside_distribution_reason():
    assert outside_distribution_reason(config()) is None
    assert outside_distribution_reason(groups_config("algo-2", ["train"])) is None
    assert outside_distribution_reason(groups_config("algo-3", ["train"])) == (
        "outside the distribution: instance group 'data' is not in sagemaker_distribution_instance_groups "
        "['train']; runs the program on its own, one process (MPI runs on algo-1, algo-2, master algo-1)")


def test_instance_group_notes_only_when_several_groups_and_none_named():
    assert instance_group_notes(config()) == []
    assert instance_group_notes(groups_config("algo-1", ["train"])) == []
    assert instance_group_notes(groups_config("algo-3")) == [
        "sagemaker_distribution_instance_groups not set: MPI spans this host's instance group 'data' only (each "
        "group its own job, as the toolkit does with MPI enabled)"]


# --- the program's single-process rule ----------------------------------------------------------------------

def ruled(cfg, rules=SWITCH):
    """The config as parsing makes it for a program whose launch module declares `rules`."""
    return replace(cfg, launch=rules, single_process=single_process_request(rules, cfg.program_args),
                   parameter_server=parameter_server_request(rules, cfg.program_args))


@pytest.mark.parametrize("hps", [{}, {"horovod": "true"}, {"horovod": "1"}, {"other": "false"}])
def test_single_process_rule_does_not_apply(hps):
    assert program_single_process(ruled(config(**hps)), 2, 8, True) is None


def test_single_process_rule_needs_the_programs_launch_rules():
    assert program_single_process(ruled(config(horovod="false"), NO_RULES), 2, 8, True) is None


@pytest.mark.parametrize("value", ["false", "False", "0", "FALSE"])
def test_single_process_rule_applies_on_one_host(value):
    for per_host, mpi_enabled in ((None, None), (1, None), (None, False), (1, False)):
        note = program_single_process(ruled(config(horovod=value)), 1, per_host, mpi_enabled)
        assert note == "horovod=false: one process over all devices, no MPI"


def test_single_process_rule_refuses_more():
    with pytest.raises(PlanError, match=r"^horovod=false runs one process on one host; this job has 2 hosts "
                                        r"\(use horovod=true, or instance_count=1\)$"):
        program_single_process(ruled(config(horovod="false")), 2, None, None)
    for per_host, mpi_enabled in ((2, None), (None, True), (1, True)):
        with pytest.raises(PlanError, match="^horovod=false runs one process without MPI: remove sagemaker_mpi_enabled "
                                            "and sagemaker_mpi_num_of_processes_per_host$"):
            program_single_process(ruled(config(horovod="false")), 1, per_host, mpi_enabled)
    with pytest.raises(ConfigError, match=r"hyperparameter horovod='maybe' is not a boolean \(use true/false or 1/0\)"):
        program_single_process(ruled(config(horovod="maybe")), 1, None, None)


# --- processes per host -------------------------------------------------------------------------------------

@pytest.mark.parametrize("requested,facts,expected", [
    (None, CPU2, 1),  # one per CPU host
    (None, GPU8, 8),  # one per GPU
    (2, CPU2, 2), (1, GPU8, 1), (8, GPU8, 8),
])
def test_processes_per_host(requested, facts, expected):
    assert processes_per_host(requested, facts, "algo-1") == (expected, [])


def test_more_processes_than_gpus_is_an_error():
    with pytest.raises(PlanError, match=r"^sagemaker_mpi_num_of_processes_per_host=9 but algo-2 has 8 GPU\(s\): "
                                        "more processes than slots$"):
        processes_per_host(9, GPU8, "algo-2")


def test_more_processes_than_cores_share_them_with_a_note():
    assert processes_per_host(3, CPU2, "algo-1") == (3, [
        "sagemaker_mpi_num_of_processes_per_host=3 on 2 CPU core(s): the ranks share the cores (oversubscribed)"])
    assert processes_per_host(8, HostFacts(cpu_count=4, gpu_count=8), "algo-1") == (8, [])  # GPUs are the slots


# --- MPI or not ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mpi_enabled,per_host,host_count,over_mpi,noted", [
    (None, 1, 1, False, False),  # one process: no MPI
    (None, 2, 1, True, False),
    (None, 1, 2, True, False),
    (True, 1, 1, True, False),  # asked for
    (False, 1, 1, False, False),
    (False, 1, 2, False, True),  # each host alone, and the log says so
])
def test_mpi_or_not(mpi_enabled, per_host, host_count, over_mpi, noted):
    decided, notes = mpi_or_not(mpi_enabled, per_host, host_count)
    assert decided == over_mpi
    assert notes == ([f"MPI disabled: each of the {host_count} hosts runs the program on its own"] if noted else [])


def test_mpi_disabled_with_many_processes_is_an_error():
    with pytest.raises(PlanError, match="^sagemaker_mpi_enabled=false cannot run 2 processes per host; enable MPI "
                                        "or set sagemaker_mpi_num_of_processes_per_host=1$"):
        mpi_or_not(False, 2, 1)


# --- the interface ------------------------------------------------------------------------------------------

def test_choose_interface():
    facts = HostFacts(cpu_count=1, interfaces=("eth0", "eth1"), default_route_interface="eth1")
    assert choose_interface("eth0", facts) == ("eth0", None)
    assert choose_interface(None, facts) == ("eth1", None)
    assert choose_interface("ethwe", facts) == ("eth1", "network_interface_name 'ethwe' does not exist here; using 'eth1'")
    assert choose_interface("x", HostFacts(cpu_count=1, interfaces=("ens5",)))[0] == "ens5"
    note = "network_interface_name 'x' does not exist here; using None"
    assert choose_interface("x", HostFacts(cpu_count=1)) == (None, note)


# --- plan_layout: the rules in order ------------------------------------------------------------------------

def test_layout_of_a_single_process():
    layout = plan_layout(config(), CPU2)
    assert (layout.role, layout.hosts, layout.master_host, layout.processes_per_host) == ("single", ("algo-1",),
                                                                                        "algo-1", 1)
    assert (layout.distribution, layout.total_processes, layout.rank_hosts, layout.notes) == ("single", 1, ("algo-1",), ())


def test_layout_of_master_and_worker():
    hosts = ("algo-1", "algo-2")
    master = plan_layout(config(hosts, sagemaker_mpi_num_of_processes_per_host="2"), CPU2)
    assert master.role == "master" and master.distribution == "mpi" and master.total_processes == 4
    assert master.rank_hosts == ("algo-1", "algo-1", "algo-2", "algo-2") and master.interface == "eth0"
    worker = plan_layout(config(hosts, current="algo-2"), GPU8)
    assert worker.role == "worker" and worker.master_host == "algo-1" and worker.hosts == hosts
    assert worker.processes_per_host == 8


def test_layout_without_mpi_on_several_hosts_is_this_host_alone():
    layout = plan_layout(config(("algo-1", "algo-2"), current="algo-2", sagemaker_mpi_enabled="false"), CPU2)
    assert (layout.role, layout.hosts, layout.master_host) == ("single", ("algo-2",), "algo-2")
    assert layout.notes == ("MPI disabled: each of the 2 hosts runs the program on its own",)


def test_layout_outside_the_distribution_is_one_process_whatever_was_asked():
    layout = plan_layout(ruled(groups_config("algo-3", ["train"], sagemaker_mpi_num_of_processes_per_host="8",
                                       sagemaker_mpi_enabled="true", horovod="false")), CPU2)
    assert (layout.role, layout.hosts, layout.processes_per_host) == ("single", ("algo-3",), 1)
    assert layout.outside_reason.startswith("outside the distribution: instance group 'data'")
    assert layout.notes == ("horovod=false: one process over all devices, no MPI",)  # no oversubscription note


def test_layout_single_process_rule_counts_the_distribution_hosts():
    with pytest.raises(PlanError, match="this job has 2 hosts"):
        plan_layout(ruled(groups_config("algo-1", ["train"], horovod="false")), GPU8)
    layout = plan_layout(ruled(groups_config("algo-3", ["data"], horovod="false")), GPU8)
    assert (layout.role, layout.processes_per_host, layout.outside_reason) == ("single", 1, "")


def test_layout_notes_in_rule_order():
    layout = plan_layout(groups_config("algo-3", sagemaker_mpi_num_of_processes_per_host="3"),
                         HostFacts(cpu_count=2, interfaces=("eth1",)))
    assert [note.split(" ")[0] for note in layout.notes] == [
        "sagemaker_distribution_instance_groups", "sagemaker_mpi_num_of_processes_per_host=3", "network_interface_name"]


def test_no_interface_for_a_multi_host_mpi_job_is_an_error():
    with pytest.raises(PlanError, match=r"^no network interface found for a multi-host job \(no default route, "
                                        r"no interface\)$"):
        plan_layout(config(("algo-1", "algo-2"), interface=None), HostFacts(cpu_count=2))
    # One host, or no MPI: no interface needed.
    assert plan_layout(config(interface=None, sagemaker_mpi_num_of_processes_per_host="2"),
                       HostFacts(cpu_count=2)).interface is None
    assert plan_layout(config(("algo-1", "algo-2"), interface=None, sagemaker_mpi_enabled="false"),
                       HostFacts(cpu_count=2)).distribution == "single"


# --- the parameter server ----------------------------------------------------------------------------------

def test_layout_of_a_parameter_server_job():
    hosts = ("algo-1", "algo-2")
    master = plan_layout(config(hosts, sagemaker_parameter_server_enabled="true"), GPU8)
    # One worker per host, over all of its GPUs, as AWS's toolkit ran it; the first host coordinates.
    assert (master.distribution, master.role, master.processes_per_host) == ("parameter_server", "master", 1)
    worker = plan_layout(config(hosts, current="algo-2", sagemaker_parameter_server_enabled="true",
                                sagemaker_mpi_num_of_processes_per_host="2"), CPU2)
    assert (worker.distribution, worker.role, worker.hosts, worker.master_host) == ("parameter_server", "worker",
                                                                                    hosts, "algo-1")
    assert worker.processes_per_host == 2 and worker.notes == ()  # no "MPI disabled" note: it is not MPI
    one_host = plan_layout(config(sagemaker_parameter_server_enabled="true"), CPU2)
    assert (one_host.distribution, one_host.role) == ("parameter_server", "master")  # AWS ran it on one host too


def test_a_builtin_programs_kvstore_argument_decides_the_parameter_server():
    hosts = ("algo-1", "algo-2")
    rules = LaunchRules(parameter_server_when=MappingProxyType({"kvstore": ("dist_sync", "dist_async")}))
    layout = plan_layout(ruled(config(hosts, kvstore="dist_sync"), rules), CPU2)
    assert layout.distribution == "parameter_server"
    assert layout.notes == (
        "kvstore=dist_sync: MXNet's parameter servers, as with sagemaker_parameter_server_enabled=true",)
    assert plan_layout(ruled(config(hosts, kvstore="horovod"), rules), CPU2).distribution == "mpi"
    assert plan_layout(ruled(config(hosts, kvstore="dist_async", sagemaker_parameter_server_enabled="true"), rules),
                       CPU2).notes == ()
    with pytest.raises(PlanError, match=r"^sagemaker_parameter_server_enabled=true, but kvstore=horovod: the parameter "
                                        r"servers serve a kvstore dist_sync, dist_async \(remove kvstore"):
        plan_layout(ruled(config(hosts, kvstore="horovod", sagemaker_parameter_server_enabled="true"), rules), CPU2)
    with pytest.raises(PlanError, match="^kvstore=dist_sync trains with MXNet's parameter servers, "
                                        "sagemaker_mpi_enabled=true with Horovod over MPI: remove one of them$"):
        plan_layout(ruled(config(hosts, kvstore="dist_sync", sagemaker_mpi_enabled="true"), rules), CPU2)


def test_a_single_process_argument_refuses_the_parameter_server():
    with pytest.raises(PlanError, match="^horovod=false runs one process without parameter servers: remove "
                                        "sagemaker_parameter_server_enabled$"):
        plan_layout(ruled(config(horovod="false", sagemaker_parameter_server_enabled="true")), CPU2)


def test_the_parameter_server_outside_the_distribution_groups_is_one_process_alone():
    layout = plan_layout(groups_config("algo-3", ["train"], sagemaker_parameter_server_enabled="true"), CPU2)
    assert (layout.distributed, layout.role, layout.hosts) == (False, "single", ("algo-3",))


def test_no_interface_for_a_multi_host_parameter_server_job_is_an_error():
    with pytest.raises(PlanError, match="^no network interface found for a multi-host job"):
        plan_layout(config(("algo-1", "algo-2"), interface=None, sagemaker_parameter_server_enabled="true"),
                    HostFacts(cpu_count=2))


def test_a_parameter_server_knob_without_the_parameter_server_is_refused():
    with pytest.raises(PlanError, match="^sagemaker_parameter_server_num_servers is set but the job has no parameter "
                                        "server"):
        plan_layout(config(("algo-1", "algo-2"), sagemaker_parameter_server_num_servers="2"), CPU2)
    # A built-in program's kvstore=dist_sync is a parameter server: its servers may be counted.
    rules = LaunchRules(parameter_server_when=MappingProxyType({"kvstore": ("dist_sync",)}))
    layout = plan_layout(ruled(config(("algo-1", "algo-2"), kvstore="dist_sync",
                                      sagemaker_parameter_server_num_servers="4"), rules), CPU2)
    assert layout.distribution == "parameter_server"
