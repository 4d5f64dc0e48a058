"""Jobs as make_plan hands them to the environment rules (the real config, layout and program, and the backend the
registry chooses), for the tests of plan/env_rules.py and of each backend's own rules. A uniquely named helper, as
every helper under tests/."""

from pathlib import Path

from sagemaker_mxnet_horovod.backends.registry import choose
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.training_config import parse_training_config
from sagemaker_mxnet_horovod.plan.env_rules import PlanInputs
from sagemaker_mxnet_horovod.plan.layout import plan_layout
from sagemaker_mxnet_horovod.plan.programs import resolve_program

from . import unit_paths

ENTRYPOINTS = str(unit_paths.ENTRYPOINTS)
CPU2 = HostFacts(cpu_count=2, interfaces=("eth0",), default_route_interface="eth0")
CPU16 = HostFacts(cpu_count=16, interfaces=("eth0",), default_route_interface="eth0")
GPU8 = HostFacts(cpu_count=64, gpu_count=8, interfaces=("eth0",), default_route_interface="eth0")


def job(hosts=("algo-1",), facts=CPU2, env=None, instance_type=None, **hps):
    """The planner's inputs (PlanInputs) as make_plan builds them: the real config, layout and launch rules."""
    resource = {"current_host": "algo-1", "hosts": list(hosts), "network_interface_name": "eth0",
                **({"current_instance_type": instance_type} if instance_type else {})}
    config = parse_training_config(Paths(Path("/opt/ml")), resource, {"sagemaker_program": "mnist", **hps}, {}, {},
                                   entrypoints_dir=ENTRYPOINTS)
    layout = plan_layout(config, facts)
    backend = choose(layout)
    return PlanInputs(config, facts, env or {}, layout, resolve_program(config, "python", ENTRYPOINTS),
                      backend.collectives_in_shm, backend.options_env(config, env or {}))


def two_hosts(**kwargs):
    return job(hosts=("algo-1", "algo-2"), **kwargs)


def settings(effects):
    return {effect.name: effect.value for effect in effects}
