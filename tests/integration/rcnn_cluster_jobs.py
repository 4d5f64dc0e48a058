"""Shared by the R-CNN tests across containers: the smallest settings that run the whole model, a synthetic
COCO-format set of one's own classes, and each model's 2-host x 1-rank job, run once for the session and restarted
once as SageMaker restarts a job (tests read it through conftest.py's `rcnn_jobs`).

The job is what test_rcnn_cluster.py (train and validate across 2 hosts, the ranks' layout, the export) and
test_output_config_cluster.py (checkpoint_local_path and TensorBoardOutputConfig, then the restart that resumes from
every host's LocalPath) both need: one run with the two config files answers both, and its restart answers the second
alone. A run is about 10 s an image-iteration of ResNet-50 on a core, plus MXNet's import; each run here trains one
iteration and validates 4 images."""

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cluster_jobs import DOCKER
from local_job import Channel, JobSpec, run_job

# Smallest settings that still run the whole model (see tests/programs/rcnn/helpers.py).
TINY = {"pretrained-base": "false", "short": "256", "max-size": "320", "num-workers": "0",
        "rpn-test-post-nms": "50", "lr-warmup": "2", "log-interval": "1", "epochs": "1",
        "max-iterations-per-epoch": "1"}
# Smaller images for every job here: short side 192 and max-size 256, the fewest pixels at which the model zoo's RPN
# keeps its 2000 proposals an image in training: synth-data's images (213-320 px a side, at most 1.5 : 1) still give
# the C4 network 2160 anchors (15 a cell of its 12 x 12 stride-16 map at the least), FPN's levels 9207; 10 proposals
# an image in validation instead of 50.
SMALL_C4 = {**TINY, "short": "192", "max-size": "256", "rpn-test-post-nms": "10"}
# Cheaper still, for the jobs that run once (FastFile, the parameter server), whose checks do not depend on the network
# (which files the ranks open; the parameter servers' wiring): all hyperparameters. A C4 network's step is mostly its
# 128 RoIs an image through ResNet-50's last stage (the RCNN head); the FPN variant's head is two dense layers over
# 7 x 7 x 256 RoI features: FastFile's iteration took 34 s against the C4 network's 126 s, back to back at load 12-14
# (docs/testing.md).
CHEAP = {**SMALL_C4, "use-fpn": "true"}
# Each model's shared job: Mask R-CNN's stays the C4 network, so that the model zoo's default network trains and
# validates across 2 hosts; Faster R-CNN's is the FPN variant (nothing in the job's checks depends on the network):
# 63 s against 130 s for its two runs, back to back, quiet (Mask R-CNN's FPN variant saved nothing: 110 against 118 s).
# At these sizes the restarted Mask R-CNN job's epoch 1 did not beat epoch 0 (mAP 0 both; Faster R-CNN's did), so its
# export takes epoch 0's weights from the checkpoints.
SETTINGS = {"faster_rcnn": CHEAP, "mask_rcnn": SMALL_C4}

CLASSES = ["big ship", "tug"]
CATEGORIES = [{"id": 7, "name": "big ship"}, {"id": 4, "name": "tug"}]  # synth-data's ids: 3 (K - i) + 1

HOSTS = ("algo-1", "algo-2")
CKPT, TB = "/checkpoints-custom/rcnn", "/tensorboard-custom"  # LocalPaths: not SageMaker's defaults


def config_files(ckpt=CKPT, tb=TB):
    """What SageMaker writes for checkpoint_s3_uri + checkpoint_local_path and a TensorBoardOutputConfig."""
    return {"checkpointconfig.json": json.dumps({"LocalPath": ckpt, "S3Uri": "s3://bucket/job/checkpoints"}),
            "tensorboardoutputconfig.json": json.dumps({"LocalPath": tb, "S3OutputPath": "s3://bucket/job/tb"})}


