"""What SageMaker and the MPI launcher tell a program through its environment, read before MPI starts.

Rank layout (`dist_env`) comes from the launcher's variables so that input can be checked before any
collective: a rank that fails then exits before the others can block on it. Paths: command-line flag,
else the SageMaker env var, else SageMaker's default (`resolve_path`); checkpoints and TensorBoard events also follow
the job's config files (sagemaker_config.py).
"""

import json
import os
import re
from dataclasses import dataclass

from mxnet_programs import sagemaker_config
from mxnet_programs.launch import HOROVOD, PARAMETER_SERVER_KVSTORES, SINGLE_PROCESS_KVSTORES
from mxnet_programs.process import ProgramError, warn

SM_INPUT_DIR_DEFAULT = "/opt/ml/input"
SM_MODEL_DIR_DEFAULT = "/opt/ml/model"
SM_OUTPUT_DATA_DIR_DEFAULT = "/opt/ml/output/data"
SM_CHECKPOINT_DIR_DEFAULT = sagemaker_config.CHECKPOINT_DIR_DEFAULT
SM_TENSORBOARD_DIR_DEFAULT = sagemaker_config.TENSORBOARD_DIR_DEFAULT


# --------------------------------------------------------------------------------------------
# Rank layout


@dataclass(frozen=True)
class DistEnv:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1


_DIST_ENV_VARS = (
    # (rank, size, local rank, local size) per launcher
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    # A parameter-server worker: the launcher's numbering (backends/parameter_server/placement.py), ps-lite's count.
    ("SMMH_WORKER_RANK", "DMLC_NUM_WORKER", "SMMH_LOCAL_WORKER_RANK", "SMMH_LOCAL_WORKERS"),
)


def dist_env(environ=None):
    """Rank layout from the env that mpirun (OpenMPI/MPICH) or horovodrun sets; 1 process otherwise."""
    environ = os.environ if environ is None else environ
    for rank_var, size_var, local_rank_var, local_size_var in _DIST_ENV_VARS:
        if rank_var in environ and size_var in environ:
            try:
                rank, size = int(environ[rank_var]), int(environ[size_var])
                local_rank = int(environ.get(local_rank_var, rank))
                local_size = int(environ.get(local_size_var, size))
            except ValueError:
                raise ProgramError(f"unparsable MPI environment: {rank_var}={environ[rank_var]!r} "
                                   f"{size_var}={environ[size_var]!r}") from None
            return DistEnv(rank, size, local_rank, local_size)
    return DistEnv()


def kvstore(requested, environ=None):
    """The kvstore a program trains with: --kvstore, else dist_sync when the launcher started it as a
    parameter-server worker (DMLC_ROLE=worker), else horovod. A kvstore that cannot work in how the program was
    started is an error, before anything is loaded."""
    environ = os.environ if environ is None else environ
    worker = environ.get("DMLC_ROLE") == "worker"
    chosen = requested or ("dist_sync" if worker else HOROVOD)
    if chosen == "dist_async":
        raise ProgramError("--kvstore dist_async: the built-in programs keep every worker in step (equal steps per "
                           "epoch, the stop vote, checkpoints of the optimizer's state), which asynchronous updates "
                           "on the servers do not allow; use dist_sync (or your own script: the launcher runs any "
                           "kvstore)")
    if chosen in PARAMETER_SERVER_KVSTORES and not worker:
        raise ProgramError(f"--kvstore {chosen} trains with MXNet's parameter servers, but this process was not "
                           "started as their worker (no DMLC_ROLE=worker): the launcher starts them for kvstore "
                           "dist_* or sagemaker_parameter_server_enabled=true")
    if worker and chosen not in PARAMETER_SERVER_KVSTORES:
        raise ProgramError(f"--kvstore {chosen}, but the launcher started this process as a parameter-server worker "
                           "(sagemaker_parameter_server_enabled=true): use --kvstore dist_sync or dist_device_sync")
    return chosen


def check_single_process(prog, setting, kvstore, env, environ=None):
    """local and device kvstores are one process on one host (their launch rule, launch.py, is the launcher's;
    this is the program's own check of it, for a program started some other way): refused for a multi-host job
    or several ranks, before anything is loaded."""
    if kvstore not in SINGLE_PROCESS_KVSTORES:
        return
    hosts = job_hosts(environ)
    what = SINGLE_PROCESS_KVSTORES[kvstore]
    if len(hosts) > 1:
        raise ProgramError(f"{setting} runs {what}, but this job spans {len(hosts)} hosts ({', '.join(hosts)}): use "
                           "kvstore horovod or dist_sync for multi-host training, or a single instance")
    if env.size > 1:
        raise ProgramError(f"{setting} runs {what}, but {env.size} ranks were launched")


