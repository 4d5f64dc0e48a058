"""Helpers for the program tests: run entrypoints/mnist.py like the launcher does, feed Pipe FIFOs."""

import functools
import importlib
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from entrypoint_job import Job, mpi_problem
from mxnet_programs.sagemaker_env import DistEnv
from sagemaker_mxnet_data import synth_data

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINTS = ROOT / "entrypoints"
MNIST = ENTRYPOINTS / "mnist.py"
CONTAINER_SRC = ROOT / "container" / "src"

DEV_VENV_REASON = "needs numpy and mxnet: run inside the image (make image-tests)"

# What every mpirun here needs on 2 cores: yielding MPI progress threads instead of spinning.
MPIRUN_FLAGS = ["--allow-run-as-root", "--oversubscribe", "-mca", "mpi_yield_when_idle", "1"]


@functools.cache
def horovod_problem():
    """Why multi-rank tests cannot run here, or None."""
    for module in ("numpy", "mxnet"):
        try:
            importlib.import_module(module)
        except ImportError:
            return DEV_VENV_REASON
    return mpi_problem()


def make_mnist(out_dir, train, test, seed=0, fmt="idx"):
    code = synth_data.main(["mnist", str(out_dir), "--train", str(train), "--test", str(test),
                          "--seed", str(seed), "--format", fmt])
    assert code == 0
    return Path(out_dir)


def base_env(workdir, extra=None):
    """A clean SageMaker-like env rooted in `workdir` (no real /opt/ml or ~/.mxnet is touched)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SM_", "OMPI_", "PMI_", "HOROVOD_", "OMP_NUM_THREADS", "MXNET_"))}
    workdir = Path(workdir)
    env.update({
        "SM_INPUT_DIR": str(workdir / "input"),
        "SM_MODEL_DIR": str(workdir / "model"),
        "SM_OUTPUT_DATA_DIR": str(workdir / "output" / "data"),
        "SM_CHECKPOINT_DIR": str(workdir / "checkpoints"),
        "MXNET_HOME": str(workdir / "mxnet-home"),
        "PYTHONUNBUFFERED": "1",
        # The programs import the launcher package (MNIST and RecordIO readers, COCO categories): from this
        # source tree, as pytest.ini gives it to the tests, where the image's installed copy is not there.
        "PYTHONPATH": os.pathsep.join(filter(None, [str(CONTAINER_SRC), os.environ.get("PYTHONPATH")])),
    })
    env.update(extra or {})
    return env


def mxnet_blocked_env(workdir, env=None):
    """`env` plus a PYTHONPATH on which `import mxnet` raises (and so does whatever imports it: gluoncv,
    horovod.mxnet): a check that must fail before MXNet is imported, which takes seconds, fails the run
    if it comes after. A condition instead of a timed bound."""
    blocker = Path(workdir) / "mxnet-blocker"
    (blocker / "mxnet").mkdir(parents=True, exist_ok=True)
    (blocker / "mxnet" / "__init__.py").write_text(
        "raise RuntimeError('mxnet was imported before the input checks finished')\n")
    path = base_env(workdir)["PYTHONPATH"]
    return {**(env or {}), "PYTHONPATH": os.pathsep.join([str(blocker), path])}


def start_mnist(workdir, args=(), env=None, ranks=1, command=None):
    """Starts mnist.py like the launcher does: directly for one process, under mpirun for several. `command`: what
    to run instead of mnist.py (a wrapper of it)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    full_env = base_env(workdir, env)
    argv = [*(command or [sys.executable, str(MNIST)]), "--tensorboard-dir", str(workdir / "tensorboard"), *args]
    if ranks > 1:
        exported = [flag for key in full_env if key.startswith("SM_") for flag in ("-x", key)]
        argv = ["mpirun", *MPIRUN_FLAGS, "-np", str(ranks), *exported, "-x", "PYTHONUNBUFFERED", "-x", "PYTHONPATH",
                *argv]
    proc = subprocess.Popen(argv, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=workdir)
    return Job(proc, workdir)


def run_mnist(workdir, args=(), env=None, ranks=1, timeout=120, command=None):
    return start_mnist(workdir, args, env, ranks, command).wait(timeout)


def optimizer_learning_rate(states_file):
    """The learning rate of the optimizer a checkpoint's trainer states carry (Gluon's Trainer.save_states pickles
    its updater's states with the optimizer itself): the one the trainer updated the weights with."""
    import pickle

    _, optimizer = pickle.loads(Path(states_file).read_bytes())
    return optimizer.learning_rate


RECORDED_RUN = Path(__file__).with_name("recorded_run.py")


def recorded_run(program, **model_arguments):
    """The command that runs `program` (mnist, faster, mask) through recorded_run.py, and the PYTHONPATH it needs.
    `model_arguments` (R-CNN): GluonCV model constructor arguments instead of the model zoo's."""
    overrides = [f"{name}={value}" for name, value in model_arguments.items()]
    return [sys.executable, str(RECORDED_RUN), program, *overrides], {"PYTHONPATH": os.pathsep.join([str(ENTRYPOINTS),
                                                                                         str(CONTAINER_SRC)])}


def channels_env(data_dir):
    return {"SM_CHANNEL_TRAIN": str(Path(data_dir) / "train"),
            "SM_CHANNEL_TEST": str(Path(data_dir) / "test"),
            "SM_CHANNELS": '["test", "train"]'}


