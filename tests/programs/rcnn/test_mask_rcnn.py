"""mask_rcnn: what the mask model adds to the box model's input rules (GluonCV's COCOInstance), and its mask loss's
per-image normaliser against GluonCV's on one real batch."""

import json
import types

import pytest
from mxnet_programs.process import ProgramError
from mxnet_programs.rcnn.mask_rcnn import MODEL as MASK

ENTRY = {"width": 100, "height": 100}
BOX = {"bbox": [10, 10, 20, 20], "area": 400, "iscrowd": 0, "segmentation": [[10, 10, 30, 10, 30, 30]]}


def test_usable_objects_follow_cocoinstance():
    assert MASK.usable(BOX, ENTRY)
    assert not MASK.usable(dict(BOX, iscrowd=1), ENTRY)
    assert not MASK.usable(dict(BOX, bbox=[150, 10, 20, 20]), ENTRY)  # outside the image
    assert not MASK.usable(dict(BOX, area=1), ENTRY)
    assert not MASK.usable(dict(BOX, segmentation=[[10, 10, 30, 10]]), ENTRY)  # fewer than 3 points


def test_a_non_crowd_object_needs_polygons():
    MASK.check_annotation(BOX, "a.json")
    MASK.check_annotation(dict(BOX, iscrowd=1, segmentation={"counts": "x"}), "a.json")  # crowd RLE: skipped
    with pytest.raises(ProgramError, match="annotation 7 \\(iscrowd=0\\) needs a polygon list 'segmentation'"):
        MASK.check_annotation(dict(BOX, id=7, segmentation={"counts": "x"}), "a.json")


def test_losses_and_main_metric_add_the_mask():
    assert MASK.loss_names[-1] == "mask" and MASK.main_metric == "val_segm_map"
    assert [d["Name"] for d in MASK.metric_definitions()][-1] == "validation:segm_map"


# ---- the mask loss's normaliser, ours and GluonCV's, on one real batch

MASK_PREDICTOR_SIGMA = 0.5


@pytest.fixture(scope="module")
def device_batch(tmp_path_factory, needs_mxnet):
    """One trained-mode forward of Mask R-CNN (ResNet-50 C4, random weights) on a device batch of two images whose
    positive RoIs differ in number, through the program's own transform, batchify and train step's split: (the
    train step, the net, the outputs the mask loss reads, gt masks, cls targets)."""
    import mxnet as mx
    import numpy as np
    from gluoncv import data as gdata
    from gluoncv import model_zoo
    from mxnet_programs.rcnn.train_step import TrainStep
    from sagemaker_mxnet_data import synthetic_coco

    data = tmp_path_factory.mktemp("two") / "coco"
    synthetic_coco.write_coco(data, num_train=2, num_val=0, image_size=(192, 192), seed=14)
    mx.random.seed(0)
    np.random.seed(0)  # the train transform's RPN anchor sampling
    net = model_zoo.get_model("mask_rcnn_resnet50_v1b_coco", pretrained=False, pretrained_base=False,
                              per_device_batch_size=2)
    net.initialize()
    # Random weights predict logits near 0 everywhere: every image's mean loss is then about log 2 and any weighing
    # of images gives about the same sum. A wider mask predictor spreads the logits, so the images' terms differ.
    net.mask.mask.weight.initialize(mx.init.Normal(MASK_PREDICTOR_SIGMA), force_reinit=True)
    dataset = gdata.COCOInstance(root=str(data), splits="instances_train2017")
    train_tf, train_batchify, _, _ = MASK.transforms(net, 192, 192, 192, False, 1)
    step = TrainStep(mx, MASK, net, None, [mx.cpu()])
    (sample,) = step.split_batch(train_batchify([train_tf(*dataset[i]) for i in range(2)]))
    x, label, _rpn_targets, gt_mask = MASK.split_sample(sample)
    with mx.autograd.train_mode():
        heads, outputs = MASK.split_outputs(net(x, label[:, :, :4], label[:, :, 4:5]))
    return step, net, outputs, gt_mask, heads[4]


