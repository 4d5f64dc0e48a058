"""gloo.py: when the job's environment asks for Horovod's Gloo, the MPI backend's rule sets both knobs, Gloo's
interface and the rendezvous the master serves, each with its reason; a contradiction is refused; the plan's Gloo
rendezvous (rendezvous: decided once, what the master serves and where, what every rank reads)."""

import dataclasses

import pytest
from sagemaker_mxnet_horovod.backends.mpi.gloo import (
    CONTROLLER,
    CPU_OPERATIONS,
    DEFAULT_RENDEZVOUS_PORT,
    asks,
    asks_for_gloo,
    horovod_gloo,
    rendezvous,
)
from sagemaker_mxnet_horovod.backends.registry import plan_job
from sagemaker_mxnet_horovod.core.exits import PlanError
from sagemaker_mxnet_horovod.core.plan import GlooRendezvous
from sagemaker_mxnet_horovod.plan.env_rules import apply_rules
from unit_helpers.plan_cases import config, plan
from unit_helpers.rule_cases import CPU2, job, settings, two_hosts

GLOO_NAMES = {"HOROVOD_CONTROLLER", "HOROVOD_CPU_OPERATIONS", "HOROVOD_GLOO_IFACE", "HOROVOD_GLOO_RENDEZVOUS_ADDR",
              "HOROVOD_GLOO_RENDEZVOUS_PORT"}


@pytest.mark.parametrize("env,asked", [
    ({}, False),
    ({"HOROVOD_CONTROLLER": "gloo"}, True),
    ({"HOROVOD_CPU_OPERATIONS": "gloo"}, True),
    ({"HOROVOD_CPU_OPERATIONS": "GLOO"}, True),  # Horovod reads the value without case
    ({"HOROVOD_CONTROLLER": "mpi", "HOROVOD_CPU_OPERATIONS": "mpi"}, False),
    ({"HOROVOD_GLOO_IFACE": "eth0"}, False),
])
def test_the_job_asks_for_gloo_by_either_knob(env, asked):
    assert asks(env) == asked
    assert bool(horovod_gloo(two_hosts(env=env))) == asked


@pytest.mark.parametrize("custom,asked", [
    ("-x HOROVOD_CPU_OPERATIONS=gloo", True),  # the ranks' own value, given by mpirun
    ("-x HOROVOD_CONTROLLER=GLOO --verbose", True),
    ("-x HOROVOD_CPU_OPERATIONS", False),  # the environment's value, which is not set
    ("-x HOROVOD_CPU_OPERATIONS=mpi", False),
])
def test_the_custom_mpi_options_ask_for_gloo_too(custom, asked):
    planned = two_hosts(sagemaker_mpi_custom_mpi_options=custom)
    assert bool(horovod_gloo(planned)) == asked


@pytest.mark.parametrize("asked_by", ["HOROVOD_CONTROLLER", "HOROVOD_CPU_OPERATIONS"])
def test_across_hosts_both_knobs_the_cluster_interface_and_the_masters_rendezvous(asked_by):
    env, notes = apply_rules((horovod_gloo,), two_hosts(env={asked_by: "gloo"}))
    expected = {"HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo", "HOROVOD_GLOO_IFACE": "eth0",
                "HOROVOD_GLOO_RENDEZVOUS_ADDR": "algo-1", "HOROVOD_GLOO_RENDEZVOUS_PORT": "7421"}
    del expected[asked_by]  # the user's own value stays, and the start log says so
    assert env == expected
    assert f"{asked_by}=gloo (set by you; default would be gloo: the job's environment asks for Horovod's Gloo; " \
           "under mpirun it works for both, with the rendezvous the launcher serves)" in notes
    assert "HOROVOD_GLOO_IFACE=eth0 (Gloo's transport on the cluster interface)" in notes
    assert "HOROVOD_GLOO_RENDEZVOUS_ADDR=algo-1 (the master serves Horovod's Gloo rendezvous)" in notes
    assert any(note.startswith("HOROVOD_GLOO_RENDEZVOUS_PORT=7421 (the rendezvous's port: fixed") for note in notes)
    assert any(note.startswith("Horovod's Gloo: mpirun starts the ranks") for note in notes)


def test_on_one_host_gloo_and_the_rendezvous_stay_on_loopback():
    one_host = job(env={"HOROVOD_CPU_OPERATIONS": "gloo"}, sagemaker_mpi_num_of_processes_per_host="2")
    assert settings(e for e in horovod_gloo(one_host) if not isinstance(e, str)) == {
        "HOROVOD_CONTROLLER": "gloo", "HOROVOD_CPU_OPERATIONS": "gloo", "HOROVOD_GLOO_IFACE": "lo",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "127.0.0.1", "HOROVOD_GLOO_RENDEZVOUS_PORT": str(DEFAULT_RENDEZVOUS_PORT)}
    assert rendezvous(one_host) == GlooRendezvous(DEFAULT_RENDEZVOUS_PORT, "127.0.0.1", size=2, local_size=2)


