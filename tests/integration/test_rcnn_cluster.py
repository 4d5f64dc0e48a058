"""Faster and Mask R-CNN as SageMaker runs them: 2 hosts x 1 rank, tiny synthetic COCO, train + validate."""

import json
import re
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
    assert "val_bbox_map=" in logs, logs[-3000:]
    if program == "mask_rcnn":
        assert "val_segm_map=" in logs
    saved = {p.name for p in (result.master.root / "model").iterdir()}
    assert any(name.endswith(".params") for name in saved), saved
    assert any(p.suffix == ".params" for p in (result.master.root / "checkpoints").rglob("*")), "no checkpoint"
