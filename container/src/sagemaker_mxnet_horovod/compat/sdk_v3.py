"""Parse: SDK v3's `ModelTrainer(source_code=SourceCode(...), distributed=MPI(...))` as this launcher's settings.

SDK v3 replaces the container's command with `bash -c ".../sm_drivers/sm_train.sh"`, whose MPI driver expects
what this image deliberately lacks (one ssh key shared by every container of the image, no host key checks)
and passes mpirun an interface that does not exist in local mode. The image's BASH_ENV hook
(docker/sdk-v3-bash-env.sh) hands exactly that invocation to `train --sdk-v3-driver DIR`; this module turns the
two files the SDK wrote into DIR into the launcher's knobs (as environment variables, which hyperparameters
still override) plus the variables SDK v3's own driver gives the program. See docs/sdk-v3.md.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sagemaker_mxnet_horovod.core.exits import ConfigError
from sagemaker_mxnet_horovod.parse.values import load_json

SOURCE_CODE_FILE = "sourcecode.json"
DISTRIBUTED_FILE = "distributed.json"
CODE_CHANNEL = "code"  # SDK v3 uploads SourceCode.source_dir as this channel


def driver_env(source_code: Any, distributed: Any, drivers_dir: Path, data_dir: Path) -> dict[str, str]:
    """Environment for `train` from SDK v3's sourcecode.json and distributed.json (their model_dump())."""
    if not isinstance(source_code, dict) or not isinstance(distributed, dict):
        raise ConfigError(f"{drivers_dir}: {SOURCE_CODE_FILE} and {DISTRIBUTED_FILE} must be JSON objects")
    entry_script = source_code.get("entry_script")
    if not isinstance(entry_script, str) or not entry_script:
        raise ConfigError(f"SDK v3 SourceCode.entry_script={entry_script!r}: distributed=MPI() needs the script "
                          "to run, a path inside source_dir")
    source_dir = source_code.get("source_dir")
    if not isinstance(source_dir, str) or not source_dir:
        raise ConfigError(f"SDK v3 SourceCode.source_dir={source_dir!r}: this image runs an MPI job's "
                          f"entry_script {entry_script!r} from source_dir; set it")
    submit = data_dir / CODE_CHANNEL
    if source_dir.endswith(".tar.gz"):  # the channel holds the tarball itself
        submit = submit / Path(source_dir).name
    requirements = source_code.get("requirements")
    if requirements not in (None, "", "requirements.txt"):
        raise ConfigError(f"SDK v3 SourceCode.requirements={requirements!r}: this image installs "
                          "requirements.txt from source_dir; name the file requirements.txt")

    options = distributed.get("mpi_additional_options") or []
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise ConfigError(f"SDK v3 MPI.mpi_additional_options={options!r} must be a list of strings")
    count = distributed.get("process_count_per_node")
    env = {
        "SAGEMAKER_PROGRAM": entry_script,
        "SAGEMAKER_SUBMIT_DIRECTORY": str(submit),
        "SAGEMAKER_MPI_ENABLED": "true",  # SDK v3's MPI driver runs mpirun whatever the process count
        # What SDK v3's own environment.py gives the program, beyond the toolkit's SM_* the launcher sets.
        "SM_SOURCE_DIR": str(data_dir / CODE_CHANNEL),
        "SM_ENTRY_SCRIPT": entry_script,
        "SM_DISTRIBUTED_DRIVER_DIR": str(drivers_dir / "distributed_drivers"),
        "SM_DISTRIBUTED_CONFIG": json.dumps(distributed),
    }
    if count is not None:
        env["SAGEMAKER_MPI_NUM_OF_PROCESSES_PER_HOST"] = str(count)  # validated with the other knobs
    if options:
        env["SAGEMAKER_MPI_CUSTOM_MPI_OPTIONS"] = shlex.join(options)
    return env


def host_env(hosts: tuple[str, ...], current_host: str) -> dict[str, str]:
    """SDK v3's per-host variables."""
    return {"SM_HOST_COUNT": str(len(hosts)), "SM_CURRENT_HOST_RANK": str(sorted(hosts).index(current_host))}


def load_driver_env(drivers_dir: Path, data_dir: Path, env: Mapping[str, str]) -> dict[str, str]:
    """`env` with the settings of the SDK v3 job whose driver files are in `drivers_dir`."""
    source_code = load_json(drivers_dir / SOURCE_CODE_FILE)
    distributed = load_json(drivers_dir / DISTRIBUTED_FILE)
    return {**env, **driver_env(source_code, distributed, drivers_dir, data_dir)}
