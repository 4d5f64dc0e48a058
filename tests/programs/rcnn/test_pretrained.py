"""pretrained: the backbone weights found, linked from the `pretrained` channel, or a clear error within
seconds (no network, no download, a wrong file); never GluonCV's own unbounded download."""

import pytest

from programs.rcnn import helpers as h

pytestmark = pytest.mark.usefixtures("needs_mxnet")


def test_pretrained_base_without_weights_and_unreachable_store(coco, tmp_path):
    """Weights absent from $MXNET_HOME/models, model store unreachable (a closed local port stands in for
    SageMaker network isolation): exit 2 in seconds, saying how to provide the file."""
    args = [a for a in h.TINY_ARGS if a not in ("--pretrained-base", "false")]
    env = dict(h.channel_env(coco), MXNET_GLUON_REPO="http://127.0.0.1:9/")
    job = h.run("mask", tmp_path / "job", args, env=env, timeout=120)
    home = tmp_path / "job" / "mxnet-home" / "models"
    h.assert_usage_error(job, "mask_rcnn", "resnet50_v1b-0ecdba34.params", "unreachable", str(home),
                        "'pretrained' channel", "--pretrained-base false", seconds=h.WITH_MXNET_SECONDS)


def test_pretrained_base_without_download(coco, tmp_path):
    args = [a for a in h.TINY_ARGS if a not in ("--pretrained-base", "false")] + ["--download-pretrained", "false"]
    job = h.run("faster", tmp_path / "job", args, env=h.channel_env(coco), timeout=120)
    h.assert_usage_error(job, "faster_rcnn", "resnet50_v1b-0ecdba34.params", "not found",
                        "--pretrained-base false", seconds=h.WITH_MXNET_SECONDS)


def test_pretrained_channel_with_a_wrong_file(coco, tmp_path):
    pretrained = tmp_path / "pretrained"
    pretrained.mkdir()
    (pretrained / "resnet50_v1b-0ecdba34.params").write_bytes(b"not the weights")
    env = dict(h.channel_env(coco), SM_CHANNEL_PRETRAINED=str(pretrained), MXNET_GLUON_REPO="http://127.0.0.1:9/")
    args = [a for a in h.TINY_ARGS if a not in ("--pretrained-base", "false")]
    job = h.run("faster", tmp_path / "job", args, env=env, timeout=120)
    h.assert_usage_error(job, "faster_rcnn", "do not match GluonCV's SHA-1", str(pretrained),
                        seconds=h.WITH_MXNET_SECONDS)
