"""The image's CPU operators (docker/mxnet-ops/, built into the image) against MXNet's own, the reference: the same
outputs and the same gradients, to the last bit.
- ROIAlignCPU against contrib.ROIAlign, on feature maps and RoIs that reach every branch: RoIs over the edge and
  beyond it, smaller than a cell, on the second image of a batch; fixed and adaptive sampling; aligned; bins that
  are not square.
- BoxNMSCPU against contrib.box_nms, with the programs' settings (the RPN's 12000 of 63000 proposals, the detection
  head's per class NMS) and the others: invalid scores and classes, tied scores, topk, background_id,
  force_suppress, center boxes, two batch axes, nothing valid.
And the routing the programs use: GluonCV's F.contrib.ROIAlign and F.contrib.box_nms become the image's operators
in a hybridized graph, MXNet's inside mxnet_operators() (the export) and for what the image's do not support."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytestmark = pytest.mark.usefixtures("needs_mxnet")


@pytest.fixture(scope="module")
def mx():
    import mxnet
    from mxnet_programs.rcnn import cpu_ops

    assert cpu_ops.route(mxnet), f"no {cpu_ops.LIBRARY}: the image builds it (docker/mxnet-ops/)"
    return mxnet


def test_the_library_loads_in_a_process_that_imported_horovod_first(mx):
    # as in every Horovod rank; built without -Bsymbolic, the load crashed there (SIGFPE in lib_api's registration)
    script = ("import horovod.mxnet, mxnet\nfrom mxnet_programs.rcnn import cpu_ops\n"
              "assert cpu_ops.route(mxnet) and hasattr(mxnet.nd, 'BoxNMSCPU')\nprint('loaded')")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0 and done.stdout.strip() == "loaded", (done.returncode, done.stderr[-2000:])


def rois_over(rng, count, batch, height, width, stride):
    """RoIs in image pixels: inside, over the edge, wholly beyond it (more than a cell), and smaller than a cell."""
    x1 = rng.uniform(-3 * stride, (width + 2) * stride, count)
    y1 = rng.uniform(-3 * stride, (height + 2) * stride, count)
    w = np.where(rng.rand(count) < 0.2, rng.uniform(0, stride / 2, count), rng.uniform(0, width * stride, count))
    h = np.where(rng.rand(count) < 0.2, rng.uniform(0, stride / 2, count), rng.uniform(0, height * stride, count))
    index = rng.randint(0, batch, count)
    return np.stack([index, x1, y1, x1 + w, y1 + h], axis=1).astype("float32")


def forward_backward(mx, op, data, head, *args, **params):
    x = mx.nd.array(data)
    x.attach_grad()
    with mx.autograd.record():
        y = op(x, *[mx.nd.array(a) for a in args], **params)
    y.backward(mx.nd.array(head))
    return y.asnumpy(), x.grad.asnumpy()


@pytest.mark.parametrize("batch, channels, height, width, pooled, sample_ratio, aligned", [
    (1, 64, 25, 42, (14, 14), 2, False),  # the programs' C4 head (Faster R-CNN, Mask R-CNN's box and mask heads)
    (2, 16, 13, 17, (7, 7), 2, False),  # two images a device
    (1, 8, 9, 11, (14, 14), -1, False),  # samples per bin from the RoI's size
    (2, 8, 10, 7, (5, 3), 2, True),  # aligned: half-pixel offsets, no 1-cell minimum
])
def test_output_and_gradient_equal_mxnets_roi_align_to_the_last_bit(mx, batch, channels, height, width, pooled,
                                                                   sample_ratio, aligned):
    rng = np.random.RandomState(channels + height)
    data = rng.randn(batch, channels, height, width).astype("float32")
    rois = rois_over(rng, 60, batch, height, width, 16)
    head = rng.randn(len(rois), channels, *pooled).astype("float32")
    params = dict(pooled_size=pooled, spatial_scale=1 / 16, sample_ratio=sample_ratio, aligned=aligned)
    mxnet_out, mxnet_grad = forward_backward(mx, mx.nd.contrib.ROIAlign.mxnet_op, data, head, rois, **params)
    out, grad = forward_backward(mx, mx.nd.ROIAlignCPU, data, head, rois, **params)
    assert np.count_nonzero(mxnet_grad) > mxnet_grad.size // 4 and np.count_nonzero(mxnet_out) > 0  # not vacuous
    np.testing.assert_array_equal(out, mxnet_out)
    np.testing.assert_array_equal(grad, mxnet_grad)


def boxes(rng, shape, width=1333, height=800):
    """(..., 4) corner boxes of 8 to 400 px, centres on a width x height image."""
    cx, cy = rng.uniform(0, width, shape), rng.uniform(0, height, shape)
    w, h = rng.uniform(8, 400, shape), rng.uniform(8, 400, shape)
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=-1)


def rpn_proposals(rng, count=63000):
    """GluonCV's RPN input to box_nms: (1, count, 5) of score, x1, y1, x2, y2; sigmoid scores rounded to 3
    decimals (ties), -1 for 5% (the proposals its min_size removes)."""
    score = np.round(1 / (1 + np.exp(-0.1 * rng.randn(1, count, 1))), 3)
    score[rng.rand(1, count, 1) < 0.05] = -1
    return np.concatenate([score, boxes(rng, (1, count))], axis=-1).astype("float32")


def detections(rng, batch=2, count=4000):
    """(batch, count, 6) of class id (-1 to 4), score (2 decimals: ties), x1, y1, x2, y2."""
    ids = rng.randint(-1, 5, (batch, count, 1))
    return np.concatenate([ids, np.round(rng.rand(batch, count, 1), 2), boxes(rng, (batch, count))], -1).astype("float32")


RPN = dict(coord_start=1, score_index=0, id_index=-1, force_suppress=True)
HEAD = dict(coord_start=2, score_index=1, id_index=0)


@pytest.mark.parametrize("case, params", [
    ("rpn", dict(overlap_thresh=0.7, topk=12000, **RPN)),  # GluonCV's RPN in training (C4)
    ("rpn", dict(overlap_thresh=0.7, topk=6000, **RPN)),  # and in validation
    ("head", dict(overlap_thresh=0.5, valid_thresh=0.001, topk=400, force_suppress=False, **HEAD)),  # detections
    ("head", dict(overlap_thresh=0.5, valid_thresh=0.01, background_id=0, **HEAD)),
    ("head", dict(overlap_thresh=0.45, topk=1000, force_suppress=True, **HEAD)),
    ("center", dict(overlap_thresh=0.5, topk=1000, in_format="center", out_format="center", **HEAD)),
    ("two batch axes", dict(overlap_thresh=0.6, **HEAD)),
    ("head", dict(valid_thresh=2.0, **HEAD)),  # nothing valid: all -1
])
def test_box_nms_output_and_gradient_equal_mxnets_to_the_last_bit(mx, case, params):
    rng = np.random.RandomState(len(case) + len(params))
    data = {"rpn": rpn_proposals, "head": detections, "center": detections,
            "two batch axes": lambda r: np.stack([detections(r, count=500), detections(r, count=500)])}[case](rng)
    if case == "center":  # x1, y1, x2, y2 -> cx, cy, w, h
        data[..., 2:4], data[..., 4:6] = (data[..., 2:4] + data[..., 4:6]) / 2, data[..., 4:6] - data[..., 2:4]
    head = rng.randn(*data.shape).astype("float32")
    mxnet_out, mxnet_grad = forward_backward(mx, mx.nd.contrib.box_nms.mxnet_op, data, head, **params)
    out, grad = forward_backward(mx, mx.nd.BoxNMSCPU, data, head, **params)
    kept = (mxnet_out[..., params["score_index"]] != -1).sum()
    total = data[..., 0].size
    assert (kept == 0) == (params.get("valid_thresh") == 2.0) and kept < total  # some kept, some suppressed
    np.testing.assert_array_equal(out, mxnet_out)
    np.testing.assert_array_equal(grad, mxnet_grad)


def rcnn_block(mx):
    """A hybridized block that calls F.contrib.ROIAlign and F.contrib.box_nms as GluonCV's R-CNN networks do."""
    class Block(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, feat, rois):
            pooled = F.contrib.ROIAlign(feat, rois, (7, 7), 1. / 16, sample_ratio=2)
            kept = F.contrib.box_nms(rois.expand_dims(0), overlap_thresh=0.7, topk=10, coord_start=1, score_index=0,
                                     id_index=-1, force_suppress=True)
            return pooled, kept

    block = Block()
    block.hybridize()
    return block


