"""gloo.py: when the job's environment asks for Horovod's Gloo, the MPI backend's rule sets both knobs, Gloo's
interface and the rendezvous the master serves, each with its reason; a contradiction is refused; the master's
decision to serve (rendezvous_port) and where it listens."""

import pytest
from sagemaker_mxnet_horovod.backends.mpi.gloo import (
    DEFAULT_RENDEZVOUS_PORT,
    asks,
    horovod_gloo,
    rendezvous_bind_address,
    rendezvous_port,
)
from sagemaker_mxnet_horovod.backends.registry import plan_job
from sagemaker_mxnet_horovod.core.exits import PlanError
from sagemaker_mxnet_horovod.plan.env_rules import apply_rules
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
    assert rendezvous_bind_address(1, "172.18.0.2") == "127.0.0.1"
    assert rendezvous_bind_address(2, "172.18.0.2") == "172.18.0.2"


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


def test_the_mpi_plan_gives_every_rank_the_settings_and_the_master_serves_their_port():
    base_env = {"PATH": "/usr/bin", "HOROVOD_CPU_OPERATIONS": "gloo"}
    planned = plan_job(two_hosts().config, CPU2, base_env)
    assert planned.backend == "mpi" and GLOO_NAMES - {"HOROVOD_CPU_OPERATIONS"} <= set(planned.env)
    assert rendezvous_port({**base_env, **planned.env}) == 7421
    # mpirun exports them to the ranks on other hosts (HOROVOD_ prefix), and still places ranks by slot.
    command = list(planned.command)
    assert {"HOROVOD_CONTROLLER", "HOROVOD_GLOO_RENDEZVOUS_ADDR"} <= {command[i + 1] for i, a in enumerate(command)
                                                                      if a == "-x"}
    assert command[command.index("-map-by") + 1] == "slot"


def test_no_gloo_no_rendezvous():
    planned = plan_job(two_hosts().config, CPU2, {"PATH": "/usr/bin"})
    assert not GLOO_NAMES & set(planned.env)
    assert rendezvous_port({"PATH": "/usr/bin", **planned.env}) is None
    # The controller alone is not enough to serve: the port comes with the plan.
    assert rendezvous_port({"HOROVOD_CONTROLLER": "gloo"}) is None
    assert rendezvous_port({"HOROVOD_CONTROLLER": "GLOO", "HOROVOD_GLOO_RENDEZVOUS_PORT": "9000"}) == 9000


def test_a_single_process_job_is_left_to_horovod():
    # One process, no mpirun: Horovod's Gloo runs alone without a rendezvous; the rule is the MPI backend's only.
    planned = plan_job(job().config, CPU2, {"HOROVOD_CONTROLLER": "gloo"})
    assert planned.backend == "single" and not GLOO_NAMES & set(planned.env)
