"""Faster and Mask R-CNN as SageMaker runs them: 2 hosts x 1 rank on a tiny synthetic COCO-format set of one's own
classes (not COCO's: two, one name with a space, ids 7 and 4), train + validate + export, no code; a val file whose
categories disagree stops the job at start with both files named in /opt/ml/output/failure. (COCO's own 80 on 2 hosts:
test_parameter_server_cluster.py's R-CNN job.)"""

import json
import re
import shutil
import subprocess

import pytest
from cluster_jobs import DOCKER
from local_job import Channel, JobSpec, run_job

# Smallest settings that still run the whole model (see tests/programs/rcnn/helpers.py).
TINY = {"pretrained-base": "false", "short": "256", "max-size": "320", "num-workers": "0",
        "rpn-test-post-nms": "50", "lr-warmup": "2", "log-interval": "1", "epochs": "1",
        "max-iterations-per-epoch": "2"}


CLASSES = ["big ship", "tug"]
CATEGORIES = [{"id": 7, "name": "big ship"}, {"id": 4, "name": "tug"}]  # synth-data's ids: 3 (K - i) + 1


@pytest.fixture(scope="module")
def coco(image, tmp_path_factory):
    root = tmp_path_factory.mktemp("coco")
    subprocess.run([DOCKER, "run", "--rm", "-v", f"{root}:/data", image, "synth-data", "coco", "/data", "--classes",
                    ",".join(CLASSES)], check=True, capture_output=True)
    return root


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


@pytest.mark.parametrize("program", ["faster_rcnn", "mask_rcnn"])
def test_two_hosts_train_and_validate(image, coco, tmp_path, program):
    ranks_on = {}

    def where_the_ranks_run(job):
        job.wait_for_log("algo-1", "epoch=0 iter=1 ", timeout=600)  # training under way: every rank is up
        for host in ("algo-1", "algo-2"):
            ranks_on[host] = json.loads(job.exec(host, "python3", "-c", RANKS_HERE).stdout)

    spec = JobSpec(image=image, hosts=2, hyperparameters={"sagemaker_program": program, **TINY},
                   channels=[Channel("train", coco)], timeout_s=900, during=where_the_ranks_run)
    result = run_job(spec, tmp_path)
    assert result.exit_codes == [0, 0] and result.during_error is None, result.describe()
    # 2 hosts x 1 rank: one rank of a world of 2 on each host, and the program trained as that world.
    assert ranks_on == {"algo-1": [[0, 2]], "algo-2": [[1, 2]]}, ranks_on
    logs = result.master.logs
    assert re.search(rf"{program}: model=\S+ world_size=2 ", logs), logs[-3000:]
    assert f"{program}: 2 classes, the train annotation file's categories in its order: 'big ship' (id 7), 'tug' " \
           "(id 4)" in logs, logs[-3000:]
    assert "val_bbox_map=" in logs, logs[-3000:]
    iou_types = ["bbox", "segm"] if program == "mask_rcnn" else ["bbox"]
    for name in CLASSES:  # each class's AP
        assert re.search(rf'^.*epoch=0 class="{name}" ' + " ".join(rf"val_{t}_ap=\S+" for t in iou_types), logs,
                         re.M), logs[-3000:]
    model_dir = result.master.root / "model"
    assert json.loads((model_dir / "classes.json").read_text()) == CATEGORIES
    metrics = json.loads((model_dir / "metrics.json").read_text())
    assert [e["class"] for e in metrics["best"]["class_ap"]] == CLASSES, metrics
    saved = {p.name for p in model_dir.iterdir()}
    assert {"model-symbol.json", "model-0000.params", "model.json"} <= saved, saved
    assert any(p.suffix == ".params" for p in (result.master.root / "checkpoints").rglob("*")), "no checkpoint"


def test_val_categories_that_disagree_stop_the_job_at_start(image, coco, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(coco, data)
    val = data / "annotations" / "instances_val2017.json"
    annotations = json.loads(val.read_text())
    annotations["categories"][1]["name"] = "tugboat"
    val.write_text(json.dumps(annotations))
    spec = JobSpec(image=image, hosts=1, hyperparameters={"sagemaker_program": "faster_rcnn", **TINY},
                   channels=[Channel("train", data)], timeout_s=300)
    result = run_job(spec, tmp_path / "job")
    assert result.exit_codes == [2], result.describe()
    failure = result.master.failure or ""
    for needle in ("the train and val annotation files list different categories",
                   "/opt/ml/input/data/train/annotations/instances_train2017.json",
                   "/opt/ml/input/data/train/annotations/instances_val2017.json", "only in train: 'tug' (id 4)"):
        assert needle in failure, result.describe()
