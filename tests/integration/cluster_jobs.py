"""Shared by the multi-container tests: run a job of the image across local containers.

A uniquely named module, not conftest: tests/faults and tests/sdk have conftests of their own, and
`from conftest import` would pick whichever pytest loaded last when they run in one session."""

import os
import subprocess
import time
from pathlib import Path

from local_job import JobSpec, run_job

ROOT = Path(__file__).resolve().parents[2]

CODE_DIR = Path(__file__).resolve().parent / "code"
DOCKER = os.environ.get("DOCKER", "docker")


def run(image, workdir, hosts=2, hps=None, env=None, **spec):
    """A job of the allreduce test program (tests/integration/code) on `hosts` containers."""
    hyperparameters = {"sagemaker_program": "allreduce.py", "sagemaker_submit_directory": "/opt/ml/code",
                       "mpi_peer_timeout_s": "60", **(hps or {})}
    job = JobSpec(image=image, hosts=hosts, hyperparameters=hyperparameters, env=env or {}, code_dir=CODE_DIR,
                  timeout_s=spec.pop("timeout_s", 180), **spec)
    return run_job(job, workdir)


def wait_for(condition, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} within {timeout:.0f} s")
        time.sleep(0.1)  # files written in the containers: nothing to block on


def release(fifo: Path) -> None:
    """Let a rank of allreduce.py --release-fifo go on: its open() of the FIFO returns once a writer opens it."""
    os.close(os.open(fifo, os.O_WRONLY))


def synthetic_mnist(image, root, train, test):
    """Synthetic MNIST (`train/`, `test/` of IDX files) in root/mnist, made by the image's own data tool."""
    subprocess.run([DOCKER, "run", "--rm", "-v", f"{root}:/data", "--entrypoint", "synth-data", image, "mnist",
                    "/data/mnist", "--train", str(train), "--test", str(test)], check=True, capture_output=True,
                   timeout=300)
    return Path(root) / "mnist"