def _gluoncv_mask_loss(step, net, outputs, gt_mask, cls_targets):
    """GluonCV train_mask_rcnn.py's mask loss (dmlc/gluon-cv 1ff5446, ForwardBackwardTask in
    gluoncv/model_zoo/rcnn/mask_rcnn/data_parallel.py): the sampled positive RoIs' targets, then the device's loss x
    mask_targets.size / mask_masks.sum(): one normaliser over all the device's images."""
    nd = step.mx.nd
    mask_pred, roi, matches, indices = outputs

    def take(array, shape):
        return nd.concat(*[nd.take(array[i], indices[i]) for i in range(indices.shape[0])], dim=0).reshape(shape)

    n = indices.shape[0]
    mask_targets, mask_masks = net.mask_target(take(roi, (n, -1, 4)), gt_mask, take(matches, (n, -1)),
                                               take(cls_targets, (n, -1)))
    loss = step.mask_loss(mask_pred, mask_targets, mask_masks) * mask_targets.size / mask_masks.sum()
    return float(loss.sum().asscalar()), mask_pred.asnumpy(), mask_targets.asnumpy(), mask_masks.asnumpy()


def _per_image_terms(np, mask_pred, mask_targets, mask_masks):
    """Each image's masked sigmoid cross-entropy summed (S_i) and its positive RoIs x mask pixels (M_i), in
    float64 from the arrays, with the logistic loss written out: max(x, 0) - x z + log(1 + exp(-|x|))."""
    x, z, m = (a.astype(np.float64) for a in (mask_pred, mask_targets, mask_masks))
    bce = np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))
    axes = tuple(range(1, x.ndim))
    return (bce * m).sum(axis=axes), m.sum(axis=axes)


def _slice(arrays, i):
    return tuple(a[i:i + 1] for a in arrays)


def test_mask_loss_per_image_normaliser_differs_from_gluoncvs_by_the_documented_reweighting(device_batch):
    """Ours (extra_losses): sum_i S_i / M_i, each image normalised by its own positive RoIs' mask pixels. GluonCV's:
    n x sum_i S_i / sum_i M_i = sum_i (n M_i / M) (S_i / M_i): the same per-image terms, each weighed by its share of
    the device's positive RoIs (n images, M = sum_i M_i). Equal for one image per device, which is the default."""
    np = pytest.importorskip("numpy")
    step, net, outputs, gt_mask, cls_targets = device_batch
    ours = float(MASK.extra_losses(step, net, outputs, gt_mask, cls_targets)[0].asscalar())
    gluoncv, mask_pred, mask_targets, mask_masks = _gluoncv_mask_loss(step, net, outputs, gt_mask, cls_targets)
    s, m = _per_image_terms(np, mask_pred, mask_targets, mask_masks)
    n = len(m)
    assert n == 2 and m[0] != m[1], f"the two images need different positive RoI counts: {m}"
    assert ours == pytest.approx((s / m).sum(), rel=1e-5)
    assert gluoncv == pytest.approx(((n * m / m.sum()) * (s / m)).sum(), rel=1e-5)
    print(f"M_i {m}, S_i / M_i {s / m}, ours {ours:.6f}, GluonCV's {gluoncv:.6f}")
    assert abs(ours - gluoncv) > 1e-3 * ours, (ours, gluoncv)  # the reweighting is not a no-op on this batch
    # One image per device: each image's arrays alone, with GluonCV's mask target generator for one image.
    generator = net.mask_target
    one_image_net = types.SimpleNamespace(mask_target=type(generator)(
        1, generator._num_rois, generator._num_classes, generator._mask_size))
    for i in range(n):
        one = (_slice(outputs, i), gt_mask[i:i + 1], cls_targets[i:i + 1])
        ours_one = float(MASK.extra_losses(step, one_image_net, *one)[0].asscalar())
        gluoncv_one = _gluoncv_mask_loss(step, one_image_net, *one)[0]
        assert ours_one == pytest.approx(gluoncv_one, rel=1e-6) and ours_one == pytest.approx(s[i] / m[i], rel=1e-5)


