import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cluster_jobs import DOCKER  # noqa: E402


@pytest.fixture(scope="session")
def image():
    name = os.environ.get("IMAGE", "sagemaker-mxnet-horovod:cpu")
    found = subprocess.run([DOCKER, "image", "inspect", name], capture_output=True, check=False)
    if found.returncode != 0:
        pytest.fail(f"image {name} not found: run `make build` first (or set IMAGE)")
    return name
