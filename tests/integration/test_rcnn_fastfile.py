"""R-CNN on a FastFile channel, as SageMaker runs it: 2 hosts x 2 ranks, the channel a read-only mount read on demand
(a read-only bind mount here, TrainingInputMode FastFile in inputdataconfig.json).

In FastFile mode every first read of a file streams it from S3, so what the ranks open is what the job downloads.
Every open of a channel file is logged by an LD_PRELOAD shim (open_log.c, compiled here with the host's cc) in every
process of both containers, with the rank that made it. The test proves: the annotation files are read once per host,
by the host's local rank 0 (not once per rank); the images are read lazily, each by the one rank that trains or
validates on it, and the images no rank uses are never opened."""

import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from cluster_jobs import DOCKER
from local_job import Channel, JobSpec, run_job
from rcnn_cluster_jobs import CHEAP

TRAIN_IMAGES, VAL_IMAGES = 16, 4
# One iteration: each rank opens the one image it trains on and no other (that the ranks' batches of an epoch are
# disjoint over many iterations: tests/programs/rcnn/test_data.py).
HOSTS, RANKS_PER_HOST, ITERATIONS = 2, 2, 1
OPEN_LOG = "/opt/ml/output/data/channel-opens.log"  # each host's own output dir


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    built = tmp_path_factory.mktemp("shim") / "open_log.so"
    source = Path(__file__).with_name("open_log.c")
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(built), str(source), "-ldl"], check=True)
    return built


@pytest.fixture(scope="module")
def coco(image, tmp_path_factory):
    root = tmp_path_factory.mktemp("coco")
    subprocess.run([DOCKER, "run", "--rm", "-v", f"{root}:/data", image, "synth-data", "coco", "/data", "--train",
                    str(TRAIN_IMAGES), "--val", str(VAL_IMAGES)], check=True, capture_output=True)
    return root


def channel_opens(host_root):
    """{file path: [rank, ...]} of every open of a channel file on this host (directories left out)."""
    opens = defaultdict(list)
    log = host_root / OPEN_LOG.removeprefix("/opt/ml/")
    for line in log.read_text().splitlines():
        rank, _pid, path = line.split(" ", 2)
        if Path(path).suffix in (".json", ".jpg"):
            opens[path].append(rank)
    return opens


def test_fastfile_channel_is_read_once_per_host_and_lazily(image, shim, coco, tmp_path):
    hps = {"sagemaker_program": "faster_rcnn", **CHEAP, "max-iterations-per-epoch": str(ITERATIONS),
           "sagemaker_mpi_num_of_processes_per_host": str(RANKS_PER_HOST),
           "sagemaker_mpi_custom_mpi_options": "-x LD_PRELOAD -x OPEN_LOG"}  # the worker's ranks need them too
    spec = JobSpec(image=image, hosts=HOSTS, hyperparameters=hps, timeout_s=900,
                   env={"LD_PRELOAD": "/shim/open_log.so", "OPEN_LOG": OPEN_LOG},
                   extra_mounts=[(shim.parent, "/shim", "ro")], channels=[Channel("train", coco, mode="FastFile")])
    result = run_job(spec, tmp_path)
    assert result.exit_codes == [0] * HOSTS, result.describe()
    assert '"TrainingInputMode": "FastFile"' in (tmp_path / "algo-1/input/config/inputdataconfig.json").read_text()
    assert "val_bbox_map=" in result.master.logs, result.master.logs[-3000:]

    channel = "/opt/ml/input/data/train"
    trained, validated = defaultdict(set), defaultdict(set)
    for index, host in enumerate(result.hosts):
        opens = channel_opens(host.root)
        local_rank_0 = str(index * RANKS_PER_HOST)  # mpirun places ranks by slot: 0, 1 on algo-1; 2, 3 on algo-2
        for split in ("train2017", "val2017"):
            annotations = f"{channel}/annotations/instances_{split}.json"
            assert opens[annotations] == [local_rank_0], (host.name, annotations, opens[annotations])
        for path, ranks in opens.items():
            if path.endswith(".jpg"):
                assert len(ranks) == 1, f"{host.name}: {path} opened {len(ranks)} times, by ranks {ranks}"
                (trained if "/train2017/" in path else validated)[ranks[0]].add(path)
    ranks = [str(r) for r in range(HOSTS * RANKS_PER_HOST)]
    # Lazily: each rank opened its own iterations' images and its validation shard, nothing else.
    assert {r: len(trained[r]) for r in ranks} == {r: ITERATIONS for r in ranks}, dict(trained)
    assert {r: len(validated[r]) for r in ranks} == {r: VAL_IMAGES // len(ranks) for r in ranks}, dict(validated)
    all_trained = set().union(*trained.values())
    assert len(all_trained) == len(ranks) * ITERATIONS < TRAIN_IMAGES, "a train image was read by two ranks"
