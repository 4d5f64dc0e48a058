"""Faster and Mask R-CNN as SageMaker runs them: 2 hosts x 1 rank on a tiny synthetic COCO-format set of one's own
classes (not COCO's: two, one name with a space, ids 7 and 4), train + validate + export, no code; a val file whose
categories disagree stops the job at start with both files named in /opt/ml/output/failure. (COCO's own 80 on 2 hosts:
test_parameter_server_cluster.py's R-CNN job.) Each model's job is the first run of the one
test_output_config_cluster.py restarts (rcnn_cluster_jobs.py)."""

import json
import re
import shutil

import pytest
from local_job import Channel, JobSpec, run_job
from rcnn_cluster_jobs import CATEGORIES, CLASSES, TINY


@pytest.mark.parametrize("program", ["faster_rcnn", "mask_rcnn"])
def test_two_hosts_train_and_validate(rcnn_jobs, program):
    # The first run of the job test_output_config_cluster.py restarts (rcnn_cluster_jobs.py): its checkpoints and
    # TensorBoard files go to the LocalPaths of checkpointconfig.json and tensorboardoutputconfig.json.
    run = rcnn_jobs.first(program)
    result = run.result
    assert result.exit_codes == [0, 0] and result.during_error is None, result.describe()
    # 2 hosts x 1 rank: one rank of a world of 2 on each host, and the program trained as that world.
    assert run.ranks_on == {"algo-1": [[0, 2]], "algo-2": [[1, 2]]}, run.ranks_on
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
    assert any(p.suffix == ".params" for p in run.dirs["algo-1"][0].rglob("*")), "no checkpoint"


def test_val_categories_that_disagree_stop_the_job_at_start(image, rcnn_jobs, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(rcnn_jobs.coco, data)
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
