"""checkpointconfig.json and tensorboardoutputconfig.json: where the job's checkpoints and TensorBoard events go.

SageMaker writes them to /opt/ml/input/config when the job has a CheckpointConfig (the estimator's
checkpoint_s3_uri / checkpoint_local_path) or a TensorBoardOutputConfig, as {"LocalPath": ..., "S3Uri" or
"S3OutputPath": ...}, syncs each LocalPath with S3 and, on a restart, restores the checkpoints into it. The toolkit
reads neither file (smdebug reads both): the checkpoint path reaches every rank as SM_CHECKPOINT_DIR (ours,
compat/toolkit_env.py, from Paths.checkpoint_dir), the built-in programs read the TensorBoard file themselves
(entrypoints/mxnet_programs/sagemaker_config.py, the same rules).

A file that cannot be used fails the job at start (ConfigError: exit 2) naming the file and the field, before
anything runs: a checkpoint already in LocalPath is never touched. Reads the two files and looks at LocalPath's
directory (creates nothing).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from sagemaker_mxnet_horovod.core.exits import ConfigError
from sagemaker_mxnet_horovod.parse.paths import Paths

CHECKPOINT_CONFIG = "checkpointconfig.json"
TENSORBOARD_CONFIG = "tensorboardoutputconfig.json"
LOCAL_PATH = "LocalPath"


@dataclass(frozen=True)
class OutputConfig:
    checkpoint_local_path: Path | None = None  # None: no file, or no LocalPath in it (SageMaker's default then)
    tensorboard_local_path: Path | None = None


def parse_local_path(data: Any, source: str) -> Path | None:
    """The LocalPath of one file's parsed JSON, checked to be an absolute path."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source} must be a JSON object with {LOCAL_PATH}, got {type(data).__name__}")
    if LOCAL_PATH not in data:
        return None
    value = data[LOCAL_PATH]
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{source}: {LOCAL_PATH} must be a non-empty path, got {value!r}")
    if not PurePosixPath(value).is_absolute():
        raise ConfigError(f"{source}: {LOCAL_PATH} {value!r} is not an absolute path")
    return Path(value)


def unwritable(directory: Path) -> str | None:
    """Why files cannot be made in `directory` (created if missing), or None: it or its nearest existing parent
    must be a directory this process may write."""
    probe = directory
    while not os.path.lexists(probe):
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        try:
            read_only = bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
        except OSError:
            read_only = False
        return f"{probe} is read-only" if read_only else f"no write permission on {probe}"
    return None


def read_local_path(path: Path) -> Path | None:
    """One file's LocalPath, checked (absolute, writable); None when the file is absent."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ConfigError(f"{path} cannot be read: {error.strerror or error}") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ConfigError(f"{path} is not valid JSON ({error})") from None
    local = parse_local_path(data, str(path))
    problem = unwritable(local) if local is not None else None
    if problem:
        raise ConfigError(f"{path}: {LOCAL_PATH} {local} is not writable: {problem}")
    return local


def load_output_config(config_dir: Path) -> OutputConfig:
    return OutputConfig(read_local_path(config_dir / CHECKPOINT_CONFIG),
                        read_local_path(config_dir / TENSORBOARD_CONFIG))


def with_output_config(paths: Paths, output: OutputConfig) -> Paths:
    return replace(paths, checkpoint_local_path=output.checkpoint_local_path,
                   tensorboard_local_path=output.tensorboard_local_path)


def notes(output: OutputConfig) -> list[str]:
    """What the start log says: where checkpoints and TensorBoard events go when a file moved them."""
    found = []
    if output.checkpoint_local_path is not None:
        found.append(f"checkpoints: {output.checkpoint_local_path} ({CHECKPOINT_CONFIG}'s {LOCAL_PATH}; "
                     "SM_CHECKPOINT_DIR on every rank)")
    if output.tensorboard_local_path is not None:
        found.append(f"TensorBoard events: {output.tensorboard_local_path} ({TENSORBOARD_CONFIG}'s {LOCAL_PATH}; "
                     "the built-in programs write there unless --tensorboard-dir says otherwise)")
    return found


def apply(config, config_dir: Path):
    """The TrainingConfig with the two files' paths in its Paths and their notes in its start log."""
    output = load_output_config(config_dir)
    return replace(config, paths=with_output_config(config.paths, output),
                   warnings=(*config.warnings, *notes(output)))
