"""benchmarks.common.scaling_jobs: a job's steady throughput, from MNIST's metrics.json or R-CNN's iteration lines
(whose metrics.json holds validation's figures, not a history of epochs)."""

import json
from types import SimpleNamespace

from benchmarks.common.scaling_jobs import steady_rate


def finished_job(root, logs=""):
    return SimpleNamespace(exit_codes=[0, 0], timed_out=False, master=SimpleNamespace(root=root, logs=logs))


def test_mnist_rate_is_the_median_epoch_after_the_first(tmp_path):
    (tmp_path / "model").mkdir()
    history = [{"samples_per_sec": rate} for rate in (100.0, 300.0, 200.0, 250.0)]
    (tmp_path / "model" / "metrics.json").write_text(json.dumps({"history": history}))
    assert steady_rate(finished_job(tmp_path), "mnist") == 250.0  # median of 300, 200, 250


def test_rcnn_rate_is_the_median_iteration_after_the_first_though_metrics_json_exists(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "metrics.json").write_text(json.dumps({"main_metric": "val_bbox_map", "best": None}))
    logs = "\n".join(f"[1,0]<stdout>:epoch=0 iter={i} loss=1.0 rpn_cls=0.6 lr=0.01 samples_per_sec={rate}"
                     for i, rate in enumerate((0.05, 0.4, 0.2, 0.3), start=1))
    assert steady_rate(finished_job(tmp_path, logs), "faster_rcnn") == 0.3  # median of 0.4, 0.2, 0.3
