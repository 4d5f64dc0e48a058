import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from local_job import JobSpec, run_job  # noqa: E402

CODE_DIR = Path(__file__).resolve().parent / "code"
DOCKER = os.environ.get("DOCKER", "docker")


@pytest.fixture(scope="session")
def image():
    name = os.environ.get("IMAGE", "sagemaker-mxnet-horovod:cpu")
    found = subprocess.run([DOCKER, "image", "inspect", name], capture_output=True, check=False)
    if found.returncode != 0:
        pytest.fail(f"image {name} not found: run `make build` first (or set IMAGE)")
    return name


def run(image, workdir, hosts=2, hps=None, env=None, **spec):
    """A job of the allreduce test program (tests/integration/code) on `hosts` containers."""
    hyperparameters = {"sagemaker_program": "allreduce.py", "sagemaker_submit_directory": "/opt/ml/code",
                       "mpi_peer_timeout_s": "60", **(hps or {})}
    job = JobSpec(image=image, hosts=hosts, hyperparameters=hyperparameters, env=env or {}, code_dir=CODE_DIR,
                  timeout_s=spec.pop("timeout_s", 180), **spec)
    return run_job(job, workdir)
