"""training.main's failure paths: bad inputs and configurations end the R-CNN programs (exit 2, one line
`<prog>: error: ...`) before MXNet is imported, except those that need it (an empty train set, AMP without a
GPU), which fail within a generous bound."""

import json

import pytest

from programs.helpers import mxnet_blocked_env
from programs.rcnn import helpers as h

pytestmark = pytest.mark.usefixtures("needs_mxnet")


def run_before_mxnet(model, workdir, args, env, ranks=1):
    """The program run where importing mxnet raises: its input checks must all come first."""
    return h.run(model, workdir, args, env=mxnet_blocked_env(workdir, env), ranks=ranks, timeout=120)


def _break(data, breakage):
    if breakage == "missing_annotation":
        (data / "annotations" / "instances_train2017.json").unlink()
        (data / "annotations" / "instances_val2017.json").unlink()
        return ["missing annotation file", str(data)]
    if breakage == "missing_image":
        (data / "train2017" / "000000000005.jpg").unlink()
        return ["image referenced but absent", str(data / "train2017" / "000000000005.jpg")]
    if breakage == "val_categories":  # the val file's categories disagree with the train file's
        def rename(d):
            d["categories"] = [dict(c, name="thing" if c["id"] == 18 else c["name"]) for c in d["categories"]]
            d["annotations"] = [a for a in d["annotations"] if a["category_id"] != 18]
        path = h.edit_annotations(data, "val2017", rename)
        return ["the train and val annotation files list different categories", str(path),
                str(data / "annotations" / "instances_train2017.json"), "only in train: 'dog' (id 18)",
                "only in val: 'thing' (id 18)"]
    if breakage == "duplicate_category_ids":
        path = h.edit_annotations(data, "train2017", lambda d: d["categories"].append({"id": 18, "name": "wolf"}))
        return ["duplicate category ids", str(path), ": 18"]
    if breakage == "empty":  # found once the datasets are built, with MXNet
        path = h.edit_annotations(data, "train2017", lambda d: d.__setitem__("annotations", []))
        return ["empty train set", str(path)]
    raise AssertionError(breakage)


@pytest.mark.parametrize("model", ["faster", "mask"])
@pytest.mark.parametrize("breakage", ["missing_annotation", "missing_image", "val_categories",
                                      "duplicate_category_ids", "empty"])
def test_bad_data_fails_fast(coco, tmp_path, model, breakage):
    data = h.copy_coco(coco, tmp_path / "data")
    needles = _break(data, breakage)
    if breakage == "empty":
        job = h.run(model, tmp_path / "job", h.TINY_ARGS, env=h.channel_env(data), timeout=120)
        h.assert_usage_error(job, f"{model}_rcnn", *needles, seconds=h.WITH_MXNET_SECONDS)
    else:
        job = run_before_mxnet(model, tmp_path / "job", h.TINY_ARGS, h.channel_env(data))
        h.assert_usage_error(job, f"{model}_rcnn", *needles)


def test_missing_train_channel(tmp_path):
    job = run_before_mxnet("faster", tmp_path / "job", h.TINY_ARGS, h.channel_env(tmp_path / "nowhere"))
    h.assert_usage_error(job, "faster_rcnn", "missing train channel", str(tmp_path / "nowhere"))


def test_bad_data_fails_fast_on_every_rank_under_mpirun(coco, tmp_path, needs_horovod):
    data = h.copy_coco(coco, tmp_path / "data")
    needles = _break(data, "missing_image")
    job = run_before_mxnet("mask", tmp_path / "job", h.TINY_ARGS, h.channel_env(data), ranks=2)
    assert job.returncode == 2, job.explain()
    assert job.stderr.count("mask_rcnn: error: image referenced but absent") == 2, job.explain()
    assert needles[1] in job.stderr


def test_amp_on_cpu_is_a_clear_error(coco, tmp_path):
    job = h.run("faster", tmp_path / "job", [*h.TINY_ARGS, "--amp", "true"], env=h.channel_env(coco), timeout=120)
    line = h.assert_usage_error(job, "faster_rcnn", "amp needs a GPU", "--amp false", seconds=h.WITH_MXNET_SECONDS)
    assert "model=" not in job.stdout, "the model was built before the amp check"
    assert line


def test_horovod_false_with_two_hosts(coco, tmp_path):
    env = dict(h.channel_env(coco), SM_HOSTS=json.dumps(["algo-1", "algo-2"]), SM_CURRENT_HOST="algo-1")
    job = run_before_mxnet("mask", tmp_path / "job", [*h.TINY_ARGS, "--horovod", "false"], env)
    h.assert_usage_error(job, "mask_rcnn", "--horovod false", "2 hosts", "algo-2")


def _data_channel_env(data, **extra_channels):
    """The walkthrough's estimator.fit({'data': ...}), plus any other channels."""
    channels = {"data": data, **extra_channels}
    env = {f"SM_CHANNEL_{name.upper()}": str(path) for name, path in channels.items()}
    env["SM_CHANNELS"] = json.dumps(sorted(channels))
    return env


def test_incomplete_data_channel(coco, tmp_path):
    data = h.copy_coco(coco, tmp_path / "data")
    (data / "annotations" / "instances_val2017.json").unlink()
    job = run_before_mxnet("mask", tmp_path / "job", h.TINY_ARGS, _data_channel_env(data))
    h.assert_usage_error(job, "mask_rcnn", "channel 'data' is incomplete: missing",
                        str(data / "annotations" / "instances_val2017.json"))


def test_data_and_train_channels_together(coco, tmp_path):
    job = run_before_mxnet("faster", tmp_path / "job", h.TINY_ARGS, _data_channel_env(coco, train=coco))
    h.assert_usage_error(job, "faster_rcnn", "both a 'train' and a 'data' channel were given")


def test_sharded_data_channel_without_a_val_channel(coco, tmp_path):
    config = {"data": {"TrainingInputMode": "File", "S3DistributionType": "ShardedByS3Key"}}
    env = dict(_data_channel_env(coco), SM_INPUT_DATA_CONFIG=json.dumps(config))
    job = run_before_mxnet("faster", tmp_path / "job", h.TINY_ARGS, env)
    h.assert_usage_error(job, "faster_rcnn", "channel 'data', which is ShardedByS3Key",
                        "FullyReplicated 'val' channel")
