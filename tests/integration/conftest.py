"""Shared by the jobs across containers: the image, and the tests marked `alone` from here.

ALONE: tests whose verdict needs CPU time to spare (pytest.ini's mark `alone`: make test runs them by itself, after
its lanes; docs/testing.md says which and why), by module, marked here rather than in modules other work is
changing: the tests named, or all of the module's when none are."""

import os
import subprocess

import pytest
from cluster_jobs import DOCKER
from rcnn_cluster_jobs import RcnnJobs

ALONE = {
    # The lateness the report measured against the delay the ranks measured; a host given half the CPU of the other.
    "test_straggler_cluster.py": (),
    # A whole job's seconds bounded (60, 90) where 5 and 9 processes import MXNet and train.
    "test_parameter_server_cluster.py": ("test_two_hosts_one_worker_each_as_awss_toolkit",
                                         "test_three_hosts_two_workers_each_and_two_servers_and_the_users_variables_win"),
}


@pytest.hookimpl(tryfirst=True)  # before -m reads the marks
def pytest_collection_modifyitems(items):
    for item in items:
        names = ALONE.get(item.path.name)
        if names is None:
            continue
        missing = [name for name in names if not hasattr(item.module, name)]
        if missing:
            raise pytest.UsageError(f"tests/integration/conftest.py's ALONE names tests {item.path.name} lacks: {missing}")
        if not names or item.originalname in names:
            item.add_marker(pytest.mark.alone)


@pytest.fixture(scope="session")
def image():
    name = os.environ.get("IMAGE", "sagemaker-mxnet-horovod:cpu")
    found = subprocess.run([DOCKER, "image", "inspect", name], capture_output=True, check=False)
    if found.returncode != 0:
        pytest.fail(f"image {name} not found: run `make build` first (or set IMAGE)")
    return name


@pytest.fixture(scope="session")
def rcnn_jobs(image, tmp_path_factory):
    """Each R-CNN model's 2-host job and its restart, run once for the session when a test first asks for it."""
    return RcnnJobs(image, tmp_path_factory.mktemp("rcnn-jobs"))
