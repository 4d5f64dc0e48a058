"""Shared by the jobs across containers: the image."""

import os
import subprocess

import pytest
from cluster_jobs import DOCKER
from rcnn_cluster_jobs import RcnnJobs


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
