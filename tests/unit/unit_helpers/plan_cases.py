"""Parsed job configurations, host facts and plans for the unit tests that need a whole plan (test_job_plan*,
test_toolkit_env, test_stray_outputs, ...). A uniquely named module, as every helper under tests/: pytest puts each test
directory on sys.path, so two helpers of one name would shadow each other."""

import json
from pathlib import Path

from sagemaker_mxnet_horovod.backends.registry import plan_job
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts
from sagemaker_mxnet_horovod.parse.paths import Paths
from sagemaker_mxnet_horovod.parse.training_config import parse_training_config

from . import unit_paths

PATHS = Paths(Path("/opt/ml"))
CPU2 = HostFacts(cpu_count=2, interfaces=("eth0",), default_route_interface="eth0", hostname="c0ffee")
GPU8 = HostFacts(cpu_count=64, gpu_count=8, interfaces=("eth0",), default_route_interface="eth0", hostname="ip-10")

ENTRYPOINTS = str(unit_paths.ENTRYPOINTS)  # the built-in programs and their launch rules


def config(hps=None, hosts=("algo-1", "algo-2"), current="algo-1", resource_extra=None, channels=None):
    """MNIST on algo-1 and algo-2 (this host: algo-1) unless told otherwise."""
    resource = {"current_host": current, "hosts": list(hosts), "network_interface_name": "eth0",
                **(resource_extra or {})}
    return parse_training_config(PATHS, resource, {"sagemaker_program": "mnist", **(hps or {})},
                                 channels if channels is not None else {"train": {}}, {}, entrypoints_dir=ENTRYPOINTS)


def plan(cfg, facts=CPU2, env=None):
    return plan_job(cfg, facts, env if env is not None else {"PATH": "/usr/bin"}, python="/opt/venv/bin/python")


def options(value):
    return {"sagemaker_mpi_custom_mpi_options": json.dumps(value)}  # as SDK v2 writes it
