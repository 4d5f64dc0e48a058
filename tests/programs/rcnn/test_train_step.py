"""train_step: the R-CNN loss terms against smooth-L1 and cross-entropy written here from their formulas, with the
documented rho and normalisers (docs/programs.md); and the box targets the network trains toward (GluonCV's Faster
R-CNN, no pretrained backbone, as the program reads its outputs; the RPN's from the program's train transform) against
the boxes inference decodes from them.

The losses run on small arrays made here; the targets on one training forward of a ResNet-50 C4 Faster R-CNN at
192 x 192 px with 32 RoIs sampled and 300 RPN proposals (cheap: the RCNN head's cost is per RoI), then one inference
forward over the positive RoIs with the head's outputs replaced by the targets.
"""

import contextlib

import numpy as np
import pytest
from mxnet_programs.rcnn.faster_rcnn import MODEL as FASTER

pytestmark = pytest.mark.usefixtures("needs_mxnet")

RPN_RHO, RCNN_RHO = 1.0 / 9.0, 1.0  # the documented rho of each box term (GluonCV's scripts' defaults)


def smooth_l1(d, rho):
    """0.5 d^2 / rho below rho, |d| - rho / 2 above: the two meet at rho with equal value and slope."""
    d = np.abs(d)
    return np.where(d < rho, 0.5 * d * d / rho, d - 0.5 * rho)


def sigmoid_cross_entropy(logit, target):
    """-(t log s(x) + (1 - t) log(1 - s(x))) = log(1 + e^x) - t x."""
    return np.logaddexp(0.0, logit) - target * logit


def softmax_cross_entropy(logits, label):
    return np.logaddexp.reduce(logits, axis=-1) - np.take_along_axis(logits, label[..., None], axis=-1)[..., 0]


@pytest.fixture(scope="module")
def batch():
    """One device's 2 images: 10 anchors each with their RPN targets, 6 RoIs each (3 positive slots, 3 classes) with
    their RCNN targets; predictions from 0 to 3 away from the targets, so both sides of each rho occur."""
    rng = np.random.RandomState(3)
    rpn_cls_targets = np.array([[1, 0, 0, -1, 1, 0, -1, -1, 0, 0],
                                [0, 1, -1, -1, 0, 0, 0, -1, 1, -1]], dtype=np.float32)  # 1 pos, 0 neg, -1 ignored
    rpn_box_targets = rng.normal(0, 1, (2, 10, 4)).astype(np.float32)
    rpn_box_masks = np.repeat((rpn_cls_targets == 1)[..., None], 4, axis=-1).astype(np.float32)
    cls_targets = np.array([[2, 1, 0, 0, -1, 0],
                            [3, 0, 0, 0, 0, -1]], dtype=np.float32)  # class + 1, 0 background, -1 ignored
    box_masks = np.zeros((2, 3, 3, 4), dtype=np.float32)  # (image, positive slot, class, coordinate)
    box_masks[0, 0, 1] = box_masks[0, 1, 0] = box_masks[1, 0, 2] = 1  # the classes of the positives above
    box_targets = rng.normal(0, 1, (2, 3, 3, 4)).astype(np.float32)
    arrays = {
        "rpn_score": rng.normal(0, 2, (2, 10)).astype(np.float32),
        "rpn_box": (rpn_box_targets + rng.uniform(-0.3, 0.3, (2, 10, 4))).astype(np.float32),
        "cls_pred": rng.normal(0, 2, (2, 6, 4)).astype(np.float32),
        "box_pred": (box_targets + rng.uniform(-3, 3, (2, 3, 3, 4))).astype(np.float32),
        "rpn_targets": (rpn_cls_targets, rpn_box_targets, rpn_box_masks),
        "rcnn_targets": (cls_targets, box_targets, box_masks),
    }
    rpn_d = (arrays["rpn_box"] - rpn_box_targets)[rpn_box_masks > 0]
    rcnn_d = (arrays["box_pred"] - box_targets)[box_masks > 0]
    for d, rho in ((rpn_d, RPN_RHO), (rcnn_d, RCNN_RHO)):
        assert (np.abs(d) < rho).any() and (np.abs(d) > rho).any()
    return arrays


def by_hand(a):
    """Each image's four terms, from the formulas: the masked sum over the image's samples, divided by the samples
    the device's samplers drew (targets >= 0: RPN 13 anchors, RCNN 10 RoIs; GluonCV's scripts' normaliser), times
    the device's images (2: the optimizer divides the step's loss by the images)."""
    rpn_cls_targets, rpn_box_targets, rpn_box_masks = a["rpn_targets"]
    cls_targets, box_targets, box_masks = a["rcnn_targets"]
    images = 2
    drawn_anchors, drawn_rois = (rpn_cls_targets >= 0).sum(), (cls_targets >= 0).sum()
    assert (drawn_anchors, drawn_rois) == (13, 10)
    rpn_cls = np.where(rpn_cls_targets >= 0, sigmoid_cross_entropy(a["rpn_score"], rpn_cls_targets), 0)
    rpn_box = rpn_box_masks * smooth_l1(a["rpn_box"] - rpn_box_targets, RPN_RHO)
    rcnn_cls = np.where(cls_targets >= 0, softmax_cross_entropy(a["cls_pred"], np.maximum(cls_targets, 0).astype(int)),
                        0)
    rcnn_box = box_masks * smooth_l1(a["box_pred"] - box_targets, RCNN_RHO)
    return [images * term.reshape(images, -1).sum(axis=1) / drawn
            for term, drawn in ((rpn_cls, drawn_anchors), (rpn_box, drawn_anchors), (rcnn_cls, drawn_rois),
                                (rcnn_box, drawn_rois))]