def test_across_hosts_the_master_serves_on_its_cluster_address():
    facts = dataclasses.replace(CPU2, interface_addresses=(("lo", "127.0.0.1"), ("eth0", "172.18.0.2")))
    across = two_hosts(facts=facts, env={"HOROVOD_CONTROLLER": "gloo"}, sagemaker_mpi_num_of_processes_per_host="2")
    assert rendezvous(across) == GlooRendezvous(DEFAULT_RENDEZVOUS_PORT, "172.18.0.2", size=4, local_size=2)
    assert rendezvous(two_hosts(env={"HOROVOD_CONTROLLER": "gloo"})).bind_address == ""  # no address: every one


def test_the_users_port_and_interface_win_but_not_the_address():
    env, _ = apply_rules((horovod_gloo,), two_hosts(env={
        "HOROVOD_CONTROLLER": "gloo", "HOROVOD_GLOO_RENDEZVOUS_PORT": "9000", "HOROVOD_GLOO_IFACE": "eth1",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.9"}))
    # The launcher serves the rendezvous on the master: another address would reach nobody.
    assert env == {"HOROVOD_CPU_OPERATIONS": "gloo", "HOROVOD_GLOO_RENDEZVOUS_ADDR": "algo-1"}


@pytest.mark.parametrize("port", ["0", "65536", "http", "-1"])
def test_a_users_port_that_is_no_port_is_refused(port):
    with pytest.raises(PlanError, match=f"HOROVOD_GLOO_RENDEZVOUS_PORT={port} in the job's environment: not a TCP"):
        horovod_gloo(two_hosts(env={"HOROVOD_CONTROLLER": "gloo", "HOROVOD_GLOO_RENDEZVOUS_PORT": port}))


@pytest.mark.parametrize("env,message", [
    ({"HOROVOD_CONTROLLER": "mpi", "HOROVOD_CPU_OPERATIONS": "gloo"},
     "HOROVOD_CPU_OPERATIONS=gloo but HOROVOD_CONTROLLER=mpi: under this image's mpirun, Horovod's Gloo works for "
     "both or neither (remove HOROVOD_CONTROLLER, or set it to gloo)"),
    ({"HOROVOD_CONTROLLER": "Gloo", "HOROVOD_CPU_OPERATIONS": "mpi"},
     "HOROVOD_CONTROLLER=Gloo but HOROVOD_CPU_OPERATIONS=mpi"),
])
def test_gloo_for_one_knob_and_not_the_other_is_refused(env, message):
    with pytest.raises(PlanError, match=message.replace("(", r"\(").replace(")", r"\)")):
        horovod_gloo(two_hosts(env=env))


def test_the_mpi_plan_gives_every_rank_the_settings_and_carries_the_rendezvous():
    base_env = {"PATH": "/usr/bin", "HOROVOD_CPU_OPERATIONS": "gloo"}
    planned = plan_job(two_hosts().config, CPU2, base_env)
    assert planned.backend == "mpi" and GLOO_NAMES - {"HOROVOD_CPU_OPERATIONS"} <= set(planned.env)
    assert planned.gloo_rendezvous == GlooRendezvous(7421, "", size=2, local_size=1)
    # mpirun exports them to the ranks on other hosts (HOROVOD_ prefix), and still places ranks by slot.
    command = list(planned.command)
    assert {"HOROVOD_CONTROLLER", "HOROVOD_GLOO_RENDEZVOUS_ADDR"} <= {command[i + 1] for i, a in enumerate(command)
                                                                      if a == "-x"}
    assert command[command.index("-map-by") + 1] == "slot"
    # A worker's plan has it too: its ranks read it from their host's file.
    worker = plan(config(current="algo-2"), env=base_env)
    assert worker.role == "worker" and worker.gloo_rendezvous == planned.gloo_rendezvous


def test_no_gloo_no_rendezvous():
    planned = plan_job(two_hosts().config, CPU2, {"PATH": "/usr/bin"})
    assert not GLOO_NAMES & set(planned.env) and planned.gloo_rendezvous is None
    # The user's port is the one served.
    users_port = plan_job(two_hosts().config, CPU2, {"HOROVOD_CONTROLLER": "GLOO", "HOROVOD_GLOO_RENDEZVOUS_PORT": "9000"})
    assert users_port.gloo_rendezvous.port == 9000 and users_port.env.get("HOROVOD_GLOO_RENDEZVOUS_PORT") is None


def test_a_single_process_job_is_left_to_horovod():
    # One process, no mpirun: Horovod's Gloo runs alone without a rendezvous; the rule is the MPI backend's only.
    planned = plan_job(job().config, CPU2, {"HOROVOD_CONTROLLER": "gloo"})
    assert planned.backend == "single" and not GLOO_NAMES & set(planned.env) and planned.gloo_rendezvous is None


@pytest.mark.parametrize("value,asks", [("gloo", True), ("GLOO", True), ("Gloo", True), ("mpi", False), ("", False)])
def test_gloo_in_any_case(value, asks):
    assert asks_for_gloo({CONTROLLER: value}, CONTROLLER) == asks
    assert asks_for_gloo({CPU_OPERATIONS: value}, CONTROLLER) is False
