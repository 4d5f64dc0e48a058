"""Helpers for the R-CNN program tests (inside the image: `make image-tests`).

Everything runs for real: the entrypoints as subprocesses (under mpirun for the 2-rank tests) on tiny
synthetic COCO data written by sagemaker_mxnet_data.synthetic_coco. Nothing is downloaded: the
models are built with --pretrained-base false, and the one test of the download path points GluonCV's
model store at a closed local port.
"""

import functools
import importlib
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from entrypoint_job import Job, mpi_problem, session_pids

from programs.helpers import base_env, recorded_run

ROOT = Path(__file__).resolve().parents[3]
ENTRYPOINTS = ROOT / "entrypoints"
CONTAINER_SRC = ROOT / "container" / "src"

SCRIPTS = {"faster": ENTRYPOINTS / "faster_rcnn.py", "mask": ENTRYPOINTS / "mask_rcnn.py"}
# What every mpirun here needs on 2 cores: yielding MPI progress instead of busy polling.
MPIRUN_FLAGS = ["--allow-run-as-root", "--oversubscribe", "-mca", "mpi_yield_when_idle", "1",
                "-bind-to", "none"]
# Smallest settings that still exercise the whole model: short side 256 gives the C4 RPN enough anchors
# for its 2000 training proposals; 50 proposals per image keep CPU validation to seconds.
TINY_ARGS = ["--pretrained-base", "false", "--short", "256", "--max-size", "320", "--num-workers", "0",
             "--rpn-test-post-nms", "50", "--lr-warmup", "2", "--log-interval", "1"]


@functools.cache
def dev_venv_problem():
    for module in ("numpy", "mxnet", "gluoncv", "pycocotools", "PIL"):
        try:
            importlib.import_module(module)
        except ImportError:
            return f"needs {module}: run inside the image (make image-tests)"
    return None


@functools.cache
def horovod_problem():
    return dev_venv_problem() or mpi_problem()


def copy_coco(src, dst):
    shutil.copytree(src, dst)
    return Path(dst)


def edit_annotations(data_dir, split, edit):
    path = Path(data_dir) / "annotations" / f"instances_{split}.json"
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    return path


def rank_pids(sid, timeout=60):
    """{rank: pid} of the rank processes in a job's session (they carry OMPI_COMM_WORLD_RANK)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        ranks = {}
        for pid in session_pids(sid):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    environ = dict(i.split(b"=", 1) for i in f.read().split(b"\0") if b"=" in i)
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read()
            except OSError:
                continue
            if b"OMPI_COMM_WORLD_RANK" in environ and b"rcnn.py" in cmdline:
                rank = int(environ[b"OMPI_COMM_WORLD_RANK"])
                ranks[rank] = min(pid, ranks.get(rank, pid))  # a DataLoader worker is a younger child
        if ranks:
            return ranks
        time.sleep(0.2)
    raise AssertionError(f"no rank processes in session {sid}")


def start(model, workdir, args=(), env=None, ranks=1, command=None):
    """Starts an entrypoint like the launcher: directly for one process, under mpirun for several. `command`: what to
    run instead of the entrypoint (a wrapper of it)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    full_env = base_env(workdir, env)
    if ranks == 1:
        full_env.setdefault("OMP_NUM_THREADS", "2")
    argv = [*(command or [sys.executable, str(SCRIPTS[model])]), "--tensorboard-dir", str(workdir / "tensorboard"),
            *args]
    if ranks > 1:
        exported = [flag for key in full_env if key.startswith(("SM_", "MXNET_")) for flag in ("-x", key)]
        argv = ["mpirun", *MPIRUN_FLAGS, "-np", str(ranks), *exported, "-x", "PYTHONUNBUFFERED", "-x", "PYTHONPATH",
                "-x", "OMP_NUM_THREADS=1", *argv]
    proc = subprocess.Popen(argv, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=workdir, start_new_session=True)
    return Job(proc, workdir)


def run(model, workdir, args=(), env=None, ranks=1, timeout=600, command=None):
    return start(model, workdir, args, env, ranks, command).wait(timeout)


def train_both_layouts(model, root, data, args, timeout, **model_arguments):
    """`model` trained on `data`'s 2 images as one batch, through recorded_run.py (with GluonCV's `model_arguments`),
    as 1 rank x 2 images and as 2 ranks x 1 image side by side, one thread per rank, every iteration logged:
    (the 1-rank job, the 2-rank job), finished. `args`: the program's other arguments."""
    command, path = recorded_run(model, **model_arguments)
    env = {**channel_env(data), **path, "OMP_NUM_THREADS": "1"}
    jobs = []
    for ranks, name in ((1, "one"), (2, "two")):
        workdir = Path(root) / name
        own = ["--pretrained-base", "false", "--num-workers", "0", "--batch-size", str(2 // ranks),
               "--log-interval", "1", "--save-interval", "0", "--tensorboard", "false",
               "--checkpoint-dir", str(workdir / "checkpoints"), "--model-dir", str(workdir / "model")]
        jobs.append(start(model, workdir, [*own, *args], env=env, ranks=ranks, command=command))
    return tuple(job.wait(timeout) for job in jobs)


# An epoch's first iteration line, as rank 0 logs it (--log-interval 1): loss, the terms, lr.
FIRST_ITERATION_LINE = re.compile(r"^epoch=\d+ iter=1 loss=(\S+) (.*) lr=(\S+) ", re.M)


def first_iterations(job, loss_names):
    """Each epoch's first iteration, as rank 0 logged it: ({"loss": total, name: term}, lr)."""
    found = []
    for loss, terms, lr in FIRST_ITERATION_LINE.findall(job.stdout):
        values = dict(pair.split("=") for pair in terms.split())
        found.append(({"loss": float(loss), **{name: float(values[name]) for name in loss_names}}, float(lr)))
    return found


def channel_env(train_dir, val_dir=None):
    env = {"SM_CHANNEL_TRAIN": str(train_dir)}
    channels = ["train"]
    if val_dir is not None:
        env["SM_CHANNEL_VAL"] = str(val_dir)
        channels.append("val")
    env["SM_CHANNELS"] = json.dumps(channels)
    return env


# Checks that need mxnet (the GPU count, GluonCV's model store and its hashes, the datasets) pay its import
# (~3-6 s, more on a busy 2-core machine); the tests of those failing fast allow this generous bound. Input
# checks run before mxnet is imported: their tests run with mxnet unimportable (mxnet_blocked_env) instead.
WITH_MXNET_SECONDS = 45


def assert_usage_error(job, prog, *needles, seconds=None):
    """Exit 2 with one `<prog>: error: ` line holding every needle; within `seconds` when given."""
    assert job.returncode == 2, job.explain()
    if seconds is not None:
        assert job.seconds < seconds, f"took {job.seconds:.1f} s\n{job.explain()}"
    errors = [line for line in job.stderr.splitlines() if line.startswith(f"{prog}: error: ")]
    assert len(errors) == 1, job.explain()
    for needle in needles:
        assert needle in errors[0], job.explain()
    return errors[0]
