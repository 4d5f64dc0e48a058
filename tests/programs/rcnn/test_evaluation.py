"""evaluation (the R-CNN programs' validation) against known answers: the programs' mAP on detections this test
chose equals what pycocotools' COCOeval gives on the same detections written by this test in COCO's results format,
on 1 rank and on 2 (images split between the ranks and gathered); ground-truth detections give 1.0.

The network is replaced by known_detections.KnownDetections, which answers each image with the test's detections
in the network input's coordinates; everything after it is the programs' (validation transform, rescale to the
original image, masks pasted at the original size, gather, GluonCV's metric). The validation images are larger and
smaller than the network's input (short side 256), so the rescale is exercised both ways.

Box conventions, each side written independently: GluonCV's COCODetection (Faster R-CNN) trains on inclusive
corners (x2 = x + w - 1) and its COCODetectionMetric writes back w = x2 - x1 + 1; COCOInstance (Mask R-CNN) uses
exact corners (x2 = x + w) and COCOInstanceMetric writes w = x2 - x1. So a network that predicts the corners it was
trained on scores 1.0 under either model. This test writes [x, y, w, h] from its own detections, never from corners.

Each class's AP is what COCOeval gives with its categories restricted to that class alone (params.catIds), in the
classes' order: the data's classes are of its own, with ids neither 1..K nor in the file's order (synthetic_coco's
10, 7, 4), where COCOeval's arrays follow sorted ids.

The programs report COCOeval's stats[0] at full precision (not GluonCV's print of it, percent with one decimal):
the test's COCOeval on its own results file must give the same number. A mask goes through the network's 28 x 28 box-relative mask (KnownDetections gives GluonCV's training
target) and GluonCV's pasting back, which moves its edges by a pixel or so: ground-truth masks come back with IoU
0.974-0.9996 here (measured), so they match at every threshold; the test's own masks are its polygons rasterized by
pycocotools. Defects are chosen so that no box IoU lies within IOU_MARGIN of a COCO threshold and every mask IoU is
1 or below SEGM_NO_MATCH (both checked), so those pixels cannot change which detections match.

The data (seed 48) holds two images whose width the input's width over the scale misses by a pixel (how GluonCV's
script sized the pasted masks): a mask of another size than the image's matches nothing.

Runtime: two driver processes (1 rank, then 2 ranks), each validating both models three times without a network
forward: 45 s for the module (16 tests), measured on the shared 2-core machine under other helpers' load.
"""

import json
import math

import numpy as np
import pytest
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval
from sagemaker_mxnet_data import synthetic_coco

from programs.rcnn import helpers as h
from programs.rcnn import known_detections

pytestmark = pytest.mark.usefixtures("needs_mxnet")

SHORT = 256
ARGS = ["--short", str(SHORT), "--max-size", "1024", "--num-workers", "0"]
NUM_VAL = 5  # 2 ranks: images 0-2 and 3-4
SHRINK = 0.85  # a shrunk box about its centre: IoU 0.7225, between the thresholds 0.70 and 0.75
MASK_SHRINK = 0.5  # its mask: the polygon shrunk about the box's centre, IoU at most 0.25: no match at any threshold
EMPTY_IMAGES = (1, 4)  # no detection: one on each rank of 2
IOU_THRESHOLDS = np.linspace(0.5, 0.95, 10)
IOU_MARGIN = 0.01  # boxes: no IoU of the test's detections this close to a threshold (they are exact floats)
SEGM_NO_MATCH = 0.4  # masks: the test's IoUs are 1 or below this, far from 0.5 for a pixel's difference
MODELS = ("faster", "mask")
CLASSES = ["bolt", "nut", "washer"]
CATEGORY_IDS = [10, 7, 4]  # synthetic_coco's for CLASSES
NOTHING = "nothing"
PLANS = (False, True, NOTHING)  # the detections validated (as epochs 0, 1, 2): ground truth, defective, none


@pytest.fixture(scope="module")
def val_data(tmp_path_factory, needs_mxnet):
    """NUM_VAL synthetic images of 200-640 px (short sides both sides of SHORT), aspect ratios 2% apart at least
    (KnownDetections tells images apart by it), of CLASSES."""
    out = tmp_path_factory.mktemp("known") / "coco"
    synthetic_coco.write_coco(out, num_train=1, num_val=NUM_VAL, image_size=(200, 640), seed=48, classes=CLASSES)
    gt = json.loads((out / "annotations" / "instances_val2017.json").read_text())
    images = sorted(gt["images"], key=lambda image: image["id"])
    shorts = [min(image["width"], image["height"]) for image in images]
    assert min(shorts) < SHORT < max(shorts), shorts
    ratios = sorted(math.log(image["width"] / image["height"]) for image in images)
    assert min(b - a for a, b in zip(ratios, ratios[1:])) > 0.02, ratios
    return out, gt


