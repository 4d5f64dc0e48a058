"""Helpers for the R-CNN program tests (inside the image: `make image-tests`).

Everything runs for real: the entrypoints as subprocesses (under mpirun for the 2-rank tests) on tiny
synthetic COCO data written by sagemaker_mxnet_data.synthetic_coco. Nothing is downloaded: the
models are built with --pretrained-base false, and the one test of the download path points GluonCV's
model store at a closed local port.
"""

import functools
import importlib
import json
import os
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


def replaced(args, values):
    """`args` with the value after each flag in `values` replaced by the flag's value there."""
    return [values.get(args[i - 1], value) if i else value for i, value in enumerate(args)]


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
            if b"OMPI_COMM_WORLD_RANK" in environ and (b"rcnn.py" in cmdline or b"recorded_run.py" in cmdline):
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
        # --rpn-test-post-nms: these runs do not validate, but rank 0 exports the network at the end, one inference
        # forward with the model zoo's 1000 proposals through the RCNN head (a minute at load 10) unless told 50.
        own = ["--pretrained-base", "false", "--num-workers", "0", "--batch-size", str(2 // ranks),
               "--log-interval", "1", "--save-interval", "0", "--tensorboard", "false", "--rpn-test-post-nms", "50",
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


# Fine-tuning and export (test_finetune.py, test_model_files.py) share one brief training run: a Mask R-CNN trained on
# SOURCE_CLASSES stands in for a COCO-trained detector; the fine-tuning set shares two of its classes (at the same
# positions, so they look the same: synthetic_coco draws class i as shape i mod 5), drops one and adds one.
SOURCE_CLASSES = ["bolt", "nut", "spring"]
TARGET_CLASSES = ["bolt", "nut", "washer"]
SMALL = 128
# GluonCV's constructor arguments for cheap training on SMALL-pixel images (training only: inference is the model
# zoo's): 8 RoIs per image for the RCNN head, up to half of them positive; every anchor (960 at 128 px) a proposal
# before and after the RPN's NMS (the zoo's 2000 is more than there are anchors).
SMALL_MODEL = {"num_sample": 8, "pos_ratio": 0.5, "rpn_train_pre_nms": 960, "rpn_train_post_nms": 960}
SMALL_ARGS = ["--pretrained-base", "false", "--short", str(SMALL), "--max-size", str(SMALL), "--batch-size", "2",
              "--num-workers", "0", "--log-interval", "1", "--rpn-test-post-nms", "50", "--lr", "0.16",
              "--lr-warmup", "2", "--save-interval", "0", "--tensorboard", "false"]
SOURCE_EPOCHS = 4  # of 2 iterations (4 images, 2 a batch)


# The wiring tests' runs (what a run does: trains, validates, resumes, splits a channel, stops on SIGTERM; not what it
# learns): TINY_ARGS's settings at short side SMALL and SMALL_MODEL's model, through recorded_run.py (the program's
# main), about 1.5 s an image-iteration instead of 10. max-size 208: the coco fixture's 200-320 px images keep short side
# SMALL (at most 1.6 : 1, so 205 px long), so the smallest input has SMALL_MODEL's 960 proposals in anchors.
WIRING_ARGS = replaced(TINY_ARGS, {"--short": str(SMALL), "--max-size": "208"})


def start_cheap(model, workdir, args=(), env=None, ranks=1):
    """`start` through recorded_run.py with SMALL_MODEL (its PYTHONPATH after `env`'s)."""
    command, path = recorded_run(model, **SMALL_MODEL)
    env = dict(env or {})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [env.get("PYTHONPATH"), path["PYTHONPATH"]]))
    return start(model, workdir, args, env=env, ranks=ranks, command=command)


def run_cheap(model, workdir, args=(), env=None, ranks=1, timeout=600):
    return start_cheap(model, workdir, args, env, ranks).wait(timeout)


def run_small(workdir, data, args, env=None, start_only=False):
    """Mask R-CNN through recorded_run.py (deterministic, SMALL_MODEL) on `data`, one process of one thread."""
    dirs = ["--checkpoint-dir", str(workdir / "checkpoints"), "--model-dir", str(workdir / "model")]
    env = {**channel_env(data), "OMP_NUM_THREADS": "1", **(env or {})}
    job = start_cheap("mask", workdir, [*SMALL_ARGS, *dirs, *args], env=env)
    return job if start_only else job.wait(900)


# ---- the exported network (test_model_files.py, and test_training.py for Faster R-CNN on COCO's classes)