def test_loss_terms_are_the_formulas_with_the_documented_rho_and_normalisers(batch):
    """The function the train step computes its losses with (RcnnLosses, one code path), on known arrays."""
    import mxnet as mx
    from mxnet_programs.rcnn.train_step import RcnnLosses

    nd = mx.nd.array
    terms = RcnnLosses(mx)(nd(batch["rpn_score"]), nd(batch["rpn_box"]), [nd(t) for t in batch["rpn_targets"]],
                           nd(batch["cls_pred"]), nd(batch["box_pred"]), [nd(t) for t in batch["rcnn_targets"]])
    for name, term, expected in zip(FASTER.loss_names, terms, by_hand(batch)):
        assert term.shape == (2,), name
        np.testing.assert_allclose(term.asnumpy(), expected, rtol=1e-5, err_msg=name)


# ---- the targets GluonCV's network builds, and the boxes inference decodes from them

NUM_SAMPLE = 64  # RoIs sampled, up to 16 positive (GluonCV: a quarter); the RPN's 2000 proposals to draw from
# In 192 x 192 px; with seed 0, 7 of the RPN's proposals match 3 of them at IoU 0.52-0.63 (the other positives are the
# boxes themselves, which GluonCV adds to the proposals).
GT_BOXES = [[20.0, 30.0, 148.0, 158.0], [90.0, 10.0, 186.0, 74.0], [10.0, 100.0, 74.0, 180.0],
            [100.0, 90.0, 180.0, 186.0]]
GT_CLASSES = [3.0, 17.0, 25.0, 60.0]
SAME_BOX = 0.02  # px: float32 log/exp of offsets around boxes ~100 px wide


@contextlib.contextmanager
def constructed_with(cls, **overrides):
    """`cls` built with `overrides` in place of the model zoo's constructor arguments, within the block only."""
    init = cls.__init__
    cls.__init__ = lambda self, *args, **kwargs: init(self, *args, **{**kwargs, **overrides})
    try:
        yield
    finally:
        cls.__init__ = init


@pytest.fixture(scope="module")
def trained_forward():
    """(net, image, per positive RoI: (roi, its class, its matched ground-truth box, its target for its class, its
    targets for all classes)) from one training-mode forward, read as the program reads it (model.split_outputs)."""
    import mxnet as mx
    from gluoncv import model_zoo
    from gluoncv.model_zoo.rcnn.faster_rcnn.faster_rcnn import FasterRCNN

    mx.random.seed(0)
    with constructed_with(FasterRCNN, num_sample=NUM_SAMPLE):
        net = model_zoo.get_model(FASTER.model_name("resnet50_v1b", False), pretrained=False, pretrained_base=False,
                                  per_device_batch_size=1)
    for param in net.collect_params().values():
        param.initialize()  # as the program does (means and stds are constants among them)
    image = mx.nd.random.uniform(0, 255, (1, 3, 192, 192))
    gt_box, gt_label = mx.nd.array([GT_BOXES]), mx.nd.array([GT_CLASSES]).reshape((1, -1, 1))
    with mx.autograd.train_mode():
        out = net(image, gt_box, gt_label)
    heads, _ = FASTER.split_outputs(out)
    _, _, _, _, cls_targets, box_targets, box_masks = (a.asnumpy() for a in heads)
    rois, matches, indices = out[2].asnumpy()[0], out[4].asnumpy()[0], out[11].asnumpy()[0].astype(int)
    positives = []
    for slot in range(box_masks.shape[1]):
        classes = np.flatnonzero(box_masks[0, slot].any(axis=-1))
        if len(classes) == 0:
            continue  # a padding slot (a negative RoI, no target)
        assert len(classes) == 1, box_masks[0, slot]
        roi_index, cls = indices[slot], int(classes[0])
        gt = int(matches[roi_index])
        assert GT_CLASSES[gt] == cls and cls_targets[0, roi_index] == cls + 1
        positives.append((rois[roi_index], cls, np.array(GT_BOXES[gt]), box_targets[0, slot, cls],
                          box_targets[0, slot]))
    return net, image, positives


def iou(a, b):
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def away_from_their_box(positives):
    """The positive RoIs that are not their ground-truth box (GluonCV adds the boxes themselves as RoIs, target 0)."""
    return [p for p in positives if iou(p[0], p[2]) < 0.95]