def host_dirs(root):
    """host -> (its checkpoint LocalPath, its TensorBoard LocalPath) on this machine, made empty."""
    dirs = {}
    for host in HOSTS:
        ckpt, tb = root / host / "ckpt", root / host / "tb"
        ckpt.mkdir(parents=True)
        tb.mkdir(parents=True)
        dirs[host] = (ckpt, tb)
    return dirs


# Every process of the container that runs a rank of the R-CNN programs: (its rank, the world size), as Open MPI
# gave it to the process. Read from /proc, not from the launcher or the program.
RANKS_HERE = r"""
import json, os
found = set()
for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
        cmdline = open(f'/proc/{pid}/cmdline', 'rb').read()
        environ = dict(v.split(b'=', 1) for v in open(f'/proc/{pid}/environ', 'rb').read().split(b'\0') if b'=' in v)
    except OSError:
        continue
    if b'rcnn' in cmdline and b'OMPI_COMM_WORLD_RANK' in environ:
        found.add((int(environ[b'OMPI_COMM_WORLD_RANK']), int(environ[b'OMPI_COMM_WORLD_SIZE'])))
print(json.dumps(sorted(found)))
"""


@dataclass
class Run:
    result: object  # local_job's JobResult
    dirs: dict  # host -> (checkpoint LocalPath, TensorBoard LocalPath) on this machine
    ranks_on: dict  # host -> [[rank, world size], ...] found in its /proc while training (first run only)


class RcnnJobs:
    """Each model's job, run when a test first asks for it: `first(program)` (epoch 0, trains and validates) and
    `restarted(program)` (new containers and /opt/ml, the same config, epochs=2: resumes at epoch 1)."""

    def __init__(self, image, root: Path):
        self.image, self.root = image, root
        self._coco, self._runs = None, {}

    @property
    def coco(self) -> Path:
        """synth-data's COCO layout with two classes of one's own (8 train, 4 val images)."""
        if self._coco is None:
            subprocess.run([DOCKER, "run", "--rm", "-v", f"{self.root}:/data", self.image, "synth-data", "coco",
                            "/data/coco", "--classes", ",".join(CLASSES)], check=True, capture_output=True)
            self._coco = self.root / "coco"
        return self._coco

    def first(self, program) -> Run:
        if (program, "first") not in self._runs:
            self._runs[program, "first"] = self._run(program, "first", epochs=1, restore_from=None)
        return self._runs[program, "first"]

    def restarted(self, program) -> Run:
        """The restart: S3's checkpoints (the files rank 0 wrote on algo-1: one S3 prefix for the job) restored into
        every host's LocalPath."""
        if (program, "second") not in self._runs:
            first = self.first(program)
            self._runs[program, "second"] = self._run(program, "second", epochs=2, restore_from=first.dirs["algo-1"][0])
        return self._runs[program, "second"]

    def _run(self, program, name, epochs, restore_from) -> Run:
        root = self.root / program / name
        dirs = host_dirs(root)
        if restore_from is not None:
            for ckpt, _ in dirs.values():
                shutil.copytree(restore_from, ckpt, dirs_exist_ok=True)
        ranks_on = {}

        def where_the_ranks_run(job):
            # The program's start line, said once every rank is up; training and validation follow.
            job.wait_for_log("algo-1", f"{program}: model=", timeout=600)
            for host in HOSTS:
                ranks_on[host] = json.loads(job.exec(host, "python3", "-c", RANKS_HERE).stdout)

        spec = JobSpec(image=self.image, hosts=len(HOSTS), timeout_s=900, config_files=config_files(),
                       hyperparameters={"sagemaker_program": program, **SETTINGS[program], "epochs": str(epochs),
                                        "mpi_peer_timeout_s": "60"},
                       channels=[Channel("train", self.coco)],
                       host_mounts={host: [(ckpt, CKPT, "rw"), (tb, TB, "rw")] for host, (ckpt, tb) in dirs.items()},
                       during=where_the_ranks_run if restore_from is None else None)
        return Run(run_job(spec, root / "job"), dirs, ranks_on)