def objects(gt):
    """The images sorted by id (GluonCV's order), each with its annotations."""
    images = sorted(gt["images"], key=lambda image: image["id"])
    return [(image, [a for a in gt["annotations"] if a["image_id"] == image["id"]]) for image in images]


def shrunk(xywh, polygon):
    """A box shrunk by SHRINK and its polygon by MASK_SHRINK, about the box's centre."""
    x, y, w, h = xywh
    cx, cy = x + w / 2, y + h / 2
    moved = [c + (v - c) * MASK_SHRINK for v, c in zip(polygon, [cx, cy] * (len(polygon) // 2))]
    return [cx - w * SHRINK / 2, cy - h * SHRINK / 2, w * SHRINK, h * SHRINK], moved


def detections(gt, defects):
    """Per image (GluonCV's order): [(category id, score, [x, y, w, h], polygon)], original coordinates. With
    defects: no detection in EMPTY_IMAGES, the first object's class swapped, every other object shrunk. NOTHING:
    no detection at all."""
    if defects == NOTHING:
        return [[] for _ in objects(gt)]
    category_ids = [c["id"] for c in gt["categories"]]
    planned, rank = [], 0
    for index, (_, anns) in enumerate(objects(gt)):
        found = []
        for k, ann in enumerate(anns):
            rank += 1
            category, box, polygon = ann["category_id"], list(ann["bbox"]), ann["segmentation"][0]
            if defects:
                if index in EMPTY_IMAGES:
                    continue
                if index == 0 and k == 0:
                    category = category_ids[(category_ids.index(category) + 2) % len(category_ids)]
                elif rank % 2 == 0:
                    box, polygon = shrunk(box, polygon)
            found.append((category, round(0.95 - 0.02 * rank, 3), box, polygon))
        planned.append(found)
    return planned


def plan_for(model, gt, planned):
    """What KnownDetections answers: contiguous class ids (the categories' order in the file) and corners in the
    model's convention."""
    category_ids = [c["id"] for c in gt["categories"]]
    inclusive = 1.0 if model == "faster" else 0.0
    plan = []
    for (image, _), found in zip(objects(gt), planned):
        plan.append({"width": image["width"], "height": image["height"], "detections": [
            {"class": category_ids.index(category), "score": score,
             "box": [x, y, x + w - inclusive, y + h - inclusive], "polygon": polygon}
            for category, score, (x, y, w, h), polygon in found]})
    return plan


def results_json(gt, planned, with_masks):
    """The detections in COCO's results format, written here."""
    results = []
    for (image, _), found in zip(objects(gt), planned):
        for category, score, box, polygon in found:
            result = {"image_id": image["id"], "category_id": category, "bbox": box, "score": score}
            if with_masks:
                rle = mask_utils.merge(mask_utils.frPyObjects([polygon], image["height"], image["width"]))
                result["segmentation"] = dict(rle, counts=rle["counts"].decode("ascii"))
            results.append(result)
    return results


def coco_eval(annotation_file, results, iou_type, category=None):
    """COCOeval's stats[0] (AP at IoU 0.50:0.95, all areas, 100 detections), and the IoUs of its matches; of one
    `category` alone when given (stats[0] None: it has no objects)."""
    gt = COCO(str(annotation_file))
    evaluation = COCOeval(gt, gt.loadRes(results), iou_type)
    if category is not None:
        evaluation.params.catIds = [category]
    evaluation.evaluate()
    evaluation.accumulate()
    evaluation.summarize()
    ious = [value for matrix in evaluation.ious.values() if len(matrix) for value in np.ravel(matrix)]
    return (None if evaluation.stats[0] == -1 else float(evaluation.stats[0])), ious


@pytest.fixture(scope="module")
def expected(val_data):
    """{model: [(bbox AP, segm AP or None, {category id: (bbox AP, segm AP or None)}) for the perfect and the
    defective detections]} by COCOeval."""
    data, gt = val_data
    annotation_file = data / "annotations" / "instances_val2017.json"
    answers = {model: [] for model in MODELS}
    for defects in (False, True):  # NOTHING: the programs' 0.0 (pycocotools cannot load an empty result list)
        planned = detections(gt, defects)
        boxes, masks = results_json(gt, planned, False), results_json(gt, planned, True)
        bbox, bbox_ious = coco_eval(annotation_file, boxes, "bbox")
        segm, segm_ious = coco_eval(annotation_file, masks, "segm")
        near = [iou for iou in bbox_ious if iou < 1 and np.min(np.abs(IOU_THRESHOLDS - iou)) < IOU_MARGIN]
        assert near == [], f"the test's boxes have IoUs too close to a COCO threshold: {near}"
        assert [iou for iou in segm_ious if SEGM_NO_MATCH <= iou < 1] == [], segm_ious
        per_category = {cid: (coco_eval(annotation_file, boxes, "bbox", cid)[0],
                              coco_eval(annotation_file, masks, "segm", cid)[0]) for cid in CATEGORY_IDS}
        answers["faster"].append((bbox, None, {cid: (b, None) for cid, (b, _) in per_category.items()}))
        answers["mask"].append((bbox, segm, per_category))
    assert answers["mask"][0][:2] == (1.0, 1.0)
    assert 0.1 < answers["mask"][1][0] < 0.9 and 0.1 < answers["mask"][1][1] < 0.9, answers
    defective = answers["mask"][1][2]
    assert len({aps for aps in defective.values()}) == len(CATEGORY_IDS), f"classes that score alike: {defective}"
    return answers


def validate_known(data, gt, workdir, ranks):
    plans = {model: [plan_for(model, gt, detections(gt, defects)) for defects in PLANS] for model in MODELS}
    plans_path, out_path = workdir / "plans.json", workdir / "out.json"
    workdir.mkdir(parents=True)
    plans_path.write_text(json.dumps(plans))
    command, path = h.recorded_run("faster")
    command = [command[0], str(known_detections.__file__), str(plans_path), str(out_path)]
    job = h.run("faster", workdir, ARGS, env={**h.channel_env(data), **path}, ranks=ranks, timeout=300,
                command=command)
    assert job.returncode == 0, job.explain()
    return json.loads(out_path.read_text()), job


@pytest.fixture(scope="module", params=[1, pytest.param(2, marks=pytest.mark.mpi)], ids=["1rank", "2ranks"])
def validated(request, val_data, module_tmp):
    if request.param > 1:
        request.getfixturevalue("needs_horovod")
    data, gt = val_data
    out, job = validate_known(data, gt, module_tmp("validated") / "run", request.param)
    return request.param, out, job


@pytest.mark.parametrize("model", MODELS)
def test_ground_truth_detections_score_1(validated, model):
    _, out, job = validated
    perfect = out[model][0]
    assert perfect["val_bbox_map"] == pytest.approx(1.0, abs=1e-12), job.stdout  # a mean of 1.0s: not always 1.0
    if model == "mask":
        assert perfect["val_segm_map"] == pytest.approx(1.0, abs=1e-12), job.stdout


@pytest.mark.parametrize("model", MODELS)
def test_defective_detections_score_what_cocoeval_gives(validated, expected, model):
    _, out, job = validated
    for result, (bbox, segm, _) in zip(out[model], expected[model]):  # ground truth, defective
        assert result["val_bbox_map"] == pytest.approx(bbox, rel=1e-12, abs=1e-12), job.stdout
        if segm is not None:
            assert result["val_segm_map"] == pytest.approx(segm, rel=1e-12, abs=1e-12), job.stdout
        assert result["val_images"] == NUM_VAL


@pytest.mark.parametrize("model", MODELS)
def test_each_image_is_predicted_once_by_one_rank(validated, model):
    ranks, out, _ = validated
    served = out["served"][model]
    assert len(served) == ranks
    everything = sorted(tuple(pair) for part in served for pair in part)
    assert everything == [(plan, image) for plan in range(len(PLANS)) for image in range(NUM_VAL)]
    if ranks == 2:
        assert all(served), served  # both ranks predicted some


@pytest.mark.parametrize("model", MODELS)
def test_no_detection_at_all_scores_0(validated, model):
    """An untrained network may detect nothing above the score threshold: mAP 0, not a failed validation."""
    _, out, job = validated
    nothing = out[model][PLANS.index(NOTHING)]
    assert {name: nothing[name] for name in nothing if name.endswith("_map")} == \
        {"val_bbox_map": 0.0, **({"val_segm_map": 0.0} if model == "mask" else {})}, job.stdout


@pytest.mark.parametrize("model", MODELS)
def test_each_class_scores_what_cocoeval_gives_for_it_alone(validated, val_data, expected, model):
    _, out, job = validated
    _, gt = val_data
    objects_by_hand = [sum(1 for a in gt["annotations"] if a["category_id"] == cid) for cid in CATEGORY_IDS]
    assert all(objects_by_hand), objects_by_hand
    iou_types = ("bbox", "segm") if model == "mask" else ("bbox",)
    for result, (_, _, per_category) in zip(out[model], expected[model]):  # ground truth, defective
        assert [(e["class"], e["category_id"], e["val_objects"]) for e in result["class_ap"]] == \
            list(zip(CLASSES, CATEGORY_IDS, objects_by_hand))
        for entry in result["class_ap"]:
            for iou_type, answer in zip(iou_types, per_category[entry["category_id"]]):
                assert entry[f"{iou_type}_ap"] == pytest.approx(answer, rel=1e-12, abs=1e-12), (entry, job.stdout)
    nothing = out[model][PLANS.index(NOTHING)]["class_ap"]
    assert [[e[f"{iou_type}_ap"] for iou_type in iou_types] for e in nothing] == [[0.0] * len(iou_types)] * 3
