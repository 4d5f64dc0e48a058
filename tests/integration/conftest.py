import os
import subprocess

import pytest
from cluster_jobs import DOCKER


@pytest.fixture(scope="session")
def image():
    name = os.environ.get("IMAGE", "sagemaker-mxnet-horovod:cpu")
    found = subprocess.run([DOCKER, "image", "inspect", name], capture_output=True, check=False)
    if found.returncode != 0:
        pytest.fail(f"image {name} not found: run `make build` first (or set IMAGE)")
    return name
