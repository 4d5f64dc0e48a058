"""Heterogeneous clusters against the oracle: the sagemaker-training toolkit installed in the image decides,
for every host of several instance-group layouts, the distribution hosts, the master, and whether the host
runs MPI (its trainer picks the MPI runner only when the current group is a distribution group) or the
program on its own. The launcher's config and plan must agree."""

import json
import os
from pathlib import Path

import pytest

toolkit_environment = pytest.importorskip("sagemaker_training.environment", reason="needs the image's toolkit")

from sagemaker_mxnet_horovod.backends.registry import plan_job  # noqa: E402
from sagemaker_mxnet_horovod.parse.host_facts import HostFacts  # noqa: E402
from sagemaker_mxnet_horovod.parse.paths import Paths  # noqa: E402
from sagemaker_mxnet_horovod.parse.training_config import parse_training_config  # noqa: E402

FACTS = HostFacts(cpu_count=2, interfaces=("eth0",), default_route_interface="eth0", hostname="c0ffee")

LAYOUTS = [
    ({"train": ["algo-1", "algo-2"], "data": ["algo-3"]}, ["train"]),
    ({"data": ["algo-1"], "train": ["algo-2", "algo-3"]}, ["train"]),  # the master is not algo-1
    ({"b": ["algo-4", "algo-3"], "a": ["algo-1"], "c": ["algo-2"]}, ["a", "b"]),  # the toolkit's host order
    ({"train": ["algo-1", "algo-2"], "data": ["algo-3"]}, None),  # not set: each group its own job
    ({"homogeneousCluster": ["algo-1", "algo-2"]}, None),
]


@pytest.fixture
def restored_environ():
    # The toolkit's Environment() writes SM_CURRENT_HOST and others into os.environ.
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


@pytest.mark.parametrize("groups,distribution", LAYOUTS)
def test_distribution_hosts_master_and_role_match_the_toolkit(groups, distribution, restored_environ):
    hosts = sorted(h for members in groups.values() for h in members)
    for current in hosts:
        resource = {"current_host": current, "hosts": hosts, "network_interface_name": "eth0",
                    "current_instance_type": "ml.c5.xlarge",
                    "current_group_name": next(name for name, members in groups.items() if current in members),
                    "instance_groups": [{"instance_group_name": name, "instance_type": "ml.c5.xlarge",
                                         "hosts": members} for name, members in groups.items()]}
        hps = {"sagemaker_program": "mnist", "sagemaker_mpi_enabled": True}
        if distribution is not None:
            hps["sagemaker_distribution_instance_groups"] = distribution
        inputs = {"train": {"TrainingInputMode": "File"}}
        toolkit = toolkit_environment.Environment(resource_config=resource, input_data_config=inputs,
                                                  hyperparameters=hps)
        # hyperparameters.json as SageMaker writes it: every value JSON-encoded.
        config = parse_training_config(Paths(Path("/opt/ml")), resource, {k: json.dumps(v) for k, v in hps.items()},
                                       inputs, {})
        plan = plan_job(config, FACTS, {})
        where = f"{current} in {groups}, distribution {distribution}"
        assert config.resource.distribution_hosts == tuple(toolkit.distribution_hosts), where
        assert config.resource.master_host == toolkit.master_hostname, where
        assert config.resource.is_master == toolkit.is_master, where
        toolkit_runs_mpi = toolkit.current_instance_group in toolkit.distribution_instance_groups
        assert (plan.backend == "mpi") == toolkit_runs_mpi, where
        if toolkit_runs_mpi:
            assert plan.role == ("master" if toolkit.is_master else "worker"), where
            assert plan.master_host == toolkit.master_hostname, where
            assert plan.hosts == tuple(toolkit.distribution_hosts), where
        else:
            assert plan.role == "single" and plan.hosts == (current,) and plan.total_processes == 1, where
