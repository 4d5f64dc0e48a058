"""Work done once per host for all the ranks on it: local rank 0 does it, the other ranks of its host load its result.

Rank 0 of each host runs the function and publishes its result, pickled, in a directory on the host's local disk
(the container's /tmp, which only that host's ranks share); the other local ranks wait for the file and load it.
Used where every rank would otherwise read the same files of a channel: in FastFile mode each first read of a file
streams it from S3, and 8 ranks reading a 450 MB COCO annotation file is 8 downloads and 8 parses.

Runs before MPI is initialised (no collective can be used yet), so the ranks of a host meet through files named
by the job's launch (Open MPI's PMIx namespace, the same for all ranks of one mpirun). A failure of local rank 0
reaches its host's other ranks as the same one-line error: they print it and exit as it does, and rank 0 waits
(briefly) until they have read it, so that every rank reports the bad input before mpirun ends the job. Every wait
has a deadline and names what it waited for.
"""

import os
import pickle
import re
import time

from mxnet_programs.process import EXIT_INTERNAL, ProgramError, Stopped

WAIT_DEADLINE_S = 3600.0  # local rank 0 reading and checking a channel (COCO's 450 MB annotations, from S3)
ERROR_READ_DEADLINE_S = 10.0  # how long local rank 0 waits for the others to read its error before exiting
POLL_S = 0.02


def share_dir(environ=None):
    """The directory this launch's ranks on this host share: under $TMPDIR or /tmp, named by the launch."""
    environ = os.environ if environ is None else environ
    launch = environ.get("PMIX_NAMESPACE") or f"ppid-{os.getppid()}"  # a direct child of mpirun/orted otherwise
    base = environ.get("TMPDIR") or "/tmp"
    return os.path.join(base, "mxnet-programs-once", re.sub(r"[^A-Za-z0-9_.-]", "_", launch))


def once_per_host(name, fn, env, what, stop=None, environ=None, deadline_s=WAIT_DEADLINE_S):
    """fn() on local rank 0 of each host; its result on every local rank. `name` names the work in the shared
    directory; `what` says what it is in error messages ("read the train channel"). One rank per host (or none
    known): fn() directly."""
    if env.local_size < 2:
        return fn()
    directory = share_dir(environ)
    os.makedirs(directory, exist_ok=True)
    result_path = os.path.join(directory, f"{name}.pickle")
    error_path = os.path.join(directory, f"{name}.error")
    if env.local_rank == 0:
        return _run_and_publish(fn, directory, name, result_path, error_path, env.local_size)
    return _wait_and_load(directory, name, result_path, error_path, env, what, stop, deadline_s)


def _publish(path, value):
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)


def _run_and_publish(fn, directory, name, result_path, error_path, local_size):
    try:
        result = fn()
    except ProgramError as exc:
        _publish(error_path, (str(exc), exc.exit_code))
        _await_readers(directory, name, local_size, ERROR_READ_DEADLINE_S)
        _remove(directory, name)
        raise
    except BaseException as exc:
        _publish(error_path, (f"local rank 0 of this host failed: {type(exc).__name__}: {exc}", EXIT_INTERNAL))
        _await_readers(directory, name, local_size, ERROR_READ_DEADLINE_S)
        _remove(directory, name)
        raise
    _publish(result_path, result)
    return result


def _remove(directory, name):
    for entry in os.listdir(directory):
        if entry.startswith(f"{name}."):
            try:
                os.remove(os.path.join(directory, entry))
            except FileNotFoundError:  # another reader removed it first
                pass


def _readers(directory, name):
    return [n for n in os.listdir(directory) if n.startswith(f"{name}.read-by-")]


def _await_readers(directory, name, local_size, deadline_s):
    """Until every other local rank has read the published file (or the deadline passes: they may be gone)."""
    deadline = time.monotonic() + deadline_s
    while len(_readers(directory, name)) < local_size - 1 and time.monotonic() < deadline:
        time.sleep(POLL_S)


def _mark_read(directory, name, local_rank):
    with open(os.path.join(directory, f"{name}.read-by-{local_rank}"), "w"):
        pass


def _wait_and_load(directory, name, result_path, error_path, env, what, stop, deadline_s):
    deadline = time.monotonic() + deadline_s
    while True:
        if os.path.exists(result_path):
            with open(result_path, "rb") as f:
                result = pickle.load(f)
            _mark_read(directory, name, env.local_rank)
            if len(_readers(directory, name)) == env.local_size - 1:  # the last reader cleans up
                _remove(directory, name)
            return result
        if os.path.exists(error_path):
            with open(error_path, "rb") as f:
                message, exit_code = pickle.load(f)
            _mark_read(directory, name, env.local_rank)
            raise ProgramError(message, exit_code)
        if stop is not None and stop.requested:
            raise Stopped(f"while waiting for local rank 0 to {what}")
        if time.monotonic() >= deadline:
            raise ProgramError(f"waited {deadline_s:g} s for local rank 0 of this host to {what} ({result_path}): "
                               "it neither finished nor failed")
        time.sleep(POLL_S)