def graph_operators(mx, block):
    """The operators of the graph `block` builds now."""
    block._clear_cached_op()
    block(mx.nd.ones((1, 49, 8, 8)), mx.nd.array([[0, 0, 0, 64, 64]]))
    _, out = block._cached_graph
    return {node["op"] for node in json.loads(out.tojson())["nodes"]} - {"null", "expand_dims"}


def test_hybridized_networks_get_the_images_operators_and_the_export_block_mxnets(mx):
    from mxnet_programs.rcnn import cpu_ops

    block = rcnn_block(mx)
    assert graph_operators(mx, block) == {"ROIAlignCPU", "BoxNMSCPU"}
    with cpu_ops.mxnet_operators():
        assert graph_operators(mx, block) == {"_contrib_ROIAlign", "_contrib_box_nms"}
    assert graph_operators(mx, block) == {"ROIAlignCPU", "BoxNMSCPU"}


def test_what_the_images_operators_do_not_support_stays_mxnets(mx):
    class Block(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, feat, rois):
            return (F.contrib.ROIAlign(feat, rois, (7, 7), 1. / 16, sample_ratio=2, position_sensitive=True),
                    F.contrib.box_nms(rois.expand_dims(0), coord_start=1, score_index=0, in_format="corner",
                                      out_format="center"))

    block = Block()
    block.hybridize()
    assert graph_operators(mx, block) == {"_contrib_ROIAlign", "_contrib_box_nms"}


def test_other_types_are_refused_with_the_operators_name(mx):
    with pytest.raises(mx.base.MXNetError, match="BoxNMSCPU supports float32 only; input 0 is type"):
        mx.nd.BoxNMSCPU(mx.nd.ones((1, 3, 5), dtype="float64"), coord_start=1, score_index=0).wait_to_read()
    with pytest.raises(mx.base.MXNetError, match="ROIAlignCPU supports float32 only; input 0 is type"):
        mx.nd.ROIAlignCPU(mx.nd.ones((1, 1, 4, 4), dtype="float16"), mx.nd.ones((1, 5), dtype="float16"),
                          pooled_size=(2, 2), spatial_scale=1.0).wait_to_read()