EXAMPLES = ROOT / "examples"
EXPORT_TOLERANCE = 1e-4
GLUONCV_BLOCKED = "raise RuntimeError('the exported network must load without GluonCV')\n"
# In a fresh process, through examples/rcnn_inference.py: the exported network's outputs for an input array, and the
# example's answer for the image file.
SERVE = """
import json, sys
import mxnet as mx, numpy as np
import rcnn_inference

model_dir, image, x, out = sys.argv[1:]
detector = rcnn_inference.model_fn(model_dir)
outputs = detector.net(mx.nd.array(np.load(x)))
np.savez(out + ".npz", *[o.asnumpy() for o in outputs])
with open(image, "rb") as f:
    body, content_type = rcnn_inference.transform_fn(detector, f.read(), "application/x-image", "application/json")
with open(out + ".json", "w") as f:
    f.write(body)
"""


def trained_network(model_dir):
    """The trained network as model.json's recipe loads it, with the programs' proposals per image in validation."""
    from gluoncv import model_zoo

    info = json.loads((Path(model_dir) / "model.json").read_text())
    net = model_zoo.get_model(info["model"], pretrained=False, pretrained_base=False)
    net.initialize()
    if list(net.classes) != info["classes"]:
        net.reset_class(info["classes"])
    # --rpn-test-post-nms, as the programs set it on GluonCV's network
    net._rpn_test_post_nms = net.rpn._test_post_nms = info["rpn_test_post_nms"]
    if hasattr(net, "_rcnn_max_dets"):
        net._rcnn_max_dets = min(net._rcnn_max_dets, info["rpn_test_post_nms"])
    net.load_parameters(str(Path(model_dir) / f"{info['model']}-best.params"), ignore_extra=True)
    return net, info


def check_export(model_dir, image, workdir):
    """The exported network in `model_dir`, loaded in a fresh process where GluonCV cannot be imported, detects on
    `image` what the trained network does (to EXPORT_TOLERANCE), and the example's JSON answer is those detections
    in the image's pixels, best first."""
    import mxnet as mx
    import numpy as np
    from gluoncv.data.transforms.presets import rcnn as presets

    net, info = trained_network(model_dir)
    short = info["short"][-1] if isinstance(info["short"], list) else info["short"]
    original = mx.image.imread(str(image))
    x = presets.FasterRCNNDefaultValTransform(short, info["max_size"])(original, np.zeros((0, 5)))[0].expand_dims(0)
    np.save(workdir / "x.npy", x.asnumpy())
    reference = [o.asnumpy() for o in net(x)]
    ids, scores, boxes, *masks = (o[0] for o in reference)
    assert (ids >= 0).sum() > 0, "no detection to compare"

    blocker = workdir / "blocked"
    (blocker / "gluoncv").mkdir(parents=True)
    (blocker / "gluoncv" / "__init__.py").write_text(GLUONCV_BLOCKED)
    env = base_env(workdir, {"PYTHONPATH": f"{blocker}:{EXAMPLES}"})
    served = subprocess.run([sys.executable, "-c", SERVE, str(model_dir), str(image), str(workdir / "x.npy"),
                             str(workdir / "out")], env=env, capture_output=True, text=True, timeout=300)
    assert served.returncode == 0, served.stderr
    exported = np.load(workdir / "out.npz")
    assert len(exported.files) == len(reference)
    for k, ours in enumerate(reference):
        theirs = exported[f"arr_{k}"]
        assert ours.shape == theirs.shape, (k, ours.shape, theirs.shape)
        assert np.abs(ours - theirs).max() <= EXPORT_TOLERANCE, (k, np.abs(ours - theirs).max())

    answer = json.loads((workdir / "out.json").read_text())
    keep = np.flatnonzero(ids[:, 0] >= 0)
    keep = keep[np.argsort(-scores[keep, 0], kind="stable")]
    scale = x.shape[2] / original.shape[0]  # input / original
    assert [(d["class"], d["category_id"]) for d in answer] == \
        [(info["classes"][int(ids[k, 0])], info["category_ids"][int(ids[k, 0])]) for k in keep]
    assert np.allclose([d["score"] for d in answer], scores[keep, 0], atol=EXPORT_TOLERANCE)
    assert np.allclose([d["box"] for d in answer], boxes[keep] / scale, atol=EXPORT_TOLERANCE / scale)
    if masks:  # over each box: 14 x 14 for the C4 models
        assert np.allclose([d["mask"] for d in answer], masks[0][keep], atol=EXPORT_TOLERANCE)


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
