"""Run a local_job.JobSpec under the sagemaker-training toolkit's MPI runner instead of this image's
`train`, in the same image: the baseline the benchmarks and the fault report compare against.

The toolkit expects a shared root key and sshd host keys made at build time (the DLC images bake them);
this image makes them per job, so the containers are given what the toolkit expects before it starts.
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

from .spec import JobSpec

SETUP = r"""
set -e
mkdir -p /run/sagemaker-cluster /root/.ssh /run/sshd
cp /toolkit-ssh/id_ed25519 /root/.ssh/id_ed25519
cp /toolkit-ssh/id_ed25519 /run/sagemaker-cluster/id_ed25519
cp /toolkit-ssh/id_ed25519.pub /run/sagemaker-cluster/authorized_keys
cp /toolkit-ssh/id_ed25519.pub /root/.ssh/authorized_keys
chmod 600 /root/.ssh/* /run/sagemaker-cluster/*
ssh-keygen -q -t ed25519 -N '' -f /run/sagemaker-cluster/ssh_host_ed25519_key
ssh-keygen -q -A
printf 'Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n' > /root/.ssh/config
exec python -c 'from sagemaker_training.cli.train import main; main()'
"""

# The toolkit has no built-in programs: ours run as user scripts from the image's entrypoints dir.
BUILTIN_SCRIPTS = {"mnist": "mnist.py", "faster_rcnn": "faster_rcnn.py", "mask_rcnn": "mask_rcnn.py"}


def make_ssh_dir(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    key = directory / "id_ed25519"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return directory


def as_toolkit_job(spec: JobSpec, ssh_dir: Path) -> JobSpec:
    """The same job for the toolkit: its entry point, its keys, typed MPI hyperparameters (it multiplies a
    string process count: "1" * 2 hosts = "11"), SageMaker's hostnames (its sshd setup assumes them)."""
    # This launcher's own knobs (mpi_*) mean nothing to the toolkit, which would pass them to the program.
    hps = {key: value for key, value in spec.hyperparameters.items() if not key.startswith("mpi_")}
    program = hps.get("sagemaker_program")
    if program in BUILTIN_SCRIPTS:
        hps["sagemaker_program"] = BUILTIN_SCRIPTS[program]
        hps["sagemaker_submit_directory"] = "/opt/entrypoints"
    hps.setdefault("sagemaker_mpi_enabled", True)
    processes = hps.get("sagemaker_mpi_num_of_processes_per_host", 1)
    try:
        hps["sagemaker_mpi_num_of_processes_per_host"] = int(processes)
    except (TypeError, ValueError):
        pass  # a malformed value stays malformed: that is the scenario
    return dataclasses.replace(spec, hyperparameters=hps, command=("sh", "-c", SETUP), hostname_is_alias=True,
                               extra_mounts=[*spec.extra_mounts, (str(ssh_dir), "/toolkit-ssh", "ro")])
