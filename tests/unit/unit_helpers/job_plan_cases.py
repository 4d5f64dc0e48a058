"""Whole plans of small jobs for test_job_plan.py and its topics (test_job_plan_hetero.py,
test_job_plan_parameter_server.py): MNIST on one host unless told otherwise, with both channels, this host's facts
CPU2 or GPU8, and readers of an mpirun argv (its -mca settings, its -x exports, the program's part)."""

from pathlib import Path

from sagemaker_mxnet_horovod.backends.registry import plan_job
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.training_config import parse_training_config

from . import unit_paths

PATHS = Paths(Path("/opt/ml"))
ENTRYPOINTS = str(unit_paths.ENTRYPOINTS)  # the built-in programs' launch rules
CPU2 = HostFacts(cpu_count=2, interfaces=("eth0",), default_route_interface="eth0", hostname="c0ffee")
GPU8 = HostFacts(cpu_count=64, gpu_count=8, interfaces=("eth0",), default_route_interface="eth0", hostname="ip-10")


def rcnn_config(hosts=("algo-1",), entrypoints_dir=ENTRYPOINTS, **hps):
    return parse_training_config(PATHS, {"current_host": "algo-1", "hosts": list(hosts)},
                                 {"sagemaker_program": "mask_rcnn", **hps}, {}, {}, entrypoints_dir=entrypoints_dir)


def config(hosts=("algo-1",), current="algo-1", hps=None, interface="eth0", instance_type=None, channels=None):
    resource = {"current_host": current, "hosts": list(hosts)}
    if interface:
        resource["network_interface_name"] = interface
    if instance_type:
        resource["current_instance_type"] = instance_type
    return parse_training_config(PATHS, resource, {"sagemaker_program": "mnist", **(hps or {})},
                                 channels if channels is not None else {"train": {}, "test": {}}, {},
                                     entrypoints_dir=ENTRYPOINTS)


def plan(cfg, facts=CPU2, env=None, **kwargs):
    return plan_job(cfg, facts, env or {"PATH": "/usr/bin"}, python="/opt/venv/bin/python",
                     entrypoints_dir=kwargs.pop("entrypoints_dir", ENTRYPOINTS), **kwargs)


def mca(argv):
    return {argv[i + 1]: argv[i + 2] for i, a in enumerate(argv) if a == "-mca"}


def exported(argv):
    return {argv[i + 1] for i, a in enumerate(argv) if a == "-x"}


def program_part(argv):
    return list(argv[argv.index("sagemaker_mxnet_horovod.backends.mpi.rank_env") - 2:])
