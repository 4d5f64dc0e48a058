"""Helpers shared by the SageMaker training entrypoints (mnist.py and the GluonCV R-CNN ones).

Stdlib and the image's pure-Python `sagemaker_mxnet_horovod.recordio` only at import time (numpy/mxnet
are imported by the callers), so an entrypoint can parse arguments, resolve paths and validate its input
before paying for `import mxnet` or touching MPI.

Conventions every entrypoint follows:
  * Hyperparameters arrive as ``--key value`` strings; ``--batch_size`` and ``--batch-size`` are the
    same key (see `normalize_hyperparameter_argv`). Booleans parse strictly with `str2bool`.
  * Paths: command-line flag, else the SageMaker env var, else SageMaker's default (`resolve_path`).
  * Errors: one line ``<prog>: error: <what> (<path>)`` on stderr, exit 2 for bad input/usage,
    1 for an unexpected failure (traceback first), 143 after a SIGTERM stop.
  * Rank and world size are read from the MPI launcher's env (`dist_env`) so input can be checked
    before any collective operation: a rank that fails then exits before the others can block on it.
"""

import argparse
import errno
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading

from sagemaker_mxnet_horovod import recordio

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
DISK_FULL_BYTES = 1 << 20  # a failed save with less free than this is reported as a full disk
EXIT_SIGTERM = 143  # 128 + SIGTERM, what a shell reports for a job stopped by SIGTERM

SM_INPUT_DIR_DEFAULT = "/opt/ml/input"
SM_MODEL_DIR_DEFAULT = "/opt/ml/model"
SM_OUTPUT_DATA_DIR_DEFAULT = "/opt/ml/output/data"
SM_CHECKPOINT_DIR_DEFAULT = "/opt/ml/checkpoints"
SM_TENSORBOARD_DIR_DEFAULT = "/opt/ml/output/tensorboard"


class EntrypointError(Exception):
    """A user-facing problem (bad input, bad configuration): reported in one line, exit code 2."""

    def __init__(self, message, exit_code=EXIT_USAGE):
        super().__init__(message)
        self.exit_code = exit_code


def fail(prog, message, exit_code=EXIT_USAGE):
    """Prints ``prog: error: message`` and ends the process at once.

    os._exit rather than sys.exit: after Horovod/MPI is initialised, interpreter shutdown runs
    Horovod's atexit hook, which can block on ranks that are still running. mpirun's
    abort-on-non-zero-status then takes the other ranks down.
    """
    sys.stdout.flush()
    _stderr_line(f"{prog}: error: {message}")
    os._exit(exit_code)