def host_cores():
    """The cores this process may run on (its CPU affinity)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def limit_cpu_threads(local_size, environ=None):
    """Splits the host's cores between the ranks on it (sets OMP_NUM_THREADS unless the user did).

    Must run before `import mxnet`: the OpenMP runtime reads the variable once. Without it every
    rank starts one thread per core and N ranks per host thrash N x cores threads.
    """
    environ = os.environ if environ is None else environ
    if "OMP_NUM_THREADS" in environ or local_size < 2:
        return None
    threads = max(1, host_cores() // local_size)
    environ["OMP_NUM_THREADS"] = str(threads)
    return threads


def job_hosts(environ=None):
    """The hosts this program's job spans: in a heterogeneous cluster, the distribution instance groups'
    hosts (SM_TRAINING_ENV's distribution_hosts), or this host alone when it is outside them; else SM_HOSTS."""
    environ = os.environ if environ is None else environ
    current = environ.get("SM_CURRENT_HOST")
    try:
        distribution = json.loads(environ.get("SM_TRAINING_ENV") or "{}").get("distribution_hosts")
    except (ValueError, AttributeError):
        distribution = None
    if current and isinstance(distribution, list) and distribution:
        return [str(h) for h in distribution] if current in distribution else [current]
    text = environ.get("SM_HOSTS")
    if not text:
        return []
    try:
        hosts = json.loads(text)
    except ValueError:
        raise ProgramError(f"SM_HOSTS is not valid JSON: {text!r}") from None
    if not isinstance(hosts, list):
        raise ProgramError(f"SM_HOSTS must be a JSON list of host names, got {text!r}")
    return [str(h) for h in hosts]


# --------------------------------------------------------------------------------------------
# Paths and channels


def resolve_path(flag_value, env_var, default, environ=None):
    """Flag if given, else $env_var if set and non-empty, else the SageMaker default."""
    environ = os.environ if environ is None else environ
    if flag_value:
        return flag_value
    return environ.get(env_var) or default


def output_dirs(prog, model_dir, checkpoint_dir, environ=None):
    """(model dir, checkpoint dir) from the flags, the env, checkpointconfig.json (sagemaker_config) or SageMaker's
    defaults."""
    if model_dir and "://" in model_dir:
        # Some SageMaker SDK estimators pass an S3 URI as model_dir; the local dir is what gets uploaded.
        warn(prog, f"ignoring --model-dir {model_dir} (not a local path); using $SM_MODEL_DIR")
        model_dir = None
    return (resolve_path(model_dir, "SM_MODEL_DIR", SM_MODEL_DIR_DEFAULT, environ),
            sagemaker_config.checkpoint_dir(checkpoint_dir, environ))


def tensorboard_dir(flag_value, environ=None):
    """The TensorBoard log dir: the flag, else tensorboardoutputconfig.json's LocalPath, else SageMaker's default."""
    return sagemaker_config.tensorboard_dir(flag_value, environ)


def input_dir(environ=None):
    environ = os.environ if environ is None else environ
    return environ.get("SM_INPUT_DIR") or SM_INPUT_DIR_DEFAULT


def _channel_var(name):
    return "SM_CHANNEL_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def channel_dir(name, flag_value=None, environ=None):
    """A File-mode channel's directory: flag, $SM_CHANNEL_<NAME>, else <input dir>/data/<name>."""
    environ = os.environ if environ is None else environ
    return resolve_path(flag_value, _channel_var(name), os.path.join(input_dir(environ), "data", name), environ)


def channel_exists(name, environ=None):
    """True when SageMaker announced the channel (SM_CHANNELS / SM_CHANNEL_X) or its default dir exists."""
    environ = os.environ if environ is None else environ
    if environ.get(_channel_var(name)):
        return True
    try:
        if name in json.loads(environ.get("SM_CHANNELS") or "[]"):
            return True
    except ValueError:
        pass
    return os.path.isdir(os.path.join(input_dir(environ), "data", name))


def input_data_config(environ=None):
    """SM_INPUT_DATA_CONFIG as a dict, else <input dir>/config/inputdataconfig.json, else {}."""
    environ = os.environ if environ is None else environ
    text = environ.get("SM_INPUT_DATA_CONFIG")
    source = "SM_INPUT_DATA_CONFIG"
    if not text:
        path = os.path.join(input_dir(environ), "config", "inputdataconfig.json")
        if not os.path.isfile(path):
            return {}
        with open(path) as f:
            text, source = f.read(), path
    try:
        config = json.loads(text)
    except ValueError as exc:
        raise ProgramError(f"{source} is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise ProgramError(f"{source} must be a JSON object of channels, got {type(config).__name__}")
    return config


def channel_is_pipe(config, name):
    entry = config.get(name)
    return isinstance(entry, dict) and str(entry.get("TrainingInputMode", "")).lower() == "pipe"


def per_rank_pipe_channels(config, base, world_size):
    """Pipe-mode channel name per rank for channel `base`, or None when `base` is not in Pipe mode.

    One FIFO has one reader, so N ranks need N channels base_0 .. base_{N-1}. A single process may
    also read the plain `base` channel. Raises ProgramError when there are too few channels.
    """
    if not (channel_is_pipe(config, base) or channel_is_pipe(config, f"{base}_0")):
        return None
    if world_size == 1 and channel_is_pipe(config, base) and f"{base}_0" not in config:
        return [base]
    have = 0
    while channel_is_pipe(config, f"{base}_{have}"):
        have += 1
    if have < world_size:
        have_text = f"{base}_0..{base}_{have - 1}" if have else "none"
        raise ProgramError(f"Pipe mode needs one channel per rank: have {have_text}, need {world_size}")
    return [f"{base}_{rank}" for rank in range(world_size)]


def fifo_path(channel, epoch, environ=None):
    """SageMaker's Pipe-mode FIFO for a channel's pass number `epoch` (0, 1, ... per job)."""
    return os.path.join(input_dir(environ), "data", f"{channel}_{epoch}")
