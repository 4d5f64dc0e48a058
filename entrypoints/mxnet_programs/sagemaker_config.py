"""Where a SageMaker job says its checkpoints and TensorBoard events go: the LocalPath of
<input dir>/config/checkpointconfig.json (the estimator's checkpoint_local_path) and of
tensorboardoutputconfig.json (TensorBoardOutputConfig's container_local_output_path). SageMaker syncs those
paths with S3, and restores a restarted job's checkpoints into the first: a program that writes elsewhere uploads
nothing and resumes from nothing.

The sagemaker-training toolkit sets no variable for either (it reads hyperparameters, resourceconfig and
inputdataconfig only); smdebug reads both files by these names. The launcher puts the checkpoint path in
SM_CHECKPOINT_DIR (ours, not the toolkit's); a program started without it reads the file. Order: flag, then
SM_CHECKPOINT_DIR (checkpoints only), then the file, then SageMaker's default. A file that cannot be used is an
error (exit 2) naming the file and the field, raised before anything is written.
"""

import json
import os

from mxnet_programs.process import ProgramError

CHECKPOINT_CONFIG = "checkpointconfig.json"
TENSORBOARD_CONFIG = "tensorboardoutputconfig.json"
LOCAL_PATH = "LocalPath"
CHECKPOINT_DIR_DEFAULT = "/opt/ml/checkpoints"
TENSORBOARD_DIR_DEFAULT = "/opt/ml/output/tensorboard"


def config_file(name, environ=None):
    environ = os.environ if environ is None else environ
    return os.path.join(environ.get("SM_INPUT_DIR") or "/opt/ml/input", "config", name)


def local_path(name, environ=None):
    """The file's LocalPath, checked; None when the file is absent or has no LocalPath (SageMaker's default then)."""
    path = config_file(name, environ)
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except OSError as error:
        raise ProgramError(f"{path} cannot be read: {error.strerror or error}") from None
    try:
        data = json.loads(text)
    except ValueError as error:
        raise ProgramError(f"{path} is not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise ProgramError(f"{path} must be a JSON object with {LOCAL_PATH}, got {type(data).__name__}")
    if LOCAL_PATH not in data:
        return None
    value = data[LOCAL_PATH]
    if not isinstance(value, str) or not value.strip():
        raise ProgramError(f"{path}: {LOCAL_PATH} must be a non-empty path, got {value!r}")
    if not os.path.isabs(value):
        raise ProgramError(f"{path}: {LOCAL_PATH} {value!r} is not an absolute path")
    problem = unwritable(value)
    if problem:
        raise ProgramError(f"{path}: {LOCAL_PATH} {value} is not writable: {problem}")
    return value


def unwritable(directory):
    """Why files cannot be made in `directory` (created if missing), or None: it or its nearest existing parent
    must be a directory this process may write. Looks only: creates nothing."""
    probe = os.path.abspath(directory)
    while not os.path.lexists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        return f"{probe} is not a directory"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{probe} is read-only" if _read_only_mount(probe) else f"no write permission on {probe}"
    return None


def _read_only_mount(path):
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def checkpoint_dir(flag_value, environ=None):
    """--checkpoint-dir, else $SM_CHECKPOINT_DIR, else checkpointconfig.json's LocalPath, else /opt/ml/checkpoints."""
    environ = os.environ if environ is None else environ
    if flag_value:
        return flag_value
    return environ.get("SM_CHECKPOINT_DIR") or local_path(CHECKPOINT_CONFIG, environ) or CHECKPOINT_DIR_DEFAULT


def tensorboard_dir(flag_value, environ=None):
    """--tensorboard-dir, else tensorboardoutputconfig.json's LocalPath, else /opt/ml/output/tensorboard."""
    if flag_value:
        return flag_value
    return local_path(TENSORBOARD_CONFIG, environ) or TENSORBOARD_DIR_DEFAULT