# ---- validation: a box over the image's edge is clipped to it before it is scored and its mask pasted

EDGE_IMAGE = (200, 160)  # width, height; the input is twice as large
MASK_COLUMNS = 21  # of 28: the detection's mask covers the left three quarters of its box


def _edge_data(root):
    """A channel with one 200 x 160 image (its pixels are never read) whose one object's box is [0, 20, 200, 120]
    (x, y, w, h) and whose polygon covers its left three quarters, x 0-150."""
    width, height = EDGE_IMAGE
    image = {"id": 1, "file_name": "1.jpg", "width": width, "height": height}
    polygon = [0, 20, 150, 20, 150, 140, 0, 140]
    ann = {"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 20, 200, 120], "area": 150 * 120, "iscrowd": 0,
           "segmentation": [polygon]}
    gt = {"images": [image], "annotations": [ann], "categories": [{"id": 1, "name": "plate"}]}
    for split in ("train2017", "val2017"):
        (root / split).mkdir(parents=True)
        (root / split / "1.jpg").write_bytes(b"")
    (root / "annotations").mkdir()
    for split in ("train2017", "val2017"):
        (root / "annotations" / f"instances_{split}.json").write_text(json.dumps(gt))
    return gt, polygon


def _cocoeval(gt, results, iou_type):
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    coco = COCO()
    coco.dataset = gt
    coco.createIndex()
    evaluation = COCOeval(coco, coco.loadRes(results), iou_type)
    evaluation.evaluate()
    evaluation.accumulate()
    evaluation.summarize()
    return float(evaluation.stats[0])


def test_validation_clips_a_box_over_the_image_edge_before_scoring_it_and_pasting_its_mask(tmp_path, needs_mxnet):
    """The network answers, in the input's pixels (twice the image's), a box from x -200 to 400 of the 400 px input,
    its mask the box's left three quarters. Clipped to the input (GluonCV's BBoxClipToImage, as its
    train_mask_rcnn.py does) it is the object's box, its mask pasted in the clipped box the object's polygon: the
    answer is COCOeval's for that box and the polygon rasterized by pycocotools, written here. Unclipped, the box's
    IoU is 2/3 and the mask's 5/6 (bbox AP 0.4, segm AP 0.7)."""
    import mxnet as mx
    from gluoncv import data as gdata
    from mxnet_programs.rcnn import data, inputs
    from pycocotools import mask as mask_utils

    from programs.rcnn.test_inputs import _args

    gt, polygon = _edge_data(tmp_path / "coco")
    train, val = inputs.load_inputs(MASK, _args(tmp_path / "coco"))
    _, val_ds = data.make_datasets(MASK, train, val, gdata)
    width, height = EDGE_IMAGE
    x = mx.nd.zeros((1, 3, 2 * height, 2 * width))
    mask = mx.nd.zeros((1, 1, 28, 28))
    mask[:, :, :, :MASK_COLUMNS] = 1

    def net(_):
        return mx.nd.array([[[0]]]), mx.nd.array([[[0.9]]]), mx.nd.array([[[-200, 40, 400, 280]]]), mask
    collector = MASK.val_collector(val_ds, str(tmp_path), 0)
    collector.add(net, x, (x, mx.nd.array([[2 * height, 2 * width, 2.0]])))
    ours, _ = MASK.score(val_ds, [collector.results()], str(tmp_path / "results"), lambda *_: None)
    rle = mask_utils.merge(mask_utils.frPyObjects([polygon], height, width))
    result = {"image_id": 1, "category_id": 1, "score": 0.9, "bbox": [0, 20, 200, 120],
              "segmentation": dict(rle, counts=rle["counts"].decode("ascii"))}
    expected = {f"val_{t}_map": _cocoeval(gt, [result], t) for t in ("bbox", "segm")}
    assert ours == pytest.approx(expected, abs=1e-12)
