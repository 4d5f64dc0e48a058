"""Faster and Mask R-CNN as SageMaker runs them: 2 hosts x 1 rank, tiny synthetic COCO, train + validate."""

import subprocess

import pytest
from cluster_jobs import DOCKER
from local_job import Channel, JobSpec, run_job

# Smallest settings that still run the whole model (see tests/programs/rcnn/helpers.py).
TINY = {"pretrained-base": "false", "short": "256", "max-size": "320", "num-workers": "0",
        "rpn-test-post-nms": "50", "lr-warmup": "2", "log-interval": "1", "epochs": "1",
        "max-iterations-per-epoch": "2"}


@pytest.fixture(scope="module")
def coco(image, tmp_path_factory):
    root = tmp_path_factory.mktemp("coco")
    subprocess.run([DOCKER, "run", "--rm", "-v", f"{root}:/data", image, "synth-data", "coco", "/data"],
                   check=True, capture_output=True)
    return root


@pytest.mark.parametrize("program", ["faster_rcnn", "mask_rcnn"])
def test_two_hosts_train_and_validate(image, coco, tmp_path, program):
    spec = JobSpec(image=image, hosts=2, hyperparameters={"sagemaker_program": program, **TINY},
                   channels=[Channel("train", coco)], timeout_s=900)
    result = run_job(spec, tmp_path)
    assert result.exit_codes == [0, 0], result.describe()
    logs = result.master.logs
    assert "val_bbox_map=" in logs, logs[-3000:]
    if program == "mask_rcnn":
        assert "val_segm_map=" in logs
    saved = {p.name for p in (result.master.root / "model").iterdir()}
    assert any(name.endswith(".params") for name in saved), saved
    assert any(p.suffix == ".params" for p in (result.master.root / "checkpoints").rglob("*")), "no checkpoint"