def test_targets_of_the_positive_rois_decode_to_their_ground_truth_with_the_inference_decoder(trained_forward):
    """The RCNN head's box targets, decoded at their RoIs by the decoder inference uses (net.box_decoder: its stds,
    no means), give the boxes the RoIs were matched to: a sign, a mean or a std that differs between the target
    encoder and the decoder moves them."""
    import mxnet as mx

    net, _, positives = trained_forward
    moved = away_from_their_box(positives)
    assert len(moved) >= 4 and len({p[1] for p in moved}) >= 2, [p[0] for p in positives]
    for roi, cls, gt, target, _ in positives:
        decoded = net.box_decoder(mx.nd.array(target).reshape((1, 1, 4)), mx.nd.array(roi).reshape((1, 1, 4)))
        np.testing.assert_allclose(decoded.asnumpy().reshape(4), gt, atol=SAME_BOX,
                                   err_msg=f"class {cls} RoI {roi}")


def test_a_head_that_predicts_the_targets_detects_the_ground_truth_boxes(trained_forward):
    """Inference (the network's own forward: RoI features, per-class decoding, NMS) over the positive RoIs that are not
    their ground-truth box, with the RCNN head's outputs replaced by the targets (all classes' offsets, as training
    lays them out) and a confident score for the RoI's class: one detection per ground-truth box that has such RoIs,
    its box and class."""
    net, image, positives = trained_forward
    moved = away_from_their_box(positives)
    rois = np.stack([p[0] for p in moved])[None]
    logits = np.full((len(moved), net.num_class + 1), -20.0, dtype=np.float32)
    logits[np.arange(len(moved)), [p[1] + 1 for p in moved]] = 20.0
    offsets = np.stack([p[4] for p in moved]).reshape(len(moved), -1)

    def replace(values):
        def hook(block, inputs, output):
            (output[1] if isinstance(output, (list, tuple)) else output)[:] = values

        return hook

    saved = net._rpn_test_post_nms, net.rpn._test_post_nms
    net._rpn_test_post_nms = net.rpn._test_post_nms = len(moved)  # proposals: the RoIs
    handles = [net.rpn.register_forward_hook(replace(rois)),
               net.class_predictor.register_forward_hook(replace(logits)),
               net.box_predictor.register_forward_hook(replace(offsets))]
    try:
        ids, scores, boxes = (a.asnumpy()[0] for a in net(image))
    finally:
        for handle in handles:
            handle.detach()
        net._rpn_test_post_nms, net.rpn._test_post_nms = saved
    kept = scores[:, 0] > 0.5
    found = sorted((int(i), tuple(b)) for i, b in zip(ids[kept, 0], boxes[kept]))
    expected = sorted({(p[1], tuple(p[2])) for p in moved})
    assert len(expected) >= 2
    assert [f[0] for f in found] == [e[0] for e in expected], found
    for (cls, box), (_, gt) in zip(found, expected):
        np.testing.assert_allclose(box, gt, atol=SAME_BOX, err_msg=f"class {cls}")


def test_rpn_targets_of_the_positive_anchors_decode_to_ground_truth_boxes_with_the_proposal_decoder(trained_forward):
    """The RPN's box targets, built by the program's train transform and batchify (GluonCV's, on the CPU workers), at
    the anchors the network's RPN predicts for (same order), decoded by the decoder the RPN's proposals use: each
    positive anchor gives a ground-truth box, and every ground-truth box has one (GluonCV makes each box's best
    anchor positive). A std, a sign or an anchor order that differs moves them."""
    import mxnet as mx

    net = trained_forward[0]
    train_transform, train_batchify, _, _ = FASTER.transforms(net, 192, 192, 192, False, 1)
    np.random.seed(0)  # the transform's flip and sampling
    image = mx.nd.array(np.random.randint(0, 256, (192, 192, 3)), dtype="uint8")
    label = np.array([[*box, cls] for box, cls in zip(GT_BOXES, GT_CLASSES)], dtype=np.float32)
    batch = train_batchify([train_transform(image, label)])
    sample = [element[0] if isinstance(element, (list, tuple)) else element for element in batch]
    data, label, (_, rpn_box_targets, rpn_box_masks), _ = FASTER.split_sample(sample)
    with mx.autograd.train_mode():
        anchors = net(data, label[:, :, :4], label[:, :, 4:5])[7]
    positive = rpn_box_masks.asnumpy()[0, :, 0] > 0
    decoded = net.rpn.region_proposer._box_decoder(rpn_box_targets, anchors).asnumpy()[0][positive]
    gt_boxes = label.asnumpy()[0, :, :4]
    assert 4 <= len(decoded) <= 128, len(decoded)  # up to half of the 256 sampled anchors
    nearest = np.abs(decoded[:, None, :] - gt_boxes[None]).max(axis=-1).argmin(axis=1)
    np.testing.assert_allclose(decoded, gt_boxes[nearest], atol=SAME_BOX)
    assert sorted(set(nearest)) == list(range(len(gt_boxes)))
    moved = np.abs(anchors.asnumpy()[0][positive] - decoded).max(axis=-1)
    assert (moved > 1).all(), moved  # no anchor is its box: every target is an offset