def _stderr_line(text):
    """One write(2) per line: print() writes the text and the newline separately, so ranks failing at the
    same moment interleave their messages on one line (seen under mpirun), breaking "first line" reports."""
    sys.stderr.flush()
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a non-file (pytest's capsys): one write then
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
        return
    os.write(fd, (text + "\n").encode("utf-8", "replace"))


def log(message):
    print(message, flush=True)


def warn(prog, message):
    _stderr_line(f"{prog}: warning: {message}")


# --------------------------------------------------------------------------------------------
# Hyperparameters


def normalize_hyperparameter_argv(argv):
    """Rewrites ``--some_key`` / ``--some_key=v`` to ``--some-key``; drops ``--sagemaker_*`` pairs.

    SageMaker users spell keys both ways; argparse knows one. The SDK's framework estimators add
    ``sagemaker_program``, ``sagemaker_submit_directory`` ... to the hyperparameters: those are for
    the launcher, not the script, so they are skipped here instead of failing as unknown.
    """
    out = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token.startswith("--") and len(token) > 2:
            key, sep, value = token[2:].partition("=")
            key = key.replace("_", "-")
            if key.startswith("sagemaker-"):
                has_separate_value = not sep and i + 1 < len(argv) and not argv[i + 1].startswith("--")
                i += 2 if has_separate_value else 1
                continue
            token = f"--{key}{sep}{value}"
        out.append(token)
        i += 1
    return out


def str2bool(text):
    """Strict boolean: true/false (any case) or 1/0. Anything else is an argparse error."""
    value = str(text).strip().lower()
    if value in ("true", "1"):
        return True
    if value in ("false", "0"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value: {text!r} (use true/false or 1/0)")


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer value: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not value >= 0:  # also rejects nan
        raise argparse.ArgumentTypeError(f"must be >= 0, got {text!r}")
    return value


class DefaultsHelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows "(default: X)" except for options whose default is None (their help text says it)."""

    def _get_help_string(self, action):
        if action.default is None:
            return action.help
        return super()._get_help_string(action)


class HyperparameterParser(argparse.ArgumentParser):
    """argparse with the entrypoint conventions: underscores accepted, one-line errors, exit 2.

    No abbreviations: a misspelt hyperparameter (``--epoch``) must fail, not silently match ``--epochs``.
    """

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        return super().parse_args(normalize_hyperparameter_argv(args), namespace)

    def error(self, message):
        # One line (no usage dump) so the launcher/SageMaker failure reason shows the actual problem.
        _stderr_line(f"{self.prog}: error: {message} (see --help)")
        sys.exit(EXIT_USAGE)


# --------------------------------------------------------------------------------------------
# Distributed environment (read before MPI init)


class DistEnv:
    def __init__(self, rank=0, size=1, local_rank=0, local_size=1):
        self.rank, self.size, self.local_rank, self.local_size = rank, size, local_rank, local_size

    def __repr__(self):
        return (f"DistEnv(rank={self.rank}, size={self.size}, local_rank={self.local_rank}, "
                f"local_size={self.local_size})")


_DIST_ENV_VARS = (
    # (rank, size, local rank, local size) per launcher
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
     "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("HOROVOD_RANK", "HOROVOD_SIZE", "HOROVOD_LOCAL_RANK", "HOROVOD_LOCAL_SIZE"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
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
                raise EntrypointError(f"unparsable MPI environment: {rank_var}={environ[rank_var]!r} "
                                      f"{size_var}={environ[size_var]!r}") from None
            return DistEnv(rank, size, local_rank, local_size)
    return DistEnv()


def limit_cpu_threads(local_size, environ=None):
    """Splits the host's cores between the ranks on it (sets OMP_NUM_THREADS unless the user did).

    Must run before `import mxnet`: the OpenMP runtime reads the variable once. Without it every
    rank starts one thread per core and N ranks per host thrash N x cores threads.
    """
    environ = os.environ if environ is None else environ
    if "OMP_NUM_THREADS" in environ or local_size < 2:
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    threads = max(1, cores // local_size)
    environ["OMP_NUM_THREADS"] = str(threads)
    return threads


# --------------------------------------------------------------------------------------------
# SageMaker paths and channels


def resolve_path(flag_value, env_var, default, environ=None):
    """Flag if given, else $env_var if set and non-empty, else the SageMaker default."""
    environ = os.environ if environ is None else environ
    if flag_value:
        return flag_value
    return environ.get(env_var) or default


def input_dir(environ=None):
    environ = os.environ if environ is None else environ
    return environ.get("SM_INPUT_DIR") or SM_INPUT_DIR_DEFAULT


def channel_dir(name, flag_value=None, environ=None):
    """A File-mode channel's directory: flag, $SM_CHANNEL_<NAME>, else <input dir>/data/<name>."""
    environ = os.environ if environ is None else environ
    env_var = "SM_CHANNEL_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()
    return resolve_path(flag_value, env_var, os.path.join(input_dir(environ), "data", name), environ)


def channel_exists(name, environ=None):
    """True when SageMaker announced the channel (SM_CHANNELS / SM_CHANNEL_X) or its default dir exists."""
    environ = os.environ if environ is None else environ
    env_var = "SM_CHANNEL_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()
    if environ.get(env_var):
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
        raise EntrypointError(f"{source} is not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise EntrypointError(f"{source} must be a JSON object of channels, got {type(config).__name__}")
    return config


def channel_is_pipe(config, name):
    entry = config.get(name)
    return isinstance(entry, dict) and str(entry.get("TrainingInputMode", "")).lower() == "pipe"


def per_rank_pipe_channels(config, base, world_size):
    """Pipe-mode channel name per rank for channel `base`, or None when `base` is not in Pipe mode.

    One FIFO has one reader, so N ranks need N channels base_0 .. base_{N-1}. A single process may
    also read the plain `base` channel. Raises EntrypointError when there are too few channels.
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
        raise EntrypointError(f"Pipe mode needs one channel per rank: have {have_text}, need {world_size}")
    return [f"{base}_{rank}" for rank in range(world_size)]


def fifo_path(channel, epoch, environ=None):
    """SageMaker's Pipe-mode FIFO for a channel's pass number `epoch` (0, 1, ... per job)."""
    return os.path.join(input_dir(environ), "data", f"{channel}_{epoch}")


# --------------------------------------------------------------------------------------------
# RecordIO (dmlc framing, as written by mx.recordio.MXRecordIO)

RECORDIO_MAGIC = recordio.RECORDIO_MAGIC


def iter_recordio(stream, source="<stream>"):
    """Yields record payloads from a RecordIO byte stream (file or Pipe-mode FIFO), strictly sequentially."""
    try:
        yield from recordio.iter_records(stream)
    except recordio.RecordIOError as error:
        raise EntrypointError(f"{error}: {source}") from None


def unpack_ir_record(record, source="<stream>"):
    """(label, payload) of an mx.recordio.pack()ed record; a label array (flag > 0) yields its first value."""
    try:
        return recordio.unpack_ir_record(record)
    except recordio.RecordIOError as error:
        raise EntrypointError(f"{error}: {source}") from None


# --------------------------------------------------------------------------------------------
# Atomic files and checkpoints


def atomic_write(path, write_fn, mode="wb"):
    """Calls write_fn(file) on a temp file in the same dir, fsyncs, then os.replace()s it to `path`.

    Readers (a resuming job, SageMaker's S3 upload of /opt/ml/checkpoints) never see half a file.
    """

    def save(filename):
        with open(filename, mode) as f:
            write_fn(f)

    atomic_save(path, save)


def atomic_save(path, save_to_filename):
    """Like atomic_write for APIs that insist on a file name (net.save_parameters, trainer.save_states)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-" + os.path.basename(path) + ".", dir=directory)
    os.close(fd)
    try:
        save_to_filename(tmp)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as error:
        disk_full = _disk_full_error(path, error)
        _remove_quietly(tmp)
        if disk_full:
            raise disk_full from error
        raise


def _disk_full_error(path, error):
    """A clear OSError(ENOSPC) when a save failed on a full filesystem, else None. MXNet reports a full
    disk as "FileStream.Write incomplete"; this says what happened and where. Checked before the partial
    temp file is removed, while the filesystem is still as full as the write found it."""
    if not isinstance(error, Exception) or "while saving" in str(error):
        return None
    enospc = isinstance(error, OSError) and error.errno == errno.ENOSPC
    try:
        stat = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        stat = None
    free = stat.f_bavail * stat.f_frsize if stat else None
    if not enospc and (free is None or free >= DISK_FULL_BYTES):
        return None
    room = f" ({free // 1024} KiB free of {stat.f_blocks * stat.f_frsize // 1024} KiB)" if stat else ""
    return OSError(errno.ENOSPC, f"No space left on device while saving {path}{room}")


def atomic_write_json(path, obj):
    atomic_write(path, lambda f: f.write((json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()))


def export_hybrid_block(net, model_dir, name="model", epoch=0):
    """net.export() into model_dir atomically: <name>-symbol.json + <name>-NNNN.params.

    Exported into a staging dir inside model_dir (same filesystem), then each file is os.replace()d
    into place, params first, so a reader never finds a symbol file without its parameters.
    The block must be hybridized and have run forward once. Returns the two paths.
    """
    os.makedirs(model_dir, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".export-", dir=model_dir)
    try:
        net.export(os.path.join(staging, name), epoch=epoch)
        paths = []
        for filename in (f"{name}-{epoch:04d}.params", f"{name}-symbol.json"):
            target = os.path.join(model_dir, filename)
            os.replace(os.path.join(staging, filename), target)
            paths.append(target)
        return paths
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _remove_quietly(path):
    try:
        os.remove(path)
    except OSError:
        pass


class CheckpointManager:
    """Numbered checkpoints in one directory: ``<prefix>-epoch-NNNN[-batch-BBBBBB].<ext>`` files.

    A checkpoint is its data files plus ``.json`` state; the JSON is written last, so a checkpoint
    counts only once all its files are complete. The newest `keep` are kept. Complete epochs use
    ``-epoch-NNNN`` (N = epochs done); a stop mid-epoch uses ``-epoch-NNNN-batch-BBBBBB`` (N = the
    epoch in progress, B = its batches done), ordered before epoch N's complete checkpoint.
    """

    _NAME = re.compile(r"^(?P<prefix>.+)-epoch-(?P<epoch>\d{4,})(?:-batch-(?P<batch>\d{6,}))?\.json$")

    def __init__(self, directory, prefix="checkpoint", keep=2):
        self.directory, self.prefix, self.keep = directory, prefix, keep

    def stem(self, epoch, batch=None):
        name = f"{self.prefix}-epoch-{epoch:04d}"
        if batch is not None:
            name += f"-batch-{batch:06d}"
        return os.path.join(self.directory, name)

    def save(self, epoch, state, writers, batch=None):
        """writers: {extension: fn(filename)}; state: JSON-able dict. Returns the checkpoint's stem."""
        stem = self.stem(epoch, batch)
        for ext, save_fn in writers.items():
            atomic_save(f"{stem}.{ext}", save_fn)
        files = {ext: os.path.basename(f"{stem}.{ext}") for ext in writers}
        atomic_write_json(f"{stem}.json", dict(state, epoch=epoch, batch=batch, files=files))
        self._prune()
        return stem

    def _listing(self):
        """[(sort key, stem)] of committed checkpoints, oldest first."""
        found = []
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        for name in names:
            m = self._NAME.match(name)
            if not m or m.group("prefix") != self.prefix:
                continue
            epoch = int(m.group("epoch"))
            # A mid-epoch checkpoint of epoch N sorts after epoch N-1's and before epoch N's complete one.
            key = (epoch - 1, int(m.group("batch"))) if m.group("batch") else (epoch, -1)
            found.append((key, os.path.join(self.directory, name[:-len(".json")])))
        return sorted(found)

    def latest(self):
        """(state dict, stem) of the newest complete checkpoint, or (None, None)."""
        for _, stem in reversed(self._listing()):
            try:
                with open(stem + ".json") as f:
                    state = json.load(f)
            except (OSError, ValueError):
                continue
            files = state.get("files", {})
            if all(os.path.isfile(os.path.join(self.directory, name)) for name in files.values()):
                return state, stem
        return None, None

    def _prune(self):
        for _, stem in self._listing()[:-self.keep]:
            # JSON first: a crash mid-prune must not leave a committed checkpoint with missing files.
            _remove_quietly(stem + ".json")
            for ext_file in _glob_stem(stem):
                _remove_quietly(ext_file)


def _glob_stem(stem):
    directory, base = os.path.split(stem)
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return [os.path.join(directory, n) for n in names if n.startswith(base + ".")]


# --------------------------------------------------------------------------------------------
# Metrics and TensorBoard


def format_metrics(pairs):
    """``k=v k=v``: the stable line format metric regexes match. Floats: rates (*_per_sec) with 1
    decimal, durations (*_sec) with 2, everything else with 4."""
    parts = []
    for key, value in pairs:
        if isinstance(value, float):
            digits = 1 if key.endswith("_per_sec") else 2 if key.endswith("_sec") else 4
            value = f"{value:.{digits}f}"
        parts.append(f"{key}={value}")
    return " ".join(parts)


class TensorBoardWriter:
    """tensorboardX SummaryWriter when enabled and importable; otherwise every call is a no-op."""

    def __init__(self, logdir, enabled=True):
        self._writer = None
        if not enabled:
            return
        try:
            from tensorboardX import SummaryWriter
        except ImportError:
            return
        try:
            os.makedirs(logdir, exist_ok=True)
            self._writer = SummaryWriter(logdir=logdir)
        except OSError as exc:
            # Scalars are a convenience: an unwritable log dir must not cost the training job.
            print(f"warning: TensorBoard disabled, cannot write {logdir}: {exc}", file=sys.stderr, flush=True)

    @property
    def active(self):
        return self._writer is not None

    def scalars(self, step, values):
        if self._writer is None:
            return
        for tag, value in values.items():
            self._writer.add_scalar(tag, value, step)
        self._writer.flush()

    def close(self):
        if self._writer is not None:
            self._writer.close()
            self._writer = None


# --------------------------------------------------------------------------------------------
# SIGTERM


class StopRequest:
    """Set by SIGTERM (SageMaker stop, spot interruption); the training loop polls it.

    The handler only records the request: the loop finishes its batch, agrees with the other ranks
    to stop at the same step, checkpoints and exits 143.
    """

    def __init__(self):
        self._event = threading.Event()
        self.signum = None

    def install(self, signals=(signal.SIGTERM,)):
        for signum in signals:
            signal.signal(signum, self._handle)
        return self

    def _handle(self, signum, frame):
        self.signum = signum
        self._event.set()

    def set(self):
        self._event.set()

    @property
    def requested(self):
        return self._event.is_set()