def rank_pids(mpirun_pid, timeout=30):
    """{rank: pid} of mpirun's rank processes, found via /proc (children carrying OMPI_COMM_WORLD_RANK)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        ranks = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid != mpirun_pid:
                    continue
                with open(f"/proc/{entry}/environ", "rb") as f:
                    environ = dict(item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item)
            except (OSError, ValueError, IndexError):
                continue
            if b"OMPI_COMM_WORLD_RANK" in environ:
                ranks[int(environ[b"OMPI_COMM_WORLD_RANK"])] = int(entry)
        if ranks:
            return ranks
        time.sleep(0.1)
    raise AssertionError(f"no rank processes under mpirun pid {mpirun_pid}")


class PipeFeeder:
    """Plays SageMaker in Pipe mode: for each channel, FIFO <data dir>/<channel>_<k> for pass k = 0, 1, ...

    Each pass's FIFO is created after the previous pass was written to its end (one reader per FIFO),
    and carries the bytes of the channel's source file (RecordIO), like an S3 object streamed in.
    """

    def __init__(self, data_dir, sources, passes):
        self.data_dir, self.passes = Path(data_dir), passes
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.fed = {channel: 0 for channel in sources}
        self.errors = []
        self._closing = False
        self._threads = [
            threading.Thread(target=self._feed, args=(channel, Path(source).read_bytes()), daemon=True)
            for channel, source in sources.items()]
        for thread in self._threads:
            thread.start()

    def _feed(self, channel, payload):
        try:
            for k in range(self.passes):
                fifo = self.data_dir / f"{channel}_{k}"
                os.mkfifo(fifo)
                with open(fifo, "wb") as out:  # blocks until the entrypoint opens it
                    if self._closing:
                        return
                    out.write(payload)
                fifo.unlink()
                self.fed[channel] += 1
        except BrokenPipeError:
            if not self._closing:
                self.errors.append(f"{channel}: reader closed the FIFO early")
        except OSError as exc:
            self.errors.append(f"{channel}: {exc}")

    def close(self):
        """Unblocks writers still waiting for a reader (after a failed run), then joins them."""
        self._closing = True
        for thread in self._threads:
            for _ in range(50):
                if not thread.is_alive():
                    break
                for fifo in self.data_dir.glob("*_*"):
                    try:
                        os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
                    except OSError:
                        pass
                thread.join(0.1)


# Two hosts with two ranks each, and their input data config (channels train and test).
HOSTS, PER_HOST = 2, 2
LAYOUT = [DistEnv(rank=h * PER_HOST + local, size=HOSTS * PER_HOST, local_rank=local, local_size=PER_HOST)
          for h in range(HOSTS) for local in range(PER_HOST)]


def input_config(train="FullyReplicated", test="FullyReplicated"):
    return {"train": {"TrainingInputMode": "File", "S3DistributionType": train, "RecordWrapperType": "None"},
            "test": {"TrainingInputMode": "File", "S3DistributionType": test, "RecordWrapperType": "None"}}


def recorded_first_step(model_dir):
    """The trainable weights recorded by recorded_run.py in `model_dir`: (before the first step, after it)."""
    import numpy as np

    return tuple(np.load(Path(model_dir) / name) for name in ("weights-step-0.npz", "weights-step-1.npz"))


def first_step_differences(one_dir, two_dir):
    """Two runs recorded by recorded_run.py: whether they started from the same weights, for each trainable
    parameter |d1 - d2| / |d1|, d1 and d2 its change in each run's first step (0 where neither run changed it), and
    how many parameters the first run's step changed."""
    import numpy as np

    start, after = zip(*(recorded_first_step(d) for d in (one_dir, two_dir)))
    names = sorted(start[0].files)
    assert names == sorted(start[1].files), "the runs trained other parameters"
    same_start = all(np.array_equal(start[0][name], start[1][name]) for name in names)
    differences = {}
    for name in names:
        one, two = after[0][name] - start[0][name], after[1][name] - start[1][name]
        size = np.linalg.norm(one)
        differences[name] = float(np.linalg.norm(one - two) / size) if size else (float("inf") if two.any() else 0.0)
    changed = sum(1 for name in names if not np.array_equal(after[0][name], start[0][name]))
    return same_start, differences, changed


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def mnist_argv(workdir, args):
    return [sys.executable, str(MNIST), "--tensorboard-dir", str(Path(workdir) / "tensorboard"), *args]


class ParameterServerJob:
    """A scheduler, a server and the workers (`argv`, mnist.py in most tests) of one host, as processes;
    worker_env(rank): a worker's own variables."""

    def __init__(self, workdir, argv, env, workers=2, worker_env=lambda rank: {}):
        workdir = Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        dmlc = {"DMLC_PS_ROOT_URI": "127.0.0.1", "DMLC_PS_ROOT_PORT": str(free_port()), "DMLC_NUM_SERVER": "1",
                "DMLC_NUM_WORKER": str(workers), "DMLC_INTERFACE": "lo"}
        full = {**base_env(workdir, env), **dmlc}
        role = [sys.executable, "-c", "import mxnet"]
        self.roles = [subprocess.Popen(role, env={**full, "DMLC_ROLE": name}, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL) for name in ("scheduler", "server")]
        self.workers = [Job(subprocess.Popen(argv, env={**full, "DMLC_ROLE": "worker", "SMMH_WORKER_RANK": str(rank),
                                                        "SMMH_LOCAL_WORKER_RANK": str(rank),
                                                        "SMMH_LOCAL_WORKERS": str(workers), **worker_env(rank)},
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=workdir),
                            workdir)
                        for rank in range(workers)]

    def wait(self, timeout):
        deadline = time.time() + timeout
        try:
            for worker in self.workers:
                worker.wait(max(1, deadline - time.time()))
        finally:
            self.end()
        return self.workers

    def end(self):
        """The launcher's part at the end: the roles serve until told, and nothing may outlive the job."""
        for process in [*self.roles, *(worker.proc for worker in self.workers)]:
            if process.poll() is None:
                process.kill()
                process.wait(10)
